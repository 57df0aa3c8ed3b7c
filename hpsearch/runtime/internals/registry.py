"""The one door to other libraries' internals: every private name hpsearch relies on, named and checked.

Ray has no public API for a few things a nested search needs: a trial driver's Tune session
(its queues, its stop event, its ``report``), the switch that keeps an embedded Ray on the
loopback, the hook Tune gives a function trainable's class, a Tune scheduler's exploit step,
the study an Optuna searcher builds. Each such reliance lives here, and only here:

- Each one is an :class:`Internal` in :data:`INTERNALS`: what it relies on, the versions it
  was checked on, what stops working without it, the public alternative where Ray has one
  (and why it is not used, where it is not), and what a missing one means for a search
  (``warn``: the feature named goes off with one line; ``refuse``: the search is refused
  before anything starts, with exit code 2).
- Each accessor below (a function or a small base class) uses only the internals it names.
  No other module of hpsearch imports ``ray._private``, a ``ray.*._internal`` module or
  ``ray.experimental.internal_kv``, or reads or writes an underscore attribute of another
  library's object: ``tests/test_internals_door.py`` walks the package and enforces it.
- :func:`broken` checks every contract against the installed libraries (names, signatures,
  the attributes read, the module constants written), without a cluster, in well under a
  second. ``tests/test_ray_contract.py`` runs it in CI, and :func:`preflight` runs it at the
  start of every ``run`` and ``resume``, before anything is written.

A process that finds an internal missing treats its feature as off (:func:`available`); the
search process has said so once, at :func:`preflight`, so the trial drivers and Train
processes that check again stay quiet.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import logging
import os
import queue
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hpsearch import messages
from hpsearch.errors import IncompatibleLibraryError
from hpsearch.planning.planner import HEAD_RESOURCE
from hpsearch.spec.plugins import OptunaOptions
from hpsearch.spec.space import is_conditional

if TYPE_CHECKING:
    from hpsearch.spec import Spec

__all__ = [
    "INTERNALS",
    "Internal",
    "available",
    "broken",
    "preflight",
    "DriverSession",
    "add_trainable_mixin",
    "wrap_worker_reports",
    "watch_worker_reports",
    "controller_failure",
    "loopback_flag",
    "set_driver_error_printing",
    "current_node",
    "tune_interrupt_installed",
    "data_object_store_fraction",
    "ray_data_console_handlers",
    "torch_config_with_worker_setup",
    "offer_start_checkpoint",
    "hold_in_coordinator",
    "lean_trainer_class",
    "lean_torch_config",
    "NoDatasetShards",
    "NodeInfo",
    "Exploit",
    "ExploitHook",
    "OptunaStudyHook",
    "HyperOptTrialsHook",
    "VariantHook",
    "TBXWriters",
]

#: The Ray versions every contract below was checked on (the versions CI runs).
CHECKED_ON = "Ray 2.58.0 and 2.60.0"


class ContractBroken(Exception):
    """An internal is not as hpsearch expects it (the message says what differs)."""


@dataclass(frozen=True)
class Internal:
    """One internal of another library hpsearch relies on.

    ``key``: a short name, used in messages and by :func:`available`. ``relies_on``: the
    module, names and attributes. ``feature``: what depends on it, as a user knows it.
    ``without_it``: what happens when it is missing. ``public``: the public alternative
    where one exists, and why it is or is not used. ``on_missing``: ``warn`` (the feature
    goes off with one line) or ``refuse`` (exit 2). ``used_by``: for a feature only some
    specs use, which; ``None`` means every search. ``embedded_only``: needed only by an
    embedded Ray (not with ``--address``). ``check``: raises :class:`ContractBroken` when the
    installed library differs.
    """

    key: str
    relies_on: str
    feature: str
    without_it: str
    public: str
    on_missing: Literal["warn", "refuse"]
    check: Callable[[], None]
    used_by: Callable[[Spec], bool] | None = None
    embedded_only: bool = False
    checked_on: str = CHECKED_ON


# ----------------------------------------------------------------------------- checking helpers


def _resolve(dotted: str) -> Any:
    """``package.module:attr.attr`` -> the object; :class:`ContractBroken` naming what is missing."""
    module_name, _, attrs = dotted.partition(":")
    try:
        found: Any = import_module(module_name)
    except ImportError as err:
        raise ContractBroken(f"cannot import {module_name} ({err})") from None
    path = module_name
    for attr in filter(None, attrs.split(".")):
        if not hasattr(found, attr):
            raise ContractBroken(f"{path} has no attribute {attr}")
        found = getattr(found, attr)
        path = f"{path}.{attr}"
    return found


def _parameters(dotted: str, *names: str) -> None:
    """The callable at ``dotted`` takes each of ``names`` (by that name)."""
    fn = _resolve(dotted)
    params = inspect.signature(fn).parameters
    missing = [n for n in names if n not in params]
    if missing:
        raise ContractBroken(f"{dotted.replace(':', '.')} takes no parameter {', '.join(missing)} ({list(params)})")


def _source(obj: Any) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError) as err:
        raise ContractBroken(f"cannot read the source of {obj!r} ({err})") from None


def _assigns(dotted: str, *attrs: str) -> None:
    """The class at ``dotted`` sets each of ``attrs`` on its instances (``self.<attr> =`` or ``: T`` in its source).

    The class's own source when Python finds it, else its module's (a class re-exported under
    another module's name, as ``ray.train.ControllerError``, hides its definition).
    """
    found = _resolve(dotted)
    try:
        source = inspect.getsource(found)
    except (OSError, TypeError):
        source = _source(_resolve(dotted.partition(":")[0]))
    missing = [a for a in attrs if not re.search(rf"self\.{re.escape(a)}\s*(:|=(?!=))", source)]
    if missing:
        raise ContractBroken(f"{dotted.replace(':', '.')} no longer sets {', '.join(missing)}")


def _mentions(dotted: str, *texts: str) -> None:
    """The source of the object at ``dotted`` still contains each of ``texts``."""
    source = _source(_resolve(dotted))
    missing = [t for t in texts if t not in source]
    if missing:
        raise ContractBroken(f"{dotted.replace(':', '.')} no longer refers to {', '.join(missing)}")


def _all(*checks: Callable[[], None]) -> Callable[[], None]:
    def check() -> None:
        for one in checks:
            one()

    return check


# ----------------------------------------------------------------------------- the contracts

_SESSION = "ray.train._internal.session"
_SESSION_QUEUE_ATTRS = ("result_queue", "error_queue", "stop_event", "training_thread", "continue_lock")


def _check_session_queues() -> None:
    _resolve(f"{_SESSION}:get_session")
    _assigns(f"{_SESSION}:_TrainSession", "_inter_actor_queue", "training_started", *_SESSION_QUEUE_ATTRS)
    # The driver's main thread moves each forwarded report from the queue actor to the result queue.
    _mentions(f"{_SESSION}:_TrainSession._get_result_from_queues", "self._inter_actor_queue", "self.report(")


def _check_session_report() -> None:
    _check_session_queues()
    _parameters(f"{_SESSION}:_TrainSession.report", "metrics", "checkpoint")
    _resolve("ray.tune.integration.ray_train:CHECKPOINT_PATH_KEY")


def _check_mixins() -> None:
    _mentions("ray.tune.trainable.function_trainable:wrap_function", "__mixins__")
    _mentions("ray.tune.trainable.util:with_parameters", "__mixins__")


def _check_worker_report() -> None:
    module = "ray.train.v2._internal.execution.train_fn_utils"
    _resolve(f"{module}:get_train_fn_utils")
    _parameters(f"{module}:TrainFnUtils.report", "metrics")


def _check_worker_checkpoint() -> None:
    module = "ray.train.v2._internal.execution.train_fn_utils"
    _parameters(f"{module}:TrainFnUtils.get_checkpoint")
    _mentions("ray.train.v2.api.train_fn_utils:get_checkpoint", "get_train_fn_utils().get_checkpoint()")


def _check_controller_class() -> None:
    _resolve(f"ray.train.v2._internal.execution.controller.controller:{CONTROLLER_CLASS}")
    _mentions("ray.train.v2.api.data_parallel_trainer", f")({CONTROLLER_CLASS})")  # made an actor by that name


def _check_controller_failure() -> None:
    _assigns("ray.train.v2.api.exceptions:ControllerError", "controller_failure")


def _check_loopback() -> None:
    constants = _resolve("ray._private.ray_constants")
    if not isinstance(getattr(constants, "ENABLE_RAY_CLUSTER", None), bool):
        raise ContractBroken("ray._private.ray_constants.ENABLE_RAY_CLUSTER is no longer a bool")
    if getattr(constants, "ENABLE_RAY_CLUSTERS_ENV_VAR", None) != LOOPBACK_ENV_VAR:
        raise ContractBroken(f"ray._private.ray_constants no longer reads {LOOPBACK_ENV_VAR}")
    _mentions("ray._private.services:get_node_ip_address", "ray_constants.ENABLE_RAY_CLUSTER")


def _check_worker_logs() -> None:
    worker = _resolve("ray._private.worker")
    if not isinstance(getattr(worker, "_worker_logs_enabled", None), bool):
        raise ContractBroken("ray._private.worker._worker_logs_enabled is no longer a bool")
    _mentions("ray._private.worker:print_worker_logs", "_worker_logs_enabled")


def _check_node() -> None:
    _resolve("ray._private.worker:global_worker")
    _resolve("ray._private.worker:_global_node")
    node = _resolve("ray._private.node:Node")
    for name in ("get_logs_dir_path", "get_session_dir_path", "session_name"):
        if not hasattr(node, name):
            raise ContractBroken(f"ray._private.node.Node has no {name}")
    _assigns("ray._private.node:Node", "all_processes")


def _check_env_names() -> None:
    constants = _resolve("ray.train.v2._internal.constants")
    for attr, name in TRAIN_ENV_VARS.items():
        if getattr(constants, attr, None) != name:
            raise ContractBroken(f"ray.train.v2._internal.constants.{attr} is no longer {name!r}")


def _check_tune_interrupt() -> None:
    _mentions("ray.tune.tune:_setup_signal_catching", f"def {TUNE_INTERRUPT_HANDLER}(", "SIGUSR1")


def _check_data_fraction() -> None:
    manager = _resolve("ray.data._internal.execution.resource_manager:ResourceManager")
    value = getattr(manager, "DEFAULT_OBJECT_STORE_MEMORY_LIMIT_FRACTION", None)
    if value != DATA_OBJECT_STORE_FRACTION:
        raise ContractBroken(
            "Ray Data's ResourceManager.DEFAULT_OBJECT_STORE_MEMORY_LIMIT_FRACTION is "
            f"{value!r}, hpsearch assumes {DATA_OBJECT_STORE_FRACTION}"
        )
    _resolve("ray.data:DataContext")


def _check_head_resource() -> None:
    value = getattr(_resolve("ray._common.constants"), "HEAD_NODE_RESOURCE_NAME", None)
    if value != HEAD_NODE_RESOURCE:
        raise ContractBroken(
            f"Ray's head-node resource is {value!r}, hpsearch places drivers on {HEAD_NODE_RESOURCE!r}"
        )


def _check_ray_data_handler() -> None:
    _resolve(f"ray.data._internal.logging:{RAY_DATA_FILE_HANDLER}")


def _check_exploit() -> None:
    scheduler = "ray.tune.schedulers.pbt:PopulationBasedTraining"
    _parameters(f"{scheduler}._exploit", "tune_controller", "trial", "trial_to_clone")
    _assigns(
        scheduler, "_trial_state", "_time_attr", "_metric", "_metric_op", "_synch", "_perturbation_interval",
        "_next_perturbation_sync",
    )  # fmt: skip
    _assigns(
        "ray.tune.schedulers.pbt:_PBTTrialState",
        "last_result", "last_checkpoint", "last_score", "last_train_time", "last_perturbation_time",
    )  # fmt: skip
    _parameters(f"{scheduler}.on_trial_add", "tune_controller", "trial")
    _parameters("ray.tune.experiment.trial:Trial.set_status", "status")
    _parameters(f"{scheduler}._checkpoint_or_exploit", "trial", "tune_controller", "upper_quantile", "lower_quantile")
    _parameters(f"{scheduler}.choose_trial_to_run", "tune_controller")
    _parameters(f"{scheduler}.on_trial_result", "tune_controller", "trial", "result")
    _mentions(f"{scheduler}.on_trial_result", "_next_perturbation_sync", "get_live_trials")


def _check_optuna() -> None:
    searcher = "ray.tune.search.optuna.optuna_search:OptunaSearch"
    _parameters(f"{searcher}._setup_study", "mode")
    _assigns(searcher, "_ot_study", "_space", "_metric", "_ot_trials")


def _check_optuna_failed() -> None:
    searcher = "ray.tune.search.optuna.optuna_search:OptunaSearch"
    _parameters(f"{searcher}.on_trial_complete", "trial_id", "result", "error")
    _assigns(searcher, "_ot_study", "_ot_trials", "_completed_trials")


def _uses_failed_infeasible(spec: Spec) -> bool:
    options = spec.searcher.options
    return isinstance(options, OptunaOptions) and options.failed_trials == "infeasible"


def _check_optuna_constraints() -> None:
    searcher = "ray.tune.search.optuna.optuna_search:OptunaSearch"
    _parameters(f"{searcher}.on_trial_complete", "trial_id", "result", "error")
    _assigns(searcher, "_ot_trials")
    _parameters(
        "optuna.trial._trial:Trial.set_constraint", "key", "value"
    )  # Optuna 5's; constraints_func is deprecated


def _uses_optuna_constraints(spec: Spec) -> bool:
    return isinstance(spec.searcher.options, OptunaOptions) and (
        bool(spec.constraints) or _uses_failed_infeasible(spec)
    )


def _check_hyperopt() -> None:
    searcher = "ray.tune.search.hyperopt.hyperopt_search:HyperOptSearch"
    _resolve(f"{searcher}._setup_hyperopt")
    _assigns(searcher, "_hpopt_trials", "_live_trial_mapping", "domain", "rstate", "metric_op")


def _check_variants() -> None:
    _resolve("ray.tune.search.basic_variant:BasicVariantGenerator.next_trial")
    _assigns("ray.tune.experiment.trial:Trial", "evaluated_params", "experiment_tag", "config")


def _check_search_state() -> None:
    generator = "ray.tune.search.search_generator:SearchGenerator"
    variants = "ray.tune.search.basic_variant:BasicVariantGenerator"
    for cls in (generator, variants):
        if "{}" not in str(_resolve(f"{cls}.CKPT_FILE_TMPL")):
            raise ContractBroken(f"{cls.replace(':', '.')}.CKPT_FILE_TMPL names no session")
    if not re.search(r'"total_samples"\s*:.*"finished"\s*:', _source(_resolve(f"{generator}.get_state")), re.S):
        raise ContractBroken("SearchGenerator.get_state holds no total_samples and finished")
    _assigns(
        variants, "_total_samples", "_finished", "_iterators", "_uuid_prefix", "_constant_grid_search", "_random_state"
    )
    _parameters(
        "ray.tune.search.basic_variant:_TrialIterator",
        "uuid_prefix",
        "num_samples",
        "unresolved_spec",
        "constant_grid_search",
        "points_to_evaluate",
        "lazy_eval",
        "start",
        "random_state",
    )
    _assigns("ray.tune.search.basic_variant:_TrialIterator", "unresolved_spec", "lazy_eval")
    _parameters("ray.tune.utils.util:_atomic_save", "state", "checkpoint_dir", "file_name", "tmp_file_name")
    _parameters("ray.tune.utils.util:_load_newest_checkpoint", "dirpath", "ckpt_pattern")


def _only_on_resume(spec: Spec) -> bool:
    """No spec uses it at ``run``: ``resume --set num_samples=N`` checks it itself, before it grows a search."""
    return False


def grow_search(experiment_dir: str | Path, *, trials: int, repeats: int, old_repeats: int) -> int:
    """Let a saved search make ``trials`` trials in all, where it made fewer: raise the total in Tune's
    saved search state, before ``Tuner.restore`` reads it (internal ``tune-search-state``).

    A model-based searcher (Optuna, HyperOpt) sits in Tune's ``SearchGenerator``, whose state counts the
    trials it may still suggest (``total_samples``, ``finished``): raised, the same searcher, with its
    study, goes on suggesting. Random search and grids are Tune's ``BasicVariantGenerator``, whose state
    holds the iterators of its trials: one more iterator of ``repeats - old_repeats`` repeats of the space
    (whole repeats of a grid) continues its trial numbers and its random stream. Returns the total it
    held before.

    Raises:
        ContractBroken: the folder holds neither state, or one this Ray does not write.
    """
    # lazy: Tune's search modules, only for a resume that grows its search (this module is imported by workers)
    from ray.tune.search.basic_variant import BasicVariantGenerator, _TrialIterator
    from ray.tune.search.search_generator import SearchGenerator  # lazy: as above
    from ray.tune.utils.util import _atomic_save, _load_newest_checkpoint  # lazy: as above

    folder = str(experiment_dir)
    for cls in (SearchGenerator, BasicVariantGenerator):
        pattern = cls.CKPT_FILE_TMPL.format("*")
        newest = max(Path(folder).glob(pattern), default=None)
        state = _load_newest_checkpoint(folder, pattern) if newest is not None else None
        if newest is None or not isinstance(state, dict):
            continue
        if cls is SearchGenerator:
            before = int(state["total_samples"])
            state["total_samples"], state["finished"] = trials, False
        else:
            before = int(state["_total_samples"])
            iterators = state["_iterators"]
            if not iterators or any(it.lazy_eval for it in iterators):
                raise ContractBroken("the random search's saved state holds no iterator it can extend")
            state["_iterators"] = [
                *iterators,
                _TrialIterator(
                    uuid_prefix=state["_uuid_prefix"],
                    num_samples=repeats - old_repeats,
                    unresolved_spec=iterators[0].unresolved_spec,
                    constant_grid_search=state["_constant_grid_search"],
                    points_to_evaluate=[],
                    lazy_eval=False,
                    start=before,
                    random_state=state["_random_state"],  # the generator's own: its stream goes on
                ),
            ]
            state["_total_samples"], state["_finished"] = trials, False
        _atomic_save(state=state, checkpoint_dir=folder, file_name=newest.name, tmp_file_name=f"tmp-{newest.name}")
        return before
    raise ContractBroken(f"{folder} holds no saved search state of Tune's (search_gen_state-*, basic-variant-state-*)")


_FAILURE_POLICY = "ray.train.v2._internal.execution.failure_handling.default:DefaultFailurePolicy"


def _check_failure_policy() -> None:
    _parameters(f"{_FAILURE_POLICY}.make_decision", "training_failed_error")
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


def veto_retries(veto: Callable[[Sequence[tuple[int, str, str, bool]], bool], bool]) -> bool:
    """In the Train controller's process: let ``veto`` turn Ray Train's decision to restart a failed worker
    group into a raise (internal ``train-failure-policy``), once per process.

    ``veto(failures, retry)`` gets, per failed rank of Ray's ``WorkerGroupError``, ``(rank, type name,
    message, infra)``: ``infra`` when the worker could not be reached or died (Ray Train's own health-check
    errors, Ray's errors other than a task's), else the loop's exception as it raised it; and whether Ray
    decided to restart the group. It is asked about every worker-group failure that is not a preemption,
    so it can record each; only a restart it vetoes becomes a ``RAISE``. Returns ``False`` when the
    internal is missing.
    """
    global _VETO, _VETO_INSTALLED
    if not available("train-failure-policy"):
        return False
    from ray.exceptions import RayError, RayTaskError  # lazy: only a Train controller gets here

    # lazy: Ray Train's controller modules exist only where a controller runs (this module is imported everywhere)
    from ray.train.v2._internal.exceptions import RayTrainError
    from ray.train.v2._internal.execution.failure_handling import default  # lazy: as above
    from ray.train.v2._internal.execution.failure_handling.failure_policy import FailureDecision  # lazy: as above
    from ray.train.v2.api.exceptions import WorkerGroupError  # lazy: as above

    _VETO = veto
    if _VETO_INSTALLED:
        return True
    policy = default.DefaultFailurePolicy
    decide = policy.make_decision

    def infra(error: BaseException) -> bool:
        return isinstance(error, RayTrainError) or (isinstance(error, RayError) and not isinstance(error, RayTaskError))

    def make_decision(self: Any, training_failed_error: Any) -> Any:
        decision = decide(self, training_failed_error)
        if not isinstance(training_failed_error, WorkerGroupError) or default._is_preemption_failure(
            training_failed_error
        ):
            return decision
        failures = [
            (int(rank), type(error).__name__, str(error), infra(error))
            for rank, error in sorted(training_failed_error.worker_failures.items())
        ]
        retry = decision == FailureDecision.RETRY
        vetoed = _VETO is not None and _VETO(failures, retry)
        return FailureDecision.RAISE if vetoed and retry else decision

    policy.make_decision = make_decision  # type: ignore[method-assign]  # in the controller's process only
    _VETO_INSTALLED = True
    return True


_VETO: Callable[[Sequence[tuple[int, str, str, bool]], bool], bool] | None = None
_VETO_INSTALLED = False


def end_trial_retries(trial: Any) -> bool:
    """In the search process: let Tune retry ``trial`` no more, whatever ``failure.trial_retries`` left
    (internal ``tune-trial-retries``): its next failure is its last. Whether it could."""
    if not available("tune-trial-retries"):
        return False
    trial.max_failures = trial.run_metadata.num_failures
    return True


def _check_trial_retries() -> None:
    _assigns("ray.tune.experiment.trial:Trial", "max_failures")
    if "self.run_metadata.num_failures <= self.max_failures" not in _source(
        _resolve("ray.tune.experiment.trial:Trial.should_recover")
    ):
        raise ContractBroken("Trial.should_recover does not compare run_metadata.num_failures with max_failures")


def _check_tbx() -> None:
    _assigns("ray.tune.logger.tensorboardx:TBXLoggerCallback", "_trial_writer", "_trial_result")


def _torch_config_source() -> str:
    """``ray.train.torch.config``'s source, read from its file: importing it imports torch (seconds), and
    the search process, which checks every contract at start, never needs torch."""
    path = Path(_resolve("ray.train").__file__).parent / "torch" / "config.py"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise ContractBroken(f"cannot read {path} ({err})") from None


def _check_torch_backend() -> None:
    tree = ast.parse(_torch_config_source())
    defined = {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}

    def member(cls: str, name: str) -> ast.FunctionDef:
        found = defined.get(cls)
        if not isinstance(found, ast.ClassDef):
            raise ContractBroken(f"ray.train.torch.config has no class {cls}")
        for node in found.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node
        raise ContractBroken(f"ray.train.torch.config.{cls} has no {name}")

    on_start = member(TORCH_BACKEND_CLASS, "on_start")
    if [a.arg for a in on_start.args.args] != ["self", "worker_group", "backend_config"]:
        raise ContractBroken(
            f"ray.train.torch.config.{TORCH_BACKEND_CLASS}.on_start no longer takes (worker_group, backend_config)"
        )
    if "_setup_torch_process_group" not in ast.unparse(on_start):
        raise ContractBroken(
            f"ray.train.torch.config.{TORCH_BACKEND_CLASS}.on_start no longer sets up the process group"
        )
    setup = defined.get("_setup_torch_process_group")
    if setup is None or "init_process_group(" not in ast.unparse(setup):
        raise ContractBroken("ray.train.torch.config._setup_torch_process_group no longer calls init_process_group")
    if f"return {TORCH_BACKEND_CLASS}" not in ast.unparse(member("TorchConfig", "backend_cls")):
        raise ContractBroken(f"ray.train.torch.config.TorchConfig.backend_cls no longer returns {TORCH_BACKEND_CLASS}")
    _mentions(
        "ray.train.v2._internal.callbacks.backend_setup:BackendSetupCallback",
        "backend_config.backend_cls()",
        "self._backend.on_start(",
    )
    _parameters("ray.train.v2._internal.execution.worker_group.execution_group:ExecutionGroup.execute", "fn")


_COORDINATOR = "ray.data._internal.cluster_autoscaler.default_autoscaling_coordinator"
_COORDINATOR_BASE = "ray.data._internal.cluster_autoscaler.base_autoscaling_coordinator"
_TRAIN_COORDINATOR_CLIENT = (
    "ray.train.v2._internal.execution.scaling_policy.autoscaling_coordinator_client:TrainAutoscalingCoordinatorClient"
)


def _check_coordinator() -> None:
    _resolve(f"{_COORDINATOR}:get_or_create_autoscaling_coordinator")
    actor = f"{_COORDINATOR}:_AutoscalingCoordinatorActor"
    _parameters(f"{actor}.request_resources", "requester_id", "resources", "expire_after_s", "priority")
    _parameters(f"{actor}.cancel_request", "requester_id")
    if getattr(_resolve(f"{_COORDINATOR_BASE}:ResourceRequestPriority"), "HIGH", None) is None:
        raise ContractBroken(f"{_COORDINATOR_BASE}.ResourceRequestPriority has no HIGH")
    # The coordinator shares the room in the order of priority, then of the first request: the drivers' request,
    # at Ray Train's own priority and made before the trial's, is counted first.
    _mentions(f"{_COORDINATOR}:OngoingRequest.__lt__", "self.priority", "self.first_request_time")
    _mentions(f"{_TRAIN_COORDINATOR_CLIENT}.send_resource_request", "ResourceRequestPriority.HIGH")
    # An elastic worker group is sized from what the coordinator reserved for it.
    _mentions(
        "ray.train.v2._internal.execution.scaling_policy.elastic:ElasticScalingPolicy.make_decision_for_non_running_worker_group",
        "self._get_reserved_resources()",
    )


def lean_torch_config(
    set_master: Callable[[str, int], object], setup: Callable[[], object] | None = None
) -> Any | None:
    """A backend config that sets up each trial's Torch process group as Ray's ``TorchConfig()`` does, and that
    the Train controller unpickles without importing torch; ``setup`` (if given) runs on every worker first.

    Internal ``torch-backend-mirror``: Ray's ``TorchConfig`` lives in ``ray.train.torch.config``, which imports
    torch, and the controller unpickles it (with the callbacks that hold it): about 1.5 CPU-seconds a trial
    in a process that never runs torch. This config's backend does in the controller what Ray's
    ``_TorchBackend`` does there for gloo and nccl (the master address from rank 0, ``MASTER_ADDR`` and
    ``MASTER_PORT`` or a ``tcp://`` URL, each rank's distributed environment and process group, the shutdown
    with Ray's timeout), and has the workers call Ray's own functions for each step, imported there. Any
    other backend is handed to Ray's ``_TorchBackend`` itself. ``None`` when the internal is missing: the
    trainer then takes :func:`torch_config_with_worker_setup` or Ray's own ``TorchConfig``.

    ``set_master(addr, port)`` runs on every worker with rank 0's address, as Ray's ``set_env_vars`` does
    (:func:`hpsearch.runtime.env.set_torch_master`: the one module that sets environment variables).
    """
    if not available("torch-backend-mirror"):
        return None
    config = _lean_torch_config_class()()
    config.worker_setup = setup
    config.set_master = set_master
    return config


#: The backends whose set-up :func:`lean_torch_config` does itself; any other is Ray's ``_TorchBackend``'s.
MIRRORED_BACKENDS = ("gloo", "nccl")


def _on_worker_torch_env() -> None:
    """On a Train worker: Ray's ``_set_torch_distributed_env_vars`` (LOCAL_RANK, RANK, WORLD_SIZE, ...)."""
    from ray.train.torch.config import _set_torch_distributed_env_vars  # lazy: torch, on the worker only

    _set_torch_distributed_env_vars()  # type: ignore[no-untyped-call]  # Ray's, unannotated


def _on_worker_process_group(**kwargs: Any) -> None:
    """On a Train worker: Ray's ``_setup_torch_process_group`` (``init_process_group``, NCCL's variables)."""
    from ray.train.torch.config import _setup_torch_process_group  # lazy: torch, on the worker only

    _setup_torch_process_group(**kwargs)


def _on_worker_shutdown(destroy_process_group: bool) -> None:
    """On a Train worker: Ray's ``_shutdown_torch``."""
    from ray.train.torch.config import _shutdown_torch  # lazy: torch, on the worker only

    _shutdown_torch(destroy_process_group=destroy_process_group)  # type: ignore[no-untyped-call]  # Ray's


def _url_address(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"  # Ray's build_address: IPv6 in brackets


@functools.cache
def _lean_torch_config_class() -> type:
    """The config class of :func:`lean_torch_config`, made once per process; Ray's cloudpickle sends it (and its
    backend) to the controller and the workers by value, and the functions above by reference."""
    import ray  # lazy: this module is imported before Ray in the search process
    from ray.exceptions import GetTimeoutError  # lazy: as above
    from ray.train._internal.utils import get_address_and_port  # lazy: as above
    from ray.train.backend import Backend, BackendConfig  # lazy: as above
    from ray.train.constants import (  # lazy: as above
        DEFAULT_TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S,
        TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S,
    )
    from ray.train.v2._internal.util import TrainingFramework  # lazy: as above

    log = logging.getLogger("ray.train.torch.config")

    class LeanTorchBackend(Backend):
        """Ray's ``_TorchBackend`` for gloo and nccl, run in the controller without torch."""

        share_cuda_visible_devices = True

        def on_start(self, worker_group: Any, backend_config: Any) -> None:
            if backend_config.worker_setup is not None:
                worker_group.execute(backend_config.worker_setup)
            if backend_config.backend not in MIRRORED_BACKENDS or backend_config.init_method not in ("env", "tcp"):
                backend_config.ray_backend().on_start(worker_group, backend_config.ray_config())  # imports torch
                return
            master_addr, master_port = worker_group.execute_single(0, get_address_and_port)
            if backend_config.init_method == "env":
                worker_group.execute(backend_config.set_master, addr=master_addr, port=master_port)
                url = "env://"
            else:
                url = f"tcp://{_url_address(master_addr, master_port)}"
            worker_group.execute(_on_worker_torch_env)
            ray.get(
                [
                    worker_group.execute_single_async(
                        rank,
                        _on_worker_process_group,
                        backend=backend_config.backend,
                        world_rank=rank,
                        world_size=len(worker_group),
                        init_method=url,
                        timeout_s=backend_config.timeout_s,
                    )
                    for rank in range(len(worker_group))
                ]
            )

        def on_shutdown(self, worker_group: Any, backend_config: Any) -> None:
            if backend_config.backend not in MIRRORED_BACKENDS:
                backend_config.ray_backend().on_shutdown(worker_group, backend_config.ray_config())
                return
            futures = worker_group.execute_async(_on_worker_shutdown, destroy_process_group=len(worker_group) > 1)
            timeout_s = int(
                os.environ.get(TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S, DEFAULT_TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S)
            )
            try:
                ray.get(futures, timeout=timeout_s)
            except GetTimeoutError:
                log.warning(f"Torch process group shutdown timed out after {timeout_s} seconds")

    class LeanTorchConfig(BackendConfig):
        """Ray's ``TorchConfig()`` (its defaults), with :class:`LeanTorchBackend`; ``worker_setup`` runs first."""

        def __init__(self) -> None:
            self.backend: str | None = None  # TorchTrainer sets gloo or nccl from the scaling config
            self.init_method = "env"
            self.timeout_s = 1800
            self.worker_setup: Callable[[], object] | None = None
            self.set_master: Callable[[str, int], object] | None = None

        @property
        def backend_cls(self) -> type:
            return LeanTorchBackend

        @property
        def train_func_context(self) -> Any:
            from ray.train.torch.config import TorchConfigContextManager  # lazy: read in the driver only (torch)

            return TorchConfigContextManager

        @property
        def framework(self) -> Any:
            return TrainingFramework.TORCH

        def to_dict(self) -> dict[str, Any]:
            return {"backend": self.backend, "init_method": self.init_method, "timeout_s": self.timeout_s}

        def ray_config(self) -> Any:
            from ray.train.torch.config import TorchConfig  # lazy: only a backend hpsearch does not mirror

            return TorchConfig(backend=self.backend, init_method=self.init_method, timeout_s=self.timeout_s)

        def ray_backend(self) -> Any:
            from ray.train.torch.config import _TorchBackend  # lazy: as above

            return _TorchBackend()

    return LeanTorchConfig


#: Ray's words when a worker asks for a dataset shard its run was not given (RayDatasetShardProvider's KeyError).
NO_DATASET_SHARD = (
    "Dataset shard for '{name}' not found. Please ensure that the dataset is passed through the Trainer "
    "`datasets` argument."
)


_TRAINER = "ray.train.v2.api.data_parallel_trainer:DataParallelTrainer"
_DATASETS_CALLBACK = "ray.train.v2._internal.callbacks.datasets:DatasetsCallback"


_PG_CLEANER_CALLBACK = "ray.train.v2._internal.callbacks.placement_group_callback:PlacementGroupCleanerCallback"


def _check_trainer_callbacks() -> None:
    _parameters(f"{_TRAINER}._create_default_callbacks", "self")
    _mentions(f"{_TRAINER}.fit", "callbacks=self._create_default_callbacks()")
    _mentions(
        f"{_TRAINER}._create_default_callbacks",
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
    _assigns(_TRAINER, "datasets", "train_run_context")
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
        f"{_TRAINER}._initialize_and_run_controller",
        "label_selector",
        "ray.get_runtime_context().get_node_id()",
        ")(TrainController)",
    )
    _mentions(f"{_TRAINER}.fit", "self._initialize_and_run_controller(")


def _check_torch_mirror() -> None:
    """Ray's ``_TorchBackend`` still does in the controller, for gloo and nccl, what ``lean_torch_config`` does."""
    tree = ast.parse(_torch_config_source())
    defined = {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}

    def text(name: str, member: str | None = None) -> str:
        node = defined.get(name)
        if member is not None and isinstance(node, ast.ClassDef):
            node = next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == member), None)
        if node is None:
            raise ContractBroken(f"ray.train.torch.config has no {name}{'.' + member if member else ''}")
        return ast.unparse(node)

    def holds(where: str, source: str, *parts: str) -> None:
        missing = [p for p in parts if p not in source]
        if missing:
            raise ContractBroken(f"ray.train.torch.config.{where} no longer does {', '.join(missing)}")

    on_start = text(TORCH_BACKEND_CLASS, "on_start")
    holds(
        f"{TORCH_BACKEND_CLASS}.on_start",
        on_start,
        "backend = backend_config.backend",
        "master_addr, master_port = worker_group.execute_single(0, get_address_and_port)",
        "if backend_config.init_method == 'env':",
        "os.environ['MASTER_ADDR'] = addr",
        "os.environ['MASTER_PORT'] = str(port)",
        "url = 'env://'",
        "url = f'tcp://{build_address(master_addr, master_port)}'",
        "worker_group.execute(_set_torch_distributed_env_vars)",
        "worker_group.execute_single_async(i, _setup_torch_process_group, backend=backend, world_rank=i, "
        "world_size=len(worker_group), init_method=url, timeout_s=backend_config.timeout_s)",
        "ray.get(setup_futures)",
    )
    # Between the init method and the process groups, only TPU (tpu_dist) steps, which hpsearch hands to Ray.
    middle = on_start.split("url = f'tcp://", 1)[1].split("worker_group.execute(_set_torch_distributed_env_vars)")[0]
    allowed = ("else:", "if backend == 'tpu_dist':", "if not isinstance(worker_group, V1WorkerGroup):")
    steps = [line.strip() for line in middle.splitlines()[1:] if re.match(r" {8}\S", line)]
    if any(step not in allowed for step in steps):
        raise ContractBroken(f"ray.train.torch.config.{TORCH_BACKEND_CLASS}.on_start has another step: {steps}")
    holds(
        f"{TORCH_BACKEND_CLASS}.on_shutdown",
        text(TORCH_BACKEND_CLASS, "on_shutdown"),
        "worker_group.execute_async(_shutdown_torch, destroy_process_group=len(worker_group) > 1)",
        "TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S",
        "DEFAULT_TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S",
        "ray.get(futures, timeout=timeout_s)",
    )
    holds(TORCH_BACKEND_CLASS, text(TORCH_BACKEND_CLASS), "share_cuda_visible_devices: bool = True")
    holds(
        "TorchConfig",
        text("TorchConfig"),
        "backend: Optional[str] = None",
        "init_method: str = 'env'",
        "timeout_s: int = 1800",
        "return TorchConfigContextManager",
        "return TrainingFramework.TORCH",
    )
    holds(
        "_setup_torch_process_group",
        text("_setup_torch_process_group"),
        "def _setup_torch_process_group(backend: str, world_rank: int, world_size: int, init_method: str, "
        "timeout_s: int=1800):",
    )
    holds("_shutdown_torch", text("_shutdown_torch"), "def _shutdown_torch(destroy_process_group=False):")
    holds(
        "_set_torch_distributed_env_vars",
        text("_set_torch_distributed_env_vars"),
        "def _set_torch_distributed_env_vars():",
    )
    # TorchTrainer names the backend (gloo, or nccl with GPUs) when its config has none. Read from its file:
    # importing it imports torch.
    path = Path(_resolve("ray.train").__file__).parent / "v2" / "torch" / "torch_trainer.py"
    try:
        trainer = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ContractBroken(f"cannot read {path} ({err})") from None
    if 'torch_config.backend = "nccl" if is_gpu_training else "gloo"' not in trainer:
        raise ContractBroken("ray.train.v2.torch.torch_trainer.TorchTrainer no longer names gloo or nccl itself")
    _mentions("ray.train._internal.utils:get_address_and_port", "get_node_ip_address()")
    for name in ("backend_cls", "train_func_context", "framework"):
        if not isinstance(getattr(_resolve("ray.train.backend:BackendConfig"), name, None), property):
            raise ContractBroken(f"ray.train.backend.BackendConfig.{name} is no longer a property")
    _resolve("ray.train.v2._internal.util:TrainingFramework.TORCH")


