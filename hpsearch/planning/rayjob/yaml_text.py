"""YAML text with comments: the writer of the manifest's documents (``_Doc``: data, and comment lines by dotted path).

PyYAML writes no comments, and the manifest's comments sit above the keys they explain, so the text is
written here. PyYAML is what checks it: a scalar is written plain only when ``yaml.safe_load`` reads it
back as itself, else as a JSON string (a YAML 1.2 double-quoted scalar, which YAML 1.1 reads alike); a
multi-line string is a literal block (``|2``, with its chomping) when it can be read back exactly.
PyYAML's own dump would quote and fold differently, and the tests pin the text as written here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml


@dataclass
class _Doc:
    """One YAML document: its data and the comment lines to write before keys (by dotted path)."""

    data: dict[str, Any]
    comments: dict[str, list[str]] = field(default_factory=dict)
    header: list[str] = field(default_factory=list)

    def note(self, path: str, *lines: str) -> None:
        self.comments.setdefault(path, []).extend(lines)


def _dump_documents(docs: Iterable[_Doc]) -> str:
    out: list[str] = []
    for doc in docs:
        out.append("---")
        out += [f"# {line}" for line in doc.header]
        out += _mapping(doc.data, 0, "", doc.comments)
    return "\n".join(out) + "\n"


def _mapping(data: Mapping[str, Any], indent: int, path: str, comments: Mapping[str, list[str]]) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    for key, value in data.items():
        here = f"{path}.{key}" if path else key
        out += [f"{pad}# {line}".rstrip() for line in comments.get(here, ())]
        out += _entry(f"{pad}{_scalar(key)}:", value, indent, here, comments)
    return out


def _entry(prefix: str, value: Any, indent: int, path: str, comments: Mapping[str, list[str]]) -> list[str]:
    """``prefix`` (``key:`` or ``- key:``) followed by ``value``, nested under ``indent``."""
    if isinstance(value, Mapping) and value:
        return [prefix, *_mapping(value, indent + 2, path, comments)]
    if isinstance(value, list) and value:
        return [prefix, *_sequence(value, indent + 2, path, comments)]
    if isinstance(value, Mapping) or isinstance(value, list):  # empty: a YAML map or list, never the text "{}"
        return [f"{prefix} {{}}" if isinstance(value, Mapping) else f"{prefix} []"]
    if isinstance(value, str) and "\n" in value and _literal_ok(value):
        # |2: the content is indented 2 past the key (so a first line may start with spaces);
        # chomping: "-" no final line break, "" one, "+" several (each kept).
        chomp = "-" if not value.endswith("\n") else ("+" if value.endswith("\n\n") else "")
        body = value if chomp == "-" else value[:-1]
        pad = " " * (indent + 2)
        return [f"{prefix} |2{chomp}", *(f"{pad}{line}".rstrip() if line else "" for line in body.split("\n"))]
    return [f"{prefix} {_scalar(value)}"]


def _sequence(items: Sequence[Any], indent: int, path: str, comments: Mapping[str, list[str]]) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    for i, item in enumerate(items):
        here = f"{path}[{i}]"
        out += [f"{pad}# {line}".rstrip() for line in comments.get(here, ())]
        if isinstance(item, Mapping) and item:
            lines = _mapping(item, indent + 2, here, comments)
            first = next(j for j, line in enumerate(lines) if not line.lstrip().startswith("#"))
            out += lines[:first]  # the first key's comments go above the dash
            out.append(f"{pad}- {lines[first][indent + 2 :]}")
            out += lines[first + 1 :]
        else:
            out += _entry(f"{pad}-", item, indent, here, comments)
    return out


def _literal_ok(text: str) -> bool:
    """Whether ``text`` can be a literal block scalar as is: some content, printable, no carriage returns, no
    trailing spaces (YAML would drop them, and read a block of empty lines as "")."""
    return (
        text.strip("\n") != ""
        and all(ch == "\n" or ch == "\t" or ch.isprintable() for ch in text)
        and not any(line != line.rstrip(" \t") for line in text.split("\n"))
    )


_PLAIN = re.compile(r"[A-Za-z0-9_./@%+=~-][A-Za-z0-9_./@%+=~:, -]*")


def _scalar(value: Any) -> str:
    """A YAML scalar that reads back as ``value``, under YAML 1.1 (PyYAML) and 1.2 alike."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    text = str(value)
    if (
        _PLAIN.fullmatch(text)
        and not text.endswith((" ", ":"))
        and ": " not in text
        and " #" not in text
        and yaml.safe_load(text) == text
    ):
        return text
    return json.dumps(text, ensure_ascii=False)
