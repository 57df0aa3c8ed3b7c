"""OutcomeRecorder decides how each trial ended and writes it; ProgressPrinter prints it.

Driven by hand with fake trials, as Tune would call them; no Ray is started.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import pytest
from fake_tune import FakeTrial, TuneEvents

from hpsearch.experiment.files import append_history, read_outcome_records, read_outcomes, run_dir
from hpsearch.experiment.layout import ERRORED, FINISHED, STOPPED, TUNE_ERROR_FILE
from hpsearch.runtime.search.outcomes import OutcomeRecorder, last_epoch
from hpsearch.runtime.search.progress import ProgressPrinter

TRACEBACK = """Traceback (most recent call last):
  File "my_train.py", line 3, in train_loop
    raise ValueError("x='bad' is not a usable value")
ValueError: x='bad' is not a usable value
"""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


#: Every line hpsearch prints during the current test (set by the autouse fixture below).
SAID = io.StringIO()


@pytest.fixture(autouse=True)
def _capture(said):
    global SAID
    SAID = said
    yield


class Search(TuneEvents):
    """A recorder and a printer in Tune's order, and the events Tune sends them."""

    def __init__(self, exp_dir: Path, max_t: tuple[str, float] | None = ("epoch", 4), total: int = 5) -> None:
        self.clock = Clock()
        self.said_from = len(SAID.getvalue())  # what hpsearch printed before this search is not its own
        self.recorder = OutcomeRecorder(exp_dir, max_t=max_t)
        self.printer = ProgressPrinter(
            "val_loss", "min", self.recorder, total=total, varying=["lr", "layers"], clock=self.clock
        )
        self.callbacks = [self.recorder, self.printer]

    def restored(self) -> Search:
        """This search as ``Tuner.restore`` brings its callbacks back: unpickled, printing to a new stream."""
        restored = Search.__new__(Search)
        restored.recorder, restored.printer = pickle.loads(self.pickled)
        restored.callbacks = [restored.recorder, restored.printer]
        restored.clock = restored.printer._clock
        restored.said_from = len(SAID.getvalue())
        return restored

    def pickle_as_tune_does(self) -> None:
        """Tune pickles the callbacks once, when the search starts (tuner.pkl): that is what a restore gets."""
        self.pickled = pickle.dumps(self.callbacks)

    def report(self, trial: FakeTrial, **result: Any) -> None:
        result.setdefault("done", False)
        trial.last_result = result
        for callback in self.callbacks:
            callback.on_trial_result(0, [], trial, result)

    def lines(self) -> list[str]:
        """What hpsearch printed since this search started (or was restored)."""
        return SAID.getvalue()[self.said_from :].splitlines()


def test_a_loop_numbering_its_epochs_from_0_is_at_epoch_3_after_4_reports(tmp_path) -> None:
    search = Search(tmp_path)
    trial = FakeTrial("t1", {"lr": 0.001, "layers": 2, "epochs": 4})
    search.start(trial)
    for epoch in range(4):  # epochs 0, 1, 2, 3, as Ray's and PyTorch's examples number them
        search.report(trial, val_loss=0.5 - 0.1 * epoch, epoch=epoch, training_iteration=epoch + 1)
    search.complete(trial)

    assert search.lines() == [
        "[00:00] start    t1  lr=0.001 layers=2",
        "[00:00] finished t1  val_loss=0.2 at epoch 3 (4 reports)",
    ]
    [record] = read_outcome_records(tmp_path).values()
    assert {k: record[k] for k in ("trial_id", "status", "reports", "last_epoch", "error")} == {
        "trial_id": "t1",
        "status": FINISHED,
        "reports": 4,
        "last_epoch": 3,
        "error": "",
    }
    assert isinstance(record["ended_at"], float)
    assert search.recorder.outcomes == {"t1": FINISHED}


