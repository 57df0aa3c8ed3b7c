"""Search-space distributions: parsed from the spec, validated, flattened; no Ray.

hpsearch ``int`` bounds are inclusive at both ends (a sample can equal ``high``); with a
``step``, values are the multiples of the step between the bounds. The translation to Ray
Tune's domains, which knows where Tune's bounds differ, is :mod:`hpsearch.runtime.search.tune_space`.

A mapping with a ``type`` key is a distribution; any other mapping is a nested group
(it becomes a nested dict in the trial's config); any other value is a constant.

Conditional parameters: ``when: {optimizer: sgd}`` (or a list of allowed values; several
keys must all hold) makes a parameter exist only when the named parameter, a ``choice``,
``grid`` or ``const`` given by its dotted path from the search space's root, has one of
the values. A parameter whose condition is false is absent from the trial's config; a
parameter whose controller is absent is absent too (chains). This module validates the
conditions and evaluates them (:func:`active_config`); each searcher's translation of a
conditional space is in :mod:`hpsearch.runtime.search.searchers`.
"""

from __future__ import annotations

import itertools
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
    "SCALING_GROUP",
    "parse_search_space",
    "iter_params",
    "trial_space",
    "flat_space",
    "has_grid",
    "Condition",
    "condition_problems",
    "is_conditional",
    "int_multiples",
    "ordered_params",
    "condition_holds",
    "active_config",
    "flat_config",
    "nested_config",
    "grid_points",
    "same_value",
]

#: A parameter's condition: controlling parameter (dotted path) -> the values it may have.
Condition = dict[str, list[Any]]
#: The group of the trial's config that holds its searched scaling values (``scaling.num_workers``); see
#: :meth:`hpsearch.spec.Spec.trial_space`.
SCALING_GROUP = "scaling"


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
    when: Condition | None = None

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
    when: Condition | None = None

    @model_validator(mode="after")
    def _check(self) -> IntParam:
        _check_bounds(self.low, self.high, self.log, self.step)
        return self


class ChoiceParam(StrictModel):
    """One of ``values``, drawn uniformly (a categorical for model-based searchers)."""

    type: Literal["choice"] = "choice"
    values: list[Any] = Field(min_length=1)
    when: Condition | None = None


class GridParam(StrictModel):
    """Every one of ``values`` (a grid axis; ``num_samples`` repeats each grid point)."""

    type: Literal["grid"] = "grid"
    values: list[Any] = Field(min_length=1)
    when: Condition | None = None


class ConstParam(StrictModel):
    """A fixed value, written out when it would otherwise look like a distribution."""

    type: Literal["const"] = "const"
    value: Any
    when: Condition | None = None


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
    """Parse the ``search_space`` mapping; return the tree and every problem found (conditions included)."""
    tree, problems = _parse_group(raw, path)
    if not problems:
        problems = condition_problems(tree, path)
    return tree, problems


def _parse_group(raw: Any, path: str) -> tuple[SearchSpace, list[Problem]]:
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
            sub, found = _parse_group(value, where)
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
    when, problems = (None, []) if "when" not in raw else _parse_when(raw["when"], join_path(path, "when"))
    param, found = validate_section(model, {k: v for k, v in raw.items() if k != "when"}, path)
    problems += found
    if param is None or problems:
        return None, problems
    return (param.model_copy(update={"when": when}) if when is not None else param), []  # type: ignore[return-value]


def _parse_when(raw: Any, path: str) -> tuple[Condition | None, list[Problem]]:
    """``{optimizer: sgd}`` or ``{optimizer: [sgd, adam]}`` -> ``{"optimizer": ["sgd"]}`` (a list: allowed values)."""
    example = "e.g. when: {optimizer: sgd} or when: {optimizer: [sgd, adam]}"
    if not isinstance(raw, Mapping) or not raw:
        return None, [
            Problem(path, f"must map parameter names to a value or a list of values ({example}), got {show(raw)}")
        ]
    out: Condition = {}
    problems: list[Problem] = []
    for key, value in raw.items():
        if not isinstance(key, str) or not key:
            problems.append(Problem(path, f"must name parameters by their dotted path (strings), got {show(key)}"))
            continue
        values = list(value) if isinstance(value, list) else [value]
        if not values:
            problems.append(Problem(join_path(path, key), f"must give at least one value ({example}), got []"))
            continue
        out[key] = values
    return (out, []) if not problems else (None, problems)


# ----------------------------------------------------------------------------- conditions


