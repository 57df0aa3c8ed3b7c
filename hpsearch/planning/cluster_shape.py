"""Describe a cluster without having one: ``--cluster '1x{CPU: 16} + 0..4x{CPU: 8, GPU: 3}'``.

So a user can size a cluster before renting it. Either an inline form of counted
node shapes joined by ``+``, or a YAML file with a list of nodes (each a mapping of
resources, optionally with a count). ``memory`` is in GiB here (Ray reports bytes;
the planner gets bytes).

Each term is a :class:`NodeGroup`: nodes of one shape, with a count that is fixed
(``3x{...}``, ``{...}`` is one) or a range the cluster's autoscaler moves within
(``0..4x{...}``: at least 0, at most 4). The first term is the head group: its first
node is the head and its minimum is at least 1; a head group of ``1..3x{...}`` has
the head plus up to two workers of the same shape.

In a YAML file a node entry takes ``count: 3``, ``count: "0..4"`` (quoted: ``0..4``
is a string to YAML either way) or ``min_count: 0`` with ``max_count: 4`` (both):

.. code-block:: yaml

    nodes:
      - {CPU: 8, memory: 32}
      - {CPU: 8, GPU: 8, min_count: 0, max_count: 4}

:func:`parse_node_groups` gives the groups; :func:`nodes_at` expands them to the
planner's :class:`~hpsearch.planning.planner.Node` list at the minimum size, the
maximum size or any counts in between; :func:`parse_cluster` is the nodes at the
minimum size (what an autoscaling cluster surely has).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from hpsearch.errors import Problem, SpecError
from hpsearch.planning.planner import Node
from hpsearch.planning.resources import GB, MEMORY, fmt_resources
from hpsearch.spec._validation import show
from hpsearch.spec._yaml import parse_scalar, read_yaml

__all__ = ["NodeGroup", "parse_node_groups", "parse_cluster", "nodes_at", "fmt_count", "cluster_text"]

_TERM = re.compile(r"^\s*(?:(\S.*?)\s*[x×*]\s*)?(\{.*\})\s*$", re.S)
_COUNT = re.compile(r"^\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?$")
_ALLOWED = "a whole number >= 1, or min..max with 0 <= min <= max and max >= 1"


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one shape: their resources per node and how many there are (a range when autoscaled).

    ``resources`` is per node, ``memory`` in bytes (as :class:`Node`), keys as Ray names them
    (``CPU``, ``GPU``, ``memory``, custom ones). ``min_count >= 0`` (the head group's >= 1) and
    ``max_count >= min_count``. The first group is the head group (``is_head``); its first node
    is the head, any others are workers of the same shape.
    """

    resources: dict[str, float]
    min_count: int
    max_count: int
    is_head: bool

    @property
    def autoscaling(self) -> bool:
        """Whether the autoscaler may add nodes to this group (``max_count > min_count``)."""
        return self.max_count > self.min_count


class _Counted(Protocol):
    @property
    def min_count(self) -> int: ...
    @property
    def max_count(self) -> int: ...


def fmt_count(group: _Counted) -> str:
    """A group's count as ``--cluster`` writes it: ``3`` or ``0..4``."""
    return f"{group.min_count}..{group.max_count}" if group.max_count > group.min_count else str(group.min_count)


def cluster_text(groups: Sequence[NodeGroup], *, exact: bool = True) -> str:
    """The groups as ``--cluster`` text: the one writer of it, ``1x{CPU: 8, memory: 32} + 0..4x{CPU: 8, GPU: 8}``.

    ``exact`` (the default): what :func:`parse_node_groups` reads back to the same groups, ``memory``
    a number of GiB (``hpsearch plan --format json``'s ``cluster``, the RayJob's ``run --cluster``).
    Otherwise for people, ``memory: 32 GiB`` (the title of ``hpsearch plan``).

    Example:
        >>> cluster_text(parse_node_groups("1x{memory: 32, CPU: 8} + 0..2x{CPU: 4, memory: 16}"))
        '1x{CPU: 8, memory: 32} + 0..2x{CPU: 4, memory: 16}'
    """
    return " + ".join(f"{fmt_count(g)}x{fmt_resources(g.resources, exact=exact)}" for g in groups)


