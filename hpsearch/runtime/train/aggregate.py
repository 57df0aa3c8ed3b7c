"""Combine the metrics every Train worker reported into the one dict Tune sees.

Ray's ``TuneReportCallback`` forwards rank 0's dict only, so a metric that differs
across ranks (a per-shard training loss, say) reaches Tune as one worker's view.
hpsearch aggregates instead: numeric values by the spec's method per metric
(mean by default), anything else (strings, lists, ...) as rank 0 reported it.

Every value is made plain Python first (:func:`plain_value`): loops written for Ray
Train report NumPy scalars and 0-d torch tensors, which Tune, the history file and Ray
Train's own checkpoint bookkeeping (JSON through pydantic) cannot all take. No NumPy or
torch import is needed here: the conversion goes by the values' own ``item``/``tolist``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["METHODS", "aggregate_metrics", "plain_value", "plain_metrics"]


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


#: Aggregation methods by name; ``rank0`` takes the first worker's value.
METHODS: dict[str, Callable[[Sequence[float]], float]] = {
    "mean": _mean,
    "min": min,
    "max": max,
    "sum": lambda values: sum(values) if all(isinstance(v, int) for v in values) else math.fsum(values),
    "rank0": lambda values: values[0],
}


_PLAIN = (bool, int, float, str, type(None))


def plain_value(value: Any) -> Any:
    """``value`` as plain Python, what JSON writes: a NumPy scalar or a 0-d array or tensor
    becomes its ``int``/``float``/``bool``; an array or tensor its nested list; dicts, lists
    and tuples are converted inside; anything else is returned as it is.

    Example:
        >>> import numpy as np
        >>> plain_value({"loss": np.float32(0.5), "n": np.int64(3), "ok": np.bool_(True)})
        {'loss': 0.5, 'n': 3, 'ok': True}
    """
    if type(value) in _PLAIN:
        return value
    if isinstance(value, Mapping):
        return {k: plain_value(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(plain_value(v) for v in value)
    ndim = getattr(value, "ndim", None)
    if ndim == 0 and callable(getattr(value, "item", None)):  # NumPy scalars, 0-d arrays and tensors
        return plain_value(value.item())
    if isinstance(ndim, int) and callable(getattr(value, "tolist", None)):  # arrays, tensors
        return value.tolist()
    return value


def plain_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """One report with every value made plain (:func:`plain_value`); the keys are kept."""
    return {key: plain_value(value) for key, value in metrics.items()}


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def aggregate_metrics(per_rank: Sequence[Mapping[str, Any]], method_for: Callable[[str], str]) -> dict[str, Any]:
    """Aggregate one report: ``per_rank[i]`` is worker ``i``'s dict.

    Values are made plain Python first (:func:`plain_value`). A key missing on some ranks
    is aggregated over the ranks that reported it (a rank that reports ``{}`` counts for
    none). When every rank reported the same value it is passed through unchanged (an
    ``epoch`` stays an ``int``), unless the method is ``sum``.

    Example:
        >>> aggregate_metrics([{"loss": 1.0, "epoch": 3}, {"loss": 3.0, "epoch": 3}], lambda m: "mean")
        {'loss': 2.0, 'epoch': 3}
    """
    if not per_rank:
        return {}
    per_rank = [plain_metrics(metrics) for metrics in per_rank]
    keys = list(dict.fromkeys(k for metrics in per_rank for k in metrics))
    out: dict[str, Any] = {}
    for key in keys:
        values = [m[key] for m in per_rank if key in m]
        method = method_for(key)
        if not all(_is_number(v) for v in values):
            out[key] = values[0]
        elif method != "sum" and all(v == values[0] for v in values):
            out[key] = values[0]
        else:
            out[key] = METHODS[method](values)
    return out
