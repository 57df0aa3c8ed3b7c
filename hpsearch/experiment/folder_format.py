"""The experiment folder's format version: written once when a search creates the folder, checked before reading.

A folder written by a newer hpsearch, in a format this one does not know, is refused saying to upgrade
(:func:`check_format`); one that records no format is the predecessor's (:data:`~hpsearch.experiment.layout.UNRECORDED_FORMAT`).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from hpsearch.errors import ResultsError
from hpsearch.experiment.folder_io import PathLike, read_json, write_json
from hpsearch.experiment.layout import FORMAT_FILE, FORMAT_VERSION, UNRECORDED_FORMAT

__all__ = ["write_format", "read_format", "check_format"]


def write_format(experiment_dir: PathLike) -> None:
    """Record the folder's format (:data:`~hpsearch.experiment.layout.FORMAT_VERSION`): once, when a search creates it."""
    try:
        written_by: str | None = version("hpsearch")
    except PackageNotFoundError:  # not installed as a package (a source checkout): the format says enough
        written_by = None
    write_json(Path(experiment_dir) / FORMAT_FILE, {"format": FORMAT_VERSION, "hpsearch": written_by})


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
