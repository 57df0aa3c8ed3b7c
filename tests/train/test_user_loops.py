"""Loops written for plain Ray Train run unchanged (tests/user_loops.py), in real searches.

Every loop reports ``loss = (x - 0.3) ** 2 + 1 / epoch`` for 2 epochs. To keep the suite's
time down (a nested trial costs ~12 s of this machine), the patterns share two searches,
one trial per loop (``tests/user_loops.py:by_case`` runs the loop its grid case names,
with the case's ``x``): 4 trials of 1 worker, and 2 of 2 workers for the patterns about
ranks. Each search must rank its trials by ``|x - 0.3|``; each pattern's test checks its trial.
The last test is a loop that never reports the spec's metric.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from leftovers import placement_groups_left

from hpsearch.experiment import files

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]  # the first test runs both searches (the fixture)

USER_LOOPS = Path(__file__).resolve().parents[1] / "user_loops.py"


def _spec(tmp_path: Path, loop: str, **overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": loop.replace("_", "-"),
        "trainable": f"{USER_LOOPS}:{loop}",
        "metric": "loss",
        "mode": "min",
        "search_space": {"x": {"type": "grid", "values": [0.8, 0.2]}, "epochs": 2},
        "scaling": {"num_workers": 2, "resources_per_worker": {"CPU": 0.45}},
        "resources": {"driver_cpus": 0.1},
        "storage_path": str(tmp_path),
    }
    spec.update(overrides)
    return spec


def _is_json_clean(value: Any) -> bool:
    """A plain Python value (what ``json`` writes and reads back as the same type), nested or not."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_clean(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_is_json_clean(v) for v in value)
    return value is None or type(value) in (bool, int, float, str)


#: Each pattern: the loop that shows it (two loops show two each), the x its trial runs with (each
#: search must rank its trials by |x - 0.3|), and the workers per trial: two where the pattern is
#: about ranks. One trial per loop, as each nested trial costs ~12 s of this machine.
CASES = {
    "every_rank_checkpoint": ("every_rank_checkpoint", 0.8, 2),  # each rank from its own temporary directory
    "rank0_metric": ("rank0_metric", 0.2, 2),  # only rank 0 computes the metric; the other ranks report {}
    "no_epoch_key": ("minimal_loop", 0.9, 1),
    "config_defaults": ("minimal_loop", 0.9, 1),  # config.get(...) for the keys the search does not set
    "numpy_metrics": ("numpy_metrics", 0.7, 1),
    "tensor_metrics": ("tensor_metrics", 0.4, 1),  # 0-d torch tensors
    "returns_a_value": ("prints_and_returns", 0.3, 1),
    "prints_a_lot": ("prints_and_returns", 0.3, 1),
}


def _loops(workers: int) -> dict[str, float]:
    """The loops of the search with ``workers`` per trial, and their x, in the order of the grid."""
    return {loop: x for loop, x, n in CASES.values() if n == workers}


def _best(x: float) -> float:
    """The loss a loop reports at its last (best) epoch, the second."""
    return (x - 0.3) ** 2 + 1.0 / 2


@pytest.fixture(scope="module")
def searches(_ray_session, tmp_path_factory) -> dict[int, Path]:
    """Two searches, one trial per pattern: workers per trial -> experiment folder. Run once for the module.

    Module-scoped, so it checks for left-over placement groups itself, as ``ray_cluster`` does per test.
    """
    import hpsearch

    before = set(_ray_session.util.placement_group_table())
    tmp_path = tmp_path_factory.mktemp("user-loops")
    folders = {}
    for workers in (1, 2):
        cases = [{"loop": loop, "x": x} for loop, x in _loops(workers).items()]
        spec = _spec(
            tmp_path,
            "by_case",
            name=f"user-loops-{workers}w",
            search_space={"case": {"type": "grid", "values": cases}, "epochs": 2},
            # 2 trials at once either way: 3 1-worker trials at once on 2 CPUs took longer than 2 and then 1.
            scaling={"num_workers": workers, "resources_per_worker": {"CPU": 0.9 / workers}},
        )
        hpsearch.run(spec)
        folders[workers] = tmp_path / spec["name"]
    yield folders
    left = placement_groups_left(_ray_session, before)
    assert not left, f"placement groups left behind by the user-loop searches: {left}"


