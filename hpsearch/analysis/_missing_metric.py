"""The one message for a search in which no trial reported the spec's metric.

Each such trial errored with :class:`~hpsearch.errors.MetricNotReportedError` at its
first report without the metric (raised in the nested run's controller, see
:mod:`hpsearch.runtime.trial.trainable`). When every trial did, the search is one mistake, in
the loop or in the spec's ``metric``, and ``hpsearch run`` says so once, as an
``Error:``, instead of a table of identical errors. The same holds for a loop that cannot
run under population-based training (:class:`~hpsearch.errors.CheckpointNotReportedError`:
it reports without a checkpoint, or ignores the donor's).
"""

from __future__ import annotations

from hpsearch.analysis._summary import SearchSummary
from hpsearch.errors import CheckpointNotReportedError, MetricNotReportedError
from hpsearch.experiment.layout import ERRORED

__all__ = ["missing_metric_message"]

_MARKERS = tuple(f"{error.__name__}: " for error in (MetricNotReportedError, CheckpointNotReportedError))


def _message(error: str) -> str | None:
    """The message of a trial's error line when it is one of the loop's mistakes above, else ``None``."""
    for marker in _MARKERS:
        at = error.find(marker)
        if at >= 0:
            return error[at + len(marker) :].strip()
    return None


def missing_metric_message(summary: SearchSummary) -> str | None:
    """The message for a search whose every trial errored without reporting the metric; else ``None``.

    ``None`` also for an interrupted search (trials may still report it on ``resume``) and
    for a search with no trials. When the trials' messages differ (their loops reported
    different keys), the first trial's is used and the others are counted.

    Example:
        >>> missing_metric_message(summary)  # doctest: +SKIP
        "every trial failed: the loop did not report the spec's metric 'val_loss'; did you mean 'val_los'? (it reported: loss, val_los, epoch)"
    """
    if summary.interrupted or not summary.trials:
        return None
    messages = [_message(t.error) if t.status == ERRORED else None for t in summary.trials]
    if any(m is None for m in messages):
        return None
    first = str(messages[0])
    n = len(messages)
    if all(m == first for m in messages):
        return f"{'every trial' if n > 1 else 'the trial'} failed: {first}"
    return f"every trial failed: {first} (in trial {summary.trials[0].trial_id}; the {n - 1} other(s) likewise)"
