"""Old public names that still resolve, with a ``DeprecationWarning`` that names the new one.

A module that renames a public name keeps the old one working for a while with::

    __getattr__ = renamed(__name__, {"Old": ("New", New)})

Attribute access on the module then warns once per use and returns the new object; a name not
in the table raises the usual ``AttributeError``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["renamed"]


def renamed(module: str, names: Mapping[str, tuple[str, Any]], why: str = "") -> Callable[[str], Any]:
    """A module ``__getattr__`` answering each old name in ``names`` (``old -> (new name, object)``)."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new_name, value = names[name]
        warnings.warn(
            f"{module}.{name} is deprecated: use {module}.{new_name}{f' ({why})' if why else ''}",
            DeprecationWarning,
            stacklevel=2,
        )
        return value

    return __getattr__
