"""Resource planning from tables of clusters: how many nested trials really fit at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpsearch.errors import PlanError
from hpsearch.planner import Node, TrialDemand, plan_trials
from hpsearch.spec import Scaling, load_spec
from hpsearch.tuner import plan_for


def nodes(*resources: dict) -> list[Node]:
    return [Node(r, node_id=f"n{i}") for i, r in enumerate(resources)]


QUICK_SPEC = Path(__file__).resolve().parents[1] / "search_spaces" / "digits_quick.yaml"
GPU_WORKER = {"CPU": 1, "GPU": 1}
THREE_GPU_NODES = nodes(*[{"CPU": 16, "GPU": 3}] * 3)

CAPACITY_TABLE = [
    pytest.param(nodes({"CPU": 2}), TrialDemand({"CPU": 0.1}, {"CPU": 0.45}, 2), 2, id="2cpu-2x0.45+0.1"),
    pytest.param(nodes({"CPU": 2}), TrialDemand({"CPU": 0.25}, {"CPU": 0.5}, 2), 1, id="2cpu-2x0.5+0.25"),
    pytest.param(nodes({"CPU": 2}), TrialDemand({"CPU": 0.25}, {"CPU": 1}, 1), 1, id="2cpu-1x1+0.25"),
    pytest.param(nodes({"CPU": 0.3}), TrialDemand({"CPU": 0.1}, {"CPU": 0.2}, 1), 1, id="0.1+0.2-fits-0.3"),
    pytest.param(nodes({"CPU": 0.9}), TrialDemand({"CPU": 0.1}, {"CPU": 0.1}, 2), 3, id="0.3-three-times-in-0.9"),
    pytest.param(
        THREE_GPU_NODES, TrialDemand({"CPU": 0.25}, GPU_WORKER, 2, "STRICT_PACK"), 3, id="3x3gpu-strict-pack"
    ),
    pytest.param(THREE_GPU_NODES, TrialDemand({"CPU": 0.25}, GPU_WORKER, 2, "PACK"), 4, id="3x3gpu-pack"),
    pytest.param(THREE_GPU_NODES, TrialDemand({"CPU": 0.25}, GPU_WORKER, 2, "SPREAD"), 4, id="3x3gpu-spread"),
    pytest.param(
        THREE_GPU_NODES,
        TrialDemand({"CPU": 0.25}, GPU_WORKER, 2, "STRICT_SPREAD"),
        4,
        id="3x3gpu-strict-spread",
    ),
    pytest.param(
        nodes({"CPU": 8, "GPU": 1}, {"CPU": 8, "GPU": 1}),
        TrialDemand({"CPU": 0.25}, GPU_WORKER, 2, "STRICT_SPREAD"),
        1,
        id="strict-spread-on-2-nodes",
    ),
    pytest.param(
        nodes({"CPU": 5}, {"CPU": 5}),
        TrialDemand({"CPU": 1}, {"CPU": 2}, 2, "PACK"),
        2,
        id="pack-exact-fit-on-two-nodes",
    ),
    pytest.param(
        nodes({"CPU": 1}, {"CPU": 1}, {"CPU": 1}),
        TrialDemand({"CPU": 0.5}, {"CPU": 1}, 2, "PACK"),
        1,
        id="pack-falls-back-to-spreading",
    ),
    pytest.param(
        nodes({"CPU": 3, "GPU": 3}, {"CPU": 1.5}),
        TrialDemand({"CPU": 0.5}, GPU_WORKER, 1),
        3,
        id="drivers-on-the-cpu-only-node",
        marks=pytest.mark.xfail(
            strict=True,
            reason="the driver goes to the node with the most CPU left - the GPU node - and takes the CPU "
            "the third GPU worker needs (capacity 2); 3 workers on the GPU node + 3 drivers on the CPU node fit",
        ),
    ),
    pytest.param(
        nodes({"CPU": 4, "GPU": 2, "accel_x": 1}),
        TrialDemand({"CPU": 0.5}, {"CPU": 1, "accel_x": 0.5}, 1),
        2,
        id="custom-resource",
    ),
]


@pytest.mark.parametrize(("cluster", "demand", "expected"), CAPACITY_TABLE)
def test_capacity(cluster: list[Node], demand: TrialDemand, expected: int) -> None:
    plan = plan_trials(cluster, demand)
    assert plan.capacity == expected
    assert plan.max_concurrent_trials == expected


def test_requested_below_capacity_is_used_as_is() -> None:
    plan = plan_trials(nodes({"CPU": 2}), TrialDemand({"CPU": 0.1}, {"CPU": 0.45}, 2), requested=1)
    assert (plan.max_concurrent_trials, plan.capacity) == (1, 2)


def test_requested_equal_to_capacity() -> None:
    plan = plan_trials(nodes({"CPU": 2}), TrialDemand({"CPU": 0.1}, {"CPU": 0.45}, 2), requested=2)
    assert plan.max_concurrent_trials == 2


def test_requested_above_capacity_names_both_numbers() -> None:
    with pytest.raises(PlanError) as info:
        plan_trials(nodes({"CPU": 2}), TrialDemand({"CPU": 0.1}, {"CPU": 0.45}, 2), requested=5)
    assert str(info.value) == (
        "max_concurrent_trials is 5, but only 2 trial(s) of {CPU: 1} each fit on this cluster at once; "
        "lower it or use 'auto'"
    )


INFEASIBLE = [
    pytest.param(
        nodes({"CPU": 8, "GPU": 1}, {"CPU": 8, "GPU": 1}),
        TrialDemand({"CPU": 0.25}, {"CPU": 1, "GPU": 2}, 1),
        "a worker needs GPU: 2 but the largest node has GPU: 1",
        id="worker-needs-2-gpus",
    ),
    pytest.param(
        nodes({"CPU": 8}),
        TrialDemand({"CPU": 0.25}, GPU_WORKER, 1),
        "a worker needs GPU: 1 but the largest node has GPU: 0",
        id="no-gpu-at-all",
    ),
    pytest.param(
        nodes({"CPU": 1}),
        TrialDemand({"CPU": 2}, {"CPU": 0.5}, 1),
        "the trial driver needs CPU: 2 but the largest node has CPU: 1",
        id="driver-too-big",
    ),
    pytest.param(
        nodes({"CPU": 16, "GPU": 3}),
        TrialDemand({"CPU": 0.25}, GPU_WORKER, 2, "STRICT_SPREAD"),
        "one trial needs {CPU: 2.25, GPU: 2} (2 worker(s) of {CPU: 1, GPU: 1} placed STRICT_SPREAD, plus a driver "
        "of {CPU: 0.25}), which no node or set of nodes can hold; nodes: {CPU: 16, GPU: 3}",
        id="strict-spread-on-one-node",
    ),
    pytest.param(
        nodes({"CPU": 1}, {"CPU": 1}),
        TrialDemand({"CPU": 0.5}, {"CPU": 1}, 2, "STRICT_PACK"),
        "one trial needs {CPU: 2.5} (2 worker(s) of {CPU: 1} placed STRICT_PACK, plus a driver of {CPU: 0.5}), "
        "which no node or set of nodes can hold; nodes: {CPU: 1}; {CPU: 1}",
        id="strict-pack-on-small-nodes",
    ),
    pytest.param([], TrialDemand({"CPU": 0.25}, {"CPU": 1}, 1), "the cluster has no nodes", id="no-nodes"),
]


@pytest.mark.parametrize(("cluster", "demand", "message"), INFEASIBLE)
def test_a_trial_that_can_never_be_placed(cluster: list[Node], demand: TrialDemand, message: str) -> None:
    with pytest.raises(PlanError) as info:
        plan_trials(cluster, demand)
    assert str(info.value) == message


def test_plan_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        plan_trials([], TrialDemand({"CPU": 0.25}, {"CPU": 1}, 1))


def test_plan_as_dict() -> None:
    demand = TrialDemand({"CPU": 0.1}, {"CPU": 0.45}, 2)
    plan = plan_trials([Node({"CPU": 2.0}, node_id="head")], demand, requested=1)
    assert plan.as_dict() == {
        "max_concurrent_trials": 1,
        "capacity": 2,
        "per_trial": {"CPU": 1.0},
        "driver_bundle": {"CPU": 0.1},
        "worker_bundle": {"CPU": 0.45},
        "num_workers": 2,
        "placement_strategy": "PACK",
        "nodes": [{"node_id": "head", "resources": {"CPU": 2.0}}],
    }


def test_planning_does_not_change_the_nodes() -> None:
    cluster = nodes({"CPU": 2})
    plan_trials(cluster, TrialDemand({"CPU": 0.1}, {"CPU": 0.45}, 2))
    assert cluster[0].resources == {"CPU": 2}


# --------------------------------------------------------------------------- from a spec


@pytest.mark.parametrize(
    ("scaling", "bundle"),
    [
        ({}, {"CPU": 1.0}),
        ({"use_gpu": True}, {"CPU": 1.0, "GPU": 1.0}),
        ({"resources_per_worker": {"CPU": 0.45}}, {"CPU": 0.45}),
        ({"use_gpu": True, "resources_per_worker": {"CPU": 4}}, {"CPU": 4.0, "GPU": 1.0}),
        ({"use_gpu": True, "resources_per_worker": {"CPU": 2, "GPU": 0.5}}, {"CPU": 2.0, "GPU": 0.5}),
        ({"resources_per_worker": {"CPU": 1, "memory": 0}}, {"CPU": 1.0}),
    ],
    ids=["default", "use-gpu", "fractional-cpu", "gpu-added", "fractional-gpu", "zero-dropped"],
)
def test_worker_bundle(scaling: dict, bundle: dict) -> None:
    assert Scaling(**scaling).worker_bundle() == bundle


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ([], 2),
        (["resources.max_concurrent_trials=1"], 1),
        (["resources.driver_cpus=0.25", "scaling.resources_per_worker.CPU=0.5"], 1),
    ],
    ids=["digits-quick-on-2-cpus", "requested-1", "bigger-trials"],
)
def test_plan_for_the_shipped_quick_spec_on_a_2_cpu_machine(overrides: list[str], expected: int) -> None:
    spec = load_spec(QUICK_SPEC, overrides=overrides, check_trainable=False)
    assert plan_for(spec, [Node({"CPU": 2.0, "memory": 8e9})]).max_concurrent_trials == expected


def test_plan_for_refuses_more_than_fit() -> None:
    spec = load_spec(
        QUICK_SPEC, overrides=["resources.max_concurrent_trials=3"], check_trainable=False
    )
    with pytest.raises(PlanError) as info:
        plan_for(spec, [Node({"CPU": 2.0})])
    assert str(info.value) == (
        "max_concurrent_trials is 3, but only 2 trial(s) of {CPU: 1} each fit on this cluster at once; "
        "lower it or use 'auto'"
    )
