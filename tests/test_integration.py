"""End-to-end searches on one session-scoped local Ray. Each nested trial costs ~10 s here.

Every trial in these tests is a real nested run: a Tune trial driver that builds a
2-worker (or 1-worker) TorchTrainer whose workers report through Ray Train.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from hpsearch.cli import main
from hpsearch.experiment.layout import OUTCOMES_FILE, PLAN_FILE, SPEC_FILE, SUMMARY_FILE

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[1]
LOOPS = Path(__file__).resolve().parent / "loops.py"
QUICK = REPO / "search_spaces" / "digits_quick.yaml"


def _write_spec(folder: Path, **spec) -> Path:
    path = folder / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _summary(exp_dir: Path) -> dict:
    return json.loads((exp_dir / SUMMARY_FILE).read_text())


def _wait_for_no_leftovers(ray, timeout_s: float = 20.0) -> tuple[list, list]:
    """Placement groups not removed and Train actors still alive, once things settle."""
    from ray.util.state import list_actors

    deadline = time.monotonic() + timeout_s
    while True:
        groups = [g for g in ray.util.placement_group_table().values() if g["state"] != "REMOVED"]
        actors = [
            a.class_name
            for a in list_actors(filters=[("state", "=", "ALIVE")], limit=1000)
            if "Train" in a.class_name or "Worker" in a.class_name or "Trainable" in a.class_name
        ]
        if (not groups and not actors) or time.monotonic() > deadline:
            return groups, actors
        time.sleep(0.5)


@pytest.mark.tier
def test_quick_search_end_to_end(ray_cluster, tmp_path, capsys):
    """The shipped default search, shrunk: every trial a 2-worker TorchTrainer on digits."""
    code = main(
        [
            "run",
            str(QUICK),
            "--set",
            "num_samples=2",  # one round of two trials at once
            "--set",
            "search_space.epochs=2",
            "--set",
            "scheduler.max_t=2",
            "--set",
            f"storage_path={tmp_path}",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    exp_dir = tmp_path / "digits-quick"
    assert "Best trials by val_loss (min):" in out.out
    assert f"Experiment folder: {exp_dir}" in out.out
    assert "Wall time:" in out.out
    spec_as_run = yaml.safe_load((exp_dir / SPEC_FILE).read_text())
    assert spec_as_run["num_samples"] == 2 and spec_as_run["scaling"]["num_workers"] == 2
    assert json.loads((exp_dir / PLAN_FILE).read_text())["max_concurrent_trials"] == 2
    summary = _summary(exp_dir)
    assert len(summary["trials"]) == 2
    best = next(t for t in summary["trials"] if t["trial_id"] == summary["best_trial_id"])
    assert best["metrics"]["val_acc"] > 0.5
    # One nested Train run per trial, named by the trial id, inside the experiment folder.
    runs = sorted(p.name for p in (exp_dir / "train").iterdir())
    assert runs == sorted(t["trial_id"] for t in summary["trials"])
    for run in runs:
        assert list((exp_dir / "train" / run).glob("checkpoint_*")), f"no checkpoint for {run}"


def test_tune_sees_the_aggregate_of_all_ranks(ray_cluster, tmp_path):
    """Two ranks report 0 and 1: Tune gets their mean by default, the max where the spec says max."""
    from ray import tune

    from hpsearch import make_trainable
    from hpsearch.spec._imports import load_callable

    trainable = make_trainable(
        load_callable(f"{LOOPS}:rank_report"),
        scaling={"num_workers": 2, "resources_per_worker": {"CPU": 0.45}},
        driver_cpus=0.1,
        aggregate={"default": "mean", "metrics": {"score_max": "max"}},
        storage_path=tmp_path / "runs",
    )
    tuner = tune.Tuner(
        trainable,
        param_space={"epochs": 2},
        tune_config=tune.TuneConfig(num_samples=1),
        run_config=tune.RunConfig(name="agg", storage_path=str(tmp_path), verbose=0),
    )
    [result] = list(tuner.fit())
    assert result.error is None
    history = result.metrics_dataframe
    assert list(history["score"]) == [0.5, 0.5]
    assert list(history["score_max"]) == [1.0, 1.0]
    assert list(history["epoch"]) == [1, 2]  # equal across ranks: passed through as ints
    assert list(history["tag"]) == ["rank0", "rank0"]  # not a number: rank 0's value
    # The nested run is named by the trial id, under the storage path given.
    assert (tmp_path / "runs" / result.metrics["trial_id"]).is_dir()


def test_optuna_asha_stops_trials_early_and_leaves_nothing_behind(ray_cluster, tmp_path, capsys):
    spec = _write_spec(
        tmp_path,
        name="asha",
        trainable=f"{LOOPS}:quadratic",
        metric="loss",
        mode="min",
        num_samples=6,
        search_space={"x": {"type": "float", "low": 0.0, "high": 1.0}, "epochs": 4},
        searcher={"type": "optuna", "seed": 1, "n_startup_trials": 2},
        scheduler={"type": "asha", "max_t": 4, "grace_period": 1, "reduction_factor": 3},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.5}},
        resources={"driver_cpus": 0.1},
        storage_path=str(tmp_path / "results"),
    )
    assert main(["run", str(spec)]) == 0
    err = capsys.readouterr().err
    summary = _summary(tmp_path / "results" / "asha")
    assert summary["counts"]["stopped"] >= 1, summary["counts"]
    assert summary["counts"]["errored"] == 0
    assert "stopped early by the scheduler" in err
    stopped = [t for t in summary["trials"] if t["status"] == "stopped"]
    assert all(t["iterations"] < 4 for t in stopped)
    groups, actors = _wait_for_no_leftovers(ray_cluster)
    assert groups == [], f"placement groups left behind: {groups}"
    assert actors == [], f"actors left behind: {actors}"


def test_hyperopt_search(ray_cluster, tmp_path):
    spec = _write_spec(
        tmp_path,
        name="hyperopt",
        trainable=f"{LOOPS}:quadratic",
        metric="loss",
        mode="min",
        num_samples=3,
        search_space={"x": {"type": "float", "low": 0.0, "high": 1.0}, "epochs": 2},
        searcher={"type": "hyperopt", "seed": 0, "n_initial_points": 2},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.5}},
        resources={"driver_cpus": 0.1},
        storage_path=str(tmp_path / "results"),
    )
    assert main(["run", str(spec)]) == 0
    summary = _summary(tmp_path / "results" / "hyperopt")
    assert summary["counts"] == {"finished": 3, "stopped": 0, "errored": 0}
    xs = {t["config"]["x"] for t in summary["trials"]}
    assert len(xs) == 3 and all(0.0 <= x <= 1.0 for x in xs)


def test_user_loop_from_a_file_next_to_the_spec_and_a_trial_that_raises(ray_cluster, tmp_path, monkeypatch, capsys):
    """`trainable: my_train.py:train_loop` resolves against the spec's folder and runs on Ray's workers."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "my_train.py").write_text(LOOPS.read_text())
    spec = _write_spec(
        project,
        name="user-file",
        trainable="my_train.py:maybe_raise",
        metric="loss",
        mode="min",
        search_space={"x": {"type": "grid", "values": ["good", "bad"]}},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.5}},
        resources={"driver_cpus": 0.1},
        storage_path="results",
    )
    monkeypatch.chdir(tmp_path)  # not the spec's folder: the file must be found relative to the spec
    assert main(["run", str(spec)]) == 0  # one trial finished
    out = capsys.readouterr().out
    assert "Errors (1):" in out
    assert "ValueError: x='bad' is not a usable value" in out
    summary = _summary(tmp_path / "results" / "user-file")
    by_x = {t["config"]["x"]: t for t in summary["trials"]}
    assert by_x["good"]["status"] == "finished"
    assert by_x["bad"]["status"] == "errored"
    assert "ValueError: x='bad' is not a usable value" in by_x["bad"]["error"]
    assert "raise ValueError" in by_x["bad"]["traceback"]  # the user's own frame
    ended = [json.loads(line) for line in (tmp_path / "results" / "user-file" / OUTCOMES_FILE).read_text().splitlines()]
    [bad] = [r for r in ended if r["status"] == "errored"]
    assert "ValueError: x='bad' is not a usable value" in bad["error"]

    # Every trial fails: exit code 1.
    assert main(["run", str(spec), "--set", "name=all-bad", "--set", "search_space.x.values=[bad]"]) == 1
    assert _summary(tmp_path / "results" / "all-bad")["counts"]["errored"] == 1
