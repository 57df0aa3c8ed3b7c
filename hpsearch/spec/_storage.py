"""Where a search's results go: ``storage_path`` checked against the file system before Ray starts.

Two checks, both ending in :class:`~hpsearch.errors.Problem` lines for ``storage_path`` or
``name``:

- :func:`path_problems` (run by spec validation; reads only the file system's limits):
  the experiment name and every folder still to be created must fit the file system's
  longest file name (``NAME_MAX``), and the experiment folder must leave
  :data:`PATH_HEADROOM` bytes below the longest path (``PATH_MAX``) for what Tune and
  hpsearch create inside it.
- :func:`storage_full` (run when a search fails on an ``OSError``): whether the file system
  under ``storage_path`` is full, and the line that says so, naming its mount point.
- :func:`check_storage` (run by ``hpsearch run``, ``resume`` and ``validate``; does I/O):
  refuses a folder inside a Ray job's temporary working directory, and proves that the
  folder can be created and written by doing it: missing folders are created, a probe
  file is written and removed, and every folder it created is removed again. Nothing is
  left behind, whether the check passes or not.

Nothing here imports Ray: the names of Ray's folders are constants read from its source.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from hpsearch.errors import Problem, SpecError
from hpsearch.spec._validation import show

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.spec import Spec

__all__ = ["PATH_HEADROOM", "FULL_BELOW_BYTES", "path_problems", "check_storage", "ray_job_working_dir", "storage_full"]

#: Bytes kept free below PATH_MAX under the experiment folder, for the paths written inside it.
#: Tune names a trial folder ``<trainable>_<trial id>_<n>_<params>``, cut to 130 characters
#: (``TUNE_MAX_LEN_IDENTIFIER``). It then adds ``_<date>`` (20 characters) and, if that name is
#: taken, ``_<4 hex>`` (5 more), so up to 155 in all. Inside are files such as
#: ``events.out.tfevents.<time>.<hostname>``, up to about 100 characters. hpsearch's nested runs
#: live in ``train/<trial id>/checkpoint_<timestamp>/`` (about 60), with the loop's own files inside.
PATH_HEADROOM = 512

# Ray's runtime-environment folders. Their name is ray._private.ray_constants.DEFAULT_RUNTIME_ENV_DIR_NAME,
# and they sit inside the session folder ``session_<date>_<pid>`` that ray._private.node makes.
# A `ray job submit --working-dir` job runs in
# <session>/runtime_resources/working_dir_files/_ray_pkg_<hash>/ (see ray._private.runtime_env.working_dir
# and packaging.RAY_PKG_PREFIX). Ray deletes that folder when no job uses it any more.
# py_modules_files/ and the other plug-ins' folders sit beside it.
_RAY_SESSION_PREFIX = "session_"
_RAY_RUNTIME_ENV_DIR = "runtime_resources"

_PROBE_PREFIX = ".hpsearch-write-check-"
_DEFAULT_NAME_MAX, _DEFAULT_PATH_MAX = 255, 4096


def _nearest_existing(path: Path) -> Path:
    """``path`` itself or its closest ancestor that exists (a file or a folder)."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):  # False also for a path too long to look up
            return candidate
    return Path(path.anchor or "/")


def _limits(existing: Path) -> tuple[int, int]:
    """``(NAME_MAX, PATH_MAX)`` of the file system holding ``existing``."""
    folder = existing if existing.is_dir() else existing.parent
    try:
        return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError):  # no such limit on this system, or it cannot be asked
        return _DEFAULT_NAME_MAX, _DEFAULT_PATH_MAX


def path_problems(storage_path: Path, name: str | None) -> list[Problem]:
    """Problems of an (absolute) storage path and experiment name that the file system cannot hold.

    ``name`` is ``None`` when it is invalid for another reason (then only the storage path is checked).
    """
    existing = _nearest_existing(storage_path)
    name_max, path_max = _limits(existing)
    problems = []
    to_create = storage_path.relative_to(existing).parts if storage_path != existing else ()
    for part in to_create:
        size = len(os.fsencode(part))
        if size > name_max:
            problems.append(
                Problem(
                    "storage_path",
                    f"the folder name {show(part)} is {size} bytes long, but the file system at {existing} "
                    f"allows at most {name_max}",
                )
            )
    if name is not None and len(os.fsencode(name)) > name_max:
        problems.append(
            Problem(
                "name",
                f"must be at most {name_max} characters long (the longest file name the file system at "
                f"{existing} allows), got {len(name)} characters: {show(name)}",
            )
        )
    if problems:
        return problems
    experiment_dir = storage_path / name if name else storage_path
    size = len(os.fsencode(str(experiment_dir)))
    if size + PATH_HEADROOM >= path_max:
        problems.append(
            Problem(
                "storage_path",
                f"the experiment folder's path would be {size} bytes long; with up to {PATH_HEADROOM} more for "
                f"the trial folders and files inside it, paths would pass the file system's limit of "
                f"{path_max} (PATH_MAX): choose a shorter storage_path (or name)",
            )
        )
    return problems


