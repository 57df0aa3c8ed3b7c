"""The spec's ``budget`` section: what ends a search before every trial has run, and when it has.

There are four kinds of limit: a wall-time budget, a number of failed trials, a target
value, and resource-hours. Resource-hours can be of any Ray resource, and each trial counts
from its driver's start to its end. A limit is reached when the search's use *reaches* it
(``>=``), so a search never runs past it. What each limit counts:

- ``max_wall_time``: the search's wall time, summed over its first run and every resume.
  The time between them does not count.
- ``max_failed_trials``: the trials whose latest end is ``errored``, each trial once. A trial
  that Tune retries counts only if its retries fail too. ``3`` ends the search at the 3rd
  failed trial, so at most 3 fail.
- ``target``: any report of any trial whose value is at least the target (``max``) or at
  most the target (``min``).
- ``max_resource_hours``: per resource, the sum over all trials of the trial's resources
  (its driver and worker bundles) times the time its driver ran.

:meth:`Budget.reached` decides, from a :class:`BudgetUse` measured elsewhere
(:mod:`hpsearch.runtime.search.budget`). Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from hpsearch.errors import Problem
from hpsearch.formatting import hours as fmt_hours
from hpsearch.spec._validation import StrictModel, validate_section

__all__ = [
    "Budget",
    "Target",
    "BudgetUse",
    "Reached",
    "BUDGET_KEYS",
    "parse_duration",
    "format_duration",
    "parse_budget",
]

#: The budget's keys, in the order :meth:`Budget.reached` checks them (the one named when several are reached).
BUDGET_KEYS = ("target", "max_failed_trials", "max_resource_hours", "max_wall_time")

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


def format_duration(seconds: float) -> str:
    """A duration as the spec may say it: ``7200 -> "2h"``, ``5400 -> "1h30m"``, ``90 -> "1m30s"``, ``0.5 -> "0.5s"``."""
    if not float(seconds).is_integer():
        return f"{seconds:g}s"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    return "".join(f"{n}{u}" for n, u in parts if n) or "0s"


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

    def reached(self, use: BudgetUse) -> Reached | None:
        """The first limit (in :data:`BUDGET_KEYS` order) that ``use`` has reached, or ``None``."""
        for name, t in self.target.items():
            best = use.best.get(name)
            if best is not None and (best >= t.value if t.mode == "max" else best <= t.value):
                sign = ">=" if t.mode == "max" else "<="
                who = f" by trial {use.best_trial[name]}" if use.best_trial.get(name) else ""
                return Reached(
                    "target",
                    f"the target {name} {sign} {t.value:g} was reached{who} ({name}={best:g})",
                    f"budget.target.{name}.value",
                )
        if self.max_failed_trials is not None and use.failed_trials >= self.max_failed_trials:
            return Reached(
                "max_failed_trials",
                f"the failed-trials budget of {self.max_failed_trials} was reached ({use.failed_trials} trials errored)",
                "budget.max_failed_trials",
                str(max(self.max_failed_trials * 2, use.failed_trials + 1)),
            )
        for resource, hours in self.max_resource_hours.items():
            used = use.resource_hours.get(resource, 0.0)
            if used >= hours:
                return Reached(
                    "max_resource_hours",
                    f"the resource budget of {hours:g} {resource}-hours was reached ({fmt_hours(used)} {resource}-hours used)",
                    f"budget.max_resource_hours.{resource}",
                    f"{max(hours * 2, used * 1.5):.4g}",
                )
        if self.max_wall_time is not None and use.wall_time_s >= self.max_wall_time:
            return Reached(
                "max_wall_time",
                f"the wall-time budget of {format_duration(self.max_wall_time)} was reached "
                f"({format_duration(round(use.wall_time_s))} used)",
                "budget.max_wall_time",
                format_duration(max(self.max_wall_time * 2, round(use.wall_time_s) + 60)),
            )
        return None


@dataclass(frozen=True)
class BudgetUse:
    """How much of a budget a search has used: what :meth:`Budget.reached` compares with its limits.

    Attributes:
        wall_time_s: The search's wall time so far, every run and resume of it together.
        failed_trials: Trials whose latest end is ``errored``.
        best: Per target metric, the best value any trial reported (by the target's mode).
        best_trial: Per target metric, the trial that reported ``best``.
        resource_hours: Per resource, the hours held so far, summed over trials (running ones included).
    """

    wall_time_s: float = 0.0
    failed_trials: int = 0
    best: Mapping[str, float] = field(default_factory=dict)
    best_trial: Mapping[str, str] = field(default_factory=dict)
    resource_hours: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Reached:
    """A limit that ended the search.

    Attributes:
        budget: Its key: ``max_wall_time``, ``max_failed_trials``, ``target`` or ``max_resource_hours``.
        message: One line for people: ``the wall-time budget of 2h was reached (2h used)``.
        key: The dotted spec key to raise on ``hpsearch resume --set`` (``budget.max_wall_time``).
        suggestion: A raised value for ``key`` (``""``: none to suggest, as for a target).
    """

    budget: str
    message: str
    key: str = ""
    suggestion: str = ""

    def resume_hint(self, experiment_dir: object) -> str:
        """The command that continues the search with this limit raised."""
        value = self.suggestion or "<a new value>"
        return f"hpsearch resume {experiment_dir} --set {self.key}={value}"


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
