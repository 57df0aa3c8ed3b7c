"""The function-trainable factory: one nested ``TorchTrainer`` run per Tune trial.

The Tune function trainable built here is the *trial driver*. Per trial it builds a
``TorchTrainer`` whose run name is the trial id (deterministic, so a retried or
restored trial finds its own checkpoints), stores it under the experiment folder,
passes the trial's config as ``train_loop_config``, and forwards every report to
Tune aggregated across workers (docs/architecture.md, "The data path", step 4).

Each forwarded report is also appended to the trial's history file, and the nested
run's controller records itself (:mod:`hpsearch.runtime.ray_workarounds`); the file
names are in :mod:`hpsearch.experiment.layout`.

Loops written for plain Ray Train run unchanged: on the workers, every report's values
are made plain Python before Ray sees them (NumPy scalars, 0-d tensors; see
:func:`_plain_reports`) and the loop's return value is dropped. A trial whose report
lacks the search metric errors at once with :class:`~hpsearch.errors.MetricNotReportedError`
(one line, naming the metric, a close name and what was reported), never retried.

Ray Data datasets (the spec's ``datasets`` and ``data``; :mod:`hpsearch.runtime.datasets`)
reach each nested run as ``TorchTrainer(datasets=..., dataset_config=DataConfig(...))``, so
the loop reads ``ray.train.get_dataset_shard(name)``: materialized once and handed to every
trial by reference (``tune.with_parameters``), or built by each trial driver.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from hpsearch.errors import CheckpointNotReportedError, MetricNotReportedError
from hpsearch.experiment import files
from hpsearch.experiment.layout import EPOCH, TRAIN_RUNS_DIR
from hpsearch.planning.planner import HEAD_RESOURCE, HEAD_SLIVER, data_cpus_per_trial
from hpsearch.runtime import reuse
from hpsearch.runtime.aggregate import aggregate_metrics, plain_metrics
from hpsearch.runtime.env import apply_trial_defaults
from hpsearch.spec import Aggregate, CheckpointSettings, Failure, Scaling
from hpsearch.spec._imports import is_file_module
from hpsearch.spec.datasets import DataSettings

__all__ = ["make_trainable"]


def make_trainable(
    train_loop: Callable[[dict[str, Any]], Any],
    *,
    scaling: Scaling | Mapping[str, Any] | None = None,
    driver_cpus: float = 0.25,
    driver_node: str = "head",
    failure: Failure | Mapping[str, Any] | None = None,
    checkpoint: CheckpointSettings | Mapping[str, Any] | None = None,
    aggregate: Aggregate | Mapping[str, Any] | None = None,
    storage_path: str | Path | None = None,
    metric: str | None = None,
    mode: str = "min",
    required_metrics: Sequence[str] = (),
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
            counts them (they then never take room a worker needs); ``"any"`` lets Ray choose.
        failure: Retry settings, as the spec's ``failure`` section.
        checkpoint: Checkpoint settings, as the spec's ``checkpoint`` section.
        aggregate: How each metric is combined across workers, as the spec's ``aggregate``.
        storage_path: Folder for the nested runs (``<storage_path>/<trial_id>``). Default:
            ``train/`` in the Tune experiment folder. On several nodes it must be storage
            every node can reach.
        metric: The search metric: with it, each trial keeps its ``num_to_keep`` best
            checkpoints by that metric (and always its latest, to resume from), and a
            trial whose report lacks it errors with :class:`~hpsearch.errors.MetricNotReportedError`.
        mode: ``"min"`` or ``"max"``, for ``metric``.
        required_metrics: Other metrics every report must hold, checked as ``metric`` is (a
            multi-objective search's other objectives, the scheduler's own metric).
        record_controller: Have each nested run's controller record itself for
            :class:`~hpsearch.runtime.ray_workarounds.OrphanReaper`. Default: unless the Ray
            work-arounds are switched off (``HPSEARCH_RAY_WORKAROUNDS=0``).
        datasets: Ray Data datasets for the loop's ``ray.train.get_dataset_shard(name)``, as
            the spec's ``datasets``: name -> a ``ray.data.Dataset``, a factory (called as
            ``factory()``, or ``factory(config)`` with the trial's config under ``per_trial``)
            or a ``"module:function"`` reference. With ``materialize: once`` they are built
            and materialized here (Ray must be connected) and shared with every trial.
        data: How they reach the trials, as the spec's ``data`` section (``split``,
            ``materialize``, ``cpus``).
        concurrency: Trials at once (the plan's ``max_concurrent_trials``): each trial's Ray
            Data executors get ``1/concurrency`` of ``data.cpus`` and of Ray Data's object store
            budget (:func:`~hpsearch.planning.planner.data_cpus_per_trial`).
        population: Population-based training (``pbt``, ``pb2``; :mod:`hpsearch.runtime.pbt`): every
            report must carry a checkpoint and reaches Tune with a pointer to it, a trial exploited
            by the scheduler continues from the donor's checkpoint in a new nested run, nested runs
            keep every checkpoint, and at most ``concurrency`` drivers hold the head node's slots.

    Returns:
        A trainable for ``ray.tune.Tuner``, with the driver's resources attached.

    Example:
        >>> from ray import tune
        >>> from hpsearch.examples.digits import train_loop
        >>> trainable = make_trainable(train_loop, scaling={"num_workers": 2, "resources_per_worker": {"CPU": 0.5}})
        >>> tuner = tune.Tuner(trainable, param_space={"lr": tune.loguniform(1e-4, 1e-1)},
        ...                    tune_config=tune.TuneConfig(metric="val_loss", mode="min", num_samples=4))
    """
    from ray import cloudpickle, tune

    if is_file_module(getattr(train_loop, "__module__", "")):
        # A loop loaded from a .py file has no importable module on the workers: ship it by value.
        cloudpickle.register_pickle_by_value(sys.modules[train_loop.__module__])  # type: ignore[no-untyped-call]  # vendored, unannotated
    scaling = _as(Scaling, scaling)
    failure = _as(Failure, failure)
    checkpoint = _as(CheckpointSettings, checkpoint)
    aggregate = _as(Aggregate, aggregate)
    runs_dir = None if storage_path is None else str(Path(storage_path).expanduser().resolve())
    if record_controller is None:
        from hpsearch.runtime.ray_workarounds import workarounds_enabled

        record_controller = workarounds_enabled()

    # Under PBT another trial may continue from any checkpoint a pointer names: keep them all.
    checkpoint_config: dict[str, Any] = {"num_to_keep": None if population else checkpoint.num_to_keep}
    if metric is not None:
        checkpoint_config.update(checkpoint_score_attribute=metric, checkpoint_score_order=mode)
    search_token = uuid.uuid4().hex  # one per Tuner: Tune's retries of a trial share it, a resume does not
    shared, factories, feed = _datasets(datasets, _as(DataSettings, data), concurrency)

    def hpsearch_trial(config: dict[str, Any], datasets: Mapping[str, Any] | None = None) -> None:
        _run_nested(
            train_loop,
            config,
            scaling,
            failure,
            checkpoint_config,
            aggregate,
            runs_dir,
            record_controller,
            metric=metric,
            required=(*([metric] if metric is not None else []), *required_metrics),
            search_token=search_token,
            data=_TrialData(dict(datasets or {}), factories, feed) if feed is not None else None,
            population=population,
        )

    hpsearch_trial.__name__ = f"hpsearch_{getattr(train_loop, '__name__', 'trial')}"
    hpsearch_trial.__qualname__ = hpsearch_trial.__name__
    # Tune's hook for the class it wraps a function in: with reuse_actors, the previous trial's
    # nested run is ended before the next trial runs in the actor (runtime/reuse.py).
    hpsearch_trial.__mixins__ = (reuse.ReusableDriver,)  # type: ignore[attr-defined]  # read by ray.tune's wrap_function
    trial: Callable[..., None] = hpsearch_trial
    if shared:  # the datasets' handles go into the object store once; every trial reads the same blocks
        trial = tune.with_parameters(hpsearch_trial, datasets=shared)
    bundle = {"CPU": driver_cpus}
    if driver_node == "head":
        bundle[HEAD_RESOURCE] = HEAD_SLIVER
        if population:  # the population takes turns: only `concurrency` drivers fit on the head at once
            from hpsearch.runtime.pbt import driver_slot

            bundle[HEAD_RESOURCE] = driver_slot(concurrency)
    elif driver_node != "any":
        raise ValueError(f"driver_node must be 'head' or 'any', got {driver_node!r}")
    return tune.with_resources(trial, tune.PlacementGroupFactory([bundle]))


