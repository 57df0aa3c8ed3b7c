"""Progress lines while a search runs, in place of Ray's console tables and log flood.

The printer writes one line when a trial starts and one when it ends. A trial that
finished, or was stopped early by the scheduler, shows the metric, the last epoch and how
many reports it made. An errored trial shows its error and the path of its full
traceback. A status line comes at most every ``status_every_s`` seconds. Every line goes
through :mod:`hpsearch.messages` (stderr by default).

On ``resume``, ``Tuner.restore`` unpickles the printer as it was when the search started.
So at the first step of the resumed run, the counts and the best value are rebuilt from
the experiment folder. A status line then says at once how many trials had ended before
the resume. A resumed search counts the whole search, each trial once, by its latest end.

The printer only prints: how a trial ended is decided by
:class:`~hpsearch.runtime.search.outcomes.OutcomeRecorder`, which it is given and reads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ray.tune import Callback

from hpsearch import messages
from hpsearch.experiment.files import Outcome, read_history, read_outcome_records
from hpsearch.experiment.layout import (
    EPOCH,
    ERRORED,
    FINISHED,
    STOPPED,
    TUNE_ERROR_FILE,
    TrialStatus,
    flatten_config,
)
from hpsearch.experiment.metrics import report_epoch, report_value, report_violation
from hpsearch.experiment.ranking import is_better, metric_value
from hpsearch.formatting import number, plural
from hpsearch.runtime.search.outcomes import OutcomeRecorder
from hpsearch.runtime.search.room import GATE
from hpsearch.spec.constraints import Constraint

__all__ = ["ProgressPrinter"]


#: The search's total trials as the resume in this process runs it (``None``: no resume here); set by
#: :func:`resumed_total` before ``Tuner.restore`` unpickles the printer with the total it was started with.
_RESUMED_TOTAL: int | None = None


def resumed_total(total: int) -> None:
    """Before ``Tuner.restore``: the total trials of the search as resumed (``resume --set num_samples=N``
    grows it), for the restored printer's status line."""
    global _RESUMED_TOTAL
    _RESUMED_TOTAL = total


