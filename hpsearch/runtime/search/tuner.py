"""Build a plain ``ray.tune.Tuner`` from a spec and a plan, run it, and write the experiment folder.

The checks made before anything is written live in :mod:`hpsearch.runtime.search.preflight`.
``run`` and ``resume`` return a :class:`~hpsearch.runtime.search.search_result.SearchResult`.

One search is one folder, ``<storage_path>/<name>/``. It holds Tune's experiment files and
every trial's nested Train run under ``train/<trial_id>/``. It also holds hpsearch's own
files: the spec as run, the resource plan, the trials' outcomes and the summary. Their names
are in :mod:`hpsearch.experiment.layout`. They are written and read with
:mod:`hpsearch.experiment.files`.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from ray import tune
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback
from ray.tune.stopper import CombinedStopper, Stopper

from hpsearch import messages
from hpsearch.analysis import summarize_experiment
from hpsearch.errors import ExperimentNotFoundError, PlanError, Problem, SpecError, StorageFullError
from hpsearch.experiment import files
from hpsearch.experiment.check import check_folder
from hpsearch.experiment.files import experiment_spec, read_outcomes
from hpsearch.experiment.folder_lock import FolderLock
from hpsearch.experiment.layout import CHECK_FILE, EPOCH, TRAIN_RUNS_DIR
from hpsearch.formatting import duration
from hpsearch.formatting import hours as fmt_hours
from hpsearch.planning.autoscale import addable_nodes, plan_run
from hpsearch.planning.estimate import estimate, timing_from, workload_for
from hpsearch.planning.for_spec import plan_for
from hpsearch.planning.planner import Node, Plan
from hpsearch.runtime import internals, ray_workarounds
from hpsearch.runtime.datasets import datasets_for_spec
from hpsearch.runtime.env import apply_fit_defaults, apply_tuner_defaults, explicit_loggers_only
from hpsearch.runtime.nodes import connect as ray_cluster
from hpsearch.runtime.nodes import session
from hpsearch.runtime.nodes.listening import LoopbackWatch
from hpsearch.runtime.nodes.node_check import check_nodes
from hpsearch.runtime.nodes.node_watch import NodeWatch
from hpsearch.runtime.search import banner, budget, grow, progress
from hpsearch.runtime.search.autoscaling import (
    Autoscaling,
    failure_for,
    from_plan,
    placement_status,
    worker_shapes,
)
from hpsearch.runtime.search.outcomes import OutcomeRecorder
from hpsearch.runtime.search.plugins import SchedulerContext, SearcherContext, build_scheduler, build_searcher
from hpsearch.runtime.search.preflight import GROW_KEY, check_growth, check_resume_overrides, preflight
from hpsearch.runtime.search.progress import ProgressPrinter
from hpsearch.runtime.search.room import keeper_for
from hpsearch.runtime.search.search_result import SearchResult
from hpsearch.runtime.search.tune_space import to_tune
from hpsearch.runtime.search.warm_start import with_space
from hpsearch.runtime.trial.trainable import make_trainable
from hpsearch.spec import FailureSettings, Spec, load_spec, total_trials, varying_params
from hpsearch.spec._storage import storage_full

if TYPE_CHECKING:  # pragma: no cover
    from ray.tune import Callback, ResultGrid, Tuner

    from hpsearch.analysis import SearchSummary
    from hpsearch.spec.budget import Reached

__all__ = [
    "build_tuner",
    "run",
    "run_with_summary",
    "resume",
    "resume_with_summary",
    "callbacks_for",
]


@dataclass
class _Built:
    tuner: Tuner
    plan: Plan
    recorder: OutcomeRecorder


def _build(
    spec: Spec,
    nodes: Sequence[Node] | None,
    plan: Plan | None = None,
    datasets: Mapping[str, Any] | None = None,
    autoscaling: Autoscaling | None = None,
    stop: Stopper | None = None,
) -> _Built:
    if plan is None:
        if nodes is None:
            ray_cluster.connect()
            nodes = ray_cluster.cluster_nodes()
        plan = plan_for(spec, nodes)
    workarounds = ray_workarounds.workarounds_enabled()  # read once, for the callbacks and the trainable alike
    if datasets is None:  # build_tuner passes none: build the spec's datasets now that Ray is connected
        datasets = datasets_for_spec(spec)
    trainable = _trainable(
        spec,
        record_controller=workarounds,
        datasets=datasets,
        concurrency=plan.max_concurrent_trials,
        autoscaling=autoscaling,
    )
    # Under population-based training, the whole population is created at once, so the searcher's
    # limit is the population. The drivers then take turns within the plan's concurrency (runtime/search/pbt.py).
    searcher_limit = total_trials(spec) if spec.population_based else plan.max_concurrent_trials
    # reuse_actors stays off under it. Handing a paused trial's actor to a restored trial has not been measured.
    if spec.population_based:
        warnings.filterwarnings("ignore", message="Consider boosting PBT performance", category=UserWarning)
    searcher, scheduler = search_plugins(spec, searcher_limit)
    callbacks = callbacks_for(
        spec, concurrency=plan.max_concurrent_trials, workarounds=workarounds, autoscaling=autoscaling
    )
    apply_tuner_defaults()
    tuner = tune.Tuner(
        trainable,
        param_space=to_tune(spec.trial_space(), searcher=spec.searcher.type),
        tune_config=tune.TuneConfig(
            # With several objectives, Tune gets no single metric, because it would overwrite the
            # searcher's lists. The searcher and the scheduler were each built with their own.
            metric=None if spec.multi_objective else spec.metric,
            mode=None if spec.multi_objective else spec.mode,
            num_samples=spec.num_samples,
            search_alg=searcher,  # carries the plan's concurrency limit
            scheduler=scheduler,
            # A reused actor first ends the previous trial's nested run (runtime/trial/reuse.py). It finds that
            # run's controller through the controller record, which the work-arounds switch also turns
            # on and off. It also needs two Ray internals.
            reuse_actors=spec.resources.reuse_actors
            and workarounds
            and not spec.population_based
            and internals.available("trainable-mixins")
            and internals.available("tune-session-queues"),
        ),
        run_config=tune.RunConfig(
            name=spec.name,
            storage_path=str(spec.storage_path),
            verbose=0,
            callbacks=callbacks,
            failure_config=tune.FailureConfig(max_failures=spec.failure.trial_retries),
            # `stop`: a check's own cut (runtime/search/check.py), beside the budget; Tune pickles both into its state
            stop=_budget_stopper(spec) if stop is None else CombinedStopper(_budget_stopper(spec), stop),
        ),
    )
    recorder = cast("OutcomeRecorder", callbacks[0])  # callbacks_for puts it first, before the printer
    return _Built(tuner, plan, recorder)


def search_plugins(spec: Spec, searcher_limit: int) -> tuple[Any, Any]:
    """The searcher (limited to ``searcher_limit`` trials at once) and the scheduler Tune gets for ``spec``.

    The one place both are built from a spec: the search's Tuner, and the plug-in contract suite that
    drives every registered name through Tune's own API (tests/runtime/search/test_plugin_contract.py).
    """
    searcher = build_searcher(spec.searcher, with_space(spec, _searcher_context(spec, searcher_limit)))
    scheduler = build_scheduler(
        spec.scheduler,
        SchedulerContext(
            *spec.scheduler_metric,
            own=spec.multi_objective,
            experiment_dir=spec.experiment_dir,
            drained_drivers=spec.experiment_dir / TRAIN_RUNS_DIR if spec.resources.driver_node == "any" else None,
        ),
    )
    return searcher, scheduler


def _searcher_context(spec: Spec, concurrency: int) -> SearcherContext:
    """The searcher's metric and mode: lists, one item per objective, for a multi-objective search."""
    if spec.multi_objective:
        metrics, modes = [m for m, _ in spec.objectives], [d for _, d in spec.objectives]
        return SearcherContext(metrics, modes, concurrency, constraints=spec.constraints)
    return SearcherContext(spec.metric, spec.mode, concurrency, constraints=spec.constraints)