@dataclass(frozen=True)
class _Feed:
    """How a trial's datasets are fed: the names split across workers and each executor's caps."""

    split: tuple[str, ...]
    cpu_limit: float | None
    concurrency: int


@dataclass(frozen=True)
class _TrialData:
    """One trial's datasets: those shared by every trial, and the factories it calls itself."""

    shared: dict[str, Any]
    factories: dict[str, Callable[..., Any]]
    feed: _Feed


def _datasets(
    datasets: Mapping[str, Any] | None, data: DataSettings, concurrency: int
) -> tuple[dict[str, Any], dict[str, Callable[..., Any]], _Feed | None]:
    """Split the datasets into those every trial shares (materialized with ``once``, and any
    Dataset given as an object) and the factories each trial calls; ``None`` feed: no datasets."""
    from hpsearch.runtime.datasets import materialize_datasets, resolve_sources, ship_by_value

    sources = resolve_sources(datasets)
    if not sources:
        return {}, {}, None
    unknown = [name for name in data.split if name not in sources]
    if unknown:
        raise ValueError(f"data.split names no dataset: {', '.join(unknown)} (datasets: {', '.join(sources)})")
    if data.materialize == "once":
        shared, factories = materialize_datasets(sources), {}
    else:
        shared = {name: s for name, s in sources.items() if not callable(s)}  # Dataset objects: by reference too
        factories = {name: s for name, s in sources.items() if callable(s)}
        ship_by_value(factories)
    cpu_limit = data_cpus_per_trial(data.reserved_cpus(True), concurrency)
    return shared, factories, _Feed(tuple(data.split), cpu_limit, max(1, concurrency))


