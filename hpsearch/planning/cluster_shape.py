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

A group of spot (preemptible) nodes is marked by a bare ``spot`` among its resources,
``0..4x{CPU: 8, GPU: 1, spot}`` (``spot: true`` reads the same; ``spot: false`` is an on-demand
group, so ``spot`` cannot name a custom resource). The head group cannot be spot: the search
process and the trial drivers run on the head. Each node of a spot group carries Ray's own
market-type label (:data:`SPOT_LABEL` ``: spot``), as a running cluster's spot nodes do when they
were started with ``RAY_NODE_MARKET_TYPE=spot``, so a plan tells the trials on spot nodes apart
(:func:`is_spot`).

In a YAML file a node entry takes ``count: 3``, ``count: "0..4"`` (quoted: ``0..4``
is a string to YAML either way) or ``min_count: 0`` with ``max_count: 4`` (both):

.. code-block:: yaml

    nodes:
      - {CPU: 8, memory: 32}
      - {CPU: 8, GPU: 8, min_count: 0, max_count: 4, spot: true}

:func:`parse_node_groups` gives the groups; :func:`nodes_at` expands them to the
planner's :class:`~hpsearch.planning.planner.Node` list at the minimum size, the
maximum size or any counts in between; :func:`parse_cluster` is the nodes at the
minimum size (what an autoscaling cluster surely has).

A description is bounded, so a wrong one is refused at once, in one line, before anything is
built per node: at most :data:`MAX_NODES` nodes (per group and in all, at the maximum size),
:data:`MAX_NODE_GROUPS` groups, :data:`MAX_RESOURCES` resources per node, amounts finite, ``>= 0``
and at most :data:`MAX_AMOUNT`, numbers of at most :data:`MAX_NUMBER_DIGITS` digits, a text of at
most :data:`MAX_TEXT_CHARS` characters and a file of at most :data:`MAX_FILE_BYTES` bytes that is
a regular file (a FIFO or a device is refused without reading from it).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, Protocol

from hpsearch.errors import Problem, SpecError
from hpsearch.planning.planner import Node
from hpsearch.planning.resources import GB, MEMORY, fmt_resources
from hpsearch.spec._validation import show
from hpsearch.spec._yaml import YamlError, load_text, parse_scalar

__all__ = [
    "NodeGroup",
    "ClusterShapeError",
    "parse_node_groups",
    "parse_cluster",
    "nodes_at",
    "fmt_count",
    "cluster_text",
    "is_spot",
    "SPOT_ENV",
    "SPOT_KEY",
    "SPOT_LABEL",
    "SPOT_VALUE",
    "MAX_NODES",
    "MAX_NODE_GROUPS",
    "MAX_RESOURCES",
    "MAX_AMOUNT",
    "MAX_NUMBER_DIGITS",
    "MAX_TEXT_CHARS",
    "MAX_FILE_BYTES",
]

#: The most nodes a description may have, in one group and in all at the maximum size (a large real Ray cluster
#: has a few thousand); a bigger count is a typo, and the planner lists every node.
MAX_NODES = 10_000
#: The most node groups (terms, or a file's entries); a real cluster has a handful of node types.
MAX_NODE_GROUPS = 32
#: The most resources one node may name (CPU, GPU, memory and a few custom ones).
MAX_RESOURCES = 64
#: The largest amount of one resource on one node (``memory`` in GiB): a billion.
MAX_AMOUNT = 1_000_000_000
#: The most digits in a row in a description: any longer number is no count or amount it can hold.
MAX_NUMBER_DIGITS = 32
#: The longest inline description, in characters.
MAX_TEXT_CHARS = 4096
#: The largest description file read, in bytes (a description is a few lines of YAML).
MAX_FILE_BYTES = 64 * 1024
#: The key that marks a node group as spot capacity: bare (``{CPU: 8, spot}``) or ``spot: true``.
SPOT_KEY = "spot"
#: The node label a spot node carries, and its value: Ray's own (``ray.io/market-type``, set from a node's
#: ``RAY_NODE_MARKET_TYPE``), so the nodes of a running cluster and of a description read alike.
SPOT_LABEL = "ray.io/market-type"
SPOT_VALUE = "spot"
#: The environment variable Ray reads a node's market type from when it starts (``ray._raylet.NODE_MARKET_TYPE_ENV``,
#: set on a Kubernetes pod): a RayJob's spot pods carry it, so Ray gives their nodes :data:`SPOT_LABEL`.
SPOT_ENV = "RAY_NODE_MARKET_TYPE"