@pytest.mark.full
def test_each_search_ranks_its_trials_as_their_configs_imply(searches) -> None:
    import hpsearch

    for workers, exp_dir in searches.items():
        results = hpsearch.load_results(exp_dir)
        trials = results.trials
        loops = _loops(workers)
        expected = sorted(loops, key=lambda loop: abs(loops[loop] - 0.3))
        assert expected != list(loops)  # the grid's order is not the ranking's
        assert list(trials["status"]) == ["finished"] * len(expected), trials[["case.loop", "status", "error"]]
        assert list(trials.sort_values("rank")["case.loop"]) == expected
        assert list(trials.sort_values("rank")["rank"]) == list(range(1, len(expected) + 1))
        summary = json.loads((exp_dir / "hpsearch_summary.json").read_text())
        assert summary["best_trial_id"] == trials.loc[trials["rank"] == 1, "trial_id"].item()


@pytest.mark.parametrize("pattern", list(CASES))
@pytest.mark.full
def test_plain_ray_train_loop(searches, pattern: str) -> None:
    import hpsearch

    loop, x, workers = CASES[pattern]
    exp_dir = searches[workers]
    results = hpsearch.load_results(exp_dir)
    [trial] = results.trials[results.trials["case.loop"] == loop].to_dict("records")
    assert trial["status"] == "finished", trial["error"]
    assert trial["best"] == pytest.approx(_best(x)) and trial["best_iteration"] == 2
    assert trial["iterations"] == 2
    history = results.history[results.history["trial_id"] == trial["trial_id"]]
    assert history["iteration"].tolist() == [1, 2]
    assert history["loss"].tolist() == pytest.approx([_best(x) + 0.5, _best(x)])
    # What reached Tune and the history file is plain Python: JSON-clean, never a tensor or NumPy scalar.
    reports = files.read_history(exp_dir, trial["trial_id"])
    assert len(reports) == 2
    assert all(_is_json_clean(r) for r in reports), reports
    assert all(type(r["loss"]) is float for r in reports), reports
    last = reports[-1]

    if pattern == "every_rank_checkpoint":
        assert trial["best_checkpoint"], "no checkpoint kept"
        assert sorted(p.name for p in Path(trial["best_checkpoint"]).iterdir()) == ["model-rank0.pt", "model-rank1.pt"]
    if pattern == "rank0_metric":
        assert trial["best_checkpoint"] and (Path(trial["best_checkpoint"]) / "model.pt").is_file()
    if pattern == "no_epoch_key":
        assert [r["epoch"] for r in reports] == [1, 2]  # numbered by hpsearch
    if pattern == "config_defaults":
        assert last["lr"] == 0.01 and "lr" not in results.trials.columns  # the loop's default, not searched
    if pattern == "numpy_metrics":
        assert (type(last["loss32"]), type(last["samples"]), type(last["improving"])) == (float, int, bool)
        assert last["epoch"] == 2 and type(last["epoch"]) is int
    if pattern == "tensor_metrics":
        assert type(last["train_loss"]) is float and last["epoch"] == 2 and type(last["epoch"]) is int


@pytest.mark.full
def test_a_metric_the_loop_never_reports_is_one_error_and_exit_2(ray_cluster, tmp_path, capfd) -> None:
    """The spec names val_loss, the loop reports loss and val_los: the trial errors at its first report,
    with one line and no retry (though every retry level allows one), and the run ends with one Error.

    One trial (each costs ~12 s here); the message for several is tested in tests/analysis/test_missing_metric.py.
    """
    import hpsearch
    from hpsearch.cli import main

    starts = tmp_path / "starts"
    starts.mkdir()
    spec = _spec(
        tmp_path / "results",
        "misnamed_metric",
        metric="val_loss",
        search_space={"x": 0.8, "starts_dir": str(starts)},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.45}},
        failure={"trial_retries": 1, "worker_retries": 1, "controller_retries": 2},
    )
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))

    code = main(["run", str(path)])
    out, err = capfd.readouterr()
    assert code == 2, err  # the loop and the spec disagree: a user mistake
    expected = "the loop did not report the spec's metric 'val_loss'; did you mean 'val_los'? (it reported: loss, val_los, epoch)"
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: the trial failed: {expected}"], err
    assert f"Experiment folder: {tmp_path / 'results' / 'misnamed-metric'}" in err
    assert "Traceback" not in out + err
    assert "Trial returned a result which did not include" not in out + err  # Tune's own check never ran
    assert "Best trials by" not in out  # the Error block instead of the closing table
    # Neither Ray Train (worker or controller retries) nor Tune (a trial retry) ran the loop again.
    assert len(list(starts.iterdir())) == 1
    results = hpsearch.load_results(tmp_path / "results" / "misnamed-metric")
    assert list(results.trials["status"]) == ["errored"]
    assert list(results.trials["error"]) == [f"hpsearch.errors.MetricNotReportedError: {expected}"]
