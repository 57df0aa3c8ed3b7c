"""Readers and writers of every file hpsearch keeps in an experiment folder.

Everything that touches the folder goes through here: the search writes with these
functions (:mod:`hpsearch.runtime`), :func:`hpsearch.load_results` reads with them, and
the tests build fake experiments with the same writers. File names are in
:mod:`hpsearch.experiment.layout`.

Readers never raise on a damaged file: a missing or half-written file reads as
``None`` (or as the lines that parse), because a folder of a running or killed search
is a normal thing to read.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hpsearch.errors import ExperimentNotFoundError, ResultsError
from hpsearch.experiment.failures import Failure
from hpsearch.experiment.layout import (
    ATTEMPT_DIR,
    ATTEMPT_FILE,
    CHECK_FILE,
    CONTROLLER_FILE,
    CONTROLLER_LOG,
    ESTIMATE_FILE,
    FAILURES_FILE,
    FORMAT_FILE,
    FORMAT_VERSION,
    HISTORY_FILE,
    LINEAGE_FILE,
    LOGS_DIR,
    MISSING_METRIC_FILE,
    OUTCOMES_FILE,
    PLAN_FILE,
    POINTER_FILE,
    RANK_LOG,
    RANK_PROGRESS,
    RAY_LOGS_FILE,
    SPEC_FILE,
    START_FILE,
    STATUSES,
    SUMMARY_FILE,
    TRAIN_RUNS_DIR,
    UNRECORDED_FORMAT,
    USAGE_FILE,
    WORKER_GROUP_FILE,
    TrialStatus,
    is_experiment,
)
from hpsearch.experiment.worker_ranks import RAISED, RETURNED, AttemptProgress, RankProgress

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.spec import Spec

__all__ = [
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
    "write_spec",
    "read_spec",
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
    "WORKER_STARTS_KEPT",
    "append_ray_logs",
    "read_ray_logs",
    "Run",
    "Usage",
    "record_trial_run",
    "record_search_run",
    "read_usage",
    "read_json",
    "read_json_lines",
]

PathLike = str | os.PathLike[str]


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
    """

    trial_id: str
    status: TrialStatus
    reports: int = 0
    last_epoch: float | None = None  # an int when whole (fractional epochs stay as reported)
    ended_at: float | None = None
    error: str = ""
    ended_by: str | None = None

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


def run_dir(experiment_dir: PathLike, trial_id: str) -> Path:
    """The folder of a trial's nested Train run: ``train/<trial_id>/``.

    Raises:
        ResultsError: ``trial_id`` is not one plain name (:func:`is_trial_id`): it would name a folder elsewhere.
    """
    if not is_trial_id(trial_id):
        raise ResultsError(
            f"trial id {trial_id!r} in {experiment_dir} is not a plain name, so it cannot name a folder: "
            "the folder's records are damaged or crafted; refused"
        )
    return Path(experiment_dir) / TRAIN_RUNS_DIR / trial_id


def trial_folder(experiment_dir: PathLike, trial_id: str) -> Path | None:
    """A trial's ``train/<trial_id>/`` for reading: ``None`` when it leads out of the experiment folder (a link
    out, a damaged id), so that nothing outside the folder is read or linked on the word of its records."""
    if not is_trial_id(trial_id):
        return None
    folder = Path(experiment_dir) / TRAIN_RUNS_DIR / trial_id
    return folder if inside(folder, experiment_dir) else None


def is_trial_id(text: str) -> bool:
    """Whether ``text`` can be a trial id, which names its folder ``train/<trial_id>/``: one plain path component
    (Tune's ids are letters, digits and ``_``), never empty, ``.``, ``..``, or holding a separator or NUL."""
    return (
        isinstance(text, str)
        and 0 < len(text) <= 255
        and text not in (".", "..")
        and not any(c in text for c in ("/", "\\", "\0"))
    )


def inside(path: PathLike, folder: PathLike) -> bool:
    """Whether ``path``, every link in it followed, lies in ``folder`` (itself resolved): how every path a
    folder's records name is confined to the folder before it is read or linked."""
    try:
        return Path(path).resolve().is_relative_to(Path(folder).resolve())
    except (OSError, RuntimeError, ValueError):  # a link loop, a NUL byte: not a path into the folder
        return False


