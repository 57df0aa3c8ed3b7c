"""Ray Tune's searchers for conditional spaces and warm starts, each through Ray's own mechanisms.

A conditional space (parameters with ``when``) reaches each searcher in its own idiom:

- Optuna: :class:`OptunaSpace`, a define-by-run function (``OptunaSearch(space=...)``): only the
  active parameters are suggested, so TPE models them as Optuna does; constants are returned too.
- HyperOpt (:mod:`hpsearch.runtime.search.hyperopt_searchers`, imported only by a search that uses
  it, because HyperOpt's import costs about 0.9 CPU-seconds): ``hyperopt_space``, nested ``hp.choice`` (each branch of a controlling choice
  carries the parameters that exist with that value); ``HpsearchHyperOptSearch`` turns a
  suggestion back into a flat config of the active parameters, and clears the inactive ones
  from the HyperOpt trial, so that TPE never learns from a value that was not used.
- random: Tune's own variant generation (every parameter drawn, grids over the combinations
  that can exist: :func:`hpsearch.spec.space.grid_points`), then
  :class:`ConditionalVariantGenerator` drops the inactive parameters from each trial before Tune
  records or runs it.

Warm-start points and earlier trials (:mod:`hpsearch.runtime.search.warm_start`) are given to the same
searchers:

- Optuna enqueues the points. It adds the earlier trials to its study, with their
  distributions and values (:class:`HpsearchOptunaSearch`).
- HyperOpt runs the points first, and holds the earlier trials as completed ones
  (``HpsearchHyperOptSearch``). This needs hpsearch's subclass, because Ray's
  ``HyperOptSearch`` has no ``evaluated_rewards``.
- The random searcher runs the points first (``points_to_evaluate``).

The earlier trials are added when a searcher's study is set up. ``Tuner.restore`` replaces
that study with the saved one, so ``hpsearch resume`` never adds them twice.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna
from ray.tune.search.optuna import OptunaSearch
from ray.tune.search.variant_generator import format_vars

from hpsearch import messages
from hpsearch.analysis._optuna import optuna_constraints, param_distribution
from hpsearch.experiment.metrics import report_value, report_violation
from hpsearch.experiment.ranking import metric_value
from hpsearch.runtime import internals
from hpsearch.runtime.internals import OptunaStudyHook, VariantHook
from hpsearch.runtime.search.room import GatedVariantGenerator
from hpsearch.runtime.search.tune_space import JOINT_GRID_KEY
from hpsearch.spec.constraints import Constraint
from hpsearch.spec.space import (
    ChoiceParam,
    ConstParam,
    FloatParam,
    GridParam,
    IntParam,
    Param,
    SearchSpace,
    active_config,
    condition_holds,
    flat_config,
    iter_params,
    ordered_params,
)

__all__ = [
    "Seed",
    "label",
    "complete_point",
    "searched_params",
    "OptunaSpace",
    "optuna_distribution",
    "ResumableOptunaSearch",
    "HpsearchOptunaSearch",
    "WorstWhenInfeasible",
    "ConditionalVariantGenerator",
    "FAILED_ATTR",
    "FAILED_CONSTRAINT",
]

#: The Optuna constraint an errored trial violates (``searcher.failed_trials: infeasible``), and the user
#: attribute that marks it failed.
FAILED_CONSTRAINT = "hpsearch_trial_failed"
FAILED_ATTR = "hpsearch_failed"

#: An earlier trial that seeds a searcher: its flat config (dotted name -> value) and its
#: value of each objective, in the spec's order.
Seed = tuple[dict[str, Any], tuple[float, ...]]


def label(name: str) -> str:
    """A dotted parameter name as Ray's searchers name it (``model.width`` -> ``model/width``)."""
    return name.replace(".", "/")


