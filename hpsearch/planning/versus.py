"""The estimate made as a search started, set next to what happened.

``hpsearch run`` writes ``hpsearch_estimate.json`` when the spec was checked first (``hpsearch check``
measures one trial; :mod:`hpsearch.planning.estimate` models the schedule from it). When the search
ends, :func:`versus_actual` compares that estimate with the search's wall time and resource-hours, for
the summary file, the closing lines (:func:`versus_lines`) and the report. The error is the actual
figure against the estimate's median: ``+0.08`` is 8% longer than predicted.

Pure: reads the records it is given, nothing else.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Any

from hpsearch.formatting import duration, hours
from hpsearch.planning.estimate import Spread

__all__ = ["versus_actual", "versus_lines", "versus_wall"]


def _spread(value: Any) -> dict[str, float] | None:
    if not isinstance(value, Mapping):
        return None
    try:
        out = {k: float(value[k]) for k in ("low", "median", "high")}
    except (KeyError, TypeError, ValueError):
        return None
    return out if all(math.isfinite(v) for v in out.values()) else None


def _compare(spread: dict[str, float], actual: float) -> dict[str, Any]:
    median = spread["median"]
    return {
        **spread,
        "actual": actual,
        "error": actual / median - 1.0 if median > 0 else None,
        "within": spread["low"] <= actual <= spread["high"],
    }


def versus_actual(
    record: Mapping[str, Any] | None,
    *,
    wall_time_s: float | None,
    resource_hours: Mapping[str, float],
    interrupted: bool = False,
) -> dict[str, Any] | None:
    """The estimate (``record``, as ``hpsearch_estimate.json`` holds it) next to the search's own figures.

    ``wall_time_s`` is the search's wall time over its run and every resume. An interrupted search
    (Ctrl-C) is not compared: it did not run the schedule the estimate models. ``None`` without an
    estimate, or one that holds no wall time.
    """
    if not isinstance(record, Mapping):
        return None
    wall = _spread(record.get("wall_time_s"))
    if wall is None:
        return None
    out: dict[str, Any] = {
        "made_at": record.get("made_at"),
        "from": (record.get("inputs") or {}).get("source", ""),
        "wall_time_s": dict(wall),
        "resource_hours": {},
        "compared": False,
    }
    hours = record.get("resource_hours")
    if interrupted or wall_time_s is None or not math.isfinite(wall_time_s):
        out["not_compared"] = "the search was interrupted" if interrupted else "the search has no wall time yet"
        return out
    out["compared"] = True
    out["wall_time_s"] = _compare(wall, float(wall_time_s))
    if isinstance(hours, Mapping):
        for resource, value in hours.items():
            spread = _spread(value)
            if spread is not None and resource in resource_hours:
                out["resource_hours"][resource] = _compare(spread, float(resource_hours[resource]))
    return out


def _range(spread: Mapping[str, Any], fmt: Any) -> str:
    return Spread(spread["low"], spread["median"], spread["high"]).text(fmt)


def _error(entry: Mapping[str, Any]) -> str:
    error = entry.get("error")
    if error is None:
        return ""
    one = entry.get("low") == entry.get("high")  # every simulated run the same (FIFO): no range to be in
    where = "" if one else (", within the range" if entry.get("within") else ", outside the range")
    what = "the estimate" if one else "the median"
    if abs(error) < 0.005:
        return f"as {what}{where}"
    return f"{abs(error) * 100:.0f}% {'over' if error > 0 else 'under'} {what}{where}"


def versus_wall(versus: Mapping[str, Any]) -> str:
    """The wall time estimated next to the one taken, in one phrase (the report's card)."""
    wall = versus["wall_time_s"]
    if not versus.get("compared"):
        return f"{_range(wall, duration)}; not compared: {versus.get('not_compared', 'the search did not end')}"
    return f"{_range(wall, duration)}; it took {duration(wall['actual'])}: {_error(wall)}"


def versus_lines(versus: Mapping[str, Any] | None) -> list[str]:
    """The closing lines that set the estimate next to what happened (none without an estimate)."""
    if not versus:
        return []
    made = versus.get("made_at")
    when = (
        " (" + datetime.datetime.fromtimestamp(float(made)).strftime("%Y-%m-%d %H:%M") + ")"
        if isinstance(made, (int, float)) and not isinstance(made, bool) and math.isfinite(made)
        else ""
    )
    lines = [f"Wall time estimated at the start{when}: {versus_wall(versus)}"]
    for resource, entry in versus.get("resource_hours", {}).items():
        lines.append(
            f"  {resource}-hours estimated {_range(entry, hours)}; used {hours(entry['actual'])}: {_error(entry)}"
        )
    return lines
