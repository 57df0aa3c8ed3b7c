"""Search-space translation: hpsearch's inclusive bounds onto Ray Tune, Optuna and HyperOpt; and the one flat view
of a trial space.

Builds Tune domain objects and samples them; never starts Ray.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_experiment import write_experiment
from ray.tune.search import sample as tune_sample

from hpsearch.analysis import load_results
from hpsearch.runtime.search.tune_space import to_tune
from hpsearch.spec import load_spec, varying_params
from hpsearch.spec.space import (
    ChoiceParam,
    ConstParam,
    FloatParam,
    GridParam,
    IntParam,
    flat_space,
    has_grid,
    iter_params,
    parse_search_space,
)

N = 2000


def translate(raw: dict[str, Any], searcher: str = "random") -> Any:
    """``{"p": raw}`` parsed and translated for ``searcher``; returns Tune's object for ``p``."""
    tree, problems = parse_search_space({"p": raw})
    assert problems == []
    return to_tune(tree, searcher=searcher)["p"]


def draws(domain: tune_sample.Domain, seed: int = 0) -> list:
    return list(domain.sample(size=N, random_state=np.random.default_rng(seed)))


# --------------------------------------------------------------------------- translation table

# fmt: off
DOMAIN_TABLE = [
    # raw, domain class, sampler class, inner sampler (Quantized only), lower, upper, q
    pytest.param(
        {"type": "float", "low": 0.0, "high": 1.0},
        tune_sample.Float, tune_sample.Float._Uniform, None, 0.0, 1.0, None,
        id="float",
    ),
    pytest.param(
        {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
        tune_sample.Float, tune_sample.Float._LogUniform, None, 1e-4, 1e-1, None,
        id="float-log",
    ),
    pytest.param(
        {"type": "float", "low": 0.0, "high": 0.4, "step": 0.1},
        tune_sample.Float, tune_sample.Quantized, tune_sample.Float._Uniform, 0.0, 0.4, 0.1,
        id="float-step",
    ),
    pytest.param(
        {"type": "int", "low": 1, "high": 3},
        tune_sample.Integer, tune_sample.Integer._Uniform, None, 1, 4, None,
        id="int-upper-is-high-plus-one",
    ),
    pytest.param(
        {"type": "int", "low": 2, "high": 10, "step": 1},
        tune_sample.Integer, tune_sample.Integer._Uniform, None, 2, 11, None,
        id="int-step-1-is-plain-int",
    ),
    pytest.param(
        {"type": "int", "low": 1, "high": 8, "log": True},
        tune_sample.Integer, tune_sample.Integer._LogUniform, None, 1, 9, None,
        id="int-log-upper-is-high-plus-one",
    ),
    pytest.param(
        {"type": "int", "low": 2, "high": 10, "step": 2},
        tune_sample.Integer, tune_sample.Quantized, tune_sample.Integer._Uniform, 2, 10, 2,
        id="int-step",
    ),
]
# fmt: on


@pytest.mark.parametrize(("raw", "domain_cls", "sampler_cls", "inner_cls", "lower", "upper", "q"), DOMAIN_TABLE)
def test_numeric_translation(raw, domain_cls, sampler_cls, inner_cls, lower, upper, q) -> None:
    """Tune's domains as Ray's Optuna searcher converts them (the random searcher: the next two tests)."""
    domain = translate(raw, searcher="optuna")
    assert type(domain) is domain_cls
    sampler = domain.get_sampler()
    assert type(sampler) is sampler_cls
    if inner_cls is None:
        assert q is None
    else:
        assert type(sampler.get_sampler()) is inner_cls
        assert sampler.q == q
    assert (domain.lower, domain.upper) == (lower, upper)
    assert type(domain.lower) is type(lower) and type(domain.upper) is type(upper)


def _shape(domain: tune_sample.Domain) -> tuple:
    sampler = domain.get_sampler()
    inner = type(sampler.get_sampler()) if isinstance(sampler, tune_sample.Quantized) else None
    return type(domain), type(sampler), inner, domain.lower, domain.upper, getattr(sampler, "q", None)


@pytest.mark.parametrize("raw", [p.values[0] for p in DOMAIN_TABLE if p.id != "int-step"])
def test_the_random_searcher_gets_the_same_domains_but_for_a_stepped_int(raw) -> None:
    assert _shape(translate(raw)) == _shape(translate(raw, searcher="optuna"))


def test_the_random_searcher_draws_a_stepped_int_as_a_choice_of_its_multiples() -> None:
    """Not Tune's qrandint: before Ray 2.60 it drew the values unevenly and never the upper bound."""
    domain = translate({"type": "int", "low": 2, "high": 10, "step": 2})
    assert type(domain) is tune_sample.Categorical
    assert domain.categories == [2, 4, 6, 8, 10]
    assert translate({"type": "int", "low": 0, "high": 9, "step": 3}).categories == [0, 3, 6, 9]
    counts = np.bincount(np.array(draws(domain), dtype=int))[[2, 4, 6, 8, 10]]
    assert counts.min() > 0.8 * N / 5  # each multiple about as often as the others


def test_choice_translation() -> None:
    domain = translate({"type": "choice", "values": [32, "wide", None]})
    assert type(domain) is tune_sample.Categorical
    assert type(domain.get_sampler()) is tune_sample.Categorical._Uniform
    assert domain.categories == [32, "wide", None]


def test_grid_translation() -> None:
    assert translate({"type": "grid", "values": [1, 2, 3]}) == {"grid_search": [1, 2, 3]}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (5, 5),
        ("adamw", "adamw"),
        ([1, 2], [1, 2]),
        ({"type": "const", "value": {"type": "literal"}}, {"type": "literal"}),
        ({"type": "const", "value": 0.5}, 0.5),
    ],
    ids=["int", "str", "list", "mapping-with-type-key", "explicit-const"],
)
def test_constants_pass_through(raw: Any, expected: Any) -> None:
    assert translate(raw) == expected


