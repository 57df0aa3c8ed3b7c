"""Searching the trial's own scale: ``scaling.num_workers`` and per-worker amounts as choice/grid.

Pure tests first (the spec's validation, the trial space, the planner and its words, what each
trial reserved and cost, on folders written by tests/fake_experiment.py), then one small Ray
search in which every trial runs with its own worker count.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_experiment import T0, FakeTrial, spec_dict, write_experiment
from fake_tune import FakeTrial as TuneTrial

from hpsearch.analysis import cost_table, load_results
from hpsearch.cli import main
from hpsearch.errors import PlanError, ResultsError, SpecError
from hpsearch.experiment import files
from hpsearch.planning.cluster_shape import parse_cluster
from hpsearch.planning.for_spec import demand_for, plan_for
from hpsearch.planning.planner import plan_trials
from hpsearch.planning.render import render_plan
from hpsearch.spec import Scaling, load_spec, total_trials, varying_params

REPO = Path(__file__).resolve().parents[3]
LOOPS = Path(__file__).resolve().parents[2] / "scaling_loops.py"
SHIPPED = REPO / "search_spaces" / "digits_scaling.yaml"
INF = float("inf")


def choice(*values: Any) -> dict[str, Any]:
    return {"type": "choice", "values": list(values)}


def grid(*values: Any) -> dict[str, Any]:
    return {"type": "grid", "values": list(values)}


def raw_spec(scaling: dict[str, Any], **changes: Any) -> dict[str, Any]:
    spec = {
        "name": "scale",
        "trainable": "hpsearch.examples.digits:train_loop",
        "metric": "val_loss",
        "mode": "min",
        "search_space": {"lr": choice(0.01, 0.1)},
        "searcher": {"type": "random"},
        "scaling": scaling,
        "resources": {"driver_cpus": 0.25},
    }
    spec.update(changes)
    return spec


#: The issue's example: 1, 2 or 4 workers of one CPU and half or a whole GPU.
ISSUE = {
    "num_workers": choice(1, 2, 4),
    "use_gpu": True,
    "resources_per_worker": {"CPU": 1, "GPU": choice(0.5, 1)},
}


def spec_of(scaling: dict[str, Any], **changes: Any):
    return load_spec(raw_spec(scaling, **changes), check_trainable=False)


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_spec(raw, check_trainable=False)
    return [f"{p.path}: {p.message}" for p in err.value.problems]


# ----------------------------------------------------------------------------- validation

ONLY_FINITE = (
    "the planner places every value a trial may get before the search starts, so it needs a finite list of them"
)

# fmt: off
BAD = [
    ("workers-zero",        {"num_workers": choice(1, 2, 0)},
     "scaling.num_workers.values[2]: must be at least 1 (Ray Train runs at least one worker), got 0"),
    ("workers-negative",    {"num_workers": grid(-1, 2)},
     "scaling.num_workers.values[0]: must be at least 1 (Ray Train runs at least one worker), got -1"),
    ("workers-fraction",    {"num_workers": choice(1, 1.5)},
     "scaling.num_workers.values[1]: must be a whole number of workers, got 1.5"),
    ("workers-bool",        {"num_workers": choice(True, 2)},
     "scaling.num_workers.values[0]: must be a whole number of workers, got True"),
    ("workers-string",      {"num_workers": choice("2")},
     "scaling.num_workers.values[0]: must be a whole number of workers, got '2'"),
    ("workers-int-range",   {"num_workers": {"type": "int", "low": 1, "high": 4}},
     f"scaling.num_workers.type: a scaling value can be searched with type choice or grid only, got 'int': {ONLY_FINITE}"),
    ("workers-float",       {"num_workers": {"type": "float", "low": 1, "high": 4}},
     f"scaling.num_workers.type: a scaling value can be searched with type choice or grid only, got 'float': {ONLY_FINITE}"),
    ("workers-no-values",   {"num_workers": {"type": "choice"}},
     "scaling.num_workers.values: required key is missing"),
    ("workers-empty",       {"num_workers": choice()},
     "scaling.num_workers.values: must have at least 1 value, got []"),
    ("workers-extra-key",   {"num_workers": {"type": "grid", "values": [1], "low": 1}},
     "scaling.num_workers.low: unknown key (allowed: values, when)"),
    ("workers-conditional", {"num_workers": {"type": "choice", "values": [1, 2], "when": {"lr": [0.1]}}},
     "scaling.num_workers.when: a scaling value cannot be conditional: every trial runs some number of workers"),
    ("constant-zero",       {"num_workers": 0},
     "scaling.num_workers: must be greater than 0, got 0"),
    ("cpu-negative",        {"resources_per_worker": {"CPU": choice(1, -1)}},
     "scaling.resources_per_worker.CPU.values[1]: must be >= 0, got -1"),
    ("cpu-inf",             {"resources_per_worker": {"CPU": choice(1, INF)}},
     "scaling.resources_per_worker.CPU.values[1]: must be a finite number, got inf"),
    ("cpu-string",          {"resources_per_worker": {"CPU": grid("1")}},
     "scaling.resources_per_worker.CPU.values[0]: must be a number, got '1'"),
    ("cpu-float-range",     {"resources_per_worker": {"CPU": {"type": "float", "low": 0.5, "high": 1}}},
     f"scaling.resources_per_worker.CPU.type: a scaling value can be searched with type choice or grid only, got 'float': {ONLY_FINITE}"),
    ("gpu-one-and-a-half",  {"use_gpu": True, "resources_per_worker": {"CPU": 1, "GPU": choice(0.5, 1.5)}},
     "scaling.resources_per_worker.GPU.values[1]: must be a fraction of one GPU or a whole number of GPUs, got 1.5"),
    ("gpu-without-use-gpu", {"resources_per_worker": {"CPU": 1, "GPU": choice(0, 1)}},
     "scaling.use_gpu: must be true when resources_per_worker asks for GPU"),
    ("nothing-asked",       {"resources_per_worker": {"CPU": choice(0, 1)}},
     "scaling.resources_per_worker: must ask for some resource in every combination of the searched values, "
     "but a trial could get {'CPU': 0} (nothing)"),
]
# fmt: on


@pytest.mark.parametrize(("scaling", "expected"), [pytest.param(s, e, id=i) for i, s, e in BAD])
def test_each_bad_scaling_value_is_one_problem_with_its_yaml_path(scaling: dict, expected: str) -> None:
    assert problems_of(raw_spec(scaling)) == [expected]


def test_a_search_space_key_named_scaling_clashes_with_searched_scaling() -> None:
    raw = raw_spec({"num_workers": choice(1, 2)}, search_space={"lr": 0.1, "scaling": {"factor": choice(1, 2)}})
    assert problems_of(raw) == [
        "search_space.scaling: clashes with the searched scaling values: the trial's config holds "
        "scaling.num_workers under 'scaling'; rename this parameter"
    ]
    # without searched scaling the name is the user's
    spec = spec_of({"num_workers": 2}, search_space={"scaling": {"factor": choice(1, 2)}})
    assert spec.trial_space() == spec.search_space


def test_a_scaling_grid_needs_a_searcher_that_takes_grids() -> None:
    raw = raw_spec({"num_workers": grid(1, 2)}, searcher={"type": "optuna"})
    [problem] = problems_of(raw)
    assert problem.startswith("scaling.num_workers: grid values need searcher ")
    assert "searcher 'optuna' cannot take them (use type: choice)" in problem


def test_the_exit_code_of_a_bad_scaling_value_is_2_and_nothing_is_written(tmp_path: Path, capsys) -> None:
    path = tmp_path / "spec.yaml"
    raw = raw_spec({"num_workers": choice(1, 0)}, storage_path=str(tmp_path / "out"))
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "scaling.num_workers.values[1]: must be at least 1 (Ray Train runs at least one worker), got 0" in err
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- the trial space


def test_searched_scaling_joins_the_trial_space_under_scaling() -> None:
    spec = spec_of(ISSUE)
    space = spec.trial_space()
    assert set(space) == {"lr", "scaling"}
    assert space["lr"] is spec.search_space["lr"]
    assert space["scaling"]["num_workers"].values == [1, 2, 4]
    assert space["scaling"]["resources_per_worker"]["GPU"].values == [0.5, 1]
    assert "CPU" not in space["scaling"]["resources_per_worker"]  # constants stay in the spec, not the config
    assert varying_params(spec) == ["lr", "scaling.num_workers", "scaling.resources_per_worker.GPU"]


def test_constant_scaling_adds_nothing_to_the_trial_space() -> None:
    spec = spec_of({"num_workers": 2, "resources_per_worker": {"CPU": 0.45}})
    assert spec.trial_space() is spec.search_space
    assert spec.to_dict()["scaling"] == {
        "num_workers": 2,
        "use_gpu": False,
        "resources_per_worker": {"CPU": 0.45},
        "placement_strategy": "PACK",
    }


def test_a_scaling_grid_multiplies_the_trials_and_reaches_tune_as_a_grid() -> None:
    pytest.importorskip("ray.tune")
    from hpsearch.runtime.search.tune_space import to_tune

    spec = spec_of({"num_workers": grid(1, 2), "resources_per_worker": {"CPU": 0.45}}, num_samples=3)
    assert total_trials(spec) == 6
    assert to_tune(spec.trial_space())["scaling"] == {"num_workers": {"grid_search": [1, 2]}}


def test_the_searched_scaling_round_trips_through_the_spec_as_run() -> None:
    spec = spec_of(ISSUE)
    dumped = spec.to_dict()["scaling"]
    assert dumped["num_workers"] == {"type": "choice", "values": [1, 2, 4]}
    assert dumped["resources_per_worker"] == {"CPU": 1.0, "GPU": {"type": "choice", "values": [0.5, 1]}}
    again = load_spec(yaml.safe_load(yaml.safe_dump(spec.to_dict())), check_trainable=False)
    assert again.scaling == spec.scaling


def test_each_trial_gets_its_own_constant_scaling_from_its_config() -> None:
    scaling = spec_of(ISSUE).scaling
    own = scaling.for_trial({"lr": 0.1, "scaling": {"num_workers": 2, "resources_per_worker": {"GPU": 0.5}}})
    assert (own.workers, own.worker_bundle(), own.use_gpu) == (2, {"CPU": 1.0, "GPU": 0.5}, True)
    assert not own.searched()
    largest = scaling.largest()
    assert (largest.workers, largest.worker_bundle()) == (4, {"CPU": 1.0, "GPU": 1.0})
    assert len(scaling.combinations()) == 6
    with pytest.raises(ValueError, match=r"scaling.num_workers=None, not one of the searched \[1, 2, 4\]"):
        scaling.for_trial({"lr": 0.1})
    with pytest.raises(ValueError, match=r"scaling.num_workers=3"):
        scaling.for_trial({"scaling": {"num_workers": 3, "resources_per_worker": {"GPU": 1}}})


def test_a_searched_gpu_of_zero_asks_ray_for_no_gpu() -> None:
    """Ray gives a ``use_gpu`` worker one GPU unless told a non-zero amount: a GPU-0 trial must not use_gpu."""
    scaling = Scaling.model_validate(
        {"num_workers": 1, "use_gpu": True, "resources_per_worker": {"CPU": 1, "GPU": choice(0, 1)}}
    )
    cpu_only = scaling.for_trial({"scaling": {"resources_per_worker": {"GPU": 0}}})
    assert (cpu_only.use_gpu, cpu_only.worker_bundle()) == (False, {"CPU": 1.0})
    gpu = scaling.for_trial({"scaling": {"resources_per_worker": {"GPU": 1}}})
    assert (gpu.use_gpu, gpu.worker_bundle()) == (True, {"CPU": 1.0, "GPU": 1.0})


# ----------------------------------------------------------------------------- the planner


def test_the_plan_is_for_the_largest_trial_and_says_so() -> None:
    spec = spec_of(ISSUE)
    nodes = parse_cluster("2x{CPU: 16, GPU: 4}")
    plan = plan_for(spec, nodes)
    assert (plan.demand.num_workers, dict(plan.demand.worker)) == (4, {"CPU": 1.0, "GPU": 1.0})
    # exactly as many at once as trials of the largest combination alone: it holds every other trial
    largest = plan_trials(nodes, demand_for(spec, {"scaling": {"num_workers": 4, "resources_per_worker": {"GPU": 1}}}))
    assert plan.max_concurrent_trials == largest.max_concurrent_trials == 2
    note = "planned for the largest trial: 4 workers x {CPU: 1, GPU: 1}; smaller trials leave room unused"
    assert plan.planned_for == note
    text = render_plan(plan, title="Plan")
    assert "  searched        scaling.num_workers [1, 2, 4]; scaling.resources_per_worker.GPU [0.5, 1]\n" in text
    assert f"                  {note}\n" in text
    as_json = json.loads(json.dumps(plan.as_dict()))
    assert as_json["planned_for"] == note
    assert as_json["searched_scaling"] == {
        "scaling.num_workers": [1, 2, 4],
        "scaling.resources_per_worker.GPU": [0.5, 1],
    }


def test_a_constant_plan_reads_as_before() -> None:
    plan = plan_for(spec_of({"num_workers": 2, "resources_per_worker": {"CPU": 0.45}}), parse_cluster("1x{CPU: 2}"))
    assert plan.planned_for is None
    assert "searched_scaling" not in plan.as_dict() and "planned_for" not in plan.as_dict()
    assert "searched" not in render_plan(plan, title="Plan")


def test_a_value_that_can_never_be_placed_refuses_the_spec_naming_it() -> None:
    spec = spec_of({**ISSUE, "num_workers": choice(1, 2, 16), "placement_strategy": "STRICT_PACK"})
    with pytest.raises(PlanError) as err:
        plan_for(spec, parse_cluster("2x{CPU: 16, GPU: 4}"))
    assert str(err.value) == (
        "scaling.num_workers: 16 can never be placed on this cluster: a trial of 16 workers x {CPU: 1, GPU: 0.5} "
        "(the other searched values at their smallest): STRICT_PACK puts all 16 workers of "
        "{CPU: 1, GPU: 0.5, memory: 0.7 GiB} on one node, but the node with the most room holds 8; "
        "remove 16 from scaling.num_workers.values"
    )


def test_every_unplaceable_value_is_named() -> None:
    spec = spec_of(
        {"num_workers": choice(1, 8), "use_gpu": True, "resources_per_worker": {"CPU": choice(1, 32), "GPU": 1}}
    )
    with pytest.raises(PlanError) as err:
        plan_for(spec, parse_cluster("1x{CPU: 16, GPU: 4}"))
    lines = str(err.value).splitlines()
    assert lines[0] == "some searched scaling values can never be placed:"
    assert [line.split(" can never")[0] for line in lines[1:]] == [
        "  - scaling.num_workers: 8",
        "  - scaling.resources_per_worker.CPU: 32",
    ]
    assert lines[1].endswith("remove 8 from scaling.num_workers.values")


def test_values_that_fit_alone_but_not_together_refuse_the_largest_combination() -> None:
    spec = spec_of({**ISSUE, "num_workers": choice(1, 8)})  # 8 x half a GPU fits on 4 GPUs; 8 x one GPU never
    with pytest.raises(PlanError, match=r"^the largest trial of the searched scaling \(scaling.num_workers: 8, "):
        plan_for(spec, parse_cluster("1x{CPU: 16, GPU: 4}"))


def test_hpsearch_plan_prints_the_largest_trial_and_refuses_an_unplaceable_value(tmp_path: Path, capsys) -> None:
    assert main(["plan", str(SHIPPED), "--cluster", "1x{CPU: 2}"]) == 0
    out = capsys.readouterr().out
    assert "  searched        scaling.num_workers [1, 2]\n" in out
    assert "planned for the largest trial: 2 workers x {CPU: 0.45}; smaller trials leave room unused" in out
    assert "  trials at once  2 (of 4 in total)" in out
    assert main(["plan", str(SHIPPED), "--cluster", "1x{CPU: 2}", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["searched_scaling"] == {"scaling.num_workers": [1, 2]}
    assert main(["plan", str(SHIPPED), "--cluster", "1x{CPU: 0.9}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: scaling.num_workers: 2 can never be placed on this cluster: a trial of 2 workers")
    assert err.rstrip().endswith("remove 2 from scaling.num_workers.values")


# ----------------------------------------------------------------------------- what each trial reserved and cost


SEARCHED = {
    "num_workers": grid(1, 2),
    "use_gpu": False,
    "resources_per_worker": {"CPU": 0.45},
    "placement_strategy": "PACK",
}


def fake_spec(name: str) -> dict[str, Any]:
    """The fake experiments' spec with a num_workers grid (the random searcher takes grids)."""
    return spec_dict(name, scaling=SEARCHED, searcher={"type": "random", "seed": 0})