def same_value(a: Any, b: Any) -> bool:
    """Equality as a condition compares: ``1 == 1.0``, but ``True`` is not ``1`` (nor ``1.0``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001  # a value whose __eq__ raises is simply not equal
        return False


def _allowed(param: Param) -> list[Any] | None:
    """The values a condition may name on ``param`` (``None``: it cannot control a condition)."""
    if isinstance(param, (ChoiceParam, GridParam)):
        return list(param.values)
    if isinstance(param, ConstParam):
        return [param.value]
    return None


def _groups(tree: SearchSpace, prefix: str = "") -> Iterator[str]:
    for key, node in tree.items():
        if isinstance(node, dict):
            name = join_path(prefix, key)
            yield name
            yield from _groups(node, name)


def _closest(name: str, params: Mapping[str, Param]) -> str:
    """A did-you-mean for a misspelt controller, also for a nested one named without its group."""
    nested = [n for n in params if n.rsplit(".", 1)[-1] == name]
    return f"; did you mean '{nested[0]}'?" if len(nested) == 1 else did_you_mean(name, params)


def condition_problems(tree: SearchSpace, path: str = "search_space") -> list[Problem]:
    """Every problem of the tree's ``when`` conditions, each at ``<path>.<param>.when.<controller>``.

    A condition names an existing ``choice``, ``grid`` or ``const`` parameter, with values
    among its values; a grid's condition names grids or constants only (the number of trials
    must be known before the search); and conditions form no cycle.
    """
    params = dict(iter_params(tree))
    groups = set(_groups(tree))
    problems: list[Problem] = []
    edges: dict[str, list[str]] = {}
    for name, param in params.items():
        for ctrl, values in (param.when or {}).items():
            where = join_path(path, name, "when", ctrl)
            target = params.get(ctrl)
            if ctrl == name:
                problems.append(Problem(where, f"'{name}' cannot depend on itself"))
                continue
            if target is None:
                if ctrl in groups:
                    inside = [n for n in params if n.startswith(ctrl + ".")]
                    problems.append(
                        Problem(
                            where,
                            f"'{ctrl}' is a group, not a parameter; name one of its parameters ({', '.join(inside[:3])})",
                        )
                    )
                else:
                    problems.append(
                        Problem(
                            where,
                            f"names no parameter of the search space{_closest(ctrl, params)} (a condition names "
                            "a parameter by its dotted path from search_space, e.g. optimizer or model.kind)",
                        )
                    )
                continue
            allowed = _allowed(target)
            if allowed is None:
                problems.append(
                    Problem(
                        where,
                        f"'{ctrl}' is a {target.type} parameter; a condition can only name a choice, grid or "
                        "constant parameter (its values can be listed)",
                    )
                )
                continue
            if isinstance(param, GridParam) and isinstance(target, ChoiceParam):
                problems.append(
                    Problem(
                        where,
                        f"a grid's condition can only name grid or constant parameters, and '{ctrl}' is a choice: "
                        "a grid is expanded before the search, where a choice is not yet drawn (make one of them "
                        "the other's type)",
                    )
                )
            edges.setdefault(name, []).append(ctrl)
            for value in values:
                if not any(same_value(value, a) for a in allowed):
                    problems.append(
                        Problem(where, f"{show(value)} is not a value of '{ctrl}' (its values: {show(allowed)})")
                    )
    return problems + _cycle_problems(edges, path)


def _cycle_problems(edges: Mapping[str, list[str]], path: str) -> list[Problem]:
    """One problem per cycle of conditions (``a -> b -> a``), at its first parameter in spec order."""
    problems: list[Problem] = []
    seen_cycles: set[frozenset[str]] = set()
    done: set[str] = set()

    def visit(node: str, stack: list[str]) -> None:
        if node in stack:
            cycle = stack[stack.index(node) :]
            key = frozenset(cycle)
            if key not in seen_cycles:
                seen_cycles.add(key)
                shown = " -> ".join([*cycle, node])
                problems.append(
                    Problem(
                        join_path(path, cycle[0], "when", cycle[1] if len(cycle) > 1 else node),
                        f"conditions form a cycle: {shown}; a parameter cannot depend on itself, directly or through others",
                    )
                )
            return
        if node in done:
            return
        for ctrl in edges.get(node, []):
            visit(ctrl, [*stack, node])
        done.add(node)

    for name in edges:
        visit(name, [])
    return problems


def is_conditional(tree: SearchSpace) -> bool:
    """Whether any parameter has a ``when`` condition."""
    return any(p.when for _, p in iter_params(tree))


def ordered_params(tree: SearchSpace) -> list[tuple[str, Param]]:
    """Every ``(dotted name, param)``, each after the parameters its condition names, else in spec order.

    Conditions must be acyclic (:func:`condition_problems`).
    """
    params = dict(iter_params(tree))
    out: list[tuple[str, Param]] = []
    placed: set[str] = set()

    def place(name: str, visiting: frozenset[str]) -> None:
        if name in placed or name in visiting or name not in params:
            return
        for ctrl in params[name].when or {}:
            place(ctrl, visiting | {name})
        placed.add(name)
        out.append((name, params[name]))

    for name in params:
        place(name, frozenset())
    return out


def condition_holds(param: Param, values: Mapping[str, Any]) -> bool:
    """Whether every controller ``param``'s condition names is in ``values`` with an allowed value."""
    return all(
        ctrl in values and any(same_value(values[ctrl], v) for v in allowed)
        for ctrl, allowed in (param.when or {}).items()
    )


