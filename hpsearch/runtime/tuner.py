"""Spec + plan -> a plain ``ray.tune.Tuner``; run it; write the experiment folder.

One search is one folder, ``<storage_path>/<name>/``: Tune's experiment files, every
trial's nested Train run under ``train/<trial_id>/``, and hpsearch's own files (the
spec as run, the resource plan, the trials' outcomes, the summary). Their names are in
:mod:`hpsearch.experiment.layout`; they are written and read with
:mod:`hpsearch.experiment.files`.
"""

from __future__ import annotations

import functools
import shutil
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from hpsearch.errors import ExperimentExistsError, PlanError
from hpsearch.experiment import files
from hpsearch.experiment.files import experiment_spec, is_experiment, read_outcomes
from hpsearch.experiment.layout import EPOCH, SPEC_FILE, TRAIN_RUNS_DIR
from hpsearch.formatting import plural
from hpsearch.planning.autoscale import addable_nodes, plan_run
from hpsearch.planning.for_spec import plan_for
from hpsearch.planning.planner import Node, Plan
from hpsearch.runtime.autoscaling import (
    Autoscaling,
    autoscaling_for,
    failure_for,
    from_plan,
    placement_status,
    worker_shapes,
)
from hpsearch.runtime.datasets import datasets_for_spec
from hpsearch.runtime.env import apply_fit_defaults, apply_tuner_defaults
from hpsearch.runtime.trainable import make_trainable
from hpsearch.runtime.warm_start import with_space
from hpsearch.spec import Spec, check_storage, load_spec, total_trials, varying_params
from hpsearch.spec.plugins import SCHEDULERS, SEARCHERS, SchedulerContext, SearcherContext
from hpsearch.spec.space import to_tune

if TYPE_CHECKING:  # pragma: no cover
    from ray.tune import Callback, ResultGrid, Tuner

    from hpsearch.analysis import SearchSummary
    from hpsearch.runtime.outcomes import OutcomeRecorder
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
    stream: TextIO | None,
    plan: Plan | None = None,
    datasets: Mapping[str, Any] | None = None,
    autoscaling: Autoscaling | None = None,
) -> _Built:
    from ray import tune

    from hpsearch.runtime.cluster import cluster_nodes, connect
    from hpsearch.runtime.ray_workarounds import workarounds_enabled

    if plan is None:
        if nodes is None:
            connect()
            nodes = cluster_nodes()
        plan = plan_for(spec, nodes)
    workarounds = workarounds_enabled()  # read once, for the callbacks and the trainable alike
    if datasets is None:  # build_tuner: the spec's datasets, built now that Ray is connected
        datasets = datasets_for_spec(spec)
    trainable = _trainable(
        spec,
        record_controller=workarounds,
        datasets=datasets,
        concurrency=plan.max_concurrent_trials,
        autoscaling=autoscaling,
    )
    # Population-based training: the whole population is created at once (the searcher's limit is
    # the population), and the drivers take turns within the plan's concurrency (runtime/pbt.py).
    searcher_limit = total_trials(spec) if spec.population_based else plan.max_concurrent_trials
    if spec.population_based:  # reuse_actors stays off: a paused trial's actor handed a restored trial is unmeasured
        warnings.filterwarnings("ignore", message="Consider boosting PBT performance", category=UserWarning)
    searcher = SEARCHERS.build(spec.searcher, with_space(spec, _searcher_context(spec, searcher_limit), stream))
    scheduler = SCHEDULERS.build(
        spec.scheduler,
        SchedulerContext(
            *spec.scheduler_metric, own=spec.multi_objective, experiment_dir=spec.experiment_dir, stream=stream
        ),
    )
    callbacks = callbacks_for(
        spec, concurrency=plan.max_concurrent_trials, stream=stream, workarounds=workarounds, autoscaling=autoscaling
    )
    apply_tuner_defaults()
    tuner = tune.Tuner(
        trainable,
        param_space=to_tune(spec.trial_space(), searcher=spec.searcher.type),
        tune_config=tune.TuneConfig(
            # several objectives: Tune has no one metric (it would overwrite the searcher's lists); the
            # searcher and the scheduler were each built with theirs
            metric=None if spec.multi_objective else spec.metric,
            mode=None if spec.multi_objective else spec.mode,
            num_samples=spec.num_samples,
            search_alg=searcher,  # carries the plan's concurrency limit
            scheduler=scheduler,
            # a reused actor ends the previous trial's nested run first (runtime/reuse.py); it finds the run's
            # controller by the record the work-arounds switch also governs
            reuse_actors=spec.resources.reuse_actors and workarounds and not spec.population_based,
        ),
        run_config=tune.RunConfig(
            name=spec.name,
            storage_path=str(spec.storage_path),
            verbose=0,
            callbacks=callbacks,
            failure_config=tune.FailureConfig(max_failures=spec.failure.trial_retries),
            stop=_budget_stopper(spec, stream),
        ),
    )
    recorder = cast("OutcomeRecorder", callbacks[0])  # callbacks_for puts it first, before the printer
    return _Built(tuner, plan, recorder)


