"""Every rank's log and progress in the trial's folder, and the trial driver's watch over them.

Three processes of a nested run take part, each through this module:

- **Each Train worker** (:class:`RankRecord`, started by :mod:`hpsearch.runtime.train.worker` around the
  user's loop). The rank finds its attempt, ``train/<trial_id>/logs/attempt-<N>/``: every rank of one
  start of the worker group calls :func:`hpsearch.experiment.files.claim_attempt` with the group's
  placement group id, the first creates the folder whole and the others find it by that id. It then
  copies everything its process writes to file descriptors 1 and 2 into ``rank-<R>.log``
  (:class:`Tee`: a pipe put in their place and a thread per descriptor that writes each chunk to the
  file and on to where the descriptor went before, so C-level output such as gloo's and NCCL's is
  kept, and Ray's own log files, its streaming to the driver and ``--verbose`` see all of it as
  before). Its progress record, ``rank-<R>.json``, is replaced whole as its loop starts, as each
  ``ray.train.report`` starts and returns, and as the loop returns or raises (with the traceback at the
  end of its log). Each rank writes its own files directly, so this holds on every node of a cluster
  (the experiment folder is on storage every node reaches) and with ``log_to_driver=False``.
- **The Train controller** (:func:`keep_controller_output`, called as the run's callback arrives in
  the controller's process): its stdout and stderr, where Ray Train's warnings and errors go, are
  copied the same way into ``train/<trial_id>/logs/controller.log``, each run of it appended.
- **The trial driver** (:class:`Watchdog`, a thread around ``trainer.fit()``): every second it reads
  the records of this run's attempts and asks :class:`hpsearch.experiment.ranks.ReportWatch`. Ranks
  that reported unequally (one returned while another waits at a later report's barrier, which in
  Ray Train V2 waits forever) end the trial at once; with ``failure.report_timeout_s``, so does a
  trial that sent no report for that long. The watchdog ends the nested run the way a reused trial
  actor does (:mod:`hpsearch.runtime.trial.reuse`): SIGKILL to the run's controller, whose workers Ray then
  ends with it, and ``fit()`` raises; the driver removes the workers' placement group (Ray Train's
  cleaner went with the controller) and raises :class:`RankHangError`, one line naming the ranks, and
  Tune records the trial as errored while the search goes on.
"""

from __future__ import annotations

import collections
import os
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from types import TracebackType

import ray
from ray import train

from hpsearch.experiment import files
from hpsearch.experiment.tracebacks import short_error
from hpsearch.experiment.worker_ranks import RAISED, RETURNED, ReportWatch
from hpsearch.runtime.internals import CONTROLLER_CLASS, watch_worker_reports
from hpsearch.runtime.nodes.session import CONTROLLER_PROCESS, kill_if_still

__all__ = ["Tee", "RankRecord", "keep_controller_output", "Watchdog", "RankHangError"]

#: Lines Ray's worker processes print to mark whose output follows (for its log monitor), not the loop's.
_RAY_MARKERS = (b":actor_name:", b":task_name:", b":job_id:", b":task_attempt_start:", b":task_attempt_end:")
#: The most a line may grow before what it holds is written to the log anyway.
_LONGEST_LINE = 1 << 16


class RankHangError(RuntimeError):
    """A trial whose ranks reported unequally, or that sent no report for ``failure.report_timeout_s``.

    Its message is the trial's one-line error (``unequal reports: ...``, ``stalled: ...``).
    """


def _stamp(at: float | None = None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() if at is None else at))


def _flush_python() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # closed, or replaced by an object without flush
            pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:  # where the output went is gone: the log still gets it
            return
        view = view[written:]


