"""Population-based training (``scheduler: pbt`` / ``pb2``) checked against the rest of the spec.

The scheduler's own options are validated by its model in :mod:`hpsearch.spec.plugins`; what
needs the other sections is checked here, each problem with its YAML path:

- every mutated key (``hyperparam_mutations``, ``hyperparam_bounds``) names a parameter of
  ``search_space``, of a type the mutation can take (numbers for ``float``/``int`` and PB2's bounds);
- PBT's mutations are ``float``, ``int`` or ``choice`` distributions, without ``when``;
- PB2's bounds hold the search space's own range (PB2 models the population inside them);
- the searcher is ``random``: PBT changes a trial's config while it trains, so a model-based
  searcher would learn from configs that no trial ran from start to end;
- one objective (PBT ranks the population on one number);
- trial drivers on the head node (the population takes turns through the head's driver slots);
- PB2's optional dependencies are installed, or the message gives the pip line.

Whether the loop checkpoints is known only when it reports: a report without a checkpoint
fails its trial with :class:`~hpsearch.errors.CheckpointNotReportedError`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from hpsearch.errors import Problem, did_you_mean
from hpsearch.spec import space as _space
from hpsearch.spec._validation import join_path, show
from hpsearch.spec.objectives import is_multi_objective
from hpsearch.spec.plugins import POPULATION_SCHEDULERS, PluginChoice

__all__ = ["population_problems", "PB2_INSTALL", "PB2_MODULES", "pb2_missing"]

#: What installs PB2's optional dependencies.
PB2_INSTALL = 'pip install "hpsearch[pb2]"'


#: What Ray's PB2 imports beyond Ray (its Gaussian process is scikit-learn's, its optimiser SciPy's):
#: module -> the package that provides it.
PB2_MODULES = {"sklearn": "scikit-learn", "scipy": "scipy"}


def pb2_missing() -> list[str]:
    """The packages PB2 needs that are not installed."""
    return [package for module, package in PB2_MODULES.items() if importlib.util.find_spec(module) is None]


def population_problems(
    tree: _space.SearchSpace,
    *,
    searcher: PluginChoice | None,
    scheduler: PluginChoice | None,
    objectives: tuple[tuple[str, str], ...],
    driver_node: str | None,
) -> list[Problem]:
    """Every problem of a ``pbt``/``pb2`` scheduler against the rest of the spec (none for other schedulers)."""
    if scheduler is None or scheduler.type not in POPULATION_SCHEDULERS:
        return []
    kind = scheduler.type
    problems: list[Problem] = []
    if kind == "pb2":
        missing = pb2_missing()
        if missing:
            problems.append(
                Problem("scheduler.type", f"pb2 needs {' and '.join(missing)}, not installed: {PB2_INSTALL}")
            )
    params = dict(_space.iter_params(tree))
    if kind == "pbt":
        problems += _mutation_problems(getattr(scheduler.options, "hyperparam_mutations", {}), params)
    else:
        problems += _bounds_problems(getattr(scheduler.options, "hyperparam_bounds", {}), params)
    if searcher is not None and searcher.type != "random":
        problems.append(
            Problem(
                "searcher.type",
                f"must be 'random' with scheduler {kind!r}, got {searcher.type!r}: {kind} changes each trial's "
                "config while it trains, so a model-based searcher would learn from configs no trial ran whole "
                "(leave searcher out, or set type: random)",
            )
        )
    if is_multi_objective(objectives):
        problems.append(
            Problem(
                "metric",
                f"scheduler {kind!r} takes one objective ({kind} ranks the population on one number), "
                f"got {len(objectives)}: {', '.join(m for m, _ in objectives)}",
            )
        )
    if driver_node == "any":
        problems.append(
            Problem(
                "resources.driver_node",
                f"must be 'head' with scheduler {kind!r}, got 'any': the population takes turns through the "
                "head node's trial-driver slots",
            )
        )
    return problems


def _where(path: str, name: str, params: Mapping[str, _space.Param]) -> Problem:
    return Problem(
        path,
        f"is not a parameter of search_space{did_you_mean(name, list(params))} "
        f"(search_space has: {', '.join(params) or 'nothing'})",
    )


def _numbers(param: _space.Param) -> bool:
    """Whether a search-space parameter holds only numbers (what a numeric mutation can change)."""
    if isinstance(param, (_space.FloatParam, _space.IntParam)):
        return True
    values = [param.value] if isinstance(param, _space.ConstParam) else list(param.values)
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _mutation_problems(raw: Mapping[str, Any], params: Mapping[str, _space.Param]) -> list[Problem]:
    base = "scheduler.hyperparam_mutations"
    mutations, problems = _space.parse_search_space(dict(raw), base)
    if problems:
        return problems
    for name, mutation in _space.iter_params(mutations):
        path = join_path(base, name)
        if isinstance(mutation, (_space.GridParam, _space.ConstParam)) or mutation.when is not None:
            what = "has a 'when' condition" if mutation.when is not None else f"is of type {mutation.type!r}"
            problems.append(Problem(path, f"must be a float, int or choice distribution without 'when'; it {what}"))
            continue
        param = params.get(name)
        if param is None:
            problems.append(_where(path, name, params))
        elif isinstance(mutation, (_space.FloatParam, _space.IntParam)) and not _numbers(param):
            problems.append(
                Problem(
                    path,
                    f"is a {mutation.type} mutation, but search_space.{name} holds other values than numbers "
                    f"({show(getattr(param, 'values', getattr(param, 'value', None)))}); use type: choice",
                )
            )
    return problems


def _bounds_problems(bounds: Mapping[str, list[float]], params: Mapping[str, _space.Param]) -> list[Problem]:
    problems: list[Problem] = []
    for name, pair in bounds.items():
        low, high = pair
        path = join_path("scheduler.hyperparam_bounds", name)
        param = params.get(name)
        if param is None:
            problems.append(_where(path, name, params))
            continue
        if not _numbers(param):
            problems.append(Problem(path, f"PB2 models numbers only, but search_space.{name} is a {param.type}"))
            continue
        if isinstance(param, (_space.FloatParam, _space.IntParam)):
            span = (param.low, param.high)
        else:
            values = [param.value] if isinstance(param, _space.ConstParam) else list(param.values)
            span = (min(values), max(values))
        if span[0] < low or span[1] > high:
            problems.append(
                Problem(
                    path,
                    f"must hold search_space.{name}'s range [{span[0]}, {span[1]}] (PB2 models the population "
                    f"inside its bounds), got [{low}, {high}]",
                )
            )
    return problems
