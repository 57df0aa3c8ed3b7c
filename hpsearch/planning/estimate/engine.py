"""How long a search will take and what it will use, before it runs (``hpsearch plan SPEC --estimate``).

A model of the schedule, not a scheduler: the search itself still runs on Tune. The model is a
discrete-event simulation of the plan's trial slots (the trials at once):

- a trial starts when a slot is free; it costs its start-up (a trial's start to its first epoch's
  start), its epochs one after another, and its teardown (its last report to its slot being free);
- a trial that is paused (PBT taking turns or waiting for its population, HyperBand between rungs)
  or exploited (PBT) tears its nested run down and later starts another: a teardown, then the
  restored run's start-up (``Timing.restore_s``);
- the scheduler decides at the reports where Tune's own would, by the same rules: ASHA's rungs,
  reduction factor and asynchronous promotion (a trial goes on past a rung when it is not below the
  ``1 - 1/rf`` quantile of the trials recorded there so far, Tune's ``np.nanpercentile`` rule), its
  brackets; HyperBand's bands and brackets, paused trials and successive halving, with the searcher
  holding at most the trials at once unfinished (a paused trial counts), as hpsearch runs it; the
  median stopping rule (a trial stops at an epoch when the median of the other trials that reached
  it beats it, with ``min_samples_required`` of them); PBT's perturbations every
  ``perturbation_interval`` epochs, quantiles, exploits (the weaker trial continues from the donor's
  epoch) and pauses, ``synch`` or not; FIFO runs every trial to its end;
- the budget: ``max_wall_time`` and ``max_resource_hours`` end the simulated search at the moment
  they are reached (a trial holds its resources from its start to its end, as
  :mod:`hpsearch.spec.budget` counts them).

What a run of the simulation draws at random is what the schedule cannot know: which trials are
good. Each trial gets a quality drawn uniformly, the same at every report (a trial that leads at
one rung leads at every rung; under PBT an exploited trial takes its donor's, moved a little by the
mutation). It also gets its own epoch time, within :data:`EPOCH_VARIATION` of the measured one
(configs differ, and trials in lockstep would all report at the same instant), and, when
``epochs`` is searched, its epoch count. :func:`estimate` runs :data:`SEEDS` such runs and gives the
range as their 10th to 90th percentiles (:data:`PERCENTILES`) with the median.

Pure: no Ray. The simulation keeps its events in a heap, and each trial reports to the model only
where a decision may fall (ASHA's rungs, PBT's perturbation points, its last epoch), so 1,000
trials x 20 runs take a fraction of a second.
"""

from __future__ import annotations

import bisect
import datetime
import heapq
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hpsearch.errors import PlanError
from hpsearch.planning.planner import Plan
from hpsearch.spec import Spec, total_trials
from hpsearch.spec.space import ChoiceParam, ConstParam, GridParam, IntParam

__all__ = [
    "SEEDS",
    "PERCENTILES",
    "EPOCH_VARIATION",
    "EPOCHS_KEY",
    "Timing",
    "Workload",
    "Run",
    "Spread",
    "Estimate",
    "timing_from",
    "epochs_for",
    "workload_for",
    "trial_resources",
    "simulate",
    "estimate",
]

#: Simulated runs per estimate: each draws which trials are good (and searched epoch counts) anew.
SEEDS = 20
#: The range an estimate gives: these percentiles of its runs (linear interpolation, as NumPy's default).
PERCENTILES = (10, 90)
#: The config key the shipped loops read their epoch count from (``search_space.epochs``).
EPOCHS_KEY = "epochs"
#: How much a trial's epoch time differs from the measured one, each way (``--estimate``'s default): trials'
#: configs differ (a wider model, a smaller batch), and trials that all took the same time would move in
#: lockstep, every report of theirs at the same instant, which no real search does.
EPOCH_VARIATION = 0.1
#: Under PBT an exploited trial takes its donor's quality (drawn in 0..1), moved by up to this much by the
#: mutation of its config, so that copies of one donor rank apart, as mutated configs do.
MUTATION = 0.05
#: A simulated search that takes more events than this many per epoch of its trials has looped (a guard only).
_EVENTS_PER_EPOCH = 50
#: The time attributes the model counts as one per report (hpsearch numbers reports 1, 2, ...).
_EPOCH_ATTRS = ("epoch", "training_iteration")

