"""The door's registry: every internal hpsearch relies on, how it is checked, and what a search does without it.

:data:`INTERNALS` names each one (an :class:`Internal`); its check lives beside its accessor, in
the door's module for its library area (``check`` imports that module when it runs, as each
module of the door imports this one). :func:`broken` runs the checks, :func:`available` says
whether one holds in this process, and :func:`preflight` decides, at the start of a ``run`` or
``resume``, which are said in one line and which refuse the search (exit 2). What the checks are
made of is in :mod:`hpsearch.runtime.internals.contract_checks`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Literal

from hpsearch import messages
from hpsearch.errors import IncompatibleLibraryError
from hpsearch.planning.planner import HEAD_RESOURCE
from hpsearch.runtime.internals.contract_checks import ContractBroken
from hpsearch.spec.plugins import OptunaOptions
from hpsearch.spec.space import is_conditional

if TYPE_CHECKING:
    from hpsearch.spec import Spec

__all__ = [
    "CHECKED_ON",
    "ContractBroken",
    "INTERNALS",
    "Internal",
    "available",
    "broken",
    "library_versions",
    "preflight",
    "problem",
    "CONTROLLER_CLASS",
    "DATA_OBJECT_STORE_FRACTION",
    "HEAD_NODE_RESOURCE",
    "LOOPBACK_ENV_VAR",
    "RAY_DATA_FILE_HANDLER",
    "TORCH_BACKEND_CLASS",
    "TRAIN_ENV_VARS",
    "TUNE_INTERRUPT_HANDLER",
]

#: The Ray versions every contract below was checked on (the versions CI runs the contract test on).
CHECKED_ON = "Ray 2.58.1, 2.59.0 and 2.60.0"
#: The PyTorch version the torch contracts were checked on (the version CI runs).
TORCH_CHECKED_ON = "torch 2.13.0"


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


# ----------------------------------------------------------------------------- checking


def _at(module: str, check: str) -> Callable[[], None]:
    """The contract check ``check`` of the door's module ``module``, imported when it runs (that module
    imports this one, so this one cannot import it first)."""

    def run() -> None:
        getattr(import_module(f"{__package__}.{module}"), check)()

    return run


# ----------------------------------------------------------------------------- the names relied on

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
#: Ray Train's default failure policy, whose decision to restart a worker group can be vetoed.
FAILURE_POLICY = "ray.train.v2._internal.execution.failure_handling.default:DefaultFailurePolicy"
#: Ray Train's trainer, whose default callbacks and controller start are relied on.
TRAINER = "ray.train.v2.api.data_parallel_trainer:DataParallelTrainer"
#: Ray Data's autoscaling coordinator, which sizes elastic worker groups.
COORDINATOR = "ray.data._internal.cluster_autoscaler.default_autoscaling_coordinator"


# ----------------------------------------------------------------------------- which specs use an internal


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


def _drivers_anywhere(spec: Spec) -> bool:
    return not _drivers_on_head(spec)


def _uses_failed_infeasible(spec: Spec) -> bool:
    options = spec.searcher.options
    return isinstance(options, OptunaOptions) and options.failed_trials == "infeasible"


def _uses_optuna_constraints(spec: Spec) -> bool:
    return isinstance(spec.searcher.options, OptunaOptions) and (
        bool(spec.constraints) or _uses_failed_infeasible(spec)
    )


def _only_on_resume(spec: Spec) -> bool:
    """No spec uses it at ``run``: ``resume --set num_samples=N`` checks it itself, before it grows a search."""
    return False


#: The feature both internals of a drained trial driver serve (ray-draining-nodes, tune-pause-no-reuse), and
#: what a search does without either.
_DRAINED_DRIVER = "a trial whose driver's node is drained pauses, and resumes on another node (driver_node: any)"
_WITHOUT_DRAINED_DRIVER = (
    "such a trial's driver dies at the drain's deadline; Tune starts it again from its checkpoint only as one of "
    "failure.trial_retries"
)

# ----------------------------------------------------------------------------- every internal

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
        check=_at("tune_session", "_check_session_queues"),
    ),
    Internal(
        key="tune-session-report",
        relies_on="ray.train._internal.session._TrainSession.report(metrics, checkpoint), called by _get_result_from_queues",
        feature="pbt/pb2: each report reaches Tune with a pointer checkpoint",
        without_it="PBT never exploits a nested trial (Tune has no checkpoint to hand over)",
        public="none: Ray Train's TuneReportCallback forwards a checkpoint path, never a Tune checkpoint",
        on_missing="refuse",
        check=_at("tune_session", "_check_session_report"),
        used_by=_uses_pbt,
    ),
    Internal(
        key="trainable-mixins",
        relies_on="ray.tune.trainable.function_trainable.wrap_function reading fn.__mixins__ (kept by with_parameters)",
        feature="reused trial actors (resources.reuse_actors)",
        without_it="every trial gets a fresh actor (about 3-6 s more per trial); Tune's own reuse would be unsafe",
        public="none: Tune's reuse_actors has no hook for a function trainable's reset",
        on_missing="warn",
        check=_at("tune_session", "_check_mixins"),
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
        check=_at("train_worker", "_check_worker_report"),
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
        check=_at("train_worker", "_check_worker_checkpoint"),
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
        check=_at("train_controller", "_check_controller_class"),
    ),
    Internal(
        key="controller-failure",
        relies_on="ray.train.ControllerError.controller_failure (the exception a Train callback raised)",
        feature="the one-line error of a trial that missed its metric or its checkpoint",
        without_it="such a trial fails with Ray's wrapped error, and Tune retries it",
        public="ray.train.ControllerError is public; its attribute is not documented",
        on_missing="warn",
        check=_at("train_controller", "_check_controller_failure"),
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
        check=_at("ray_core", "_check_loopback"),
        embedded_only=True,
    ),
    Internal(
        key="ray-config-reload",
        relies_on=(
            "ray._raylet.Config.initialize re-reading RAY_AUTH_MODE from the environment (what Ray 2.60's "
            "_enable_token_auth calls), and ensure_token_if_auth_enabled making ~/.ray/auth_token for a new local "
            "cluster in token mode"
        ),
        feature="token authentication for an embedded Ray on Ray 2.58, which does not turn it on by itself",
        without_it=(
            "on Ray 2.58 an embedded Ray would run without token authentication: connect() checks its dashboard "
            "and refuses it (exit 2), unless RAY_AUTH_MODE=token is set before Python starts"
        ),
        public="RAY_AUTH_MODE=token, read once when Ray is imported, usually before hpsearch can set it",
        on_missing="warn",
        check=_at("ray_core", "_check_config_reload"),
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
        check=_at("ray_core", "_check_worker_logs"),
    ),
    Internal(
        key="ray-node",
        relies_on=(
            "ray._private.worker.global_worker.node and _global_node: Node.get_logs_dir_path(), "
            "get_session_dir_path(), session_name, all_processes"
        ),
        feature="Ray's log folder named in the experiment; a killed run's leftover Ray processes ended by the next run; the loopback check of an embedded Ray's servers",
        without_it="the experiment folder does not say where Ray's logs are, leftover processes stay, and an embedded Ray's servers go unchecked for the loopback (said in one line)",
        public="none: ray.get_runtime_context() gives no session folder or process list",
        on_missing="warn",
        check=_at("ray_core", "_check_node"),
    ),
    Internal(
        key="train-env-names",
        relies_on="ray.train.v2._internal.constants: " + ", ".join(TRAIN_ENV_VARS.values()),
        feature="fast reports (0.1 s controller polls) and the spec's failure.worker_start_timeout_s",
        without_it="a loop reports at most once per 2 s, and a worker group waits Ray's 60 s to start",
        public="none: Ray Train reads these variables but does not document them",
        on_missing="warn",
        check=_at("train_controller", "_check_env_names"),
    ),
    Internal(
        key="tune-interrupt",
        relies_on=f"ray.tune.tune._setup_signal_catching installing its SIGUSR1 handler {TUNE_INTERRUPT_HANDLER}",
        feature="a budget that ends a search resumably (as Ctrl-C does)",
        without_it="a spent budget ends the search for good: hpsearch resume cannot continue it",
        public="none: a Stopper's stop_all() marks the search finished, so it cannot be resumed",
        on_missing="warn",
        check=_at("tune_session", "_check_tune_interrupt"),
    ),
    Internal(
        key="tune-callback-usage",
        relies_on="ray.air._internal.usage.tag_callbacks (at every Tuner.fit) calling _count_callbacks, which counts "
        "the MLflow, W&B, Comet and Aim callbacks and Tune's DEFAULT_CALLBACK_CLASSES by name, other loggers as "
        "CustomLoggerCallback, the rest as CustomCallback",
        feature="a search process that imports no MLflow and W&B for Ray's usage tag (~1.1 CPU-s a search)",
        without_it="Ray's usage tag imports its MLflow, W&B, Comet and Aim integrations at every Tuner.fit, as Ray does",
        public="none: Tune tags its callbacks at every run, whether or not usage stats are sent",
        on_missing="warn",
        check=_at("tune_session", "_check_callback_usage"),
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
        check=_at("ray_data", "_check_data_fraction"),
    ),
    Internal(
        key="head-node-resource",
        relies_on=f"ray._common.constants.HEAD_NODE_RESOURCE_NAME == {HEAD_NODE_RESOURCE!r}",
        feature="trial drivers placed on the head node (resources.driver_node: head)",
        without_it="no trial driver can be placed: the search would wait forever",
        public="none: Ray documents the node:<ip> resources, not the head's",
        on_missing="refuse",
        check=_at("ray_core", "_check_head_resource"),
        used_by=_drivers_on_head,
    ),
    Internal(
        key="ray-data-file-handler",
        relies_on=f"ray.data._internal.logging.{RAY_DATA_FILE_HANDLER} (the handler of Ray Data's ray-data.log)",
        feature="Ray Data's console lines kept off the terminal, its log file kept",
        without_it="Ray Data's warnings reach the terminal while trials run",
        public="none: Ray Data's logging configuration has no console-only switch",
        on_missing="warn",
        check=_at("ray_data", "_check_ray_data_handler"),
    ),
    Internal(
        key="ray-draining-nodes",
        relies_on="ray._private.state.state.get_draining_nodes(): {node id hex: deadline in ms, 0 for none}",
        feature=_DRAINED_DRIVER,
        without_it=_WITHOUT_DRAINED_DRIVER,
        public=(
            "none: ray.nodes() and ray.util.state.list_nodes() say alive or dead, not draining; "
            "ray.train.get_preemption_info() covers a worker group's nodes, not its trial driver's"
        ),
        on_missing="warn",
        check=_at("ray_core", "_check_draining_nodes"),
        used_by=_drivers_anywhere,
    ),
    Internal(
        key="tune-pause-no-reuse",
        relies_on=(
            "ray.tune.execution.tune_controller: TrialRunnerWrapper._tune_controller, TuneController._reuse_actors "
            "(read by _maybe_cache_trial_actor as _schedule_trial_stop ends a trial's actor) and "
            "pause_trial(trial, should_checkpoint)"
        ),
        feature=_DRAINED_DRIVER,
        without_it=_WITHOUT_DRAINED_DRIVER,
        public=(
            "a scheduler's tune_controller.pause_trial is public, but with resources.reuse_actors Tune keeps the "
            "paused actor, on the drained node, for the next trial"
        ),
        on_missing="warn",
        check=_at("tune_schedulers", "_check_pause_without_reuse"),
        used_by=_drivers_anywhere,
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
        check=_at("tune_schedulers", "_check_exploit"),
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
        check=_at("optuna_search", "_check_optuna"),
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
        check=_at("optuna_search", "_check_optuna_failed"),
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
        check=_at("optuna_search", "_check_optuna_constraints"),
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
        check=_at("tune_search", "_check_search_state"),
        used_by=_only_on_resume,
    ),
    Internal(
        key="train-failure-policy",
        relies_on=(
            f"{FAILURE_POLICY.replace(':', '.')}.make_decision(training_failed_error), FailureDecision.RETRY/RAISE, "
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
        check=_at("train_controller", "_check_failure_policy"),
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
        check=_at("tune_session", "_check_trial_retries"),
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
        check=_at("hyperopt_search", "_check_hyperopt"),
        used_by=_uses_warm_start("hyperopt"),
    ),
    Internal(
        key="variant-generator",
        relies_on="ray.tune.search.BasicVariantGenerator.next_trial() and Trial.evaluated_params/experiment_tag",
        feature="conditional spaces (when:) with the random searcher",
        without_it="inactive parameters would reach the loop and the trial's recorded config",
        public="none: Tune's variant generator has no per-trial hook",
        on_missing="refuse",
        check=_at("tune_search", "_check_variants"),
        used_by=_uses_conditional_random,
    ),
    Internal(
        key="tensorboard-writers",
        relies_on="ray.tune.logger.TBXLoggerCallback._trial_writer and _trial_result",
        feature="tracking.tensorboard (scalars at each epoch, the trial's end as text)",
        without_it="the TensorBoard tracker cannot write",
        public="none: TBXLoggerCallback keeps its writers to itself",
        on_missing="refuse",
        check=_at("tensorboard", "_check_tbx"),
        used_by=lambda spec: spec.tracking.tensorboard,
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
        check=_at("train_torch", "_check_torch_backend"),
        used_by=lambda spec: spec.scaling.workers > 1,
    ),
    Internal(
        key="train-default-callbacks",
        relies_on=(
            f"{TRAINER.replace(':', '.')}._create_default_callbacks() (the controller's callbacks, called by fit), "
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
        check=_at("train_controller", "_check_trainer_callbacks"),
    ),
    Internal(
        key="train-controller-on-driver-node",
        relies_on=(
            f"{TRAINER.replace(':', '.')}._initialize_and_run_controller (called by fit) starting the "
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
        check=_at("train_controller", "_check_controller_node"),
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
        check=_at("train_torch", "_check_torch_mirror"),
    ),
    Internal(
        key="train-autoscaling-coordinator",
        relies_on=(
            f"{COORDINATOR}: get_or_create_autoscaling_coordinator() and its actor's request_resources(requester_id, "
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
        check=_at("ray_data", "_check_coordinator"),
        used_by=lambda spec: spec.scaling.elastic is not None,
    ),
    Internal(
        key="torch-optimizer-load",
        relies_on=(
            "torch.optim.Optimizer.load_state_dict(state_dict), replaced on the class for the whole Train worker "
            "process, and its param_groups"
        ),
        feature=(
            "under pbt/pb2, an exploited trial's optimizers keep the mutated hyperparameters (lr, weight_decay, "
            "momentum, betas...) when the loop loads the donor's state with PyTorch's load_state_dict (plain loops, "
            "Lightning, Hugging Face)"
        ),
        without_it=(
            "such an optimizer takes the donor's hyperparameters back, and the mutation is lost (ray-project/ray "
            "issue 36660); hpsearch.train.restore still applies the new config's"
        ),
        public=(
            "none: Optimizer.load_state_dict restores every hyperparameter of the saved groups, and Lightning and the "
            "Hugging Face Trainer load it with no hook before their first step"
        ),
        on_missing="warn",
        check=_at("torch_optim", "_check_optimizer_load"),
        used_by=_uses_pbt,
        checked_on=TORCH_CHECKED_ON,
    ),
    Internal(
        key="torch-scheduler-load",
        relies_on=(
            "torch.optim.lr_scheduler.LRScheduler's and each scheduler class's own load_state_dict(state_dict), "
            "replaced on the classes for the whole Train worker process; their base_lrs and optimizer, and _last_lr "
            "(what get_last_lr returns), written"
        ),
        feature=(
            "under pbt/pb2, an exploited trial's LR schedule goes on at the mutated base rate when the loop loads "
            "the donor's scheduler state"
        ),
        without_it="the schedule goes on at the donor's base rate: a mutated lr is lost at the scheduler's next step",
        public="none: a scheduler's load_state_dict restores the donor's base_lrs, and get_last_lr reads _last_lr",
        on_missing="warn",
        check=_at("torch_optim", "_check_scheduler_load"),
        used_by=_uses_pbt,
        checked_on=TORCH_CHECKED_ON,
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


def broken() -> dict[str, str]:
    """Every internal whose contract the installed libraries break, by key, with what differs.

    Each is checked once per process (importing the modules named, reading signatures and
    sources), and remembered.
    """
    return {i.key: found for i in INTERNALS if (found := _problem(i.key)) is not None}


def problem(key: str) -> str | None:
    """What differs from internal ``key``'s contract in this process; ``None`` when it holds."""
    if key not in _BY_KEY:
        raise KeyError(f"no internal named {key!r}; known: {', '.join(_BY_KEY)}")
    return _problem(key)


def available(key: str) -> bool:
    """Whether the internal ``key`` is as hpsearch expects it in this process (its feature is on)."""
    return problem(key) is None


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
    for internal in INTERNALS:  # only what this search relies on: a check imports its library (HyperOpt: ~0.9 CPU-s)
        if (internal.used_by is not None and not internal.used_by(spec)) or (internal.embedded_only and not embedded):
            continue
        if (detail := _problem(internal.key)) is None:
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
