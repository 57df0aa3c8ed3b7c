"""A trial's logs folder, ``train/<trial_id>/logs/``: its attempts, and each Train worker rank's log and progress.

Each start of a trial's worker group is one attempt (``logs/attempt-<N>/``), created whole by the
first rank to come (:func:`claim_attempt`); each rank keeps its log and a small progress record
there, which :func:`read_rank_progress` reads back as
:class:`~hpsearch.experiment.worker_ranks.AttemptProgress` for the decisions of
:mod:`hpsearch.experiment.worker_ranks`. The controller's output is ``logs/controller.log``.

A Train worker's own attempt folder reaches the helpers the user's loop calls (:func:`hpsearch.train.report`
records a drain notice there) through this module, which both import: :func:`set_current_attempt` as the
loop starts (hpsearch's wrapper around it), :func:`current_attempt` where it is needed. One per process: a
Train worker process runs one attempt.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpsearch.experiment.folder_io import PathLike, finite_seconds, read_json, replace_json, write_json
from hpsearch.experiment.layout import ATTEMPT_DIR, ATTEMPT_FILE, CONTROLLER_LOG, LOGS_DIR, RANK_LOG, RANK_PROGRESS
from hpsearch.experiment.worker_ranks import RAISED, RETURNED, AttemptProgress, RankProgress

__all__ = [
    "logs_dir",
    "controller_log",
    "rank_log",
    "attempt_numbers",
    "claim_attempt",
    "write_rank_progress",
    "read_rank_progress",
    "set_current_attempt",
    "current_attempt",
]


def logs_dir(trial_folder: PathLike) -> Path:
    """A trial's logs folder: ``train/<trial_id>/logs/`` (its controller's log and one folder per attempt)."""
    return Path(trial_folder) / LOGS_DIR


def controller_log(trial_folder: PathLike) -> Path:
    """The file that keeps a trial's Train controller output: ``train/<trial_id>/logs/controller.log``."""
    return logs_dir(trial_folder) / CONTROLLER_LOG


def rank_log(attempt_folder: PathLike, rank: int) -> Path:
    """Rank ``rank``'s log in an attempt's folder: ``rank-<R>.log``."""
    return Path(attempt_folder) / RANK_LOG.format(rank=rank)


def attempt_numbers(trial_folder: PathLike) -> list[int]:
    """The numbers of a trial's attempt folders (``logs/attempt-<N>/``), smallest first; ``[]`` when none."""
    prefix, _, suffix = ATTEMPT_DIR.partition("{n}")
    try:
        names = os.listdir(logs_dir(trial_folder))
    except OSError:
        return []
    numbers = []
    for name in names:
        middle = (
            name[len(prefix) : len(name) - len(suffix)] if name.startswith(prefix) and name.endswith(suffix) else ""
        )
        if middle.isdigit():
            numbers.append(int(middle))
    return sorted(numbers)


#: How many of the newest attempts a rank looks through for the one its worker group started.
_ATTEMPTS_LOOKED_AT = 8


def claim_attempt(
    trial_folder: PathLike,
    *,
    group_id: str,
    world_size: int,
    run_name: str = "",
    started_at: float | None = None,
) -> tuple[int, Path]:
    """The attempt of the worker group ``group_id``: its number and folder, created by whichever rank comes first.

    Every rank of one start of a trial's worker group calls this with the group's placement group
    id. The first to come creates ``logs/attempt-<N>/`` (N one above the highest), whole: a staging
    folder holding its record is renamed into place, which fails when another group's or rank's is
    there first (a folder with a record in it is never replaced); the others find the folder whose
    record names their group. So all ranks of a start agree on N, on every node, with no rank waiting
    for another.
    """
    logs = logs_dir(trial_folder)
    logs.mkdir(parents=True, exist_ok=True)
    for _ in range(1000):
        numbers = attempt_numbers(trial_folder)
        for n in reversed(numbers[-_ATTEMPTS_LOOKED_AT:]):
            folder = logs / ATTEMPT_DIR.format(n=n)
            record = read_json(folder / ATTEMPT_FILE)
            if isinstance(record, dict) and record.get("group_id") == group_id:
                return n, folder
        n = (numbers[-1] if numbers else 0) + 1
        staging = logs / f".staging-{group_id[:16]}-{os.getpid()}"
        staging.mkdir(exist_ok=True)
        record = {
            "attempt": n,
            "group_id": group_id,
            "world_size": int(world_size),
            "run_name": run_name,
            "started_at": time.time() if started_at is None else started_at,
        }
        write_json(staging / ATTEMPT_FILE, record, indent=None)
        target = logs / ATTEMPT_DIR.format(n=n)
        try:
            os.rename(staging, target)  # atomic; refused when the target exists with anything in it
            return n, target
        except OSError:  # another rank (or group) made attempt-<n> first: look again
            (staging / ATTEMPT_FILE).unlink(missing_ok=True)
            try:
                staging.rmdir()
            except OSError:
                pass
    raise OSError(f"could not create an attempt folder in {logs}")


