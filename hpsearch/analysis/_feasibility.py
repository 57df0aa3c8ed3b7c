"""Constraints on a search read from its folder: the spec's bounds and each report's violation.

The rule (what is feasible, how violations add up) is :mod:`hpsearch.spec.constraints`'s; the
ranking that uses it is :mod:`hpsearch.experiment.ranking`'s. This module reads the violations out
of :attr:`Results.history` for both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hpsearch.spec.constraints import Constraint, parse_constraints, violation

__all__ = ["constraints_of", "history_violations", "violations_by_trial"]


def constraints_of(spec: Mapping[str, Any] | None) -> tuple[Constraint, ...]:
    """The ``constraints`` of a folder's spec (written by hpsearch, so valid; ``()``: none or unreadable)."""
    found, problems = parse_constraints((spec or {}).get("constraints"))
    return () if problems else found


def history_violations(history: pd.DataFrame, constraints: Sequence[Constraint]) -> list[float]:
    """Each row's total violation of ``constraints``; a constrained metric the row lacks violates by ``inf``."""
    columns = {
        c.metric: history[c.metric].tolist() if c.metric in history else [None] * len(history) for c in constraints
    }
    return [violation({m: values[i] for m, values in columns.items()}, constraints) for i in range(len(history))]


def violations_by_trial(
    history: pd.DataFrame, trial_ids: Sequence[str], constraints: Sequence[Constraint]
) -> dict[str, list[float]] | None:
    """Trial id -> each of its reports' violation, in the history's order; ``None`` without constraints."""
    if not constraints:
        return None
    out: dict[str, list[float]] = {t: [] for t in trial_ids}
    for trial_id, over in zip(history["trial_id"].tolist(), history_violations(history, constraints)):
        out.setdefault(trial_id, []).append(over)
    return out
