"""Spec + plan -> a plain ``ray.tune.Tuner``; run it; write the experiment folder.

One search is one folder, ``<storage_path>/<name>/``: Tune's experiment files, every
trial's nested Train run under ``train/<trial_id>/``, and hpsearch's own files
(the spec as run, the resource plan, the summary) named by the constants below.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence, TextIO

import yaml

from hpsearch.errors import ExperimentExistsError, PlanError
from hpsearch.planning.planner import GB, Node, Plan, TrialDemand, plan_trials
from hpsearch.spec.plugins import SCHEDULERS, SEARCHERS, SchedulerContext, SearcherContext
from hpsearch.spec.space import ConstParam, GridParam, iter_params, to_tune
from hpsearch.spec import Spec, load_spec
from hpsearch.experiment.summary import SearchSummary, read_outcome_records, summarize
from hpsearch.runtime.trainable import TRAIN_RUNS_DIR, make_trainable

__all__ = [
    "build_tuner",
    "run",
    "run_with_summary",
    "resume",
    "resume_with_summary",
    "plan_for",
    "SPEC_FILE",
    "PLAN_FILE",
    "SUMMARY_FILE",
    "OUTCOMES_FILE",
]

#: The spec as run (every default filled in), inside the experiment folder.
SPEC_FILE = "hpsearch_spec.yaml"
#: The resource plan the search ran with.
PLAN_FILE = "hpsearch_plan.json"
#: Per-trial outcomes, the best trial and the wall time, written when the search ends.
SUMMARY_FILE = "hpsearch_summary.json"
#: One JSON line per trial end (trial_id, status: finished | stopped | errored, iterations,
#: ended_at, error), appended as trials end: survives an interrupted search.
OUTCOMES_FILE = "hpsearch_trials.jsonl"


def plan_for(spec: Spec, nodes: Sequence[Node]) -> Plan:
    """Plan the spec's trials on a cluster given as plain data."""
    return plan_trials(nodes, demand_for(spec), requested=spec.resources.max_concurrent_trials)


def demand_for(spec: Spec) -> TrialDemand:
    """One trial of the spec, as the planner counts it."""
    return TrialDemand(
        driver={"CPU": spec.resources.driver_cpus},
        worker=spec.scaling.worker_bundle(),
        num_workers=spec.scaling.num_workers,
        strategy=spec.scaling.placement_strategy,
        driver_node=spec.resources.driver_node,
        driver_memory=spec.resources.driver_memory_gb * GB,
        worker_memory=spec.resources.worker_memory_gb * GB,
    )


def total_trials(spec: Spec) -> int:
    """Trials the search will run: ``num_samples`` per grid point."""
    points = 1
    for _, param in iter_params(spec.search_space):
        if isinstance(param, GridParam):
            points *= len(param.values)
    return spec.num_samples * points


def varying_params(spec: Spec) -> list[str]:
    """Dotted names of the parameters that are searched (not constants)."""
    return [name for name, p in iter_params(spec.search_space) if not isinstance(p, ConstParam)]


@dataclass
class _Built:
    tuner: Any
    plan: Plan
    progress: Any


def _build(spec: Spec, nodes: Sequence[Node] | None, stream: TextIO | None, plan: Plan | None = None) -> _Built:
    from ray import tune

    from hpsearch.runtime.cluster import cluster_nodes, connect
    from hpsearch.runtime.progress import ProgressPrinter

    if plan is None:
        if nodes is None:
            connect()
            nodes = cluster_nodes()
        plan = plan_for(spec, nodes)
    trainable = _trainable(spec)
    searcher = SEARCHERS.build(spec.searcher, SearcherContext(spec.metric, spec.mode, plan.max_concurrent_trials))
    scheduler = SCHEDULERS.build(spec.scheduler, SchedulerContext(spec.metric, spec.mode))
    max_t = getattr(spec.scheduler.options, "max_t", None)
    time_attr = getattr(spec.scheduler.options, "time_attr", "epoch")
    progress = ProgressPrinter(
        spec.metric,
        spec.mode,
        total=total_trials(spec),
        varying=varying_params(spec),
        stream=stream,
        budget=(time_attr, max_t) if max_t is not None else None,
        concurrency=plan.max_concurrent_trials,
        waiting_reason=functools.partial(_waiting_reason, spec, plan.max_concurrent_trials),
        outcomes_path=str(spec.experiment_dir / OUTCOMES_FILE),
    )
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # Tune's legacy reporter is silent at verbose=0
    tuner = tune.Tuner(
        trainable,
        param_space=to_tune(spec.search_space, searcher=spec.searcher.type),
        tune_config=tune.TuneConfig(
            metric=spec.metric,
            mode=spec.mode,
            num_samples=spec.num_samples,
            search_alg=searcher,  # carries the plan's concurrency limit
            scheduler=scheduler,
            reuse_actors=False,  # reuse is unsafe with early stopping: a stopped nested run keeps training
        ),
        run_config=tune.RunConfig(
            name=spec.name,
            storage_path=str(spec.storage_path),
            verbose=0,
            callbacks=[progress, _reaper(spec, stream)],
            failure_config=tune.FailureConfig(max_failures=spec.failure.trial_retries),
        ),
    )
    return _Built(tuner, plan, progress)


