"""The ``aggregate`` section: how each metric is combined across a trial's workers before Tune sees it.

The combining itself happens in the Ray layer (:mod:`hpsearch.runtime.train.aggregate`); this is its setting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hpsearch.spec._validation import StrictModel

__all__ = ["Aggregate", "AggregateMethod"]

#: How one metric's values on the workers become the trial's one value.
AggregateMethod = Literal["mean", "min", "max", "sum", "rank0"]


class Aggregate(StrictModel):
    """How each reported metric is combined across a trial's workers before Tune sees it."""

    default: AggregateMethod = "mean"
    metrics: dict[str, AggregateMethod] = Field(default_factory=dict)

    def method(self, metric: str) -> str:
        return self.metrics.get(metric, self.default)
