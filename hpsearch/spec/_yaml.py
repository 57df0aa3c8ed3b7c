"""YAML reading for specs: YAML 1.2 numbers, no silent duplicate keys, bounded in size.

PyYAML implements YAML 1.1, which reads ``1e-4`` (no dot) as the *string* "1e-4";
in a search space that string would reach the train loop as a learning rate. This
loader reads it as the float it looks like. A key written twice in one mapping is
an error instead of the last one silently winning.

Anchors and aliases (``&defaults`` / ``*defaults``, ``<<: *defaults``) are allowed, but a
document is measured *before* anything is built from it: one whose aliases would expand
to more than :data:`MAX_VALUES` values (a "billion laughs" bomb: a few lines that expand
to 10^9 values), or that refers to itself, is refused in time linear in its text.

A user's spec (a file, or a ``--set`` value: ``as_spec=True``) is held to more: it is refused as
soon as it has more than :data:`MAX_WRITTEN_VALUES` values as written, which bounds the time and
memory any text costs; and an integer is converted only up to :data:`MAX_INT_CHARS` characters:
a longer one (Python refuses to convert more than 4,300 digits, and a long ``1:2:3:...``
sexagesimal costs time quadratic in its length) is kept as a :class:`LongInt`, which
:func:`long_int_problem` finds, as it finds any integer past 64 bits, and says where it is. The
file must be a regular file (a named pipe or a device is refused before it is opened for reading,
so it cannot block), is read only up to :data:`MAX_SPEC_BYTES`, and must be UTF-8 text.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hpsearch.errors import Problem, SpecError, did_you_mean
from hpsearch.spec._validation import join_path

__all__ = [
    "read_yaml",
    "parse_scalar",
    "load_text",
    "long_int_problem",
    "LongInt",
    "YamlError",
    "MAX_VALUES",
    "MAX_WRITTEN_VALUES",
    "MAX_SPEC_BYTES",
    "MAX_INT_CHARS",
]

#: The most values (scalars, lists and mappings, counted after expanding every alias) a document may hold.
MAX_VALUES = 100_000
#: The most values a user's spec may hold as written (aliases counted once); reading stops at the next one,
#: so no text costs more than about a second and 20 MB to refuse.
MAX_WRITTEN_VALUES = 20_000
#: The largest spec file read (1 MiB); a spec is a few kB, anything this large is the wrong file.
MAX_SPEC_BYTES = 1024 * 1024
#: The longest integer text converted (64 bits take 19 decimal digits); a longer one becomes a :class:`LongInt`.
MAX_INT_CHARS = 100
#: The integers a spec may hold: 64 bits, what Optuna, numpy and Arrow hold a number in.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
#: What a refused file is, by its type.
_FILE_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class YamlError(ValueError):
    """Text that is not a spec's YAML; the message is fit to show the user (it names the line)."""


@dataclass(frozen=True)
class LongInt:
    """An integer written with more than :data:`MAX_INT_CHARS` characters, kept unconverted: no spec can use it."""

    head: str  # its first characters
    digits: int  # how many digits it has

    def __str__(self) -> str:
        return f"{self.head}... ({self.digits:,} digits)"


class _SpecLoader(yaml.SafeLoader):
    def compose_document(self) -> yaml.Node | None:
        node: yaml.Node | None = super().compose_document()
        if node is not None:
            _check_expanded_size(node)
        return node


class _UserSpecLoader(_SpecLoader):
    """A user's spec: at most MAX_WRITTEN_VALUES values, an integer too long to convert kept as a LongInt."""

    _values = 0  # composed so far, an alias counted once

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._values += 1
        if self._values > MAX_WRITTEN_VALUES:
            event = self.peek_event()  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped
            raise yaml.composer.ComposerError(
                None,
                None,
                f"it holds more than {MAX_WRITTEN_VALUES:,} values; a spec holds a few hundred (wrong file?)",
                event.start_mark,
            )
        node: yaml.Node | None = super().compose_node(parent, index)
        return node

    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:
        text = str(node.value)
        if len(text) <= MAX_INT_CHARS:
            return super().construct_yaml_int(node)
        body = text.lstrip("+-").replace("_", "")
        if body[:2].lower() in ("0x", "0o", "0b"):
            body = body[2:]
        return LongInt(head=text[:20], digits=sum(c.isalnum() for c in body))


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
_UserSpecLoader.add_constructor("tag:yaml.org,2002:int", _UserSpecLoader.construct_yaml_int)


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


