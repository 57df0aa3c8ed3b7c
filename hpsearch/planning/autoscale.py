"""A spec planned on an autoscaling cluster: at its minimum size, at its maximum, and per added node.

A cluster described with node groups (``1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}``,
:mod:`hpsearch.planning.cluster_shape`) has as many plans as sizes. Three answer what a user
sizing it asks: the plan at the minimum size (what surely runs), the plan at the maximum size
(what runs once the autoscaler has added every node it may), and, per group the autoscaler
grows, the trials at once with 1, 2, ... extra nodes of it (the other groups at their minimum).

A spec whose trial fits at the maximum size but not at the minimum is not refused: its trials
wait for the autoscaler to start a node. One that does not fit even at the maximum is refused
as on a fixed cluster (:class:`~hpsearch.errors.PlanError`). A ``max_concurrent_trials`` above
what fits is refused only at the maximum size; below it, it is lowered to what fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hpsearch.errors import PlanError
from hpsearch.formatting import plural
from hpsearch.planning.cluster_shape import NodeGroup, fmt_count, nodes_at
from hpsearch.planning.for_spec import plan_for
from hpsearch.planning.planner import Node, Plan
from hpsearch.planning.resources import fmt_resources
from hpsearch.spec import Spec

__all__ = [
    "GroupGrowth",
    "AutoscalingPlan",
    "plan_autoscaling",
    "MAX_STEPS",
    "group_counts",
    "addable_nodes",
    "waiting_for_workers",
    "RunPlan",
    "plan_run",
]

#: Extra nodes of one group planned one by one; beyond it only the maximum is planned (plans cost
#: milliseconds each, and a line of more figures than this is not read).
MAX_STEPS = 32


@dataclass(frozen=True)
class GroupGrowth:
    """One autoscaling group: the trials at once with 0, 1, 2, ... of its extra nodes started.

    ``trials[k]`` is the trials at once with ``min_count + extra[k]`` nodes of the group, every other
    group at its minimum; ``extra`` is ``0, 1, ..., max_count - min_count`` (with more than
    :data:`MAX_STEPS` extra nodes: the first ``MAX_STEPS`` and the last).
    """

    index: int
    group: NodeGroup
    extra: tuple[int, ...]
    trials: tuple[int, ...]

    @property
    def growing(self) -> int:
        """How many of the planned steps add trials: the index of the first step at the final figure."""
        return self.trials.index(self.trials[-1])

    def step(self) -> int | None:
        """The trials each extra node adds while they add any, when every one adds the same (else ``None``)."""
        last = self.growing
        if last == 0:
            return None
        step = (self.trials[last] - self.trials[0]) // self.extra[last]
        pairs = zip(self.extra[: last + 1], self.trials[: last + 1], strict=True)
        return step if all(t - self.trials[0] == step * x for x, t in pairs) else None

    def describe(self) -> str:
        """One line: ``each extra {CPU: 8, GPU: 8} node (0..4): +4 trials at once, up to 16 with all 4``."""
        kind = " spot" if self.group.spot else ""
        head = f"each extra {fmt_resources(self.group.resources)}{kind} node ({fmt_count(self.group)})"
        last = self.growing
        if last == 0:
            return f"{head}: adds no trials at once"
        span = self.group.max_count - self.group.min_count
        added = self.extra[last]
        tail = "" if added == span else f"; more than {added} add none"
        step = self.step()
        if step is not None:
            upto = f"all {added}" if added == span else str(added)
            return f"{head}: +{step} trial(s) at once, up to {self.trials[last]} with {upto}{tail}"
        pairs = ", ".join(
            f"+{x}: {t}" for x, t in zip(self.extra[1 : last + 1], self.trials[1 : last + 1], strict=True)
        )
        return f"{head}: {pairs} trials at once (from {self.trials[0]}){tail}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": self.index,
            "resources": dict(self.group.resources),
            "min_count": self.group.min_count,
            "max_count": self.group.max_count,
            "spot": self.group.spot,
            "extra_nodes": list(self.extra),
            "trials_at_once": list(self.trials),
        }


@dataclass(frozen=True)
class AutoscalingPlan:
    """A spec on node groups: the plan at the minimum size (``None`` when no trial fits there, with
    ``min_reason`` saying why), at the maximum size, and what each extra node adds."""

    groups: tuple[NodeGroup, ...]
    at_min: Plan | None
    min_reason: str | None
    at_max: Plan
    per_node: tuple[GroupGrowth, ...]

    @property
    def min_nodes(self) -> int:
        return sum(g.min_count for g in self.groups)

    @property
    def max_nodes(self) -> int:
        return sum(g.max_count for g in self.groups)

    @property
    def waits_for_autoscaler(self) -> bool:
        """No trial fits at the minimum size: the first waits for the autoscaler to start a node."""
        return self.at_min is None

    def as_dict(self) -> dict[str, Any]:
        at_min: dict[str, Any] = (
            self.at_min.as_dict()
            if self.at_min is not None
            else {"max_concurrent_trials": 0, "waits_for_autoscaler": True, "reason": self.min_reason}
        )
        return {
            "groups": [
                {
                    "resources": dict(g.resources),
                    "min_count": g.min_count,
                    "max_count": g.max_count,
                    "is_head": g.is_head,
                }
                for g in self.groups
            ],
            "min_nodes": self.min_nodes,
            "max_nodes": self.max_nodes,
            "min": at_min,
            "max": self.at_max.as_dict(),
            "per_node": [g.as_dict() for g in self.per_node],
        }


def _trials_at(spec: Spec, nodes: Sequence[Any]) -> int:
    try:
        return plan_for(spec, nodes, up_to=True).max_concurrent_trials if nodes else 0
    except PlanError:
        return 0


def _steps(span: int) -> list[int]:
    if span <= MAX_STEPS:
        return list(range(span + 1))
    return [*range(MAX_STEPS + 1), span]


def plan_autoscaling(spec: Spec, groups: Sequence[NodeGroup]) -> AutoscalingPlan:
    """Plan ``spec`` on ``groups`` at their minimum and maximum sizes, and per extra node of each autoscaling group.

    Raises:
        PlanError: No trial fits even at the maximum size (the reason as on a fixed cluster), or
            ``max_concurrent_trials`` is more than fit at the maximum size.

    Example:
        >>> from hpsearch.planning.cluster_shape import parse_node_groups
        >>> from hpsearch.spec import load_spec
        >>> spec = load_spec("search_spaces/digits_quick.yaml")
        >>> plan = plan_autoscaling(spec, parse_node_groups("1x{CPU: 2} + 0..2x{CPU: 2}"))
        >>> plan.at_min.max_concurrent_trials, plan.at_max.max_concurrent_trials
        (2, 5)
    """
    groups = tuple(groups)
    try:
        at_max = plan_for(spec, nodes_at(groups, "max"))  # refuses what never fits, as on a fixed cluster
    except PlanError as err:
        size = sum(g.max_count for g in groups)
        raise PlanError(f"even at the cluster's maximum size ({size} nodes): {err}") from None
    at_min: Plan | None
    try:
        at_min = plan_for(spec, nodes_at(groups, "min"), up_to=True)
        reason = None
    except PlanError as err:
        at_min, reason = None, str(err)
    lowest = [g.min_count for g in groups]
    growth = []
    for i, group in enumerate(groups):
        if not group.autoscaling:
            continue
        extra = _steps(group.max_count - group.min_count)
        trials = []
        for k in extra:
            counts = list(lowest)
            counts[i] += k
            trials.append(_trials_at(spec, nodes_at(groups, counts)))
        growth.append(GroupGrowth(i, group, tuple(extra), tuple(trials)))
    return AutoscalingPlan(groups, at_min, reason, at_max, tuple(growth))


# ----------------------------------------------------------------------------- while a search runs

#: Resources a node reports that a described shape leaves out without meaning another shape.
_SHAPE_IGNORES = frozenset({"memory", "object_store_memory"})


#: Resources Ray adds to a node by itself, which a described shape need not name: ``node:<ip>``, and
#: ``accelerator_type:<TYPE>`` on a GPU node (``ray/_private/resource_and_label_spec.py``, Ray 2.60).
_AUTOMATIC_PREFIXES = ("node:", "accelerator_type:")


def _same_shape(group: NodeGroup, node: Node) -> bool:
    """Whether ``node`` (as Ray reports it) is a node of ``group``: the same amount of every resource the
    group names, memory aside (Ray reports what the machine has, a shape often leaves it out), and no other
    resource than those Ray adds by itself."""
    automatic = {k for k in node.resources if k.startswith(_AUTOMATIC_PREFIXES) and k not in group.resources}
    keys = (set(group.resources) | set(node.resources)) - _SHAPE_IGNORES - automatic
    return all(round(group.resources.get(k, 0.0), 4) == round(float(node.resources.get(k, 0.0)), 4) for k in keys)


def group_counts(groups: Sequence[NodeGroup], nodes: Sequence[Node]) -> list[int]:
    """How many of ``nodes`` (the cluster now) belong to each group: the head to the head group, every
    other node to the first group of its shape with room left (else the first of its shape; a node of
    no described shape to none)."""
    counts = [0] * len(groups)
    for node in sorted(nodes, key=lambda n: not n.is_head):
        if node.is_head and groups:
            counts[0] += 1
            continue
        fits = [i for i, group in enumerate(groups) if _same_shape(group, node)]
        roomy = [i for i in fits if counts[i] < groups[i].max_count]
        if fits:
            counts[(roomy or fits)[0]] += 1
    return counts


def addable_nodes(groups: Sequence[NodeGroup], nodes: Sequence[Node]) -> list[Node]:
    """The nodes the autoscaler may still add to ``nodes``: each group's ``max_count`` less those it has."""
    extra = []
    for i, (group, count) in enumerate(zip(groups, group_counts(groups, nodes), strict=True)):
        extra += [
            Node(dict(group.resources), node_id=f"addable-{i}-{k}") for k in range(max(0, group.max_count - count))
        ]
    return extra


