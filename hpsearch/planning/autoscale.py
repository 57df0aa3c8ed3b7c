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
from hpsearch.planning.cluster_shape import NodeGroup, fmt_count, nodes_at
from hpsearch.planning.for_spec import plan_for
from hpsearch.planning.planner import Plan, fmt_resources
from hpsearch.spec import Spec

__all__ = ["GroupGrowth", "AutoscalingPlan", "plan_autoscaling", "MAX_STEPS"]

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
        head = f"each extra {fmt_resources(self.group.resources)} node ({fmt_count(self.group)})"
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
