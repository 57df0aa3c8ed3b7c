"""Fault injection: a killed worker, a killed search, Ctrl-C. Each costs a small real search.

Every process killed here is one whose PID the test started or read itself.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from hpsearch.cli import main
from hpsearch.experiment.files import read_outcomes
from hpsearch.experiment.layout import HISTORY_FILE, SUMMARY_FILE, TRAIN_RUNS_DIR

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

LOOPS = Path(__file__).resolve().parents[1] / "loops.py"


def _spec(folder: Path, name: str, **changes) -> Path:
    spec = {
        "name": name,
        "trainable": f"{LOOPS}:quadratic",
        "metric": "loss",
        "mode": "min",
        "num_samples": 4,
        "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}, "epochs": 4, "sleep_s": 1.0},
        "searcher": {"type": "optuna", "seed": 0},
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.5}},
        "resources": {"driver_cpus": 0.1, "max_concurrent_trials": 2},
        "storage_path": str(folder / "results"),
        **changes,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _history(exp_dir: Path, trial_id: str) -> list[dict]:
    path = exp_dir / TRAIN_RUNS_DIR / trial_id / HISTORY_FILE
    return [json.loads(line) for line in path.read_text().splitlines()]


def _outcomes(exp_dir: Path) -> dict[str, str]:
    return read_outcomes(exp_dir)


def _persisted_ended(exp_dir: Path) -> set[str]:
    """Trial ids that Tune's experiment state, as saved in the folder, marks as ended."""
    ended: set[str] = set()
    for state_file in exp_dir.glob("experiment_state-*.json"):
        try:
            trials = json.loads(state_file.read_text())["trial_data"]
        except (ValueError, KeyError, OSError):
            continue  # being written
        for trial_json, _ in trials:
            trial = json.loads(trial_json)
            if trial.get("status") in ("TERMINATED", "ERROR"):
                ended.add(trial["trial_id"])
    return ended


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.3)


