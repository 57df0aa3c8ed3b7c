"""What the Pareto front and the PBT lineage read of a :class:`~hpsearch.analysis.Results`, as a protocol.

:class:`~hpsearch.analysis.Results` answers ``.pareto``, ``.hypervolume()`` and ``.lineage`` by calling
:mod:`hpsearch.analysis._pareto` and :mod:`hpsearch.analysis._lineage`; typing their argument with this
protocol instead of ``Results`` keeps those two modules below ``_load`` (no import cycle, not even a
type-only one), and mypy still checks that ``Results`` has everything they read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hpsearch.spec.constraints import Constraint

__all__ = ["SearchTables"]


class SearchTables(Protocol):
    """The tables and names of a search read from its folder (:class:`~hpsearch.analysis.Results` is one)."""

    @property
    def experiment_dir(self) -> Path: ...

    @property
    def metric(self) -> str: ...

    @property
    def trials(self) -> pd.DataFrame: ...

    @property
    def history(self) -> pd.DataFrame: ...

    @property
    def params(self) -> list[str]: ...

    @property
    def objectives(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def constraints(self) -> tuple[Constraint, ...]: ...

    @property
    def lineage(self) -> pd.DataFrame: ...
