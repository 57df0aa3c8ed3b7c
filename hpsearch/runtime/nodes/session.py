"""The embedded Ray session's processes: which belong to it, recording them, ending what a killed run left.

When ``hpsearch run`` (or ``resume``) is killed with SIGKILL, the processes its embedded Ray
started die with it, all but two. These are Ray 2.60's ``ray::DashboardAgent`` and
``ray::RuntimeEnvAgent``. The raylet starts them, and once the raylet is gone nothing ever
ends them. Measured: a search running 2 trials at once, killed mid-trial, left exactly those
two, still alive minutes later and re-parented to init. Ray's other processes, its workers
and the trials' actors end by themselves. The driver's children have a parent-death signal,
and the workers exit when their raylet does.

So hpsearch records the session it started in the experiment folder
(:data:`~hpsearch.experiment.layout.RAY_SESSION_FILE`). The record holds the session's name
and folder, the driver, and every process of the session as it is after ``ray.init``
returns. Those are the processes Ray's node started (``gcs_server``, ``raylet``, the
dashboard, the monitors) and all their descendants. The agents are among them, because the
raylet starts them before it registers its node, and ``ray.init`` waits for that. Each PID
is recorded with its start time.

The next ``hpsearch run --overwrite`` or ``hpsearch resume`` of that folder ends what is left
of these processes (:func:`end_leftovers`). It ends only a process that is provably that
session's, which takes three things:

- The recorded driver is gone. So a search still running is never touched.
- The PID is alive with exactly the start time recorded. So a reused PID is never mistaken
  for it.
- The process still names the session's folder, in its command line or in the files it
  holds open. The agents rename themselves (``ray::DashboardAgent``), but they hold their
  log files in ``<session>/logs/`` open.

The record itself is not trusted either: a folder may be damaged, or written by someone with
write access to a shared folder. Before anything is ended (:func:`record_problem`):

- The record must be this user's file, with a session name of Ray's form
  (``session_<date>_<time>_<micros>_<pid>``) and a session folder named so, directly in a Ray
  temp root (``…/ray/``), that is a real folder of this user's where it still exists.
- The session must be over: no ``raylet`` or ``gcs_server`` of it is alive (another search's
  live session is never taken for a killed one).
- Each process ended must be Ray's (``gcs_server``, ``raylet``, a ``ray::`` title, or Python
  running Ray's own scripts), this user's, and name that exact session.

A record that fails these is reported in one line and never acted on.

A search on ``--address`` runs in a cluster that hpsearch did not start. Then nothing is
recorded, and nothing is ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import ray  # noqa: F401 - imported before psutil so that Ray's bundled copy is the one found

# isort: split
import psutil

from hpsearch import messages
from hpsearch.experiment.files import read_json
from hpsearch.experiment.layout import RAY_SESSION_FILE
from hpsearch.runtime.internals import CONTROLLER_CLASS, current_node

__all__ = [
    "SessionProcess",
    "RaySession",
    "current_session",
    "record",
    "read",
    "leftovers",
    "end_leftovers",
    "this_process",
    "kill_if_still",
    "record_problem",
    "CONTROLLER_PROCESS",
]

#: How far apart two readings of one process's start time may be (psutil derives it from
#: clock ticks since boot: the same process always reads the same; a reused PID reads seconds later).
_START_TIME_TOLERANCE_S = 0.05
#: What a Ray Train controller's process name or command line holds (Ray names an actor's process
#: ``ray::<class>``): a recorded controller PID is ended only while it still names it (:func:`kill_if_still`).
CONTROLLER_PROCESS = CONTROLLER_CLASS
#: How long the processes ended get to exit on SIGTERM before they are sent SIGKILL.
_TERM_GRACE_S = 5.0
#: Ray's session names: ``session_<%Y-%m-%d_%H-%M-%S_%f>_<pid of the process that started it>``.
SESSION_NAME = re.compile(r"session_\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}_\d{6}_\d+")
#: The processes of a node that live exactly as long as its session: while one names the session, it is live.
_NODE_PROCESSES = ("raylet", "gcs_server")


@dataclass(frozen=True)
class SessionProcess:
    """One process, named by its PID and its start time (``psutil.Process.create_time()``)."""

    pid: int
    create_time: float
    name: str = ""

    @classmethod
    def of(cls, process: psutil.Process) -> SessionProcess:
        """The record of a live process."""
        return cls(pid=process.pid, create_time=process.create_time(), name=process.name())


@dataclass(frozen=True)
class RaySession:
    """An embedded Ray session as hpsearch recorded it in the experiment folder.

    Attributes:
        session_name: Ray's session name (``session_<date>_<time>_<id>_<driver pid>``).
        session_dir: Ray's session folder on ``host`` (``/tmp/ray/session_…``).
        host: The machine it ran on; leftovers are looked for on that machine only.
        driver: The process that started the session (``hpsearch run`` or ``resume``).
        processes: Every process of the session when it was recorded.
        recorded_at: When, in UNIX seconds.
    """

    session_name: str
    session_dir: str
    host: str
    driver: SessionProcess
    processes: tuple[SessionProcess, ...]
    recorded_at: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """The JSON form written to :data:`~hpsearch.experiment.layout.RAY_SESSION_FILE`."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> RaySession | None:
        """The session a JSON record describes, or ``None`` for anything that is not one."""
        try:
            return cls(
                session_name=str(data["session_name"]),
                session_dir=str(data["session_dir"]),
                host=str(data["host"]),
                driver=_process(data["driver"]),
                processes=tuple(_process(p) for p in data["processes"]),
                recorded_at=float(data.get("recorded_at") or 0.0),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def _process(data: Any) -> SessionProcess:
    return SessionProcess(pid=int(data["pid"]), create_time=float(data["create_time"]), name=str(data.get("name", "")))


def _psutil() -> Any:
    """psutil (imported after Ray at the top of this module, so Ray's bundled copy is the one found)."""
    return psutil


def current_session() -> RaySession | None:
    """The embedded Ray session this process started, with its processes as they are now.

    ``None`` when this process is not connected to Ray, or is connected to a cluster it did
    not start (``--address``): Ray's node then started no process of its own; also when the
    installed Ray does not say which processes it started (internal ``ray-node``, said at start).
    """
    node = current_node()
    if node is None or not node.started_pids or node.session_name is None or node.session_dir is None:
        return None
    psutil = _psutil()
    found: dict[int, SessionProcess] = {}
    for pid in node.started_pids:
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(pid)
            for proc in (root, *root.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    found.setdefault(proc.pid, SessionProcess.of(proc))
    return RaySession(
        session_name=node.session_name,
        session_dir=node.session_dir,
        host=socket.gethostname(),
        driver=SessionProcess.of(psutil.Process(os.getpid())),
        processes=tuple(sorted(found.values(), key=lambda p: p.pid)),
        recorded_at=time.time(),
    )


def record(experiment_dir: str | Path) -> RaySession | None:
    """Record this process's embedded Ray session in the experiment folder; nothing on ``--address``.

    Returns the session recorded. A folder that cannot be written loses only this record:
    the search goes on (``OSError`` is swallowed).
    """
    session = current_session()
    if session is None:
        return None
    path = Path(experiment_dir) / RAY_SESSION_FILE
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:  # written whole, then renamed: a kill mid-write never leaves half a record
        temporary.write_text(json.dumps(session.as_dict(), indent=2), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
    return session


def read(experiment_dir: str | Path) -> RaySession | None:
    """The session recorded in the experiment folder, or ``None`` (none recorded, or unreadable)."""
    return RaySession.from_dict(read_json(Path(experiment_dir) / RAY_SESSION_FILE))


def record_problem(experiment_dir: str | Path, session: RaySession | None) -> str | None:
    """Why the folder's session record may not be acted on, or ``None`` when it may.

    ``session`` is what :func:`read` made of the record (``None``: unreadable, or no record).
    The rules are the module's: this user's file, Ray's form of name, the session's folder in a
    Ray temp root, a real folder of this user's.
    """
    path = Path(experiment_dir) / RAY_SESSION_FILE
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None  # nothing recorded: nothing to act on, nothing to say
    except OSError as err:
        return f"it cannot be read ({err.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "it is not a regular file"
    if info.st_uid != os.getuid():
        return f"it belongs to another user (uid {info.st_uid})"
    if session is None:
        return "it is not a session record"
    if not SESSION_NAME.fullmatch(session.session_name):
        return f"its session name {session.session_name!r} is not one Ray gives"
    folder = session.session_dir
    if (
        not os.path.isabs(folder)
        or os.path.normpath(folder) != folder
        or os.path.basename(folder) != session.session_name
        or os.path.basename(os.path.dirname(folder)) != "ray"
    ):
        return f"its session folder {folder!r} is not that session's folder in a Ray temp root (…/ray/{session.session_name})"
    try:
        held = os.lstat(folder)
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"its session folder cannot be read ({err.strerror})"
    if not stat.S_ISDIR(held.st_mode) or held.st_uid != os.getuid():
        return f"its session folder {folder} is not a folder of this user's"
    return None


def _alive(psutil: Any, recorded: SessionProcess) -> psutil.Process | None:
    """The live process a record names, or ``None``: gone, a zombie, or its PID reused since."""
    try:
        proc = psutil.Process(recorded.pid)
        if abs(proc.create_time() - recorded.create_time) > _START_TIME_TOLERANCE_S:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    return proc


def this_process() -> SessionProcess:
    """The calling process's record (its PID, start time and name), for :func:`kill_if_still` later."""
    return SessionProcess.of(_psutil().Process(os.getpid()))


def kill_if_still(pid: int, create_time: float | None, *, named: str) -> bool:
    """SIGKILL ``pid`` only if it is still the process recorded; ``True`` if it was sent.

    Still the same process means: alive (not a zombie) with the recorded start time, so a PID
    the system has since given to another process is never ended, and ``named`` appears in its
    name or command line (a Ray actor's, e.g. ``ray::TrainController``). A record without a
    start time proves nothing: nothing is sent.
    """
    if create_time is None:
        return False
    psutil = _psutil()
    proc = _alive(psutil, SessionProcess(pid=pid, create_time=create_time))
    if proc is None:
        return False
    try:
        if named not in proc.name() and named not in " ".join(proc.cmdline()):
            return False
        proc.kill()
    except psutil.Error:
        return False
    return True


def _names_session(psutil: Any, proc: psutil.Process, session: RaySession) -> bool:
    """Whether the process names the session's folder: in its command line, or in a file it holds open."""
    folder = session.session_dir.rstrip("/") + "/"
    exact = re.compile(re.escape(session.session_name) + r"(?![\w-])")  # not session_…_12 inside session_…_123
    try:
        command = " ".join(proc.cmdline())
        if folder in command or exact.search(command):
            return True
        return any(f.path.startswith(folder) for f in proc.open_files())
    except psutil.Error:
        return False


def _mine(proc: psutil.Process) -> bool:
    """Whether the process runs as this user (its real uid)."""
    try:
        return bool(proc.uids().real == os.getuid())
    except psutil.Error:
        return False


def _rays(proc: psutil.Process) -> bool:
    """Whether the process is Ray's: its node binaries, a ``ray::`` title, or Python running a script of Ray's."""
    try:
        command = proc.cmdline()
        name = proc.name()
    except psutil.Error:
        return False
    first = os.path.basename(command[0]) if command else ""
    if name in _NODE_PROCESSES or first in _NODE_PROCESSES or _ray_named(proc):
        return True
    return any(f"{os.sep}ray{os.sep}" in arg and arg.endswith(".py") for arg in command[1:3])


def _session_live(psutil: Any, session: RaySession) -> bool:
    """Whether a raylet or GCS server of the session still runs: then it is a live search's, not a leftover."""
    for proc in psutil.process_iter():
        try:
            command = proc.cmdline()
            first = os.path.basename(command[0]) if command else ""
            is_node = proc.name() in _NODE_PROCESSES or first in _NODE_PROCESSES
        except psutil.Error:
            continue
        if is_node and _names_session(psutil, proc, session):
            return True
    return False


def leftovers(session: RaySession) -> list[psutil.Process]:
    """The processes of a recorded session still alive, if the driver that recorded it is gone.

    Empty when the session ran on another machine, or while its driver still runs (the search
    is not over: nothing of it is a leftover).
    """
    if session.host != socket.gethostname():
        return []
    psutil = _psutil()
    if _alive(psutil, session.driver) is not None or _session_live(psutil, session):
        return []
    found = []
    for recorded in session.processes:
        proc = _alive(psutil, recorded)
        if proc is not None and proc.pid != os.getpid() and _ours(psutil, proc, session):
            found.append(proc)
    # Ray's workers start after the record (an idle worker the raylet pre-started, say): one that outlived
    # its raylet is a process Ray named `ray::...` that holds a file of the session's folder open (its log).
    known = {proc.pid for proc in found} | {os.getpid()}
    for proc in psutil.process_iter():
        if proc.pid not in known and _ray_named(proc) and _ours(psutil, proc, session):
            found.append(proc)
    return found


def _ours(psutil: Any, proc: psutil.Process, session: RaySession) -> bool:
    """Whether a process is provably the session's: Ray's, this user's, and naming that exact session."""
    return _rays(proc) and _mine(proc) and _names_session(psutil, proc, session)


def _ray_named(proc: psutil.Process) -> bool:
    """Whether Ray named the process (``ray::IDLE``, ``ray::TrainController``...): its title, as Ray sets it."""
    try:
        title = str(proc.name()), str((proc.cmdline()[:1] or [""])[0])
    except psutil.Error:
        return False
    return any(t.startswith("ray::") for t in title)


def end_leftovers(experiment_dir: str | Path) -> list[SessionProcess]:
    """End what the embedded Ray recorded in the folder left running when its search was killed.

    SIGTERM, then SIGKILL for any still there after a few seconds. Says one line
    (:mod:`hpsearch.messages`) when it ended any, or why a record it found is not used
    (:func:`record_problem`). Returns those it ended.
    """
    session = read(experiment_dir)
    problem = record_problem(experiment_dir, session)
    if problem is not None:
        messages.say(
            f"the Ray session record {Path(experiment_dir) / RAY_SESSION_FILE} is not used: {problem}; "
            "no process was ended (end any that a killed search left yourself, by PID)"
        )
        return []
    if session is None:
        return []
    found = leftovers(session)
    if not found:
        return []
    psutil = _psutil()
    ended = []
    for proc in found:
        with contextlib.suppress(psutil.Error):
            ended.append(SessionProcess.of(proc))
            proc.terminate()
    _, still = psutil.wait_procs(found, timeout=_TERM_GRACE_S)
    for proc in still:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(still, timeout=_TERM_GRACE_S)
    if ended:
        named = ", ".join(f"{p.name or 'process'} {p.pid}" for p in ended)
        messages.say(f"ended {len(ended)} process(es) left by the killed run of {session.session_name} ({named})")
    return ended
