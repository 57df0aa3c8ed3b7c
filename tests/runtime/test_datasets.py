"""Ray Data datasets fed to every trial: the spec's ``datasets`` and ``data``, the planner's reserve,
and two small searches on Ray (``once`` builds the data once; ``per_trial`` with Ray Data tasks in
every trial, 2 trials at once on 2 CPUs, finishes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpsearch.errors import PlanError, SpecError
from hpsearch.planning.for_spec import plan_for, reserve_for
from hpsearch.planning.planner import Node, TrialDemand, data_cpus_per_trial, plan_trials
from hpsearch.planning.render import render_plan
from hpsearch.spec import load_spec
from hpsearch.spec.datasets import factory_arity

HERE = Path(__file__).resolve().parents[1]
LOOPS = HERE / "data_loops.py"
REPO = HERE.parent


def _spec(tmp_path: Path, **changes) -> dict:
    spec = {
        "name": "data",
        "trainable": f"{LOOPS}:read_shards",
        "metric": "loss",
        "mode": "min",
        "num_samples": 2,
        "search_space": {"epochs": 2},
        "datasets": {"train": f"{LOOPS}:train_set", "val": f"{LOOPS}:val_set"},
        "scaling": {"num_workers": 2, "resources_per_worker": {"CPU": 0.2}},
        "resources": {"driver_cpus": 0.05, "driver_memory_gb": 0.5, "worker_memory_gb": 0.3},
        "aggregate": {"metrics": {"rows": "sum", "x_sum": "sum"}},
        "storage_path": str(tmp_path / "results"),
    }
    spec.update(changes)
    return spec


def _problems(spec: dict) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    return [str(p) for p in err.value.problems]


# ----------------------------------------------------------------------------- the spec


def test_a_spec_with_datasets_keeps_one_cpu_free_by_default(tmp_path):
    spec = load_spec(_spec(tmp_path))
    assert spec.datasets == {"train": f"{LOOPS}:train_set", "val": f"{LOOPS}:val_set"}
    assert spec.data.split == ["train"] and spec.data.materialize == "once"
    assert reserve_for(spec) == {"CPU": 1.0}
    assert spec.to_dict()["data"] == {"split": ["train"], "materialize": "once", "cpus": None}


def test_a_spec_without_datasets_keeps_nothing_free(tmp_path):
    spec = _spec(tmp_path)
    del spec["datasets"]
    assert reserve_for(load_spec(spec)) == {}


def test_a_file_reference_is_relative_to_the_spec(tmp_path):
    (tmp_path / "data.py").write_text("def train_set():\n    return None\n")
    path = tmp_path / "s.yaml"
    import yaml

    path.write_text(yaml.safe_dump(_spec(tmp_path, datasets={"train": "data.py:train_set"})))
    assert load_spec(path).datasets == {"train": f"{tmp_path / 'data.py'}:train_set"}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"datasets": {"train": f"{LOOPS}:nope"}},
            f"datasets.train: '{LOOPS}' has no attribute 'nope' (callables there: not_a_dataset, raises, "
            "read_shards, train_set, train_set_for, val_set)",
        ),
        (
            {"datasets": {"train": "no_such_module_xyz:f"}},
            "datasets.train: cannot import module 'no_such_module_xyz': ModuleNotFoundError: "
            "No module named 'no_such_module_xyz'",
        ),
        (
            {"datasets": {"train": "json:JSONDecoder"}},
            "datasets.train: 'json:JSONDecoder' is a class; a dataset factory is a function returning a ray.data.Dataset",
        ),
        (
            {"datasets": {"train": "os.path:join"}},
            None,  # join(a, *p) can be called with one argument: a per_trial-style factory, refused with once
        ),
        (
            {"datasets": {"train": f"{LOOPS}:train_set_for"}},
            "datasets.train: train_set_for(config) takes the trial's config, but data.materialize is 'once' "
            "(built once for every trial, it gets no config): give it no required argument, or set "
            "data.materialize: per_trial",
        ),
        (
            {"data": {"split": ["train", "test"]}},
            "data.split[1]: names no dataset: 'test' (datasets: train, val)",
        ),
        ({"data": {"split": ["train", "train"]}}, "data.split[1]: names 'train' twice"),
        (
            {"data": {"materialize": "always"}},
            "data.materialize: must be 'once' or 'per_trial', got 'always'",
        ),
        ({"data": {"cpus": -1}}, "data.cpus: must be greater than or equal to 0, got -1"),
        (
            {"datasets": None, "data": {"cpus": 2}},
            "data: has no effect without a datasets section (name the datasets to feed)",
        ),
        (
            {"datasets": {"train": 3}},
            "datasets.train: must be 'module:function' or 'path/to/file.py:function', got 3",
        ),
    ],
)
def test_bad_datasets_and_data_are_refused_with_their_yaml_path(tmp_path, changes, expected):
    spec = _spec(tmp_path, **changes)
    if spec.get("datasets") is None:
        spec.pop("datasets")
    problems = _problems(spec)
    if expected is None:
        assert problems[0].startswith("datasets.train: join(config) takes the trial's config"), problems
    else:
        assert problems == [expected]


def test_a_factory_taking_the_config_is_fine_per_trial(tmp_path):
    spec = load_spec(_spec(tmp_path, datasets={"train": f"{LOOPS}:train_set_for"}, data={"materialize": "per_trial"}))
    assert spec.data.materialize == "per_trial"


def _zero() -> None: ...


def _one(config) -> None: ...


def _optional(config=None) -> None: ...


def _two(a, b): ...


async def _async() -> None: ...


@pytest.mark.parametrize(("factory", "arity"), [(_zero, 0), (_one, 1), (_optional, 0), (lambda *a: None, 0)])
def test_a_factory_is_called_without_arguments_when_it_can_be(factory, arity):
    assert factory_arity(factory) == arity


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (_two, "'_two' must be called as factory() or factory(config), but its signature is _two(a, b)"),
        (_async, "'_async' is an async function; a dataset factory is a plain function returning a ray.data.Dataset"),
    ],
)
def test_a_factory_that_cannot_be_called_so_is_refused(factory, message):
    with pytest.raises(ValueError) as err:
        factory_arity(factory, factory.__name__)
    assert str(err.value) == message


# ----------------------------------------------------------------------------- the planner's reserve

DEMAND = TrialDemand(driver={"CPU": 0.05}, worker={"CPU": 0.2}, num_workers=2)


@pytest.mark.parametrize(
    ("nodes", "reserve", "at_once"),
    [
        ([Node({"CPU": 2}, is_head=True)], {}, 4),  # 0.45 a trial: 4 in 2 CPUs
        ([Node({"CPU": 2}, is_head=True)], {"CPU": 1}, 2),  # 1 CPU left
        ([Node({"CPU": 2}, is_head=True)], {"CPU": 1.1}, 2),  # 0.9 left: 2 x 0.45
        ([Node({"CPU": 2}, is_head=True)], {"CPU": 1.2}, 1),
        ([Node({"CPU": 2}, is_head=True)], {"CPU": 0}, 4),  # data.cpus: 0 keeps nothing free
        # Kept free on the head only: the worker node keeps all its CPUs; 0.5 left on the head holds 10 drivers.
        ([Node({"CPU": 1}, is_head=True), Node({"CPU": 4})], {"CPU": 0.5}, 10),
        ([Node({"CPU": 4}), Node({"CPU": 2}, is_head=True)], {}, 13),
        ([Node({"CPU": 4}), Node({"CPU": 2}, is_head=True)], {"CPU": 1}, 11),  # the head is the one marked
    ],
)
def test_the_reserve_is_kept_free_on_the_head_before_packing(nodes, reserve, at_once):
    plan = plan_trials(nodes, DEMAND, reserve=reserve)
    assert plan.max_concurrent_trials == at_once
    head = next(u for u in plan.usage if u.is_head)
    kept = {k: v for k, v in reserve.items() if v > 0}
    assert dict(head.reserved) == kept
    cpus = head.total["CPU"]
    assert head.used.get("CPU", 0) + kept.get("CPU", 0) <= cpus + 1e-9


def test_a_reserve_larger_than_the_head_is_refused():
    with pytest.raises(PlanError) as err:
        plan_trials([Node({"CPU": 2}, is_head=True)], DEMAND, reserve={"CPU": 3})
    assert str(err.value) == (
        "data.cpus keeps CPU: 3 free on the head node for Ray Data's tasks, but the head node has CPU: 2; "
        "lower data.cpus"
    )


def test_no_room_left_after_the_reserve_says_so():
    with pytest.raises(PlanError) as err:
        plan_trials([Node({"CPU": 1}, is_head=True)], DEMAND, reserve={"CPU": 0.8})
    assert str(err.value).endswith("(after keeping {CPU: 0.8} free on the head node for Ray Data: data.cpus)")


@pytest.mark.parametrize(
    ("reserved", "at_once", "share"),
    [(0, 2, None), (1, 1, 1.0), (1, 2, 1.0), (1, 3, 1.0), (4, 2, 2.0), (6, 4, 1.5), (0.5, 1, 0.5), (0.5, 4, 0.5)],
)
def test_each_trial_gets_its_share_of_the_reserve_but_never_less_than_one_data_task(reserved, at_once, share):
    assert data_cpus_per_trial(reserved, at_once) == share


def test_the_plan_shows_the_reserve_in_text_and_json(tmp_path):
    spec = load_spec(_spec(tmp_path, data={"cpus": 1}))
    plan = plan_for(spec, [Node({"CPU": 2, "memory": 8 * 1024**3}, node_id="head", is_head=True)])
    assert plan.max_concurrent_trials == 2
    text = render_plan(plan, title="Plan")
    assert (
        "  kept free       {CPU: 1} on the head node for Ray Data's tasks (data.cpus); "
        "each trial's data executor at most 1 CPU"
    ) in text
    assert (
        "2 trials at once share the 1 CPU(s) kept free for Ray Data, 1 each at most: their data tasks take turns"
        in (plan.warnings)
    )
    as_json = json.loads(json.dumps(plan.as_dict()))
    assert as_json["reserved"] == {"CPU": 1.0} and as_json["data_cpus_per_trial"] == 1.0
    assert as_json["nodes"][0]["reserved"] == {"CPU": 1.0}
    assert as_json["idle"]["CPU"] == pytest.approx(0.1)  # 2 - 2 x 0.45 - 1 kept free


def test_a_reserve_below_one_cpu_warns_that_data_tasks_cannot_start(tmp_path):
    spec = load_spec(_spec(tmp_path, data={"cpus": 0.5}))
    plan = plan_for(spec, [Node({"CPU": 2}, is_head=True)])
    assert any("a data task asks 1 CPU unless told otherwise and would never start" in w for w in plan.warnings)


def test_the_shipped_data_spec_plans_two_trials_on_two_cpus():
    spec = load_spec(REPO / "search_spaces" / "digits_data.yaml")
    assert set(spec.datasets) == {"train", "val"} and spec.data.split == ["train"]
    plan = plan_for(spec, [Node({"CPU": 2, "memory": 24 * 1024**3}, is_head=True)])
    assert plan.max_concurrent_trials == 2


def test_plan_cli_shows_the_reserve(tmp_path, capsys):
    import yaml

    from hpsearch.cli import main

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_spec(tmp_path, data={"cpus": 1})))
    assert main(["plan", str(path), "--cluster", "1x{CPU: 4}", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reserved"] == {"CPU": 1.0} and out["max_concurrent_trials"] == 6


# ----------------------------------------------------------------------------- the runtime, without a cluster


def test_a_per_trial_factory_gets_the_trial_config_and_its_errors_name_the_dataset():
    from hpsearch.runtime.datasets import build_for_trial, resolve_sources

    factories = resolve_sources({"bad": f"{LOOPS}:not_a_dataset"})
    with pytest.raises(ValueError) as err:
        build_for_trial(factories, {"lr": 0.1})
    assert str(err.value) == (
        "datasets.bad: not_a_dataset() must return a ray.data.Dataset (e.g. ray.data.from_numpy(...)), "
        "got list: [1, 2, 3]"
    )
    with pytest.raises(ValueError) as err:
        build_for_trial(resolve_sources({"train": f"{LOOPS}:raises"}), {})
    assert str(err.value) == "datasets.train: raises() raised RuntimeError: the bucket is gone"
    seen = []

    def from_config(config):
        seen.append(config)
        return "not a dataset either"

    with pytest.raises(ValueError, match=r"^datasets.x: from_config\(\) must return a ray.data.Dataset"):
        build_for_trial({"x": from_config}, {"lr": 0.1})
    assert seen == [{"lr": 0.1}]


def test_references_that_do_not_import_are_a_spec_error_naming_the_dataset():
    from hpsearch.runtime.datasets import resolve_sources

    with pytest.raises(SpecError) as err:
        resolve_sources({"train": "no_such_module_xyz:f", "val": _two})
    assert [str(p) for p in err.value.problems] == [
        "datasets.train: cannot import module 'no_such_module_xyz': ModuleNotFoundError: "
        "No module named 'no_such_module_xyz'",
        "datasets.val: _two must be called as factory() or factory(config), but its signature is _two(a, b)",
    ]


def test_the_data_config_splits_the_named_datasets_and_caps_each_executor():
    from hpsearch.runtime.datasets import data_config

    config = data_config(["train"], 1.0, concurrency=2)
    assert config._datasets_to_split == ["train"]
    limits = config._get_user_execution_options("train").resource_limits
    assert limits.cpu == 1.0
    assert data_config([], None, concurrency=2)._get_user_execution_options("val").resource_limits.cpu == float("inf")


def test_make_trainable_refuses_a_split_of_no_dataset():
    from hpsearch.runtime.trial.trainable import make_trainable

    with pytest.raises(ValueError, match=r"^data.split names no dataset: test \(datasets: train\)$"):
        make_trainable(_one, datasets={"train": _one}, data={"materialize": "per_trial", "split": ["test"]})


# ----------------------------------------------------------------------------- on Ray


def _history(exp_dir: Path) -> dict[str, list[dict]]:
    from hpsearch.experiment.layout import HISTORY_FILE, TRAIN_RUNS_DIR

    return {
        p.parent.name: [json.loads(line) for line in p.read_text().splitlines()]
        for p in (exp_dir / TRAIN_RUNS_DIR).glob(f"*/{HISTORY_FILE}")
    }


def _log_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_once_builds_the_datasets_once_and_every_trial_reads_its_shards(ray_cluster, tmp_path, monkeypatch):
    from hpsearch.experiment.files import read_outcomes
    from hpsearch.runtime.search.tuner import run

    log = tmp_path / "factory.log"
    monkeypatch.setenv("HPSEARCH_TEST_DATA_LOG", str(log))
    spec = load_spec(_spec(tmp_path, name="once", search_space={"epochs": 1}, data={"cpus": 1}))
    run(spec, stream=None)
    exp_dir = spec.experiment_dir
    assert set(read_outcomes(exp_dir).values()) == {"finished"}
    assert sorted(e["dataset"] for e in _log_lines(log)) == ["train", "val"]  # once per search, not per trial
    histories = _history(exp_dir)
    assert len(histories) == 2
    for reports in histories.values():
        assert [r["rows"] for r in reports] == [64]  # two shards of 32 make the whole set
        assert [r["x_sum"] for r in reports] == [2 * sum(range(64))]  # the map_batches steps ran
        assert [r["val_rows"] for r in reports] == [10]  # val is not split: each worker reads it whole


@pytest.mark.ray
@pytest.mark.timeout(300)
@pytest.mark.full
def test_per_trial_data_tasks_in_two_trials_at_once_on_two_cpus_finish(ray_cluster, tmp_path):
    """Ray Data's map tasks run inside both trials (1 CPU each), on the 1 CPU kept free: no starvation hang."""
    from hpsearch.experiment.files import read_outcomes
    from hpsearch.runtime.search.tuner import run

    log = tmp_path / "factory.log"
    spec = load_spec(
        _spec(
            tmp_path,
            name="per-trial",
            search_space={"epochs": 1, "data_log": str(log), "scale": {"type": "grid", "values": [1.0, 3.0]}},
            num_samples=1,
            datasets={"train": f"{LOOPS}:train_set_for"},
            data={"materialize": "per_trial", "cpus": 1},
            scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.4}},
        )
    )
    run(spec, stream=None)
    exp_dir = spec.experiment_dir
    plan = json.loads((exp_dir / "hpsearch_plan.json").read_text())
    assert plan["max_concurrent_trials"] == 2 and plan["reserved"] == {"CPU": 1.0}
    assert set(read_outcomes(exp_dir).values()) == {"finished"}
    assert sorted(e["scale"] for e in _log_lines(log)) == [1.0, 3.0]  # each trial built its own, from its config
    sums = sorted(reports[-1]["x_sum"] for reports in _history(exp_dir).values())
    assert sums == [sum(range(64)), 3 * sum(range(64))]


@pytest.mark.ray
def test_a_bad_factory_with_once_exits_2_before_anything_is_written(ray_cluster, tmp_path, capsys):
    import yaml

    from hpsearch.cli import main

    path = tmp_path / "bad.yaml"
    datasets = {"train": f"{LOOPS}:not_a_dataset", "val": f"{LOOPS}:raises"}
    path.write_text(yaml.safe_dump(_spec(tmp_path, name="bad", datasets=datasets)))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"Error: invalid spec in {path} (2 problems):",
        "  - datasets.train: not_a_dataset() must return a ray.data.Dataset (e.g. ray.data.from_numpy(...)), "
        "got list: [1, 2, 3]",
        "  - datasets.val: raises() raised RuntimeError: the bucket is gone",
    ]
    assert not (tmp_path / "results" / "bad").exists()