def _searcher_context(spec: Spec, concurrency: int) -> SearcherContext:
    """The searcher's metric and mode: lists, one item per objective, for a multi-objective search."""
    if spec.multi_objective:
        metrics, modes = [m for m, _ in spec.objectives], [d for _, d in spec.objectives]
        return SearcherContext(metrics, modes, concurrency)
    return SearcherContext(spec.metric, spec.mode, concurrency)


def callbacks_for(
    spec: Spec,
    *,
    concurrency: int,
    stream: TextIO | None = None,
    workarounds: bool = True,
    autoscaling: Autoscaling | None = None,
) -> list[Callback]:
    """The Tune callbacks of a search, in the order Tune must call them.

    The :class:`~hpsearch.runtime.outcomes.OutcomeRecorder` first (it decides how each
    trial ended), then the :class:`~hpsearch.runtime.progress.ProgressPrinter` (it prints
    what the recorder decided), then, with ``workarounds``, the
    :class:`~hpsearch.runtime.ray_workarounds.OrphanReaper`, then the trackers of
    ``spec.tracking`` (:mod:`hpsearch.runtime.tracking`, each checked first). Builds them
    without starting Ray. With ``autoscaling``, the printer says why trials wait for their
    workers (:mod:`hpsearch.runtime.autoscaling`).
    """
    from hpsearch.runtime.outcomes import OutcomeRecorder
    from hpsearch.runtime.progress import ProgressPrinter

    recorder = OutcomeRecorder(spec.experiment_dir, budget=_budget(spec), stream=stream)
    printer = ProgressPrinter(
        spec.metric,
        spec.mode,
        recorder,
        total=total_trials(spec),
        varying=varying_params(spec),
        stream=stream,
        concurrency=concurrency,
        waiting_reason=functools.partial(_waiting_reason, spec, concurrency, autoscaling),
        placement_status=functools.partial(placement_status, spec, autoscaling.groups) if autoscaling else None,
    )
    callbacks: list[Callback] = [recorder, printer]
    if workarounds:
        callbacks.append(_reaper(spec, stream))
    if spec.tracking.enabled():  # after the recorder: each tracker tags a run with the status it decided
        from hpsearch.runtime.tracking import check_tracking, tracking_callbacks

        check_tracking(spec)  # a tracker that cannot be set up: refused here (SpecError), not mid-search
        callbacks += tracking_callbacks(spec, recorder, stream=stream)
    return callbacks


def _budget(spec: Spec) -> tuple[str, float] | None:
    """The scheduler's budget, ``(time_attr, max_t)``, or ``None`` when it has none."""
    max_t = getattr(spec.scheduler.options, "max_t", None)
    time_attr = getattr(spec.scheduler.options, "time_attr", EPOCH)
    return (time_attr, max_t) if max_t is not None else None


def _reaper(spec: Spec, stream: TextIO | None) -> Callback:
    """The callback that frees what a stopped trial's nested run leaves behind (see hpsearch.runtime.ray_workarounds)."""
    from hpsearch.runtime.ray_workarounds import OrphanReaper

    shapes = worker_shapes(spec)
    if spec.resources.driver_node == "any":
        # a worker group shaped like a trial driver's group: never sweep those
        shapes = [shape for shape in shapes if shape != [{"CPU": spec.resources.driver_cpus}]]
    return OrphanReaper(spec.experiment_dir / TRAIN_RUNS_DIR, worker_shapes=shapes, stream=stream)


