"""Readers and writers of every file hpsearch keeps in an experiment folder.

Everything that touches the folder goes through here: the search writes with these
functions (:mod:`hpsearch.runtime`), :func:`hpsearch.load_results` reads with them, and
the tests build fake experiments with the same writers. File names are in
:mod:`hpsearch.experiment.layout`. The files with more to them have a module each, whose
names this one re-exports: the low-level access and its safety rules
(:mod:`~hpsearch.experiment.folder_io`), the folder's format
(:mod:`~hpsearch.experiment.folder_format`), the spec as run
(:mod:`~hpsearch.experiment.spec_as_run`), the usage records (:mod:`~hpsearch.experiment.usage`),
a trial's attempts and rank logs (:mod:`~hpsearch.experiment.attempts`) and the drain notices its
attempts read (:mod:`~hpsearch.experiment.preemptions`).

Readers never raise on a damaged file: a missing or half-written file reads as
``None`` (or as the lines that parse), because a folder of a running or killed search
is a normal thing to read.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpsearch.experiment.attempts import (
    attempt_numbers,
    claim_attempt,
    controller_log,
    current_attempt,
    logs_dir,
    rank_log,
    read_rank_progress,
    set_current_attempt,
    write_rank_progress,
)
from hpsearch.experiment.failures import Failure
from hpsearch.experiment.folder_format import check_format, read_format, write_format
from hpsearch.experiment.folder_io import (
    PathLike,
    append_line,
    inside,
    is_trial_id,
    make_experiment_folder,
    read_json,
    read_json_lines,
    replace_json,
    run_dir,
    trial_folder,
    write_json,
    write_no_link,
)
from hpsearch.experiment.layout import (
    CHECK_FILE,
    CONTROLLER_FILE,
    ESTIMATE_FILE,
    FAILURES_FILE,
    HISTORY_FILE,
    LINEAGE_FILE,
    MISSING_METRIC_FILE,
    OUTCOMES_FILE,
    PLAN_FILE,
    POINTER_FILE,
    RAY_LOGS_FILE,
    START_FILE,
    STATUSES,
    SUMMARY_FILE,
    WORKER_GROUP_FILE,
    TrialStatus,
    is_experiment,
)
from hpsearch.experiment.preemptions import (
    Preemption,
    append_notice,
    append_reason,
    missing_reasons,
    read_preemptions,
)
from hpsearch.experiment.spec_as_run import (
    MAX_FOLDER_SPEC_BYTES,
    SpecAsRun,
    experiment_spec,
    read_spec,
    read_spec_as_run,
    write_spec,
)
from hpsearch.experiment.trial_status import recorded_status
from hpsearch.experiment.usage import Stint, Usage, read_usage, record_search_stint, record_trial_stint

__all__ = [
    "PathLike",
    "write_format",
    "read_format",
    "check_format",
    "Outcome",
    "RayLogs",
    "is_experiment",
    "experiment_spec",
    "run_dir",
    "write_no_link",
    "is_trial_id",
    "trial_folder",
    "inside",
    "make_experiment_folder",
    "write_spec",
    "read_spec",
    "read_spec_as_run",
    "SpecAsRun",
    "MAX_FOLDER_SPEC_BYTES",
    "write_plan",
    "read_plan",
    "append_outcome",
    "read_outcome_records",
    "read_outcomes",
    "append_history",
    "count_history",
    "read_history",
    "write_check",
    "read_check",
    "write_estimate",
    "read_estimate",
    "write_summary",
    "read_summary",
    "write_controller",
    "append_lineage",
    "read_lineage",
    "write_pointer",
    "read_pointer",
    "write_start",
    "read_start",
    "read_controller",
    "write_worker_group",
    "read_worker_group",
    "read_worker_starts",
    "logs_dir",
    "controller_log",
    "attempt_numbers",
    "claim_attempt",
    "rank_log",
    "write_rank_progress",
    "read_rank_progress",
    "set_current_attempt",
    "current_attempt",
    "Preemption",
    "append_notice",
    "append_reason",
    "missing_reasons",
    "read_preemptions",
    "WORKER_STARTS_KEPT",
    "append_ray_logs",
    "read_ray_logs",
    "Stint",
    "Usage",
    "record_trial_stint",
    "record_search_stint",
    "read_usage",
    "read_json",
    "read_json_lines",
]


@dataclass(frozen=True)
class Outcome:
    """How one trial ended: one line of ``hpsearch_trials.jsonl``.

    Attributes:
        trial_id: Tune's trial id.
        status: ``finished``, ``stopped`` (early, by the scheduler) or ``errored``.
        reports: How many results Tune received for the trial in this run of it.
        last_epoch: The epoch (else Tune's iteration) of the trial's last report, or ``None``.
        ended_at: When it ended, in UNIX seconds.
        error: The line that says what went wrong (errored trials), else ``""``.
        ended_by: The budget that stopped it (``max_wall_time``, ...; see :mod:`hpsearch.spec.budget`), else
            ``None``. Such a trial was running when a budget ended the search: it is ``stopped``, its checkpoints
            kept, and ``hpsearch resume`` continues it from its latest checkpoint.
        preempted: How many times its worker group started again because a node of it was drained (a spot
            reclaim; see :mod:`hpsearch.experiment.preemptions`): restarts, never errors.
    """

    trial_id: str
    status: TrialStatus
    reports: int = 0
    last_epoch: float | None = None  # an int when whole (fractional epochs stay as reported)
    ended_at: float | None = None
    error: str = ""
    ended_by: str | None = None
    preempted: int = 0

    def as_record(self) -> dict[str, Any]:
        record = asdict(self)
        record["iterations"] = self.last_epoch or 0  # the name files before 0.2 used; kept for their readers
        return record


@dataclass(frozen=True)
class RayLogs:
    """Where one Ray session of a search kept its logs: one line of ``hpsearch_ray_logs.jsonl``.

    Attributes:
        logs_dir: Ray's session log folder on ``host`` (``/tmp/ray/session_*/logs``), or ``None``
            when the driver had none of its own (a Ray Client driver). On a cluster every node
            keeps its own, under the same session name.
        driver_log: The file that holds the driver's own Ray log records (Tune's errors), or ``None``.
        host: The machine the driver ran on.
        address: The cluster address given (``None``: an embedded local Ray).
        recorded_at: When the session was recorded, in UNIX seconds.
    """

    logs_dir: str | None
    driver_log: str | None
    host: str = ""
    address: str | None = None
    recorded_at: float | None = None


# ----------------------------------------------------------------------------- the plan


def write_plan(experiment_dir: PathLike, plan: Mapping[str, Any]) -> None:
    """Write the resource plan (``Plan.as_dict()``)."""
    write_json(Path(experiment_dir) / PLAN_FILE, dict(plan))


def read_plan(experiment_dir: PathLike) -> dict[str, Any] | None:
    """The resource plan the search ran with, or ``None``."""
    data = read_json(Path(experiment_dir) / PLAN_FILE)
    return data if isinstance(data, dict) else None


# ----------------------------------------------------------------------------- outcomes


def append_outcome(experiment_dir: PathLike, outcome: Outcome) -> None:
    """Append one trial end to the outcomes file (raises ``OSError`` if it cannot be written)."""
    if outcome.status not in STATUSES:
        raise ValueError(f"not a trial status: {outcome.status!r}")
    append_line(Path(experiment_dir) / OUTCOMES_FILE, outcome.as_record())


def read_outcome_records(experiment_dir: PathLike) -> dict[str, dict[str, Any]]:
    """Trial id -> its last end record (a retried trial can end more than once)."""
    out: dict[str, dict[str, Any]] = {}
    for record in read_json_lines(Path(experiment_dir) / OUTCOMES_FILE):
        if record.get("trial_id"):
            out[str(record["trial_id"])] = record
    return out


def read_outcomes(experiment_dir: PathLike) -> dict[str, TrialStatus]:
    """Trial id -> how it ended (the last line per trial wins); lines with no known status are left out."""
    out: dict[str, TrialStatus] = {}
    for trial_id, record in read_outcome_records(experiment_dir).items():
        status = recorded_status(record)  # the rule load_results' statuses start from
        if status is not None:
            out[trial_id] = status
    return out


# ----------------------------------------------------------------------------- history


def append_history(run_folder: PathLike, metrics: Mapping[str, Any], *, checkpoint_path: str | None = None) -> None:
    """Append one report of a trial to ``train/<trial_id>/hpsearch_history.jsonl``.

    Called in the nested run's controller for every report forwarded to Tune.
    """
    record: dict[str, Any] = {"time": time.time(), **metrics}
    if checkpoint_path is not None:
        record["checkpoint_path"] = checkpoint_path
    append_line(Path(run_folder) / HISTORY_FILE, record)


def count_history(experiment_dir: PathLike, trial_id: str) -> int:
    """How many reports a trial's history holds (its lines, counted without parsing them)."""
    try:
        folder = trial_folder(experiment_dir, trial_id)
        if folder is None:
            return 0
        data = (folder / HISTORY_FILE).read_bytes()
    except OSError:
        return 0
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def read_history(experiment_dir: PathLike, trial_id: str) -> list[dict[str, Any]]:
    """Every report kept for a trial, across restarts, oldest first (``time`` is when it was forwarded)."""
    folder = trial_folder(experiment_dir, trial_id)
    return read_json_lines(folder / HISTORY_FILE) if folder is not None else []


