"""A search's trials as Optuna sees them: distributions and ``FrozenTrial`` objects, without storage.

The pure conversion behind :func:`hpsearch.to_optuna_study` (which adds the storage) and
:func:`hpsearch.analysis.param_importances` (which runs Optuna's evaluators on it). Optuna
is imported inside the functions: reading results does not need it.

Each trial becomes an Optuna trial. It gets its parameters, with distributions from the
spec, so log scales and steps carry over. It gets its intermediate values: the metric at
every iteration. And it gets its outcome:

- finished -> ``COMPLETE``;
- stopped early by the scheduler -> ``PRUNED``, or ``COMPLETE`` with ``stopped_as_complete``;
- errored -> ``FAIL``;
- running -> ``RUNNING``;
- pending -> ``WAITING``.

A complete trial's value is its best value of the metric, by the same ranking rule as
everywhere else (:mod:`hpsearch.experiment.ranking`, ``Results.trials["best"]``).

Optuna takes only finite numbers as the value of a complete trial. A trial that would be
complete but has no finite best (it reported only NaN or ±inf, or never reported the
metric) is exported ``FAIL``, and its ``fail_reason`` user attribute says why; so
Optuna's best trial is hpsearch's best trial. Intermediate values that are not finite
numbers are left out (the trial's history keeps them).

With the spec's ``constraints``, each trial's constraint values at its best report (its point,
under several objectives) are Optuna's constraint values, feasible when at most 0: in
``system_attrs["constraints"]``, the list optuna-dashboard reads to show feasibility (Optuna
reads it as constraints ``"0"``, ``"1"``, … in the spec's order), and in the ``constraints``
user attribute by name. So Optuna's ``best_trial`` is hpsearch's best feasible trial.

A search with several objectives is exported with ``frozen_trials(..., multi_objective=True)``.
Its study then has one direction per objective (:func:`directions`). A complete trial's
``values`` are its point: every objective, read from the report with the trial's best first
objective (:mod:`hpsearch.experiment.ranking`). So Optuna's ``best_trials`` are hpsearch's
Pareto front, without its ``PRUNED`` trials. Those have no values in Optuna, but every
trial's ``point`` user attribute holds its point. A complete trial whose point has a missing
or non-finite value is ``FAIL``, with its ``fail_reason``. Intermediate values stay those of
the first objective.
"""

from __future__ import annotations

import datetime as dt
import math
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from hpsearch.analysis._params import MIN_TRIALS_FOR_IMPORTANCE, ParamAxis, _count_note, _hashable, param_axis
from hpsearch.analysis._pareto import front_of
from hpsearch.analysis._results import python_value
from hpsearch.experiment.layout import ERRORED, FINISHED, PENDING, RUNNING, STOPPED
from hpsearch.experiment.metrics import report_value
from hpsearch.experiment.ranking import metric_value
from hpsearch.formatting import number
from hpsearch.spec.space import ChoiceParam, FloatParam, GridParam, IntParam

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping, Sequence

    import optuna

    from hpsearch.analysis._results import Results
    from hpsearch.experiment.ranking import ParetoPoint
    from hpsearch.spec.constraints import Constraint
    from hpsearch.spec.space import Param

__all__ = [
    "STATES",
    "LIVE_ATTR",
    "optuna_distributions",
    "space_distributions",
    "param_distribution",
    "trial_params",
    "trial_outcome",
    "intermediate_value",
    "optuna_constraints",
    "study_attrs",
    "study_owner",
    "OWNER_ATTR",
    "frozen_trials",
    "in_memory_study",
    "direction",
    "directions",
    "study_direction",
    "ParamImportances",
    "param_importances",
]

#: hpsearch status -> Optuna trial state.
STATES = {FINISHED: "COMPLETE", STOPPED: "PRUNED", ERRORED: "FAIL", RUNNING: "RUNNING", PENDING: "WAITING"}
_STATE_NAMES: dict[str, str] = {str(k): v for k, v in STATES.items()}  # by any status text


def study_direction(mode: str) -> Literal["minimize", "maximize"]:
    """Optuna's study direction for a search's mode (``"min"`` or ``"max"``)."""
    return "minimize" if mode == "min" else "maximize"


def direction(results: Results) -> Literal["minimize", "maximize"]:
    """Optuna's study direction for the search's mode."""
    return study_direction(results.mode)


def directions(results: Results) -> list[Literal["minimize", "maximize"]]:
    """Optuna's study directions, one per objective in the spec's order."""
    return [study_direction(mode) for _, mode in results.objectives]


