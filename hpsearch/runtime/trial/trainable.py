"""The trainable Tune is given: one nested ``TorchTrainer`` run per Tune trial.

This module runs in the search process: ``hpsearch run``, or the user's script calling
:func:`make_trainable`. Tune pickles what it builds into every trial's actor. So it holds
only what pickles:

- the user's loop, shipped by value when it comes from a ``.py`` file;
- the spec's sections;
- the datasets' handles;
- a closure calling :func:`hpsearch.runtime.trial.driver.run_nested`, imported there by reference.

The code runs in four processes, with one module for each:

- Here, in the search process, are the trainable and the trial driver's resources. The
  driver gets a sliver of the head node. Under pbt/pb2 it gets a driver slot instead
  (:func:`hpsearch.runtime.search.pbt.driver_slot`). The datasets are split here into those shared
  by reference and the factories each driver calls.
- :mod:`hpsearch.runtime.trial.driver` is the trial driver, which is Tune's trial actor. It builds
  and fits the nested run and stores it under the experiment folder's ``train/``. The run is
  named by the trial id. The name is deterministic, so a retried or restored trial finds its
  own checkpoints.
- :mod:`hpsearch.runtime.train.controller` runs in the nested run's Train controller. Every report
  is aggregated across workers, checked, forwarded to Tune and appended to the trial's
  history (docs/architecture.md, "The data path", step 4).
- :mod:`hpsearch.runtime.train.worker` runs in each Train worker. It runs the user's loop and makes
  its reports plain.

Ray Data datasets come from the spec's ``datasets`` and ``data`` sections
(:mod:`hpsearch.runtime.datasets`). They reach each nested run as
``TorchTrainer(datasets=..., dataset_config=DataConfig(...))``, so the loop reads them with
``ray.train.get_dataset_shard(name)``. They are either materialized once and handed to every
trial by reference (``tune.with_parameters``), or built by each trial driver.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from ray import tune

from hpsearch.planning.planner import HEAD_RESOURCE, HEAD_SLIVER, data_cpus_per_trial
from hpsearch.runtime.datasets import materialize_datasets, register_by_value, resolve_sources, ship_by_value
from hpsearch.runtime.internals import add_trainable_mixin
from hpsearch.runtime.ray_workarounds import workarounds_enabled
from hpsearch.runtime.trial import reuse
from hpsearch.runtime.trial.driver import Feed, TrialData, run_nested
from hpsearch.spec import Aggregate, CheckpointSettings, FailureSettings, Scaling
from hpsearch.spec.datasets import DataSettings

__all__ = ["make_trainable"]


def make_trainable(
    train_loop: Callable[[dict[str, Any]], Any],
    *,
    scaling: Scaling | Mapping[str, Any] | None = None,
    driver_cpus: float = 0.25,
    driver_node: str = "head",
    failure: FailureSettings | Mapping[str, Any] | None = None,
    checkpoint: CheckpointSettings | Mapping[str, Any] | None = None,
    aggregate: Aggregate | Mapping[str, Any] | None = None,
    storage_path: str | Path | None = None,
    metric: str | None = None,
    mode: str = "min",
    required_metrics: Sequence[str] | Mapping[str, str] = (),
    record_controller: bool | None = None,
    datasets: Mapping[str, Any] | None = None,
    data: DataSettings | Mapping[str, Any] | None = None,
    concurrency: int = 1,
    population: bool = False,
) -> Any:
    """Build a Tune trainable whose every trial is a nested Ray Train ``TorchTrainer`` run.

    Args:
        train_loop: The per-worker train loop, ``train_loop(config)``; it reports with
            ``ray.train.report`` from every rank.
        scaling: Workers per trial, as the spec's ``scaling`` section.
        driver_cpus: CPUs reserved for the trial driver, apart from the workers.
        driver_node: ``"head"`` pins trial drivers to the head node, where the planner
            counts them. They then never take room a worker needs. ``"any"`` lets Ray choose; each driver then
            watches its node, and a trial whose driver's node is drained saves a checkpoint and is paused, to
            resume on another node (:mod:`hpsearch.runtime.trial.drain_watch`).
        failure: Retry settings, as the spec's ``failure`` section.
        checkpoint: Checkpoint settings, as the spec's ``checkpoint`` section.
        aggregate: How each metric is combined across workers, as the spec's ``aggregate``.
        storage_path: Folder for the nested runs (``<storage_path>/<trial_id>``). Default:
            ``train/`` in the Tune experiment folder. On several nodes it must be storage
            every node can reach.
        metric: The search metric. With it, each trial keeps its ``num_to_keep`` best
            checkpoints by that metric, and always its latest one, to resume from. A trial
            whose report lacks it errors with :class:`~hpsearch.errors.MetricNotReportedError`.
        mode: ``"min"`` or ``"max"``, for ``metric``.
        required_metrics: Other metrics every report must hold, such as a multi-objective
            search's other objectives, the scheduler's own metric and constrained metrics. They are
            checked as ``metric`` is. A mapping gives, per metric, the spec key that names it
            (``constraints[0]``), for the error's message.
        record_controller: Have each nested run's controller record itself for
            :class:`~hpsearch.runtime.ray_workarounds.OrphanReaper`. By default it does,
            unless the Ray work-arounds are switched off (``HPSEARCH_RAY_WORKAROUNDS=0``).
        datasets: Ray Data datasets that the loop reads with ``ray.train.get_dataset_shard(name)``,
            as in the spec's ``datasets``. Each name maps to a ``ray.data.Dataset``, a factory or
            a ``"module:function"`` reference. A factory is called as ``factory()``. Under
            ``per_trial`` it is called as ``factory(config)`` with the trial's config. With
            ``materialize: once`` the datasets are built and materialized here, so Ray must be
            connected. They are then shared with every trial.
        data: How the datasets reach the trials, as in the spec's ``data`` section
            (``split``, ``materialize``, ``cpus``).
        concurrency: Trials at once, the plan's ``max_concurrent_trials``. Each trial's Ray Data
            executors get ``1/concurrency`` of ``data.cpus`` and of Ray Data's object store
            budget (:func:`~hpsearch.planning.planner.data_cpus_per_trial`).
        population: Population-based training, ``pbt`` or ``pb2`` (:mod:`hpsearch.runtime.search.pbt`).
            Every report must carry a checkpoint, and it reaches Tune with a pointer to it. A
            trial the scheduler exploits continues from the donor's checkpoint in a new nested
            run. Nested runs keep every checkpoint. At most ``concurrency`` drivers hold the
            head node's slots.

    Returns:
        A trainable for ``ray.tune.Tuner``, with the driver's resources attached.

    Example:
        >>> from ray import tune
        >>> from hpsearch.examples.digits import train_loop
        >>> trainable = make_trainable(train_loop, scaling={"num_workers": 2, "resources_per_worker": {"CPU": 0.5}})
        >>> tuner = tune.Tuner(trainable, param_space={"lr": tune.loguniform(1e-4, 1e-1)},
        ...                    tune_config=tune.TuneConfig(metric="val_loss", mode="min", num_samples=4))
    """
    # A loop loaded from a .py file (or a package in the spec's folder) has no importable module on
    # another host's workers: ship it by value, with the helper modules it imported from its folder.
    register_by_value(train_loop)
    scaling = _as(Scaling, scaling)
    failure = _as(FailureSettings, failure)
    checkpoint = _as(CheckpointSettings, checkpoint)
    aggregate = _as(Aggregate, aggregate)
    runs_dir = None if storage_path is None else str(Path(storage_path).expanduser().resolve())
    if record_controller is None:
        record_controller = workarounds_enabled()

    # Under PBT another trial may continue from any checkpoint a pointer names: keep them all.
    checkpoint_config: dict[str, Any] = {"num_to_keep": None if population else checkpoint.num_to_keep}
    if metric is not None:
        checkpoint_config.update(checkpoint_score_attribute=metric, checkpoint_score_order=mode)
    required = {**({metric: "metric"} if metric is not None else {}), **_named(required_metrics)}
    search_token = uuid.uuid4().hex  # one per Tuner, so Tune's retries of a trial share it and a resume does not
    shared, factories, feed = _datasets(datasets, _as(DataSettings, data), concurrency)

    def hpsearch_trial(config: dict[str, Any], datasets: Mapping[str, Any] | None = None) -> None:
        run_nested(
            train_loop,
            config,
            scaling,
            failure,
            checkpoint_config,
            aggregate,
            runs_dir,
            record_controller,
            metric=metric,
            required=required,
            search_token=search_token,
            data=TrialData(dict(datasets or {}), factories, feed) if feed is not None else None,
            population=population,
            watch_drains=driver_node == "any" and not population,
        )

    hpsearch_trial.__name__ = f"hpsearch_{getattr(train_loop, '__name__', 'trial')}"
    hpsearch_trial.__qualname__ = hpsearch_trial.__name__
    # Tune's hook for the class it wraps a function in: with reuse_actors, the previous trial's
    # nested run is ended before the next trial runs in the actor (runtime/trial/reuse.py).
    add_trainable_mixin(hpsearch_trial, reuse.ReusableDriver)
    trial: Callable[..., None] = hpsearch_trial
    if shared:  # the datasets' handles go into the object store once, and every trial reads the same blocks
        trial = tune.with_parameters(hpsearch_trial, datasets=shared)
    bundle = _driver_bundle(driver_cpus, driver_node, population, concurrency)
    return tune.with_resources(trial, tune.PlacementGroupFactory([bundle]))


def _driver_bundle(driver_cpus: float, driver_node: str, population: bool, concurrency: int) -> dict[str, float]:
    """The trial driver's one bundle: its CPUs and, on the head, its sliver or population slot of the head."""
    bundle = {"CPU": driver_cpus}
    if driver_node == "head":
        bundle[HEAD_RESOURCE] = HEAD_SLIVER
        if population:  # the population takes turns, because only `concurrency` drivers fit on the head at once
            # lazy: runtime/pbt loads Ray's PB2 (and scikit-learn); only a population-based search needs it
            from hpsearch.runtime.search.pbt import driver_slot

            bundle[HEAD_RESOURCE] = driver_slot(concurrency)
    elif driver_node != "any":
        raise ValueError(f"driver_node must be 'head' or 'any', got {driver_node!r}")
    return bundle