def test_stopped_by_the_scheduler_before_its_max_t_finished_at_it_and_errored(tmp_path) -> None:
    search = Search(tmp_path)
    stopped = FakeTrial("t2", {"lr": 0.1, "layers": 1})
    at_max_t = FakeTrial("t3", {"lr": 0.01, "layers": 3})
    errored = FakeTrial("t4", {"lr": 1.0, "layers": 1}, error=RuntimeError(TRACEBACK), local_path="/exp/t4-folder")
    from_file = FakeTrial("t5", {"lr": 0.5, "layers": 1}, local_path=str(tmp_path / "t5-folder"))
    (tmp_path / "t5-folder").mkdir()
    (tmp_path / "t5-folder" / TUNE_ERROR_FILE).write_text("Failure # 1\n" + TRACEBACK.replace("ValueError", "KeyError"))
    for trial in (stopped, at_max_t, errored, from_file):
        search.start(trial)

    search.report(stopped, val_loss=0.9, epoch=1, training_iteration=1, done=True)  # ASHA stops it at epoch 1 of 4
    search.complete(stopped)
    for epoch in range(1, 5):  # the scheduler ends it with done=True on its last epoch: that is its max_t, not a stop
        search.report(at_max_t, val_loss=1.0 / epoch, epoch=epoch, training_iteration=epoch, done=epoch == 4)
    search.complete(at_max_t)
    search.report(errored, val_loss=2.0, epoch=1, training_iteration=1)
    search.clock.now += 75
    search.error(errored)
    search.error(from_file)  # Tune holds no error object: the line comes from the trial's error.txt

    assert search.lines()[4:] == [
        "[00:00] stopped  t2  val_loss=0.9 at epoch 1 (1 report)  (stopped early by the scheduler)",
        "[00:00] finished t3  val_loss=0.25 at epoch 4 (4 reports)",
        "[01:15] ERROR    t4  ValueError: x='bad' is not a usable value  (traceback: /exp/t4-folder/error.txt)",
        f"[01:15] ERROR    t5  KeyError: x='bad' is not a usable value  (traceback: {tmp_path}/t5-folder/error.txt)",
    ]
    records = read_outcome_records(tmp_path)
    assert {t: (r["status"], r["reports"], r["last_epoch"]) for t, r in records.items()} == {
        "t2": (STOPPED, 1, 1),
        "t3": (FINISHED, 4, 4),
        "t4": (ERRORED, 1, 1),
        "t5": (ERRORED, 0, None),
    }
    assert records["t4"]["error"] == "ValueError: x='bad' is not a usable value"
    assert records["t5"]["error"] == "KeyError: x='bad' is not a usable value"
    assert (
        read_outcomes(tmp_path)
        == search.recorder.outcomes
        == {"t2": STOPPED, "t3": FINISHED, "t4": ERRORED, "t5": ERRORED}
    )

    search.clock.now += 30
    pending = FakeTrial("t6", {}, status="PENDING")
    search.printer.on_step_end(0, [stopped, at_max_t, errored, from_file, pending])
    assert search.lines()[-1] == (
        "[01:45] status   4/5 done (1 stopped early, 2 errored), 0 running, 1 pending | best val_loss=0.25 (t3)"
    )


def test_a_stop_at_a_rung_that_races_the_last_report_is_a_finish(tmp_path) -> None:
    # ASHA stops the trial at its epoch-3 rung while its epoch-4 report is already on its way: Tune completes
    # the trial holding that last result. It reached its max_t, so it finished; "stopped" with 4 of 4
    # epochs would call a complete trial cut short.
    search = Search(tmp_path)
    trial = FakeTrial("t8", {"lr": 0.1, "layers": 1})
    search.start(trial)
    for epoch in (1, 2):
        search.report(trial, val_loss=1.0 / epoch, epoch=epoch, training_iteration=epoch)
    search.report(trial, val_loss=0.33, epoch=3, training_iteration=3, done=True)
    trial.last_result = {"val_loss": 0.25, "epoch": 4, "training_iteration": 4}
    search.complete(trial)
    assert read_outcome_records(tmp_path)["t8"]["status"] == FINISHED
    assert search.recorder.outcomes == {"t8": FINISHED}


def test_a_trial_that_reports_no_epoch_ends_at_an_iteration(tmp_path) -> None:
    search = Search(tmp_path, max_t=None)
    trial = FakeTrial("t7", {"lr": 0.2})
    search.start(trial)
    search.report(trial, val_loss=0.5, training_iteration=1)
    search.report(trial, training_iteration=2)  # the metric not in its last result
    search.complete(trial)
    assert search.lines()[-1] == "[00:00] finished t7  val_loss=? at iteration 2 (2 reports)"
    assert read_outcome_records(tmp_path)["t7"]["last_epoch"] == 2


