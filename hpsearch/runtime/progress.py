"""Progress lines while a search runs, in place of Ray's console tables and log flood.

One line when a trial starts, one when it ends (finished, stopped early by the
scheduler, or errored, with the metric), and a status line at most every
``status_every_s`` seconds. Everything goes to one stream (stderr by default).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from ray.tune import Callback

from hpsearch.experiment.summary import flatten_config, short_error

__all__ = ["ProgressPrinter"]

def _fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class ProgressPrinter(Callback):
    """A Tune callback that prints a short line per trial event and a periodic status."""

    def __init__(
        self,
        metric: str,
        mode: str,
        *,
        total: int | None = None,
        varying: list[str] | None = None,
        stream: TextIO | None = None,
        status_every_s: float = 30.0,
        budget: tuple[str, float] | None = None,
        concurrency: int | None = None,
        waiting_reason: Callable[[], str | None] | None = None,
        outcomes_path: str | None = None,
    ):
        self.metric, self.mode = metric, mode
        self.total = total
        self.varying = varying
        self.stream = stream  # None: sys.stderr at the time of printing
        self.status_every_s = status_every_s
        self._start = time.monotonic()
        self._last_status = self._start
        self._best: tuple[float, str] | None = None
        self._counts = {"finished": 0, "stopped": 0, "errored": 0}
        self._budget = budget
        self._concurrency = concurrency
        self._waiting_reason = waiting_reason
        self._outcomes_path = outcomes_path
        self._stopped: set[str] = set()
        #: How each ended trial ended: "finished", "stopped" (early, by the scheduler) or "errored".
        self.outcomes: dict[str, str] = {}

    # -- helpers
    def _print(self, text: str) -> None:
        elapsed = int(time.monotonic() - self._start)
        print(f"[{elapsed // 60:02d}:{elapsed % 60:02d}] {text}", file=self.stream or sys.stderr, flush=True)

    def __getstate__(self) -> dict:
        # Tune pickles its callbacks into the experiment state; a stream is not picklable.
        return {**self.__dict__, "stream": None}

    def __setstate__(self, state: dict) -> None:
        # Restored by Tuner.restore in a new process: its clocks start now.
        self.__dict__.update(state)
        self._start = self._last_status = time.monotonic()

    def _params(self, trial: Any) -> str:
        flat = flatten_config(trial.config)
        keys = self.varying if self.varying is not None else list(flat)
        return " ".join(f"{k}={_fmt_value(flat[k])}" for k in keys if k in flat)

    def _record(self, trial: Any, status: str, error: str = "") -> None:
        """Remember how a trial ended, here and in the experiment folder (one JSON line per trial end)."""
        self.outcomes[trial.trial_id] = status
        if not self._outcomes_path:
            return
        result = trial.last_result or {}
        line = {
            "trial_id": trial.trial_id,
            "status": status,
            "iterations": result.get("epoch", result.get("training_iteration", 0)),
            "ended_at": time.time(),
            "error": error,
        }
        try:
            with open(self._outcomes_path, "a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
        except OSError as err:  # the search matters more than this record
            self._print(f"warning  could not record the end of {trial.trial_id}: {err}")

    def _metric(self, result: dict) -> str:
        value = result.get(self.metric)
        shown = f"{self.metric}={_fmt_value(value)}" if value is not None else f"{self.metric}=?"
        if "epoch" in result:
            n = result["epoch"]
            return f"{shown} after {n} epoch{'s' if n != 1 else ''}"
        n = result.get("training_iteration", 0)
        return f"{shown} after {n} iter{'s' if n != 1 else ''}"

    def _track_best(self, trial: Any, result: dict) -> None:
        value = result.get(self.metric)
        if not isinstance(value, (int, float)):
            return
        if self._best is None or (value < self._best[0] if self.mode == "min" else value > self._best[0]):
            self._best = (float(value), trial.trial_id)

    # -- Tune callback hooks
    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._print(f"start    {trial.trial_id}  {self._params(trial)}")

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        self._track_best(trial, result)
        # Tune marks a result done=True when the scheduler (or a stopper) stops the trial on it;
        # a trial whose function returns ends with a duplicate result that callbacks never see.
        if result.get("done") and not self._budget_spent(result):
            self._stopped.add(trial.trial_id)

    def _budget_spent(self, result: dict) -> bool:
        if self._budget is None:
            return False
        attr, limit = self._budget
        value = result.get(attr)
        return isinstance(value, (int, float)) and value >= limit

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        result = trial.last_result or {}
        ended = "stopped" if trial.trial_id in self._stopped else "finished"
        self._record(trial, ended)
        self._counts[ended] += 1
        suffix = "" if ended == "finished" else "  (stopped early by the scheduler)"
        self._print(f"{ended:<8} {trial.trial_id}  {self._metric(result)}{suffix}")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._counts["errored"] += 1
        error = None
        try:
            error = trial.get_pickled_error() or trial.get_error()
        except Exception:  # noqa: BLE001 - the message is a courtesy; never fail the search over it
            pass
        message = short_error(error) or _error_file_line(trial)
        self._record(trial, "errored", message)
        self._print(f"ERROR    {trial.trial_id}  {message or 'see error.txt in the trial folder'}")

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        now = time.monotonic()
        if now - self._last_status < self.status_every_s:
            return
        self._last_status = now
        running = sum(1 for t in trials if t.status == "RUNNING")
        pending = sum(1 for t in trials if t.status == "PENDING")
        done = sum(self._counts.values())
        total = f"/{self.total}" if self.total else ""
        best = (
            f" | best {self.metric}={_fmt_value(self._best[0])} ({self._best[1]})" if self._best else ""
        )
        self._print(
            f"status   {done}{total} done ({self._counts['stopped']} stopped early, "
            f"{self._counts['errored']} errored), {running} running, {pending} pending{best}"
        )
        if pending and self._concurrency and running < self._concurrency and self._waiting_reason:
            try:
                reason = self._waiting_reason()
            except Exception as err:  # noqa: BLE001 - a diagnosis must never break the search
                reason = f"could not read the cluster: {err}"
            if reason:
                self._print(f"waiting  {pending} trial(s) cannot start: {reason}")


def _error_file_line(trial: Any) -> str:
    """The error line of the trial's error.txt, when Tune holds no error object for it yet."""
    try:
        return short_error((Path(trial.local_path) / "error.txt").read_text(encoding="utf-8"))
    except (OSError, TypeError):
        return ""
