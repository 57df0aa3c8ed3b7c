"""The search spec, without Ray: YAML (or a dict) in, a validated, typed :class:`Spec` out.

Every user mistake is caught here, before Ray starts: all problems of a spec are collected and raised
together as one :class:`~hpsearch.errors.SpecError`, each with its YAML path, the bad value and what is
allowed. The contract users write against is the README's spec reference; keep it stable and extend it
compatibly. Nothing in this package imports Ray or torch (tests/project/test_layers.py checks it).

- :mod:`~hpsearch.spec.load`: ``load_spec``: read, apply ``--set``, parse every section in key order.
- :mod:`~hpsearch.spec.model`: ``Spec``, the validated spec, and ``total_trials``, ``varying_params``.
- :mod:`~hpsearch.spec.overrides`: ``apply_overrides``, the ``--set dotted.path=value`` overrides.
- :mod:`~hpsearch.spec.objectives`: ``metric``/``mode`` as objectives, and what several of them require.
- :mod:`~hpsearch.spec.space`: the search space: parameters, ``when`` conditions, grids, the flat view.
- :mod:`~hpsearch.spec.scaling`: the ``scaling`` section: workers and their resources, searched or elastic.
- :mod:`~hpsearch.spec.resources`: the ``resources`` section: the trial driver's share, trials at once.
- :mod:`~hpsearch.spec.failure`: the ``failure`` section (``FailureSettings``; ``Failure`` is its deprecated name).
- :mod:`~hpsearch.spec.checkpoint`: the ``checkpoint`` section: how many checkpoints each trial keeps.
- :mod:`~hpsearch.spec.aggregate`: the ``aggregate`` section: how a metric is combined across workers.
- :mod:`~hpsearch.spec.plugins`: the searcher and scheduler registries, each name's typed options.
- :mod:`~hpsearch.spec.population`: pbt/pb2 against the rest of the spec.
- :mod:`~hpsearch.spec.datasets`: the ``datasets`` and ``data`` sections.
- :mod:`~hpsearch.spec.tracking`: the ``tracking`` section: mlflow, wandb, tensorboard, optuna.
- :mod:`~hpsearch.spec.credentials`: passwords in tracker URLs: ``${VAR}`` references, redaction (``user:***@``).
- :mod:`~hpsearch.spec.budget`: the ``budget`` section: wall time, failed trials, targets, resource-hours.
- :mod:`~hpsearch.spec.constraints`: the ``constraints`` section: bounds on reported metrics.
- :mod:`~hpsearch.spec.warm_start`: the ``warm_start`` section: points and earlier experiments to start from.
- :mod:`~hpsearch.spec._validation`: pydantic's errors as ``Problem`` lines with dotted YAML paths.
- :mod:`~hpsearch.spec._yaml`: the YAML reader: YAML 1.2 numbers, duplicate keys refused, size checked first.
- :mod:`~hpsearch.spec._storage`: ``storage_path`` against the file system; ``check_storage``.
- :mod:`~hpsearch.spec._imports`: ``module:function`` and ``file.py:function`` references to callables.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from hpsearch.spec._storage import check_storage
from hpsearch.spec.aggregate import Aggregate
from hpsearch.spec.aggregate import AggregateMethod as AggregateMethod  # importable here, as before the split
from hpsearch.spec.budget import Budget
from hpsearch.spec.checkpoint import CheckpointSettings
from hpsearch.spec.constraints import Constraint
from hpsearch.spec.datasets import DataSettings
from hpsearch.spec.failure import FailureSettings
from hpsearch.spec.load import SPEC_KEYS, load_spec
from hpsearch.spec.model import Spec, total_trials, varying_params
from hpsearch.spec.overrides import apply_overrides
from hpsearch.spec.resources import Resources
from hpsearch.spec.scaling import ELASTIC_REFUSED_STRATEGIES as ELASTIC_REFUSED_STRATEGIES  # as AggregateMethod
from hpsearch.spec.scaling import SEARCHED_SCALING as SEARCHED_SCALING  # as AggregateMethod
from hpsearch.spec.scaling import ElasticWorkers, Scaling
from hpsearch.spec.space import SCALING_GROUP
from hpsearch.spec.tracking import Tracking
from hpsearch.spec.warm_start import WarmStart

__all__ = [
    "Spec",
    "Scaling",
    "ElasticWorkers",
    "Resources",
    "FailureSettings",
    "Failure",  # deprecated: FailureSettings
    "CheckpointSettings",
    "Aggregate",
    "DataSettings",
    "Tracking",
    "Budget",
    "WarmStart",
    "Constraint",
    "load_spec",
    "apply_overrides",
    "check_storage",
    "total_trials",
    "varying_params",
    "SPEC_KEYS",
    "SCALING_GROUP",
]

if TYPE_CHECKING:  # type checkers see the old name as the new class; at run time __getattr__ warns
    Failure = FailureSettings


def __getattr__(name: str) -> Any:
    """``Failure``, the old name of :class:`FailureSettings`, still resolves, with a ``DeprecationWarning``.

    Renamed because :class:`hpsearch.experiment.failures.Failure` is a recorded failure, a different thing.
    """
    if name == "Failure":
        warnings.warn(
            "hpsearch.spec.Failure is deprecated: import hpsearch.spec.FailureSettings (the spec's retry settings; "
            "a recorded failure is hpsearch.experiment.failures.Failure)",
            DeprecationWarning,
            stacklevel=2,
        )
        return FailureSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
