"""Data for the scheduler's effect: iterations run per trial and the iterations early stopping saved."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from hpsearch.analysis._curves import asha_rungs
from hpsearch.experiment.layout import STOPPED

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.analysis._results import Results

__all__ = ["SchedulerEffect", "scheduler_effect"]


@dataclass(frozen=True)
class SchedulerEffect:
    """What :func:`hpsearch.plots.scheduler_effect` draws.

    Per trial (in order): the iterations it ran. ``full_iterations`` is what a trial runs when
    nothing stops it: the scheduler's ``max_t``, else the longest trial. ``used`` is the
    iterations run in total, ``saved`` those the stopped trials did not run
    (``full_iterations - iterations`` each), ``saved_fraction = saved / (used + saved)``: the share
    of the search that running every stopped trial to the end would have added.
    ``time_saved_s`` estimates the trial time saved: each stopped trial's unrun iterations
    times its median time per iteration (start-up excluded). ``rungs`` are ASHA's
    milestones (``grace_period * reduction_factor**k`` below ``max_t``). ``reason`` says
    why there is nothing to draw: no trial, or none that ran an iteration (``None`` otherwise).
    """

    scheduler: str
    trial_ids: list[str]
    numbers: list[int]
    statuses: list[str]
    iterations: list[int]
    full_iterations: int
    rungs: list[int]
    used: int
    saved: int
    saved_fraction: float
    time_used_s: float
    time_saved_s: float
    reason: str | None = None

    @property
    def budget(self) -> int:
        """Deprecated name of :attr:`full_iterations` (``budget:`` is the spec's section of search-wide limits)."""
        warnings.warn(
            "SchedulerEffect.budget is deprecated: use SchedulerEffect.full_iterations",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.full_iterations


def scheduler_effect(results: Results) -> SchedulerEffect:
    """Iterations per trial and what early stopping saved against running every trial to the end."""
    trials = results.trials
    scheduler = results.scheduler
    kind = str(scheduler.get("type", "fifo"))
    iterations = [int(n) for n in trials["iterations"]]
    max_t = scheduler.get("max_t")
    full = int(max_t) if kind != "fifo" and isinstance(max_t, (int, float)) else max(iterations, default=0)
    statuses = list(trials["status"])
    # time per iteration: the median step between reports (the first report also carries start-up)
    steps = results.history.groupby("trial_id", sort=False)["wall_time_s"].diff()
    per_trial = steps.groupby(results.history["trial_id"], sort=False).median()
    overall = float(steps.median()) if steps.notna().any() else 0.0
    saved = time_saved = 0.0
    for trial_id, status, n in zip(trials["trial_id"], statuses, iterations):
        if status == STOPPED and n < full:
            saved += full - n
            step = per_trial.get(trial_id)
            time_saved += (full - n) * (float(step) if step is not None and pd.notna(step) else overall)
    used = sum(iterations)
    total = used + saved
    return SchedulerEffect(
        scheduler=kind,
        trial_ids=list(trials["trial_id"]),
        numbers=[int(n) if pd.notna(n) else i + 1 for i, n in enumerate(trials["number"])],
        statuses=statuses,
        iterations=iterations,
        full_iterations=full,
        rungs=[r for r in asha_rungs(scheduler) if r < full],
        used=used,
        saved=int(saved),
        saved_fraction=saved / total if total else 0.0,
        time_used_s=float(trials["wall_time_s"].fillna(0).sum()),
        time_saved_s=time_saved,
        reason=None if used else "no trial has started yet" if trials.empty else "no trial has reported yet",
    )
