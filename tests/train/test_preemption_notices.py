"""hpsearch.train.report on a drained node, without Ray: the checkpoint a notice brings, once, and its record.

``ray.train``'s report, context and ``get_preemption_info`` are replaced by what Ray Train V2 gives a loop: the
notice is rank 0's, broadcast to every rank (the same value everywhere), and it stays once it came. The loop
checkpoints every third report (its own cadence), as a loop that checkpoints at epoch ends does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from hpsearch import train as hp
from hpsearch.experiment import files
from hpsearch.experiment.layout import PREEMPTION_FILE


@dataclass(frozen=True)
class _Info:
    """Ray Train's ``PreemptionInfo`` as a loop reads it (its two fields)."""

    deadline_ms: int | None
    preempted_node_to_ranks: dict[str, list[int]]


class _Context:
    def __init__(self, rank: int) -> None:
        self.rank = rank

    def get_world_rank(self) -> int:
        return self.rank

    def get_world_size(self) -> int:
        return 2


class _RayTrain:
    """One rank's ``ray.train`` over a run: the notice each report's ``get_preemption_info()`` returns, in turn."""

    def __init__(self, notices: list[_Info | None]) -> None:
        self.notices, self.asked, self.saved = notices, 0, []

    def get_preemption_info(self) -> _Info | None:
        self.asked += 1
        return self.notices[min(self.asked, len(self.notices)) - 1]

    def report(self, metrics: dict[str, Any], checkpoint: Any = None) -> None:
        self.saved.append(checkpoint is not None)


DRAIN = _Info(deadline_ms=1_796_000_030_000, preempted_node_to_ranks={"n2": [1]})
#: A second node drained while the first still drains: Ray merges the two into one new notice.
BOTH = _Info(deadline_ms=1_796_000_030_000, preempted_node_to_ranks={"n2": [1], "n3": [0]})


def _run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, notices: list[_Info | None], rank: int) -> _RayTrain:
    """Nine reports of one rank, saving at every third by the loop's own cadence; what ``ray.train`` saw."""
    import ray
    import ray.train

    fake = _RayTrain(notices)
    monkeypatch.setattr(hp, "_NOTICES", hp._Notices())  # a new worker process
    monkeypatch.setattr(ray.train, "get_preemption_info", fake.get_preemption_info, raising=False)
    monkeypatch.setattr(ray.train, "report", fake.report)
    monkeypatch.setattr(ray.train, "get_context", lambda: _Context(rank))
    monkeypatch.setattr(ray, "nodes", lambda: [{"NodeID": "n2", "NodeManagerHostname": "spot-7"}])
    files.set_current_attempt(tmp_path)  # as hpsearch's worker wrapper says where the loop runs
    try:
        model = torch.nn.Linear(2, 1)
        for report in range(1, 10):
            hp.report({"loss": 1.0 / report}, epoch=report, model=model, checkpoint=report % 3 == 0)
    finally:
        files.set_current_attempt(None)
    return fake


def _notices(folder: Path) -> list[dict[str, Any]]:
    path = folder / PREEMPTION_FILE
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_notice_saves_a_checkpoint_at_the_next_report_once_and_rank_0_records_it(monkeypatch, tmp_path) -> None:
    # the notice comes at report 4 and stays; a second node is drained at report 8
    fake = _run(monkeypatch, tmp_path, [None, None, None, DRAIN, DRAIN, DRAIN, DRAIN, BOTH, BOTH], rank=0)
    assert fake.asked == 9  # every report asked: the barrier is met as often as the report's
    # the loop's cadence saves at 3, 6, 9; the notice at 4 (once, not at 5), the second node's at 8
    assert [i for i, saved in enumerate(fake.saved, start=1) if saved] == [3, 4, 6, 8, 9]
    first, second = _notices(tmp_path)
    assert first["kind"] == "notice" and first["deadline"] == 1_796_000_030.0
    assert first["nodes"] == [{"node_id": "n2", "host": "spot-7", "ranks": [1]}]
    assert (first["epoch"], first["report"], first["saved_epoch"], first["forced"]) == (4, 4, 4, True)
    assert [n["node_id"] for n in second["nodes"]] == ["n2", "n3"] and second["report"] == 8


def test_a_notice_at_a_report_the_loop_saves_anyway_adds_no_checkpoint(monkeypatch, tmp_path) -> None:
    fake = _run(monkeypatch, tmp_path, [None, None, DRAIN], rank=0)
    assert [i for i, saved in enumerate(fake.saved, start=1) if saved] == [3, 6, 9]  # the cadence, nothing more
    [notice] = _notices(tmp_path)
    assert (notice["report"], notice["saved_epoch"], notice["forced"]) == (3, 3, False)


