"""Loading a spec: :func:`load_spec` reads YAML (or a dict), applies ``--set`` overrides, and parses.

The parse runs every section's check in the order of the spec's keys and collects every problem,
then raises them together as one :class:`~hpsearch.errors.SpecError`, each with its YAML path; only
a spec with no problem becomes a :class:`~hpsearch.spec.Spec`. Each step below parses one part and
returns what it found and what is wrong; the checks across sections sit with the step that has both.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, PositiveInt

from hpsearch.errors import Problem, SpecError
from hpsearch.spec import space as _space
from hpsearch.spec._imports import load_callable, resolve_reference
from hpsearch.spec._storage import path_problems
from hpsearch.spec._validation import StrictModel, join_path, show, validate_section
from hpsearch.spec._yaml import long_int_problem, read_yaml
from hpsearch.spec.aggregate import Aggregate
from hpsearch.spec.budget import Budget, parse_budget
from hpsearch.spec.checkpoint import CheckpointSettings
from hpsearch.spec.constraints import Constraint, parse_constraints
from hpsearch.spec.datasets import DataSettings, parse_data, parse_datasets
from hpsearch.spec.failure import FailureSettings
from hpsearch.spec.model import Spec
from hpsearch.spec.objectives import Objectives, multi_objective_problems, parse_objectives
from hpsearch.spec.overrides import apply_overrides
from hpsearch.spec.plugins import SCHEDULERS, SEARCHERS, PluginChoice
from hpsearch.spec.population import population_problems
from hpsearch.spec.resources import Resources
from hpsearch.spec.scaling import Scaling
from hpsearch.spec.tracking import Tracking, parse_tracking
from hpsearch.spec.warm_start import WarmStart, parse_warm_start

__all__ = ["load_spec", "SPEC_KEYS"]

_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
#: The sections validated by one model each, in the spec's order.
_SECTIONS: tuple[tuple[str, type[StrictModel]], ...] = (
    ("scaling", Scaling),
    ("resources", Resources),
    ("failure", FailureSettings),
    ("checkpoint", CheckpointSettings),
    ("aggregate", Aggregate),
)
#: A top-level key's value: as :class:`_TopLevel` read it when the top level passed, else as written.
_Get = Callable[[str], Any]


class _TopLevel(StrictModel):
    name: str
    trainable: str
    metric: Any = Field()  # a name, or a list of names (multi-objective): checked by parse_objectives
    mode: Any = Field()
    num_samples: PositiveInt = 1
    search_space: Any = None
    searcher: Any = None
    scheduler: Any = None
    scaling: Any = None
    resources: Any = None
    failure: Any = None
    checkpoint: Any = None
    aggregate: Any = None
    datasets: Any = None
    data: Any = None
    tracking: Any = None
    budget: Any = None
    warm_start: Any = None
    constraints: Any = None
    storage_path: str = Field(default="./hpsearch-results", min_length=1)


#: Every top-level key a spec may hold.
SPEC_KEYS = tuple(_TopLevel.model_fields)


def load_spec(
    source: str | Path | Mapping[str, Any],
    *,
    overrides: Iterable[str] = (),
    check_trainable: bool = True,
) -> Spec:
    """Read and validate a spec.

    Args:
        source: A YAML file, or the same content as a dict.
        overrides: ``"dotted.path=value"`` strings, values parsed as YAML scalars
            (``"scaling.num_workers=2"``, ``"searcher.type=hyperopt"``).
        check_trainable: Import the trainable to check it exists and is callable.

    Returns:
        The validated :class:`Spec`. Relative ``storage_path`` is resolved against the
        current directory; a relative ``file.py:function`` trainable against the spec's folder.

    Raises:
        SpecError: Every problem found, each with its YAML path.

    Example:
        >>> spec = load_spec("search_spaces/digits_quick.yaml", overrides=["num_samples=4"])
        >>> spec.experiment_dir
        PosixPath('.../hpsearch-results/digits-quick')
    """
    if isinstance(source, Mapping):
        raw, origin, base_dir = copy.deepcopy(dict(source)), None, Path.cwd()
    else:
        path = Path(source).expanduser()
        origin, base_dir = path, path.resolve().parent
        raw = read_yaml(path)
        if raw is None:
            raw = {}
    where = str(origin) if origin else None
    if not isinstance(raw, Mapping):
        raise SpecError([Problem("", f"a spec must be a mapping of keys, got {show(raw)}")], source=where)
    bad_keys = [key for key in raw if not isinstance(key, str)]
    if bad_keys:
        raise SpecError([Problem("", f"a spec's keys must be strings, got {show(bad_keys[0])}")], source=where)
    too_long = long_int_problem(raw)  # before anything else reads a number: Python cannot even print some
    if too_long:
        raise SpecError([Problem(*too_long)], source=where)
    raw = apply_overrides(raw, overrides, source=where)
    spec = _parse(raw, base_dir=base_dir, origin=origin, check_trainable=check_trainable)
    return spec


def _key_order(path: str) -> int:
    """Where a top-level problem's key comes among :data:`SPEC_KEYS` (unknown keys last)."""
    head = re.split(r"[.\[]", path, maxsplit=1)[0]
    return SPEC_KEYS.index(head) if head in SPEC_KEYS else len(SPEC_KEYS)


