"""No blind retries: a failure that repeats the one before it is not retried again, at either level; a
worker or node that died keeps the whole retry budget. Ray Train's own failure policy and exceptions are
used as its controller uses them; no Ray is started."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest
import ray
from ray.exceptions import ActorDiedError
from ray.train import FailureConfig
from ray.train.v2._internal.execution.failure_handling.default import DefaultFailurePolicy
from ray.train.v2._internal.execution.failure_handling.failure_policy import FailureDecision
from ray.train.v2.api.exceptions import WorkerGroupError

from hpsearch.errors import SpecError
from hpsearch.experiment import files
from hpsearch.experiment.failures import Failure, mask, not_retried_line, same
from hpsearch.runtime import retries
from hpsearch.runtime.internals import train_controller
from hpsearch.runtime.search.outcomes import _own_line


def _failure(kind: str, message: str, epoch: int) -> Failure:
    return Failure(kind, message, mask(message), epoch)


def test_numbers_are_masked_and_a_failure_says_what_and_when() -> None:
    assert mask("loss is nan at step 1234 (lr=3.5e-04, at 0x7f3a2c)") == "loss is nan at step <n> (lr=<n>, at <n>)"
    failure = _failure("ValueError", "bad batch 17 of 40", 2)
    assert failure.describe() == "ValueError: bad batch 17 of 40 at epoch 2"
    assert Failure.from_dict(failure.as_dict()) == failure and Failure.from_dict({"epoch": 1}) is None
    assert not_retried_line(failure) == (
        "failed the same way twice (ValueError: bad batch 17 of 40 at epoch 2); not retried again"
    )


def test_the_same_failure_is_the_same_type_masked_message_and_epoch_never_a_dead_worker() -> None:
    a = _failure("ValueError", "bad batch 17", 2)
    assert same(a, _failure("ValueError", "bad batch 23", 2))
    assert not same(a, _failure("ValueError", "bad batch 17", 3))  # another epoch
    assert not same(a, _failure("KeyError", "bad batch 17", 2))
    assert not same(a, _failure("ValueError", "worse batch 17", 2))
    died = Failure("", "a worker died", "", 2, infra=True)
    assert not same(died, died) and not same(a, None)


def test_the_controller_raises_on_a_repeat_and_records_every_failure(tmp_path: Path) -> None:
    folder = str(tmp_path)
    value_error = [(0, "ValueError", "x=0.9 is bad at step 12", False)]
    assert not retries.judge(folder, "s1", value_error, last_epoch=1)  # the first: Ray may restart it
    assert retries.judge(folder, "s1", [(0, "ValueError", "x=0.9 is bad at step 13", False)], last_epoch=1)
    recorded = files.read_failures(folder)
    assert [(f.kind, f.epoch, f.final) for f in recorded] == [("ValueError", 2, False), ("ValueError", 2, True)]
    assert str(retries.repeated(folder, "s1")) == (
        "failed the same way twice (ValueError: x=0.9 is bad at step 13 at epoch 2); not retried again"
    )
    assert retries.repeated(folder, "s2") is None  # a resume is a new search: the user may have fixed the loop

    # Ray gives up by its own count (worker_retries spent): its error, with the failing rank, stands as it is
    spent = str(tmp_path / "spent")
    assert not retries.judge(spent, "s1", value_error, last_epoch=1, retry=True)
    assert not retries.judge(spent, "s1", value_error, last_epoch=1, retry=False)
    assert retries.repeated(spent, "s1") is None and not files.read_failures(spent)[-1].final

    # a rank that died, twice at the same epoch, keeps the whole budget; so does a worker that died beside a raise
    other = str(tmp_path / "other")
    died = [(0, "ActorDiedError", "The actor died", True), (1, "WorkerHealthCheckFailedError", "unreachable", True)]
    assert not retries.judge(other, "s1", died, last_epoch=1)
    assert not retries.judge(other, "s1", died, last_epoch=1)
    assert not retries.judge(other, "s1", [died[0], (1, "ValueError", "x", False)], last_epoch=1)
    assert all(f.infra for f in files.read_failures(other))
    assert files.read_failures(other)[0].message == "rank 0: ActorDiedError; rank 1: WorkerHealthCheckFailedError"

    # one rank's error and the other ranks' collectives that lost it: the root cause counts, and repeats
    echo = str(tmp_path / "echo")
    ranks = [(0, "RuntimeError", "Connection closed by peer [10.0.0.2]:4412", False), (1, "ValueError", "nan", False)]
    assert not retries.judge(echo, "s1", ranks, last_epoch=None)
    assert retries.judge(echo, "s1", ranks, last_epoch=None)
    assert files.read_failures(echo)[-1].describe() == "ValueError: nan at epoch 1"


def test_ray_trains_failure_policy_is_vetoed_on_a_repeat_and_untouched_for_a_dead_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(DefaultFailurePolicy, "make_decision", DefaultFailurePolicy.make_decision)  # undone after
    monkeypatch.setattr(train_controller, "_VETO_INSTALLED", False)
    assert retries.install(str(tmp_path / "t1"), "s1")
    policy = DefaultFailurePolicy(FailureConfig(max_failures=3))

    def bad() -> WorkerGroupError:  # the loop's own exception per rank, as Ray Train's poll hands it on
        return WorkerGroupError("rank 0 failed", {0: ValueError("bad batch 7")})

    assert policy.make_decision(bad()) == FailureDecision.RETRY
    assert policy.make_decision(bad()) == FailureDecision.RAISE  # the same again: Ray had 2 retries left
    died = DefaultFailurePolicy(FailureConfig(max_failures=2))
    monkeypatch.setattr(
        retries, "_VETO", lambda failures, retry: retries.judge(str(tmp_path / "t2"), "s1", failures, 1, retry=retry)
    )

    def dead() -> WorkerGroupError:
        return WorkerGroupError("rank 1 died", {1: ActorDiedError()})

    assert [died.make_decision(dead()) for _ in range(3)] == [
        FailureDecision.RETRY,
        FailureDecision.RETRY,
        FailureDecision.RAISE,  # Ray's own count: its budget of 2, spent
    ]


def test_tune_retries_a_repeated_trial_no_more_and_its_line_is_the_repeat(tmp_path: Path) -> None:
    folder = str(tmp_path)
    trial = SimpleNamespace(max_failures=3, run_metadata=SimpleNamespace(num_failures=1))
    assert not retries.stop_trial_retries(trial, folder)  # nothing recorded: Tune's own count
    files.append_failure(folder, Failure("ValueError", "nan", "nan", 2, final=True, search="s1"))
    assert retries.stop_trial_retries(trial, folder) and trial.max_failures == 1  # its next failure is its last

    text = "Traceback (most recent call last):\n  ...\nhpsearch.runtime.retries.SameFailureError: " + not_retried_line(
        Failure("ValueError", "nan", "nan", 2)
    )
    assert _own_line("SameFailureError: failed the same way", text) == (
        "failed the same way twice (ValueError: nan at epoch 2); not retried again"
    )


# ----------------------------------------------------------------------------- Ray Train's preemption options


def test_the_nested_runs_failure_config_takes_the_preemption_options_only_when_set(monkeypatch) -> None:
    """failure.preemption_grace_s and relax_collectives_on_preemption reach Ray Train's FailureConfig as given;
    left at Ray's defaults they are not passed at all, so a Ray without them (2.58) builds the same run."""
    from ray.train import UserCallback

    from hpsearch.runtime.trial import driver
    from hpsearch.spec import FailureSettings

    monkeypatch.setenv("RAY_TRAIN_V2_ENABLED", "1")
    plain = driver._run_config("run", "/tmp/s", UserCallback(), FailureSettings(), {}).failure_config
    # preemptions are counted apart, by failure.preemption_retries (10), never against worker_retries (1)
    assert (plain.max_failures, plain.controller_failure_limit, plain.max_preemption_failures) == (1, 2, 10)
    assert FailureSettings().preemption_options() == {}
    chosen = FailureSettings(preemption_grace_s=30, relax_collectives_on_preemption=True)
    assert chosen.preemption_options() == {"preemption_grace_s": 30.0, "relax_collectives_on_preemption": True}
    if "preemption_grace_s" not in inspect.signature(type(plain)).parameters:  # Ray 2.58: refused at preflight
        pytest.skip(f"Ray {ray.__version__}'s FailureConfig has no preemption options (the next test refuses them)")
    config = driver._run_config("run", "/tmp/s", UserCallback(), chosen, {}).failure_config
    assert (config.preemption_grace_s, config.relax_collectives_on_preemption) == (30.0, True)