def _uses_pbt(spec: Spec) -> bool:
    return spec.scheduler.type in ("pbt", "pb2")


def _conditional(spec: Spec) -> bool:
    return is_conditional(spec.trial_space())


def _uses_warm_start(searcher: str) -> Callable[[Spec], bool]:
    def used(spec: Spec) -> bool:
        if spec.searcher.type != searcher:
            return False
        return spec.warm_start.enabled() or (searcher == "hyperopt" and _conditional(spec))

    return used


def _uses_conditional_random(spec: Spec) -> bool:
    return spec.searcher.type == "random" and _conditional(spec)


def _drivers_on_head(spec: Spec) -> bool:
    return spec.resources.driver_node == "head" or _uses_pbt(spec)


def _uses_tensorboard(spec: Spec) -> bool:
    return spec.tracking.tensorboard


def _several_workers(spec: Spec) -> bool:
    return spec.scaling.workers > 1


def _elastic(spec: Spec) -> bool:
    return spec.scaling.elastic is not None


#: Ray Train's environment variables hpsearch sets, by the name of the constant Ray reads them through.
TRAIN_ENV_VARS = {
    "HEALTH_CHECK_INTERVAL_S_ENV_VAR": "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S",
    "WORKER_GROUP_START_TIMEOUT_S_ENV_VAR": "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S",
}
#: The class of Ray Train's controller actor; Ray names an actor's process ``ray::<class>``.
CONTROLLER_CLASS = "TrainController"
#: The variable that makes Ray treat a Linux machine as it treats macOS and Windows (loopback only).
LOOPBACK_ENV_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: The name of the SIGUSR1 handler ``tune.run`` installs (a budget ends a search through it).
TUNE_INTERRUPT_HANDLER = "signal_interrupt_tune_run"
#: Ray Data's default share of the object store for one executor (its ResourceManager's constant).
DATA_OBJECT_STORE_FRACTION = 0.5
#: The resource every Ray head node has, 1.0 of it (the planner places trial drivers with it).
HEAD_NODE_RESOURCE = HEAD_RESOURCE
#: The class name of Ray Data's handler that writes ``ray-data.log`` (kept when its console lines are muted).
RAY_DATA_FILE_HANDLER = "SessionFileHandler"
#: Ray's Torch backend: its ``on_start`` sets up each trial's Torch process group.
TORCH_BACKEND_CLASS = "_TorchBackend"

