"""The runtime modules' old names, for folders and code written before they moved.

``runtime/`` was grouped by the process its code runs in (``search/``, ``trial/``, ``train/``,
``nodes/``). Tune pickles hpsearch's objects into an experiment folder (``tuner.pkl``, the
searcher's state, the callbacks) by their module's name, so a folder written before the move
names modules that are no longer there, and ``hpsearch resume`` must still read it. User code
may import them too. :class:`MovedModules` answers each old name with the module it moved to
(the same module object, so classes and functions are the same ones) and warns once with a
:class:`DeprecationWarning` that names the new path.

Installed when :mod:`hpsearch.runtime` is imported (:func:`install`); it answers only the names
in :data:`MOVED`, so every other import goes on as before.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from collections.abc import Sequence

__all__ = ["MOVED", "MovedModules", "install"]

#: Each old module name and where it lives now.
MOVED: dict[str, str] = {
    "hpsearch.runtime.tuner": "hpsearch.runtime.search.tuner",
    "hpsearch.runtime.preflight": "hpsearch.runtime.search.preflight",
    "hpsearch.runtime.plugins": "hpsearch.runtime.search.plugins",
    "hpsearch.runtime.searchers": "hpsearch.runtime.search.searchers",
    "hpsearch.runtime.warm_start": "hpsearch.runtime.search.warm_start",
    "hpsearch.runtime.tune_space": "hpsearch.runtime.search.tune_space",
    "hpsearch.runtime.progress": "hpsearch.runtime.search.progress",
    "hpsearch.runtime.outcomes": "hpsearch.runtime.search.outcomes",
    "hpsearch.runtime.budget": "hpsearch.runtime.search.budget",
    "hpsearch.runtime.tracking": "hpsearch.runtime.search.tracking",
    "hpsearch.runtime.search_result": "hpsearch.runtime.search.search_result",
    "hpsearch.runtime.autoscaling": "hpsearch.runtime.search.autoscaling",
    "hpsearch.runtime.check": "hpsearch.runtime.search.check",
    "hpsearch.runtime.pbt": "hpsearch.runtime.search.pbt",
    "hpsearch.runtime.grow": "hpsearch.runtime.search.grow",
    "hpsearch.runtime.resume_state": "hpsearch.runtime.search.resume_state",
    "hpsearch.runtime.trainable": "hpsearch.runtime.trial.trainable",
    "hpsearch.runtime.driver": "hpsearch.runtime.trial.driver",
    "hpsearch.runtime.pbt_driver": "hpsearch.runtime.trial.pbt_driver",
    "hpsearch.runtime.reuse": "hpsearch.runtime.trial.reuse",
    "hpsearch.runtime.controller": "hpsearch.runtime.train.controller",
    "hpsearch.runtime.worker": "hpsearch.runtime.train.worker",
    "hpsearch.runtime.aggregate": "hpsearch.runtime.train.aggregate",
    "hpsearch.runtime.transplant": "hpsearch.runtime.train.transplant",
    "hpsearch.runtime.cluster": "hpsearch.runtime.nodes.connect",
    "hpsearch.runtime.node_check": "hpsearch.runtime.nodes.node_check",
    "hpsearch.runtime.node_facts": "hpsearch.runtime.nodes.node_facts",
    "hpsearch.runtime.node_watch": "hpsearch.runtime.nodes.node_watch",
    "hpsearch.runtime.session": "hpsearch.runtime.nodes.session",
    "hpsearch.runtime.listening": "hpsearch.runtime.nodes.listening",
    "hpsearch.runtime.ray_logs": "hpsearch.runtime.nodes.ray_logs",
}


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module it moved to."""

    def __init__(self, new: str) -> None:
        self.new = new
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new}; import it from there (the old name goes in a later release)",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module it moved to is already imported. Import stamped the old name's
        spec on it; it gets its own back, so that it still knows its real name."""
        module.__spec__ = self.spec


class MovedModules(importlib.abc.MetaPathFinder):
    """A finder that knows only the old names in :data:`MOVED`."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once per process."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())