def test_a_ray_without_the_preemption_options_refuses_a_spec_that_sets_them(monkeypatch) -> None:
    from dataclasses import dataclass

    from ray.train.v2.api import config as train_config

    from hpsearch.runtime.search.preflight import check_preemption_options
    from hpsearch.spec import load_spec

    @dataclass
    class OlderFailureConfig:  # Ray 2.58's, in its names
        max_failures: int = 0
        controller_failure_limit: int = -1
        max_preemption_failures: int = -1

    spec = load_spec(
        {
            "name": "p",
            "trainable": "loops:quadratic",
            "metric": "loss",
            "mode": "min",
            "search_space": {"x": 1},
            "failure": {"preemption_grace_s": 20},
        }
    )
    monkeypatch.setattr(train_config, "FailureConfig", OlderFailureConfig)
    with pytest.raises(SpecError) as refused:
        check_preemption_options(spec)
    [problem] = [str(p) for p in refused.value.problems]
    assert problem.startswith("failure.preemption_grace_s: the installed Ray (") and problem.endswith(
        "has no such option in Ray Train's FailureConfig (Ray 2.60 has it); remove it from the spec, or install "
        "ray==2.60.0"
    )
    check_preemption_options(load_spec({**spec.to_dict(), "failure": {}}))  # nothing set: nothing to refuse


def test_a_worker_lost_while_the_trial_is_paused_for_its_drivers_drain_is_no_failure(tmp_path: Path) -> None:
    """Tune pausing the trial ends its workers, and the controller may see one go first: not a failure. A loop
    that raises meanwhile still is one."""
    from hpsearch.experiment import driver_drains

    driver_drains.write_notice(tmp_path, driver_drains.DriverNotice("n2", "h2", 1000.0, 1020.0, 3, 1))
    died = [(0, "WorkerHealthCheckFailedError", "unreachable", True)]
    assert not retries.judge(str(tmp_path), "s1", died, last_epoch=1)
    assert files.read_failures(tmp_path) == []
    assert not retries.judge(str(tmp_path), "s1", [(0, "ValueError", "x", False)], last_epoch=1)
    assert [f.kind for f in files.read_failures(tmp_path)] == ["ValueError"]
