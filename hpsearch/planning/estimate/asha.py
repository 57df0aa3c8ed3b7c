"""Tune's ``AsyncHyperBandScheduler`` (ASHA), re-derived: rungs at ``grace_period * rf**k`` up to ``max_t``, per
bracket; a trial goes on past a rung when it is not below the ``1 - 1/rf`` quantile of the trials recorded
there so far (Tune's ``np.nanpercentile`` rule, to the last bit: :func:`~.spread._percentile`).
"""

from __future__ import annotations

import bisect
import math
import random
from typing import TYPE_CHECKING

from hpsearch.planning.estimate.policy import _CONTINUE, _STOP, _Policy, _Trial
from hpsearch.planning.estimate.spread import _percentile

if TYPE_CHECKING:
    from hpsearch.planning.estimate.workload import Workload


class _Asha(_Policy):
    """Tune's ``AsyncHyperBandScheduler``: rungs at ``grace_period * rf**k`` up to ``max_t``, per bracket."""

    def __init__(self, w: Workload, trials: list[_Trial], rng: random.Random) -> None:
        super().__init__(w, trials, rng)
        grace = float(self.options.get("grace_period", 1))
        self.max_t = float(self.options.get("max_t", 100))
        self.rf = float(self.options.get("reduction_factor", 4))
        self.quantile = (1 - 1 / self.rf) * 100
        # per bracket: rungs from the highest down, each (milestone, sorted values, recorded trials)
        self.brackets: list[list[tuple[float, list[float], set[int]]]] = []
        self.checks: list[list[int]] = []
        for s in range(int(self.options.get("brackets", 1))):
            count = int(math.log(self.max_t / grace) / math.log(self.rf) - s + 1)
            rungs = [grace * self.rf ** (k + s) for k in reversed(range(count))]
            self.brackets.append([(m, [], set()) for m in rungs])
            self.checks.append(sorted({math.ceil(m) for m in rungs}))
        sizes = [len(b) for b in self.brackets]
        self.weights = [math.exp(size - max(sizes)) for size in sizes]

    def on_add(self, trial: _Trial) -> None:
        if len(self.brackets) == 1:
            trial.bracket = 0
        else:
            trial.bracket = self.rng.choices(range(len(self.brackets)), weights=self.weights)[0]

    def next_check(self, trial: _Trial) -> int:
        checks = self.checks[trial.bracket]
        i = bisect.bisect_right(checks, trial.t)
        return min(checks[i], trial.last) if i < len(checks) else trial.last

    def on_report(self, trial: _Trial, epoch: int) -> str:
        if epoch >= self.max_t:
            return _STOP
        for milestone, values, recorded in self.brackets[trial.bracket]:
            if epoch < milestone or trial.index in recorded:
                continue
            stop = bool(values) and trial.quality < _percentile(values, self.quantile)
            bisect.insort(values, trial.quality)
            recorded.add(trial.index)
            return _STOP if stop else _CONTINUE
        return _CONTINUE
