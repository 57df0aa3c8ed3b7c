"""Matplotlib figures of a search.

Each function takes what :func:`hpsearch.load_results` returned (or the data object the
:mod:`hpsearch.analysis` function of the same name computed from it) and an optional
``ax``, draws, and returns the axes. The statistics are computed in
:mod:`hpsearch.analysis`; nothing here computes a value you cannot get from there.

Trials look the same in every plot: finished trials blue, trials stopped early by the
scheduler grey (hollow markers, dashed lines ending in ``x``), errored trials red,
running trials orange, and the best trial a thick dark red with a star.

Example:
    >>> import hpsearch
    >>> results = hpsearch.load_results("hpsearch-results/digits-quick")
    >>> hpsearch.plots.learning_curves(results)
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hpsearch import analysis as _an
from hpsearch.experiment.layout import ERRORED, FINISHED, PENDING, RUNNING, STOPPED
from hpsearch.formatting import duration, number

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = [
    "learning_curves",
    "optimization_history",
    "param_vs_metric",
    "parallel_coordinates",
    "param_importances",
    "scheduler_effect",
    "pareto_front",
    "pbt_lineage",
    "STATUS_STYLE",
]

BEST_COLOR = "#b2182b"
#: Points the spec's constraints rule out (infeasible), drawn apart as crosses.
INFEASIBLE_COLOR = "#7f7f7f"
#: How each trial status is drawn: line colour, line style, marker face ("none": hollow).
STATUS_STYLE: dict[str, dict[str, Any]] = {
    FINISHED: {"color": "#2166ac", "linestyle": "-", "face": "#2166ac", "label": "finished"},
    STOPPED: {"color": "#8c8c8c", "linestyle": "--", "face": "none", "label": "stopped early"},
    ERRORED: {"color": "#d6604d", "linestyle": ":", "face": "#d6604d", "label": "errored"},
    RUNNING: {"color": "#f4a582", "linestyle": "-", "face": "#f4a582", "label": "running"},
    PENDING: {"color": "#f4a582", "linestyle": "-", "face": "none", "label": "pending"},
}


def _axes(ax: Axes | None, figsize: tuple[float, float] = (7.0, 4.2)) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt  # lazy: matplotlib is heavy; it loads when a plot is drawn

    _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def _empty(ax: Axes, message: str) -> Axes:
    """An empty axes that says why there is nothing to draw."""
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#666666", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def _style(status: str) -> dict[str, Any]:
    return STATUS_STYLE.get(status, STATUS_STYLE[FINISHED])


def _metric_label(metric: str, mode: str) -> str:
    return f"{metric} ({'lower' if mode == 'min' else 'higher'} is better)"


def _status_legend(
    ax: Axes,
    statuses: Collection[str],
    best_label: str | None,
    *,
    lines: bool = False,
    extra: Sequence[Any] = (),
    **kw: Any,
) -> None:
    from matplotlib.lines import Line2D  # lazy: matplotlib is heavy; it loads when a plot is drawn

    handles = list(extra)
    for status in _an.STATUSES:
        if status in statuses:
            st = _style(status)
            marker = ("x" if status in (STOPPED, ERRORED) else "none") if lines else "o"
            handles.append(
                Line2D(
                    [],
                    [],
                    color=st["color"],
                    linestyle=st["linestyle"] if lines else "none",
                    marker=marker,
                    markerfacecolor=st["face"],
                    label=st["label"],
                )
            )
    if best_label:
        handles.append(
            Line2D([], [], color=BEST_COLOR, lw=2.5 if lines else 0, marker="*", markersize=11, label=best_label)
        )
    if handles:
        ax.legend(handles=handles, fontsize="small", frameon=False, **kw)


def learning_curves(results: Any, *, metric: str | None = None, ax: Axes | None = None) -> Axes:
    """The metric against the iteration, one line per trial.

    Stopped trials are dashed grey lines ending in ``x`` where the scheduler stopped
    them; the best trial is drawn thick, on top; ASHA's rungs are faint vertical lines.
    """
    from matplotlib.ticker import MaxNLocator  # lazy: matplotlib is heavy; it loads when a plot is drawn

    data = results if isinstance(results, _an.LearningCurves) else _an.learning_curves(results, metric)
    ax = _axes(ax)
    if not data.curves:
        return _empty(ax, data.reason or f"no trial reported {data.metric}")
    best = None
    for curve in data.curves:
        if curve.trial_id == data.best_trial_id:
            best = curve
            continue
        st = _style(curve.status)
        finished = curve.status == FINISHED
        ax.plot(
            curve.x,
            curve.y,
            color=st["color"],
            linestyle=st["linestyle"],
            lw=1.3 if finished else 1.0,
            alpha=0.85 if finished else 0.6,
            marker="o" if len(curve.x) == 1 else None,  # one report: a dot, or it would not show
            markersize=4,
        )
        if curve.status in (STOPPED, ERRORED):
            ax.plot(curve.x[-1:], curve.y[-1:], marker="x", color=st["color"], alpha=0.8, linestyle="none")
    if best is not None:
        ax.plot(best.x, best.y, color=BEST_COLOR, lw=2.6, zorder=5)
        ax.plot(best.x[-1:], best.y[-1:], marker="*", markersize=13, color=BEST_COLOR, zorder=6, linestyle="none")
    for rung in data.rungs:
        ax.axvline(rung, color="#bbbbbb", lw=0.8, zorder=0)
    if data.max_t is not None:
        ax.axvline(data.max_t, color="#777777", lw=0.9, linestyle=":", zorder=0)
    if data.log_y:
        ax.set_yscale("log")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(data.x_label + ("  (grey lines: ASHA rungs)" if data.rungs else ""))
    ax.set_ylabel(_metric_label(data.metric, data.mode))
    ax.set_title(f"Learning curves: {data.metric} of {len(data.curves)} trials")
    value = f" ({number(data.best_value)})" if data.best_value is not None else ""
    best_label = f"best: {best.trial_id}{value}" if best else None
    _status_legend(ax, {c.status for c in data.curves}, best_label, lines=True, loc="upper right")
    ax.grid(alpha=0.25)
    return ax


def optimization_history(results: Any, *, ax: Axes | None = None) -> Axes:
    """Each trial's best value in the order the trials were proposed, with the running best."""
    data = results if isinstance(results, _an.OptimizationHistory) else _an.optimization_history(results)
    ax = _axes(ax)
    points = [
        (n, v, s, t) for n, v, s, t in zip(data.numbers, data.values, data.statuses, data.trial_ids) if v is not None
    ]
    if not points:
        return _empty(ax, data.reason or f"no trial reported {data.metric}")
    for status in _an.STATUSES:
        mine = [(n, v) for n, v, s, _ in points if s == status]
        if mine:
            st = _style(status)
            ax.scatter(
                [n for n, _ in mine],
                [v for _, v in mine],
                s=36,
                facecolors=st["face"],
                edgecolors=st["color"],
                linewidths=1.2,
                zorder=3,
            )
    failed = [n for n, v, s in zip(data.numbers, data.values, data.statuses) if s == ERRORED and v is None]
    if failed:  # no value to place them by: mark them along the bottom
        ax.plot(
            failed,
            [0.02] * len(failed),
            "x",
            color=_style(ERRORED)["color"],
            transform=ax.get_xaxis_transform(),
            clip_on=False,
            zorder=3,
        )
    steps = [(n, b) for n, b in zip(data.numbers, data.running_best) if b is not None]
    (line,) = ax.step(
        [n for n, _ in steps],
        [b for _, b in steps],
        where="post",
        color="#333333",
        lw=1.6,
        label="running best",
        zorder=2,
    )
    best = next(((n, v) for n, v, _, t in points if t == data.best_trial_id), None)
    if best is not None:
        ax.plot(*best, marker="*", markersize=15, color=BEST_COLOR, linestyle="none", zorder=4)
    if data.log_y:
        ax.set_yscale("log")
    ax.set_xlabel("trial (in the order proposed)" + ("; x at the bottom: errored without a value" if failed else ""))
    ax.set_ylabel(f"best {_metric_label(data.metric, data.mode)}")
    ax.set_title("Optimisation history")
    from matplotlib.ticker import MaxNLocator  # lazy: matplotlib is heavy; it loads when a plot is drawn

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    shown = {s for _, _, s, _ in points} | ({ERRORED} if failed else set())
    _status_legend(ax, shown, f"best: {data.best_trial_id}" if best else None, extra=[line] if steps else [])
    ax.grid(alpha=0.25)
    return ax


