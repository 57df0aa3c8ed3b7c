"""Spot nodes in a plan, and what a preemption costs a trial (``hpsearch plan``'s "spot nodes" lines).

A node group marked ``spot`` in ``--cluster`` (``0..4x{CPU: 8, GPU: 1, spot}``) gives nodes that carry
Ray's market-type label (:func:`~hpsearch.planning.cluster_shape.is_spot`); so do a running cluster's
spot nodes. :func:`spot_trials` says which of the plan's trials at once place workers on them.

What one preemption costs a trial: Ray Train restarts its worker group from the latest checkpoint, so
the trial loses the training since that checkpoint, on average half a checkpoint interval (a
preemption falls anywhere in it), plus the restart. The interval is a :class:`Cadence`: the spec's
``search_space.checkpoint_every`` (the key the shipped loops read), else a checkpoint every report
(epoch), as the shipped loops and :func:`hpsearch.train.report` save by default. The spec's
``checkpoint`` section sets no cadence (only ``num_to_keep``).

:func:`expected_cost` is ``plan --estimate --preemption-rate``'s model: an analytic expectation added to
each simulated run, not simulated. Expected preemptions = the rate x the spot node-hours under the
trials' workers (each trial counts the spot nodes its workers sit on, for as long as it holds its slot);
each costs its trial the lost training plus a restart; the extra slot-time is spread over the trials
at once for the wall time, and times one trial's resources for the resource-hours. First order:
preemptions during the redone work, the budget's limits and the wait for a replacement node are not
counted, nor the preemption notice (:data:`NOTICE`): the loss is counted as a reclaim without one, or one whose
deadline comes before the next report. Pure: no Ray.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hpsearch.errors import PlanError
from hpsearch.planning.cluster_shape import is_spot
from hpsearch.planning.planner import Plan

__all__ = [
    "CHECKPOINT_EVERY_KEY",
    "Cadence",
    "SpotTrials",
    "spot_trials",
    "spot_lines",
    "spot_as_dict",
    "PreemptionCost",
    "expected_cost",
    "beyond_retries",
    "preemption_rate",
    "NOTICE",
    "RETRIES",
]

#: The config key the shipped loops read their checkpoint cadence from (``search_space.checkpoint_every``).
CHECKPOINT_EVERY_KEY = "checkpoint_every"
#: Why a checkpoint every report is assumed when the spec sets no cadence.
ASSUMED = (
    "assumed: the spec sets no search_space.checkpoint_every (the shipped loops' key; the spec's checkpoint section "
    "holds only num_to_keep), and the shipped loops and hpsearch.train.report save one with every report"
)
#: Ray Train's preemption notice, in one line.
NOTICE = (
    "with Ray Train's preemption notice (ray.train.get_preemption_info()), hpsearch.train.report saves a checkpoint "
    "at the first report after it: when that falls before the drain's deadline, the loss is only the steps after it"
)
#: What bounds a trial's preemptions.
RETRIES = (
    "each preemption counts against failure.preemption_retries (Ray Train's max_preemption_failures), apart from "
    "failures: a trial preempted more often errors"
)
_INDENT = " " * 18
_MAX_NAMES = 8


@dataclass(frozen=True)
class Cadence:
    """How often a trial saves a checkpoint, in epochs (reports): ``every`` (several values when searched) and
    where that comes from, for people."""

    every: tuple[int, ...] = (1,)
    source: str = ASSUMED

    @property
    def mean(self) -> float:
        """The epochs between checkpoints, on average over the searched values."""
        return sum(self.every) / len(self.every)

    @property
    def assumed(self) -> bool:
        """Whether the spec sets no cadence (a checkpoint every report assumed)."""
        return self.source == ASSUMED

    def text(self) -> str:
        """``every report (epoch)``, ``every 2 epochs`` or ``every 1, 2 or 4 epochs``."""
        if self.every == (1,):
            return "every report (epoch)"
        if len(self.every) == 1:
            return f"every {self.every[0]} epochs"
        return "every " + ", ".join(str(e) for e in self.every[:-1]) + f" or {self.every[-1]} epochs"

    def lines(self) -> list[str]:
        """The interval and where it comes from, as the plan's lines say it."""
        if self.assumed:
            head, _, rest = self.source.partition(" (")
            return [f"checkpoint interval: {self.text()}, {head}", f"({rest}"]
        return [f"checkpoint interval: {self.text()} ({self.source})"]

    def as_dict(self) -> dict[str, Any]:
        return {"every_epochs": list(self.every), "mean_epochs": self.mean, "from": self.source}


