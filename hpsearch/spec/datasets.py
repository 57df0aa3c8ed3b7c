"""The spec's ``datasets`` and ``data`` sections: Ray Data datasets fed to every trial's workers.

``datasets`` maps a name (what the loop passes to ``ray.train.get_dataset_shard``) to a
``"module:function"`` or ``"file.py:function"`` factory returning a ``ray.data.Dataset``.
``data`` says how they reach the trials. Pure: the factories are imported and checked to be
callable here; what they return is checked by the runtime, before any trial starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from hpsearch.errors import Problem
from hpsearch.spec._imports import load_callable, resolve_reference
from hpsearch.spec._validation import StrictModel, join_path, show, validate_section

__all__ = ["DataSettings", "DEFAULT_DATA_CPUS", "parse_datasets", "parse_data"]

#: CPUs kept free for Ray Data's tasks when a spec names datasets and says nothing else.
DEFAULT_DATA_CPUS = 1.0

_DATASET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


class DataSettings(StrictModel):
    """How the spec's datasets reach each trial."""

    split: list[str] = Field(default_factory=lambda: ["train"])
    materialize: Literal["once", "per_trial"] = "once"
    cpus: float | None = Field(default=None, ge=0)

    def reserved_cpus(self, has_datasets: bool) -> float:
        """CPUs the planner keeps free for Ray Data's tasks."""
        if not has_datasets:
            return 0.0
        return DEFAULT_DATA_CPUS if self.cpus is None else float(self.cpus)


def parse_datasets(raw: Any, base_dir: Path, *, check: bool = True) -> tuple[dict[str, str], list[Problem]]:
    """Validate ``datasets``: names to factory references (file references made absolute)."""
    if raw is None:
        return {}, []
    if not isinstance(raw, Mapping):
        return {}, [
            Problem("datasets", f"must be a mapping of dataset names to 'module:function' factories, got {show(raw)}")
        ]
    out: dict[str, str] = {}
    problems: list[Problem] = []
    for name, ref in raw.items():
        where = join_path("datasets", str(name))
        if not isinstance(name, str) or not _DATASET_NAME.match(name):
            problems.append(
                Problem(where, f"a dataset name must be letters, digits, '_', '.', '-' (not first), got {show(name)}")
            )
            continue
        if not isinstance(ref, str) or not ref:
            problems.append(Problem(where, f"must be 'module:function' or 'path/to/file.py:function', got {show(ref)}"))
            continue
        if check:
            try:
                load_callable(ref, base_dir)
            except ValueError as err:
                problems.append(Problem(where, str(err)))
                continue
        out[name] = resolve_reference(ref, base_dir)
    return out, problems


def parse_data(
    raw: Any, datasets: Mapping[str, str], datasets_given: bool
) -> tuple[DataSettings | None, list[Problem]]:
    """Validate ``data`` against the datasets the spec names."""
    settings, problems = validate_section(DataSettings, raw, "data")
    if settings is None:
        return None, problems
    if raw and not datasets_given:
        return None, [Problem("data", "has no effect without a datasets section (name the datasets to feed)")]
    if datasets_given:
        for i, name in enumerate(settings.split):
            if datasets and name not in datasets:
                problems.append(
                    Problem(
                        join_path("data", "split", i),
                        f"names no dataset: {name!r} (datasets: {', '.join(datasets)})",
                    )
                )
    return (None if problems else settings), problems