def complete_point(
    tree: SearchSpace, point: Mapping[str, Any], sample: Callable[[Param], Any] | None = None
) -> dict[str, Any]:
    """A point's active parameters (dotted name -> value), constants included; an active parameter
    the point leaves out is drawn with ``sample`` (left out without one)."""
    values: dict[str, Any] = {}
    for name, param in ordered_params(tree):
        if not condition_holds(param, values):
            continue
        if isinstance(param, ConstParam):
            values[name] = param.value
        elif name in point:
            values[name] = point[name]
        elif sample is not None:
            values[name] = sample(param)
    return values


def searched_params(tree: SearchSpace) -> dict[str, Param]:
    """The searched parameters of ``tree`` (constants left out), by dotted name."""
    return {name: p for name, p in iter_params(tree) if not isinstance(p, ConstParam)}


# ----------------------------------------------------------------------------- Optuna


def optuna_distribution(param: Param) -> Any:
    """The Optuna distribution of one parameter: the same as Ray's conversion of its Tune domain.

    The conversion is :func:`hpsearch.analysis._optuna.param_distribution`, which the exported
    study and the live study use too. One thing differs here: a choice's values are the choices
    themselves, not their text. That is because the value Optuna suggests is the value the
    trainable gets.
    """
    dist = param_distribution(param, text_choices=False)
    if dist is None or isinstance(param, GridParam):  # pragma: no cover  # the spec refuses grids for Optuna
        raise TypeError(f"no Optuna distribution for {param!r}")
    return dist


class OptunaSpace:
    """A define-by-run search space (``OptunaSearch(space=OptunaSpace(tree))``).

    Suggests each parameter whose condition holds, its controllers first, and returns the
    active constants; an instance pickles with the searcher's state (a closure would not).
    """

    def __init__(self, tree: SearchSpace) -> None:
        self.tree = tree

    def __call__(self, trial: Any) -> dict[str, Any]:
        values: dict[str, Any] = {}
        constants: dict[str, Any] = {}
        for name, param in ordered_params(self.tree):
            if not condition_holds(param, values):
                continue
            key = label(name)
            if isinstance(param, ConstParam):
                values[name] = constants[key] = param.value
            elif isinstance(param, FloatParam):
                values[name] = trial.suggest_float(key, param.low, param.high, log=param.log, step=param.step)
            elif isinstance(param, IntParam):
                values[name] = trial.suggest_int(key, param.low, param.high, log=param.log, step=param.step or 1)
            elif isinstance(param, ChoiceParam):
                values[name] = trial.suggest_categorical(key, list(param.values))
            else:  # pragma: no cover  # the spec refuses grids for Optuna
                raise TypeError(f"Optuna cannot search {param!r}")
        return constants

    def distributions(self) -> dict[str, Any]:
        """Every searched parameter's distribution, by Optuna name (``model/width``)."""
        return {label(name): optuna_distribution(p) for name, p in searched_params(self.tree).items()}


