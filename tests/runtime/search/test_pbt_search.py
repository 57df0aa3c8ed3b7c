"""Population-based training end to end: real searches of the shipped digits loop on the session's Ray.

One PBT search of a population of 3, 2 at once, where one learning rate is clearly better, cut
by a wall-time budget and resumed: exploits happen, the exploited trial's first report after an
exploit has the donor's quality and the mutated learning rate, the lineage is complete, no more
than 2 trials ever ran at once, and nothing of the nested runs is left. Then a small PB2 search.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpsearch.analysis import load_results
from hpsearch.cli import main
from hpsearch.experiment import files
from hpsearch.experiment.layout import SUMMARY_FILE

pytestmark = pytest.mark.ray

GOOD, BAD = 0.05, 0.0002  # SGD + momentum on digits: 0.05 learns in 2 epochs, 0.0002 hardly moves
EPOCHS = 3  # one perturbation, at epoch 2 (another at the last epoch would only restart a run with nothing left to do)


def _spec(folder: Path, name: str, scheduler: dict[str, Any], lrs: list[float], **changes: Any) -> Path:
    spec = {
        "name": name,
        "trainable": "hpsearch.examples.digits:train_loop",
        "metric": "val_loss",
        "mode": "min",
        "num_samples": 1,
        "search_space": {
            "lr": {"type": "grid", "values": lrs},
            "optimizer": "sgd",
            "momentum": 0.9,
            "hidden": 32,
            "layers": 1,
            "dropout": 0.0,
            "batch_size": 32,
            "epochs": EPOCHS,
        },
        "searcher": {"type": "random", "seed": 0},
        "scheduler": scheduler,
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.45}},
        "resources": {"driver_cpus": 0.05, "max_concurrent_trials": 2},
        "storage_path": str(folder / "results"),
        **changes,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _max_at_once(exp: Path) -> int:
    """The most trial drivers that ran at the same time, from the usage file's start and end times."""
    events = []
    for runs in files.read_usage(exp).trials.values():
        for run in runs:
            events += [(run.started_at, 1), (run.ended_at if run.ended_at is not None else float("inf"), -1)]
    at_once = most = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):  # an end before a start at the same instant
        at_once += step
        most = max(most, at_once)
    return most


def _live_train_actors() -> list[str]:
    from ray.util.state import list_actors

    alive = list_actors(filters=[("state", "=", "ALIVE")], limit=1000)
    return [a.class_name for a in alive if a.class_name in ("TrainController", "RayTrainWorker")]


def _check_exploits(exp: Path, low: float, high: float) -> None:
    """Every exploit: complete, from a better trial, and the trial's next report shows the donor's
    model (its val_loss near the donor's, far from its own) trained with the new config's lr."""
    results = load_results(exp)
    lineage = results.lineage
    assert len(lineage) >= 1, "no trial exploited another"
    lrs = dict(zip(results.trials["trial_id"], results.trials["lr"]))
    history = results.history
    for row in lineage.itertuples(index=False):
        assert row.donor_trial_id != row.trial_id and row.donor_trial_id in lrs
        assert row.donor_value <= row.value  # the donor was no worse then (two trials can be equal: same seed, same lr)
        donor_epoch, epoch = int(row.donor_epoch), int(row.epoch)
        assert donor_epoch >= 2 and epoch >= 2  # at a perturbation interval
        record = next(
            r for r in files.read_lineage(exp, row.trial_id) if r["donor_epoch"] == donor_epoch and r["epoch"] == epoch
        )
        new_lr = record["new_config"]["lr"]
        assert low <= new_lr <= high
        assert set(record["old_config"]) == set(record["new_config"])  # the whole config, before and after
        if donor_epoch >= EPOCHS:
            continue  # continued from the last epoch: nothing left to report
        mine = history[(history["trial_id"] == row.trial_id) & (history["iteration"] == donor_epoch + 1)]
        assert len(mine) == 1, f"no report of epoch {donor_epoch + 1} after the exploit"
        first = mine.iloc[0]
        assert first["lr_now"] == pytest.approx(new_lr)  # the optimizer took the mutated lr after the restore
        assert first["val_loss"] < 0.5 * row.value  # not its own weights: it was much worse
        assert first["val_loss"] < 2.0 * row.donor_value  # the donor's quality, trained one epoch more
    # Tune's config of each trial ends as its last exploit's new config
    for trial_id in lineage["trial_id"].unique():
        last = files.read_lineage(exp, str(trial_id))[-1]
        assert lrs[trial_id] == pytest.approx(last["new_config"]["lr"])
    assert min(results.trials["best"]) < 0.5  # the good region was found and kept


