"""hpsearch: hyperparameter search on Ray Tune where every trial is a Ray Train run.

Three ways in, one engine underneath: ``hpsearch run spec.yaml`` on the command
line; :func:`load_spec` / :func:`build_tuner` / :func:`run` from Python; and
:func:`make_trainable` for people who write their own ``ray.tune.Tuner``.

``import hpsearch`` is fast: Ray, torch, Optuna and matplotlib load only when used
(``__version__`` comes from the installed package's metadata, read by :mod:`hpsearch._version`).

The package, one line a part (each package's ``__init__`` is its own index):

- :mod:`~hpsearch.spec`: the search spec, YAML in and a typed ``Spec`` out; pure (no Ray, no torch).
- :mod:`~hpsearch.planning`: the resource planner, the estimate and the KubeRay manifest; pure.
- :mod:`~hpsearch.experiment`: the experiment folder's names, readers, writers and lock; pure.
- :mod:`~hpsearch.analysis`: a folder read into pandas tables and plot data; pure.
- :mod:`~hpsearch.results`: plots, the report, the Optuna export, a trial's model loaded back.
- :mod:`~hpsearch.runtime`: everything that talks to Ray, grouped by the process it runs in.
- :mod:`~hpsearch.examples`: the shipped example loops (digits, Ray Data, Lightning, Transformers).
- :mod:`~hpsearch.train`: checkpoint helpers for train loops: report-and-save, restore.
- :mod:`~hpsearch.cli`: the ``hpsearch`` command; :mod:`~hpsearch.__main__` makes it ``python -m hpsearch``.
- :mod:`~hpsearch.errors`: every exception hpsearch raises on purpose.
- :mod:`~hpsearch.messages`: what hpsearch tells the user while it works: one channel, one prefix.
- :mod:`~hpsearch.formatting`: numbers, durations, resource-hours and text tables, one way everywhere.
- :mod:`~hpsearch._version`: the installed version, read from the package's metadata.
- :mod:`~hpsearch._renamed`: old public names that still resolve, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hpsearch._version import __version__
from hpsearch.errors import (
    CheckpointNotReportedError,
    ClusterError,
    ExperimentExistsError,
    ExperimentLockedError,
    ExperimentNotFoundError,
    ExportError,
    HpsearchError,
    IncompatibleLibraryError,
    MetricNotReportedError,
    PlanError,
    ResultsError,
    SpecError,
    StorageFullError,
)

__all__ = [
    "load_spec",
    "build_tuner",
    "run",
    "resume",
    "SearchResult",
    "make_trainable",
    "load_results",
    "load_model",
    "to_optuna_study",
    "plots",
    "analysis",
    "Spec",
    "HpsearchError",
    "SpecError",
    "PlanError",
    "ExperimentExistsError",
    "ExperimentLockedError",
    "ClusterError",
    "ExperimentNotFoundError",
    "ResultsError",
    "ExportError",
    "StorageFullError",
    "IncompatibleLibraryError",
    "MetricNotReportedError",
    "CheckpointNotReportedError",
    "__version__",
]

_LAZY = {
    "load_spec": "hpsearch.spec",
    "Spec": "hpsearch.spec",
    "build_tuner": "hpsearch.runtime.search.tuner",
    "run": "hpsearch.runtime.search.tuner",
    "resume": "hpsearch.runtime.search.tuner",
    "SearchResult": "hpsearch.runtime.search.search_result",
    "make_trainable": "hpsearch.runtime.trial.trainable",
    "load_results": "hpsearch.analysis",
    "load_model": "hpsearch.results.checkpoints",
    "to_optuna_study": "hpsearch.results.optuna_export",
}
#: Submodules loaded on first use (``hpsearch.plots`` imports matplotlib).
_LAZY_MODULES = {"plots": "hpsearch.results.plots", "analysis": "hpsearch.analysis"}

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch import analysis
    from hpsearch.analysis import load_results
    from hpsearch.results import plots
    from hpsearch.results.checkpoints import load_model
    from hpsearch.results.optuna_export import to_optuna_study
    from hpsearch.runtime.search.search_result import SearchResult
    from hpsearch.runtime.search.tuner import build_tuner, resume, run
    from hpsearch.runtime.trial.trainable import make_trainable
    from hpsearch.spec import Spec, load_spec


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        return importlib.import_module(_LAZY_MODULES[name])
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hpsearch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
