"""The Train workers each trial had over time: :attr:`Results.workers <hpsearch.analysis.Results.workers>`, and
the restarts drained nodes caused: :attr:`Results.preemptions <hpsearch.analysis.Results.preemptions>`.

Typed with the :class:`~hpsearch.analysis._view.SearchTables` protocol rather than ``Results``, so that
``Results`` can call it without an import cycle.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from hpsearch.analysis._view import SearchTables
from hpsearch.experiment import files

__all__ = ["WORKER_COLUMNS", "PREEMPTION_COLUMNS", "workers_table", "preemptions_table"]

#: The columns of :attr:`Results.workers`: one row per start of a trial's Train workers.
WORKER_COLUMNS = ("trial_id", "started_at", "workers", "nodes", "node_ids", "run_name")
#: The columns of :attr:`Results.preemptions`: one row per attempt whose loop read a drain notice.
PREEMPTION_COLUMNS = (
    "trial_id",
    "attempt",
    "noticed_at",
    "deadline",
    "warning_s",
    "hosts",
    "node_ids",
    "ranks",
    "driver",
    "reason",
    "epoch",
    "report",
    "saved_epoch",
    "forced",
    "restarted",
    "restart_attempt",
    "restored_epoch",
    "reports_lost",
)


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


def preemptions_table(results: SearchTables) -> pd.DataFrame:
    """One row per attempt of a trial whose loop read that a node of its worker group was being drained (a spot
    reclaim), trials in creation order, each trial's attempts in order.

    Columns: ``trial_id``, ``attempt``, ``noticed_at`` and ``deadline`` (UTC; the deadline NaT when the drain
    gave none), ``warning_s`` (seconds from the notice to the deadline), ``hosts``, ``node_ids`` and ``ranks``
    (the drained nodes and the ranks on them, tuples), ``driver`` (a drained node held the trial's driver: the
    trial was paused and resumed on another node, ``resources.driver_node: any``), ``reason`` (the drain's
    reason message; ``""`` until Ray shows it, once the node is gone), ``epoch`` and ``report`` (where the loop read the notice),
    ``saved_epoch`` (the epoch of the checkpoint saved then through :func:`hpsearch.train.report`; ``forced``:
    saved because of the notice), ``restarted`` (the worker group started again because of the drain: a
    restart, not an error), ``restart_attempt``, ``restored_epoch`` (the epoch of the checkpoint the restart
    continued from) and ``reports_lost`` (reports the drained attempt made after that checkpoint). See
    :mod:`hpsearch.experiment.preemptions` for how each is known.
    """
    rows = []
    for trial_id in results.trials["trial_id"]:
        folder = files.trial_folder(results.experiment_dir, str(trial_id))
        for p in files.read_preemptions(folder) if folder is not None else []:
            rows.append(
                {
                    "trial_id": trial_id,
                    "attempt": p.attempt,
                    "noticed_at": _utc(p.noticed_at),
                    "deadline": _utc(p.deadline),
                    "warning_s": p.warning_s,
                    "hosts": p.hosts,
                    "node_ids": p.node_ids,
                    "ranks": p.ranks,
                    "driver": p.driver,
                    "reason": p.reason,
                    "epoch": p.epoch,
                    "report": p.report,
                    "saved_epoch": p.saved_epoch,
                    "forced": p.forced,
                    "restarted": p.restarted,
                    "restart_attempt": p.restart_attempt,
                    "restored_epoch": p.restored_epoch,
                    "reports_lost": p.reports_lost,
                }
            )
    table = pd.DataFrame(rows, columns=list(PREEMPTION_COLUMNS))
    for column in ("noticed_at", "deadline"):
        table[column] = pd.to_datetime(table[column], utc=True)
    for column in ("attempt", "report", "restart_attempt", "reports_lost"):
        table[column] = table[column].astype("Int64")
    table["warning_s"] = table["warning_s"].astype("float64")
    return table


def _utc(seconds: float | None) -> Any:
    """UNIX seconds as a UTC time, NaT for none."""
    return pd.Timestamp(seconds, unit="s", tz="UTC") if seconds is not None else pd.NaT
