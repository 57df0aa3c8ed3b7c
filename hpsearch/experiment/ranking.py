"""The ranking: each trial's best value and best epoch, and the order of trials, under ``mode``.

One function, :func:`rank_trials`, decides it for every view: the closing table of
``hpsearch run``, ``hpsearch_summary.json``, :func:`hpsearch.load_results` (``trials.best``,
``Results.best``, ``best_trials``), the report and the Optuna export. The rules:

- **Values.** A report's value counts when it is a number: ``int``, ``float``, a NumPy
  scalar or anything else with ``__float__`` (a 0-d tensor). Strings, ``None``, booleans
  and containers are not values: a trial that reported only those has no best value.
- **Best value.** The best *finite* value over all the trial's reports (lowest under
  ``min``, highest under ``max``); the earliest report wins a tie, and its iteration is
  the best iteration. A trial that reported only NaN or ±inf keeps the last of them as
  its best, shown as it is.
- **Reports after a stop.** Every report in the trial's history counts, also those that
  reached Tune after the scheduler decided to stop the trial (a nested run can deliver
  one more report while it is being torn down). They were computed by the trial, they
  are in its history and in its learning curve; leaving them out would make the best
  value depend on how fast the nested run shut down.
- **Order.** Ranked trials are those that did not error and have a best value: those
  with a finite best first, by value, then those whose best is NaN or ±inf, in creation
  order. Ties keep creation order. Errored trials and trials without a value are not
  ranked (``rank`` is ``None``), whatever they reported.
- **The best trial** is the first ranked trial with a finite best; a search where no
  trial has one has no best trial.

With ``constraints`` in the spec, each report also has a *violation*
(:func:`hpsearch.spec.constraints.violation`: 0 when every constraint holds in it):

- **Best value.** The best finite value over the trial's *feasible* reports (violation 0).
  A trial with none is infeasible: its best is the finite value of its report with the
  least violation (the better value, then the earliest, wins a tie), and its violation is
  that report's.
- **Order.** Feasible trials first, by value; then infeasible ones, by violation (then
  value); then those whose best is NaN or ±inf; errored trials and trials without a value
  are not ranked, as above.
- **The best trial** is the first ranked *feasible* trial with a finite best; a search
  where no trial met the constraints has no best trial.

With several objectives (``metric``/``mode`` lists), :func:`pareto_front` decides the front:

- **A trial's point** is one report: the one that gave its best value of the *primary*
  (first) objective by the rules above (the earliest wins a tie; with constraints, its best
  feasible report, else its least violating one); every objective is read
  from that same report, so a point is a model that existed (the one whose checkpoint is
  kept as the trial's best), never the best of each objective taken from different epochs.
- **On the front** are the points not dominated by any other point (another is at least
  as good in every objective and better in one). Points with a value that is missing or
  not a finite number (NaN, ±inf) are never on the front, nor dominate; errored trials
  have no point, as they have no rank. Two equal points are both on the front. With
  constraints, only feasible points are on the front or dominate.
- **Hypervolume** (:func:`hypervolume`) is the volume the front dominates up to a
  reference point (worse than the front in every objective), computed exactly; points not
  better than the reference in every objective add nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hpsearch.experiment.layout import ERRORED

__all__ = [
    "Mode",
    "TrialScore",
    "Ranking",
    "rank_trials",
    "best_checkpoint",
    "metric_value",
    "is_better",
    "ParetoPoint",
    "ParetoFront",
    "pareto_front",
    "dominates",
    "hypervolume",
]

Mode = Literal["min", "max"]
#: One report of a trial, as the ranking sees it: its iteration (epoch) and its metric value.
Report = tuple["int | None", Any]


def metric_value(value: Any) -> float | None:
    """A reported value as a float, or ``None`` when it is not a number (see the module's rules)."""
    if value is None or isinstance(value, (bool, str, bytes)):
        return None
    if type(value).__name__ in ("bool_", "bool"):  # numpy.bool_
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def is_better(a: float, b: float, mode: Mode) -> bool:
    """Whether value ``a`` is strictly better than ``b`` under ``mode`` (both finite)."""
    return a < b if mode == "min" else a > b


@dataclass(frozen=True)
class TrialScore:
    """One trial under the ranking.

    Attributes:
        trial_id: The trial.
        best: Its best value (see the module's rules), or ``None``.
        best_iteration: The iteration (epoch) of the report that gave ``best``.
        last: Its last numeric value, or ``None``.
        rank: 1 for the best trial, 2 for the next, …; ``None`` when not ranked.
        violation: The total violation of the constraints at its best report (0.0: feasible);
            ``None`` when the search has no constraints.
    """

    trial_id: str
    best: float | None
    best_iteration: int | None
    last: float | None
    rank: int | None
    violation: float | None = None

    @property
    def finite(self) -> bool:
        """Whether the best value is a finite number."""
        return self.best is not None and math.isfinite(self.best)

    @property
    def feasible(self) -> bool:
        """Whether its best report meets every constraint (always, without constraints)."""
        return not self.violation


@dataclass(frozen=True)
class Ranking:
    """Every trial's score, in rank order (ranked trials first, then the rest in creation order)."""

    mode: Mode
    scores: tuple[TrialScore, ...]

    @property
    def ranked(self) -> list[TrialScore]:
        """The ranked trials, best first."""
        return [s for s in self.scores if s.rank is not None]

    @property
    def best(self) -> TrialScore | None:
        """The best trial: the first ranked one with a finite best value that meets the constraints."""
        return next((s for s in self.scores if s.rank is not None and s.finite and s.feasible), None)

    def __getitem__(self, trial_id: str) -> TrialScore:
        for score in self.scores:
            if score.trial_id == trial_id:
                return score
        raise KeyError(trial_id)

    def by_id(self) -> dict[str, TrialScore]:
        """Trial id -> its score."""
        return {s.trial_id: s for s in self.scores}


def _score(
    reports: Sequence[Report], mode: Mode, violations: Sequence[float] | None = None
) -> tuple[float | None, int | None, float | None, float | None]:
    """``(best, its iteration, last, violation at best)``; ``violations`` per report, or ``None``: no constraints."""
    best: float | None = None
    best_at: int | None = None
    best_violation: float | None = None
    odd: tuple[float, int | None, float] | None = None  # the last NaN or ±inf, for trials with nothing else
    last: float | None = None
    for index, (iteration, raw) in enumerate(reports):
        value = metric_value(raw)
        if value is None:
            continue
        last = value
        over = 0.0 if violations is None else float(violations[index])
        if not math.isfinite(value):
            odd = (value, iteration, over)
        elif best is None or _better_report(value, over, best, best_violation or 0.0, mode):
            best, best_at, best_violation = value, iteration, over
    if best is None and odd is not None:
        best, best_at, best_violation = odd
    return best, best_at, last, (None if violations is None else best_violation)


def _better_report(value: float, over: float, best: float, best_over: float, mode: Mode) -> bool:
    """Whether a report beats the best so far: less violation (feasible is 0), then a strictly better value."""
    if over != best_over:
        return over < best_over
    return is_better(value, best, mode)


def rank_trials(
    reports: Mapping[str, Sequence[Report]],
    mode: Mode,
    *,
    statuses: Mapping[str, str] | None = None,
    violations: Mapping[str, Sequence[float]] | None = None,
) -> Ranking:
    """Score and order trials. Every view of a search ranks its trials with this function.

    Args:
        reports: Trial id -> its reports in order, each ``(iteration, value of the metric)``.
            The mapping's order is the trials' creation order (ties and unranked trials keep it).
        mode: ``"min"`` or ``"max"``.
        statuses: Trial id -> status; ``"errored"`` trials are not ranked.
        violations: With constraints: trial id -> each report's total violation, in the order of its
            reports (0.0: feasible; ``inf``: a constrained metric missing or not a number).

    Example:
        >>> r = rank_trials({"a": [(1, 0.5), (2, float("nan"))], "b": [(1, float("nan"))], "c": [(1, 0.2)]}, "min")
        >>> [(s.trial_id, s.best, s.rank) for s in r.scores]
        [('c', 0.2, 1), ('a', 0.5, 2), ('b', nan, 3)]
    """
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
    statuses = statuses or {}
    sign = 1.0 if mode == "min" else -1.0
    Scored = tuple[str, float | None, int | None, float | None, float | None]
    scored: list[tuple[tuple[int, float, float, int], Scored]] = []
    unranked: list[Scored] = []
    for order, (trial_id, trial_reports) in enumerate(reports.items()):
        over = None if violations is None else violations.get(trial_id, [math.inf] * len(trial_reports))
        best, best_at, last, violation = _score(trial_reports, mode, over)
        row: Scored = (trial_id, best, best_at, last, violation)
        if best is None or statuses.get(trial_id) == ERRORED:
            unranked.append(row)
        elif not math.isfinite(best):
            scored.append(((2, 0.0, 0.0, order), row))
        elif violation:  # infeasible: after every feasible trial, the least violation first
            scored.append(((1, violation, sign * best, order), row))
        else:
            scored.append(((0, sign * best, 0.0, order), row))
    scored.sort(key=lambda item: item[0])
    scores = [TrialScore(t, b, at, last, rank, v) for rank, (_, (t, b, at, last, v)) in enumerate(scored, start=1)]
    scores += [TrialScore(t, b, at, last, None, v) for t, b, at, last, v in unranked]
    return Ranking(mode, tuple(scores))


# ----------------------------------------------------------------------------- several objectives

#: One report of a trial under several objectives: its iteration and each objective's value, in order.
MultiReport = tuple["int | None", Sequence[Any]]


@dataclass(frozen=True)
class ParetoPoint:
    """One trial under several objectives.

    Attributes:
        trial_id: The trial.
        iteration: The iteration (epoch) of the report that is its point (see the module's rules).
        values: Each objective's value in that report (``None``: not a number), in the spec's order.
        on_front: Whether no other point dominates it.
        violation: The constraints' total violation in that report (0.0: feasible); ``None``
            without constraints.
    """

    trial_id: str
    iteration: int | None
    values: tuple[float | None, ...]
    on_front: bool
    violation: float | None = None

    @property
    def complete(self) -> bool:
        """Whether every objective has a finite value (only such points can be on the front)."""
        return _all_finite(self.values)

    @property
    def feasible(self) -> bool:
        """Whether the point meets every constraint (always, without constraints)."""
        return not self.violation


@dataclass(frozen=True)
class ParetoFront:
    """Every trial's point and the front, under ``modes`` (one per objective)."""

    modes: tuple[Mode, ...]
    points: tuple[ParetoPoint, ...]  # every trial with a point, in creation order

    @property
    def front(self) -> list[ParetoPoint]:
        """The non-dominated points, by the first objective (best first), then creation order."""
        sign = 1.0 if self.modes[0] == "min" else -1.0
        on = [p for p in self.points if p.on_front]
        return sorted(on, key=lambda p: sign * float(p.values[0] or 0.0))

    def hypervolume(self, reference: Sequence[float]) -> float:
        """The hypervolume of the front up to ``reference`` (see :func:`hypervolume`)."""
        return hypervolume([_numbers(p.values) for p in self.front], reference, self.modes)


def best_checkpoint(
    reports: Iterable[tuple[Any, Any]],
    mode: Mode,
    kept: Callable[[str], bool],
    violations: Sequence[float] | None = None,
) -> str | None:
    """The checkpoint still on disk with the best value, by the ranking's rules: every view's best checkpoint.

    ``reports`` are a trial's reports in order, each ``(checkpoint path or None, value of the metric)``;
    ``kept`` says whether a path is still on disk (Ray Train keeps the last ``num_to_keep``, so the best
    report's own checkpoint may be gone: the best of those kept is taken). ``None`` when no kept
    checkpoint's report has a value. With constraints, ``violations`` holds each report's (a feasible
    report's checkpoint is preferred, as the trial's best value is).

    Example:
        >>> best_checkpoint([("c1", 0.2), ("c2", 0.5), ("c3", 0.4)], "min", kept={"c2", "c3"}.__contains__)
        'c3'
    """
    rows = list(reports)
    over = list(violations) if violations is not None else [0.0] * len(rows)
    on_disk = [(path, value, v) for (path, value), v in zip(rows, over) if isinstance(path, str) and kept(path)]
    score = rank_trials(
        {"t": [(i, value) for i, (_, value, _) in enumerate(on_disk)]},
        mode,
        violations=None if violations is None else {"t": [v for _, _, v in on_disk]},
    )["t"]
    return None if score.best_iteration is None else str(on_disk[score.best_iteration][0])


def dominates(a: Sequence[float], b: Sequence[float], modes: Sequence[Mode]) -> bool:
    """Whether point ``a`` dominates ``b``: at least as good in every objective, better in one (finite values)."""
    better = False
    for x, y, mode in zip(a, b, modes, strict=True):
        if is_better(y, x, mode):
            return False
        better = better or is_better(x, y, mode)
    return better


def _point(
    reports: Sequence[MultiReport], mode: Mode, violations: Sequence[float] | None = None
) -> tuple[int | None, tuple[float | None, ...], float | None] | None:
    """The report that gave the primary objective's best value (the ranking's rule, constraints included),
    as ``(iteration, values, violation)``."""
    primary = [(index, values[0] if values else None) for index, (_, values) in enumerate(reports)]
    _, chosen, _, violation = _score(primary, mode, violations)
    if chosen is None:
        return None
    iteration, values = reports[chosen]
    return iteration, tuple(metric_value(v) for v in values), violation


def pareto_front(
    reports: Mapping[str, Sequence[MultiReport]],
    modes: Sequence[Mode],
    *,
    statuses: Mapping[str, str] | None = None,
    violations: Mapping[str, Sequence[float]] | None = None,
) -> ParetoFront:
    """Each trial's point and which points are on the Pareto front (see the module's rules).

    Args:
        reports: Trial id -> its reports in order, each ``(iteration, [value of each objective])``;
            the mapping's order is the trials' creation order.
        modes: ``"min"`` or ``"max"`` per objective, in the same order as the values.
        statuses: Trial id -> status; ``"errored"`` trials have no point.
        violations: With constraints: trial id -> each report's total violation (see :func:`rank_trials`);
            only feasible points are on the front or dominate.

    Example:
        >>> f = pareto_front({"a": [(1, [0.5, 10])], "b": [(1, [0.3, 20])], "c": [(1, [0.6, 20])]}, ["min", "min"])
        >>> [p.trial_id for p in f.front]
        ['b', 'a']
    """
    modes = tuple(modes)
    for mode in modes:
        if mode not in ("min", "max"):
            raise ValueError(f"each mode must be 'min' or 'max', got {mode!r}")
    statuses = statuses or {}
    found: list[tuple[str, int | None, tuple[float | None, ...], float | None]] = []
    for trial_id, trial_reports in reports.items():
        if statuses.get(trial_id) == ERRORED:
            continue
        over = None if violations is None else violations.get(trial_id, [math.inf] * len(trial_reports))
        point = _point(trial_reports, modes[0], over)
        if point is not None:
            found.append((trial_id, *point))
    complete = [(t, _numbers(v)) for t, _, v, over in found if len(v) == len(modes) and _all_finite(v) and not over]
    on_front = {t for t, v in complete if not any(dominates(w, v, modes) for _, w in complete)}
    return ParetoFront(modes, tuple(ParetoPoint(t, it, v, t in on_front, over) for t, it, v, over in found))


def _all_finite(values: Sequence[float | None]) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def _numbers(values: Sequence[float | None]) -> tuple[float, ...]:
    """A complete point's values, typed as the numbers they are."""
    return tuple(float(v) for v in values if v is not None)


def hypervolume(points: Iterable[Sequence[float]], reference: Sequence[float], modes: Sequence[Mode]) -> float:
    """The exact volume dominated by ``points`` and bounded by ``reference``, under ``modes``.

    Each objective is turned into a minimised one (``max`` objectives negated); a point that is
    not strictly better than the reference in every objective adds nothing. Exact for any number
    of objectives: a sweep in 2-D, slicing along the last objective above that (fine for the
    fronts of a search: tens of points).

    Example:
        >>> hypervolume([(1, 3), (2, 2), (3, 1)], (4, 4), ["min", "min"])
        6.0
    """
    reference = tuple(float(r) for r in reference)
    if len(reference) != len(modes):
        raise ValueError(f"the reference has {len(reference)} values for {len(modes)} objectives")
    if not all(math.isfinite(r) for r in reference):
        raise ValueError(f"the reference must hold finite numbers, got {list(reference)}")
    signs = [1.0 if m == "min" else -1.0 for m in modes]
    ref = tuple(s * r for s, r in zip(signs, reference))
    kept = []
    for point in points:
        values = tuple(s * float(v) for s, v in zip(signs, point, strict=True))
        if all(math.isfinite(v) and v < r for v, r in zip(values, ref)):
            kept.append(values)
    return float(_volume(kept, ref))


def _volume(points: list[tuple[float, ...]], ref: tuple[float, ...]) -> float:
    """The volume of the union of the boxes ``[p, ref]`` (every point below ``ref`` in every coordinate)."""
    if not points:
        return 0.0
    if len(ref) == 1:
        return ref[0] - min(p[0] for p in points)
    if len(ref) == 2:
        volume, lowest = 0.0, ref[1]
        for x, y in sorted(points):
            if y < lowest:
                volume += (ref[0] - x) * (lowest - y)
                lowest = y
        return volume
    ordered = sorted(points, key=lambda p: p[-1])
    volume = 0.0
    for i, point in enumerate(ordered):
        top = ordered[i + 1][-1] if i + 1 < len(ordered) else ref[-1]
        if top > point[-1]:
            volume += _volume([p[:-1] for p in ordered[: i + 1]], ref[:-1]) * (top - point[-1])
    return volume
