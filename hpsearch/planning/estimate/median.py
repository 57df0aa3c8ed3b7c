"""Tune's ``MedianStoppingRule``, re-derived: past ``grace_period``, a trial stops at an epoch when the median of
the other trials that reached it beats it, with ``min_samples_required`` of them.
"""

from __future__ import annotations

import bisect
import math
import random
from typing import TYPE_CHECKING

from hpsearch.planning.estimate.policy import _CONTINUE, _STOP, _Policy, _Trial

if TYPE_CHECKING:
    from hpsearch.planning.estimate.workload import Workload


class _Median(_Policy):
    """Tune's ``MedianStoppingRule``: past ``grace_period``, a trial stops when the median of the other trials
    that reached its epoch beats it (with at least ``min_samples_required`` of them)."""

    def __init__(self, w: Workload, trials: list[_Trial], rng: random.Random) -> None:
        super().__init__(w, trials, rng)
        self.grace = float(self.options.get("grace_period", 1))
        self.min_samples = int(self.options.get("min_samples_required", 3))
        self.reached: dict[int, list[float]] = {}

    def next_check(self, trial: _Trial) -> int:
        return min(max(trial.t + 1, math.ceil(self.grace)), trial.last)

    def on_report(self, trial: _Trial, epoch: int) -> str:
        if epoch < self.grace:
            return _CONTINUE
        values = self.reached.setdefault(epoch, [])
        bisect.insort(values, trial.quality)
        others = len(values) - 1
        if others < self.min_samples:
            return _CONTINUE
        mine = bisect.bisect_left(values, trial.quality)

        def other(j: int) -> float:  # the j-th of the others: the values without this trial's
            return values[j if j < mine else j + 1]

        median = (other((others - 1) // 2) + other(others // 2)) / 2
        return _STOP if median > trial.quality else _CONTINUE
