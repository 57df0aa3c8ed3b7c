"""Ray Data datasets for the trials: built from the spec's factories, once per search or per trial.

This module does with Ray what the spec's ``datasets`` and ``data`` sections ask for. The
sections themselves are checked in :mod:`hpsearch.spec.datasets`.

- ``materialize: once``: :func:`materialize_datasets` calls each factory in the search
  process, after Ray starts and before anything is written. It then calls ``materialize()``
  on the result, so the blocks are computed once and pinned in the object store. The
  trainable hands the :class:`~ray.data.dataset.MaterializedDataset` objects to every trial
  through ``tune.with_parameters``. That is one ``ray.put`` of the small handles. The blocks
  themselves are shared and read-only, and never copied per trial. ``hpsearch resume`` runs
  in a new process with a new Ray, and the blocks died with the old Ray. So resume builds
  the datasets again, the same way.
- ``materialize: per_trial``: each trial driver calls the factories (:func:`build_for_trial`).
  A factory that takes one argument gets the trial's config. The nested run streams the
  lazy datasets itself.

A factory that raises, or returns anything but a ``ray.data.Dataset``, is the user's error.
With ``once``, it is a :class:`~hpsearch.errors.SpecError` naming ``datasets.<name>``, raised
before the experiment folder is written (the CLI exits with 2). With ``per_trial``, the trial
errors with the same line.

:func:`data_config` builds the ``DataConfig`` each nested run gets. It holds the spec's
``data.split``. Its execution options limit the trial's Ray Data executors to the trial's
share of ``data.cpus`` (:func:`hpsearch.planning.planner.data_cpus_per_trial`) and of Ray
Data's object-store budget. So the trials running at once never ask for more than the
planner kept free.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import ray
import ray.train
from ray import cloudpickle

from hpsearch import messages
from hpsearch.errors import Problem, SpecError
from hpsearch.experiment.tracebacks import short_error
from hpsearch.runtime.internals import data_object_store_fraction, ray_data_console_handlers
from hpsearch.runtime.nodes import ray_logs
from hpsearch.spec._imports import by_value_modules, load_callable
from hpsearch.spec._validation import join_path
from hpsearch.spec.datasets import factory_arity

if TYPE_CHECKING:  # pragma: no cover
    from ray.data import Dataset
    from ray.train import DataConfig

    from hpsearch.spec import Spec

__all__ = [
    "DatasetSource",
    "resolve_sources",
    "materialize_datasets",
    "datasets_for_spec",
    "build_for_trial",
    "data_config",
    "ship_by_value",
    "register_by_value",
]

#: What a dataset can be given as: a ``ray.data.Dataset``, a factory, or a ``"module:function"`` reference.
DatasetSource = Any


def _path(name: str) -> str:
    return join_path("datasets", name)


def resolve_sources(datasets: Mapping[str, DatasetSource] | None) -> dict[str, DatasetSource]:
    """The datasets with every ``"module:function"`` reference imported (Datasets and callables kept as given);
    the modules of factories loaded from ``.py`` files are shipped to Ray by value (:func:`ship_by_value`).

    Raises:
        SpecError: a reference that does not import, or a factory called neither as
            ``factory()`` nor ``factory(config)`` (each named ``datasets.<name>``).
    """
    out: dict[str, DatasetSource] = {}
    problems: list[Problem] = []
    for name, source in (datasets or {}).items():
        try:
            if isinstance(source, str):
                source = load_callable(source, loop=False)
            if callable(source) and not _is_dataset(source):
                factory_arity(source)
        except ValueError as err:
            problems.append(Problem(_path(name), str(err)))
            continue
        out[name] = source
    if problems:
        raise SpecError(problems)
    ship_by_value(out)  # their Ray Data tasks, and the trial drivers (per_trial), need the file's module
    return out


def _is_dataset(obj: Any) -> bool:
    # lazy: ray.data takes about a second to import, and only a search with datasets needs it
    from ray.data import Dataset

    return isinstance(obj, Dataset)


def _call(name: str, factory: Callable[..., Any], config: Mapping[str, Any] | None) -> Dataset:
    """Call one factory (with ``config`` if it takes one) and check it returned a Dataset; raise ValueError."""
    label = getattr(factory, "__name__", "the factory")
    arity = factory_arity(factory)
    if arity == 1 and config is None:
        raise ValueError(
            f"{label}(config) takes the trial's config, which a dataset built once for every trial does not have: "
            "give it no required argument, or set data.materialize: per_trial"
        )
    try:
        built = factory(dict(config or {})) if arity == 1 else factory()
    except Exception as err:  # noqa: BLE001 - the user's factory: its error is the user's to see
        raise ValueError(f"{label}() raised {short_error(err)}") from err
    if not _is_dataset(built):
        raise ValueError(
            f"{label}() must return a ray.data.Dataset (e.g. ray.data.from_numpy(...)), "
            f"got {type(built).__name__}: {built!r:.60}"
        )
    return cast("Dataset", built)


def materialize_datasets(datasets: Mapping[str, DatasetSource] | None) -> dict[str, Dataset]:
    """Build every dataset once and materialize it (``materialize: once``); needs Ray connected.

    A ``MaterializedDataset`` is kept as it is; a lazy ``Dataset`` is materialized; a factory
    or reference is called first. Every failure is collected and raised at once.

    Raises:
        SpecError: a factory that raised, returned no Dataset, or whose dataset failed to
            compute (each problem named ``datasets.<name>``).
    """
    # lazy: ray.data takes about a second to import, and only a search with datasets needs it
    from ray.data.dataset import MaterializedDataset

    sources = resolve_sources(datasets)
    out: dict[str, Dataset] = {}
    problems: list[Problem] = []
    for name, source in sources.items():
        try:
            ds = source if _is_dataset(source) else _call(name, source, None)
        except ValueError as err:
            problems.append(Problem(_path(name), str(err)))
            continue
        if isinstance(ds, MaterializedDataset):
            out[name] = ds
            continue
        try:
            with _quiet_ray_data():
                out[name] = ds.materialize()
        except Exception as err:  # noqa: BLE001 - computing the user's pipeline failed: say where
            problems.append(Problem(_path(name), f"computing the dataset failed: {short_error(err)}"))
    if problems:
        raise SpecError(problems)
    return out


@contextlib.contextmanager
def _quiet_ray_data() -> Iterator[None]:
    """Keep Ray Data's progress lines off the terminal while the search process materializes.

    Ray Data logs each execution at INFO to the console and to ``ray-data.log`` in Ray's
    session folder (``ray.data._internal.logging``); only the console handlers are raised to
    WARNING, so the lines stay in the session folder, where hpsearch keeps Ray's output.
    """
    # lazy: ray.data takes about a second to import, and only a search with datasets needs it
    from ray.data import DataContext

    context = DataContext.get_current()
    bars = context.enable_progress_bars
    raised = [
        (handler, handler.level)
        for handler in ray_data_console_handlers(logging.getLogger("ray.data").handlers)
        if handler.level < logging.WARNING
    ]
    for handler, _ in raised:
        handler.setLevel(logging.WARNING)
    context.enable_progress_bars = False
    try:
        yield
    finally:
        context.enable_progress_bars = bars
        for handler, level in raised:
            handler.setLevel(level)


def datasets_for_spec(spec: Spec) -> dict[str, DatasetSource]:
    """The spec's datasets as the trainable takes them: materialized (``once``) or factories (``per_trial``).

    Call it after Ray starts and before the experiment folder is written: with ``once`` a
    bad factory is refused (:class:`SpecError`) while nothing is on disk yet.
    """
    if not spec.datasets:
        return {}
    ray_logs.mute_ray_data_terminal()
    source = str(spec.source) if spec.source else None
    try:
        if spec.data.materialize == "once":
            return materialize_datasets(spec.datasets)
        return resolve_sources(spec.datasets)
    except SpecError as err:
        raise SpecError(err.problems, source=source) from None


def build_for_trial(factories: Mapping[str, Callable[..., Any]], config: Mapping[str, Any]) -> dict[str, Dataset]:
    """Call each factory in a trial driver (``per_trial``), with the trial's config if it takes one.

    Raises:
        ValueError: ``datasets.<name>: ...``, the trial's one-line error.
    """
    out = {}
    for name, factory in factories.items():
        try:
            out[name] = _call(name, factory, config)
        except ValueError as err:
            raise ValueError(f"{_path(name)}: {err}") from None
    return out


def ship_by_value(sources: Mapping[str, DatasetSource]) -> None:
    """Have Ray pickle the modules of factories loaded from ``.py`` files by value (the trial drivers cannot import them)."""
    for source in sources.values():
        if callable(source):
            register_by_value(source)


#: The folders whose compiled modules were already named, so a loop and factories beside it warn once.
_WARNED: set[Path | None] = set()


def register_by_value(fn: Callable[..., Any]) -> None:
    """Register with Ray's cloudpickle the modules ``fn`` needs by value: its ``.py`` file and the helpers beside it.

    A host without the spec's folder on its path then gets them inside the pickle
    (:func:`~hpsearch.spec._imports.by_value_modules` says which). A compiled module there
    cannot travel so; it is named once, with what the user must do on a cluster of several hosts.
    """
    shipment = by_value_modules(fn)
    for name in shipment.modules:
        cloudpickle.register_pickle_by_value(sys.modules[name])  # type: ignore[no-untyped-call]  # vendored, unannotated
    warning = shipment.warning()
    if warning is not None and shipment.folder not in _WARNED:
        _WARNED.add(shipment.folder)
        messages.say(warning)


def data_config(split: Sequence[str], cpu_limit: float | None, concurrency: int) -> DataConfig:
    """The nested run's ``DataConfig``: ``split`` across the workers; each executor capped at the trial's share.

    ``cpu_limit`` caps the CPUs of each dataset's executor; ``None`` means no cap. It comes
    from :func:`~hpsearch.planning.planner.data_cpus_per_trial`. Ray Data also assumes that
    half the cluster's object store is its own. Each trial gets ``1 / concurrency`` of that
    half, so N executors at once fit where one would.

    The caps apply to every executor of the trial. A split dataset has one executor, its split
    coordinator. A dataset that is not split has one per worker, because Ray's
    ``DataConfig.configure`` hands each worker ``ds.iterator()``. Ray Data's other options are
    kept as the ``DataContext`` sets them (``DataConfig.default_ingest_options``).
    """
    # lazy: ray.data takes about a second to import, and only a search with datasets needs it
    from ray.data import ExecutionResources

    options = ray.train.DataConfig.default_ingest_options()
    resources = ray.cluster_resources() if ray.is_initialized() else {}  # type: ignore[no-untyped-call]  # Ray's API is unannotated
    store = float(resources.get("object_store_memory", 0.0))
    share = store * data_object_store_fraction() / max(1, concurrency) if store > 0 else None
    limits = ExecutionResources.for_limits(cpu=cpu_limit, object_store_memory=share)
    options.resource_limits = options.resource_limits.min(limits)
    return ray.train.DataConfig(datasets_to_split=list(split), execution_options=options)
