"""How each trial ended, decided once and written to the experiment folder as it happens.

:class:`OutcomeRecorder` is the Tune callback that owns the decision. Tune says only that
a trial completed or errored; whether a completed trial *finished* or was *stopped* early
by the scheduler is told apart here: Tune marks the result the scheduler (or a stopper)
stopped the trial on with ``done=True``, while a trial whose function returns ends with a
duplicate result that callbacks never see. A ``done`` result at or past the scheduler's
budget (``max_t`` of its ``time_attr``) is a trial that finished its budget, not a stop.

Each end is appended to ``hpsearch_trials.jsonl`` with
:func:`hpsearch.experiment.files.append_outcome` at once, so it survives an interrupted
search. :class:`~hpsearch.runtime.progress.ProgressPrinter` reads the statuses from here;
place the recorder before the printer in the Tuner's callbacks (Tune calls them in order).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ray.tune import Callback

from hpsearch.experiment.files import Outcome, append_outcome
from hpsearch.experiment.layout import EPOCH, ERRORED, FINISHED, STOPPED, TUNE_ERROR_FILE, TrialStatus
from hpsearch.experiment.ranking import metric_value
from hpsearch.experiment.tracebacks import short_error

__all__ = ["OutcomeRecorder", "last_epoch"]


def last_epoch(result: dict[str, Any] | None) -> int | float | None:
    """A result's ``epoch``, else Tune's ``training_iteration``; ``None`` when it has neither.

    A whole number is an ``int`` (``3.0`` -> ``3``); a fractional epoch stays as reported.
    """
    result = result or {}
    value = result.get(EPOCH)
    if value is None:
        value = result.get("training_iteration")
    number = metric_value(value)
    if number is None or not math.isfinite(number):
        return None
    return int(number) if number.is_integer() else number


class OutcomeRecorder(Callback):
    """A Tune callback that decides how each trial ended and appends it to the experiment folder.

    Args:
        experiment_dir: The experiment folder; ``None`` to keep the outcomes in memory only.
        budget: The scheduler's budget, ``(time_attr, max_t)``: a trial stopped on a
            result at or past it finished. ``None`` when the scheduler has no budget.
        stream: Where a warning goes when the outcome cannot be written (stderr by default).

    Attributes:
        outcomes: Trial id -> how it ended (``finished``, ``stopped``, ``errored``); a
            trial retried after an error holds its latest end.
        records: Trial id -> the :class:`~hpsearch.experiment.files.Outcome` of its latest end.
        reports: Trial id -> how many results Tune delivered for it in this run of the search.
    """

    def __init__(
        self,
        experiment_dir: str | Path | None,
        *,
        budget: tuple[str, float] | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.experiment_dir = None if experiment_dir is None else str(experiment_dir)
        self.budget = budget
        self.stream = stream  # None: sys.stderr at the time of writing
        self.reports: dict[str, int] = {}
        self._stopped: set[str] = set()
        self.outcomes: dict[str, TrialStatus] = {}
        self.records: dict[str, Outcome] = {}

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its callbacks into the experiment state; a stream is not picklable.
        return {**self.__dict__, "stream": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Restored by Tuner.restore in a new run of the search: its reports are counted afresh.
        self.__dict__.update(state)
        self.reports = {}

    # -- Tune callback hooks
    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        self.reports[trial.trial_id] = self.reports.get(trial.trial_id, 0) + 1
        if result.get("done") and not self._budget_spent(result):
            self._stopped.add(trial.trial_id)

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        status = STOPPED if trial.trial_id in self._stopped else FINISHED
        self._record(trial, status)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._record(trial, ERRORED, _error_line(trial))

    # -- helpers
    def _budget_spent(self, result: dict[str, Any]) -> bool:
        if self.budget is None:
            return False
        attr, limit = self.budget
        value = result.get(attr)
        return isinstance(value, (int, float)) and value >= limit

    def _record(self, trial: Any, status: TrialStatus, error: str = "") -> None:
        """Remember how a trial ended, here and in the experiment folder (one JSON line per trial end)."""
        outcome = Outcome(
            trial_id=trial.trial_id,
            status=status,
            reports=self.reports.get(trial.trial_id, 0),
            last_epoch=last_epoch(trial.last_result),
            ended_at=time.time(),
            error=error,
        )
        self.outcomes[trial.trial_id] = status
        self.records[trial.trial_id] = outcome
        if self.experiment_dir is None:
            return
        try:
            append_outcome(self.experiment_dir, outcome)
        except OSError as err:  # the search matters more than this record
            print(
                f"hpsearch: warning: could not record the end of {trial.trial_id}: {err}",
                file=self.stream or sys.stderr,
                flush=True,
            )


def _error_line(trial: Any) -> str:
    """The line that says why a trial errored: from Tune's error object, else from its error.txt."""
    error = None
    try:
        error = trial.get_pickled_error() or trial.get_error()
    except Exception:  # noqa: BLE001 - the message is a courtesy; never fail the search over it
        pass
    return short_error(error) or _error_file_line(trial)


def _error_file_line(trial: Any) -> str:
    """The error line of the trial's error.txt, when Tune holds no error object for it yet."""
    try:
        return short_error((Path(trial.local_path) / TUNE_ERROR_FILE).read_text(encoding="utf-8"))
    except (OSError, TypeError):
        return ""
