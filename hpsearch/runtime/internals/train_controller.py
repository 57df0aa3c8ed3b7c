"""Ray Train's controller and trainer: the controller's process and errors, its failure policy, its environment
variables, and the helper processes a nested run starts.

Internals ``controller-process``, ``controller-failure``, ``train-env-names``,
``train-failure-policy`` (:func:`rank_failures`, :func:`veto_restarts`), ``train-default-callbacks``
(:func:`lean_trainer_class`) and ``train-controller-on-driver-node``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from hpsearch.runtime.internals.contract_checks import (
    ContractBroken,
    _assigns,
    _mentions,
    _parameters,
    _resolve,
    _source,
)
from hpsearch.runtime.internals.registry import CONTROLLER_CLASS, FAILURE_POLICY, TRAIN_ENV_VARS, TRAINER, available

__all__ = [
    "NO_DATASET_SHARD",
    "NoDatasetShards",
    "RankFailure",
    "controller_failure",
    "lean_trainer_class",
    "rank_failures",
    "veto_restarts",
]


def _check_controller_class() -> None:
    _resolve(f"ray.train.v2._internal.execution.controller.controller:{CONTROLLER_CLASS}")
    _mentions("ray.train.v2.api.data_parallel_trainer", f")({CONTROLLER_CLASS})")  # made an actor by that name


def _check_controller_failure() -> None:
    _assigns("ray.train.v2.api.exceptions:ControllerError", "controller_failure")


def _check_env_names() -> None:
    constants = _resolve("ray.train.v2._internal.constants")
    for attr, name in TRAIN_ENV_VARS.items():
        if getattr(constants, attr, None) != name:
            raise ContractBroken(f"ray.train.v2._internal.constants.{attr} is no longer {name!r}")


#: Ray's words when a worker asks for a dataset shard its run was not given (RayDatasetShardProvider's KeyError).
NO_DATASET_SHARD = (
    "Dataset shard for '{name}' not found. Please ensure that the dataset is passed through the Trainer "
    "`datasets` argument."
)


_DATASETS_CALLBACK = "ray.train.v2._internal.callbacks.datasets:DatasetsCallback"


_PG_CLEANER_CALLBACK = "ray.train.v2._internal.callbacks.placement_group_callback:PlacementGroupCleanerCallback"


def _check_trainer_callbacks() -> None:
    _parameters(f"{TRAINER}._create_default_callbacks", "self")
    _mentions(f"{TRAINER}.fit", "callbacks=self._create_default_callbacks()")
    _mentions(
        f"{TRAINER}._create_default_callbacks",
        "DatasetsCallback(",
        "datasets=self.datasets",
        "PlacementGroupCleanerCallback()",
    )
    # The cleaner's one job: a detached actor that removes the worker group once the controller is dead.
    _mentions(f"{_PG_CLEANER_CALLBACK}.after_controller_start", "PlacementGroupCleaner", 'lifetime="detached"')
    _mentions(f"{_PG_CLEANER_CALLBACK}.after_worker_group_start", "register_placement_group")
    _mentions(
        "ray.train.v2._internal.execution.controller.placement_group_cleaner:PlacementGroupCleaner._monitor_loop",
        "is_actor_alive(",
        "self._cleanup_placement_group(",
    )
    # A run that ends by itself removes its own worker group (nothing is left for a cleaner).
    _mentions(
        "ray.train.v2._internal.execution.worker_group.state:WorkerGroupState.shutdown",
        "placement_group_handle.shutdown()",
    )
    _mentions(
        "ray.train.v2._internal.execution.worker_group.placement_group_handle:DefaultPlacementGroupHandle.shutdown",
        "remove_placement_group(",
    )
    _assigns(TRAINER, "datasets", "train_run_context")
    _parameters(_DATASETS_CALLBACK, "train_run_context", "datasets")
    # Its one use of the datasets: a DatasetManager actor behind the provider each worker's context gets.
    _mentions(f"{_DATASETS_CALLBACK}.before_init_train_context", "RayDatasetShardProvider(", '"dataset_shard_provider"')
    _mentions(
        "ray.train.v2._internal.callbacks.datasets:RayDatasetShardProvider",
        "ray.remote(DatasetManager)",
        "' not found. ",  # the KeyError NoDatasetShards repeats, in Ray's two string pieces
        "Please ensure that the dataset is passed through the Trainer `datasets` ",
    )
    _mentions(
        "ray.train.v2._internal.execution.context:TrainContext.get_dataset_shard",
        "self.dataset_shard_provider.get_dataset_shard(dataset_info)",
    )
    metadata = _resolve("ray.train.v2._internal.data_integration.interfaces:DatasetShardMetadata")
    if "dataset_name" not in getattr(metadata, "__dataclass_fields__", {}):
        raise ContractBroken("DatasetShardMetadata has no dataset_name field")


def _check_controller_node() -> None:
    # The controller starts on the node of the process that calls fit(): the trial driver's.
    _mentions(
        f"{TRAINER}._initialize_and_run_controller",
        "label_selector",
        "ray.get_runtime_context().get_node_id()",
        ")(TrainController)",
    )
    _mentions(f"{TRAINER}.fit", "self._initialize_and_run_controller(")


def controller_failure(err: BaseException) -> BaseException | None:
    """The exception a Train callback raised, when ``err`` is Ray Train's ``ControllerError`` wrapping it."""
    if not available("controller-failure"):
        return None
    # lazy: a missing internal turns its feature off; it never fails the import
    from ray.train import ControllerError

    if isinstance(err, ControllerError):
        cause: BaseException | None = err.controller_failure
        return cause
    return None