class Tee:
    """Copies what this process writes to file descriptors 1 and 2 into ``path``, and on to where they went.

    Each descriptor is replaced by a pipe whose reader, a daemon thread, writes every chunk to the
    descriptor's previous target first and then its complete lines to the file (appended; Ray's own
    marker lines left out). The thread never stops reading while the pipe is open, so a write to the
    descriptor never blocks on the file; a file that cannot be written loses lines, nothing else.
    :meth:`close` puts the descriptors back.

    A line that arrives on one descriptor within :data:`TWIN_S` of the same line on the other is kept
    once: in a Ray Train worker each ``print`` is written to both (Ray Train V2 sends it through its
    logger, to stderr, and on to ``sys.stdout`` too, which Ray has replaced), and Ray's own files keep
    one copy each.
    """

    #: How close in time the same line on both descriptors must come to be taken for one.
    TWIN_S = 1.0

    def __init__(self, path: Path, header: str = "", *, fds: tuple[int, ...] = (1, 2)) -> None:
        self.path = Path(path)
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed by close(), after the threads
        self._lock = threading.Lock()
        self._recent: collections.deque[tuple[int, bytes, float]] = collections.deque(maxlen=64)
        self._saved: dict[int, int] = {}
        self._threads: list[threading.Thread] = []
        if header:
            self.write(header)
        _flush_python()  # what Python holds so far goes where it was meant to, not into this log
        try:
            for fd in fds:
                saved = os.dup(fd)
                read_end, write_end = os.pipe()
                os.dup2(write_end, fd)
                os.close(write_end)
                self._saved[fd] = saved
                thread = threading.Thread(
                    target=self._pump, args=(read_end, saved, fd), name=f"hpsearch-log-fd{fd}", daemon=True
                )
                thread.start()
                self._threads.append(thread)
        except OSError:
            self.close()
            raise

    def write(self, text: str) -> None:
        """Write ``text`` to the log file only."""
        with self._lock:
            self._write(text.encode("utf-8", "replace"))

    def _write(self, data: bytes) -> None:
        try:
            self._file.write(data)
        except (OSError, ValueError):  # full, gone or closed: the output still reaches its target
            pass

    def _keep(self, data: bytes, fd: int) -> None:
        """Write the lines ``fd`` carried to the file, less Ray's marker lines and the other descriptor's twins."""
        now = time.monotonic()
        kept = []
        with self._lock:
            for line in data.splitlines(keepends=True):
                if line.startswith(_RAY_MARKERS):
                    continue
                twin = next(
                    (
                        i
                        for i, (f, seen, at) in enumerate(self._recent)
                        if f != fd and seen == line and now - at < self.TWIN_S
                    ),
                    None,
                )
                if twin is not None:
                    del self._recent[twin]
                    continue
                self._recent.append((fd, line, now))
                kept.append(line)
            if kept:
                self._write(b"".join(kept))

    def _pump(self, source: int, target: int, fd: int) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(source, 65536)
            except InterruptedError:
                continue
            except OSError:
                break
            if not chunk:
                break
            _write_all(target, chunk)
            pending += chunk
            if b"\n" in pending:
                complete, _, pending = pending.rpartition(b"\n")
                self._keep(complete + b"\n", fd)
            if len(pending) > _LONGEST_LINE:
                self._keep(pending, fd)
                pending = b""
        if pending:
            self._keep(pending + b"\n", fd)
        os.close(source)

    def close(self, tail: str = "", *, timeout_s: float = 2.0) -> None:
        """Put the descriptors back, wait for what was written to reach the file, add ``tail``, close it.

        A process this one started may still hold a pipe (a data loader's worker): its thread then goes
        on copying its output to the previous target, and the file stays open for it.
        """
        _flush_python()
        for fd, saved in self._saved.items():
            try:
                os.dup2(saved, fd)  # the pipe's last writer here closes: its thread reads to the end
            except OSError:
                pass
        deadline = time.monotonic() + timeout_s  # one wait for all: a loop's end is delayed at most this
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if tail:
            self.write(tail)
        if any(thread.is_alive() for thread in self._threads):
            return
        for saved in self._saved.values():
            try:
                os.close(saved)
            except OSError:
                pass
        self._saved = {}
        with self._lock:
            self._file.close()


