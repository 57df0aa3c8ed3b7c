"""One trial's total resources has one owner, ``TrialDemand.total``: the plan, the budget's resource-hours and
the estimate read it there, so the three views cannot drift apart. Pure: Ray is imported, never started."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpsearch.planning.cluster_shape import nodes_at, parse_node_groups
from hpsearch.planning.estimate import trial_resources as estimate_resources
from hpsearch.planning.for_spec import demand_for, plan_for
from hpsearch.planning.resources import GB
from hpsearch.runtime.search.budget import trial_resources as budget_resources
from hpsearch.spec import Spec, load_spec

QUICK = Path(__file__).resolve().parents[2] / "search_spaces" / "digits_quick.yaml"
#: A driver, GPU workers with a custom resource, and memory estimates on both.
MIXED = (
    "resources.driver_cpus=0.25",
    "resources.driver_memory_gb=1.5",
    "resources.worker_memory_gb=0.75",
    "scaling.use_gpu=true",
    "scaling.resources_per_worker={CPU: 1, GPU: 0.5, accel: 2}",
)
CLUSTER = "1x{CPU: 8, memory: 16} + 2x{CPU: 8, GPU: 4, accel: 16, memory: 64}"


def spec(*overrides: str) -> Spec:
    return load_spec(QUICK, overrides=(*MIXED, *overrides), check_trainable=False)


def test_the_budget_and_the_estimate_count_a_trial_as_the_planner_does() -> None:
    """2 workers x {CPU: 1, GPU: 0.5, accel: 2} + a 0.25-CPU driver; memory only in the plan's count."""
    s = spec()
    plan = plan_for(s, nodes_at(parse_node_groups(CLUSTER), "max"))
    ray_bundles = {"CPU": 2.25, "GPU": 1.0, "accel": 4.0}
    assert plan.demand.total(memory_estimates=False) == ray_bundles
    assert budget_resources(s) == ray_bundles
    assert estimate_resources(plan) == ray_bundles
    assert plan.per_trial == plan.demand.total() == {**ray_bundles, "memory": (1.5 + 2 * 0.75) * GB}


LARGEST = {"CPU": 3.25, "GPU": 1.5, "accel": 6.0}


@pytest.mark.parametrize(("workers", "expected"), [(1, {"CPU": 1.25, "GPU": 0.5, "accel": 2.0}), (3, LARGEST)])
def test_a_searched_trial_is_counted_alike_by_its_own_config(workers: int, expected: dict[str, float]) -> None:
    """With searched workers, the budget sizes each trial by its config, the plan by the largest trial."""
    s = spec("scaling.num_workers={type: choice, values: [1, 3]}")
    config = {"scaling": {"num_workers": workers}}
    assert budget_resources(s, config) == demand_for(s, config).total(memory_estimates=False) == expected
    largest = plan_for(s, nodes_at(parse_node_groups(CLUSTER), "max"))
    assert estimate_resources(largest) == budget_resources(s) == LARGEST
