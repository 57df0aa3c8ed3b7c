"""Elastic trials: ``scaling.num_workers: {min: 2, max: 8}``, Ray Train's ``ScalingConfig(num_workers=(2, 8))``.

Pure tests: the spec key and every refusal (one line, its YAML path, the value, what is allowed),
the planner (planned at the minimum; what the maximum takes; what each trial at once starts with
as Ray 2.58-2.60 shares the room), the arguments the trial driver gives Ray (checked against Ray's
own ScalingConfig, no cluster), the room the drivers tell Ray's coordinator they hold, and
``load_results``' ``workers`` table on folders written by the real writers. A trial that grows when
a host joins runs in tests/end_to_end/test_multihost.py (hosts of their own, root only).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from fake_experiment import T0, FakeTrial, spec_dict, write_experiment

from hpsearch.analysis import WORKER_COLUMNS, load_results
from hpsearch.cli import main
from hpsearch.errors import SpecError
from hpsearch.experiment import files
from hpsearch.experiment.layout import TRAIN_RUNS_DIR, WORKER_GROUP_FILE
from hpsearch.planning.cluster_shape import parse_cluster
from hpsearch.planning.for_spec import demand_for, plan_for
from hpsearch.planning.planner import HEAD_RESOURCE, HEAD_SLIVER, Node, TrialDemand, elastic_starts
from hpsearch.planning.render import render_plan
from hpsearch.spec import ElasticWorkers, load_spec


def raw_spec(scaling: dict[str, Any], **changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "elastic",
        "trainable": "hpsearch.examples.digits:train_loop",
        "metric": "val_loss",
        "mode": "min",
        "num_samples": 8,
        "search_space": {"lr": {"type": "choice", "values": [0.01, 0.1]}},
        "scaling": scaling,
        "resources": {"driver_cpus": 0.25},
    }
    spec.update(changes)
    return spec


ELASTIC = {"num_workers": {"min": 2, "max": 8}, "resources_per_worker": {"CPU": 1}}


def spec_of(scaling: dict[str, Any] = ELASTIC, **changes: Any):
    return load_spec(raw_spec(scaling, **changes), check_trainable=False)


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_spec(raw, check_trainable=False)
    return [f"{p.path}: {p.message}" for p in err.value.problems]


# ----------------------------------------------------------------------------- the spec key


def test_min_and_max_make_an_elastic_trial_planned_at_its_minimum() -> None:
    scaling = spec_of().scaling
    assert scaling.elastic == ElasticWorkers(min=2, max=8)
    assert (scaling.planned_workers, scaling.workers) == (2, 8)  # the planner's count; the most it runs
    assert not scaling.searched()  # not a searched value: every trial is elastic the same way
    assert [s.num_workers for s in scaling.combinations()] == [2, 3, 4, 5, 6, 7, 8]  # every size it can run
    assert scaling.for_trial({"lr": 0.1}) == scaling
    assert str(scaling.num_workers) == "2..8"  # how the run's banner writes it


def test_an_elastic_spec_is_written_as_run_and_reads_back_the_same(tmp_path: Path) -> None:
    spec = spec_of({**ELASTIC, "resize_interval_s": 5})
    dumped = spec.to_dict()["scaling"]
    assert dumped["num_workers"] == {"min": 2, "max": 8} and dumped["resize_interval_s"] == 5.0
    again = load_spec(spec.to_dict(), check_trainable=False)
    assert again.scaling == spec.scaling
    assert "resize_interval_s" not in spec_of({"num_workers": 2}).to_dict()["scaling"]  # only when set


def test_an_override_makes_a_trial_elastic() -> None:
    raw = raw_spec({"num_workers": 2})
    spec = load_spec(raw, overrides=["scaling.num_workers={min: 1, max: 3}"], check_trainable=False)
    assert spec.scaling.elastic == ElasticWorkers(min=1, max=3)


def test_searched_per_worker_amounts_combine_with_an_elastic_number_of_workers() -> None:
    scaling = spec_of({"num_workers": {"min": 1, "max": 3}, "resources_per_worker": {"CPU": {"type": "choice", "values": [1, 2]}}}).scaling  # fmt: skip
    assert scaling.largest().elastic == ElasticWorkers(min=1, max=3)
    assert scaling.for_trial({"scaling": {"resources_per_worker": {"CPU": 1}}}).worker_bundle() == {"CPU": 1.0}
    assert len(scaling.combinations()) == 6  # 3 sizes x 2 amounts


STRICT_WHY = (
    "Ray sizes an elastic worker group by the workers that fit on all nodes together, so a group that must sit on "
    "one node (STRICT_PACK) or one worker per node (STRICT_SPREAD) can be sized beyond what that allows, and then "
    "never starts"
)
# fmt: off
BAD = [
    ("ray-tuple-form",  {"num_workers": [2, 8]},
     "scaling.num_workers: must be a whole number of workers, not a list: write {min: 2, max: 8} for an elastic trial "
     "(Ray's num_workers=(2, 8)), or {type: choice, values: [2, 8]} to search it, got [2, 8]"),
    ("min-zero",        {"num_workers": {"min": 0, "max": 2}},
     "scaling.num_workers.min: must be at least 1 (Ray Train runs at least one worker), got 0"),
    ("max-below-min",   {"num_workers": {"min": 4, "max": 2}},
     "scaling.num_workers.max: must be at least min (4), got 2"),
    ("max-missing",     {"num_workers": {"min": 2}},
     "scaling.num_workers.max: required key is missing"),
    ("fraction",        {"num_workers": {"min": 1.5, "max": 2}},
     "scaling.num_workers.min: must be a whole number of workers, got 1.5"),
    ("bool",            {"num_workers": {"min": 1, "max": True}},
     "scaling.num_workers.max: must be a whole number of workers, got True"),
    ("extra-key",       {"num_workers": {"min": 1, "max": 2, "step": 1}},
     "scaling.num_workers.step: unknown key (allowed: min, max)"),
    ("neither-form",    {"num_workers": {"low": 1, "high": 2}},
     "scaling.num_workers: must be a whole number, {min: N, max: M} (an elastic trial) or {type: choice|grid, "
     "values: [...]} (a searched number of workers), got {'low': 1, 'high': 2}"),
    ("interval-fixed",  {"num_workers": 2, "resize_interval_s": 5},
     "scaling.resize_interval_s: applies only to an elastic trial (num_workers: {min: N, max: M}), but num_workers "
     "is 2; remove it"),
    ("interval-zero",   {"num_workers": {"min": 1, "max": 2}, "resize_interval_s": 0},
     "scaling.resize_interval_s: must be greater than 0, got 0"),
    ("strict-pack",     {"num_workers": {"min": 1, "max": 2}, "placement_strategy": "STRICT_PACK"},
     f"scaling.placement_strategy: must be PACK or SPREAD for an elastic trial (num_workers: {{min, max}}), got "
     f"'STRICT_PACK': {STRICT_WHY}"),
    ("strict-spread",   {"num_workers": {"min": 1, "max": 2}, "placement_strategy": "STRICT_SPREAD"},
     f"scaling.placement_strategy: must be PACK or SPREAD for an elastic trial (num_workers: {{min, max}}), got "
     f"'STRICT_SPREAD': {STRICT_WHY}"),
    ("gpu-0.4",         {"num_workers": {"min": 1, "max": 4}, "use_gpu": True, "resources_per_worker": {"CPU": 1, "GPU": 0.4}},
     "scaling.resources_per_worker.GPU: must divide one GPU evenly for an elastic trial (0.5, 0.25, 0.2, ...), got "
     "0.4: Ray counts an elastic group's workers by dividing a node's GPUs by it (5 on 2 GPUs) but places them per "
     "GPU (4), and a group sized beyond what it can place never starts"),
]
# fmt: on


@pytest.mark.parametrize(("scaling", "expected"), [pytest.param(s, e, id=i) for i, s, e in BAD])
def test_each_bad_elastic_value_is_one_problem_with_its_yaml_path(scaling: dict, expected: str) -> None:
    assert problems_of(raw_spec(scaling)) == [expected]


def test_gpu_fractions_that_divide_a_gpu_are_elastic() -> None:
    for gpus in (0.5, 0.25, 0.2, 0.1, 1, 2):
        spec = spec_of({"num_workers": {"min": 1, "max": 4}, "use_gpu": True, "resources_per_worker": {"GPU": gpus}})
        assert spec.scaling.elastic is not None


def test_drivers_anywhere_are_refused_for_elastic_trials() -> None:
    raw = raw_spec(ELASTIC, resources={"driver_cpus": 0.25, "driver_node": "any"})
    assert problems_of(raw) == [
        "resources.driver_node: must be 'head' for an elastic trial (scaling.num_workers: {min: 2, max: 8}), got "
        "'any': Ray sizes an elastic worker group from each node's total resources, and hpsearch can keep its trial "
        "drivers' share out of that count only on the node it pins them to"
    ]


def test_validate_refuses_a_bad_elastic_key_before_ray_starts(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw_spec({"num_workers": {"min": 3, "max": 1}})))
    assert main(["validate", str(path)]) == 2
    assert "scaling.num_workers.max: must be at least min (3), got 1" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the planner


def test_the_plan_is_for_the_minimum_and_says_what_the_maximum_takes() -> None:
    spec = spec_of()
    plan = plan_for(spec, parse_cluster("1x{CPU: 16, memory: 64}"))
    assert plan.demand.num_workers == 2  # each trial needs its minimum to start
    assert plan.max_concurrent_trials == 7  # 7 x (0.25 + 2) CPUs of 16
    e = plan.elastic
    assert (e["min_workers"], e["max_workers"], e["resize_interval_s"]) == (2, 8, None)
    assert e["per_trial_at_max"]["CPU"] == 8.25
    assert e["trials_at_once_at_max"] == 1
    # Ray's coordinator: 16 CPUs less 7 drivers' 1.75 hold 14 workers; the earliest trial takes 8, the next 6,
    # the other 5 wait for room; with 2 trials at once (0.5 CPU of drivers) both start, with 8 and 7.
    assert e["start_workers"] == [8, 6, 0, 0, 0, 0, 0]
    assert e["all_start_at_once"] == 2
    assert plan.as_dict()["elastic"] == dict(e)
    assert "elastic" not in plan_for(spec_of({"num_workers": 2}), parse_cluster("1x{CPU: 16}")).as_dict()


def test_hpsearch_plan_prints_the_elastic_lines() -> None:
    plan = plan_for(spec_of({**ELASTIC, "resize_interval_s": 10}), parse_cluster("1x{CPU: 16, memory: 64}"))
    text = render_plan(plan, title="Plan", total_trials=8)
    assert (
        "  trials at once  7 (of 8 in total)\n"
        "  elastic         2 to 8 workers per trial (scaling.num_workers), planned at the minimum (2)\n"
        "                  at the maximum a trial = {CPU: 8.25, memory: 6.6 GiB}; trials at once at the maximum: 1\n"
        "                  Ray gives room to the earliest trial first: the trials at once start with 8 + 6 workers; "
        "5 of them wait for an earlier trial to end\n"
        "                  (resources.max_concurrent_trials: 2 starts every trial at once)\n"
        "                  a running trial grows when room appears, checked every 10 s; each resize restarts its "
        "workers from the latest checkpoint\n"
    ) in text


def test_a_maximum_no_cluster_holds_is_said_not_refused() -> None:
    plan = plan_for(spec_of(), parse_cluster("1x{CPU: 4}"))
    assert plan.max_concurrent_trials == 1
    assert plan.elastic["trials_at_once_at_max"] == 0
    assert "which no node or set of nodes can hold" in plan.elastic["at_max_reason"]
    assert plan.elastic["start_workers"] == [3]  # 4 CPUs less the driver's 0.25: 3 workers, not 8
    assert "no trial of 8 workers fits: " in render_plan(plan, title="Plan")


def test_gpu_workers_are_counted_on_gpu_nodes_and_the_data_reserve_is_left_out() -> None:
    """A CPU head holds the drivers and the data reserve; each GPU node holds 4 one-GPU workers."""
    nodes = [
        Node({"CPU": 8}, "head", is_head=True),
        Node({"CPU": 16, "GPU": 4}, "g1"),
        Node({"CPU": 16, "GPU": 4}, "g2"),
    ]
    worker = TrialDemand({"CPU": 0.25}, {"CPU": 2, "GPU": 1}, num_workers=1)
    assert elastic_starts(nodes, worker, trials=3, minimum=1, maximum=4) == [4, 4, 0]
    assert elastic_starts(nodes, worker, trials=3, minimum=1, maximum=3) == [3, 3, 2]
    cpu_only = TrialDemand({"CPU": 0.5}, {"CPU": 1}, num_workers=1)
    one_node = [Node({"CPU": 4}, "head", is_head=True)]
    assert elastic_starts(one_node, cpu_only, trials=2, minimum=1, maximum=8) == [3, 0]  # 4 - 2 x 0.5
    assert elastic_starts(one_node, cpu_only, trials=2, minimum=1, maximum=8, reserve={"CPU": 1}) == [2, 0]
    assert elastic_starts(one_node, cpu_only, trials=2, minimum=2, maximum=2) == [2, 0]  # 1 left: below its minimum


def test_an_autoscaling_plan_says_it_at_both_sizes() -> None:
    spec = spec_of()
    assert demand_for(spec).num_workers == 2
    big = plan_for(spec, parse_cluster("1x{CPU: 4} + 3x{CPU: 8}"))
    assert big.elastic["trials_at_once_at_max"] == 3
    assert big.elastic["start_workers"][:3] == [8, 8, 8]


# ----------------------------------------------------------------------------- what the driver gives Ray


def test_the_driver_gives_ray_an_elastic_scaling_config_that_ray_accepts() -> None:
    from ray.train.v2.api.config import ScalingConfig  # lazy: Ray loads only in this test

    from hpsearch.runtime.trial.driver import scaling_config_kwargs

    kwargs = scaling_config_kwargs(spec_of({**ELASTIC, "resize_interval_s": 3}).scaling)
    assert kwargs["num_workers"] == (2, 8) and kwargs["elastic_resize_monitor_interval_s"] == 3.0
    config = ScalingConfig(**kwargs)
    assert config.elasticity_enabled and (config.min_workers, config.max_workers) == (2, 8)
    assert config.elastic_resize_monitor_interval_s == 3.0
    fixed = scaling_config_kwargs(spec_of({"num_workers": 2}).scaling)
    assert fixed["num_workers"] == 2 and "elastic_resize_monitor_interval_s" not in fixed
    assert not ScalingConfig(**fixed).elasticity_enabled
    default = scaling_config_kwargs(spec_of().scaling)
    assert "elastic_resize_monitor_interval_s" not in default  # Ray's own 60 s


def test_the_drivers_tell_rays_coordinator_every_planned_driver_and_the_data_reserve() -> None:
    from hpsearch.runtime.trial.driver import driver_room

    bundle = {"CPU": 0.25, HEAD_RESOURCE: HEAD_SLIVER}
    assert driver_room({"max_concurrent_trials": 3}, [bundle]) == [bundle] * 3
    with_data = driver_room({"max_concurrent_trials": 2, "reserved": {"CPU": 1.0}}, [bundle])
    assert with_data == [bundle, bundle, {"CPU": 1.0, HEAD_RESOURCE: HEAD_SLIVER}]
    assert driver_room(None, [bundle]) == [bundle]  # a trainable run outside `hpsearch run`: its own driver


# ----------------------------------------------------------------------------- the workers over time


def _trials() -> list[FakeTrial]:
    return [
        FakeTrial("aaaa0_00000", {"lr": 0.01}, [0.9, 0.5, 0.4, 0.3]),
        FakeTrial("aaaa0_00001", {"lr": 0.1}, [0.8, 0.7], start=10),
    ]


def _elastic_experiment(tmp_path: Path) -> Path:
    scaling = {"num_workers": {"min": 1, "max": 2}, "resources_per_worker": {"CPU": 0.45}}
    exp = write_experiment(tmp_path / "elastic", _trials(), spec=spec_dict("elastic", scaling=scaling))
    first = exp / TRAIN_RUNS_DIR / "aaaa0_00000"
    # as rank 0 of each worker group writes them: a start with 1 worker on n2, a resize to 2 on n2 and n3
    files.write_worker_group(
        first, group_id="g1", run_name="aaaa0_00000", node_ids=["n2"], workers=1, started_at=T0 + 20
    )
    files.write_worker_group(
        first, group_id="g2", run_name="aaaa0_00000", node_ids=["n2", "n3"], workers=2, started_at=T0 + 45
    )
    second = exp / TRAIN_RUNS_DIR / "aaaa0_00001"
    files.write_worker_group(
        second, group_id="g3", run_name="aaaa0_00001", node_ids=["n3"], workers=1, started_at=T0 + 30
    )
    return exp


def test_load_results_shows_the_workers_each_trial_had_over_time(tmp_path: Path) -> None:
    results = load_results(_elastic_experiment(tmp_path))
    table = results.workers
    assert tuple(table.columns) == WORKER_COLUMNS
    assert list(table["trial_id"]) == ["aaaa0_00000", "aaaa0_00000", "aaaa0_00001"]
    assert list(table["workers"]) == [1, 2, 1] and list(table["nodes"]) == [1, 2, 1]
    assert list(table["node_ids"]) == [("n2",), ("n2", "n3"), ("n3",)]
    assert list(table["started_at"]) == [pd.Timestamp(T0 + s, unit="s", tz="UTC") for s in (20, 45, 30)]
    assert str(table["workers"].dtype) == "Int64"
    assert list(results.select(["aaaa0_00001"]).workers["workers"]) == [1]


def test_the_latest_worker_group_stays_what_the_reaper_and_the_node_watch_read(tmp_path: Path) -> None:
    run = _elastic_experiment(tmp_path) / TRAIN_RUNS_DIR / "aaaa0_00000"
    record = files.read_worker_group(run)
    assert record is not None
    assert (record["group_id"], record["node_ids"]) == ("g2", ["n2", "n3"])
    # a write without a size (an older caller) keeps the starts recorded so far
    files.write_worker_group(run, group_id="g4", run_name="aaaa0_00000", node_ids=["n4"])
    assert [s["workers"] for s in files.read_worker_starts(run)] == [1, 2]
    assert files.read_worker_group(run)["group_id"] == "g4"  # type: ignore[index]


def test_a_folder_without_recorded_starts_has_an_empty_workers_table(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "old", _trials())
    run = exp / TRAIN_RUNS_DIR / "aaaa0_00000"
    files.write_worker_group(run, group_id="g1", run_name="aaaa0_00000", node_ids=["n1"])  # as before sizes were kept
    table = load_results(exp).workers
    assert table.empty and tuple(table.columns) == WORKER_COLUMNS
    (run / WORKER_GROUP_FILE).write_text('{"group_id": "g1", "starts": [{"workers": 2, "start', encoding="utf-8")
    assert load_results(exp).workers.empty  # a damaged record reads as none, never raises


def test_only_the_latest_starts_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "WORKER_STARTS_KEPT", 3)
    for n in range(1, 6):
        files.write_worker_group(
            tmp_path, group_id=f"g{n}", run_name="r", node_ids=["n1"], workers=n, started_at=T0 + n
        )
    starts = files.read_worker_starts(tmp_path)
    assert [s["workers"] for s in starts] == [3, 4, 5]
    assert json.loads((tmp_path / WORKER_GROUP_FILE).read_text())["group_id"] == "g5"
    assert not list(tmp_path.glob(".*.tmp"))  # replaced whole, nothing left beside it
    assert math.isclose(starts[-1]["started_at"], T0 + 5)
