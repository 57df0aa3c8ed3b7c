"""A trial driver's node being drained: the notice its driver writes, the save its loop makes, the pause it waits for.

With ``resources.driver_node: any`` a trial's driver (Tune's trial actor) may sit on a node that is drained
(``ray drain-node``, a spot reclaim). At the drain's deadline the driver dies, and with it the nested run's
controller and workers, wherever they are. Three processes take turns through one small file in the
trial's folder, ``train/<trial_id>/hpsearch_driver_drain.json``
(:data:`~hpsearch.experiment.layout.DRIVER_DRAIN_FILE`), so that the trial is paused and resumed elsewhere
instead of failing:

1. the trial driver, which watches its own node, writes the notice (:func:`write_notice`): its node, host and
   the drain's deadline;
2. rank 0 of the worker group, in :func:`hpsearch.train.report`, reads it at its next report, saves a
   checkpoint there and says so in the file before that report leaves (:func:`mark_saved`);
3. the search's scheduler, in the search process, reads it at each result of the trial and pauses the trial at
   the first result that carries that checkpoint, or, for a loop that never saves one, at the first result
   once little of the notice is left (:meth:`DriverNotice.pause_now`). Tune then starts the trial again on a
   node that is not being drained, and its nested run carries on from its latest checkpoint.

The next driver of the trial removes the file at its start (:func:`clear_notice`). Rank 0 also records the
notice in its attempt's ``preemption.json`` as a drained node holding no rank, so the history and the report
say it (:mod:`hpsearch.experiment.preemptions`). Pure: no Ray.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hpsearch.experiment.folder_io import PathLike, finite_seconds, read_json, replace_json
from hpsearch.experiment.layout import DRIVER_DRAIN_FILE

__all__ = [
    "DriverNotice",
    "write_notice",
    "read_notice",
    "mark_saved",
    "clear_notice",
    "watch_folder",
    "watched_folder",
    "PAUSE_MARGIN",
]

#: A loop that saves no checkpoint for the notice is paused at its first result once less than this share of
#: the notice is left (and never less than :data:`MIN_MARGIN_S`), so Tune pauses it before the deadline.
PAUSE_MARGIN = 0.35
MIN_MARGIN_S = 5.0
#: A drain without a deadline waits for the node to empty: such a loop is paused this long after the notice.
NO_DEADLINE_WAIT_S = 60.0


@dataclass(frozen=True)
class DriverNotice:
    """A trial driver's node is being drained.

    Attributes:
        node_id: Ray's id of the driver's node; ``host``: its host name.
        noticed_at: When the driver read the drain (UNIX seconds).
        deadline: When Ray takes the node away (UNIX seconds), or ``None``: the drain gave none.
        saved_report: The report (of its attempt, from 1) at which rank 0 saved a checkpoint for the notice,
            or ``None``: not yet, or the loop does not save through :func:`hpsearch.train.report`.
        saved_epoch: That report's epoch.
    """

    node_id: str
    host: str
    noticed_at: float
    deadline: float | None
    saved_report: int | None = None
    saved_epoch: Any = None

    def time_left(self, now: float) -> float | None:
        """Seconds until the deadline (``None``: no deadline)."""
        return None if self.deadline is None else self.deadline - now

    def pause_now(self, result_has_checkpoint: bool, now: float | None = None) -> bool:
        """Whether the trial should be paused at a result that arrives now.

        At the first result carrying a checkpoint once rank 0 saved one for the notice (the saved report is
        marked before it leaves, so such a result holds that checkpoint or a later one). Failing that, once the
        deadline is near: what is left of the notice falls under :data:`PAUSE_MARGIN` of it (at least
        :data:`MIN_MARGIN_S`), or :data:`NO_DEADLINE_WAIT_S` passed without a deadline.
        """
        now = time.time() if now is None else now
        if self.saved_report is not None and result_has_checkpoint:
            return True
        if self.deadline is None:
            return now - self.noticed_at >= NO_DEADLINE_WAIT_S
        margin = max(MIN_MARGIN_S, PAUSE_MARGIN * max(0.0, self.deadline - self.noticed_at))
        return self.deadline - now <= margin

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def write_notice(trial_folder: PathLike, notice: DriverNotice) -> None:
    """The trial driver: say that its node is being drained (replacing the file whole, so readers see all or none)."""
    replace_json(Path(trial_folder) / DRIVER_DRAIN_FILE, notice.as_dict())


def read_notice(trial_folder: PathLike) -> DriverNotice | None:
    """The notice in a trial's folder, or ``None``: none, or not one hpsearch wrote (a damaged file is no notice)."""
    data = read_json(Path(trial_folder) / DRIVER_DRAIN_FILE)
    if not isinstance(data, dict) or not isinstance(data.get("node_id"), str):
        return None
    noticed_at = finite_seconds(data.get("noticed_at"))
    if noticed_at is None:
        return None
    report = data.get("saved_report")
    return DriverNotice(
        node_id=data["node_id"],
        host=str(data.get("host") or ""),
        noticed_at=noticed_at,
        deadline=finite_seconds(data.get("deadline")),
        saved_report=report if isinstance(report, int) and not isinstance(report, bool) else None,
        saved_epoch=data.get("saved_epoch"),
    )


def mark_saved(trial_folder: PathLike, notice: DriverNotice, *, report: int, epoch: Any) -> DriverNotice:
    """Rank 0: the checkpoint for ``notice`` is saved at ``report``; written before that report leaves."""
    saved = replace(notice, saved_report=report, saved_epoch=epoch)
    write_notice(trial_folder, saved)
    return saved


def clear_notice(trial_folder: PathLike) -> bool:
    """The trial's next driver, at its start: the notice is spent. Whether there was one."""
    try:
        os.unlink(Path(trial_folder) / DRIVER_DRAIN_FILE)
    except FileNotFoundError:
        return False
    return True


_WATCHED: list[Path] = []


def watch_folder(trial_folder: PathLike | None) -> None:
    """A Train worker: say (``None``: forget) the trial folder whose driver's notice its reports read; set only
    while the trial's driver watches its node (``resources.driver_node: any``)."""
    _WATCHED[:] = [] if trial_folder is None else [Path(trial_folder)]


def watched_folder() -> Path | None:
    """The trial folder set by :func:`watch_folder`, or ``None``: no driver of this loop watches its node."""
    return _WATCHED[0] if _WATCHED else None