def active_config(tree: SearchSpace, flat: Mapping[str, Any]) -> dict[str, Any]:
    """``flat`` (dotted name -> value) without the parameters whose condition is false.

    A parameter is active when every controller it names is itself active and present in
    ``flat`` with one of the allowed values. Keys that are not parameters of the tree are kept.
    """
    present: dict[str, Any] = {}
    for name, param in ordered_params(tree):
        if name in flat and condition_holds(param, present):
            present[name] = flat[name]
    names = {name for name, _ in iter_params(tree)}
    return {k: v for k, v in flat.items() if k not in names or k in present}


def flat_config(tree: SearchSpace, config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A trial's nested config as ``dotted name -> value``, descending only into the tree's groups
    (a choice whose values are mappings stays one value)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = join_path(prefix, key)
        node = tree.get(key) if isinstance(key, str) else None
        if isinstance(node, dict) and isinstance(value, Mapping):
            out.update(flat_config(node, value, name))
        else:
            out[name] = value
    return out


def nested_config(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"model.width": 3}`` -> ``{"model": {"width": 3}}`` (parameter names hold no dots)."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        node = out
        *groups, last = name.split(".")
        for group in groups:
            node = node.setdefault(group, {})
        node[last] = value
    return out


def grid_points(tree: SearchSpace) -> list[dict[str, Any]]:
    """Every combination of the grid parameters that can exist (dotted name -> value), in Tune's order.

    Without conditions: the product of the grids (one empty combination without grids). With
    them, a grid parameter whose condition is false in a combination is left out of it, and
    combinations that become equal are kept once: ``optimizer: grid [sgd, adam]`` with
    ``momentum: grid [0.9, 0.99], when: {optimizer: sgd}`` gives 3 combinations, not 4.
    """
    grids = [(name, p) for name, p in iter_params(tree) if isinstance(p, GridParam)]
    consts = {name: p.value for name, p in iter_params(tree) if isinstance(p, ConstParam)}
    out: list[dict[str, Any]] = []
    for values in itertools.product(*[p.values for _, p in grids]):
        combo = dict(zip([n for n, _ in grids], values))
        kept = {k: v for k, v in active_config(tree, {**consts, **combo}).items() if k in combo}
        if not any(_same_combo(kept, earlier) for earlier in out):
            out.append(kept)
    return out


def _same_combo(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)


def iter_params(tree: SearchSpace, prefix: str = "") -> Iterator[tuple[str, Param]]:
    """Yield ``(dotted name, param)`` for every leaf of the tree, in spec order."""
    for key, node in tree.items():
        name = join_path(prefix, key)
        if isinstance(node, dict):
            yield from iter_params(node, name)
        else:
            yield name, node


def trial_space(search_space: SearchSpace, searched_scaling: SearchSpace) -> SearchSpace:
    """What every searcher samples: the search space plus, when scaling values are searched, the group
    :data:`SCALING_GROUP` holding them; without searched scaling, the search space itself."""
    return {**search_space, SCALING_GROUP: searched_scaling} if searched_scaling else search_space


def flat_space(tree: SearchSpace) -> tuple[dict[str, Param], list[str]]:
    """The tree flat, ``dotted name -> param`` in spec order, and the names that are searched (not constants).

    The one flat view of a trial space: :func:`hpsearch.spec.varying_params`, the Optuna tracker's study and
    ``load_results``' ``space`` and ``params`` all read it, so a parameter is named the same in each.
    """
    space = dict(iter_params(tree))
    return space, [name for name, p in space.items() if not isinstance(p, ConstParam)]


def has_grid(tree: SearchSpace) -> bool:
    """Whether any parameter is a grid axis."""
    return any(isinstance(p, GridParam) for _, p in iter_params(tree))


def int_multiples(param: IntParam) -> list[int]:
    """A stepped int's values: the multiples of its step between its bounds, both included.

    Example:
        >>> int_multiples(IntParam(low=0, high=9, step=3))
        [0, 3, 6, 9]
    """
    return list(range(param.low, param.high + 1, param.step or 1))  # low is a multiple of step (validated)
