"""Tune's synchronous ``HyperBandScheduler``, re-derived: bands and brackets, paused trials and successive
halving, with the searcher holding at most the trials at once unfinished (a paused trial counts), as
hpsearch runs it.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

from hpsearch.planning.estimate.policy import _CONTINUE, _ENDED, _PAUSE, _PAUSED, _STOP, _Policy, _Trial

if TYPE_CHECKING:
    from hpsearch.planning.estimate.workload import Workload


class _Bracket:
    """One of HyperBand's brackets, as Tune keeps it."""

    def __init__(self, n: int, r: int, max_t: int, eta: float, s: int) -> None:
        self.live: dict[int, _Trial] = {}
        self.n = n
        self.r = r
        self.cumul_r = r
        self.max_t = max_t
        self.eta = eta
        self.halves = s
        self.processing = False
        self.to_unpause: set[int] = set()

    def filled(self) -> bool:
        return len(self.live) == self.n

    def done(self) -> bool:  # Tune's cur_iter_done
        return all(t.t >= self.cumul_r for t in self.live.values())

    def finished(self) -> bool:
        return self.halves == 0 and self.done()

    def goes_on(self, trial: _Trial) -> bool:  # Tune's continue_trial
        return trial.t < self.cumul_r

    def halve(self) -> tuple[list[_Trial], list[_Trial]]:
        self.halves -= 1
        self.n = math.ceil(self.n / self.eta)
        self.r = int(min(self.r * self.eta, self.max_t))
        self.cumul_r = self.r
        ranked = sorted(self.live.values(), key=lambda t: t.quality)
        return ranked[-self.n :], ranked[: -self.n]


class _Hyperband(_Policy):
    """Tune's synchronous ``HyperBandScheduler``, with the searcher holding at most the trials at once
    unfinished (a paused trial counts), as hpsearch builds it: with fewer trials at once than a
    bracket holds, the first bracket takes every trial and runs it to ``max_t``, wave by wave."""

    def __init__(self, w: Workload, trials: list[_Trial], rng: random.Random) -> None:
        super().__init__(w, trials, rng)
        self.max_t = int(self.options.get("max_t", 81))
        self.eta = float(self.options.get("reduction_factor", 3))
        self.s_max_1 = round(math.log(self.max_t) / math.log(self.eta)) + 1
        self.bands: list[list[_Bracket | None]] = [[]]
        self.current: _Bracket | None = None
        self.live = 0

    def _n0(self, s: int) -> int:
        return math.ceil(self.s_max_1 / (s + 1) * self.eta**s)

    def _r0(self, s: int) -> int:
        return int(self.max_t * self.eta ** (-s))

    def on_add(self, trial: _Trial) -> None:
        self.live += 1
        if self.current is None or self.current.filled():
            while True:
                if len(self.bands[-1]) == self.s_max_1:
                    self.bands.append([])
                s = len(self.bands[-1])
                if self._r0(s) == 0:
                    self.bands[-1].append(None)
                    continue
                self.current = _Bracket(self._n0(s), self._r0(s), self.max_t, self.eta, s)
                self.bands[-1].append(self.current)
                break
        self.current.live[trial.index] = trial
        trial.bracket = self.current

    def choose(self) -> _Trial | None:
        for band in self.bands:
            for bracket in band:
                if bracket is not None and bracket.to_unpause:
                    index = min(bracket.to_unpause)
                    bracket.to_unpause.discard(index)
                    return self.trials[index]
        return self.new_trial() if self.live < self.w.slots else None

    def next_check(self, trial: _Trial) -> int:
        bracket: _Bracket = trial.bracket
        return min(max(trial.t + 1, math.ceil(bracket.cumul_r)), trial.last)

    def on_report(self, trial: _Trial, epoch: int) -> str:
        bracket: _Bracket = trial.bracket
        if bracket.goes_on(trial):
            return _CONTINUE
        return self._process(bracket, trial)

    def _process(self, bracket: _Bracket, current: _Trial | None) -> str:
        action = _PAUSE
        if not bracket.done():
            return action
        if bracket.finished():
            for t in list(bracket.live.values()):
                if t is not current and t.state == _PAUSED:
                    self._stop_paused(t)
            return _STOP
        bracket.processing = True
        good, bad = bracket.halve()
        for t in bad:
            if t is current:
                bracket.live.pop(t.index, None)
                action = _STOP
            elif t.state == _PAUSED:
                self._stop_paused(t)
        for t in good:
            if bracket.goes_on(t):
                if t.state == _PAUSED:
                    bracket.to_unpause.add(t.index)
                elif t is current:
                    action = _CONTINUE
            elif bracket.finished():
                if t.state == _PAUSED:
                    self._stop_paused(t)
                elif t is current:
                    bracket.live.pop(t.index, None)
                    action = _STOP
        return action

    def _stop_paused(self, trial: _Trial) -> None:
        bracket: _Bracket = trial.bracket
        bracket.live.pop(trial.index, None)
        bracket.to_unpause.discard(trial.index)
        trial.state = _ENDED
        trial.ended_at = self.now
        trial.stopped_early = trial.t < trial.last
        self.live -= 1
        if not bracket.finished() and not bracket.processing:
            self._process(bracket, None)

    def on_end(self, trial: _Trial) -> None:
        self.live -= 1
        bracket: _Bracket = trial.bracket
        bracket.live.pop(trial.index, None)
        if not bracket.finished() and not bracket.processing:
            self._process(bracket, None)