#: The study user attribute the live ``optuna`` tracker adds: an export of the same folder replaces such a study.
LIVE_ATTR = "hpsearch_written_live"
#: The study user attribute that names the experiment folder whose search wrote the study.
OWNER_ATTR = "hpsearch_experiment_dir"


def study_attrs(experiment_dir: Any, metric: str, mode: str) -> dict[str, str]:
    """The study's user attributes: which experiment folder it holds, and the metric. The export and the
    live ``optuna`` tracker write the same ones; the folder is how either knows a study is this search's."""
    return {OWNER_ATTR: str(experiment_dir), "metric": metric, "mode": mode}


def study_owner(attrs: Mapping[str, Any]) -> str:
    """The experiment folder a study's user attributes name as the search that wrote it (``""``: another
    tool's study). The one reading of "is this study ours", for the export and the live tracker alike."""
    return str(attrs.get(OWNER_ATTR) or "")


def optuna_distributions(results: Results) -> dict[str, Any]:
    """Parameter -> Optuna distribution, for every searched parameter (from the spec where it has one)."""
    out: dict[str, Any] = {}
    for name in results.params:
        dist = _distribution(param_axis(results, name), results.space.get(name))
        if dist is not None:
            out[name] = dist
    return out


def space_distributions(space: Mapping[str, Param], params: Sequence[str]) -> dict[str, Any]:
    """Parameter -> Optuna distribution from the spec's search space alone (the live ``optuna`` tracker's
    view, before any trial has a value): the same distributions :func:`optuna_distributions` gives a
    search with a spec."""
    out: dict[str, Any] = {}
    for name in params:
        param = space.get(name)
        dist = None if param is None else param_distribution(param)
        if dist is not None:
            out[name] = dist
    return out


def param_distribution(param: Param, *, text_choices: bool = True) -> Any:
    """One spec parameter's Optuna distribution, or ``None`` for a constant (nothing is searched).

    The one rule for every Optuna study hpsearch makes: the searcher's (:mod:`hpsearch.runtime.search.searchers`),
    the export's and the live tracker's. Floats and ints keep their bounds, ``log`` and ``step``; a
    ``choice`` (or ``grid``) is categorical over its values, in the spec's order.

    ``text_choices``: a value Optuna's storage cannot hold as a choice (a list, a dict) is its text
    (``[64, 64]``), each once: what the exported and the live study hold, so that they store without
    Optuna's warning and read alike. The searcher's study passes ``False``: its choices are the values
    themselves, since the value Optuna suggests is the one the trainable gets, and a seeded trial's
    distribution must equal the one ``suggest_categorical`` (or Ray's conversion of the Tune domain)
    registered.
    """
    if isinstance(param, (FloatParam, IntParam)):
        kind = "int" if isinstance(param, IntParam) else "float"
        return _make(kind, bool(param.log), float(param.low), float(param.high), param.step)
    if isinstance(param, (ChoiceParam, GridParam)):
        if not text_choices:  # as given, as Tune's `choice` and `suggest_categorical` take them
            return _make("categorical", choices=list(param.values))
        return _make("categorical", choices=[_choice(c) for c in dict.fromkeys(_hashable(v) for v in param.values)])
    return None


def _distribution(axis: ParamAxis, param: Any) -> Any:
    """A parameter's Optuna distribution from its axis (the spec's, or one read from the trials' values)."""
    if isinstance(param, (FloatParam, IntParam)):
        return param_distribution(param)
    if axis.kind == "categorical":  # the spec's choices and any other value a trial ran with
        return _make("categorical", choices=[_choice(c) for c in axis.categories])
    return _make(axis.kind, axis.log, axis.low, axis.high, None)


def _make(
    kind: str,
    log: bool = False,
    low: float | None = None,
    high: float | None = None,
    step: float | None = None,
    *,
    choices: Sequence[Any] = (),
) -> Any:
    """Optuna's distribution of one kind, or ``None`` when it would be empty (no choices, an empty range)."""
    # lazy: optuna is heavy, and this module is imported by every reading of results, which needs no Optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if kind == "categorical":
        return CategoricalDistribution(list(choices)) if choices else None
    if low is None or high is None or not low < high:
        return None
    if kind == "int":
        return IntDistribution(int(low), int(high), log=log, step=int(step or 1))
    return FloatDistribution(low, high, log=log, step=step)