_CONTINUE, _STOP, _PAUSE = "continue", "stop", "pause"
_REPORT, _DONE, _FREE = 0, 0, 1  # event kinds; at the same time reports come before a slot is freed
_NEW, _RUNNING, _PAUSED, _ENDED = "new", "running", "paused", "ended"


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Timing:
    """What one trial costs, in seconds.

    Attributes:
        epoch_s: One epoch (one report).
        startup_s: A trial's start to its first epoch's start (the driver, the nested run, its workers).
        teardown_s: A trial's last report to its slot being free again.
        restore_s: A restarted run's start-up (after a pause or an exploit); ``None``: ``startup_s``.
        warm_startup_s: A new trial's start-up once the first trials have started (Ray's processes and the
            files they read are warm by then: the check's restored run measures it); ``None``: ``startup_s``.
        startup_cpus: The CPUs one trial's start-up keeps busy, alone on its machine (the check's measure);
            ``None``: not measured, and trials sharing a node are taken not to slow each other.
        epoch_cpus: Likewise while it trains.
        variation: Each trial's epoch time is drawn uniformly within this share of ``epoch_s`` either way (0: all
            the same, as the hand-computed schedules in the tests take it).
        source: Where the figures come from, for people: ``measured by hpsearch check (...)``, ``given``.
        given: The command-line flags that gave (or overrode) a figure.
        check_file: The check's measurements file read, if any.
        notes: What people should know about the figures (a failed check, a figure left at 0).
    """

    epoch_s: float
    startup_s: float
    teardown_s: float = 0.0
    restore_s: float | None = None
    warm_startup_s: float | None = None
    startup_cpus: float | None = None
    epoch_cpus: float | None = None
    variation: float = 0.0
    source: str = "given"
    given: tuple[str, ...] = ()
    check_file: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def restart_s(self) -> float:
        """A restarted run's start-up: the check's restore figure, else a fresh start-up."""
        return self.startup_s if self.restore_s is None else self.restore_s

    @property
    def later_startup_s(self) -> float:
        """A new trial's start-up after the first ones: the warm figure, else the first start-up."""
        return self.startup_s if self.warm_startup_s is None else self.warm_startup_s

    def slowdown(self, busy_cpus: float | None, trials_on_node: int, node_cpus: float | None) -> float:
        """How much slower a trial's phase runs with ``trials_on_node`` trials on a node of ``node_cpus``
        CPUs, when one alone keeps ``busy_cpus`` of them busy for the phase's time (1: alone, or nothing
        measured). The others' CPU work is done on the same CPUs: each adds its work spread over them,
        ``busy / cpus`` of the phase's time alone, while the phase's own waits (start-up latencies, I/O)
        stay as they were."""
        if busy_cpus is None or not node_cpus or node_cpus <= 0 or trials_on_node <= 1:
            return 1.0
        return 1.0 + (trials_on_node - 1) * min(busy_cpus, node_cpus) / node_cpus

    def as_dict(self) -> dict[str, Any]:
        return {
            "epoch_s": self.epoch_s,
            "startup_s": self.startup_s,
            "later_startup_s": self.later_startup_s,
            "startup_cpus": self.startup_cpus,
            "epoch_cpus": self.epoch_cpus,
            "teardown_s": self.teardown_s,
            "restart_s": self.restart_s,
            "epoch_variation": self.variation,
            "source": self.source,
            "given": list(self.given),
            "check_file": self.check_file,
        }