# ----------------------------------------------------------------------------- low level


def read_json(path: PathLike) -> Any:
    """A JSON file's content, or ``None`` when it is missing or does not parse."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_json_lines(path: PathLike) -> list[dict[str, Any]]:
    """Every JSON object of a JSON-lines file; a line cut short (a kill, a write in progress) is skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return []
    lines = [line for line in text.splitlines() if line.strip()]
    try:  # one parse per file: much faster than one per line
        rows = json.loads("[" + ",".join(lines) + "]")
    except ValueError:
        rows = []
        for line in lines:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    return [row for row in rows if isinstance(row, dict)]


def _append_line(path: PathLike, record: Mapping[str, Any]) -> None:
    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record, default=str) + "\n")


def write_no_link(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` without following a link there: a file in a folder someone else made (a report,
    its PNGs) must not overwrite whatever a symlink (or a second hard link) at that name points to.

    Raises:
        ResultsError: ``path`` is a symlink, a hard link to another name, or not a regular file; nothing is written.
    """
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    refused = (
        f"{path} is a symbolic link, so writing there would overwrite what it points to: refused; "
        "remove it, or write elsewhere"
    )
    if os.path.islink(path):  # also where O_NOFOLLOW is missing
        raise ResultsError(refused)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ResultsError(refused) from None
        if err.errno == errno.ENXIO:  # a FIFO with no reader
            raise ResultsError(f"{path} is not a regular file: refused; remove it, or write elsewhere") from None
        raise
    with os.fdopen(fd, "wb") as out:  # checked before anything is truncated
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ResultsError(f"{path} is not a regular file: refused; remove it, or write elsewhere")
        if info.st_nlink > 1:
            raise ResultsError(
                f"{path} is a hard link to another file, so writing there would change that file too: refused; "
                "remove it, or write elsewhere"
            )
        os.truncate(fd, 0)
        out.write(data)


def _write_json(path: PathLike, data: Any, *, indent: int | None = 2) -> None:
    Path(path).write_text(json.dumps(data, indent=indent, default=str), encoding="utf-8")


# ----------------------------------------------------------------------------- the folder's format


def write_format(experiment_dir: PathLike) -> None:
    """Record the folder's format (:data:`~hpsearch.experiment.layout.FORMAT_VERSION`): once, when a search creates it."""
    try:
        written_by: str | None = version("hpsearch")
    except PackageNotFoundError:  # not installed as a package (a source checkout): the format says enough
        written_by = None
    _write_json(Path(experiment_dir) / FORMAT_FILE, {"format": FORMAT_VERSION, "hpsearch": written_by})


def read_format(experiment_dir: PathLike) -> int:
    """The folder's format version: :data:`~hpsearch.experiment.layout.UNRECORDED_FORMAT` when it records none
    (written before formats were recorded), the current one when its file is damaged (the best guess to read)."""
    path = Path(experiment_dir) / FORMAT_FILE
    if not path.exists():
        return UNRECORDED_FORMAT
    data = read_json(path)
    value = data.get("format") if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, int):
        return FORMAT_VERSION
    return value


def check_format(experiment_dir: PathLike, *, doing: str = "read") -> int:
    """The folder's format version, when this hpsearch can ``doing`` it (``"read"``, ``"resume"``).

    Raises:
        ResultsError: The folder was written by a newer hpsearch, in a format this one does not know.
    """
    found = read_format(experiment_dir)
    if found > FORMAT_VERSION:
        raise ResultsError(
            f"{experiment_dir} was written by a newer hpsearch (experiment folder format {found}; this hpsearch "
            f"reads formats up to {FORMAT_VERSION}): upgrade hpsearch (pip install --upgrade hpsearch) to {doing} it"
        )
    return found


# ----------------------------------------------------------------------------- the spec as run


def write_spec(experiment_dir: PathLike, spec: Mapping[str, Any]) -> None:
    """Write the spec as run (a dict with every default filled in)."""
    (Path(experiment_dir) / SPEC_FILE).write_text(yaml.safe_dump(dict(spec), sort_keys=False), encoding="utf-8")


#: The largest spec as run read back from a folder. A spec is a few kB; a larger file is damaged (or crafted),
#: and is refused before it is parsed, so that reading it stays well under a second.
MAX_FOLDER_SPEC_BYTES = 1024 * 1024


def read_spec(experiment_dir: PathLike) -> dict[str, Any] | None:
    """The spec as run, as a dict, or ``None`` when the folder holds none.

    Read as a folder someone sent may hold it: its size counted while reading (at most
    :data:`MAX_FOLDER_SPEC_BYTES`), UTF-8 checked, aliases measured before they are expanded, an integer too long
    for Python refused.

    Raises:
        ResultsError: The spec is damaged: too large, not UTF-8, not YAML, or holding an integer too long to read.
    """
    # lazy: a cycle at import (as in experiment_spec): the spec's YAML reader, which measures aliases before expanding
    from hpsearch.spec._yaml import YamlError, load_text

    path = Path(experiment_dir) / SPEC_FILE
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FOLDER_SPEC_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        raise ResultsError(f"{path}: cannot read the spec as run: {err.strerror or err}") from None
    damaged = f"{path}: the spec as run is damaged"
    if len(data) > MAX_FOLDER_SPEC_BYTES:
        raise ResultsError(
            f"{damaged}: it is larger than {MAX_FOLDER_SPEC_BYTES // 2**20} MiB (a spec as run is a few kB); "
            "refused unread"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ResultsError(f"{damaged}: not UTF-8 text (byte 0x{data[err.start]:02x} at byte {err.start})") from None
    try:
        spec = load_text(text)
    except YamlError as err:
        raise ResultsError(f"{damaged}: {err}") from None
    except ValueError as err:  # Python's int conversion limit (4,300 digits): a number no spec holds
        raise ResultsError(f"{damaged}: {str(err).partition(';')[0]}") from None
    return spec if isinstance(spec, dict) else None


def experiment_spec(experiment_dir: PathLike, *, overrides: Sequence[str] = (), check_trainable: bool = True) -> Spec:
    """The spec an experiment folder was run with, placed where the folder is now (it may have moved).

    ``overrides`` (``"budget.max_wall_time=4h"``) are applied first, as ``--set`` does. The one reader of a
    folder's spec as a :class:`~hpsearch.spec.Spec` (``resume``, ``report``, the budget's resources);
    ``check_trainable=False`` reads it without importing the loop.

    Raises:
        ExperimentNotFoundError: The folder holds no spec as run.
        ResultsError: The folder was written by a newer hpsearch (:func:`check_format`).
        SpecError: An override makes the spec invalid.
    """
    # lazy: a cycle at import: spec/warm_start imports experiment.layout, whose package __init__ loads this module
    from hpsearch.spec import load_spec

    exp_dir = Path(experiment_dir).expanduser().resolve()
    if not is_experiment(exp_dir):
        raise ExperimentNotFoundError(f"{exp_dir} is not an hpsearch experiment folder (no {SPEC_FILE} in it)")
    check_format(exp_dir, doing="resume")
    placed = [f"name={exp_dir.name}", f"storage_path={exp_dir.parent}"]
    return load_spec(exp_dir / SPEC_FILE, overrides=[*overrides, *placed], check_trainable=check_trainable)


# ----------------------------------------------------------------------------- the plan


def write_plan(experiment_dir: PathLike, plan: Mapping[str, Any]) -> None:
    """Write the resource plan (``Plan.as_dict()``)."""
    _write_json(Path(experiment_dir) / PLAN_FILE, dict(plan))


def read_plan(experiment_dir: PathLike) -> dict[str, Any] | None:
    """The resource plan the search ran with, or ``None``."""
    data = read_json(Path(experiment_dir) / PLAN_FILE)
    return data if isinstance(data, dict) else None


# ----------------------------------------------------------------------------- outcomes


def append_outcome(experiment_dir: PathLike, outcome: Outcome) -> None:
    """Append one trial end to the outcomes file (raises ``OSError`` if it cannot be written)."""
    if outcome.status not in STATUSES:
        raise ValueError(f"not a trial status: {outcome.status!r}")
    _append_line(Path(experiment_dir) / OUTCOMES_FILE, outcome.as_record())


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
        status = record.get("status")
        if status in STATUSES:
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
    _append_line(Path(run_folder) / HISTORY_FILE, record)


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
    _write_json(Path(folder) / CHECK_FILE, dict(record))


def read_check(folder: PathLike) -> dict[str, Any] | None:
    """``hpsearch check``'s record in its folder (``<experiment_dir>.check``), as written; ``None`` when there is
    none, or it is half-written or not a JSON object (read by ``hpsearch plan --estimate``)."""
    record = read_json(Path(folder) / CHECK_FILE)
    return record if isinstance(record, dict) else None


# ----------------------------------------------------------------------------- summary


def write_estimate(experiment_dir: PathLike, record: Mapping[str, Any]) -> None:
    """Write the estimate made as the search started (``Estimate.as_dict()`` and where it came from)."""
    _write_json(Path(experiment_dir) / ESTIMATE_FILE, dict(record))


def read_estimate(experiment_dir: PathLike) -> dict[str, Any] | None:
    """The estimate made as the search started, or ``None`` (the spec was not checked first)."""
    data = read_json(Path(experiment_dir) / ESTIMATE_FILE)
    return data if isinstance(data, dict) else None


def write_summary(experiment_dir: PathLike, summary: Mapping[str, Any]) -> None:
    """Write the search's outcome (``SearchSummary.as_dict()``)."""
    _write_json(Path(experiment_dir) / SUMMARY_FILE, dict(summary))


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
    _write_json(Path(run_folder) / CONTROLLER_FILE, record, indent=None)


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
    _write_json(Path(run_folder) / MISSING_METRIC_FILE, record, indent=None)


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
    _append_line(Path(run_folder) / FAILURES_FILE, {"time": time.time(), **failure.as_dict()})


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

    :mod:`hpsearch.runtime.reuse` reads the group; :mod:`hpsearch.runtime.node_watch` reads the
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
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # replaced whole: a reader never sees half of it
    _write_json(partial, record, indent=None)
    os.replace(partial, path)


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


# ----------------------------------------------------------------------------- every rank's log and progress


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
        _write_json(staging / ATTEMPT_FILE, record, indent=None)
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
    path = Path(attempt_folder) / RANK_PROGRESS.format(rank=rank)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # a reader never sees half of it
    _write_json(partial, {"rank": rank, **record}, indent=None)
    os.replace(partial, path)


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
                started_at=_seconds(record.get("started_at")),
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
        started_at=_seconds(data.get("started_at")),
        reports=reports if isinstance(reports, int) and not isinstance(reports, bool) and reports >= 0 else 0,
        in_report=data.get("in_report") is True,
        last_report_at=_seconds(data.get("last_report_at")),
        ended=ended if ended in (RETURNED, RAISED) else None,
        ended_at=_seconds(data.get("ended_at")),
        error=str(data.get("error") or ""),
        log=rank_log(folder, rank),
        host=str(data.get("host") or ""),
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        counted=data.get("counted") is not False,
    )


# ----------------------------------------------------------------------------- PBT lineage


def append_lineage(run_folder: PathLike, record: Mapping[str, Any]) -> None:
    """Append one exploit of a trial to ``train/<trial_id>/hpsearch_lineage.jsonl``.

    ``record`` holds ``trial_id``, ``donor_trial_id``, ``donor_epoch`` (the epoch the trial
    continues from), ``epoch`` (the trial's own epoch when it was replaced), ``old_config``,
    ``new_config`` and ``time`` (when the scheduler paused the trial; added when missing).
    """
    _append_line(Path(run_folder) / LINEAGE_FILE, {"time": time.time(), **record})


def read_lineage(experiment_dir: PathLike, trial_id: str) -> list[dict[str, Any]]:
    """Every exploit of a trial under population-based training, oldest first (none: ``[]``)."""
    folder = trial_folder(experiment_dir, trial_id)
    return read_json_lines(folder / LINEAGE_FILE) if folder is not None else []


def write_pointer(folder: PathLike, pointer: Mapping[str, Any]) -> None:
    """Write the pointer a Tune checkpoint holds under population-based training: ``trial_id``,
    ``storage`` and ``name`` (the nested run, ``storage`` relative to ``train/``), ``checkpoint``
    (relative to ``train/``) and ``epoch``."""
    os.makedirs(folder, exist_ok=True)
    _write_json(Path(folder) / POINTER_FILE, dict(pointer), indent=None)


def read_pointer(folder: PathLike) -> dict[str, Any] | None:
    """The pointer in a Tune checkpoint folder, or ``None`` (not a population-based training checkpoint)."""
    data = read_json(Path(folder) / POINTER_FILE)
    return data if isinstance(data, dict) and {"trial_id", "name", "checkpoint"} <= set(data) else None


def write_start(run_folder: PathLike, start: Mapping[str, Any]) -> None:
    """Say which donor checkpoint a nested run starts from (``checkpoint``: an absolute path;
    ``donor_trial_id``, ``donor_epoch``); :func:`hpsearch.train.restore` reads it on the workers."""
    os.makedirs(run_folder, exist_ok=True)
    _write_json(Path(run_folder) / START_FILE, dict(start), indent=None)


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
    _append_line(Path(experiment_dir) / RAY_LOGS_FILE, asdict(logs))


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


# ----------------------------------------------------------------------------- usage (budgets, resource-hours)


@dataclass(frozen=True)
class Run:
    """One run of a trial's driver, or of the search (``run``, a ``resume``): a line of ``hpsearch_usage.jsonl``.

    Attributes:
        started_at: When it started, in UNIX seconds (a trial: when Tune started its driver).
        ended_at: When it ended, or ``None`` (still running, or killed).
        resources: A trial's resources while it ran (its driver and worker bundles); ``{}`` for the search.
        end: How a trial's run ended (``finished``, ``stopped``, ``errored``, ``retried``: Tune runs it again;
            ``budget``: a budget ended the search; ``interrupted``); for the search, the budget that ended it.
    """

    started_at: float
    ended_at: float | None = None
    resources: Mapping[str, float] = field(default_factory=dict)
    end: str | None = None

    def seconds(self, open_until: float | None = None) -> float:
        """How long it ran; a run with no end counts until ``open_until`` (0 without)."""
        end = self.ended_at if self.ended_at is not None else open_until
        return max(0.0, end - self.started_at) if end is not None else 0.0


@dataclass(frozen=True)
class Usage:
    """What ``hpsearch_usage.jsonl`` says: every run of each trial's driver and of the search.

    A trial's resource-hours are, per resource, the sum over its runs of the resources it held
    times the time from its driver's start to that run's end (start-up and teardown inside the
    driver included). A run with no end recorded (the search is running, or was killed) counts
    until the later of the end of the search run it started in (a killed one: the last thing it
    recorded) and ``open_until`` (``load_results`` passes the trial's last report).
    """

    trials: Mapping[str, list[Run]] = field(default_factory=dict)
    searches: list[Run] = field(default_factory=list)

    def _search_end(self, i: int) -> float:
        """When search run ``i`` ended; one with no end (killed): the last thing recorded while it ran."""
        search = self.searches[i]
        if search.ended_at is not None:
            return search.ended_at
        stop = self.searches[i + 1].started_at if i + 1 < len(self.searches) else math.inf
        seen = [
            t
            for runs in self.trials.values()
            for r in runs
            for t in (r.started_at, r.ended_at)
            if t is not None and search.started_at <= t < stop
        ]
        return max(seen, default=search.started_at)

    def run_end(self, run: Run, open_until: float | None = None) -> float | None:
        """When a trial's run stopped counting: its end; with none, the later of ``open_until`` and
        the end of the search run it started in."""
        if run.ended_at is not None:
            return run.ended_at
        within = [i for i, s in enumerate(self.searches) if s.started_at <= run.started_at]
        candidates = [t for t in (self._search_end(within[-1]) if within else None, open_until) if t is not None]
        return max(candidates) if candidates else None

    def trial_seconds(self, trial_id: str, open_until: float | None = None) -> float | None:
        """Seconds the trial's driver ran, over every run of it; ``None`` when nothing was recorded."""
        runs = self.trials.get(trial_id)
        if not runs:
            return None
        return sum(r.seconds(self.run_end(r, open_until)) for r in runs)

    @staticmethod
    def _hours(runs: Iterable[Run], end_of: Callable[[Run], float | None]) -> dict[str, float]:
        """Per resource, the hours ``runs`` held it, each run counted until ``end_of(run)``."""
        out: dict[str, float] = {}
        for run in runs:
            hours = run.seconds(end_of(run)) / 3600.0
            for resource, amount in run.resources.items():
                out[resource] = out.get(resource, 0.0) + float(amount) * hours
        return out

    def trial_resource_hours(self, trial_id: str, open_until: float | None = None) -> dict[str, float]:
        """Per resource, the hours the trial held it (``{}`` when nothing was recorded)."""
        return self._hours(self.trials.get(trial_id, []), lambda run: self.run_end(run, open_until))

    def resource_hours_now(self, now: float, *, live_since: float) -> dict[str, float]:
        """Per resource, the hours held over every trial while a search runs: a run with no end that
        started at or after ``live_since`` (in the search run now going) counts until ``now``."""
        runs = (run for trial_runs in self.trials.values() for run in trial_runs)
        return self._hours(
            runs, lambda run: now if run.ended_at is None and run.started_at >= live_since else self.run_end(run)
        )

    def resource_hours(self) -> dict[str, float]:
        """Per resource, the hours held over every trial."""
        out: dict[str, float] = {}
        for trial_id in self.trials:
            for resource, hours in self.trial_resource_hours(trial_id).items():
                out[resource] = out.get(resource, 0.0) + hours
        return out

    def wall_time_s(self) -> float:
        """The search's wall time over its runs (a run with no end counts until the last thing it recorded)."""
        return sum(self._search_end(i) - s.started_at for i, s in enumerate(self.searches))


def record_trial_run(
    experiment_dir: PathLike,
    trial_id: str,
    *,
    started_at: float,
    resources: Mapping[str, float],
    ended_at: float | None = None,
    end: str | None = None,
) -> None:
    """Record a run of a trial's driver: at its start (no ``ended_at``), then at its end (the same
    ``started_at``: the line replaces the first). Raises ``OSError`` if it cannot be written."""
    record = {
        "kind": "trial",
        "trial_id": trial_id,
        "started_at": started_at,
        "ended_at": ended_at,
        "resources": {k: float(v) for k, v in resources.items()},
        "end": end,
    }
    _append_line(Path(experiment_dir) / USAGE_FILE, record)


def record_search_run(
    experiment_dir: PathLike, *, started_at: float, ended_at: float | None = None, ended_by: str | None = None
) -> None:
    """Record a run of the search (``run``, a ``resume``): at its start, then at its end (the same ``started_at``)."""
    record = {"kind": "search", "started_at": started_at, "ended_at": ended_at, "end": ended_by}
    _append_line(Path(experiment_dir) / USAGE_FILE, record)


def read_usage(experiment_dir: PathLike) -> Usage:
    """Every run recorded in ``hpsearch_usage.jsonl`` (an empty :class:`Usage` for a folder without it)."""
    trials: dict[str, dict[float, Run]] = {}
    searches: dict[float, Run] = {}
    for record in read_json_lines(Path(experiment_dir) / USAGE_FILE):
        started = _seconds(record.get("started_at"))
        if started is None:
            continue
        resources = record.get("resources")
        run = Run(
            started_at=started,
            ended_at=_seconds(record.get("ended_at")),
            resources={str(k): float(v) for k, v in resources.items() if _seconds(v) is not None}
            if isinstance(resources, dict)
            else {},
            end=str(record["end"]) if record.get("end") else None,
        )
        if record.get("kind") == "search":
            searches[started] = run
        elif record.get("trial_id"):
            trials.setdefault(str(record["trial_id"]), {})[started] = run
    return Usage(
        trials={t: sorted(runs.values(), key=lambda r: r.started_at) for t, runs in trials.items()},
        searches=sorted(searches.values(), key=lambda r: r.started_at),
    )


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
