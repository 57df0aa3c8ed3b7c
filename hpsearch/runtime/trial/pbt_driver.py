"""Population-based training, the trial driver's side: which nested run to start, and pointer reports.

This module runs in the trial driver, the Tune trial's actor. :mod:`hpsearch.runtime.trial.driver`
calls it under ``pbt``/``pb2``. The scheduler's side, in the search process, is
:mod:`hpsearch.runtime.search.pbt`, whose module doc tells the whole design. The two are kept apart so
that the driver imports neither Ray's schedulers nor PB2's packages. The scheduler, in turn,
imports nothing of the driver's session.

1. **Start.** :func:`resolve_start` reads the Tune checkpoint the driver was restored from. If
   there is none, or it is the trial's own pointer (after a pause, a retry or ``resume``), the
   nested run it was in carries on. If it is a donor's pointer (after an exploit), a new nested
   run starts in ``train/<trial_id>/pbt-<donor>-e<epoch>/``. Its
   :data:`~hpsearch.experiment.layout.START_FILE` names the donor's checkpoint, and
   :func:`hpsearch.train.restore` loads that checkpoint in place on the workers.
2. **Pointers.** :func:`install_pointer_reports` makes every report that the driver's Tune
   session sends carry a one-file Tune checkpoint (:data:`~hpsearch.experiment.layout.POINTER_FILE`).
   It names the nested run and the checkpoint the report stands for. So Ray's PBT has a
   checkpoint to hand over.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ray.train import Checkpoint
from ray.tune.integration.ray_train import CHECKPOINT_PATH_KEY

from hpsearch.experiment import files
from hpsearch.experiment.layout import EPOCH, PBT_RUN_PREFIX
from hpsearch.runtime.internals import DriverSession

__all__ = ["Donor", "Start", "resolve_start", "install_pointer_reports"]


@dataclass(frozen=True)
class Donor:
    """The checkpoint an exploited trial continues from."""

    trial_id: str
    epoch: int | None
    checkpoint: str  # absolute path of the donor's nested checkpoint


@dataclass(frozen=True)
class Start:
    """Which nested run a trial driver runs.

    ``storage`` is relative to ``train/``, and is ``"."`` for the trial's first run. ``name`` is
    the run's name. ``donor`` is set when the run continues from another trial's checkpoint.
    """

    storage: str
    name: str
    donor: Donor | None = None

    def storage_path(self, runs_dir: str) -> str:
        return runs_dir if self.storage == "." else os.path.join(runs_dir, self.storage)


def resolve_start(trial_id: str, runs_dir: str, checkpoint: Any) -> Start:
    """The nested run a trial driver starts, from the Tune checkpoint it was restored from.

    The checkpoint is ``None`` at the trial's first start. For a run that continues from a
    donor, this also writes the run's start file.
    """
    first = Start(".", trial_id)
    if checkpoint is None:
        return first
    with checkpoint.as_directory() as folder:
        pointer = files.read_pointer(folder)
    if pointer is None:  # not a population-based training checkpoint
        return first
    epoch = pointer.get("epoch")
    checkpoint = os.path.join(runs_dir, str(pointer["checkpoint"]))
    if pointer["trial_id"] == trial_id:  # after a pause, a retry or a resume, its own run carries on
        if not _superseded(checkpoint):
            return Start(str(pointer.get("storage", ".")), str(pointer["name"]))
        # The run went on past the report Tune paused it at (epochs are quick; the pause is not), and
        # Ray Train would resume it from that later checkpoint, whose reports Tune never had: with
        # nothing left to train, the trial would end without them. Continue from what Tune holds.
    donor = Donor(str(pointer["trial_id"]), epoch, checkpoint)
    start = Start(trial_id, _free_name(runs_dir, trial_id, f"{PBT_RUN_PREFIX}{donor.trial_id}-e{epoch}"), donor)
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


def _superseded(checkpoint: str) -> bool:
    """Whether the run that wrote ``checkpoint`` has written a later one beside it (Ray Train keeps a run's
    checkpoints as ``checkpoint_*`` folders in the run's folder)."""
    folder, name = os.path.split(os.path.normpath(checkpoint))
    try:
        mine = os.stat(checkpoint).st_mtime
        siblings = [entry for entry in os.scandir(folder) if entry.name.startswith(_CHECKPOINT_PREFIX)]
    except OSError:  # gone, or not on this node's file system: the run's own resume decides
        return False
    return any(entry.name != name and entry.is_dir() and entry.stat().st_mtime > mine for entry in siblings)


def _free_name(runs_dir: str, trial_id: str, name: str) -> str:
    """``name``, or ``name-2``, ``name-3``...: a run folder not used yet (a second start from the same checkpoint
    must not resume the first one's run)."""
    candidate, n = name, 1
    while os.path.exists(os.path.join(runs_dir, trial_id, candidate)):
        n += 1
        candidate = f"{name}-{n}"
    return candidate


#: How Ray Train names a run's checkpoint folders (``checkpoint_<timestamp>``).
_CHECKPOINT_PREFIX = "checkpoint_"


def install_pointer_reports(trial_id: str, runs_dir: str, start: Start) -> None:
    """Make this trial driver's reports to Tune carry a pointer checkpoint (see the module's doc).

    Ray Train's ``TuneReportCallback`` puts each report on a queue, without a checkpoint. The
    driver's Tune session reports from that queue
    (``_TrainSession._get_result_from_queues`` -> ``report(metrics)``). That ``report`` is
    wrapped on this process's session. A report whose metrics hold the nested checkpoint's path
    then goes to Tune with a one-file checkpoint pointing at it.
    """
    session = DriverSession.current()
    if session is None:
        return
    session.wrap_report(
        lambda report: _pointer_reports(report, trial_id, runs_dir, start, Checkpoint, CHECKPOINT_PATH_KEY)
    )


def _pointer_reports(
    report: Callable[..., None], trial_id: str, runs_dir: str, start: Start, checkpoint_type: Any, path_key: str
) -> Callable[..., None]:
    """``report`` that sends each report holding a nested checkpoint's path with a pointer checkpoint."""

    def pointer_report(metrics: dict[str, Any], checkpoint: Any = None) -> None:
        path = metrics.get(path_key)
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
            report(metrics, checkpoint=checkpoint_type.from_directory(folder))  # Tune copies the one file

    return pointer_report
