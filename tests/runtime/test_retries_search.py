"""No blind retries in a real search: a loop that fails the same way is retried once, a worker that dies
keeps its whole retry budget. One small search of two trials."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hpsearch.cli import main
from hpsearch.experiment import files
from hpsearch.experiment.layout import LOGS_DIR

pytestmark = pytest.mark.ray

LOOPS = Path(__file__).resolve().parents[1] / "loops.py"


@pytest.mark.full
def test_a_repeated_failure_is_not_retried_again_and_a_dead_worker_is(
    ray_cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = {
        "name": "retries",
        "trainable": f"{LOOPS}:fails_the_same_way_or_dies",
        "metric": "loss",
        "mode": "min",
        "num_samples": 1,
        "search_space": {"x": {"type": "grid", "values": ["bad", "dies"]}, "scratch": str(tmp_path / "scratch")},
        "searcher": {"type": "random"},
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.4}},
        "resources": {"driver_cpus": 0.1},
        "failure": {"worker_retries": 2, "trial_retries": 1},
        "storage_path": str(tmp_path / "results"),
    }
    path = tmp_path / "retries.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    assert main(["run", str(path)]) == 0  # the worker that died twice finished at its third attempt
    err = capsys.readouterr().err
    exp = tmp_path / "results" / "retries"
    records = files.read_outcome_records(exp)
    by_x = {files.read_json(next(exp.glob(f"*{t}*/params.json")))["x"]: t for t in records}
    bad, dies = by_x["bad"], by_x["dies"]
    assert records[dies]["status"] == "finished"
    assert records[bad]["status"] == "errored"
    line = records[bad]["error"]
    assert line.startswith("failed the same way twice (ValueError: batch ") and line.endswith(
        " holds a NaN label at epoch 2); not retried again"
    ), line

    # the bug: 2 starts of its worker group of the 3 allowed, and no more from Tune's retry (which ended at once)
    bad_runs = files.run_dir(exp, bad)
    assert sorted(p.name for p in (bad_runs / LOGS_DIR).glob("attempt-*")) == ["attempt-1", "attempt-2"]
    assert [(f.kind, f.epoch, f.final) for f in files.read_failures(bad_runs)] == [
        ("ValueError", 2, False),
        ("ValueError", 2, True),
    ]
    assert len(files.read_usage(exp).trials[bad]) == 2  # its driver ran twice: the search's start, Tune's retry
    assert err.count(f"start    {bad}") == 1  # Tune's retry, which ends at once, prints no start of its own
    assert f"ERROR    {bad}  failed the same way twice" in err

    # the dead worker: 3 starts, its whole budget, though it died the same way twice
    dies_runs = files.run_dir(exp, dies)
    assert len(list((dies_runs / LOGS_DIR).glob("attempt-*"))) == 3
    assert [f.infra for f in files.read_failures(dies_runs)] == [True, True]
