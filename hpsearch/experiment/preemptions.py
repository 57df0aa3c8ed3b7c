"""Drained nodes in a trial's attempts: each notice its loop read, and the restart that followed.

Ray Train (V2) tells every rank of a worker group that a node of it is being drained: ``ray drain-node``,
what an autoscaler or KubeRay sends before a spot node is reclaimed, read in the loop with
``ray.train.get_preemption_info()``. At the drain's deadline Ray Train restarts the worker group from the
run's latest checkpoint, and counts that apart from the failures (``max_preemption_failures``). Each
process keeps the part it knows, in the attempt's ``preemption.json``
(:data:`~hpsearch.experiment.layout.PREEMPTION_FILE`, JSON lines), and :func:`read_preemptions` puts the
parts together, without Ray:

- rank 0 of the attempt, in :func:`hpsearch.train.report`, as its loop reads a notice: a ``notice`` line
  (:func:`append_notice`): when, the drain's deadline, the drained nodes (Ray's id, the host, the ranks
  on it; ``"driver": true`` for the trial driver's node, which holds no rank: see
  :mod:`hpsearch.experiment.driver_drains`), the epoch and the report it was read at, and the epoch of the
  checkpoint saved there;
- the trial driver, after its nested run: a ``reason`` line per drained node (:func:`append_reason`), the
  reason message the drain gave, which Ray shows only once the node is gone;
- the Train controller's history of the trial's reports (``hpsearch_history.jsonl``, each with its
  checkpoint) and the attempts' own records: whether the worker group started again because of the drain,
  the epoch of the checkpoint it continued from, and how many reports the drained attempt made after that
  checkpoint (lost: the restarted loop makes them again).

A restart is the drain's when a later attempt of the same nested run started after the notice, the
drained attempt's loop had not returned on every rank (a run that finished before the deadline needs no
restart), and no failure of the loop was recorded between the two (``hpsearch_failures.jsonl``: a loop
that raised while it drained restarts as that failure, counted against ``failure.worker_retries``).
Which report falls before the restart is told by the history's times against the next attempt's start,
both UNIX seconds from the hosts' clocks; a restart takes seconds (the deadline, then a new worker group),
far more than the clocks of one cluster differ.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hpsearch.experiment.attempts import read_rank_progress
from hpsearch.experiment.folder_io import PathLike, append_line, finite_seconds, read_json, read_json_lines
from hpsearch.experiment.layout import ATTEMPT_FILE, EPOCH, FAILURES_FILE, HISTORY_FILE, PREEMPTION_FILE
from hpsearch.experiment.worker_ranks import RETURNED, AttemptProgress

__all__ = ["NOTICE", "REASON", "Preemption", "append_notice", "append_reason", "missing_reasons", "read_preemptions"]

#: The kinds of line in ``preemption.json``: a notice a loop read, a drained node's reason.
NOTICE = "notice"
REASON = "reason"


def append_notice(
    attempt_folder: PathLike,
    *,
    deadline: float | None,
    nodes: Sequence[Mapping[str, Any]],
    epoch: Any,
    report: int,
    saved_epoch: Any,
    forced: bool,
) -> None:
    """Append one notice of a drain, as rank 0 read it in its loop, to the attempt's ``preemption.json``.

    ``deadline``: when Ray will take the node away (UNIX seconds; ``None``: the drain gave none). ``nodes``:
    each drained node as ``{"node_id", "host", "ranks"}``. ``epoch`` and ``report``: the epoch the loop
    reported with the notice and the number of that report in this attempt (from 1). ``saved_epoch``: the
    epoch of the checkpoint saved at that report (``None``: none); ``forced``: saved because of the notice,
    where the loop's own cadence would not have.
    """
    record = {
        "kind": NOTICE,
        "time": time.time(),
        "deadline": deadline,
        "nodes": [dict(node) for node in nodes],
        "epoch": epoch,
        "report": report,
        "saved_epoch": saved_epoch,
        "forced": forced,
    }
    append_line(Path(attempt_folder) / PREEMPTION_FILE, record)


def append_reason(attempt_folder: PathLike, node_id: str, message: str) -> None:
    """Append the reason a drained node's drain gave (``ray drain-node --reason-message``) to the attempt's record."""
    append_line(
        Path(attempt_folder) / PREEMPTION_FILE,
        {"kind": REASON, "time": time.time(), "node_id": node_id, "message": message},
    )


@dataclass(frozen=True)
class Preemption:
    """One attempt of a trial whose loop read that a node of its worker group was being drained.

    Attributes:
        trial_id: The trial (its folder's name, ``train/<trial_id>/``).
        attempt: The drained attempt's number (``logs/attempt-<N>/``).
        noticed_at: When its loop read the (first) notice, UNIX seconds.
        deadline: When Ray would take the node away (the earliest, over its notices), or ``None``.
        node_ids: Ray's ids of the drained nodes; ``hosts``: their host names, in the same order (``""``: unknown).
        ranks: The world ranks on them.
        reason: The reason message of the drain (each node's, joined by ``; ``), ``""`` until Ray shows it.
        epoch: The epoch the loop reported with the notice; ``report``: that report's number in the attempt.
        saved_epoch: The epoch of the checkpoint saved at the notice (``None``: none was saved through
            :func:`hpsearch.train.report`); ``forced``: saved because of the notice.
        driver: Whether a drained node held the trial's driver (``resources.driver_node: any``), not a rank:
            the trial was paused and its next driver, elsewhere, started the worker group again
            (:mod:`hpsearch.experiment.driver_drains`).
        restarted: Whether the worker group started again because of the drain.
        restart_attempt: The attempt that continued it, or ``None``.
        restored_epoch: The epoch of the checkpoint the restart continued from (``None``: not restarted, or
            from no checkpoint: from the start).
        reports_lost: Reports the drained attempt made after that checkpoint, made again by the restart
            (``None``: not restarted).
    """

    trial_id: str
    attempt: int
    noticed_at: float | None
    deadline: float | None
    node_ids: tuple[str, ...]
    hosts: tuple[str, ...]
    ranks: tuple[int, ...]
    reason: str
    epoch: Any
    report: int | None
    saved_epoch: Any
    forced: bool
    driver: bool = False
    restarted: bool = False
    restart_attempt: int | None = None
    restored_epoch: Any = None
    reports_lost: int | None = None

    @property
    def warning_s(self) -> float | None:
        """Seconds from the notice to the deadline: the time the loop had to save, or ``None``."""
        if self.deadline is None or self.noticed_at is None:
            return None
        return self.deadline - self.noticed_at


def read_preemptions(trial_folder: PathLike) -> list[Preemption]:
    """Every attempt of a trial that read a drain notice, oldest first, with the restart that followed, if any."""
    folder = Path(trial_folder)
    attempts = read_rank_progress(folder)
    history = read_json_lines(folder / HISTORY_FILE)
    failed_at = [t for t in (finite_seconds(line.get("time")) for line in read_json_lines(folder / FAILURES_FILE)) if t]
    out = []
    for i, attempt in enumerate(attempts):
        lines = read_json_lines(attempt.folder / PREEMPTION_FILE)
        notices = [line for line in lines if line.get("kind") == NOTICE]
        if not notices:
            continue
        reasons = {
            str(line.get("node_id")): str(line.get("message") or "") for line in lines if line.get("kind") == REASON
        }
        found = _from_notices(folder.name, attempt.attempt, notices, reasons)
        after = attempts[i + 1] if i + 1 < len(attempts) else None
        if after is not None and _restarted_by_drain(attempt, after, found.noticed_at, failed_at):
            found = _with_restart(found, attempt, after, history)
        out.append(found)
    return out


def missing_reasons(trial_folder: PathLike) -> dict[Path, list[str]]:
    """Per attempt folder with a notice, the drained nodes whose reason is not recorded yet (none: left out)."""
    out: dict[Path, list[str]] = {}
    for attempt in read_rank_progress(trial_folder):
        lines = read_json_lines(attempt.folder / PREEMPTION_FILE)
        known = {str(line.get("node_id")) for line in lines if line.get("kind") == REASON}
        wanted = {
            str(node.get("node_id"))
            for line in lines
            if line.get("kind") == NOTICE
            for node in line.get("nodes") or []
            if isinstance(node, dict) and node.get("node_id")
        }
        if wanted - known:
            out[attempt.folder] = sorted(wanted - known)
    return out


def _from_notices(trial_id: str, attempt: int, notices: list[dict[str, Any]], reasons: dict[str, str]) -> Preemption:
    """An attempt's notices as one record: the first one's epoch and report, every node of them all."""
    first = notices[0]
    nodes: dict[str, dict[str, Any]] = {}
    for notice in notices:
        for node in notice.get("nodes") or []:
            if isinstance(node, dict) and node.get("node_id"):
                nodes.setdefault(str(node["node_id"]), node)
    deadlines = [d for d in (finite_seconds(n.get("deadline")) for n in notices) if d is not None]
    ranks = sorted({int(r) for node in nodes.values() for r in node.get("ranks") or [] if isinstance(r, int)})
    report = first.get("report")
    return Preemption(
        trial_id=trial_id,
        attempt=attempt,
        noticed_at=finite_seconds(first.get("time")),
        deadline=min(deadlines) if deadlines else None,
        node_ids=tuple(nodes),
        hosts=tuple(str(node.get("host") or "") for node in nodes.values()),
        ranks=tuple(ranks),
        reason="; ".join(dict.fromkeys(reasons[n] for n in nodes if reasons.get(n))),
        epoch=first.get("epoch"),
        report=report if isinstance(report, int) and not isinstance(report, bool) else None,
        saved_epoch=first.get("saved_epoch"),
        forced=first.get("forced") is True,
        driver=any(node.get("driver") is True for node in nodes.values()),
    )


def _restarted_by_drain(
    drained: AttemptProgress, after: AttemptProgress, noticed_at: float | None, failed_at: list[float]
) -> bool:
    """Whether ``after`` is the drained attempt's worker group started again because of the drain."""
    if drained.ranks and all(r.ended == RETURNED for r in drained.ranks) and not drained.missing:
        return False  # its loop returned on every rank: the run ended before the deadline
    if _run_name(drained.folder) != _run_name(after.folder):
        return False  # another nested run (an exploit under pbt/pb2): not a restart of this one
    since = noticed_at if noticed_at is not None else drained.started_at
    until = after.started_at
    if since is not None and until is not None:
        return not any(since <= t <= until for t in failed_at)  # a failure of the loop restarted it, if one did
    return True


def _run_name(attempt_folder: Path) -> str | None:
    record = read_json(attempt_folder / ATTEMPT_FILE)
    return str(record.get("run_name") or "") if isinstance(record, dict) else None


def _with_restart(
    found: Preemption, drained: AttemptProgress, after: AttemptProgress, history: list[dict[str, Any]]
) -> Preemption:
    """``found`` with the restart: the checkpoint the next attempt continued from, the reports lost."""
    restart = after.started_at if after.started_at is not None else math.inf
    before = [line for line in history if (finite_seconds(line.get("time")) or 0.0) < restart]
    saved = [line for line in before if line.get("checkpoint_path")]
    last_saved = finite_seconds(saved[-1].get("time")) if saved else None
    since = max(t for t in (drained.started_at, last_saved, -math.inf) if t is not None)
    own = [line for line in before if (finite_seconds(line.get("time")) or 0.0) > since]
    return replace(
        found,
        restarted=True,
        restart_attempt=after.attempt,
        restored_epoch=saved[-1].get(EPOCH) if saved else None,
        reports_lost=len(own),
    )