def _datasets(
    datasets: Mapping[str, Any] | None, data: DataSettings, concurrency: int
) -> tuple[dict[str, Any], dict[str, Callable[..., Any]], Feed | None]:
    """Split the datasets into those every trial shares and the factories each trial calls.

    The shared ones are those materialized with ``once``, and any Dataset given as an object.
    The feed is ``None`` when there are no datasets.
    """
    sources = resolve_sources(datasets)
    if not sources:
        return {}, {}, None
    unknown = [name for name in data.split if name not in sources]
    if unknown:
        raise ValueError(f"data.split names no dataset: {', '.join(unknown)} (datasets: {', '.join(sources)})")
    if data.materialize == "once":
        shared, factories = materialize_datasets(sources), {}
    else:
        shared = {name: s for name, s in sources.items() if not callable(s)}  # Dataset objects go by reference too
        factories = {name: s for name, s in sources.items() if callable(s)}
        ship_by_value(factories)
    cpu_limit = data_cpus_per_trial(data.reserved_cpus(True), concurrency)
    return shared, factories, Feed(tuple(data.split), cpu_limit, max(1, concurrency))


_Section = TypeVar("_Section", bound=BaseModel)


def _named(metrics: Sequence[str] | Mapping[str, str]) -> dict[str, str]:
    """Required metrics -> the spec key naming each (a bare name: the spec's ``metric``)."""
    return dict(metrics) if isinstance(metrics, Mapping) else dict.fromkeys(metrics, "metric")


def _as(model: type[_Section], value: _Section | Mapping[str, Any] | None) -> _Section:
    """A spec section from the section itself, a dict of it, or its defaults."""
    if value is None:
        return model()
    return value if isinstance(value, model) else model.model_validate(dict(value))
