"""The Tune side of the spec's ``budget``: measure what a search uses, and end it when a limit is reached.

How a budget ends a search, and why. This was read in the ``ray.tune`` source of Ray 2.60.

- Tune's own way does not allow a resume. When a Tune ``Stopper``'s ``stop_all()`` returns
  True, ``TuneController`` marks the search algorithm finished and *terminates* every live
  trial with ``_schedule_trial_stop`` (see ``_stop_experiment_if_needed`` in
  ``execution/tune_controller.py``). No callback hears of those ends, because
  ``on_trial_complete`` is never called for them. Trials waiting for resources are marked
  TERMINATED although they never ran. The searcher's saved state says ``finished``. So
  ``Tuner.restore`` resumes nothing, and a raised budget could never continue the search.
- So :class:`BudgetStopper` ends the search the way Ctrl-C does. It raises ``SIGUSR1``.
  ``tune.run`` installs a handler for that signal, which ends Tune's loop after the
  current step (see ``_setup_signal_catching`` in ``tune.py``). Tune then saves its state
  one last time, with the running trials still RUNNING and the searcher unfinished, and
  stops the trials' actors. No new trial starts.
- A running trial keeps the checkpoints its nested run had reported, because Ray Train
  saves a checkpoint before the report reaches Tune. Its driver is stopped the same way as
  when the scheduler stops a trial. hpsearch records each such trial as ``stopped``, with
  the budget that stopped it (:func:`finish`). ``hpsearch resume`` with a raised budget
  continues these trials from their latest checkpoint, along with the trials not yet started.
- Tune installs no handler when ``fit()`` runs outside the main thread. There ``stop_all``
  returns True instead, so the search still ends but cannot be continued.
- The budget is read from the search run in progress (:func:`begin`, which
  ``hpsearch.runtime.search.tuner`` calls around ``fit()``), not from the stopper. The reason:
  ``Tuner.restore`` brings back the stopper that was pickled in Tune's experiment state,
  and that stopper holds the old budget.

What is counted is described in :mod:`hpsearch.spec.budget`. Here is where each figure
comes from. The wall time adds up the search's first run and every resume;
``hpsearch_usage.jsonl`` records each run. Failures are read from the outcomes file. The
target is checked on every result Tune receives. The resource-hours come from the trials'
runs that :class:`~hpsearch.runtime.search.outcomes.OutcomeRecorder` records; a running trial
counts up to now.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ray.tune import Stopper

from hpsearch import messages
from hpsearch.errors import HpsearchError, Problem, SpecError
from hpsearch.experiment import files
from hpsearch.experiment.files import Outcome
from hpsearch.experiment.layout import ERRORED, OUTCOMES_FILE, STOPPED, TRAIN_RUNS_DIR, USAGE_FILE
from hpsearch.experiment.metrics import report_epoch, report_value, report_violation
from hpsearch.experiment.ranking import metric_value
from hpsearch.planning.for_spec import demand_for
from hpsearch.runtime.internals import tune_interrupt_installed
from hpsearch.spec import Spec
from hpsearch.spec.budget import Budget, BudgetUse, Reached
from hpsearch.spec.constraints import Constraint

__all__ = [
    "BudgetStopper",
    "BudgetTracker",
    "begin",
    "finish",
    "measure",
    "check_not_spent",
    "trial_resources",
    "resources_from_folder",
    "interrupt_tune",
]

#: The search run in progress in this process (set by :func:`begin`, cleared by :func:`finish`).
_active: BudgetTracker | None = None


def trial_resources(spec: Spec, config: Mapping[str, Any] | None = None) -> dict[str, float]:
    """One trial's resources: its driver bundle plus every worker bundle (CPU, GPU, custom; no memory estimate).

    ``config``: the trial's config, whose searched scaling values (``scaling.*``) size it; without
    one (or with nothing searched), the spec's trial (searched scaling: the largest).
    """
    return demand_for(spec, config).total(memory_estimates=False)


def resources_from_folder(
    experiment_dir: str | os.PathLike[str], config: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """:func:`trial_resources` of the spec as run in an experiment folder (``{}`` without one)."""
    try:
        return trial_resources(files.experiment_spec(experiment_dir, check_trainable=False), config)
    except (HpsearchError, ValueError):  # no spec; one that no longer loads; a config without its scaling values
        return {}


class BudgetTracker:
    """Measures one run of a search against its budget; says when a limit is reached. No Ray.

    Args:
        experiment_dir: The experiment folder (its outcomes and usage files are read).
        budget: The limits.
        started_at: When this run of the search started (UNIX seconds, on ``clock``).
        previous_s: Wall time of the search's earlier runs (``resume``).
        previous_best: Per target metric, the best value reported before this run, with its trial.
        constraints: The spec's constraints: a report that violates them reaches no target.
        clock: UNIX seconds.
        poll_s: How often the folder's files are read again (they are re-read only when they changed).
    """

    def __init__(
        self,
        experiment_dir: str | os.PathLike[str],
        budget: Budget,
        *,
        started_at: float,
        previous_s: float = 0.0,
        previous_best: Mapping[str, tuple[float, str]] | None = None,
        constraints: Sequence[Constraint] = (),
        clock: Callable[[], float] = time.time,
        poll_s: float = 1.0,
    ) -> None:
        self.experiment_dir = Path(experiment_dir)
        self.budget = budget
        self.constraints = tuple(constraints)
        self.started_at = started_at
        self.previous_s = previous_s
        self.clock = clock
        self.poll_s = poll_s
        self.best: dict[str, tuple[float, str]] = dict(previous_best or {})
        self.reached: Reached | None = None
        self._polled = -math.inf
        self._stamps: tuple[Any, ...] = ()
        self._failed = 0
        self._usage = files.Usage()

    def observe(self, trial_id: str, result: Mapping[str, Any]) -> None:
        """A result Tune received: its value of each target metric counts toward the target (when it meets
        the constraints: an infeasible model reaches no target)."""
        if self.constraints and report_violation(result, self.constraints) > 0:
            return
        for name, target in self.budget.target.items():
            value = metric_value(report_value(result, name))  # a nested metric too, as Tune reads it
            if value is None or not math.isfinite(value):
                continue
            best = self.best.get(name)
            if best is None or (value > best[0] if target.mode == "max" else value < best[0]):
                self.best[name] = (value, trial_id)

    def _poll(self, now: float) -> None:
        if now - self._polled < self.poll_s:
            return
        self._polled = now
        stamps = tuple(_stamp(self.experiment_dir / name) for name in (OUTCOMES_FILE, USAGE_FILE))
        if stamps == self._stamps:
            return
        self._stamps = stamps
        if self.budget.max_failed_trials is not None:
            self._failed = sum(1 for s in files.read_outcomes(self.experiment_dir).values() if s == ERRORED)
        if self.budget.max_resource_hours:
            self._usage = files.read_usage(self.experiment_dir)

    def use(self) -> BudgetUse:
        """What the search has used so far (running trials' resources counted until now)."""
        now = self.clock()
        self._poll(now)
        hours: dict[str, float] = {}
        if self.budget.max_resource_hours:
            hours = self._usage.resource_hours_now(now, live_since=self.started_at)
        return BudgetUse(
            wall_time_s=self.previous_s + max(0.0, now - self.started_at),
            failed_trials=self._failed,
            best={k: v for k, (v, _) in self.best.items()},
            best_trial={k: t for k, (_, t) in self.best.items()},
            resource_hours=hours,
        )

    def check(self) -> Reached | None:
        """The limit reached, if one is (once reached, it stays reached for this run)."""
        if self.reached is None and self.budget.is_set():
            self.reached = self.budget.reached(self.use())
        return self.reached


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def _best_reported(
    experiment_dir: Path, budget: Budget, constraints: Sequence[Constraint] = ()
) -> dict[str, tuple[float, str]]:
    """Per target metric, the best feasible value any trial of the folder reported, with its trial (the histories)."""
    if not budget.target:
        return {}
    tracker = BudgetTracker(experiment_dir, budget, started_at=0.0, constraints=constraints)
    runs = experiment_dir / TRAIN_RUNS_DIR
    try:
        trial_ids = sorted(p.name for p in runs.iterdir() if p.is_dir())
    except OSError:
        return {}
    for trial_id in trial_ids:
        for row in files.read_history(experiment_dir, trial_id):
            tracker.observe(trial_id, row)
    return tracker.best


def measure(
    experiment_dir: str | os.PathLike[str], budget: Budget, constraints: Sequence[Constraint] = ()
) -> BudgetUse:
    """What a search (from its folder alone) has used of ``budget``: for ``resume``, and the summary."""
    exp = Path(experiment_dir)
    usage = files.read_usage(exp)
    best = _best_reported(exp, budget, constraints)
    return BudgetUse(
        wall_time_s=usage.wall_time_s(),
        failed_trials=sum(1 for s in files.read_outcomes(exp).values() if s == ERRORED),
        best={k: v for k, (v, _) in best.items()},
        best_trial={k: t for k, (_, t) in best.items()},
        resource_hours=usage.resource_hours(),
    )


def check_not_spent(spec: Spec) -> None:
    """Refuse to resume a search whose budget is already spent: say which, and the ``--set`` that raises it.

    Raises:
        SpecError: naming the budget's key (exit 2; nothing has started).
    """
    use = measure(spec.experiment_dir, spec.budget, spec.constraints) if spec.budget.is_set() else None
    reached = spec.budget.reached(use) if use is not None else None
    if reached is not None:
        raise SpecError(
            [
                Problem(
                    reached.key,
                    f"is already spent: {reached.message}; raise it to continue the search, "
                    f"e.g. {reached.resume_hint(spec.experiment_dir)}",
                )
            ]
        )


def begin(spec: Spec, *, clock: Callable[[], float] = time.time) -> BudgetTracker:
    """Start a run of the search (``run`` or ``resume``): record it, and make its budget the one the stopper uses."""
    global _active
    exp = spec.experiment_dir
    previous = files.read_usage(exp).wall_time_s()
    started = clock()
    files.record_search_stint(exp, started_at=started)
    tracker = BudgetTracker(
        exp,
        spec.budget,
        started_at=started,
        previous_s=previous,
        previous_best=_best_reported(exp, spec.budget, spec.constraints),
        constraints=spec.constraints,
        clock=clock,
    )
    _active = tracker
    return tracker


def finish(tracker: BudgetTracker) -> Reached | None:
    """End a run of the search, after ``fit()`` returned; return the limit that ended it, if one did.

    The trials still running when it ended (their driver's run has no end) get their end
    recorded now; when a budget ended the search, each is also recorded as ``stopped`` by it
    (``ended_by``), with its reports and last epoch from its history.
    """
    global _active
    if _active is tracker:
        _active = None
    exp = tracker.experiment_dir
    now = tracker.clock()
    reached = tracker.reached
    for trial_id, runs in files.read_usage(exp).trials.items():
        for run in runs:
            if run.ended_at is not None or run.started_at < tracker.started_at:
                continue
            files.record_trial_stint(
                exp,
                trial_id,
                started_at=run.started_at,
                ended_at=now,
                resources=run.resources,
                end="budget" if reached else "interrupted",
            )
            if reached is not None:
                history = files.read_history(exp, trial_id)
                files.append_outcome(
                    exp,
                    Outcome(
                        trial_id=trial_id,
                        status=STOPPED,
                        reports=len(history),
                        last_epoch=report_epoch(history[-1]) if history else None,
                        ended_at=now,
                        ended_by=reached.budget,
                    ),
                )
    files.record_search_stint(
        exp, started_at=tracker.started_at, ended_at=now, ended_by=reached.budget if reached else None
    )
    return reached


class BudgetStopper(Stopper):
    """The Tune stopper that ends the search when a budget's limit is reached (see the module's notes).

    Args:
        experiment_dir: The experiment folder.
        budget: The limits, used only when no hpsearch search run is in progress
            (:func:`begin`): a Tuner from :func:`hpsearch.build_tuner` fitted directly.
    """

    def __init__(self, experiment_dir: str | os.PathLike[str], budget: Budget) -> None:
        self.experiment_dir = str(experiment_dir)
        self.budget = budget
        self._own: BudgetTracker | None = None
        self._announced = False
        self._stop_trials = False

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its stopper into the experiment state; the tracker is rebuilt by the next run.
        return {**self.__dict__, "_own": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Restored by Tuner.restore: a new run of the search, measured afresh (by begin()'s tracker).
        self.__dict__.update(state)
        self._own = None
        self._announced = False
        self._stop_trials = False

    def tracker(self) -> BudgetTracker:
        """The run in progress's tracker; without one, this stopper's own (counted from its first call)."""
        if _active is not None:
            return _active
        if self._own is None:
            self._own = BudgetTracker(self.experiment_dir, self.budget, started_at=time.time())
        return self._own

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self.tracker().observe(trial_id, result)
        return self._stop_trials

    def stop_all(self) -> bool:
        reached = self.tracker().check()
        if reached is None:
            return False
        if not self._announced:
            self._announced = True
            messages.say(
                f"{reached.message}: ending the search (no new trial starts; running trials are "
                "stopped, their checkpoints kept)"
            )
            if interrupt_tune():
                return False  # Tune ends its loop after this step, as on Ctrl-C
            self._stop_trials = True  # no handler: end it Tune's way (it cannot be resumed then)
        return self._stop_trials


def interrupt_tune() -> bool:
    """Raise SIGUSR1 for Tune's own handler (tune.run ends its loop, saves its state); False when it has none."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGUSR1"):
        return False
    if not tune_interrupt_installed(signal.getsignal(signal.SIGUSR1)):
        return False
    signal.raise_signal(signal.SIGUSR1)
    return True
