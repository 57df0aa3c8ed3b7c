"""How hpsearch writes numbers, durations and plain-text tables: one home for every view.

The progress lines, the closing table of ``hpsearch run``, ``hpsearch plan``, the report
and the ``repr`` of results all format through here, so a value reads the same everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["number", "cell", "duration", "hours", "resource_hours", "text_table", "plural"]

#: Significant digits of every metric and parameter value hpsearch shows.
DIGITS = 4


def number(value: Any) -> str:
    """A value as shown in tables and messages: floats to 4 significant digits, NaN and ±inf as
    ``nan`` / ``inf`` / ``-inf`` (shown as they are), ``None`` as ``-``, anything else as ``str``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) or type(value).__name__.startswith("float"):  # numpy floats too
        return f"{float(value):.{DIGITS}g}"
    return str(value)


def cell(value: Any) -> str:
    """A table cell: like :func:`number`, but a missing value (``None``, pandas' NA/NaT) is ``-``
    and a timestamp is ``YYYY-mm-dd HH:MM:SS``. NaN is a value here, not a gap: it shows as ``nan``."""
    if value is None:
        return "-"
    if type(value).__name__ in ("NAType", "NaTType"):
        return "-"
    if hasattr(value, "strftime"):
        return str(value.strftime("%Y-%m-%d %H:%M:%S"))
    return number(value)


def duration(seconds: float | None, *, rough: bool = False) -> str:
    """``under 1 s``, ``42 s``, ``3 min 05 s``, ``2 h 07 min``; ``-`` when unknown.

    ``rough``: to one unit, for plot titles: ``42 s``, ``2 min``, ``1.5 h``.
    """
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if rough:
        if seconds < 90:
            return f"{seconds:.0f} s"
        return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
    if seconds < 1:
        return "under 1 s"
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, sec = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def hours(value: float) -> str:
    """Resource-hours as every view writes them: three significant digits, whole hours with
    thousands separators from 100 up (``0.0412``, ``3.5``, ``12.3``, ``1,234``)."""
    if not math.isfinite(value):
        return number(float(value))
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def resource_hours(held: Mapping[str, float]) -> str:
    """``1.23 CPU-hours, 0.5 GPU-hours``: what a search held, resource by resource, in one phrase."""
    return ", ".join(f"{hours(value)} {resource}-hours" for resource, value in held.items())


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 trial``, ``2 trials``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def text_table(rows: Sequence[Sequence[str]], *, indent: str = "") -> str:
    """Rows of strings (the first is the header) as left-aligned columns two spaces apart."""
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