_Section = TypeVar("_Section", bound=BaseModel)


def _as(model: type[_Section], value: _Section | Mapping[str, Any] | None) -> _Section:
    """A spec section from the section itself, a dict of it, or its defaults."""
    if value is None:
        return model()
    return value if isinstance(value, model) else model.model_validate(dict(value))


def _worker_loop(train_loop: Callable[..., Any], run_folder: str | None = None) -> Callable[..., None]:
    """The user's loop as each Train worker runs it: reports made plain, the return value dropped.

    With ``run_folder``, rank 0 records the run's worker placement group there first
    (:func:`hpsearch.runtime.reuse.record_worker_group`).

    The loop keeps its arity (Ray Train calls a loop with a required parameter with the
    config, one without any with nothing). Its return value would travel to the
    controller, which Ray refuses for anything holding a tensor; nothing reads it.
    """
    required = _required_parameters(train_loop)
    if required > 1:
        return train_loop  # Ray Train refuses it with its own message

    def hpsearch_worker(*args: dict[str, Any]) -> None:  # a *args counts as one: Ray Train passes the config
        if run_folder is not None:
            reuse.record_worker_group(run_folder)
        _plain_reports()
        train_loop(*args[:required])

    return hpsearch_worker


def _required_parameters(fn: Callable[..., Any]) -> int:
    """How many arguments Ray Train takes ``fn`` to require: positional ones without a default, a
    ``*args`` counting as one (the rule of ``ray.train._internal.utils.count_required_parameters``)."""
    positional = (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
    )
    return sum(1 for p in inspect.signature(fn).parameters.values() if p.default is p.empty and p.kind in positional)


