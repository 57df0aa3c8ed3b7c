"""The searchers and schedulers built from the spec's options.

:mod:`hpsearch.spec.plugins` owns the names and their typed options, so validation needs no
Ray. This module owns what each name builds, keyed by the same names. The names are written
once, in the spec's registries. Every registry name has exactly one builder here, and that is
checked when this module is imported.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import optuna

from hpsearch.runtime.search.drained_drivers import (
    DrainAwareASHA,
    DrainAwareFIFO,
    DrainAwareHyperBand,
    DrainAwareMedian,
)
from hpsearch.runtime.search.pbt import HpsearchPB2, HpsearchPBT
from hpsearch.runtime.search.room import GatedLimiter, GatedVariantGenerator
from hpsearch.runtime.search.searchers import (
    ConditionalVariantGenerator,
    HpsearchOptunaSearch,
    OptunaSpace,
    ResumableOptunaSearch,
)
from hpsearch.runtime.search.tune_space import to_tune
from hpsearch.spec.constraints import Constraint
from hpsearch.spec.plugins import (
    SCHEDULERS,
    SEARCHERS,
    AshaOptions,
    FifoOptions,
    HyperbandOptions,
    HyperoptOptions,
    MedianOptions,
    OptunaOptions,
    Pb2Options,
    PbtOptions,
    PluginChoice,
    RandomOptions,
    Registry,
)
from hpsearch.spec.space import is_conditional, nested_config, parse_search_space

__all__ = [
    "SearcherContext",
    "SchedulerContext",
    "build_searcher",
    "build_scheduler",
    "SEARCHER_BUILDERS",
    "SCHEDULER_BUILDERS",
]


@dataclass(frozen=True)
class SearcherContext:
    """What a searcher needs to know beyond its own options.

    ``metric``/``mode`` are lists (one item per objective, in the spec's order) when the
    search has several objectives; the spec refuses searchers that cannot take them.
    """

    metric: str | list[str]
    mode: str | list[str]
    max_concurrent: int
    # The tree the searcher samples, which is the trial's whole space. It is given when the search has
    # conditions or a warm start. With None, Ray converts Tune's param_space, as it does without either.
    space: Any = None
    # warm_start.points, which run first. Each is flat: dotted name -> value.
    points: tuple[dict[str, Any], ...] = ()
    # Earlier trials that seed the searcher without running again. Each is a flat config and one value per objective.
    seeds: tuple[tuple[dict[str, Any], tuple[float, ...]], ...] = ()
    # The spec's constraints: Optuna is told each trial's constraint values; HyperOpt, an infeasible trial's value
    # as the worst reported.
    constraints: tuple[Constraint, ...] = ()


@dataclass(frozen=True)
class SchedulerContext:
    """What a scheduler needs to know beyond its own options.

    With ``own``, the scheduler is built with ``metric``/``mode`` itself. A multi-objective
    search gives Tune no single metric to hand it (``TuneConfig(metric=None)``). And Ray
    refuses a scheduler with its own metric when Tune has one too.
    """

    metric: str
    mode: str
    own: bool = False
    # The experiment folder, for population-based training. Each exploit is recorded in its trial's folder under train/.
    experiment_dir: Any = None
    # With drivers on any node: the trials' folders (train/), where a driver drained says so
    # (runtime/search/drained_drivers.py); None leaves every scheduler as Ray's.
    drained_drivers: Any = None

    def kwargs(self) -> dict[str, Any]:
        """``metric=``/``mode=`` for the scheduler's constructor, when it is built with its own."""
        return {"metric": self.metric, "mode": self.mode} if self.own else {}


# ----------------------------------------------------------------------------- searchers


def _random_searcher(options: RandomOptions, ctx: SearcherContext) -> Any:
    points: dict[str, Any] = {"points_to_evaluate": [nested_config(p) for p in ctx.points]} if ctx.points else {}
    if ctx.space is not None and is_conditional(ctx.space):
        return ConditionalVariantGenerator(
            ctx.space, max_concurrent=ctx.max_concurrent, random_state=options.seed, **points
        )
    return GatedVariantGenerator(max_concurrent=ctx.max_concurrent, random_state=options.seed, **points)


class LocksRecreated:
    """Mixed before an Optuna sampler: pickled without its thread locks, which are made anew when unpickled.

    Tune pickles the searcher, and with it the sampler, into ``tuner.pkl`` when it builds the Tuner and
    at every experiment checkpoint. Optuna 5.1's genetic samplers (NSGA-II, NSGA-III) hold a
    ``threading.Lock`` around a cache they rebuild from the study, and a lock cannot be pickled, so the
    search died before its first trial. A lock is a process's own and no thread holds it between
    calls: an unlocked new one is what the sampler has in the process that unpickles it. The rest of
    the state (the random generator's, the cache) is pickled as it is.
    """

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if not isinstance(v, _LOCK_TYPES)}
        state["_hpsearch_locks"] = sorted(k for k, v in self.__dict__.items() if isinstance(v, _LOCK_TYPES))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        locks = state.pop("_hpsearch_locks", [])
        self.__dict__.update(state)
        for name in locks:
            setattr(self, name, threading.Lock())