class ResumableOptunaSearch(OptunaStudyHook, OptunaSearch):
    """Ray's ``OptunaSearch``, able to resume a search that was killed.

    Tune saves its experiment state first and the searcher's state second, and a resumed search
    saves its first searcher state only after it has started trials. A search killed between the
    two writes (or the first writes of a resume) is restored with trials that the restored study
    never suggested. Ray's ``OptunaSearch`` then fails the whole search with a ``KeyError`` at
    their first result. Here such a trial runs to its end and its results reach the experiment
    folder as any other's; Optuna does not learn from them, and a line says so once per trial.
    """

    #: Tell an errored trial as infeasible (``searcher.failed_trials: infeasible``), else as failed. A searcher
    #: pickled by an older hpsearch has no such attribute: it tells it failed, as it did.
    _hp_failed_infeasible = False
    #: The spec's constraints: each trial is told with one Optuna constraint per constrained metric.
    _hp_constraints: tuple[Constraint, ...] = ()
    #: Tell every trial that did not fail so (the failed-trial constraint at 0), for a sampler that needs the same
    #: constraints on every trial (GP); not for CMA-ES, which warns at each trial with constraints it ignores.
    _hp_mark_feasible = False

    def __init__(
        self,
        *args: Any,
        hp_failed_infeasible: bool = False,
        hp_constraints: Sequence[Constraint] = (),
        hp_mark_feasible: bool = True,
        **kwargs: Any,
    ) -> None:
        self._hp_unknown: set[str] = set()
        self._hp_failed_infeasible = hp_failed_infeasible
        self._hp_constraints = tuple(hp_constraints)
        self._hp_mark_feasible = hp_mark_feasible
        self._hp_last = {}
        super().__init__(*args, **kwargs)

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        if self._hp_known(trial_id):
            self._hp_see(trial_id, result)
            super().on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        if not self._hp_known(trial_id):
            return
        if not error:
            self._hp_see(trial_id, result or {})
            # Every told trial gets the same constraints, in the same order: the spec's (its value of each, at
            # the report Ray tells as its value), then the failed-trial one (0: it did not fail). Optuna's GP
            # sampler refuses trials with different numbers of constraints.
            told = {
                **self._hp_constraint_values(result or {}),
                **({FAILED_CONSTRAINT: 0.0} if self._hp_failed_infeasible and self._hp_mark_feasible else {}),
            }
            if told:
                self.set_constraints(trial_id, told)
            (self._hp_last or {}).pop(trial_id, None)
            super().on_trial_complete(trial_id, result=result, error=False)
            return
        # An errored trial is never told as complete with the value it reached before it failed: that would
        # send the sampler back to the region where trials crash. Told as infeasible (complete, with the worst
        # value the other trials reported so far and a violated constraint), the samplers that take constraints
        # (TPE, GP, NSGA-II/III) rank it after every feasible trial and learn to avoid its region; told as
        # failed, they skip it. Before any other trial reported a value it is told as failed.
        worst = self._hp_worst(but=trial_id)
        (self._hp_seen or {}).pop(trial_id, None)  # a failed trial's values rank no other trial
        last = self._hp_constraint_values((self._hp_last or {}).pop(trial_id, {}))  # its last report's, if any
        if not (self._hp_failed_infeasible and worst is not None and self.tell_infeasible(trial_id, _one(worst), last)):
            super().on_trial_complete(trial_id, result=None, error=True)

    def tell_infeasible(
        self, trial_id: str, values: float | list[float], constraints: Mapping[str, float] | None = None
    ) -> bool:
        """Tell the study that this Tune trial errored, as infeasible: COMPLETE with ``values``, the spec's
        ``constraints`` (name -> Optuna's constraint value, set first, as every other trial's are) and the
        constraint :data:`FAILED_CONSTRAINT` violated (Optuna's ``Trial.set_constraint``; a trial without one is
        feasible), marked failed in its user attributes (internal ``optuna-failed-trials``). Whether it
        could (else the caller tells it Ray's way)."""
        if not internals.available("optuna-failed-trials"):
            return False
        trial = self.optuna_trial(trial_id)
        for name, value in (constraints or {}).items():
            trial.set_constraint(name, value)
        trial.set_constraint(FAILED_CONSTRAINT, 1.0)
        trial.set_user_attr(FAILED_ATTR, True)
        self.tell_study(trial_id, values, optuna.trial.TrialState.COMPLETE)
        return True

    def _hp_constraint_values(self, result: Mapping[str, Any]) -> dict[str, float]:
        """Optuna's value of each of the spec's constraints in ``result`` (feasible when at most 0)."""
        return optuna_constraints(result, self._hp_constraints)

    #: Per trial, per objective, the worst finite value it reported (a searcher pickled by an older hpsearch
    #: starts with none).
    _hp_seen: dict[str, list[float]] | None = None
    #: Per trial, its last report's value of each constrained metric (a searcher pickled by an older hpsearch
    #: starts with none).
    _hp_last: dict[str, dict[str, Any]] | None = None

    def _hp_see(self, trial_id: str, result: Mapping[str, Any]) -> None:
        if self._hp_constraints:  # what the trial is told with if it then errors
            if self._hp_last is None:
                self._hp_last = {}
            self._hp_last[trial_id] = {c.metric: report_value(result, c.metric) for c in self._hp_constraints}
        metrics = self.metric if isinstance(self.metric, list) else [self.metric]
        values = [metric_value(result.get(m)) if m else None for m in metrics]
        if any(v is None or not math.isfinite(v) for v in values):
            return
        if self._hp_seen is None:
            self._hp_seen = {}
        seen = self._hp_seen.get(trial_id)
        self._hp_seen[trial_id] = self._hp_worse([float(v) for v in values if v is not None], seen)

    def _hp_worse(self, a: list[float], b: list[float] | None) -> list[float]:
        modes = self.mode if isinstance(self.mode, list) else [self.mode]
        if b is None:
            return a
        return [max(x, y) if modes[i] == "min" else min(x, y) for i, (x, y) in enumerate(zip(a, b))]

    def _hp_worst(self, *, but: str) -> list[float] | None:
        """Per objective, the worst value the other trials reported so far (``None``: none has)."""
        worst: list[float] | None = None
        for trial_id, values in (self._hp_seen or {}).items():
            if trial_id != but:
                worst = self._hp_worse(values, worst)
        return worst

    def _hp_known(self, trial_id: str) -> bool:
        if self.knows_trial(trial_id):
            return True
        if trial_id not in self._hp_unknown:
            self._hp_unknown.add(trial_id)
            messages.line(
                f"optuna: trial {trial_id} was started after the searcher's last saved state (the search was "
                "killed); it runs to its end, but Optuna does not learn from its results"
            )
        return False


