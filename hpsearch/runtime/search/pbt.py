"""Population-based training through nested Ray Train runs: exploits that really copy the donor.

This module is the search process's side: the schedulers Tune is given and the drivers' slots
on the head node. Tune pickles the scheduler into its experiment state and calls it in the
search process only; it prints through :mod:`hpsearch.messages`, so it holds no stream. The trial driver's side, steps 1 and 2
below, is :mod:`hpsearch.runtime.trial.pbt_driver`, which the drivers import without Ray's schedulers.

Ray's PBT exploits by handing the weaker trial the donor's latest *Tune* checkpoint. A nested
trial has none of its own (Ray's ``TuneReportCallback`` forwards only the checkpoint's path), and
a nested run re-created under its old name resumes from its own checkpoint, not the donor's.
hpsearch closes both gaps, without copying weights:

1. **Pointers.** Under ``pbt``/``pb2``, every report forwarded to Tune carries a Tune checkpoint
   (:func:`~hpsearch.runtime.trial.pbt_driver.install_pointer_reports`). That checkpoint is one small
   file, :data:`~hpsearch.experiment.layout.POINTER_FILE`. It names the nested run and the
   checkpoint the report stands for, and the epoch. Tune copies that file into the trial's
   folder. The weights stay where the nested run wrote them.
2. **Start.** When a trial driver starts, :func:`~hpsearch.runtime.trial.pbt_driver.resolve_start`
   reads the Tune checkpoint it was restored from. If that is the trial's own pointer, after a
   pause, a retry or ``resume``, the nested run it was in carries on. If it is a donor's
   pointer, after an exploit, a new nested run starts in ``train/<trial_id>/pbt-<donor>-e<epoch>/``.
   Its :data:`~hpsearch.experiment.layout.START_FILE` names the donor's checkpoint.
   :func:`hpsearch.train.restore` loads that checkpoint in place on the workers and gives the
   optimizer the new config's hyperparameters. Nothing is copied: the donor's files are read
   where they are. That is why nested runs keep every checkpoint under PBT, and
   ``checkpoint.num_to_keep`` does not apply.
3. **Lineage.** :class:`HpsearchPBT` and :class:`HpsearchPB2` are Ray's schedulers with one more
   step in ``_exploit``. They write each exploit to the trial's ``hpsearch_lineage.jsonl``: the
   donor, its epoch, and the old and new configs. They also print a line.
4. **A population that keeps moving.** Under ``synch``, when a trial ends before the perturbation
   point, the others are ranked without it and go on (Ray's would wait for it for ever); after a
   resume, each trial carries on where it was (:mod:`hpsearch.runtime.search.resume_state`).

Concurrency. The whole population is created at once. Its trials take turns through the head
node's trial-driver slots (:func:`driver_slot`). So Tune pauses and resumes trials within the
plan's concurrency. It does not start more drivers than the workers can be placed for.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import PopulationBasedTraining
from ray.tune.schedulers.pb2 import PB2

from hpsearch import messages
from hpsearch.analysis._lineage import describe_changes
from hpsearch.experiment import files
from hpsearch.formatting import number
from hpsearch.runtime import internals
from hpsearch.runtime.internals import Exploit, ExploitHook
from hpsearch.runtime.search import resume_state

__all__ = [
    "driver_slot",
    "MAX_GATED",
    "HpsearchPBT",
    "HpsearchPB2",
]

#: Ray's fixed-point resource unit: a share of the head's driver slot is rounded down to it.
_RESOURCE_UNIT = 1e-4
#: The most trials at once that the head-node gate can hold apart.
#: Each running nested run also pins a placement-group cleaner to the head node.
#: Each cleaner takes a 0.001 sliver of the same resource.
#: k drivers of 1/(k + 1/2) each leave 1/(2k + 1) of the resource.
#: That is enough for k cleaners only while k <= 22.
MAX_GATED = 22


def driver_slot(concurrency: int) -> float:
    """Each trial driver's share of the head node's ``node:__internal_head__`` resource.

    This applies under population-based training. The resource is 1.0 in all. ``concurrency``
    drivers fit at once, and one more does not. So Tune keeps the rest of the population
    waiting, paused or pending. It does not start drivers whose workers cannot be placed. The
    shares also leave room for each running nested run's placement-group cleaner. Ray Train pins
    that cleaner to the head with a 0.001 share. Above :data:`MAX_GATED` trials at once, the
    gate holds :data:`MAX_GATED`.
    """
    k = min(max(1, concurrency), MAX_GATED)
    return round(int((1.0 / (k + 0.5)) / _RESOURCE_UNIT) * _RESOURCE_UNIT, 4)


class _Population(ExploitHook):
    """A population that keeps moving: under ``synch`` it goes on when a trial ends before the perturbation
    point, and after a resume each trial carries on where it was (:mod:`hpsearch.runtime.search.resume_state`)."""

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        """Ray's step, then, for a trial restored by a resume, the scheduler state it had."""
        super().on_trial_add(tune_controller, trial)  # type: ignore[misc]  # Ray's, next in the MRO
        resume_state.carry_on(self, trial)

    def after_checkpoint_or_exploit(self, trial: Any, upper_quantile: list[Any]) -> None:
        resume_state.keep_restored_checkpoint(self, trial, upper_quantile)

    def choose_trial_to_run(self, tune_controller: Any) -> Any:
        """Ray's choice; under ``synch``, a population left waiting for a trial that ended goes on.

        Ray's synchronous PBT perturbs when the last unfinished trial reaches the perturbation
        point, and until then runs no trial that is already there. A trial that errors or is
        stopped before the point never reaches it, and the others wait, paused, for ever. When
        every unfinished trial waits at the point, the perturbation runs now, as Ray runs it: its
        own result step, given one waiting trial's last result. Should that not move the
        population on, the point moves past it (no exploit there), so the search never hangs.
        """
        chosen = super().choose_trial_to_run(tune_controller)  # type: ignore[misc]  # Ray's, next in the MRO
        if chosen is not None or not self.synch or not internals.available("pbt-exploit"):
            return chosen
        states = self.trial_states
        trials = list(tune_controller.get_trials())
        unfinished = [t for t in trials if t.status not in (Trial.TERMINATED, Trial.ERROR)]
        point = self.next_perturbation_sync
        if not unfinished or any(t.status != Trial.PAUSED or states[t].last_train_time < point for t in unfinished):
            return None  # nothing waits, or something is still on its way to the point
        left = [t.trial_id for t in trials if t not in unfinished and states[t].last_train_time < point]
        self.on_population_carries_on(left, [t.trial_id for t in unfinished], point)
        reporter = max(unfinished, key=lambda t: states[t].last_train_time)
        self.on_trial_result(tune_controller, reporter, dict(reporter.last_result))  # type: ignore[attr-defined]  # Ray's
        chosen = super().choose_trial_to_run(tune_controller)  # type: ignore[misc]  # Ray's
        if chosen is None:
            interval = int(self.perturbation_interval)
            self.next_perturbation_sync = max(states[t].last_train_time for t in unfinished) + interval
            chosen = super().choose_trial_to_run(tune_controller)  # type: ignore[misc]  # Ray's
        return chosen

    def on_population_carries_on(self, left: list[str], waiting: list[str], point: float) -> None:
        """Called when the trials ``waiting`` at the perturbation point ``point`` go on without the trials
        ``left``, which ended before reaching it (see :meth:`choose_trial_to_run`)."""