def callbacks_for(
    spec: Spec,
    *,
    concurrency: int,
    workarounds: bool = True,
    autoscaling: Autoscaling | None = None,
) -> list[Callback]:
    """The Tune callbacks of a search, in the order Tune must call them.

    1. The :class:`~hpsearch.runtime.search.outcomes.OutcomeRecorder`. It decides how each trial ended.
    2. The :class:`~hpsearch.runtime.search.progress.ProgressPrinter`. It prints what the recorder decided.
    3. The :class:`~hpsearch.runtime.nodes.node_watch.NodeWatch`. It says when a node leaves or joins, and
       gives the recorder the lost host of a trial that errors after losing its workers. Then the
       :class:`~hpsearch.runtime.search.room.RoomKeeper`: on a shared cluster, the search's share of it.
    4. With ``workarounds``, the :class:`~hpsearch.runtime.ray_workarounds.OrphanReaper`, and the
       :class:`~hpsearch.runtime.nodes.listening.LoopbackWatch` (an embedded Ray's sockets, read again).
    5. The trackers of ``spec.tracking`` (:mod:`hpsearch.runtime.search.tracking`). Each is checked first.
    6. Tune's CSV and JSON loggers, named so that a new search's Tune adds no TensorBoard logger of its own
       (:func:`~hpsearch.runtime.env.explicit_loggers_only`): event files come with ``tracking.tensorboard``.

    They are built without starting Ray. With ``autoscaling``, the printer says why trials wait
    for their workers (:mod:`hpsearch.runtime.search.autoscaling`).
    """
    failure = failure_for(spec, autoscaling)
    watch = NodeWatch(spec.experiment_dir / TRAIN_RUNS_DIR, _retry_hint(failure), drained_hint=_drained_hint(failure))
    recorder = OutcomeRecorder(spec.experiment_dir, max_t=_max_t(spec), error_note=watch.note_for)
    printer = ProgressPrinter(
        spec.metric,
        spec.mode,
        recorder,
        total=total_trials(spec),
        varying=varying_params(spec),
        concurrency=concurrency,
        waiting_reason=functools.partial(_waiting_reason, spec, concurrency, autoscaling),
        placement_status=functools.partial(placement_status, spec, autoscaling.groups) if autoscaling else None,
        constraints=spec.constraints,
    )
    callbacks: list[Callback] = [recorder, printer, watch, keeper_for(spec, concurrency)]
    if workarounds:
        callbacks.append(_reaper(spec))
        if internals.available("torch-backend-mirror"):  # trials' stores on the loopback: any other socket is said
            callbacks.append(LoopbackWatch())
    if spec.tracking.enabled():  # after the recorder, because each tracker tags a run with the status it decided
        # lazy: the trackers' module loads Ray's logger callbacks; a search without tracking never needs it
        from hpsearch.runtime.search.tracking import tracking_callbacks
        from hpsearch.runtime.search.tracking_check import check_tracking  # lazy: it imports the trackers' module

        check_tracking(spec)  # a tracker that cannot be set up is refused here (SpecError), not mid-search
        callbacks += tracking_callbacks(spec, recorder)
    return [*callbacks, CSVLoggerCallback(), JsonLoggerCallback()]  # type: ignore[no-untyped-call]  # Ray's, unannotated


