"""The report's plots: each drawn to PNG bytes with a caption read from its data (:func:`report_figures`).

A plot that fails says why instead of costing the whole report; one with nothing to draw is drawn
all the same, an empty axes that says why, with the same reason as its caption.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hpsearch import analysis as an
from hpsearch.analysis import Results
from hpsearch.experiment.layout import STOPPED
from hpsearch.formatting import duration, number
from hpsearch.results import plots
from hpsearch.results.report_content import population_based

__all__ = ["Figure", "report_figures"]

_DPI = 110
#: A figure's size: rows and columns of axes, width and height in inches.
_Size = tuple[int, int, float, float]
#: A plot of the report: key, title, analysis function, plot function, size from its data, caption.
_Plot = tuple[
    str, str, Callable[[Results], Any], Callable[..., Any], Callable[[Any], _Size], Callable[[Results, Any], str]
]


@dataclass
class Figure:
    """One plot of the report: its PNG (or the error that kept it from being drawn) and a caption.

    A plot with nothing to draw is drawn all the same: an empty axes that says why, and the
    same reason as its caption.
    """

    key: str
    title: str
    caption: str
    png: bytes | None = None
    error: str = ""


def report_figures(results: Results) -> list[Figure]:
    """Every plot as PNG bytes, with a caption read from the data; a plot that fails says why."""
    figures = []
    for key, title, compute, draw, size, caption in _plots():
        if key == "pareto_front" and not results.multi_objective:
            continue
        if key == "pbt_lineage" and not population_based(results):
            continue
        fig = Figure(key, title, "")
        try:
            data = compute(results)
            fig.caption = caption(results, data)
            fig.png = _render(draw, data, size(data), sharey=key != "pareto_front")
        except Exception as err:  # noqa: BLE001 - one plot must not cost the whole report
            fig.error = f"{type(err).__name__}: {err}"
        figures.append(fig)
    return figures


def _render(draw: Callable[..., Any], data: Any, size: _Size, *, sharey: bool = True) -> bytes:
    from matplotlib.figure import Figure as MplFigure  # lazy: matplotlib is heavy; results/ imports without it

    rows, cols, width, height = size
    fig = MplFigure(figsize=(width, height), layout="constrained")
    if rows * cols == 1:
        draw(data, ax=fig.subplots())
    else:
        axes = fig.subplots(rows, cols, squeeze=False, sharey=sharey).ravel()
        n = len(data.panels)
        for extra in axes[n:]:
            fig.delaxes(extra)
        draw(data, ax=axes[: max(n, 1)])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI)
    return buffer.getvalue()


# ----------------------------------------------------------------------------- each plot's size and caption


def _one(w: float, h: float) -> Callable[[Any], _Size]:
    return lambda _: (1, 1, w, h)


def _grid(data: Any) -> _Size:
    if not data.panels:  # one empty axes that says why, as wide as the row it is shown in
        return 1, 1, 10.2, 2.4
    n = len(data.panels)
    cols = min(3, n)
    rows = -(-n // cols)
    return rows, cols, 3.4 * cols, 2.7 * rows + 0.4


def _curves(results: Results, data: Any) -> str:
    if data.reason:
        return _sentence(data.reason)
    stopped = sum(c.status == STOPPED for c in data.curves)
    text = f"{data.metric} at every {data.x_label} of each trial."
    if stopped:
        text += f" Dashed grey: the {stopped} trial(s) the scheduler stopped early (x where it stopped them)."
    if data.best_trial_id:
        text += f" Thick red: the best trial, {data.best_trial_id}."
    return text


def _history(results: Results, data: Any) -> str:
    if data.reason:
        return _sentence(data.reason)
    best = results.best
    if best is None:
        return f"Each trial's best {data.metric}, in the order the searcher proposed them. No trial that did not " + (
            f"error met the constraints with a finite value of {data.metric}: there is no best trial."
            if results.constraints
            else f"error has a finite value of {data.metric}: there is no best trial."
        )
    first = next((n for n, b in zip(data.numbers, data.running_best) if b == best["best"]), None)
    return (
        f"Each trial's best {data.metric}, in the order the searcher proposed them; the line is the best so far. "
        f"The best value, {number(best['best'])}, was found by trial {first} of {len(data.numbers)}."
    )


def _params(results: Results, data: Any) -> str:
    if data.reason:
        return _sentence(data.reason + (f": {data.detail}" if data.detail else ""))
    logs = [p.axis.name for p in data.panels if p.axis.log]
    text = "Each trial's best value against each searched parameter (hollow: stopped early)."
    return text + (f" Log axes for {', '.join(logs)}, as the spec searched them." if logs else "")


def _parallel(results: Results, data: Any) -> str:
    if data.reason:
        return _sentence(data.reason)
    return "Each line is a trial, through its best metric value and its parameters; darker lines did better."


def _importance(results: Results, data: Any) -> str:
    if not data.importances:
        return f"Not computed: {data.reason}."
    top, value = next(iter(data.importances.items()))
    return (
        f"How much of the variation in {data.metric} each parameter explains ({data.evaluator}, Optuna's "
        f"evaluator, on {data.n_trials} trials). {top} explains the most ({value:.0%}). "
        "With few trials, read this as a hint, not a measurement."
    )


def _scheduler(results: Results, data: Any) -> str:
    if data.reason:
        return _sentence(data.reason)
    if data.scheduler == "fifo":
        return "No early stopping (FIFO scheduler): every trial ran to its end."
    stopped = data.statuses.count(STOPPED)
    return (
        f"Iterations each trial ran (max_t {data.full_iterations}). {data.scheduler.upper()} stopped {stopped} trial(s) early, "
        f"saving {data.saved} of {data.used + data.saved} iterations ({data.saved_fraction:.0%}) and "
        f"{'about ' if data.time_saved_s >= 1 else ''}{duration(data.time_saved_s)} of trial time: "
        "the time a nested trial takes to start is not saved."
    )


def _pareto_size(data: Any) -> _Size:
    n = len(data.panels)
    if n <= 1:
        return 1, 1, 6.4, 4.6
    cols = min(3, n)
    rows = -(-n // cols)
    return rows, cols, 4.0 * cols, 3.4 * rows + 0.4


def _pareto(results: Results, data: Any) -> str:
    first = results.objectives[0][0]
    left = (
        f" {data.left_out} trial(s) without a finite number for every objective are not drawn." if data.left_out else ""
    )
    pairs = " Three or more objectives: one plot per pair." if len(data.panels) > 1 else ""
    infeasible = data.feasible.count(False)
    apart = (
        f" {infeasible} trial(s) violate the constraints: grey crosses, never on the front."
        if infeasible
        else (" Only trials that meet the constraints can be on the front." if results.constraints else "")
    )
    point = "its feasible report with the best" if results.constraints else "its report with the best"
    return (
        f"{sum(data.on_front)} of {len(data.trial_ids)} trials are on the front (dark red): no other trial is "
        f"at least as good in every objective and better in one. A trial's point is {point} "
        f"{first} (the first objective).{pairs}{apart}{left}"
    )


def _lineage_size(data: Any) -> _Size:
    return 1, 1, 7.0, max(2.4, 0.45 * len(data.trials) + 1.2)


def _lineage(results: Results, data: Any) -> str:
    copied = len({t for t, *_ in data.exploits})
    return (
        f"{len(data.exploits)} exploits: each arrow goes from the donor's lane, at the epoch whose checkpoint "
        f"the trial continued from, into that trial (its own line was cut at the x). {copied} of "
        f"{len(data.trials)} trials continued from another's checkpoint at least once."
    )


def _sentence(reason: str) -> str:
    """A plot's reason (``no trial reported val_loss yet``) as a caption: ``No trial reported val_loss yet.``"""
    return reason[:1].upper() + reason[1:] + ("" if reason.endswith(".") else ".")