class RankRecord:
    """One rank's log and progress record in its attempt's folder, for one run of its loop (a Train worker)."""

    def __init__(self, trial_folder: str, attempt: int, folder: Path, rank: int, world_size: int) -> None:
        self.trial_folder = trial_folder
        self.attempt = attempt
        self.folder = folder
        self.rank = rank
        self.world_size = world_size
        self.started_at = time.time()
        self.reports = 0
        self.in_report = False
        self.last_report_at: float | None = None
        self.ended: str | None = None
        self.ended_at: float | None = None
        self.error = ""
        self.counted = False
        self.tee: Tee | None = None

    @classmethod
    def start(cls, trial_folder: str) -> RankRecord | None:
        """In a Train worker, as the loop starts: claim the attempt, copy the output to the rank's log,
        count the reports. ``None`` (and the loop runs as it would without) when any of it fails."""
        try:
            context = train.get_context()
            rank, size, run_name = context.get_world_rank(), context.get_world_size(), context.get_experiment_name()
            group = ray.util.get_current_placement_group()
            group_id = group.id.hex() if group is not None else f"nogroup-{run_name}"
            attempt, folder = files.claim_attempt(trial_folder, group_id=group_id, world_size=size, run_name=run_name)
        except Exception:  # noqa: BLE001 - the logs are a record: never fail a trial over them
            return None
        record = cls(trial_folder, attempt, folder, rank, size)
        try:
            for stream in (sys.stdout, sys.stderr):  # a hang keeps the lines printed before it
                reconfigure = getattr(stream, "reconfigure", None)
                if reconfigure is not None and not getattr(stream, "line_buffering", True):
                    reconfigure(line_buffering=True)
        except (OSError, ValueError):
            pass
        try:
            record.tee = Tee(
                files.rank_log(folder, rank),
                f"===== hpsearch: rank {rank} of {size}, attempt {attempt} of trial {run_name}, on "
                f"{socket.gethostname()} (pid {os.getpid()}), started {_stamp(record.started_at)} =====\n",
            )
        except OSError:
            record.tee = None
        record.counted = watch_worker_reports(record.entered, record.left)
        record.save()
        return record

    def save(self) -> None:
        """Replace the rank's progress record (``rank-<R>.json``)."""
        try:
            files.write_rank_progress(
                self.folder,
                self.rank,
                {
                    "world_size": self.world_size,
                    "started_at": self.started_at,
                    "reports": self.reports,
                    "in_report": self.in_report,
                    "last_report_at": self.last_report_at,
                    "ended": self.ended,
                    "ended_at": self.ended_at,
                    "error": self.error,
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "counted": self.counted,
                },
            )
        except OSError:  # a record, never a reason to fail the trial
            pass

    def entered(self) -> None:
        """A ``ray.train.report`` started (the rank now waits at its barrier)."""
        self.in_report = True
        self.save()

    def left(self, ok: bool) -> None:
        """A ``ray.train.report`` returned (``ok``: one more report completed) or raised.

        A report that raised is not written: the record keeps the rank inside it until the next write
        (the loop's end, or its next report). A run that is ended while a rank waits at its barrier
        takes the barrier away first (the report raises) and the rank's process a moment later, and
        the record must still say where the rank was, not that it had left.
        """
        self.in_report = False
        if ok:
            self.reports += 1
            self.last_report_at = time.time()
            self.save()

    def end(self, error: BaseException | None = None) -> None:
        """The loop returned (``error`` ``None``) or raised ``error``: say so at the end of the log, and in the record."""
        self.ended = RETURNED if error is None else RAISED
        self.ended_at = time.time()
        self.in_report = False
        reports = f"{self.reports} report{'' if self.reports == 1 else 's'}"
        if error is None:
            tail = f"===== hpsearch: rank {self.rank}'s loop returned after {reports}, {_stamp(self.ended_at)} =====\n"
        else:
            self.error = short_error(error)
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            tail = (
                f"===== hpsearch: rank {self.rank}'s loop raised after {reports}, {_stamp(self.ended_at)}: =====\n"
                f"{text}"
            )
        if self.tee is not None:
            self.tee.close(tail)
            self.tee = None
        self.save()


_CONTROLLER_TEE: list[Tee] = []


def keep_controller_output(trial_folder: str) -> bool:
    """In a nested run's Train controller: copy the process's output into the trial's ``logs/controller.log``.

    Once per process, and only in a process Ray runs the controller in (Ray Train may unpickle the
    run's callbacks elsewhere too). Whether this process is the controller.
    """
    if not _in_controller():
        return False
    if _CONTROLLER_TEE:
        return True
    try:
        path = files.controller_log(trial_folder)
        path.parent.mkdir(parents=True, exist_ok=True)
        _CONTROLLER_TEE.append(
            Tee(
                path,
                f"===== hpsearch: the Train controller of trial {Path(trial_folder).name} started on "
                f"{socket.gethostname()} (pid {os.getpid()}), {_stamp()} =====\n",
            )
        )
    except OSError:
        pass
    return True


