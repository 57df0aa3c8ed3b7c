"""Data for the plots over parameters: parameter vs metric, parallel coordinates, importance.

A conditional parameter (``when``) is absent from the trials whose condition was false: an
empty cell in :attr:`Results.trials`. Each view is computed over the trials that have the
parameter, and says so in a note (``momentum: 5 of 12 trials``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hpsearch.analysis._curves import log_scale_suits, no_values_reason
from hpsearch.spec.space import ChoiceParam, FloatParam, GridParam, IntParam

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.analysis._results import Results

__all__ = [
    "ParamAxis",
    "param_axis",
    "ParamPanel",
    "ParamVsMetric",
    "param_vs_metric",
    "ParallelCoordinates",
    "parallel_coordinates",
]

#: Fewer trials than this say nothing about which parameter matters: no importances then
#: (:func:`hpsearch.analysis._optuna.param_importances`).
MIN_TRIALS_FOR_IMPORTANCE = 4
#: Half the width a category's points are spread over, so that equal values do not hide each other.
CATEGORY_SPREAD = 0.15


@dataclass(frozen=True)
class ParamAxis:
    """How a parameter is shown: ``kind`` is ``"float"``, ``"int"`` or ``"categorical"``;
    numeric axes have bounds (the spec's, else the values') and ``log``; categorical ones
    have ``categories`` (in spec order) and their ``labels``."""

    name: str
    kind: str
    log: bool = False
    low: float | None = None
    high: float | None = None
    categories: tuple[Any, ...] = ()
    labels: tuple[str, ...] = ()

    def position(self, value: Any) -> float | None:
        """Where ``value`` sits on the axis: a category's index, else the value (its log10 if ``log``)."""
        if self.kind == "categorical":
            return float(self.categories.index(value)) if value in self.categories else None
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        if math.isnan(number) or (self.log and number <= 0):
            return None
        return math.log10(number) if self.log else number


def param_axis(results: Results, name: str) -> ParamAxis:
    """The axis of a parameter, from the spec's distribution (or, without one, from the values)."""
    param = results.space.get(name)
    if isinstance(param, (FloatParam, IntParam)):
        return ParamAxis(name, param.type, bool(param.log), float(param.low), float(param.high))
    values = [v for v in results.trials[name].tolist() if not _missing(v)] if name in results.trials else []
    if isinstance(param, (ChoiceParam, GridParam)):
        known = [_hashable(v) for v in param.values]
        categories = tuple(dict.fromkeys([*known, *(_hashable(v) for v in values)]))
        return ParamAxis(name, "categorical", categories=categories, labels=tuple(_label(c) for c in categories))
    if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        kind = "int" if all(isinstance(v, int) for v in values) else "float"
        return ParamAxis(name, kind, False, float(min(values)), float(max(values)))
    categories = tuple(sorted({_hashable(v) for v in values}, key=str))
    return ParamAxis(name, "categorical", categories=categories, labels=tuple(_label(c) for c in categories))


@dataclass(frozen=True)
class ParamPanel:
    """One parameter against the metric: per trial, the value (``values``), where it is drawn
    (``x``: the value, or the category's index spread by up to ±:data:`CATEGORY_SPREAD`), and
    the trial's best ``y``. ``note`` says over how many of the scored trials, when some have
    no value of the parameter (a conditional one: ``momentum: 5 of 12 trials``)."""

    axis: ParamAxis
    trial_ids: list[str]
    statuses: list[str]
    values: list[Any]
    x: list[float]
    y: list[float]
    note: str | None = None


@dataclass(frozen=True)
class ParamVsMetric:
    """What :func:`hpsearch.plots.param_vs_metric` draws: one panel per searched parameter.

    ``reason`` says why there is no panel (``None`` when there is one); ``detail`` why no
    trial has a value to draw, when that is why.
    """

    metric: str
    mode: str
    panels: list[ParamPanel]
    best_trial_id: str | None
    log_y: bool
    reason: str | None = None
    detail: str | None = None


def _scored(results: Results) -> Any:
    """The ranked trials with a finite best value, in trial order (what can be drawn against a parameter)."""
    return results.ranked(finite=True).sort_index()


def param_vs_metric(results: Results, params: Sequence[str] | None = None) -> ParamVsMetric:
    """Each trial's best metric value against each parameter (errored trials and NaN/inf bests left out)."""
    scored = _scored(results)
    panels = []
    for name in params if params is not None else results.params:
        if name not in scored:
            continue
        axis = param_axis(results, name)
        keep = [i for i, v in enumerate(scored[name].tolist()) if axis.position(_hashable(v)) is not None]
        if not keep:  # no scored trial has a value of it that can be placed: nothing to draw
            continue
        rows = scored.iloc[keep]
        values = [_hashable(v) for v in rows[name].tolist()]
        if axis.kind == "categorical":
            x = _spread([axis.categories.index(v) for v in values], rows["best"].tolist())
        else:
            x = [float(v) for v in values]
        note = _count_note(name, len(keep), len(scored))
        panels.append(
            ParamPanel(axis, list(rows["trial_id"]), list(rows["status"]), values, x, rows["best"].tolist(), note)
        )
    best = results.best
    names = list(params if params is not None else results.params)
    reason = detail = None
    if not panels:
        reason = "no searched parameter with scored trials" if names else "no searched parameter"
        detail = no_values_reason(results, ranked=True) if names and scored.empty else None
    return ParamVsMetric(
        metric=results.metric,
        mode=results.mode,
        panels=panels,
        best_trial_id=None if best is None else best["trial_id"],
        log_y=log_scale_suits(scored["best"].tolist()),
        reason=reason,
        detail=detail,
    )