def trial_params(distributions: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A trial's ``(params, distributions)`` as Optuna takes them: each searched value of the flat
    ``config`` that fits its distribution (a value outside it is left out rather than refused)."""
    params, dists = {}, {}
    for name, dist in distributions.items():
        choice = _choice(_plain(config.get(name)))
        if _fits(dist, choice):
            params[name], dists[name] = choice, dist
    return params, dists


def trial_outcome(
    status: str, best: float | None, metric: str, *, stopped_as_complete: bool = False
) -> tuple[str, float | None, str | None]:
    """A trial's Optuna ``(state name, value, fail_reason)`` from its hpsearch status and best value
    (the ranking's, ``None`` when it reported no number): the module's rules, for the export and
    the live tracker alike."""
    state = "COMPLETE" if status == STOPPED and stopped_as_complete else _STATE_NAMES.get(status, "FAIL")
    value = best if best is not None and math.isfinite(best) else None
    reason = None
    if state == "COMPLETE" and value is None:
        state = "FAIL"  # Optuna takes no NaN, no ±inf and no missing value for a complete trial
        reason = (
            f"it reported no number for {metric}"
            if best is None
            else f"its best {metric} ({number(best)}) is not a finite number"
        )
    return state, (value if state == "COMPLETE" else None), reason


def optuna_constraints(report: Mapping[str, Any], constraints: Sequence[Constraint]) -> dict[str, float]:
    """Each constraint's value in ``report`` as Optuna takes it, by metric, in the spec's order: its excess
    (:meth:`hpsearch.spec.constraints.Constraint.excess`), feasible when at most 0. A value that was not a
    finite number (excess ``inf``) is the largest float, which every storage and optuna-dashboard can write
    as JSON. The searcher, the live tracker and the export all tell Optuna these."""
    out = {}
    for constraint in constraints:
        excess = constraint.excess(report_value(report, constraint.metric))
        out[constraint.metric] = excess if math.isfinite(excess) else sys.float_info.max
    return out


def intermediate_value(raw: Any) -> float | None:
    """A report's value of the metric as an Optuna intermediate value: finite numbers only."""
    value = metric_value(raw)
    return value if value is not None and math.isfinite(value) else None


def frozen_trials(results: Results, *, stopped_as_complete: bool = False, multi_objective: bool = False) -> list[Any]:
    """One ``optuna.trial.FrozenTrial`` per trial of ``results``, in creation order (see the module's rules).

    ``multi_objective``: each trial's ``values`` are its point, one per objective (for a study with
    :func:`directions`); otherwise its ``value`` is its best first objective.
    """
    from optuna.trial import FrozenTrial, TrialState  # lazy: optuna is heavy; reading results never needs it

    points = {p.trial_id: p for p in front_of(results).points} if multi_objective else {}
    at_best = _constraint_values(results, points)
    distributions = optuna_distributions(results)
    intermediate = _intermediate_values(results)
    constants = [c for c in results.trials.columns if c in set(results.space) - set(results.params)]
    out = []
    now = dt.datetime.now()
    for index, (row, has_value) in enumerate(zip(results.trials.to_dict("records"), results.has_value, strict=True)):
        status = row["status"]
        best = float(row["best"]) if has_value else None  # NaN and ±inf as they are ("best" reads NaN without one)
        state_name, value, fail_reason = trial_outcome(
            status, best, results.metric, stopped_as_complete=stopped_as_complete
        )
        values: list[float] | None = None
        point = points.get(row["trial_id"])
        if multi_objective:
            state_name, values, fail_reason = _point_outcome(
                status, point, results, stopped_as_complete=stopped_as_complete
            )
            value = None
        state = TrialState[state_name]
        attrs: dict[str, Any] = {"trial_id": row["trial_id"], "status": status}
        if multi_objective and point is not None:
            attrs["point"] = {m: _json_number(v) for (m, _), v in zip(results.objectives, point.values)}
        if fail_reason is not None:
            attrs["fail_reason"] = fail_reason
        constraints = at_best.get(row["trial_id"])
        if constraints is not None:
            attrs["constraints"] = dict(zip((c.text for c in results.constraints), constraints))
        params, dists = trial_params(distributions, {str(k): v for k, v in row.items()})
        start, end = _when(row["started_at"]), _when(row["ended_at"])
        attrs.update(
            {
                "iterations": row["iterations"],
                "best": _json_number(best),
                "last": None if best is None else _json_number(row["last"]),
                "best_iteration": row["best_iteration"],
                "rank": row["rank"],
                "wall_time_s": row["wall_time_s"],
                "error": row["error"],
                "trial_dir": row["trial_dir"],
                "run_dir": row["run_dir"],
                "best_checkpoint": row["best_checkpoint"],
                **{c: row[c] for c in constants},
            }
        )
        out.append(
            FrozenTrial(
                number=index,
                state=state,
                value=value,
                values=values,
                datetime_start=None if state == TrialState.WAITING else (start or end or now),
                datetime_complete=(end or start or now) if state.is_finished() else None,
                params=params,
                distributions=dists,
                user_attrs={k: _plain(v) for k, v in attrs.items()},
                system_attrs={} if constraints is None else {"constraints": constraints},
                intermediate_values=intermediate.get(row["trial_id"], {}),
                trial_id=index,
            )
        )
    return out


def _constraint_values(results: Results, points: Mapping[str, ParetoPoint]) -> dict[str, list[float]]:
    """Trial id -> Optuna's value of each of the spec's constraints at the trial's best report (its point under
    several objectives), for the trials that have one; ``{}`` without constraints."""
    if not results.constraints:
        return {}
    history = results.history
    rows: dict[tuple[str, int], int] = {}  # (trial id, iteration) -> its first report, as the ranking reads them
    for index, (trial_id, step) in enumerate(zip(history["trial_id"], history["iteration"].astype("float64"))):
        if step == step:
            rows.setdefault((str(trial_id), int(step)), index)
    out: dict[str, list[float]] = {}
    for trial_id, best_iteration in zip(results.trials["trial_id"], results.trials["best_iteration"]):
        point = points.get(trial_id)
        at = point.iteration if point is not None else python_value(best_iteration)
        found = rows.get((str(trial_id), int(at))) if at is not None else None
        if found is None:
            continue
        report = {str(k): v for k, v in history.iloc[found].items()}
        out[trial_id] = list(optuna_constraints(report, results.constraints).values())
    return out


def _point_outcome(
    status: str, point: ParetoPoint | None, results: Results, *, stopped_as_complete: bool = False
) -> tuple[str, list[float] | None, str | None]:
    """A trial's Optuna ``(state name, values, fail_reason)`` under several objectives (the module's rules)."""
    state = "COMPLETE" if status == STOPPED and stopped_as_complete else _STATE_NAMES.get(status, "FAIL")
    if state != "COMPLETE":
        return state, None, None
    if point is None or not point.complete:
        given = point.values if point is not None else (None,) * len(results.objectives)
        bad = [m for (m, _), v in zip(results.objectives, given) if v is None or not math.isfinite(v)]
        where = f"its point (the report with its best {results.metric})"
        return "FAIL", None, f"{where} has no finite number for {', '.join(bad)}"
    return state, [float(v) for v in point.values if v is not None], None


def in_memory_study(results: Results, *, stopped_as_complete: bool = False) -> optuna.Study:
    """An in-memory Optuna study of the trials (no user attributes, no storage): what the evaluators read."""
    import optuna  # lazy: optuna is heavy; reading results never needs it

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "A new study created" line
    try:
        study = optuna.create_study(direction=direction(results), study_name=results.name)
    finally:
        optuna.logging.set_verbosity(verbosity)
    study.add_trials(frozen_trials(results, stopped_as_complete=stopped_as_complete))
    return study


def _intermediate_values(results: Results) -> dict[str, dict[int, float]]:
    """Trial id -> {iteration: value}, the finite numbers of the metric only."""
    history = results.history
    if results.metric not in history:
        return {}
    out: dict[str, dict[int, float]] = {}
    for trial_id, step, raw in zip(history["trial_id"], history["iteration"], history[results.metric], strict=True):
        value = intermediate_value(raw)
        if value is not None and not pd.isna(step):
            out.setdefault(trial_id, {})[int(step)] = value
    return out


def _json_number(value: Any) -> Any:
    """A value for a user attribute (stored as JSON): NaN and ±inf as text (``nan``, ``inf``), missing as ``None``."""
    if isinstance(value, float) and not math.isfinite(value):
        return number(value)
    return _plain(value)


def _choice(value: Any) -> Any:
    """Optuna's categorical choices are None, bool, int, float or str: anything else as its text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(str(_choice(v)) for v in value) + "]"
    return str(value)


def _plain(value: Any) -> Any:
    """A JSON-friendly Python value (user attrs go to storage as JSON): numpy scalars unwrapped, NaN/NaT/NA -> None."""
    value = python_value(value)
    if value is None or _nan(value):
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _fits(dist: Any, value: Any) -> bool:
    """Whether Optuna's distribution ``dist`` holds ``value``: Optuna's own rule, through its public attributes."""
    if value is None or _nan(value):
        return False
    try:
        internal = dist.to_internal_repr(value)  # a choice not among a categorical's choices raises
    except (ValueError, TypeError):
        return False
    if getattr(dist, "choices", None) is not None:
        return True
    low, high, step = dist.low, dist.high, dist.step
    if not low <= internal <= high:
        return False
    if step is None:
        return True
    if isinstance(step, int) and isinstance(low, int):  # an IntDistribution
        return bool((internal - low) % step == 0)
    k = (internal - low) / step
    return abs(k - round(k)) < 1.0e-8


def _nan(value: Any) -> bool:
    try:
        return bool(value != value)
    except (TypeError, ValueError):
        return True  # pd.NA and friends


def _when(value: Any) -> dt.datetime | None:
    """A UTC pandas timestamp as Optuna stores times: naive local time."""
    if value is None or _nan(value):
        return None
    return value.to_pydatetime(warn=False).astimezone().replace(tzinfo=None)


# ----------------------------------------------------------------------------- importances


@dataclass(frozen=True)
class ParamImportances:
    """What :func:`hpsearch.plots.param_importances` draws: parameter -> importance (summing to
    1, largest first), computed by Optuna's ``evaluator`` on ``n_trials`` trials (the
    early-stopped ones among them if ``include_stopped``); ``reason`` says why there are none.

    A parameter that only some trials have (a conditional one) is rated over those trials,
    with the parameters every trial has, in a computation of its own: its importance is not
    part of the sum of 1, and ``notes`` says so (``momentum: 5 of 12 trials``), or why it has
    none (too few trials have it)."""

    metric: str
    importances: dict[str, float]
    evaluator: str
    n_trials: int
    include_stopped: bool
    reason: str | None = None
    notes: dict[str, str] = field(default_factory=dict)


_EVALUATOR_NAMES = {
    "FanovaImportanceEvaluator": "fANOVA",
    "MeanDecreaseImpurityImportanceEvaluator": "mean decrease in impurity",
    "PedAnovaImportanceEvaluator": "PED-ANOVA",
}


def param_importances(results: Results, *, evaluator: Any = None, include_stopped: bool = True) -> ParamImportances:
    """How much each searched parameter explains the metric, by an Optuna importance evaluator.

    Runs on the Optuna study :func:`hpsearch.to_optuna_study` builds (in memory). Optuna's evaluators read
    complete trials only; by default the trials the scheduler stopped early count as
    complete, with the best value they reached. With early stopping the finished trials
    are the few the scheduler kept, alike by construction, while the stopped ones carry
    most of what the search learned (at the price of values from less training).

    Args:
        evaluator: An ``optuna.importance`` evaluator; default fANOVA with a fixed seed.
        include_stopped: ``False``: finished trials only, as Optuna treats pruned trials.
    """
    from optuna.importance import (  # lazy: reading results needs no Optuna
        FanovaImportanceEvaluator,
        get_param_importances,
    )

    evaluator = evaluator if evaluator is not None else FanovaImportanceEvaluator(seed=0)
    name = _EVALUATOR_NAMES.get(type(evaluator).__name__, type(evaluator).__name__)
    study = in_memory_study(results, stopped_as_complete=include_stopped)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    varying = [p for p in results.params if len({repr(t.params.get(p)) for t in complete if p in t.params}) > 1]
    params = [p for p in varying if all(p in t.params for t in complete)]
    which = "finished or stopped" if include_stopped else "finished"
    if len(complete) < MIN_TRIALS_FOR_IMPORTANCE or not varying:
        reason = (
            f"needs at least {MIN_TRIALS_FOR_IMPORTANCE} {which} trials with a value of {results.metric}, "
            f"found {len(complete)}"
            if len(complete) < MIN_TRIALS_FOR_IMPORTANCE
            else f"no searched parameter varies across the {len(complete)} {which} trials"
        )
        return ParamImportances(results.metric, {}, name, len(complete), include_stopped, reason)
    found: dict[str, float] = {}
    if params:
        found = {k: float(v) for k, v in get_param_importances(study, evaluator=evaluator, params=params).items()}
    notes: dict[str, str] = {}
    for partial in (p for p in varying if p not in params):
        having = [t for t in complete if partial in t.params]
        note = _count_note(partial, len(having), len(complete)) or ""
        if len(having) < MIN_TRIALS_FOR_IMPORTANCE or len({repr(t.params[partial]) for t in having}) < 2:
            notes[partial] = f"{note}: too few for an importance (needs {MIN_TRIALS_FOR_IMPORTANCE} that vary)"
            continue
        # Optuna rates over the trials that have every one of the params
        own = get_param_importances(study, evaluator=evaluator, params=[*params, partial])
        found[partial] = float(own[partial])
        notes[partial] = f"{note}, rated over those trials (not part of the sum of 1)"
    return ParamImportances(results.metric, found, name, len(complete), include_stopped, notes=notes)
