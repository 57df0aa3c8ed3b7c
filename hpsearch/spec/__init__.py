"""The search spec: YAML (or a dict) in, a validated, typed :class:`Spec` out.

Every user mistake is caught here, before Ray starts: all problems of a spec are
collected and raised together as one :class:`~hpsearch.errors.SpecError`, each with
its YAML path, the bad value and what is allowed. The contract users write against is
the README's spec reference; keep it stable and extend it compatibly.
"""

from __future__ import annotations

import copy
import itertools
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    TypeAdapter,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from hpsearch.errors import Problem, SpecError
from hpsearch.spec import space as _space
from hpsearch.spec._imports import load_callable, resolve_reference
from hpsearch.spec._storage import check_storage, path_problems
from hpsearch.spec._validation import StrictModel, field_error, join_path, show, validate_section
from hpsearch.spec._yaml import YamlError, parse_scalar, read_yaml
from hpsearch.spec.budget import Budget, parse_budget
from hpsearch.spec.constraints import Constraint, parse_constraints
from hpsearch.spec.datasets import DataSettings, parse_data, parse_datasets
from hpsearch.spec.plugins import POPULATION_SCHEDULERS, SCHEDULERS, SEARCHERS, PluginChoice
from hpsearch.spec.population import population_problems
from hpsearch.spec.tracking import Tracking, parse_tracking
from hpsearch.spec.warm_start import WarmStart, parse_warm_start

