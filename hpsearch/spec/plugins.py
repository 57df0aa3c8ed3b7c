"""Searchers and schedulers, chosen by name from the spec.

One registry per kind. Each entry is a typed option model (validated with the spec,
so a misspelled option fails before Ray starts; Ray's own factories would silently
drop it) and a builder that imports the backing library only when it is used.
Adding a plug-in is one :class:`Plugin` in :data:`SEARCHERS` or :data:`SCHEDULERS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
    "SearcherContext",
    "SchedulerContext",
    "POPULATION_SCHEDULERS",
]

OptionsT = TypeVar("OptionsT", bound=StrictModel)


@dataclass(frozen=True)
class SearcherContext:
    """What a searcher needs to know beyond its own options.

    ``metric``/``mode`` are lists (one item per objective, in the spec's order) when the
    search has several objectives; the spec refuses searchers that cannot take them.
    """

    metric: str | list[str]
    mode: str | list[str]
    max_concurrent: int
    # the tree the searcher samples (the trial's whole space), when it has conditions or a warm
    # start to give it; None: Ray converts Tune's param_space, as without either
    space: Any = None
    # warm_start.points (flat: dotted name -> value), run first; earlier trials (flat config,
    # one value per objective) that seed the searcher without running again
    points: tuple[dict[str, Any], ...] = ()
    seeds: tuple[tuple[dict[str, Any], tuple[float, ...]], ...] = ()


@dataclass(frozen=True)
class SchedulerContext:
    """What a scheduler needs to know beyond its own options.

    With ``own``, the scheduler is built with ``metric``/``mode`` itself: a multi-objective
    search gives Tune no single metric to hand it (``TuneConfig(metric=None)``), and Ray
    refuses a scheduler with its own metric when Tune has one too.
    """

    metric: str
    mode: str
    own: bool = False
    # population-based training: the experiment folder (each exploit is recorded in its trial's
    # folder under train/) and where to print a line per exploit
    experiment_dir: Any = None
    stream: Any = None

    def kwargs(self) -> dict[str, Any]:
        """``metric=``/``mode=`` for the scheduler's constructor, when it is built with its own."""
        return {"metric": self.metric, "mode": self.mode} if self.own else {}


@dataclass(frozen=True)
class Plugin(Generic[OptionsT]):
    """A named searcher or scheduler: its options model and how to build it."""

    name: str
    options: type[OptionsT]
    build: Callable[[OptionsT, Any], Any]
    summary: str
    accepts_grid: bool = False


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

    def build(self, choice: PluginChoice, context: Any) -> Any:
        return self.plugins[choice.type].build(choice.options, context)


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


def _random_searcher(options: RandomOptions, ctx: SearcherContext) -> Any:
    from ray.tune.search.basic_variant import BasicVariantGenerator

    from hpsearch.spec.space import is_conditional, nested_config

    points: dict[str, Any] = {"points_to_evaluate": [nested_config(p) for p in ctx.points]} if ctx.points else {}
    if ctx.space is not None and is_conditional(ctx.space):
        from hpsearch.runtime.searchers import ConditionalVariantGenerator

        return ConditionalVariantGenerator(
            ctx.space, max_concurrent=ctx.max_concurrent, random_state=options.seed, **points
        )
    return BasicVariantGenerator(max_concurrent=ctx.max_concurrent, random_state=options.seed, **points)


def _optuna_sampler(options: OptunaOptions) -> Any:
    import optuna

    startup: dict[str, Any] = {} if options.n_startup_trials is None else {"n_startup_trials": options.n_startup_trials}
    if options.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=options.seed, **startup)
    if options.sampler == "gp":
        return optuna.samplers.GPSampler(seed=options.seed, **startup)
    if options.sampler == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=options.seed)
    if options.sampler == "nsga2":
        if options.population_size is None:
            return optuna.samplers.NSGAIISampler(seed=options.seed)
        return optuna.samplers.NSGAIISampler(seed=options.seed, population_size=options.population_size)
    if options.sampler == "nsga3":
        import warnings

        with warnings.catch_warnings():  # "NSGAIIISampler is experimental": it is, and the README says so
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            if options.population_size is None:
                return optuna.samplers.NSGAIIISampler(seed=options.seed)
            return optuna.samplers.NSGAIIISampler(seed=options.seed, population_size=options.population_size)
    return optuna.samplers.RandomSampler(seed=options.seed)


def _optuna_searcher(options: OptunaOptions, ctx: SearcherContext) -> Any:
    import optuna
    from ray.tune.search import ConcurrencyLimiter
    from ray.tune.search.optuna import OptunaSearch

    from hpsearch.spec.space import is_conditional

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if ctx.space is None or not (ctx.points or ctx.seeds or is_conditional(ctx.space)):
        searcher = OptunaSearch(sampler=_optuna_sampler(options), metric=ctx.metric, mode=ctx.mode)
    else:  # a define-by-run space for conditions (Tune's param_space is then empty), and the seeds
        from hpsearch.runtime.searchers import HpsearchOptunaSearch, OptunaSpace

        searcher = HpsearchOptunaSearch(
            OptunaSpace(ctx.space) if is_conditional(ctx.space) else None,
            sampler=_optuna_sampler(options),
            metric=ctx.metric,
            mode=ctx.mode,
            hp_tree=ctx.space,
            hp_points=ctx.points,
            hp_seeds=ctx.seeds,
        )
    return ConcurrencyLimiter(searcher, max_concurrent=ctx.max_concurrent)


