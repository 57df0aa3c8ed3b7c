"""The estimate made as a search started, next to what happened: in the summary file, the closing lines
and the report. Pure: fake experiment folders written with the project's writers, no Ray."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from fake_experiment import T0, standard_trials, write_experiment

from hpsearch.analysis import summarize_experiment
from hpsearch.cli import _report_search
from hpsearch.experiment import files
from hpsearch.planning.estimate import Timing, Workload, estimate
from hpsearch.planning.versus import versus_actual, versus_lines
from hpsearch.results.report import write_report
from hpsearch.spec import load_spec

#: A FIFO search of 4 trials of 3 epochs on 2 slots: every simulated run is the same, 54 s (see test_estimate).
EST = estimate(
    Workload(trials=4, slots=2, epochs=(3,), resources={"CPU": 1.0}), Timing(epoch_s=5, startup_s=10, teardown_s=2)
)


def _record() -> dict:
    return {"made_at": T0, **EST.as_dict()}


def test_the_actual_wall_time_is_set_against_the_estimates_median_and_range() -> None:
    versus = versus_actual(_record(), wall_time_s=70.2, resource_hours={"CPU": 0.03})
    assert versus is not None and versus["compared"]
    wall = versus["wall_time_s"]
    assert (wall["low"], wall["median"], wall["high"], wall["actual"]) == (54, 54, 54, 70.2)
    assert wall["error"] == pytest.approx(70.2 / 54 - 1) and not wall["within"]
    assert versus["resource_hours"]["CPU"]["actual"] == 0.03
    lines = versus_lines(versus)
    assert lines[0].endswith(": 54 s; it took 1 min 10 s: 30% over the estimate")  # FIFO: one schedule, no range
    assert lines[0].startswith("Wall time estimated at the start (")
    assert lines[1] == "  CPU-hours estimated 0.03; used 0.03: as the estimate"
    under = versus_lines(versus_actual(_record(), wall_time_s=50.0, resource_hours={}))
    assert under[0].endswith("it took 50 s: 7% under the estimate")
    spread = {**_record(), "wall_time_s": {"low": 50.0, "median": 60.0, "high": 80.0}}
    assert versus_lines(versus_actual(spread, wall_time_s=66.0, resource_hours={}))[0].endswith(
        "it took 1 min 06 s: 10% over the median, within the range"
    )


def test_an_interrupted_search_or_no_estimate_is_not_compared() -> None:
    versus = versus_actual(_record(), wall_time_s=20.0, resource_hours={"CPU": 0.01}, interrupted=True)
    assert versus is not None and not versus["compared"]
    assert versus_lines(versus)[0].endswith("): 54 s; not compared: the search was interrupted")
    assert versus_actual(None, wall_time_s=1.0, resource_hours={}) is None
    assert versus_actual({"wall_time_s": {"low": "x"}}, wall_time_s=1.0, resource_hours={}) is None  # half-written
    assert versus_lines(None) == []


def test_the_summary_the_closing_lines_and_the_report_show_the_estimate_next_to_the_search(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "fake", standard_trials(), summary=False, usage=True, wall_time_s=61.5)
    files.record_search_stint(exp, started_at=T0, ended_at=T0 + 61.5)  # the search's end, as a run records it
    files.write_estimate(exp, _record())
    summary = summarize_experiment(exp, wall_time_s=61.5, interrupted=False)
    written = files.read_summary(exp)
    assert written is not None and written["estimate"] == summary.estimate
    assert summary.estimate is not None
    assert summary.estimate["wall_time_s"]["actual"] == 61.5  # the search's whole wall time (its usage file)
    assert summary.estimate["wall_time_s"]["error"] == pytest.approx(61.5 / 54 - 1)

    out = io.StringIO()
    with redirect_stdout(out):
        _report_search(load_spec(exp / "hpsearch_spec.yaml"), summary)
    closing = out.getvalue().splitlines()
    wall_line = next(i for i, line in enumerate(closing) if line.startswith("Wall time: 61.5 s"))
    assert "Wall time estimated at the start" in closing[wall_line + 2]  # after the resource-hours line
    assert closing[wall_line + 2].endswith("it took 1 min 02 s: 14% over the estimate")

    report = write_report(exp).read_text(encoding="utf-8")
    assert "Estimated at the start" in report and "14% over the estimate" in report


def test_a_search_run_without_a_check_has_no_estimate(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "fake", standard_trials(), usage=True)
    written = files.read_summary(exp)
    assert written is not None and "estimate" not in written
    assert "Estimated at the start" not in write_report(exp).read_text(encoding="utf-8")