def _in_controller() -> bool:
    """Whether this process runs a Ray Train controller (Ray names its task ``TrainController.__init__``)."""
    try:
        name = ray.get_runtime_context().get_task_function_name() or ""
    except Exception:  # noqa: BLE001 - outside a Ray worker
        name = ""
    return CONTROLLER_CLASS in name


def _end_controller(trial_folder: str) -> bool:
    """SIGKILL the trial's running Train controller (recorded by it as it started, on this node, where
    Ray Train pins it); Ray ends its workers with it. Whether a signal was sent."""
    record = files.read_controller(trial_folder)
    if not record or record.get("node_id") != ray.get_runtime_context().get_node_id():
        return False
    try:
        return kill_if_still(int(record["pid"]), record.get("create_time"), named=CONTROLLER_PROCESS)
    except (KeyError, TypeError, ValueError):  # a damaged record: nothing provably the controller
        return False


def _remove_group(group_id: str, timeout_s: float) -> None:
    """Remove an ended run's worker placement group, and wait (up to ``timeout_s``) until it is gone.

    Ray Train's placement-group cleaner is the controller's, and goes with it when the controller is
    ended: nothing else would free the group (the orphan sweep would, seconds later, with a line).
    """
    from ray.util.placement_group import (  # lazy: only an ended run needs it
        PlacementGroup,
        placement_group_table,
        remove_placement_group,
    )

    try:
        group = PlacementGroup(ray.PlacementGroupID(bytes.fromhex(group_id)))
    except ValueError:  # not a placement group's id
        return
    try:
        remove_placement_group(group)  # ends any worker still in it
    except Exception:  # noqa: BLE001 - removed meanwhile
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if placement_group_table(group).get("state") in (None, "REMOVED"):
                return
        except Exception:  # noqa: BLE001 - an unknown group is no group
            return
        time.sleep(0.1)


class Watchdog:
    """The trial driver's thread around ``trainer.fit()``: reads this run's rank records every ``poll_s``
    and ends the nested run when its ranks reported unequally, or sent no report for ``timeout_s``.

    Use it as a context manager around ``fit()``; when ``fit()`` raises, :meth:`raise_verdict` raises
    the trial's one-line :class:`RankHangError` instead, if the watchdog ended the run.
    """

    POLL_S = 1.0
    #: How long the driver waits for the ended run's worker placement group to go once it removed it.
    GROUP_GONE_S = 5.0

    def __init__(self, trial_folder: str, timeout_s: float | None, *, poll_s: float = POLL_S) -> None:
        self.trial_folder = trial_folder
        self.poll_s = poll_s
        # The attempts already there belong to earlier runs of the trial (a retry, a resume): not watched.
        self.watch = ReportWatch(timeout_s, after_attempt=max(files.attempt_numbers(trial_folder), default=0))
        self.verdict: str | None = None
        self.group_id = ""
        self.ended_run = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hpsearch-rank-watch", daemon=True)

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(self.poll_s * 2)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            if self.verdict is None:
                try:
                    attempts = files.read_rank_progress(self.trial_folder, after=self.watch.after_attempt)
                except Exception:  # noqa: BLE001 - a record being replaced, storage away: look again
                    continue
                verdict = self.watch.look(attempts, time.monotonic())
                if verdict is None:
                    continue
                self.group_id = max(attempts, key=lambda a: a.attempt).group_id
                self.verdict = verdict
            if not self.ended_run:  # until the controller is seen and ended (its record written as it started)
                self.ended_run = _end_controller(self.trial_folder)

    def raise_verdict(self) -> None:
        """After ``fit()`` raised: if this watchdog ended the run, wait for its workers to go and raise its line."""
        if self.verdict is None:
            return
        self._stop.set()
        if self.group_id:
            _remove_group(self.group_id, self.GROUP_GONE_S)
        raise RankHangError(self.verdict)
