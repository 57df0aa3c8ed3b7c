"""A figure over the simulated runs (``Spread``: its low and high percentiles and its median), and the percentile
it is read with: NumPy's default (``linear``) to the last bit, which ASHA's model uses too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

__all__ = ["PERCENTILES", "Spread"]

#: The range an estimate gives: these percentiles of its runs (linear interpolation, as NumPy's default).
PERCENTILES = (10, 90)


def _percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of sorted values, to the last bit as NumPy's default (``linear``) computes it:
    Tune's ASHA stops a trial by ``np.nanpercentile`` of a rung's values, and a tie there decides."""
    n = len(ordered)
    h = (n - 1) * (q / 100)  # numpy's virtual index for "linear", in its order of operations
    if h >= n - 1:
        return ordered[-1]
    lo = math.floor(h)
    a, b, g = ordered[lo], ordered[lo + 1], h - lo
    return b - (b - a) * (1 - g) if g >= 0.5 else a + (b - a) * g


def _pct(ordered: Sequence[float], q: float) -> float:
    return _percentile(ordered, q) if ordered else 0.0


@dataclass(frozen=True)
class Spread:
    """A figure over the simulated runs: its low and high percentiles (:data:`PERCENTILES`) and median."""

    low: float
    median: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        ordered = sorted(values)
        return cls(_pct(ordered, PERCENTILES[0]), _pct(ordered, 50), _pct(ordered, PERCENTILES[1]))

    def text(self, fmt: Callable[[float], str] = lambda v: f"{v:.4g}") -> str:
        """``fmt(low)`` alone when the runs agree, else ``low to high (median m)``."""
        low, high = fmt(self.low), fmt(self.high)
        return low if low == high else f"{low} to {high} (median {fmt(self.median)})"

    def as_dict(self) -> dict[str, float]:
        return {"low": self.low, "median": self.median, "high": self.high}
