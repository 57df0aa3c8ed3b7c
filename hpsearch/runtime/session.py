"""The embedded Ray session's processes: which belong to it, recording them, ending what a killed run left.

When ``hpsearch run`` (or ``resume``) is killed with SIGKILL, the processes its embedded Ray
started die with it, all but two: Ray 2.60's ``ray::DashboardAgent`` and
``ray::RuntimeEnvAgent``, which the raylet starts and nothing ever ends once the raylet is
gone (measured: a search of 2 trials at once killed mid-trial left exactly those two, alive
and re-parented to init, minutes later). Ray's own processes, its workers and the trials'
actors end by themselves (the driver's children have a parent-death signal, the workers
exit when their raylet does).

So hpsearch records the session it started in the experiment folder
(:data:`~hpsearch.experiment.layout.RAY_SESSION_FILE`): the session's name and folder, the
driver, and every process of the session as it is after ``ray.init`` returns: each process
Ray's node started (``gcs_server``, ``raylet``, the dashboard, the monitors) and all their
descendants, the agents among them (the raylet starts them before it registers its node,
which ``ray.init`` waits for). Each PID is recorded with its start time.

The next ``hpsearch run --overwrite`` of that folder or ``hpsearch resume`` of it ends what
is left of them (:func:`end_leftovers`), and only what is provably that session's: the
recorded driver is gone (a search still running is never touched), the PID is alive with
the very start time recorded (so a reused PID is never taken for it), and the process still
names the session's folder, in its command line or in the files it holds open (the agents
rename themselves, ``ray::DashboardAgent``; they hold their log files in
``<session>/logs/`` open). A search on ``--address`` runs in a cluster hpsearch did not
start: nothing is recorded, and nothing is ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hpsearch.experiment.files import read_json
from hpsearch.experiment.layout import RAY_SESSION_FILE

if TYPE_CHECKING:  # pragma: no cover
    import psutil

__all__ = ["SessionProcess", "RaySession", "current_session", "record", "read", "leftovers", "end_leftovers"]

#: How far apart two readings of one process's start time may be (psutil derives it from
#: clock ticks since boot: the same process always reads the same; a reused PID reads seconds later).
_START_TIME_TOLERANCE_S = 0.05
#: How long the processes ended get to exit on SIGTERM before they are sent SIGKILL.
_TERM_GRACE_S = 5.0


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
    """psutil, as Ray uses it (Ray ships its own copy and puts it on the path when imported)."""
    import ray  # noqa: F401 - imported first so that Ray's bundled psutil is the one found

    # isort: split
    import psutil

    return psutil


def current_session() -> RaySession | None:
    """The embedded Ray session this process started, with its processes as they are now.

    ``None`` when this process is not connected to Ray, or is connected to a cluster it did
    not start (``--address``): Ray's node then started no process of its own.
    """
    import ray

    node = getattr(ray._private.worker, "_global_node", None)  # the Ray node this driver runs on
    started = getattr(node, "all_processes", None)
    if node is None or not started:
        return None
    psutil = _psutil()
    found: dict[int, SessionProcess] = {}
    for infos in started.values():
        for info in infos:
            with contextlib.suppress(psutil.Error, AttributeError):
                root = psutil.Process(info.process.pid)
                for proc in (root, *root.children(recursive=True)):
                    with contextlib.suppress(psutil.Error):
                        found.setdefault(proc.pid, SessionProcess.of(proc))
    return RaySession(
        session_name=str(node.session_name),
        session_dir=str(node.get_session_dir_path()),
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


def _names_session(psutil: Any, proc: psutil.Process, session: RaySession) -> bool:
    """Whether the process names the session's folder: in its command line, or in a file it holds open."""
    folder = session.session_dir.rstrip("/") + "/"
    try:
        command = " ".join(proc.cmdline())
        if folder in command or session.session_name in command:
            return True
        return any(f.path.startswith(folder) for f in proc.open_files())
    except psutil.Error:
        return False


def leftovers(session: RaySession) -> list[psutil.Process]:
    """The processes of a recorded session still alive, if the driver that recorded it is gone.

    Empty when the session ran on another machine, or while its driver still runs (the search
    is not over: nothing of it is a leftover).
    """
    if session.host != socket.gethostname():
        return []
    psutil = _psutil()
    if _alive(psutil, session.driver) is not None:
        return []
    found = []
    for recorded in session.processes:
        proc = _alive(psutil, recorded)
        if proc is not None and proc.pid != os.getpid() and _names_session(psutil, proc, session):
            found.append(proc)
    return found


def end_leftovers(experiment_dir: str | Path, *, stream: TextIO | None = None) -> list[SessionProcess]:
    """End what the embedded Ray recorded in the folder left running when its search was killed.

    SIGTERM, then SIGKILL for any still there after a few seconds. Prints one line on
    ``stream`` (stderr by default) when it ended any. Returns those it ended.
    """
    session = read(experiment_dir)
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
        print(
            f"hpsearch: ended {len(ended)} process(es) left by the killed run of {session.session_name} ({named})",
            file=stream or sys.stderr,
            flush=True,
        )
    return ended
