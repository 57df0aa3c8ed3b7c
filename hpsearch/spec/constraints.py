"""The spec's ``constraints`` section: bounds on reported metrics that a trial's result must keep.

Each constraint names a metric the loop reports and a ``max``, a ``min`` or both::

    constraints:
      - {metric: n_params, max: 1.0e6}
      - {metric: latency_ms, max: 20}

A report is *feasible* when every constraint holds in it. How far it misses is its
*violation*: per constraint, how far the value lies past its bound (``value - max`` or
``min - value``), summed over the constraints, in the metrics' own units, as Optuna sums
its constraint values. A missing or non-numeric value, NaN or ±inf, violates by ``inf``.
The ranking (:mod:`hpsearch.experiment.ranking`) takes these violations. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field, model_validator

from hpsearch.errors import Problem
from hpsearch.spec._validation import StrictModel, field_error, join_path, show, validate_section

__all__ = ["Constraint", "parse_constraints", "violation"]


class Constraint(StrictModel):
    """A bound on one reported metric: ``max``, ``min`` or both (inclusive)."""

    metric: str = Field(min_length=1)
    max: float | None = None
    min: float | None = None

    @model_validator(mode="after")
    def _bounded(self) -> Constraint:
        if self.max is None and self.min is None:
            raise ValueError(
                f"needs a bound, max, min or both: e.g. {{metric: {self.metric}, max: 20}} keeps {self.metric} at most 20"
            )
        if self.max is not None and self.min is not None and self.min > self.max:
            raise field_error("min", f"must be at most max ({self.max:g}), got {self.min:g}: no value could hold both")
        return self

    @property
    def text(self) -> str:
        """The constraint as people read it: ``n_params <= 1e+06``, ``0.1 <= ratio <= 0.9``."""
        if self.max is not None and self.min is not None:
            return f"{self.min:g} <= {self.metric} <= {self.max:g}"
        if self.max is not None:
            return f"{self.metric} <= {self.max:g}"
        return f"{self.metric} >= {self.min:g}"

    def excess(self, value: Any) -> float:
        """How far ``value`` lies past the bound: positive when violated, zero or negative when it holds
        (Optuna's convention for a constraint value). A value that is not a finite number gives ``inf``."""
        number = _number(value)
        if number is None or not math.isfinite(number):
            return math.inf
        over = number - self.max if self.max is not None else -math.inf
        under = self.min - number if self.min is not None else -math.inf
        return max(over, under)

    def to_dict(self) -> dict[str, Any]:
        """As the spec writes it."""
        return self.model_dump(exclude_none=True)


def violation(values: Mapping[str, Any], constraints: Sequence[Constraint]) -> float:
    """The total violation of one report (``metric -> value``): 0.0 when every constraint holds."""
    return sum((max(0.0, c.excess(values.get(c.metric))) for c in constraints), 0.0)


def parse_constraints(raw: Any) -> tuple[tuple[Constraint, ...], list[Problem]]:
    """Validate ``constraints``: a list of ``{metric, max, min}``, each metric once."""
    if raw is None:
        return (), []
    if not isinstance(raw, list):
        return (), [
            Problem("constraints", f"must be a list such as [{{metric: n_params, max: 1.0e6}}], got {show(raw)}")
        ]
    out: list[Constraint] = []
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        path = join_path("constraints", i)
        if not isinstance(item, dict):
            problems.append(
                Problem(path, f"must be a mapping such as {{metric: n_params, max: 1.0e6}}, got {show(item)}")
            )
            continue
        constraint, found = validate_section(Constraint, item, path)
        problems += found
        if constraint is None:
            continue
        if constraint.metric in seen:
            problems.append(
                Problem(
                    join_path(path, "metric"),
                    f"{constraint.metric!r} is already constrained by constraints[{seen[constraint.metric]}]; "
                    "give both bounds in one item ({metric: ..., min: ..., max: ...})",
                )
            )
            continue
        seen[constraint.metric] = i
        out.append(constraint)
    return (tuple(out) if not problems else ()), problems


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, (bool, str, bytes)):
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None