def trial_held(workers: int) -> dict[str, float]:
    return {"CPU": 0.1 + 0.45 * workers}


def test_the_recorder_records_each_trials_own_resources(tmp_path: Path) -> None:
    from hpsearch.runtime.search.outcomes import OutcomeRecorder

    exp = write_experiment(tmp_path / "exp", [], spec=fake_spec("exp"), summary=False)
    recorder = OutcomeRecorder(exp)
    one, two = (
        TuneTrial("t1", config={"scaling": {"num_workers": 1}}),
        TuneTrial("t2", config={"scaling": {"num_workers": 2}}),
    )
    for trial in (one, two):
        recorder.on_trial_start(0, [], trial)
        recorder.on_trial_complete(0, [], trial)
    usage = files.read_usage(exp)
    assert usage.trials["t1"][0].resources == pytest.approx(trial_held(1))
    assert usage.trials["t2"][0].resources == pytest.approx(trial_held(2))


def scaled_experiment(tmp_path: Path) -> Path:
    """Four trials of a num_workers grid: two of 1 worker, two of 2; each report 0.5 s, start-up 20 s."""
    trials = [
        FakeTrial("aaaa0001", {"lr": 0.1, "scaling": {"num_workers": 1}}, [0.9, 0.5, 0.4], resources=trial_held(1)),
        FakeTrial("aaaa0002", {"lr": 0.1, "scaling": {"num_workers": 2}}, [0.8, 0.3, 0.2], resources=trial_held(2)),
        FakeTrial(
            "aaaa0003",
            {"lr": 0.01, "scaling": {"num_workers": 1}},
            [0.7, 0.6],
            status="stopped",
            resources=trial_held(1),
        ),
        FakeTrial(
            "aaaa0004", {"lr": 0.01, "scaling": {"num_workers": 2}}, [0.9], status="errored", resources=trial_held(2)
        ),
    ]
    return write_experiment(tmp_path / "scaled", trials, spec=fake_spec("scaled"), usage=True)


