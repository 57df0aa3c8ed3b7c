"""The estimate (:func:`estimate`): :data:`SEEDS` simulated runs of a search, read as ranges (``Estimate``).

What a run of the simulation draws at random is what the schedule cannot know: which trials are
good. Each trial gets a quality drawn uniformly, the same at every report (a trial that leads at
one rung leads at every rung; under PBT an exploited trial takes its donor's, moved a little by the
mutation). It also gets its own epoch time, within :data:`~.timing.EPOCH_VARIATION` of the measured
one (configs differ, and trials in lockstep would all report at the same instant), and, when
``epochs`` is searched, its epoch count. The range is the runs' 10th to 90th percentiles
(:data:`~.spread.PERCENTILES`) with the median.

Preemptions of spot nodes (``--preemption-rate``) are not simulated: their expected cost is added to each
run after it (:func:`~hpsearch.planning.preemption.expected_cost`), and read as a range like the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpsearch.errors import PlanError
from hpsearch.planning.estimate.engine import _POLICIES, SimulatedSearch, simulate
from hpsearch.planning.estimate.spread import PERCENTILES, Spread
from hpsearch.planning.estimate.timing import Timing
from hpsearch.planning.estimate.workload import Workload
from hpsearch.planning.preemption import PreemptionCost, beyond_retries, expected_cost

__all__ = ["SEEDS", "Estimate", "estimate"]

#: Simulated runs per estimate: each draws which trials are good (and searched epoch counts) anew.
SEEDS = 20


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


@dataclass(frozen=True)
class Estimate:
    """A search's predicted wall time and resource-hours: :data:`SEEDS` simulated runs of its schedule."""

    workload: Workload
    timing: Timing
    runs: tuple[SimulatedSearch, ...]

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

    @property
    def lost_per_preemption_s(self) -> float:
        """The training one preemption loses on average: half a checkpoint interval of epochs."""
        return self.workload.cadence.mean * self.timing.epoch_s / 2

    @property
    def per_preemption_s(self) -> float:
        """What one preemption costs its trial: the lost training plus a restart (``Timing.restart_s``)."""
        return self.lost_per_preemption_s + self.timing.restart_s

    def preemptions(self) -> list[PreemptionCost]:
        """Each run's expected preemption cost (an expectation added after the run, not simulated); empty without
        ``--preemption-rate`` or without a trial on spot nodes."""
        rate, w = self.timing.preemption_rate, self.workload
        if rate is None or not w.spot:
            return []
        return [
            expected_cost(
                rate=rate,
                spot_nodes_per_trial=w.spot.nodes_per_trial,
                busy_s=r.busy_s,
                each_s=self.per_preemption_s,
                slots=self.slots,
                resources=w.resources,
            )
            for r in self.runs
        ]

    def per_trial_preemptions(self) -> float:
        """The preemptions a trial on spot nodes expects, in the median run (its slot time, its spot nodes)."""
        rate, w = self.timing.preemption_rate or 0.0, self.workload
        held = Spread.of(r.busy_s / r.started for r in self.runs if r.started).median
        return rate * w.spot.nodes_per_spot_trial * held / 3600.0

    def preemption(self) -> dict[str, Any] | None:
        """``--preemption-rate``'s figures for ``as_dict`` (``None`` without a rate and without spot nodes)."""
        w, t = self.workload, self.timing
        if t.preemption_rate is None and not w.spot:
            return None
        costs = self.preemptions()
        out: dict[str, Any] = {
            "model": "an analytic expectation added to each simulated run, not simulated",
            "rate_per_spot_node_hour": t.preemption_rate,
            "spot_trials_at_once": len(w.spot.trials),
            "spot_nodes_per_trial": w.spot.nodes_per_trial,
            "checkpoint": w.cadence.as_dict(),
            "lost_per_preemption_s": self.lost_per_preemption_s,
            "restart_per_preemption_s": t.restart_s,
            "per_preemption_s": self.per_preemption_s,
        }
        if costs:
            mean = self.per_trial_preemptions()
            out |= {
                "spot_node_hours": Spread.of(c.spot_node_hours for c in costs).as_dict(),
                "expected_preemptions": Spread.of(c.preemptions for c in costs).as_dict(),
                "extra_wall_time_s": Spread.of(c.extra_wall_s for c in costs).as_dict(),
                "extra_resource_hours": {
                    k: Spread.of(c.extra_resource_hours[k] for c in costs).as_dict() for k in w.resources
                },
                "per_spot_trial": mean,
                "preemption_retries": w.preemption_retries,
                "beyond_retries": (
                    beyond_retries(mean, w.preemption_retries) if w.preemption_retries is not None else None
                ),
            }
        return out

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
        out += self._spot_notes()
        if w.scheduler in ("pbt", "pb2", "hyperband"):
            out.append(
                f"each pause or exploit tears a nested run down and starts it again: {t.teardown_s:.3g} s + "
                f"{t.restart_s:.3g} s" + ("" if t.restore_s is not None else " (a fresh start-up: no restore measured)")
            )
        return out + list(w.notes) + list(t.notes)

    def _spot_notes(self) -> list[str]:
        """A rate without spot nodes adds nothing; spot nodes without a rate are not counted."""
        w, rate = self.workload, self.timing.preemption_rate
        if rate is not None and not w.spot:
            return [
                "--preemption-rate adds nothing: no trial's workers sit on a spot node (mark a --cluster group "
                "spot: 0..4x{CPU: 8, GPU: 1, spot})"
            ]
        if rate is None and w.spot:
            return [
                f"{len(w.spot.trials)} of the {w.spot.trials_at_once} trials at once put workers on spot nodes; "
                "preemptions not counted: --preemption-rate R (preemptions per spot node-hour) adds them"
            ]
        return []

    def as_dict(self) -> dict[str, Any]:
        w = self.workload
        preemption = self.preemption()
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
            **({"preemption": preemption} if preemption is not None else {}),
        }


def estimate(w: Workload, timing: Timing, *, seeds: int = SEEDS) -> Estimate:
    """``seeds`` simulated runs of the search (one when nothing in it is random: FIFO with one epoch count)."""
    if w.scheduler not in _POLICIES:
        raise PlanError(f"--estimate has no model of the scheduler {w.scheduler!r}")
    if w.scheduler == "fifo" and len(w.epochs) == 1 and not timing.variation:
        one = simulate(w, timing, seed=0)
        return Estimate(w, timing, (one,) * seeds)
    return Estimate(w, timing, tuple(simulate(w, timing, seed=s) for s in range(seeds)))
