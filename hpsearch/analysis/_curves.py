"""Data for the plots over time: learning curves and the optimisation history."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.analysis._load import Results

__all__ = [
    "Curve",
    "LearningCurves",
    "learning_curves",
    "OptimizationHistory",
    "optimization_history",
    "log_scale_suits",
    "asha_rungs",
]

#: Values that are all positive and span more than this factor are shown on a log axis.
LOG_SPAN = 20.0


def log_scale_suits(values: Sequence[float | None]) -> bool:
    """Whether a log axis reads better: every value positive, spanning more than :data:`LOG_SPAN`x."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return bool(finite) and min(finite) > 0 and max(finite) / min(finite) > LOG_SPAN


@dataclass(frozen=True)
class Curve:
    """One trial's reports of a metric: ``y[i]`` at iteration ``x[i]``."""

    trial_id: str
    number: int | None
    status: str
    x: list[float]
    y: list[float]


@dataclass(frozen=True)
class LearningCurves:
    """What :func:`hpsearch.plots.learning_curves` draws.

    ``curves`` are in trial order; ``best_trial_id`` is the search's best trial and
    ``best_value`` its best value of ``metric`` (``None`` when ``metric`` is not the search's);
    ``budget`` is the scheduler's ``max_t`` (``None`` without one) and ``rungs`` its
    ASHA milestones; ``x_label`` is ``"epoch"`` when the trials report one, else
    ``"iteration"``.
    """

    metric: str
    mode: str
    x_label: str
    curves: list[Curve]
    best_trial_id: str | None
    best_value: float | None
    log_y: bool
    budget: float | None
    rungs: list[int]


def learning_curves(results: "Results", metric: str | None = None) -> LearningCurves:
    """Each trial's ``metric`` (default: the search metric) against its iteration."""
    import pandas as pd

    metric = metric or results.metric
    history = results.history
    curves = []
    if metric in history and len(history):
        values = pd.to_numeric(history[metric], errors="coerce")
        frame = pd.DataFrame({"trial_id": history["trial_id"], "x": history["iteration"], "y": values}).dropna()
        by_trial = {t: g for t, g in frame.groupby("trial_id", sort=False)}
        for row in results.trials[["trial_id", "number", "status"]].itertuples(index=False):
            group = by_trial.get(row.trial_id)
            if group is not None:
                curves.append(
                    Curve(
                        row.trial_id, _int(row.number), row.status, [float(v) for v in group["x"]], group["y"].tolist()
                    )
                )
    best = results.best
    x_label = "epoch" if "epoch" in history and history["epoch"].notna().any() else "iteration"
    return LearningCurves(
        metric=metric,
        mode=results.mode,
        x_label=x_label,
        curves=curves,
        best_trial_id=None if best is None else best["trial_id"],
        best_value=None if best is None or metric != results.metric else float(best["best"]),
        log_y=log_scale_suits([v for c in curves for v in c.y]),
        budget=_budget(results),
        rungs=asha_rungs(results.scheduler),
    )


@dataclass(frozen=True)
class OptimizationHistory:
    """What :func:`hpsearch.plots.optimization_history` draws.

    Per trial, in the order the searcher proposed them (``numbers``): its best value of
    the metric (``None`` if it reported none) and, in ``running_best``, the best value
    of every trial up to it (errored trials not counted).
    """

    metric: str
    mode: str
    numbers: list[int]
    trial_ids: list[str]
    statuses: list[str]
    values: list[float | None]
    running_best: list[float | None]
    best_trial_id: str | None
    log_y: bool


def optimization_history(results: "Results") -> OptimizationHistory:
    """Each trial's best value of the search metric, in order, with the running best."""
    trials = results.trials
    values = [float(v) if math.isfinite(v) else None for v in trials["best"].astype("float64")]
    ranked = list(trials["rank"].notna())
    pick = min if results.mode == "min" else max
    running: list[float | None] = []
    current: float | None = None
    for value, counts in zip(values, ranked):
        if value is not None and counts:
            current = value if current is None else pick(current, value)
        running.append(current)
    numbers = [_int(n) for n in trials["number"]]
    best = results.best
    return OptimizationHistory(
        metric=results.metric,
        mode=results.mode,
        numbers=[n if n is not None else i + 1 for i, n in enumerate(numbers)],
        trial_ids=list(trials["trial_id"]),
        statuses=list(trials["status"]),
        values=values,
        running_best=running,
        best_trial_id=None if best is None else best["trial_id"],
        log_y=log_scale_suits(values),
    )


def asha_rungs(scheduler: dict) -> list[int]:
    """ASHA's milestones, as Ray places them: ``grace_period * reduction_factor**k`` below ``max_t``."""
    if scheduler.get("type") != "asha":
        return []
    grace, factor, max_t = (scheduler.get(k) for k in ("grace_period", "reduction_factor", "max_t"))
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (grace, factor, max_t))
    if not numbers or grace <= 0 or factor <= 1:
        return []
    rungs, milestone = [], float(grace)
    while milestone < max_t:
        rungs.append(int(milestone))
        milestone *= factor
    return rungs


def _budget(results: "Results") -> float | None:
    scheduler = results.scheduler
    max_t = scheduler.get("max_t")
    if scheduler.get("type", "fifo") == "fifo" or not isinstance(max_t, (int, float)):
        return None
    return float(max_t)


def _int(value: object) -> int | None:
    try:
        return None if value is None or value != value else int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