# ----------------------------------------------------------------------------- check


def write_check(folder: PathLike, record: Mapping[str, Any]) -> None:
    """Write ``hpsearch check``'s verdicts and measured times into its folder (``hpsearch_check.json``)."""
    write_json(Path(folder) / CHECK_FILE, dict(record))


def read_check(folder: PathLike) -> dict[str, Any] | None:
    """``hpsearch check``'s record in its folder (``<experiment_dir>.check``), as written; ``None`` when there is
    none, or it is half-written or not a JSON object (read by ``hpsearch plan --estimate``)."""
    record = read_json(Path(folder) / CHECK_FILE)
    return record if isinstance(record, dict) else None


# ----------------------------------------------------------------------------- summary


def write_estimate(experiment_dir: PathLike, record: Mapping[str, Any]) -> None:
    """Write the estimate made as the search started (``Estimate.as_dict()`` and where it came from)."""
    write_json(Path(experiment_dir) / ESTIMATE_FILE, dict(record))


def read_estimate(experiment_dir: PathLike) -> dict[str, Any] | None:
    """The estimate made as the search started, or ``None`` (the spec was not checked first)."""
    data = read_json(Path(experiment_dir) / ESTIMATE_FILE)
    return data if isinstance(data, dict) else None


def write_summary(experiment_dir: PathLike, summary: Mapping[str, Any]) -> None:
    """Write the search's outcome (``SearchSummary.as_dict()``)."""
    write_json(Path(experiment_dir) / SUMMARY_FILE, dict(summary))