INTERNALS: tuple[Internal, ...] = (
    Internal(
        key="tune-session-queues",
        relies_on=(
            "ray.train._internal.session: get_session() and _TrainSession's _inter_actor_queue, result_queue, "
            "error_queue, stop_event, training_thread, training_started, continue_lock"
        ),
        feature="the trial-driver hang work-around (Ray bug 3) and reused trial actors",
        without_it=(
            "a driver may block forever behind its last report (about one trial in a hundred under load), and "
            "every trial gets a fresh actor (about 3-6 s more per trial)"
        ),
        public="none: Tune exposes no way to see or drain a function trainable's queues",
        on_missing="warn",
        check=_check_session_queues,
    ),
    Internal(
        key="tune-session-report",
        relies_on="ray.train._internal.session._TrainSession.report(metrics, checkpoint), called by _get_result_from_queues",
        feature="pbt/pb2: each report reaches Tune with a pointer checkpoint",
        without_it="PBT never exploits a nested trial (Tune has no checkpoint to hand over)",
        public="none: Ray Train's TuneReportCallback forwards a checkpoint path, never a Tune checkpoint",
        on_missing="refuse",
        check=_check_session_report,
        used_by=_uses_pbt,
    ),
    Internal(
        key="trainable-mixins",
        relies_on="ray.tune.trainable.function_trainable.wrap_function reading fn.__mixins__ (kept by with_parameters)",
        feature="reused trial actors (resources.reuse_actors)",
        without_it="every trial gets a fresh actor (about 3-6 s more per trial); Tune's own reuse would be unsafe",
        public="none: Tune's reuse_actors has no hook for a function trainable's reset",
        on_missing="warn",
        check=_check_mixins,
    ),
    Internal(
        key="train-worker-report",
        relies_on="ray.train.v2._internal.execution.train_fn_utils: get_train_fn_utils().report(metrics, ...)",
        feature=(
            "reports made plain Python on the workers (tensors and NumPy scalars); each rank's reports counted "
            "(its progress record), which ends a trial whose ranks report unequally or stall"
        ),
        without_it=(
            "a loop that reports a tensor fails its trial (the controller still converts NumPy values); the ranks' "
            "records count no reports, so a rank that skips a report hangs its trial and failure.report_timeout_s "
            "ends no stall (every rank's log is still kept)"
        ),
        public="none: ray.train.report validates before any user hook",
        on_missing="warn",
        check=_check_worker_report,
    ),
    Internal(
        key="train-worker-checkpoint",
        relies_on=(
            "ray.train.v2._internal.execution.train_fn_utils: get_train_fn_utils().get_checkpoint(), which "
            "ray.train.get_checkpoint() returns"
        ),
        feature=(
            "under pbt/pb2, a loop that restores with ray.train.get_checkpoint() (Ray's guides, Lightning, Hugging Face) "
            "continues from the donor's checkpoint after an exploit"
        ),
        without_it=(
            "such a loop starts an exploited trial from scratch, and the trial fails at its first report; "
            "hpsearch.train.restore still loads the donor's checkpoint"
        ),
        public="none: Ray Train V2 refuses resume_from_checkpoint and gives a new run no checkpoint",
        on_missing="warn",
        check=_check_worker_checkpoint,
        used_by=_uses_pbt,
    ),
    Internal(
        key="controller-process",
        relies_on=(
            f"ray.train.v2._internal.execution.controller.controller.{CONTROLLER_CLASS}, the actor class whose "
            f"process Ray names ray::{CONTROLLER_CLASS}"
        ),
        feature="a Train controller that outlived its trial ended (orphan reaper, reused actors)",
        without_it="a recorded controller PID never names a controller, so none is ended: a stuck one keeps its workers",
        public="ray.util.state lists the controller actor (used to see it alive), not a safe way to end its process",
        on_missing="warn",
        check=_check_controller_class,
    ),
    Internal(
        key="controller-failure",
        relies_on="ray.train.ControllerError.controller_failure (the exception a Train callback raised)",
        feature="the one-line error of a trial that missed its metric or its checkpoint",
        without_it="such a trial fails with Ray's wrapped error, and Tune retries it",
        public="ray.train.ControllerError is public; its attribute is not documented",
        on_missing="warn",
        check=_check_controller_failure,
    ),
    Internal(
        key="loopback-switch",
        relies_on=(
            f"ray._private.ray_constants.ENABLE_RAY_CLUSTER (read from {LOOPBACK_ENV_VAR}) and "
            "ray._private.services.get_node_ip_address returning the loopback when it is false"
        ),
        feature="an embedded Ray that listens on 127.0.0.1 only",
        without_it="an embedded Ray's servers listen on every interface of the machine",
        public=(
            f"{LOOPBACK_ENV_VAR} is the switch, but Ray reads it once at import, usually before hpsearch can set "
            "it; ray.init(_node_ip_address=...) does not change where the servers bind"
        ),
        on_missing="refuse",
        check=_check_loopback,
        embedded_only=True,
    ),
    Internal(
        key="driver-error-printing",
        relies_on="ray._private.worker._worker_logs_enabled (read by print_worker_logs)",
        feature="a quiet terminal: Ray's error messages to the driver kept off it unless --verbose",
        without_it="the raylet's warnings and Ray's error messages reach the terminal while trials run",
        public=(
            "RAY_DEDUP_LOGS_SKIP_REGEX drops lines too, but Ray reads it at import (before hpsearch runs) and only "
            "for deduplicated lines"
        ),
        on_missing="warn",
        check=_check_worker_logs,
    ),
    Internal(
        key="ray-node",
        relies_on=(
            "ray._private.worker.global_worker.node and _global_node: Node.get_logs_dir_path(), "
            "get_session_dir_path(), session_name, all_processes"
        ),
        feature="Ray's log folder named in the experiment; a killed run's leftover Ray processes ended by the next run",
        without_it="the experiment folder does not say where Ray's logs are, and leftover processes stay",
        public="none: ray.get_runtime_context() gives no session folder or process list",
        on_missing="warn",
        check=_check_node,
    ),
    Internal(
        key="train-env-names",
        relies_on="ray.train.v2._internal.constants: " + ", ".join(TRAIN_ENV_VARS.values()),
        feature="fast reports (0.1 s controller polls) and the spec's failure.worker_start_timeout_s",
        without_it="a loop reports at most once per 2 s, and a worker group waits Ray's 60 s to start",
        public="none: Ray Train reads these variables but does not document them",
        on_missing="warn",
        check=_check_env_names,
    ),
    Internal(
        key="tune-interrupt",
        relies_on=f"ray.tune.tune._setup_signal_catching installing its SIGUSR1 handler {TUNE_INTERRUPT_HANDLER}",
        feature="a budget that ends a search resumably (as Ctrl-C does)",
        without_it="a spent budget ends the search for good: hpsearch resume cannot continue it",
        public="none: a Stopper's stop_all() marks the search finished, so it cannot be resumed",
        on_missing="warn",
        check=_check_tune_interrupt,
    ),
    Internal(
        key="data-object-store-fraction",
        relies_on="ray.data._internal.execution.resource_manager.ResourceManager.DEFAULT_OBJECT_STORE_MEMORY_LIMIT_FRACTION",
        feature="per-trial object-store caps for Ray Data at Ray's default share",
        without_it=f"each trial's cap is still {DATA_OBJECT_STORE_FRACTION} of the object store split among the trials, which Ray Data no longer takes by default",
        public=(
            "DataContext.override_object_store_memory_limit_fraction, read first when set; hpsearch keeps Ray's "
            f"default ({DATA_OBJECT_STORE_FRACTION}) as its own constant and only checks it here"
        ),
        on_missing="warn",
        check=_check_data_fraction,
    ),
    Internal(
        key="head-node-resource",
        relies_on=f"ray._common.constants.HEAD_NODE_RESOURCE_NAME == {HEAD_NODE_RESOURCE!r}",
        feature="trial drivers placed on the head node (resources.driver_node: head)",
        without_it="no trial driver can be placed: the search would wait forever",
        public="none: Ray documents the node:<ip> resources, not the head's",
        on_missing="refuse",
        check=_check_head_resource,
        used_by=_drivers_on_head,
    ),
    Internal(
        key="ray-data-file-handler",
        relies_on=f"ray.data._internal.logging.{RAY_DATA_FILE_HANDLER} (the handler of Ray Data's ray-data.log)",
        feature="Ray Data's console lines kept off the terminal, its log file kept",
        without_it="Ray Data's warnings reach the terminal while trials run",
        public="none: Ray Data's logging configuration has no console-only switch",
        on_missing="warn",
        check=_check_ray_data_handler,
    ),
    Internal(
        key="pbt-exploit",
        relies_on=(
            "ray.tune.schedulers.pbt.PopulationBasedTraining._exploit(tune_controller, trial, trial_to_clone) and "
            "_checkpoint_or_exploit(trial, tune_controller, upper_quantile, lower_quantile), "
            "its _trial_state (last_result, last_checkpoint, last_score, last_train_time, last_perturbation_time), "
            "_time_attr, _metric, _metric_op, _synch, _perturbation_interval and _next_perturbation_sync; "
            "choose_trial_to_run(tune_controller) and on_trial_result(tune_controller, trial, result), whose synch "
            "step waits for every live trial at _next_perturbation_sync"
        ),
        feature=(
            "pbt/pb2 lineage: each exploit recorded and printed; a resumed population carries on where it was; a synch "
            "population goes on when a trial ends before the perturbation point"
        ),
        without_it=(
            "exploits still happen, but Results.lineage, the lineage plot and the exploit lines stay empty; a resumed "
            "population starts its perturbation schedule again, so a donor can run ahead and hand over its last epoch; "
            "a synch population whose trial errors before a perturbation point waits for it for ever"
        ),
        public="none: Tune's schedulers have no exploit callback",
        on_missing="warn",
        check=_check_exploit,
        used_by=_uses_pbt,
    ),
    Internal(
        key="optuna-study-setup",
        relies_on="ray.tune.search.optuna.OptunaSearch._setup_study(mode), its _ot_study, _space, _metric and _ot_trials",
        feature=(
            "warm starts with the optuna searcher (points enqueued, earlier trials added to the study); "
            "resuming a killed optuna search"
        ),
        without_it=(
            "the warm-start points and seeds would be silently ignored; a resumed search could crash with "
            "Ray's KeyError on a trial started after the searcher's last saved state"
        ),
        public="OptunaSearch's points_to_evaluate/evaluated_rewards refuse a define-by-run space and partial points",
        on_missing="refuse",
        check=_check_optuna,
        used_by=_uses_warm_start("optuna"),
    ),
    Internal(
        key="optuna-failed-trials",
        relies_on="ray.tune.search.optuna.OptunaSearch's _ot_study, _ot_trials and _completed_trials",
        feature="an errored trial told to Optuna as infeasible (searcher.failed_trials: infeasible)",
        without_it=(
            "an errored trial would be told to Optuna as failed, as Ray does, and TPE would go on proposing the "
            "region where trials fail"
        ),
        public="OptunaSearch.on_trial_complete(error=True) tells FAIL, which Optuna's samplers skip",
        on_missing="warn",
        check=_check_optuna_failed,
        used_by=_uses_failed_infeasible,
    ),
    Internal(
        key="optuna-constraints",
        relies_on="ray.tune.search.optuna.OptunaSearch's _ot_trials (the live Optuna trial of each Tune trial)",
        feature=(
            "the spec's constraints (and searcher.failed_trials: infeasible) told to Optuna with each trial, "
            "through Optuna's Trial.set_constraint"
        ),
        without_it=(
            "Optuna's sampler would not know the constraints and would propose infeasible regions as freely as "
            "feasible ones (hpsearch's ranking still puts infeasible trials last)"
        ),
        public="OptunaSearch takes no constraints; Optuna 5 reads them from each trial's set_constraint",
        on_missing="warn",
        check=_check_optuna_constraints,
        used_by=_uses_optuna_constraints,
    ),
    Internal(
        key="tune-search-state",
        relies_on=(
            "ray.tune.search.SearchGenerator's and BasicVariantGenerator's saved state (CKPT_FILE_TMPL; "
            "total_samples and finished; _total_samples, _finished, _iterators, _uuid_prefix, "
            "_constant_grid_search, _random_state), ray.tune.search.basic_variant._TrialIterator, "
            "ray.tune.utils.util._atomic_save and _load_newest_checkpoint"
        ),
        feature="growing a search on resume (hpsearch resume DIR --set num_samples=N)",
        without_it="a larger num_samples could not be resumed into; the resume is refused before Ray starts",
        public="Tuner.restore takes no new TuneConfig: num_samples is fixed when the search starts",
        on_missing="refuse",
        check=_check_search_state,
        used_by=_only_on_resume,
    ),
    Internal(
        key="train-failure-policy",
        relies_on=(
            f"{_FAILURE_POLICY.replace(':', '.')}.make_decision(training_failed_error), FailureDecision.RETRY/RAISE, "
            "WorkerGroupError.worker_failures (the loop's own exception per rank, from "
            "WorkerGroupPollStatus.errors; RayTrainError for a worker that could not be reached) and "
            "_is_preemption_failure"
        ),
        feature=(
            "no blind retries: a worker group that fails the same way twice is not restarted again "
            "(failure.worker_retries)"
        ),
        without_it="Ray Train restarts a worker group that fails the same way each time, failure.worker_retries times",
        public="FailureConfig(max_failures) counts failures; it cannot tell a bug from a dead worker",
        on_missing="warn",
        check=_check_failure_policy,
        used_by=lambda spec: spec.failure.worker_retries > 0 or spec.failure.trial_retries > 0,
    ),
    Internal(
        key="tune-trial-retries",
        relies_on="ray.tune.experiment.Trial.max_failures, compared by Trial.should_recover with run_metadata.num_failures",
        feature="no blind retries: a trial that failed the same way twice is not retried again (failure.trial_retries)",
        without_it=(
            "Tune would start such a trial again failure.trial_retries times; each start ends at once, without a "
            "nested run"
        ),
        public="FailureConfig(max_failures) is fixed for the whole search",
        on_missing="warn",
        check=_check_trial_retries,
        used_by=lambda spec: spec.failure.trial_retries > 0,
    ),
    Internal(
        key="hyperopt-trials",
        relies_on=(
            "ray.tune.search.hyperopt.HyperOptSearch._setup_hyperopt(), its _hpopt_trials, _live_trial_mapping, "
            "domain, rstate and metric_op"
        ),
        feature="warm starts and conditional spaces with the hyperopt searcher",
        without_it="seeds and points would be ignored, and inactive parameters would reach the loop",
        public="HyperOptSearch has no evaluated_rewards, and its points cannot leave a parameter out",
        on_missing="refuse",
        check=_check_hyperopt,
        used_by=_uses_warm_start("hyperopt"),
    ),
    Internal(
        key="variant-generator",
        relies_on="ray.tune.search.BasicVariantGenerator.next_trial() and Trial.evaluated_params/experiment_tag",
        feature="conditional spaces (when:) with the random searcher",
        without_it="inactive parameters would reach the loop and the trial's recorded config",
        public="none: Tune's variant generator has no per-trial hook",
        on_missing="refuse",
        check=_check_variants,
        used_by=_uses_conditional_random,
    ),
    Internal(
        key="tensorboard-writers",
        relies_on="ray.tune.logger.TBXLoggerCallback._trial_writer and _trial_result",
        feature="tracking.tensorboard (scalars at each epoch, the trial's end as text)",
        without_it="the TensorBoard tracker cannot write",
        public="none: TBXLoggerCallback keeps its writers to itself",
        on_missing="refuse",
        check=_check_tbx,
        used_by=_uses_tensorboard,
    ),
    Internal(
        key="torch-backend-start",
        relies_on=(
            f"ray.train.torch.config.{TORCH_BACKEND_CLASS}.on_start(worker_group, backend_config) setting up the "
            "process group (_setup_torch_process_group), TorchConfig.backend_cls, Ray Train V2's BackendSetupCallback "
            "calling backend_config.backend_cls() and its on_start, ExecutionGroup.execute(fn)"
        ),
        feature=(
            "trials that span hosts whose name resolves to a loopback address (each worker's GLOO_SOCKET_IFNAME set "
            "to the interface of its node's IP)"
        ),
        without_it=(
            "a search whose trials have several workers is refused before its first trial when such a host can run "
            "them, naming the host and the two fixes"
        ),
        public=(
            "GLOO_SOCKET_IFNAME in the environment of `ray start` on each host is the public fix (the refusal says "
            "so); TorchConfig has no hook before init_process_group, and a runtime_env's worker_process_setup_hook "
            "belongs to the whole job, which hpsearch does not own under `ray job submit`"
        ),
        on_missing="warn",
        check=_check_torch_backend,
        used_by=_several_workers,
    ),
    Internal(
        key="train-default-callbacks",
        relies_on=(
            f"{_TRAINER.replace(':', '.')}._create_default_callbacks() (the controller's callbacks, called by fit), "
            "self.datasets and self.train_run_context; DatasetsCallback(train_run_context, datasets), whose "
            "before_init_train_context gives each worker a RayDatasetShardProvider backed by a DatasetManager actor; "
            "TrainContext.get_dataset_shard asking that provider"
        ),
        feature=("nested runs that start no Ray Data DatasetManager without datasets"),
        without_it=(
            "every nested run starts Ray's DatasetManager actor, as Ray does: about 1.5 CPU-seconds more per trial, "
            "and a process more beside each trial driver"
        ),
        public="none: TorchTrainer has no switch for its default callbacks (RunConfig's callbacks are added to them)",
        on_missing="warn",
        check=_check_trainer_callbacks,
    ),
    Internal(
        key="train-controller-on-driver-node",
        relies_on=(
            f"{_TRAINER.replace(':', '.')}._initialize_and_run_controller (called by fit) starting the "
            "TrainController actor with a label_selector on the node id of the process that calls fit()"
        ),
        feature=(
            "reports handed to the trial driver through a socket on its node, without Ray's queue actor "
            "(ray::_QueueActor, about 1.4 CPU-seconds a trial)"
        ),
        without_it="every nested run starts Ray's queue actor for its reports, as Ray does",
        public=(
            "Ray's comment says the controller is attached to the node running the driver script; no API says so, "
            "and TuneReportCallback's queue has no other transport"
        ),
        on_missing="warn",
        check=_check_controller_node,
    ),
    Internal(
        key="torch-backend-mirror",
        relies_on=(
            f"ray.train.torch.config.{TORCH_BACKEND_CLASS}.on_start/on_shutdown doing, for gloo and nccl: the "
            "master address from rank 0 (get_address_and_port), MASTER_ADDR/MASTER_PORT (init_method env) or a "
            "tcp:// URL, _set_torch_distributed_env_vars on every worker, _setup_torch_process_group per rank, "
            "_shutdown_torch with TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S; TorchConfig's defaults and "
            "TorchConfigContextManager; TorchTrainer naming gloo or nccl; BackendConfig's properties"
        ),
        feature="a Train controller that never imports torch (about 1.5 CPU-seconds a trial)",
        without_it="every nested run's controller imports torch to unpickle Ray's TorchConfig, as Ray does",
        public=(
            "none: TorchConfig lives in a module that imports torch; the steps are Ray's own functions, called on "
            "the workers, and any backend other than gloo or nccl is Ray's _TorchBackend's"
        ),
        on_missing="warn",
        check=_check_torch_mirror,
    ),
    Internal(
        key="train-autoscaling-coordinator",
        relies_on=(
            f"{_COORDINATOR}: get_or_create_autoscaling_coordinator() and its actor's request_resources(requester_id, "
            "resources, expire_after_s, priority) and cancel_request(requester_id), ResourceRequestPriority.HIGH, "
            "requests counted by priority then first request (OngoingRequest.__lt__), Ray Train's own requests at "
            "HIGH, and ElasticScalingPolicy sizing a worker group from what the coordinator reserved"
        ),
        feature="elastic trials (scaling.num_workers: {min, max}) sized without the room the trial drivers hold",
        without_it=(
            "Ray counts the head node's CPUs that the trial drivers hold as room for workers: an elastic trial can be "
            "given more workers than fit, and its worker group never starts (the trial fails after "
            "failure.worker_start_timeout_s, failure.controller_retries times)"
        ),
        public=(
            "none: Ray Train's elastic policy reads the room from its autoscaling coordinator, which has no public API "
            "(ray.autoscaler.sdk.request_resources asks the autoscaler for nodes; the coordinator does not see it)"
        ),
        on_missing="refuse",
        check=_check_coordinator,
        used_by=_elastic,
    ),
)