def _reaper(spec: Spec, stream: TextIO | None) -> Any:
    """The callback that frees what a stopped trial's nested run leaves behind (see hpsearch.runtime.ray_workarounds)."""
    from hpsearch.runtime.ray_workarounds import OrphanReaper

    bundles = [spec.scaling.worker_bundle()] * spec.scaling.num_workers
    if spec.resources.driver_node == "any" and bundles == [{"CPU": spec.resources.driver_cpus}]:
        bundles = None  # a worker group would look like a trial driver's group: never sweep those
    return OrphanReaper(spec.experiment_dir / TRAIN_RUNS_DIR, worker_bundles=bundles, stream=stream)


def _trainable(spec: Spec) -> Any:
    return make_trainable(
        spec.load_trainable(),
        scaling=spec.scaling,
        driver_cpus=spec.resources.driver_cpus,
        driver_node=spec.resources.driver_node,
        failure=spec.failure,
        checkpoint=spec.checkpoint,
        aggregate=spec.aggregate,
        storage_path=spec.experiment_dir / TRAIN_RUNS_DIR,
        metric=spec.metric,
        mode=spec.mode,
    )


def _waiting_reason(spec: Spec, planned: int) -> str | None:
    """Why trials wait: re-plan on the cluster as it is now (a node may have left)."""
    from hpsearch.runtime.cluster import cluster_nodes

    try:
        now = plan_for(spec, cluster_nodes())
    except PlanError as err:
        return f"no trial fits on the cluster as it is now: {err}"
    if now.capacity < planned:
        return f"the cluster now fits {now.capacity} trial(s) at once, not the {planned} planned (did a node leave?)"
    return None


def build_tuner(spec: Spec, *, nodes: Sequence[Node] | None = None) -> Any:
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
) -> Any:
    """Run a search end to end and return its ``ResultGrid``.

    Validates the spec, refuses an existing experiment folder unless ``overwrite``,
    connects to Ray (embedded local Ray unless ``address``), plans the trials, writes
    the spec as run and the plan into the experiment folder, runs the search with
    progress lines on ``stream`` (stderr by default) and writes the summary.

    Args:
        spec: A :class:`Spec`, a spec file, or a spec dict.
        address: An existing Ray cluster to use instead of an embedded local one.
        overwrite: Delete an existing experiment folder of the same name first.
        verbose: Forward the Train workers' output to this terminal.
        stream: Where progress lines go.

    Raises:
        SpecError, PlanError, ExperimentExistsError: before anything is written.

    Example:
        >>> results = run("search_spaces/digits_quick.yaml")
        >>> results.get_best_result().metrics["val_acc"]
        0.97...
    """
    return run_with_summary(spec, address=address, overwrite=overwrite, verbose=verbose, stream=stream)[0]


def run_with_summary(
    spec: Spec | str | Path | Mapping[str, Any],
    *,
    address: str | None = None,
    overwrite: bool = False,
    verbose: bool = False,
    stream: TextIO | None = None,
) -> tuple[Any, SearchSummary]:
    """:func:`run`, also returning the :class:`SearchSummary` written to the experiment folder."""
    from hpsearch.runtime.cluster import check_shared_storage, cluster_nodes, connect

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
    connect(address, verbose=verbose)
    nodes = cluster_nodes()
    plan = plan_for(spec, nodes)  # may refuse: before anything is written
    check_shared_storage(spec.storage_path, nodes)
    if exp_dir.exists():
        shutil.rmtree(exp_dir)  # --overwrite, of an hpsearch experiment folder (checked above)
    exp_dir.mkdir(parents=True)
    (exp_dir / SPEC_FILE).write_text(yaml.safe_dump(spec.to_dict(), sort_keys=False), encoding="utf-8")
    (exp_dir / PLAN_FILE).write_text(json.dumps(plan.as_dict(), indent=2), encoding="utf-8")
    built = _build(spec, nodes, stream, plan)  # Tune writes its own state into the folder from here on
    out = stream or sys.stderr
    print(_banner(spec, plan), file=out, flush=True)
    return _fit_and_summarize(spec, built.tuner, built.progress)


#: Tune saves its experiment state at most every 10 s by default: a trial that ended in
#: those seconds would run again after a kill. hpsearch saves it every second.
TUNE_ENV_DEFAULTS = {"TUNE_GLOBAL_CHECKPOINT_S": "1"}


