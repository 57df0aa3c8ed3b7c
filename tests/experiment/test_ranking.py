"""The one ranking: each trial's best value, its best iteration, and the order of trials."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hpsearch.experiment.ranking import metric_value, rank_trials

NAN, INF = float("nan"), float("inf")


def order(reports: dict, mode: str = "min", **kwargs) -> list[str]:
    return [s.trial_id for s in rank_trials(reports, mode, **kwargs).ranked]


@pytest.mark.parametrize(
    ("reports", "mode", "expected"),
    [
        pytest.param({"a": [(1, 1.0)], "b": [(1, NAN)], "c": [(1, 0.167)]}, "min", ["c", "a", "b"], id="nan-last-min"),
        pytest.param({"a": [(1, 1.0)], "b": [(1, NAN)], "c": [(1, 0.167)]}, "max", ["a", "c", "b"], id="nan-last-max"),
        pytest.param({"a": [(1, 0.5)], "b": [(1, -INF)], "c": [(1, INF)]}, "min", ["a", "b", "c"], id="inf-last-min"),
        pytest.param({"a": [(1, 0.5)], "b": [(1, -INF)], "c": [(1, INF)]}, "max", ["a", "b", "c"], id="inf-last-max"),
        pytest.param({"a": [(1, 0.3)], "b": [(1, 0.3)], "c": [(1, 0.1)]}, "min", ["c", "a", "b"], id="ties-keep-order"),
        pytest.param({"a": [(1, "n/a")], "b": [(1, 2.0)]}, "min", ["b"], id="strings-are-no-value"),
        pytest.param({"a": [], "b": [(1, None)], "c": [(1, True)]}, "min", [], id="nothing-to-rank"),
    ],
)
def test_order(reports: dict, mode: str, expected: list[str]) -> None:
    assert order(reports, mode) == expected


def test_best_is_the_best_finite_value_and_its_iteration() -> None:
    score = rank_trials({"a": [(0, 2.0), (1, NAN), (2, 0.5), (3, INF), (4, 0.5)]}, "min")["a"]
    assert (score.best, score.best_iteration, score.last, score.rank) == (0.5, 2, 0.5, 1)  # earliest of a tie


def test_a_trial_with_only_nan_keeps_it_shown_as_it_is() -> None:
    ranking = rank_trials({"a": [(1, NAN), (2, NAN)], "b": [(1, INF)]}, "max")
    assert math.isnan(ranking["a"].best) and ranking["a"].best_iteration == 2
    assert ranking["b"].best == INF
    assert [s.rank for s in ranking.scores] == [1, 2]
    assert ranking.best is None  # no finite value: no best trial


def test_errored_trials_keep_their_values_but_are_not_ranked() -> None:
    ranking = rank_trials({"a": [(1, 0.5)], "e": [(1, 0.01)]}, "min", statuses={"e": "errored"})
    assert [s.trial_id for s in ranking.ranked] == ["a"]
    assert ranking["e"].best == 0.01 and ranking["e"].rank is None
    assert ranking.best is not None and ranking.best.trial_id == "a"


def test_every_report_counts_also_after_a_stop() -> None:
    # ASHA stopped the trial at epoch 1 (6.47); the nested run delivered epoch 2 (4.33) while stopping
    assert rank_trials({"s": [(1, 6.47), (2, 4.33)]}, "min")["s"].best == 4.33


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, 1.0), (0.5, 0.5), (np.float32(0.25), 0.25), (np.int64(3), 3.0), (np.array(2.0), 2.0), (NAN, NAN)],
    ids=["int", "float", "numpy-float", "numpy-int", "0d-array", "nan"],
)
def test_numbers_of_every_kind_are_values(value: object, expected: float) -> None:
    got = metric_value(value)
    assert got is not None and (got == expected or (math.isnan(got) and math.isnan(expected)))


@pytest.mark.parametrize("value", [None, True, np.bool_(False), "0.5", b"1", [1.0], {"a": 1}], ids=repr)
def test_other_things_are_not_values(value: object) -> None:
    assert metric_value(value) is None


def test_mode_is_checked() -> None:
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'"):
        rank_trials({}, "lowest")  # type: ignore[arg-type]
