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
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hpsearch.experiment.layout import ERRORED

__all__ = ["Mode", "TrialScore", "Ranking", "rank_trials", "metric_value", "is_better"]

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
    """

    trial_id: str
    best: float | None
    best_iteration: int | None
    last: float | None
    rank: int | None

    @property
    def finite(self) -> bool:
        """Whether the best value is a finite number."""
        return self.best is not None and math.isfinite(self.best)


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
        """The best trial: the first ranked one with a finite best value."""
        return next((s for s in self.scores if s.rank is not None and s.finite), None)

    def __getitem__(self, trial_id: str) -> TrialScore:
        for score in self.scores:
            if score.trial_id == trial_id:
                return score
        raise KeyError(trial_id)

    def by_id(self) -> dict[str, TrialScore]:
        """Trial id -> its score."""
        return {s.trial_id: s for s in self.scores}


def _score(reports: Iterable[Report], mode: Mode) -> tuple[float | None, int | None, float | None]:
    best: float | None = None
    best_at: int | None = None
    odd: tuple[float, int | None] | None = None  # the last NaN or ±inf, for trials with nothing else
    last: float | None = None
    for iteration, raw in reports:
        value = metric_value(raw)
        if value is None:
            continue
        last = value
        if not math.isfinite(value):
            odd = (value, iteration)
        elif best is None or is_better(value, best, mode):
            best, best_at = value, iteration
    if best is None and odd is not None:
        best, best_at = odd
    return best, best_at, last


def rank_trials(
    reports: Mapping[str, Sequence[Report]],
    mode: Mode,
    *,
    statuses: Mapping[str, str] | None = None,
) -> Ranking:
    """Score and order trials: the one ranking every view of a search uses.

    Args:
        reports: Trial id -> its reports in order, each ``(iteration, value of the metric)``.
            The mapping's order is the trials' creation order (ties and unranked trials keep it).
        mode: ``"min"`` or ``"max"``.
        statuses: Trial id -> status; ``"errored"`` trials are not ranked.

    Example:
        >>> r = rank_trials({"a": [(1, 0.5), (2, float("nan"))], "b": [(1, float("nan"))], "c": [(1, 0.2)]}, "min")
        >>> [(s.trial_id, s.best, s.rank) for s in r.scores]
        [('c', 0.2, 1), ('a', 0.5, 2), ('b', nan, 3)]
    """
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
    statuses = statuses or {}
    sign = 1.0 if mode == "min" else -1.0
    scored: list[tuple[tuple[int, float, int], str, float | None, int | None, float | None]] = []
    unranked: list[tuple[int, str, float | None, int | None, float | None]] = []
    for order, (trial_id, trial_reports) in enumerate(reports.items()):
        best, best_at, last = _score(trial_reports, mode)
        if best is None or statuses.get(trial_id) == ERRORED:
            unranked.append((order, trial_id, best, best_at, last))
        elif math.isfinite(best):
            scored.append(((0, sign * best, order), trial_id, best, best_at, last))
        else:
            scored.append(((1, 0.0, order), trial_id, best, best_at, last))
    scored.sort(key=lambda item: item[0])
    scores = [TrialScore(t, b, at, last, rank) for rank, (_, t, b, at, last) in enumerate(scored, start=1)]
    scores += [TrialScore(t, b, at, last, None) for _, t, b, at, last in unranked]
    return Ranking(mode, tuple(scores))