def test_nested_group_becomes_nested_dict() -> None:
    tree, problems = parse_search_space(
        {"opt": {"lr": {"type": "float", "low": 0.1, "high": 1.0}, "betas": {"b1": 0.9}}, "epochs": 3}
    )
    assert problems == []
    space = to_tune(tree)
    assert set(space) == {"opt", "epochs"}
    assert space["epochs"] == 3
    assert space["opt"]["betas"] == {"b1": 0.9}
    assert type(space["opt"]["lr"]) is tune_sample.Float


# --------------------------------------------------------------------------- sampling: bounds inclusive


@pytest.mark.parametrize(
    ("raw", "values"),
    [
        ({"type": "int", "low": 1, "high": 3}, {1, 2, 3}),
        ({"type": "int", "low": -2, "high": 2}, {-2, -1, 0, 1, 2}),
        ({"type": "int", "low": 2, "high": 10, "step": 2}, {2, 4, 6, 8, 10}),
        ({"type": "int", "low": 0, "high": 9, "step": 3}, {0, 3, 6, 9}),
        ({"type": "int", "low": 1, "high": 8, "log": True}, set(range(1, 9))),
    ],
    ids=["int", "int-negative", "int-step", "int-step-3", "int-log"],
)
def test_int_samples_reach_high_and_never_exceed_it(raw: dict, values: set) -> None:
    samples = draws(translate(raw))
    assert min(samples) == raw["low"]
    assert max(samples) == raw["high"]
    assert set(int(x) for x in samples) == values
    assert all(float(x).is_integer() for x in samples)


@pytest.mark.parametrize(
    ("low", "high", "step"),
    [(0.0, 0.4, 0.1), (0.25, 1.5, 0.25), (-1.0, 1.0, 0.5)],
    ids=["tenths", "quarters", "negative-low"],
)
def test_float_step_samples_are_multiples_of_step_within_bounds(low: float, high: float, step: float) -> None:
    samples = draws(translate({"type": "float", "low": low, "high": high, "step": step}))
    assert all(low - 1e-9 <= x <= high + 1e-9 for x in samples)
    assert all(math.isclose(x / step, round(x / step), abs_tol=1e-9) for x in samples)
    assert math.isclose(min(samples), low) and math.isclose(max(samples), high)
    assert len({round(x / step) for x in samples}) == round((high - low) / step) + 1


@pytest.mark.parametrize(
    "raw",
    [{"type": "float", "low": 0.5, "high": 2.0}, {"type": "float", "low": 1e-4, "high": 1e-1, "log": True}],
    ids=["float", "float-log"],
)
def test_float_samples_within_bounds(raw: dict) -> None:
    samples = draws(translate(raw))
    assert all(raw["low"] <= x <= raw["high"] for x in samples)


def test_float_log_samples_are_log_uniform() -> None:
    samples = np.array(draws(translate({"type": "float", "low": 1e-4, "high": 1e-1, "log": True})))
    # each decade gets about a third of the draws
    for lo, hi in ((1e-4, 1e-3), (1e-3, 1e-2), (1e-2, 1e-1)):
        share = np.mean((samples >= lo) & (samples < hi))
        assert 0.28 < share < 0.39


# --------------------------------------------------------------------------- model-based searchers' conversions