@dataclass(frozen=True)
class SpotTrials:
    """The plan's trials at once that place workers on spot nodes.

    Attributes:
        trials: Their indices in the plan's placements (``plan --format json``'s ``trials``), from 0.
        trials_at_once: All the plan's trials at once.
        workers: Their workers on spot nodes.
        of_workers: All their workers.
        nodes: The spot nodes that hold them, in the plan's node order.
        nodes_per_trial: Spot nodes under one trial's workers, on average over all the trials at once.
    """

    trials: tuple[int, ...] = ()
    trials_at_once: int = 0
    workers: int = 0
    of_workers: int = 0
    nodes: tuple[str, ...] = ()
    nodes_per_trial: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.trials)

    @property
    def nodes_per_spot_trial(self) -> float:
        """Spot nodes under the workers of a trial that has any, on average."""
        return self.nodes_per_trial * self.trials_at_once / len(self.trials) if self.trials else 0.0


def spot_trials(plan: Plan) -> SpotTrials:
    """Which of the plan's trials at once place workers on spot nodes, how many workers, on which nodes."""
    spot = {n.node_id for n in plan.nodes if is_spot(n)}
    if not spot:
        return SpotTrials(trials_at_once=len(plan.placements))
    trials, used, workers, of_workers, under = [], set(), 0, 0, 0
    for i, placement in enumerate(plan.placements):
        on_spot = [node for node in placement.worker_nodes if node in spot]
        if on_spot:
            trials.append(i)
            workers += len(on_spot)
            of_workers += len(placement.worker_nodes)
            used.update(on_spot)
            under += len(set(on_spot))
    at_once = len(plan.placements)
    return SpotTrials(
        trials=tuple(trials),
        trials_at_once=at_once,
        workers=workers,
        of_workers=of_workers,
        nodes=tuple(n.node_id for n in plan.nodes if n.node_id in used),
        nodes_per_trial=under / at_once if at_once else 0.0,
    )


def _names(nodes: tuple[str, ...]) -> str:
    shown = ", ".join(nodes[:_MAX_NAMES])
    return shown + (f" and {len(nodes) - _MAX_NAMES} more" if len(nodes) > _MAX_NAMES else "")


def spot_lines(plan: Plan, cadence: Cadence | None = None) -> list[str]:
    """``hpsearch plan``'s "spot nodes" lines: which trials at once sit on spot nodes, and what one preemption
    costs a trial at the checkpoint cadence (``cadence``: the spec's; ``None``: a checkpoint every report,
    assumed). Empty when no worker sits on a spot node."""
    spot = spot_trials(plan)
    if not spot:
        return []
    cadence = cadence or Cadence()
    half = cadence.mean / 2
    return [
        f"  spot nodes      {len(spot.trials)} of the {spot.trials_at_once} trials at once put workers on spot "
        f"nodes: {spot.workers} of their {spot.of_workers} workers, on {_names(spot.nodes)}",
        f"{_INDENT}one preemption costs a trial about {half:g} epoch(s) of training (half a checkpoint interval, on "
        "average) plus a restart",
        f"{_INDENT}(its worker group started again from the latest checkpoint); plan --estimate says it in seconds, "
        "and with --preemption-rate R the expected extra wall time and resource-hours",
        *(f"{_INDENT}{line}" for line in cadence.lines()),
        f"{_INDENT}{NOTICE}",
        f"{_INDENT}{RETRIES}",
    ]


