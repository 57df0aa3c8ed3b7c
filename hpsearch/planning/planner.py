"""Resource planning: how many nested trials can really run at once, and where.

Pure logic on plain data: a cluster is a list of :class:`Node` (resources per node),
a trial is a :class:`TrialDemand` (one driver bundle plus ``num_workers`` identical
worker bundles and Ray Train's placement strategy). Tune only sees the driver; Ray
Train asks for the workers later, in its own placement group. Starting more drivers
than the workers can be placed for makes trials wait forever while their drivers
hold CPUs the workers need, so the planner places whole trials.

How it counts. Worker bundles are identical, so each node holds a whole number of
them (``slots``), and each strategy is a condition on those counts: ``STRICT_PACK``
needs ``num_workers`` slots on one node, ``PACK``/``SPREAD`` any ``num_workers``
slots, ``STRICT_SPREAD`` slots on ``num_workers`` distinct nodes. Drivers go where
they cost the fewest worker slots: by default on the head node, which hpsearch pins
them to (``node:__internal_head__``) so that Ray places them exactly where planned.
The number of trials is the largest that satisfies both, found by bisection.
Memory counts too, as an estimate per driver and per worker, against each node's
``memory`` (nodes that report none are not limited by it).

A ``reserve`` is kept free on the head node before any trial is packed. It is the spec's
``data.cpus``: the CPUs that Ray Data's tasks need, which no placement group holds. The head
node is where the search process runs and where ``materialize: once`` builds the datasets.
Every trial's Train controller lives there too, and with it the trial's ``DatasetManager``
and split coordinator. Ray Data's tasks may run on any node, so a reserve on any node would
do. The head is chosen because it is the one node every plan has. :func:`data_cpus_per_trial`
gives each trial's share of the reserve.

Resource dicts are counted and written as :mod:`~hpsearch.planning.resources` says (Ray's
fixed-point units; ``memory`` in bytes). What no bundle reserves, the CPU a trial's helper
processes use, is :mod:`~hpsearch.planning.helper_cpu`'s measured figure.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hpsearch.errors import PlanError
from hpsearch.formatting import plural
from hpsearch.planning.helper_cpu import HELPER_CPU, HelperCpu
from hpsearch.planning.resources import GB, MEMORY, UNIT, UNIT_INSTANCE, fmt_amount, fmt_resources, positive, to_units

__all__ = [
    "Node",
    "TrialDemand",
    "TrialPlacement",
    "NodeUsage",
    "Plan",
    "plan_trials",
    "elastic_starts",
    "data_cpus_per_trial",
    "MEMORY",
    "GB",
    "DATA_TASK_CPUS",
    "memory_limit",
    "DRIVER_MEMORY_KEY",
    "WORKER_MEMORY_KEY",
    # their homes are planning.resources and planning.helper_cpu; still importable from here
    "fmt_resources",
    "positive",
    "UNIT_INSTANCE",
    "HelperCpu",
    "HELPER_CPU",
]

_INF = 1 << 62
#: The resource Ray gives the head node; a driver bundle asking for a sliver of it runs there.
HEAD_RESOURCE = "node:__internal_head__"
HEAD_SLIVER = 0.001
_NOT_PLANNED = {"object_store_memory"}
#: The CPUs a Ray Data task asks for unless told otherwise (``map_batches``, the read tasks).
DATA_TASK_CPUS = 1.0


Strategy = Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]
DriverNode = Literal["head", "any"]


@dataclass(frozen=True)
class Node:
    """One node of a cluster: its total resources (``memory`` in bytes), an id, and whether it is the head."""

    resources: Mapping[str, float]
    node_id: str = ""
    is_head: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TrialDemand:
    """What one trial reserves: the driver's bundle and its Train workers' bundles.

    ``driver_memory`` and ``worker_memory`` (bytes) are estimates used for planning only;
    ``driver_node`` says where drivers may run: ``"head"`` (pinned there) or ``"any"``.
    """

    driver: Mapping[str, float]
    worker: Mapping[str, float]
    num_workers: int
    strategy: Strategy = "PACK"
    driver_node: DriverNode = "head"
    driver_memory: float = 0.0
    worker_memory: float = 0.0

    def driver_bundle(self) -> dict[str, float]:
        out = {k: float(v) for k, v in self.driver.items() if float(v) > 0}
        if self.driver_memory > 0:
            out[MEMORY] = out.get(MEMORY, 0.0) + self.driver_memory
        return out

    def worker_bundle(self) -> dict[str, float]:
        out = {k: float(v) for k, v in self.worker.items() if float(v) > 0}
        if self.worker_memory > 0:
            out[MEMORY] = out.get(MEMORY, 0.0) + self.worker_memory
        return out

    def total(self, *, memory_estimates: bool = True) -> dict[str, float]:
        """One trial's resources: the driver plus every worker. The one count of it: the plan, the budget's
        resource-hours (:func:`hpsearch.runtime.search.budget.trial_resources`) and the estimate all read it here.

        ``memory_estimates``: with the planner's memory estimates (``driver_memory``, ``worker_memory``), as
        the plan counts a trial; without them (False), what Ray's bundles ask for, as resource-hours count it.
        """
        if memory_estimates:
            driver, worker = self.driver_bundle(), self.worker_bundle()
        else:
            driver, worker = positive(self.driver), positive(self.worker)
        out = dict(driver)
        for k, v in worker.items():
            out[k] = out.get(k, 0.0) + v * self.num_workers
        return out


@dataclass(frozen=True)
class TrialPlacement:
    """Where one trial's driver and each of its workers would run."""

    driver_node: str
    worker_nodes: tuple[str, ...]