def _retry_hint(failure: FailureSettings) -> str:
    """What Ray Train does for a trial whose workers' node left the cluster, with the spec's settings."""
    retries = failure.worker_retries
    if retries == 0:
        return "failure.worker_retries is 0, so the trial fails"
    return (
        f"Ray Train starts them again where there is room, from their latest checkpoint (failure.worker_retries: "
        f"{retries}, each start waiting up to {failure.worker_start_timeout_s:g} s: failure.worker_start_timeout_s)"
    )


def _drained_hint(failure: FailureSettings) -> str:
    """What Ray Train does for a trial whose workers' node left after a drain notice its loop read (a preemption)."""
    return (
        "it was drained, so Ray Train starts them again where there is room, from the checkpoint saved at the "
        f"notice: a preemption, not a failure (failure.preemption_retries: {failure.preemption_retries})"
    )


def _max_t(spec: Spec) -> tuple[str, float] | None:
    """The scheduler's ``(time_attr, max_t)``, or ``None`` when it has no ``max_t``."""
    max_t = getattr(spec.scheduler.options, "max_t", None)
    time_attr = getattr(spec.scheduler.options, "time_attr", EPOCH)
    return (time_attr, max_t) if max_t is not None else None


def _reaper(spec: Spec) -> ray_workarounds.OrphanReaper:
    """The callback that frees what a stopped trial's nested run leaves behind (see hpsearch.runtime.ray_workarounds)."""
    shapes = worker_shapes(spec)
    if spec.resources.driver_node == "any":
        # Never sweep a worker group shaped like a trial driver's group.
        shapes = [shape for shape in shapes if shape != [{"CPU": spec.resources.driver_cpus}]]
    return ray_workarounds.OrphanReaper(spec.experiment_dir / TRAIN_RUNS_DIR, worker_shapes=shapes)