def test_every_rank_asks_at_every_report_and_only_rank_0_records_the_notice(monkeypatch, tmp_path) -> None:
    # rank 1 meets the barrier at every report; it reports no checkpoint of its own (rank 0 writes the files)
    fake = _run(monkeypatch, tmp_path, [None, None, None, DRAIN], rank=1)
    assert fake.asked == 9 and fake.saved == [False] * 9
    assert _notices(tmp_path) == []


def test_on_a_ray_without_notices_the_loop_checkpoints_at_its_own_cadence(monkeypatch, tmp_path) -> None:
    import ray.train

    monkeypatch.delattr(ray.train, "get_preemption_info", raising=False)  # Ray Train before the call existed
    assert not hp.preemption_notices()
    fake = _RayTrain([])
    monkeypatch.setattr(hp, "_NOTICES", hp._Notices())
    monkeypatch.setattr(ray.train, "report", fake.report)
    monkeypatch.setattr(ray.train, "get_context", lambda: _Context(0))
    model = torch.nn.Linear(2, 1)
    for report in range(1, 7):
        hp.report({"loss": 1.0}, epoch=report, model=model, checkpoint=report % 3 == 0)
    assert fake.asked == 0 and [i for i, saved in enumerate(fake.saved, start=1) if saved] == [3, 6]


def _driver_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, rank: int, notice_at: int) -> tuple[_RayTrain, Path]:
    """Nine reports of one rank whose trial driver's node is drained before report ``notice_at``."""
    import ray
    import ray.train

    from hpsearch.experiment import driver_drains

    trial, attempt = tmp_path / "trial", tmp_path / "trial" / "logs" / "attempt-1"
    attempt.mkdir(parents=True)
    fake = _RayTrain([None])
    monkeypatch.setattr(hp, "_NOTICES", hp._Notices())
    monkeypatch.setattr(ray.train, "get_preemption_info", fake.get_preemption_info, raising=False)
    monkeypatch.setattr(ray.train, "report", fake.report)
    monkeypatch.setattr(ray.train, "get_context", lambda: _Context(rank))
    files.set_current_attempt(attempt)
    driver_drains.watch_folder(trial)  # as hpsearch's worker wrapper says, with drivers on any node
    notice = driver_drains.DriverNotice("n9", "spot-9", noticed_at=1_796_000_000.0, deadline=1_796_000_020.0)
    try:
        model = torch.nn.Linear(2, 1)
        for report in range(1, 10):
            if report == notice_at:
                driver_drains.write_notice(trial, notice)
            hp.report({"loss": 1.0}, epoch=report, model=model, checkpoint=report % 3 == 0)
    finally:
        files.set_current_attempt(None)
        driver_drains.watch_folder(None)
    return fake, trial


def test_a_drain_of_the_drivers_node_saves_at_the_next_report_and_says_so_before_that_report_leaves(
    monkeypatch, tmp_path
) -> None:
    from hpsearch.experiment import driver_drains

    fake, trial = _driver_run(monkeypatch, tmp_path, rank=0, notice_at=5)
    assert [i for i, saved in enumerate(fake.saved, start=1) if saved] == [3, 5, 6, 9]  # the notice's at 5, once
    notice = driver_drains.read_notice(trial)
    assert notice is not None and (notice.saved_report, notice.saved_epoch) == (5, 5)  # for the scheduler's pause
    [record] = _notices(trial / "logs" / "attempt-1")
    assert record["nodes"] == [{"node_id": "n9", "host": "spot-9", "ranks": [], "driver": True}]
    assert (record["report"], record["saved_epoch"], record["forced"], record["deadline"]) == (
        5,
        5,
        True,
        1_796_000_020.0,
    )
    [read] = files.read_preemptions(trial)
    assert read.driver and read.hosts == ("spot-9",) and read.ranks == () and read.saved_epoch == 5


def test_only_rank_0_reads_the_drivers_notice_when_the_model_is_not_sharded(monkeypatch, tmp_path) -> None:
    from hpsearch.experiment import driver_drains

    fake, trial = _driver_run(monkeypatch, tmp_path, rank=1, notice_at=5)
    assert fake.saved == [False] * 9  # rank 1 saves nothing of its own, and marks nothing
    notice = driver_drains.read_notice(trial)
    assert notice is not None and notice.saved_report is None
    assert _notices(trial / "logs" / "attempt-1") == []


def test_without_a_watching_driver_the_loop_never_reads_a_notice(monkeypatch, tmp_path) -> None:
    from hpsearch.experiment import driver_drains

    driver_drains.write_notice(tmp_path, driver_drains.DriverNotice("n9", "spot-9", 1.0, 21.0))
    fake = _run(monkeypatch, tmp_path, [None], rank=0)  # drivers on the head: no folder is watched
    assert [i for i, saved in enumerate(fake.saved, start=1) if saved] == [3, 6, 9]