def write_rank_progress(attempt_folder: PathLike, rank: int, record: Mapping[str, Any]) -> None:
    """Replace rank ``rank``'s progress record in an attempt's folder (``rank-<R>.json``), whole.

    ``record``: ``started_at``, ``reports`` (completed), ``in_report``, ``last_report_at``, ``ended``
    (``"returned"``, ``"raised"`` or ``None``), ``ended_at``, ``error``, ``host``, ``pid``, ``counted``
    (``False`` when the rank's reports could not be counted).
    """
    replace_json(Path(attempt_folder) / RANK_PROGRESS.format(rank=rank), {"rank": rank, **record})


def read_rank_progress(trial_folder: PathLike, *, after: int = 0) -> list[AttemptProgress]:
    """Every attempt of a trial (those numbered above ``after``), oldest first, with each rank's progress.

    An attempt lists the ranks that recorded a start (``AttemptProgress.missing`` names those of
    its world that did not), in rank order. A record cut short reads as missing; a trial whose
    loop never started, or a folder of an hpsearch that kept no records, reads as ``[]``.
    """
    out = []
    prefix, _, suffix = RANK_PROGRESS.partition("{rank}")
    for n in attempt_numbers(trial_folder):
        if n <= after:
            continue
        folder = logs_dir(trial_folder) / ATTEMPT_DIR.format(n=n)
        record = read_json(folder / ATTEMPT_FILE)
        record = record if isinstance(record, dict) else {}
        ranks = []
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            middle = (
                name[len(prefix) : len(name) - len(suffix)] if name.startswith(prefix) and name.endswith(suffix) else ""
            )
            if not middle.isdigit():
                continue
            data = read_json(folder / name)
            if isinstance(data, dict):
                ranks.append(_rank_progress(int(middle), data, folder))
        out.append(
            AttemptProgress(
                attempt=n,
                folder=folder,
                group_id=str(record.get("group_id") or ""),
                world_size=record["world_size"] if isinstance(record.get("world_size"), int) else None,
                started_at=finite_seconds(record.get("started_at")),
                ranks=tuple(sorted(ranks, key=lambda r: r.rank)),
            )
        )
    return out


def _rank_progress(rank: int, data: Mapping[str, Any], folder: Path) -> RankProgress:
    reports = data.get("reports")
    ended = data.get("ended")
    pid = data.get("pid")
    return RankProgress(
        rank=rank,
        started_at=finite_seconds(data.get("started_at")),
        reports=reports if isinstance(reports, int) and not isinstance(reports, bool) and reports >= 0 else 0,
        in_report=data.get("in_report") is True,
        last_report_at=finite_seconds(data.get("last_report_at")),
        ended=ended if ended in (RETURNED, RAISED) else None,
        ended_at=finite_seconds(data.get("ended_at")),
        error=str(data.get("error") or ""),
        log=rank_log(folder, rank),
        host=str(data.get("host") or ""),
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        counted=data.get("counted") is not False,
    )


#: The attempt folder this process's loop runs in, while hpsearch's wrapper runs it (``None``: none).
_CURRENT: list[Path] = []


def set_current_attempt(folder: PathLike | None) -> None:
    """Say (``None``: forget) which attempt folder this process's loop runs in: a Train worker runs one attempt."""
    _CURRENT[:] = [] if folder is None else [Path(folder)]


def current_attempt() -> Path | None:
    """The attempt folder this process's loop runs in (:func:`set_current_attempt`), or ``None`` outside one."""
    return _CURRENT[0] if _CURRENT else None
