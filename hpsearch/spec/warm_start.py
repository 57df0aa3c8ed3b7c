"""The ``warm_start`` section: known points to run first, and an earlier search whose trials seed the searcher.

.. code-block:: yaml

    warm_start:
      points: [{lr: 0.01, layers: 2}]          # run first, in this order
      from: ../hpsearch-results/digits-quick   # an earlier experiment folder

Points are checked against the search space here: every key a parameter (nested groups as
mappings or dotted keys), every value of its type, within its bounds (int bounds inclusive,
on its step), among its choices, equal to a constant, and set only where its condition holds
(with its controllers set too). An active parameter a point leaves out is drawn by the
searcher. Points count toward ``num_samples``. ``from`` is resolved against the spec file's
folder (the current folder for a spec given as a dict) and must be an hpsearch experiment
folder; its trials are read at run time (:mod:`hpsearch.runtime.search.warm_start`), where
:func:`misfit` decides which of them fit this search space.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpsearch.errors import Problem, did_you_mean
from hpsearch.experiment.layout import is_experiment  # the folder's names; spec/ holds no file names
from hpsearch.spec._validation import join_path, show
from hpsearch.spec.space import (
    ChoiceParam,
    ConstParam,
    FloatParam,
    GridParam,
    IntParam,
    Param,
    SearchSpace,
    condition_holds,
    flat_config,
    iter_params,
    nested_config,
    ordered_params,
    same_value,
)

__all__ = ["WarmStart", "parse_warm_start", "value_problem", "misfit"]

_KEYS = ("points", "from")


@dataclass(frozen=True)
class WarmStart:
    """``points``: flat configs (dotted name -> value) run first; ``source``: the earlier experiment folder."""

    points: tuple[dict[str, Any], ...] = ()
    source: Path | None = None

    def enabled(self) -> bool:
        return bool(self.points) or self.source is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": [nested_config(p) for p in self.points],
            "from": None if self.source is None else str(self.source),
        }


def parse_warm_start(
    raw: Any,
    *,
    tree: SearchSpace,
    num_samples: int | None,
    base_dir: Path,
    own_dir: Path | None,
    check: bool = True,
) -> tuple[WarmStart | None, list[Problem]]:
    """Validate the section against the parsed search space.

    ``own_dir`` is this search's experiment folder (``from`` must be another); with ``check``
    the ``from`` folder must exist and be an hpsearch experiment.
    """
    if raw is None:
        return WarmStart(), []
    if not isinstance(raw, Mapping):
        return None, [Problem("warm_start", f"must be a mapping with 'points' and/or 'from', got {show(raw)}")]
    problems: list[Problem] = []
    for key in raw:
        if key not in _KEYS:
            problems.append(
                Problem(
                    join_path("warm_start", str(key)),
                    f"unknown key{did_you_mean(str(key), _KEYS)} (allowed: points, from)",
                )
            )
    points, found = _points(raw.get("points"), tree, num_samples)
    problems += found
    source, found = _source(raw.get("from"), base_dir, own_dir, check) if raw.get("from") is not None else (None, [])
    problems += found
    if problems:
        return None, problems
    return WarmStart(points=tuple(points), source=source), []


def _points(raw: Any, tree: SearchSpace, num_samples: int | None) -> tuple[list[dict[str, Any]], list[Problem]]:
    where = "warm_start.points"
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], [Problem(where, f"must be a list of parameter mappings, e.g. [{{lr: 0.01}}], got {show(raw)}")]
    grids = [name for name, p in iter_params(tree) if isinstance(p, GridParam)]
    if raw and grids:
        return [], [
            Problem(
                where,
                f"cannot be combined with grid parameters (search_space.{grids[0]}): a grid already fixes which "
                "configurations run; add the point's values to the grid, or make the grid a choice",
            )
        ]
    if num_samples is not None and len(raw) > num_samples:
        return [], [
            Problem(
                where,
                f"has {len(raw)} points but num_samples is {num_samples}: every point is one of the search's "
                f"trials; raise num_samples to at least {len(raw)}",
            )
        ]
    points: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for i, point in enumerate(raw):
        flat, found = _point(point, tree, join_path(where, i))
        problems += found
        points.append(flat)
    return points, problems


def _point(raw: Any, tree: SearchSpace, where: str) -> tuple[dict[str, Any], list[Problem]]:
    """One point: a flat config of parameters, each value valid and its condition true."""
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
        return {}, [Problem(where, f"must be a mapping of parameter names to values, got {show(raw)}")]
    params = dict(iter_params(tree))
    flat = flat_config(tree, raw)
    problems: list[Problem] = []
    for name, value in flat.items():
        param = params.get(name)
        if param is None:
            problems.append(
                Problem(
                    join_path(where, name),
                    f"unknown parameter{did_you_mean(name, params)} (this search space's: {', '.join(params) or 'none'})",
                )
            )
            continue
        message = value_problem(param, value)
        if message:
            problems.append(Problem(join_path(where, name), message))
    if problems:
        return flat, problems
    values = {n: p.value for n, p in params.items() if isinstance(p, ConstParam)} | flat
    for name in flat:
        param = params[name]
        for ctrl, allowed in (param.when or {}).items():
            if ctrl not in flat and not isinstance(params[ctrl], ConstParam):
                problems.append(
                    Problem(
                        join_path(where, name),
                        f"is set, and its condition names {ctrl}: set {ctrl} too (to {_either(allowed)}), "
                        "so that the point says whether it exists",
                    )
                )
                break
        else:
            if not _active(tree, name, values):
                problems.append(
                    Problem(
                        join_path(where, name),
                        f"is set, but its condition is false in this point (when: {_show_when(param)}; the point has "
                        f"{', '.join(f'{c}: {show(values.get(c))}' for c in param.when or {})}): leave it out",
                    )
                )
    return flat, problems


def _active(tree: SearchSpace, name: str, values: Mapping[str, Any]) -> bool:
    present: dict[str, Any] = {}
    for n, param in ordered_params(tree):
        if n in values and condition_holds(param, present):
            present[n] = values[n]
    return name in present


def _either(values: list[Any]) -> str:
    return " or ".join(show(v) for v in values)


def _show_when(param: Param) -> str:
    return "{" + ", ".join(f"{c}: {_either(v)}" for c, v in (param.when or {}).items()) + "}"


def value_problem(param: Param, value: Any) -> str | None:
    """What is wrong with ``value`` for ``param`` (its type, bounds, step, choices), or ``None``."""
    if isinstance(param, ConstParam):
        return (
            None
            if same_value(value, param.value)
            else f"is the constant {show(param.value)} in this search space, got {show(value)}"
        )
    if isinstance(param, (ChoiceParam, GridParam)):
        if any(same_value(value, v) for v in param.values):
            return None
        hint = did_you_mean(value, [str(v) for v in param.values]) if isinstance(value, str) else ""
        return f"must be one of {show(param.values)}, got {show(value)}{hint}"
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(param, IntParam):
        if not isinstance(value, int) or isinstance(value, bool):
            return f"must be an integer, got {show(value)}"
    elif not is_number or not math.isfinite(value):
        return f"must be a finite number, got {show(value)}"
    assert isinstance(param, (FloatParam, IntParam))
    if not param.low <= value <= param.high:
        return f"must be between {param.low!r} and {param.high!r} (both included), got {show(value)}"
    if param.step is not None:
        ratio = value / param.step
        if not math.isclose(ratio, round(ratio), rel_tol=1e-9, abs_tol=1e-9):
            return f"must be a multiple of step {param.step!r}, got {show(value)}"
    return None


def misfit(tree: SearchSpace, flat: Mapping[str, Any]) -> str | None:
    """Why an earlier trial's flat config does not fit this search space (``None``: it fits).

    It fits when it holds exactly this space's active parameters (constants included), each
    with a valid value: its result then says something about this space.
    """
    params = dict(iter_params(tree))
    for name, value in flat.items():
        param = params.get(name)
        if param is None:
            return f"{name} is not in this search space"
        message = value_problem(param, value)
        if message:
            return f"{name} {message}"
    present: dict[str, Any] = {}
    for name, param in ordered_params(tree):
        if not condition_holds(param, present):
            if name in flat:
                return f"{name} is set, but its condition is false here"
            continue
        if name not in flat:
            return f"{name} is missing"
        present[name] = flat[name]
    return None


def _source(raw: Any, base_dir: Path, own_dir: Path | None, check: bool) -> tuple[Path | None, list[Problem]]:
    where = "warm_start.from"
    if not isinstance(raw, str) or not raw:
        return None, [Problem(where, f"must be the path of an earlier experiment folder, got {show(raw)}")]
    try:
        path = Path(raw).expanduser()
        path = (path if path.is_absolute() else base_dir / path).resolve()
    except (RuntimeError, OSError) as err:
        return None, [Problem(where, f"cannot resolve {raw!r} to a folder: {err}")]
    if own_dir is not None and path == own_dir.resolve():
        return None, [
            Problem(
                where,
                f"{raw!r} is this search's own experiment folder; name an earlier search's folder (or --set name=...)",
            )
        ]
    if check:
        if not path.exists():
            return None, [
                Problem(
                    where,
                    f"{raw!r} ({path}) does not exist: run the earlier search first (it is resolved against the spec "
                    "file's folder)",
                )
            ]
        if not is_experiment(path):
            return None, [
                Problem(where, f"{raw!r} ({path}) is not an hpsearch experiment folder (no hpsearch_spec.yaml in it)")
            ]
    return path, []
