"""Plans on autoscaling clusters (``0..4x{...}``): at the minimum size, at the maximum, and per extra node."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpsearch.errors import PlanError
from hpsearch.planning.autoscale import MAX_STEPS, GroupGrowth, plan_autoscaling
from hpsearch.planning.cluster_shape import NodeGroup, parse_node_groups
from hpsearch.planning.render import describe_groups, render_autoscaling
from hpsearch.spec import Spec, load_spec

QUICK = Path(__file__).resolve().parents[2] / "search_spaces" / "digits_quick.yaml"
GPU_PAIRS = ("scaling.use_gpu=true", "scaling.resources_per_worker={CPU: 1, GPU: 1}")


def quick(*overrides: str) -> Spec:
    """The shipped quick spec (2 workers x 0.45 CPU + a 0.1-CPU driver), with ``--set`` overrides."""
    return load_spec(QUICK, overrides=overrides, check_trainable=False)


@pytest.mark.parametrize(
    ("cluster", "overrides", "at_min", "at_max", "per_node"),
    [
        pytest.param("1x{CPU: 2} + 0..2x{CPU: 2}", (), 2, 5, [(0, 1, 2), (2, 3, 5)], id="cpu-nodes"),
        pytest.param(
            "1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}",
            GPU_PAIRS,
            0,
            16,
            [(0, 1, 2, 3, 4), (0, 4, 8, 12, 16)],
            id="gpu-nodes-from-zero",
        ),
        pytest.param(
            "1..3x{CPU: 2}",
            (),
            2,
            5,
            [(0, 1, 2), (2, 3, 5)],
            id="head-group-grows",
        ),
        pytest.param(
            "1x{CPU: 1} + 0..3x{CPU: 4} + 1..2x{CPU: 2}",
            (),
            2,
            10,
            [(0, 1, 2, 3), (2, 6, 10, 10), (0, 1), (2, 4)],
            id="two-groups-drivers-limit-the-head",
        ),
        pytest.param(
            "1x{CPU: 2} + 0..3x{CPU: 2}",
            ("resources.max_concurrent_trials=3",),
            2,
            3,
            [(0, 1, 2, 3), (2, 3, 3, 3)],
            id="max-concurrent-trials-caps-the-growth",
        ),
    ],
)
def test_plan_at_both_sizes_and_per_node(
    cluster: str, overrides: tuple[str, ...], at_min: int, at_max: int, per_node: list[tuple[int, ...]]
) -> None:
    plan = plan_autoscaling(quick(*overrides), parse_node_groups(cluster))
    assert (plan.at_min.max_concurrent_trials if plan.at_min else 0) == at_min
    assert plan.waits_for_autoscaler == (at_min == 0)
    assert plan.at_max.max_concurrent_trials == at_max
    assert [x for g in plan.per_node for x in (g.extra, g.trials)] == per_node


@pytest.mark.parametrize(
    ("extra", "trials", "line"),
    [
        pytest.param(
            (0, 1, 2, 3, 4),
            (0, 4, 8, 12, 16),
            "each extra {CPU: 8, GPU: 8} node (0..4): +4 trial(s) at once, up to 16 with all 4",
            id="uniform",
        ),
        pytest.param(
            (0, 1, 2, 3, 4),
            (8, 15, 19, 21, 21),
            "each extra {CPU: 8, GPU: 8} node (0..4): +1: 15, +2: 19, +3: 21 trials at once (from 8); "
            "more than 3 add none",
            id="uneven-then-flat",
        ),
        pytest.param(
            (0, 1, 2, 3, 4),
            (2, 4, 6, 6, 6),
            "each extra {CPU: 8, GPU: 8} node (0..4): +2 trial(s) at once, up to 6 with 2; more than 2 add none",
            id="uniform-then-flat",
        ),
        pytest.param(
            (0, 1, 2, 3, 4),
            (4, 4, 4, 4, 4),
            "each extra {CPU: 8, GPU: 8} node (0..4): adds no trials at once",
            id="adds-nothing",
        ),
    ],
)
def test_growth_line(extra: tuple[int, ...], trials: tuple[int, ...], line: str) -> None:
    growth = GroupGrowth(1, NodeGroup({"CPU": 8.0, "GPU": 8.0}, 0, 4, False), extra, trials)
    assert growth.describe() == line


def test_a_spot_groups_line_and_json_say_spot() -> None:
    growth = GroupGrowth(1, NodeGroup({"CPU": 8.0}, 0, 4, False, spot=True), (0, 1, 2, 3, 4), (0, 4, 8, 12, 16))
    assert growth.describe() == "each extra {CPU: 8} spot node (0..4): +4 trial(s) at once, up to 16 with all 4"
    assert growth.as_dict()["spot"] is True


def test_a_big_group_is_planned_node_by_node_up_to_max_steps_then_at_its_maximum() -> None:
    plan = plan_autoscaling(quick(), parse_node_groups("1x{CPU: 64} + 0..100x{CPU: 1}"))
    (growth,) = plan.per_node
    assert growth.extra == (*range(MAX_STEPS + 1), 100)
    assert growth.trials[-1] == plan.at_max.max_concurrent_trials


def test_a_trial_that_fits_at_no_size_is_refused_naming_the_maximum_size() -> None:
    spec = quick(*GPU_PAIRS, "scaling.placement_strategy=STRICT_PACK")
    with pytest.raises(PlanError) as info:
        plan_autoscaling(spec, parse_node_groups("1x{CPU: 8} + 0..2x{CPU: 8, GPU: 1}"))
    assert str(info.value) == (
        "even at the cluster's maximum size (3 nodes): STRICT_PACK puts all 2 workers of "
        "{CPU: 1, GPU: 1, memory: 0.7 GiB} on one node, but the node with the most room holds 1"
    )


def test_max_concurrent_trials_above_the_maximum_size_is_refused() -> None:
    with pytest.raises(PlanError, match="max_concurrent_trials is 9, but only 5 trial"):
        plan_autoscaling(quick("resources.max_concurrent_trials=9"), parse_node_groups("1x{CPU: 2} + 0..2x{CPU: 2}"))


def test_as_dict_carries_both_plans_and_the_growth() -> None:
    plan = plan_autoscaling(quick(*GPU_PAIRS), parse_node_groups("1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}"))
    data = plan.as_dict()
    assert data["min"] == {
        "max_concurrent_trials": 0,
        "waits_for_autoscaler": True,
        "reason": "a worker needs GPU: 1 but the largest node has GPU: 0",
    }
    assert data["max"] == plan.at_max.as_dict()
    assert (data["min_nodes"], data["max_nodes"]) == (1, 5)
    assert data["groups"][1] == {
        "resources": {"CPU": 8.0, "GPU": 8.0},
        "min_count": 0,
        "max_count": 4,
        "is_head": False,
    }
    assert data["per_node"] == [
        {
            "group": 1,
            "resources": {"CPU": 8.0, "GPU": 8.0},
            "min_count": 0,
            "max_count": 4,
            "spot": False,
            "extra_nodes": [0, 1, 2, 3, 4],
            "trials_at_once": [0, 4, 8, 12, 16],
        }
    ]


def test_render_says_trials_wait_for_the_autoscaler() -> None:
    plan = plan_autoscaling(quick(*GPU_PAIRS), parse_node_groups("1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}"))
    assert describe_groups(plan) == "1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}"
    lines = render_autoscaling(plan, title="T", total_trials=12).splitlines()
    assert lines[:6] == [
        "T",
        "",
        "At the minimum size (1 node)",
        "  trials at once  0: a worker needs GPU: 1 but the largest node has GPU: 0",
        "                  trials wait for the autoscaler to start a node (see what each extra node adds below)",
        "",
    ]
    assert lines[6] == "At the maximum size (5 nodes)"
    assert lines[-2:] == [
        "As the autoscaler adds nodes (the other groups at their minimum)",
        "  each extra {CPU: 8, GPU: 8} node (0..4): +4 trial(s) at once, up to 16 with all 4",
    ]


def test_a_gpu_node_as_ray_reports_it_counts_in_its_group() -> None:
    """Ray adds ``accelerator_type:<TYPE>`` and ``node:<ip>`` to a GPU node; a shape names neither."""
    from hpsearch.planning.autoscale import addable_nodes, group_counts
    from hpsearch.planning.cluster_shape import parse_node_groups
    from hpsearch.planning.planner import Node

    groups = parse_node_groups("1x{CPU: 8} + 1..4x{CPU: 8, GPU: 8}")
    head = Node({"CPU": 8.0, "node:__internal_head__": 1.0, "node:10.0.0.1": 1.0}, node_id="h", is_head=True)
    gpu = Node({"CPU": 8.0, "GPU": 8.0, "accelerator_type:H100": 1.0, "node:10.0.0.2": 1.0}, node_id="g")
    assert group_counts(groups, [head, gpu]) == [1, 1]
    assert len(addable_nodes(groups, [head, gpu])) == 3
    other = Node({"CPU": 8.0, "GPU": 8.0, "TPU": 4.0}, node_id="t")  # a resource the shape does not name
    assert group_counts(groups, [head, other]) == [1, 0]