def test_load_results_shows_what_each_trial_reserved_and_its_resource_hours(tmp_path: Path) -> None:
    results = load_results(scaled_experiment(tmp_path))
    trials = results.trials.set_index("trial_id")
    assert list(trials["scaling.num_workers"]) == [1, 2, 1, 2]
    assert list(trials["reserved.workers"]) == [1, 2, 1, 2]
    assert list(trials["reserved.worker.CPU"]) == [0.45] * 4
    # resource-hours are each trial's own resources times its driver time
    for trial_id, row in trials.iterrows():
        expected = trial_held(int(row["reserved.workers"]))["CPU"] * row["driver_time_s"] / 3600
        assert row["resource_hours.CPU"] == pytest.approx(expected), trial_id
    assert results.params == ["lr", "hidden", "layers", "dropout", "scaling.num_workers"]  # searched like any
    assert results.space["scaling.num_workers"].values == [1, 2]


def test_the_cost_table_ranks_trials_by_gain_per_resource_hour(tmp_path: Path) -> None:
    results = load_results(scaled_experiment(tmp_path))
    table = cost_table(results, "CPU")
    assert list(table.columns) == [
        "trial_id", "status", "workers", "worker.CPU", "resource_hours", "best", "best_iteration", "gain",
        "gain_per_hour", "cost_rank",
    ]  # fmt: skip
    by_id = table.set_index("trial_id")
    assert table.attrs["baseline"] == 0.6  # the worst best value of the scored trials: aaaa0003 gains nothing
    assert by_id.loc["aaaa0003", "gain"] == pytest.approx(0.0)
    assert by_id.loc["aaaa0002", "gain"] == pytest.approx(0.4)  # lower is better: 0.6 - 0.2
    assert by_id.loc["aaaa0001", "gain_per_hour"] == pytest.approx(0.2 / by_id.loc["aaaa0001", "resource_hours"])
    assert math.isnan(by_id.loc["aaaa0004", "gain"])  # errored: it bought nothing, ranked last
    assert list(table["trial_id"]) == sorted(table["trial_id"][:3], key=lambda t: -by_id.loc[t, "gain_per_hour"]) + [
        "aaaa0004"
    ]
    assert list(table["cost_rank"].astype("float").fillna(0)) == [1, 2, 3, 0]
    assert list(by_id.loc[["aaaa0001", "aaaa0002", "aaaa0003", "aaaa0004"], "workers"]) == [1, 2, 1, 2]


