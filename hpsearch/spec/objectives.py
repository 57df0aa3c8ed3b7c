"""The spec's objectives: ``metric``/``mode`` (a name and a mode, or lists of them) as ``(metric, mode)`` pairs.

The first objective is the primary one (progress lines, budget targets, "best"); with several, the
searcher and scheduler must be able to take them (:func:`multi_objective_problems`). The one rule for
what a search's objectives are, when a record names none, and whether there are several is here
(:func:`objectives_or_primary`, :func:`is_multi_objective`), for the spec and every record of a search.
"""

from __future__ import annotations

from collections.abc import Iterable, Sized
from typing import Any, Literal

from pydantic import Field

from hpsearch.errors import Problem
from hpsearch.spec._validation import StrictModel, show, validate_section
from hpsearch.spec.plugins import POPULATION_SCHEDULERS, PluginChoice

__all__ = ["Objectives", "objectives_or_primary", "is_multi_objective", "parse_objectives", "multi_objective_problems"]

#: Every objective of a search, in the spec's order: ``(metric, mode)`` pairs.
Objectives = tuple[tuple[str, str], ...]


def objectives_or_primary(metric: str, mode: str, objectives: Iterable[tuple[str, str]] = ()) -> Objectives:
    """Every objective: ``objectives`` as given, or the one ``(metric, mode)`` when none are (a
    single-objective search, or a record written before several objectives existed)."""
    return tuple(objectives) or ((metric, mode),)


def is_multi_objective(objectives: Sized) -> bool:
    """Whether a search has several objectives (the spec's ``metric``/``mode`` given as lists)."""
    return len(objectives) > 1


class _Objective(StrictModel):
    """One objective as written: its metric and whether lower or higher is better."""

    metric: str = Field(min_length=1)
    mode: Literal["min", "max"]


def parse_objectives(metric: Any, mode: Any) -> tuple[Objectives, list[Problem]]:
    """``metric``/``mode`` -> the objectives, in order: one for a name and a mode, one per item for lists."""
    if isinstance(metric, list) != isinstance(mode, list):
        if isinstance(metric, list):
            wanted = f"a list of {len(metric)} modes, one per metric (e.g. mode: [{', '.join(['min'] * len(metric))}])"
            return (), [Problem("mode", f"must be {wanted}, got {show(mode)}")]
        return (), [Problem("mode", f"is a list, so metric must be a list of as many names, got {show(metric)}")]
    if not isinstance(metric, list):
        single, wrong = validate_section(_Objective, {"metric": metric, "mode": mode}, "")
        return ((single.metric, single.mode),) if single else (), wrong
    if not metric:
        return (), [Problem("metric", "must name at least one metric, got []")]
    if len(metric) != len(mode):
        return (), [
            Problem(
                "mode", f"has {len(mode)} mode(s) for {len(metric)} metric(s); give one mode (min or max) per metric"
            )
        ]
    out: list[tuple[str, str]] = []
    problems: list[Problem] = []
    for i, (name, direction) in enumerate(zip(metric, mode)):
        objective, found = validate_section(_Objective, {"metric": name, "mode": direction}, "")
        problems += [Problem(f"{p.path}[{i}]", p.message) for p in found]
        if objective is None:
            continue
        earlier = [j for j, (m, _) in enumerate(out) if m == objective.metric]
        if earlier:
            problems.append(
                Problem(
                    f"metric[{i}]",
                    f"{objective.metric!r} is already metric[{earlier[0]}]; each objective needs its own metric",
                )
            )
        out.append((objective.metric, objective.mode))
    return (tuple(out), problems) if not problems else ((), problems)


def multi_objective_problems(
    objectives: Objectives, searcher: PluginChoice | None, scheduler: PluginChoice | None
) -> list[Problem]:
    """The searcher and scheduler against the objectives (see the README's multi-objective rules)."""
    problems: list[Problem] = []
    multi = is_multi_objective(objectives)
    if multi and searcher is not None:
        if searcher.type == "hyperopt":
            problems.append(
                Problem(
                    "searcher.type",
                    "searcher 'hyperopt' cannot search several objectives (HyperOpt minimises one number); "
                    "use searcher optuna (sampler nsga2, nsga3, tpe, gp or random) or random",
                )
            )
        sampler = getattr(searcher.options, "sampler", None)
        if searcher.type == "optuna" and sampler == "cmaes":
            problems.append(
                Problem(
                    "searcher.sampler",
                    "Optuna's 'cmaes' sampler cannot search several objectives (CMA-ES adapts to one number); "
                    "use nsga2, nsga3, tpe, gp or random",
                )
            )
    if scheduler is None or scheduler.type == "fifo" or scheduler.type in POPULATION_SCHEDULERS or not objectives:
        return problems
    s_metric, s_mode = getattr(scheduler.options, "metric", None), getattr(scheduler.options, "mode", None)
    modes = dict(objectives)
    if not multi:
        metric, mode = objectives[0]
        if s_metric is not None and s_metric != metric:
            problems.append(
                Problem(
                    "scheduler.metric",
                    f"must be the spec's metric {metric!r} (or left out) with one objective: the scheduler stops "
                    f"trials by the number they are ranked by, got {s_metric!r}",
                )
            )
        elif s_mode is not None and s_mode != mode:
            problems.append(
                Problem("scheduler.mode", f"must be the spec's mode {mode!r} (or left out), got {s_mode!r}")
            )
        return problems
    example = f"e.g. scheduler: {{type: {scheduler.type}, metric: {objectives[0][0]}, mode: {objectives[0][1]}}}"
    if s_metric is None:
        problems.append(
            Problem(
                "scheduler.metric",
                f"is required with several objectives: a scheduler compares trials on one number, so name "
                f"the metric it stops trials by ({example})",
            )
        )
    elif s_mode is None and s_metric not in modes:
        problems.append(
            Problem(
                "scheduler.mode", f"is required: {s_metric!r} is not one of the objectives, so say which way is better"
            )
        )
    elif s_mode is not None and s_metric in modes and s_mode != modes[s_metric]:
        problems.append(
            Problem(
                "scheduler.mode",
                f"must be {modes[s_metric]!r}, the mode of objective {s_metric!r} (or left out), got {s_mode!r}",
            )
        )
    return problems