def parse_node_groups(text: str) -> list[NodeGroup]:
    """Node groups from an inline description or a YAML file path; the first is the head group.

    Raises:
        SpecError: Every problem at once, each with its place (``--cluster term 2``, or
            ``nodes[1].count`` in a file), the bad value and what is allowed.

    Example:
        >>> [(g.resources, g.min_count, g.max_count) for g in parse_node_groups("1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}")]
        [({'CPU': 8.0}, 1, 1), ({'CPU': 8.0, 'GPU': 8.0}, 0, 4)]
    """
    path = Path(text).expanduser()
    if "{" not in text:
        if path.is_file():
            return _from_file(path)
        raise SpecError(
            [Problem("--cluster", f"no such file, and not a description like 3x{{CPU: 8, GPU: 1}}: {text!r}")]
        )
    shapes: list[tuple[tuple[int, int] | None, Any, str]] = []
    problems: list[Problem] = []
    for i, term in enumerate(_split_terms(text)):
        where = f"--cluster term {i + 1}"
        m = _TERM.match(term)
        if not m:
            problems.append(
                Problem(where, f"must look like 3x{{CPU: 8, GPU: 1}} or 0..4x{{CPU: 8}}, got {term.strip()!r}")
            )
            continue
        counts = _count(m.group(1) or "1", where, i == 0, problems)
        try:
            value = parse_scalar(m.group(2))
        except Exception as err:  # noqa: BLE001 - YAML's message is the useful part
            problems.append(Problem(where, f"not a YAML mapping: {err}"))
            continue
        shapes.append((counts, value, where))
    return _groups(shapes, problems)


def parse_cluster(text: str) -> list[Node]:
    """Nodes from an inline description or a YAML file path, at each group's minimum size.

    The minimum is what an autoscaling cluster surely has; :func:`parse_node_groups` and
    :func:`nodes_at` give the groups and any other size.

    Raises:
        SpecError: With ``--cluster`` as the path and what is wrong.

    Example:
        >>> [n.resources for n in parse_cluster("1x{CPU: 16} + 2x{CPU: 8, GPU: 3} + 0..2x{GPU: 8}")]
        [{'CPU': 16.0}, {'CPU': 8.0, 'GPU': 3.0}, {'CPU': 8.0, 'GPU': 3.0}]
    """
    return nodes_at(parse_node_groups(text), "min")


def nodes_at(groups: Sequence[NodeGroup], size: Literal["min", "max"] | Sequence[int] = "min") -> list[Node]:
    """The groups' nodes at their minimum or maximum size, or at one count per group.

    The head group's first node is the head (``node_id="head"``); the others are
    ``node1``, ``node2``, ... in group order.

    Raises:
        ValueError: ``size`` gives a count per group that is outside a group's range, or the
            wrong number of counts.

    Example:
        >>> groups = parse_node_groups("1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}")
        >>> [len(nodes_at(groups, s)) for s in ("min", "max", [1, 2])]
        [1, 5, 3]
    """
    if size == "min":
        counts = [g.min_count for g in groups]
    elif size == "max":
        counts = [g.max_count for g in groups]
    else:
        counts = list(size)
        if len(counts) != len(groups):
            raise ValueError(f"{len(counts)} counts for {len(groups)} node groups")
        for g, c in zip(groups, counts, strict=True):
            if not g.min_count <= c <= g.max_count:
                raise ValueError(f"{c} nodes of {g.resources} is outside {fmt_count(g)}")
    nodes: list[Node] = []
    for group, count in zip(groups, counts, strict=True):
        for _ in range(count):
            i = len(nodes)
            head = group.is_head and i == 0
            nodes.append(Node(dict(group.resources), node_id="head" if head else f"node{i}", is_head=head))
    return nodes


