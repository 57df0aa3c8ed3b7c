"""What a finished search amounts to: best-trials table, short errors, flattened configs."""

from __future__ import annotations

import pytest

from hpsearch.analysis import SearchSummary, TrialOutcome, best_trials_table
from hpsearch.experiment.layout import flatten_config
from hpsearch.experiment.tracebacks import short_error


def trial(trial_id: str, best: float | None, lr: float, *, status: str = "finished", acc: float = 0.5) -> TrialOutcome:
    return TrialOutcome(
        trial_id=trial_id,
        status=status,
        config={"lr": lr, "opt": {"momentum": 0.9}},
        metrics={"loss": best, "acc": acc, "training_iteration": 3},
        best=best,
        iterations=3,
    )


TRIALS = [
    trial("t_mid", 0.5, 0.1, acc=0.8),
    trial("t_low", 0.2, 0.01, status="stopped", acc=0.9),
    trial("t_err", 0.1, 1.0, status="errored", acc=1.0),
    trial("t_high", 0.7, 0.3, acc=0.6),
    TrialOutcome("t_none", "finished", {"lr": 2.0, "opt": {"momentum": 0.5}}, {}, None, 0),
]


def summary(mode: str) -> SearchSummary:
    return SearchSummary(name="exp", metric="loss", mode=mode, wall_time_s=12.345, trials=list(TRIALS))


def column(table: str, index: int = 0) -> list[str]:
    return [line.split()[index] for line in table.splitlines()[1:]]


@pytest.mark.parametrize(
    ("mode", "order"),
    [("min", ["t_low", "t_mid", "t_high"]), ("max", ["t_high", "t_mid", "t_low"])],
    ids=["min", "max"],
)
def test_best_trials_order_excludes_errored_and_unscored(mode: str, order: list[str]) -> None:
    assert column(best_trials_table(summary(mode))) == order


def test_best_trials_table_exact_layout() -> None:
    assert best_trials_table(summary("min"), n=2) == (
        "trial_id  status    reports  last epoch  loss (best)  acc  lr    opt.momentum\n"
        "t_low     stopped   3        -           0.2          0.9  0.01  0.9\n"
        "t_mid     finished  3        -           0.5          0.8  0.1   0.9"
    )


def test_best_trials_table_shows_only_the_varying_params() -> None:
    table = best_trials_table(summary("min"), n=1, varying=["lr"])
    assert table.splitlines()[0].split() == [
        "trial_id",
        "status",
        "reports",
        "last",
        "epoch",
        "loss",
        "(best)",
        "acc",
        "lr",
    ]


def test_best_trials_table_without_scores() -> None:
    empty = SearchSummary("exp", "loss", "min", 1.0, [TRIALS[4]])
    assert best_trials_table(empty) == "(no trial reported the metric)"
    # the only trial with a value errored after reporting it: said so, not "no trial reported"
    errored = SearchSummary("exp", "loss", "min", 1.0, [TRIALS[2], TRIALS[4]])
    assert best_trials_table(errored) == "(no trial ranks: the 1 trial that reported loss errored)"


@pytest.mark.parametrize(("mode", "best"), [("min", "t_low"), ("max", "t_high")], ids=["min", "max"])
def test_summary_best_skips_errored(mode: str, best: str) -> None:
    result = summary(mode)
    assert result.best is not None and result.best.trial_id == best
    assert result.as_dict()["best_trial_id"] == best
    assert result.as_dict()["counts"] == {"finished": 3, "stopped": 1, "errored": 1}
    assert result.as_dict()["wall_time_s"] == 12.35


TRACEBACK = """\
Traceback (most recent call last):
  File "/work/train.py", line 12, in train_loop
    raise ValueError("lr too large")
ValueError: lr too large

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/ray/tune/trainable.py", line 331, in train
ray.exceptions.RayTaskError(ValueError): ray::_Inner.train() (pid=1234, ip=10.0.0.1)
  File "/work/train.py", line 12, in train_loop
ray.train.ControllerError: Training failed due to controller error: worker group did not start
"""


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (TRACEBACK, "ray.train.ControllerError: Training failed due to controller error: worker group did not start"),
        (
            "Traceback (most recent call last):\n  File \"x.py\", line 1\n    raise KeyError('k')\nKeyError: 'k'\n",
            "KeyError: 'k'",
        ),
        (
            "Traceback:\n  foo\ntorch.OutOfMemoryError: CUDA out of memory.\n",
            "torch.OutOfMemoryError: CUDA out of memory.",
        ),
        ("Traceback:\n  loop()\nKeyboardInterrupt\n", "KeyboardInterrupt"),
        (RuntimeError("boom\nsecond line"), "RuntimeError: boom"),
        (ValueError("ValueError: already prefixed"), "ValueError: already prefixed"),
        ("no error line here\nsecond", "no error line here"),
        (None, ""),
        ("", ""),
    ],
    ids=[
        "chained-traceback",
        "key-error",
        "dotted-name",
        "interrupt",
        "exception",
        "prefixed",
        "plain-text",
        "none",
        "empty",
    ],
)
def test_short_error(error, expected: str) -> None:
    assert short_error(error) == expected


def test_short_error_is_cut_at_the_limit() -> None:
    text = "ValueError: " + "x" * 300
    out = short_error(text, limit=50)
    assert len(out) == 50
    assert out == text[:47] + "..."


@pytest.mark.parametrize(
    ("config", "flat"),
    [
        ({}, {}),
        ({"lr": 0.1}, {"lr": 0.1}),
        ({"opt": {"lr": 0.1, "betas": {"b1": 0.9}}, "epochs": 3}, {"opt.lr": 0.1, "opt.betas.b1": 0.9, "epochs": 3}),
        ({"layers": [1, 2], "empty": {}}, {"layers": [1, 2]}),
    ],
    ids=["empty", "flat", "nested", "lists-kept-empty-groups-dropped"],
)
def test_flatten_config(config: dict, flat: dict) -> None:
    assert flatten_config(config) == flat


def test_a_metric_named_as_a_parameter_is_told_apart_in_the_closing_table() -> None:
    # the HF Trainer reports the scheduled learning_rate; the searched one is a parameter of the same name
    reported = TrialOutcome("t1", "finished", {"learning_rate": 1e-3}, {"loss": 0.2, "learning_rate": 2e-4}, 0.2, 3)
    header = best_trials_table(SearchSummary("exp", "loss", "min", 1.0, [reported])).splitlines()[0].split("  ")
    assert [h.strip() for h in header if h.strip()] == [
        "trial_id",
        "status",
        "reports",
        "last epoch",
        "loss (best)",
        "learning_rate (last)",
        "learning_rate",
    ]