def _descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _end_leftovers(processes: list) -> list[str]:
    """Processes (ours, by PID) still alive a few seconds on; they are killed so the next test starts clean."""
    import psutil

    psutil.wait_procs(processes, timeout=3)  # those that end by themselves, as soon as they have
    alive = [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    names = [f"{p.pid}:{p.name()}" for p in alive]
    for p in alive:
        p.kill()
    return names


def test_a_killed_worker_restarts_from_its_checkpoint_and_reports_every_epoch_once(ray_cluster, tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    spec = _spec(
        tmp_path,
        "killed-worker",
        trainable=f"{LOOPS}:killable",
        num_samples=1,
        search_space={"epochs": 4, "sleep_s": 1.0, "pid_dir": str(pid_dir)},  # killed after 2: 2 s to spare
        searcher={"type": "random"},
        scaling={"num_workers": 2, "resources_per_worker": {"CPU": 0.45}},
        failure={"worker_retries": 1},
    )
    exp_dir = tmp_path / "results" / "killed-worker"
    killed: list[int] = []

    def kill_rank1_after_two_epochs() -> None:
        def two_epochs_reported() -> bool:
            runs = list((exp_dir / TRAIN_RUNS_DIR).glob(f"*/{HISTORY_FILE}"))
            return bool(runs) and len(runs[0].read_text().splitlines()) >= 2

        _wait_for(two_epochs_reported, 120, "two reported epochs")
        pid = int((pid_dir / "rank1.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    killer = threading.Thread(target=kill_rank1_after_two_epochs, daemon=True)
    killer.start()
    assert main(["run", str(spec)]) == 0
    killer.join(timeout=5)
    assert killed, "the worker was never killed"

    summary = json.loads((exp_dir / SUMMARY_FILE).read_text())
    [trial] = summary["trials"]
    assert trial["status"] == "finished"
    history = _history(exp_dir, trial["trial_id"])
    assert [r["epoch"] for r in history] == [1, 2, 3, 4]  # every epoch, none twice
    assert history[-1]["started_at"] > 1  # the restarted workers resumed from a checkpoint
    assert int((pid_dir / "rank1.pid").read_text()) != killed[0]  # rank 1 is a new process


def _alive(proc) -> bool:
    """Whether a psutil process still runs (is_running() also checks the start time: a reused PID is not it)."""
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.full
def test_ctrl_c_then_a_killed_resume_then_resume_again_runs_every_trial_once_and_leaves_nothing(tmp_path):
    """One search interrupted twice, as users interrupt them (one search for both, to spare the suite ~100 s).

    1. Ctrl-C of `hpsearch run` after the first report: it stops within seconds (exit 130, the resume
       hint printed) and leaves no Ray process behind.
    2. SIGKILL of the `hpsearch resume` that continues it, once a trial it ran has ended in Tune's saved
       state. Ray 2.60's two agents outlive a killed driver.
    3. A second `hpsearch resume`: it first ends, by PID, the processes the killed run left (the
       recorded ones), keeps every trial finished before the kill (not run again), counts the whole
       search, and its own Ray, ended normally, leaves nothing.
    """
    import contextlib

    import psutil

    from hpsearch.runtime.nodes import session

    # Two trials, one at a time (each nested trial costs ~12 s of this machine): the Ctrl-C lands in the first,
    # the kill once the resume has run it to its end, and the last resume runs the other.
    spec = _spec(
        tmp_path,
        "interrupted",
        num_samples=2,
        search_space={"x": {"type": "float", "low": 0.0, "high": 1.0}, "epochs": 3, "sleep_s": 1.0},
        resources={"driver_cpus": 0.1, "max_concurrent_trials": 1},
    )
    exp_dir = tmp_path / "results" / "interrupted"

    # 1. Ctrl-C
    run = subprocess.Popen(
        [sys.executable, "-m", "hpsearch", "run", str(spec)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for(lambda: any((exp_dir / TRAIN_RUNS_DIR).glob(f"*/{HISTORY_FILE}")), 240, "a first report")
        processes = _descendants(run.pid)
        sent = time.monotonic()
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
        stopped_after = time.monotonic() - sent
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err[-3000:]
    assert stopped_after < 30, f"took {stopped_after:.1f} s to stop"
    assert "hpsearch resume" in out
    assert _end_leftovers(processes) == []  # no Ray process of that run left behind

    # 2. SIGKILL of the resume, once one of its trials has ended in Tune's saved state (saved every 1 s;
    # a trial that ends within that second of a kill may run again, as the README says).
    ended_at_ctrl_c = _persisted_ended(exp_dir)
    killed = subprocess.Popen(
        [sys.executable, "-m", "hpsearch", "resume", str(exp_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    processes = []
    try:
        _wait_for(lambda: _persisted_ended(exp_dir) - ended_at_ctrl_c, 240, "a trial of the resume in the saved state")
        before = _outcomes(exp_dir)
        persisted = _persisted_ended(exp_dir)
        finished_before = {t: _history(exp_dir, t) for t, s in before.items() if s == "finished" and t in persisted}
        processes = _descendants(killed.pid)  # every process of the resume's Ray, mid-search
        recorded = session.read(exp_dir)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
    finally:
        if killed.poll() is None:
            killed.kill()
    try:
        assert recorded is not None and recorded.driver.pid == killed.pid
        time.sleep(5)  # Ray's own processes die with the driver within a second or so; its agents never do
        left = [p for p in processes if _alive(p)]
        # Those hpsearch must end: the recorded ones. A worker that was starting at the kill is not recorded
        # (it came after ray.init) and ends by itself, once it cannot reach its raylet.
        recorded_pids = {p.pid for p in recorded.processes}
        to_end = [p for p in left if p.pid in recorded_pids]
        named = ", ".join(f"{p.name()} {p.pid}" for p in to_end)
        print(
            f"trials ended before the kill: {len(before)}; {len(processes)} processes under the killed resume; "
            f"still running 5 s after the SIGKILL: {left}"
        )

        # 3. Resume again
        resumed = subprocess.run(
            [sys.executable, "-m", "hpsearch", "resume", str(exp_dir)], capture_output=True, text=True, timeout=400
        )
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert [p for p in processes if _alive(p)] == []  # nothing of the killed run is left
        line = f"hpsearch: ended {len(to_end)} process(es) left by the killed run of {recorded.session_name} ({named})"
        assert (line in resumed.stderr) == bool(to_end), resumed.stderr[-3000:]

        summary = json.loads((exp_dir / SUMMARY_FILE).read_text())
        assert len(summary["trials"]) == 2  # what the spec asked for
        assert summary["counts"] == {"finished": 2, "stopped": 0, "errored": 0}
        assert not summary["interrupted"]
        assert finished_before, "no trial had ended before the kill"
        for trial_id, history in finished_before.items():
            assert _history(exp_dir, trial_id) == history, f"{trial_id} ran again after resume"
        print(f"after resume: {summary['counts']}")

        # The resumed run counts the whole search: its first status line, at once, the trials that had
        # ended; then each trial that runs again counts once, when it ends.
        statuses = [line.split("] ", 1)[1] for line in resumed.stderr.splitlines() if "] status   " in line]
        first = re.fullmatch(
            r"status   (\d)/2 done \(0 stopped early, 0 errored; (\d) ended before the resume\), 0 running, "
            r"\d pending \| best loss=\S+ \(\w+\)",
            statuses[0],
        )
        assert first and first[1] == first[2], resumed.stderr[-3000:]
        restored = int(first[1])
        assert restored >= len(finished_before)
        ran_again = [line for line in resumed.stderr.splitlines() if "] finished " in line]
        assert restored + len(ran_again) == 2, resumed.stderr[-3000:]  # each trial counted once
        done = [int(line.split()[1].split("/")[0]) for line in statuses]
        assert done == sorted(done) and done[-1] <= 2

        own = session.read(exp_dir)  # the last resume's own Ray, recorded when it started
        assert own is not None and own.session_name != recorded.session_name and own.processes

        def own_left() -> list[session.SessionProcess]:
            running = []
            for recorded_process in own.processes:
                with contextlib.suppress(psutil.Error):
                    proc = psutil.Process(recorded_process.pid)
                    if abs(proc.create_time() - recorded_process.create_time) < 0.05 and _alive(proc):
                        running.append(recorded_process)
            return running

        _wait_for(lambda: not own_left(), 15, "the processes of the last resume's own Ray to end after it exited")
    finally:
        for proc in processes:  # whatever the outcome, no process of this test outlives it
            if _alive(proc):
                proc.kill()
