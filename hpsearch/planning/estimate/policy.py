"""A scheduler model's side of the simulation: the trial as the model sees it (``_Trial``), the decisions a
model makes at a report (continue, stop, pause), and the base model, ``_Policy``, which is FIFO: every
trial runs to its end.

A model decides at the reports where Tune's own scheduler would, by the same rules; each has a module of
its own (:mod:`.asha`, :mod:`.median`, :mod:`.hyperband`, :mod:`.pbt`). The engine (:mod:`.engine`) asks it
which trial to start in a free slot (``choose``), at which epoch the trial next reports to it
(``next_check``: only where a decision may fall), what to do at that report (``on_report``) and tells it
when a trial ended (``on_end``).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpsearch.planning.estimate.workload import Workload

#: What a model decides at a report.
_CONTINUE, _STOP, _PAUSE = "continue", "stop", "pause"
#: A trial's states.
_NEW, _RUNNING, _PAUSED, _ENDED = "new", "running", "paused", "ended"


class _Trial:
    __slots__ = (
        "index",
        "quality",
        "epochs",
        "epoch_s",
        "last",
        "t",
        "state",
        "fresh",
        "first_start",
        "ended_at",
        "stopped_early",
        "seg_start",
        "seg_t0",
        "seg_ep0",
        "seg_epoch_s",
        "bracket",
        "last_score",
        "last_train",
        "last_pert",
    )

    def __init__(self, index: int, quality: float, epochs: int, last: int, epoch_s: float = 1.0) -> None:
        self.index = index
        self.quality = quality  # higher is better, the same at every report
        self.epochs = epochs
        self.epoch_s = epoch_s
        self.last = last  # the epoch it ends at unless the scheduler ends it sooner
        self.t = 0  # epochs done (its time attribute)
        self.state = _NEW
        self.fresh = True
        self.first_start: float | None = None
        self.ended_at: float | None = None
        self.stopped_early = False
        self.seg_start = 0.0
        self.seg_t0 = 0
        self.seg_ep0 = 0.0
        self.seg_epoch_s = epoch_s  # this run's epoch time: slower while others share its node
        self.bracket: Any = None
        self.last_score: float | None = None
        self.last_train = 0
        self.last_pert = 0


class _Policy:
    """A scheduler's decisions, as Tune's makes them; FIFO: every trial runs to its end."""

    def __init__(self, w: Workload, trials: list[_Trial], rng: random.Random) -> None:
        self.w = w
        self.trials = trials
        self.rng = rng
        self.options = w.options
        self.created = 0
        self.now = 0.0

    def new_trial(self) -> _Trial | None:
        if self.created >= len(self.trials):
            return None
        trial = self.trials[self.created]
        self.created += 1
        self.on_add(trial)
        return trial

    def on_add(self, trial: _Trial) -> None:
        """A trial was created (Tune's ``on_trial_add``)."""

    def choose(self) -> _Trial | None:
        """The trial to start in a free slot: a new one, in order."""
        return self.new_trial()

    def next_check(self, trial: _Trial) -> int:
        """The next epoch (after ``trial.t``) at which the scheduler may decide: here, its end."""
        return trial.last

    def on_report(self, trial: _Trial, epoch: int) -> str:
        return _CONTINUE

    def on_end(self, trial: _Trial) -> None:
        """The trial ended (completed, or stopped while running)."""