# ----------------------------------------------------------------------------- the failure policy


def _check_failure_policy() -> None:
    _parameters(f"{FAILURE_POLICY}.make_decision", "training_failed_error")
    decision = _resolve("ray.train.v2._internal.execution.failure_handling.failure_policy:FailureDecision")
    for name in ("RETRY", "RAISE"):
        if not hasattr(decision, name):
            raise ContractBroken(f"FailureDecision has no {name}")
    _assigns("ray.train.v2.api.exceptions:WorkerGroupError", "worker_failures")
    _resolve("ray.train.v2._internal.exceptions:RayTrainError")
    errors = _source(_resolve("ray.train.v2._internal.execution.worker_group.poll:WorkerGroupPollStatus.errors").fget)
    if "_base_exc" not in errors:
        raise ContractBroken("WorkerGroupPollStatus.errors no longer hands on the loop's own exception")
    _resolve("ray.train.v2._internal.execution.failure_handling.default:_is_preemption_failure")


#: One failed rank of a worker group: its rank, its error's type name and message, and whether the failure is
#: the infrastructure's (the worker could not be reached or died) rather than the loop's own exception.
RankFailure = tuple[int, str, str, bool]


def rank_failures(error: BaseException) -> list[RankFailure] | None:
    """Per failed rank, what Ray Train's ``WorkerGroupError`` holds (internal ``train-failure-policy``); ``None``
    for any other error and for a preemption, which Ray counts apart.

    ``infra``: Ray Train's own health-check errors and Ray's errors other than a task's; else the error is
    the loop's exception as it raised it.
    """
    from ray.exceptions import RayError, RayTaskError  # lazy: only a Train controller gets here

    # lazy: Ray Train's controller modules exist only where a controller runs (this module is imported everywhere)
    from ray.train.v2._internal.exceptions import RayTrainError
    from ray.train.v2._internal.execution.failure_handling import default  # lazy: as above
    from ray.train.v2.api.exceptions import WorkerGroupError  # lazy: as above

    if not isinstance(error, WorkerGroupError) or default._is_preemption_failure(error):
        return None

    def infra(failure: BaseException) -> bool:
        return isinstance(failure, RayTrainError) or (
            isinstance(failure, RayError) and not isinstance(failure, RayTaskError)
        )

    return [(int(rank), type(e).__name__, str(e), infra(e)) for rank, e in sorted(error.worker_failures.items())]


