"""Searcher and scheduler registries: parsing by name (spec/) and building the Ray objects (runtime/; no Ray start)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hpsearch.errors import SpecError
from hpsearch.runtime.search.plugins import (
    SCHEDULER_BUILDERS,
    SEARCHER_BUILDERS,
    SchedulerContext,
    SearcherContext,
    _check_builders,
    build_scheduler,
    build_searcher,
)
from hpsearch.spec import load_spec
from hpsearch.spec.plugins import SCHEDULERS, SEARCHERS, Plugin, PluginChoice, Registry

SEARCHER_CTX = SearcherContext(metric="loss", mode="min", max_concurrent=3)
SCHEDULER_CTX = SchedulerContext(metric="loss", mode="min")


def choose(registry: Registry, raw: Any) -> PluginChoice:
    choice, problems = registry.parse(raw, registry.kind)
    assert problems == []
    assert choice is not None
    return choice


# --------------------------------------------------------------------------- names and parsing


def test_registry_names() -> None:
    assert SEARCHERS.names() == ["random", "optuna", "hyperopt"]
    assert SCHEDULERS.names() == ["fifo", "asha", "median", "hyperband", "pbt", "pb2"]
    assert SEARCHERS.default == "random" and SCHEDULERS.default == "fifo"
    assert [p.name for p in SEARCHERS.plugins.values() if p.accepts_grid] == ["random"]


def test_spec_errors_list_names_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plug-in added to the registry shows up in every message; nothing keeps its own list."""
    random = SEARCHERS["random"]
    monkeypatch.setitem(SEARCHERS.plugins, "gridder", Plugin("gridder", random.options, "test", accepts_grid=True))
    spec = {
        "name": "x",
        "trainable": "m:f",
        "metric": "loss",
        "mode": "min",
        "search_space": {"b": {"type": "grid", "values": [1, 2]}},
    }
    with pytest.raises(SpecError) as info:
        load_spec({**spec, "searcher": "griddr"}, check_trainable=False)
    assert [str(p) for p in info.value.problems] == [
        "searcher.type: unknown searcher 'griddr'; did you mean 'gridder'? "
        "(allowed: 'random', 'optuna', 'hyperopt' or 'gridder')"
    ]
    with pytest.raises(SpecError) as info:
        load_spec({**spec, "searcher": "optuna"}, check_trainable=False)
    assert [str(p) for p in info.value.problems] == [
        "search_space.b: grid values need searcher random or gridder; searcher 'optuna' cannot take them "
        "(use type: choice)"
    ]
    assert load_spec({**spec, "searcher": "gridder"}, check_trainable=False).searcher.type == "gridder"


def test_every_registry_name_has_one_builder_and_no_builder_is_unnamed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The names are kept once, in spec/'s registries; runtime/plugins refuses to load out of step with them."""
    assert list(SEARCHER_BUILDERS) == SEARCHERS.names() and list(SCHEDULER_BUILDERS) == SCHEDULERS.names()
    monkeypatch.setitem(SEARCHERS.plugins, "gridder", Plugin("gridder", SEARCHERS["random"].options, "test"))
    with pytest.raises(RuntimeError, match=r"builds searchers \['hyperopt', 'optuna', 'random'\].*'gridder'"):
        _check_builders(SEARCHERS, SEARCHER_BUILDERS)


def test_a_new_registry_words_its_own_errors() -> None:
    registry = Registry("widget", [Plugin("alpha", SCHEDULERS["fifo"].options, "a")], "alpha")
    choice, problems = registry.parse("alpah", "widgets.main")
    assert choice is None
    assert [str(p) for p in problems] == [
        "widgets.main.type: unknown widget 'alpah'; did you mean 'alpha'? (allowed: 'alpha')"
    ]


@pytest.mark.parametrize(
    ("registry", "expected"),
    [(SEARCHERS, {"type": "random", "seed": None}), (SCHEDULERS, {"type": "fifo"})],
    ids=["searcher", "scheduler"],
)
def test_none_means_the_default_plugin(registry: Registry, expected: dict) -> None:
    assert choose(registry, None).as_dict() == expected


