"""Searchers and schedulers, chosen by name from the spec: the names and their typed options.

One registry per kind. Each entry is a typed option model, validated with the spec, so a
misspelled option fails before Ray starts (Ray's own factories would silently drop it), and
validation needs no Ray. What each name builds from its options is in
:mod:`hpsearch.runtime.search.plugins`, keyed by these names. Adding a plug-in is one :class:`Plugin`
in :data:`SEARCHERS` or :data:`SCHEDULERS` here and its builder there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from hpsearch.errors import Problem, did_you_mean, one_of
from hpsearch.spec._validation import StrictModel, field_error, join_path, show, validate_section

__all__ = [
    "Plugin",
    "Registry",
    "PluginChoice",
    "SEARCHERS",
    "SCHEDULERS",
    "POPULATION_SCHEDULERS",
]

OptionsT = TypeVar("OptionsT", bound=StrictModel)


@dataclass(frozen=True)
class Plugin(Generic[OptionsT]):
    """A named searcher or scheduler: its options model, a line saying what it does, and an example.

    ``example`` holds the fewest options that make a working spec of it (the options its model
    requires): the plug-in contract suites build every registered name from it, so a new plug-in
    is tested the day it is registered.
    """

    name: str
    options: type[OptionsT]
    summary: str
    accepts_grid: bool = False
    example: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PluginChoice:
    """A plug-in as the spec chose it: the name and its validated options."""

    type: str
    options: StrictModel

    def as_dict(self) -> dict[str, Any]:
        options = self.options.model_dump()
        for key in ("metric", "mode", "population_size"):  # options added later: written only where given
            if key in options and options[key] is None:
                del options[key]
        return {"type": self.type, **options}


class Registry:
    """Plug-ins of one kind, by name; parses the spec section that chooses one."""

    def __init__(self, kind: str, plugins: list[Plugin[Any]], default: str) -> None:
        self.kind = kind
        self.plugins = {p.name: p for p in plugins}
        self.default = default

    def names(self) -> list[str]:
        return list(self.plugins)

    def __getitem__(self, name: str) -> Plugin[Any]:
        return self.plugins[name]

    def parse(self, raw: Any, path: str) -> tuple[PluginChoice | None, list[Problem]]:
        """Validate ``{type: name, **options}`` (``None`` means the default plug-in)."""
        if raw is None:
            raw = {"type": self.default}
        if isinstance(raw, str):  # `scheduler: asha` is shorthand for {type: asha}
            raw = {"type": raw}
        if not isinstance(raw, Mapping):
            return None, [Problem(path, f"must be a mapping with a 'type' key, got {show(raw)}")]
        name = raw.get("type", self.default)
        plugin = self.plugins.get(name) if isinstance(name, str) else None
        if plugin is None:
            return None, [
                Problem(
                    join_path(path, "type"),
                    f"unknown {self.kind} {show(name)}{did_you_mean(str(name), self.names())} "
                    f"(allowed: {one_of(self.names())})",
                )
            ]
        options, problems = validate_section(plugin.options, raw, path, exclude=("type",))
        if options is None:
            if not plugin.options.model_fields:
                problems = [Problem(p.path, f"unknown key; {self.kind} '{name}' takes no options") for p in problems]
            return None, problems
        return PluginChoice(name, options), []


# ----------------------------------------------------------------------------- searchers


class RandomOptions(StrictModel):
    seed: int | None = None


class OptunaOptions(StrictModel):
    sampler: Literal["tpe", "cmaes", "gp", "random", "nsga2", "nsga3"] = "tpe"
    seed: int | None = None
    n_startup_trials: PositiveInt | None = Field(
        default=None, description="random trials before the model takes over (tpe, gp); the sampler's default if unset"
    )
    population_size: int | None = Field(
        default=None, ge=2, description="trials per generation (nsga2, nsga3); Optuna's default (50) if unset"
    )
    failed_trials: Literal["infeasible", "ignore"] = Field(
        default="infeasible",
        description=(
            "what Optuna learns from a trial that errored: 'infeasible' (tpe, gp, nsga2, nsga3: the trial counts as "
            "violating a constraint, so the sampler learns to avoid its region) or 'ignore' (told as failed: "
            "the sampler skips it)"
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> OptunaOptions:
        if self.n_startup_trials is not None and self.sampler not in ("tpe", "gp"):
            raise field_error("n_startup_trials", f"applies to samplers 'tpe' and 'gp' only, not '{self.sampler}'")
        if self.population_size is not None and self.sampler not in ("nsga2", "nsga3"):
            raise field_error("population_size", f"applies to samplers 'nsga2' and 'nsga3' only, not '{self.sampler}'")
        return self


class HyperoptOptions(StrictModel):
    seed: int | None = None
    n_initial_points: PositiveInt = 20


SEARCHERS = Registry(
    "searcher",
    [
        Plugin(
            "random",
            RandomOptions,
            "random sampling and grids (Tune's basic variant generator)",
            accepts_grid=True,
        ),
        Plugin("optuna", OptunaOptions, "Optuna samplers: tpe, cmaes, gp, random, nsga2, nsga3"),
        Plugin("hyperopt", HyperoptOptions, "HyperOpt's tree-structured Parzen estimator"),
    ],
    default="random",
)

# ----------------------------------------------------------------------------- schedulers


class FifoOptions(StrictModel):
    pass


class AshaOptions(StrictModel):
    max_t: PositiveInt = 100
    grace_period: PositiveInt = 1
    reduction_factor: float = Field(default=4, gt=1)
    brackets: PositiveInt = 1
    time_attr: str = "epoch"
    # the one metric the scheduler stops trials by: required with several objectives, else the spec's
    metric: str | None = Field(default=None, min_length=1)
    mode: Literal["min", "max"] | None = None

    @model_validator(mode="after")
    def _check(self) -> AshaOptions:
        if self.grace_period > self.max_t:
            raise field_error("grace_period", f"must be <= max_t ({self.max_t}), got {self.grace_period}")
        return self


class MedianOptions(StrictModel):
    grace_period: float = Field(default=1, ge=0)
    min_samples_required: PositiveInt = 3
    min_time_slice: float = Field(default=0, ge=0)
    hard_stop: bool = True
    time_attr: str = "epoch"
    # the one metric the scheduler stops trials by: required with several objectives, else the spec's
    metric: str | None = Field(default=None, min_length=1)
    mode: Literal["min", "max"] | None = None


class HyperbandOptions(StrictModel):
    max_t: PositiveInt = 81
    reduction_factor: float = Field(default=3, gt=1)
    time_attr: str = "epoch"
    # the one metric the scheduler stops trials by: required with several objectives, else the spec's
    metric: str | None = Field(default=None, min_length=1)
    mode: Literal["min", "max"] | None = None


class PbtOptions(StrictModel):
    # checked against the search space in hpsearch.spec (pbt_problems): keys, types, bounds
    hyperparam_mutations: dict[str, Any] = Field(min_length=1)
    perturbation_interval: PositiveInt = 2
    quantile_fraction: float = Field(default=0.25, gt=0, le=0.5)
    resample_probability: float = Field(default=0.25, ge=0, le=1)
    perturbation_factors: list[PositiveFloat] = Field(default_factory=lambda: [1.2, 0.8], min_length=2, max_length=2)
    burn_in_period: int = Field(default=0, ge=0)
    synch: bool = False
    time_attr: str = "epoch"


class Pb2Options(StrictModel):
    # key -> [low, high]; checked against the search space in hpsearch.spec (pbt_problems)
    hyperparam_bounds: dict[str, list[float]] = Field(min_length=1)
    perturbation_interval: PositiveInt = 2
    quantile_fraction: float = Field(default=0.25, gt=0, le=0.5)
    synch: bool = False
    time_attr: str = "epoch"

    @model_validator(mode="after")
    def _check(self) -> Pb2Options:
        for key, bounds in self.hyperparam_bounds.items():
            if len(bounds) != 2:
                raise field_error(f"hyperparam_bounds.{key}", f"must be [low, high], got {bounds}")
            low, high = bounds
            if not low < high:
                raise field_error(
                    f"hyperparam_bounds.{key}", f"must be [low, high] with low < high, got [{low}, {high}]"
                )
        return self


#: The schedulers that exploit through checkpoints (population-based training).
POPULATION_SCHEDULERS = ("pbt", "pb2")


SCHEDULERS = Registry(
    "scheduler",
    [
        Plugin("fifo", FifoOptions, "run every trial to the end"),
        Plugin("asha", AshaOptions, "asynchronous successive halving (early stopping)"),
        Plugin("median", MedianOptions, "median stopping rule"),
        Plugin("hyperband", HyperbandOptions, "synchronous HyperBand (pauses and resumes trials)"),
        Plugin(
            "pbt",
            PbtOptions,
            "population-based training (exploits through the nested run's checkpoints)",
            example={"perturbation_interval": 2, "hyperparam_mutations": {"x": {"type": "float", "low": 0, "high": 1}}},
        ),
        Plugin(
            "pb2",
            Pb2Options,
            "PB2: population-based bandits (PBT guided by a Gaussian process)",
            example={"perturbation_interval": 2, "hyperparam_bounds": {"x": [0, 1]}},
        ),
    ],
    default="fifo",
)