def veto_restarts(veto: Callable[[BaseException, bool], bool]) -> bool:
    """In the Train controller's process: after Ray Train's failure policy decides on a failure, ``veto(error,
    retry)`` may turn its decision to restart the worker group (``retry``) into a raise (internal
    ``train-failure-policy``).

    Installed once per process; a later call's ``veto`` replaces the earlier one. ``veto`` is asked about
    every failure, so it can record each; only a restart it vetoes becomes a ``RAISE``. Returns ``False``
    when the internal is missing.
    """
    global _VETO, _VETO_INSTALLED
    if not available("train-failure-policy"):
        return False
    # lazy: Ray Train's controller modules exist only where a controller runs (this module is imported everywhere)
    from ray.train.v2._internal.execution.failure_handling import default
    from ray.train.v2._internal.execution.failure_handling.failure_policy import FailureDecision  # lazy: as above

    _VETO = veto
    if _VETO_INSTALLED:
        return True
    policy = default.DefaultFailurePolicy
    decide = policy.make_decision

    def make_decision(self: Any, training_failed_error: Any) -> Any:
        decision = decide(self, training_failed_error)
        retry = decision == FailureDecision.RETRY
        vetoed = _VETO is not None and _VETO(training_failed_error, retry)
        return FailureDecision.RAISE if vetoed and retry else decision

    policy.make_decision = make_decision  # type: ignore[method-assign]  # in the controller's process only
    _VETO_INSTALLED = True
    return True


_VETO: Callable[[BaseException, bool], bool] | None = None
_VETO_INSTALLED = False


# ----------------------------------------------------------------------------- a nested run's helper processes


class NoDatasetShards:
    """A Train worker's dataset-shard provider for a run with no datasets: every name is Ray's ``KeyError``.

    What Ray's own provider says for a name it was not given, without the ``DatasetManager`` actor
    Ray starts for every run to hand out shards. Pickled by reference into each worker.
    """

    def get_dataset_shard(self, dataset_info: Any) -> Any:
        raise KeyError(NO_DATASET_SHARD.format(name=dataset_info.dataset_name))


def lean_trainer_class(base: type, *, cleaner: bool = True) -> type:
    """``base`` (Ray's ``TorchTrainer``), made to start fewer helper processes per nested run.

    Internal ``train-default-callbacks``: Ray Train builds the callbacks its controller runs in
    ``DataParallelTrainer._create_default_callbacks``. In the subclass returned:

    - a run with no datasets gets, instead of Ray's ``DatasetsCallback`` (which starts a
      ``DatasetManager`` actor in every run, datasets or not: about 1.5 CPU-seconds a trial), the
      same callback without that actor: a worker that asks for a shard gets Ray's own ``KeyError``,
      and the driver's ``DataContext`` still reaches the workers. A run with datasets keeps Ray's;
    - with ``cleaner=False`` (hpsearch's searches keep the cleaner: a run a cached reused actor ends after
      the search's last callback needs it), Ray's ``PlacementGroupCleanerCallback`` is left out: it starts a
      detached ``PlacementGroupCleaner`` actor per run (about 2 CPU-seconds a trial) that removes the
      worker group once the controller is dead. Only for a search whose own process does that
      (:class:`hpsearch.runtime.ray_workarounds.OrphanReaper`).

    Returns ``base`` itself when the internal is missing.
    """
    if not available("train-default-callbacks"):
        return base
    return _lean_trainer_class(base, cleaner)


@functools.cache
def _lean_trainer_class(base: type, cleaner: bool) -> type:
    """The subclass of :func:`lean_trainer_class`; made once per process (the trainer stays in the driver)."""
    # lazy: Ray Train's callbacks, only where a trial driver builds its trainer
    from ray.train.v2._internal.callbacks.datasets import DatasetsCallback

    # lazy: as above
    from ray.train.v2._internal.callbacks.placement_group_callback import PlacementGroupCleanerCallback

    class NoDatasetManager(DatasetsCallback):
        """Ray's ``DatasetsCallback`` for a run without datasets: the same, with no ``DatasetManager`` actor."""

        def before_init_train_context(self, workers: list[Any]) -> dict[str, list[Any]]:
            return {"dataset_shard_provider": [NoDatasetShards() for _ in workers]}

    class LeanTrainer(base):  # type: ignore[misc]  # Ray's TorchTrainer, given at run time
        """Ray's trainer whose run starts no ``DatasetManager`` without datasets (and, if told, no cleaner)."""

        def _create_default_callbacks(self) -> list[Any]:
            kept = []
            for cb in super()._create_default_callbacks():
                if type(cb) is PlacementGroupCleanerCallback and not cleaner:
                    continue
                if type(cb) is DatasetsCallback and not self.datasets:
                    cb = NoDatasetManager(train_run_context=self.train_run_context, datasets={})
                kept.append(cb)
            return kept

    LeanTrainer.__name__ = LeanTrainer.__qualname__ = base.__name__  # Ray's messages name the trainer's class
    return LeanTrainer
