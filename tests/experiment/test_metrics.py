"""A report's metric is read as Ray Tune reads it: nested dicts flattened with '/', in every view."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import pytest
from fake_experiment import FakeTrial, spec_dict, write_experiment

from hpsearch import messages
from hpsearch.experiment.metrics import flat_metrics, has_metric, report_epoch, report_step, report_value

REPORTS = [
    {"val_loss": 0.5, "epoch": 1},
    {"val": {"loss": 0.5, "acc": 0.9}, "epoch": 2},
    {"val": {"loss": 0.5, "deep": {"er": 1}}, "lr": [0.1, 0.2]},
    {"val/loss": 0.4, "val": {"loss": 0.3}},  # both: the nested one wins, as in Tune
    {"val": {}, "train": {"x": None}},  # an empty dict disappears; None is kept
    {"a": {1: "int key"}, "b": {"c": {"d": {"e": 5}}}},
]


@pytest.mark.parametrize("report", REPORTS)
def test_flat_metrics_is_tunes_flatten_dict(report: dict[str, Any]) -> None:
    from ray.tune.utils import flatten_dict

    assert flat_metrics(report) == flatten_dict(report, delimiter="/")
    assert list(flat_metrics(report)) == list(flatten_dict(report, delimiter="/"))


@pytest.mark.parametrize(
    ("report", "metric", "value", "found"),
    [
        ({"val": {"loss": 0.25}}, "val/loss", 0.25, True),
        ({"val/loss": 0.25}, "val/loss", 0.25, True),
        ({"val": {"loss/x": 0.25}}, "val/loss/x", 0.25, True),
        ({"val/loss": 0.4, "val": {"loss": 0.3}}, "val/loss", 0.3, True),
        ({"val": {"acc": 1.0}}, "val/loss", None, False),
        ({"val": 1.0}, "val/loss", None, False),
        ({"val_loss": None}, "val_loss", None, True),  # reported as None: there, as Tune checks it
    ],
)
def test_report_value_and_has_metric_look_a_metric_up_as_tune_does(
    report: dict[str, Any], metric: str, value: Any, found: bool
) -> None:
    assert report_value(report, metric) == value
    assert has_metric(report, metric) is found


@pytest.mark.parametrize(
    ("report", "epoch", "step"),
    [
        ({"epoch": 3, "training_iteration": 5}, 3, 3),
        ({"epoch": 3.0}, 3, 3),
        ({"epoch": 2.5, "training_iteration": 5}, 2.5, 5),  # a fractional epoch: shown as it is, counted by Tune
        ({"training_iteration": 4}, 4, 4),
        ({"epoch": float("nan"), "training_iteration": 4}, None, 4),
        ({"epoch": "three"}, None, None),
        ({}, None, None),
    ],
)
def test_the_epoch_of_a_report(report: dict[str, Any], epoch: float | None, step: int | None) -> None:
    assert report_epoch(report) == epoch
    assert report_step(report) == step


@pytest.mark.parametrize("nested", [True, False], ids=["nested", "slash-named"])
def test_load_results_ranks_a_nested_or_slash_named_metric(tmp_path: Path, nested: bool) -> None:
    """`metric: val/loss` with a loop reporting {"val": {"loss": x}} (or "val/loss"): a best trial, a summary."""
    from hpsearch import load_results
    from hpsearch.experiment.files import read_summary

    def trial(trial_id: str, losses: list[float]) -> FakeTrial:
        values: dict[str, list[Any]] = {"val": [{"loss": v} for v in losses]} if nested else {"val/loss": list(losses)}
        return FakeTrial(trial_id, {"lr": 0.01}, [1.0] * len(losses), extra=values)

    exp = write_experiment(
        tmp_path / "exp",
        [trial("a", [0.9, 0.5, 0.7]), trial("b", [0.8, 0.6])],
        spec=spec_dict("exp", metric="val/loss"),
    )
    results = load_results(exp)
    assert results.best is not None and results.best["trial_id"] == "a"
    assert results.trials.set_index("trial_id")["best"].to_dict() == {"a": 0.5, "b": 0.6}
    assert results.trials.set_index("trial_id")["best_iteration"].to_dict() == {"a": 2, "b": 2}
    by_trial = results.history.groupby("trial_id")["val/loss"].apply(list).to_dict()
    assert by_trial == {"a": [0.9, 0.5, 0.7], "b": [0.8, 0.6]}
    summary = read_summary(exp)
    assert summary is not None and summary["best_trial_id"] == "a"


def test_the_progress_line_shows_a_nested_metric(tmp_path: Path) -> None:
    """The progress printer reads `val/loss` inside {"val": {"loss": x}}: no `val/loss=?`, and a best value."""
    from fake_tune import FakeTrial as TuneTrial
    from fake_tune import TuneEvents

    from hpsearch.runtime.search.outcomes import OutcomeRecorder
    from hpsearch.runtime.search.progress import ProgressPrinter

    out = io.StringIO()
    recorder = OutcomeRecorder(tmp_path, max_t=None)
    printer = ProgressPrinter("val/loss", "min", recorder, total=1, varying=["lr"], clock=lambda: 0.0)
    events = TuneEvents()
    events.callbacks = [recorder, printer]
    trial = TuneTrial("t1", {"lr": 0.01})
    with messages.to(out):
        events.start(trial)
        for epoch, loss in enumerate([0.5, 0.25], start=1):
            result = {"val": {"loss": loss}, "epoch": epoch, "training_iteration": epoch, "done": False}
            trial.last_result = result
            for callback in events.callbacks:
                callback.on_trial_result(0, [], trial, result)
        events.complete(trial)
    assert out.getvalue().splitlines()[-1] == "[00:00] finished t1  val/loss=0.25 at epoch 2 (2 reports)"
    assert printer._best is not None and math.isclose(printer._best[0], 0.25)