def read_summary(experiment_dir: PathLike) -> dict[str, Any] | None:
    """The summary written when the search ended, or ``None``."""
    data = read_json(Path(experiment_dir) / SUMMARY_FILE)
    return data if isinstance(data, dict) else None


# ----------------------------------------------------------------------------- controller record


def write_controller(
    run_folder: PathLike, *, actor_id: str | None, node_id: str, pid: int, create_time: float | None = None
) -> None:
    """Record which process ran a nested run's controller (see :mod:`hpsearch.runtime.ray_workarounds`).

    ``create_time``: the process's start time (psutil's), so that a PID reused by another
    process is never taken for the controller.
    """
    os.makedirs(run_folder, exist_ok=True)
    record = {"actor_id": actor_id, "node_id": node_id, "pid": pid, "create_time": create_time}
    write_json(Path(run_folder) / CONTROLLER_FILE, record, indent=None)


def read_controller(run_folder: PathLike) -> dict[str, Any] | None:
    """The controller record of a nested run, or ``None`` (it never reported)."""
    data = read_json(Path(run_folder) / CONTROLLER_FILE)
    return data if isinstance(data, dict) else None


def write_missing_metric(
    run_folder: PathLike, search_token: str, *, metric: str, reported: list[str], named_by: str = "metric"
) -> None:
    """Record that a run of the trial reported without ``metric`` (named by the spec's ``named_by``) in the
    search ``search_token``."""
    os.makedirs(run_folder, exist_ok=True)
    record = {"search": search_token, "metric": metric, "reported": list(reported), "named_by": named_by}
    write_json(Path(run_folder) / MISSING_METRIC_FILE, record, indent=None)