_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


# The same class names as Optuna's: a genetic sampler keys its generations in the study by its class name.
class NSGAIISampler(LocksRecreated, optuna.samplers.NSGAIISampler):
    """Optuna's NSGA-II sampler, picklable on every supported Optuna (:class:`LocksRecreated`)."""


class NSGAIIISampler(LocksRecreated, optuna.samplers.NSGAIIISampler):
    """Optuna's NSGA-III sampler, picklable on every supported Optuna (:class:`LocksRecreated`)."""


def _optuna_sampler(options: OptunaOptions) -> Any:
    startup: dict[str, Any] = {} if options.n_startup_trials is None else {"n_startup_trials": options.n_startup_trials}
    if options.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=options.seed, **startup)
    if options.sampler == "gp":
        return optuna.samplers.GPSampler(seed=options.seed, **startup)
    if options.sampler == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=options.seed)
    if options.sampler == "nsga2":
        if options.population_size is None:
            return NSGAIISampler(seed=options.seed)
        return NSGAIISampler(seed=options.seed, population_size=options.population_size)
    if options.sampler == "nsga3":
        with warnings.catch_warnings():  # silence "NSGAIIISampler is experimental": it is, and the README says so
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            if options.population_size is None:
                return NSGAIIISampler(seed=options.seed)
            return NSGAIIISampler(seed=options.seed, population_size=options.population_size)
    return optuna.samplers.RandomSampler(seed=options.seed)


def _optuna_searcher(options: OptunaOptions, ctx: SearcherContext) -> Any:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if ctx.space is None or not (ctx.points or ctx.seeds or is_conditional(ctx.space)):
        searcher = ResumableOptunaSearch(
            sampler=_optuna_sampler(options),
            metric=ctx.metric,
            mode=ctx.mode,
            hp_failed_infeasible=options.failed_trials == "infeasible",
            hp_constraints=ctx.constraints,
            hp_mark_feasible=options.sampler != "cmaes",
        )
    else:  # a define-by-run space for conditions, where Tune's param_space is empty, and for the seeds
        searcher = HpsearchOptunaSearch(
            OptunaSpace(ctx.space) if is_conditional(ctx.space) else None,
            sampler=_optuna_sampler(options),
            metric=ctx.metric,
            mode=ctx.mode,
            hp_tree=ctx.space,
            hp_points=ctx.points,
            hp_seeds=ctx.seeds,
            hp_failed_infeasible=options.failed_trials == "infeasible",
            hp_constraints=ctx.constraints,
            hp_mark_feasible=options.sampler != "cmaes",
        )
    return GatedLimiter(searcher, max_concurrent=ctx.max_concurrent)


def _hyperopt_searcher(options: HyperoptOptions, ctx: SearcherContext) -> Any:
    # lazy: importing HyperOpt costs about 0.9 CPU-seconds, which a search with another searcher never pays
    from ray.tune.search.hyperopt import HyperOptSearch

    # lazy: as above
    from hpsearch.runtime.search.hyperopt_searchers import ConstrainedHyperOptSearch, HpsearchHyperOptSearch

    common: dict[str, Any] = {
        "metric": ctx.metric,
        "mode": ctx.mode,
        "n_initial_points": options.n_initial_points,
        "random_state_seed": options.seed,
    }
    searcher: HyperOptSearch
    if ctx.space is None or not (ctx.points or ctx.seeds or is_conditional(ctx.space)):
        if ctx.constraints:  # an infeasible trial told as the worst value so far
            searcher = ConstrainedHyperOptSearch(hp_constraints=ctx.constraints, **common)
        else:
            searcher = HyperOptSearch(**common)
    else:  # nested choices for conditions, where Tune's param_space is empty, and for the seeds
        searcher = HpsearchHyperOptSearch(
            hp_tree=ctx.space,
            hp_conditional=is_conditional(ctx.space),
            hp_points=ctx.points,
            hp_seeds=ctx.seeds,
            hp_constraints=ctx.constraints,
            **common,
        )
    return GatedLimiter(searcher, max_concurrent=ctx.max_concurrent)


