"""Search-space distributions: parsed from the spec, translated to Ray Tune.

This is the only module that knows how hpsearch's bounds map onto Tune's:
hpsearch ``int`` bounds are inclusive at both ends (a sample can equal ``high``),
while ``tune.randint``'s upper bound is exclusive; with a ``step``, values are the
multiples of the step between the bounds, as in ``tune.qrandint``/``tune.quniform``.

A mapping with a ``type`` key is a distribution; any other mapping is a nested group
(it becomes a nested dict in the trial's config); any other value is a constant.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, Literal, Union

from pydantic import Field, model_validator

from hpsearch.errors import Problem, did_you_mean, one_of
from hpsearch.spec._validation import StrictModel, field_error, join_path, show, validate_section

__all__ = [
    "FloatParam",
    "IntParam",
    "ChoiceParam",
    "GridParam",
    "ConstParam",
    "Param",
    "SearchSpace",
    "parse_search_space",
    "iter_params",
    "has_grid",
    "to_tune",
]


def _on_grid(value: float, step: float) -> bool:
    ratio = value / step
    return math.isclose(ratio, round(ratio), rel_tol=1e-9, abs_tol=1e-9)


class FloatParam(StrictModel):
    """A real number in ``[low, high]``; ``log`` samples log-uniformly, ``step`` quantises."""

    type: Literal["float"] = "float"
    low: float
    high: float
    log: bool = False
    step: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check(self) -> FloatParam:
        _check_bounds(self.low, self.high, self.log, self.step)
        return self


class IntParam(StrictModel):
    """An integer in ``[low, high]``, both bounds inclusive; ``log`` and ``step`` as for floats."""

    type: Literal["int"] = "int"
    low: int
    high: int
    log: bool = False
    step: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check(self) -> IntParam:
        _check_bounds(self.low, self.high, self.log, self.step)
        return self


class ChoiceParam(StrictModel):
    """One of ``values``, drawn uniformly (a categorical for model-based searchers)."""

    type: Literal["choice"] = "choice"
    values: list[Any] = Field(min_length=1)


class GridParam(StrictModel):
    """Every one of ``values`` (a grid axis; ``num_samples`` repeats each grid point)."""

    type: Literal["grid"] = "grid"
    values: list[Any] = Field(min_length=1)


class ConstParam(StrictModel):
    """A fixed value, written out when it would otherwise look like a distribution."""

    type: Literal["const"] = "const"
    value: Any


Param = FloatParam | IntParam | ChoiceParam | GridParam | ConstParam
#: A parsed search space: parameter name -> a distribution or a nested group.
SearchSpace = dict[str, Union[Param, "SearchSpace"]]

_PARAM_TYPES: dict[str, type[StrictModel]] = {
    "float": FloatParam,
    "int": IntParam,
    "choice": ChoiceParam,
    "grid": GridParam,
    "const": ConstParam,
}


def _check_bounds(low: float, high: float, log: bool, step: float | None) -> None:
    if not low < high:
        raise field_error("low", f"must be less than high ({high!r}), got {low!r}")
    if log and low <= 0:
        raise field_error("low", f"must be > 0 when log is true, got {low!r}")
    if step is not None:
        if log:
            raise field_error("step", "cannot be combined with log: true")
        for key, value in (("low", low), ("high", high)):
            if not _on_grid(value, step):
                raise field_error(key, f"must be a multiple of step ({step!r}), got {value!r}")


def parse_search_space(raw: Any, path: str = "search_space") -> tuple[SearchSpace, list[Problem]]:
    """Parse the ``search_space`` mapping; return the tree and every problem found."""
    if raw is None:
        return {}, []
    if not isinstance(raw, Mapping):
        return {}, [Problem(path, f"must be a mapping of parameter names, got {show(raw)}")]
    tree: SearchSpace = {}
    problems: list[Problem] = []
    for key, value in raw.items():
        where = join_path(path, key)
        if not isinstance(key, str) or not key or "/" in key or "." in key:
            problems.append(
                Problem(where, f"parameter names must be non-empty strings without '.' or '/', got {show(key)}")
            )
            continue
        if isinstance(value, Mapping) and "type" in value:
            param, found = _parse_param(value, where)
            problems += found
            if param is not None:
                tree[key] = param
        elif isinstance(value, Mapping):
            sub, found = parse_search_space(value, where)
            problems += found
            tree[key] = sub
        else:
            tree[key] = ConstParam(value=value)
    return tree, problems


def _parse_param(raw: Mapping[str, Any], path: str) -> tuple[Param | None, list[Problem]]:
    kind = raw["type"]
    model = _PARAM_TYPES.get(kind) if isinstance(kind, str) else None
    if model is None:
        allowed = list(_PARAM_TYPES)
        return None, [
            Problem(
                join_path(path, "type"),
                f"unknown distribution type {show(kind)}{did_you_mean(str(kind), allowed)} "
                f"(allowed: {one_of(allowed)}; to pass a mapping with a 'type' key as a constant, "
                "write {type: const, value: ...})",
            )
        ]
    return validate_section(model, raw, path)  # type: ignore[return-value]


def iter_params(tree: SearchSpace, prefix: str = "") -> Iterator[tuple[str, Param]]:
    """Yield ``(dotted name, param)`` for every leaf of the tree, in spec order."""
    for key, node in tree.items():
        name = join_path(prefix, key)
        if isinstance(node, dict):
            yield from iter_params(node, name)
        else:
            yield name, node


def has_grid(tree: SearchSpace) -> bool:
    """Whether any parameter is a grid axis."""
    return any(isinstance(p, GridParam) for _, p in iter_params(tree))


def to_tune(tree: SearchSpace, *, searcher: str = "random") -> dict[str, Any]:
    """Translate a parsed tree into a Ray Tune ``param_space`` dict.

    ``searcher`` names the searcher that will read the space: Ray converts the same
    Tune domain differently per searcher, and the bounds must come out inclusive for each.
    """
    from ray import tune

    # Ray documents qrandint's upper bound as inclusive, and the random searcher and
    # Optuna treat it so, but its HyperOpt conversion uses hp.quniform(low, upper - 1, q).
    step_upper_pad = 1 if searcher == "hyperopt" else 0

    def one(p: Param) -> Any:
        if isinstance(p, ConstParam):
            return p.value
        if isinstance(p, ChoiceParam):
            return tune.choice(list(p.values))
        if isinstance(p, GridParam):
            return tune.grid_search(list(p.values))
        if isinstance(p, FloatParam):
            low, high = float(p.low), float(p.high)
            if p.step is not None:
                return tune.quniform(low, high, float(p.step))
            return tune.loguniform(low, high) if p.log else tune.uniform(low, high)
        if isinstance(p, IntParam):
            if p.step is not None and p.step > 1:
                return tune.qrandint(p.low, p.high + step_upper_pad, p.step)  # upper inclusive when q > 1
            # Tune's randint/lograndint exclude the upper bound; ours includes it.
            return tune.lograndint(p.low, p.high + 1) if p.log else tune.randint(p.low, p.high + 1)
        raise TypeError(f"not a search-space parameter: {p!r}")  # pragma: no cover

    return {k: to_tune(v, searcher=searcher) if isinstance(v, dict) else one(v) for k, v in tree.items()}
