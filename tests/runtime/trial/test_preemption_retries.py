"""The trial driver's side of a drained node, without a cluster: the counting rule Ray Train is given, and the
drain's reason added to the notice after the nested run.

The rule is checked through Ray Train's own failure policy, fed the errors its controller raises: a
``PreemptionError`` at a drain's deadline, a ``WorkerGroupError`` when the loop raises.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hpsearch.experiment import files
from hpsearch.spec import FailureSettings


def _failure_config(monkeypatch: pytest.MonkeyPatch, settings: FailureSettings):
    from ray.train import UserCallback

    from hpsearch.runtime.trial import driver

    monkeypatch.setenv("RAY_TRAIN_V2_ENABLED", "1")
    return driver._run_config("run", "/tmp/s", UserCallback(), settings, {}).failure_config


def test_preemptions_spend_their_own_bound_and_never_the_worker_retries(monkeypatch) -> None:
    from ray.train.v2._internal.execution.failure_handling.default import DefaultFailurePolicy
    from ray.train.v2._internal.execution.failure_handling.failure_policy import FailureDecision
    from ray.train.v2.api.exceptions import PreemptionError, WorkerGroupError
    from ray.train.v2.api.preemption import PreemptionInfo

    from hpsearch.runtime.internals import train_controller

    monkeypatch.setattr(train_controller, "_VETO", None)  # hpsearch's veto of repeats: another test's, if installed
    assert _failure_config(monkeypatch, FailureSettings()).max_preemption_failures == 10  # not worker_retries' 1
    config = _failure_config(monkeypatch, FailureSettings(worker_retries=1, trial_retries=0, preemption_retries=3))
    assert (config.max_failures, config.max_preemption_failures) == (1, 3)

    policy = DefaultFailurePolicy(config)
    drained = PreemptionError(PreemptionInfo(deadline_ms=None, preempted_node_to_ranks={"n2": [1]}), True)
    failed = WorkerGroupError("rank 1 raised", {1: ValueError("boom")})
    decisions = [policy.make_decision(drained) for _ in range(3)]
    decisions.append(policy.make_decision(failed))  # three drains spent nothing of worker_retries: 1 left
    decisions.append(policy.make_decision(drained))  # the fourth drain: past preemption_retries
    decisions.append(policy.make_decision(failed))  # the second failure: past worker_retries
    retry, give_up = FailureDecision.RETRY, FailureDecision.RAISE
    assert decisions == [retry, retry, retry, retry, give_up, give_up]


@pytest.mark.parametrize("value", [-1, 1001, 1.5, "many"])
def test_preemption_retries_is_a_count_up_to_a_thousand(value) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="preemption_retries"):
        FailureSettings(preemption_retries=value)


def _noticed(trial: Path, node_ids: list[str]) -> Path:
    _, folder = files.claim_attempt(trial, group_id="g1", world_size=2, run_name=trial.name)
    nodes = [{"node_id": n, "host": "", "ranks": [1]} for n in node_ids]
    files.append_notice(folder, deadline=None, nodes=nodes, epoch=2, report=2, saved_epoch=2, forced=True)
    return folder


def test_after_its_run_the_driver_adds_the_reason_of_each_drained_node_ray_shows(monkeypatch, tmp_path) -> None:
    import ray

    from hpsearch.runtime.trial import driver

    trial = tmp_path / "t1"
    folder = _noticed(trial, ["gone", "still-draining"])
    monkeypatch.setattr(
        ray,
        "nodes",
        lambda: [
            {"NodeID": "gone", "Alive": False, "DeathReasonMessage": "spot reclaim"},
            {"NodeID": "still-draining", "Alive": True, "DeathReasonMessage": ""},  # no reason until it is gone
        ],
    )
    driver._record_drain_reasons(str(trial))
    assert files.read_preemptions(trial)[0].reason == "spot reclaim"
    assert files.missing_reasons(trial) == {folder: ["still-draining"]}  # looked up again after the next run

    monkeypatch.setattr(ray, "nodes", lambda: 1 / 0)  # Ray cannot be asked: the trial goes on as it would
    driver._record_drain_reasons(str(trial))