def _parse(raw: Mapping[str, Any], *, base_dir: Path, origin: Path | None, check_trainable: bool) -> Spec:
    """Every part of ``raw`` parsed and checked, in the spec's key order; all problems raised together."""
    top, get, objectives, problems = _top_level(raw)
    tree, searcher, scheduler, found = _search(get)
    problems += found
    sections, found = _sections(get, tree, searcher)
    problems += found
    datasets, data, tracking, found = _data_and_tracking(get, base_dir, check_trainable)
    problems += found
    problems += _objective_rules(objectives, tree, searcher, scheduler, sections["resources"])
    constraints, budget, found = _constraints_and_budget(get, objectives, searcher)
    problems += found
    problems += _trainable_problems(get("trainable"), base_dir, check_trainable)
    storage_dir, found = _storage_dir(get("storage_path"), get("name"))
    problems += found
    warm_start, found = _warm_start(get, tree, base_dir, storage_dir, check_trainable)
    problems += found

    if problems:
        raise SpecError(problems, source=str(origin) if origin else None)
    assert top is not None and searcher is not None and scheduler is not None and storage_dir is not None
    assert data is not None and tracking is not None and budget is not None
    return Spec(
        name=top.name,
        trainable=resolve_reference(top.trainable, base_dir),
        metric=objectives[0][0],
        mode=objectives[0][1],
        objectives=objectives,
        num_samples=top.num_samples,
        search_space=tree,
        searcher=searcher,
        scheduler=scheduler,
        scaling=sections["scaling"],
        resources=sections["resources"],
        failure=sections["failure"],
        checkpoint=sections["checkpoint"],
        aggregate=sections["aggregate"],
        storage_path=storage_dir,
        source=origin,
        datasets=datasets,
        data=data,
        tracking=tracking,
        budget=budget,
        warm_start=warm_start or WarmStart(),
        constraints=constraints,
    )


def _top_level(raw: Mapping[str, Any]) -> tuple[_TopLevel | None, _Get, Objectives, list[Problem]]:
    """The top-level keys (and how to read each), the objectives (``metric``/``mode``) and the experiment's name."""
    top, problems = validate_section(_TopLevel, raw, "")
    get: _Get = (lambda key: getattr(top, key)) if top is not None else raw.get
    objectives: Objectives = ()
    if top is not None or ("metric" in raw and "mode" in raw):
        objectives, wrong = parse_objectives(get("metric"), get("mode"))
        # in the order of the keys, as if the top-level model had found them
        after = next((i for i, p in enumerate(problems) if _key_order(p.path) > SPEC_KEYS.index("mode")), len(problems))
        problems = [*problems[:after], *wrong, *problems[after:]]
    name = get("name")
    if isinstance(name, str) and not _NAME.match(name):
        problems.append(
            Problem("name", f"must use only letters, digits, '.', '_' and '-' and not start with '.', got {name!r}")
        )
    return top, get, objectives, problems