@pytest.mark.parametrize(
    ("registry", "raw", "expected"),
    [
        (
            SCHEDULERS,
            "asha",
            {
                "type": "asha",
                "max_t": 100,
                "grace_period": 1,
                "reduction_factor": 4,
                "brackets": 1,
                "time_attr": "epoch",
            },
        ),
        (SCHEDULERS, "hyperband", {"type": "hyperband", "max_t": 81, "reduction_factor": 3, "time_attr": "epoch"}),
        (
            SEARCHERS,
            "optuna",
            {"type": "optuna", "sampler": "tpe", "seed": None, "n_startup_trials": None, "failed_trials": "infeasible"},
        ),
        (SEARCHERS, "hyperopt", {"type": "hyperopt", "seed": None, "n_initial_points": 20}),
    ],
    ids=["asha", "hyperband", "optuna", "hyperopt"],
)
def test_string_shorthand_is_type_with_default_options(registry: Registry, raw: str, expected: dict) -> None:
    assert choose(registry, raw).as_dict() == expected
    assert choose(registry, {"type": raw}) == choose(registry, raw)


def test_mapping_without_type_is_the_default_plugin() -> None:
    assert choose(SEARCHERS, {"seed": 3}).as_dict() == {"type": "random", "seed": 3}


def test_options_are_kept() -> None:
    choice = choose(SCHEDULERS, {"type": "median", "grace_period": 2, "min_samples_required": 5, "hard_stop": False})
    assert choice.as_dict() == {
        "type": "median",
        "grace_period": 2,
        "min_samples_required": 5,
        "min_time_slice": 0,
        "hard_stop": False,
        "time_attr": "epoch",
    }


# --------------------------------------------------------------------------- building


SEARCHER_CLASSES = {
    # Tune's own, gated by the search's share of a shared cluster (runtime/search/room.py)
    "random": ("GatedVariantGenerator", None),
    "optuna": ("GatedLimiter", "ResumableOptunaSearch"),
    "hyperopt": ("GatedLimiter", "HyperOptSearch"),
}


@pytest.mark.parametrize("name", SEARCHERS.names())
def test_every_searcher_builds_with_the_concurrency_limit(name: str) -> None:
    assert set(SEARCHER_CLASSES) == set(SEARCHERS.names()), "a new searcher needs a row here"
    outer, inner = SEARCHER_CLASSES[name]
    built = build_searcher(choose(SEARCHERS, name), SEARCHER_CTX)
    assert type(built).__name__ == outer
    assert built.max_concurrent == SEARCHER_CTX.max_concurrent
    if inner is not None:
        assert type(built.searcher).__name__ == inner
        assert (built.searcher.metric, built.searcher.mode) == ("loss", "min")


def test_random_searcher_uses_the_seed() -> None:
    from ray.tune.search.basic_variant import BasicVariantGenerator

    built = build_searcher(choose(SEARCHERS, {"type": "random", "seed": 7}), SearcherContext("acc", "max", 5))
    assert isinstance(built, BasicVariantGenerator)
    assert built.max_concurrent == 5
    assert built._random_state.integers(0, 10**9) == np.random.default_rng(7).integers(0, 10**9)


@pytest.mark.parametrize(
    ("options", "sampler_name", "startup"),
    [
        ({"sampler": "tpe", "seed": 3}, "TPESampler", 10),
        ({"sampler": "tpe", "seed": 3, "n_startup_trials": 4}, "TPESampler", 4),
        ({"sampler": "gp", "seed": 3, "n_startup_trials": 6}, "GPSampler", 6),
        ({"sampler": "cmaes", "seed": 3}, "CmaEsSampler", None),
        ({"sampler": "random", "seed": 3}, "RandomSampler", None),
    ],
    ids=["tpe", "tpe-startup", "gp-startup", "cmaes", "random"],
)
def test_optuna_sampler_and_seed(options: dict, sampler_name: str, startup: int | None) -> None:
    import optuna
    from ray.tune.search import ConcurrencyLimiter
    from ray.tune.search.optuna import OptunaSearch

    built = build_searcher(choose(SEARCHERS, {"type": "optuna", **options}), SEARCHER_CTX)
    assert isinstance(built, ConcurrencyLimiter) and isinstance(built.searcher, OptunaSearch)
    sampler = built.searcher._sampler
    assert type(sampler) is getattr(optuna.samplers, sampler_name)
    if startup is not None:
        assert sampler._n_startup_trials == startup
    # The seed reaches the sampler: its random stream is the seed's.
    rng = sampler._cma_rng if sampler_name == "CmaEsSampler" else sampler._rng
    assert rng.rng.randint(0, 2**31) == np.random.RandomState(3).randint(0, 2**31)


