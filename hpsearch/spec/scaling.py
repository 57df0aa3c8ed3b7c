"""The ``scaling`` section: Ray Train's ``ScalingConfig`` for each trial, searched or elastic.

``num_workers`` is a number, a searched ``{type: choice|grid, values: [...]}`` or an elastic
``{min, max}`` (:class:`ElasticWorkers`); each amount of ``resources_per_worker`` may be searched
too. :class:`Scaling` turns the searched values into every constant scaling a trial can get.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
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

from hpsearch.spec import space as _space
from hpsearch.spec._validation import StrictModel, field_error, show, validate_section

__all__ = ["Scaling", "ElasticWorkers", "SEARCHED_SCALING", "ELASTIC_REFUSED_STRATEGIES"]


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
