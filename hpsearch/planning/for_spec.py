"""A spec's trials as the planner counts them: the bridge from :mod:`hpsearch.spec` to the planner.

With searched scaling (``scaling.num_workers: {type: choice, values: [1, 2, 4]}``) trials differ in
size. The plan is made for the largest of them: every searched value at its largest. The searched
values form a cartesian product and a trial's demand grows with each of them (more workers, more of
a resource per worker; a larger GPU fraction packs fewer workers to a GPU), so that combination is a
trial the search can really run, and every other trial fits in the room it is given: planning each
combination apart would find no more trials at once. Smaller trials leave some of that room unused,
and the plan says so. A searched value that can never be placed, even with every other searched value
at its smallest, refuses the spec (:class:`~hpsearch.errors.PlanError`, exit 2), naming the value:
its trials would wait for resources forever.

An elastic trial (``scaling.num_workers: {min: 2, max: 8}``) is planned at its minimum: that is what
it needs to start, and the trials at once are those whose minimums fit. The plan then says what the
maximum takes (a trial's resources at it, how many such trials fit at once) and, counted as Ray
2.58-2.60 shares the room, how many workers each of the trials at once starts with
(:func:`~hpsearch.planning.planner.elastic_starts`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from hpsearch.errors import PlanError
from hpsearch.planning.planner import Node, Plan, TrialDemand, elastic_starts, plan_trials
from hpsearch.planning.resources import GB, fmt_resources, positive
from hpsearch.spec import Scaling, Spec
from hpsearch.spec.space import iter_params

__all__ = ["plan_for", "demand_for", "reserve_for", "searched_scaling"]


def plan_for(spec: Spec, nodes: Sequence[Node], *, up_to: bool = False) -> Plan:
    """Plan the spec's trials on a cluster given as plain data, ``data.cpus`` kept free on the head node.

    With searched scaling: planned for the largest trial (:func:`demand_for`), after checking that
    every searched value can be placed (a :class:`~hpsearch.errors.PlanError` naming those that cannot).

    ``up_to``: a ``resources.max_concurrent_trials`` above what fits is lowered to what fits instead of
    refused (a cluster at less than its maximum size: the autoscaler may still add the room).
    """
    reserve = reserve_for(spec)
    searched = searched_scaling(spec)
    if searched:
        _refuse_unplaceable(spec, nodes, reserve)
    requested = spec.resources.max_concurrent_trials
    if up_to and requested != "auto":
        fits = plan_trials(nodes, demand_for(spec), reserve=reserve).capacity
        requested = min(requested, fits)
    plan = plan_trials(nodes, demand_for(spec), requested=requested, reserve=reserve)
    if spec.scaling.elastic is not None:
        plan = replace(plan, elastic=_elastic(spec, plan, nodes, reserve))
    return replace(plan, searched=searched) if searched else plan


def _elastic(spec: Spec, plan: Plan, nodes: Sequence[Node], reserve: Mapping[str, float]) -> dict[str, Any]:
    """What an elastic trial's maximum takes, and what each trial at once starts with as Ray shares the room."""
    elastic = spec.scaling.elastic
    assert elastic is not None
    at_max = replace(plan.demand, num_workers=elastic.max)
    out: dict[str, Any] = {
        "min_workers": elastic.min,
        "max_workers": elastic.max,
        "resize_interval_s": spec.scaling.resize_interval_s,
        "per_trial_at_max": at_max.total(),
    }
    try:
        out["trials_at_once_at_max"] = plan_trials(nodes, at_max, reserve=reserve).capacity
    except PlanError as err:
        out["trials_at_once_at_max"] = 0
        out["at_max_reason"] = str(err)
    starts = elastic_starts(
        nodes,
        plan.demand,
        trials=plan.max_concurrent_trials,
        minimum=elastic.min,
        maximum=elastic.max,
        reserve=reserve,
    )
    out["start_workers"] = starts
    if 0 in starts:  # the most trials at once that all start: fewer drivers leave more room
        out["all_start_at_once"] = max(
            (
                n
                for n in range(1, plan.max_concurrent_trials + 1)
                if 0
                not in elastic_starts(
                    nodes, plan.demand, trials=n, minimum=elastic.min, maximum=elastic.max, reserve=reserve
                )
            ),
            default=1,
        )
    return out


