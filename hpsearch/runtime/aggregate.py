"""Combine the metrics every Train worker reported into the one dict Tune sees.

Ray's ``TuneReportCallback`` forwards rank 0's dict only, so a metric that differs
across ranks (a per-shard training loss, say) reaches Tune as one worker's view.
hpsearch aggregates instead: numeric values by the spec's method per metric
(mean by default), anything else (strings, lists, ...) as rank 0 reported it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["METHODS", "aggregate_metrics"]


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


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def aggregate_metrics(per_rank: Sequence[Mapping[str, Any]], method_for: Callable[[str], str]) -> dict[str, Any]:
    """Aggregate one report: ``per_rank[i]`` is worker ``i``'s dict.

    A key missing on some ranks is aggregated over the ranks that reported it. When
    every rank reported the same value it is passed through unchanged (an ``epoch``
    stays an ``int``), unless the method is ``sum``.

    Example:
        >>> aggregate_metrics([{"loss": 1.0, "epoch": 3}, {"loss": 3.0, "epoch": 3}], lambda m: "mean")
        {'loss': 2.0, 'epoch': 3}
    """
    if not per_rank:
        return {}
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