def _search(get: _Get) -> tuple[_space.SearchSpace, PluginChoice | None, PluginChoice | None, list[Problem]]:
    """The search space, the searcher and the scheduler."""
    tree, found = _space.parse_search_space(get("search_space"))
    problems = list(found)
    searcher, found = SEARCHERS.parse(get("searcher"), "searcher")
    problems += found
    scheduler, found = SCHEDULERS.parse(get("scheduler"), "scheduler")
    problems += found
    return tree, searcher, scheduler, problems


def _sections(
    get: _Get, tree: _space.SearchSpace, searcher: PluginChoice | None
) -> tuple[dict[str, Any], list[Problem]]:
    """Scaling, resources, failure, checkpoint and aggregate (``None`` each when invalid), then the checks
    across them: an elastic trial's drivers, searched scaling against the space and the searcher."""
    problems: list[Problem] = []
    sections: dict[str, Any] = {}
    for key, model in _SECTIONS:
        sections[key], found = validate_section(model, get(key), key)
        problems += found
    searched_scaling = sections["scaling"].searched() if sections["scaling"] is not None else {}
    problems += _elastic_problems(sections["scaling"], sections["resources"])
    problems += _scaling_group_problems(tree, searched_scaling)
    problems += _grid_problems(tree, searched_scaling, searcher)
    return sections, problems


def _scaling_group_problems(tree: _space.SearchSpace, searched_scaling: _space.SearchSpace) -> list[Problem]:
    """A search-space parameter named like the group that holds the searched scaling values clashes with it."""
    if not searched_scaling or _space.SCALING_GROUP not in tree:
        return []
    names = ", ".join(f"scaling.{n}" for n, _ in _space.iter_params(searched_scaling))
    return [
        Problem(
            join_path("search_space", _space.SCALING_GROUP),
            f"clashes with the searched scaling values: the trial's config holds {names} under "
            f"'{_space.SCALING_GROUP}'; rename this parameter",
        )
    ]


def _grid_problems(
    tree: _space.SearchSpace, searched_scaling: _space.SearchSpace, searcher: PluginChoice | None
) -> list[Problem]:
    """Grid values, in the space or the scaling, need a searcher that takes grids."""
    if searcher is None or SEARCHERS[searcher.type].accepts_grid:
        return []
    grid_names = [
        join_path(section, n)
        for section, space in (("search_space", tree), ("scaling", searched_scaling))
        for n, p in _space.iter_params(space)
        if isinstance(p, _space.GridParam)
    ]
    allowed = [p.name for p in SEARCHERS.plugins.values() if p.accepts_grid]
    return [
        Problem(
            grid_name,
            f"grid values need searcher {' or '.join(allowed)}; searcher '{searcher.type}' cannot "
            "take them (use type: choice)",
        )
        for grid_name in grid_names
    ]


def _data_and_tracking(
    get: _Get, base_dir: Path, check: bool
) -> tuple[dict[str, str], DataSettings | None, Tracking | None, list[Problem]]:
    """The ``datasets``, ``data`` and ``tracking`` sections."""
    datasets, found = parse_datasets(get("datasets"), base_dir, check=check)
    problems = list(found)
    data, found = parse_data(get("data"), datasets, datasets_given=get("datasets") is not None, check=check)
    problems += found
    tracking, found = parse_tracking(get("tracking"))
    problems += found
    return datasets, data, tracking, problems


def _objective_rules(
    objectives: Objectives,
    tree: _space.SearchSpace,
    searcher: PluginChoice | None,
    scheduler: PluginChoice | None,
    resources: Resources | None,
) -> list[Problem]:
    """The searcher and scheduler against the objectives, and a population-based scheduler against the rest."""
    return multi_objective_problems(objectives, searcher, scheduler) + population_problems(
        tree,
        searcher=searcher,
        scheduler=scheduler,
        objectives=objectives,
        driver_node=resources.driver_node if resources is not None else None,
    )