def _fits(spec: Spec, nodes: Sequence[Node]) -> int:
    try:
        return plan_for(spec, nodes, up_to=True).capacity if nodes else 0
    except PlanError:
        return 0


def waiting_for_workers(spec: Spec, groups: Sequence[NodeGroup], nodes: Sequence[Node], waiting: int) -> str:
    """The status line's reason for ``waiting`` trials whose drivers run and whose worker groups are not placed.

    ``waiting for a node to start`` when the nodes the autoscaler may still add (:func:`addable_nodes`)
    fit more trials than ``nodes`` (the cluster now) do; ``cannot be placed`` when they do not (the
    cluster is at its maximum size, or the nodes it may add cannot hold the trial's workers). Pure:
    the caller reads the cluster and the waiting worker groups from Ray.
    """
    timeout_s = spec.failure.start_timeout_s(autoscaling=True)
    extra = addable_nodes(groups, nodes)
    now = _fits(spec, nodes)
    grown = _fits(spec, [*nodes, *extra])
    up = f"{plural(len(nodes), 'node')} up, at most {sum(g.max_count for g in groups)}"
    who = plural(waiting, "trial")
    if extra and grown > now:
        return (
            f"{who} waiting for a node to start: their workers fit on nodes the autoscaler can add ({up}; "
            f"{now} trial(s) at once fit now, {grown} with every node added); each waits up to {timeout_s:g} s "
            "(failure.node_start_timeout_s)"
        )
    why = "the cluster is at its maximum size" if not extra else "the nodes the autoscaler can add do not hold them"
    return (
        f"{who} cannot be placed: {why} ({up}; {now} trial(s) at once fit now); each errors after "
        f"{spec.failure.controller_retries + 1} waits of {timeout_s:g} s (failure.node_start_timeout_s, "
        "failure.controller_retries)"
    )


