"""The resource planner, from tables of clusters: how many nested trials really fit at once, and where.

Every planned placement is checked bundle by bundle (``assert_valid``), and on small
random clusters the planner's capacity is compared with an exhaustive search
(``brute_force_fits``) that knows nothing of the planner's internals.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from hpsearch.errors import PlanError
from hpsearch.planning.planner import GB, HELPER_CPU, MEMORY, Node, Plan, TrialDemand, plan_trials
from hpsearch.planning.render import render_plan

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
DRIVER_NODES = ("head", "any")
UNIT = 10_000  # Ray's fixed point: amounts are compared in 1/10000 of a resource


def cluster(*resources: Mapping[str, float], head: int | None = None) -> list[Node]:
    """Nodes ``n0``, ``n1``, ...; ``head`` marks one as the head (else the first node is it)."""
    return [Node(dict(r), node_id=f"n{i}", is_head=(i == head)) for i, r in enumerate(resources)]


def demand(
    driver_cpu: float,
    worker: Mapping[str, float],
    num_workers: int,
    strategy: str = "PACK",
    driver_node: str = "head",
    **memory: float,
) -> TrialDemand:
    return TrialDemand({"CPU": driver_cpu}, dict(worker), num_workers, strategy, driver_node, **memory)


GPU_WORKER = {"CPU": 1, "GPU": 1}
#: The shipped quick spec (search_spaces/digits_quick.yaml, with the spec's default memory estimates).
QUICK = demand(0.1, {"CPU": 0.45}, 2, driver_memory=1.0 * GB, worker_memory=0.7 * GB)
#: This project's machine as Ray reports it.
THIS_MACHINE = cluster({"CPU": 2, MEMORY: 17.5 * GB})
#: The figure in the issue: 3 nodes of 3 GPUs, trials of 2 one-GPU workers.
ISSUE_NODES = cluster(*[{"CPU": 8, "GPU": 3}] * 3)
HETEROGENEOUS = cluster({"CPU": 16, "GPU": 1}, {"CPU": 16, "GPU": 2}, {"CPU": 16, "GPU": 4}, {"CPU": 16, "GPU": 8})
CPU_HEAD_GPU_WORKERS = cluster({"CPU": 4}, {"CPU": 8, "GPU": 4}, {"CPU": 8, "GPU": 4}, head=0)
DRIVER_STARVES = cluster({"CPU": 3, "GPU": 3}, {"CPU": 1.5})


# ----------------------------------------------------------------------------- checking a plan


def units(resources: Mapping[str, float]) -> dict[str, int]:
    return {k: round(float(v) * UNIT) for k, v in resources.items() if float(v) > 0}


def head_index(nodes: Sequence[Node]) -> int:
    return next((i for i, n in enumerate(nodes) if n.is_head), 0)


def assert_valid(nodes: Sequence[Node], d: TrialDemand, plan: Plan) -> None:
    """The plan's placements hold: every node's bundles fit it, and every trial keeps its strategy."""
    index = {n.node_id: i for i, n in enumerate(nodes)}
    driver, worker = units(d.driver_bundle()), units(d.worker_bundle())
    used: list[dict[str, int]] = [{} for _ in nodes]
    assert len(plan.placements) == plan.max_concurrent_trials
    for p in plan.placements:
        i = index[p.driver_node]
        if d.driver_node == "head":
            assert i == head_index(nodes), f"driver on {p.driver_node}, not on the head"
        for k, v in driver.items():
            used[i][k] = used[i].get(k, 0) + v
        assert len(p.worker_nodes) == d.num_workers, p
        if d.strategy == "STRICT_PACK":
            assert len(set(p.worker_nodes)) == 1, p
        if d.strategy == "STRICT_SPREAD":
            assert len(set(p.worker_nodes)) == d.num_workers, p
        for node_id in p.worker_nodes:
            j = index[node_id]
            for k, v in worker.items():
                used[j][k] = used[j].get(k, 0) + v
    for node, use in zip(nodes, used):
        have = units(node.resources)
        for k, v in use.items():
            if k == MEMORY and MEMORY not in node.resources:
                continue  # a node that reports no memory is not limited by it
            assert v <= have.get(k, 0), f"{node.node_id}: {k} {v / UNIT} used of {have.get(k, 0) / UNIT}"
    # The per-node usage the plan reports agrees with its placements.
    for node, u in zip(nodes, plan.usage):
        assert u.node_id == node.node_id
        assert u.drivers == sum(p.driver_node == node.node_id for p in plan.placements)
        assert u.workers == sum(p.worker_nodes.count(node.node_id) for p in plan.placements)


def brute_force_fits(nodes: Sequence[Node], d: TrialDemand, trials: int) -> bool:
    """Whether ``trials`` trials fit, by trying every assignment (tiny clusters only).

    Each trial picks a driver node and a count of workers per node allowed by its strategy;
    trials are interchangeable, so choices are taken in non-decreasing order.
    """
    driver = dict(d.driver)
    worker = dict(d.worker)
    if d.driver_memory:
        driver[MEMORY] = driver.get(MEMORY, 0) + d.driver_memory
    if d.worker_memory:
        worker[MEMORY] = worker.get(MEMORY, 0) + d.worker_memory
    driver, worker = units(driver), units(worker)
    keys = sorted(set(driver) | set(worker))
    free = tuple(
        tuple(
            (1 << 60) if k == MEMORY and MEMORY not in node.resources else units(node.resources).get(k, 0) for k in keys
        )
        for node in nodes
    )
    n, m = d.num_workers, len(nodes)
    hosts = [head_index(nodes)] if d.driver_node == "head" else range(m)
    spreads = []
    for counts in itertools.product(range(n + 1), repeat=m):
        if sum(counts) != n:
            continue
        if d.strategy == "STRICT_PACK" and sum(1 for c in counts if c) != 1:
            continue
        if d.strategy == "STRICT_SPREAD" and max(counts) > 1:
            continue
        spreads.append(counts)
    choices = []
    for host, counts in itertools.product(hosts, spreads):
        cost = [[worker.get(k, 0) * counts[i] + (driver.get(k, 0) if i == host else 0) for k in keys] for i in range(m)]
        choices.append(cost)

    @functools.cache
    def fits(start: int, left: int, room: tuple) -> bool:
        if left == 0:
            return True
        for c in range(start, len(choices)):
            after = tuple(tuple(r - x for r, x in zip(room[i], choices[c][i])) for i in range(m))
            if all(v >= 0 for row in after for v in row) and fits(c, left - 1, after):
                return True
        return False

    return fits(0, trials, free)


# ----------------------------------------------------------------------------- capacity


CAPACITY_TABLE = [
    # CPU only, one node.
    pytest.param(THIS_MACHINE, QUICK, 2, id="this-machine-quick-spec"),
    pytest.param(THIS_MACHINE, demand(0.25, {"CPU": 0.5}, 2), 1, id="this-machine-bigger-trials"),
    pytest.param(cluster({"CPU": 2}), demand(0.25, {"CPU": 1}, 1), 1, id="2cpu-1x1+0.25"),
    pytest.param(cluster({"CPU": 0.3}), demand(0.1, {"CPU": 0.2}, 1), 1, id="0.1+0.2-fits-0.3"),
    pytest.param(cluster({"CPU": 0.9}), demand(0.1, {"CPU": 0.1}, 2), 3, id="0.3-three-times-in-0.9"),
    pytest.param(cluster({"CPU": 0.8}), demand(0.1, {"CPU": 0.1}, 2), 2, id="0.3-twice-in-0.8"),
    # One GPU node of 1/2/4/8 GPUs, one-GPU workers.
    pytest.param(cluster({"CPU": 8, "GPU": 1}), demand(0.25, GPU_WORKER, 1), 1, id="1gpu"),
    pytest.param(cluster({"CPU": 8, "GPU": 2}), demand(0.25, GPU_WORKER, 1), 2, id="2gpu"),
    pytest.param(cluster({"CPU": 8, "GPU": 4}), demand(0.25, GPU_WORKER, 1), 4, id="4gpu"),
    pytest.param(cluster({"CPU": 16, "GPU": 8}), demand(0.25, GPU_WORKER, 1), 8, id="8gpu"),
    pytest.param(cluster({"CPU": 8, "GPU": 8}), demand(0.25, GPU_WORKER, 1), 6, id="8gpu-cpu-bound"),
    pytest.param(cluster({"CPU": 8, "GPU": 4}), demand(0.25, GPU_WORKER, 2), 2, id="4gpu-2-workers"),
    # Several GPU nodes, 1/2/4/8 GPUs each (head: the first), 2 CPUs per worker.
    pytest.param(HETEROGENEOUS, demand(0.25, {"CPU": 2, "GPU": 1}, 2, "PACK"), 7, id="1-2-4-8gpu-pack-2"),
    pytest.param(HETEROGENEOUS, demand(0.25, {"CPU": 2, "GPU": 1}, 3, "PACK"), 5, id="1-2-4-8gpu-pack-3"),
    pytest.param(HETEROGENEOUS, demand(0.25, {"CPU": 2, "GPU": 1}, 3, "SPREAD"), 5, id="1-2-4-8gpu-spread-3"),
    pytest.param(HETEROGENEOUS, demand(0.25, {"CPU": 2, "GPU": 1}, 3, "STRICT_PACK"), 3, id="1-2-4-8gpu-strict-pack-3"),
    pytest.param(
        HETEROGENEOUS, demand(0.25, {"CPU": 2, "GPU": 1}, 3, "STRICT_SPREAD"), 3, id="1-2-4-8gpu-strict-spread-3"
    ),
    pytest.param(
        HETEROGENEOUS, demand(0.25, {"CPU": 2, "GPU": 1}, 4, "STRICT_SPREAD"), 1, id="1-2-4-8gpu-strict-spread-4"
    ),
    # Heterogeneous CPU nodes.
    pytest.param(
        cluster({"CPU": 5}, {"CPU": 5}), demand(1, {"CPU": 2}, 2, "PACK"), 1, id="pack-two-nodes-drivers-on-head"
    ),
    pytest.param(
        cluster({"CPU": 5}, {"CPU": 5}),
        demand(1, {"CPU": 2}, 2, "PACK", "any"),
        2,
        id="pack-exact-fit-on-two-nodes-drivers-any",
    ),
    pytest.param(
        cluster({"CPU": 1}, {"CPU": 1}, {"CPU": 1}),
        demand(0.5, {"CPU": 1}, 2, "PACK"),
        1,
        id="pack-falls-back-to-spreading",
    ),
    pytest.param(
        cluster({"CPU": 2}, {"CPU": 6}, {"CPU": 3.5}),
        demand(0.5, {"CPU": 1.5}, 2, "STRICT_PACK"),
        3,
        id="cpu-nodes-2-6-3.5-strict-pack",
    ),
    # A CPU-only head node and GPU worker nodes: drivers on the head, workers on the GPU nodes.
    pytest.param(CPU_HEAD_GPU_WORKERS, demand(0.25, GPU_WORKER, 2), 4, id="cpu-head-2x4gpu-pack"),
    pytest.param(CPU_HEAD_GPU_WORKERS, demand(0.25, GPU_WORKER, 2, "STRICT_PACK"), 4, id="cpu-head-2x4gpu-strict-pack"),
    pytest.param(
        CPU_HEAD_GPU_WORKERS, demand(0.25, GPU_WORKER, 2, "STRICT_SPREAD"), 4, id="cpu-head-2x4gpu-strict-spread"
    ),
    pytest.param(CPU_HEAD_GPU_WORKERS, demand(1.5, GPU_WORKER, 2), 2, id="cpu-head-2x4gpu-head-cpus-bind"),
    pytest.param(
        cluster({"CPU": 8, "GPU": 3}, {"CPU": 8, "GPU": 3}, {"CPU": 2}, head=2),
        demand(0.25, GPU_WORKER, 2),
        3,
        id="head-is-not-the-first-node",
    ),
    # Fractional GPUs share a device.
    pytest.param(cluster({"CPU": 8, "GPU": 1}), demand(0.25, {"CPU": 1, "GPU": 0.25}, 4), 1, id="4x0.25gpu-on-1gpu"),
    pytest.param(cluster({"CPU": 16, "GPU": 2}), demand(0.25, {"CPU": 1, "GPU": 0.25}, 4), 2, id="4x0.25gpu-on-2gpu"),
    pytest.param(cluster({"CPU": 16, "GPU": 1}), demand(0.25, {"CPU": 1, "GPU": 0.25}, 2), 2, id="2x0.25gpu-on-1gpu"),
    pytest.param(
        cluster({"CPU": 4, "GPU": 1}, {"CPU": 4, "GPU": 1}),
        demand(0.25, {"CPU": 0.5, "GPU": 0.25}, 2, "STRICT_SPREAD"),
        4,
        id="0.25gpu-strict-spread-2-nodes",
    ),
    # The issue's figure, each strategy, drivers pinned to the head or anywhere.
    *[
        pytest.param(ISSUE_NODES, demand(0.25, GPU_WORKER, 2, s, where), expected, id=f"issue-3x3gpu-{s}-{where}")
        for s, expected in [("PACK", 4), ("STRICT_PACK", 3), ("SPREAD", 4), ("STRICT_SPREAD", 4)]
        for where in DRIVER_NODES
    ],
    pytest.param(
        cluster({"CPU": 8, "GPU": 1}, {"CPU": 8, "GPU": 1}),
        demand(0.25, GPU_WORKER, 2, "STRICT_SPREAD"),
        1,
        id="strict-spread-on-2-nodes",
    ),
    pytest.param(
        cluster(*[{"CPU": 4, "GPU": 1}] * 4),
        demand(0.25, GPU_WORKER, 3, "STRICT_SPREAD"),
        1,
        id="strict-spread-3-of-4-nodes",
    ),
    # Driver CPUs that would starve the workers.
    pytest.param(cluster({"CPU": 4, "GPU": 4}), demand(0.25, GPU_WORKER, 1), 3, id="head-cpus-equal-worker-cpus"),
    pytest.param(cluster({"CPU": 4, "GPU": 4}), demand(0.5, GPU_WORKER, 1), 2, id="head-cpus-equal-worker-cpus-0.5"),
    pytest.param(DRIVER_STARVES, demand(0.5, GPU_WORKER, 1), 2, id="drivers-pinned-to-the-gpu-head"),
    pytest.param(DRIVER_STARVES, demand(0.5, GPU_WORKER, 1, driver_node="any"), 3, id="drivers-move-to-the-cpu-node"),
    pytest.param(
        cluster({"CPU": 4, "GPU": 4}, {"CPU": 4, "GPU": 4}),
        demand(1, GPU_WORKER, 1, driver_node="any"),
        4,
        id="drivers-any-gpu-only-nodes",
    ),
    # Custom resources.
    pytest.param(
        cluster({"CPU": 4, "GPU": 2, "accel_x": 1}),
        demand(0.5, {"CPU": 1, "accel_x": 0.5}, 1),
        2,
        id="custom-resource",
    ),
    pytest.param(
        cluster({"CPU": 8, "accel_x": 1}, {"CPU": 8}, {"CPU": 8, "accel_x": 3}),
        demand(0.5, {"CPU": 1, "accel_x": 1}, 2, "SPREAD"),
        2,
        id="custom-resource-on-some-nodes",
    ),
    # Memory (bytes, an estimate) as the binding limit; nodes that report none are not limited.
    pytest.param(
        cluster({"CPU": 8, MEMORY: 4 * GB}),
        demand(0.25, {"CPU": 1}, 1, driver_memory=0.5 * GB, worker_memory=1 * GB),
        2,
        id="memory-binds",
    ),
    pytest.param(
        cluster({"CPU": 8}),
        demand(0.25, {"CPU": 1}, 1, driver_memory=0.5 * GB, worker_memory=1 * GB),
        6,
        id="node-without-memory-is-not-limited",
    ),
    pytest.param(
        cluster({"CPU": 2, MEMORY: 4 * GB}),
        QUICK,
        1,
        id="quick-spec-on-4gb",
    ),
    pytest.param(
        cluster({"CPU": 4, MEMORY: 1 * GB}, {"CPU": 4, MEMORY: 16 * GB}),
        demand(0.25, {"CPU": 1}, 2, "SPREAD", "any", driver_memory=0.5 * GB, worker_memory=1 * GB),
        2,
        id="memory-moves-workers-to-the-big-node",
    ),
]


@pytest.mark.parametrize(("nodes", "trial", "expected"), CAPACITY_TABLE)
def test_capacity(nodes: list[Node], trial: TrialDemand, expected: int) -> None:
    plan = plan_trials(nodes, trial)
    assert (plan.capacity, plan.max_concurrent_trials) == (expected, expected)


@pytest.mark.parametrize(("nodes", "trial", "expected"), CAPACITY_TABLE)
def test_placements_are_valid(nodes: list[Node], trial: TrialDemand, expected: int) -> None:
    plan = plan_trials(nodes, trial)
    assert_valid(nodes, trial, plan)
    for requested in range(1, plan.capacity + 1):
        assert_valid(nodes, trial, plan_trials(nodes, trial, requested=requested))


@pytest.mark.parametrize(
    ("nodes", "trial", "expected"),
    [p for p in CAPACITY_TABLE if len(p.values[0]) <= 4 and p.values[2] <= 8 and p.values[1].num_workers <= 3],
)
def test_capacity_is_the_most_that_fit(nodes: list[Node], trial: TrialDemand, expected: int) -> None:
    """Where the table's clusters are small enough, one more trial than planned really does not fit."""
    assert brute_force_fits(nodes, trial, expected)
    assert not brute_force_fits(nodes, trial, expected + 1)


