"""Population-based training through nested Ray Train runs: exploits that really copy the donor.

Ray's PBT exploits by handing the weaker trial the donor's latest *Tune* checkpoint. A nested
trial has none of its own (Ray's ``TuneReportCallback`` forwards only the checkpoint's path), and
a nested run re-created under its old name resumes from its own checkpoint, not the donor's.
hpsearch closes both gaps, without copying weights:

1. **Pointers.** Under ``pbt``/``pb2`` every report forwarded to Tune carries a Tune checkpoint
   of one small file (:data:`~hpsearch.experiment.layout.POINTER_FILE`): which nested run and
   which of its checkpoints the report stands for, and the epoch (:func:`install_pointer_reports`).
   Tune copies that file into the trial's folder; the weights stay where the nested run wrote them.
2. **Start.** When a trial driver starts, :func:`resolve_start` reads the Tune checkpoint it was
   restored from. Its own pointer (a pause, a retry, ``resume``): the nested run it was in carries on.
   A donor's pointer (an exploit): a new nested run, ``train/<trial_id>/pbt-<donor>-e<epoch>/``,
   whose :data:`~hpsearch.experiment.layout.START_FILE` names the donor's checkpoint;
   :func:`hpsearch.train.restore` loads it in place on the workers and gives the optimizer the new
   config's hyperparameters. Nothing is copied: the donor's files are read where they are, which
   is why nested runs keep every checkpoint under PBT (``checkpoint.num_to_keep`` does not apply).
3. **Lineage.** :class:`HpsearchPBT` / :class:`HpsearchPB2` (Ray's schedulers with one more step
   in ``_exploit``) write each exploit to the trial's ``hpsearch_lineage.jsonl`` (the donor, its
   epoch, the old and new configs) and print a line.

Concurrency: the whole population is created at once and its trials take turns through the
head node's trial-driver slots (:func:`driver_slot`), so Tune pauses and resumes trials within
the plan's concurrency instead of starting more drivers than the workers can be placed for.
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ray.tune.schedulers import PopulationBasedTraining
from ray.tune.schedulers.pb2 import PB2

from hpsearch.analysis._lineage import describe_changes
from hpsearch.experiment import files
from hpsearch.experiment.layout import EPOCH, PBT_RUN_PREFIX
from hpsearch.formatting import number

__all__ = [
    "Donor",
    "Start",
    "resolve_start",
    "install_pointer_reports",
    "driver_slot",
    "MAX_GATED",
    "HpsearchPBT",
    "HpsearchPB2",
]

#: Ray's fixed-point resource unit: a share of the head's driver slot is rounded down to it.
_RESOURCE_UNIT = 1e-4
#: The most trials at once the head-node gate can hold apart: each running nested run also pins a
#: placement-group cleaner there with a 0.001 sliver of the same resource, and k drivers of
#: 1/(k + 1/2) leave 1/(2k + 1) for k cleaners only while k <= 22.
MAX_GATED = 22


def driver_slot(concurrency: int) -> float:
    """Each trial driver's share of the head node's ``node:__internal_head__`` resource (1.0 in all)
    under population-based training: ``concurrency`` drivers fit at once and one more does not, so
    Tune keeps the rest of the population waiting (paused or pending) instead of starting drivers
    whose workers cannot be placed, and room is left for each running nested run's placement-group
    cleaner (Ray Train pins it to the head with a 0.001 share). Above :data:`MAX_GATED` trials at
    once the gate holds :data:`MAX_GATED`."""
    k = min(max(1, concurrency), MAX_GATED)
    return round(int((1.0 / (k + 0.5)) / _RESOURCE_UNIT) * _RESOURCE_UNIT, 4)


@dataclass(frozen=True)
class Donor:
    """The checkpoint an exploited trial continues from."""

    trial_id: str
    epoch: int | None
    checkpoint: str  # absolute path of the donor's nested checkpoint


@dataclass(frozen=True)
class Start:
    """Which nested run a trial driver runs: ``storage`` (relative to ``train/``, ``"."`` for the
    trial's first run) and ``name``; ``donor`` when it continues from another trial's checkpoint."""

    storage: str
    name: str
    donor: Donor | None = None

    def storage_path(self, runs_dir: str) -> str:
        return runs_dir if self.storage == "." else os.path.join(runs_dir, self.storage)


def resolve_start(trial_id: str, runs_dir: str, checkpoint: Any) -> Start:
    """The nested run a trial driver starts, from the Tune checkpoint it was restored from (``None``:
    the trial's first start). Writes the start file of a run that continues from a donor."""
    first = Start(".", trial_id)
    if checkpoint is None:
        return first
    with checkpoint.as_directory() as folder:
        pointer = files.read_pointer(folder)
    if pointer is None:  # not a population-based training checkpoint
        return first
    if pointer["trial_id"] == trial_id:  # paused, retried or resumed: its own run carries on
        return Start(str(pointer.get("storage", ".")), str(pointer["name"]))
    epoch = pointer.get("epoch")
    donor = Donor(str(pointer["trial_id"]), epoch, os.path.join(runs_dir, str(pointer["checkpoint"])))
    start = Start(trial_id, f"{PBT_RUN_PREFIX}{donor.trial_id}-e{epoch}", donor)
    run_folder = os.path.join(start.storage_path(runs_dir), start.name)
    if not os.path.exists(donor.checkpoint):
        raise FileNotFoundError(
            f"trial {trial_id} was to continue from trial {donor.trial_id}'s checkpoint of epoch {epoch}, "
            f"but {donor.checkpoint} is gone"
        )
    files.write_start(
        run_folder, {"checkpoint": donor.checkpoint, "donor_trial_id": donor.trial_id, "donor_epoch": epoch}
    )
    return start


def install_pointer_reports(trial_id: str, runs_dir: str, start: Start) -> None:
    """Make this trial driver's reports to Tune carry a pointer checkpoint (see the module's doc).

    Ray Train's ``TuneReportCallback`` puts each report on a queue that the driver's Tune session
    reports from (``_TrainSession._get_result_from_queues`` -> ``report(metrics)``), without a
    checkpoint. That ``report`` is wrapped on this process's session: a report whose metrics hold
    the nested checkpoint's path goes to Tune with a one-file checkpoint pointing at it.
    """
    from ray.train import Checkpoint
    from ray.train._internal.session import get_session
    from ray.tune.integration.ray_train import CHECKPOINT_PATH_KEY

    session = get_session()
    if session is None:
        return
    report = getattr(session.report, "_hpsearch_original", session.report)

    def pointer_report(metrics: dict[str, Any], checkpoint: Any = None) -> None:
        path = metrics.get(CHECKPOINT_PATH_KEY)
        if checkpoint is not None or not isinstance(path, str):
            report(metrics, checkpoint=checkpoint)
            return
        pointer = {
            "trial_id": trial_id,
            "storage": start.storage,
            "name": start.name,
            "checkpoint": os.path.relpath(path, runs_dir),
            "epoch": metrics.get(EPOCH),
        }
        with tempfile.TemporaryDirectory(prefix="hpsearch-pbt-") as folder:
            files.write_pointer(folder, pointer)
            report(metrics, checkpoint=Checkpoint.from_directory(folder))  # Tune copies the one file

    pointer_report._hpsearch_original = report  # type: ignore[attr-defined]  # installed once per session
    session.report = pointer_report  # type: ignore[method-assign]  # on this driver's session only


class _Lineage:
    """What hpsearch adds to Ray's PBT and PB2: each exploit recorded in the trial's folder, and a line printed."""

    _trial_state: dict[Any, Any]
    _time_attr: str
    _metric: str | None

    def __init__(
        self, *args: Any, hp_experiment_dir: Any = None, hp_stream: TextIO | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)  # Ray's scheduler, next in the MRO
        self._hp_experiment_dir = None if hp_experiment_dir is None else str(hp_experiment_dir)
        self._hp_stream = hp_stream

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles the scheduler into the experiment state; a stream is not picklable.
        return {**self.__dict__, "_hp_stream": None}

    def _exploit(self, tune_controller: Any, trial: Any, trial_to_clone: Any) -> None:
        own, donor = self._trial_state[trial], self._trial_state[trial_to_clone]
        old_config = copy.deepcopy(trial.config)
        own_result = dict(own.last_result or {})
        donor_result = dict(donor.last_result or {})
        donor_epoch = donor_result.get(self._time_attr)
        checkpoint = donor.last_checkpoint
        pointer = files.read_pointer(checkpoint.path) if getattr(checkpoint, "path", None) else None
        if pointer is not None and pointer.get("epoch") is not None:
            donor_epoch = pointer["epoch"]
        super()._exploit(tune_controller, trial, trial_to_clone)  # type: ignore[misc]  # Ray's, next in the MRO
        new_config = copy.deepcopy(trial.config)
        record = {
            "trial_id": trial.trial_id,
            "epoch": own_result.get(self._time_attr),
            "donor_trial_id": trial_to_clone.trial_id,
            "donor_epoch": donor_epoch,
            "metric": self._metric,
            "value": own_result.get(self._metric) if self._metric else None,
            "donor_value": donor_result.get(self._metric) if self._metric else None,
            "old_config": old_config,
            "new_config": new_config,
        }
        try:
            files.append_lineage(self._hp_run_folder(trial), record)
        except OSError as err:  # the exploit itself went ahead; say what was not recorded
            print(f"pbt: could not record the exploit of trial {trial.trial_id}: {err}", file=sys.stderr)
        self._hp_print(record)

    def _hp_run_folder(self, trial: Any) -> Path:
        experiment = self._hp_experiment_dir
        storage = getattr(trial, "storage", None)
        if storage is not None and getattr(storage, "experiment_fs_path", None):
            experiment = storage.experiment_fs_path  # where the experiment is now (it may have moved)
        return files.run_dir(experiment or ".", trial.trial_id)

    def _hp_print(self, record: Mapping[str, Any]) -> None:
        changed = describe_changes(record["old_config"], record["new_config"])
        metric = record["metric"] or "score"
        line = (
            f"pbt: trial {record['trial_id']} (epoch {record['epoch']}, {metric} {number(record['value'])}) continues "
            f"from trial {record['donor_trial_id']}'s epoch {record['donor_epoch']} "
            f"({metric} {number(record['donor_value'])}); {changed or 'config unchanged'}"
        )
        print(line, file=self._hp_stream or sys.stderr, flush=True)


class HpsearchPBT(_Lineage, PopulationBasedTraining):
    """Ray's ``PopulationBasedTraining``, recording each exploit (see the module's doc)."""


class HpsearchPB2(_Lineage, PB2):
    """Ray's ``PB2``, recording each exploit (see the module's doc)."""