@dataclass(frozen=True)
class NodeUsage:
    """One node at the planned concurrency: what it has and what the trials use of it."""

    node_id: str
    total: Mapping[str, float]
    used: Mapping[str, float]
    drivers: int
    workers: int
    is_head: bool = False
    reserved: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """How many trials run at once (``max_concurrent_trials``), where, and what is left idle.

    ``searched`` holds the searched scaling values (``scaling.num_workers`` -> its values), if any:
    the plan's ``demand`` is then the largest trial of them, which every other fits inside.
    """

    max_concurrent_trials: int
    capacity: int
    demand: TrialDemand
    nodes: Sequence[Node]
    placements: Sequence[TrialPlacement] = ()
    usage: Sequence[NodeUsage] = ()
    warnings: Sequence[str] = ()
    reserved: Mapping[str, float] = field(default_factory=dict)
    searched: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    #: When memory, not CPUs or GPUs, limits the trials at once: where, the figures and the spec key
    #: to change (see :func:`memory_limit`); empty otherwise.
    memory_limit: Mapping[str, Any] = field(default_factory=dict)
    #: Elastic trials (``scaling.num_workers: {min, max}``): the plan is for the minimum; this says what
    #: the maximum takes and how Ray shares the room (see :func:`hpsearch.planning.for_spec.plan_for`).
    elastic: Mapping[str, Any] = field(default_factory=dict)

    @property
    def planned_for(self) -> str | None:
        """With searched scaling, which trial the plan is for (``None`` without: every trial is the same)."""
        if not self.searched:
            return None
        d = self.demand
        return (
            f"planned for the largest trial: {d.num_workers} workers x {fmt_resources(positive(d.worker))}; "
            "smaller trials leave room unused"
        )

    @property
    def data_cpus_per_trial(self) -> float | None:
        """Each trial's Ray Data CPU limit, from the CPUs kept free (``None``: nothing kept free)."""
        return data_cpus_per_trial(self.reserved.get("CPU", 0.0), self.max_concurrent_trials)

    @property
    def per_trial(self) -> dict[str, float]:
        return self.demand.total()

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for u in self.usage:
            for k, v in u.total.items():
                out[k] = out.get(k, 0.0) + v
        return out

    def used(self) -> dict[str, float]:
        out = {k: 0.0 for k in self.totals()}
        for u in self.usage:
            for k, v in u.used.items():
                out[k] = out.get(k, 0.0) + v
        return out

    def utilisation(self) -> dict[str, float]:
        """Fraction of each resource the planned trials reserve (memory: the estimate)."""
        used = self.used()
        return {k: (used[k] / v if v else 0.0) for k, v in self.totals().items()}

    def idle(self) -> dict[str, float]:
        """What the planned trials leave unused (and is not kept free), per resource."""
        used = self.used()
        return {k: max(0.0, v - used[k] - self.reserved.get(k, 0.0)) for k, v in self.totals().items()}

    def as_dict(self) -> dict[str, Any]:
        return {
            "max_concurrent_trials": self.max_concurrent_trials,
            "capacity": self.capacity,
            "per_trial": self.per_trial,
            "driver_bundle": self.demand.driver_bundle(),
            "worker_bundle": self.demand.worker_bundle(),
            "num_workers": self.demand.num_workers,
            "placement_strategy": self.demand.strategy,
            "driver_node": self.demand.driver_node,
            "utilisation": self.utilisation(),
            "idle": self.idle(),
            "warnings": list(self.warnings),
            "nodes": [
                {
                    "node_id": u.node_id,
                    "is_head": u.is_head,
                    "resources": dict(u.total),
                    "used": dict(u.used),
                    "drivers": u.drivers,
                    "workers": u.workers,
                    **({"reserved": dict(u.reserved)} if u.reserved else {}),
                }
                for u in self.usage
            ],
            "trials": [{"driver": p.driver_node, "workers": list(p.worker_nodes)} for p in self.placements],
            # Only with searched scaling: plans without it read as before.
            **(
                {"searched_scaling": {k: list(v) for k, v in self.searched.items()}, "planned_for": self.planned_for}
                if self.searched
                else {}
            ),
            # Only with a reserve (a spec with datasets): plans without one read as before.
            **(
                {"reserved": dict(self.reserved), "data_cpus_per_trial": self.data_cpus_per_trial}
                if self.reserved
                else {}
            ),
            # Only when memory limits the plan: plans limited by CPUs or GPUs read as before.
            **({"memory_limit": dict(self.memory_limit)} if self.memory_limit else {}),
            # Only with elastic trials: plans without them read as before.
            **({"elastic": dict(self.elastic)} if self.elastic else {}),
            # What no bundle counts: the CPU a trial's helpers use on its driver's node (measured).
            "not_reserved": HELPER_CPU.as_dict(),
        }