def test_cpu_only_head_keeps_drivers_and_gpu_nodes_keep_workers() -> None:
    plan = plan_trials(CPU_HEAD_GPU_WORKERS, demand(0.25, GPU_WORKER, 2))
    assert {p.driver_node for p in plan.placements} == {"n0"}
    assert sorted(w for p in plan.placements for w in p.worker_nodes) == ["n1"] * 4 + ["n2"] * 4
    assert [(u.drivers, u.workers) for u in plan.usage] == [(4, 0), (0, 4), (0, 4)]


def test_drivers_any_go_to_the_cpu_only_node() -> None:
    plan = plan_trials(DRIVER_STARVES, demand(0.5, GPU_WORKER, 1, driver_node="any"))
    assert [(p.driver_node, p.worker_nodes) for p in plan.placements] == [("n1", ("n0",))] * 3


def test_strict_pack_keeps_each_trial_on_one_node() -> None:
    plan = plan_trials(ISSUE_NODES, demand(0.25, GPU_WORKER, 2, "STRICT_PACK"))
    assert sorted(p.worker_nodes for p in plan.placements) == [("n0", "n0"), ("n1", "n1"), ("n2", "n2")]


def test_pack_uses_one_node_when_it_can() -> None:
    plan = plan_trials(ISSUE_NODES, demand(0.25, GPU_WORKER, 2, "PACK"))
    together = [p for p in plan.placements if len(set(p.worker_nodes)) == 1]
    assert len(together) == 3 and len(plan.placements) == 4  # 3 GPUs a node: the fourth trial must straddle


