"""One search per experiment folder: an advisory lock that ``run``, ``resume`` and ``check`` take.

Two searches in one folder corrupt each other: ``run --overwrite`` would delete the folder of a
search still running, and a second ``resume`` would start the same trials twice. So each takes
the folder's lock before it writes anything, and gives it back when it ends.

The lock is a small file beside the folder (``.<name>.hpsearch-lock`` in the storage path), so
that ``--overwrite`` deleting the folder keeps it. It is created with ``O_CREAT | O_EXCL``, which
is atomic on local disks and on NFS (v3 and later), and holds its holder: host, PID, the
process's start time (so a reused PID is not taken for the holder), user and command. A holder
that is alive refuses the next search in one line, naming its PID and host. A holder that is
gone (killed, the machine rebooted) left a stale lock: the next search takes it over and says
so. A holder on another machine cannot be checked from here: the lock is kept, and the line
says which file to delete once that search is known to be gone.

Nothing here imports Ray.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpsearch.errors import ExperimentLockedError

__all__ = ["FolderLock", "Holder", "lock_path"]

#: The lock file's name beside the folder: ``.<folder name>`` and this.
LOCK_SUFFIX = ".hpsearch-lock"
#: A lock file larger than this is no lock of hpsearch's: it is read as damaged.
_MAX_BYTES = 4096
#: How long a lock file may stay unreadable (its holder writing it) before it is taken for damaged.
_WRITE_GRACE_S = 2.0


def lock_path(experiment_dir: str | Path) -> Path:
    """The lock file of an experiment folder: beside it, so that deleting the folder keeps it."""
    folder = Path(experiment_dir)
    return folder.parent / f".{folder.name}{LOCK_SUFFIX}"


def _start_time(pid: int) -> str | None:
    """The process's start time as the kernel counts it (``/proc/<pid>/stat``, field 22), or ``None``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the name, in parentheses, may hold spaces
    return fields[19] if len(fields) > 19 else None


@dataclass(frozen=True)
class Holder:
    """Who holds a folder's lock."""

    host: str
    pid: int
    start: str | None
    user: str
    command: str
    since: float

    @classmethod
    def me(cls, command: str) -> Holder:
        """This process."""
        pid = os.getpid()
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no name for this uid (a container's)
            user = str(os.getuid())
        return cls(socket.gethostname(), pid, _start_time(pid), user, command, time.time())

    @classmethod
    def parse(cls, data: Any) -> Holder | None:
        """The holder a lock file's JSON names, or ``None`` for anything else."""
        try:
            start = data.get("start")
            return cls(
                host=str(data["host"]),
                pid=int(data["pid"]),
                start=None if start is None else str(start),
                user=str(data.get("user", "")),
                command=str(data.get("command", "")),
                since=float(data.get("since", 0.0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def here(self) -> bool:
        """Whether it runs on this machine, where it can be checked."""
        return self.host == socket.gethostname()

    def alive(self) -> bool:
        """Whether the holder still runs. One on another machine is taken to (it cannot be checked)."""
        if not self.here():
            return True
        if self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # alive, as another user
            pass
        now = _start_time(self.pid)
        return self.start is None or now is None or now == self.start

    def describe(self) -> str:
        """``PID 123 on host-a (hpsearch run, since 2026-12-06 07:00)``."""
        since = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.since)) if self.since else "an unknown time"
        what = f"{self.command}, " if self.command else ""
        return f"PID {self.pid} on {self.host} ({what}since {since})"


class FolderLock:
    """The lock of one experiment folder, taken by one search (:meth:`acquire`, :meth:`release`).

    Use it as a context manager, or call :meth:`acquire` and :meth:`release` around the search.
    """

    def __init__(self, experiment_dir: str | Path, *, command: str) -> None:
        self.experiment_dir = Path(experiment_dir)
        self.path = lock_path(experiment_dir)
        self.command = command
        self.holder: Holder | None = None
        self._made: list[Path] = []

    def acquire(self) -> str | None:
        """Take the lock. Returns a line to say when a stale lock was taken over, else ``None``.

        Raises:
            ExperimentLockedError: another search holds it (alive, or on another machine); nothing
                has been written. Where the lock file cannot be made at all (a read-only storage), no
                lock is taken and ``None`` returned: no search can write there, and the storage check
                that comes next refuses it in its own words.
        """
        me = Holder.me(self.command)
        taken_over: str | None = None
        for _ in range(3):  # a stale lock removed, then created again: a race with another search, at most twice
            try:
                self._create(me)
            except FileExistsError:
                holder = self._read_holder()
                if holder is not None and holder.alive():
                    raise ExperimentLockedError(self._busy(holder)) from None
                taken_over = self._taken_over(holder)
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
                continue
            except OSError:  # a storage the search cannot write: the storage check says so, in its words
                self._undo_parent()
                return None
            self.holder = me
            return taken_over
        raise ExperimentLockedError(
            f"another search took the lock of {self.experiment_dir} at the same time ({self.path})"
        )

    def release(self) -> None:
        """Give the lock back, if it is still this process's (a lock another search took over is left alone)."""
        if self.holder is None:
            return
        holder = self._read_holder(wait=False)
        if holder is not None and holder.pid == self.holder.pid and holder.host == self.holder.host:
            with contextlib.suppress(OSError):
                self.path.unlink()
        self.holder = None
        self._undo_parent()

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _create(self, me: Holder) -> None:
        missing = [p for p in (self.path.parent, *self.path.parent.parents) if not p.exists()]
        for folder in reversed(missing):  # a first search in a new storage path: made here, removed if left empty
            folder.mkdir(exist_ok=True)
            self._made.append(folder)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.path, flags, 0o644)
        try:
            os.write(fd, json.dumps(asdict(me)).encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def _undo_parent(self) -> None:
        """Remove the storage folder this lock made, if nothing else was put in it (a refused search)."""
        for folder in reversed(self._made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        self._made = []

    def _read_holder(self, *, wait: bool = True) -> Holder | None:
        """The holder the lock file names; ``None`` when it stays unreadable (damaged) or is gone."""
        deadline = time.monotonic() + (_WRITE_GRACE_S if wait else 0.0)
        while True:
            holder = self._read_once()
            if holder is not None or time.monotonic() >= deadline or not self.path.exists():
                return holder
            time.sleep(0.1)  # its holder may be writing it right now

    def _read_once(self) -> Holder | None:
        try:
            flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(self.path, flags)
        except OSError:
            return None
        try:
            data = os.read(fd, _MAX_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(data) > _MAX_BYTES:
            return None
        try:
            return Holder.parse(json.loads(data.decode("utf-8")))
        except (UnicodeDecodeError, ValueError):
            return None

    def _busy(self, holder: Holder) -> str:
        where = self.experiment_dir
        if holder.here():
            return (
                f"{where} is in use by another search: {holder.describe()}; wait for it to end, "
                f"or stop it (kill {holder.pid}) and run this again"
            )
        return (
            f"{where} is in use by a search on another machine: {holder.describe()}; this machine cannot check it. "
            f"If that search is gone, delete {self.path} and run this again"
        )

    def _taken_over(self, holder: Holder | None) -> str:
        if holder is None:
            return f"took over the lock of {self.experiment_dir}: its lock file {self.path} was damaged"
        return f"took over the lock of {self.experiment_dir} from {holder.describe()}, which is no longer running"