def _count(value: str | int, where: str, head: bool, problems: list[Problem]) -> tuple[int, int] | None:
    """``3`` -> (3, 3), ``0..4`` -> (0, 4); a problem (and None) for anything else."""
    m = _COUNT.match(str(value))
    if m:
        low = int(m.group(1))
        high = int(m.group(2)) if m.group(2) is not None else low
        if low <= high and high >= 1 and (low >= 1 or not head):
            return low, high
    _bad_count(value.strip() if isinstance(value, str) else value, where, head, problems)
    return None


def _bad_count(value: Any, where: str, head: bool, problems: list[Problem]) -> None:
    shown = show(value)
    if head and (m := _COUNT.match(str(value))) and int(m.group(1)) == 0:
        problems.append(
            Problem(where, f"the head group (the first) needs at least 1 node: its min must be >= 1, got {shown}")
        )
    else:
        problems.append(Problem(where, f"count must be {_ALLOWED}, got {shown}"))


def _split_terms(text: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "+" and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    terms.append(current)
    return terms


def _from_file(path: Path) -> list[NodeGroup]:
    raw = read_yaml(path)
    if isinstance(raw, Mapping) and "nodes" in raw:
        raw = raw["nodes"]
    if not isinstance(raw, list):
        raise SpecError([Problem("nodes", f"must be a list of nodes, got {show(raw)}")], source=str(path))
    shapes: list[tuple[tuple[int, int] | None, Any, str]] = []
    problems: list[Problem] = []
    for i, item in enumerate(raw):
        where = f"nodes[{i}]"
        if not isinstance(item, Mapping):
            problems.append(Problem(where, f"must be a mapping of resources, got {show(item)}"))
            continue
        item = dict(item)
        shapes.append((_file_count(item, where, i == 0, problems), item, where))
    try:
        return _groups(shapes, problems)
    except SpecError as err:
        raise SpecError(err.problems, source=str(path)) from None


def _file_count(item: dict[str, Any], where: str, head: bool, problems: list[Problem]) -> tuple[int, int] | None:
    """A file entry's ``count`` (a number or "min..max") or ``min_count`` + ``max_count``, taken out of ``item``."""
    has_range = "min_count" in item or "max_count" in item
    if "count" in item and has_range:
        item.pop("min_count", None)
        item.pop("max_count", None)
        problems.append(Problem(f"{where}.count", "give either count or min_count and max_count, not both"))
        item.pop("count")
        return None
    if has_range:
        low, high = item.pop("min_count", None), item.pop("max_count", None)
        if low is None or high is None:
            missing = "min_count" if low is None else "max_count"
            problems.append(Problem(f"{where}.{missing}", "is needed with the other one (or use count)"))
            return None
        if any(isinstance(x, bool) or not isinstance(x, int) for x in (low, high)):
            problems.append(
                Problem(where, f"min_count and max_count must be whole numbers, got {show(low)} and {show(high)}")
            )
            return None
        return _count(f"{low}..{high}", f"{where}.min_count/max_count", head, problems)
    count = item.pop("count", 1)
    if isinstance(count, bool) or not isinstance(count, (int, str)):
        _bad_count(count, f"{where}.count", head, problems)
        return None
    return _count(count, f"{where}.count", head, problems)


def _groups(shapes: list[tuple[tuple[int, int] | None, Any, str]], problems: list[Problem]) -> list[NodeGroup]:
    groups: list[NodeGroup] = []
    for counts, value, where in shapes:
        if not isinstance(value, Mapping) or not value:
            problems.append(Problem(where, f"must be a non-empty mapping of resources, got {show(value)}"))
            continue
        resources = {}
        for key, amount in value.items():
            if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
                problems.append(Problem(f"{where}.{key}", f"must be a number >= 0, got {show(amount)}"))
                continue
            resources[str(key)] = float(amount) * (GB if key == MEMORY else 1)
        if counts is not None:
            groups.append(NodeGroup(resources, counts[0], counts[1], is_head=not groups))
    if problems:
        raise SpecError(problems)
    if not groups:
        raise SpecError([Problem("--cluster", "describes no nodes")])
    return groups