def _measure(record: Mapping[str, Any], key: str) -> float | None:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def timing_from(
    check: Mapping[str, Any] | None,
    *,
    check_file: str,
    spec_arg: str,
    epoch_s: float | None = None,
    startup_s: float | None = None,
    teardown_s: float | None = None,
    workers: int | None = None,
) -> Timing:
    """A trial's costs from ``hpsearch check``'s record (``check``, read from ``check_file``) and the flags.

    A flag overrides the check's figure. The check measures a trial's start to its *first report*
    (``startup_s``, which holds the first epoch) and the median time between reports (``report_s``):
    the start-up is their difference. Likewise the restored run's (``restore_startup_s``). ``workers``: the
    spec's workers per trial, to say when the check ran another number (it runs 2 at least).

    Raises:
        PlanError: neither gives the time per epoch and the start-up: one message saying to run the
            check (``hpsearch check SPEC``) or give ``--epoch-time`` and ``--startup``.
    """
    record: Mapping[str, Any] = check or {}
    report = _measure(record, "report_s")
    first = _measure(record, "startup_s")
    restored = _measure(record, "restore_startup_s")
    epoch = epoch_s if epoch_s is not None else report
    first_epoch = report if report is not None else epoch  # what the check's first report took to train
    startup = startup_s
    if startup is None and first is not None and first_epoch is not None:
        startup = max(0.0, first - first_epoch)
    if epoch is not None and epoch <= 0:
        epoch = None
    if epoch is None or startup is None:
        if check is None:
            where = f"there is no check record at {check_file}"
        else:
            missing = " or ".join(
                name for name, value in (("time per report", epoch), ("start-up", startup)) if value is None
            )
            where = f"the check's record at {check_file} has no {missing}"
        raise PlanError(
            f"--estimate needs how long a trial takes, and {where}: run `hpsearch check {spec_arg}` (it measures "
            "a trial's start-up, time per epoch and teardown on the cluster), or give --epoch-time SECONDS and "
            "--startup SECONDS"
        )
    notes: list[str] = []
    teardown = teardown_s if teardown_s is not None else _measure(record, "teardown_s")
    if teardown is None:
        teardown = 0.0
        notes.append("no teardown given or measured: counted as 0 s (--teardown SECONDS)")
    restore = max(0.0, restored - first_epoch) if restored is not None and first_epoch is not None else None
    given = tuple(
        flag
        for flag, value in (("--epoch-time", epoch_s), ("--startup", startup_s), ("--teardown", teardown_s))
        if value is not None
    )
    if check is not None:
        about = ", ".join(
            str(part) for part in (check_file, _when(record.get("measured_at")), _on(record.get("host"))) if part
        )
        source = f"measured by hpsearch check ({about})" + (f"; {', '.join(given)} given" if given else "")
        if record.get("ok") is False:
            notes.append("the check failed; its times are used as measured")
        ran = record.get("workers")
        if isinstance(ran, int) and not isinstance(ran, bool) and workers is not None and ran != workers:
            notes.append(
                f"the check ran {ran} workers per trial, the search's trials run {workers}: its times may differ"
            )
    else:
        source = "given (" + ", ".join(given) + ")"
    cpus = (
        (_measure(record, "startup_cpus"), _measure(record, "report_cpus"))
        if startup_s is None and epoch_s is None
        else (None, None)  # given times are taken as they are: the user's own figure for the search's conditions
    )
    return Timing(
        epoch_s=float(epoch),
        startup_s=float(startup),
        teardown_s=float(teardown),
        restore_s=restore,
        warm_startup_s=restore if startup_s is None else None,
        startup_cpus=cpus[0],
        epoch_cpus=cpus[1],
        variation=EPOCH_VARIATION,
        source=source,
        given=given,
        check_file=check_file if check is not None else None,
        notes=tuple(notes),
    )


