"""What :func:`hpsearch.run` and :func:`hpsearch.resume` return: one object for a finished search.

It carries Ray's ``ResultGrid``, which ``hpsearch.run`` used to return alone. It also carries
the :class:`~hpsearch.analysis.SearchSummary` written to the experiment folder, and the folder
itself, so that ``results()`` reads it back as :func:`hpsearch.load_results` does. Code written
against the ``ResultGrid`` keeps working. Every attribute the object does not have is the
grid's: ``get_best_result``, ``errors``, ``num_errors``, ``get_dataframe``, iterating, indexing
and ``len``.

``hpsearch.SearchResult`` loads this module without Ray. The grid is built by the search, not here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpsearch.analysis import Results, SearchSummary, load_results

if TYPE_CHECKING:  # pragma: no cover
    from ray.tune import Result, ResultGrid

__all__ = ["SearchResult"]


class SearchResult:
    """A search's outcome: Ray's ``ResultGrid``, hpsearch's summary, and its experiment folder.

    Attributes:
        result_grid: Ray Tune's ``ResultGrid`` of this run (or resume) of the search.
        summary: The :class:`~hpsearch.analysis.SearchSummary` written to ``hpsearch_summary.json``:
            every trial's outcome and best value as the closing table shows them.
        experiment_dir: The experiment folder, ``<storage_path>/<name>``.

    Example:
        >>> result = hpsearch.run("search_spaces/digits_quick.yaml")
        >>> result.get_best_result().metrics["val_acc"]  # the ResultGrid's, as before
        0.97...
        >>> result.summary.interrupted
        False
        >>> trials = result.results().trials  # the folder as load_results reads it
    """

    def __init__(self, result_grid: ResultGrid, summary: SearchSummary, experiment_dir: str | Path) -> None:
        self.result_grid = result_grid
        self.summary = summary
        self.experiment_dir = Path(experiment_dir)

    def results(self, *, metric: str | None = None, mode: str | None = None) -> Results:
        """The experiment folder read back, as ``hpsearch.load_results(experiment_dir, metric=, mode=)`` reads it."""
        return load_results(self.experiment_dir, metric=metric, mode=mode)

    # ------------------------------------------------------------------ the ResultGrid's interface

    def get_best_result(self, *args: Any, **kwargs: Any) -> Result:
        """The ``ResultGrid``'s best result (Ray's ``get_best_result``, same arguments)."""
        return self.result_grid.get_best_result(*args, **kwargs)

    def get_dataframe(self, *args: Any, **kwargs: Any) -> Any:
        """The ``ResultGrid``'s table of the trials' last (or best) results (Ray's ``get_dataframe``)."""
        return self.result_grid.get_dataframe(*args, **kwargs)

    @property
    def errors(self) -> list[Exception]:
        """The errors of the trials that failed, as the ``ResultGrid`` holds them."""
        return list(self.result_grid.errors)

    @property
    def num_errors(self) -> int:
        """How many trials failed."""
        return int(self.result_grid.num_errors)

    @property
    def num_terminated(self) -> int:
        """How many trials ended without an error."""
        return int(self.result_grid.num_terminated)

    def __len__(self) -> int:
        return len(self.result_grid)

    def __iter__(self) -> Iterator[Result]:
        return iter(self.result_grid)

    def __getitem__(self, i: int) -> Result:
        return self.result_grid[i]

    def __getattr__(self, name: str) -> Any:
        # Only for names this class lacks. Never for its own fields: they are unset while unpickling,
        # and looking them up here would recurse.
        if name.startswith("__") or name in ("result_grid", "summary", "experiment_dir"):
            raise AttributeError(name)
        return getattr(self.result_grid, name)

    def __repr__(self) -> str:
        s = self.summary
        state = f", ended by {s.ended_by}" if s.ended_by else (", interrupted" if s.interrupted else "")
        return f"SearchResult({self.experiment_dir}: {len(s.trials)} trial(s){state})"