def spot_as_dict(plan: Plan, cadence: Cadence | None = None) -> dict[str, Any]:
    """The "spot nodes" lines as fields for ``plan --format json`` (empty when no worker sits on a spot node)."""
    spot = spot_trials(plan)
    if not spot:
        return {}
    cadence = cadence or Cadence()
    return {
        "spot": {
            "trials": list(spot.trials),
            "trials_at_once": spot.trials_at_once,
            "workers_on_spot": spot.workers,
            "workers": spot.of_workers,
            "nodes": list(spot.nodes),
            "spot_nodes_per_trial": spot.nodes_per_trial,
            "checkpoint": cadence.as_dict(),
            "lost_per_preemption_epochs": cadence.mean / 2,
            "restart_per_preemption": "the trial's worker group started again from its latest checkpoint",
            "preemption_notice": NOTICE,
            "retries": RETRIES,
        }
    }


@dataclass(frozen=True)
class PreemptionCost:
    """What preemptions add to one simulated search, in expectation.

    Attributes:
        spot_node_hours: Spot node-hours under the trials' workers (a node under two trials counts twice).
        preemptions: Expected preemptions of a trial: the rate times ``spot_node_hours``.
        extra_slot_s: Their cost in slot-seconds: each one's lost training plus its restart.
        extra_wall_s: ``extra_slot_s`` spread over the trials at once.
        extra_resource_hours: ``extra_slot_s`` times one trial's resources, per resource.
    """

    spot_node_hours: float
    preemptions: float
    extra_slot_s: float
    extra_wall_s: float
    extra_resource_hours: Mapping[str, float] = field(default_factory=dict)


def expected_cost(
    *,
    rate: float,
    spot_nodes_per_trial: float,
    busy_s: float,
    each_s: float,
    slots: int,
    resources: Mapping[str, float],
) -> PreemptionCost:
    """The expected cost of preemptions in one simulated search whose trials held their slots ``busy_s``
    slot-seconds, at ``rate`` preemptions per spot node-hour, each costing its trial ``each_s`` seconds.

    Example:
        >>> c = expected_cost(rate=0.1, spot_nodes_per_trial=2, busy_s=36000, each_s=60, slots=4, resources={"GPU": 2})
        >>> (c.spot_node_hours, c.preemptions, c.extra_slot_s, c.extra_wall_s, c.extra_resource_hours)
        (20.0, 2.0, 120.0, 30.0, {'GPU': 0.06666666666666667})
    """
    node_hours = spot_nodes_per_trial * busy_s / 3600.0
    preemptions = rate * node_hours
    extra = preemptions * each_s
    return PreemptionCost(
        spot_node_hours=node_hours,
        preemptions=preemptions,
        extra_slot_s=extra,
        extra_wall_s=extra / max(1, slots),
        extra_resource_hours={k: amount * extra / 3600.0 for k, amount in resources.items()},
    )


def beyond_retries(mean: float, retries: int) -> float:
    """The chance that a trial expecting ``mean`` preemptions (Poisson) has more than ``retries`` of them.

    Example:
        >>> round(beyond_retries(0.5, 1), 4)
        0.0902
    """
    if mean <= 0:
        return 0.0
    term = total = math.exp(-mean)
    for k in range(1, retries + 1):
        term *= mean / k
        total += term
    return max(0.0, 1.0 - total)


def preemption_rate(text: str) -> float:
    """``--preemption-rate``'s value: preemptions per spot node-hour, a finite number >= 0.

    Raises:
        PlanError: anything else, naming the flag, the value and what is allowed.
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise PlanError(
            f"--preemption-rate must be a number of preemptions per spot node-hour, at least 0 (e.g. 0.05), "
            f"got {text!r}"
        )
    return value