def _trainable(
    spec: Spec,
    *,
    record_controller: bool,
    datasets: Mapping[str, Any] | None = None,
    concurrency: int = 1,
    autoscaling: Autoscaling | None = None,
) -> Any:
    """The spec's trial driver, as the trainable Tune is given.

    ``datasets`` come from :func:`~hpsearch.runtime.datasets.datasets_for_spec`. With
    ``materialize: once`` they are already materialized. ``concurrency`` is the plan's number
    of trials at once. It sets each trial's share of ``data.cpus``. With ``autoscaling``, a
    worker group may wait ``failure.node_start_timeout_s`` for a node.
    """
    return make_trainable(
        spec.load_trainable(),
        scaling=spec.scaling,
        driver_cpus=spec.resources.driver_cpus,
        driver_node=spec.resources.driver_node,
        failure=failure_for(spec, autoscaling),
        checkpoint=spec.checkpoint,
        aggregate=spec.aggregate,
        storage_path=spec.experiment_dir / TRAIN_RUNS_DIR,
        metric=spec.metric,
        mode=spec.mode,
        required_metrics=_required_metrics(spec),
        record_controller=record_controller,
        datasets=datasets,
        data=spec.data,
        concurrency=concurrency,
        population=spec.population_based,
    )


def _required_metrics(spec: Spec) -> dict[str, str]:
    """What every report must hold besides the primary metric, each with the spec key that names it: the
    other objectives, the scheduler's metric, every constrained metric."""
    names = {m: "metric" for m, _ in spec.objectives[1:]}
    if spec.scheduler.type != "fifo":
        names.setdefault(spec.scheduler_metric[0], "metric")
    for i, constraint in enumerate(spec.constraints):
        names.setdefault(constraint.metric, f"constraints[{i}]")
    names.pop(spec.metric, None)
    return names


def _waiting_reason(spec: Spec, planned: int, autoscaling: Autoscaling | None = None) -> str | None:
    """Why trials wait, or ``None``.

    Re-plans on the cluster as it is now, because a node may have left. On an autoscaling
    cluster, the plan also counts every node the autoscaler can still add.
    """

    nodes = ray_cluster.cluster_nodes()
    if autoscaling is not None:
        nodes += addable_nodes(autoscaling.groups, nodes)
    try:
        now = plan_for(spec, nodes)
    except PlanError as err:
        return f"no trial fits on the cluster as it is now: {err}"
    if now.capacity < planned:
        return f"the cluster now fits {now.capacity} trial(s) at once, not the {planned} planned (did a node leave?)"
    return None


def build_tuner(spec: Spec, *, nodes: Sequence[Node] | None = None) -> Tuner:
    """Build the ``ray.tune.Tuner`` for a spec, planned for the cluster.

    Args:
        spec: A spec from :func:`hpsearch.load_spec`.
        nodes: The cluster to plan for; by default the connected Ray cluster's nodes
            (an embedded local Ray is started if none is connected).

    Returns:
        A plain ``ray.tune.Tuner``; ``tuner.fit()`` returns a ``ResultGrid``.

    Raises:
        PlanError: The cluster can never run one trial (or not as many as asked).
        IncompatibleLibraryError: The installed Ray lacks an internal this search needs.

    Example:
        >>> tuner = build_tuner(load_spec("search_spaces/digits_quick.yaml"))
        >>> results = tuner.fit()
    """
    # The Ray internals this search relies on, as run checks them. The loopback switch is
    # checked when an embedded Ray starts (env.loopback_only refuses without it).
    internals.preflight(spec, embedded=False)
    return _build(spec, nodes).tuner