def _one(values: list[float]) -> float | list[float]:
    """Optuna's value for one objective, its list for several."""
    return values if len(values) > 1 else values[0]


class HpsearchOptunaSearch(ResumableOptunaSearch):
    """``OptunaSearch`` that, once its study exists, enqueues warm-start points and adds earlier trials.

    ``hp_points``: flat configs, run first (a left-out active parameter is sampled by Optuna);
    ``hp_seeds``: earlier trials, added as completed trials with their distributions and
    values (one value per objective). Works with Ray's converted space (a dict of
    distributions) and with :class:`OptunaSpace`.
    """

    def __init__(
        self,
        *args: Any,
        hp_tree: SearchSpace,
        hp_points: Sequence[Mapping[str, Any]] = (),
        hp_seeds: Sequence[Seed] = (),
        **kwargs: Any,
    ) -> None:
        self._hp_tree = hp_tree
        self._hp_points = [dict(p) for p in hp_points]
        self._hp_seeds = list(hp_seeds)
        super().__init__(*args, **kwargs)  # builds the study at once when given a space

    def after_study_setup(self, study: Any, space: Any, metric: str | list[str] | None) -> None:
        searched = searched_params(self._hp_tree)
        # space: Ray's converted dict of distributions, or an OptunaSpace
        known = space.distributions() if isinstance(space, OptunaSpace) else dict(space or {})
        # The same constraints as every trial the search tells (Optuna's GP sampler needs one count); an earlier
        # trial's values of the constrained metrics are not part of a seed, so it counts as feasible.
        failed = self._hp_failed_infeasible and self._hp_mark_feasible
        keys = [c.metric for c in self._hp_constraints] + [FAILED_CONSTRAINT] * failed
        constraints = dict.fromkeys(keys, 0.0) or None
        for config, values in self._hp_seeds:
            params = {label(k): v for k, v in config.items() if k in searched}
            distributions = {k: known[k] for k in params}
            if isinstance(metric, list):  # one value per objective
                trial = optuna.trial.create_trial(
                    params=params, distributions=distributions, values=list(values), constraints=constraints
                )
            else:
                trial = optuna.trial.create_trial(
                    params=params, distributions=distributions, value=values[0], constraints=constraints
                )
            study.add_trial(trial)
        for point in self._hp_points:
            study.enqueue_trial({label(k): v for k, v in point.items() if k in searched})


# ----------------------------------------------------------------------------- constraints, for searchers without them