def _fit_and_summarize(spec: Spec, tuner: Any, progress: Any) -> tuple[Any, SearchSummary]:
    for key, value in TUNE_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    start = time.monotonic()
    results = tuner.fit()
    outcomes = {**read_outcomes(spec.experiment_dir), **(progress.outcomes if progress is not None else {})}
    summary = summarize(
        results,
        name=spec.name,
        metric=spec.metric,
        mode=spec.mode,
        wall_time_s=time.monotonic() - start,
        outcomes=outcomes,
    )
    summary.interrupted = any(t.trial_id not in outcomes for t in summary.trials) or len(summary.trials) < total_trials(spec)
    (spec.experiment_dir / SUMMARY_FILE).write_text(
        json.dumps(summary.as_dict(), indent=2, default=str), encoding="utf-8"
    )
    return results, summary


def is_experiment(folder: Path) -> bool:
    """Whether ``folder`` is an hpsearch experiment folder (it holds the spec as run)."""
    return (Path(folder) / SPEC_FILE).is_file()


def experiment_spec(experiment_dir: str | Path) -> Spec:
    """The spec an experiment folder was run with, placed where the folder is now (it may have moved)."""
    exp_dir = Path(experiment_dir).expanduser().resolve()
    if not is_experiment(exp_dir):
        raise ExperimentExistsError(f"{exp_dir} is not an hpsearch experiment folder (no {SPEC_FILE} in it)")
    return load_spec(exp_dir / SPEC_FILE, overrides=[f"name={exp_dir.name}", f"storage_path={exp_dir.parent}"])


def read_outcomes(experiment_dir: Path) -> dict[str, str]:
    """Trial id -> how it ended, from the experiment's outcomes file (the last line per trial wins)."""
    records = read_outcome_records(Path(experiment_dir) / OUTCOMES_FILE)
    return {trial_id: record.get("status", "") for trial_id, record in records.items()}


def resume(
    experiment_dir: str | Path,
    *,
    address: str | None = None,
    retry_errored: bool = False,
    verbose: bool = False,
    stream: TextIO | None = None,
) -> Any:
    """Continue an interrupted search from its experiment folder alone; return the ``ResultGrid``.

    Finished trials are kept and not run again; unfinished ones continue from their last
    checkpoint (their nested runs are found by name); errored ones are run again, from
    their last checkpoint, only with ``retry_errored``. The searcher's state is restored.

    Example:
        >>> results = resume("hpsearch-results/digits-quick")
    """
    return resume_with_summary(
        experiment_dir, address=address, retry_errored=retry_errored, verbose=verbose, stream=stream
    )[0]


def resume_with_summary(
    experiment_dir: str | Path,
    *,
    address: str | None = None,
    retry_errored: bool = False,
    verbose: bool = False,
    stream: TextIO | None = None,
) -> tuple[Any, SearchSummary]:
    """:func:`resume`, also returning the :class:`SearchSummary`."""
    from ray import tune

    from hpsearch.runtime.cluster import check_shared_storage, cluster_nodes, connect

    spec = experiment_spec(experiment_dir)
    exp_dir = spec.experiment_dir
    connect(address, verbose=verbose)
    nodes = cluster_nodes()
    if not tune.Tuner.can_restore(str(exp_dir)):
        raise ExperimentExistsError(
            f"{exp_dir} holds no Tune experiment state to resume from (the search was stopped before it started); "
            f"start it again with `hpsearch run --overwrite`"
        )
    plan = plan_for(spec, nodes)
    check_shared_storage(spec.storage_path, nodes)
    tuner = tune.Tuner.restore(
        str(exp_dir),
        trainable=_trainable(spec),
        param_space=to_tune(spec.search_space, searcher=spec.searcher.type),
        resume_unfinished=True,
        resume_errored=retry_errored,
        restart_errored=False,
    )
    out = stream or sys.stderr
    done = read_outcomes(exp_dir)
    print(
        f"hpsearch: resuming {spec.name} in {exp_dir}: {len(done)} trial(s) already ended, "
        f"{plan.max_concurrent_trials} at once" + ("; retrying errored trials" if retry_errored else ""),
        file=out,
        flush=True,
    )
    return _fit_and_summarize(spec, tuner, None)


def _banner(spec: Spec, plan: Plan) -> str:
    notes = "".join(f"\nhpsearch: note: {w}" for w in plan.warnings)
    return _banner_head(spec, plan) + notes


def _banner_head(spec: Spec, plan: Plan) -> str:
    worker = ", ".join(f"{k}: {v:g}" for k, v in spec.scaling.worker_bundle().items())
    n = total_trials(spec)
    return (
        f"hpsearch: {spec.name}: {n} trial{'s' if n != 1 else ''} ({spec.searcher.type} searcher, "
        f"{spec.scheduler.type} scheduler), {plan.max_concurrent_trials} at once; each trial = "
        f"{spec.scaling.num_workers} worker(s) of {{{worker}}} + a driver of {{CPU: {spec.resources.driver_cpus:g}}}\n"
        f"hpsearch: experiment folder {spec.experiment_dir}"
    )