# ----------------------------------------------------------------------------- the search


def _fit(free: Mapping[str, int], bundle: Mapping[str, int]) -> int:
    """How many ``bundle`` fit in ``free``; a node that reports no memory is not limited by it.

    Per-device resources (GPUs) count whole devices: ``need < 1`` packs ``1 // need`` to a device.
    """
    best = _INF
    for key, need in bundle.items():
        have = free.get(key)
        if have is None:
            if key == MEMORY:
                continue
            return 0
        if key in UNIT_INSTANCE and need < UNIT:
            best = min(best, (have // UNIT) * (UNIT // need))
        else:
            best = min(best, have // need)
    return best


def _minus(free: Mapping[str, int], bundle: Mapping[str, int], times: int) -> dict[str, int]:
    return {k: v - bundle.get(k, 0) * times for k, v in free.items()}


class _Problem:
    """The cluster in fixed-point units, with what each node can hold."""

    def __init__(self, nodes: Sequence[Node], demand: TrialDemand) -> None:
        self.nodes = list(nodes)
        self.n = demand.num_workers
        self.strategy = demand.strategy
        self.worker = to_units(demand.worker_bundle())
        self.driver = to_units(demand.driver_bundle())
        self.free = [to_units(node.resources) for node in self.nodes]
        self.slots = [_fit(f, self.worker) for f in self.free]
        head = [i for i, node in enumerate(self.nodes) if node.is_head] or [0][: len(self.nodes)]
        allowed = head if demand.driver_node == "head" else range(len(self.nodes))
        self.driver_nodes = set(allowed)
        self._cache: dict[tuple[int, int], int] = {}

    def drivers_on(self, i: int, workers: int) -> int:
        """Drivers node ``i`` can hold next to ``workers`` worker bundles."""
        if i not in self.driver_nodes:
            return 0
        key = (i, workers)
        if key not in self._cache:
            self._cache[key] = min(_fit(_minus(self.free[i], self.worker, workers), self.driver), _INF)
        return self._cache[key]

    def initial_workers(self, trials: int) -> list[int]:
        if self.strategy == "STRICT_PACK":
            return [s - s % self.n for s in self.slots]
        if self.strategy == "STRICT_SPREAD":
            return [min(s, trials) for s in self.slots]
        return list(self.slots)

    def worker_room(self, w: Sequence[int], trials: int) -> int:
        """How many trials' workers ``w`` slots per node can hold (capped at ``trials`` for STRICT_SPREAD)."""
        if self.strategy == "STRICT_PACK":
            return sum(x // self.n for x in w)
        if self.strategy == "STRICT_SPREAD":
            return sum(min(x, trials) for x in w) // self.n
        return sum(w) // self.n

    def feasible(self, trials: int) -> list[int] | None:
        """Worker slots to use per node so that ``trials`` whole trials fit, or None."""
        w = self.initial_workers(trials)
        if self.worker_room(w, trials) < trials:
            return None
        drivers = sum(self.drivers_on(i, x) for i, x in enumerate(w))
        if drivers >= trials:
            return w
        # Give worker slots up on driver nodes, best gain per slot first, until the drivers fit.
        step = self.n if self.strategy == "STRICT_PACK" else 1
        spare_slots = sum(w) - trials * self.n  # slots beyond what the workers need (PACK/SPREAD)
        heap: list[tuple[float, int, int, int, int]] = []
        for i in self.driver_nodes:
            self._push(heap, i, w[i], step)
        while drivers < trials and heap:
            _, i, steps, gain, seen = heapq.heappop(heap)
            if seen != w[i]:
                continue  # stale: this node changed since the entry was pushed
            candidate = list(w)
            candidate[i] -= steps * step
            if self.strategy in ("PACK", "SPREAD"):
                fits = spare_slots >= steps * step
            else:
                fits = self.worker_room(candidate, trials) >= trials
            if not fits:
                continue  # giving these slots up would strand workers; try other nodes
            if self.strategy in ("PACK", "SPREAD"):
                spare_slots -= steps * step
            w = candidate
            drivers += gain
            self._push(heap, i, w[i], step)
        return w if drivers >= trials else None

    def _push(
        self, heap: list[tuple[float, int, int, int, int]], i: int, workers: int, step: int, max_options: int = 8
    ) -> None:
        """Offer releases of 1, 2, ... groups of slots on node ``i`` that let more drivers in."""
        base = self.drivers_on(i, workers)
        last = base
        offered = 0
        for steps in range(1, workers // step + 1):
            now = self.drivers_on(i, workers - steps * step)
            if now > last:
                heapq.heappush(heap, (-(now - base) / steps, i, steps, now - base, workers))
                offered += 1
                if offered >= max_options:
                    return
            last = now

    def capacity(self) -> tuple[int, list[int]]:
        upper = sum(self.slots) // self.n if self.n else 0
        upper = min(upper, sum(self.drivers_on(i, 0) for i in self.driver_nodes))
        best, best_w = 0, self.initial_workers(0)
        lo, hi = 1, upper
        while lo <= hi:
            mid = (lo + hi) // 2
            w = self.feasible(mid)
            if w is None:
                hi = mid - 1
            else:
                best, best_w, lo = mid, w, mid + 1
        return best, best_w

    def place(self, trials: int, w: Sequence[int]) -> list[TrialPlacement]:
        """Assign ``trials`` trials to nodes within ``w`` worker slots per node, as Ray would."""
        ids = [node.node_id or f"node{i}" for i, node in enumerate(self.nodes)]
        left = list(w)
        # Nodes by most free slots (max-heap); entries are refreshed lazily.
        roomiest = [(-x, i) for i, x in enumerate(left) if x > 0]
        heapq.heapify(roomiest)
        drivers = [(-self.drivers_on(i, w[i]), i) for i in self.driver_nodes if self.drivers_on(i, w[i]) > 0]
        heapq.heapify(drivers)
        placements = []
        for _ in range(trials):
            workers = self._take_workers(left, roomiest)
            free, d = heapq.heappop(drivers)
            if free + 1 < 0:
                heapq.heappush(drivers, (free + 1, d))
            placements.append(TrialPlacement(ids[d], tuple(ids[i] for i in workers)))
        return placements

    def _take_workers(self, left: list[int], roomiest: list[tuple[int, int]]) -> list[int]:
        n = self.n
        if self.strategy in ("PACK", "STRICT_PACK"):
            whole = self._whole_node(left, roomiest)
            if whole is not None:
                left[whole] -= n
                heapq.heappush(roomiest, (-left[whole], whole))
                return [whole] * n
        taken: list[int] = []
        popped: list[int] = []
        while len(taken) < n:
            i = self._pop_roomiest(left, roomiest)
            if i is None:  # SPREAD may reuse nodes once every node with room has one of this trial's workers
                if not popped or self.strategy == "STRICT_SPREAD":
                    break
                for j in popped:
                    heapq.heappush(roomiest, (-left[j], j))
                popped = []
                continue
            k = min(left[i], n - len(taken)) if self.strategy == "PACK" else 1
            left[i] -= k
            taken += [i] * k
            popped.append(i)
        for j in popped:
            if left[j] > 0:
                heapq.heappush(roomiest, (-left[j], j))
        return taken

    @staticmethod
    def _pop_roomiest(left: list[int], roomiest: list[tuple[int, int]]) -> int | None:
        while roomiest:
            neg, i = heapq.heappop(roomiest)
            if -neg == left[i] and left[i] > 0:
                return i
            if left[i] > 0 and -neg != left[i]:
                heapq.heappush(roomiest, (-left[i], i))
        return None

    def _whole_node(self, left: list[int], roomiest: list[tuple[int, int]]) -> int | None:
        """A node that holds a whole group (the roomiest; for STRICT_PACK any node with ``n`` slots left)."""
        i = self._pop_roomiest(left, roomiest)
        if i is None:
            return None
        if left[i] >= self.n:
            return i
        heapq.heappush(roomiest, (-left[i], i))
        return None


def data_cpus_per_trial(reserved_cpus: float, concurrency: int) -> float | None:
    """The CPU limit of each trial's Ray Data executor: its share of the CPUs kept free.

    The share is ``reserved_cpus / concurrency``, raised to one data task's CPUs
    (:data:`DATA_TASK_CPUS`) but never above ``reserved_cpus``. The reason: Ray Data never
    starts a task bigger than its limit (``can_submit_new_task`` in
    ``ray.data._internal.execution.resource_manager``). So a share of 0.5 CPU would hang every
    1-CPU task. At 1 CPU each, the trials take turns on the reserve instead, because Ray queues
    a task that does not fit. Returns ``None`` when nothing is kept free (``data.cpus: 0``);
    Ray Data is then not limited.

    Example:
        >>> data_cpus_per_trial(4, 2), data_cpus_per_trial(1, 2), data_cpus_per_trial(0, 2)
        (2.0, 1.0, None)
    """
    if reserved_cpus <= 0:
        return None
    share = reserved_cpus / max(1, concurrency)
    return float(min(reserved_cpus, max(share, DATA_TASK_CPUS)))


def _head_index(nodes: Sequence[Node]) -> int:
    """The head node's index: the node marked ``is_head``, else the first."""
    return next((i for i, node in enumerate(nodes) if node.is_head), 0)


def _keep_free(nodes: Sequence[Node], reserve: Mapping[str, float]) -> list[Node]:
    """The nodes as the trials may use them: ``reserve`` taken off the head node."""
    if not reserve or not nodes:
        return list(nodes)
    i = _head_index(nodes)
    head = nodes[i]
    for key, amount in reserve.items():
        has = float(head.resources.get(key, 0))
        if round(has * UNIT) < round(amount * UNIT):
            raise PlanError(
                f"data.cpus keeps {key}: {amount:g} free on the head node for Ray Data's tasks, but the head node "
                f"has {key}: {has:g}; lower data.cpus"
            )
    left = {k: float(v) - reserve.get(k, 0.0) for k, v in head.resources.items()}
    return [*nodes[:i], Node(left, head.node_id, head.is_head, head.labels), *nodes[i + 1 :]]


def plan_trials(
    nodes: Sequence[Node],
    demand: TrialDemand,
    *,
    requested: int | Literal["auto"] = "auto",
    reserve: Mapping[str, float] | None = None,
) -> Plan:
    """Decide how many trials can run at once and where each would go.

    Args:
        nodes: The cluster's nodes and their total resources. With ``driver_node="head"``,
            the node marked ``is_head`` (else the first) holds the drivers.
        demand: One trial's driver and worker bundles.
        requested: ``"auto"`` or the user's ``max_concurrent_trials``.
        reserve: Resources kept free on the head node before trials are packed (the
            spec's ``data.cpus``, for Ray Data's tasks).

    Raises:
        PlanError: No trial can ever be placed (the message says why), or ``requested``
            is more than fit.

    Example:
        >>> demand = TrialDemand(driver={"CPU": 0.25}, worker={"CPU": 0.5}, num_workers=2)
        >>> plan_trials([Node({"CPU": 2})], demand).max_concurrent_trials
        1
    """
    if demand.num_workers < 1:
        raise PlanError(f"a trial needs at least one worker, got num_workers={demand.num_workers}")
    for key, amount in demand.worker.items():
        if key in UNIT_INSTANCE and amount > 1 and float(amount) != int(amount):
            raise PlanError(
                f"a worker asks for {key}: {amount:g}, but Ray gives a worker either a fraction of one {key} "
                f"or whole {key}s"
            )
    reserved = {k: float(v) for k, v in (reserve or {}).items() if float(v) > 0}
    problem = _Problem(_keep_free(nodes, reserved), demand)
    capacity, slots_used = problem.capacity()
    if capacity == 0:
        kept = f" (after keeping {fmt_resources(reserved)} free on the head node for Ray Data: data.cpus)"
        raise PlanError(_why_infeasible(problem, demand) + (kept if reserved else ""))
    if requested == "auto":
        chosen = capacity
    elif requested > capacity:
        raise PlanError(
            f"max_concurrent_trials is {requested}, but only {capacity} trial(s) of "
            f"{fmt_resources(demand.total())} each fit on this cluster at once; lower it or use 'auto'"
        )
    else:
        chosen = requested
    # The bisection already found slots for `capacity` trials; fewer need their own search.
    w = slots_used if chosen == capacity else problem.feasible(chosen)
    assert w is not None  # feasibility is monotone and capacity >= chosen
    placements = problem.place(chosen, w)
    usage = _usage(problem, demand, placements, nodes, reserved)
    warnings = _warnings(problem, demand, capacity, chosen, usage)
    limit = memory_limit(problem.nodes, demand, capacity, usage) if chosen == capacity else {}
    if limit:
        warnings.append(limit["message"])
    share = data_cpus_per_trial(reserved.get("CPU", 0.0), chosen)
    if share is not None and share < DATA_TASK_CPUS:
        warnings.append(
            f"data.cpus keeps {share:g} CPU free for Ray Data: a data task asks {DATA_TASK_CPUS:g} CPU unless told "
            "otherwise and would never start; raise data.cpus to 1 or give the dataset's tasks num_cpus <= "
            f"{share:g}"
        )
    elif share is not None and share * chosen > reserved["CPU"] + 1e-9:
        warnings.append(
            f"{chosen} trials at once share the {reserved['CPU']:g} CPU(s) kept free for Ray Data, {share:g} each "
            "at most: their data tasks take turns"
        )
    return Plan(chosen, capacity, demand, list(nodes), placements, usage, warnings, reserved, memory_limit=limit)


def elastic_starts(
    nodes: Sequence[Node],
    demand: TrialDemand,
    *,
    trials: int,
    minimum: int,
    maximum: int,
    reserve: Mapping[str, float] | None = None,
) -> list[int]:
    """The workers each of ``trials`` elastic trials starts with, earliest first (0: it waits for room).

    This is how Ray 2.58-2.60 shares a cluster among elastic worker groups: its autoscaling coordinator
    takes each node's total resources, less the requests made before (hpsearch's trial drivers, made
    first, and the data reserve on the head node), and gives each trial, in the order the trials
    asked, as many worker bundles as are left, up to its maximum. A trial given fewer than its
    minimum starts no worker group and waits; what it was given stays its own, so the trials after
    it wait too. Counted per node, in Ray's units (``demand.worker``: Ray's bundle, without the
    planner's memory estimate).
    """
    if trials < 1:
        return []
    free = [to_units(node.resources) for node in _keep_free(nodes, reserve or {})]
    if free:
        head = _head_index(nodes)
        free[head] = _minus(free[head], to_units(demand.driver), trials)
    worker = to_units(demand.worker)
    left = sum(max(0, _fit(f, worker)) for f in free) if worker else _INF
    out = []
    for _ in range(trials):
        given = min(maximum, left)
        left -= given
        out.append(given if given >= minimum else 0)
    return out


def _usage(
    problem: _Problem,
    demand: TrialDemand,
    placements: Sequence[TrialPlacement],
    nodes: Sequence[Node],
    reserved: Mapping[str, float],
) -> list[NodeUsage]:
    drivers: dict[str, int] = {}
    workers: dict[str, int] = {}
    for p in placements:
        drivers[p.driver_node] = drivers.get(p.driver_node, 0) + 1
        for w in p.worker_nodes:
            workers[w] = workers.get(w, 0) + 1
    d, b = demand.driver_bundle(), demand.worker_bundle()
    out = []
    head = _head_index(nodes)
    for i, node in enumerate(nodes):  # the nodes as they are, the reserve shown apart
        node_id = node.node_id or f"node{i}"
        total = {k: float(v) for k, v in node.resources.items() if k not in _NOT_PLANNED and not k.startswith("node:")}
        nd, nw = drivers.get(node_id, 0), workers.get(node_id, 0)
        used = {k: d.get(k, 0.0) * nd + b.get(k, 0.0) * nw for k in total}
        kept = dict(reserved) if i == head else {}
        out.append(NodeUsage(node_id, total, used, nd, nw, i == head, kept))
    return out


def _warnings(
    problem: _Problem, demand: TrialDemand, capacity: int, chosen: int, usage: Sequence[NodeUsage]
) -> list[str]:
    notes = []
    if chosen < capacity:
        notes.append(f"max_concurrent_trials={chosen} leaves room for {capacity} trials at once")
    gpu_nodes = [u for u in usage if u.total.get("GPU", 0) > 0]
    if any(u.drivers for u in gpu_nodes):
        cpus = sum(demand.driver.get("CPU", 0) * u.drivers for u in gpu_nodes)
        total = sum(u.total.get("CPU", 0) for u in gpu_nodes)
        notes.append(f"drivers use {cpus:g} of {total:g} CPUs on GPU nodes")
    # Which resource binds: would one more of it per node allow more trials?
    for key in demand.worker_bundle():
        bigger = [
            Node({**n.resources, key: n.resources.get(key, 0) + (GB if key == MEMORY else 1)}, n.node_id, n.is_head)
            if n.resources.get(key, 0) > 0 or key == "CPU"
            else n
            for n in problem.nodes
        ]
        more, _ = _Problem(bigger, demand).capacity()
        if more > capacity:
            unit = "1 GiB more memory" if key == MEMORY else f"one more {key}"
            notes.append(f"{unit} per node would allow {more - capacity} more trial(s) at once")
    return notes


#: The spec keys that hold the planner's memory estimates (``--set`` changes them).
DRIVER_MEMORY_KEY = "resources.driver_memory_gb"
WORKER_MEMORY_KEY = "resources.worker_memory_gb"


def _without_memory(nodes: Sequence[Node], which: Literal["all", "head", "others"]) -> list[Node]:
    """The nodes with ``memory`` left out (not limiting) on every node, on the head only, or on the others."""
    head = _head_index(nodes)

    def drop(i: int) -> bool:
        return which == "all" or (which == "head") == (i == head)

    return [
        Node({k: v for k, v in n.resources.items() if not (k == MEMORY and drop(i))}, n.node_id, n.is_head, n.labels)
        for i, n in enumerate(nodes)
    ]


def memory_limit(
    nodes: Sequence[Node], demand: TrialDemand, capacity: int, usage: Sequence[NodeUsage]
) -> dict[str, Any]:
    """When memory, not CPUs or GPUs, limits the trials at once: where, the figures and the key to change.

    Memory limits a plan when leaving it out would fit more trials. It is then the head's memory
    (the trial drivers run there, ``resources.driver_memory_gb`` each, with any workers placed
    there) when leaving out the head's memory alone would fit more; else the other nodes' (the
    workers', ``resources.worker_memory_gb`` each). The figures are read from ``demand`` (the
    spec's estimates), never fixed here. ``{}`` when memory does not limit the plan.

    ``nodes`` are the nodes as the trials may use them (the reserve taken off the head); ``usage``
    the plan at ``capacity`` trials.
    """
    if not (demand.driver_memory or demand.worker_memory) or capacity < 1:
        return {}
    without, _ = _Problem(_without_memory(nodes, "all"), demand).capacity()
    if without <= capacity:
        return {}
    head_free, _ = _Problem(_without_memory(nodes, "head"), demand).capacity()
    on_head = head_free > capacity
    where = [u for u in usage if u.is_head == on_head]
    used = sum(u.used.get(MEMORY, 0.0) for u in where)
    total = sum(u.total.get(MEMORY, 0.0) for u in where)
    drivers = sum(u.drivers for u in where)
    workers = sum(u.workers for u in where)
    parts, keys = [], []
    if drivers and demand.driver_memory:
        parts.append(
            f"{plural(drivers, 'trial driver')} at {fmt_amount(MEMORY, demand.driver_memory)} each: {DRIVER_MEMORY_KEY}"
        )
        keys.append(DRIVER_MEMORY_KEY)
    if workers and demand.worker_memory:
        parts.append(
            f"{plural(workers, 'worker')} at {fmt_amount(MEMORY, demand.worker_memory)} each: {WORKER_MEMORY_KEY}"
        )
        keys.append(WORKER_MEMORY_KEY)
    node = "the head's" if on_head else "the worker nodes'"
    message = (
        f"memory limits this plan: {plural(capacity, 'trial')} at once need {fmt_amount(MEMORY, used)} of {node} "
        f"{fmt_amount(MEMORY, total)} ({'; '.join(parts)}); CPUs and GPUs alone would allow {without} at once; "
        f"change the estimate{'s' if len(keys) > 1 else ''} with " + " or ".join(f"--set {k}=..." for k in keys)
    )
    return {
        "node": "head" if on_head else "workers",
        "trials": capacity,
        "without_memory_limit": without,
        "memory_used": used,
        "memory_total": total,
        "driver_memory": demand.driver_memory,
        "worker_memory": demand.worker_memory,
        "keys": keys,
        "message": message,
    }


def _why_infeasible(problem: _Problem, demand: TrialDemand) -> str:
    nodes = problem.nodes
    if not nodes:
        return "the cluster has no nodes"
    worker, driver = demand.worker_bundle(), demand.driver_bundle()
    for key, amount in worker.items():
        largest = max(float(n.resources.get(key, 0)) for n in nodes)
        if key == MEMORY and not any(MEMORY in n.resources for n in nodes):
            continue
        if largest < amount:
            return f"a worker needs {key}: {fmt_amount(key, amount)} but the largest node has {key}: {fmt_amount(key, largest)}"
    driver_hosts = [nodes[i] for i in sorted(problem.driver_nodes)]
    where = "the head node" if demand.driver_node == "head" else "the largest node"
    for key, amount in driver.items():
        largest = max(float(n.resources.get(key, 0)) for n in driver_hosts)
        if key == MEMORY and not any(MEMORY in n.resources for n in driver_hosts):
            continue
        if largest < amount:
            hint = (
                " (trial drivers run on the head node; give it CPUs or set resources.driver_node: any)"
                if demand.driver_node == "head"
                else ""
            )
            return f"the trial driver needs {key}: {fmt_amount(key, amount)} but {where} has {key}: {fmt_amount(key, largest)}{hint}"
    n = demand.num_workers
    if demand.strategy == "STRICT_PACK" and not any(s >= n for s in problem.slots):
        return (
            f"STRICT_PACK puts all {n} workers of {fmt_resources(worker)} on one node, but the node with the most "
            f"room holds {max(problem.slots)}"
        )
    if demand.strategy == "STRICT_SPREAD" and sum(1 for s in problem.slots if s) < n:
        holding = sum(1 for s in problem.slots if s)
        return (
            f"STRICT_SPREAD puts each of the {n} workers on a different node, but only {holding} node(s) can hold "
            f"a worker of {fmt_resources(worker)}"
        )
    return (
        f"one trial needs {fmt_resources(demand.total())} ({n} worker(s) of {fmt_resources(worker)} placed "
        f"{demand.strategy}, plus a driver of {fmt_resources(driver)} on {where if demand.driver_node == 'head' else 'any node'}), "
        "which no node or set of nodes can hold; nodes: " + "; ".join(fmt_resources(x.resources) for x in nodes)
    )