def ray_job_working_dir(path: Path) -> Path | None:
    """The Ray runtime-environment folder ``path`` is inside (``<temp>/session_*/runtime_resources``), or None."""
    parts = path.parts
    for i in range(1, len(parts)):
        if parts[i] == _RAY_RUNTIME_ENV_DIR and parts[i - 1].startswith(_RAY_SESSION_PREFIX):
            return Path(*parts[: i + 1])
    return None


def check_storage(spec: Spec) -> None:
    """Refuse a ``storage_path`` the search could not keep its results in; leave nothing behind.

    Raises:
        SpecError: ``storage_path`` is inside a Ray job's temporary working directory, cannot
            be created, or cannot be written.
    """
    problem = _storage_problem(spec.storage_path)
    if problem is not None:
        raise SpecError([Problem("storage_path", problem)], source=str(spec.source) if spec.source else None)


def _storage_problem(storage: Path) -> str | None:
    ray_dir = ray_job_working_dir(storage)
    if ray_dir is not None:
        return (
            f"{storage} is inside a Ray job's temporary working directory (under {ray_dir}), which Ray deletes "
            "after the job; a relative storage_path, like the default ./hpsearch-results, lands there under "
            "`ray job submit --working-dir`: use an absolute path on storage every node reaches, "
            "e.g. --set storage_path=/mnt/shared/hpsearch-results"
        )
    existing = _nearest_existing(storage)
    if not existing.is_dir():
        return f"cannot create {storage}: {existing} is a file, not a folder"
    missing = [storage, *storage.parents][: len(storage.relative_to(existing).parts)]
    created: list[Path] = []
    try:
        for folder in reversed(missing):
            try:
                folder.mkdir()
            except FileExistsError:  # made meanwhile by someone else: theirs, not ours to remove
                continue
            except OSError as err:
                return f"cannot create {folder}: {err.strerror or err}"
            created.append(folder)
        try:
            fd, probe = tempfile.mkstemp(prefix=_PROBE_PREFIX, dir=storage)
        except OSError as err:
            return f"cannot write in {storage}: {err.strerror or err}"
        try:
            os.write(fd, b"hpsearch checks that it can write here\n")
        except OSError as err:
            return f"cannot write in {storage}: {err.strerror or err}"
        finally:
            os.close(fd)
            os.unlink(probe)
        return None
    finally:
        for folder in reversed(created):
            try:
                folder.rmdir()  # only ever an empty folder this check made
            except OSError:
                pass


#: A file system with less room than this for the user is full: Tune's next write (a result, a checkpoint,
#: an error file) fails, and what it fails on is often a later read of a file that was never written.
FULL_BELOW_BYTES = 1 << 20


def _mount_point(path: Path) -> Path:
    """The mount point of the file system ``path`` is on: its highest folder on the same device."""
    path = path.resolve()
    device = path.stat().st_dev
    while path.parent != path and path.parent.stat().st_dev == device:
        path = path.parent
    return path


def storage_full(storage_path: Path, err: OSError | EOFError) -> str | None:
    """The line that says the storage is full, when ``err`` came of a full file system; ``None`` otherwise.

    Full: ``err`` is ``ENOSPC`` (or ``EDQUOT``, a quota), or the file system under ``storage_path`` has
    less than :data:`FULL_BELOW_BYTES` left for the user: Tune then fails on a file it could not write,
    missing (``FileNotFoundError``) or empty (``EOFError`` unpickling a trial's error file).
    """
    import errno  # lazy: only a failed search asks

    existing = _nearest_existing(Path(storage_path))
    try:
        stats = os.statvfs(existing)
        mount = _mount_point(existing)
    except OSError:
        return None
    free, size = stats.f_bavail * stats.f_frsize, stats.f_blocks * stats.f_frsize
    no_room = isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)
    if not no_room and free >= FULL_BELOW_BYTES:
        return None
    if isinstance(err, OSError):
        failed = f"{err.strerror or type(err).__name__}" + (f": {err.filename}" if err.filename else "")
    else:
        failed = f"a file left empty: {type(err).__name__}: {err}"
    return (
        f"the storage is full: the file system at {mount} has {free / 2**20:.1f} MiB free of "
        f"{size / 2**20:.1f} MiB, and writing the search's results failed ({failed})"
    )