def _trainable(
    spec: Spec,
    *,
    record_controller: bool,
    datasets: Mapping[str, Any] | None = None,
    concurrency: int = 1,
    autoscaling: Autoscaling | None = None,
) -> Any:
    """The spec's trial driver; ``datasets`` from :func:`~hpsearch.runtime.datasets.datasets_for_spec`
    (materialized with ``once``), ``concurrency`` the plan's trials at once (their share of ``data.cpus``);
    with ``autoscaling``, a worker group may wait ``failure.node_start_timeout_s`` for a node."""
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


def _required_metrics(spec: Spec) -> tuple[str, ...]:
    """What every report must hold besides the primary metric: the other objectives, the scheduler's metric."""
    names = [m for m, _ in spec.objectives[1:]]
    if spec.scheduler.type != "fifo":
        names.append(spec.scheduler_metric[0])
    return tuple(dict.fromkeys(n for n in names if n != spec.metric))


def _waiting_reason(spec: Spec, planned: int, autoscaling: Autoscaling | None = None) -> str | None:
    """Why trials wait: re-plan on the cluster as it is now (a node may have left); on an autoscaling
    cluster, with every node the autoscaler can still add."""
    from hpsearch.runtime.cluster import cluster_nodes

    nodes = cluster_nodes()
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

    Example:
        >>> tuner = build_tuner(load_spec("search_spaces/digits_quick.yaml"))
        >>> results = tuner.fit()
    """
    return _build(spec, nodes, None).tuner


def run(
    spec: Spec | str | Path | Mapping[str, Any],
    *,
    address: str | None = None,
    overwrite: bool = False,
    verbose: bool = False,
    stream: TextIO | None = None,
    cluster: str | None = None,
) -> ResultGrid:
    """Run a search end to end and return its ``ResultGrid``.

    Validates the spec, refuses an existing experiment folder unless ``overwrite``,
    connects to Ray (embedded local Ray unless ``address``), plans the trials, writes
    the spec as run and the plan into the experiment folder, runs the search with
    progress lines on ``stream`` (stderr by default) and writes the summary.

    Args:
        spec: A :class:`Spec`, a spec file, or a spec dict.
        address: An existing Ray cluster to use instead of an embedded local one.
        overwrite: Delete an existing experiment folder of the same name first.
        verbose: Also print Ray's own log lines (the workers' output, Ray's warnings, Tune's
            tracebacks); without it they are kept in Ray's session folder only, and the
            experiment folder's hpsearch_ray_logs.jsonl says where.
        stream: Where progress lines go.
        cluster: With ``address``, the node groups the cluster's autoscaler may grow it to, as
            ``hpsearch plan --cluster`` takes them (``'1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}'``): the
            search is planned for them, its trials wait for the nodes they need
            (:mod:`hpsearch.runtime.autoscaling`).

    Raises:
        SpecError, PlanError, ExperimentExistsError, ClusterError: before anything is written.

    Example:
        >>> results = run("search_spaces/digits_quick.yaml")
        >>> results.get_best_result().metrics["val_acc"]
        0.97...
    """
    return run_with_summary(
        spec, address=address, overwrite=overwrite, verbose=verbose, stream=stream, cluster=cluster
    )[0]


def run_with_summary(
    spec: Spec | str | Path | Mapping[str, Any],
    *,
    address: str | None = None,
    overwrite: bool = False,
    verbose: bool = False,
    stream: TextIO | None = None,
    cluster: str | None = None,
) -> tuple[ResultGrid, SearchSummary]:
    """:func:`run`, also returning the :class:`SearchSummary` written to the experiment folder."""
    from hpsearch.runtime import session
    from hpsearch.runtime.cluster import check_shared_storage, cluster_nodes, connect, job_cluster_address

    if not isinstance(spec, Spec):
        spec = load_spec(spec)
    exp_dir = spec.experiment_dir
    if exp_dir.exists() and not overwrite:
        raise ExperimentExistsError(
            f"experiment folder {exp_dir} already exists; continue it with `hpsearch resume {exp_dir}`, "
            "pass --overwrite (overwrite=True) to delete it and start again, or choose another name (--set name=...)"
        )
    if exp_dir.exists() and not is_experiment(exp_dir):
        raise ExperimentExistsError(
            f"{exp_dir} exists and is not an hpsearch experiment folder (no {SPEC_FILE}); "
            "--overwrite only ever deletes experiment folders: choose another name or storage_path"
        )
    check_storage(spec)  # a folder the search cannot write: refused before Ray starts, nothing left behind
    _check_tracking(spec)  # a tracker that cannot be set up: refused before anything is written
    autoscaling = autoscaling_for(cluster, address or job_cluster_address())  # a bad --cluster: before Ray starts
    if exp_dir.exists():  # --overwrite: first end what a killed run of this folder left running
        session.end_leftovers(exp_dir, stream=stream)
    connect(address, verbose=verbose)
    nodes = cluster_nodes()
    plan, scaling = _plan(spec, nodes, autoscaling)  # may refuse: before anything is written
    check_shared_storage(spec.storage_path, nodes)
    datasets = datasets_for_spec(spec)  # materialize: once builds them now: a bad factory is refused before writing
    if exp_dir.exists():
        shutil.rmtree(exp_dir)  # --overwrite, of an hpsearch experiment folder (checked above)
    exp_dir.mkdir(parents=True)
    files.write_spec(exp_dir, spec.to_dict())
    files.write_plan(exp_dir, {**plan.as_dict(), **scaling})
    session.record(exp_dir)  # the embedded Ray's processes, for the next run or resume if this one is killed
    logs_line = _record_ray_logs(exp_dir, address, verbose=verbose)
    # Tune writes its own state into the folder from here on
    built = _build(spec, nodes, stream, plan, datasets, autoscaling=autoscaling)
    out = stream or sys.stderr
    print(_banner(spec, plan, logs_line, scaling), file=out, flush=True)
    return _fit_and_summarize(spec, built.tuner, built.recorder)


def _plan(spec: Spec, nodes: Sequence[Node], autoscaling: Autoscaling | None) -> tuple[Plan, dict[str, Any]]:
    """The plan Tune gets, and the plan file's ``autoscaling`` entry (``{}`` on a fixed cluster).

    On an autoscaling cluster: planned for the nodes up now plus every node the autoscaler may
    still add; the entry holds what fits on the nodes up now (:func:`hpsearch.planning.autoscale.plan_run`).
    """
    if autoscaling is None:
        return plan_for(spec, nodes), {}
    run_plan = plan_run(spec, autoscaling.groups, nodes)
    return run_plan.limit, {"autoscaling": run_plan.as_dict(autoscaling.cluster)}


def _check_tracking(spec: Spec) -> None:
    """Refuse (SpecError) a tracker of the spec that cannot be set up; remembered, so callbacks_for's check is free."""
    if spec.tracking.enabled():
        from hpsearch.runtime.tracking import check_tracking

        check_tracking(spec)


