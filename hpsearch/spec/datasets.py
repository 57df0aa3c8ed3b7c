"""The spec's ``datasets`` and ``data`` sections: Ray Data datasets fed to every trial's workers.

``datasets`` maps a name (what the loop passes to ``ray.train.get_dataset_shard``) to a
``"module:function"`` or ``"file.py:function"`` factory returning a ``ray.data.Dataset``.
``data`` says how they reach the trials. Pure: the factories are imported and checked to be
plain functions called as ``factory()`` or, with ``materialize: per_trial`` only,
``factory(config)`` (:func:`factory_arity`); what they return is checked by the runtime
(:mod:`hpsearch.runtime.datasets`): with ``once`` before anything is written, with
``per_trial`` in each trial.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from hpsearch.errors import Problem
from hpsearch.spec._imports import load_callable, resolve_reference
from hpsearch.spec._validation import StrictModel, join_path, show, validate_section

__all__ = ["DataSettings", "DEFAULT_DATA_CPUS", "factory_arity", "parse_datasets", "parse_data"]

#: CPUs kept free for Ray Data's tasks when a spec names datasets and says nothing else.
DEFAULT_DATA_CPUS = 1.0

_DATASET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


class DataSettings(StrictModel):
    """How the spec's datasets reach each trial.

    ``split``: the datasets split across a trial's workers (Ray's ``DataConfig(datasets_to_split=...)``);
    the others reach every worker whole. ``materialize``: ``once`` builds and materializes them
    in the search process and shares the blocks with every trial; ``per_trial`` has each trial
    driver call the factories (with the trial's config if they take one). ``cpus``: CPUs the
    planner keeps free on the head node for Ray Data's tasks, shared by the trials at once.
    """

    split: list[str] = Field(default_factory=lambda: ["train"])
    materialize: Literal["once", "per_trial"] = "once"
    cpus: float | None = Field(default=None, ge=0)

    def reserved_cpus(self, has_datasets: bool) -> float:
        """CPUs the planner keeps free for Ray Data's tasks."""
        if not has_datasets:
            return 0.0
        return DEFAULT_DATA_CPUS if self.cpus is None else float(self.cpus)


def parse_datasets(raw: Any, base_dir: Path, *, check: bool = True) -> tuple[dict[str, str], list[Problem]]:
    """Validate ``datasets``: names to factory references (file references made absolute)."""
    if raw is None:
        return {}, []
    if not isinstance(raw, Mapping):
        return {}, [
            Problem("datasets", f"must be a mapping of dataset names to 'module:function' factories, got {show(raw)}")
        ]
    out: dict[str, str] = {}
    problems: list[Problem] = []
    for name, ref in raw.items():
        where = join_path("datasets", str(name))
        if not isinstance(name, str) or not _DATASET_NAME.match(name):
            problems.append(
                Problem(where, f"a dataset name must be letters, digits, '_', '.', '-' (not first), got {show(name)}")
            )
            continue
        if not isinstance(ref, str) or not ref:
            problems.append(Problem(where, f"must be 'module:function' or 'path/to/file.py:function', got {show(ref)}"))
            continue
        if check:
            try:
                factory_arity(load_callable(ref, base_dir, loop=False), ref)
            except ValueError as err:
                problems.append(Problem(where, str(err)))
                continue
        out[name] = resolve_reference(ref, base_dir)
    return out, problems


def factory_arity(factory: Callable[..., Any], ref: str | None = None) -> int:
    """How a dataset factory is called: 0 (``factory()``) or 1 (``factory(config)``, the trial's config).

    A factory that can be called without arguments is; one that needs exactly one positional
    argument gets the trial's config (``materialize: per_trial`` only). The rule is the
    one Ray Train applies to train loops, so a factory and a loop read alike.

    Raises:
        ValueError: a class, an ``async``/generator function, or a signature that takes
            neither (the message names ``ref``).
    """
    shown = repr(ref) if ref else getattr(factory, "__name__", repr(factory))
    if inspect.isclass(factory):
        raise ValueError(f"{shown} is a class; a dataset factory is a function returning a ray.data.Dataset")
    for is_kind, kind in (
        (inspect.iscoroutinefunction, "an async function"),
        (inspect.isgeneratorfunction, "a generator function (it yields)"),
        (inspect.isasyncgenfunction, "an async generator function"),
    ):
        if is_kind(factory):
            raise ValueError(f"{shown} is {kind}; a dataset factory is a plain function returning a ray.data.Dataset")
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # builtins and some C callables have none: called without arguments
        return 0
    for arity, args in ((0, ()), (1, ({},))):
        try:
            signature.bind(*args)
        except TypeError:
            continue
        return arity
    name = getattr(factory, "__name__", "factory")
    raise ValueError(f"{shown} must be called as factory() or factory(config), but its signature is {name}{signature}")


def parse_data(
    raw: Any, datasets: Mapping[str, str], datasets_given: bool, *, check: bool = False
) -> tuple[DataSettings | None, list[Problem]]:
    """Validate ``data`` against the datasets the spec names.

    With ``check`` (the factories were imported by :func:`parse_datasets`), a factory that
    takes the trial's config is refused with ``materialize: once``: built once for every
    trial, it has no config to get.
    """
    settings, problems = validate_section(DataSettings, raw, "data")
    if settings is None:
        return None, problems
    if raw and not datasets_given:
        return None, [Problem("data", "has no effect without a datasets section (name the datasets to feed)")]
    if datasets_given:
        for i, name in enumerate(settings.split):
            if datasets and name not in datasets:
                problems.append(
                    Problem(
                        join_path("data", "split", i),
                        f"names no dataset: {name!r} (datasets: {', '.join(datasets)})",
                    )
                )
            elif name in settings.split[:i]:
                problems.append(Problem(join_path("data", "split", i), f"names {name!r} twice"))
    if check and settings.materialize == "once":
        for name, ref in datasets.items():
            try:
                arity = factory_arity(load_callable(ref, loop=False), ref)
            except ValueError:  # parse_datasets said so already
                continue
            if arity == 1:
                problems.append(
                    Problem(
                        join_path("datasets", name),
                        f"{ref.rpartition(':')[2]}(config) takes the trial's config, but data.materialize is 'once' "
                        "(built once for every trial, it gets no config): give it no required argument, "
                        "or set data.materialize: per_trial",
                    )
                )
    return (None if problems else settings), problems