def test_the_cost_table_with_a_target_says_the_resource_hours_to_reach_it(tmp_path: Path) -> None:
    results = load_results(scaled_experiment(tmp_path))
    table = cost_table(results, "CPU", target=0.45, baseline=2.3)
    by_id = table.set_index("trial_id")
    assert table.attrs["baseline"] == 2.3
    assert by_id.loc["aaaa0002", "gain"] == pytest.approx(2.1)
    # aaaa0002 reached 0.45 at its second report, aaaa0001 at its third; aaaa0003 never did
    history = results.history.set_index(["trial_id", "iteration"])
    rows = results.trials.set_index("trial_id")
    for trial_id, epoch in (("aaaa0002", 2), ("aaaa0001", 3)):
        rate = rows.loc[trial_id, "resource_hours.CPU"] / rows.loc[trial_id, "driver_time_s"]
        assert by_id.loc[trial_id, "hours_to_target"] == pytest.approx(
            rate * history.loc[(trial_id, epoch), "wall_time_s"]
        )
    assert math.isnan(by_id.loc["aaaa0003", "hours_to_target"])
    assert list(table["trial_id"][:2]) == sorted(
        ["aaaa0001", "aaaa0002"], key=lambda t: by_id.loc[t, "hours_to_target"]
    )


def test_the_cost_table_of_constant_scaling_reads_the_spec_and_refuses_an_unheld_resource(tmp_path: Path) -> None:
    trials = [FakeTrial("aaaa0001", {"lr": 0.1}, [0.5, 0.4]), FakeTrial("aaaa0002", {"lr": 0.2}, [0.6])]
    results = load_results(write_experiment(tmp_path / "const", trials, usage=True))
    assert "reserved.workers" not in results.trials  # constant scaling: the trials table reads as before
    table = cost_table(results)
    assert list(table["workers"]) == [2, 2] and list(table["worker.CPU"]) == [0.45, 0.45]
    with pytest.raises(ResultsError, match=r"no trial of const held resource 'GPU' \(held: CPU\)"):
        cost_table(results, "GPU")


