"""Aggregating the metrics every Train worker reported into the one dict Tune sees."""

from __future__ import annotations

import json
import math

import pytest

from hpsearch.runtime.train.aggregate import METHODS, aggregate_metrics, plain_metrics, plain_value
from hpsearch.spec import Aggregate

RANKS = [{"loss": 1.0}, {"loss": 4.0}, {"loss": 2.5}]


def every(method: str):
    return lambda metric: method


@pytest.mark.parametrize(
    ("method", "expected"),
    [("mean", 2.5), ("min", 1.0), ("max", 4.0), ("sum", 7.5), ("rank0", 1.0)],
    ids=["mean", "min", "max", "sum", "rank0"],
)
def test_methods_across_ranks(method: str, expected: float) -> None:
    assert aggregate_metrics(RANKS, every(method)) == {"loss": expected}


def test_every_spec_method_is_implemented() -> None:
    assert set(METHODS) == {"mean", "min", "max", "sum", "rank0"}


def test_method_per_metric_from_the_spec() -> None:
    agg = Aggregate(default="mean", metrics={"score_max": "max", "samples": "sum"})
    per_rank = [{"score": 0.0, "score_max": 0.0, "samples": 10}, {"score": 1.0, "score_max": 1.0, "samples": 12}]
    assert aggregate_metrics(per_rank, agg.method) == {"score": 0.5, "score_max": 1.0, "samples": 22}


def test_mean_is_exact_for_many_small_values() -> None:
    assert aggregate_metrics([{"x": 0.1}] * 9 + [{"x": 0.2}], every("mean")) == {"x": pytest.approx(0.11)}
    assert aggregate_metrics([{"x": 0.1}, {"x": 0.2}, {"x": 0.3}], every("sum")) == {
        "x": 0.6
    }  # fsum, not 0.6000000000000001


def test_non_numeric_values_take_rank_0() -> None:
    per_rank = [
        {"tag": "rank0", "shape": [1, 2], "note": None},
        {"tag": "rank1", "shape": [3, 4], "note": "x"},
    ]
    assert aggregate_metrics(per_rank, every("mean")) == {"tag": "rank0", "shape": [1, 2], "note": None}


def test_mixed_number_and_string_takes_rank_0() -> None:
    assert aggregate_metrics([{"v": "n/a"}, {"v": 3.0}], every("max")) == {"v": "n/a"}


@pytest.mark.parametrize("method", ["mean", "max", "sum"])
def test_bool_is_not_a_number(method: str) -> None:
    out = aggregate_metrics([{"done": False}, {"done": True}, {"done": True}], every(method))
    assert out == {"done": False}
    assert type(out["done"]) is bool


def test_key_missing_on_some_ranks_uses_the_ranks_that_reported_it() -> None:
    per_rank = [{"loss": 1.0, "only0": 5.0}, {"loss": 3.0}, {"loss": 2.0, "later": 7.0, "only0": 1.0}]
    out = aggregate_metrics(per_rank, every("mean"))
    assert out == {"loss": 2.0, "only0": 3.0, "later": 7.0}
    assert list(out) == ["loss", "only0", "later"]  # first-seen order


def test_equal_values_pass_through_unchanged() -> None:
    out = aggregate_metrics([{"epoch": 3, "loss": 0.5}, {"epoch": 3, "loss": 0.5}], every("mean"))
    assert out == {"epoch": 3, "loss": 0.5}
    assert type(out["epoch"]) is int


def test_different_ints_are_averaged() -> None:
    assert aggregate_metrics([{"n": 1}, {"n": 2}], every("mean")) == {"n": 1.5}


def test_sum_of_equal_values_is_still_summed() -> None:
    assert aggregate_metrics([{"samples": 2}, {"samples": 2}], every("sum"))["samples"] == 4


def test_sum_of_ints_stays_int() -> None:
    out = aggregate_metrics([{"samples": 64}, {"samples": 64}], every("sum"))
    assert type(out["samples"]) is int


def test_nan_on_every_rank_stays_nan() -> None:
    assert math.isnan(aggregate_metrics([{"loss": math.nan}, {"loss": math.nan}], every("mean"))["loss"])


def test_no_ranks_gives_an_empty_dict() -> None:
    assert aggregate_metrics([], every("mean")) == {}


def test_single_rank_is_passed_through() -> None:
    metrics = {"loss": 0.25, "epoch": 1, "tag": "a"}
    assert aggregate_metrics([metrics], every("sum")) == metrics


# ----------------------------------------------------------------------------- plain values (loops written for Ray Train)


def test_numpy_scalars_become_python_numbers() -> None:
    np = pytest.importorskip("numpy")
    per_rank = [
        {"loss": np.float32(0.5), "n": np.int64(3), "ok": np.bool_(True), "epoch": np.int64(2)},
        {"loss": np.float32(1.5), "n": np.int64(5), "ok": np.bool_(True), "epoch": np.int64(2)},
    ]
    out = aggregate_metrics(per_rank, every("mean"))
    assert out == {"loss": 1.0, "n": 4.0, "ok": True, "epoch": 2}
    assert [type(out[k]) for k in ("loss", "n", "ok", "epoch")] == [float, float, bool, int]
    assert json.loads(json.dumps(out)) == out  # JSON-clean: Tune, the history file and Ray Train's snapshot take it


def test_numpy_bools_are_not_averaged() -> None:
    np = pytest.importorskip("numpy")
    out = aggregate_metrics([{"ok": np.bool_(False)}, {"ok": np.bool_(True)}], every("mean"))
    assert out == {"ok": False} and type(out["ok"]) is bool


def test_zero_d_tensors_become_python_numbers() -> None:
    torch = pytest.importorskip("torch")
    loss = torch.tensor(0.25, requires_grad=True) * 2  # a criterion's output: 0-d, with a grad_fn
    per_rank = [{"loss": loss, "step": torch.tensor(7)}, {"loss": torch.tensor(1.5), "step": torch.tensor(7)}]
    out = aggregate_metrics(per_rank, every("mean"))
    assert out == {"loss": 1.0, "step": 7}
    assert (type(out["loss"]), type(out["step"])) == (float, int)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.5, 1.5),
        ("tag", "tag"),
        (None, None),
        ({"a": {"b": 2}}, {"a": {"b": 2}}),
        ([1, "x"], [1, "x"]),
    ],
    ids=["float", "str", "None", "nested-dict", "list"],
)
def test_plain_values_pass_through(value, expected) -> None:
    assert plain_value(value) == expected
    assert type(plain_value(value)) is type(expected)


def test_arrays_tensors_and_containers_are_made_plain_inside() -> None:
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    value = {
        "hist": np.array([1, 2]),
        "weights": torch.ones(2),
        "pair": (np.float64(0.5), torch.tensor(True)),
        "scalar_array": np.array(2.5),
        "name": np.str_("run"),
        "nested": {"acc": [np.float32(0.75)]},
    }
    assert plain_value(value) == {
        "hist": [1, 2],
        "weights": [1.0, 1.0],
        "pair": (0.5, True),
        "scalar_array": 2.5,
        "name": "run",
        "nested": {"acc": [0.75]},
    }
    assert type(plain_value(value)["name"]) is str


def test_other_objects_are_left_as_they_are() -> None:
    marker = object()
    assert plain_metrics({"x": marker}) == {"x": marker}