@pytest.mark.tier
def test_pbt_exploits_copy_the_donor_and_a_resumed_population_carries_on(ray_cluster: Any, tmp_path: Path) -> None:
    from hpsearch.runtime.ray_workarounds import workarounds_enabled

    scheduler = {
        "type": "pbt",
        "perturbation_interval": 2,
        "quantile_fraction": 0.34,  # of 3: the worst copies the best
        "resample_probability": 0.0,  # lr x1.2 or x0.8 of the donor's
        # synchronous: the whole population is ranked at each perturbation, so the exploit is certain (async,
        # a trial becomes a donor only if others have scores at its own perturbation: not so with turns)
        "synch": True,
        "hyperparam_mutations": {"lr": {"type": "float", "low": 1.0e-4, "high": 0.2, "log": True}},
    }
    spec = _spec(tmp_path, "pbt", scheduler, [GOOD, BAD, BAD * 1.5], budget={"max_wall_time": "12s"})
    exp = tmp_path / "results" / "pbt"
    # 0 when a stopped trial had reported by the cut, 1 when none had (a loaded machine): either way, cut
    assert main(["run", str(spec)]) in (0, 1)
    first = json.loads((exp / SUMMARY_FILE).read_text())
    assert first["ended_by"] == "max_wall_time"  # cut mid-population: resume must carry it on

    assert main(["resume", str(exp), "--set", "budget.max_wall_time=1h"]) == 0
    results = load_results(exp)
    assert list(results.trials["status"]) == ["finished"] * 3
    assert all(results.history.groupby("trial_id")["iteration"].max() == EPOCHS)  # every trial reached the end
    _check_exploits(exp, 1.0e-4, 0.2)
    assert _max_at_once(exp) <= 2  # the population took turns within the plan's 2 at once
    live = _live_train_actors()
    if workarounds_enabled():
        assert live == []  # every paused or ended nested run's controller and workers are gone
    elif live:  # HPSEARCH_RAY_WORKAROUNDS=0 leaves Ray's bug 1 (runtime/ray_workarounds.py) unhandled
        warnings.warn(f"HPSEARCH_RAY_WORKAROUNDS=0, Ray's bug 1: still running: {live}", stacklevel=1)
    # the report shows the lineage: plot and table
    assert main(["report", str(exp), "--format", "md"]) == 0
    page = (exp / "hpsearch_report.md").read_text()
    assert "## PBT lineage (" in page and "hpsearch_report_pbt_lineage.png" in page


@pytest.mark.full
def test_pb2_exploits_within_its_bounds(ray_cluster: Any, tmp_path: Path) -> None:
    pytest.importorskip("sklearn")  # pip install "hpsearch[pb2]" (scikit-learn and SciPy; the dev install has them)
    scheduler = {
        "type": "pb2",
        "perturbation_interval": 2,
        "quantile_fraction": 0.5,
        "hyperparam_bounds": {"lr": [1.0e-4, 0.1]},
        "synch": True,  # the exploit is certain (see the PBT test)
    }
    exp = tmp_path / "results" / "pb2"
    assert main(["run", str(_spec(tmp_path, "pb2", scheduler, [GOOD, BAD]))]) == 0
    results = load_results(exp)
    assert list(results.trials["status"]) == ["finished"] * 2
    _check_exploits(exp, 1.0e-4, 0.1)
    assert _live_train_actors() == []


