"""What the door's contract checks are made of: a name resolved, a parameter, an attribute set, a text in a source.

Each check of :data:`hpsearch.runtime.internals.registry.INTERNALS` is written with these in the
door's module for its library area, and raises :class:`ContractBroken` saying what differs.
"""

from __future__ import annotations

import inspect
import re
from importlib import import_module
from typing import Any

__all__ = ["ContractBroken", "_assigns", "_mentions", "_parameters", "_resolve", "_source", "_unset"]


class ContractBroken(Exception):
    """An internal is not as hpsearch expects it (the message says what differs)."""


def _resolve(dotted: str) -> Any:
    """``package.module:attr.attr`` -> the object; :class:`ContractBroken` naming what is missing."""
    module_name, _, attrs = dotted.partition(":")
    try:
        found: Any = import_module(module_name)
    except ImportError as err:
        raise ContractBroken(f"cannot import {module_name} ({err})") from None
    path = module_name
    for attr in filter(None, attrs.split(".")):
        if not hasattr(found, attr):
            raise ContractBroken(f"{path} has no attribute {attr}")
        found = getattr(found, attr)
        path = f"{path}.{attr}"
    return found


def _parameters(dotted: str, *names: str) -> None:
    """The callable at ``dotted`` takes each of ``names`` (by that name)."""
    fn = _resolve(dotted)
    params = inspect.signature(fn).parameters
    missing = [n for n in names if n not in params]
    if missing:
        raise ContractBroken(f"{dotted.replace(':', '.')} takes no parameter {', '.join(missing)} ({list(params)})")


def _source(obj: Any) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError) as err:
        raise ContractBroken(f"cannot read the source of {obj!r} ({err})") from None


def _assigns(dotted: str, *attrs: str) -> None:
    """The class at ``dotted`` sets each of ``attrs`` on its instances (``self.<attr> =`` or ``: T`` in its source).

    The class's own source when Python finds it, else its module's (a class re-exported under
    another module's name, as ``ray.train.ControllerError``, hides its definition).
    """
    found = _resolve(dotted)
    try:
        source = inspect.getsource(found)
    except (OSError, TypeError):
        source = _source(_resolve(dotted.partition(":")[0]))
    missing = _unset(source, *attrs)
    if missing:
        raise ContractBroken(f"{dotted.replace(':', '.')} no longer sets {', '.join(missing)}")


def _unset(source: str, *attrs: str) -> list[str]:
    """Those of ``attrs`` that ``source`` (a class's) never sets on ``self`` (``self.<attr> =`` or ``: T``)."""
    return [a for a in attrs if not re.search(rf"self\.{re.escape(a)}\s*(:|=(?!=))", source)]


def _mentions(dotted: str, *texts: str) -> None:
    """The source of the object at ``dotted`` still contains each of ``texts``."""
    source = _source(_resolve(dotted))
    missing = [t for t in texts if t not in source]
    if missing:
        raise ContractBroken(f"{dotted.replace(':', '.')} no longer refers to {', '.join(missing)}")