def read_missing_metric(run_folder: PathLike, search_token: str) -> dict[str, Any] | None:
    """``{"metric", "reported", "named_by"}`` when a run of the trial missed a required metric in the search
    ``search_token``, else ``None``."""
    data = read_json(Path(run_folder) / MISSING_METRIC_FILE)
    if not isinstance(data, dict) or data.get("search") != search_token or not isinstance(data.get("metric"), str):
        return None
    named_by = data.get("named_by")
    return {
        "metric": data["metric"],
        "reported": [str(r) for r in data.get("reported") or []],
        "named_by": named_by if isinstance(named_by, str) else "metric",
    }


def append_failure(run_folder: PathLike, failure: Failure) -> None:
    """Record one failure of the trial's worker group (``train/<trial_id>/hpsearch_failures.jsonl``)."""
    os.makedirs(run_folder, exist_ok=True)
    append_line(Path(run_folder) / FAILURES_FILE, {"time": time.time(), **failure.as_dict()})


def read_failures(run_folder: PathLike) -> list[Failure]:
    """The trial's recorded failures, oldest first (lines that do not read as one are skipped)."""
    found = (Failure.from_dict(line) for line in read_json_lines(Path(run_folder) / FAILURES_FILE))
    return [f for f in found if f is not None]


#: The most worker-group starts kept per trial (the latest): a trial restarts its workers after a failure,
#: a node's loss or, when elastic, a resize.
WORKER_STARTS_KEPT = 1000


def write_worker_group(
    run_folder: PathLike,
    *,
    group_id: str,
    run_name: str,
    node_ids: Sequence[str] = (),
    workers: int | None = None,
    started_at: float | None = None,
) -> None:
    """Record a nested run's worker placement group and the nodes its workers run on.

    :mod:`hpsearch.runtime.trial.reuse` reads the group; :mod:`hpsearch.runtime.nodes.node_watch` reads the
    nodes, to name the trials a node that leaves the cluster held workers for. With ``workers``
    (the group's size), this start is also added to the trial's ``starts``, kept across its runs
    (:func:`read_worker_starts`): how many workers the trial had, on which nodes, since when
    (``started_at``, seconds since the epoch).
    """
    os.makedirs(run_folder, exist_ok=True)
    path = Path(run_folder) / WORKER_GROUP_FILE
    record: dict[str, Any] = {"group_id": group_id, "run_name": run_name, "node_ids": list(node_ids)}
    starts = _starts(read_json(path))
    if workers is not None:
        starts.append(
            {"started_at": started_at, "workers": int(workers), "node_ids": list(node_ids), "run_name": run_name}
        )
    if starts:
        record["starts"] = starts[-WORKER_STARTS_KEPT:]
    replace_json(path, record)


def read_worker_group(run_folder: PathLike) -> dict[str, Any] | None:
    """The worker-group record of a trial's latest nested run, or ``None`` (its loop never started)."""
    data = read_json(Path(run_folder) / WORKER_GROUP_FILE)
    return data if isinstance(data, dict) else None


def read_worker_starts(run_folder: PathLike) -> list[dict[str, Any]]:
    """Each start of a trial's worker groups, oldest first: ``started_at`` (seconds since the epoch),
    ``workers``, ``node_ids`` and ``run_name``. Empty when none was recorded (a trial whose loop never
    started, or a folder of an hpsearch that did not record them)."""
    return _starts(read_json(Path(run_folder) / WORKER_GROUP_FILE))


def _starts(record: Any) -> list[dict[str, Any]]:
    starts = record.get("starts") if isinstance(record, dict) else None
    out = []
    for start in starts if isinstance(starts, list) else []:
        if not isinstance(start, dict) or not isinstance(start.get("workers"), int):
            continue
        at = start.get("started_at")
        nodes = start.get("node_ids")
        out.append(
            {
                "started_at": float(at) if isinstance(at, (int, float)) else None,
                "workers": start["workers"],
                "node_ids": [str(n) for n in nodes] if isinstance(nodes, list) else [],
                "run_name": str(start.get("run_name") or ""),
            }
        )
    return out


