"""A report's metrics as every view reads them: flattened as Ray Tune flattens them, and its epoch.

A loop may report nested dicts (``{"val": {"loss": 0.1}}``). Ray Tune flattens every result
with ``/`` before it checks the spec's metric and before its searchers and schedulers see it
(``ray.tune.utils.flatten_dict``, called in ``TuneController._on_training_result``), so
``metric: val/loss`` names that value. hpsearch reads a report's metric the same way in every
view (the missing-metric check, the progress lines, :func:`hpsearch.load_results` and so the
closing summary, the ranking and the report) through :func:`report_value`, and a report's
epoch through :func:`report_epoch` and :func:`report_step`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from hpsearch.experiment.layout import EPOCH
from hpsearch.experiment.ranking import metric_value
from hpsearch.spec.constraints import Constraint, violation

__all__ = ["DELIMITER", "flat_metrics", "report_value", "has_metric", "report_violation", "report_epoch", "report_step"]

#: What joins a nested key to its parent, as Ray Tune's ``flatten_dict`` joins them.
DELIMITER = "/"
#: Tune's own counter of a trial's results, which restarts at 1 after a restore or a retry.
_TUNE_ITERATION = "training_iteration"


def flat_metrics(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report as Ray Tune flattens it: ``{"val": {"loss": 1}}`` -> ``{"val/loss": 1}``.

    Exactly as ``ray.tune.utils.flatten_dict(report, delimiter="/")``: level by level, every
    ``dict`` value replaced by its keys joined with ``/`` (added after the other keys; an empty
    dict disappears), lists kept; a nested key wins over a flat key of the same name.

    Example:
        >>> flat_metrics({"val": {"loss": 0.5, "acc": {"top1": 0.9}}, "epoch": 3})
        {'epoch': 3, 'val/loss': 0.5, 'val/acc/top1': 0.9}
    """
    out = dict(report)
    while any(isinstance(v, dict) for v in out.values()):
        added: dict[str, Any] = {}
        nested = [key for key, value in out.items() if isinstance(value, dict)]
        for key in nested:
            for sub, value in out[key].items():
                added[DELIMITER.join([key, str(sub)])] = value
        out.update(added)
        for key in nested:
            del out[key]
    return out


def report_value(report: Mapping[str, Any], metric: str) -> Any:
    """What a report holds for ``metric`` as Tune looks it up (``a/b`` also inside ``{"a": {"b": ...}}``);
    ``None`` when it holds nothing there. The value as reported: :func:`metric_value` says if it is a number."""
    if not any(isinstance(v, dict) for v in report.values()):
        return report.get(metric)
    return flat_metrics(report).get(metric)


def has_metric(report: Mapping[str, Any], metric: str) -> bool:
    """Whether a report holds ``metric`` as Tune's strict metric check looks for it (a ``None`` value counts)."""
    if not any(isinstance(v, dict) for v in report.values()):
        return metric in report
    return metric in flat_metrics(report)


def report_violation(report: Mapping[str, Any], constraints: Sequence[Constraint]) -> float:
    """The report's total violation of the spec's ``constraints`` (0.0: feasible), each metric read as
    :func:`report_value` reads it (:func:`hpsearch.spec.constraints.violation`)."""
    return violation({c.metric: report_value(report, c.metric) for c in constraints}, constraints)


def report_epoch(report: Mapping[str, Any] | None) -> int | float | None:
    """A report's epoch: its ``epoch``, else Tune's ``training_iteration``; ``None`` when it has neither
    as a finite number. A whole number is an ``int`` (``3.0`` -> ``3``); a fractional epoch stays as reported."""
    report = report or {}
    value = report.get(EPOCH)
    if value is None:
        value = report.get(_TUNE_ITERATION)
    number = metric_value(value)
    if number is None or not math.isfinite(number):
        return None
    return int(number) if number.is_integer() else number


def report_step(report: Mapping[str, Any]) -> int | None:
    """A report's step, a whole number: its ``epoch`` when that is whole (hpsearch always reports one; it
    survives restarts), else Tune's ``training_iteration``; ``None`` when it has neither."""
    epoch = metric_value(report.get(EPOCH))
    if epoch is not None and math.isfinite(epoch) and epoch.is_integer():
        return int(epoch)
    iteration = metric_value(report.get(_TUNE_ITERATION))
    return int(iteration) if iteration is not None and math.isfinite(iteration) else None