def run(
    spec: Spec | str | Path | Mapping[str, Any],
    *,
    address: str | None = None,
    overwrite: bool = False,
    verbose: bool = False,
    stream: TextIO | None = None,
    cluster: str | None = None,
) -> SearchResult:
    """Run a search end to end and return its :class:`~hpsearch.SearchResult`.

    Validates the spec, refuses an existing experiment folder unless ``overwrite``,
    connects to Ray (embedded local Ray unless ``address``), plans the trials, writes
    the spec as run and the plan into the experiment folder, runs the search with
    progress lines and writes the summary.

    Args:
        spec: A :class:`Spec`, a spec file, or a spec dict.
        address: An existing Ray cluster to use instead of an embedded local one.
        overwrite: Delete an existing experiment folder of the same name first.
        verbose: Also print Ray's own log lines (the workers' output, Ray's warnings, Tune's
            tracebacks); without it they are kept in Ray's session folder only, and the
            experiment folder's hpsearch_ray_logs.jsonl says where.
        stream: Where every line hpsearch prints goes while the search runs (stderr by default).
        cluster: Used with ``address``. The node groups the cluster's autoscaler may grow it to,
            written as ``hpsearch plan --cluster`` takes them (``'1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}'``).
            The search is planned for them, and its trials wait for the nodes they need
            (:mod:`hpsearch.runtime.search.autoscaling`).

    Returns:
        The search's ``ResultGrid`` as ``.result_grid``. Its methods, such as ``get_best_result``,
        also work on the returned object itself. The summary is ``.summary``. The folder is
        ``.experiment_dir``, read back by ``.results()``.

    Raises:
        SpecError, PlanError, ExperimentExistsError, ClusterError: before anything is written.
        ExperimentLockedError: another search holds the experiment folder (a ``run``, ``resume`` or
            ``check`` of it still running): nothing is written.

    Example:
        >>> result = run("search_spaces/digits_quick.yaml")
        >>> result.get_best_result().metrics["val_acc"]
        0.97...
    """
    with messages.to(stream):  # every line hpsearch prints, while this search runs
        return _run(spec, address=address, overwrite=overwrite, verbose=verbose, cluster=cluster)


def _run(
    spec: Spec | str | Path | Mapping[str, Any],
    *,
    address: str | None,
    overwrite: bool,
    verbose: bool,
    cluster: str | None,
    stop: Stopper | None = None,
) -> SearchResult:
    if not isinstance(spec, Spec):
        spec = load_spec(spec)
    with one_search(spec.experiment_dir, "hpsearch check" if stop is not None else "hpsearch run"):
        return _run_locked(spec, address=address, overwrite=overwrite, verbose=verbose, cluster=cluster, stop=stop)


@contextlib.contextmanager
def one_search(experiment_dir: Path, command: str) -> Iterator[None]:
    """Hold the experiment folder's lock while this search runs: another ``run``, ``resume`` or ``check``
    of the folder is refused (:class:`~hpsearch.experiment.folder_lock.FolderLock`), and a lock a killed
    search left is taken over with a line that says so."""
    lock = FolderLock(experiment_dir, command=command)
    taken_over = lock.acquire()
    if taken_over is not None:
        messages.say(taken_over)
    try:
        yield
    finally:
        lock.release()


def _run_locked(
    spec: Spec, *, address: str | None, overwrite: bool, verbose: bool, cluster: str | None, stop: Stopper | None
) -> SearchResult:
    exp_dir = spec.experiment_dir
    started = _start_up(spec, resuming=False, address=address, verbose=verbose, overwrite=overwrite, cluster=cluster)
    nodes, plan, scaling, autoscaling = started.nodes, started.plan, started.scaling, started.autoscaling
    # With `materialize: once`, the datasets are built here.
    # So a bad factory is refused before anything is written.
    datasets = datasets_for_spec(spec)
    if exp_dir.exists():
        shutil.rmtree(exp_dir)  # --overwrite; preflight checked that this is an hpsearch experiment folder
    files.make_experiment_folder(exp_dir)  # 0700 under the user's home: the results stay private
    files.write_format(exp_dir)  # written first, so that the folder says its format
    files.write_spec(exp_dir, spec.to_dict())
    files.write_plan(exp_dir, {**plan.as_dict(), **scaling})
    _record_session(exp_dir)
    logs_line = banner.record_ray_logs(exp_dir, address, verbose=verbose)
    # Tune writes its own state into the folder from here on
    built = _build(spec, nodes, plan, datasets, autoscaling=autoscaling, stop=stop)
    for text in banner.banner(spec, plan, logs_line, scaling):
        messages.say(text)
    if stop is None:  # a search, not the check's own run
        _estimate_at_start(spec, plan)
    with explicit_loggers_only():  # its callbacks name Tune's CSV and JSON loggers: Tune adds no TensorBoard one
        return _fit_and_summarize(spec, built.tuner, built.recorder)


@dataclass(frozen=True)
class _StartedUp:
    """What the start-up found: the cluster's nodes, the plan, its autoscaling entry and node groups."""

    nodes: Sequence[Node]
    plan: Plan
    scaling: dict[str, Any]
    autoscaling: Autoscaling | None