# ----------------------------------------------------------------------------- PBT lineage


def append_lineage(run_folder: PathLike, record: Mapping[str, Any]) -> None:
    """Append one exploit of a trial to ``train/<trial_id>/hpsearch_lineage.jsonl``.

    ``record`` holds ``trial_id``, ``donor_trial_id``, ``donor_epoch`` (the epoch the trial
    continues from), ``epoch`` (the trial's own epoch when it was replaced), ``old_config``,
    ``new_config`` and ``time`` (when the scheduler paused the trial; added when missing).
    """
    append_line(Path(run_folder) / LINEAGE_FILE, {"time": time.time(), **record})


def read_lineage(experiment_dir: PathLike, trial_id: str) -> list[dict[str, Any]]:
    """Every exploit of a trial under population-based training, oldest first (none: ``[]``)."""
    folder = trial_folder(experiment_dir, trial_id)
    return read_json_lines(folder / LINEAGE_FILE) if folder is not None else []


def write_pointer(folder: PathLike, pointer: Mapping[str, Any]) -> None:
    """Write the pointer a Tune checkpoint holds under population-based training: ``trial_id``,
    ``storage`` and ``name`` (the nested run, ``storage`` relative to ``train/``), ``checkpoint``
    (relative to ``train/``) and ``epoch``."""
    os.makedirs(folder, exist_ok=True)
    write_json(Path(folder) / POINTER_FILE, dict(pointer), indent=None)


def read_pointer(folder: PathLike) -> dict[str, Any] | None:
    """The pointer in a Tune checkpoint folder, or ``None`` (not a population-based training checkpoint)."""
    data = read_json(Path(folder) / POINTER_FILE)
    return data if isinstance(data, dict) and {"trial_id", "name", "checkpoint"} <= set(data) else None


def write_start(run_folder: PathLike, start: Mapping[str, Any]) -> None:
    """Say which donor checkpoint a nested run starts from (``checkpoint``: an absolute path;
    ``donor_trial_id``, ``donor_epoch``); :func:`hpsearch.train.restore` reads it on the workers."""
    os.makedirs(run_folder, exist_ok=True)
    write_json(Path(run_folder) / START_FILE, dict(start), indent=None)


def read_start(filesystem: Any, run_folder: str) -> dict[str, Any] | None:
    """What :func:`write_start` wrote for a nested run, read through the run's storage filesystem
    (a ``pyarrow.fs.FileSystem``, as Ray Train gives a worker); ``None`` when the run has no start file."""
    try:
        with filesystem.open_input_stream(os.path.join(run_folder, START_FILE)) as stream:
            start = json.loads(stream.read().decode("utf-8"))
    except (OSError, ValueError):  # no start file: a fresh run
        return None
    return start if isinstance(start, dict) and isinstance(start.get("checkpoint"), str) else None


# ----------------------------------------------------------------------------- Ray's logs


def append_ray_logs(experiment_dir: PathLike, logs: RayLogs) -> None:
    """Append where a Ray session of the search keeps its logs (raises ``OSError`` if it cannot be written)."""
    append_line(Path(experiment_dir) / RAY_LOGS_FILE, asdict(logs))


def read_ray_logs(experiment_dir: PathLike) -> list[RayLogs]:
    """Every Ray session the search ran in, oldest first (the last is the latest run or resume)."""
    out = []
    for record in read_json_lines(Path(experiment_dir) / RAY_LOGS_FILE):
        logs_dir, driver_log = record.get("logs_dir"), record.get("driver_log")
        recorded_at = record.get("recorded_at")
        out.append(
            RayLogs(
                logs_dir=str(logs_dir) if logs_dir else None,
                driver_log=str(driver_log) if driver_log else None,
                host=str(record.get("host") or ""),
                address=str(record["address"]) if record.get("address") else None,
                recorded_at=float(recorded_at) if isinstance(recorded_at, (int, float)) else None,
            )
        )
    return out
