"""The search spec: YAML (or a dict) in, a validated, typed :class:`Spec` out.

Every user mistake is caught here, before Ray starts: all problems of a spec are
collected and raised together as one :class:`~hpsearch.errors.SpecError`, each with
its YAML path, the bad value and what is allowed. The contract users write against is
the README's spec reference; keep it stable and extend it compatibly.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from hpsearch.errors import Problem, SpecError
from hpsearch.spec import space as _space
from hpsearch.spec._imports import load_callable, resolve_reference
from hpsearch.spec._storage import check_storage, path_problems
from hpsearch.spec._validation import StrictModel, field_error, join_path, show, validate_section
from hpsearch.spec._yaml import YamlError, parse_scalar, read_yaml
from hpsearch.spec.budget import Budget, parse_budget
from hpsearch.spec.datasets import DataSettings, parse_data, parse_datasets
from hpsearch.spec.plugins import SCHEDULERS, SEARCHERS, PluginChoice
from hpsearch.spec.tracking import Tracking, parse_tracking

__all__ = [
    "Spec",
    "Scaling",
    "Resources",
    "Failure",
    "CheckpointSettings",
    "Aggregate",
    "DataSettings",
    "Tracking",
    "Budget",
    "load_spec",
    "apply_overrides",
    "check_storage",
    "total_trials",
    "varying_params",
    "SPEC_KEYS",
]

_PLUGIN_KEYS = ("searcher", "scheduler")
_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
AggregateMethod = Literal["mean", "min", "max", "sum", "rank0"]


class Scaling(StrictModel):
    """Ray Train's ``ScalingConfig`` for each trial (Ray's own names)."""

    num_workers: PositiveInt = 1
    use_gpu: bool = False
    resources_per_worker: dict[str, float] | None = None
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"

    @model_validator(mode="after")
    def _check(self) -> Scaling:
        res = self.resources_per_worker or {}
        for key, amount in res.items():
            if amount < 0:
                raise field_error(f"resources_per_worker.{key}", f"must be >= 0, got {amount!r}")
        gpus = res.get("GPU", 0)
        if gpus > 1 and gpus != int(gpus):
            raise field_error(
                "resources_per_worker.GPU", f"must be a fraction of one GPU or a whole number of GPUs, got {gpus!r}"
            )
        if res.get("GPU", 0) > 0 and not self.use_gpu:
            raise field_error("use_gpu", "must be true when resources_per_worker asks for GPU")
        if res and not any(v > 0 for v in res.values()):
            raise field_error("resources_per_worker", f"must ask for some resource (e.g. {{CPU: 1}}), got {res}")
        return self

    def worker_bundle(self) -> dict[str, float]:
        """The resources one Train worker reserves, as Ray Train computes them."""
        if self.resources_per_worker:
            bundle = {k: float(v) for k, v in self.resources_per_worker.items() if v > 0}
            if self.use_gpu and "GPU" not in self.resources_per_worker:
                bundle["GPU"] = 1.0
            return bundle
        return {"CPU": 1.0, "GPU": 1.0} if self.use_gpu else {"CPU": 1.0}


class Resources(StrictModel):
    """What hpsearch reserves for the trial driver, and how many trials may run at once."""

    driver_cpus: PositiveFloat = 0.25
    max_concurrent_trials: Literal["auto"] | PositiveInt = "auto"
    driver_node: Literal["head", "any"] = "head"
    driver_memory_gb: float = Field(default=1.5, ge=0)
    worker_memory_gb: float = Field(default=0.7, ge=0)


class Failure(StrictModel):
    """Retries, kept apart by level, each bounded so that a bug fails fast instead of looping."""

    worker_retries: int = Field(default=1, ge=0)
    trial_retries: int = Field(default=0, ge=0)
    controller_retries: int = Field(default=2, ge=0)
    worker_start_timeout_s: PositiveFloat = 60.0


class CheckpointSettings(StrictModel):
    """Ray Train's ``CheckpointConfig`` for each trial's nested run."""

    num_to_keep: PositiveInt | None = 2


class Aggregate(StrictModel):
    """How each reported metric is combined across a trial's workers before Tune sees it."""

    default: AggregateMethod = "mean"
    metrics: dict[str, AggregateMethod] = Field(default_factory=dict)

    def method(self, metric: str) -> str:
        return self.metrics.get(metric, self.default)


class _TopLevel(StrictModel):
    name: str
    trainable: str
    metric: str = Field(min_length=1)
    mode: Literal["min", "max"]
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
    storage_path: str = Field(default="./hpsearch-results", min_length=1)


#: Every top-level key a spec may hold.
SPEC_KEYS = tuple(_TopLevel.model_fields)


