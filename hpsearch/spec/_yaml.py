"""YAML reading for specs: YAML 1.2 numbers and no silent duplicate keys.

PyYAML implements YAML 1.1, which reads ``1e-4`` (no dot) as the *string* "1e-4";
in a search space that string would reach the train loop as a learning rate. This
loader reads it as the float it looks like. A key written twice in one mapping is
an error instead of the last one silently winning.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from hpsearch.errors import Problem, SpecError

__all__ = ["read_yaml", "parse_scalar"]


class _SpecLoader(yaml.SafeLoader):
    pass


_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
# Replace the YAML 1.1 float resolver with one that also accepts `1e-4`.
_SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:float"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_SpecLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


def _construct_mapping(loader: _SpecLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first on line {seen[key]}, again on line {line})",
                key_node.start_mark,
            )
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


_SpecLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_yaml(path: Path) -> Any:
    """Read a spec file; a syntax error becomes a :class:`SpecError` naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError([Problem("", f"cannot read the spec file: {err.strerror or err}")], source=str(path)) from None
    try:
        return yaml.load(text, Loader=_SpecLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = getattr(err, "problem", None) or str(err)
        raise SpecError([Problem("", f"not valid YAML: {where}{what}")], source=str(path)) from None


def parse_scalar(text: str) -> Any:
    """Parse a ``--set`` value the way the same text would read in a spec file."""
    if text.strip() == "":
        return text
    return yaml.load(text, Loader=_SpecLoader)