_TERM = re.compile(r"^\s*(?:(\S.*?)\s*[x×*]\s*)?(\{.*\})\s*$", re.S)
_COUNT = re.compile(r"^\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?$")
_ALLOWED = "a whole number >= 1, or min..max with 0 <= min <= max and max >= 1"
_LONG_NUMBER = re.compile(rf"\d[\d_]{{{MAX_NUMBER_DIGITS},}}")
_FILE_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket"}


class ClusterShapeError(SpecError):
    """A ``--cluster`` description (text or YAML file) that cannot be read: every problem, on one line.

    A :class:`~hpsearch.errors.SpecError` (``problems`` and ``source`` as there), rendered as the one
    line the CLI prints after ``Error:``: ``--cluster term 1.CPU: must be a finite number ...``, or
    ``--cluster nodes.yaml: nodes[1].count: ...`` for a file, several problems joined by ``; ``.
    """

    def _render(self) -> str:
        where = f"--cluster {self.source}: " if self.source else ""
        return where + "; ".join(f"{p.path}: {p.message}" if p.path else p.message for p in self.problems)


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one shape: their resources per node and how many there are (a range when autoscaled).

    ``resources`` is per node, ``memory`` in bytes (as :class:`Node`), keys as Ray names them
    (``CPU``, ``GPU``, ``memory``, custom ones). ``min_count >= 0`` (the head group's >= 1) and
    ``max_count >= min_count``. The first group is the head group (``is_head``); its first node
    is the head, any others are workers of the same shape. ``spot``: preemptible nodes (never the head group's).
    """

    resources: dict[str, float]
    min_count: int
    max_count: int
    is_head: bool
    spot: bool = False

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


def is_spot(node: Node) -> bool:
    """Whether a node is spot capacity: it carries :data:`SPOT_LABEL` ``: spot`` (described, or Ray's own label)."""
    return str(node.labels.get(SPOT_LABEL, "")).lower() == SPOT_VALUE


def _shape_text(group: NodeGroup, exact: bool) -> str:
    """One group's shape as ``--cluster`` writes it: ``{CPU: 8, GPU: 1}``, ``{CPU: 8, GPU: 1, spot}``."""
    text = fmt_resources(group.resources, exact=exact)
    return f"{text[:-1]}, {SPOT_KEY}}}" if group.spot else text


def cluster_text(groups: Sequence[NodeGroup], *, exact: bool = True) -> str:
    """The groups as ``--cluster`` text: the one writer of it, ``1x{CPU: 8, memory: 32} + 0..4x{CPU: 8, GPU: 8}``.

    ``exact`` (the default): what :func:`parse_node_groups` reads back to the same groups, ``memory``
    a number of GiB (``hpsearch plan --format json``'s ``cluster``, the RayJob's ``run --cluster``).
    Otherwise for people, ``memory: 32 GiB`` (the title of ``hpsearch plan``). A spot group ends in ``, spot}``.

    Example:
        >>> cluster_text(parse_node_groups("1x{memory: 32, CPU: 8} + 0..2x{CPU: 4, spot, memory: 16}"))
        '1x{CPU: 8, memory: 32} + 0..2x{CPU: 4, memory: 16, spot}'
    """
    return " + ".join(f"{fmt_count(g)}x{_shape_text(g, exact)}" for g in groups)


def parse_node_groups(text: str) -> list[NodeGroup]:
    """Node groups from an inline description or a YAML file path; the first is the head group.

    Raises:
        ClusterShapeError: Every problem at once, on one line, each with its place (``--cluster term 2``,
            or ``nodes[1].count`` in a file), the bad value and what is allowed; at once, before anything
            is built per node, for a description past the bounds (:data:`MAX_NODES` and the others).

    Example:
        >>> [(g.resources, g.min_count, g.max_count) for g in parse_node_groups("1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}")]
        [({'CPU': 8.0}, 1, 1), ({'CPU': 8.0, 'GPU': 8.0}, 0, 4)]
    """
    if len(text) > MAX_TEXT_CHARS:
        _refuse("--cluster", f"must be at most {MAX_TEXT_CHARS:,} characters, got {len(text):,}: {show(text)}")
    if "{" not in text:
        return _from_file(text)
    terms = _split_terms(text)
    if len(terms) > MAX_NODE_GROUPS:
        _refuse("--cluster", f"must have at most {MAX_NODE_GROUPS} node groups (terms joined by +), got {len(terms)}")
    shapes: list[tuple[tuple[int, int] | None, Any, str]] = []
    problems: list[Problem] = []
    for i, term in enumerate(terms):
        where = f"--cluster term {i + 1}"
        if _long_number(term, where, problems):
            continue
        m = _TERM.match(term)
        if not m:
            problems.append(
                Problem(where, f"must look like 3x{{CPU: 8, GPU: 1}} or 0..4x{{CPU: 8}}, got {show(term.strip())}")
            )
            continue
        counts = _count(m.group(1) or "1", where, i == 0, problems)
        try:
            value = parse_scalar(m.group(2))
        except Exception as err:  # noqa: BLE001 - YAML's message is the useful part (a bad date is a ValueError)
            problems.append(Problem(where, f"not a YAML mapping: {err}"))
            continue
        shapes.append((counts, value, where))
    return _groups(shapes, problems)


def parse_cluster(text: str) -> list[Node]:
    """Nodes from an inline description or a YAML file path, at each group's minimum size.

    The minimum is what an autoscaling cluster surely has; :func:`parse_node_groups` and
    :func:`nodes_at` give the groups and any other size.

    Raises:
        ClusterShapeError: As :func:`parse_node_groups`: one line, naming ``--cluster`` and what is wrong.

    Example:
        >>> [n.resources for n in parse_cluster("1x{CPU: 16} + 2x{CPU: 8, GPU: 3} + 0..2x{GPU: 8}")]
        [{'CPU': 16.0}, {'CPU': 8.0, 'GPU': 3.0}, {'CPU': 8.0, 'GPU': 3.0}]
    """
    return nodes_at(parse_node_groups(text), "min")


def nodes_at(groups: Sequence[NodeGroup], size: Literal["min", "max"] | Sequence[int] = "min") -> list[Node]:
    """The groups' nodes at their minimum or maximum size, or at one count per group.

    The head group's first node is the head (``node_id="head"``); the others are
    ``node1``, ``node2``, ... in group order. A spot group's nodes carry :data:`SPOT_LABEL` ``: spot``.

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
    if sum(counts) > MAX_NODES:  # parse_node_groups refuses these; a group built by hand is checked here, before a node
        raise ValueError(f"{sum(counts):,} nodes is more than a cluster may have ({MAX_NODES:,})")
    nodes: list[Node] = []
    for group, count in zip(groups, counts, strict=True):
        labels = {SPOT_LABEL: SPOT_VALUE} if group.spot else {}
        for _ in range(count):
            i = len(nodes)
            head = group.is_head and i == 0
            node_id = "head" if head else f"node{i}"
            nodes.append(Node(dict(group.resources), node_id=node_id, is_head=head, labels=dict(labels)))
    return nodes


def _refuse(where: str, message: str, source: str | None = None) -> NoReturn:
    raise ClusterShapeError([Problem(where, message)], source=source)


def _shown(value: Any) -> str:
    """:func:`show`, or what a value is when Python will not write it out (an int of more than 4,300 digits)."""
    try:
        return show(value)
    except ValueError:
        return "a number too long to write out"


def _long_number(text: str, where: str, problems: list[Problem]) -> bool:
    """Whether ``text`` holds a run of more than :data:`MAX_NUMBER_DIGITS` digits (a problem if so)."""
    m = _LONG_NUMBER.search(text)
    if m:
        problems.append(
            Problem(
                where,
                f"a number must have at most {MAX_NUMBER_DIGITS} digits, got one of {len(m.group()):,}: "
                f"{show(m.group())}",
            )
        )
    return m is not None


def _count(value: str | int, where: str, head: bool, problems: list[Problem]) -> tuple[int, int] | None:
    """``3`` -> (3, 3), ``0..4`` -> (0, 4); a problem (and None) for anything else."""
    if isinstance(value, int):
        return _range(value, value, value, where, head, problems)
    m = _COUNT.match(value)
    if not m:
        problems.append(Problem(where, f"count must be {_ALLOWED}, got {_shown(value.strip())}"))
        return None
    low = _whole(m.group(1))
    return _range(low, _whole(m.group(2)) if m.group(2) else low, value.strip(), where, head, problems)


def _whole(digits: str) -> int:
    """The number ``digits`` write, or one past :data:`MAX_NODES` for more digits than a count can have."""
    return int(digits) if len(digits) <= MAX_NUMBER_DIGITS else MAX_NODES + 1


def _range(low: int, high: int, value: Any, where: str, head: bool, problems: list[Problem]) -> tuple[int, int] | None:
    """(low, high) if they are a group's count (0 <= low <= high, 1 <= high <= MAX_NODES, the head group's low
    >= 1); else a problem showing ``value`` (as the user wrote it), and None."""
    if head and low == 0:
        message = f"the head group (the first) needs at least 1 node: its min must be >= 1, got {_shown(value)}"
    elif not 0 <= low <= high or high < 1:
        message = f"count must be {_ALLOWED}, got {_shown(value)}"
    elif high > MAX_NODES:
        message = f"count must be at most {MAX_NODES:,} nodes, got {_shown(value)}"
    else:
        return low, high
    problems.append(Problem(where, message))
    return None


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


def _read_text(text: str) -> tuple[str, str]:
    """The file ``text`` names, as (its name for messages, its UTF-8 text): read only if a regular file (a FIFO or
    a device is refused without a read that could block), and only up to :data:`MAX_FILE_BYTES`."""
    shown = os.path.expanduser(text)
    try:
        fd = os.open(shown, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError) as err:  # ValueError: a NUL in the name
        if isinstance(err, OSError) and err.errno not in (errno.ENOENT, errno.ENAMETOOLONG, errno.ENOTDIR):
            _refuse("--cluster", f"cannot read {show(shown)}: {err.strerror or err}")
        _refuse("--cluster", f"no such file, and not a description like 3x{{CPU: 8, GPU: 1}}: {show(text)}")
    kind = stat.S_IFMT(os.fstat(fd).st_mode)
    if kind != stat.S_IFREG:
        os.close(fd)
        _refuse("", f"must be a regular YAML file, got {_FILE_KINDS.get(kind, 'a device')}", shown)
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        _refuse("", f"must be a file of at most {MAX_FILE_BYTES // 1024} KiB, got a larger one", shown)
    try:
        return shown, data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        _refuse("", f"must be UTF-8 text, got byte 0x{data[err.start]:02x} at byte {err.start}", shown)


def _from_file(text: str) -> list[NodeGroup]:
    source, content = _read_text(text)
    problems: list[Problem] = []
    if _long_number(content, "", problems):
        raise ClusterShapeError(problems, source=source)
    try:
        raw = load_text(content)
    except YamlError as err:
        _refuse("", str(err), source)
    except Exception as err:  # noqa: BLE001 - a value YAML reads and Python cannot build: a date of month 13
        _refuse("", f"not valid YAML: {err}", source)
    if isinstance(raw, Mapping) and "nodes" in raw:
        raw = raw["nodes"]
    if not isinstance(raw, list):
        _refuse("nodes", f"must be a list of nodes, got {_shown(raw)}", source)
    if len(raw) > MAX_NODE_GROUPS:
        _refuse("nodes", f"must have at most {MAX_NODE_GROUPS} node groups, got {len(raw)}", source)
    shapes: list[tuple[tuple[int, int] | None, Any, str]] = []
    for i, item in enumerate(raw):
        where = f"nodes[{i}]"
        if not isinstance(item, Mapping):
            problems.append(Problem(where, f"must be a mapping of resources, got {_shown(item)}"))
            continue
        item = dict(item)
        shapes.append((_file_count(item, where, i == 0, problems), item, where))
    return _groups(shapes, problems, source)


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
                Problem(where, f"min_count and max_count must be whole numbers, got {_shown(low)} and {_shown(high)}")
            )
            return None
        shown = f"{_shown(low)}..{_shown(high)}"
        return _range(low, high, shown, f"{where}.min_count/max_count", head, problems)
    count = item.pop("count", 1)
    if isinstance(count, bool) or not isinstance(count, (int, str)):
        problems.append(Problem(f"{where}.count", f"count must be {_ALLOWED}, got {_shown(count)}"))
        return None
    return _count(count, f"{where}.count", head, problems)


def _amount(key: str, amount: Any) -> float | None:
    """A resource's amount per node as the planner takes it (memory GiB in bytes); None if it is none."""
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0 <= amount <= MAX_AMOUNT:
        return None  # NaN is not >= 0; an int too big for a float is compared as the int it is
    return float(amount) * (GB if key == MEMORY else 1)


def _spot(value: Mapping[Any, Any], where: str, head: bool, problems: list[Problem]) -> bool:
    """Whether a shape marks its group spot (a bare ``spot``, or ``spot: true``); a problem for another value,
    or for the head group, whose head node runs the search and the trial drivers."""
    flag = value.get(SPOT_KEY, False)
    if flag is None:  # written bare: {CPU: 8, spot}
        flag = True
    if not isinstance(flag, bool):
        problems.append(
            Problem(
                f"{where}.{SPOT_KEY}",
                f"marks the group as spot nodes: write it bare ({{CPU: 8, spot}}) or spot: true, got {_shown(flag)} "
                "(a custom resource cannot be named spot)",
            )
        )
        return False
    if flag and head:
        problems.append(
            Problem(
                f"{where}.{SPOT_KEY}",
                "the head group (the first) cannot be spot: the search process and the trial drivers run on the "
                "head node; put the spot nodes in a later group",
            )
        )
        return False
    return flag


def _groups(
    shapes: list[tuple[tuple[int, int] | None, Any, str]], problems: list[Problem], source: str | None = None
) -> list[NodeGroup]:
    groups: list[NodeGroup] = []
    for i, (counts, value, where) in enumerate(shapes):
        spot = _spot(value, where, i == 0, problems) if isinstance(value, Mapping) else False
        if isinstance(value, Mapping) and SPOT_KEY in value:
            value = {k: v for k, v in value.items() if k != SPOT_KEY}
            if not value:
                problems.append(Problem(where, "a spot group needs its resources too, e.g. {CPU: 8, GPU: 1, spot}"))
                continue
        if not isinstance(value, Mapping) or not value:
            problems.append(Problem(where, f"must be a non-empty mapping of resources, got {_shown(value)}"))
            continue
        if len(value) > MAX_RESOURCES:
            problems.append(Problem(where, f"a node must have at most {MAX_RESOURCES} resources, got {len(value)}"))
            continue
        resources = {}
        for key, amount in value.items():
            name = key if isinstance(key, str) else _shown(key)
            per_node = _amount(name, amount)
            if per_node is None:
                unit = " (GiB)" if key == MEMORY else ""
                allowed = f"a finite number >= 0 and <= {MAX_AMOUNT:,}{unit}"
                problems.append(Problem(f"{where}.{name}", f"must be {allowed}, got {_shown(amount)}"))
                continue
            resources[name] = per_node
        if counts is not None:
            groups.append(NodeGroup(resources, counts[0], counts[1], is_head=not groups, spot=spot))
    if problems:
        raise ClusterShapeError(problems, source=source)
    if not groups:
        _refuse("--cluster", "describes no nodes", source)
    total = sum(g.max_count for g in groups)
    if total > MAX_NODES:
        each = " + ".join(fmt_count(g) for g in groups)
        _refuse(
            "--cluster" if source is None else "nodes",
            f"must have at most {MAX_NODES:,} nodes in all, got {total:,} at the maximum size ({each})",
            source,
        )
    return groups
