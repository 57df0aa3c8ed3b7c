"""Tables computed from the results: the best trials, with their metrics where they were best."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from hpsearch.analysis._results import HISTORY_COLUMNS
from hpsearch.experiment.layout import EPOCH

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.analysis._results import Results

__all__ = ["best_trials"]


def best_trials(results: Results, n: int | None = 10) -> pd.DataFrame:
    """The ``n`` best trials (all with ``n=None``), best first, as ranked by
    :mod:`hpsearch.experiment.ranking`: errored and unscored trials left out, NaN/inf bests last.

    Columns: ``trial_id``, ``number``, ``status``, ``iterations``, ``best_iteration``, the
    search metric (its best value), with the spec's ``constraints`` the ``violation`` there
    (0: feasible; infeasible trials rank after every feasible one), every other reported metric
    *at that iteration* (``epoch`` and Tune's counters left out), then the searched parameters.
    """
    ranked = results.ranked()
    if n is not None:
        ranked = ranked.head(n)
    fixed_columns = ["trial_id", "number", "status", "iterations", "best_iteration", "best"]
    fixed_columns += ["violation"] * bool(results.constraints)
    table = ranked[fixed_columns].rename(columns={"best": results.metric})
    history = results.history
    fixed = {*HISTORY_COLUMNS, EPOCH}
    others = [c for c in history.columns if c not in fixed and c != results.metric]
    if others and len(ranked):
        at_best = history.merge(
            ranked[["trial_id", "best_iteration"]],
            left_on=["trial_id", "iteration"],
            right_on=["trial_id", "best_iteration"],
        ).drop_duplicates("trial_id", keep="last")
        table = table.merge(at_best[["trial_id", *others]], on="trial_id", how="left")
    else:
        table = table.assign(**{c: pd.Series(dtype="float64") for c in others})
    params = [p for p in results.params if p in ranked]
    table = table.merge(ranked[["trial_id", *params]], on="trial_id", how="left")
    return table.reset_index(drop=True)