def param_vs_metric(
    results: Any, *, params: Sequence[str] | None = None, ax: Axes | Sequence[Axes] | None = None, ncols: int = 3
) -> Any:
    """One panel per searched parameter: each trial's best metric value against the parameter.

    Log axes where the spec searched on a log scale; categories in spec order.

    Args:
        ax: One Axes per parameter (any sequence or array), or ``None`` for a new figure.

    Returns:
        A flat numpy array of the axes, one per parameter.
    """
    data = results if isinstance(results, _an.ParamVsMetric) else _an.param_vs_metric(results, params)
    n = len(data.panels)
    if ax is None:
        import matplotlib.pyplot as plt  # lazy: matplotlib is heavy; it loads when a plot is drawn

        cols = max(1, min(ncols, n))
        rows = max(1, -(-n // cols))
        fig, grid = plt.subplots(
            rows, cols, figsize=(3.4 * cols, 2.8 * rows), squeeze=False, sharey=True, layout="constrained"
        )
        axes = grid.ravel()
        for extra in axes[n:]:
            fig.delaxes(extra)
        axes = axes[: max(n, 1)]
    else:
        axes = np.atleast_1d(np.asarray(ax, dtype=object)).ravel()
        if len(axes) != max(n, 1):
            raise ValueError(
                f"pass one Axes per parameter: {n} parameter(s) ({', '.join(p.axis.name for p in data.panels)}), got {len(axes)} Axes"
            )
    if not data.panels:
        _empty(axes[0], data.reason or "no searched parameter with scored trials")
        return axes
    for panel, a in zip(data.panels, axes):
        for status in _an.STATUSES:
            idx = [i for i, s in enumerate(panel.statuses) if s == status]
            if idx:
                st = _style(status)
                a.scatter(
                    [panel.x[i] for i in idx],
                    [panel.y[i] for i in idx],
                    s=30,
                    facecolors=st["face"],
                    edgecolors=st["color"],
                    linewidths=1.1,
                    alpha=0.9,
                    zorder=3,
                )
        if data.best_trial_id in panel.trial_ids:
            i = panel.trial_ids.index(data.best_trial_id)
            a.plot(panel.x[i], panel.y[i], marker="*", markersize=14, color=BEST_COLOR, linestyle="none", zorder=4)
        axis = panel.axis
        if axis.kind == "categorical":
            a.set_xticks(range(len(axis.labels)), axis.labels)
            a.set_xlim(-0.5, len(axis.labels) - 0.5)
        else:
            if axis.log:
                a.set_xscale("log")
            if axis.low is not None and axis.high is not None and axis.high > axis.low:
                pad = (axis.high / axis.low) ** 0.04 if axis.log else (axis.high - axis.low) * 0.04
                a.set_xlim(axis.low / pad, axis.high * pad) if axis.log else a.set_xlim(axis.low - pad, axis.high + pad)
        if axis.kind == "int" and not axis.log:
            from matplotlib.ticker import MaxNLocator  # lazy: matplotlib is heavy; it loads when a plot is drawn

            a.xaxis.set_major_locator(MaxNLocator(integer=True))
        a.set_xlabel(axis.name + ("  (log)" if axis.log else ""))
        if panel.note:  # a conditional parameter: drawn over the trials that have it
            a.set_title(panel.note.split(": ", 1)[-1], fontsize="small", color="#555555")
        if data.log_y:
            a.set_yscale("log")
        a.grid(alpha=0.25)
    axes[0].set_ylabel(f"best {data.metric}")
    axes[0].figure.suptitle(f"Parameters vs best {_metric_label(data.metric, data.mode)}", fontsize="medium")
    return axes


def parallel_coordinates(results: Any, *, params: Sequence[str] | None = None, ax: Axes | None = None) -> Axes:
    """Every scored trial as a line across the metric (first axis) and the parameters.

    Lines are coloured by the metric (darker is better); stopped trials dashed; the best
    trial thick dark red.
    """
    import matplotlib as mpl  # lazy: matplotlib is heavy; it loads when a plot is drawn

    data = results if isinstance(results, _an.ParallelCoordinates) else _an.parallel_coordinates(results, params)
    ax = _axes(ax, (9.0, 4.2))
    if not data.values:
        return _empty(ax, data.reason or f"no trial reported {data.metric}")
    lo, hi = min(data.values), max(data.values)
    cmap = mpl.colormaps["Blues"]
    norm = mpl.colors.LogNorm(lo, hi) if data.axes[0].log and lo > 0 and hi > lo else mpl.colors.Normalize(lo, hi)
    order = sorted(range(len(data.values)), key=lambda i: data.values[i], reverse=data.mode == "min")  # best on top
    xs = list(range(len(data.axes)))
    for i in order:
        pts = [(x, y) for x, y in zip(xs, data.positions[i]) if y is not None]
        best = data.trial_ids[i] == data.best_trial_id
        goodness = float(norm(data.values[i]))
        goodness = 1 - goodness if data.mode == "min" else goodness
        color = BEST_COLOR if best else cmap(0.25 + 0.7 * goodness)
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            color=color,
            lw=2.6 if best else 1.2,
            linestyle="--" if data.statuses[i] == STOPPED and not best else "-",
            alpha=1 if best else 0.8,
            zorder=5 if best else 2,
        )
    for x, ticks, labels in zip(xs, data.ticks, data.tick_labels):
        ax.axvline(x, color="#444444", lw=0.8, zorder=1)
        for t, label in zip(ticks, labels):
            ax.text(
                x + 0.03,
                t,
                label,
                fontsize="x-small",
                va="center",
                ha="left",
                color="#333333",
                zorder=6,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.6, "pad": 0.5},
            )
    ax.set_xticks(xs, [a.name + (" (log)" if a.log else "") for a in data.axes], rotation=20 if len(xs) > 6 else 0)
    ax.set_xlim(-0.15, len(xs) - 0.6)
    ax.set_ylim(-0.05, 1.05)
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title(
        f"Parallel coordinates ({len(data.values)} trials; darker = better {data.metric}, dashed = stopped early)"
    )
    if data.notes:  # conditional parameters: the lines of the trials without them skip their axis
        ax.text(
            0.0,
            -0.12,
            "only some trials have: " + "; ".join(data.notes),
            transform=ax.transAxes,
            fontsize="x-small",
            color="#555555",
            va="top",
        )
    return ax


