"""Describe a cluster without having one: ``--cluster '1x{CPU: 16} + 3x{CPU: 8, GPU: 3}'``.

So a user can size a cluster before renting it. Either an inline form of counted
node shapes joined by ``+``, or a YAML file with a list of nodes (each a mapping of
resources, optionally with ``count``). The first node is the head. ``memory`` is in
GB here (Ray reports bytes; the planner gets bytes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpsearch.errors import Problem, SpecError
from hpsearch.planning.planner import GB, MEMORY, Node
from hpsearch.spec._validation import show
from hpsearch.spec._yaml import parse_scalar, read_yaml

__all__ = ["parse_cluster"]

_TERM = re.compile(r"^\s*(?:(\d+)\s*[x×*]\s*)?(\{.*\})\s*$", re.S)


def parse_cluster(text: str) -> list[Node]:
    """Nodes from an inline description or a YAML file path.

    Raises:
        SpecError: With ``--cluster`` as the path and what is wrong.

    Example:
        >>> [n.resources for n in parse_cluster("1x{CPU: 16} + 2x{CPU: 8, GPU: 3}")]
        [{'CPU': 16.0}, {'CPU': 8.0, 'GPU': 3.0}, {'CPU': 8.0, 'GPU': 3.0}]
    """
    path = Path(text).expanduser()
    if "{" not in text:
        if path.is_file():
            return _from_file(path)
        raise SpecError(
            [Problem("--cluster", f"no such file, and not a description like 3x{{CPU: 8, GPU: 1}}: {text!r}")]
        )
    shapes: list[tuple[int, Any, str]] = []
    problems: list[Problem] = []
    for i, term in enumerate(_split_terms(text)):
        where = f"--cluster term {i + 1}"
        m = _TERM.match(term)
        if not m:
            problems.append(Problem(where, f"must look like 3x{{CPU: 8, GPU: 1}}, got {term.strip()!r}"))
            continue
        try:
            value = parse_scalar(m.group(2))
        except Exception as err:  # noqa: BLE001 - YAML's message is the useful part
            problems.append(Problem(where, f"not a YAML mapping: {err}"))
            continue
        shapes.append((int(m.group(1) or 1), value, where))
    return _nodes(shapes, problems)


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


def _from_file(path: Path) -> list[Node]:
    raw = read_yaml(path)
    if isinstance(raw, Mapping) and "nodes" in raw:
        raw = raw["nodes"]
    if not isinstance(raw, list):
        raise SpecError([Problem("nodes", f"must be a list of nodes, got {show(raw)}")], source=str(path))
    shapes = []
    problems = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            problems.append(Problem(f"nodes[{i}]", f"must be a mapping of resources, got {show(item)}"))
            continue
        item = dict(item)
        count = item.pop("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            problems.append(Problem(f"nodes[{i}].count", f"must be a whole number >= 1, got {show(count)}"))
            continue
        shapes.append((count, item, f"nodes[{i}]"))
    try:
        return _nodes(shapes, problems)
    except SpecError as err:
        raise SpecError(err.problems, source=str(path)) from None


def _nodes(shapes: list[tuple[int, Any, str]], problems: list[Problem]) -> list[Node]:
    nodes: list[Node] = []
    for count, value, where in shapes:
        if not isinstance(value, Mapping) or not value:
            problems.append(Problem(where, f"must be a non-empty mapping of resources, got {show(value)}"))
            continue
        resources = {}
        for key, amount in value.items():
            if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
                problems.append(Problem(f"{where}.{key}", f"must be a number >= 0, got {show(amount)}"))
                continue
            resources[str(key)] = float(amount) * (GB if key == MEMORY else 1)
        for _ in range(count):
            i = len(nodes)
            nodes.append(Node(resources, node_id="head" if i == 0 else f"node{i}", is_head=i == 0))
    if problems:
        raise SpecError(problems)
    if not nodes:
        raise SpecError([Problem("--cluster", "describes no nodes")])
    return nodes