def load_text(text: str, *, as_spec: bool = False) -> Any:
    """Parse YAML text with the spec loader.

    Args:
        as_spec: The text is a user's spec: refuse more than :data:`MAX_WRITTEN_VALUES` values, and keep
            an integer of more than :data:`MAX_INT_CHARS` characters as a :class:`LongInt` (for
            :func:`long_int_problem` to report). Without it, Python's ``ValueError`` for an integer of more
            than 4,300 digits passes through.

    Raises:
        YamlError: ``"not valid YAML: line L, column C: what"``.
    """
    try:
        return yaml.load(text, Loader=_UserSpecLoader if as_spec else _SpecLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = getattr(err, "problem", None) or str(err).partition("\n")[0]
        raise YamlError(f"not valid YAML: {where}{what}") from None
    except RecursionError:
        raise YamlError("not valid YAML: it is nested too deeply to read (a spec needs only a few levels)") from None


def long_int_problem(value: Any) -> tuple[str, str] | None:
    """The first integer in ``value`` (a :class:`LongInt`, or an int past 64 bits) that no spec can hold.

    Returns:
        ``(dotted path inside value, "must be an integer of at most 64 bits (...), got ...")``, or ``None``.
    """
    found: list[tuple[str, str]] = []
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if id(item) in seen:  # an alias: its integers are reported where they were written
                continue
            seen.add(id(item))
            if isinstance(item, dict):  # a key is reported at its mapping's path
                children = [one for k, v in item.items() for one in ((path, k), (join_path(path, k), v))]
            else:
                children = [(join_path(path, i), v) for i, v in enumerate(item)]
            stack.extend(reversed(children))  # in the order written
        elif isinstance(item, LongInt):
            found.append((path, str(item)))
        elif isinstance(item, int) and not isinstance(item, bool) and not INT_MIN <= item <= INT_MAX:
            found.append((path, _long_int_text(item)))
    if not found:
        return None
    path, shown = found[0]
    more = f" (and {len(found) - 1:,} more such integers)" if len(found) > 1 else ""
    return path, f"must be an integer of at most 64 bits ({INT_MIN} to {INT_MAX}), got {shown}{more}"


def _long_int_text(value: int) -> str:
    """An int past 64 bits as :class:`LongInt` shows one; Python writes out at most 4,300 digits."""
    try:
        text = str(value)
    except ValueError:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits"
    return text if len(text) <= 30 else str(LongInt(head=text[:20], digits=len(text.lstrip("-"))))


def read_yaml(path: Path) -> Any:
    """Read a spec file; every reason it cannot be read becomes a :class:`SpecError` naming the file.

    An integer too long to convert comes back as a :class:`LongInt` (see :func:`long_int_problem`).
    """

    def refuse(message: str) -> SpecError:
        return SpecError([Problem("", message)], source=str(path))

    needs = "a spec needs at least name, trainable, metric and mode"
    data = _read_bytes(path, refuse)
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
        raw = load_text(text, as_spec=True)
    except YamlError as err:
        raise refuse(str(err)) from None
    if raw is None:
        raise refuse(f"the spec file holds no keys, only comments or null; {needs}")
    return raw


def _read_bytes(path: Path, refuse: Callable[[str], SpecError]) -> bytes:
    """The file's bytes, at most :data:`MAX_SPEC_BYTES` of them; anything but a regular file is refused unopened.

    A named pipe would block the read until something writes to it (forever, for a FIFO nobody feeds), and
    a device may never end: the type is checked first, and the file opened without blocking and checked
    again (it may have been swapped since). A symlink to a regular file is read.
    """
    size, data = 0, b""
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISREG(mode):
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            with os.fdopen(fd, "rb") as f:
                info = os.fstat(f.fileno())
                mode, size = info.st_mode, info.st_size
                if stat.S_ISREG(mode) and size <= MAX_SPEC_BYTES:
                    data = f.read(MAX_SPEC_BYTES + 1)  # counted: the file may have grown, or say a size of 0
    except FileNotFoundError:
        siblings = [p.name for p in path.parent.glob("*.y*ml")] if os.path.isdir(path.parent) else []
        raise refuse(
            f"cannot read the spec file: No such file or directory{did_you_mean(path.name, siblings)}"
        ) from None
    except OSError as err:
        raise refuse(f"cannot read the spec file: {err.strerror or err}") from None
    if stat.S_ISDIR(mode):
        names = sorted(p.name for p in path.glob("*.y*ml") if p.is_file())
        raise refuse("is a folder, not a spec file" + (f" (YAML files in it: {', '.join(names[:8])})" if names else ""))
    if not stat.S_ISREG(mode):
        kind = _FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise refuse(f"is {kind}, not a spec file; hpsearch reads a spec only from a regular file (save it to one)")
    if size > MAX_SPEC_BYTES or len(data) > MAX_SPEC_BYTES:
        shown = f"{size:,} bytes" if size > MAX_SPEC_BYTES else f"more than {MAX_SPEC_BYTES:,} bytes"
        raise refuse(
            f"the file is {shown}, over the limit of {MAX_SPEC_BYTES // 2**20} MiB ({MAX_SPEC_BYTES:,} bytes); "
            "a spec is a small YAML file (wrong file?)"
        )
    return data


def parse_scalar(text: str, *, as_spec: bool = False) -> Any:
    """Parse a ``--set`` value the way the same text would read in a spec file.

    Args:
        as_spec: As for :func:`load_text`.

    Raises:
        YamlError: the text is not valid YAML (or expands too far).
    """
    if text.strip() == "":
        return text
    return load_text(text, as_spec=as_spec)