__all__ = [
    "Spec",
    "Scaling",
    "ElasticWorkers",
    "Resources",
    "Failure",
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

_PLUGIN_KEYS = ("searcher", "scheduler")
#: The group of the trial's config that holds its searched scaling values (see :meth:`Spec.trial_space`).
SCALING_GROUP = "scaling"
_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
AggregateMethod = Literal["mean", "min", "max", "sum", "rank0"]


#: The distributions a scaling value may be searched with: a finite list, so the planner can place every value.
SEARCHED_SCALING = ("choice", "grid")
_Searched = _space.ChoiceParam | _space.GridParam
_SEARCHED_TYPES = (_space.ChoiceParam, _space.GridParam)
_POSITIVE_INT: TypeAdapter[int] = TypeAdapter(PositiveInt)
_AMOUNTS: TypeAdapter[dict[str, float]] = TypeAdapter(
    dict[str, Annotated[float, Field(allow_inf_nan=False)]], config=ConfigDict(strict=True)
)


def _searched_values(raw: Mapping[str, Any], check: Callable[[Any], str | None]) -> _Searched:
    """A ``{type: choice|grid, values: [...]}`` scaling value, each value checked (``check``: what is wrong, or None)."""
    kind = raw.get("type")
    if kind not in SEARCHED_SCALING:
        raise ValueError(
            f"@type: a scaling value can be searched with type choice or grid only, got {show(kind)}: the planner "
            "places every value a trial may get before the search starts, so it needs a finite list of them"
        )
    param: _Searched | None
    if kind == "choice":
        param, found = validate_section(_space.ChoiceParam, raw, "")
    else:
        param, found = validate_section(_space.GridParam, raw, "")
    if param is None:
        raise ValueError(f"@{found[0].path}: {found[0].message}")
    if getattr(param, "when", None) is not None:
        raise ValueError("@when: a scaling value cannot be conditional: every trial runs some number of workers")
    for i, value in enumerate(param.values):
        wrong = check(value)
        if wrong is not None:
            raise ValueError(f"@values[{i}]: {wrong}, got {show(value)}")
    return param


def _worker_count(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return "must be a whole number of workers"
    return None if value >= 1 else "must be at least 1 (Ray Train runs at least one worker)"


def _amount_check(key: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "must be a number"
        if not math.isfinite(value):
            return "must be a finite number"
        if value < 0:
            return "must be >= 0"
        if key == "GPU" and value > 1 and value != int(value):
            return "must be a fraction of one GPU or a whole number of GPUs"
        return None

    return check


def _values(value: Any) -> list[Any]:
    """A scaling value's possible values: a searched one's list, a constant as a list of one."""
    return list(value.values) if isinstance(value, _SEARCHED_TYPES) else [value]


#: Placement strategies Ray 2.58-2.60 cannot size an elastic worker group for: its elastic policy counts the
#: workers that fit on every node together (``ElasticScalingPolicy._count_possible_workers``), and its
#: resource requests carry no strategy (``TrainAutoscalingCoordinatorClient.send_resource_request``).
ELASTIC_REFUSED_STRATEGIES = ("STRICT_PACK", "STRICT_SPREAD")


class ElasticWorkers(StrictModel):
    """``num_workers: {min: 2, max: 8}``: an elastic trial, Ray Train's ``ScalingConfig(num_workers=(2, 8))``.

    Ray starts the trial with as many workers as it finds room for, at least ``min``, and restarts
    its worker group with more (up to ``max``) when room appears: every restart continues from the
    trial's latest checkpoint.
    """

    min: int
    max: int

    @field_validator("min", "max", mode="before")
    @classmethod
    def _count(cls, value: Any) -> Any:
        wrong = _worker_count(value)
        if wrong is not None:
            raise ValueError(wrong)
        return value

    @model_validator(mode="after")
    def _check(self) -> ElasticWorkers:
        if self.max < self.min:
            raise field_error("max", f"must be at least min ({self.min}), got {self.max}")
        return self

    def __str__(self) -> str:
        return f"{self.min}..{self.max}"


_ELASTIC_FORM = "{min: N, max: M} (an elastic trial)"
_SEARCHED_FORM = "{type: choice|grid, values: [...]} (a searched number of workers)"


def _elastic_workers(raw: Mapping[str, Any]) -> ElasticWorkers:
    """``{min: N, max: M}``, each problem raised with its key (``@min: ...``)."""
    if not any(key in raw for key in ("min", "max")):
        raise ValueError(f"must be a whole number, {_ELASTIC_FORM} or {_SEARCHED_FORM}")
    elastic, found = validate_section(ElasticWorkers, raw, "")
    if elastic is None:
        raise ValueError(f"@{found[0].path}: {found[0].message}")
    return elastic


class Scaling(StrictModel):
    """Ray Train's ``ScalingConfig`` for each trial (Ray's own names).

    ``num_workers`` and each amount of ``resources_per_worker`` may be searched, as
    ``{type: choice|grid, values: [...]}``. Three methods then help:

    - :meth:`searched` is the tree the search samples. The trial's config holds it under
      ``scaling``.
    - :meth:`for_trial` is a trial's own constant scaling.
    - :meth:`largest` is the combination that every other one fits inside: each value at its
      largest. This works because the values form a cartesian product, and a trial's demand
      grows with each of them.

    ``num_workers`` may instead be elastic, ``{min: 2, max: 8}`` (:class:`ElasticWorkers`, Ray's
    ``num_workers=(2, 8)``): every trial then starts with what Ray finds room for and grows when
    room appears. :attr:`elastic` is that range, :attr:`planned_workers` its minimum (what the
    planner counts) and :attr:`workers` its maximum.
    """

    num_workers: PositiveInt | _space.ChoiceParam | _space.GridParam | ElasticWorkers = 1
    use_gpu: bool = False
    resources_per_worker: dict[str, float | _space.ChoiceParam | _space.GridParam] | None = None
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"
    #: Elastic trials only: how often Ray Train considers resizing a healthy worker group
    #: (``ScalingConfig.elastic_resize_monitor_interval_s``; Ray's default, 60 s, when unset).
    resize_interval_s: PositiveFloat | None = None

    @field_validator("num_workers", mode="wrap")
    @classmethod
    def _num_workers(cls, value: Any, handler: Callable[[Any], Any]) -> Any:
        if isinstance(value, Mapping):
            if "type" in value:
                return _searched_values(value, _worker_count)
            return _elastic_workers(value)
        if isinstance(value, (list, tuple)):
            low, high = (value[0], value[-1]) if value else ("N", "M")
            raise ValueError(
                f"must be a whole number of workers, not a list: write {{min: {low}, max: {high}}} for an elastic "
                f"trial (Ray's num_workers=({low}, {high})), or {{type: choice, values: {list(value)}}} to search it"
            )
        return _POSITIVE_INT.validate_python(value, strict=True)

    @field_validator("resources_per_worker", mode="wrap")
    @classmethod
    def _resources(cls, value: Any, handler: Callable[[Any], Any]) -> Any:
        if not isinstance(value, Mapping):
            return handler(value)
        out: dict[str, Any] = _AMOUNTS.validate_python({k: v for k, v in value.items() if not isinstance(v, Mapping)})
        for key, amount in value.items():
            if isinstance(amount, Mapping):
                try:
                    out[key] = _searched_values(amount, _amount_check(str(key)))
                except ValueError as err:  # the path inside the amount, under its key
                    raise ValueError(f"@{key}.{str(err).removeprefix('@')}") from None
        return {key: out[key] for key in value}  # the spec's order

    @field_serializer("num_workers")
    def _dump_workers(self, value: Any) -> Any:
        return value.model_dump(exclude_none=True) if isinstance(value, (*_SEARCHED_TYPES, ElasticWorkers)) else value

    @model_serializer(mode="wrap")
    def _dump(self, handler: Callable[[Scaling], dict[str, Any]]) -> dict[str, Any]:
        out = handler(self)
        if out.get("resize_interval_s") is None:  # written only when set: a spec without it reads as before
            out.pop("resize_interval_s", None)
        return out

    @field_serializer("resources_per_worker")
    def _dump_resources(self, value: Any) -> Any:
        if value is None:
            return None
        return {k: v.model_dump(exclude_none=True) if isinstance(v, _SEARCHED_TYPES) else v for k, v in value.items()}

    @model_validator(mode="after")
    def _check(self) -> Scaling:
        if self.resize_interval_s is not None and self.elastic is None:
            raise field_error(
                "resize_interval_s",
                f"applies only to an elastic trial (num_workers: {{min: N, max: M}}), but num_workers is "
                f"{show(self._dump_workers(self.num_workers))}; remove it",
            )
        if self.elastic is not None and self.placement_strategy in ELASTIC_REFUSED_STRATEGIES:
            raise field_error(
                "placement_strategy",
                f"must be PACK or SPREAD for an elastic trial (num_workers: {{min, max}}), got "
                f"{self.placement_strategy!r}: Ray sizes an elastic worker group by the workers that fit on all "
                "nodes together, so a group that must sit on one node (STRICT_PACK) or one worker per node "
                "(STRICT_SPREAD) can be sized beyond what that allows, and then never starts",
            )
        res = self.resources_per_worker or {}
        if self.elastic is not None:
            for gpus in _values(res.get("GPU", 0)):
                if 0 < gpus < 1 and abs(round(1 / gpus) * gpus - 1) > 1e-9:
                    n = next(n for n in range(1, 100) if math.floor(n / gpus + 1e-9) > n * math.floor(1 / gpus))
                    raise field_error(
                        "resources_per_worker.GPU",
                        f"must divide one GPU evenly for an elastic trial (0.5, 0.25, 0.2, ...), got {gpus!r}: Ray "
                        f"counts an elastic group's workers by dividing a node's GPUs by it ({math.floor(n / gpus + 1e-9)}"
                        f" on {n} GPUs) but places them per GPU ({n * math.floor(1 / gpus)}), and a group sized beyond "
                        "what it can place never starts",
                    )
        for key, amount in res.items():
            if not isinstance(amount, _SEARCHED_TYPES) and amount < 0:
                raise field_error(f"resources_per_worker.{key}", f"must be >= 0, got {amount!r}")
        gpus = res.get("GPU", 0)
        if not isinstance(gpus, _SEARCHED_TYPES) and gpus > 1 and gpus != int(gpus):
            raise field_error(
                "resources_per_worker.GPU", f"must be a fraction of one GPU or a whole number of GPUs, got {gpus!r}"
            )
        if max(_values(gpus)) > 0 and not self.use_gpu:
            raise field_error("use_gpu", "must be true when resources_per_worker asks for GPU")
        if res and not any(max(_values(v)) > 0 for v in res.values()):
            raise field_error("resources_per_worker", f"must ask for some resource (e.g. {{CPU: 1}}), got {res}")
        if res and self.searched() and not any(min(_values(v)) > 0 for v in res.values()):
            smallest = {k: min(_values(v)) for k, v in res.items()}
            raise field_error(
                "resources_per_worker",
                f"must ask for some resource in every combination of the searched values, but a trial could get "
                f"{smallest} (nothing)",
            )
        return self

    def searched(self) -> _space.SearchSpace:
        """The searched values as a search-space tree (``num_workers``, ``resources_per_worker.<R>``); ``{}`` if none."""
        tree: _space.SearchSpace = {}
        if isinstance(self.num_workers, _SEARCHED_TYPES):
            tree["num_workers"] = self.num_workers
        amounts: _space.SearchSpace = {
            k: v for k, v in (self.resources_per_worker or {}).items() if isinstance(v, _SEARCHED_TYPES)
        }
        if amounts:
            tree["resources_per_worker"] = amounts
        return tree

    @property
    def elastic(self) -> ElasticWorkers | None:
        """The elastic range (``num_workers: {min, max}``), or ``None`` for a fixed or searched number."""
        return self.num_workers if isinstance(self.num_workers, ElasticWorkers) else None

    def _with(self, num_workers: int | ElasticWorkers, amounts: Mapping[str, float]) -> Scaling:
        """A constant scaling with these values (already validated); a searched GPU of 0 asks for no GPU."""
        res: dict[str, float] = {k: amounts[k] for k in (self.resources_per_worker or {}) if k in amounts}
        res.update({k: v for k, v in (self.resources_per_worker or {}).items() if isinstance(v, (int, float))})
        res = {k: res[k] for k in (self.resources_per_worker or {})}  # the spec's order
        gpu_searched = isinstance((self.resources_per_worker or {}).get("GPU"), _SEARCHED_TYPES)
        use_gpu = self.use_gpu and (not gpu_searched or res.get("GPU", 0) > 0)  # Ray adds 1 GPU to use_gpu workers
        return self.model_copy(update={"num_workers": num_workers, "resources_per_worker": res, "use_gpu": use_gpu})

    def for_trial(self, config: Mapping[str, Any] | None) -> Scaling:
        """A trial's own scaling: the searched values as its config holds them (``config["scaling"]``).

        Raises:
            ValueError: The config lacks a searched value, or holds one the spec does not list.
        """
        searched = self.searched()
        if not searched:
            return self
        chosen = (config or {}).get("scaling")
        chosen = chosen if isinstance(chosen, Mapping) else {}
        picked: dict[str, Any] = {}
        for name, param in _space.iter_params(searched):
            node: Any = chosen
            for part in name.split("."):
                node = node.get(part) if isinstance(node, Mapping) else None
            allowed = list(param.values)  # type: ignore[union-attr]  # searched: choice or grid
            if node is None or node not in allowed:
                raise ValueError(f"the trial's config holds scaling.{name}={node!r}, not one of the searched {allowed}")
            picked[name] = node
        return self.with_values(picked)

    def with_values(self, picked: Mapping[str, Any]) -> Scaling:
        """The constant scaling with these searched values (dotted names: ``num_workers``,
        ``resources_per_worker.GPU``); a searched value not in ``picked`` is taken at its largest."""
        largest = self.largest()
        workers = picked.get("num_workers", largest.num_workers)
        amounts = {**(largest.resources_per_worker or {})}
        amounts.update({k.removeprefix("resources_per_worker."): v for k, v in picked.items() if k != "num_workers"})
        workers = workers if isinstance(workers, ElasticWorkers) else int(workers)
        return self._with(workers, amounts)  # type: ignore[arg-type]  # constants once picked

    def combinations(self) -> list[Scaling]:
        """Every constant scaling a trial can get, in the order of the values (one: itself, when nothing is
        searched). An elastic trial can run any number of workers from its minimum to its maximum: one each."""
        if not self.searched() and self.elastic is None:
            return [self]
        res = self.resources_per_worker or {}
        keys = [k for k, v in res.items() if isinstance(v, _SEARCHED_TYPES)]
        counts = range(self.elastic.min, self.elastic.max + 1) if self.elastic else _values(self.num_workers)
        out = []
        for workers in counts:
            for amounts in itertools.product(*(_values(res[k]) for k in keys)):
                out.append(self._with(int(workers), dict(zip(keys, amounts))))
        return out

    def largest(self) -> Scaling:
        """The combination with every searched value at its largest: every trial of the search fits inside it.
        An elastic number of workers stays elastic (its maximum is :attr:`workers`)."""
        if not self.searched():
            return self
        res = self.resources_per_worker or {}
        amounts = {k: max(v.values) for k, v in res.items() if isinstance(v, _SEARCHED_TYPES)}
        return self._with(self.elastic or int(max(_values(self.num_workers))), amounts)

    @property
    def workers(self) -> int:
        """The most workers a trial runs (searched: the largest trial's; elastic: its maximum)."""
        largest = self.largest().num_workers
        return largest.max if isinstance(largest, ElasticWorkers) else int(largest)  # type: ignore[arg-type]  # constant once largest

    @property
    def planned_workers(self) -> int:
        """The workers the planner counts per trial: :attr:`workers`, or an elastic trial's minimum."""
        return self.elastic.min if self.elastic else self.workers

    def worker_bundle(self) -> dict[str, float]:
        """The resources one Train worker reserves, as Ray Train computes them (searched: the largest trial's)."""
        if self.searched():
            return self.largest().worker_bundle()
        if self.resources_per_worker:
            bundle = {k: float(v) for k, v in self.resources_per_worker.items() if v > 0}  # type: ignore[arg-type,operator]  # constant
            if self.use_gpu and "GPU" not in self.resources_per_worker:
                bundle["GPU"] = 1.0
            return bundle
        return {"CPU": 1.0, "GPU": 1.0} if self.use_gpu else {"CPU": 1.0}


class Resources(StrictModel):
    """What hpsearch reserves for the trial driver, and how many trials may run at once."""

    driver_cpus: PositiveFloat = 0.25
    max_concurrent_trials: Literal["auto"] | PositiveInt = "auto"
    driver_node: Literal["head", "any"] = "head"
    driver_memory_gb: float = Field(default=1.0, ge=0)
    worker_memory_gb: float = Field(default=0.7, ge=0)
    #: Run the next trial in a finished trial's driver actor (Tune's ``reuse_actors``), which saves
    #: starting a process per trial; the previous nested run is ended first (runtime/reuse.py).
    reuse_actors: bool = True


class Failure(StrictModel):
    """Retries, kept apart by level, each bounded so that a bug fails fast instead of looping."""

    worker_retries: int = Field(default=1, ge=0)
    trial_retries: int = Field(default=0, ge=0)
    controller_retries: int = Field(default=2, ge=0)
    worker_start_timeout_s: PositiveFloat = 60.0
    #: On an autoscaling cluster (``run --cluster`` with ``min..max`` counts): how long a worker group
    #: may wait for a node the autoscaler starts, in place of ``worker_start_timeout_s`` when longer.
    #: 900 s is how long Ray's own autoscaler waits for a node to start (``AUTOSCALER_NODE_START_WAIT_S``).
    node_start_timeout_s: PositiveFloat = 900.0
    #: A trial that sends no report for this long is ended and recorded as stalled, naming the ranks
    #: that reached the report in progress and those that did not. Off (``None``) by default: a long
    #: first epoch or a long evaluation every few epochs must never be killed. Ranks that end their
    #: loops having reported unequally fail their trial at once, whatever this says.
    report_timeout_s: PositiveFloat | None = None

    def start_timeout_s(self, autoscaling: bool) -> float:
        """The worker-group start timeout a trial gets: longer on an autoscaling cluster, to let a node boot."""
        return (
            max(self.worker_start_timeout_s, self.node_start_timeout_s) if autoscaling else self.worker_start_timeout_s
        )


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
    metric: Any = Field()  # a name, or a list of names (multi-objective): checked by _objectives
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


class _Objective(StrictModel):
    """One objective as written: its metric and whether lower or higher is better."""

    metric: str = Field(min_length=1)
    mode: Literal["min", "max"]


def _objectives(metric: Any, mode: Any) -> tuple[tuple[tuple[str, str], ...], list[Problem]]:
    """``metric``/``mode`` -> the objectives, in order: one for a name and a mode, one per item for lists."""
    if isinstance(metric, list) != isinstance(mode, list):
        if isinstance(metric, list):
            wanted = f"a list of {len(metric)} modes, one per metric (e.g. mode: [{', '.join(['min'] * len(metric))}])"
            return (), [Problem("mode", f"must be {wanted}, got {show(mode)}")]
        return (), [Problem("mode", f"is a list, so metric must be a list of as many names, got {show(metric)}")]
    if not isinstance(metric, list):
        single, wrong = validate_section(_Objective, {"metric": metric, "mode": mode}, "")
        return ((single.metric, single.mode),) if single else (), wrong
    if not metric:
        return (), [Problem("metric", "must name at least one metric, got []")]
    if len(metric) != len(mode):
        return (), [
            Problem(
                "mode", f"has {len(mode)} mode(s) for {len(metric)} metric(s); give one mode (min or max) per metric"
            )
        ]
    out: list[tuple[str, str]] = []
    problems: list[Problem] = []
    for i, (name, direction) in enumerate(zip(metric, mode)):
        objective, found = validate_section(_Objective, {"metric": name, "mode": direction}, "")
        problems += [Problem(f"{p.path}[{i}]", p.message) for p in found]
        if objective is None:
            continue
        earlier = [j for j, (m, _) in enumerate(out) if m == objective.metric]
        if earlier:
            problems.append(
                Problem(
                    f"metric[{i}]",
                    f"{objective.metric!r} is already metric[{earlier[0]}]; each objective needs its own metric",
                )
            )
        out.append((objective.metric, objective.mode))
    return (tuple(out), problems) if not problems else ((), problems)


def _key_order(path: str) -> int:
    """Where a top-level problem's key comes among :data:`SPEC_KEYS` (unknown keys last)."""
    head = re.split(r"[.\[]", path, maxsplit=1)[0]
    return SPEC_KEYS.index(head) if head in SPEC_KEYS else len(SPEC_KEYS)


def _multi_objective_problems(
    objectives: tuple[tuple[str, str], ...], searcher: PluginChoice | None, scheduler: PluginChoice | None
) -> list[Problem]:
    """The searcher and scheduler against the objectives (see the README's multi-objective rules)."""
    problems: list[Problem] = []
    multi = len(objectives) > 1
    if multi and searcher is not None:
        if searcher.type == "hyperopt":
            problems.append(
                Problem(
                    "searcher.type",
                    "searcher 'hyperopt' cannot search several objectives (HyperOpt minimises one number); "
                    "use searcher optuna (sampler nsga2, nsga3, tpe, gp or random) or random",
                )
            )
        sampler = getattr(searcher.options, "sampler", None)
        if searcher.type == "optuna" and sampler == "cmaes":
            problems.append(
                Problem(
                    "searcher.sampler",
                    "Optuna's 'cmaes' sampler cannot search several objectives (CMA-ES adapts to one number); "
                    "use nsga2, nsga3, tpe, gp or random",
                )
            )
    if scheduler is None or scheduler.type == "fifo" or scheduler.type in POPULATION_SCHEDULERS or not objectives:
        return problems
    s_metric, s_mode = getattr(scheduler.options, "metric", None), getattr(scheduler.options, "mode", None)
    modes = dict(objectives)
    if not multi:
        metric, mode = objectives[0]
        if s_metric is not None and s_metric != metric:
            problems.append(
                Problem(
                    "scheduler.metric",
                    f"must be the spec's metric {metric!r} (or left out) with one objective: the scheduler stops "
                    f"trials by the number they are ranked by, got {s_metric!r}",
                )
            )
        elif s_mode is not None and s_mode != mode:
            problems.append(
                Problem("scheduler.mode", f"must be the spec's mode {mode!r} (or left out), got {s_mode!r}")
            )
        return problems
    example = f"e.g. scheduler: {{type: {scheduler.type}, metric: {objectives[0][0]}, mode: {objectives[0][1]}}}"
    if s_metric is None:
        problems.append(
            Problem(
                "scheduler.metric",
                f"is required with several objectives: a scheduler compares trials on one number, so name "
                f"the metric it stops trials by ({example})",
            )
        )
    elif s_mode is None and s_metric not in modes:
        problems.append(
            Problem(
                "scheduler.mode", f"is required: {s_metric!r} is not one of the objectives, so say which way is better"
            )
        )
    elif s_mode is not None and s_metric in modes and s_mode != modes[s_metric]:
        problems.append(
            Problem(
                "scheduler.mode",
                f"must be {modes[s_metric]!r}, the mode of objective {s_metric!r} (or left out), got {s_mode!r}",
            )
        )
    return problems


@dataclass(frozen=True)
class Spec:
    """A validated search spec. Build one with :func:`load_spec`.

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
    failure: Failure
    checkpoint: CheckpointSettings
    aggregate: Aggregate
    storage_path: Path
    source: Path | None = field(default=None, compare=False)
    datasets: dict[str, str] = field(default_factory=dict)  # name -> "module:function" returning a ray.data.Dataset
    data: DataSettings = field(default_factory=DataSettings)
    tracking: Tracking = field(default_factory=Tracking)
    budget: Budget = field(default_factory=Budget)
    warm_start: WarmStart = field(default_factory=WarmStart)
    objectives: tuple[tuple[str, str], ...] = ()  # every (metric, mode); () means ((metric, mode),)
    constraints: tuple[Constraint, ...] = ()  # bounds on reported metrics (spec/constraints.py)

    def __post_init__(self) -> None:
        if not self.objectives:
            object.__setattr__(self, "objectives", ((self.metric, self.mode),))

    @property
    def multi_objective(self) -> bool:
        """Whether the search has several objectives (``metric``/``mode`` given as lists)."""
        return len(self.objectives) > 1

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
        searched = self.scaling.searched()
        return {**self.search_space, SCALING_GROUP: searched} if searched else self.search_space

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

    def get(key: str) -> Any:
        return getattr(top, key) if top else raw.get(key)

    objectives: tuple[tuple[str, str], ...] = ()
    if top is not None or ("metric" in raw and "mode" in raw):
        objectives, wrong = _objectives(get("metric"), get("mode"))
        # in the order of the keys, as if the top-level model had found them
        after = next((i for i, p in enumerate(found) if _key_order(p.path) > SPEC_KEYS.index("mode")), len(found))
        found = [*found[:after], *wrong, *found[after:]]
    problems += found

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
    searched_scaling = sections["scaling"].searched() if sections["scaling"] is not None else {}
    problems += _elastic_problems(sections["scaling"], sections["resources"])
    if searched_scaling and SCALING_GROUP in tree:
        names = ", ".join(f"scaling.{n}" for n, _ in _space.iter_params(searched_scaling))
        problems.append(
            Problem(
                join_path("search_space", SCALING_GROUP),
                f"clashes with the searched scaling values: the trial's config holds {names} under "
                f"'{SCALING_GROUP}'; rename this parameter",
            )
        )

    if searcher is not None and not SEARCHERS[searcher.type].accepts_grid:
        grid_names = [
            join_path(section, n)
            for section, space in (("search_space", tree), ("scaling", searched_scaling))
            for n, p in _space.iter_params(space)
            if isinstance(p, _space.GridParam)
        ]
        allowed = [p.name for p in SEARCHERS.plugins.values() if p.accepts_grid]
        for grid_name in grid_names:
            problems.append(
                Problem(
                    grid_name,
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
    problems += _multi_objective_problems(objectives, searcher, scheduler)
    problems += population_problems(
        tree,
        searcher=searcher,
        scheduler=scheduler,
        objectives=objectives,
        driver_node=sections["resources"].driver_node if sections["resources"] is not None else None,
    )
    constraints, found = parse_constraints(get("constraints"))
    problems += found
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

    warm_start, found = parse_warm_start(
        get("warm_start"),
        tree=tree,
        num_samples=get("num_samples") if isinstance(get("num_samples"), int) else None,
        base_dir=base_dir,
        own_dir=storage_dir / name if storage_dir is not None and isinstance(name, str) else None,
        check=check_trainable,
    )
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


def _elastic_problems(scaling: Scaling | None, resources: Resources | None) -> list[Problem]:
    """An elastic trial's drivers must be where hpsearch tells Ray they are: on the head node.

    Ray sizes an elastic worker group from each node's total resources less what the requests it knows
    of hold; hpsearch adds its trial drivers' share of the head node to those requests
    (:mod:`hpsearch.runtime.driver`), which it can only do where it knows the drivers run.
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
    return [name for name, p in _space.iter_params(spec.trial_space()) if not isinstance(p, _space.ConstParam)]