_BY_KEY = {internal.key: internal for internal in INTERNALS}


# ----------------------------------------------------------------------------- checking, at start and in tests


@functools.cache
def _problem(key: str) -> str | None:
    """What differs in the installed libraries from internal ``key``'s contract; ``None`` when it holds.

    Checked once per process and key: a Train worker asks only for the internals it uses, so it
    never imports what the others check (Ray Data, the searchers).
    """
    try:
        _BY_KEY[key].check()
    except ContractBroken as err:
        return str(err)
    except Exception as err:  # noqa: BLE001 - any surprise while checking means the contract is broken
        return f"{type(err).__name__}: {err}"
    return None


def _broken() -> dict[str, str]:
    return {i.key: problem for i in INTERNALS if (problem := _problem(i.key)) is not None}


def broken() -> dict[str, str]:
    """Every internal whose contract the installed libraries break, by key, with what differs.

    Each is checked once per process (importing the modules named, reading signatures and
    sources), and remembered.
    """
    return dict(_broken())


def available(key: str) -> bool:
    """Whether the internal ``key`` is as hpsearch expects it in this process (its feature is on)."""
    if key not in _BY_KEY:
        raise KeyError(f"no internal named {key!r}; known: {', '.join(_BY_KEY)}")
    return _problem(key) is None


