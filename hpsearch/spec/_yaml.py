"""YAML reading for specs: YAML 1.2 numbers, no silent duplicate keys, bounded in size.

PyYAML implements YAML 1.1, which reads ``1e-4`` (no dot) as the *string* "1e-4";
in a search space that string would reach the train loop as a learning rate. This
loader reads it as the float it looks like. A key written twice in one mapping is
an error instead of the last one silently winning.

Anchors and aliases (``&defaults`` / ``*defaults``, ``<<: *defaults``) are allowed, but a
document is measured *before* anything is built from it: one whose aliases would expand
to more than :data:`MAX_VALUES` values (a "billion laughs" bomb: a few lines that expand
to 10^9 values), or that refers to itself, is refused in time linear in its text. The
file itself is read only up to :data:`MAX_SPEC_BYTES`, and must be UTF-8 text.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from hpsearch.errors import Problem, SpecError, did_you_mean

__all__ = ["read_yaml", "parse_scalar", "load_text", "YamlError", "MAX_VALUES", "MAX_SPEC_BYTES"]

#: The most values (scalars, lists and mappings, counted after expanding every alias) a document may hold.
MAX_VALUES = 100_000
#: The largest spec file read; a spec is a few kB, anything this large is the wrong file.
MAX_SPEC_BYTES = 16 * 1024 * 1024


class YamlError(ValueError):
    """Text that is not a spec's YAML; the message is fit to show the user (it names the line)."""


class _SpecLoader(yaml.SafeLoader):
    def compose_document(self) -> yaml.Node | None:
        node: yaml.Node | None = super().compose_document()
        if node is not None:
            _check_expanded_size(node)
        return node


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


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expanded_size(root: yaml.Node) -> None:
    """Refuse a node graph that expands to more than MAX_VALUES values, or contains itself.

    An alias is the anchored node object itself, so the composed graph is as small as the
    text; each node's expanded size is computed once (iteratively, post-order), and a node
    met again while its own children are being counted is a recursive alias.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = min(MAX_VALUES + 1, 1 + sum(sizes[id(c)] for c in _children(node)))
            if sizes[key] > MAX_VALUES:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"the document expands to more than {MAX_VALUES:,} values once its aliases (*name) are "
                    "expanded; a spec may use anchors and aliases, but at most "
                    f"{MAX_VALUES:,} values in all",
                    None,
                )
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise yaml.composer.ComposerError(
                None,
                None,
                "an alias refers to a value that contains it (a recursive structure cannot be a spec value)",
                node.start_mark,
            )
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)


def load_text(text: str) -> Any:
    """Parse YAML text with the spec loader.

    Raises:
        YamlError: ``"not valid YAML: line L, column C: what"``.
    """
    try:
        return yaml.load(text, Loader=_SpecLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = getattr(err, "problem", None) or str(err).partition("\n")[0]
        raise YamlError(f"not valid YAML: {where}{what}") from None
    except RecursionError:
        raise YamlError("not valid YAML: it is nested too deeply to read (a spec needs only a few levels)") from None


def read_yaml(path: Path) -> Any:
    """Read a spec file; every reason it cannot be read becomes a :class:`SpecError` naming the file."""

    def refuse(message: str) -> SpecError:
        return SpecError([Problem("", message)], source=str(path))

    needs = "a spec needs at least name, trainable, metric and mode"
    if os.path.isdir(path):
        names = sorted(p.name for p in path.glob("*.y*ml") if p.is_file())
        raise refuse("is a folder, not a spec file" + (f" (YAML files in it: {', '.join(names[:8])})" if names else ""))
    try:
        with path.open("rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)
    except FileNotFoundError:
        siblings = [p.name for p in path.parent.glob("*.y*ml")] if os.path.isdir(path.parent) else []
        raise refuse(
            f"cannot read the spec file: No such file or directory{did_you_mean(path.name, siblings)}"
        ) from None
    except OSError as err:
        raise refuse(f"cannot read the spec file: {err.strerror or err}") from None
    if len(data) > MAX_SPEC_BYTES:
        raise refuse(
            f"the file is larger than {MAX_SPEC_BYTES // 2**20} MiB; a spec is a small YAML file (wrong file?)"
        )
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise refuse("UTF-16 text (it starts with a UTF-16 byte order mark); save the spec as UTF-8")
    nul = data.find(b"\0")
    if nul >= 0:
        raise refuse(f"not a text file (a NUL byte at byte {nul}); a spec is a YAML text file (wrong file?)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise refuse(
            f"not UTF-8 text (byte 0x{data[err.start]:02x} at byte {err.start}); save the spec as UTF-8"
        ) from None
    if not text.strip():
        raise refuse(f"the spec file is empty; {needs}")
    try:
        raw = load_text(text)
    except YamlError as err:
        raise refuse(str(err)) from None
    if raw is None:
        raise refuse(f"the spec file holds no keys, only comments or null; {needs}")
    return raw


def parse_scalar(text: str) -> Any:
    """Parse a ``--set`` value the way the same text would read in a spec file.

    Raises:
        YamlError: the text is not valid YAML (or expands too far).
    """
    if text.strip() == "":
        return text
    return load_text(text)