def _budget_stopper(spec: Spec, stream: TextIO | None) -> Any:
    """The Tune stopper that ends the search when its budget is spent (see hpsearch.runtime.budget)."""
    from hpsearch.runtime.budget import BudgetStopper

    return BudgetStopper(spec.experiment_dir, spec.budget, stream=stream)


def _fit_and_summarize(spec: Spec, tuner: Tuner, recorder: OutcomeRecorder | None) -> tuple[ResultGrid, SearchSummary]:
    from hpsearch.runtime import budget

    apply_fit_defaults()
    start = time.monotonic()
    tracker = budget.begin(spec)  # this run of the search, recorded; the budget the stopper applies
    try:
        results = tuner.fit()
    finally:
        reached = budget.finish(tracker)  # trials a budget stopped are recorded as stopped by it
    outcomes = {**read_outcomes(spec.experiment_dir), **(recorder.outcomes if recorder is not None else {})}
    wall_time_s = time.monotonic() - start
    interrupted = reached is None and _interrupted(spec, results, outcomes)
    return results, _summarize(spec, wall_time_s, interrupted, reached)


def _interrupted(spec: Spec, results: ResultGrid, outcomes: Mapping[str, str]) -> bool:
    """Whether the search stopped before every trial ended (Ctrl-C): a trial with no end, or trials never made."""
    trial_ids = [_result_trial_id(results[i]) for i in range(len(results))]
    return any(t not in outcomes for t in trial_ids) or len(trial_ids) < total_trials(spec)


