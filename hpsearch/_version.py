"""The installed hpsearch's version: a leaf, so that the package root and the report both read it from here."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]


def _installed_version() -> str:
    """The installed distribution's version, or ``0+unknown`` when hpsearch runs from a source tree."""
    try:
        return version("hpsearch")
    except PackageNotFoundError:
        return "0+unknown"


__version__ = _installed_version()
