"""A trial's drain notices read back with the restart that followed, from the files each process writes.

The trial's records are written with hpsearch's own writers at fixed times: the attempts (as the ranks claim
them), every report in the history (as the Train controller appends it, with its checkpoint), the notice (as
rank 0 records it in ``hpsearch.train.report``) and the drain's reason (as the trial driver adds it).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hpsearch.experiment import files
from hpsearch.experiment.failures import Failure
from hpsearch.experiment.worker_ranks import RETURNED

T0 = 1_796_000_000.0


def _attempt(trial: Path, group: str, at: float, *, reports: int, ended: str | None = None) -> Path:
    """One start of the worker group (2 ranks) at ``at``, each rank's record as it stands."""
    _, folder = files.claim_attempt(trial, group_id=group, world_size=2, run_name=trial.name, started_at=at)
    for rank in (0, 1):
        files.write_rank_progress(folder, rank, {"started_at": at, "reports": reports, "ended": ended})
    return folder


def _report(trial: Path, epoch: int, at: float, *, saved: bool) -> None:
    path = f"{trial}/checkpoint_{epoch:06d}" if saved else None
    files.append_history(trial, {"time": at, "epoch": epoch, "loss": 1.0 / epoch}, checkpoint_path=path)


def _notice(monkeypatch: pytest.MonkeyPatch, folder: Path, at: float, *, epoch: int, report: int) -> None:
    with monkeypatch.context() as m:
        m.setattr(time, "time", lambda: at)
        files.append_notice(
            folder,
            deadline=at + 30,
            nodes=[{"node_id": "n2", "host": "spot-7", "ranks": [1]}],
            epoch=epoch,
            report=report,
            saved_epoch=epoch,
            forced=True,
        )


def drained_trial(monkeypatch: pytest.MonkeyPatch, trial: Path) -> None:
    """Epochs 1-5 in attempt 1, checkpoints at 1 and at 3 (the notice's, read at epoch 3); the node goes at the
    deadline, attempt 2 continues from epoch 3's checkpoint and reports epochs 4 and 5 again."""
    first = _attempt(trial, "g1", T0, reports=5)
    for epoch, saved in ((1, True), (2, False), (3, True), (4, False), (5, False)):
        _report(trial, epoch, T0 + 10 * epoch, saved=saved)
    _notice(monkeypatch, first, T0 + 29, epoch=3, report=3)
    _attempt(trial, "g2", T0 + 70, reports=2, ended=RETURNED)
    for epoch in (4, 5):
        _report(trial, epoch, T0 + 80 + epoch, saved=epoch == 5)


def test_a_drained_attempt_restarted_from_the_notices_checkpoint_and_lost_two_reports(monkeypatch, tmp_path) -> None:
    trial = tmp_path / "t1"
    drained_trial(monkeypatch, trial)
    [p] = files.read_preemptions(trial)
    assert (p.trial_id, p.attempt, p.hosts, p.node_ids, p.ranks) == ("t1", 1, ("spot-7",), ("n2",), (1,))
    assert (p.noticed_at, p.deadline, p.warning_s) == (T0 + 29, T0 + 59, 30)
    assert (p.epoch, p.report, p.saved_epoch, p.forced) == (3, 3, 3, True)
    assert (p.restarted, p.restart_attempt, p.restored_epoch, p.reports_lost) == (True, 2, 3, 2)
    assert p.reason == ""  # Ray shows the reason once the node is gone: the driver adds it then


def test_the_drivers_reason_joins_the_notice_and_is_asked_for_only_until_recorded(monkeypatch, tmp_path) -> None:
    trial = tmp_path / "t1"
    drained_trial(monkeypatch, trial)
    first = files.logs_dir(trial) / "attempt-1"
    assert files.missing_reasons(trial) == {first: ["n2"]}
    files.append_reason(first, "n2", "spot instance reclaimed")
    assert files.missing_reasons(trial) == {}
    assert files.read_preemptions(trial)[0].reason == "spot instance reclaimed"


def test_a_run_that_finished_before_the_deadline_was_not_restarted(monkeypatch, tmp_path) -> None:
    trial = tmp_path / "t1"
    folder = _attempt(trial, "g1", T0, reports=3, ended=RETURNED)  # every rank's loop returned
    _report(trial, 3, T0 + 30, saved=True)
    _notice(monkeypatch, folder, T0 + 25, epoch=3, report=3)
    _attempt(trial, "g2", T0 + 100, reports=0)  # a later start (a Tune retry, a resume): not the drain's
    [p] = files.read_preemptions(trial)
    assert not p.restarted and p.restart_attempt is None and p.reports_lost is None


def test_a_loop_that_failed_while_it_drained_restarted_as_that_failure(monkeypatch, tmp_path) -> None:
    trial = tmp_path / "t1"
    folder = _attempt(trial, "g1", T0, reports=3)
    _notice(monkeypatch, folder, T0 + 25, epoch=3, report=3)
    with monkeypatch.context() as m:
        m.setattr(time, "time", lambda: T0 + 40)
        files.append_failure(trial, Failure(kind="ValueError", message="nan", masked="nan", epoch=4))
    _attempt(trial, "g2", T0 + 60, reports=0)
    assert [p.restarted for p in files.read_preemptions(trial)] == [False]  # counted as a failure, by Ray too


def test_a_trial_no_node_of_which_was_drained_has_no_record(tmp_path) -> None:
    trial = tmp_path / "t1"
    _attempt(trial, "g1", T0, reports=3)
    _attempt(trial, "g2", T0 + 60, reports=3)  # restarted after a worker died: a failure, not a drain
    assert files.read_preemptions(trial) == [] and files.missing_reasons(trial) == {}
