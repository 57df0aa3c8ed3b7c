"""``--set dotted.path=value``: overrides applied to a spec's raw mapping before it is validated."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from hpsearch.errors import Problem, SpecError
from hpsearch.spec._validation import join_path, show
from hpsearch.spec._yaml import YamlError, long_int_problem, parse_scalar

__all__ = ["apply_overrides"]

#: The sections whose ``type`` may be written alone (``scheduler: asha``); an override inside one expands it.
_PLUGIN_KEYS = ("searcher", "scheduler")


def apply_overrides(raw: Mapping[str, Any], overrides: Iterable[str], *, source: str | None = None) -> dict[str, Any]:
    """Return a copy of ``raw`` with each ``dotted.path=value`` set (values read as YAML).

    A problem with an override itself is reported under ``--set <the override>``.
    """
    out = copy.deepcopy(dict(raw))
    problems = []
    for item in overrides:
        flag = f"--set {item if len(item) <= 60 else item[:57] + '...'}"
        key, eq, text = item.partition("=")
        parts = key.strip().split(".")
        if not eq or not key.strip():
            problems.append(Problem(flag, "must be KEY=VALUE with a dotted KEY, e.g. --set scaling.num_workers=2"))
            continue
        if not all(parts):
            problems.append(
                Problem(flag, f"the key {key.strip()!r} has an empty part; write a dotted key like scaling.num_workers")
            )
            continue
        try:
            value = parse_scalar(text, as_spec=True)
        except YamlError as err:
            problems.append(Problem(flag, str(err)))
            continue
        too_long = long_int_problem(value)
        if too_long:
            inner, message = too_long
            problems.append(Problem(flag, f"{join_path(key.strip(), inner)}: {message}" if inner else message))
            continue
        node: Any = out
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif i == 0 and part in _PLUGIN_KEYS and isinstance(child, str):
                child = node[part] = {"type": child}  # `scheduler: asha` is shorthand for {type: asha}
            if not isinstance(child, dict):
                where = join_path(*parts[: i + 1])
                problems.append(Problem(flag, f"cannot set {key.strip()}: {where} holds {show(child)}, not a mapping"))
                break
            node = child
        else:
            node[parts[-1]] = value
    if problems:
        raise SpecError(problems, source=source)
    return out
