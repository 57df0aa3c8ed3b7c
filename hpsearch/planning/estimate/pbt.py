"""Tune's ``PopulationBasedTraining`` (and PB2's schedule), re-derived: the population at once, taking turns in
the slots; perturbations every ``perturbation_interval`` epochs, quantiles, exploits (the weaker trial
continues from the donor's epoch) and pauses, ``synch`` or not.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

from hpsearch.planning.estimate.policy import _CONTINUE, _ENDED, _NEW, _PAUSE, _PAUSED, _Policy, _Trial

if TYPE_CHECKING:
    from hpsearch.planning.estimate.workload import Workload

#: Under PBT an exploited trial takes its donor's quality (drawn in 0..1), moved by up to this much by the
#: mutation of its config, so that copies of one donor rank apart, as mutated configs do.
MUTATION = 0.05


class _Pbt(_Policy):
    """Tune's ``PopulationBasedTraining`` (and PB2's schedule): the whole population created at once, taking
    turns in the slots; every ``perturbation_interval`` epochs a trial of the lower quantile continues from a
    trial of the upper one (an exploit: a restart from the donor's epoch); ``synch`` pauses every trial at each
    perturbation point until the population is there. A trial that ended leaves the population (as hpsearch
    makes Ray's PBT do)."""

    def __init__(self, w: Workload, trials: list[_Trial], rng: random.Random) -> None:
        super().__init__(w, trials, rng)
        self.interval = int(self.options.get("perturbation_interval", 2))
        self.fraction = float(self.options.get("quantile_fraction", 0.25))
        self.burn_in = int(self.options.get("burn_in_period", 0))
        self.synch = bool(self.options.get("synch", False))
        self.next_sync = max(self.interval, self.burn_in)
        while self.new_trial() is not None:  # the whole population is created at once
            pass

    def choose(self) -> _Trial | None:
        best: _Trial | None = None
        for t in self.trials:
            if t.state in (_NEW, _PAUSED) and (not self.synch or t.last_train < self.next_sync):
                if best is None or t.last_train < best.last_train:
                    best = t
        return best

    def next_check(self, trial: _Trial) -> int:
        return min(max(trial.t + 1, self.burn_in, trial.last_pert + self.interval), trial.last)

    def _quantiles(self) -> tuple[list[_Trial], list[_Trial]]:
        ranked = [t for t in self.trials if t.last_score is not None and t.state != _ENDED]
        ranked.sort(key=lambda t: t.last_score)  # type: ignore[arg-type, return-value]  # not None here
        if len(ranked) <= 1:
            return [], []
        n = math.ceil(len(ranked) * self.fraction)
        if n > len(ranked) / 2:
            n = len(ranked) // 2
        return ranked[:n], ranked[len(ranked) - n :]

    def _exploit(self, trial: _Trial, upper: list[_Trial]) -> None:
        donor = self.rng.choice(upper)
        trial.quality = donor.quality + self.rng.uniform(-MUTATION, MUTATION)  # the mutated config: a little off
        trial.t = donor.last_train
        trial.last_train = donor.last_train
        trial.last_pert = donor.last_pert

    def on_report(self, trial: _Trial, epoch: int) -> str:
        if epoch < self.burn_in or epoch - trial.last_pert < self.interval:
            return _CONTINUE
        trial.last_score = trial.quality
        trial.last_train = epoch
        if not self.synch:
            trial.last_pert = epoch
            lower, upper = self._quantiles()
            waiting = any(t.state in (_NEW, _PAUSED) for t in self.trials)
            if any(t is trial for t in lower):
                self._exploit(trial, upper)
                return _PAUSE
            return _PAUSE if waiting else _CONTINUE
        if not any(t.last_train < self.next_sync for t in self.trials if t is not trial and t.state != _ENDED):
            self._sync(epoch)
        return _PAUSE

    def _sync(self, epoch: int) -> None:
        lower, upper = self._quantiles()
        ranked = {t.index for t in lower} | {t.index for t in upper}
        middle = [t for t in self.trials if t.index not in ranked]
        for t in upper + middle:
            t.last_pert = epoch
        for t in lower:
            t.last_pert = epoch
            self._exploit(t, upper)
        self.next_sync = max(self.next_sync + self.interval, max(t.last_train for t in self.trials))

    def on_end(self, trial: _Trial) -> None:
        live = [t for t in self.trials if t.state != _ENDED and t is not trial]
        if self.synch and live and all(t.last_train >= self.next_sync for t in live):
            self._sync(max(t.last_train for t in live))  # the others were waiting for it: rank them without it