def test_fractional_gpus_share_one_device() -> None:
    plan = plan_trials(cluster({"CPU": 8, "GPU": 1}), demand(0.25, {"CPU": 1, "GPU": 0.25}, 4))
    assert plan.placements[0].worker_nodes == ("n0",) * 4
    assert plan.utilisation()["GPU"] == 1.0


# ----------------------------------------------------------------------------- drivers beside workers

DRIVERS_MOVED_OFF_WORKER_SLOTS = [
    # driver_node="any": worker slots are given up for drivers where that frees the most drivers;
    # these once came out one trial short (a release of one slot freed no driver, two would have).
    pytest.param(
        cluster({"CPU": 2.5}, {"CPU": 3}),
        demand(1, {"CPU": 0.75}, 1, "SPREAD", "any"),
        3,
        id="any-spread-2.5+3cpu",
        # n0: 2 workers + 1 driver (2.5), n1: 1 worker + 2 drivers (2.75); the planner says 2
    ),
    pytest.param(
        cluster({"CPU": 2.5}, {"CPU": 2}),
        demand(1, {"CPU": 0.6}, 2, "PACK", "any"),
        2,
        id="any-pack-2.5+2cpu",
        # n0: 4 workers (2.4), n1: 2 drivers (2); the planner says 1
    ),
    pytest.param(
        cluster({"CPU": 4}, {"CPU": 2.5}),
        demand(0.5, {"CPU": 0.4}, 2, "STRICT_PACK", "any"),
        5,
        id="any-strict-pack-4+2.5cpu",
        # n0: 10 workers (4), n1: 5 drivers (2.5); the planner says 4
    ),
    pytest.param(
        cluster({"CPU": 2}, {"CPU": 1.5}, {"CPU": 2}),
        demand(0.5, {"CPU": 0.6}, 2, "STRICT_SPREAD", "any"),
        3,
        id="any-strict-spread-2+1.5+2cpu",
        # n0 and n2: 3 workers each (1.8), n1: 3 drivers (1.5); the planner says 2
    ),
]


