"""A trial's status: the one rule, from what the folder recorded, the most trusted record first.

1. Its outcome record (``hpsearch_trials.jsonl``, the last line per trial: a retried trial ends more
   than once) when it names a known status (:func:`recorded_status`).
2. The summary's entry for it (``hpsearch_summary.json``, written when the search ended; of an
   interrupted search only the errored entries count: it says "finished" of trials that had not ended).
3. Tune's own files: an ``error.txt`` means errored; else Tune's status name (:func:`tune_status`).
   Tune cannot tell a trial the scheduler stopped from one that finished, so a terminated trial that
   ran fewer iterations than the scheduler's ``max_t`` counts as stopped.
4. Else finished when the search ended, running when it did not.

A trial a budget stopped runs again on ``hpsearch resume``: it is running while a stint of it started
since has no end (:func:`running_again`). :func:`hpsearch.experiment.files.read_outcomes` and
:func:`hpsearch.load_results` both decide with these functions, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from hpsearch.experiment.layout import ERRORED, FINISHED, PENDING, RUNNING, STATUSES, STOPPED, TrialStatus
from hpsearch.experiment.usage import Stint

__all__ = ["TUNE_STATES", "recorded_status", "summary_entries", "tune_status", "trial_status", "running_again"]

#: Tune's status names (``Trial.status``, as its experiment state records them) as hpsearch's statuses.
TUNE_STATES: Mapping[str, TrialStatus] = {
    "TERMINATED": FINISHED,
    "ERROR": ERRORED,
    "RUNNING": RUNNING,
    "PENDING": PENDING,
    "PAUSED": PENDING,
}


def recorded_status(record: Mapping[str, Any] | None) -> TrialStatus | None:
    """The status a trial's record names (an outcome line, a summary's entry); ``None`` when it names none
    that hpsearch knows (a damaged line, or one of a newer hpsearch): the next record in the rule decides."""
    status = (record or {}).get("status")
    return cast(TrialStatus, status) if status in STATUSES else None


def summary_entries(summary: Mapping[str, Any] | None, *, ended: bool) -> dict[str, dict[str, Any]]:
    """Trial id -> its entry in the search's summary, the entries that count: every one when the search ended,
    only the errored ones when it was interrupted (its summary says "finished" of trials that had not ended)."""
    entries = {t["trial_id"]: t for t in (summary or {}).get("trials", []) if "trial_id" in t}
    return entries if ended else {k: v for k, v in entries.items() if v.get("status") == ERRORED}


def tune_status(name: Any, *, iterations: int, max_t: Any = None) -> TrialStatus | None:
    """What Tune's status ``name`` says of a trial that ran ``iterations`` reports (``None``: no name Tune uses);
    a terminated trial short of the scheduler's ``max_t`` (``None`` without early stopping) was stopped."""
    status = TUNE_STATES.get(str(name))
    if status == FINISHED and isinstance(max_t, (int, float)) and iterations < max_t:
        return STOPPED
    return status


def trial_status(
    *,
    outcome: Mapping[str, Any] | None,
    summarised: Mapping[str, Any] | None,
    error_file: Callable[[], bool],
    tune_name: Callable[[], Any],
    iterations: int,
    max_t: Any,
    ended: bool,
) -> TrialStatus:
    """One trial's status by the rule above: its ``outcome`` record, its ``summarised`` entry (of
    :func:`summary_entries`), whether Tune wrote an ``error_file``, Tune's status ``tune_name`` (with the
    ``iterations`` it ran and the scheduler's ``max_t``), and whether the search ``ended``.

    ``error_file`` and ``tune_name`` are asked only when the records before them say nothing: they read
    Tune's files, and its experiment state is large.
    """
    for record in (outcome, summarised):
        found = recorded_status(record)
        if found is not None:
            return found
    if error_file():
        return ERRORED
    from_tune = tune_status(tune_name(), iterations=iterations, max_t=max_t)
    if from_tune is not None:
        return from_tune
    return FINISHED if ended else RUNNING


def running_again(outcome: Mapping[str, Any] | None, stints: Sequence[Stint]) -> bool:
    """Whether a trial a budget stopped (its ``outcome`` names ``ended_by``) runs again: its latest stint (of
    ``stints``, the usage records) started after that stop and has no end."""
    record = outcome or {}
    stopped_at = record.get("ended_at")
    if not record.get("ended_by") or not isinstance(stopped_at, (int, float)):
        return False
    return bool(stints) and stints[-1].ended_at is None and stints[-1].started_at > stopped_at