class ProgressPrinter(Callback):
    """A Tune callback that prints a short line per trial event and a periodic status.

    Args:
        metric: The search metric, shown on each end line and in the status line.
        mode: ``"min"`` or ``"max"``, to track the best value.
        recorder: The :class:`OutcomeRecorder` of the same search, placed before this
            printer in the Tuner's callbacks: it says how each trial ended.
        total: Trials the search will run, for the status line.
        varying: The parameters shown on a start line (default: every one).
        status_every_s: Seconds between status lines.
        concurrency: Trials meant to run at once: with fewer running and some pending,
            ``waiting_reason`` is asked why.
        waiting_reason: Says why pending trials cannot start, or ``None``.
        placement_status: On an autoscaling cluster: says why running trials wait for their workers
            (``waiting for a node to start`` or ``cannot be placed``), or ``None`` when none waits.
            Asked every ``placement_every_s`` seconds; its line is printed when it changes, and with
            every status line; a ``cannot be placed`` line only once two looks in a row found it (a
            node that has just joined holds a pending group for a moment before Ray places it).
        placement_every_s: Seconds between two questions to ``placement_status``.
        constraints: The spec's constraints: an end line says when the last report broke them, and
            only reports that keep them count for the best value.
        clock: Seconds, for the elapsed time on each line and the status interval.
    """

    def __init__(
        self,
        metric: str,
        mode: str,
        recorder: OutcomeRecorder,
        *,
        total: int | None = None,
        varying: list[str] | None = None,
        status_every_s: float = 30.0,
        concurrency: int | None = None,
        waiting_reason: Callable[[], str | None] | None = None,
        placement_status: Callable[[], str | None] | None = None,
        placement_every_s: float = 5.0,
        constraints: Sequence[Constraint] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.metric, self.mode = metric, mode
        self.constraints = tuple(constraints)
        self.recorder = recorder
        self.total = total
        self.varying = varying
        self.status_every_s = status_every_s
        self._clock = clock
        self._start = clock()
        self._last_status = self._start
        self._best: tuple[float, str] | None = None
        self._ended: dict[str, TrialStatus] = {}  # trial id -> its latest end: each trial counts once
        self._restored: int | None = None  # trials that had ended before a resume; None: not resumed
        self._seed_pending = False  # restored: rebuild the counts from the folder at the first step
        self._concurrency = concurrency
        self._waiting_reason = waiting_reason
        self._placement_status = placement_status
        self._placement_every_s = placement_every_s
        self._last_placement_check = self._start
        self._placement: str | None = None  # the placement line last printed
        self._placement_seen: str | None = None  # the placement line the last look found

    # -- helpers
    def _print(self, text: str) -> None:
        elapsed = int(self._clock() - self._start)
        messages.line(f"[{elapsed // 60:02d}:{elapsed % 60:02d}] {text}")

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Restored by Tuner.restore in a new process: its clocks start now, and its counts are those
        # of when the search started (Tune pickled the callbacks then): rebuilt at the first step.
        self.__dict__.update(state)
        self.__dict__.pop("_counts", None)  # a printer pickled by an older hpsearch counted by status
        self.__dict__.setdefault("_ended", {})
        self.__dict__.setdefault("_restored", None)
        self.__dict__.setdefault("_placement_status", None)  # a printer pickled before autoscaling support
        self.__dict__.setdefault("_placement_every_s", 5.0)
        self.__dict__.setdefault("_placement", None)
        self.__dict__.setdefault("_placement_seen", None)
        self._seed_pending = True
        self._start = self._last_status = self._last_placement_check = self._clock()
        if _RESUMED_TOTAL is not None and self.total is not None:  # a search grown on resume counts its new total
            self.total = _RESUMED_TOTAL

    def _params(self, trial: Any) -> str:
        flat = flatten_config(trial.config)
        keys = self.varying if self.varying is not None else list(flat)
        return " ".join(f"{k}={number(flat[k])}" for k in keys if k in flat)

    def _outcome(self, trial: Any, default: TrialStatus) -> Outcome:
        """The recorder's record of how the trial ended (one from the trial itself if it has none)."""
        outcome = self.recorder.records.get(trial.trial_id)
        if outcome is None:  # the recorder was not placed before the printer
            outcome = Outcome(trial.trial_id, default, last_epoch=report_epoch(trial.last_result))
        return outcome

    def _end(self, result: dict[str, Any], outcome: Outcome) -> str:
        """``val_loss=0.1234 at epoch 3 (4 reports)``: the last value, the last epoch, the count of reports."""
        value = report_value(result, self.metric)
        shown = f"{self.metric}={number(value) if value is not None else '?'}"
        if outcome.last_epoch is not None:
            unit = "epoch" if result.get(EPOCH) is not None else "iteration"
            shown += f" at {unit} {number(outcome.last_epoch)}"
        over = report_violation(result, self.constraints) if self.constraints and result else 0.0
        broken = f", infeasible: violated by {number(over)}" if over > 0 else ""
        return f"{shown} ({plural(outcome.reports, 'report')}{broken})"

    def _track_best(self, trial_id: str, result: dict[str, Any]) -> None:
        """The best value so far, by the ranking's rules: only finite numbers count (NaN never wins), and only
        reports that keep the constraints."""
        if self.constraints and report_violation(result, self.constraints) > 0:
            return
        value = metric_value(report_value(result, self.metric))
        if value is None or not math.isfinite(value):
            return
        if self._best is None or is_better(value, self._best[0], "min" if self.mode == "min" else "max"):
            self._best = (value, trial_id)

    def _traceback_path(self, trial: Any) -> str:
        """The trial's ``error.txt`` in the experiment folder.

        That folder is Tune's ``trial.path``. ``local_path`` is only a fallback: it is the driver's
        staging copy in Ray's session folder, which Tune syncs to the experiment folder.
        """
        folder = getattr(trial, "path", None) or getattr(trial, "local_path", None)
        return str(Path(folder) / TUNE_ERROR_FILE) if folder else f"{TUNE_ERROR_FILE} in the trial's folder"

    def _seed(self, trials: list[Any]) -> None:
        """After a restore: the trials that had ended count as done, and their reports for the best value.

        Tune's restored statuses say which trials stay ended. A trial that was running runs
        again, and so does an errored one retried with ``--retry-errored``; each counts when it
        ends. The outcomes file says which of the ended trials were stopped early. Every report
        kept in the trials' histories (``train/<id>/hpsearch_history.jsonl``) counts for the
        best value.
        """
        folder = self.recorder.experiment_dir
        records = read_outcome_records(folder) if folder is not None else {}
        self._ended = {}
        for trial in trials:
            if trial.status == "TERMINATED":
                recorded = records.get(trial.trial_id, {}).get("status")
                self._ended[trial.trial_id] = STOPPED if recorded == STOPPED else FINISHED
            elif trial.status == "ERROR":
                self._ended[trial.trial_id] = ERRORED
        self._restored = len(self._ended)
        self._best = None
        for trial in trials:
            rows = read_history(folder, trial.trial_id) if folder is not None else []
            for row in rows or [trial.last_result or {}]:
                self._track_best(trial.trial_id, row)

    def _status(self, trials: list[Any]) -> None:
        self._last_status = self._clock()
        running = sum(1 for t in trials if t.status == "RUNNING")
        pending = sum(1 for t in trials if t.status == "PENDING")
        ended = list(self._ended.values())
        total = f"/{self.total}" if self.total else ""
        restored = f"; {self._restored} ended before the resume" if self._restored is not None else ""
        best = f" | best {self.metric}={number(self._best[0])} ({self._best[1]})" if self._best else ""
        room = f", {GATE.waiting} waiting for room" if GATE.waiting else ""  # on a shared cluster (room.py)
        self._print(
            f"status   {len(ended)}{total} done ({ended.count(STOPPED)} stopped early, "
            f"{ended.count(ERRORED)} errored{restored}), {running} running, {pending} pending{room}{best}"
        )
        if pending and self._concurrency and running < self._concurrency and self._waiting_reason:
            try:
                reason = self._waiting_reason()
            except Exception as err:  # noqa: BLE001 - a diagnosis must never break the search
                reason = f"could not read the cluster: {err}"
            if reason:
                self._print(f"waiting  {pending} trial(s) cannot start: {reason}")
        self._check_placement(always=True)

    def _check_placement(self, *, always: bool = False) -> None:
        """On an autoscaling cluster: print why running trials wait for their workers, when it changes
        (``always``: with a status line, whenever any waits)."""
        if self._placement_status is None:
            return
        self._last_placement_check = self._clock()
        try:
            line = self._placement_status()
        except Exception as err:  # noqa: BLE001 - a diagnosis must never break the search
            line = f"could not read the cluster: {err}"
        seen_before, self._placement_seen = self._placement_seen, line
        if line and " cannot be placed: " in line and line != seen_before:
            # Seen once, it may be a moment's: a node that has just joined, before Ray placed the group on it.
            # Said when the next look, placement_every_s later, finds the same.
            return
        if line and (always or line != self._placement):
            self._print(f"waiting  {line}")
        self._placement = line

    def _restored_status(self, trials: list[Any]) -> None:
        """The first event of a resumed run: count what had ended, and say at once where the search stands."""
        if self._seed_pending:
            self._seed_pending = False
            self._seed(trials)
            self._status(trials)

    # -- Tune callback hooks
    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self._restored_status(trials)

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self._restored_status(trials)  # a resumed search with nothing left to run takes no step

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        if trial.trial_id in self.recorder.not_retried:
            return  # failed the same way twice: this start ends at once, and its error line says why
        self._print(f"start    {trial.trial_id}  {self._params(trial)}")

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        self._track_best(trial.trial_id, result)

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        outcome = self._outcome(trial, FINISHED)
        ended = outcome.status
        self._ended[trial.trial_id] = ended
        suffix = "  (stopped early by the scheduler)" if ended == STOPPED else ""
        self._print(f"{ended:<8} {trial.trial_id}  {self._end(trial.last_result or {}, outcome)}{suffix}")

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        outcome = self._outcome(trial, ERRORED)
        self._ended[trial.trial_id] = ERRORED
        error = outcome.error or "see its traceback"
        self._print(f"ERROR    {trial.trial_id}  {error}  (traceback: {self._traceback_path(trial)})")

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        if self._clock() - self._last_status >= self.status_every_s:
            self._status(trials)
        elif (
            self._placement_status is not None and self._clock() - self._last_placement_check >= self._placement_every_s
        ):
            self._check_placement()