OPTUNA_TABLE = [
    ({"type": "float", "low": 0.0, "high": 1.0}, ("FloatDistribution", 0.0, 1.0, False, None)),
    ({"type": "float", "low": 1e-4, "high": 1e-1, "log": True}, ("FloatDistribution", 1e-4, 1e-1, True, None)),
    ({"type": "float", "low": 0.0, "high": 0.4, "step": 0.1}, ("FloatDistribution", 0.0, 0.4, False, 0.1)),
    ({"type": "int", "low": 1, "high": 3}, ("IntDistribution", 1, 3, False, 1)),
    ({"type": "int", "low": 1, "high": 8, "log": True}, ("IntDistribution", 1, 8, True, 1)),
    ({"type": "int", "low": 2, "high": 10, "step": 2}, ("IntDistribution", 2, 10, False, 2)),
]


@pytest.mark.parametrize(
    ("raw", "expected"), OPTUNA_TABLE, ids=["float", "float-log", "float-step", "int", "int-log", "int-step"]
)
def test_optuna_conversion_keeps_inclusive_bounds(raw: dict, expected: tuple) -> None:
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    name, low, high, log, step = expected
    converted = OptunaSearch.convert_search_space({"p": translate(raw, searcher="optuna")})
    assert converted == {"p": getattr(optuna.distributions, name)(low=low, high=high, log=log, step=step)}


def test_optuna_conversion_of_choice_and_nested_group() -> None:
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    tree, _ = parse_search_space(
        {"c": {"type": "choice", "values": [1, "a"]}, "g": {"n": {"type": "int", "low": 0, "high": 1}}}
    )
    assert OptunaSearch.convert_search_space(to_tune(tree)) == {
        "c": optuna.distributions.CategoricalDistribution(choices=(1, "a")),
        "g/n": optuna.distributions.IntDistribution(low=0, high=1),
    }


HYPEROPT_CASES = [
    pytest.param({"type": "float", "low": 0.0, "high": 1.0}, None, id="float"),
    pytest.param({"type": "float", "low": 1e-4, "high": 1e-1, "log": True}, None, id="float-log"),
    pytest.param({"type": "float", "low": 0.0, "high": 0.4, "step": 0.1}, {0.0, 0.1, 0.2, 0.3, 0.4}, id="float-step"),
    pytest.param({"type": "int", "low": 1, "high": 3}, {1, 2, 3}, id="int"),
    pytest.param({"type": "int", "low": 1, "high": 8, "log": True}, set(range(1, 9)), id="int-log"),
    pytest.param(
        {"type": "int", "low": 2, "high": 10, "step": 2},
        {2, 4, 6, 8, 10},
        id="int-step",
    ),
    pytest.param({"type": "choice", "values": [1, 2, 3]}, {1, 2, 3}, id="choice"),
]


@pytest.mark.parametrize(("raw", "values"), HYPEROPT_CASES)
def test_hyperopt_conversion_and_its_values(raw: dict, values: set | None) -> None:
    from hyperopt.pyll import stochastic
    from ray.tune.search.hyperopt import HyperOptSearch

    tree, problems = parse_search_space({"p": raw})
    assert problems == []
    space = HyperOptSearch.convert_search_space(to_tune(tree, searcher="hyperopt"))
    rng = np.random.default_rng(0)
    samples = [stochastic.sample(space, rng=rng)["p"] for _ in range(600)]
    if values is None:
        assert all(raw["low"] <= x <= raw["high"] for x in samples)
    else:
        assert {round(x, 9) for x in samples} == values


# --------------------------------------------------------------------------- iter_params / has_grid


def test_iter_params_yields_dotted_names_in_spec_order() -> None:
    tree, problems = parse_search_space(
        {
            "lr": {"type": "float", "low": 0.1, "high": 1.0},
            "opt": {"betas": {"b1": 0.9}, "kind": {"type": "grid", "values": ["a", "b"]}},
            "epochs": 3,
        }
    )
    assert problems == []
    assert list(iter_params(tree)) == [
        ("lr", FloatParam(low=0.1, high=1.0)),
        ("opt.betas.b1", ConstParam(value=0.9)),
        ("opt.kind", GridParam(values=["a", "b"])),
        ("epochs", ConstParam(value=3)),
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({}, False),
        ({"c": {"type": "choice", "values": [1]}, "k": 1}, False),
        ({"g": {"type": "grid", "values": [1]}}, True),
        ({"deep": {"er": {"g": {"type": "grid", "values": [1, 2]}}}}, True),
        ({"k": {"type": "const", "value": {"type": "grid", "values": [1]}}}, False),
    ],
    ids=["empty", "no-grid", "grid", "nested-grid", "const-that-looks-like-grid"],
)
def test_has_grid(raw: dict, expected: bool) -> None:
    tree, problems = parse_search_space(raw)
    assert problems == []
    assert has_grid(tree) is expected