def _plots() -> list[_Plot]:
    """Each plot, in report order: its key, title, analysis function, plot function, figure size (rows, columns,
    width, height, from its data) and caption (from the results and its data). Built when asked, so that the
    functions are the ones :mod:`hpsearch.analysis` and :mod:`hpsearch.results.plots` hold then."""
    return [
        ("pareto_front", "Pareto front", an.pareto_front, plots.pareto_front, _pareto_size, _pareto),
        ("pbt_lineage", "PBT lineage", an.pbt_lineage, plots.pbt_lineage, _lineage_size, _lineage),
        ("learning_curves", "Learning curves", an.learning_curves, plots.learning_curves, _one(5.8, 3.8), _curves),
        (
            "optimization_history",
            "Optimisation history",
            an.optimization_history,
            plots.optimization_history,
            _one(5.8, 3.8),
            _history,
        ),
        ("param_vs_metric", "Parameters vs metric", an.param_vs_metric, plots.param_vs_metric, _grid, _params),
        (
            "parallel_coordinates",
            "Parallel coordinates",
            an.parallel_coordinates,
            plots.parallel_coordinates,
            _one(10.2, 4.0),
            _parallel,
        ),
        (
            "param_importances",
            "Parameter importance",
            an.param_importances,
            plots.param_importances,
            _one(5.8, 3.8),
            _importance,
        ),
        ("scheduler_effect", "Early stopping", an.scheduler_effect, plots.scheduler_effect, _one(5.8, 3.8), _scheduler),
    ]
