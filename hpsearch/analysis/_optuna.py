"""A search's trials as Optuna sees them: distributions and ``FrozenTrial`` objects, without storage.

The pure conversion behind :func:`hpsearch.to_optuna_study` (which adds the storage) and
:func:`hpsearch.analysis.param_importances` (which runs Optuna's evaluators on it). Optuna
is imported inside the functions: reading results does not need it.

Each trial becomes an Optuna trial with its parameters (distributions from the spec, so
log scales and steps carry over), its intermediate values (the metric at every iteration)
and its outcome: finished -> ``COMPLETE``, stopped early by the scheduler -> ``PRUNED``
(``COMPLETE`` with ``stopped_as_complete``), errored -> ``FAIL``, running -> ``RUNNING``,
pending -> ``WAITING``. A complete trial's value is its best value of the metric by the
one ranking (:mod:`hpsearch.experiment.ranking`, ``Results.trials["best"]``).

Optuna takes only finite numbers as the value of a complete trial. A trial that would be
complete but has no finite best (it reported only NaN or ±inf, or never reported the
metric) is exported ``FAIL``, and its ``fail_reason`` user attribute says why; so
Optuna's best trial is hpsearch's best trial. Intermediate values that are not finite
numbers are left out (the trial's history keeps them).

With several objectives (``frozen_trials(..., multi_objective=True)``, what the export
writes for such a search) the study has one direction per objective (:func:`directions`)
and a complete trial's ``values`` are its point: every objective in the report with its
best first objective (:mod:`hpsearch.experiment.ranking`), so Optuna's ``best_trials`` are
hpsearch's Pareto front (less its ``PRUNED`` trials, which have no values in Optuna: every
trial's ``point`` user attribute holds its point). A complete trial whose point has a value
that is missing or not finite is ``FAIL``, with its ``fail_reason``. Intermediate values stay
those of the first objective.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING, Any, Literal

from hpsearch.analysis._load import python_value
from hpsearch.analysis._pareto import front_of
from hpsearch.experiment.layout import ERRORED, FINISHED, PENDING, RUNNING, STOPPED
from hpsearch.experiment.ranking import metric_value
from hpsearch.formatting import number

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping, Sequence

    import optuna

    from hpsearch.analysis._load import Results
    from hpsearch.analysis._params import ParamAxis
    from hpsearch.experiment.ranking import ParetoPoint
    from hpsearch.spec.space import Param

__all__ = [
    "STATES",
    "LIVE_ATTR",
    "optuna_distributions",
    "space_distributions",
    "trial_params",
    "trial_outcome",
    "intermediate_value",
    "study_attrs",
    "frozen_trials",
    "in_memory_study",
    "direction",
    "directions",
    "study_direction",
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


def study_attrs(experiment_dir: Any, metric: str, mode: str) -> dict[str, str]:
    """The study's user attributes: which experiment folder it holds, and the metric. The export and the
    live ``optuna`` tracker write the same ones; the folder is how either knows a study is this search's."""
    return {"hpsearch_experiment_dir": str(experiment_dir), "metric": metric, "mode": mode}


def optuna_distributions(results: Results) -> dict[str, Any]:
    """Parameter -> Optuna distribution, for every searched parameter (from the spec where it has one)."""
    from hpsearch.analysis._params import param_axis

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
    from hpsearch.analysis._params import ParamAxis, _hashable
    from hpsearch.spec.space import ChoiceParam, FloatParam, GridParam, IntParam

    out: dict[str, Any] = {}
    for name in params:
        param = space.get(name)
        axis: ParamAxis | None = None
        if isinstance(param, (FloatParam, IntParam)):
            axis = ParamAxis(name, param.type, bool(param.log), float(param.low), float(param.high))
        elif isinstance(param, (ChoiceParam, GridParam)):
            axis = ParamAxis(name, "categorical", categories=tuple(dict.fromkeys(_hashable(v) for v in param.values)))
        dist = None if axis is None else _distribution(axis, param)
        if dist is not None:
            out[name] = dist
    return out


def _distribution(axis: ParamAxis, param: Any) -> Any:
    """One parameter's Optuna distribution, or ``None`` when it has none (no categories, empty range)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if axis.kind == "categorical":
        return CategoricalDistribution([_choice(c) for c in axis.categories]) if axis.categories else None
    if axis.low is None or axis.high is None or not axis.low < axis.high:
        return None
    step = getattr(param, "step", None)
    if axis.kind == "int":
        return IntDistribution(int(axis.low), int(axis.high), log=axis.log, step=int(step or 1))
    return FloatDistribution(axis.low, axis.high, log=axis.log, step=step)


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


def intermediate_value(raw: Any) -> float | None:
    """A report's value of the metric as an Optuna intermediate value: finite numbers only."""
    value = metric_value(raw)
    return value if value is not None and math.isfinite(value) else None


def frozen_trials(results: Results, *, stopped_as_complete: bool = False, multi_objective: bool = False) -> list[Any]:
    """One ``optuna.trial.FrozenTrial`` per trial of ``results``, in creation order (see the module's rules).

    ``multi_objective``: each trial's ``values`` are its point, one per objective (for a study with
    :func:`directions`); otherwise its ``value`` is its best first objective.
    """
    from optuna.trial import FrozenTrial, TrialState

    points = {p.trial_id: p for p in front_of(results).points} if multi_objective else {}
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
                system_attrs={},
                intermediate_values=intermediate.get(row["trial_id"], {}),
                trial_id=index,
            )
        )
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
    import optuna

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
    import pandas as pd

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
    if value is None or _nan(value):
        return False
    try:
        return bool(dist._contains(dist.to_internal_repr(value)))
    except (ValueError, TypeError):
        return False


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