# ----------------------------------------------------------------------------- schedulers


def _fifo(options: FifoOptions, ctx: SchedulerContext) -> Any:
    return DrainAwareFIFO(hp_trials_dir=ctx.drained_drivers)


def _asha(options: AshaOptions, ctx: SchedulerContext) -> Any:
    return DrainAwareASHA(
        hp_trials_dir=ctx.drained_drivers,
        time_attr=options.time_attr,
        max_t=options.max_t,
        grace_period=options.grace_period,
        reduction_factor=options.reduction_factor,
        brackets=options.brackets,
        **ctx.kwargs(),
    )


def _median(options: MedianOptions, ctx: SchedulerContext) -> Any:
    return DrainAwareMedian(
        hp_trials_dir=ctx.drained_drivers,
        time_attr=options.time_attr,
        grace_period=options.grace_period,
        min_samples_required=options.min_samples_required,
        min_time_slice=options.min_time_slice,  # Ray annotates int, but only compares it (a float passes)
        hard_stop=options.hard_stop,
        **ctx.kwargs(),
    )


def _hyperband(options: HyperbandOptions, ctx: SchedulerContext) -> Any:
    return DrainAwareHyperBand(
        hp_trials_dir=ctx.drained_drivers,
        time_attr=options.time_attr,
        max_t=options.max_t,
        reduction_factor=options.reduction_factor,
        **ctx.kwargs(),
    )


def _population(options: PbtOptions | Pb2Options, ctx: SchedulerContext) -> dict[str, Any]:
    """What PBT and PB2 are built with alike: their shared options and hpsearch's lineage record."""
    return {
        "time_attr": options.time_attr,
        "perturbation_interval": options.perturbation_interval,
        "quantile_fraction": options.quantile_fraction,
        "synch": options.synch,
        "log_config": False,  # hpsearch records each exploit itself, in the trial's folder
        "hp_experiment_dir": ctx.experiment_dir,
        **ctx.kwargs(),
    }


def _pbt(options: PbtOptions, ctx: SchedulerContext) -> Any:
    tree, _ = parse_search_space(options.hyperparam_mutations, "scheduler.hyperparam_mutations")
    return HpsearchPBT(
        burn_in_period=options.burn_in_period,
        hyperparam_mutations=to_tune(tree),
        resample_probability=options.resample_probability,
        perturbation_factors=(options.perturbation_factors[0], options.perturbation_factors[1]),
        **_population(options, ctx),
    )


def _pb2(options: Pb2Options, ctx: SchedulerContext) -> Any:
    return HpsearchPB2(
        hyperparam_bounds=nested_config({k: list(v) for k, v in options.hyperparam_bounds.items()}),
        **_population(options, ctx),
    )


#: What each searcher name builds: (its options, the context) -> a Tune searcher.
SEARCHER_BUILDERS: dict[str, Callable[[Any, SearcherContext], Any]] = {
    "random": _random_searcher,
    "optuna": _optuna_searcher,
    "hyperopt": _hyperopt_searcher,
}
#: What each scheduler name builds: (its options, the context) -> a Tune scheduler.
SCHEDULER_BUILDERS: dict[str, Callable[[Any, SchedulerContext], Any]] = {
    "fifo": _fifo,
    "asha": _asha,
    "median": _median,
    "hyperband": _hyperband,
    "pbt": _pbt,
    "pb2": _pb2,
}


def _check_builders(registry: Registry, builders: dict[str, Any]) -> None:
    """Fail at import when a registry name has no builder, or a builder no registry name."""
    if set(builders) != set(registry.names()):
        raise RuntimeError(
            f"hpsearch.runtime.search.plugins builds {registry.kind}s {sorted(builders)}, but the spec's registry "
            f"names {registry.names()}: add or remove the builder of each name in hpsearch.spec.plugins"
        )


_check_builders(SEARCHERS, SEARCHER_BUILDERS)
_check_builders(SCHEDULERS, SCHEDULER_BUILDERS)


def build_searcher(choice: PluginChoice, ctx: SearcherContext) -> Any:
    """The Tune searcher the spec chose, built with its validated options."""
    return SEARCHER_BUILDERS[choice.type](choice.options, ctx)


def build_scheduler(choice: PluginChoice, ctx: SchedulerContext) -> Any:
    """The Tune scheduler the spec chose, built with its validated options."""
    return SCHEDULER_BUILDERS[choice.type](choice.options, ctx)
