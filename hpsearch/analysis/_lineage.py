"""Population-based training's lineage: which trial copied which, at what epoch, with what config.

Each exploit is a line of the trial's ``hpsearch_lineage.jsonl`` (written by the scheduler,
:mod:`hpsearch.runtime.search.pbt`). :func:`lineage_table` turns them into one row per exploit, with
the time the exploit cost (from the pause to the trial's next report), and :func:`pbt_lineage`
into the data :func:`hpsearch.plots.pbt_lineage` draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from hpsearch.analysis._view import SearchTables
from hpsearch.experiment import files
from hpsearch.experiment.layout import EPOCH, flatten_config
from hpsearch.formatting import number

__all__ = ["LINEAGE_COLUMNS", "lineage_table", "describe_changes", "LineageData", "pbt_lineage"]

#: The lineage table's fixed columns, before one ``old.<key>``/``new.<key>`` pair per changed config key.
LINEAGE_COLUMNS = (
    "trial_id",
    "number",
    "epoch",
    "donor_trial_id",
    "donor_number",
    "donor_epoch",
    "value",
    "donor_value",
    "changed",
    "exploited_at",
    "next_report_at",
    "exploit_s",
)


def _changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    flat_old, flat_new = flatten_config(old or {}), flatten_config(new or {})
    keys = dict.fromkeys([*flat_old, *flat_new])
    return {k: (flat_old.get(k), flat_new.get(k)) for k in keys if flat_old.get(k) != flat_new.get(k)}


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What an exploit changed in a trial's config, as the lineage table and the printed line say it:
    ``"lr 0.01 -> 0.012, dropout 0.1 -> 0.2"`` (dotted keys for nested ones; ``""`` when nothing changed)."""
    return ", ".join(f"{k} {number(a)} -> {number(b)}" for k, (a, b) in _changes(old, new).items())


def lineage_table(results: SearchTables) -> pd.DataFrame:
    """One row per exploit, in the order the exploits happened.

    Each row holds:

    - the trial that was replaced, and its epoch at that moment;
    - the donor trial, and the epoch the trial continues from;
    - both values of the metric at that moment;
    - what changed: ``changed`` reads like ``"lr 0.01 -> 0.012"``, and each changed key also
      has its own ``old.<key>`` and ``new.<key>`` columns;
    - when the exploit happened (``exploited_at``, UTC);
    - ``next_report_at``: the first report of the run that continued from the donor. Its epoch
      is the donor's epoch + 1;
    - ``exploit_s``: the seconds between those two times. They cover the pause, the start of
      the new trial actor and nested run, and one epoch's training.
    """
    numbers = dict(zip(results.trials["trial_id"], results.trials["number"]))
    rows: list[dict[str, Any]] = []
    for trial_id in results.trials["trial_id"]:
        # When each report was forwarded, and its epoch. The time is the history's own clock,
        # because Tune's timestamp has whole seconds only.
        reports = sorted(
            (float(r["time"]), r.get(EPOCH))
            for r in files.read_history(results.experiment_dir, str(trial_id))
            if isinstance(r.get("time"), (int, float))
        )
        for record in files.read_lineage(results.experiment_dir, str(trial_id)):
            changes = _changes(record.get("old_config") or {}, record.get("new_config") or {})
            when = record.get("time")
            donor_epoch = record.get("donor_epoch")
            # the new run's first report: the epoch after the donor's (a report of the old run that was still
            # on its way when the scheduler paused the trial is not it)
            later = [
                t
                for t, epoch in reports
                if isinstance(when, (int, float))
                and t > when
                and (not isinstance(donor_epoch, int) or epoch == donor_epoch + 1)
            ]
            at = pd.to_datetime(when, unit="s", utc=True) if isinstance(when, (int, float)) else pd.NaT
            next_at = pd.to_datetime(later[0], unit="s", utc=True) if later else pd.NaT
            row: dict[str, Any] = {
                "trial_id": str(trial_id),
                "number": numbers.get(trial_id),
                "epoch": record.get("epoch"),
                "donor_trial_id": record.get("donor_trial_id"),
                "donor_number": numbers.get(record.get("donor_trial_id")),
                "donor_epoch": record.get("donor_epoch"),
                "value": record.get("value"),
                "donor_value": record.get("donor_value"),
                "changed": describe_changes(record.get("old_config") or {}, record.get("new_config") or {}),
                "exploited_at": at,
                "next_report_at": next_at,
                "exploit_s": later[0] - when if later and isinstance(when, (int, float)) else None,
            }
            for key, (old, new) in changes.items():
                row[f"old.{key}"], row[f"new.{key}"] = old, new
            rows.append(row)
    table = pd.DataFrame.from_records(rows, columns=None) if rows else pd.DataFrame(columns=list(LINEAGE_COLUMNS))
    for col in LINEAGE_COLUMNS:
        if col not in table:
            table[col] = None
    extra = sorted(c for c in table.columns if c not in LINEAGE_COLUMNS)
    table = table[[*LINEAGE_COLUMNS, *extra]]
    for col in ("epoch", "donor_epoch", "number", "donor_number"):
        table[col] = pd.to_numeric(table[col], errors="coerce").astype("Int64")
    table["exploit_s"] = pd.to_numeric(table["exploit_s"], errors="coerce")
    return table.sort_values("exploited_at", kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class LineageData:
    """What the lineage plot draws: a lane per trial (``trials``, by creation order, with their
    ``labels``), each trial's reported epochs as ``spans`` ``(trial_id, first, last)``, and each exploit
    as ``(trial_id, epoch, donor_trial_id, donor_epoch)``: an arrow from the donor's lane at
    ``donor_epoch`` into the trial's lane, where the trial's own line was cut at ``epoch``."""

    trials: list[str]
    labels: list[str]
    spans: list[tuple[str, float, float]]
    exploits: list[tuple[str, float | None, str, float | None]]
    metric: str


def pbt_lineage(results: SearchTables) -> LineageData:
    """The plot data of :func:`hpsearch.plots.pbt_lineage` (see :class:`LineageData`)."""
    trials = [str(t) for t in results.trials["trial_id"]]
    labels = [f"{t} (#{n})" if n is not None else t for t, n in zip(trials, results.trials["number"])]
    spans = []
    for trial_id, rows in results.history.groupby("trial_id", sort=False):
        epochs = rows["iteration"].dropna()
        if len(epochs):
            spans.append((str(trial_id), float(epochs.min()), float(epochs.max())))
    table = results.lineage
    exploits = [
        (str(r.trial_id), _float(r.epoch), str(r.donor_trial_id), _float(r.donor_epoch))
        for r in table.itertuples(index=False)
    ]
    return LineageData(trials, labels, spans, exploits, results.metric)


def _float(value: Any) -> float | None:
    try:
        return None if value is None or value != value else float(value)
    except (TypeError, ValueError):
        return None