def _spread(indices: list[int], order_by: list[float]) -> list[float]:
    """Category positions, equal ones spread evenly over ±CATEGORY_SPREAD (in ``order_by`` order)."""
    out = [float(i) for i in indices]
    for index in set(indices):
        members = sorted((j for j, i in enumerate(indices) if i == index), key=lambda j: order_by[j])
        if len(members) > 1:
            for k, j in enumerate(members):
                out[j] = index - CATEGORY_SPREAD + 2 * CATEGORY_SPREAD * k / (len(members) - 1)
    return out


@dataclass(frozen=True)
class ParallelCoordinates:
    """What :func:`hpsearch.plots.parallel_coordinates` draws.

    ``axes[0]`` is the metric (each trial's best); then one axis per parameter. Each line
    is a trial: ``positions[i][k]`` is where trial ``i`` crosses axis ``k``, scaled to
    [0, 1] over the axis's range (log-scaled where ``log``; categories evenly spaced;
    ``None`` where the trial has no value). ``ticks[k]`` are the tick positions and
    ``tick_labels[k]`` their labels. ``reason`` says why there is no line (``None`` when
    there is one). ``notes`` has one line per parameter that some lines do not cross (a
    conditional one, absent where its condition was false: ``momentum: 5 of 12 trials``).
    """

    metric: str
    mode: str
    axes: list[ParamAxis]
    ticks: list[list[float]]
    tick_labels: list[list[str]]
    trial_ids: list[str]
    statuses: list[str]
    values: list[float]
    positions: list[list[float | None]]
    best_trial_id: str | None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)


def parallel_coordinates(results: Results, params: Sequence[str] | None = None) -> ParallelCoordinates:
    """Every scored trial as a line across the metric and the parameters."""
    scored = _scored(results)
    names = [p for p in (params if params is not None else results.params) if p in scored]
    names = [p for p in names if scored[p].notna().any() or not len(scored)]  # a parameter no trial had: no axis
    values = [float(v) for v in scored["best"]]
    metric_axis = ParamAxis(
        results.metric, "float", log_scale_suits(values), min(values, default=0.0), max(values, default=1.0)
    )
    axes = [metric_axis, *(param_axis(results, n) for n in names)]
    columns = [values, *(scored[n].tolist() for n in names)]
    positions: list[list[float | None]] = [[] for _ in values]
    ticks, labels = [], []
    for axis, column in zip(axes, columns):
        lo, hi, axis_ticks, axis_labels = _scale(axis)
        ticks.append([_unit(t, lo, hi) for t in axis_ticks])
        labels.append(axis_labels)
        for i, v in enumerate(column):
            at = axis.position(_hashable(v))
            positions[i].append(None if at is None else _unit(at, lo, hi))
    best = results.best
    notes = [
        note
        for k, name in enumerate(names, start=1)
        if (note := _count_note(name, sum(row[k] is not None for row in positions), len(values)))
    ]
    return ParallelCoordinates(
        metric=results.metric,
        mode=results.mode,
        axes=axes,
        ticks=ticks,
        tick_labels=labels,
        trial_ids=list(scored["trial_id"]),
        statuses=list(scored["status"]),
        values=values,
        positions=positions,
        best_trial_id=None if best is None else best["trial_id"],
        reason=None if values else no_values_reason(results, ranked=True),
        notes=notes,
    )


def _scale(axis: ParamAxis) -> tuple[float, float, list[float], list[str]]:
    """(low, high, tick positions, tick labels) on the axis's own scale (log10 when ``log``)."""
    if axis.kind == "categorical":
        n = len(axis.categories)
        return 0.0, float(max(n - 1, 0)), [float(i) for i in range(n)], list(axis.labels)
    low, high = axis.position(axis.low), axis.position(axis.high)
    if low is None or high is None:
        return 0.0, 1.0, [], []
    raw = [low + (high - low) * k / 4 for k in range(5)] if high > low else [low]
    if axis.kind == "int" and not axis.log:
        raw = sorted({float(round(t)) for t in raw})
    shown = [10**t if axis.log else t for t in raw]
    return low, high, raw, [f"{v:.3g}" for v in shown]


def _unit(value: float, low: float, high: float) -> float:
    return 0.5 if high <= low else (value - low) / (high - low)


def _count_note(name: str, having: int, total: int) -> str | None:
    """``momentum: 5 of 12 trials`` when only some trials have a value of the parameter, else ``None``."""
    return f"{name}: {having} of {total} trials" if having < total else None


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _hashable(value: Any) -> Any:
    """Categories may be lists (``values: [[64, 64], [128]]``): compare them as tuples."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def _label(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return "[" + ", ".join(_label(v) for v in value) + "]"
    return str(value)