def test_a_retried_trial_keeps_its_last_end_and_a_folder_that_cannot_be_written_only_warns(tmp_path) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    search = Search(blocked / "exp")
    trial = FakeTrial("t8", {"lr": 0.3})
    search.report(trial, val_loss=1.0, epoch=1)
    search.error(trial)
    search.report(trial, val_loss=0.5, epoch=1)  # Tune retried it (failure.trial_retries)
    search.complete(trial)
    assert search.recorder.outcomes == {"t8": FINISHED}
    assert search.recorder.records["t8"].reports == 2
    warnings = [line for line in search.lines() if "warning" in line]
    assert len(warnings) == 2 and warnings[0].startswith("hpsearch: warning: could not record the end of t8: ")


def test_the_recorder_and_the_printer_pickle_together_without_their_stream(tmp_path) -> None:
    search = Search(tmp_path)
    trial = FakeTrial("t9", {"lr": 0.4})
    search.report(trial, val_loss=1.0, epoch=1)
    search.complete(trial)
    recorder, printer = pickle.loads(pickle.dumps(search.callbacks))  # as Tune saves its experiment state
    assert printer.recorder is recorder  # one recorder after a restore too
    assert "stream" not in vars(recorder) and "stream" not in vars(printer)  # they print through hpsearch.messages
    assert recorder.outcomes == {"t9": FINISHED} and recorder.reports == {}  # reports count afresh in a new run


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"epoch": 3, "training_iteration": 4}, 3),
        ({"epoch": 0}, 0),
        ({"epoch": 2.0}, 2),
        ({"epoch": 2.5}, 2.5),
        ({"training_iteration": 7}, 7),
        ({"epoch": None, "training_iteration": 7}, 7),
        ({}, None),
        (None, None),
    ],
)
def test_last_epoch_is_the_epoch_else_the_iteration(result, expected) -> None:
    assert last_epoch(result) == expected


def test_the_status_lines_best_never_is_nan_and_follows_mode(tmp_path) -> None:
    search = Search(tmp_path)
    nan_first, good, worse = (FakeTrial(t, {"lr": 0.1}) for t in ("t1", "t2", "t3"))
    search.report(nan_first, val_loss=float("nan"), epoch=1)
    search.report(good, val_loss=0.5, epoch=1)
    search.report(worse, val_loss=0.9, epoch=1)
    search.report(worse, val_loss=float("-inf"), epoch=2)  # diverged: not a best value
    search.clock.now += 31
    search.printer.on_step_end(0, [nan_first, good, worse])
    assert search.lines()[-1].endswith("| best val_loss=0.5 (t2)")


def _run_until_killed(tmp_path: Path) -> Search:
    """Six trials, as a search killed in the middle leaves them; Tune pickled the callbacks at the start."""
    search = Search(tmp_path, total=6)
    search.pickle_as_tune_does()
    trials = {t: FakeTrial(t, {"lr": 0.1, "layers": 1}) for t in ("t1", "t2", "t3", "t4", "t5", "t6")}
    for trial in trials.values():
        search.start(trial)
    for trial_id, value in (("t1", 0.4), ("t2", 0.9), ("t3", 0.8), ("t4", 0.1), ("t5", 0.7), ("t6", 0.6)):
        # every report also reaches the trial's history, as the nested run's callback writes it
        append_history(run_dir(tmp_path, trial_id), {"val_loss": value, "epoch": 1})
        search.report(trials[trial_id], val_loss=value, epoch=1, training_iteration=1, done=trial_id == "t2")
    search.complete(trials["t1"])
    search.complete(trials["t2"])  # stopped early by the scheduler
    search.error(trials["t3"])
    search.complete(trials["t4"])  # ... and the search was killed before Tune saved that t4 had ended
    search.error(trials["t5"])  # it will be retried (--retry-errored)
    return search  # t6 was running


