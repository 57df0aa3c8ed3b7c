"""hpsearch results as an Optuna study: Optuna's plots, importances and ``optuna-dashboard`` on a search.

Each trial becomes an Optuna trial with its parameters (distributions from the spec, so
log scales and steps carry over), its intermediate values (the metric at every
iteration) and its outcome: finished -> ``COMPLETE``, stopped early by the scheduler ->
``PRUNED``, errored -> ``FAIL``, running -> ``RUNNING``, pending -> ``WAITING``. A
complete trial's value is its *best* value of the metric, as hpsearch ranks trials.
Everything else (trial id, iterations, last value, folders, best checkpoint, constant
config values) is kept in the trial's ``user_attrs``.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from typing import TYPE_CHECKING, Any

from hpsearch.errors import ExportError

if TYPE_CHECKING:  # pragma: no cover
    import optuna

    from hpsearch.analysis import Results

__all__ = ["to_optuna_study", "optuna_distributions", "ExportError"]

_STATES = {"finished": "COMPLETE", "stopped": "PRUNED", "errored": "FAIL", "running": "RUNNING", "pending": "WAITING"}


def optuna_distributions(results: "Results") -> dict[str, Any]:
    """Parameter -> Optuna distribution, for every searched parameter (from the spec where it has one)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from hpsearch.analysis import param_axis

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


def to_optuna_study(
    results: "Results | str | os.PathLike",
    *,
    storage: str | None = None,
    study_name: str | None = None,
    overwrite: bool = False,
    stopped_as_complete: bool = False,
) -> "optuna.Study":
    """Build an Optuna study holding a search's trials.

    Args:
        results: What :func:`hpsearch.load_results` returned, or an experiment folder.
        storage: An Optuna storage URL (``"sqlite:///search.db"``) to write the study to;
            by default an in-memory study.
        study_name: Default: the search's name.
        overwrite: Replace a study of the same name in ``storage``.
        stopped_as_complete: Mark early-stopped trials ``COMPLETE`` (with their best value)
            instead of ``PRUNED``, e.g. for importance evaluators, which read complete trials only.

    Returns:
        An ``optuna.Study``; its ``user_attrs`` name the experiment folder and the metric.

    Raises:
        ExportError: ``storage`` cannot be opened, or holds the study and ``overwrite`` is false.

    Example:
        >>> study = to_optuna_study(load_results("hpsearch-results/digits-quick"))
        >>> optuna.visualization.matplotlib.plot_intermediate_values(study)
    """
    import optuna

    from hpsearch.analysis import load_results

    if not hasattr(results, "trials"):
        results = load_results(results)
    name = study_name or results.name
    direction = "minimize" if results.mode == "min" else "maximize"
    if storage is not None and overwrite:
        try:
            optuna.delete_study(study_name=name, storage=storage)
        except KeyError:
            pass
        except Exception as err:  # noqa: BLE001 - a bad URL surfaces here; say what failed
            raise ExportError(f"cannot open Optuna storage {storage!r}: {type(err).__name__}: {err}") from None
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "A new study created" line
    try:
        study = optuna.create_study(storage=storage, study_name=name, direction=direction)
    except optuna.exceptions.DuplicatedStudyError:
        raise ExportError(
            f"study {name!r} already exists in {storage}; pass --overwrite (overwrite=True) to replace it "
            "or choose another --study-name"
        ) from None
    except Exception as err:  # noqa: BLE001
        raise ExportError(f"cannot open Optuna storage {storage!r}: {type(err).__name__}: {err}") from None
    finally:
        optuna.logging.set_verbosity(verbosity)
    for key, value in {
        "hpsearch_experiment_dir": str(results.experiment_dir),
        "metric": results.metric,
        "mode": results.mode,
    }.items():
        study.set_user_attr(key, value)
    study.add_trials(_frozen_trials(results, stopped_as_complete))
    return study


def _frozen_trials(results: "Results", stopped_as_complete: bool) -> list[Any]:
    from optuna.trial import FrozenTrial, TrialState

    distributions = optuna_distributions(results)
    intermediate = _intermediate_values(results)
    constants = [c for c in results.trials.columns if c in set(results.space) - set(results.params)]
    out = []
    for number, row in enumerate(results.trials.to_dict("records")):
        status = row["status"]
        state = TrialState["COMPLETE" if status == "stopped" and stopped_as_complete else _STATES.get(status, "FAIL")]
        value = _float(row["best"])
        if state == TrialState.COMPLETE and value is None:
            state = TrialState.FAIL  # a complete trial needs a value: it never reported the metric
        params, dists = {}, {}
        for name, dist in distributions.items():
            choice = _choice(_plain(row.get(name)))
            if _fits(dist, choice):
                params[name], dists[name] = choice, dist
        start, end = _when(row["started_at"]), _when(row["ended_at"])
        finished = state.is_finished()
        now = dt.datetime.now()
        attrs = {
            "trial_id": row["trial_id"],
            "status": status,
            "iterations": row["iterations"],
            "last": row["last"],
            "best_iteration": row["best_iteration"],
            "wall_time_s": row["wall_time_s"],
            "error": row["error"],
            "trial_dir": row["trial_dir"],
            "run_dir": row["run_dir"],
            "best_checkpoint": row["best_checkpoint"],
            **{c: row[c] for c in constants},
        }
        out.append(
            FrozenTrial(
                number=number,
                state=state,
                value=value if state == TrialState.COMPLETE else None,
                datetime_start=None if state == TrialState.WAITING else (start or end or now),
                datetime_complete=(end or start or now) if finished else None,
                params=params,
                distributions=dists,
                user_attrs={k: _plain(v) for k, v in attrs.items()},
                system_attrs={},
                intermediate_values=intermediate.get(row["trial_id"], {}),
                trial_id=number,
            )
        )
    return out


def _intermediate_values(results: "Results") -> dict[str, dict[int, float]]:
    import pandas as pd

    history = results.history
    if results.metric not in history:
        return {}
    values = pd.to_numeric(history[results.metric], errors="coerce")
    keep = values.notna() & history["iteration"].notna() & values.map(math.isfinite, na_action="ignore").fillna(False)
    out: dict[str, dict[int, float]] = {}
    for trial_id, step, value in zip(history["trial_id"][keep], history["iteration"][keep], values[keep]):
        out.setdefault(trial_id, {})[int(step)] = float(value)
    return out


def _choice(value: Any) -> Any:
    """Optuna's categorical choices are None, bool, int, float or str: anything else as its text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(str(_choice(v)) for v in value) + "]"
    return str(value)


def _plain(value: Any) -> Any:
    """A JSON-friendly Python value (user attrs go to storage as JSON): numpy scalars unwrapped, NaN/NaT -> None."""
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict, str)):
        try:
            value = value.item()
        except (ValueError, TypeError):
            pass
    if value is None or _nan(value):
        return None
    if isinstance(value, (dt.datetime,)):
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


def _float(value: Any) -> float | None:
    value = _plain(value)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _when(value: Any) -> dt.datetime | None:
    """A UTC pandas timestamp as Optuna stores times: naive local time."""
    if value is None or _nan(value):
        return None
    return value.to_pydatetime(warn=False).astimezone().replace(tzinfo=None)
