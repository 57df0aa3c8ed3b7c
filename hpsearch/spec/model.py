"""The validated spec: :class:`Spec`, its sections typed, and the counts read from it.

:func:`~hpsearch.spec.load_spec` builds a :class:`Spec` (:mod:`hpsearch.spec.load`); everything
after it (the planner, the runtime, the experiment folder) reads the spec through this class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpsearch.spec import space as _space
from hpsearch.spec._imports import load_callable
from hpsearch.spec.aggregate import Aggregate
from hpsearch.spec.budget import Budget
from hpsearch.spec.checkpoint import CheckpointSettings
from hpsearch.spec.constraints import Constraint
from hpsearch.spec.datasets import DataSettings
from hpsearch.spec.failure import FailureSettings
from hpsearch.spec.objectives import Objectives, is_multi_objective, objectives_or_primary
from hpsearch.spec.plugins import POPULATION_SCHEDULERS, PluginChoice
from hpsearch.spec.resources import Resources
from hpsearch.spec.scaling import Scaling
from hpsearch.spec.tracking import Tracking
from hpsearch.spec.warm_start import WarmStart

__all__ = ["Spec", "total_trials", "varying_params"]


@dataclass(frozen=True)
class Spec:
    """A validated search spec. Build one with :func:`~hpsearch.spec.load_spec`.

    ``metric``/``mode`` are the primary (first) objective: what progress lines, budget targets
    and "best" use. ``objectives`` holds every ``(metric, mode)`` in the spec's order (one for a
    single-objective search); ``multi_objective`` says whether there are several.
    """

    name: str
    trainable: str
    metric: str
    mode: str
    num_samples: int
    search_space: _space.SearchSpace
    searcher: PluginChoice
    scheduler: PluginChoice
    scaling: Scaling
    resources: Resources
    failure: FailureSettings
    checkpoint: CheckpointSettings
    aggregate: Aggregate
    storage_path: Path
    source: Path | None = field(default=None, compare=False)
    datasets: dict[str, str] = field(default_factory=dict)  # name -> "module:function" returning a ray.data.Dataset
    data: DataSettings = field(default_factory=DataSettings)
    tracking: Tracking = field(default_factory=Tracking)
    budget: Budget = field(default_factory=Budget)
    warm_start: WarmStart = field(default_factory=WarmStart)
    objectives: Objectives = ()  # every (metric, mode); () means ((metric, mode),)
    constraints: tuple[Constraint, ...] = ()  # bounds on reported metrics (spec/constraints.py)

    def __post_init__(self) -> None:
        object.__setattr__(self, "objectives", objectives_or_primary(self.metric, self.mode, self.objectives))

    @property
    def multi_objective(self) -> bool:
        """Whether the search has several objectives (``metric``/``mode`` given as lists)."""
        return is_multi_objective(self.objectives)

    @property
    def population_based(self) -> bool:
        """Whether the scheduler is population-based training (``pbt``, ``pb2``): trials exploit each
        other's checkpoints, so every report must carry one."""
        return self.scheduler.type in POPULATION_SCHEDULERS

    @property
    def scheduler_metric(self) -> tuple[str, str]:
        """The metric and mode the scheduler stops trials by: its own, else the primary objective's."""
        metric = getattr(self.scheduler.options, "metric", None) or self.metric
        mode = getattr(self.scheduler.options, "mode", None) or dict(self.objectives).get(metric, self.mode)
        return metric, mode

    @property
    def experiment_dir(self) -> Path:
        """``<storage_path>/<name>``: the one folder holding everything of this search."""
        return self.storage_path / self.name

    def load_trainable(self) -> Callable[[dict[str, Any]], Any]:
        """Import the train loop the spec names."""
        return load_callable(self.trainable)

    def trial_space(self) -> _space.SearchSpace:
        """What every searcher samples: ``search_space`` plus, when scaling values are searched, a ``scaling``
        group holding them (the trial's config then reads ``scaling.num_workers``, ``scaling.resources_per_worker.GPU``).
        Without searched scaling it is ``search_space`` itself."""
        return _space.trial_space(self.search_space, self.scaling.searched())

    def to_dict(self) -> dict[str, Any]:
        """The spec with every default filled in, as YAML-ready plain data."""

        def tree(node: _space.SearchSpace) -> dict[str, Any]:
            return {k: tree(v) if isinstance(v, dict) else v.model_dump(exclude_none=True) for k, v in node.items()}

        out: dict[str, Any] = {
            "name": self.name,
            "trainable": self.trainable,
            "metric": [m for m, _ in self.objectives] if self.multi_objective else self.metric,
            "mode": [d for _, d in self.objectives] if self.multi_objective else self.mode,
            "num_samples": self.num_samples,
            "search_space": tree(self.search_space),
            "searcher": self.searcher.as_dict(),
            "scheduler": self.scheduler.as_dict(),
            "scaling": self.scaling.model_dump(),
            "resources": self.resources.model_dump(),
            "failure": self.failure.model_dump(),
            "checkpoint": self.checkpoint.model_dump(),
            "aggregate": self.aggregate.model_dump(),
            "datasets": dict(self.datasets),
            "data": self.data.model_dump(),
            "tracking": self.tracking.model_dump(exclude_none=True),
            "budget": self.budget.model_dump(),
            "storage_path": str(self.storage_path),
        }
        if self.warm_start.enabled():  # written only when given: a spec without it reads as before
            out["warm_start"] = self.warm_start.to_dict()
        if self.constraints:  # likewise
            out["constraints"] = [c.to_dict() for c in self.constraints]
        return out


def total_trials(spec: Spec) -> int:
    """Trials the search will run: ``num_samples`` per grid point (with conditions, the grid
    combinations that can exist, :func:`hpsearch.spec.space.grid_points`)."""
    tree = spec.trial_space()
    if _space.is_conditional(tree):
        return spec.num_samples * len(_space.grid_points(tree))
    points = 1
    for _, param in _space.iter_params(tree):
        if isinstance(param, _space.GridParam):
            points *= len(param.values)
    return spec.num_samples * points


def varying_params(spec: Spec) -> list[str]:
    """Dotted names of the parameters that are searched (not constants)."""
    return _space.flat_space(spec.trial_space())[1]