def reserve_for(spec: Spec) -> dict[str, float]:
    """What the planner keeps free for the spec's Ray Data tasks: ``{CPU: data.cpus}`` (nothing without datasets)."""
    cpus = spec.data.reserved_cpus(bool(spec.datasets))
    return {"CPU": cpus} if cpus > 0 else {}


def searched_scaling(spec: Spec) -> dict[str, list[Any]]:
    """The searched scaling values by YAML path (``scaling.num_workers`` -> ``[1, 2, 4]``); ``{}`` if none."""
    return {f"scaling.{name}": list(param.values) for name, param in iter_params(spec.scaling.searched())}  # type: ignore[union-attr]  # choice or grid


def demand_for(spec: Spec, config: Mapping[str, Any] | None = None) -> TrialDemand:
    """One trial of the spec, as the planner counts it.

    ``config`` (a trial's config): that trial's own scaling. Without it: the largest trial the
    searched scaling can give (the spec's constant scaling when nothing is searched).
    """
    scaling = spec.scaling.for_trial(config) if config is not None else spec.scaling.largest()
    return _demand(spec, scaling)


def _demand(spec: Spec, scaling: Scaling) -> TrialDemand:
    return TrialDemand(
        driver={"CPU": spec.resources.driver_cpus},
        worker=scaling.worker_bundle(),
        num_workers=scaling.planned_workers,
        strategy=scaling.placement_strategy,
        driver_node=spec.resources.driver_node,
        driver_memory=spec.resources.driver_memory_gb * GB,
        worker_memory=spec.resources.worker_memory_gb * GB,
    )


def _never_placed(spec: Spec, scaling: Scaling, nodes: Sequence[Node], reserve: Mapping[str, float]) -> str | None:
    """Why a trial of ``scaling`` can never be placed on ``nodes``, or ``None`` when one fits."""
    try:
        plan_trials(nodes, _demand(spec, scaling), reserve=reserve)
    except PlanError as err:
        return str(err)
    return None


def _trial(scaling: Scaling) -> str:
    return f"{scaling.planned_workers} workers x {fmt_resources(positive(scaling.worker_bundle()))}"


def _refuse_unplaceable(spec: Spec, nodes: Sequence[Node], reserve: Mapping[str, float]) -> None:
    """Raise :class:`PlanError` naming each searched scaling value that can never be placed.

    A value is tried with every other searched value at its smallest: if that trial cannot be
    placed, no trial with the value can. When every value passes, the largest combination is
    tried too (each value fits alone, but not all the largest together).
    """
    scaling = spec.scaling
    searched = {name: list(p.values) for name, p in iter_params(scaling.searched())}  # type: ignore[union-attr]  # choice or grid
    smallest = {name: min(values) for name, values in searched.items()}
    problems = []
    for name, values in searched.items():
        for value in dict.fromkeys(values):
            trial = scaling.with_values({**smallest, name: value})
            why = _never_placed(spec, trial, nodes, reserve)
            if why is not None:
                others = " (the other searched values at their smallest)" if len(searched) > 1 else ""
                problems.append(
                    f"scaling.{name}: {value!r} can never be placed on this cluster: a trial of {_trial(trial)}"
                    f"{others}: {why}; remove {value!r} from scaling.{name}.values"
                )
    if not problems:
        largest = scaling.largest()
        why = _never_placed(spec, largest, nodes, reserve)
        if why is not None:
            at_most = ", ".join(f"scaling.{name}: {max(v)!r}" for name, v in searched.items())
            problems.append(
                f"the largest trial of the searched scaling ({at_most}), {_trial(largest)}, can never be placed on "
                f"this cluster: {why}; remove the largest values, or search fewer combinations"
            )
    if problems:
        if len(problems) == 1:
            raise PlanError(problems[0])
        raise PlanError("some searched scaling values can never be placed:\n  - " + "\n  - ".join(problems))