def test_the_shipped_scaling_spec_is_valid_and_searches_num_workers() -> None:
    spec = load_spec(SHIPPED)
    assert spec.trial_space()["scaling"]["num_workers"].values == [1, 2]
    assert spec.scaling.worker_bundle() == {"CPU": 0.45} and not spec.scaling.use_gpu
    assert T0 > 0  # the fake folders' clock, imported with them


# ----------------------------------------------------------------------------- one small Ray search


@pytest.mark.ray
@pytest.mark.timeout(300)
@pytest.mark.full
def test_each_trial_runs_with_its_own_worker_count(ray_cluster, tmp_path: Path, capsys) -> None:
    path = tmp_path / "scale.yaml"
    spec = {
        "name": "scale",
        "trainable": f"{LOOPS}:world_size",
        "metric": "loss",
        "mode": "min",
        "search_space": {"epochs": 1},
        "searcher": {"type": "random"},
        "scaling": {"num_workers": grid(1, 2), "resources_per_worker": {"CPU": 0.45}},
        "resources": {"driver_cpus": 0.1},
        "storage_path": str(tmp_path),
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    code = main(["run", str(path)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "each trial = up to 2 worker(s) of {CPU: 0.45}" in out.out + out.err
    results = load_results(tmp_path / "scale")
    trials = results.trials.sort_values("scaling.num_workers")
    assert list(trials["status"]) == ["finished", "finished"]
    assert list(trials["scaling.num_workers"]) == [1, 2]
    assert list(trials["reserved.workers"]) == [1, 2]
    history = results.history.set_index("trial_id")
    for _, row in trials.iterrows():
        reported = history.loc[[row["trial_id"]]]
        assert list(reported["world_size"]) == [row["scaling.num_workers"]]  # the worker group it really ran
        assert list(reported["config_workers"]) == [row["scaling.num_workers"]]  # the loop sees its config
        held = 0.1 + 0.45 * row["scaling.num_workers"]
        assert row["resource_hours.CPU"] == pytest.approx(held * row["driver_time_s"] / 3600)
    assert json.loads((tmp_path / "scale" / "hpsearch_plan.json").read_text())["planned_for"].startswith(
        "planned for the largest trial: 2 workers x {CPU: 0.45}"
    )
    table = cost_table(results)
    assert sorted(table["workers"]) == [1, 2]
