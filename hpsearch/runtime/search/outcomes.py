"""How each trial ended, decided once and written to the experiment folder as it happens.

:class:`OutcomeRecorder` is the Tune callback that makes this decision, and the only place
that does. Tune says only that a trial completed or errored. Whether a completed trial
*finished* or was *stopped* early by the scheduler is told apart here. When the scheduler
(or a stopper) stops a trial, Tune marks the result it stopped on with ``done=True``. A
trial whose function returns instead ends with a duplicate result that callbacks never see.
A ``done`` result at or past the scheduler's ``max_t`` (of its ``time_attr``) means the trial
ran to its end; it was not stopped.

Each end is appended at once to ``hpsearch_trials.jsonl``
(:func:`hpsearch.experiment.files.append_outcome`), so it survives an interrupted search. It counts
the restarts of the trial's worker group that a drained node caused (``preempted``): Ray Train makes
them inside the trial, so a trial that finished after them finished, and none of them is an error.

The recorder also writes to ``hpsearch_usage.jsonl``
(:func:`hpsearch.experiment.files.record_trial_stint`). For each run of a trial's driver it
records when the run started and when it ended, with the resources the trial holds. The
start is Tune's ``on_trial_start``, when the driver's actor is up. The end is Tune's end of
the trial, or of that attempt when Tune retries it. These records give the trial's
resource-hours and the budget's (:mod:`hpsearch.runtime.search.budget`). A trial whose function
returns ends after its nested run's teardown, so the teardown is counted too.

:class:`~hpsearch.runtime.search.progress.ProgressPrinter` reads the statuses from here. So place
the recorder before the printer in the Tuner's callbacks: Tune calls them in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray.tune import Callback

from hpsearch import messages
from hpsearch.experiment.files import (
    Outcome,
    append_outcome,
    read_preemptions,
    read_rank_progress,
    record_trial_stint,
    run_dir,
)
from hpsearch.experiment.layout import ERRORED, FINISHED, STOPPED, TUNE_ERROR_FILE, TrialStatus
from hpsearch.experiment.metrics import report_epoch as last_epoch  # the shared epoch rule, by the name callers use
from hpsearch.experiment.tracebacks import short_error
from hpsearch.experiment.worker_ranks import STALLED_PREFIX, UNEQUAL_PREFIX, rank_note
from hpsearch.runtime import retries
from hpsearch.runtime.rank_watch import RankHangError
from hpsearch.runtime.search.budget import resources_from_folder

__all__ = ["OutcomeRecorder", "last_epoch"]


class OutcomeRecorder(Callback):
    """A Tune callback that decides how each trial ended and appends it to the experiment folder.

    Args:
        experiment_dir: The experiment folder; ``None`` to keep the outcomes in memory only.
        max_t: The scheduler's ``(time_attr, max_t)``: a trial stopped on a result at or
            past it finished. ``None`` when the scheduler has no ``max_t``.
        error_note: Given an errored trial's id, words that start its error line (what the
            search saw happen to it, such as the host of its workers leaving the cluster), or ``""``.

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
        max_t: tuple[str, float] | None = None,
        error_note: Callable[[str], str] | None = None,
    ) -> None:
        self.experiment_dir = None if experiment_dir is None else str(experiment_dir)
        self.max_t = max_t
        self.error_note = error_note
        self.reports: dict[str, int] = {}
        self._stopped: set[str] = set()
        self.not_retried: set[str] = set()  # trials that failed the same way twice: Tune's last start ends at once
        self.outcomes: dict[str, TrialStatus] = {}
        self.records: dict[str, Outcome] = {}
        self._started: dict[str, float] = {}  # trial id -> when its driver's current run started
        self._resources: dict[str, float] | None = None  # one trial's resources, read once from the spec as run
        self._held: dict[str, dict[str, float]] = {}  # trial id -> what its current run holds (its own scaling)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Restored by Tuner.restore in a new run of the search: its reports and runs are counted afresh.
        self.__dict__.update(state)
        self.__dict__.setdefault("error_note", None)  # a recorder pickled by an older hpsearch
        self.not_retried = set()
        self.reports = {}
        self._started = {}
        self._resources = None
        self._held = {}

    # -- Tune callback hooks
    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        # A paused trial (pbt, pb2, hyperband) holds nothing until Tune starts it again, which is a new
        # run: end the current one now. Tune has no pause hook; its status says so by the step's end.
        for trial in trials:
            if getattr(trial, "status", None) == _PAUSED and trial.trial_id in self._started:
                self._end_run(trial.trial_id, "paused")

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._end_run(trial.trial_id, "paused")  # still open: it paused within the step it restarted in
        started = time.time()
        self._started[trial.trial_id] = started
        self._held[trial.trial_id] = self.trial_resources(getattr(trial, "config", None))
        self._record_run(trial.trial_id, started, None, None)

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._end_run(trial.trial_id, "retried")  # Tune runs it again: a new run starts at its next start
        if self.experiment_dir is not None and retries.stop_trial_retries(
            trial, str(run_dir(self.experiment_dir, trial.trial_id))
        ):
            self.not_retried.add(trial.trial_id)  # its driver ends at once: the printer shows no start for it

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        self.reports[trial.trial_id] = self.reports.get(trial.trial_id, 0) + 1
        if result.get("done") and not self._ran_to_max_t(result):
            self._stopped.add(trial.trial_id)

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        # A stop decided at a rung can race the trial's own last report: Tune may hold a later result by
        # the time the trial completes. A trial whose last result reached max_t ran to its end.
        stopped = trial.trial_id in self._stopped and not self._ran_to_max_t(trial.last_result or {})
        self._record(trial, STOPPED if stopped else FINISHED)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        note = ""
        if self.error_note is not None:
            try:
                note = self.error_note(trial.trial_id)
            except Exception:  # noqa: BLE001 - the note is a courtesy; never fail the search over it
                pass
        line, text = _error_line(trial)
        self._record(trial, ERRORED, note + line + self._rank_note(trial.trial_id, text, line))

    # -- helpers
    def _rank_note(self, trial_id: str, text: str, line: str) -> str:
        """`` (rank 1; its log: <path>)``: the rank the error came from and its log, read from the
        trial's rank records (the latest attempt's); for a hang, the attempt's logs folder."""
        if self.experiment_dir is None:
            return ""
        try:
            attempts = read_rank_progress(run_dir(self.experiment_dir, trial_id))
            return rank_note(attempts, text, hang=line.startswith((UNEQUAL_PREFIX, STALLED_PREFIX)))
        except Exception:  # noqa: BLE001 - the note is a courtesy; never fail the search over it
            return ""

    def _preempted(self, trial_id: str) -> int:
        """How many times the trial's worker group started again because a node of it was drained: restarts
        Ray Train made inside the trial, never an error of it (its records: :mod:`hpsearch.experiment.preemptions`)."""
        if self.experiment_dir is None:
            return 0
        try:
            return sum(p.restarted for p in read_preemptions(run_dir(self.experiment_dir, trial_id)))
        except Exception:  # noqa: BLE001 - a count in the record, never a reason to fail the search
            return 0

    def _ran_to_max_t(self, result: dict[str, Any]) -> bool:
        if self.max_t is None:
            return False
        attr, limit = self.max_t
        value = result.get(attr)
        return isinstance(value, (int, float)) and value >= limit

    def trial_resources(self, config: dict[str, Any] | None = None) -> dict[str, float]:
        """One trial's resources (driver + worker bundles), from the spec as run in the experiment folder;
        ``config`` (the trial's) sizes a trial whose scaling is searched (its ``scaling.*`` values)."""
        if isinstance(config, dict) and isinstance(config.get("scaling"), dict) and self.experiment_dir:
            return resources_from_folder(self.experiment_dir, config)  # read per trial: trials differ in size
        if self._resources is None:
            self._resources = resources_from_folder(self.experiment_dir) if self.experiment_dir else {}
        return self._resources

    def _end_run(self, trial_id: str, end: str) -> None:
        started = self._started.pop(trial_id, None)
        if started is not None:
            self._record_run(trial_id, started, time.time(), end)

    def _record_run(self, trial_id: str, started: float, ended: float | None, end: str | None) -> None:
        if self.experiment_dir is None:
            return
        try:
            resources = self._held.get(trial_id) or self.trial_resources()
            record_trial_stint(
                self.experiment_dir, trial_id, started_at=started, ended_at=ended, resources=resources, end=end
            )
        except Exception as err:  # noqa: BLE001 - the search matters more than this record
            messages.say(f"warning: could not record the run of {trial_id}: {err}")

    def _record(self, trial: Any, status: TrialStatus, error: str = "") -> None:
        """Remember how a trial ended, here and in the experiment folder (one JSON line per trial end)."""
        self._end_run(trial.trial_id, status)
        outcome = Outcome(
            trial_id=trial.trial_id,
            status=status,
            reports=self.reports.get(trial.trial_id, 0),
            last_epoch=last_epoch(trial.last_result),
            ended_at=time.time(),
            error=error,
            preempted=self._preempted(trial.trial_id),
        )
        self.outcomes[trial.trial_id] = status
        self.records[trial.trial_id] = outcome
        if self.experiment_dir is None:
            return
        try:
            append_outcome(self.experiment_dir, outcome)
        except OSError as err:  # the search matters more than this record
            messages.say(f"warning: could not record the end of {trial.trial_id}: {err}")