@pytest.mark.parametrize(("nodes", "trial", "fits"), DRIVERS_MOVED_OFF_WORKER_SLOTS)
def test_drivers_moved_off_worker_slots(nodes: list[Node], trial: TrialDemand, fits: int) -> None:
    assert brute_force_fits(nodes, trial, fits)
    assert not brute_force_fits(nodes, trial, fits + 1)
    plan = plan_trials(nodes, trial)
    assert plan.capacity == fits
    assert_valid(nodes, trial, plan)


# Ray allocates a fractional GPU (a "unit-instance" resource, like TPU or neuron_cores) from ONE
# device, best fit (src/ray/common/scheduling/resource_instance_set.cc, TryAllocate), and refuses a
# fractional demand above 1. The planner counts whole devices the same way.
@pytest.mark.parametrize(
    ("nodes", "trial", "ray_fits"),
    [
        pytest.param(
            cluster({"CPU": 8, "GPU": 2}), demand(0.25, {"CPU": 1, "GPU": 0.4}, 1), 4, id="0.4gpu-on-2gpus"
        ),  # 2 per device (0.8), not 5
        pytest.param(
            cluster({"CPU": 16, "GPU": 4}), demand(0.25, {"CPU": 1, "GPU": 0.75}, 1), 4, id="0.75gpu-on-4gpus"
        ),  # 1 per device, not 5
    ],
)
def test_fractional_gpus_do_not_combine_across_devices(nodes: list[Node], trial: TrialDemand, ray_fits: int) -> None:
    assert plan_trials(nodes, trial).capacity == ray_fits


