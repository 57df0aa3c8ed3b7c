"""Data for the plots over time: learning curves and the optimisation history."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hpsearch.experiment.ranking import metric_value

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.analysis._results import Results

__all__ = [
    "Curve",
    "LearningCurves",
    "learning_curves",
    "OptimizationHistory",
    "optimization_history",
    "log_scale_suits",
    "asha_rungs",
    "no_values_reason",
]

#: Values that are all positive and span more than this factor are shown on a log axis.
LOG_SPAN = 20.0


def log_scale_suits(values: Sequence[float | None]) -> bool:
    """Whether a log axis reads better: every value positive, spanning more than :data:`LOG_SPAN`x."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return bool(finite) and min(finite) > 0 and max(finite) / min(finite) > LOG_SPAN


def no_values_reason(results: Results, metric: str | None = None, *, ranked: bool = False) -> str:
    """Why there is no finite value of ``metric`` to draw: what a plot with nothing to draw says instead.

    ``ranked``: the plot draws ranked trials only (errored trials are left out).
    """
    metric = metric or results.metric
    if results.trials.empty:
        return "no trial has started yet"
    history = results.history
    if history.empty:
        return "no trial has reported yet"
    column = history[metric].tolist() if metric in history else []
    numbers = [v for v in map(metric_value, column) if v is not None]
    if metric == results.metric and not results.has_value.any():
        numbers = []  # a report without the metric reads NaN in the history: has_value tells them apart
    if not numbers:
        if any(isinstance(v, str) for v in column):
            return f"no trial reported a number for {metric}"
        return f"no trial reported {metric} yet"
    if not any(math.isfinite(v) for v in numbers):
        return f"every value of {metric} reported is NaN or infinite"
    if ranked and metric == results.metric and results.ranked(finite=True).empty:
        return f"every trial with a finite value of {metric} errored"
    return f"no trial has a finite value of {metric} to draw"


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

    - ``curves`` are in trial order. Only finite values are drawn, so a trial with none has
      no curve.
    - ``best_trial_id`` is the search's best trial, and ``best_value`` its best value of
      ``metric``. Both are ``None`` when ``metric`` is not the search's metric.
    - ``max_t`` is the scheduler's ``max_t`` (the iterations a trial runs at most), or ``None``
      without one. ``rungs`` are its
      ASHA milestones.
    - ``x_label`` is ``"epoch"`` when the trials report an epoch, else ``"iteration"``.
    - ``reason`` says why there is no curve. It is ``None`` when there is one.
    """

    metric: str
    mode: str
    x_label: str
    curves: list[Curve]
    best_trial_id: str | None
    best_value: float | None
    log_y: bool
    max_t: float | None
    rungs: list[int]
    reason: str | None = None

    @property
    def budget(self) -> float | None:
        """Deprecated name of :attr:`max_t` (``budget:`` is the spec's section of search-wide limits)."""
        warnings.warn("LearningCurves.budget is deprecated: use LearningCurves.max_t", DeprecationWarning, stacklevel=2)
        return self.max_t


def learning_curves(results: Results, metric: str | None = None) -> LearningCurves:
    """Each trial's ``metric`` (default: the search metric) against its iteration."""
    metric = metric or results.metric
    history = results.history
    curves = []
    if metric in history and len(history):
        values = pd.to_numeric(history[metric], errors="coerce")
        values = values.where(np.isfinite(values.astype("float64")))  # NaN and ±inf cannot be drawn
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
        max_t=_max_t(results),
        rungs=asha_rungs(results.scheduler),
        reason=None if curves else no_values_reason(results, metric),
    )


@dataclass(frozen=True)
class OptimizationHistory:
    """What :func:`hpsearch.plots.optimization_history` draws.

    Per trial, in the order the searcher proposed them (``numbers``): its best value of
    the metric (``None`` if it reported none) and, in ``running_best``, the best value
    of every trial up to it (errored trials not counted, nor, under the spec's constraints,
    infeasible ones). A best that is not a finite
    number is ``None`` here: it cannot be drawn. ``reason`` says why no trial has a value
    to draw (``None`` when one has).
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
    reason: str | None = None


def optimization_history(results: Results) -> OptimizationHistory:
    """Each trial's best value of the search metric, in order, with the running best."""
    trials = results.trials
    values = [float(v) if math.isfinite(v) else None for v in trials["best"].astype("float64")]
    ranked = list(trials["rank"].notna() & results.feasible)
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
        reason=None if any(v is not None for v in values) else no_values_reason(results),
    )


def asha_rungs(scheduler: Mapping[str, Any]) -> list[int]:
    """ASHA's milestones, as Ray places them: ``grace_period * reduction_factor**k`` below ``max_t``."""
    if scheduler.get("type") != "asha":
        return []
    values = [scheduler.get(k) for k in ("grace_period", "reduction_factor", "max_t")]
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) != len(values):
        return []
    grace, factor, max_t = numbers
    if grace <= 0 or factor <= 1:
        return []
    rungs: list[int] = []
    milestone = grace
    while milestone < max_t:
        rungs.append(int(milestone))
        milestone *= factor
    return rungs


def _max_t(results: Results) -> float | None:
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