def _start_up(
    spec: Spec,
    *,
    resuming: bool,
    address: str | None,
    verbose: bool,
    overwrite: bool = False,
    cluster: str | None = None,
) -> _StartedUp:
    """The start-up ``run`` and ``resume`` share, in one order, up to the first write of a new folder.

    1. Check everything that needs no Ray (:func:`~hpsearch.runtime.search.preflight.preflight`: the
       folder, the storage, a spent budget, the trackers, Ray's internals, ``--cluster``), then end
       whatever a killed search of this folder left running.
    2. Connect to Ray (embedded, or ``address``).
    3. On resume, the folder exists: record this Ray session in it at once, refuse a folder with no
       Tune state, and read back the node groups the search was run with.
    4. Plan the trials on the nodes (a plan that can never run is refused here, before a write).
    5. Check every node: storage, versions, the loop and the host names.
    """
    exp_dir = spec.experiment_dir
    autoscaling = preflight(spec, resuming=resuming, address=address, overwrite=overwrite, cluster=cluster)
    ray_cluster.connect(address, verbose=verbose)
    if resuming:
        _record_session(exp_dir)
        if not tune.Tuner.can_restore(str(exp_dir)):
            raise ExperimentNotFoundError(
                f"{exp_dir} holds no Tune experiment state to resume from (the search was stopped before it "
                f"started); start it again with `hpsearch run --overwrite`"
            )
        autoscaling = from_plan(files.read_plan(exp_dir))  # the node groups the search was run with, if any
    nodes = ray_cluster.cluster_nodes()
    plan, scaling = _plan(spec, nodes, autoscaling)
    check_nodes(spec, nodes)
    return _StartedUp(nodes, plan, scaling, autoscaling)


def _record_session(exp_dir: Path) -> None:
    """Record the embedded Ray's processes in the folder: if this search is killed, the next ``run`` or
    ``resume`` of the folder ends them (:mod:`hpsearch.runtime.nodes.session`)."""
    session.record(exp_dir)


def _estimate_at_start(spec: Spec, plan: Plan) -> None:
    """When the spec was checked (``hpsearch check``), predict the search's wall time and resource-hours from
    the check's measurements on this plan, write it (``hpsearch_estimate.json``) and say it: the summary,
    the closing lines and the report set it next to what happened."""
    folder = check_folder(spec.experiment_dir)
    record = files.read_check(folder)
    if record is None:
        return
    try:
        timing = timing_from(
            record,
            check_file=str(folder / CHECK_FILE),
            spec_arg=str(spec.source or spec.name),
            workers=spec.scaling.largest().planned_workers,
        )
        est = estimate(workload_for(spec, plan), timing)
    except PlanError:
        messages.say("no estimate at the start: `hpsearch plan SPEC --estimate` says what it lacks")
        return
    files.write_estimate(spec.experiment_dir, {"made_at": time.time(), **est.as_dict()})
    held = ", ".join(f"{k} {s.text(fmt_hours)}" for k, s in est.resource_hours().items())
    messages.say(
        f"estimate: {est.wall.text(duration)} of wall time"
        + (f", resource-hours {held}" if held else "")
        + f" (from the check in {folder}; `hpsearch plan --estimate` shows the model)"
    )


def run_with_summary(spec: Spec | str | Path | Mapping[str, Any], **kwargs: Any) -> tuple[ResultGrid, SearchSummary]:
    """Deprecated. :func:`run` takes the same arguments and returns both: ``.result_grid`` and ``.summary``."""
    _deprecated("run_with_summary", "run")
    result = run(spec, **kwargs)
    return result.result_grid, result.summary


def _deprecated(name: str, replacement: str) -> None:
    """Warn that ``name`` will be removed, pointing at the caller's caller. ``replacement`` returns a SearchResult."""
    warnings.warn(
        f"hpsearch.runtime.search.tuner.{name} is deprecated and will be removed: use hpsearch.{replacement}(...), "
        f"whose SearchResult holds the ResultGrid (.result_grid) and the summary (.summary)",
        DeprecationWarning,
        stacklevel=3,
    )


def _plan(spec: Spec, nodes: Sequence[Node], autoscaling: Autoscaling | None) -> tuple[Plan, dict[str, Any]]:
    """The plan Tune gets, and the plan file's ``autoscaling`` entry (``{}`` on a fixed cluster).

    On an autoscaling cluster, Tune's plan counts the nodes up now and every node the autoscaler
    may still add. The entry holds what fits on the nodes up now
    (:func:`hpsearch.planning.autoscale.plan_run`).
    """
    if autoscaling is None:
        return plan_for(spec, nodes), {}
    run_plan = plan_run(spec, autoscaling.groups, nodes)
    return run_plan.limit, {"autoscaling": run_plan.as_dict(autoscaling.cluster)}