def _result_trial_id(result: Any) -> str:
    """A Tune ``Result``'s trial id, as the summary names its trials."""
    return str((result.metrics or {}).get("trial_id") or Path(str(result.path)).name)


def _summarize(spec: Spec, wall_time_s: float, interrupted: bool, reached: Reached | None = None) -> SearchSummary:
    """Summarise the search from its folder, as :func:`hpsearch.load_results` reads it, and write
    ``hpsearch_summary.json``: the closing table, the summary file and the results agree.
    ``reached``: the budget that ended the search, if one did."""
    from hpsearch.analysis import summarize_experiment

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
) -> ResultGrid:
    """Continue an interrupted search from its experiment folder alone; return the ``ResultGrid``.

    Finished trials are kept and not run again; unfinished ones continue from their last
    checkpoint (their nested runs are found by name), and so do the trials a budget stopped;
    errored ones are run again, from their last checkpoint, only with ``retry_errored``. The
    searcher's state is restored.

    Args:
        overrides: ``"budget.<key>=<value>"`` strings (``--set``), e.g. ``"budget.max_wall_time=4h"``:
            a raised budget, written into the spec as run. Only ``budget`` keys can change on resume.

    Raises:
        SpecError: An override of another key, or the budget is already spent (before Ray starts).

    Example:
        >>> results = resume("hpsearch-results/digits-quick", overrides=["budget.max_wall_time=4h"])
    """
    return resume_with_summary(
        experiment_dir,
        address=address,
        retry_errored=retry_errored,
        verbose=verbose,
        stream=stream,
        overrides=overrides,
    )[0]


def _check_resume_overrides(overrides: Sequence[str]) -> None:
    """Only the budget may change on resume: any other change would mix trials of two different searches."""
    from hpsearch.errors import Problem, SpecError

    bad = [o for o in overrides if o.partition("=")[0].strip().split(".")[0] != "budget" or "=" not in o]
    if bad:
        raise SpecError(
            [
                Problem(
                    f"--set {o}",
                    "cannot be changed on resume: only budget keys can (e.g. --set budget.max_wall_time=4h); "
                    "changing anything else would mix trials of two searches: start a new one with hpsearch run",
                )
                for o in bad
            ]
        )


def resume_with_summary(
    experiment_dir: str | Path,
    *,
    address: str | None = None,
    retry_errored: bool = False,
    verbose: bool = False,
    stream: TextIO | None = None,
    overrides: Sequence[str] = (),
) -> tuple[ResultGrid, SearchSummary]:
    """:func:`resume`, also returning the :class:`SearchSummary`.

    The callbacks are Tune's, restored with its experiment state (as the search was started).
    """
    from ray import tune

    from hpsearch.runtime import session
    from hpsearch.runtime.budget import check_not_spent
    from hpsearch.runtime.cluster import check_shared_storage, cluster_nodes, connect
    from hpsearch.runtime.ray_workarounds import workarounds_enabled

    _check_resume_overrides(overrides)
    spec = experiment_spec(experiment_dir, overrides=overrides)
    exp_dir = spec.experiment_dir
    check_storage(spec)  # a read-only copy of a search, or one in a Ray job's working dir: refused before Ray
    check_not_spent(spec)  # a budget already spent: say so at once, with the --set that raises it
    _check_tracking(spec)
    session.end_leftovers(exp_dir, stream=stream)  # what the killed run left running, before Ray starts again
    connect(address, verbose=verbose)
    session.record(exp_dir)  # the embedded Ray's processes, for the next resume if this one is killed
    nodes = cluster_nodes()
    if not tune.Tuner.can_restore(str(exp_dir)):
        raise ExperimentExistsError(
            f"{exp_dir} holds no Tune experiment state to resume from (the search was stopped before it started); "
            f"start it again with `hpsearch run --overwrite`"
        )
    autoscaling = from_plan(files.read_plan(exp_dir))  # the node groups the search was run with, if any
    plan, _ = _plan(spec, nodes, autoscaling)
    check_shared_storage(spec.storage_path, nodes)
    if overrides:
        files.write_spec(exp_dir, spec.to_dict())  # the spec as run now holds the raised budget
    apply_tuner_defaults()  # as when the search started: Tune's own console output stays off
    tuner = tune.Tuner.restore(
        str(exp_dir),
        trainable=_trainable(  # the datasets are built again: their blocks went with the old Ray
            spec,
            record_controller=workarounds_enabled(),
            datasets=datasets_for_spec(spec),
            concurrency=plan.max_concurrent_trials,
            autoscaling=autoscaling,
        ),
        param_space=to_tune(spec.trial_space(), searcher=spec.searcher.type),
        resume_unfinished=True,
        resume_errored=retry_errored,
        restart_errored=False,
    )
    out = stream or sys.stderr
    # trials a budget stopped run again (from their latest checkpoint): they have not ended
    done = [t for t, r in files.read_outcome_records(exp_dir).items() if not r.get("ended_by")]
    logs_line = _record_ray_logs(exp_dir, address, verbose=verbose)
    print(
        f"hpsearch: resuming {spec.name} in {exp_dir}: {len(done)} trial(s) already ended, "
        f"{plan.max_concurrent_trials} at once" + ("; retrying errored trials" if retry_errored else ""),
        file=out,
        flush=True,
    )
    print(logs_line, file=out, flush=True)
    return _fit_and_summarize(spec, tuner, None)