def _when(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return ""
    return datetime.datetime.fromtimestamp(float(value)).strftime("%Y-%m-%d %H:%M")


def _on(value: Any) -> str:
    return f"on {value}" if isinstance(value, str) and value else ""


@dataclass(frozen=True)
class Workload:
    """A search as the model runs it.

    Attributes:
        trials: How many trials the search runs (``num_samples`` x the grid; PBT's population).
        slots: The trials at once (the plan's).
        epochs: A trial's epoch count: one of these, drawn per trial (one value: every trial's).
        scheduler: Its name (``fifo``, ``asha``, ``hyperband``, ``median``, ``pbt``, ``pb2``).
        options: Its options, as the spec gives them (``max_t``, ``grace_period``, ...).
        resources: One trial's resources while it runs (its driver and workers; memory not counted).
        max_wall_time_s: ``budget.max_wall_time``, if set.
        max_resource_hours: ``budget.max_resource_hours``.
        epochs_from: Where ``epochs`` comes from, for people (``search_space.epochs``, ``--epochs``).
        notes: What people should know about the workload (a key not modelled, an assumption).
        node_slots: The most trials the plan puts on one node at once (their workers).
        node_cpus: That node's CPUs (``None``: unknown; trials sharing it are taken not to slow each other).
    """

    trials: int
    slots: int
    epochs: tuple[int, ...]
    scheduler: str = "fifo"
    options: Mapping[str, Any] = field(default_factory=dict)
    resources: Mapping[str, float] = field(default_factory=dict)
    max_wall_time_s: float | None = None
    max_resource_hours: Mapping[str, float] = field(default_factory=dict)
    epochs_from: str = ""
    notes: tuple[str, ...] = ()
    node_slots: int = 1
    node_cpus: float | None = None

    def trials_on_node(self, running: int) -> int:
        """With ``running`` trials at once, how many share the busiest node (the plan's share of it)."""
        return max(1, math.ceil(running * min(self.node_slots, self.slots) / self.slots))

    def __post_init__(self) -> None:
        if self.trials < 0 or self.slots < 1:
            raise ValueError(f"needs trials >= 0 and slots >= 1, got {self.trials} and {self.slots}")
        if not self.epochs or min(self.epochs) < 1:
            raise ValueError(f"needs epoch counts >= 1, got {self.epochs}")

    def last_epoch(self, epochs: int) -> int:
        """Where a trial of ``epochs`` epochs ends at the latest: ASHA stops every trial at ``max_t``."""
        if self.scheduler == "asha":
            return min(epochs, math.ceil(float(self.options.get("max_t", 100))))
        return epochs


def trial_resources(plan: Plan) -> dict[str, float]:
    """One trial's resources as the budget counts them: the driver plus every worker (no memory estimate)."""
    demand = plan.demand
    out = {k: float(v) for k, v in demand.driver.items() if float(v) > 0}
    for k, v in demand.worker.items():
        if float(v) > 0:
            out[k] = out.get(k, 0.0) + float(v) * demand.num_workers
    return out


def _epoch_values(param: Any) -> tuple[int, ...] | None:
    """The epoch counts a ``search_space.epochs`` entry gives (``None``: not a count the model can use)."""
    if isinstance(param, ConstParam):
        values: list[Any] = [param.value]
    elif isinstance(param, (ChoiceParam, GridParam)):
        values = list(param.values)
    elif isinstance(param, IntParam):
        values = list(range(param.low, param.high + 1, param.step or 1))
    else:
        return None
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        return None
    return tuple(values)


def epochs_for(spec: Spec, epochs: int | None = None) -> tuple[tuple[int, ...], str]:
    """A trial's epoch counts and where they come from: ``epochs`` (``--epochs``), else the spec's
    ``search_space.epochs`` (the config key the shipped loops read; a searched one is drawn per trial),
    else, under ``asha`` and ``hyperband``, their ``max_t``.

    Raises:
        PlanError: no epoch count can be found (the spec has no ``search_space.epochs``): give ``--epochs N``.
    """
    kind = spec.scheduler.type
    if epochs is not None:
        values: tuple[int, ...] | None = (epochs,)
        source = "--epochs"
    else:
        values = _epoch_values(spec.search_space.get(EPOCHS_KEY))
        source = f"search_space.{EPOCHS_KEY}" + (" (searched: drawn per trial)" if values and len(values) > 1 else "")
    if values is None and kind in ("asha", "hyperband"):
        values = (int(spec.scheduler.options.model_dump()["max_t"]),)
        source = f"the scheduler's max_t (search_space has no whole-number {EPOCHS_KEY}; give --epochs N)"
    if values is None:
        raise PlanError(
            f"--estimate needs each trial's number of epochs: the spec's search_space has no whole-number "
            f"{EPOCHS_KEY!r} (the config key the shipped loops read); give --epochs N"
        )
    return values, source


def workload_for(spec: Spec, plan: Plan, *, epochs: int | None = None) -> Workload:
    """The spec's search on the plan's trials at once, each trial's epoch count from :func:`epochs_for`.

    Raises:
        PlanError: no epoch count can be found: give ``--epochs N``.
    """
    options = spec.scheduler.options.model_dump()
    notes: list[str] = []
    values, source = epochs_for(spec, epochs)
    time_attr = options.get("time_attr")
    if time_attr is not None and time_attr not in _EPOCH_ATTRS:
        notes.append(f"the scheduler counts {time_attr!r}: the model counts it as one per epoch (report)")
    budget = spec.budget
    if budget.max_failed_trials is not None:
        notes.append(
            f"budget.max_failed_trials ({budget.max_failed_trials}) is not modelled: the estimate assumes no trial errors"
        )
    for name, target in budget.target.items():
        sign = ">=" if target.mode == "max" else "<="
        notes.append(
            f"budget.target ({name} {sign} {target.value:g}) is not modelled: it depends on the values the trials reach"
        )
    if spec.scaling.searched():
        notes.append("scaling is searched: every trial is counted at the largest scale, as the plan is made")
    if spec.scaling.elastic is not None:
        notes.append("elastic trials are counted at their minimum workers, as the plan is made")
    node_slots, node_cpus = _busiest_node(plan)
    return Workload(
        node_slots=node_slots,
        node_cpus=node_cpus,
        trials=total_trials(spec),
        slots=max(1, plan.max_concurrent_trials),
        epochs=values,
        scheduler=spec.scheduler.type,
        options=options,
        resources=trial_resources(plan),
        max_wall_time_s=budget.max_wall_time,
        max_resource_hours=dict(budget.max_resource_hours),
        epochs_from=source,
        notes=tuple(notes),
    )


def _busiest_node(plan: Plan) -> tuple[int, float | None]:
    """The most trials whose workers the plan puts on one node, and that node's CPUs."""
    counts: dict[str, int] = {}
    for placement in plan.placements:
        for node in set(placement.worker_nodes):
            counts[node] = counts.get(node, 0) + 1
    if not counts:
        return 1, None
    node = max(counts, key=lambda n: counts[n])
    cpus = next((float(u.total.get("CPU", 0.0)) for u in plan.usage if u.node_id == node), 0.0)
    return counts[node], cpus or None


# ----------------------------------------------------------------------------- one simulated search


@dataclass(frozen=True)
class Run:
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


def _percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of sorted values, to the last bit as NumPy's default (``linear``) computes it:
    Tune's ASHA stops a trial by ``np.nanpercentile`` of a rung's values, and a tie there decides."""
    n = len(ordered)
    h = (n - 1) * (q / 100)  # numpy's virtual index for "linear", in its order of operations
    if h >= n - 1:
        return ordered[-1]
    lo = math.floor(h)
    a, b, g = ordered[lo], ordered[lo + 1], h - lo
    return b - (b - a) * (1 - g) if g >= 0.5 else a + (b - a) * g


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
) -> Run:
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
) -> Run:
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
    return Run(
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


# ----------------------------------------------------------------------------- the estimate: many runs


def _sharing_note(w: Workload, t: Timing) -> str:
    """What the estimate assumes of trials that share a node's CPUs."""
    if t.startup_cpus is None and t.epoch_cpus is None:
        return "trials sharing a node are taken not to slow each other (the check measured no CPU use here)"
    if w.node_cpus is None:
        return "trials sharing a node are taken not to slow each other (the plan gives no node's CPUs)"
    on_node = w.trials_on_node(w.slots)
    shown = [
        f"its {phase} {t.slowdown(cpus, on_node, w.node_cpus):.2g}x slower ({cpus:.2g} CPUs busy alone)"
        for phase, cpus in (("start-up", t.startup_cpus), ("epochs", t.epoch_cpus))
        if cpus is not None
    ]
    return (
        f"{on_node} trial(s) at once share a node of {w.node_cpus:g} CPUs: " + ", ".join(shown) + " (the node's CPUs "
        "shared evenly, as many trials as run at each start)"
    )


def _pct(ordered: Sequence[float], q: float) -> float:
    return _percentile(ordered, q) if ordered else 0.0


@dataclass(frozen=True)
class Spread:
    """A figure over the simulated runs: its low and high percentiles (:data:`PERCENTILES`) and median."""

    low: float
    median: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        ordered = sorted(values)
        return cls(_pct(ordered, PERCENTILES[0]), _pct(ordered, 50), _pct(ordered, PERCENTILES[1]))

    def text(self, fmt: Callable[[float], str] = lambda v: f"{v:.4g}") -> str:
        """``fmt(low)`` alone when the runs agree, else ``low to high (median m)``."""
        low, high = fmt(self.low), fmt(self.high)
        return low if low == high else f"{low} to {high} (median {fmt(self.median)})"

    def as_dict(self) -> dict[str, float]:
        return {"low": self.low, "median": self.median, "high": self.high}


@dataclass(frozen=True)
class Estimate:
    """A search's predicted wall time and resource-hours: :data:`SEEDS` simulated runs of its schedule."""

    workload: Workload
    timing: Timing
    runs: tuple[Run, ...]

    @property
    def slots(self) -> int:
        return min(self.workload.slots, max(1, self.workload.trials))

    @property
    def wall(self) -> Spread:
        return Spread.of(r.wall_s for r in self.runs)

    def resource_hours(self) -> dict[str, Spread]:
        return {k: Spread.of(r.resource_hours.get(k, 0.0) for r in self.runs) for k in self.workload.resources}

    @property
    def epochs(self) -> Spread:
        return Spread.of(r.epochs for r in self.runs)

    @property
    def max_epochs(self) -> int:
        """Epochs if every trial ran to its end (the largest searched count for each)."""
        return self.workload.trials * self.workload.last_epoch(max(self.workload.epochs))

    @property
    def stopped_early(self) -> Spread:
        return Spread.of(r.stopped_early for r in self.runs)

    @property
    def restarts(self) -> Spread:
        return Spread.of(r.restarts for r in self.runs)

    @property
    def started(self) -> Spread:
        return Spread.of(r.started for r in self.runs)

    @property
    def utilisation(self) -> Spread:
        return Spread.of(r.utilisation(self.slots) for r in self.runs)

    @property
    def busy(self) -> Spread:
        return Spread.of(r.busy_s / (self.slots * r.wall_s) if r.wall_s > 0 else 0.0 for r in self.runs)

    def budget(self) -> list[dict[str, Any]]:
        """Each modelled budget limit: its spec key, its value, in how many runs it ends the search, and when."""
        w = self.workload
        limits: list[tuple[str, float]] = [(f"max_resource_hours.{r}", h) for r, h in w.max_resource_hours.items()]
        if w.max_wall_time_s is not None:
            limits.append(("max_wall_time", w.max_wall_time_s))
        out = []
        for key, value in limits:
            ends = [r.wall_s for r in self.runs if r.ended_by == key]
            reached = [r.reached[key] for r in self.runs if key in r.reached]
            resource = key.split(".", 1)[1] if key.startswith("max_resource_hours.") else None
            out.append(
                {
                    "key": f"budget.{key}",
                    "limit": value,
                    "runs": len(self.runs),
                    "ends_search_in": len(ends),
                    "reached_in": len(reached),
                    "at_s": Spread.of(ends).as_dict() if ends else None,
                    "trials_started": Spread.of(r.started for r in self.runs if r.ended_by == key).as_dict()
                    if ends
                    else None,
                    "held": resource is None or w.resources.get(resource, 0.0) > 0,
                }
            )
        return out

    def notes(self) -> list[str]:
        w, t = self.workload, self.timing
        one = w.scheduler == "fifo" and len(w.epochs) == 1 and not t.variation
        drawn = ("which trials are good" if w.scheduler != "fifo" else "") + (
            (" and " if w.scheduler != "fifo" else "")
            + f"each trial's epoch time within {100 * t.variation:g}% of the measured one"
            if t.variation
            else ""
        )
        out = [
            "a model of the schedule, not a run: FIFO runs every trial to its end, so there is one schedule"
            if one
            else f"a model of the schedule, not a run: {len(self.runs)} simulated runs, each drawing at random "
            f"{drawn or 'which trials are good'}; the range is their {PERCENTILES[0]}th to {PERCENTILES[1]}th "
            "percentiles",
            "not counted: the search's own start (Ray, Tune)",
            _sharing_note(w, t),
        ]
        if t.warm_startup_s is not None and w.trials > w.slots:
            out.append(
                f"the first {w.slots} trial(s) start in {t.startup_s:.3g} s, as the check's first run did; later ones "
                f"in {t.warm_startup_s:.3g} s, as its restored run did (Ray's processes and files warm)"
            )
        if w.scheduler in ("pbt", "pb2", "hyperband"):
            out.append(
                f"each pause or exploit tears a nested run down and starts it again: {t.teardown_s:.3g} s + "
                f"{t.restart_s:.3g} s" + ("" if t.restore_s is not None else " (a fresh start-up: no restore measured)")
            )
        return out + list(w.notes) + list(t.notes)

    def as_dict(self) -> dict[str, Any]:
        w = self.workload
        return {
            "model": "discrete-event simulation of the trial slots (a model of the schedule, not a run)",
            "runs": len(self.runs),
            "percentiles": list(PERCENTILES),
            "inputs": self.timing.as_dict(),
            "trials": w.trials,
            "trials_at_once": self.slots,
            "scheduler": {"type": w.scheduler, **dict(w.options)},
            "epochs": {"values": list(w.epochs), "from": w.epochs_from},
            "resources_per_trial": dict(w.resources),
            "wall_time_s": self.wall.as_dict(),
            "resource_hours": {k: s.as_dict() for k, s in self.resource_hours().items()},
            "epochs_run": self.epochs.as_dict(),
            "epochs_if_none_stopped": self.max_epochs,
            "trials_started": self.started.as_dict(),
            "stopped_early": self.stopped_early.as_dict(),
            "restarts": self.restarts.as_dict(),
            "utilisation": self.utilisation.as_dict(),
            "budget": self.budget(),
            "notes": self.notes(),
        }


def estimate(w: Workload, timing: Timing, *, seeds: int = SEEDS) -> Estimate:
    """``seeds`` simulated runs of the search (one when nothing in it is random: FIFO with one epoch count)."""
    if w.scheduler not in _POLICIES:
        raise PlanError(f"--estimate has no model of the scheduler {w.scheduler!r}")
    if w.scheduler == "fifo" and len(w.epochs) == 1 and not timing.variation:
        one = simulate(w, timing, seed=0)
        return Estimate(w, timing, (one,) * seeds)
    return Estimate(w, timing, tuple(simulate(w, timing, seed=s) for s in range(seeds)))
