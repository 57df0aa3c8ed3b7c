"""What each trial's result cost: the metric per resource-hour, for a search over the trial's own scale.

"Metric per resource-hour" needs a zero: a loss of 0.1 is not "0.1 per hour" of anything. A trial's
**gain** is how much better its best value is than a baseline (``baseline - best`` for a ``min``
metric, ``best - baseline`` for ``max``: positive is better, whichever the mode), and its
**gain per resource-hour** is that gain over the resource-hours it held. By default the baseline is
the worst best value among the table's trials (that trial gains 0); give ``baseline=`` a value that
means "learned nothing" (a uniform guess's loss, chance accuracy) to compare across searches.

With ``target=`` the table also says the **resource-hours to reach the target**: how many the trial had
held when it first reported a value at least as good (its resource rate times the time of that report,
an estimate: start-up counted, restarts not told apart). That is the number to act on when the
question is "which scale gets me to 0.97 accuracy for the fewest GPU-hours?", and the table is then
sorted by it.

Pure: reads a :class:`~hpsearch.analysis.Results`, imports no Ray.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from hpsearch.analysis._results import RESERVED_PREFIX, RESOURCE_HOURS_PREFIX, Results
from hpsearch.errors import ResultsError
from hpsearch.experiment.layout import ENDED
from hpsearch.spec import Scaling
from hpsearch.spec._validation import validate_section

__all__ = ["cost_table"]

_WORKER = f"{RESERVED_PREFIX}worker."


def cost_table(
    results: Results,
    resource: str = "CPU",
    *,
    target: float | None = None,
    baseline: float | None = None,
) -> pd.DataFrame:
    """One row per ended trial (finished, stopped, errored): what it reserved, what it cost, what it bought.

    Args:
        results: A search, from :func:`~hpsearch.analysis.load_results`.
        resource: The resource whose hours count (``"CPU"``, ``"GPU"``, a custom one).
        target: A value of the metric; adds ``hours_to_target`` and sorts by it.
        baseline: The value a gain is measured from; by default the worst best value of the table's trials.

    Returns:
        A DataFrame, best value for money first: ``trial_id``, ``status``, ``workers`` (its Train
        workers), ``worker.<R>`` (each worker's resources), ``resource_hours`` (of ``resource``),
        ``best``, ``best_iteration``, ``gain`` (better than ``baseline`` by, positive is better),
        ``gain_per_hour`` (``gain / resource_hours``), with ``target`` ``hours_to_target`` (NaN: never
        reached), and ``cost_rank`` (1 = best value for money; errored and unscored trials last). Sorted
        by ``hours_to_target`` with a target, else by ``gain_per_hour``, highest first.
        ``attrs["baseline"]`` holds the baseline used.

    Raises:
        ResultsError: No trial held ``resource``.

    Example:
        >>> table = cost_table(load_results("hpsearch-results/digits-scaling"), "CPU", target=0.2)
        >>> table[["trial_id", "workers", "resource_hours", "best", "hours_to_target"]]
    """
    trials = results.trials
    hours_column = f"{RESOURCE_HOURS_PREFIX}{resource}"
    if hours_column not in trials or not trials[hours_column].fillna(0).gt(0).any():
        held = [str(c)[len(RESOURCE_HOURS_PREFIX) :] for c in trials if str(c).startswith(RESOURCE_HOURS_PREFIX)]
        held = [r for r in held if trials[f"{RESOURCE_HOURS_PREFIX}{r}"].fillna(0).gt(0).any()]
        raise ResultsError(
            f"no trial of {results.name} held resource {resource!r} (held: {', '.join(held) or 'nothing recorded'})"
        )
    ended = trials[trials["status"].isin(ENDED)].reset_index(drop=True)
    out = pd.DataFrame({"trial_id": ended["trial_id"], "status": ended["status"]})
    workers, per_worker = _reserved(results, ended)
    out["workers"] = workers
    for name, values in per_worker.items():
        out[f"worker.{name}"] = values
    hours = ended[hours_column].astype("float64")
    out["resource_hours"] = hours
    best = ended["best"].astype("float64").where(ended["rank"].notna())  # errored trials bought nothing
    out["best"] = best
    out["best_iteration"] = ended["best_iteration"]
    finite = best[np.isfinite(best)]
    sign = 1.0 if results.mode == "max" else -1.0
    if baseline is None:
        baseline = float(finite.min() if results.mode == "max" else finite.max()) if len(finite) else math.nan
    gain = sign * (best - baseline)
    out["gain"] = gain.where(np.isfinite(gain))
    out["gain_per_hour"] = (out["gain"] / hours).where(hours > 0)
    if target is not None:
        out["hours_to_target"] = _hours_to_target(results, ended, hours, float(target))
        order = ["hours_to_target", "gain_per_hour"]
        ascending = [True, False]
    else:
        order, ascending = ["gain_per_hour"], [False]
    out = out.sort_values(order, ascending=ascending, na_position="last", kind="stable").reset_index(drop=True)
    scored = out[order[0]].notna()
    out["cost_rank"] = pd.Series(range(1, len(out) + 1), dtype="Int64").where(scored)
    out.attrs["baseline"] = baseline
    out.attrs["resource"] = resource
    return out


def _reserved(results: Results, ended: pd.DataFrame) -> tuple[pd.Series, dict[str, pd.Series]]:
    """Each trial's workers and per-worker resources: load_results' ``reserved.*`` columns (searched
    scaling), else the spec's one scaling for every trial."""
    if f"{RESERVED_PREFIX}workers" in ended:
        per_worker = {str(c)[len(_WORKER) :]: ended[c] for c in ended if str(c).startswith(_WORKER)}
        return ended[f"{RESERVED_PREFIX}workers"], per_worker

    scaling, _ = validate_section(Scaling, (results.spec or {}).get("scaling"), "scaling")
    n = len(ended)
    if scaling is None:
        return pd.Series([None] * n, dtype="Int64"), {}
    bundle = {k: float(v) for k, v in scaling.worker_bundle().items() if float(v) > 0}
    return (
        pd.Series([scaling.planned_workers] * n, dtype="Int64"),
        {k: pd.Series([v] * n, dtype="float64") for k, v in bundle.items()},
    )


def _hours_to_target(results: Results, ended: pd.DataFrame, hours: pd.Series, target: float) -> list[float]:
    """Per trial: its resource-hours when it first reported a value at least as good as ``target``."""
    history = results.history
    out = []
    for trial_id, held, driver_s in zip(ended["trial_id"], hours, ended["driver_time_s"]):
        reports = history[history["trial_id"] == trial_id]
        out.append(_first_hit(reports, results.metric, results.mode, target, held, driver_s))
    return out


def _first_hit(reports: Any, metric: str, mode: str, target: float, held: float, driver_s: float) -> float:
    if metric not in reports or not (held > 0 and driver_s > 0):
        return math.nan

    values = pd.to_numeric(reports[metric], errors="coerce")
    hit = values <= target if mode == "min" else values >= target
    if not hit.any():
        return math.nan
    at = float(reports["wall_time_s"][hit].iloc[0])
    return float(held * min(at, driver_s) / driver_s) if math.isfinite(at) else math.nan
