"""A spec's trials as the planner counts them: the bridge from :mod:`hpsearch.spec` to the planner."""

from __future__ import annotations

from collections.abc import Sequence

from hpsearch.planning.planner import GB, Node, Plan, TrialDemand, plan_trials
from hpsearch.spec import Spec

__all__ = ["plan_for", "demand_for", "reserve_for"]


def plan_for(spec: Spec, nodes: Sequence[Node]) -> Plan:
    """Plan the spec's trials on a cluster given as plain data, ``data.cpus`` kept free on the head node."""
    return plan_trials(
        nodes, demand_for(spec), requested=spec.resources.max_concurrent_trials, reserve=reserve_for(spec)
    )


def reserve_for(spec: Spec) -> dict[str, float]:
    """What the planner keeps free for the spec's Ray Data tasks: ``{CPU: data.cpus}`` (nothing without datasets)."""
    cpus = spec.data.reserved_cpus(bool(spec.datasets))
    return {"CPU": cpus} if cpus > 0 else {}


def demand_for(spec: Spec) -> TrialDemand:
    """One trial of the spec, as the planner counts it."""
    return TrialDemand(
        driver={"CPU": spec.resources.driver_cpus},
        worker=spec.scaling.worker_bundle(),
        num_workers=spec.scaling.num_workers,
        strategy=spec.scaling.placement_strategy,
        driver_node=spec.resources.driver_node,
        driver_memory=spec.resources.driver_memory_gb * GB,
        worker_memory=spec.resources.worker_memory_gb * GB,
    )