def param_importances(results: Any, *, ax: Axes | None = None, **kwargs: Any) -> Axes:
    """Horizontal bars of each parameter's importance (Optuna's evaluator; fANOVA by default).

    Keyword arguments go to :func:`hpsearch.analysis.param_importances` (``evaluator``,
    ``include_stopped``).
    """
    data = results if isinstance(results, _an.ParamImportances) else _an.param_importances(results, **kwargs)
    ax = _axes(ax, (6.0, 3.6))
    which = "finished or stopped early" if data.include_stopped else "finished"
    ax.set_title(
        f"Parameter importance for {data.metric}\n{data.evaluator} on {data.n_trials} {which} trials", fontsize="medium"
    )
    if not data.importances:
        return _empty(ax, data.reason or "no importances")
    names = list(data.importances)[::-1]
    values = [data.importances[n] for n in names]
    bars = ax.barh(names, values, color="#4393c3")
    ax.bar_label(bars, labels=[f"{v:.2f}" for v in values], padding=3, fontsize="small")
    ax.set_xlim(0, max(values) * 1.18 if max(values) > 0 else 1)
    ax.set_xlabel("importance (sums to 1)" + ("; * rated over the trials that have it" if data.notes else ""))
    for side in ("right", "top"):
        ax.spines[side].set_visible(False)
    if data.notes:  # conditional parameters: rated on their own, or too few trials to rate
        ax.set_yticks(range(len(names)), [f"{n} *" if n in data.notes else n for n in names])
        ax.text(
            0.0,
            -0.28,
            "\n".join(data.notes.values()),
            transform=ax.transAxes,
            fontsize="x-small",
            color="#555555",
            va="top",
        )
    return ax