def _plain_reports() -> None:
    """Make every ``ray.train.report`` of this worker pass its metrics through :func:`plain_metrics`.

    Ray Train refuses a metric that is a torch tensor (``ValueError`` in the worker), and its
    checkpoint bookkeeping fails on a NumPy ``float32``/``int64`` (its pydantic snapshot cannot
    serialise them), so a loop that reports ``loss`` as the criterion returned it would fail.
    Every ``ray.train`` call on a worker goes through the process's ``TrainFnUtils``
    (``ray.train.v2._internal.execution.train_fn_utils``, "can be patched if new user APIs
    behaviors is wanted"); its ``report`` is wrapped here, once per process. Should Ray move
    it, reports go through unchanged and the controller still converts NumPy values.
    """
    try:
        from ray.train.v2._internal.execution.train_fn_utils import get_train_fn_utils

        utils = get_train_fn_utils()
    except (ImportError, RuntimeError):  # not a Train V2 worker, or Ray moved it
        return
    report = utils.report
    if getattr(report, "_hpsearch_plain", False):
        return

    def plain_report(metrics: Mapping[str, Any], *args: Any, **kwargs: Any) -> None:
        report(plain_metrics(metrics), *args, **kwargs)

    plain_report._hpsearch_plain = True  # type: ignore[attr-defined]  # a marker on the function
    utils.report = plain_report  # type: ignore[method-assign]  # on this instance only


