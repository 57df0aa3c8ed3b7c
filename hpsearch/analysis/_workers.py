"""The Train workers each trial had over time: :attr:`Results.workers <hpsearch.analysis.Results.workers>`.

Typed with the :class:`~hpsearch.analysis._view.SearchTables` protocol rather than ``Results``, so that
``Results`` can call it without an import cycle.
"""

from __future__ import annotations

import pandas as pd

from hpsearch.analysis._view import SearchTables
from hpsearch.experiment import files

__all__ = ["WORKER_COLUMNS", "workers_table"]

#: The columns of :attr:`Results.workers`: one row per start of a trial's Train workers.
WORKER_COLUMNS = ("trial_id", "started_at", "workers", "nodes", "node_ids", "run_name")


def workers_table(results: SearchTables) -> pd.DataFrame:
    """One row per start of a trial's Train workers, each trial's in time order, trials in creation order.

    Rank 0 records every start of the trial's worker group: the first, each restart after a failure
    or a lost node, each resize of an elastic trial (``scaling.num_workers: {min, max}``), across its
    runs (retries, ``resume``). Columns: ``trial_id``, ``started_at`` (UTC), ``workers`` (the group's
    size), ``nodes`` (how many nodes its workers ran on), ``node_ids`` (Ray's ids of those nodes, a
    tuple) and ``run_name`` (the nested run: the trial id, or under pbt/pb2 the run after an exploit).
    A group is the trial's until the next start or the trial's end. Empty for a folder written before
    hpsearch recorded the starts.
    """
    rows = []
    for trial_id in results.trials["trial_id"]:
        folder = files.trial_folder(results.experiment_dir, str(trial_id))
        for start in files.read_worker_starts(folder) if folder is not None else []:
            at = start["started_at"]
            rows.append(
                {
                    "trial_id": trial_id,
                    "started_at": pd.Timestamp(at, unit="s", tz="UTC") if at is not None else pd.NaT,
                    "workers": start["workers"],
                    "nodes": len(start["node_ids"]),
                    "node_ids": tuple(start["node_ids"]),
                    "run_name": start["run_name"],
                }
            )
    table = pd.DataFrame(rows, columns=list(WORKER_COLUMNS))
    table["started_at"] = pd.to_datetime(table["started_at"], utc=True)
    for column in ("workers", "nodes"):
        table[column] = table[column].astype("Int64")
    return table