def scheduler_effect(results: Any, *, ax: Axes | None = None) -> Axes:
    """Iterations each trial ran, and what the scheduler's early stopping saved.

    A bar per trial (in order), hatched up to the budget where the scheduler stopped it;
    the budget (``max_t``, else the longest trial) dotted; ASHA's rungs faint.
    """
    data = results if isinstance(results, _an.SchedulerEffect) else _an.scheduler_effect(results)
    ax = _axes(ax)
    if data.reason is not None or not data.trial_ids:
        return _empty(ax, data.reason or "no trials")
    colors = [_style(s)["color"] for s in data.statuses]
    ax.bar(data.numbers, data.iterations, color=colors, width=0.7, zorder=3)
    unrun = [
        (n, i)
        for n, i, s in zip(data.numbers, data.iterations, data.statuses)
        if s == STOPPED and i < data.full_iterations
    ]
    if unrun:
        ax.bar(
            [n for n, _ in unrun],
            [data.full_iterations - i for _, i in unrun],
            bottom=[i for _, i in unrun],
            width=0.7,
            facecolor="none",
            edgecolor="#bbbbbb",
            hatch="///",
            zorder=2,
            label="not run (saved)",
        )
    none = [n for n, i, s in zip(data.numbers, data.iterations, data.statuses) if s == ERRORED and i == 0]
    if none:  # errored before the first report: no bar to see
        ax.plot(none, [0] * len(none), "x", color=_style(ERRORED)["color"], clip_on=False, zorder=4)
    for rung in data.rungs:
        ax.axhline(rung, color="#cccccc", lw=0.8, zorder=1)
    ax.axhline(
        data.full_iterations, color="#555555", lw=1, linestyle=":", zorder=1, label=f"max_t: {data.full_iterations}"
    )
    from matplotlib.patches import Patch  # lazy: matplotlib is heavy; it loads when a plot is drawn
    from matplotlib.ticker import MaxNLocator  # lazy: matplotlib is heavy; it loads when a plot is drawn

    present = [s for s in _an.STATUSES if s in data.statuses]
    handles = [Patch(color=_style(s)["color"], label=_style(s)["label"]) for s in present]
    extra, _ = ax.get_legend_handles_labels()
    ax.legend(handles=handles + extra, fontsize="small", frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_ylim(0, data.full_iterations * 1.08 if data.full_iterations else None)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial (in the order proposed)")
    ax.set_ylabel("iterations run" + ("  (grey lines: ASHA rungs)" if data.rungs else ""))
    total = data.used + data.saved
    stopped = data.statuses.count(STOPPED)
    approx = "under 1 s" if data.time_saved_s < 1 else f"~{duration(data.time_saved_s, rough=True)}"
    saved_time = f"; {approx} of {duration(data.time_used_s, rough=True)} trial time" if data.saved else ""
    ax.set_title(
        f"{data.scheduler.upper()} stopped {stopped} of {len(data.trial_ids)} trials early\n"
        f"{data.used} of {total} iterations run, {data.saved} saved ({data.saved_fraction:.0%}{saved_time})",
        fontsize="medium",
    )
    return ax


def pareto_front(results: Any, *, ax: Axes | Sequence[Axes] | None = None) -> Any:
    """The Pareto front: every trial's point, the front's trials highlighted, and its staircase.

    Two objectives: one scatter (``ax``), returned. Three or more: one scatter per pair of
    objectives (the staircase is the front of that pair's projection), on ``ax`` (one axes per
    pair) or a new grid, returned as a list of axes. A trial's point is its report with the
    best first objective (:mod:`hpsearch.experiment.ranking`); points with a missing or
    non-finite value are not drawn. Under the spec's ``constraints``, infeasible points (never
    on the front) are drawn apart, as grey crosses.
    """
    data = results if isinstance(results, _an.ParetoPlot) else _an.pareto_front(results)
    pairs = data.pairs
    if len(pairs) <= 1:
        drawn = _axes(None if ax is None else _axes_list(ax)[0], figsize=(6.4, 4.6))
        if not pairs:
            return _empty(drawn, "one objective: there is no front to draw (see optimization_history)")
        _pareto_pair(drawn, data, *pairs[0], legend=True)
        return drawn
    if ax is None:
        import matplotlib.pyplot as plt  # lazy: matplotlib is heavy; it loads when a plot is drawn

        cols = min(3, len(pairs))
        rows = -(-len(pairs) // cols)
        fig, grid = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), layout="constrained", squeeze=False)
        axes = [a for row in grid for a in row]
        for extra in axes[len(pairs) :]:
            extra.set_axis_off()
        fig.suptitle(_pareto_title(data))
    else:
        axes = _axes_list(ax)
        if len(axes) < len(pairs):
            raise ValueError(f"{len(data.objectives)} objectives draw {len(pairs)} plots; ax holds {len(axes)}")
    for i, (x, y) in enumerate(pairs):
        _pareto_pair(axes[i], data, x, y, legend=i == 0)
    return axes[: len(pairs)]