#: Tune's status of a paused trial (``ray.tune.experiment.Trial.PAUSED``).
_PAUSED = "PAUSED"


def _error_line(trial: Any) -> tuple[str, str]:
    """The line that says why a trial errored, and the whole text it is from: Tune's error object, else
    the trial's error.txt."""
    error = None
    try:
        error = trial.get_pickled_error() or trial.get_error()
    except Exception:  # noqa: BLE001 - the message is a courtesy; never fail the search over it
        pass
    line, text = short_error(error), str(error) if error is not None else ""
    if not line:  # Tune holds no error object for it yet
        try:
            text = (Path(trial.local_path) / TUNE_ERROR_FILE).read_text(encoding="utf-8")
        except (OSError, TypeError):
            text = ""
        line = short_error(text)
    return _own_line(line, text), text


#: How the error of a trial whose ranks hung reads in a traceback: its class, then its own line.
_HANG = f"{RankHangError.__name__}: "
#: Likewise a trial that failed the same way twice.
_REPEAT = f"{retries.SameFailureError.__name__}: "


def _own_line(line: str, text: str = "") -> str:
    """A hang's line as the driver wrote it (``stalled: ...``), whole: without the exception's name before
    it, and not cut to the length of other errors' lines (it names every rank). Likewise a repeated
    failure's (``failed the same way twice (...); not retried again``)."""
    repeat = [ln for ln in (text or line).splitlines() if _REPEAT in ln]
    if repeat:
        return repeat[-1][repeat[-1].find(_REPEAT) + len(_REPEAT) :].strip()
    at = line.find(_HANG)
    if at < 0 or not line[at + len(_HANG) :].startswith((UNEQUAL_PREFIX, STALLED_PREFIX)):
        return line
    own = [ln[ln.find(_HANG) + len(_HANG) :].strip() for ln in text.splitlines() if _HANG in ln]
    whole = [ln for ln in own if ln.startswith((UNEQUAL_PREFIX, STALLED_PREFIX))]
    return whole[-1] if whole else line[at + len(_HANG) :]