def _run_nested(
    train_loop: Callable[..., Any],
    config: dict[str, Any],
    scaling: Scaling,
    failure: Failure,
    checkpoint_config: dict[str, Any],
    aggregate: Aggregate,
    runs_dir: str | None,
    record_controller: bool = True,
    *,
    metric: str | None = None,
    required: Sequence[str] = (),
    search_token: str = "",
    data: _TrialData | None = None,
    population: bool = False,
) -> None:
    """Body of the trial driver (runs in the Tune trial's actor)."""
    apply_trial_defaults(failure)  # Ray Train passes them on to the controller and workers

    from ray import train, tune
    from ray.train.torch import TorchTrainer

    context = tune.get_context()
    trial_id = context.get_trial_id()
    missing_key = f"{search_token}/{trial_id}"
    earlier = _missing_metric_before(missing_key) if required else None
    if earlier is not None:  # Tune retries it (trial_retries): it would only fail the same way again
        raise earlier
    if runs_dir is None:
        runs_dir = str(Path(context.get_trial_dir()).parent / TRAIN_RUNS_DIR)
    trial_folder = os.path.join(runs_dir, trial_id)  # the trial's history, lineage and controller record
    generation = reuse.begin_run(trial_folder)  # a reused actor ends this run before its next trial
    storage_path, run_name, donor_epoch = runs_dir, trial_id, None
    if population:
        from hpsearch.runtime import pbt

        start = pbt.resolve_start(trial_id, runs_dir, tune.get_checkpoint())
        storage_path, run_name = start.storage_path(runs_dir), start.name
        donor_epoch = start.donor.epoch if start.donor is not None else None
        pbt.install_pointer_reports(trial_id, runs_dir, start)
    fed: dict[str, Any] = {}
    if data is not None:
        from hpsearch.runtime.datasets import build_for_trial, data_config

        feed = data.feed
        fed = {
            "datasets": {
                **data.shared,
                **build_for_trial({k: reuse.current(f) for k, f in data.factories.items()}, config),
            },
            "dataset_config": data_config(feed.split, feed.cpu_limit, feed.concurrency),
        }

    # Searched scaling: this trial's own values, from its config (which keeps them under `scaling`, so
    # the loop can read its scale and the config it sees is the one Tune and load_results show).
    own = scaling.for_trial(config)
    trainer = TorchTrainer(
        _worker_loop(reuse.current(train_loop), trial_folder),
        train_loop_config=config,
        scaling_config=train.ScalingConfig(
            num_workers=own.workers,
            use_gpu=own.use_gpu,
            resources_per_worker=own.worker_bundle(),
            placement_strategy=own.placement_strategy,
        ),
        # ray.train's names resolve to Train V2's classes at run time; type checkers see V1's.
        run_config=train.RunConfig(  # type: ignore[call-arg]  # V2's RunConfig takes logging_config
            name=run_name,
            storage_path=storage_path,
            callbacks=[
                _aggregating_callback(
                    aggregate,
                    trial_folder,
                    record_controller,
                    required=required,
                    checkpoints=_Checkpoints(population, donor_epoch) if population else None,
                )
            ],
            failure_config=train.FailureConfig(  # type: ignore[call-arg]  # V2's FailureConfig has these limits
                max_failures=failure.worker_retries,
                controller_failure_limit=failure.controller_retries,
                max_preemption_failures=failure.worker_retries,
            ),
            checkpoint_config=train.CheckpointConfig(**checkpoint_config),
            logging_config=train.LoggingConfig(log_level="WARNING"),
        ),
        **fed,
    )
    reuse.claim(generation)  # a later trial took this actor while this one was setting up: leave
    try:
        trainer.fit()  # raises the nested run's error, so Tune marks the trial errored
        reuse.claim(generation)
        if record_controller:  # the work-arounds are on: Tune must take the last report first (bug 3)
            from hpsearch.runtime.ray_workarounds import wait_for_forwarded_reports

            wait_for_forwarded_reports()
    except Exception as err:
        cause = getattr(err, "controller_failure", None)  # a ControllerError: the callback raised it
        if isinstance(cause, CheckpointNotReportedError):
            raise cause from None  # one line, not Ray's wrapper around it
        if not isinstance(cause, MetricNotReportedError):
            raise
        _remember_missing_metric(missing_key, cause)
        raise cause from None  # the trial's error is the one line, not Ray's wrapper around it


#: Where a trial's missing metric is kept for Tune's retries of it: Ray's key-value store
#: (the cluster's GCS), keyed by the Tuner's token and the trial id; gone with the cluster.
_MISSING_METRIC_NAMESPACE = "hpsearch_missing_metric"


def _remember_missing_metric(key: str, error: MetricNotReportedError) -> None:
    """Keep a trial's missing metric for its retries (a courtesy: never fails the trial further)."""
    try:
        from ray.experimental.internal_kv import _internal_kv_put

        value = json.dumps({"metric": error.metric, "reported": list(error.reported)})
        _internal_kv_put(key, value, namespace=_MISSING_METRIC_NAMESPACE)
    except Exception:  # noqa: BLE001 - without it a retry runs the loop once more and fails the same way
        pass


def _missing_metric_before(key: str) -> MetricNotReportedError | None:
    """The missing metric an earlier run of this trial, in this search, failed on; ``None`` if none."""
    try:
        from ray.experimental.internal_kv import _internal_kv_get

        value = _internal_kv_get(key, namespace=_MISSING_METRIC_NAMESPACE)
        if value is None:
            return None
        found = json.loads(value)
        return MetricNotReportedError(found["metric"], found["reported"])
    except Exception:  # noqa: BLE001 - a store that cannot be read: run the trial
        return None


def _has_metric(result: Mapping[str, Any], metric: str) -> bool:
    """Whether a report holds ``metric`` as Tune looks for it (``a/b`` is ``{"a": {"b": ...}}`` too)."""
    if metric in result:
        return True
    node: Any = result
    for part in metric.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