def _budget_stopper(spec: Spec) -> Any:
    """The Tune stopper that ends the search when its budget is spent (see hpsearch.runtime.search.budget)."""
    return budget.BudgetStopper(spec.experiment_dir, spec.budget)


def _fit_and_summarize(spec: Spec, tuner: Tuner, recorder: OutcomeRecorder | None) -> SearchResult:
    apply_fit_defaults()
    workarounds = ray_workarounds.workarounds_enabled()  # read once, for the usage tag and the drain alike
    if workarounds:
        internals.count_callbacks_without_imports()  # Ray's usage tag, without importing MLflow and W&B
    start = time.monotonic()
    try:
        tracker = budget.begin(spec)  # records this stint of the search; its budget is the one the stopper applies
        try:
            results = tuner.fit()
        finally:
            reached = budget.finish(tracker)  # trials a budget stopped are recorded as stopped by it
        if workarounds:  # what Tune's last clean-up of cached trial actors left
            _reaper(spec).drain()
        outcomes = {**read_outcomes(spec.experiment_dir), **(recorder.outcomes if recorder is not None else {})}
        wall_time_s = time.monotonic() - start
        interrupted = reached is None and _interrupted(spec, results, outcomes)
        return SearchResult(results, _summarize(spec, wall_time_s, interrupted, reached), spec.experiment_dir)
    except (OSError, EOFError) as err:  # Tune's (an error file it left empty) or ours: one line on a full storage
        full = storage_full(spec.storage_path, err)
        if full is None:
            raise
        raise StorageFullError(
            f"{full}. The search ended; what it wrote before is in {spec.experiment_dir} (hpsearch report reads "
            f"it). Free some space, then continue it: hpsearch resume {spec.experiment_dir}"
        ) from err


def _interrupted(spec: Spec, results: ResultGrid, outcomes: Mapping[str, str]) -> bool:
    """Whether the search stopped before every trial ended, as after Ctrl-C.

    That is so when a trial has no recorded end, or when some trials were never made.
    """
    trial_ids = [_result_trial_id(results[i]) for i in range(len(results))]
    return any(t not in outcomes for t in trial_ids) or len(trial_ids) < total_trials(spec)


def _result_trial_id(result: Any) -> str:
    """A Tune ``Result``'s trial id, as the summary names its trials."""
    return str((result.metrics or {}).get("trial_id") or Path(str(result.path)).name)


def _summarize(spec: Spec, wall_time_s: float, interrupted: bool, reached: Reached | None = None) -> SearchSummary:
    """Summarise the search from its folder and write ``hpsearch_summary.json``.

    The folder is read as :func:`hpsearch.load_results` reads it. So the closing table, the
    summary file and the results agree.
    ``reached`` is the budget that ended the search, if one did.
    """
    return summarize_experiment(
        spec.experiment_dir,
        wall_time_s=wall_time_s,
        interrupted=interrupted,
        ended_by=reached.budget if reached else None,
        ended_reason=reached.message if reached else "",
        resume_hint=reached.resume_hint(spec.experiment_dir) if reached else "",
    )


def resume(
    experiment_dir: str | Path,
    *,
    address: str | None = None,
    retry_errored: bool = False,
    verbose: bool = False,
    stream: TextIO | None = None,
    overrides: Sequence[str] = (),
) -> SearchResult:
    """Continue an interrupted search from its experiment folder alone; return its :class:`~hpsearch.SearchResult`.

    Finished trials are kept and not run again. Unfinished trials continue from their last
    checkpoint, and their nested runs are found by name. Trials a budget stopped continue the
    same way. Errored trials run again from their last checkpoint, but only with
    ``retry_errored``. The searcher's state is restored. The callbacks are Tune's, restored with
    its experiment state as the search was started.

    Args:
        stream: Where every line hpsearch prints goes while the search runs (stderr by default).
        overrides: ``"budget.<key>=<value>"`` strings, as ``--set`` takes them, e.g.
            ``"budget.max_wall_time=4h"``, which raise the budget, and ``"num_samples=N"``, which grows
            the search: the same searcher (its Optuna study, its random stream) makes the trials up to the
            new total (a grid grows by whole repeats). They are written into the spec as run. No other key
            can change on resume.

    Returns:
        As :func:`run` does: the ``ResultGrid`` of this resume, the summary of the whole search, and the folder.

    Raises:
        SpecError: An override of another key, a budget already spent, or a ``num_samples`` below the
            search's own (or of a pbt/pb2 population). Raised before Ray starts.
        ExperimentLockedError: another search holds the folder. Raised before Ray starts.
        ExperimentNotFoundError: the folder holds no Tune state to resume from.

    Example:
        >>> result = resume("hpsearch-results/digits-quick", overrides=["budget.max_wall_time=4h"])
    """
    with messages.to(stream):  # every line hpsearch prints, while this search runs
        return _resume(
            experiment_dir, address=address, retry_errored=retry_errored, verbose=verbose, overrides=overrides
        )


