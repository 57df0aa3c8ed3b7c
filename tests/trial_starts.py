"""Counting a test run's nested trial starts: the figure the gate's ceiling is kept on.

A nested 2-worker trial costs about 26 CPU-seconds to start on the project's 2-CPU machine, so
the landing gate's time grows with its starts, not with its test count. Each start of a trial's
worker group, the first and every restart, is in that trial's ``hpsearch_worker_group.json``
(``files.read_worker_starts``), which hpsearch writes for every nested run. The conftest counts
them in pytest's temporary folder at the end of the run; a harness that deletes its folders
before then (``tests/multihost.py``) counts its own first, with :func:`count_before_removing`.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Where the ceiling lives: pyproject.toml's ``[tool.hpsearch.gate] max_trial_starts``.
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

#: Starts counted in folders that were removed before the run ended.
_removed: list[int] = []


def count(folder: os.PathLike[str] | str) -> int:
    """Every worker-group start recorded under ``folder``, restarts included."""
    # lazy: .ci/summary.py reads the ceiling from this module with the system's Python, where hpsearch is not installed
    from hpsearch.experiment.files import read_worker_starts
    from hpsearch.experiment.layout import WORKER_GROUP_FILE

    return sum(len(read_worker_starts(record.parent)) for record in Path(folder).rglob(WORKER_GROUP_FILE))


def count_before_removing(folder: os.PathLike[str] | str) -> None:
    """Count the starts under a folder about to be removed, so the run's total keeps them."""
    if Path(folder).is_dir():
        _removed.append(count(folder))


def counted_before_removing() -> int:
    """The starts :func:`count_before_removing` kept."""
    return sum(_removed)


def ceiling(pyproject: Path = PYPROJECT) -> int:
    """The gate's ceiling on nested trial starts, from pyproject.toml."""
    import tomllib  # Python 3.11's; CI runs 3.11, and only the gate's summary and its test read the ceiling

    with pyproject.open("rb") as f:
        return int(tomllib.load(f)["tool"]["hpsearch"]["gate"]["max_trial_starts"])
