"""End-to-end searches on one session-scoped local Ray. Each nested trial costs ~10 s here.

Every trial in these tests is a real nested run: a Tune trial driver that builds a
2-worker (or 1-worker) TorchTrainer whose workers report through Ray Train.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hpsearch.cli import main
from hpsearch.experiment.layout import SUMMARY_FILE

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

LOOPS = Path(__file__).resolve().parents[1] / "loops.py"


def _write_spec(folder: Path, **spec) -> Path:
    path = folder / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _summary(exp_dir: Path) -> dict:
    return json.loads((exp_dir / SUMMARY_FILE).read_text())


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


def test_a_search_whose_every_trial_fails_exits_1(ray_cluster, tmp_path):
    """The rest of the good-and-bad search, whose run is now tests/cli/test_quiet_terminal.py's."""
    spec = _write_spec(
        tmp_path,
        name="all-bad",
        trainable=f"{LOOPS}:maybe_raise",
        metric="loss",
        mode="min",
        search_space={"x": {"type": "grid", "values": ["bad"]}},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.5}},
        resources={"driver_cpus": 0.1},
        storage_path=str(tmp_path / "results"),
    )
    assert main(["run", str(spec)]) == 1
    assert _summary(tmp_path / "results" / "all-bad")["counts"]["errored"] == 1