def _constraints_and_budget(
    get: _Get, objectives: Objectives, searcher: PluginChoice | None
) -> tuple[tuple[Constraint, ...], Budget | None, list[Problem]]:
    """The ``constraints`` (and a sampler that ignores them) and the ``budget`` (its targets by the primary
    objective)."""
    constraints, found = parse_constraints(get("constraints"))
    problems = list(found)
    if constraints and searcher is not None and getattr(searcher.options, "sampler", None) == "cmaes":
        problems.append(
            Problem(
                "searcher.sampler",
                "'cmaes' cannot search under constraints: Optuna's CmaEsSampler ignores them; "
                "use tpe, gp, nsga2 or nsga3 (or leave out constraints)",
            )
        )
    metric, mode = objectives[0] if objectives else (None, None)  # the primary objective
    budget, found = parse_budget(get("budget"), metric=metric, mode=mode)
    problems += found
    return constraints, budget, problems


def _trainable_problems(trainable: Any, base_dir: Path, check: bool) -> list[Problem]:
    """With ``check``, the trainable is imported: it must exist and be callable."""
    if not isinstance(trainable, str) or not check:
        return []
    try:
        load_callable(trainable, base_dir)
    except ValueError as err:
        return [Problem("trainable", str(err))]
    return []


def _storage_dir(storage: Any, name: Any) -> tuple[Path | None, list[Problem]]:
    """``storage_path`` resolved to a folder (``None`` when it cannot be), and what is wrong with it."""
    storage_dir, problems = None, []
    if isinstance(storage, str) and storage:
        try:
            storage_dir = Path(storage).expanduser().resolve()
        except RuntimeError as err:  # `~user/...` of no such user; a symlink loop
            problems.append(Problem("storage_path", f"cannot resolve {storage!r} to a folder: {err}"))
    if storage_dir is not None:
        found = path_problems(storage_dir, name if isinstance(name, str) and _NAME.match(name) else None)
        problems += found
        if not found and os.path.exists(storage_dir) and not os.path.isdir(storage_dir):
            problems.append(Problem("storage_path", f"must be a folder, but {storage!r} is a file"))
    return storage_dir, problems


def _warm_start(
    get: _Get, tree: _space.SearchSpace, base_dir: Path, storage_dir: Path | None, check: bool
) -> tuple[WarmStart | None, list[Problem]]:
    """The ``warm_start`` section, its points checked against the space and its ``from`` against the folders."""
    name, num_samples = get("name"), get("num_samples")
    return parse_warm_start(
        get("warm_start"),
        tree=tree,
        num_samples=num_samples if isinstance(num_samples, int) else None,
        base_dir=base_dir,
        own_dir=storage_dir / name if storage_dir is not None and isinstance(name, str) else None,
        check=check,
    )


def _elastic_problems(scaling: Scaling | None, resources: Resources | None) -> list[Problem]:
    """An elastic trial's drivers must be where hpsearch tells Ray they are: on the head node.

    Ray sizes an elastic worker group from each node's total resources less what the requests it knows
    of hold; hpsearch adds its trial drivers' share of the head node to those requests
    (:mod:`hpsearch.runtime.trial.driver`), which it can only do where it knows the drivers run.
    """
    if scaling is None or scaling.elastic is None or resources is None or resources.driver_node == "head":
        return []
    return [
        Problem(
            "resources.driver_node",
            f"must be 'head' for an elastic trial (scaling.num_workers: {{min: {scaling.elastic.min}, max: "
            f"{scaling.elastic.max}}}), got 'any': Ray sizes an elastic worker group from each node's total "
            "resources, and hpsearch can keep its trial drivers' share out of that count only on the node it "
            "pins them to",
        )
    ]
