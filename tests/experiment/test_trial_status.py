"""A trial's status has one rule (:mod:`hpsearch.experiment.trial_status`): its precedence, and the two views of it.

``files.read_outcomes`` (what the runtime counts: failed trials for the budget, whether a search was
interrupted) and ``load_results``' status column (the tables, the summary, the report) both take a
trial's status from its outcome records by this rule; the folders below are where they could drift.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_experiment import T0, FakeTrial, standard_trials, write_experiment

from hpsearch import load_results
from hpsearch.experiment import files
from hpsearch.experiment.folder_io import append_line
from hpsearch.experiment.layout import ERRORED, FINISHED, OUTCOMES_FILE, PENDING, RUNNING, STOPPED
from hpsearch.experiment.trial_status import (
    recorded_status,
    running_again,
    summary_entries,
    trial_status,
    tune_status,
)
from hpsearch.experiment.usage import Stint


def _never() -> bool:
    raise AssertionError("Tune's files were read although the records decided")


def _status(**given: object) -> str:
    facts: dict[str, object] = {
        "outcome": None,
        "summarised": None,
        "error_file": lambda: False,
        "tune_name": lambda: None,
        "iterations": 4,
        "max_t": None,
        "ended": True,
    }
    facts.update(given)
    return trial_status(**facts)  # type: ignore[arg-type]  # keyword arguments built for each case


def test_the_records_decide_first_and_tunes_files_are_not_read() -> None:
    assert _status(outcome={"status": STOPPED}, summarised={"status": FINISHED}, error_file=_never) == STOPPED
    assert _status(summarised={"status": ERRORED}, error_file=_never, tune_name=_never) == ERRORED


def test_a_record_with_no_known_status_gives_way_to_the_next() -> None:
    assert recorded_status({"status": "weird"}) is recorded_status({}) is recorded_status(None) is None
    assert _status(outcome={"status": "weird"}, summarised={"status": STOPPED}) == STOPPED
    assert _status(outcome={"status": "weird"}, error_file=lambda: True) == ERRORED


def test_tunes_files_then_whether_the_search_ended() -> None:
    assert _status(error_file=lambda: True, tune_name=lambda: "TERMINATED") == ERRORED
    assert _status(tune_name=lambda: "TERMINATED", iterations=2, max_t=4) == STOPPED  # short of max_t
    assert _status(tune_name=lambda: "TERMINATED", iterations=4, max_t=4) == FINISHED
    assert _status(tune_name=lambda: "PAUSED") == PENDING
    assert _status(tune_name=lambda: "SOMETHING_NEW", ended=False) == RUNNING
    assert _status(ended=True) == FINISHED
    assert tune_status("TERMINATED", iterations=1, max_t=None) == FINISHED  # no early stopping: finished


def test_an_interrupted_searchs_summary_counts_only_its_errored_trials() -> None:
    summary = {"trials": [{"trial_id": "a", "status": FINISHED}, {"trial_id": "b", "status": ERRORED}, {"x": 1}]}
    assert set(summary_entries(summary, ended=True)) == {"a", "b"}
    assert set(summary_entries(summary, ended=False)) == {"b"}
    assert summary_entries(None, ended=True) == {}


def test_a_trial_a_budget_stopped_runs_again_only_while_a_later_run_has_no_end() -> None:
    stopped = {"status": STOPPED, "ended_by": "max_wall_time", "ended_at": 100.0}
    assert running_again(stopped, [Stint(50.0, 100.0), Stint(120.0)])
    assert not running_again(stopped, [Stint(50.0, 100.0), Stint(120.0, 130.0)])  # it ended again
    assert not running_again(stopped, [Stint(50.0)])  # the stint the budget stopped
    assert not running_again({"status": STOPPED, "ended_at": 100.0}, [Stint(120.0)])  # not stopped by a budget


# ----------------------------------------------------------------------------- the two views of one folder


def _append_raw(exp: Path, record: dict[str, object]) -> None:
    """An outcome line as a damaged file or a newer hpsearch may hold it (append_outcome refuses an unknown status)."""
    append_line(exp / OUTCOMES_FILE, record)


@pytest.mark.parametrize("summary", [True, False], ids=["ended", "no-summary"])
def test_read_outcomes_and_load_results_agree_on_every_recorded_status(tmp_path: Path, summary: bool) -> None:
    trials = [*standard_trials(), FakeTrial("aaaa0006", {"lr": 0.1}, [0.7, 0.6, 0.5, 0.4])]
    exp = write_experiment(tmp_path / "exp", trials, state=True, summary=summary)
    files.append_outcome(exp, files.Outcome("aaaa0004", FINISHED, ended_at=T0 + 200))  # retried, then finished
    _append_raw(exp, {"trial_id": "aaaa0006", "status": "weird", "ended_at": T0 + 200})  # the last line: unknown
    _append_raw(exp, {"trial_id": "aaaa0001", "status": "weird"})
    _append_raw(exp, {"trial_id": "aaaa0001", "status": FINISHED})  # a later known line wins again
    recorded = files.read_outcomes(exp)
    shown = dict(zip(load_results(exp).trials["trial_id"], load_results(exp).trials["status"]))
    assert recorded == {t: shown[t] for t in recorded}  # every trial the outcomes name, the same in both
    assert recorded["aaaa0004"] == shown["aaaa0004"] == FINISHED
    assert "aaaa0006" not in recorded  # its last line names no status: both fall through to the next record
    assert shown["aaaa0006"] == FINISHED  # the summary's entry, or Tune's TERMINATED after all 4 epochs


def test_the_one_view_that_differs_on_purpose_a_budget_stopped_trial_running_again(tmp_path: Path) -> None:
    trial = FakeTrial("aaaa0001", {"lr": 0.1}, [0.7, 0.6], status=STOPPED, ended_by="max_wall_time")
    exp = write_experiment(tmp_path / "exp", [trial], usage=True)
    ended_at = files.read_outcome_records(exp)["aaaa0001"]["ended_at"]
    files.record_trial_stint(exp, "aaaa0001", started_at=ended_at + 10, resources={"CPU": 1.0})  # resume started it
    assert files.read_outcomes(exp) == {"aaaa0001": STOPPED}  # how it last ended
    assert load_results(exp).trials["status"].tolist() == [RUNNING]  # what it is now
