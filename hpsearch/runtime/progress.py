"""Progress lines while a search runs, in place of Ray's console tables and log flood.

One line when a trial starts, one when it ends (finished, stopped early by the
scheduler, or errored, with the metric, the last epoch and how many reports it made),
and a status line at most every ``status_every_s`` seconds. Everything goes to one
stream (stderr by default).

The printer only prints: how a trial ended is decided by
:class:`~hpsearch.runtime.outcomes.OutcomeRecorder`, which it is given and reads.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from ray.tune import Callback

from hpsearch.experiment.files import Outcome
from hpsearch.experiment.layout import ENDED, EPOCH, ERRORED, FINISHED, STOPPED, TrialStatus, flatten_config
from hpsearch.experiment.ranking import is_better, metric_value
from hpsearch.formatting import number, plural
from hpsearch.runtime.outcomes import OutcomeRecorder, last_epoch

__all__ = ["ProgressPrinter"]


class ProgressPrinter(Callback):
    """A Tune callback that prints a short line per trial event and a periodic status.

    Args:
        metric: The search metric, shown on each end line and in the status line.
        mode: ``"min"`` or ``"max"``, to track the best value.
        recorder: The :class:`OutcomeRecorder` of the same search, placed before this
            printer in the Tuner's callbacks: it says how each trial ended.
        total: Trials the search will run, for the status line.
        varying: The parameters shown on a start line (default: every one).
        stream: Where the lines go (default: stderr at the time of printing).
        status_every_s: Seconds between status lines.
        concurrency: Trials meant to run at once: with fewer running and some pending,
            ``waiting_reason`` is asked why.
        waiting_reason: Says why pending trials cannot start, or ``None``.
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
        stream: TextIO | None = None,
        status_every_s: float = 30.0,
        concurrency: int | None = None,
        waiting_reason: Callable[[], str | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.metric, self.mode = metric, mode
        self.recorder = recorder
        self.total = total
        self.varying = varying
        self.stream = stream  # None: sys.stderr at the time of printing
        self.status_every_s = status_every_s
        self._clock = clock
        self._start = clock()
        self._last_status = self._start
        self._best: tuple[float, str] | None = None
        self._counts = {status: 0 for status in ENDED}
        self._concurrency = concurrency
        self._waiting_reason = waiting_reason

    # -- helpers
    def _print(self, text: str) -> None:
        elapsed = int(self._clock() - self._start)
        print(f"[{elapsed // 60:02d}:{elapsed % 60:02d}] {text}", file=self.stream or sys.stderr, flush=True)

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its callbacks into the experiment state; a stream is not picklable.
        return {**self.__dict__, "stream": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Restored by Tuner.restore in a new process: its clocks start now.
        self.__dict__.update(state)
        self._start = self._last_status = self._clock()

    def _params(self, trial: Any) -> str:
        flat = flatten_config(trial.config)
        keys = self.varying if self.varying is not None else list(flat)
        return " ".join(f"{k}={number(flat[k])}" for k in keys if k in flat)

    def _outcome(self, trial: Any, default: TrialStatus) -> Outcome:
        """The recorder's record of how the trial ended (one from the trial itself if it has none)."""
        outcome = self.recorder.records.get(trial.trial_id)
        if outcome is None:  # the recorder was not placed before the printer
            outcome = Outcome(trial.trial_id, default, last_epoch=last_epoch(trial.last_result))
        return outcome

    def _end(self, result: dict[str, Any], outcome: Outcome) -> str:
        """``val_loss=0.1234 at epoch 3 (4 reports)``: the last value, the last epoch, the count of reports."""
        value = result.get(self.metric)
        shown = f"{self.metric}={number(value) if value is not None else '?'}"
        if outcome.last_epoch is not None:
            unit = "epoch" if result.get(EPOCH) is not None else "iteration"
            shown += f" at {unit} {number(outcome.last_epoch)}"
        return f"{shown} ({plural(outcome.reports, 'report')})"

    def _track_best(self, trial: Any, result: dict[str, Any]) -> None:
        """The best value so far, by the ranking's rules: only finite numbers count (NaN never wins)."""
        value = metric_value(result.get(self.metric))
        if value is None or not math.isfinite(value):
            return
        if self._best is None or is_better(value, self._best[0], "min" if self.mode == "min" else "max"):
            self._best = (value, trial.trial_id)

    # -- Tune callback hooks
    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._print(f"start    {trial.trial_id}  {self._params(trial)}")

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        self._track_best(trial, result)

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        outcome = self._outcome(trial, FINISHED)
        ended = outcome.status
        self._counts[ended] = self._counts.get(ended, 0) + 1
        suffix = "  (stopped early by the scheduler)" if ended == STOPPED else ""
        self._print(f"{ended:<8} {trial.trial_id}  {self._end(trial.last_result or {}, outcome)}{suffix}")

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        outcome = self._outcome(trial, ERRORED)
        self._counts[ERRORED] += 1
        self._print(f"ERROR    {trial.trial_id}  {outcome.error or 'see error.txt in the trial folder'}")

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        now = self._clock()
        if now - self._last_status < self.status_every_s:
            return
        self._last_status = now
        running = sum(1 for t in trials if t.status == "RUNNING")
        pending = sum(1 for t in trials if t.status == "PENDING")
        done = sum(self._counts.values())
        total = f"/{self.total}" if self.total else ""
        best = f" | best {self.metric}={number(self._best[0])} ({self._best[1]})" if self._best else ""
        self._print(
            f"status   {done}{total} done ({self._counts[STOPPED]} stopped early, "
            f"{self._counts[ERRORED]} errored), {running} running, {pending} pending{best}"
        )
        if pending and self._concurrency and running < self._concurrency and self._waiting_reason:
            try:
                reason = self._waiting_reason()
            except Exception as err:  # noqa: BLE001 - a diagnosis must never break the search
                reason = f"could not read the cluster: {err}"
            if reason:
                self._print(f"waiting  {pending} trial(s) cannot start: {reason}")