@dataclass(frozen=True)
class RunPlan:
    """A search's plan on a live autoscaling cluster: what fits on the nodes up now, and the plan for them
    plus every node the autoscaler may still add, whose concurrency Tune is given."""

    limit: Plan
    now: Plan | None
    now_reason: str | None
    nodes_now: int
    max_nodes: int

    @property
    def trials_now(self) -> int:
        return self.now.max_concurrent_trials if self.now is not None else 0

    def as_dict(self, cluster: str) -> dict[str, Any]:
        """The ``autoscaling`` entry of the experiment's plan file (``cluster`` as ``--cluster`` gave it)."""
        now = (
            self.now.as_dict()
            if self.now is not None
            else {"max_concurrent_trials": 0, "waits_for_autoscaler": True, "reason": self.now_reason}
        )
        return {"cluster": cluster, "nodes_at_start": self.nodes_now, "max_nodes": self.max_nodes, "at_start": now}


def plan_run(spec: Spec, groups: Sequence[NodeGroup], nodes: Sequence[Node]) -> RunPlan:
    """Plan a search on a live autoscaling cluster: ``nodes`` (up now) and the ``groups`` it may grow to.

    Tune is given the concurrency of ``nodes`` plus every node the autoscaler may still add
    (:func:`addable_nodes`): trials beyond what fits now start their drivers, and their worker groups
    wait for a node, which Ray's autoscaler starts for them (a pending placement group is the demand
    it scales up for). The plan for the nodes up now says what runs at once meanwhile.

    Raises:
        PlanError: No trial fits even with every node the autoscaler may add (the reason as on a fixed
            cluster), or ``max_concurrent_trials`` is more than fit then.
    """
    grown = [*nodes, *addable_nodes(groups, nodes)]
    try:
        limit = plan_for(spec, grown)
    except PlanError as err:
        raise PlanError(f"even with every node the autoscaler can add ({plural(len(grown), 'node')}): {err}") from None
    try:
        now: Plan | None = plan_for(spec, nodes, up_to=True)
        reason = None
    except PlanError as err:
        now, reason = None, str(err)
    return RunPlan(limit, now, reason, len(nodes), len(grown))
