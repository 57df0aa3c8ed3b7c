"""The experiment folder says its format: an older folder is read, a newer one refused with what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_experiment import standard_trials, write_experiment

from hpsearch.errors import ResultsError
from hpsearch.experiment import files
from hpsearch.experiment.layout import FORMAT_FILE, FORMAT_VERSION, UNRECORDED_FORMAT

UPGRADE = r"written by a newer hpsearch \(experiment folder format 99; this hpsearch reads formats up to \d+\): upgrade hpsearch \(pip install --upgrade hpsearch\)"


def test_a_new_folder_records_the_current_format(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "exp", standard_trials())
    assert json.loads((exp / FORMAT_FILE).read_text())["format"] == FORMAT_VERSION
    assert files.read_format(exp) == files.check_format(exp) == FORMAT_VERSION


def test_a_folder_without_a_format_is_the_predecessor_and_reads_the_same(tmp_path: Path) -> None:
    """Every folder written before formats were recorded has no format file: read as version 1, the same way."""
    from hpsearch import load_results

    old = write_experiment(tmp_path / "old", standard_trials(), folder_format=None)
    new = write_experiment(tmp_path / "new", standard_trials())
    assert not (old / FORMAT_FILE).exists()
    assert files.read_format(old) == files.check_format(old) == UNRECORDED_FORMAT == 1
    columns = ["trial_id", "status", "best", "best_iteration", "rank"]
    assert load_results(old).trials[columns].equals(load_results(new).trials[columns])
    assert files.experiment_spec(old).name == "old"  # resume reads its spec


def test_a_damaged_format_file_is_read_as_the_current_format(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "exp", standard_trials())
    (exp / FORMAT_FILE).write_text('{"form', encoding="utf-8")  # half-written
    assert files.read_format(exp) == FORMAT_VERSION


def test_a_folder_of_a_newer_format_is_refused_by_load_results_and_resume(tmp_path: Path) -> None:
    from hpsearch import load_results

    exp = write_experiment(tmp_path / "exp", standard_trials(), summary=False, folder_format=99)
    with pytest.raises(ResultsError, match=UPGRADE + " to read it$"):
        load_results(exp)
    with pytest.raises(ResultsError, match=UPGRADE + " to resume it$"):
        files.experiment_spec(exp)  # the first thing resume reads, before Ray starts


def test_resume_and_report_of_a_newer_folder_exit_2_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hpsearch.cli import main

    exp = write_experiment(tmp_path / "exp", standard_trials(), summary=False, folder_format=99)
    assert main(["resume", str(exp)]) == 2
    assert "upgrade hpsearch (pip install --upgrade hpsearch) to resume it" in capsys.readouterr().err
    assert main(["report", str(exp)]) == 2
    assert "upgrade hpsearch (pip install --upgrade hpsearch) to read it" in capsys.readouterr().err
    assert not list(exp.glob("hpsearch_report*"))
