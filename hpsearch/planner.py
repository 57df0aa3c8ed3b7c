"""Resource planning: how many nested trials can really run at once on a cluster.

Pure logic on plain data: a cluster is a list of nodes' resources, a trial is one
driver bundle plus ``num_workers`` worker bundles. Tune only sees the driver; Ray
Train asks for the workers later, in its own placement group. Starting more drivers
than the workers can be placed for makes trials wait forever while their drivers
hold CPUs the workers need, so the planner places whole trials, node by node, and
never reports more concurrent trials than it could place itself.

Amounts are compared in Ray's fixed-point units (1/10000 of a resource), so
``0.1 + 0.2`` CPUs fit in ``0.3``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence, Union

from hpsearch.errors import PlanError

__all__ = ["Node", "TrialDemand", "Plan", "plan_trials"]

_UNIT = 10_000
Strategy = Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]


def _units(resources: Mapping[str, float]) -> dict[str, int]:
    return {k: round(float(v) * _UNIT) for k, v in resources.items() if float(v) > 0}


def _fmt(resources: Mapping[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(resources.items())) + "}"


@dataclass(frozen=True)
class Node:
    """One node of a cluster: its resources (``CPU``, ``GPU``, custom ones) and an id."""

    resources: Mapping[str, float]
    node_id: str = ""


@dataclass(frozen=True)
class TrialDemand:
    """What one trial reserves: the driver's bundle and its Train workers' bundles."""

    driver: Mapping[str, float]
    worker: Mapping[str, float]
    num_workers: int
    strategy: Strategy = "PACK"

    def total(self) -> dict[str, float]:
        out = {k: float(v) for k, v in self.driver.items()}
        for k, v in self.worker.items():
            out[k] = out.get(k, 0.0) + float(v) * self.num_workers
        return out


@dataclass(frozen=True)
class Plan:
    """The outcome of planning: how many trials run at once, and from what."""

    max_concurrent_trials: int
    capacity: int
    demand: TrialDemand
    nodes: Sequence[Node]
    per_trial: Mapping[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "max_concurrent_trials": self.max_concurrent_trials,
            "capacity": self.capacity,
            "per_trial": dict(self.per_trial),
            "driver_bundle": dict(self.demand.driver),
            "worker_bundle": dict(self.demand.worker),
            "num_workers": self.demand.num_workers,
            "placement_strategy": self.demand.strategy,
            "nodes": [{"node_id": n.node_id, "resources": dict(n.resources)} for n in self.nodes],
        }


def plan_trials(
    nodes: Sequence[Node],
    demand: TrialDemand,
    *,
    requested: Union[int, Literal["auto"]] = "auto",
) -> Plan:
    """Decide how many trials can run at once.

    Args:
        nodes: The cluster's nodes and their total resources.
        demand: One trial's driver and worker bundles.
        requested: ``"auto"`` or the user's ``max_concurrent_trials``.

    Raises:
        PlanError: No trial can ever be placed, or ``requested`` is more than fit.

    Example:
        >>> demand = TrialDemand(driver={"CPU": 0.25}, worker={"CPU": 0.5}, num_workers=2)
        >>> plan_trials([Node({"CPU": 2})], demand).max_concurrent_trials
        1
    """
    free = [_units(n.resources) for n in nodes]
    driver, worker = _units(demand.driver), _units(demand.worker)
    capacity = 0
    while _place_trial(free, driver, worker, demand.num_workers, demand.strategy):
        capacity += 1
    if capacity == 0:
        raise PlanError(_why_infeasible(nodes, demand))
    if requested == "auto":
        chosen = capacity
    elif requested > capacity:
        raise PlanError(
            f"max_concurrent_trials is {requested}, but only {capacity} trial(s) of "
            f"{_fmt(demand.total())} each fit on this cluster at once; lower it or use 'auto'"
        )
    else:
        chosen = requested
    return Plan(chosen, capacity, demand, list(nodes), demand.total())


def _fits(free: Mapping[str, int], need: Mapping[str, int]) -> bool:
    return all(free.get(k, 0) >= v for k, v in need.items())


def _take(free: dict[str, int], need: Mapping[str, int]) -> None:
    for k, v in need.items():
        free[k] -= v


def _place_trial(free: list[dict[str, int]], driver: dict, worker: dict, n: int, strategy: str) -> bool:
    """Reserve one trial's bundles in ``free`` (workers first, the scarcer part); False if it does not fit."""
    trial = [dict(f) for f in free]
    if strategy in ("PACK", "STRICT_PACK"):
        one_node = next((i for i, f in enumerate(trial) if _fits(f, {k: v * n for k, v in worker.items()})), None)
        if one_node is not None:
            for _ in range(n):
                _take(trial[one_node], worker)
        elif strategy == "STRICT_PACK" or not _first_fit(trial, worker, n, distinct=False):
            return False
    elif not _first_fit(trial, worker, n, distinct=strategy == "STRICT_SPREAD"):
        return False
    # The driver goes where it leaves most room: the node with the most of its resources left.
    candidates = [i for i, f in enumerate(trial) if _fits(f, driver)]
    if not candidates:
        return False
    best = max(candidates, key=lambda i: tuple(trial[i].get(k, 0) - v for k, v in driver.items()))
    _take(trial[best], driver)
    free[:] = trial
    return True


def _first_fit(trial: list[dict[str, int]], worker: dict, n: int, *, distinct: bool) -> bool:
    """Place ``n`` worker bundles one by one on the least-loaded node that fits (as SPREAD does)."""
    used: set[int] = set()
    for _ in range(n):
        fitting = [i for i, f in enumerate(trial) if (not distinct or i not in used) and _fits(f, worker)]
        if not fitting:
            return False
        roomiest = max(fitting, key=lambda i: min(trial[i].get(k, 0) // v for k, v in worker.items()) if worker else 0)
        _take(trial[roomiest], worker)
        used.add(roomiest)
    return True


def _why_infeasible(nodes: Sequence[Node], demand: TrialDemand) -> str:
    if not nodes:
        return "the cluster has no nodes"
    for name, bundle in (("a worker", demand.worker), ("the trial driver", demand.driver)):
        for key, amount in bundle.items():
            largest = max(float(n.resources.get(key, 0)) for n in nodes)
            if largest < amount:
                return f"{name} needs {key}: {amount:g} but the largest node has {key}: {largest:g}"
    return (
        f"one trial needs {_fmt(demand.total())} ({demand.num_workers} worker(s) of "
        f"{_fmt(demand.worker)} placed {demand.strategy}, plus a driver of {_fmt(demand.driver)}), "
        f"which no node or set of nodes can hold; nodes: "
        + "; ".join(_fmt(n.resources) for n in nodes)
    )
