"""The spec's ``budget`` section: what ends a search before every trial has run.

A wall-time budget, a number of failed trials, a target value, and resource-hours
(any Ray resource, each trial counted from its driver's start to its end). Pure.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from hpsearch.errors import Problem
from hpsearch.spec._validation import StrictModel, validate_section

__all__ = ["Budget", "Target", "parse_duration", "parse_budget"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*([smhd])\s*)+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")


def parse_duration(value: Any) -> float:
    """Seconds from ``90``, ``90.5``, ``"45s"``, ``"30m"``, ``"2h"``, ``"1h30m"`` or ``"1.5d"``.

    Raises:
        ValueError: with a message fit for the user.
    """
    if isinstance(value, bool):
        raise ValueError(f"must be a duration such as 2h, 30m, 90s or a number of seconds, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and _DURATION.match(value.lower()):
        seconds = sum(float(n) * _UNITS[u] for n, u in _PART.findall(value.lower()))
    else:
        raise ValueError(f"must be a duration such as 2h, 30m, 90s or a number of seconds, got {value!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"must be a positive duration, got {value!r}")
    return seconds


class Target(StrictModel):
    """A value of a metric that ends the search once any trial reaches it."""

    value: float
    mode: str | None = None  # min | max; default: the spec's mode for its metric

    @field_validator("mode")
    @classmethod
    def _mode(cls, mode: str | None) -> str | None:
        if mode not in (None, "min", "max"):
            raise ValueError(f"must be 'min' or 'max', got {mode!r}")
        return mode


class Budget(StrictModel):
    """Limits that end a search early. Each is off unless given."""

    max_wall_time: PositiveFloat | None = None  # seconds (the YAML may say 2h, 30m, 90s)
    max_failed_trials: PositiveInt | None = None
    target: dict[str, Target] = Field(default_factory=dict)
    max_resource_hours: dict[str, PositiveFloat] = Field(default_factory=dict)

    def is_set(self) -> bool:
        return bool(
            self.max_wall_time is not None
            or self.max_failed_trials is not None
            or self.target
            or self.max_resource_hours
        )


def parse_budget(raw: Any, *, metric: str | None, mode: str | None) -> tuple[Budget | None, list[Problem]]:
    """Validate ``budget``; durations read as seconds, a target's mode resolved against the spec's."""
    problems: list[Problem] = []
    if isinstance(raw, dict):
        raw = dict(raw)
        if raw.get("max_wall_time") is not None:
            try:
                raw["max_wall_time"] = parse_duration(raw["max_wall_time"])
            except ValueError as err:
                problems.append(Problem("budget.max_wall_time", str(err)))
                raw.pop("max_wall_time")
        target = raw.get("target")
        if isinstance(target, dict):
            resolved = {}
            for name, value in target.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    if name != metric:
                        problems.append(
                            Problem(
                                f"budget.target.{name}",
                                f"is not the spec's metric ({metric!r}): say which way is better, "
                                f"e.g. {{{name}: {{value: {value}, mode: max}}}}",
                            )
                        )
                        continue
                    value = {"value": float(value)}
                resolved[name] = value
            raw["target"] = resolved
    budget, found = validate_section(Budget, raw, "budget")
    problems += found
    if budget is not None and problems:
        return None, problems
    if budget is not None:
        for name, t in budget.target.items():
            if t.mode is None and name != metric:
                problems.append(
                    Problem(
                        f"budget.target.{name}.mode", f"is required: {name!r} is not the spec's metric ({metric!r})"
                    )
                )
        if problems:
            return None, problems
    if budget is not None and mode is not None:
        budget = budget.model_copy(
            update={
                "target": {k: t if t.mode else t.model_copy(update={"mode": mode}) for k, t in budget.target.items()}
            }
        )
    return budget, problems