def _resume(
    experiment_dir: str | Path, *, address: str | None, retry_errored: bool, verbose: bool, overrides: Sequence[str]
) -> SearchResult:
    check_resume_overrides(overrides)
    spec = experiment_spec(experiment_dir, overrides=overrides)
    with one_search(spec.experiment_dir, "hpsearch resume"):
        return _resume_locked(spec, address=address, retry_errored=retry_errored, verbose=verbose, overrides=overrides)


def _resume_locked(
    spec: Spec, *, address: str | None, retry_errored: bool, verbose: bool, overrides: Sequence[str]
) -> SearchResult:
    exp_dir = spec.experiment_dir
    more, old_repeats = _growth(spec, overrides)  # refused here, before Ray starts, when it cannot grow
    started = _start_up(spec, resuming=True, address=address, verbose=verbose)
    plan, autoscaling = started.plan, started.autoscaling
    if more:  # Tune's saved search makes the new total: the same searcher (its study, its stream) goes on
        made = grow.grow_search(
            exp_dir,
            trials=total_trials(spec),
            repeats=spec.num_samples,
            old_repeats=old_repeats,
        )
        messages.say(f"growing {spec.name}: {made} trials, then {more} more ({total_trials(spec)} in all)")
    if overrides:
        files.write_spec(exp_dir, spec.to_dict())  # the spec as run now holds the raised budget or num_samples
    progress.resumed_total(total_trials(spec))  # the status line's total, after a growth
    apply_tuner_defaults()  # as when the search started, so Tune's own console output stays off
    tuner = tune.Tuner.restore(
        str(exp_dir),
        trainable=_trainable(  # the datasets are built again, because their blocks went with the old Ray
            spec,
            record_controller=ray_workarounds.workarounds_enabled(),
            datasets=datasets_for_spec(spec),
            concurrency=plan.max_concurrent_trials,
            autoscaling=autoscaling,
        ),
        param_space=to_tune(spec.trial_space(), searcher=spec.searcher.type),
        resume_unfinished=True,
        resume_errored=retry_errored,
        restart_errored=False,
    )
    # Trials a budget stopped run again from their latest checkpoint, so they do not count as ended.
    done = [t for t, r in files.read_outcome_records(exp_dir).items() if not r.get("ended_by")]
    logs_line = banner.record_ray_logs(exp_dir, address, verbose=verbose)
    messages.say(
        f"resuming {spec.name} in {exp_dir}: {len(done)} trial(s) already ended, "
        f"{plan.max_concurrent_trials} at once" + ("; retrying errored trials" if retry_errored else "")
    )
    messages.say(logs_line)
    return _fit_and_summarize(spec, tuner, None)


def _growth(spec: Spec, overrides: Sequence[str]) -> tuple[int, int]:
    """The trials ``resume --set num_samples=N`` adds (0 without it) and the ``num_samples`` the search was
    started with; refused before Ray starts when the search cannot grow (see
    :func:`hpsearch.runtime.search.preflight.check_growth`)."""
    if not any(o.partition("=")[0].strip() == GROW_KEY for o in overrides):
        return 0, spec.num_samples
    before = experiment_spec(spec.experiment_dir)
    started = len(files.read_usage(spec.experiment_dir).trials)
    more = check_growth(before, spec, started=started)
    if more and not internals.available("tune-search-state"):
        raise SpecError(
            [
                Problem(
                    f"--set {GROW_KEY}={spec.num_samples}",
                    "cannot grow this search with the installed Ray: "
                    + internals.broken().get("tune-search-state", "its saved search state differs"),
                )
            ]
        )
    return more, before.num_samples


def resume_with_summary(experiment_dir: str | Path, **kwargs: Any) -> tuple[ResultGrid, SearchSummary]:
    """Deprecated. :func:`resume` takes the same arguments and returns both: ``.result_grid`` and ``.summary``."""
    _deprecated("resume_with_summary", "resume")
    result = resume(experiment_dir, **kwargs)
    return result.result_grid, result.summary
