"""The low-level access every reader and writer of the experiment folder shares, and its safety rules.

A folder is read as one someone may have sent: JSON that is missing or cut short reads as ``None``
(or as the lines that parse), never raises; a trial id names one plain folder (:func:`is_trial_id`)
and every path a folder's records name is confined to the folder (:func:`trial_folder`,
:func:`inside`) before it is read or linked; a file hpsearch writes where someone else may have
made the folder refuses a link there (:func:`write_no_link`).
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpsearch.errors import ResultsError
from hpsearch.experiment.layout import TRAIN_RUNS_DIR

__all__ = [
    "PathLike",
    "run_dir",
    "trial_folder",
    "is_trial_id",
    "inside",
    "make_experiment_folder",
    "read_json",
    "read_json_lines",
    "append_line",
    "write_no_link",
    "write_json",
    "replace_json",
    "finite_seconds",
]

PathLike = str | os.PathLike[str]


# ----------------------------------------------------------------------------- paths confined to the folder


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


def make_experiment_folder(path: PathLike, *, home: PathLike | None = None) -> None:
    """Create a new experiment folder, and the folders above it that are missing.

    Under the user's home (``home``, default ``Path.home()``) the experiment folder is made readable
    by its owner only (0700): its results, checkpoints, logs and spec as run stay private on a
    machine other users share. Elsewhere (a project's shared folder, an NFS share meant for a team)
    the umask decides, as for any folder the user makes there.

    Raises:
        FileExistsError: The folder exists (``run --overwrite`` deletes it first).
    """
    folder = Path(path)
    folder.parent.mkdir(parents=True, exist_ok=True)
    private = inside(folder.parent, Path.home() if home is None else home)
    folder.mkdir(mode=0o700 if private else 0o777)  # the umask narrows either further


# ----------------------------------------------------------------------------- reading and writing


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


def append_line(path: PathLike, record: Mapping[str, Any]) -> None:
    """Append one JSON line to ``path`` (its folder made when missing): how every record file grows."""
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


def write_json(path: PathLike, data: Any, *, indent: int | None = 2) -> None:
    """Write ``data`` to ``path`` as JSON (what JSON cannot hold written as its text)."""
    Path(path).write_text(json.dumps(data, indent=indent, default=str), encoding="utf-8")


def replace_json(path: PathLike, data: Any) -> None:
    """Write ``data`` to ``path`` as one line of JSON, replacing the file whole: written beside it under a name of
    this process's, then renamed, so a reader in another process never sees half of it."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write_json(partial, data, indent=None)
    os.replace(partial, path)


def finite_seconds(value: Any) -> float | None:
    """A recorded time or amount as a float; ``None`` for anything that is not a finite number (a bool included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
