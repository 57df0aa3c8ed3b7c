"""One simulated search (:func:`simulate`): a discrete-event simulation of the plan's trial slots.

A model of the schedule, not a scheduler: the search itself still runs on Tune.

- a trial starts when a slot is free; it costs its start-up (a trial's start to its first epoch's
  start), its epochs one after another, and its teardown (its last report to its slot being free);
- a trial that is paused (PBT taking turns or waiting for its population, HyperBand between rungs)
  or exploited (PBT) tears its nested run down and later starts another: a teardown, then the
  restored run's start-up (``Timing.restore_s``);
- the scheduler's model (:mod:`.policy` and one module per scheduler) decides at the reports where
  Tune's own would, by the same rules;
- the budget: ``max_wall_time`` and ``max_resource_hours`` end the simulated search at the moment
  they are reached (a trial holds its resources from its start to its end, as
  :mod:`hpsearch.spec.budget` counts them).

The events are kept in a heap, and each trial reports to the model only where a decision may fall
(ASHA's rungs, PBT's perturbation points, its last epoch), so 1,000 trials x 20 runs take a fraction
of a second.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hpsearch.planning.estimate.asha import _Asha
from hpsearch.planning.estimate.hyperband import _Hyperband
from hpsearch.planning.estimate.median import _Median
from hpsearch.planning.estimate.pbt import _Pbt
from hpsearch.planning.estimate.policy import _CONTINUE, _ENDED, _PAUSE, _PAUSED, _RUNNING, _STOP, _Policy, _Trial
from hpsearch.planning.estimate.timing import Timing
from hpsearch.planning.estimate.workload import Workload

__all__ = ["SimulatedSearch", "simulate"]

#: A simulated search that takes more events than this many per epoch of its trials has looped (a guard only).
_EVENTS_PER_EPOCH = 50
_REPORT, _DONE, _FREE = 0, 0, 1  # event kinds; at the same time reports come before a slot is freed


@dataclass(frozen=True)
class SimulatedSearch:
    """One simulated search.

    Attributes:
        wall_s: Its wall time (to the last trial's end, or the budget's).
        resource_hours: Per resource, every trial's resources times the time it ran.
        epochs: Epochs trained, every trial together.
        started: Trials started.
        stopped_early: Trials the scheduler ended before their last epoch.
        restarts: Nested runs started again (PBT's pauses and exploits, HyperBand's resumes).
        busy_s: Slot-seconds held by trials (start-ups and teardowns included).
        train_s: Slot-seconds spent training epochs.
        ended_by: The budget key that ended it (``max_wall_time``, ``max_resource_hours.GPU``), or ``None``.
        reached: Per budget key, when it would be reached (within the search's own end).
        last_epochs: Each trial's epoch when it ended, in trial order (the whole simulated search, budget aside).
        stalled: Trials the modelled schedule left waiting with nothing running (paused for good, as can
            happen in Tune's own HyperBand); 0 normally.
    """

    wall_s: float
    resource_hours: Mapping[str, float]
    epochs: int
    started: int
    stopped_early: int
    restarts: int
    busy_s: float
    train_s: float
    ended_by: str | None = None
    reached: Mapping[str, float] = field(default_factory=dict)
    last_epochs: tuple[int, ...] = ()
    stalled: int = 0

    def utilisation(self, slots: int) -> float:
        """The share of the slots' time spent training (0 to 1)."""
        return self.train_s / (slots * self.wall_s) if self.wall_s > 0 else 0.0


_POLICIES: dict[str, Callable[[Workload, list[_Trial], random.Random], _Policy]] = {
    "fifo": _Policy,
    "asha": _Asha,
    "median": _Median,
    "hyperband": _Hyperband,
    "pbt": _Pbt,
    "pb2": _Pbt,
}


@dataclass(frozen=True)
class _Segment:
    """One nested run of a trial: its start, its first epoch's start, the epochs it trained (each ``epoch_s``),
    its slot freed."""

    start: float
    first_epoch: float
    epochs: int
    end: float
    epoch_s: float


class _Engine:
    """The slots and the clock: trials start when a slot is free, report where the scheduler decides."""

    def __init__(self, w: Workload, timing: Timing, policy: _Policy) -> None:
        self.w = w
        self.timing = timing
        self.policy = policy
        self.trials = policy.trials
        self.free = w.slots
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.segments: list[_Segment] = []
        self.restarts: list[float] = []
        self.fresh_starts = 0

    def push(self, time: float, kind: int, trial: _Trial, epoch: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time, kind, trial.index, self.seq, epoch))

    def run(self) -> None:
        self.fill(0.0)
        budget = _EVENTS_PER_EPOCH * (len(self.trials) + sum(t.last for t in self.trials))
        while self.heap and budget > 0:
            budget -= 1
            time, kind, index, _, epoch = heapq.heappop(self.heap)
            self.policy.now = time
            trial = self.trials[index]
            if kind == _FREE:
                self.free += 1
            elif epoch < 0:  # a restarted trial with no epoch left: it ends as soon as it has started
                self.close(trial, time, 0, _CONTINUE)
            else:
                self.report(trial, epoch, time)
            if not self.heap or self.heap[0][0] > time:  # every event of this instant first: slots freed together
                self.fill(time)

    def fill(self, now: float) -> None:
        chosen = []
        while self.free > 0:
            trial = self.policy.choose()
            if trial is None:
                break
            self.free -= 1
            trial.state = _RUNNING  # taken: the policy chooses another next
            chosen.append(trial)
        for trial in chosen:  # started together: each shares its node with all the others running now
            self.start(trial, now)

    def start(self, trial: _Trial, now: float) -> None:
        if trial.fresh:
            # the first trials start as the check's first run did; later ones as its restored run (warm)
            cost = self.timing.startup_s if self.fresh_starts < self.w.slots else self.timing.later_startup_s
            self.fresh_starts += 1
            trial.first_start = now
            trial.fresh = False
        else:
            cost = self.timing.restart_s
            self.restarts.append(now)
        # trials sharing a node share its CPUs: as many as run now, on the plan's busiest node
        on_node = self.w.trials_on_node(self.w.slots - self.free)
        cost *= self.timing.slowdown(self.timing.startup_cpus, on_node, self.w.node_cpus)
        trial.seg_epoch_s = trial.epoch_s * self.timing.slowdown(self.timing.epoch_cpus, on_node, self.w.node_cpus)
        trial.state = _RUNNING
        trial.seg_start, trial.seg_t0, trial.seg_ep0 = now, trial.t, now + cost
        if trial.t >= trial.last:
            self.push(now + cost, _DONE, trial, -1)
        else:
            self.schedule(trial)

    def schedule(self, trial: _Trial) -> None:
        epoch = self.policy.next_check(trial)
        self.push(trial.seg_ep0 + (epoch - trial.seg_t0) * trial.seg_epoch_s, _REPORT, trial, epoch)

    def report(self, trial: _Trial, epoch: int, now: float) -> None:
        trained = epoch - trial.seg_t0
        trial.t = epoch
        action = self.policy.on_report(trial, epoch)
        if action == _CONTINUE and epoch < trial.last:
            self.schedule(trial)
            return
        self.close(trial, now, trained, action)

    def close(self, trial: _Trial, now: float, trained: int, action: str) -> None:
        end = now + self.timing.teardown_s
        self.segments.append(_Segment(trial.seg_start, trial.seg_ep0, trained, end, trial.seg_epoch_s))
        self.push(end, _FREE, trial, 0)
        if action == _PAUSE:
            trial.state = _PAUSED
            return
        trial.state = _ENDED
        trial.ended_at = end
        trial.stopped_early = action == _STOP and trial.t < trial.last
        self.policy.on_end(trial)


def simulate(
    w: Workload,
    timing: Timing,
    *,
    seed: int = 0,
    qualities: Sequence[float] | None = None,
) -> SimulatedSearch:
    """One simulated search. ``qualities`` (higher is better, one per trial) fixes which trials are good;
    otherwise they are drawn from ``seed``, as are searched epoch counts and the scheduler's own draws."""
    rng = random.Random(seed)
    if qualities is not None and len(qualities) != w.trials:
        raise ValueError(f"needs one quality per trial ({w.trials}), got {len(qualities)}")
    trials = []
    for i in range(w.trials):
        quality = float(qualities[i]) if qualities is not None else rng.random()
        epochs = w.epochs[0] if len(w.epochs) == 1 else rng.choice(w.epochs)
        epoch_s = (
            timing.epoch_s * (1 + timing.variation * (2 * rng.random() - 1)) if timing.variation else timing.epoch_s
        )
        trials.append(_Trial(i, quality, epochs, w.last_epoch(epochs), epoch_s))
    engine = _Engine(w, timing, _POLICIES[w.scheduler](w, trials, rng))
    engine.run()
    return _summarise(w, timing, engine.segments, trials, engine.restarts)


def _crossing(segments: Sequence[_Segment], target_s: float) -> float | None:
    """When the slot-seconds held reach ``target_s`` (``None``: never, within the search)."""
    changes = sorted([(s.start, 1) for s in segments] + [(s.end, -1) for s in segments])
    held, active, last = 0.0, 0, 0.0
    for time, change in changes:
        if active and held + active * (time - last) >= target_s:
            return last + (target_s - held) / active
        held += active * (time - last)
        active += change
        last = time
    return None


def _summarise(
    w: Workload, timing: Timing, segments: Sequence[_Segment], trials: Sequence[_Trial], restarts: Sequence[float]
) -> SimulatedSearch:
    wall = max((s.end for s in segments), default=0.0)
    reached: dict[str, float] = {}
    for resource, hours in w.max_resource_hours.items():
        amount = w.resources.get(resource, 0.0)
        if amount > 0:
            at = _crossing(segments, hours * 3600.0 / amount)
            if at is not None and at < wall:
                reached[f"max_resource_hours.{resource}"] = at
    if w.max_wall_time_s is not None and w.max_wall_time_s < wall:
        reached["max_wall_time"] = w.max_wall_time_s
    ended_by = min(reached, key=lambda k: reached[k]) if reached else None  # resource-hours first on a tie
    until = reached[ended_by] if ended_by is not None else wall
    busy = train = 0.0
    epochs = 0
    for s in segments:
        busy += max(0.0, min(s.end, until) - s.start)
        training = s.epochs * s.epoch_s
        train += min(training, max(0.0, until - s.first_epoch))
        if ended_by is None or until >= s.first_epoch + training:
            epochs += s.epochs
        elif until > s.first_epoch:
            epochs += min(s.epochs, int((until - s.first_epoch) / s.epoch_s))
    return SimulatedSearch(
        wall_s=until,
        resource_hours={r: amount * busy / 3600.0 for r, amount in w.resources.items()},
        epochs=epochs,
        started=sum(1 for t in trials if t.first_start is not None and (ended_by is None or t.first_start < until)),
        stopped_early=sum(1 for t in trials if t.stopped_early and t.ended_at is not None and t.ended_at <= until),
        restarts=sum(1 for r in restarts if ended_by is None or r < until),
        busy_s=busy,
        train_s=train,
        ended_by=ended_by,
        reached=reached,
        last_epochs=tuple(t.t for t in trials),
        stalled=sum(1 for t in trials if t.state != _ENDED),
    )
