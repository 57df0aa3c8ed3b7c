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
"""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING, Any, Literal

from hpsearch.analysis._load import python_value
from hpsearch.experiment.layout import ERRORED, FINISHED, PENDING, RUNNING, STOPPED
from hpsearch.experiment.ranking import metric_value
from hpsearch.formatting import number

if TYPE_CHECKING:  # pragma: no cover
    import optuna

    from hpsearch.analysis._load import Results

__all__ = ["STATES", "optuna_distributions", "frozen_trials", "in_memory_study", "direction"]

#: hpsearch status -> Optuna trial state.
STATES = {FINISHED: "COMPLETE", STOPPED: "PRUNED", ERRORED: "FAIL", RUNNING: "RUNNING", PENDING: "WAITING"}


def direction(results: Results) -> Literal["minimize", "maximize"]:
    """Optuna's study direction for the search's mode."""
    return "minimize" if results.mode == "min" else "maximize"


def optuna_distributions(results: Results) -> dict[str, Any]:
    """Parameter -> Optuna distribution, for every searched parameter (from the spec where it has one)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from hpsearch.analysis._params import param_axis

    out: dict[str, Any] = {}
    for name in results.params:
        axis = param_axis(results, name)
        if axis.kind == "categorical":
            if axis.categories:
                out[name] = CategoricalDistribution([_choice(c) for c in axis.categories])
        elif axis.low is not None and axis.high is not None and axis.low < axis.high:
            spec = results.space.get(name)
            step = getattr(spec, "step", None)
            if axis.kind == "int":
                out[name] = IntDistribution(int(axis.low), int(axis.high), log=axis.log, step=int(step or 1))
            else:
                out[name] = FloatDistribution(axis.low, axis.high, log=axis.log, step=step)
    return out


def frozen_trials(results: Results, *, stopped_as_complete: bool = False) -> list[Any]:
    """One ``optuna.trial.FrozenTrial`` per trial of ``results``, in creation order (see the module's rules)."""
    from optuna.trial import FrozenTrial, TrialState

    distributions = optuna_distributions(results)
    intermediate = _intermediate_values(results)
    constants = [c for c in results.trials.columns if c in set(results.space) - set(results.params)]
    out = []
    now = dt.datetime.now()
    for index, (row, has_value) in enumerate(zip(results.trials.to_dict("records"), results.has_value, strict=True)):
        status = row["status"]
        state = TrialState["COMPLETE" if status == STOPPED and stopped_as_complete else STATES.get(status, "FAIL")]
        best = float(row["best"]) if has_value else None  # NaN and ±inf as they are ("best" reads NaN without one)
        value = best if best is not None and math.isfinite(best) else None
        attrs: dict[str, Any] = {"trial_id": row["trial_id"], "status": status}
        if state == TrialState.COMPLETE and value is None:
            state = TrialState.FAIL  # Optuna takes no NaN, no ±inf and no missing value for a complete trial
            attrs["fail_reason"] = (
                f"it reported no number for {results.metric}"
                if best is None
                else f"its best {results.metric} ({number(best)}) is not a finite number"
            )
        params, dists = {}, {}
        for name, dist in distributions.items():
            choice = _choice(_plain(row.get(name)))
            if _fits(dist, choice):
                params[name], dists[name] = choice, dist
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
                value=value if state == TrialState.COMPLETE else None,
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
        value = metric_value(raw)
        if value is not None and math.isfinite(value) and not pd.isna(step):
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