def pbt_lineage(results: Any, *, ax: Axes | None = None) -> Axes:
    """Population-based training's lineage: a lane per trial over its epochs, and an arrow for each
    exploit, from the donor's lane at the epoch the trial continued from into the trial's lane,
    where the trial's own line was cut (``x``). Reads :attr:`Results.lineage`."""
    data = results if isinstance(results, _an.LineageData) else _an.pbt_lineage(results)
    ax = _axes(ax, figsize=(7.0, max(2.4, 0.45 * len(data.trials) + 1.2)))
    if not data.exploits:
        return _empty(ax, "no exploits: not a pbt/pb2 search, or no trial copied another yet")
    lane = {trial: i for i, trial in enumerate(data.trials)}
    for trial, first, last in data.spans:
        ax.plot([first, last], [lane[trial], lane[trial]], color="#bbbbbb", linewidth=2, zorder=1)
    for trial, epoch, donor, donor_epoch in data.exploits:
        if trial not in lane or donor not in lane or donor_epoch is None:
            continue
        if epoch is not None:
            ax.plot([epoch], [lane[trial]], marker="x", color="#8c8c8c", zorder=2)
        ax.annotate(
            "",
            xy=(donor_epoch, lane[trial]),
            xytext=(donor_epoch, lane[donor]),
            arrowprops={"arrowstyle": "->", "color": STATUS_STYLE[FINISHED]["color"], "lw": 1.4},
            zorder=3,
        )
        ax.plot([donor_epoch], [lane[donor]], marker="o", color=STATUS_STYLE[FINISHED]["color"], zorder=3)
    ax.set_yticks(range(len(data.trials)), data.labels)
    ax.set_ylim(-0.6, len(data.trials) - 0.4)
    ax.invert_yaxis()
    ax.set_xlabel("epoch")
    ax.set_title(f"PBT lineage: {len(data.exploits)} exploits (donor -> trial)")
    ax.grid(axis="x", alpha=0.3)
    return ax