def _record_ray_logs(exp_dir: Path, address: str | None, *, verbose: bool) -> str:
    """Note in the experiment folder where this Ray session keeps its logs; return the banner's line about it."""
    from hpsearch.runtime import ray_logs

    logs = ray_logs.describe(address)
    try:
        files.append_ray_logs(exp_dir, logs)
    except OSError:  # the search matters more than this note; the banner still says where the logs are
        pass
    shown = "" if verbose else " (--verbose shows them here)"
    if logs.logs_dir is None:  # a Ray Client driver: no session folder of its own
        return f"hpsearch: Ray's logs: on the cluster's nodes{shown}; this driver's: {logs.driver_log}"
    where = " on this node (each node keeps its own)" if address else ""
    return f"hpsearch: Ray's logs: {logs.logs_dir}{where}{shown}"


def _banner(spec: Spec, plan: Plan, logs_line: str = "", scaling: Mapping[str, Any] | None = None) -> str:
    notes = "".join(f"\nhpsearch: note: {w}" for w in plan.warnings)
    entry = (scaling or {}).get("autoscaling")
    grows = f"\nhpsearch: {_describe_autoscaling(spec, plan, entry)}" if entry else ""
    return _banner_head(spec, plan) + grows + (f"\n{logs_line}" if logs_line else "") + notes


def _describe_autoscaling(spec: Spec, plan: Plan, entry: Mapping[str, Any]) -> str:
    """The banner's line for an autoscaling cluster, from the plan file's ``autoscaling`` entry."""
    at_start = entry["at_start"]
    up = plural(entry["nodes_at_start"], "node")
    fits = (
        f"{at_start['max_concurrent_trials']} trial(s) at once fit on the {up} up now"
        if not at_start.get("waits_for_autoscaler")
        else f"no trial fits on the {up} up now ({at_start['reason']})"
    )
    return (
        f"autoscaling cluster {entry['cluster']}: {fits}, {plan.max_concurrent_trials} with every node the "
        f"autoscaler can add ({entry['max_nodes']} nodes); trials beyond what fits wait for a node up to "
        f"{spec.failure.start_timeout_s(autoscaling=True):g} s (failure.node_start_timeout_s)"
    )


def _banner_head(spec: Spec, plan: Plan) -> str:
    largest = spec.scaling.largest()
    worker = ", ".join(f"{k}: {v:g}" for k, v in largest.worker_bundle().items())
    up_to = "up to " if spec.scaling.searched() else ""  # searched scaling: planned for the largest trial
    return (
        f"hpsearch: {spec.name}: {plural(total_trials(spec), 'trial')} ({spec.searcher.type} searcher, "
        f"{spec.scheduler.type} scheduler), {plan.max_concurrent_trials} at once; each trial = {up_to}"
        f"{largest.num_workers} worker(s) of {{{worker}}} + a driver of {{CPU: {spec.resources.driver_cpus:g}}}\n"
        f"hpsearch: experiment folder {spec.experiment_dir}"
    )