@dataclass(frozen=True)
class _Checkpoints:
    """What a population-based trial's reports must carry: a checkpoint each, and, in a run that
    continues from a donor's checkpoint of ``donor_epoch``, a first epoch after it."""

    required: bool
    donor_epoch: int | None = None


def _checkpoint_problem(checks: _Checkpoints, metrics: Mapping[str, Any], checkpoint: Any, first: bool) -> str | None:
    """Why a report cannot go on under population-based training, or ``None``."""
    epoch = metrics.get(EPOCH)
    # one line each, short enough that the trial's error line (200 characters) keeps all of it
    if checks.donor_epoch is not None and first and isinstance(epoch, (int, float)) and epoch <= checks.donor_epoch:
        return (
            f"this run continues another trial's checkpoint of epoch {checks.donor_epoch}, but the loop reported "
            f"epoch {epoch}: load it with hpsearch.train.restore(model=..., optimizer=...)"
        )
    if checks.required and checkpoint is None:
        return (
            f"pbt/pb2 need a checkpoint with every report; epoch {epoch} had none: report with "
            "hpsearch.train.report(..., model=...) or ray.train.report(..., checkpoint=...)"
        )
    return None


def _aggregating_callback(
    aggregate: Aggregate,
    run_folder: str,
    record_controller: bool = True,
    *,
    required: Sequence[str] = (),
    checkpoints: _Checkpoints | None = None,
) -> Any:
    """A ``TuneReportCallback`` that forwards the aggregate of all ranks, not rank 0's dict.

    Built inside the trial: Ray's callback binds to the Tune session of the trial that
    constructs it. Each forwarded report is also appended to the history file in
    ``run_folder`` (the nested run's folder), and, with ``record_controller``, the
    controller records itself there for :class:`hpsearch.runtime.ray_workarounds.OrphanReaper`.

    A report without one of the ``required`` metrics (the spec's metric, every objective, the
    scheduler's metric) raises :class:`MetricNotReportedError`, naming the first missing, instead of
    reaching Tune (whose own check would end the whole search with a ``TuneError``). Ray
    Train wraps it in a ``ControllerError``, which its failure policy never retries (only
    worker-group start failures are retryable controller errors), so ``fit()`` raises it
    in the trial driver at once, without a restart of the worker group.
    """
    from ray.tune.integration.ray_train import TuneReportCallback

    from hpsearch.runtime import ray_workarounds

    class AggregatingTuneReportCallback(TuneReportCallback):
        reports = 0

        def after_report(self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any) -> None:
            if self.reports == 0 and record_controller:  # runs in the controller: say which process to check on
                ray_workarounds.record_controller(run_folder)
            self.reports += 1
            combined = aggregate_metrics(metrics, aggregate.method)
            reported = list(combined)
            # Schedulers count epochs (they survive restarts; Tune's iterations start again at 1).
            # A loop that reports none gets its reports numbered, from 1 in each run of the trial.
            combined.setdefault(EPOCH, self.reports)
            missing = next((m for m in required if not _has_metric(combined, m)), None)
            if missing is not None:
                raise MetricNotReportedError(missing, reported)
            if checkpoints is not None:
                problem = _checkpoint_problem(checkpoints, combined, checkpoint, first=self.reports == 1)
                if problem is not None:
                    raise CheckpointNotReportedError(problem)
            super().after_report(run_context, [combined], checkpoint)
            _append_history(run_folder, combined, checkpoint)

    return AggregatingTuneReportCallback()  # type: ignore[no-untyped-call]  # Ray's __init__ has no annotations


def _append_history(run_folder: str, metrics: dict[str, Any], checkpoint: Any) -> None:
    """Keep every report of a trial, across restarts, where Tune does not overwrite it."""
    try:
        files.append_history(run_folder, metrics, checkpoint_path=checkpoint.path if checkpoint is not None else None)
    except OSError:  # the history is a record; the report itself already went to Tune
        pass