def _axes_list(ax: Any) -> list[Axes]:
    """An axes, a sequence of them or a NumPy array of them (``plt.subplots``) as a list."""
    if hasattr(ax, "plot"):
        return [ax]
    return list(ax.ravel() if hasattr(ax, "ravel") else ax)


def _pareto_title(data: Any) -> str:
    n_front = sum(data.on_front)
    left = f"; {data.left_out} trial(s) without a number for every objective not drawn" if data.left_out else ""
    infeasible = data.feasible.count(False) if data.feasible else 0
    apart = f"; {infeasible} infeasible (x)" if infeasible else ""
    return f"Pareto front: {n_front} of {len(data.trial_ids)} trials{apart}{left}"


def _pareto_pair(ax: Axes, data: Any, x: int, y: int, *, legend: bool) -> None:
    """One pair of objectives: dominated points in their status style, the front dark red, its staircase."""
    if not data.trial_ids:
        _empty(ax, "no trial reported a finite number for every objective")
        return
    feasible = data.feasible or [True] * len(data.values)
    for status in _an.STATUSES:
        mine = [
            v
            for v, s, on, ok in zip(data.values, data.statuses, data.on_front, feasible)
            if s == status and ok and not on
        ]
        if mine:
            st = _style(status)
            ax.scatter(
                [v[x] for v in mine],
                [v[y] for v in mine],
                s=30,
                facecolors=st["face"],
                edgecolors=st["color"],
                linewidths=1.0,
                alpha=0.8,
                zorder=3,
            )
    apart = [v for v, ok in zip(data.values, feasible) if not ok]
    crosses = None
    if apart:  # infeasible: the constraints rule them out, whatever their objectives
        crosses = ax.scatter(
            [v[x] for v in apart],
            [v[y] for v in apart],
            s=36,
            marker="x",
            color=INFEASIBLE_COLOR,
            linewidths=1.2,
            zorder=3,
            label=f"infeasible ({len(apart)})",
        )
    front = [(v, t) for v, t, on in zip(data.values, data.trial_ids, data.on_front) if on]
    xs, ys = data.staircase(x, y)
    (stairs,) = ax.plot(xs, ys, color=BEST_COLOR, lw=1.4, alpha=0.7, zorder=2, label="front (staircase)")
    ax.scatter(
        [v[x] for v, _ in front],
        [v[y] for v, _ in front],
        s=60,
        color=BEST_COLOR,
        edgecolors="white",
        linewidths=0.8,
        zorder=4,
        label=f"on the front ({len(front)})",
    )
    ax.set_xlabel(_metric_label(*data.objectives[x]))
    ax.set_ylabel(_metric_label(*data.objectives[y]))
    if len(data.objectives) == 2:
        ax.set_title(_pareto_title(data), fontsize="medium")
    ax.grid(alpha=0.25)
    if legend:
        from matplotlib.lines import Line2D  # lazy: matplotlib is heavy; it loads when a plot is drawn

        dot = Line2D([], [], color=BEST_COLOR, marker="o", linestyle="none", label=f"on the front ({len(front)})")
        dominated = {s for s, on, ok in zip(data.statuses, data.on_front, feasible) if ok and not on}
        _status_legend(ax, dominated, None, extra=[dot, stairs, *([crosses] if crosses is not None else [])])