def test_hyperopt_options_are_passed_through() -> None:
    built = build_searcher(choose(SEARCHERS, {"type": "hyperopt", "seed": 4, "n_initial_points": 5}), SEARCHER_CTX)
    searcher = built.searcher
    assert searcher.algo.keywords["n_startup_jobs"] == 5
    if isinstance(searcher.rstate, np.random.Generator):
        assert searcher.rstate.integers(0, 10**9) == np.random.default_rng(4).integers(0, 10**9)
    else:
        assert searcher.rstate.randint(0, 10**9) == np.random.RandomState(4).randint(0, 10**9)


SCHEDULER_BUILDS = [
    pytest.param("fifo", "DrainAwareFIFO", {}, id="fifo"),
    pytest.param(
        {"type": "asha", "max_t": 20, "grace_period": 2, "reduction_factor": 3, "time_attr": "epoch"},
        "DrainAwareASHA",
        {"_max_t": 20, "_reduction_factor": 3, "_time_attr": "epoch"},
        id="asha",
    ),
    pytest.param(
        {"type": "median", "grace_period": 2, "min_samples_required": 4, "min_time_slice": 1, "hard_stop": False},
        "DrainAwareMedian",
        {
            "_grace_period": 2,
            "_min_samples_required": 4,
            "_min_time_slice": 1,
            "_hard_stop": False,
            "_time_attr": "epoch",
        },
        id="median",
    ),
    pytest.param(
        {"type": "hyperband", "max_t": 27, "reduction_factor": 3, "time_attr": "epoch"},
        "DrainAwareHyperBand",
        {"_max_t_attr": 27, "_eta": 3, "_time_attr": "epoch"},
        id="hyperband",
    ),
    pytest.param(
        {
            "type": "pbt",
            "perturbation_interval": 3,
            "quantile_fraction": 0.5,
            "resample_probability": 0.1,
            "hyperparam_mutations": {"lr": {"type": "float", "low": 0.001, "high": 0.1, "log": True}},
        },
        "HpsearchPBT",
        {"_perturbation_interval": 3, "_quantile_fraction": 0.5, "_resample_probability": 0.1, "_time_attr": "epoch"},
        id="pbt",
    ),
    pytest.param(
        {"type": "pb2", "perturbation_interval": 4, "hyperparam_bounds": {"lr": [0.001, 0.1]}},
        "HpsearchPB2",
        {"_perturbation_interval": 4, "_quantile_fraction": 0.25, "_hyperparam_bounds": {"lr": [0.001, 0.1]}},
        id="pb2",
    ),
]


@pytest.mark.parametrize(("raw", "class_name", "attrs"), SCHEDULER_BUILDS)
def test_every_scheduler_builds_with_its_options(raw: Any, class_name: str, attrs: dict) -> None:
    assert {p.id for p in SCHEDULER_BUILDS} == set(SCHEDULERS.names()), "a new scheduler needs a row here"
    built = build_scheduler(choose(SCHEDULERS, raw), SCHEDULER_CTX)
    assert type(built).__name__ == class_name
    assert {k: getattr(built, k) for k in attrs} == attrs


def test_asha_grace_period_is_its_first_rung() -> None:
    built = build_scheduler(choose(SCHEDULERS, {"type": "asha", "max_t": 20, "grace_period": 2}), SCHEDULER_CTX)
    (bracket,) = built._brackets
    milestones = sorted(m for m, _ in bracket._rungs)
    assert milestones[0] == 2
    assert max(milestones) < 20