class WorstWhenInfeasible:
    """Mixed before a single-objective Tune ``Searcher`` that takes no constraints (HyperOpt): a trial whose
    final result violates the spec's constraints is told with the worst value of the metric reported so far,
    by any trial, so that the searcher ranks it below every trial it has seen. Only Tune's public
    ``Searcher`` API (``metric``, ``mode``, ``on_trial_result``, ``on_trial_complete``) is used."""

    _hp_constraints: tuple[Constraint, ...] = ()
    _hp_worst_value: float | None = None

    def __init__(self, *args: Any, hp_constraints: Sequence[Constraint] = (), **kwargs: Any) -> None:
        self._hp_constraints = tuple(hp_constraints)
        self._hp_worst_value = None
        super().__init__(*args, **kwargs)

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self._hp_note(result)
        super().on_trial_result(trial_id, result)  # type: ignore[misc]  # the Searcher's, next in the MRO

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        if result is not None and not error and self._hp_constraints:
            self._hp_note(result)
            metric = self.metric  # type: ignore[attr-defined]  # the Searcher's
            if report_violation(result, self._hp_constraints) > 0 and self._hp_worst_value is not None:
                result = {**result, metric: self._hp_worst_value}
        super().on_trial_complete(trial_id, result=result, error=error)  # type: ignore[misc]  # the Searcher's

    def _hp_note(self, result: Mapping[str, Any]) -> None:
        if not self._hp_constraints:
            return
        value = metric_value(report_value(result, self.metric))  # type: ignore[attr-defined]  # the Searcher's
        if value is None or not math.isfinite(value):
            return
        worst = self._hp_worst_value
        lower_is_better = self.mode == "min"  # type: ignore[attr-defined]  # the Searcher's
        if worst is None or (value > worst if lower_is_better else value < worst):
            self._hp_worst_value = value


# ----------------------------------------------------------------------------- random


class ConditionalVariantGenerator(VariantHook, GatedVariantGenerator):
    """Tune's variant generator, with each trial's inactive parameters dropped before Tune records it.

    Tune draws every parameter (and expands the one grid of :func:`hpsearch.runtime.search.tune_space.to_tune`
    over the combinations that can exist); this puts the grid's values in their places and
    removes the parameters whose condition is false from the trial's config, its evaluated
    parameters and its tag, so neither the trial folder, ``params.json``, ``result.json`` nor
    the loop's ``train_loop_config`` holds them.
    """

    def __init__(self, tree: SearchSpace, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._hp_tree = tree

    def on_new_trial(self, trial: Any) -> None:
        keep_active(trial, self._hp_tree)


def keep_active(trial: Any, tree: SearchSpace) -> None:
    """Drop a Tune trial's inactive parameters, in place (the trial has not been added to Tune yet)."""
    config = trial.config
    joint = config.pop(JOINT_GRID_KEY, None) or {}
    for name, value in joint.items():
        _assign(config, name, copy.deepcopy(value))
    flat = flat_config(tree, config)
    active = active_config(tree, flat)
    for name in flat:
        if name not in active:
            _delete(config, name)
    searched = searched_params(tree)
    trial.evaluated_params = {label(k): v for k, v in active.items() if k in searched}
    number = str(trial.experiment_tag).split("_", 1)[0]
    tag = format_vars({tuple(k.split("/")): v for k, v in trial.evaluated_params.items()})
    trial.experiment_tag = f"{number}_{tag}" if tag else number


def _assign(config: dict[str, Any], name: str, value: Any) -> None:
    *groups, last = name.split(".")
    node = config
    for group in groups:
        node = node.setdefault(group, {})
    node[last] = value


def _delete(config: dict[str, Any], name: str) -> None:
    *groups, last = name.split(".")
    trail = [config]
    for group in groups:
        child = trail[-1].get(group)
        if not isinstance(child, dict):
            return
        trail.append(child)
    trail[-1].pop(last, None)
    for parent, group in zip(reversed(trail[:-1]), reversed(groups)):  # groups left empty go too
        if parent.get(group) == {}:
            del parent[group]


def finite(values: Sequence[Any]) -> bool:
    """Whether every value is a finite number (a seed needs one per objective)."""
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)
