"""The function-trainable factory: one nested ``TorchTrainer`` run per Tune trial.

The Tune function trainable built here is the *trial driver*. Per trial it builds a
``TorchTrainer`` whose run name is the trial id (deterministic, so a retried or
restored trial finds its own checkpoints), stores it under the experiment folder,
passes the trial's config as ``train_loop_config``, and forwards every report to
Tune aggregated across workers. See DESIGN.md, "The nested trial".
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from hpsearch.runtime.aggregate import aggregate_metrics
from hpsearch.planning.planner import HEAD_RESOURCE, HEAD_SLIVER
from hpsearch.spec import Aggregate, CheckpointSettings, Failure, Scaling

__all__ = ["make_trainable", "TRAIN_RUNS_DIR", "HISTORY_FILE", "EPOCH", "RAY_TRAIN_ENV_DEFAULTS"]

#: Folder, inside the experiment folder, that holds every trial's nested Train run.
TRAIN_RUNS_DIR = "train"
#: The metric schedulers count by default; hpsearch.train.report always reports it.
EPOCH = "epoch"
#: Every report Tune was sent for a trial, one JSON line each, in ``<train>/<trial_id>/``.
#: Tune keeps only the rows after a restart in its result.json; this file keeps them all.
HISTORY_FILE = "hpsearch_history.jsonl"

#: Ray Train settings hpsearch changes unless the user's environment already sets them.
#: The controller polls its workers every RAY_TRAIN_HEALTH_CHECK_INTERVAL_S (2 s by
#: default): every report reaches Tune at a poll, and every step of a run's start and
#: teardown waits for one. Measured on 2 CPUs, a 1-worker trial of 5 short epochs
#: (wall time of the nested run): 2 s -> ~19 s, 0.2 s -> 9.9 s, 0.1 s -> 8.8 s, 0.05 s ->
#: 8.5 s. A poll is one small remote call per worker; 0.1 s keeps that cost negligible.
RAY_TRAIN_ENV_DEFAULTS = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1"}


def make_trainable(
    train_loop: Callable[[dict], Any],
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
            checkpoints by that metric (and always its latest, to resume from).
        mode: ``"min"`` or ``"max"``, for ``metric``.

    Returns:
        A trainable for ``ray.tune.Tuner``, with the driver's resources attached.

    Example:
        >>> from ray import tune
        >>> from hpsearch.examples.digits import train_loop
        >>> trainable = make_trainable(train_loop, scaling={"num_workers": 2, "resources_per_worker": {"CPU": 0.5}})
        >>> tuner = tune.Tuner(trainable, param_space={"lr": tune.loguniform(1e-4, 1e-1)},
        ...                    tune_config=tune.TuneConfig(metric="val_loss", mode="min", num_samples=4))
    """
    from ray import tune

    scaling = _as(Scaling, scaling)
    failure = _as(Failure, failure)
    checkpoint = _as(CheckpointSettings, checkpoint)
    aggregate = _as(Aggregate, aggregate)
    runs_dir = None if storage_path is None else str(Path(storage_path).expanduser().resolve())

    checkpoint_config = {"num_to_keep": checkpoint.num_to_keep}
    if metric is not None:
        checkpoint_config.update(checkpoint_score_attribute=metric, checkpoint_score_order=mode)

    def hpsearch_trial(config: dict) -> None:
        _run_nested(train_loop, config, scaling, failure, checkpoint_config, aggregate, runs_dir)

    hpsearch_trial.__name__ = f"hpsearch_{getattr(train_loop, '__name__', 'trial')}"
    hpsearch_trial.__qualname__ = hpsearch_trial.__name__
    bundle = {"CPU": driver_cpus}
    if driver_node == "head":
        bundle[HEAD_RESOURCE] = HEAD_SLIVER
    elif driver_node != "any":
        raise ValueError(f"driver_node must be 'head' or 'any', got {driver_node!r}")
    return tune.with_resources(hpsearch_trial, tune.PlacementGroupFactory([bundle]))


def _as(model: type, value: Any) -> Any:
    if value is None:
        return model()
    return value if isinstance(value, model) else model.model_validate(dict(value))


def _run_nested(
    train_loop: Callable[[dict], Any],
    config: dict,
    scaling: Scaling,
    failure: Failure,
    checkpoint_config: dict[str, Any],
    aggregate: Aggregate,
    runs_dir: str | None,
) -> None:
    """Body of the trial driver (runs in the Tune trial's actor)."""
    for key, value in RAY_TRAIN_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    # Bound the wait for workers that cannot be placed; Ray propagates these to the controller.
    os.environ["RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"] = str(failure.worker_start_timeout_s)

    from ray import train, tune
    from ray.train.torch import TorchTrainer

    context = tune.get_context()
    trial_id = context.get_trial_id()
    if runs_dir is None:
        runs_dir = str(Path(context.get_trial_dir()).parent / TRAIN_RUNS_DIR)

    trainer = TorchTrainer(
        train_loop,
        train_loop_config=config,
        scaling_config=train.ScalingConfig(
            num_workers=scaling.num_workers,
            use_gpu=scaling.use_gpu,
            resources_per_worker=scaling.worker_bundle(),
            placement_strategy=scaling.placement_strategy,
        ),
        run_config=train.RunConfig(
            name=trial_id,
            storage_path=runs_dir,
            callbacks=[_aggregating_callback(aggregate, os.path.join(runs_dir, trial_id, HISTORY_FILE))],
            failure_config=train.FailureConfig(
                max_failures=failure.worker_retries,
                controller_failure_limit=failure.controller_retries,
                max_preemption_failures=failure.worker_retries,
            ),
            checkpoint_config=train.CheckpointConfig(**checkpoint_config),
            logging_config=train.LoggingConfig(log_level="WARNING"),
        ),
    )
    trainer.fit()  # raises the nested run's error, so Tune marks the trial errored


def _aggregating_callback(aggregate: Aggregate, history_path: str) -> Any:
    """A ``TuneReportCallback`` that forwards the aggregate of all ranks, not rank 0's dict.

    Built inside the trial: Ray's callback binds to the Tune session of the trial that
    constructs it. Each forwarded report is also appended to ``history_path``, and the
    controller records itself next to it for :class:`hpsearch.runtime.ray_workarounds.OrphanReaper`.
    """
    from ray.tune.integration.ray_train import TuneReportCallback

    from hpsearch.runtime.ray_workarounds import record_controller

    class AggregatingTuneReportCallback(TuneReportCallback):
        reports = 0

        def after_report(self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any) -> None:
            if self.reports == 0:  # runs in the controller: say which process to check on later
                record_controller(os.path.dirname(history_path))
            self.reports += 1
            combined = aggregate_metrics(metrics, aggregate.method)
            # Schedulers count epochs (they survive restarts; Tune's iterations start again at 1).
            # A loop that reports none gets its reports numbered, from 1 in each run of the trial.
            combined.setdefault(EPOCH, self.reports)
            super().after_report(run_context, [combined], checkpoint)
            _append_history(history_path, combined, checkpoint)

    return AggregatingTuneReportCallback()


def _append_history(path: str, metrics: dict[str, Any], checkpoint: Any) -> None:
    """Keep every report of a trial, across restarts, where Tune does not overwrite it."""
    record = {"time": time.time(), **metrics}
    if checkpoint is not None:
        record["checkpoint_path"] = checkpoint.path
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record, default=str) + "\n")
    except OSError:  # the history is a record; the report itself already went to Tune
        pass
