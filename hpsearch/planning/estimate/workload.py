"""A search as the model runs it (``Workload``): how many trials, how many at once, each trial's epoch count,
the scheduler and its options, one trial's resources, the budget's limits, and how many trials share the
plan's busiest node, and its trials on spot nodes. :func:`workload_for` reads it from a spec and its plan;
:func:`epochs_for` finds the epoch counts (``--epochs``, else ``search_space.epochs``, else asha's or hyperband's
``max_t``); :func:`cadence_for` the checkpoint cadence (``search_space.checkpoint_every``, else every report).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hpsearch.errors import PlanError
from hpsearch.planning.planner import Plan
from hpsearch.planning.preemption import CHECKPOINT_EVERY_KEY, Cadence, SpotTrials, spot_trials
from hpsearch.spec import Spec, total_trials
from hpsearch.spec.space import ChoiceParam, ConstParam, GridParam, IntParam

__all__ = ["EPOCHS_KEY", "Workload", "epochs_for", "workload_for", "trial_resources", "cadence_for"]

#: The config key the shipped loops read their epoch count from (``search_space.epochs``).
EPOCHS_KEY = "epochs"
#: The time attributes the model counts as one per report (hpsearch numbers reports 1, 2, ...).
_EPOCH_ATTRS = ("epoch", "training_iteration")


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
        spot: The plan's trials at once that place workers on spot nodes (none: no preemption is counted).
        cadence: How often a trial saves a checkpoint (what a preemption loses).
        preemption_retries: ``failure.preemption_retries``, which bounds a trial's preemption restarts (``None``:
            unknown).
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
    spot: SpotTrials = field(default_factory=SpotTrials)
    cadence: Cadence = field(default_factory=Cadence)
    preemption_retries: int | None = None

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
    return plan.demand.total(memory_estimates=False)


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


def cadence_for(spec: Spec) -> Cadence:
    """How often the spec's trials save a checkpoint: ``search_space.checkpoint_every`` (whole epochs, the key the
    shipped loops read; searched: each of its values), else a checkpoint every report (epoch), assumed."""
    param = spec.search_space.get(CHECKPOINT_EVERY_KEY)
    if param is None:
        return Cadence()
    values = _epoch_values(param)
    if values is None:
        return Cadence((1,), f"assumed: search_space.{CHECKPOINT_EVERY_KEY} is not whole epochs the model can read")
    searched = " (searched: their mean)" if len(values) > 1 else ""
    return Cadence(values, f"search_space.{CHECKPOINT_EVERY_KEY}{searched}, as the shipped loops read it")


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
        spot=spot_trials(plan),
        cadence=cadence_for(spec),
        preemption_retries=spec.failure.preemption_retries,
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