def test_parse_collects_problems_from_every_parameter() -> None:
    tree, problems = parse_search_space(
        {
            "a": {"type": "int", "low": 3, "high": 1},
            "ok": {"type": "choice", "values": [1]},
            "g": {"b": {"type": "nope"}},
        }
    )
    assert [p.path for p in problems] == ["search_space.a.low", "search_space.g.b.type"]
    assert tree == {"ok": ChoiceParam(values=[1]), "g": {}}


def test_int_rejects_float_bounds() -> None:
    _, problems = parse_search_space({"n": {"type": "int", "low": 1.5, "high": 4}})
    assert [str(p) for p in problems] == ["search_space.n.low: must be a valid integer, got 1.5"]


def test_int_with_step_one_is_allowed() -> None:
    tree, problems = parse_search_space({"n": {"type": "int", "low": 1, "high": 5, "step": 1}})
    assert problems == [] and tree == {"n": IntParam(low=1, high=5, step=1)}


def test_values_hpsearch_only_hands_to_the_loop_may_be_non_finite() -> None:
    """Constants, choice and grid values reach the loop as written: ``max_grad_norm: .inf`` is torch's
    "no clipping". Only the numbers hpsearch computes with (bounds and steps) must be finite."""
    assert translate(math.inf) == math.inf
    assert math.isnan(translate({"type": "const", "value": math.nan}))
    assert translate({"type": "choice", "values": [1.0, math.inf]}).categories == [1.0, math.inf]
    assert translate({"type": "grid", "values": [-math.inf, 0.0]}) == {"grid_search": [-math.inf, 0.0]}


# fmt: off
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"type": "float", "low": 0.0, "high": math.inf},              "search_space.p.high: must be a finite number, got inf"),
        ({"type": "float", "low": -math.inf, "high": 0.0},             "search_space.p.low: must be a finite number, got -inf"),
        ({"type": "float", "low": math.nan, "high": 1.0, "log": True}, "search_space.p.low: must be a finite number, got nan"),
        ({"type": "float", "low": 0.0, "high": 1.0, "step": math.nan}, "search_space.p.step: must be a finite number, got nan"),
        ({"type": "int", "low": 0, "high": math.inf},                  "search_space.p.high: must be a valid integer, got inf"),
        ({"type": "int", "low": 0, "high": 8, "step": math.inf},       "search_space.p.step: must be a valid integer, got inf"),
    ],
    ids=["float-high-inf", "float-low-minus-inf", "log-low-nan", "step-nan", "int-high-inf", "int-step-inf"],
)
# fmt: on
def test_bounds_and_steps_must_be_finite(raw: dict, expected: str) -> None:
    _, problems = parse_search_space({"p": raw})
    assert [str(p) for p in problems] == [expected]


# ----------------------------------------------------------------------------- the one flat view


def test_the_flat_space_is_the_same_read_from_the_spec_and_from_the_spec_as_run(tmp_path: Path) -> None:
    """Two views that could drift: the live spec's (``varying_params``, the Optuna tracker) and the one
    ``load_results`` reads back from the folder's spec as run. Both are :func:`flat_space` of the trial space."""
    spec = load_spec(
        {
            "name": "flat",
            "trainable": "hpsearch.examples.digits:train_loop",
            "metric": "loss",
            "mode": "min",
            "search_space": {
                "lr": {"type": "float", "low": 1.0e-4, "high": 0.1, "log": True},
                "optimizer": {"type": "grid", "values": ["sgd", "adam"]},
                "momentum": {"type": "float", "low": 0.0, "high": 0.9, "when": {"optimizer": "sgd"}},
                "model": {"width": {"type": "choice", "values": [32, 64]}, "depth": 2},
            },
            "searcher": "random",
            "scaling": {"num_workers": {"type": "grid", "values": [1, 2]}, "resources_per_worker": {"CPU": 1}},
            "storage_path": str(tmp_path),
        },
        check_trainable=False,
    )
    space, params = flat_space(spec.trial_space())
    assert list(space) == ["lr", "optimizer", "momentum", "model.width", "model.depth", "scaling.num_workers"]
    assert params == ["lr", "optimizer", "momentum", "model.width", "scaling.num_workers"] == varying_params(spec)

    results = load_results(write_experiment(tmp_path / spec.name, [], spec=spec.to_dict(), summary=False))
    assert dict(results.space) == space
    assert results.params == params