def library_versions() -> str:
    """``Ray 2.60.0, optuna 4.6.0, ...`` for the libraries whose internals are used."""
    found = []
    for name in ("ray", "optuna", "hyperopt"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    return ", ".join(found)


def preflight(spec: Spec, *, embedded: bool = True) -> None:
    """Before a ``run`` or ``resume`` writes anything: check every internal this search relies on.

    A missing internal whose feature hpsearch can do without is said in one line (its
    feature is off for the whole search); one the search cannot do without raises.
    ``embedded``: whether hpsearch starts the Ray it runs on (no ``--address``).

    Raises:
        IncompatibleLibraryError: naming each internal, what differs, the installed versions
            and what to do.
    """
    refused = []
    for key, detail in broken().items():
        internal = _BY_KEY[key]
        if (internal.used_by is not None and not internal.used_by(spec)) or (internal.embedded_only and not embedded):
            continue
        if internal.on_missing == "refuse":
            refused.append(f"  {internal.key} ({internal.feature}): {detail}")
        else:
            messages.say(f"off for this search: {internal.feature} (Ray internal {internal.key}: {detail})")
    if refused:
        raise IncompatibleLibraryError(
            f"this search needs Ray internals that the installed libraries ({library_versions()}) do not have:\n"
            + "\n".join(refused)
            + f"\nhpsearch was checked on {CHECKED_ON}: install one of those (pip install 'ray[default,train,tune]"
            "==2.60.0'), or an hpsearch release that supports your Ray"
        )


# ----------------------------------------------------------------------------- a trial driver's Tune session


class DriverSession:
    """A trial driver's Tune session (Ray Train's ``_TrainSession``): its queues, stop event and ``report``.

    Internals ``tune-session-queues`` and ``tune-session-report``. Tune runs the driver's
    function in a thread of the trial actor; Ray Train's ``TuneReportCallback`` puts each
    report on a one-item queue actor, and the actor's main thread moves it to the session's
    result queue through ``report``.
    """

    _originals: dict[int, Callable[..., None]] = {}

    def __init__(self, session: Any) -> None:
        self.session = session

    @classmethod
    def current(cls) -> DriverSession | None:
        """This process's Tune session; ``None`` outside a Tune trial or when the internal is missing."""
        if not available("tune-session-queues"):
            return None
        # lazy: a missing internal turns its feature off; it never fails the import
        from ray.train._internal.session import get_session

        session = get_session()
        return None if session is None else cls(session)

    @property
    def training_thread(self) -> threading.Thread | None:
        """The thread running the driver's function (``None`` before it started)."""
        thread: threading.Thread | None = self.session.training_thread
        return thread if self.session.training_started else None

    def forwarded_any(self) -> bool:
        """Whether Ray Train has forwarded a report to this session (its queue actor exists)."""
        return self.session._inter_actor_queue is not None

    def queues_empty(self) -> bool:
        """Whether no report is waiting, on the queue actor or in the result queue."""
        reports = self.session._inter_actor_queue
        try:
            return (reports is None or bool(reports.empty())) and bool(self.session.result_queue.empty())
        except Exception:  # noqa: BLE001 - the queue actor is gone: nothing is left to forward
            return True

    def stop_requested(self) -> bool:
        """Whether Tune is done with this trial (its stop event is set)."""
        return bool(self.session.stop_event.is_set())

    def stop_and_release(self) -> None:
        """Tell the driver's thread to stop, empty the queues and let a thread blocked on them go on."""
        self.session.stop_event.set()  # a thread reporting its last result leaves quietly
        self.drain()
        self.session.continue_lock.release()

    def drain(self) -> None:
        """Empty the session's queues: reports of a stopped trial that nobody will read."""
        for q in (self.session.result_queue, self.session.error_queue):
            while True:
                try:
                    q.get_nowait()
                except queue.Empty:
                    break
        reports = self.session._inter_actor_queue
        if reports is not None:
            try:
                while not reports.empty():
                    reports.get_nowait()
            except Exception:  # noqa: BLE001 - the queue actor is gone with the run
                pass

    def wrap_report(self, wrap: Callable[[Callable[..., None]], Callable[..., None]]) -> None:
        """Replace this session's ``report`` by ``wrap(original)``; again on the same session, the first is kept."""
        if not available("tune-session-report"):
            raise IncompatibleLibraryError("Ray's Tune session has no report hpsearch can wrap (tune-session-report)")
        original = self._originals.setdefault(id(self.session), self.session.report)
        self.session.report = wrap(original)


def add_trainable_mixin(fn: Callable[..., Any], mixin: type) -> bool:
    """Have Tune build ``fn``'s trainable class with ``mixin`` first (internal ``trainable-mixins``).

    Returns ``False`` (and changes nothing) when the installed Tune no longer reads the hook.
    """
    if not available("trainable-mixins"):
        return False
    fn.__mixins__ = (mixin,)  # type: ignore[attr-defined]  # the attribute Tune's wrap_function reads
    return True


def wrap_worker_reports(transform: Callable[[Any], dict[str, Any]]) -> bool:
    """In a Train worker: pass every ``ray.train.report``'s metrics through ``transform`` (once per process).

    Internal ``train-worker-report``: every ``ray.train`` call on a V2 worker goes through the
    process's ``TrainFnUtils`` ("can be patched if new user APIs behaviors is wanted", Ray's
    comment). Returns ``False`` when the internal is missing or this is not a Train worker.
    """
    utils = _train_fn_utils("train-worker-report")
    if utils is None:
        return False
    if id(utils) in _WRAPPED_WORKER_UTILS:
        return True
    report = utils.report

    def plain_report(metrics: Mapping[str, Any], *args: Any, **kwargs: Any) -> None:
        report(transform(metrics), *args, **kwargs)

    utils.report = plain_report  # on this process's instance only
    _WRAPPED_WORKER_UTILS.add(id(utils))
    return True


_WRAPPED_WORKER_UTILS: set[int] = set()


def watch_worker_reports(entered: Callable[[], None], left: Callable[[bool], None]) -> bool:
    """In a Train worker: call ``entered()`` as each ``ray.train.report`` starts, and ``left(ok)`` as it
    returns (``ok``) or raises; hooks given again replace the earlier ones.

    The same internal as :func:`wrap_worker_reports` (``train-worker-report``): the process's
    ``TrainFnUtils.report``, which every ``ray.train.report`` goes through. Returns ``False`` when the
    internal is missing or this is not a Train worker.
    """
    utils = _train_fn_utils("train-worker-report")
    if utils is None:
        return False
    hooks = _REPORT_HOOKS.get(id(utils))
    _REPORT_HOOKS[id(utils)] = (entered, left)
    if hooks is not None:
        return True
    report = utils.report
    key = id(utils)

    def watched_report(*args: Any, **kwargs: Any) -> None:
        before, after = _REPORT_HOOKS[key]
        before()
        try:
            report(*args, **kwargs)
        except BaseException:
            after(False)
            raise
        after(True)

    utils.report = watched_report  # on this process's instance only
    return True


_REPORT_HOOKS: dict[int, tuple[Callable[[], None], Callable[[bool], None]]] = {}


def _train_fn_utils(key: str) -> Any | None:
    """This Train worker's ``TrainFnUtils`` (what every ``ray.train`` call goes through), or ``None`` when the
    internal ``key`` is missing or this is not a Train V2 worker."""
    if not available(key):
        return None
    # lazy: a missing internal turns its feature off; it never fails the import
    from ray.train.v2._internal.execution.train_fn_utils import get_train_fn_utils

    try:
        return get_train_fn_utils()
    except RuntimeError:  # not a Train V2 worker
        return None


def offer_start_checkpoint(start: Callable[[], Any]) -> bool:
    """In a Train worker: ``ray.train.get_checkpoint()`` returns ``start()`` while the run has no checkpoint of its own.

    Internal ``train-worker-checkpoint``: ``ray.train.get_checkpoint()`` is the process's
    ``TrainFnUtils.get_checkpoint()``, patched here on this process's instance, as
    :func:`wrap_worker_reports` patches its ``report``. Returns ``False`` when the internal is
    missing or this is not a Train worker.
    """
    utils = _train_fn_utils("train-worker-checkpoint")
    if utils is None:
        return False
    own = utils.get_checkpoint

    def own_or_start() -> Any:
        found = own()
        return found if found is not None else start()

    utils.get_checkpoint = own_or_start  # on this process's instance only
    return True


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


# ----------------------------------------------------------------------------- Ray's process-wide switches


@contextlib.contextmanager
def loopback_flag() -> Iterator[None]:
    """For the span of an embedded ``ray.init``: Ray's node address is the loopback (internal ``loopback-switch``).

    Ray reads :data:`LOOPBACK_ENV_VAR` into ``ray_constants.ENABLE_RAY_CLUSTER`` once, when it
    is first imported (usually long before ``ray.init``); the constant is set to what Ray
    would have read with the variable at 0, and restored after.

    Raises:
        IncompatibleLibraryError: when the internal is missing (an embedded Ray would listen
            on every interface).
    """
    if not available("loopback-switch"):
        raise IncompatibleLibraryError(
            f"the installed Ray ({library_versions()}) has no loopback switch hpsearch knows "
            f"({_problem('loopback-switch')}); an embedded Ray would listen on every interface. "
            "Install a checked Ray, or start a cluster yourself and pass --address"
        )
    # lazy: a missing internal turns its feature off; it never fails the import
    from ray._private import ray_constants

    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def set_driver_error_printing(enabled: bool) -> bool:
    """Whether Ray prints the error messages its services publish to this driver (internal ``driver-error-printing``)."""
    if not available("driver-error-printing"):
        return False
    # lazy: a missing internal turns its feature off; it never fails the import
    import ray._private.worker as ray_worker

    ray_worker._worker_logs_enabled = enabled
    return True


@dataclass(frozen=True)
class NodeInfo:
    """The Ray node this driver runs on, as far as hpsearch needs it."""

    logs_dir: str | None
    session_dir: str | None
    session_name: str | None
    #: The PIDs of the processes Ray started for this node (only for a node this process started).
    started_pids: tuple[int, ...]


def current_node() -> NodeInfo | None:
    """The node this driver is connected through (internal ``ray-node``); ``None`` when not connected or unknown."""
    if not available("ray-node"):
        return None
    # lazy: a missing internal turns its feature off; it never fails the import
    import ray._private.worker as ray_worker

    node = ray_worker.global_worker.node if ray_worker.global_worker.connected else None
    if node is None:
        return None
    started = ray_worker._global_node  # set only for a node this process started (an embedded Ray)
    pids: list[int] = []
    if started is not None:
        for infos in started.all_processes.values():
            pids.extend(info.process.pid for info in infos)

    def ask(method: str) -> str | None:
        try:
            return str(getattr(node, method)())
        except Exception:  # noqa: BLE001 - where the logs are is a courtesy; never fail the search over it
            return None

    return NodeInfo(
        logs_dir=ask("get_logs_dir_path"),
        session_dir=ask("get_session_dir_path"),
        session_name=str(node.session_name),
        started_pids=tuple(pids),
    )


def tune_interrupt_installed(handler: Any) -> bool:
    """Whether ``handler`` (the process's SIGUSR1 handler) is Tune's own (internal ``tune-interrupt``)."""
    return available("tune-interrupt") and getattr(handler, "__name__", "") == TUNE_INTERRUPT_HANDLER


def data_object_store_fraction() -> float:
    """The share of the object store one Ray Data executor takes by default (internal ``data-object-store-fraction``)."""
    # lazy: a missing internal turns its feature off; it never fails the import
    from ray.data import DataContext

    override = DataContext.get_current().override_object_store_memory_limit_fraction
    return DATA_OBJECT_STORE_FRACTION if override is None else float(override)


def ray_data_console_handlers(handlers: Sequence[logging.Handler]) -> list[logging.Handler]:
    """Of Ray Data's logging handlers, those writing to the console: all but the one writing ``ray-data.log``.

    Internal ``ray-data-file-handler``; without it none is returned (nothing is muted, so the
    log file never loses a line).
    """
    if not available("ray-data-file-handler"):
        return []
    return [h for h in handlers if type(h).__name__ != RAY_DATA_FILE_HANDLER]


def hold_in_coordinator(
    requester_id: str, bundles: Sequence[Mapping[str, float]], *, expire_after_s: float, timeout_s: float
) -> bool:
    """Tell Ray's autoscaling coordinator that ``bundles`` are held (internal ``train-autoscaling-coordinator``).

    The request is made at Ray Train's own priority, so it is counted before every request made after
    it, and it lapses ``expire_after_s`` after its last repetition. An empty ``bundles`` withdraws it.
    ``False`` when the internal is missing or the coordinator did not answer within ``timeout_s``.
    """
    if not available("train-autoscaling-coordinator"):
        return False
    # lazy: Ray Data's modules load only in a trial driver of an elastic search
    import ray

    coordinator = import_module(_COORDINATOR).get_or_create_autoscaling_coordinator()
    try:
        if not bundles:
            ray.get(coordinator.cancel_request.remote(requester_id=requester_id), timeout=timeout_s)
            return True
        priority = import_module(_COORDINATOR_BASE).ResourceRequestPriority.HIGH
        ray.get(
            coordinator.request_resources.remote(
                requester_id=requester_id,
                resources=[dict(b) for b in bundles],
                expire_after_s=expire_after_s,
                priority=priority,
            ),
            timeout=timeout_s,
        )
    except Exception:  # noqa: BLE001 - a busy or restarting coordinator: the caller tries again later
        return False
    return True


def torch_config_with_worker_setup(setup: Callable[[], object]) -> Any | None:
    """Ray's ``TorchConfig`` (its defaults), whose backend first runs ``setup`` on every Train worker.

    Internal ``torch-backend-start``: ``setup`` runs in each worker after the worker group
    starts and before Ray's backend sets up the Torch process group there (the environment it
    sets is what ``init_process_group`` reads). ``None`` when the internal is missing: the
    trainer then takes Ray's own ``TorchConfig``.
    """
    if not available("torch-backend-start"):
        return None
    config = _setup_torch_config_class()()
    config.worker_setup = setup
    return config


@functools.cache
def _setup_torch_config_class() -> type:
    """``TorchConfig`` with a backend that runs the config's ``worker_setup`` first; made once per process.

    Defined here, not at import: ``ray.train.torch`` imports torch. Ray's cloudpickle sends the
    classes to the Train controller by value.
    """
    # lazy: ray.train.torch imports torch (seconds), and only a trial driver builds a TorchConfig
    from ray.train.torch.config import TorchConfig, _TorchBackend

    class SetupTorchBackend(_TorchBackend):
        """Ray's Torch backend; the config's ``worker_setup`` runs on every worker before the process group."""

        def on_start(self, worker_group: Any, backend_config: Any) -> None:
            worker_group.execute(backend_config.worker_setup)
            _TorchBackend.on_start(self, worker_group, backend_config)

    class SetupTorchConfig(TorchConfig):
        """Ray's ``TorchConfig``, with :class:`SetupTorchBackend` as its backend."""

        @property
        def backend_cls(self) -> type:
            return SetupTorchBackend

    return SetupTorchConfig


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


# ----------------------------------------------------------------------------- hooks in Tune's classes
#
# Each base class below overrides one private method of a Ray class and calls a hook with a
# public name, and reads the private attributes it names through properties. hpsearch's
# subclasses (runtime/pbt.py, runtime/searchers.py, runtime/tracking.py) use only these.


@dataclass(frozen=True)
class Exploit:
    """One exploit of PBT (or PB2), as :meth:`ExploitHook.on_exploit` is given it.

    ``trial`` continues from ``donor``'s checkpoint with a mutated config once :meth:`run`
    (Ray's own exploit step) returns; the results are each trial's last, before the exploit.
    """

    trial: Any
    donor: Any
    own_result: dict[str, Any]
    donor_result: dict[str, Any]
    donor_checkpoint: Any
    run: Callable[[], None]


class ExploitHook:
    """Mixed before Ray's ``PopulationBasedTraining`` (or ``PB2``): :meth:`on_exploit` around each exploit.

    Internal ``pbt-exploit``. Without it, the exploit goes on without the hook.
    """

    def _exploit(self, tune_controller: Any, trial: Any, trial_to_clone: Any) -> None:
        ray_exploit = functools.partial(super()._exploit, tune_controller, trial, trial_to_clone)  # type: ignore[misc]  # Ray's, next in the MRO
        if not available("pbt-exploit"):  # the exploit goes on, unrecorded (said at the search's start)
            ray_exploit()
            return
        state: Any = self._trial_state  # type: ignore[attr-defined]  # Ray's, set in its __init__
        own, donor = state[trial], state[trial_to_clone]
        self.on_exploit(
            Exploit(
                trial=trial,
                donor=trial_to_clone,
                own_result=dict(own.last_result or {}),
                donor_result=dict(donor.last_result or {}),
                donor_checkpoint=donor.last_checkpoint,
                run=ray_exploit,
            )
        )

    def on_exploit(self, exploit: Exploit) -> None:
        """Called for each exploit; must call ``exploit.run()`` (Ray's step) once."""
        exploit.run()

    def _checkpoint_or_exploit(
        self, trial: Any, tune_controller: Any, upper_quantile: list[Any], lower_quantile: list[Any]
    ) -> None:
        """Ray's step; a top trial restored by a resume and not started yet keeps its latest checkpoint.

        Ray asks a top trial's actor to save, and such a trial has none, so Ray would record no
        checkpoint and skip the exploit. It hands over the checkpoint it would start from.
        """
        super()._checkpoint_or_exploit(trial, tune_controller, upper_quantile, lower_quantile)  # type: ignore[misc]  # Ray's
        if not available("pbt-exploit") or trial not in upper_quantile or trial.status not in ("PENDING", "PAUSED"):
            return
        state: Any = self._trial_state[trial]  # type: ignore[attr-defined]  # Ray's
        if state.last_checkpoint is None:
            state.last_checkpoint = trial.checkpoint

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        """Ray's step, then, for a trial restored by a resume, the scheduler state it had.

        Tune saves no scheduler in its experiment state, so after ``Tuner.restore`` Ray's PBT
        counts every trial from time 0. Under ``synch`` a trial that was waiting at the
        perturbation point then runs ahead of the others, and the weaker trials copy its later
        (perhaps its last) checkpoint. Here each restored trial's time, score and checkpoint come
        back from its last result, and the population waits at the next perturbation point that
        not every unfinished trial has reached: a trial restored at a perturbation point is paused
        there (Tune starts every pending trial), and the scheduler runs it when its turn comes.
        """
        super().on_trial_add(tune_controller, trial)  # type: ignore[misc]  # Ray's, next in the MRO
        if not available("pbt-exploit") or trial.last_result.get(self.time_attr) is None:
            return  # a new trial: Ray's fresh state is right
        self._hp_carry_on(trial)

    def _hp_carry_on(self, trial: Any) -> None:
        from ray.tune.experiment import Trial  # lazy: the scheduler module must import without Tune's trial

        states: Any = self._trial_state  # type: ignore[attr-defined]  # Ray's
        interval = int(self._perturbation_interval)  # type: ignore[attr-defined]  # Ray's
        result = dict(trial.last_result)
        state = states[trial]
        state.last_train_time = result[self.time_attr]
        state.last_result = result
        metric = self.scheduler_metric
        if metric is not None and result.get(metric) is not None:
            state.last_score = self._metric_op * result[metric]  # type: ignore[attr-defined]  # Ray's
        state.last_checkpoint = trial.checkpoint
        if not self._synch:  # type: ignore[attr-defined]  # Ray's
            state.last_perturbation_time = (state.last_train_time // interval) * interval
            return
        unfinished = [t for t in states if t.status not in (Trial.TERMINATED, Trial.ERROR)]
        if not unfinished:
            return
        sync = (min(states[t].last_train_time for t in unfinished) // interval + 1) * interval
        self._next_perturbation_sync = sync  # Ray's
        for t in unfinished:
            states[t].last_perturbation_time = sync - interval
        time = state.last_train_time
        if trial.status == Trial.PENDING and time > 0 and time % interval == 0 and trial.checkpoint is not None:
            # At a perturbation point: it may have to wait there for the others, and Tune starts every
            # pending trial at once, so it waits paused, as Ray's synch PBT leaves it; the scheduler
            # runs it again once the population reached the point (choose_trial_to_run).
            trial.set_status(Trial.PAUSED)

    def choose_trial_to_run(self, tune_controller: Any) -> Any:
        """Ray's choice; under ``synch``, a population left waiting for a trial that ended goes on.

        Ray's synchronous PBT perturbs when the last unfinished trial reaches the perturbation
        point, and until then runs no trial that is already there. A trial that errors or is
        stopped before the point never reaches it, and the others wait, paused, for ever. When
        every unfinished trial waits at the point, the perturbation runs now, as Ray runs it: its
        own result step, given one waiting trial's last result. Should that not move the
        population on, the point moves past it (no exploit there), so the search never hangs.
        """
        chosen = super().choose_trial_to_run(tune_controller)  # type: ignore[misc]  # Ray's, next in the MRO
        if chosen is not None or not self._synch or not available("pbt-exploit"):  # type: ignore[attr-defined]  # Ray's
            return chosen
        from ray.tune.experiment import Trial  # lazy: the scheduler module must import without Tune's trial

        states: Any = self._trial_state  # type: ignore[attr-defined]  # Ray's
        trials = list(tune_controller.get_trials())
        unfinished = [t for t in trials if t.status not in (Trial.TERMINATED, Trial.ERROR)]
        point = self._next_perturbation_sync
        if not unfinished or any(t.status != Trial.PAUSED or states[t].last_train_time < point for t in unfinished):
            return None  # nothing waits, or something is still on its way to the point
        left = [t.trial_id for t in trials if t not in unfinished and states[t].last_train_time < point]
        self.on_population_carries_on(left, [t.trial_id for t in unfinished], point)
        reporter = max(unfinished, key=lambda t: states[t].last_train_time)
        self.on_trial_result(tune_controller, reporter, dict(reporter.last_result))  # type: ignore[attr-defined]  # Ray's
        chosen = super().choose_trial_to_run(tune_controller)  # type: ignore[misc]  # Ray's
        if chosen is None:
            interval = int(self._perturbation_interval)  # type: ignore[attr-defined]  # Ray's
            self._next_perturbation_sync = max(states[t].last_train_time for t in unfinished) + interval
            chosen = super().choose_trial_to_run(tune_controller)  # type: ignore[misc]  # Ray's
        return chosen

    def on_population_carries_on(self, left: list[str], waiting: list[str], point: int) -> None:
        """Called when the trials ``waiting`` at the perturbation point ``point`` go on without the trials
        ``left``, which ended before reaching it (see :meth:`choose_trial_to_run`)."""

    @property
    def time_attr(self) -> str:
        """The result key PBT counts time in."""
        return str(self._time_attr)  # type: ignore[attr-defined]  # Ray's

    @property
    def scheduler_metric(self) -> str | None:
        """The metric PBT ranks trials by."""
        metric: str | None = self._metric  # type: ignore[attr-defined]  # Ray's
        return metric


#: The Optuna constraint an errored trial violates (``searcher.failed_trials: infeasible``), and the user
#: attribute that marks it failed.
FAILED_CONSTRAINT = "hpsearch_trial_failed"
FAILED_ATTR = "hpsearch_failed"


class OptunaStudyHook:
    """Mixed before Ray's ``OptunaSearch``: :meth:`after_study_setup` once its study exists (internal ``optuna-study-setup``)."""

    def _setup_study(self, mode: str | list[str]) -> None:
        super()._setup_study(mode)  # type: ignore[misc]  # Ray's, next in the MRO
        if not available("optuna-study-setup"):  # a spec that needs the hook was refused at start
            return
        self.after_study_setup(
            self._ot_study,  # type: ignore[attr-defined]  # Ray's
            self._space,  # type: ignore[attr-defined]  # Ray's
            self._metric,  # type: ignore[attr-defined]  # Ray's
        )

    def after_study_setup(self, study: Any, space: Any, metric: str | list[str] | None) -> None:
        """Called with the new study, the searcher's space and its metric (a list with several objectives)."""

    def tell_infeasible(
        self, trial_id: str, values: float | list[float], constraints: Mapping[str, float] | None = None
    ) -> bool:
        """Tell the study that this Tune trial errored, as infeasible: COMPLETE with ``values``, the spec's
        ``constraints`` (name -> Optuna's constraint value, set first, as every other trial's are) and the
        constraint ``FAILED_CONSTRAINT`` violated (Optuna's ``Trial.set_constraint``; a trial without one is
        feasible), marked failed in its user attributes (internal ``optuna-failed-trials``). Whether it
        could (else the caller tells it Ray's way)."""
        if not available("optuna-failed-trials"):
            return False
        import optuna  # lazy: only an optuna search gets here, and the search process may not need Optuna

        trial = self._ot_trials[trial_id]  # type: ignore[attr-defined]  # Ray's
        for name, value in (constraints or {}).items():
            trial.set_constraint(name, value)
        trial.set_constraint(FAILED_CONSTRAINT, 1.0)
        trial.set_user_attr(FAILED_ATTR, True)
        self._ot_study.tell(trial, values, state=optuna.trial.TrialState.COMPLETE)  # type: ignore[attr-defined]  # Ray's
        self._completed_trials.add(trial_id)  # type: ignore[attr-defined]  # Ray's: a second completion is ignored
        return True

    def set_constraints(self, trial_id: str, constraints: Mapping[str, float]) -> bool:
        """Set the constraint values (name -> value, feasible when at most 0) of this Tune trial's Optuna trial,
        before Ray's ``on_trial_complete`` tells it (internal ``optuna-constraints``). Whether it could."""
        if not available("optuna-constraints"):
            return False
        trial = self._ot_trials.get(trial_id)  # type: ignore[attr-defined]  # Ray's
        if trial is None:
            return False
        for name, value in constraints.items():
            trial.set_constraint(name, value)
        return True

    def knows_trial(self, trial_id: str) -> bool:
        """Whether the study holds an Optuna trial for this Tune trial.

        One that Tune restored but the searcher's saved state never suggested does not (see
        :class:`hpsearch.runtime.searchers.ResumableOptunaSearch`). Without the internal, every
        trial counts as known, which is Ray's own behaviour.
        """
        if not available("optuna-study-setup"):
            return True
        return trial_id in self._ot_trials  # type: ignore[attr-defined]  # Ray's


class HyperOptTrialsHook:
    """Mixed before Ray's ``HyperOptSearch``: its HyperOpt ``Trials`` and live trials (internal ``hyperopt-trials``)."""

    def _setup_hyperopt(self) -> None:
        super()._setup_hyperopt()  # type: ignore[misc]  # Ray's, next in the MRO
        if available("hyperopt-trials"):  # a spec that needs the hook was refused at start
            self.after_hyperopt_setup()

    def after_hyperopt_setup(self) -> None:
        """Called once HyperOpt's domain and trials exist."""

    @property
    def hyperopt_trials(self) -> Any:
        """HyperOpt's ``Trials`` of this searcher."""
        return self._hpopt_trials  # type: ignore[attr-defined]  # Ray's

    @property
    def live_trials(self) -> dict[str, Any]:
        """Tune trial id -> (HyperOpt trial id, trial document) of the trials suggested and not completed."""
        live: dict[str, Any] = self._live_trial_mapping  # type: ignore[attr-defined]  # Ray's
        return live


class VariantHook:
    """Mixed before Tune's ``BasicVariantGenerator``: :meth:`on_new_trial` before Tune records a trial (internal ``variant-generator``)."""

    def next_trial(self) -> Any:
        trial = super().next_trial()  # type: ignore[misc]  # Ray's, next in the MRO
        if trial is not None and available("variant-generator"):  # a spec that needs it was refused at start
            self.on_new_trial(trial)
        return trial

    def on_new_trial(self, trial: Any) -> None:
        """Called with each trial the generator makes, before Tune adds it."""


class TBXWriters:
    """Mixed before Ray's ``TBXLoggerCallback``: its per-trial writers and hparams results (internal ``tensorboard-writers``)."""

    @property
    def trial_writers(self) -> dict[Any, Any]:
        """Trial -> its open ``SummaryWriter``."""
        writers: dict[Any, Any] = self._trial_writer  # type: ignore[attr-defined]  # Ray's
        return writers

    @property
    def trial_results(self) -> dict[Any, Any]:
        """Trial -> the metrics Ray writes as the trial's hparams entry when it ends."""
        results: dict[Any, Any] = self._trial_result  # type: ignore[attr-defined]  # Ray's
        return results

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its callbacks into the experiment state; open writers are not picklable.
        return {**self.__dict__, "_trial_writer": {}, "_trial_result": {}}
