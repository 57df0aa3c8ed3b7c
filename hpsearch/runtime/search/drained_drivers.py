"""The scheduler's side of a drained trial driver: pause the trial at its checkpoint, resume it first.

This module runs in the search process, inside Tune's loop. With ``resources.driver_node: any`` a trial's
driver may sit on a node that is being drained; its driver writes a notice into the trial's folder and its
loop saves a checkpoint for it (:mod:`hpsearch.experiment.driver_drains` tells the whole design).
:class:`PausesDrainedDrivers`, mixed before each of Tune's schedulers that hpsearch builds for such a search,
reads that notice at each of the trial's results. At the result that carries the notice's checkpoint (or,
for a loop that saves none, once the deadline is near) it pauses the trial the way Ray's PBT pauses one,
without a Tune checkpoint, and ends the trial's actor rather than keep it for reuse on the node that goes
(:func:`hpsearch.runtime.internals.pause_without_reuse`). Tune counts no failure. When the scheduler is asked
for the next trial to run, a trial it paused for a drain comes first; Ray places its new driver on a node
that is not being drained, and the nested run, of the same name, carries on from its latest checkpoint.

The scheduler's own decision stands where it stops the trial, or where it pauses it anyway (HyperBand at a
rung): such a trial is resumed when the scheduler says, as before. pbt/pb2 keep their drivers on the head
node (``spec/population.py``), so their schedulers need none of this.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray.tune.schedulers import (
    AsyncHyperBandScheduler,
    FIFOScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    TrialScheduler,
)

from hpsearch import messages
from hpsearch.experiment import driver_drains
from hpsearch.runtime.internals import pause_without_reuse

__all__ = [
    "PausesDrainedDrivers",
    "DrainAwareFIFO",
    "DrainAwareASHA",
    "DrainAwareMedian",
    "DrainAwareHyperBand",
    "CHECKPOINT_PATH_KEY",
]

#: The result key that holds the nested checkpoint's path (Ray Train's ``TuneReportCallback`` and
#: hpsearch's report channel alike).
CHECKPOINT_PATH_KEY = "checkpoint_path"


class PausesDrainedDrivers:
    """Mixed before a Tune scheduler: pauses a trial whose driver's node is drained, and resumes it first.

    ``hp_trials_dir``: the experiment's ``train/`` folder, where each trial's folder may hold its driver's
    notice; ``None`` (drivers on the head node) leaves the scheduler as Ray's.
    """

    def __init__(self, *args: Any, hp_trials_dir: Path | str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._hp_trials_dir = None if hp_trials_dir is None else Path(hp_trials_dir)
        self._hp_drained: set[str] = set()  # trials paused for a drain, to be resumed first

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        decision: str = super().on_trial_result(tune_controller, trial, result)  # type: ignore[misc]  # Ray's, next in the MRO
        if self._hp_trials_dir is None or decision == TrialScheduler.STOP:
            return decision
        notice = driver_drains.read_notice(self._hp_trials_dir / trial.trial_id)
        if notice is None or not notice.pause_now(bool(result.get(CHECKPOINT_PATH_KEY))):
            return decision
        if not pause_without_reuse(tune_controller, trial):  # the internal is missing: said at the search's start
            return decision
        if decision != TrialScheduler.PAUSE:  # a pause of the scheduler's own is resumed when it says
            self._hp_drained.add(trial.trial_id)
        saved = (
            f"its checkpoint of epoch {notice.saved_epoch}"
            if notice.saved_report is not None
            else "its latest checkpoint"
        )
        messages.say(
            f"paused   trial {trial.trial_id}: the node of its driver ({notice.host or notice.node_id}) is being "
            f"drained; it resumes on another node from {saved}"
        )
        return TrialScheduler.NOOP

    def choose_trial_to_run(self, tune_controller: Any) -> Any:
        for trial in tune_controller.get_trials():
            if trial.trial_id in self._hp_drained and trial.status == "PAUSED":
                self._hp_drained.discard(trial.trial_id)
                return trial
        return super().choose_trial_to_run(tune_controller)  # type: ignore[misc]  # Ray's, next in the MRO


class DrainAwareFIFO(PausesDrainedDrivers, FIFOScheduler):
    """Tune's ``FIFOScheduler``, pausing a trial whose driver's node is drained."""


class DrainAwareASHA(PausesDrainedDrivers, AsyncHyperBandScheduler):
    """Tune's ``ASHAScheduler``, pausing a trial whose driver's node is drained."""


class DrainAwareMedian(PausesDrainedDrivers, MedianStoppingRule):
    """Tune's ``MedianStoppingRule``, pausing a trial whose driver's node is drained."""


class DrainAwareHyperBand(PausesDrainedDrivers, HyperBandScheduler):
    """Tune's ``HyperBandScheduler``, pausing a trial whose driver's node is drained."""
