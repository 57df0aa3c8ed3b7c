"""Several objectives: each trial's point, the Pareto front as a table, its hypervolume and the plot data.

The rule lives in :func:`hpsearch.experiment.ranking.pareto_front`. It says which report is
a trial's point and what is on the front; NaN is never on it. This module reads the points
out of :attr:`Results.history` and shapes the answers: :attr:`Results.pareto`,
:meth:`Results.hypervolume` and :func:`pareto_front`. The last is what
:func:`hpsearch.plots.pareto_front` draws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pandas as pd

from hpsearch.analysis._feasibility import violations_by_trial
from hpsearch.analysis._view import SearchTables
from hpsearch.errors import ResultsError
from hpsearch.experiment.ranking import Mode, ParetoFront, dominates
from hpsearch.experiment.ranking import pareto_front as _front

__all__ = ["Objectives", "recorded_objectives", "front_of", "pareto_table", "hypervolume", "ParetoPlot", "pareto_front"]

#: Every objective of a search, in the spec's order: ``(metric, mode)`` pairs.
Objectives = tuple[tuple[str, str], ...]


def recorded_objectives(recorded: Mapping[str, Any], metric: str, mode: str) -> Objectives:
    """The objectives the spec (or summary) recorded: ``metric``/``mode`` lists; one objective otherwise.

    Ranking by another ``metric`` than the spec's (``load_results(metric=...)``) is a single-objective view.
    """
    metrics, modes = recorded.get("metric"), recorded.get("mode")
    if isinstance(metrics, list) and isinstance(modes, list) and metrics and metrics[0] == metric:
        return tuple((str(m), str(d)) for m, d in zip(metrics, modes))
    return ((metric, mode),)


def front_of(results: SearchTables) -> ParetoFront:
    """Each trial's point and the front, by :func:`hpsearch.experiment.ranking.pareto_front`."""
    names = [m for m, _ in results.objectives]
    history = results.history
    columns = [history[m].tolist() if m in history else [None] * len(history) for m in names]
    reports: dict[str, list[tuple[int | None, list[Any]]]] = {t: [] for t in results.trials["trial_id"]}
    iterations = history["iteration"].astype("float64").tolist()
    for row, (trial_id, iteration) in enumerate(zip(history["trial_id"].tolist(), iterations)):
        values = [column[row] for column in columns]
        reports.setdefault(trial_id, []).append((None if iteration != iteration else int(iteration), values))
    modes = cast("list[Mode]", [d for _, d in results.objectives])
    return _front(
        reports,
        modes,
        statuses=dict(zip(results.trials["trial_id"], results.trials["status"])),
        violations=violations_by_trial(history, list(results.trials["trial_id"]), results.constraints),
    )


def pareto_table(results: SearchTables) -> pd.DataFrame:
    """The front's trials, best first by the primary objective: ``trial_id``, ``number``, ``status``,
    ``iteration`` (the report that is the trial's point), one column per objective, then the searched
    parameters."""
    front = front_of(results).front
    names = [m for m, _ in results.objectives]
    trials = results.trials.set_index("trial_id")
    params = [p for p in results.params if p in trials.columns]
    rows = []
    for point in front:
        row = trials.loc[point.trial_id]
        rows.append(
            {
                "trial_id": point.trial_id,
                "number": row["number"],
                "status": row["status"],
                "iteration": point.iteration,
                **dict(zip(names, point.values)),
                **{p: row[p] for p in params},
            }
        )
    table = pd.DataFrame(rows, columns=["trial_id", "number", "status", "iteration", *names, *params])
    table["number"] = table["number"].astype("Int64")
    table["iteration"] = table["iteration"].astype("Int64")
    for name in names:
        table[name] = table[name].astype("float64")
    return table


def hypervolume(results: SearchTables, reference: Sequence[float]) -> float:
    """The hypervolume of the search's front up to ``reference`` (one value per objective, in the spec's order).

    Raises:
        ResultsError: ``reference`` does not hold one finite number per objective.
    """
    names = [m for m, _ in results.objectives]
    try:
        values = [float(r) for r in reference]
    except (TypeError, ValueError):
        raise ResultsError(
            f"the reference must be numbers, one per objective ({', '.join(names)}), got {reference!r}"
        ) from None
    if len(values) != len(names) or not all(math.isfinite(v) for v in values):
        raise ResultsError(
            f"the reference must hold one finite number per objective ({', '.join(names)}), got {list(reference)}"
        )
    return front_of(results).hypervolume(values)


@dataclass(frozen=True)
class ParetoPlot:
    """What :func:`hpsearch.plots.pareto_front` draws.

    Attributes:
        objectives: ``(metric, mode)`` per objective, in the spec's order.
        trial_ids: Every trial with a complete point (a finite value of every objective).
        values: Their points, one tuple per trial (objective order).
        statuses: Their statuses.
        on_front: Per trial, whether it is on the front.
        feasible: Per trial, whether its point meets the spec's constraints (an infeasible point is
            never on the front, and is drawn apart).
        left_out: Trials with a point that is not complete (a value missing, NaN or ±inf): never drawn.
    """

    objectives: Objectives
    trial_ids: list[str] = field(default_factory=list)
    values: list[tuple[float, ...]] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    on_front: list[bool] = field(default_factory=list)
    feasible: list[bool] = field(default_factory=list)
    left_out: int = 0

    @property
    def panels(self) -> list[tuple[int, int]]:
        """The plots it is drawn as: one per pair of objectives (:attr:`pairs`)."""
        return self.pairs

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """The objective pairs to draw, ``(x, y)`` indices: one for 2 objectives, every pair for more."""
        n = len(self.objectives)
        return [(i, j) for i in range(n) for j in range(i + 1, n)]

    def staircase(self, x: int, y: int) -> tuple[list[float], list[float]]:
        """The front's attainment staircase in objectives ``(x, y)``, from the point best in ``x``.

        With two objectives it outlines the region the front dominates; with more, it is the
        front of the two-objective projection (a point of the full front may lie above it).
        """
        modes = (self.objectives[x][1], self.objectives[y][1])
        pts = [(v[x], v[y]) for v, on in zip(self.values, self.on_front) if on]
        if len(self.objectives) > 2:  # the projection's own front
            typed = cast("list[Mode]", list(modes))
            pts = [p for p in pts if not any(dominates(q, p, typed) for q in pts)]
        if not pts:
            return [], []
        pts.sort(key=lambda p: p[0] if modes[0] == "min" else -p[0])
        xs, ys = [pts[0][0]], [pts[0][1]]
        for px, py in pts[1:]:
            xs += [px, px]
            ys += [ys[-1], py]
        return xs, ys


def pareto_front(results: SearchTables) -> ParetoPlot:
    """The plot data of the Pareto front: every trial's complete point and whether it is on the front."""
    found = front_of(results)
    statuses = dict(zip(results.trials["trial_id"], results.trials["status"]))
    drawn = [point for point in found.points if point.complete]
    return ParetoPlot(
        results.objectives,
        trial_ids=[point.trial_id for point in drawn],
        values=[tuple(float(v) for v in point.values if v is not None) for point in drawn],
        statuses=[str(statuses.get(point.trial_id, "")) for point in drawn],
        on_front=[point.on_front for point in drawn],
        feasible=[point.feasible for point in drawn],
        left_out=len(found.points) - len(drawn),
    )
