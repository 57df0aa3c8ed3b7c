"""A storage that fills up while a search runs: one line that names the disk, no traceback, the results kept.

A 12 MiB tmpfs (``small_disk``, root only). As issue 36 found it, with a loop that saves 8 MB checkpoints,
each trial ended with its own ``No space left on device`` line, and then Tune failed reading an error
file it could not write, in a 50-line traceback. The end of the search with Tune's failure faked (no Ray,
in the gate), and one small real search (only in the full suite).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from full_disk import fill

from hpsearch.analysis import load_results
from hpsearch.cli import main
from hpsearch.spec import load_spec

LOOPS = Path(__file__).resolve().parents[2] / "loops.py"
QUICK_SPEC = yaml.safe_load((Path(__file__).resolve().parents[3] / "search_spaces" / "digits_quick.yaml").read_text())


@pytest.mark.ray
@pytest.mark.full
def test_a_full_storage_ends_the_search_in_one_line_and_keeps_what_it_wrote(
    ray_cluster, small_disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = {
        "name": "full",
        "trainable": f"{LOOPS}:big_checkpoints",
        "metric": "loss",
        "mode": "min",
        "num_samples": 2,
        "search_space": {"epochs": 3},
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.4}},
        "resources": {"driver_cpus": 0.1, "max_concurrent_trials": 1},
        "failure": {"trial_retries": 0, "worker_retries": 0},
        "storage_path": str(small_disk / "results"),
    }
    path = tmp_path / "full.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    code = main(["run", str(path)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    exp = small_disk / "results" / "full"
    # each trial's own line, then the search's: Tune failed unpickling an error file the disk left empty
    assert code == 1, err
    assert err.count("No space left on device") >= 1
    [line] = [line for line in err.splitlines() if line.startswith("Error: ")]
    assert line.startswith(f"Error: the storage is full: the file system at {small_disk} has ")
    assert line.endswith(f"Free some space, then continue it: hpsearch resume {exp}")
    results = load_results(exp)  # what it wrote before stays readable
    assert len(results.trials) >= 1


def test_a_search_whose_storage_fills_up_ends_with_the_one_line_not_tunes_traceback(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end of a search, with Tune's own failure faked: it read an error file that the full disk never let
    it write (no Ray; the gate runs it)."""
    from hpsearch.errors import StorageFullError
    from hpsearch.runtime.search import tuner

    spec = load_spec({**QUICK_SPEC, "storage_path": str(small_disk / "results")}, check_trainable=False)
    spec.experiment_dir.mkdir(parents=True)
    fill(small_disk)

    class FullTune:
        def fit(self) -> None:
            raise FileNotFoundError(2, "No such file or directory", str(spec.experiment_dir / "driver" / "error.pkl"))

    monkeypatch.setattr(tuner, "apply_fit_defaults", lambda: None)
    with pytest.raises(StorageFullError) as err:
        tuner._fit_and_summarize(spec, FullTune(), None)  # type: ignore[arg-type]
    assert str(err.value).startswith(f"the storage is full: the file system at {small_disk} has 0.0 MiB free")
    assert str(err.value).endswith(f"Free some space, then continue it: hpsearch resume {spec.experiment_dir}")
