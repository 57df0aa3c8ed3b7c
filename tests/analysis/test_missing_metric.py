"""A metric the loop never reports: the error, the one message for a whole search, and the trainable's parts.

No Ray cluster: the end-to-end search is in tests/train/test_user_loops.py.
"""

from __future__ import annotations

import pickle

import pytest

from hpsearch.analysis import SearchSummary, TrialOutcome
from hpsearch.analysis._missing_metric import missing_metric_message
from hpsearch.errors import MetricNotReportedError
from hpsearch.experiment.tracebacks import short_error

MESSAGE = (
    "the loop did not report the spec's metric 'val_loss'; did you mean 'val_los'? (it reported: loss, val_los, epoch)"
)


def error_txt(error: BaseException) -> str:
    """The end of a Tune error.txt for a trial driver that raised ``error``."""
    return (
        "Failure # 1 (occurred at 2026-01-01_00-00-00)\n"
        "ray::ImplicitFunc.train() (pid=1, ip=127.0.0.1)\n"
        '  File "hpsearch/runtime/trial/trainable.py", line 254, in _run_nested\n'
        "    raise missing from None\n"
        f"{type(error).__module__}.{type(error).__name__}: {error}\n"
    )


def outcome(trial_id: str, status: str = "errored", error: str = "") -> TrialOutcome:
    return TrialOutcome(trial_id, status, {"x": 1}, {}, None, 0, error=error)


def summary(*trials: TrialOutcome, interrupted: bool = False) -> SearchSummary:
    return SearchSummary("exp", "val_loss", "min", 1.0, list(trials), interrupted=interrupted)


MISSING = short_error(error_txt(MetricNotReportedError("val_loss", ["loss", "val_los", "epoch"])))


# ----------------------------------------------------------------------------- the error


def test_the_error_is_one_line_with_the_metric_a_close_name_and_the_keys() -> None:
    err = MetricNotReportedError("val_loss", ["loss", "val_los", "epoch"])
    assert str(err) == MESSAGE
    assert (err.metric, err.reported) == ("val_loss", ("loss", "val_los", "epoch"))
    assert isinstance(err, ValueError)


def test_no_close_name_and_an_empty_report() -> None:
    assert str(MetricNotReportedError("accuracy", ["loss"])) == (
        "the loop did not report the spec's metric 'accuracy' (it reported: loss)"
    )
    assert str(MetricNotReportedError("val_loss", [])).endswith("(it reported: nothing)")


@pytest.mark.parametrize("dumps", ["pickle", "cloudpickle"])
def test_the_error_crosses_processes(dumps: str) -> None:
    """Ray pickles it from the Train controller to the trial driver, and into Tune's error file."""
    err = MetricNotReportedError("val_loss", ["loss", "val_los"])
    if dumps == "pickle":
        back = pickle.loads(pickle.dumps(err))
    else:
        from ray import cloudpickle

        back = cloudpickle.loads(cloudpickle.dumps(err))
    assert type(back) is MetricNotReportedError
    assert str(back) == str(err) and back.reported == err.reported


def test_the_trial_error_line_is_the_error_itself() -> None:
    """What the progress line, hpsearch_trials.jsonl and the summary show for the trial."""
    assert MISSING == f"hpsearch.errors.MetricNotReportedError: {MESSAGE}"


# ----------------------------------------------------------------------------- the one message for the search


def test_every_trial_missing_the_metric_is_one_message() -> None:
    message = missing_metric_message(summary(outcome("t1", error=MISSING), outcome("t2", error=MISSING)))
    assert message == f"every trial failed: {MESSAGE}"


def test_a_single_trial() -> None:
    assert missing_metric_message(summary(outcome("t1", error=MISSING))) == f"the trial failed: {MESSAGE}"


def test_trials_that_reported_different_keys_use_the_first_and_count_the_others() -> None:
    other = short_error(error_txt(MetricNotReportedError("val_loss", ["loss"])))
    message = missing_metric_message(summary(outcome("t1", error=MISSING), outcome("t2", error=other)))
    assert message == f"every trial failed: {MESSAGE} (in trial t1; the 1 other(s) likewise)"


@pytest.mark.parametrize(
    "trials",
    [
        [outcome("t1", error=MISSING), outcome("t2", status="finished")],
        [outcome("t1", error=MISSING), outcome("t2", error="ValueError: x='bad' is not a usable value")],
        [outcome("t1", error=MISSING), outcome("t2", status="stopped")],
        [],
    ],
    ids=["one-finished", "another-error", "one-stopped", "no-trials"],
)
def test_no_message_unless_every_trial_errored_so(trials: list[TrialOutcome]) -> None:
    assert missing_metric_message(summary(*trials)) is None


def test_no_message_for_an_interrupted_search() -> None:
    """Resuming it may run trials that report the metric (after a fix of the loop)."""
    assert missing_metric_message(summary(outcome("t1", error=MISSING), interrupted=True)) is None


# ----------------------------------------------------------------------------- the trainable's parts


@pytest.mark.parametrize(
    ("result", "metric", "found"),
    [
        ({"val_loss": 1.0}, "val_loss", True),
        ({"val_loss": None}, "val_loss", True),  # reported, as Tune checks it: the key is there
        ({"val_los": 1.0}, "val_loss", False),
        ({"val": {"loss": 1.0}}, "val/loss", True),  # Tune flattens nested dicts with '/'
        ({"val": {"acc": 1.0}}, "val/loss", False),
        ({"val": 1.0}, "val/loss", False),
        ({"val/loss": 1.0}, "val/loss", True),
    ],
)
def test_has_metric_as_tune_looks_for_it(result: dict, metric: str, found: bool) -> None:
    from hpsearch.runtime.train.controller import has_metric

    assert has_metric(result, metric) is found


def test_the_worker_loop_keeps_the_arity_and_drops_the_return_value() -> None:
    from hpsearch.runtime.train.worker import worker_loop

    calls: list[tuple] = []

    def with_config(config):
        calls.append(("config", config))
        return {"model": object()}

    def without_config():
        calls.append(("none",))
        return 1

    assert worker_loop(with_config)({"x": 1}) is None
    assert worker_loop(without_config)({"x": 1}) is None  # Ray Train calls a 0-argument loop with nothing
    assert calls == [("config", {"x": 1}), ("none",)]

    def two_args(a, b):  # Ray Train refuses it with its own message: handed over as it is
        pass

    assert worker_loop(two_args) is two_args


def test_reports_on_a_worker_are_made_plain_before_ray_sees_them() -> None:
    """Ray Train refuses a tensor metric in the worker; hpsearch's wrapper converts it first."""
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    from ray.train.v2._internal.execution import train_fn_utils

    from hpsearch.runtime.train.worker import plain_reports

    seen: list[tuple] = []

    class FakeUtils:
        def report(self, metrics, checkpoint=None, **kwargs):
            seen.append((metrics, checkpoint))

    utils = FakeUtils()
    train_fn_utils.set_train_fn_utils(utils)
    try:
        plain_reports()
        plain_reports()  # once per process: not wrapped twice
        utils.report({"loss": torch.tensor(0.5), "n": np.int64(2)}, checkpoint="ckpt")
    finally:
        train_fn_utils.set_train_fn_utils(None)
    assert seen == [({"loss": 0.5, "n": 2}, "ckpt")]
    assert (type(seen[0][0]["loss"]), type(seen[0][0]["n"])) == (float, int)


def test_outside_a_train_worker_nothing_is_wrapped() -> None:
    from hpsearch.runtime.train.worker import plain_reports

    plain_reports()  # no TrainFnUtils in this process: returns without touching anything