@dataclass(frozen=True)
class Spec:
    """A validated search spec. Build one with :func:`load_spec`."""

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
    failure: Failure
    checkpoint: CheckpointSettings
    aggregate: Aggregate
    storage_path: Path
    source: Path | None = field(default=None, compare=False)
    datasets: dict[str, str] = field(default_factory=dict)  # name -> "module:function" returning a ray.data.Dataset
    data: DataSettings = field(default_factory=DataSettings)
    tracking: Tracking = field(default_factory=Tracking)
    budget: Budget = field(default_factory=Budget)

    @property
    def experiment_dir(self) -> Path:
        """``<storage_path>/<name>``: the one folder holding everything of this search."""
        return self.storage_path / self.name

    def load_trainable(self) -> Callable[[dict[str, Any]], Any]:
        """Import the train loop the spec names."""
        return load_callable(self.trainable)

    def to_dict(self) -> dict[str, Any]:
        """The spec with every default filled in, as YAML-ready plain data."""

        def tree(node: _space.SearchSpace) -> dict[str, Any]:
            return {k: tree(v) if isinstance(v, dict) else v.model_dump(exclude_none=True) for k, v in node.items()}

        return {
            "name": self.name,
            "trainable": self.trainable,
            "metric": self.metric,
            "mode": self.mode,
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
    raw = apply_overrides(raw, overrides, source=where)
    spec = _parse(raw, base_dir=base_dir, origin=origin, check_trainable=check_trainable)
    return spec


def apply_overrides(raw: Mapping[str, Any], overrides: Iterable[str], *, source: str | None = None) -> dict[str, Any]:
    """Return a copy of ``raw`` with each ``dotted.path=value`` set (values read as YAML).

    A problem with an override itself is reported under ``--set <the override>``.
    """
    out = copy.deepcopy(dict(raw))
    problems = []
    for item in overrides:
        flag = f"--set {item if len(item) <= 60 else item[:57] + '...'}"
        key, eq, text = item.partition("=")
        parts = key.strip().split(".")
        if not eq or not key.strip():
            problems.append(Problem(flag, "must be KEY=VALUE with a dotted KEY, e.g. --set scaling.num_workers=2"))
            continue
        if not all(parts):
            problems.append(
                Problem(flag, f"the key {key.strip()!r} has an empty part; write a dotted key like scaling.num_workers")
            )
            continue
        try:
            value = parse_scalar(text)
        except YamlError as err:
            problems.append(Problem(flag, str(err)))
            continue
        node: Any = out
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif i == 0 and part in _PLUGIN_KEYS and isinstance(child, str):
                child = node[part] = {"type": child}  # `scheduler: asha` is shorthand for {type: asha}
            if not isinstance(child, dict):
                where = join_path(*parts[: i + 1])
                problems.append(Problem(flag, f"cannot set {key.strip()}: {where} holds {show(child)}, not a mapping"))
                break
            node = child
        else:
            node[parts[-1]] = value
    if problems:
        raise SpecError(problems, source=source)
    return out


def _parse(raw: Mapping[str, Any], *, base_dir: Path, origin: Path | None, check_trainable: bool) -> Spec:
    problems: list[Problem] = []
    top, found = validate_section(_TopLevel, raw, "")
    problems += found

    def get(key: str) -> Any:
        return getattr(top, key) if top else raw.get(key)

    name = get("name")
    if isinstance(name, str) and not _NAME.match(name):
        problems.append(
            Problem("name", f"must use only letters, digits, '.', '_' and '-' and not start with '.', got {name!r}")
        )

    tree, found = _space.parse_search_space(get("search_space"))
    problems += found
    searcher, found = SEARCHERS.parse(get("searcher"), "searcher")
    problems += found
    scheduler, found = SCHEDULERS.parse(get("scheduler"), "scheduler")
    problems += found
    sections: dict[str, Any] = {}
    for key, model in (
        ("scaling", Scaling),
        ("resources", Resources),
        ("failure", Failure),
        ("checkpoint", CheckpointSettings),
        ("aggregate", Aggregate),
    ):
        sections[key], found = validate_section(model, get(key), key)
        problems += found

    if searcher is not None and not SEARCHERS[searcher.type].accepts_grid:
        grid_names = [n for n, p in _space.iter_params(tree) if isinstance(p, _space.GridParam)]
        allowed = [p.name for p in SEARCHERS.plugins.values() if p.accepts_grid]
        for grid_name in grid_names:
            problems.append(
                Problem(
                    join_path("search_space", grid_name),
                    f"grid values need searcher {' or '.join(allowed)}; searcher '{searcher.type}' cannot "
                    "take them (use type: choice)",
                )
            )

    datasets, found = parse_datasets(get("datasets"), base_dir, check=check_trainable)
    problems += found
    data, found = parse_data(get("data"), datasets, datasets_given=get("datasets") is not None, check=check_trainable)
    problems += found
    tracking, found = parse_tracking(get("tracking"))
    problems += found
    metric, mode = get("metric"), get("mode")
    budget, found = parse_budget(
        get("budget"), metric=metric if isinstance(metric, str) else None, mode=mode if mode in ("min", "max") else None
    )
    problems += found

    trainable = get("trainable")
    if isinstance(trainable, str) and check_trainable:
        try:
            load_callable(trainable, base_dir)
        except ValueError as err:
            problems.append(Problem("trainable", str(err)))

    storage, storage_dir = get("storage_path"), None
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

    if problems:
        raise SpecError(problems, source=str(origin) if origin else None)
    assert top is not None and searcher is not None and scheduler is not None and storage_dir is not None
    assert data is not None and tracking is not None and budget is not None
    return Spec(
        name=top.name,
        trainable=resolve_reference(top.trainable, base_dir),
        metric=top.metric,
        mode=top.mode,
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
    )


def total_trials(spec: Spec) -> int:
    """Trials the search will run: ``num_samples`` per grid point."""
    points = 1
    for _, param in _space.iter_params(spec.search_space):
        if isinstance(param, _space.GridParam):
            points *= len(param.values)
    return spec.num_samples * points


def varying_params(spec: Spec) -> list[str]:
    """Dotted names of the parameters that are searched (not constants)."""
    return [name for name, p in _space.iter_params(spec.search_space) if not isinstance(p, _space.ConstParam)]
