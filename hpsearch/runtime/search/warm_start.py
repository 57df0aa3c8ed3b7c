"""Warm start at run time: the searcher's space, points and the earlier search's trials.

:func:`with_space` completes a :class:`~hpsearch.runtime.search.plugins.SearcherContext` with the trial
space, the spec's ``warm_start.points`` and the seeds read from ``warm_start.from`` by
:func:`earlier_trials`, and prints one line saying what seeds the searcher. It runs when
``hpsearch run`` builds the Tuner, never on ``hpsearch resume`` (``Tuner.restore`` brings back
the searcher as it was, seeds included), so a search is never seeded twice.

Which earlier trials seed: those that ended (finished, or stopped by the scheduler) with a
finite last value of every objective (the value Tune gave the searcher when the trial
completed), whose config fits this search space (:func:`hpsearch.spec.warm_start.misfit`).
They are never run again. The random searcher learns nothing from results: it is told of
none, and runs its ``num_samples`` trials as it would without them.

Under this spec's ``constraints``, an earlier trial whose last report breaks them (or lacks a
constrained metric) seeds with the worst value of the seeds, per objective, as HyperOpt is told
an infeasible trial (:class:`~hpsearch.runtime.search.searchers.WorstWhenInfeasible`): a seed carries
values, not the constrained metrics, so Optuna is told it as feasible, and it must not look good.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpsearch import messages
from hpsearch.analysis import load_results
from hpsearch.experiment import files
from hpsearch.experiment.layout import FINISHED, STOPPED, TUNE_PARAMS_FILE
from hpsearch.formatting import plural
from hpsearch.spec.constraints import Constraint, violation
from hpsearch.spec.space import SearchSpace, flat_config
from hpsearch.spec.warm_start import misfit

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.runtime.search.plugins import SearcherContext
    from hpsearch.spec import Spec

__all__ = ["with_space", "earlier_trials", "Seeds"]


@dataclasses.dataclass(frozen=True)
class Seeds:
    """The earlier search's trials that seed the searcher, and what was left out, and why."""

    name: str
    seeds: tuple[tuple[dict[str, Any], tuple[float, ...]], ...]
    skipped: tuple[str, ...]  # one reason per trial that ended with values but does not fit this space
    unused: int  # trials that had not ended, errored, or lack a finite value of an objective
    infeasible: int = 0  # seeds whose last report broke this spec's constraints: told with the worst values

    def line(self, searcher: str) -> str:
        """The one line ``hpsearch run`` prints about them."""
        skipped = ""
        if self.skipped:
            reasons = list(dict.fromkeys(self.skipped))
            shown = "; ".join(reasons[:3]) + ("; ..." if len(reasons) > 3 else "")
            skipped = f"; {len(self.skipped)} skipped (not in this search space: {shown})"
        unused = f"; {self.unused} not ended or without a finite value of every objective" if self.unused else ""
        if self.infeasible:
            unused += f"; {self.infeasible} broke the constraints, told with the seeds' worst value"
        n = len(self.seeds)
        if searcher == "random":
            return (
                f"warm start: {plural(n, 'trial')} of {self.name} fit, but the random searcher cannot learn "
                f"from them (they are not run again, and do not count toward num_samples){skipped}{unused}"
            )
        verb = "seeds" if n == 1 else "seed"
        return f"warm start: {plural(n, 'trial')} of {self.name} {verb} the searcher{skipped}{unused}"


def earlier_trials(
    source: Path,
    tree: SearchSpace,
    objectives: tuple[tuple[str, str], ...],
    constraints: Sequence[Constraint] = (),
) -> Seeds:
    """Read the earlier experiment folder (pure: :func:`hpsearch.load_results`) into seeds for ``tree``,
    judged by this search's ``constraints``."""
    results = load_results(source)
    history = results.history
    seeds: list[tuple[dict[str, Any], tuple[float, ...]]] = []
    broken: list[bool] = []
    skipped: list[str] = []
    unused = 0
    for row in results.trials.itertuples(index=False):
        status = row.status
        mine = history[history["trial_id"] == row.trial_id]
        values = []
        for metric, _ in objectives:
            column = mine[metric].dropna() if metric in mine else mine.iloc[0:0]
            values.append(float(column.iloc[-1]) if len(column) and _is_number(column.iloc[-1]) else math.nan)
        if status not in (FINISHED, STOPPED) or not all(math.isfinite(v) for v in values):
            unused += 1
            continue
        config = files.read_json(Path(str(row.trial_dir)) / TUNE_PARAMS_FILE) if row.trial_dir else None
        flat = flat_config(tree, config or {})
        reason = misfit(tree, flat)
        if reason is not None:
            skipped.append(reason)
            continue
        seeds.append((flat, tuple(values)))
        last = {c.metric: mine[c.metric].iloc[-1] if c.metric in mine and len(mine) else None for c in constraints}
        broken.append(bool(constraints) and violation(last, constraints) > 0)
    if any(broken):
        worst = [max(v) if mode == "min" else min(v) for v, (_, mode) in zip(zip(*(s[1] for s in seeds)), objectives)]
        seeds = [(config, tuple(worst)) if bad else (config, values) for (config, values), bad in zip(seeds, broken)]
    return Seeds(results.name, tuple(seeds), tuple(skipped), unused, infeasible=sum(broken))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) or hasattr(value, "__float__")


def with_space(spec: Spec, ctx: SearcherContext) -> SearcherContext:
    """``ctx`` with the trial space, the warm-start points and the earlier trials; prints what seeds the searcher."""
    tree = spec.trial_space()
    warm = spec.warm_start
    if not warm.enabled():
        return dataclasses.replace(ctx, space=tree)
    seeds: tuple[tuple[dict[str, Any], tuple[float, ...]], ...] = ()
    if warm.points:
        messages.say(f"warm start: {plural(len(warm.points), 'point')} run first")
    if warm.source is not None:
        found = earlier_trials(warm.source, tree, spec.objectives, spec.constraints)
        messages.say(found.line(spec.searcher.type))
        seeds = found.seeds if spec.searcher.type != "random" else ()
    return dataclasses.replace(ctx, space=tree, points=tuple(warm.points), seeds=seeds)