def test_a_fractional_gpu_above_one_is_refused() -> None:
    with pytest.raises(PlanError) as info:
        plan_trials(cluster({"CPU": 8, "GPU": 4}), demand(0.25, {"CPU": 1, "GPU": 1.5}, 1))
    assert str(info.value) == (
        "a worker asks for GPU: 1.5, but Ray gives a worker either a fraction of one GPU or whole GPUs"
    )


# ----------------------------------------------------------------------------- random clusters


def random_case(rng: random.Random, k: int) -> tuple[list[Node], TrialDemand]:
    """A small cluster and a trial; strategy and driver node cycle so every pair is covered."""
    strategy, driver_node = STRATEGIES[k % 4], DRIVER_NODES[(k // 4) % 2]
    tight = k % 3 == 0  # CPU-tight: drivers and workers compete for the same CPUs
    count = rng.randint(1, 3) if rng.random() < 0.6 else rng.randint(1, 5)
    head = rng.choice([None, *range(count)])
    nodes = []
    for i in range(count):
        cpus = [1, 1.5, 2, 2.5, 3, 4, 5, 0.75, 1.25] if tight else [0, 0.3, 1, 1.5, 2, 2.5, 3, 4, 6, 8]
        r: dict[str, float] = {"CPU": rng.choice(cpus)}
        if rng.random() < 0.5:
            r["GPU"] = rng.choice([1, 2, 3, 4])
        if rng.random() < 0.2:
            r["accel_x"] = rng.choice([0.5, 1, 2])
        if rng.random() < 0.3:
            r[MEMORY] = rng.choice([1, 2, 3, 4, 8]) * GB
        nodes.append(Node(r, node_id=f"n{i}", is_head=(i == head)))
    worker: dict[str, float] = {
        "CPU": rng.choice([0.25, 0.4, 0.5, 0.6, 0.75, 1, 1.5] if tight else [0.1, 0.25, 0.45, 0.5, 1, 2])
    }
    if any("GPU" in n.resources for n in nodes) and rng.random() < 0.6:
        worker["GPU"] = rng.choice([0.2, 0.25, 0.5, 1])  # fractions that divide 1: see the xfail above
    if any("accel_x" in n.resources for n in nodes) and rng.random() < 0.5:
        worker["accel_x"] = rng.choice([0.5, 1])
    num_workers = rng.randint(1, count) if strategy == "STRICT_SPREAD" else rng.randint(1, 4)
    trial = TrialDemand(
        {"CPU": rng.choice([0.1, 0.25, 0.3, 0.5, 0.6, 0.75, 1])},
        worker,
        num_workers,
        strategy,
        driver_node,
        driver_memory=rng.choice([0, 0, 0.5, 1.5]) * GB,
        worker_memory=rng.choice([0, 0, 0.5, 0.7, 1]) * GB,
    )
    return nodes, trial


_RNG = random.Random(20240611)
RANDOM_CASES = [random_case(_RNG, k) for k in range(200)]
RANDOM_IDS = [f"r{k:03d}-{len(n)}n-{t.strategy}-{t.driver_node}" for k, (n, t) in enumerate(RANDOM_CASES)]


def _tiny_random_cases() -> list:
    """The random cases small enough for the exhaustive search (chosen when collecting)."""
    out = []
    for (nodes, trial), name in zip(RANDOM_CASES, RANDOM_IDS):
        if tiny(nodes, trial, capacity_or_zero(nodes, trial)):
            out.append(pytest.param(nodes, trial, id=name))
    return out


def capacity_or_zero(nodes: list[Node], trial: TrialDemand) -> int:
    try:
        return plan_trials(nodes, trial).capacity
    except PlanError:
        return 0


def tiny(nodes: list[Node], trial: TrialDemand, capacity: int) -> bool:
    return len(nodes) <= 3 and capacity <= 4 and trial.num_workers <= 3


TINY_RANDOM_CASES = _tiny_random_cases()


@pytest.mark.parametrize(("nodes", "trial"), RANDOM_CASES, ids=RANDOM_IDS)
def test_random_placements_are_valid(nodes: list[Node], trial: TrialDemand) -> None:
    try:
        plan = plan_trials(nodes, trial)
    except PlanError:
        return  # whether that is right is checked against the exhaustive search below
    assert plan.max_concurrent_trials == plan.capacity >= 1
    assert_valid(nodes, trial, plan)
    for requested in range(1, plan.capacity + 1):
        assert_valid(nodes, trial, plan_trials(nodes, trial, requested=requested))


@pytest.mark.parametrize(("nodes", "trial"), TINY_RANDOM_CASES)
def test_random_capacity_never_above_the_exhaustive_search(nodes: list[Node], trial: TrialDemand) -> None:
    capacity = capacity_or_zero(nodes, trial)
    assert capacity == 0 or brute_force_fits(nodes, trial, capacity)


@pytest.mark.parametrize(("nodes", "trial"), TINY_RANDOM_CASES)
def test_random_capacity_matches_the_exhaustive_search(nodes: list[Node], trial: TrialDemand) -> None:
    capacity = capacity_or_zero(nodes, trial)
    assert not brute_force_fits(nodes, trial, capacity + 1), f"{capacity + 1} trials fit, the planner says {capacity}"


def test_random_cases_cover_every_strategy_and_driver_node() -> None:
    checked = {
        (t.strategy, t.driver_node)
        for n, t in RANDOM_CASES
        if capacity_or_zero(n, t) and tiny(n, t, capacity_or_zero(n, t))
    }
    assert checked == set(itertools.product(STRATEGIES, DRIVER_NODES))


# ----------------------------------------------------------------------------- requested


@pytest.mark.parametrize(
    ("requested", "expected"),
    [pytest.param(1, 1, id="below"), pytest.param(2, 2, id="equal"), pytest.param("auto", 2, id="auto")],
)
def test_requested_up_to_capacity_is_used_as_is(requested: int | str, expected: int) -> None:
    plan = plan_trials(THIS_MACHINE, QUICK, requested=requested)
    assert (plan.max_concurrent_trials, plan.capacity) == (expected, 2)
    assert len(plan.placements) == expected


def test_requested_below_capacity_says_so() -> None:
    plan = plan_trials(THIS_MACHINE, QUICK, requested=1)
    assert "max_concurrent_trials=1 leaves room for 2 trials at once" in plan.warnings


def test_requested_above_capacity_names_both_numbers() -> None:
    with pytest.raises(PlanError) as info:
        plan_trials(THIS_MACHINE, QUICK, requested=5)
    assert str(info.value) == (
        "max_concurrent_trials is 5, but only 2 trial(s) of {CPU: 1, memory: 2.4 GiB} each fit on this cluster "
        "at once; lower it or use 'auto'"
    )


# ----------------------------------------------------------------------------- infeasible


INFEASIBLE = [
    pytest.param(
        cluster({"CPU": 8, "GPU": 1}, {"CPU": 8, "GPU": 1}),
        demand(0.25, {"CPU": 1, "GPU": 2}, 1),
        "a worker needs GPU: 2 but the largest node has GPU: 1",
        id="worker-needs-2-gpus",
    ),
    pytest.param(
        cluster({"CPU": 8}),
        demand(0.25, GPU_WORKER, 1),
        "a worker needs GPU: 1 but the largest node has GPU: 0",
        id="no-gpu-at-all",
    ),
    pytest.param(
        cluster({"CPU": 8, MEMORY: 1 * GB}),
        demand(0.25, {"CPU": 1}, 1, worker_memory=2 * GB),
        "a worker needs memory: 2 GiB but the largest node has memory: 1 GiB",
        id="worker-memory-too-big",
    ),
    pytest.param(
        cluster({"GPU": 4}, {"CPU": 8, "GPU": 4}),
        demand(0.25, GPU_WORKER, 1),
        "the trial driver needs CPU: 0.25 but the head node has CPU: 0 (trial drivers run on the head node; "
        "give it CPUs or set resources.driver_node: any)",
        id="driver-bigger-than-the-head",
    ),
    pytest.param(
        cluster({"CPU": 1}),
        demand(2, {"CPU": 0.5}, 1, driver_node="any"),
        "the trial driver needs CPU: 2 but the largest node has CPU: 1",
        id="driver-bigger-than-any-node",
    ),
    pytest.param(
        cluster({"CPU": 2}, {"CPU": 2}),
        demand(0.25, {"CPU": 1}, 3, "STRICT_PACK"),
        "STRICT_PACK puts all 3 workers of {CPU: 1} on one node, but the node with the most room holds 2",
        id="strict-pack-group-too-big",
    ),
    pytest.param(
        cluster({"CPU": 16, "GPU": 3}),
        demand(0.25, GPU_WORKER, 2, "STRICT_SPREAD"),
        "STRICT_SPREAD puts each of the 2 workers on a different node, but only 1 node(s) can hold a worker of "
        "{CPU: 1, GPU: 1}",
        id="strict-spread-too-few-nodes",
    ),
    pytest.param(
        cluster({"CPU": 1.2}),
        demand(0.25, {"CPU": 1}, 1),
        "one trial needs {CPU: 1.25} (1 worker(s) of {CPU: 1} placed PACK, plus a driver of {CPU: 0.25} on the "
        "head node), which no node or set of nodes can hold; nodes: {CPU: 1.2}",
        id="driver-and-worker-together-too-big",
    ),
    pytest.param(
        cluster({"CPU": 1}, {"CPU": 1}),
        demand(0.5, {"CPU": 1}, 2, "STRICT_PACK", "any"),
        "STRICT_PACK puts all 2 workers of {CPU: 1} on one node, but the node with the most room holds 1",
        id="strict-pack-on-small-nodes",
    ),
    pytest.param([], demand(0.25, {"CPU": 1}, 1), "the cluster has no nodes", id="no-nodes"),
    pytest.param(
        THIS_MACHINE,
        demand(0.25, {"CPU": 1}, 0),
        "a trial needs at least one worker, got num_workers=0",
        id="0-workers",
    ),
]


@pytest.mark.parametrize(("nodes", "trial", "message"), INFEASIBLE)
def test_a_trial_that_can_never_be_placed(nodes: list[Node], trial: TrialDemand, message: str) -> None:
    with pytest.raises(PlanError) as info:
        plan_trials(nodes, trial)
    assert str(info.value) == message
    if nodes and trial.num_workers:
        assert not brute_force_fits(nodes, trial, 1)


def test_plan_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        plan_trials([], demand(0.25, {"CPU": 1}, 1))


# ----------------------------------------------------------------------------- warnings


WARNINGS = [
    pytest.param(
        ISSUE_NODES,
        demand(0.25, GPU_WORKER, 2),
        ["drivers use 1 of 24 CPUs on GPU nodes", "one more GPU per node would allow 2 more trial(s) at once"],
        id="issue-pack-head",
    ),
    pytest.param(
        ISSUE_NODES,
        demand(0.25, GPU_WORKER, 2, "STRICT_PACK", "any"),
        ["drivers use 0.75 of 24 CPUs on GPU nodes", "one more GPU per node would allow 3 more trial(s) at once"],
        id="issue-strict-pack-any",
    ),
    pytest.param(
        cluster({"CPU": 4, "GPU": 4}, {"CPU": 4, "GPU": 4}),
        demand(1, GPU_WORKER, 1, driver_node="any"),
        # Y counts the CPUs of the GPU nodes that hold drivers: all 4 drivers went to n0.
        ["drivers use 4 of 8 CPUs on GPU nodes", "one more CPU per node would allow 1 more trial(s) at once"],
        id="drivers-any-on-gpu-only-nodes",
    ),
    pytest.param(
        CPU_HEAD_GPU_WORKERS,
        demand(0.25, GPU_WORKER, 2),
        ["one more GPU per node would allow 1 more trial(s) at once"],
        id="cpu-head",
    ),
    pytest.param(
        cluster({"CPU": 8, MEMORY: 4 * GB}),
        demand(0.25, {"CPU": 1}, 1, driver_memory=0.5 * GB, worker_memory=1 * GB),
        [
            "1 GiB more memory per node would allow 1 more trial(s) at once",
            "memory limits this plan: 2 trials at once need 3 GiB of the head's 4 GiB (2 trial drivers at 0.5 GiB "
            "each: resources.driver_memory_gb; 2 workers at 1 GiB each: resources.worker_memory_gb); CPUs and GPUs "
            "alone would allow 6 at once; change the estimates with --set resources.driver_memory_gb=... or "
            "--set resources.worker_memory_gb=...",
        ],
        id="memory-binds",
    ),
    pytest.param(THIS_MACHINE, QUICK, ["one more CPU per node would allow 1 more trial(s) at once"], id="this-machine"),
    pytest.param(
        DRIVER_STARVES, demand(0.5, GPU_WORKER, 1, driver_node="any"), [], id="drivers-on-the-cpu-node-no-warning"
    ),
]


@pytest.mark.parametrize(("nodes", "trial", "warnings"), WARNINGS)
def test_warnings(nodes: list[Node], trial: TrialDemand, warnings: list[str]) -> None:
    assert list(plan_trials(nodes, trial).warnings) == warnings


# ----------------------------------------------------------------------------- memory as the limit

HEAD_8GB = {"CPU": 8, MEMORY: 8 * GB}

MEMORY_LIMITS = [
    pytest.param(
        [Node(HEAD_8GB, "head", True), Node({"CPU": 16}, "n1")],
        demand(0.1, {"CPU": 1}, 1, driver_memory=1.5 * GB, worker_memory=0.7 * GB),
        {"node": "head", "trials": 5, "without_memory_limit": 21, "keys": ["resources.driver_memory_gb"]},
        "memory limits this plan: 5 trials at once need 7.5 GiB of the head's 8 GiB (5 trial drivers at 1.5 GiB "
        "each: resources.driver_memory_gb); CPUs and GPUs alone would allow 21 at once; change the estimate with "
        "--set resources.driver_memory_gb=...",
        id="head-holds-the-drivers",
    ),
    pytest.param(
        [Node({"CPU": 8, MEMORY: 64 * GB}, "head", True), Node({"CPU": 8, MEMORY: 4 * GB}, "n1")],
        demand(0.1, {"CPU": 1}, 1, driver_memory=1.5 * GB, worker_memory=0.7 * GB),
        {"node": "workers", "trials": 11, "without_memory_limit": 14, "keys": ["resources.worker_memory_gb"]},
        "memory limits this plan: 11 trials at once need 3.5 GiB of the worker nodes' 4 GiB (5 workers at 0.7 GiB "
        "each: resources.worker_memory_gb); CPUs and GPUs alone would allow 14 at once; change the estimate with "
        "--set resources.worker_memory_gb=...",
        id="worker-nodes",
    ),
    pytest.param(
        [Node({"CPU": 1, MEMORY: 64 * GB}, "head", True)],
        demand(0.1, {"CPU": 0.45}, 2, driver_memory=1.5 * GB, worker_memory=0.7 * GB),
        {},
        None,
        id="cpus-limit-not-memory",
    ),
    pytest.param(
        [Node(HEAD_8GB, "head", True)],
        demand(0.1, {"CPU": 0.45}, 1),
        {},
        None,
        id="no-estimates",
    ),
    pytest.param(
        [Node({"CPU": 8}, "head", True)],
        demand(0.1, {"CPU": 1}, 1, driver_memory=1.5 * GB),
        {},
        None,
        id="nodes-that-report-no-memory",
    ),
]


@pytest.mark.parametrize(("nodes", "trial", "expected", "line"), MEMORY_LIMITS)
def test_memory_limit(nodes: list[Node], trial: TrialDemand, expected: dict, line: str | None) -> None:
    plan = plan_trials(nodes, trial)
    limit = {k: plan.memory_limit[k] for k in expected}
    assert limit == expected
    assert [w for w in plan.warnings if w.startswith("memory limits")] == ([line] if line else [])
    assert ("memory_limit" in plan.as_dict()) == bool(line)
    if line:
        assert plan.as_dict()["memory_limit"]["message"] == line


def test_memory_limit_is_said_only_when_it_limits_the_chosen_concurrency() -> None:
    trial = demand(0.1, {"CPU": 1}, 1, driver_memory=1.5 * GB)
    assert plan_trials([Node(HEAD_8GB, "head", True)], trial, requested=5).memory_limit
    assert not plan_trials([Node(HEAD_8GB, "head", True)], trial, requested=4).memory_limit


# ----------------------------------------------------------------------------- the plan as data


def test_utilisation_and_idle() -> None:
    plan = plan_trials(THIS_MACHINE, QUICK)
    assert plan.utilisation() == pytest.approx({"CPU": 1.0, MEMORY: 4.8 / 17.5})
    assert plan.idle() == pytest.approx({"CPU": 0.0, MEMORY: 12.7 * GB})


def test_utilisation_with_idle_gpus() -> None:
    plan = plan_trials(ISSUE_NODES, demand(0.25, GPU_WORKER, 2, "STRICT_PACK"))
    assert plan.utilisation() == pytest.approx({"CPU": 6.75 / 24, "GPU": 6 / 9})
    assert plan.idle() == pytest.approx({"CPU": 17.25, "GPU": 3})


def test_plan_as_dict() -> None:
    plan = plan_trials([Node({"CPU": 2.0}, node_id="head")], demand(0.1, {"CPU": 0.45}, 2), requested=1)
    assert plan.as_dict() == {
        "max_concurrent_trials": 1,
        "capacity": 2,
        "per_trial": {"CPU": 1.0},
        "driver_bundle": {"CPU": 0.1},
        "worker_bundle": {"CPU": 0.45},
        "num_workers": 2,
        "placement_strategy": "PACK",
        "driver_node": "head",
        "utilisation": {"CPU": pytest.approx(0.5)},
        "idle": {"CPU": pytest.approx(1.0)},
        "warnings": [
            "max_concurrent_trials=1 leaves room for 2 trials at once",
            "one more CPU per node would allow 1 more trial(s) at once",
        ],
        "nodes": [
            {
                "node_id": "head",
                "is_head": True,
                "resources": {"CPU": 2.0},
                "used": {"CPU": pytest.approx(1.0)},
                "drivers": 1,
                "workers": 2,
            }
        ],
        "trials": [{"driver": "head", "workers": ["head", "head"]}],
        "not_reserved": HELPER_CPU.as_dict(),
    }


def test_the_plan_says_what_a_trials_helpers_use_beyond_its_bundles() -> None:
    """Ray starts a nested run's controller and synchronisation actor with 0 CPUs: a measured figure, not a bundle."""
    assert HELPER_CPU.cpu_s > 0 and HELPER_CPU.ray_defaults_cpu_s > HELPER_CPU.cpu_s
    assert "benchmarks/trial_start.py" in HELPER_CPU.measured
    plan = plan_trials([Node({"CPU": 8.0}, node_id="head", is_head=True)], demand(0.1, {"CPU": 1.0}, 2), requested=3)
    data = json.loads(json.dumps(plan.as_dict()))
    assert data["not_reserved"] == {
        "cpu_s_per_trial": HELPER_CPU.cpu_s,
        "ray_defaults_cpu_s_per_trial": HELPER_CPU.ray_defaults_cpu_s,
        "processes": list(HELPER_CPU.processes),
        "measured": HELPER_CPU.measured,
    }
    assert plan.per_trial == {"CPU": 2.1}  # the plan itself reserves only the bundles
    text = render_plan(plan, title="Plan")
    assert f"  not reserved    about {HELPER_CPU.cpu_s:.0f} CPU-seconds per trial on the head node" in text
    assert f"3 starting at once: about {3 * HELPER_CPU.cpu_s:.0f} CPU-seconds" in text
    assert "HPSEARCH_RAY_WORKAROUNDS=0" in text and "benchmarks/trial_start.py" in text


def test_nodes_without_ids_are_named_by_position() -> None:
    plan = plan_trials([Node({"CPU": 1}), Node({"CPU": 8, "GPU": 2})], demand(0.25, GPU_WORKER, 1))
    assert [(p.driver_node, p.worker_nodes) for p in plan.placements] == [("node0", ("node1",))] * 2


@pytest.mark.parametrize(("nodes", "trial", "expected"), CAPACITY_TABLE[:12] + CAPACITY_TABLE[-4:])
def test_planning_does_not_change_its_inputs(nodes: list[Node], trial: TrialDemand, expected: int) -> None:
    before = copy.deepcopy((nodes, trial))
    plan_trials(nodes, trial)
    plan_trials(nodes, trial, requested=1)
    assert (nodes, trial) == before


# ----------------------------------------------------------------------------- from the shipped spec

# hpsearch.spec / hpsearch.runtime.search.tuner are imported in the tests, so a problem there fails these tests only.
QUICK_SPEC = Path(__file__).resolve().parents[2] / "search_spaces" / "digits_quick.yaml"


def test_the_quick_spec_asks_for_what_this_file_plans() -> None:
    from hpsearch.planning.for_spec import demand_for
    from hpsearch.spec import load_spec

    assert demand_for(load_spec(QUICK_SPEC, check_trainable=False)) == QUICK


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param([], 2, id="digits-quick-on-this-machine"),
        pytest.param(["resources.max_concurrent_trials=1"], 1, id="requested-1"),
        pytest.param(["resources.driver_cpus=0.25", "scaling.resources_per_worker.CPU=0.5"], 1, id="bigger-trials"),
    ],
)
def test_plan_for_the_quick_spec_on_this_machine(overrides: list[str], expected: int) -> None:
    from hpsearch.planning.for_spec import plan_for
    from hpsearch.spec import load_spec

    spec = load_spec(QUICK_SPEC, overrides=overrides, check_trainable=False)
    assert plan_for(spec, THIS_MACHINE).max_concurrent_trials == expected


@pytest.mark.parametrize(
    ("scaling", "bundle"),
    [
        pytest.param({}, {"CPU": 1.0}, id="default"),
        pytest.param({"use_gpu": True}, {"CPU": 1.0, "GPU": 1.0}, id="use-gpu"),
        pytest.param({"resources_per_worker": {"CPU": 0.45}}, {"CPU": 0.45}, id="fractional-cpu"),
        pytest.param({"use_gpu": True, "resources_per_worker": {"CPU": 4}}, {"CPU": 4.0, "GPU": 1.0}, id="gpu-added"),
        pytest.param(
            {"use_gpu": True, "resources_per_worker": {"CPU": 2, "GPU": 0.5}},
            {"CPU": 2.0, "GPU": 0.5},
            id="fractional-gpu",
        ),
        pytest.param({"resources_per_worker": {"CPU": 1, "memory": 0}}, {"CPU": 1.0}, id="zero-dropped"),
    ],
)
def test_worker_bundle_from_the_spec(scaling: dict, bundle: dict) -> None:
    from hpsearch.spec import Scaling

    assert Scaling(**scaling).worker_bundle() == bundle
