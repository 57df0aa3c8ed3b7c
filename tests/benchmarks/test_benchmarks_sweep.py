"""The pure helpers of ``benchmarks/sweep.py`` and ``benchmarks/_common.py`` (no Ray started)."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from benchmarks import _common as common
from benchmarks import sweep


@pytest.mark.parametrize(
    ("cpus", "driver_cpus", "expected"),
    [
        (2, 0.1, 2),  # hpsearch's quick-search sizing: 0.1 + 2 x 0.45 = 1.0 CPU per trial
        (2, 1.0, 1),  # Ray's 1-CPU driver: 1.9 CPUs per trial
        (16, 1.0, 8),
        (0.5, 0.1, 0),
    ],
)
def test_trials_that_fit_counts_whole_trials(cpus, driver_cpus, expected):
    assert sweep.trials_that_fit(cpus, driver_cpus) == expected


def test_utilisation_is_training_over_slot_time():
    assert sweep.utilisation(60.0, 40.0, 2) == pytest.approx(0.75)
    assert sweep.utilisation(0.0, 86.0, 1) == 0.0
    assert sweep.utilisation(10.0, 0.0, 2) == 0.0


def test_stall_check_looks_at_the_latest_report(tmp_path):
    check = sweep.stall_check(tmp_path, stall_s=60)
    assert check() is None  # nothing reported yet, but the search only just started
    log = tmp_path / "trial.jsonl"
    log.write_text("{}\n")
    assert check() is None
    old = time.time() - 90
    os.utime(log, (old, old))
    assert check() == "no trial reported for 90 s"


def test_interrupt_when_signals_this_process_once_the_check_says_why():
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda sig, frame: received.append(sig))
    try:
        with common.interrupt_when(lambda: "enough", every_s=0.01) as verdict:
            deadline = time.monotonic() + 5
            while not received and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert received == [signal.SIGUSR1]
    assert verdict["reason"] == "enough"


def test_interrupt_when_stays_quiet_while_the_check_passes():
    with common.interrupt_when(lambda: None, every_s=0.01) as verdict:
        time.sleep(0.05)
    assert verdict == {}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_session_processes_finds_this_process():
    assert os.getpid() in common.session_processes(os.getsid(0))


def test_print_table_aligns_columns(capsys):
    common.print_table(["way", "wall s"], [["hpsearch", "49.8"], ["default", "186.2"]])
    assert capsys.readouterr().out.splitlines() == [
        "way       wall s",
        "hpsearch    49.8",
        "default    186.2",
    ]