def _hyperopt_searcher(options: HyperoptOptions, ctx: SearcherContext) -> Any:
    from ray.tune.search import ConcurrencyLimiter
    from ray.tune.search.hyperopt import HyperOptSearch

    from hpsearch.spec.space import is_conditional

    common: dict[str, Any] = {
        "metric": ctx.metric,
        "mode": ctx.mode,
        "n_initial_points": options.n_initial_points,
        "random_state_seed": options.seed,
    }
    if ctx.space is None or not (ctx.points or ctx.seeds or is_conditional(ctx.space)):
        searcher = HyperOptSearch(**common)
    else:  # nested choices for conditions (Tune's param_space is then empty), and the seeds
        from hpsearch.runtime.searchers import HpsearchHyperOptSearch

        searcher = HpsearchHyperOptSearch(
            hp_tree=ctx.space,
            hp_conditional=is_conditional(ctx.space),
            hp_points=ctx.points,
            hp_seeds=ctx.seeds,
            **common,
        )
    return ConcurrencyLimiter(searcher, max_concurrent=ctx.max_concurrent)


SEARCHERS = Registry(
    "searcher",
    [
        Plugin(
            "random",
            RandomOptions,
            _random_searcher,
            "random sampling and grids (Tune's basic variant generator)",
            accepts_grid=True,
        ),
        Plugin("optuna", OptunaOptions, _optuna_searcher, "Optuna samplers: tpe, cmaes, gp, random, nsga2, nsga3"),
        Plugin("hyperopt", HyperoptOptions, _hyperopt_searcher, "HyperOpt's tree-structured Parzen estimator"),
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


def _fifo(options: FifoOptions, ctx: SchedulerContext) -> Any:
    from ray.tune.schedulers import FIFOScheduler

    return FIFOScheduler()  # type: ignore[no-untyped-call]  # Ray's __init__ has no annotations


def _asha(options: AshaOptions, ctx: SchedulerContext) -> Any:
    from ray.tune.schedulers import ASHAScheduler

    return ASHAScheduler(
        time_attr=options.time_attr,
        max_t=options.max_t,
        grace_period=options.grace_period,
        reduction_factor=options.reduction_factor,
        brackets=options.brackets,
        **ctx.kwargs(),
    )


def _median(options: MedianOptions, ctx: SchedulerContext) -> Any:
    from ray.tune.schedulers import MedianStoppingRule

    return MedianStoppingRule(
        time_attr=options.time_attr,
        grace_period=options.grace_period,
        min_samples_required=options.min_samples_required,
        min_time_slice=options.min_time_slice,  # type: ignore[arg-type]  # Ray annotates int; it only compares it
        hard_stop=options.hard_stop,
        **ctx.kwargs(),
    )


def _hyperband(options: HyperbandOptions, ctx: SchedulerContext) -> Any:
    from ray.tune.schedulers import HyperBandScheduler

    return HyperBandScheduler(
        time_attr=options.time_attr, max_t=options.max_t, reduction_factor=options.reduction_factor, **ctx.kwargs()
    )


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


def _population(options: PbtOptions | Pb2Options, ctx: SchedulerContext) -> dict[str, Any]:
    """What PBT and PB2 are built with alike: their shared options and hpsearch's lineage record."""
    return {
        "time_attr": options.time_attr,
        "perturbation_interval": options.perturbation_interval,
        "quantile_fraction": options.quantile_fraction,
        "synch": options.synch,
        "log_config": False,  # hpsearch records each exploit itself, in the trial's folder
        "hp_experiment_dir": ctx.experiment_dir,
        "hp_stream": ctx.stream,
        **ctx.kwargs(),
    }


def _pbt(options: PbtOptions, ctx: SchedulerContext) -> Any:
    from hpsearch.runtime.pbt import HpsearchPBT
    from hpsearch.spec.space import parse_search_space, to_tune

    tree, _ = parse_search_space(options.hyperparam_mutations, "scheduler.hyperparam_mutations")
    return HpsearchPBT(
        burn_in_period=options.burn_in_period,
        hyperparam_mutations=to_tune(tree),
        resample_probability=options.resample_probability,
        perturbation_factors=(options.perturbation_factors[0], options.perturbation_factors[1]),
        **_population(options, ctx),
    )


def _pb2(options: Pb2Options, ctx: SchedulerContext) -> Any:
    from hpsearch.runtime.pbt import HpsearchPB2
    from hpsearch.spec.space import nested_config

    return HpsearchPB2(
        hyperparam_bounds=nested_config({k: list(v) for k, v in options.hyperparam_bounds.items()}),
        **_population(options, ctx),
    )


SCHEDULERS = Registry(
    "scheduler",
    [
        Plugin("fifo", FifoOptions, _fifo, "run every trial to the end"),
        Plugin("asha", AshaOptions, _asha, "asynchronous successive halving (early stopping)"),
        Plugin("median", MedianOptions, _median, "median stopping rule"),
        Plugin("hyperband", HyperbandOptions, _hyperband, "synchronous HyperBand (pauses and resumes trials)"),
        Plugin("pbt", PbtOptions, _pbt, "population-based training (exploits through the nested run's checkpoints)"),
        Plugin("pb2", Pb2Options, _pb2, "PB2: population-based bandits (PBT guided by a Gaussian process)"),
    ],
    default="fifo",
)