@pytest.mark.full
def test_a_loop_that_never_checkpoints_fails_under_pbt_with_one_line(ray_cluster: Any, tmp_path: Path, capfd) -> None:
    """Ray Train's plain loop that saves no checkpoint (tests/user_loops.py:minimal_loop): under pbt
    its trial errors at its first report, saying what the loop must do, and the run exits 1."""
    loops = Path(__file__).resolve().parents[2] / "user_loops.py"
    spec = {
        "name": "no-checkpoint",
        "trainable": f"{loops}:minimal_loop",
        "metric": "loss",
        "mode": "min",
        "search_space": {"x": 0.5, "lr": 0.01, "epochs": 2},
        "scheduler": {"type": "pbt", "hyperparam_mutations": {"lr": {"type": "float", "low": 0.001, "high": 0.1}}},
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.45}},
        "resources": {"driver_cpus": 0.05},
        "storage_path": str(tmp_path / "results"),
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["run", str(path)]) == 2  # the loop cannot run under PBT: a user mistake
    _, err = capfd.readouterr()
    expected = (
        "pbt/pb2 need a checkpoint with every report; epoch 1 had none: report with "
        "hpsearch.train.report(..., model=...) or ray.train.report(..., checkpoint=...)"
    )
    assert [line for line in err.splitlines() if line.startswith("Error:")] == [f"Error: the trial failed: {expected}"]
    assert "Traceback" not in err


@pytest.mark.timeout(400)
@pytest.mark.full
def test_a_synch_population_goes_on_when_its_exploited_trial_fails(ray_cluster: Any, tmp_path: Path, capfd) -> None:
    """Two trials, ranked at every epoch; the worse one copies the better at epoch 1, and its loop cannot take
    another trial's checkpoint (tests/user_loops.py:fails_on_exploit). Ray's synch PBT would leave the better
    trial paused at epoch 2 for ever, waiting for it; it goes on alone and finishes."""
    loops = Path(__file__).resolve().parents[2] / "user_loops.py"
    spec = {
        "name": "left",
        "trainable": f"{loops}:fails_on_exploit",
        "metric": "loss",
        "mode": "min",
        # fail_after_s: the exploited trial fails only once the better one waits at epoch 2 (both restart after
        # the exploit; without it the failure could come first, and nothing would wait for it)
        "search_space": {"x": {"type": "grid", "values": [0.3, 0.9]}, "lr": 0.01, "epochs": 2, "fail_after_s": 15},
        "scheduler": {
            "type": "pbt",
            "perturbation_interval": 1,
            "quantile_fraction": 0.5,
            "resample_probability": 0.0,
            "synch": True,
            "hyperparam_mutations": {"lr": {"type": "float", "low": 0.001, "high": 0.1, "log": True}},
        },
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.45}},
        "resources": {"driver_cpus": 0.05, "max_concurrent_trials": 2},
        "failure": {"worker_retries": 0},
        "storage_path": str(tmp_path / "results"),
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["run", str(path)]) == 0  # the better trial finished
    _, err = capfd.readouterr()
    results = load_results(tmp_path / "results" / "left")
    status = dict(zip(results.trials["trial_id"], results.trials["status"]))
    assert sorted(status.values()) == ["errored", "finished"], err[-3000:]
    [exploited] = [t for t, s in status.items() if s == "errored"]
    assert f"pbt: trial {exploited} (epoch 1, loss " in err, err[-3000:]  # the trial that failed was the exploited one
    # the loop, written as Ray's guides write it, was given the donor's checkpoint by ray.train.get_checkpoint(),
    # and its optimizer kept the mutated lr through load_state_dict
    error = results.trials.set_index("trial_id").loc[exploited, "error"]
    given = re.search(r"given a checkpoint of epoch 1 saved with lr 0.01; config lr (\S+), optimizer lr (\S+)", error)
    assert given and given[1] == given[2] != "0.01", error
    [line] = [line for line in err.splitlines() if "where the population waits" in line]
    assert line.endswith("ended before epoch 2, where the population waits to be ranked; the 1 other trial(s) "
                         "are ranked without it and carry on")  # fmt: skip