class _Lineage(_Population):
    """What hpsearch adds to Ray's PBT and PB2: each exploit recorded in the trial's folder, and a line printed."""

    def __init__(self, *args: Any, hp_experiment_dir: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # Ray's scheduler, next in the MRO
        self._hp_experiment_dir = None if hp_experiment_dir is None else str(hp_experiment_dir)

    def on_exploit(self, exploit: Exploit) -> None:
        trial, donor = exploit.trial, exploit.donor
        own_result, donor_result = exploit.own_result, exploit.donor_result
        old_config = copy.deepcopy(trial.config)
        donor_epoch = donor_result.get(self.time_attr)
        path = getattr(exploit.donor_checkpoint, "path", None)  # no path while the checkpoint's save is still pending
        pointer = files.read_pointer(path) if path else None
        if pointer is not None and pointer.get("epoch") is not None:
            donor_epoch = pointer["epoch"]
        exploit.run()
        new_config = copy.deepcopy(trial.config)
        metric = self.scheduler_metric
        record = {
            "trial_id": trial.trial_id,
            "epoch": own_result.get(self.time_attr),
            "donor_trial_id": donor.trial_id,
            "donor_epoch": donor_epoch,
            "metric": metric,
            "value": own_result.get(metric) if metric else None,
            "donor_value": donor_result.get(metric) if metric else None,
            "old_config": old_config,
            "new_config": new_config,
        }
        try:
            files.append_lineage(self._hp_run_folder(trial), record)
        except OSError as err:  # the exploit itself went ahead, so say what was not recorded
            messages.line(f"pbt: could not record the exploit of trial {trial.trial_id}: {err}")
        self._hp_print(record)

    def on_population_carries_on(self, left: list[str], waiting: list[str], point: float) -> None:
        who = f"trial {left[0]}" if len(left) == 1 else f"trials {', '.join(left)}" if left else "a trial"
        messages.line(
            f"pbt: {who} ended before {self.time_attr} {point}, where the population waits to be ranked; "
            f"the {len(waiting)} other trial(s) are ranked without it and carry on"
        )

    def _hp_run_folder(self, trial: Any) -> Path:
        experiment = self._hp_experiment_dir
        if trial.path:  # Tune's trial folder, in the experiment folder where it is now (it may have moved)
            experiment = str(Path(trial.path).parent)
        return files.run_dir(experiment or ".", trial.trial_id)

    def _hp_print(self, record: Mapping[str, Any]) -> None:
        changed = describe_changes(record["old_config"], record["new_config"])
        metric = record["metric"] or "score"
        line = (
            f"pbt: trial {record['trial_id']} (epoch {record['epoch']}, {metric} {number(record['value'])}) continues "
            f"from trial {record['donor_trial_id']}'s epoch {record['donor_epoch']} "
            f"({metric} {number(record['donor_value'])}); {changed or 'config unchanged'}"
        )
        messages.line(line)


class HpsearchPBT(_Lineage, PopulationBasedTraining):
    """Ray's ``PopulationBasedTraining``, recording each exploit (see the module's doc)."""


class HpsearchPB2(_Lineage, PB2):
    """Ray's ``PB2``, recording each exploit (see the module's doc)."""
