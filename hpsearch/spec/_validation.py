"""Turn pydantic's validation errors into hpsearch :class:`Problem` lines.

Every section of a spec is validated by a small pydantic model; this module runs one
and words its errors the way the user wrote the YAML: a dotted path, what is wrong,
the value given and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from hpsearch.errors import Problem, did_you_mean, one_of
from hpsearch.formatting import plural

__all__ = ["StrictModel", "field_error", "join_path", "validate_section", "show"]

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Base of every spec section: unknown keys are errors, values are frozen, numbers finite.

    ``allow_inf_nan=False`` refuses ``.inf``, ``-.inf`` and ``.nan`` (and ``1e999``, which
    reads as inf) in every float field hpsearch interprets: bounds, steps, resources,
    timeouts, scheduler options. Values hpsearch only hands to the loop (constants,
    choice and grid values, typed ``Any``) are not numbers to it and pass as written.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def field_error(key: str, message: str) -> ValueError:
    """An error for a model-level (cross-field) check that belongs to one key of the section."""
    return ValueError(f"@{key}: {message}")


def join_path(*parts: Any) -> str:
    """``join_path("search_space", "lr", "low") == "search_space.lr.low"``; list indices as ``[i]``."""
    out = ""
    for part in parts:
        if part in ("", None):
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def show(value: Any) -> str:
    """A short rendering of a user value for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate_section(
    model: type[M], raw: Any, path: str, *, exclude: tuple[str, ...] = ()
) -> tuple[M | None, list[Problem]]:
    """Validate ``raw`` against ``model``; return the instance or the problems found.

    ``exclude`` names keys that another layer already handles (e.g. a plug-in's ``type``).
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        return None, [Problem(path, f"must be a mapping, got {show(raw)}")]
    data = {k: v for k, v in raw.items() if k not in exclude}
    try:
        return model.model_validate(data), []
    except ValidationError as err:
        return None, _merge_union_branches([_problem(model, path, e) for e in err.errors()])


def _merge_union_branches(problems: list[Problem]) -> list[Problem]:
    """One line per path: a value that fits no member of a union gets "must be A or B"."""
    merged: dict[str, list[str]] = {}
    for p in problems:
        merged.setdefault(p.path, []).append(p.message)
    out = []
    for where, messages in merged.items():
        if len(messages) == 1:
            out.append(Problem(where, messages[0]))
            continue
        got = messages[0].rpartition(", got ")[2]
        parts = [m.rpartition(", got ")[0].removeprefix("must be ") for m in messages]
        out.append(Problem(where, f"must be {' or '.join(dict.fromkeys(parts))}, got {got}"))
    return out


def _problem(model: type[BaseModel], path: str, error: Mapping[str, Any]) -> Problem:
    loc = [p for p in error["loc"] if not _is_pydantic_branch(p)]
    where = join_path(path, *loc)
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        allowed = [f for f in model.model_fields if f != "type"]
        key = loc[-1] if loc else "?"
        if not allowed:
            return Problem(where, "unknown key (this takes no options)")
        return Problem(where, f"unknown key{did_you_mean(str(key), allowed)} (allowed: {', '.join(allowed)})")
    if kind == "missing":
        return Problem(where, "required key is missing")
    if kind == "too_short":
        n = error["ctx"]["min_length"]
        return Problem(where, f"must have at least {plural(n, 'value')}, got {show(value)}")
    if kind == "string_too_short":
        return Problem(where, f"must be a non-empty string, got {show(value)}")
    if kind == "literal_error":
        expected = [str(x).strip("'") for x in error["ctx"]["expected"].replace(" or ", ", ").split(", ")]
        return Problem(where, f"must be {one_of(expected)}, got {show(value)}{did_you_mean(str(value), expected)}")
    message = error["msg"]
    for prefix in ("Input should be", "Value error,", "Assertion failed,"):
        if message.startswith(prefix):
            message = ("must be" if prefix == "Input should be" else "") + message[len(prefix) :]
    message = message.strip()
    if message.startswith("@"):  # a cross-field check naming its key: see field_error()
        key, _, message = message[1:].partition(": ")
        return Problem(join_path(where, key), message)
    if isinstance(value, str) and kind in ("int_type", "float_type") and _is_number(value):
        message += " (write it as a number, e.g. 1.0e-4, not as a string)"
    return Problem(where, f"{message}, got {show(value)}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_pydantic_branch(part: Any) -> bool:
    # pydantic adds the tried union member to ``loc`` ("int", "literal['auto']", "function-after[...]").
    return isinstance(part, str) and (part in _BRANCH_TAGS or "[" in part)


_BRANCH_TAGS = {
    "int",
    "float",
    "str",
    "bool",
    "dict",
    "list",
    "none",
    "constrained-int",
    "constrained-float",
    "constrained-str",
}