def test_after_a_resume_the_first_status_line_counts_the_trials_that_had_ended(tmp_path) -> None:
    restored = _run_until_killed(tmp_path).restored()
    restored.clock.now += 2
    # Tune's restored statuses: t4 ran again (its end was not saved), t5 is retried, t6 continues.
    statuses = {"t1": "TERMINATED", "t2": "TERMINATED", "t3": "ERROR", "t4": "PENDING", "t5": "PENDING"}
    trials = {t: FakeTrial(t, {"lr": 0.1, "layers": 1}, status=s) for t, s in {**statuses, "t6": "PENDING"}.items()}
    restored.printer.on_step_begin(0, list(trials.values()))
    restored.printer.on_step_begin(1, list(trials.values()))  # said once, at the first step

    assert restored.lines() == [
        "[00:02] status   3/6 done (1 stopped early, 1 errored; 3 ended before the resume), 0 running, 3 pending"
        " | best val_loss=0.1 (t4)",  # every report counts for the best, also those of trials that run again
    ]

    # The trials that run again count once each, by their latest end.
    for trial_id in ("t4", "t5", "t6"):
        restored.start(trials[trial_id])
        restored.report(trials[trial_id], val_loss=0.5, epoch=2, training_iteration=1)
    restored.complete(trials["t4"])
    restored.complete(trials["t5"])  # errored before the resume, finished after it: finished
    restored.error(trials["t6"])
    restored.clock.now += 30
    restored.printer.on_step_end(2, list(trials.values()))
    assert restored.lines()[-1] == (
        "[00:32] status   6/6 done (1 stopped early, 2 errored; 3 ended before the resume), 0 running, 0 pending"
        " | best val_loss=0.1 (t4)"
    )


def test_a_resumed_search_with_nothing_left_to_run_still_says_where_it_stands(tmp_path) -> None:
    restored = _run_until_killed(tmp_path).restored()
    trials = [FakeTrial(t, {}, status=s) for t, s in (("t1", "TERMINATED"), ("t2", "TERMINATED"), ("t3", "ERROR"))]
    restored.printer.on_experiment_end(trials)  # Tune takes no step: every trial had ended
    assert restored.lines() == [
        "[00:00] status   3/6 done (1 stopped early, 1 errored; 3 ended before the resume), 0 running, 0 pending"
        " | best val_loss=0.4 (t1)",
    ]


def test_a_printer_pickled_by_an_older_hpsearch_resumes_too(tmp_path) -> None:
    search = Search(tmp_path)
    state = {
        k: v for k, v in search.printer.__getstate__().items() if k not in ("_ended", "_restored", "_seed_pending")
    }
    state["_counts"] = {FINISHED: 0, STOPPED: 0, ERRORED: 0}  # what the printer kept before it counted by trial
    printer = ProgressPrinter.__new__(ProgressPrinter)
    printer.__setstate__(state)
    before = len(SAID.getvalue())
    printer.on_step_begin(0, [FakeTrial("t1", {}, status="TERMINATED"), FakeTrial("t2", {}, status="PENDING")])
    assert SAID.getvalue()[before:] == (
        "[00:00] status   1/5 done (0 stopped early, 0 errored; 1 ended before the resume), 0 running, 1 pending\n"
    )


def test_under_constraints_the_best_skips_infeasible_reports_and_an_end_line_says_so(tmp_path) -> None:
    from hpsearch.spec.constraints import Constraint

    search = Search(tmp_path)
    search.printer.constraints = (Constraint(metric="n_params", max=1000),)
    small, big = FakeTrial("t1", {"lr": 0.1, "layers": 1}), FakeTrial("t2", {"lr": 0.1, "layers": 3})
    search.start(small)
    search.start(big)
    search.report(small, val_loss=0.5, n_params=800, epoch=1, training_iteration=1)
    search.report(big, val_loss=0.1, n_params=5000, epoch=1, training_iteration=1)  # better, but too big
    search.complete(big)
    search.clock.now += 31
    search.printer.on_step_end(0, [small, big])
    assert "[00:00] finished t2  val_loss=0.1 at epoch 1 (1 report, infeasible: violated by 4000)" in search.lines()
    assert search.lines()[-1].endswith("| best val_loss=0.5 (t1)")
