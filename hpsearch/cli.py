"""The ``hpsearch`` command: a thin command table over the public API.

Exit codes: 0 when at least one trial finished without error (or was stopped early, by
the scheduler or a budget, after reporting), 1 when none did (or an unexpected failure), 2 for a bad spec
or bad usage (also: ``resume --set`` of a key other than ``budget.*`` and ``num_samples``, or a resume whose
budget is already spent), 130 when a search was interrupted before every trial ended. A
search a budget ended is not interrupted: it exits 0 or 1 by the same rule. A user mistake prints one ``Error:`` block
and no traceback (``--debug`` shows it).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Protocol

from hpsearch import messages
from hpsearch.analysis import best_trials_table, feasible_line, load_results, pareto_front_table
from hpsearch.analysis._missing_metric import missing_metric_message
from hpsearch.errors import HpsearchError, PlanError, StorageFullError
from hpsearch.experiment.check import DEFAULT_CHECK_REPORT_TIMEOUT_S, check_folder
from hpsearch.experiment.files import experiment_spec, read_check, read_ray_logs
from hpsearch.experiment.layout import CHECK_FILE, ENDED, ERRORED, FINISHED, STOPPED, TUNE_ERROR_FILE, flatten_config
from hpsearch.formatting import cell, plural, resource_hours, text_table
from hpsearch.planning.autoscale import plan_autoscaling
from hpsearch.planning.cluster_shape import cluster_text, nodes_at, parse_node_groups
from hpsearch.planning.estimate import Estimate, Timing, epochs_for, estimate, timing_from, workload_for
from hpsearch.planning.estimate.workload import cadence_for
from hpsearch.planning.for_spec import plan_for
from hpsearch.planning.preemption import preemption_rate, spot_as_dict
from hpsearch.planning.rayjob import KUBERAY_SINCE, job_name, rayjob_manifest, rayjob_plan
from hpsearch.planning.render import describe_groups, render_autoscaling, render_estimate, render_plan
from hpsearch.planning.shares import Entry, render_status, shared_plan, status_rows
from hpsearch.planning.versus import versus_lines
from hpsearch.results.optuna_export import to_optuna_study
from hpsearch.results.report import write_report
from hpsearch.spec import Scaling, check_storage, load_spec, total_trials, varying_params

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.analysis import SearchSummary, TrialOutcome
    from hpsearch.planning.cluster_shape import NodeGroup
    from hpsearch.spec import Spec

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
#: The options of ``plan --estimate`` (their argparse dests): given without --estimate, each is refused.
_ESTIMATE_OPTIONS = ("epoch_time", "startup", "teardown", "epochs", "preemption_rate")
#: The options of ``plan --emit rayjob`` (their argparse dests): given without --emit, each is refused.
_RAYJOB_OPTIONS = ("image", "storage_pvc", "namespace", "auth_token", "pre_running_deadline", "fs_group")
VERBOSE_HELP = (
    "also print Ray's own log lines (the workers' output, Ray's warnings, Tune's tracebacks); "
    "without it they are kept in Ray's session folder, named at the start"
)


def _load(args: argparse.Namespace) -> Spec:
    priority = getattr(args, "priority", None)  # run --priority: resources.priority, for this run
    extra = [f"resources.priority={priority!r}"] if priority is not None else []
    return load_spec(args.spec, overrides=[*(args.set or ()), *extra])


def _workers_text(scaling: Scaling) -> str:
    """A trial's workers as ``validate`` says them: the number, or an elastic trial's ``min..max``."""
    return str(scaling.elastic) if scaling.elastic else str(scaling.workers)


def cmd_validate(args: argparse.Namespace) -> int:
    """Check a spec (that its trainable imports, that storage_path can be written) without starting Ray."""
    spec = _load(args)
    check_storage(spec)
    n = total_trials(spec)
    print(
        f"{args.spec}: valid. {plural(n, 'trial')} of {'up to ' if spec.scaling.searched() else ''}"
        f"{_workers_text(spec.scaling)} worker(s) each; "
        f"searcher {spec.searcher.type}, scheduler {spec.scheduler.type}; "
        f"results in {spec.experiment_dir}"
    )
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """Run a search; print the best trials, the experiment folder and the wall time."""
    if args.cluster:  # a bad --cluster is refused in a moment, before Ray and torch load (preflight reads it again)
        parse_node_groups(args.cluster)
    spec = _load(args)  # first: a bad spec is refused in a moment, before Ray and torch load
    # lazy: Ray and torch take seconds to import; validate, plan, report and export never need them
    from hpsearch.runtime.search.tuner import run

    result = run(spec, address=args.address, overwrite=args.overwrite, verbose=args.verbose, cluster=args.cluster)
    return _report_search(spec, result.summary)


def _priority(text: str) -> float:
    """An argparse type: ``--priority``, a number above 0 and at most 1000."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError(f"must be a number above 0 and at most 1000, got {text!r}")
    return value


def cmd_status(args: argparse.Namespace) -> int:
    """List the hpsearch searches running on a Ray cluster: who runs each, its priority and share of the
    cluster, its trials at once, running, done and in all, its best value and its experiment folder."""
    import ray  # lazy: Ray takes seconds to import; only status and plan --address need it here

    from hpsearch.runtime.nodes.connect import connect  # lazy: as above
    from hpsearch.runtime.nodes.register import listing  # lazy: as above

    started = connect(args.address)
    try:
        searches, nodes = listing()
    finally:
        if started:
            ray.shutdown()
    if args.format == "json":
        print(json.dumps({"address": args.address, "nodes": len(nodes), "searches": status_rows(searches)}, indent=2))
    else:
        print(render_status(searches, nodes, f"the cluster at {args.address}"))
    return EXIT_OK


def _positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def cmd_check(args: argparse.Namespace) -> int:
    """Run one trial of the spec at its own scale (2 workers at least) for a few reports, cut it, restore it,
    and say whether every rank reported, the metric arrived, a checkpoint was written and restored.

    The trial takes the first point of the space (each choice's first value, each range's low end) or the
    --set values. Everything is written under <storage_path>/<name>.check, including the measured start-up,
    per-report and teardown times that `hpsearch plan SPEC --estimate` reads. Exit 0 when every check
    passes, 1 when one fails.
    """
    spec = _load(args)  # first: a bad spec is refused in a moment, before Ray and torch load
    # lazy: Ray and torch take seconds to import; validate, plan, report and export never need them
    from hpsearch.runtime.search.check import check, failed_lines

    setup, report = check(
        spec,
        reports=args.reports,
        address=args.address,
        verbose=args.verbose,
        report_timeout_s=args.report_timeout,
    )
    print(
        f"check of {args.spec} ({plural(setup.workers, 'worker')}, {plural(setup.reports, 'report')}, then a restore):"
    )
    for verdict in report.verdicts:
        print(verdict.line())
    for line in failed_lines(report):
        print(line)
    print(report.measured.line())
    print(f"written: {setup.folder / CHECK_FILE} (read by `hpsearch plan {args.spec} --estimate`)")
    if report.ok:
        print("check passed")
        return EXIT_OK
    print(f"check failed: {', '.join(v.name for v in report.failed())}")
    return EXIT_FAILED


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue an interrupted search from its experiment folder: finished trials are kept."""
    # lazy: Ray and torch take seconds to import; validate, plan, report and export never need them
    from hpsearch.runtime.search.tuner import resume

    result = resume(
        args.experiment,
        address=args.address,
        retry_errored=args.retry_errored,
        verbose=args.verbose,
        overrides=args.set or (),
    )
    return _report_search(experiment_spec(args.experiment), result.summary)  # the spec as run now: its raised budget


def _report_search(spec: Spec, summary: SearchSummary) -> int:
    """Print how a search ended; return the exit code."""
    missing = missing_metric_message(summary)
    if missing is not None:  # every trial made the same mistake: one Error block, no table of tracebacks
        print(f"Error: {missing}\nExperiment folder: {spec.experiment_dir}", file=sys.stderr)
        return (
            EXIT_USAGE  # the loop and the spec disagree (a metric, a constraint's metric, a checkpoint): a user mistake
        )

    counts = ", ".join(f"{summary.count(s)} {s}" for s in ENDED)
    varying = varying_params(spec)
    if spec.multi_objective:  # no one best trial: the trials no other beats on every objective
        objectives = ", ".join(f"{m} ({d})" for m, d in spec.objectives)
        print(f"\nPareto front by {objectives} ({len(summary.pareto)} trials):")
        print(pareto_front_table(summary, varying=varying))
    else:
        print(f"\nBest trials by {spec.metric} ({spec.mode}):")
        print(best_trials_table(summary, varying=varying))
    constraints = feasible_line(summary)
    if constraints is not None:
        print(constraints)
    errored = [t for t in summary.trials if t.status == ERRORED]
    if errored:
        print(f"\nErrors ({len(errored)}): one line each, the full tracebacks are in the files named")
        print(_errors_table(errored, varying))
    print(f"\nExperiment folder: {spec.experiment_dir}")
    sessions = read_ray_logs(spec.experiment_dir)
    if sessions and sessions[-1].logs_dir:
        print(f"Ray's logs: {sessions[-1].logs_dir}")
    if summary.interrupted:
        print(f"Interrupted before every trial ended; continue with: hpsearch resume {spec.experiment_dir}")
    n = len(summary.trials)
    print(f"Wall time: {summary.wall_time_s:.1f} s ({plural(n, 'trial')}: {counts})")
    if summary.resource_hours:
        held = resource_hours(summary.resource_hours)
        print(f"Resource-hours: {held} (every trial, from its driver's start to its end)")
    for line in versus_lines(summary.estimate):  # the estimate made at the start, when the spec was checked
        print(line)
    if summary.ended_by:
        print(f"Ended by its budget: {summary.ended_reason}")
        print(f"Continue it with a raised budget: {summary.resume_hint}")
    if summary.interrupted:
        return EXIT_INTERRUPTED
    # a trial stopped before its first report (a budget that ended the search as it started) did no work
    ok = summary.count(FINISHED) + sum(1 for t in summary.trials if t.status == STOPPED and t.iterations > 0)
    return EXIT_OK if ok > 0 else EXIT_FAILED


def _errors_table(errored: Sequence[TrialOutcome], varying: Sequence[str]) -> str:
    """One row per errored trial: its id, its parameters, its error line and its ``error.txt``."""
    rows = [["trial_id", *varying, "error", "traceback"]]
    for trial in errored:
        flat = flatten_config(trial.config)
        path = f"{trial.path}/{TUNE_ERROR_FILE}" if trial.path else "-"
        rows.append([trial.trial_id, *(cell(flat.get(k)) for k in varying), trial.error or "-", path])
    return text_table(rows, indent="  ")


def cmd_plan(args: argparse.Namespace) -> int:
    """Show how many trials of a spec run at once, where, and what stays idle, without starting any trial.

    With --estimate, also predict the search's wall time and resource-hours on those trials at once: a
    simulation of the schedule from `hpsearch check`'s measurements (or --epoch-time and --startup).
    """
    if not args.estimate and any(vars(args)[dest] is not None for dest in _ESTIMATE_OPTIONS):
        raise PlanError("--epoch-time, --startup, --teardown, --epochs and --preemption-rate are options of --estimate")
    if args.estimate and args.emit:
        raise PlanError("--estimate adds to the plan and --emit rayjob writes a RayJob instead of it: give one of them")
    if args.emit or any(vars(args)[dest] is not None and vars(args)[dest] is not False for dest in _RAYJOB_OPTIONS):
        return _emit_rayjob(args)

    groups = parse_node_groups(args.cluster) if args.cluster else None  # a bad one is refused before the spec loads
    spec = _load(args)
    timing = _estimate_inputs(spec, args) if args.estimate else None  # before Ray: a missing input fails at once
    if groups:
        if any(g.autoscaling for g in groups):  # min..max counts: the plan at both sizes, and per extra node
            return _plan_autoscaling(spec, groups, args.format, timing=timing, epochs=args.epochs)
        nodes = nodes_at(groups)
        where = "the described cluster"
    else:
        import ray  # lazy: Ray takes seconds to import; only plan without --cluster needs it

        # lazy: Ray takes seconds to import; only plan without --cluster needs it
        from hpsearch.runtime.nodes.connect import cluster_nodes, connect

        started = connect(args.address)
        running: list[Entry] = []
        try:
            nodes = cluster_nodes()
            if args.address:  # the searches already on the cluster: what this one would get beside them
                from hpsearch.runtime.nodes.register import listing  # lazy: as above

                running = [entry for entry, _ in listing()[0]]
        finally:
            if started:
                ray.shutdown()
        where = f"the cluster at {args.address}" if args.address else "this machine"
    plan = plan_for(spec, nodes)
    est = estimate(workload_for(spec, plan, epochs=args.epochs), timing) if timing is not None else None
    beside = shared_plan(spec, plan, nodes, running) if args.address else None
    if args.format == "json":
        out = {"name": spec.name, "total_trials": total_trials(spec), **plan.as_dict()}
        out.update(spot_as_dict(plan, cadence_for(spec)))  # the "spot nodes" fields, when workers sit on spot nodes
        if beside is not None:
            out["shared"] = beside
        print(json.dumps({**out, "estimate": est.as_dict()} if est is not None else out, indent=2))
    else:
        title = f"Plan for {spec.name} on {where} ({plural(len(nodes), 'node')})"
        print(render_plan(plan, title=title, total_trials=total_trials(spec), cadence=cadence_for(spec)))
        if beside is not None:
            print("\n" + beside["text"])
        if est is not None:
            print("\n" + render_estimate(est, title=_estimate_title(spec, est, "")))
    return EXIT_OK


def _estimate_inputs(spec: Spec, args: argparse.Namespace) -> Timing:
    """``plan --estimate``'s trial costs: ``hpsearch check``'s measurements, each overridden by its flag; and
    the epochs per trial checked to be known (exit 2 at once, before Ray starts, when either is missing)."""
    folder = check_folder(spec.experiment_dir)
    timing = timing_from(
        read_check(folder),
        check_file=str(folder / CHECK_FILE),
        spec_arg=args.spec,
        epoch_s=args.epoch_time,
        startup_s=args.startup,
        teardown_s=args.teardown,
        workers=spec.scaling.largest().planned_workers,
        preemption_rate=preemption_rate(args.preemption_rate) if args.preemption_rate is not None else None,
    )
    epochs_for(spec, args.epochs)
    return timing


def _estimate_title(spec: Spec, est: Estimate, where: str) -> str:
    w = est.workload
    return f"Estimate for {spec.name}{where}: {plural(w.trials, 'trial')}, {est.slots} at once, scheduler {w.scheduler}"


def _plan_autoscaling(
    spec: Spec, groups: Sequence[NodeGroup], fmt: str, *, timing: Timing | None = None, epochs: int | None = None
) -> int:
    """``plan --cluster`` with ``min..max`` counts: the plan at the minimum and maximum sizes, and per extra node;
    with ``timing`` (``--estimate``), the estimate at the maximum size."""

    plan = plan_autoscaling(spec, groups)
    est = estimate(workload_for(spec, plan.at_max, epochs=epochs), timing) if timing is not None else None
    if fmt == "json":
        shape = cluster_text(plan.groups)  # as --cluster reads it back
        out = {
            "name": spec.name,
            "total_trials": total_trials(spec),
            "cluster": shape,
            "autoscaling": plan.as_dict(),
        }
        if est is not None:
            out["estimate"] = {"at_size": "max", **est.as_dict()}
        print(json.dumps(out, indent=2))
    else:
        title = (
            f"Plan for {spec.name} on the described autoscaling cluster {describe_groups(plan)} "
            f"({plan.min_nodes} to {plan.max_nodes} nodes)"
        )
        print(render_autoscaling(plan, title=title, total_trials=total_trials(spec), cadence=cadence_for(spec)))
        if est is not None:
            where = f" at the maximum size ({plan.max_nodes} nodes; the nodes' own start-up not counted)"
            print("\n" + render_estimate(est, title=_estimate_title(spec, est, where)))
    return EXIT_OK


def _emit_rayjob(args: argparse.Namespace) -> int:
    """``plan --emit rayjob``: the KubeRay RayJob (and the spec's ConfigMap) on stdout, notes on stderr."""

    if not args.emit:
        raise PlanError(
            "--image, --storage-pvc, --namespace, --auth-token, --pre-running-deadline and --fs-group are options "
            "of --emit rayjob"
        )
    if not args.cluster:
        raise PlanError(
            "--emit rayjob needs --cluster SHAPE: the node groups the Kubernetes cluster gives Ray, "
            "e.g. --cluster '1x{CPU: 8, memory: 32} + 0..4x{CPU: 8, GPU: 8, memory: 64}'"
        )
    if args.format == "json":
        raise PlanError("--emit rayjob writes YAML: leave out --format json")
    if not args.image:
        raise PlanError(
            "--emit rayjob needs --image IMAGE: a container image with hpsearch, your train loop's packages "
            "and the same Ray as here installed (README: Running on Kubernetes)"
        )
    groups = parse_node_groups(args.cluster)  # before the spec loads: a bad one is refused at once
    spec = _load(args)
    try:
        ray_version: str | None = version("ray")
    except PackageNotFoundError:  # pragma: no cover - ray is a dependency
        ray_version = None
    command = ["hpsearch", "plan", args.spec, "--cluster", args.cluster, "--emit", "rayjob", "--image", args.image]
    command += ["--storage-pvc", args.storage_pvc] if args.storage_pvc else []
    command += ["--namespace", args.namespace] if args.namespace else []
    command += ["--auth-token"] if args.auth_token else []
    command += (
        ["--pre-running-deadline", str(args.pre_running_deadline)] if args.pre_running_deadline is not None else []
    )
    command += ["--fs-group", str(args.fs_group)] if args.fs_group is not None else []
    command += [arg for o in args.set or () for arg in ("--set", o)]
    manifest = rayjob_manifest(
        spec,
        args.spec,
        groups,
        image=args.image,
        storage_pvc=args.storage_pvc,
        namespace=args.namespace,
        overrides=args.set or (),
        ray_version=ray_version,
        command=shlex.join(command),
        auth_token=args.auth_token,
        pre_running_deadline_s=args.pre_running_deadline,
        fs_group=args.fs_group,
    )
    plan = rayjob_plan(spec, groups)  # what the manifest was sized from: it has refused what cannot be planned
    sys.stdout.write(manifest)
    low, high = sum(g.min_count for g in groups), sum(g.max_count for g in groups)
    where = (
        f"with every node the autoscaler can add ({high} nodes; the cluster starts at its minimum, {low}, "
        "and grows as trials wait)"
        if any(g.autoscaling for g in groups)
        else f"on the cluster ({plural(high, 'node')})"
    )
    messages.say(
        f"RayJob {job_name(spec.name)}: {plan.max_concurrent_trials} trial(s) at once {where}; "
        "apply it with kubectl apply -f (README: Running on Kubernetes)"
    )
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """Write a report of a search: one self-contained HTML page (plots embedded), or Markdown with PNGs beside it."""
    results = load_results(args.experiment, metric=args.metric, mode=args.mode)
    try:
        path = write_report(results, args.output, fmt=args.format)
    except OSError as err:
        print(f"Error: cannot write the report: {err}; choose another file with --output", file=sys.stderr)
        return EXIT_FAILED
    print(path)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    """Write a search's trials, with their intermediate values, into an Optuna study (for optuna-dashboard)."""
    results = load_results(args.experiment, metric=args.metric, mode=args.mode)
    study = to_optuna_study(results, storage=args.optuna, study_name=args.study_name, overwrite=args.overwrite)
    states = [t.state.name for t in study.trials]
    names = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed", "RUNNING": "running", "WAITING": "waiting"}
    counts = ", ".join(f"{states.count(s)} {word}" for s, word in names.items() if s in states)
    print(f"Exported {len(states)} trials ({counts}) to Optuna study '{study.study_name}' in {args.optuna}")
    print(f"Look at it with: optuna-dashboard {args.optuna}")
    return EXIT_OK


def _seconds(*, above_zero: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds, at least 0 (or above 0)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or (above_zero and value == 0):
            raise argparse.ArgumentTypeError(
                f"must be a number of seconds {'above' if above_zero else 'of at least'} 0, got {text!r}"
            )
        return value

    return parse


class _Subcommands(Protocol):
    """What ``ArgumentParser.add_subparsers`` returns, as used here (argparse keeps its class private)."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


def _results_commands(sub: _Subcommands) -> None:
    """``report`` and ``export``: commands that read an experiment folder (no Ray)."""

    def results_command(name: str, func: Callable[[argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=func.__doc__)
        p.add_argument("experiment", metavar="EXPERIMENT_DIR", help="the experiment folder (<storage_path>/<name>)")
        p.add_argument("--metric", help="rank trials by this reported metric (default: the spec's)")
        p.add_argument("--mode", choices=("min", "max"), help="whether --metric is better low or high")
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        p.set_defaults(func=func)
        return p

    report_p = results_command("report", cmd_report, "write an HTML (or Markdown) report of a search")
    report_p.add_argument("--format", choices=("html", "md"), default="html", help="output format (default: html)")
    report_p.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="where to write it (default: hpsearch_report.html/.md in the experiment folder)",
    )
    export_p = results_command("export", cmd_export, "write a search's trials into an Optuna study")
    export_p.add_argument(
        "--optuna", required=True, metavar="STORAGE_URL", help="Optuna storage, e.g. sqlite:///search.db"
    )
    export_p.add_argument("--study-name", help="default: the search's name")
    export_p.add_argument("--overwrite", action="store_true", help="replace a study of the same name in the storage")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpsearch",
        description="Hyperparameter search on Ray Tune where every trial is a Ray Train TorchTrainer run.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _run_command(sub)
    _spec_command(sub, "validate", cmd_validate, "check a spec without starting Ray")
    _check_command(sub)
    _resume_command(sub)
    plan_p = _spec_command(sub, "plan", cmd_plan, "show the resource plan for a spec without starting any trial")
    _plan_target_flags(plan_p)
    _estimate_flags(plan_p)
    _rayjob_flags(plan_p)
    _results_commands(sub)
    status_p = sub.add_parser(
        "status", help="list the searches running on a Ray cluster", description=cmd_status.__doc__
    )
    status_p.add_argument(
        "--address", default="auto", help="the Ray cluster (default: 'auto', the one on this machine)"
    )
    status_p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    status_p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    status_p.set_defaults(func=cmd_status)
    return parser


def _spec_command(
    sub: _Subcommands, name: str, func: Callable[[argparse.Namespace], int], help_: str
) -> argparse.ArgumentParser:
    """A command that reads a spec: ``SPEC.yaml`` and ``--set``."""
    p = sub.add_parser(name, help=help_, description=func.__doc__)
    p.add_argument("spec", metavar="SPEC.yaml", help="the search spec")
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a spec value by its dotted path, e.g. --set scaling.num_workers=2 (repeatable)",
    )
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.set_defaults(func=func)
    return p


def _run_command(sub: _Subcommands) -> None:
    run_p = _spec_command(sub, "run", cmd_run, "run a search")
    run_p.add_argument(
        "--address", help="an existing Ray cluster (e.g. 'auto' or 'host:6379'); default: embedded local Ray"
    )
    run_p.add_argument(
        "--overwrite", action="store_true", help="delete an existing experiment folder of the same name first"
    )
    run_p.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    run_p.add_argument(
        "--priority",
        type=_priority,
        metavar="P",
        help="with --address: this search's weight in the cluster's shares beside other searches "
        "(resources.priority; default 1)",
    )
    run_p.add_argument(
        "--cluster",
        metavar="SHAPE",
        help="with --address: the node groups the cluster's autoscaler may grow it to, as plan takes them "
        "(e.g. '1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}'): trials wait for the nodes they need instead of being refused",
    )


def _check_command(sub: _Subcommands) -> None:
    check_p = _spec_command(
        sub,
        "check",
        cmd_check,
        "run one small trial of the spec and check the loop (ranks, metric, checkpoint, restore)",
    )
    check_p.add_argument(
        "--reports", type=_positive_int, default=2, metavar="N", help="reports before the cut (default: 2)"
    )
    check_p.add_argument(
        "--address", help="an existing Ray cluster (e.g. 'auto' or 'host:6379'); default: embedded local Ray"
    )
    check_p.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    check_p.add_argument(
        "--report-timeout",
        type=_seconds(above_zero=True),
        default=DEFAULT_CHECK_REPORT_TIMEOUT_S,
        metavar="SECONDS",
        help="end the trial after this long without a report, when the spec sets no failure.report_timeout_s "
        f"(default: {DEFAULT_CHECK_REPORT_TIMEOUT_S:g})",
    )


def _resume_command(sub: _Subcommands) -> None:
    resume_p = sub.add_parser("resume", help="continue an interrupted search", description=cmd_resume.__doc__)
    resume_p.add_argument("experiment", metavar="EXPERIMENT_DIR", help="the experiment folder (<storage_path>/<name>)")
    resume_p.add_argument(
        "--retry-errored", action="store_true", help="run errored trials again, from their last checkpoint"
    )
    resume_p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="raise a budget for the rest of the search, e.g. --set budget.max_wall_time=4h, or grow it, "
        "e.g. --set num_samples=40 (only budget.* keys and num_samples; repeatable)",
    )
    resume_p.add_argument("--address", help="an existing Ray cluster; default: embedded local Ray")
    resume_p.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    resume_p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    resume_p.set_defaults(func=cmd_resume)


def _plan_target_flags(plan_p: argparse.ArgumentParser) -> None:
    target = plan_p.add_mutually_exclusive_group()
    target.add_argument("--address", help="plan against a running Ray cluster (e.g. 'auto')")
    target.add_argument(
        "--cluster",
        metavar="SHAPE",
        help="plan against a described cluster: '4x{CPU: 32, GPU: 8}', '1x{CPU: 16} + 3x{CPU: 8, GPU: 3}' "
        "(memory in GiB; the first node is the head) or a YAML file listing nodes",
    )
    plan_p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")


def _estimate_flags(plan_p: argparse.ArgumentParser) -> None:
    est = plan_p.add_argument_group("estimate (each flag overrides the figure `hpsearch check SPEC` measured)")
    est.add_argument(
        "--estimate",
        action="store_true",
        help="also predict the search's wall time and resource-hours on the planned trials at once: a simulation "
        "of its schedule (the scheduler's decisions, the budget) from `hpsearch check SPEC`'s measurements, "
        "or --epoch-time and --startup; no trial runs",
    )
    est.add_argument("--epoch-time", type=_seconds(above_zero=True), metavar="SECONDS", help="seconds per epoch")
    est.add_argument(
        "--startup", type=_seconds(), metavar="SECONDS", help="seconds from a trial's start to its first epoch's start"
    )
    est.add_argument(
        "--teardown",
        type=_seconds(),
        metavar="SECONDS",
        help="seconds from a trial's last report to its slot being free",
    )
    est.add_argument(
        "--epochs",
        type=_positive_int,
        metavar="N",
        help="epochs per trial (default: the spec's search_space.epochs; asha and hyperband: else max_t)",
    )
    est.add_argument(
        "--preemption-rate",
        metavar="R",
        help="preemptions per spot node-hour (a number >= 0): the expected extra wall time and resource-hours of "
        "trials whose workers sit on spot nodes (--cluster '... + 0..4x{CPU: 8, GPU: 1, spot}')",
    )


def _rayjob_flags(plan_p: argparse.ArgumentParser) -> None:
    kube = plan_p.add_argument_group("KubeRay (with --cluster)")
    kube.add_argument(
        "--emit",
        choices=("rayjob",),
        help="write a KubeRay RayJob (ray.io/v1) for the described cluster to stdout instead of the plan: "
        "worker groups with min/max replicas, the head sized for the trial drivers, the entrypoint "
        "'hpsearch run SPEC --address auto', the spec in a ConfigMap",
    )
    kube.add_argument("--image", help="with --emit rayjob: the container image (hpsearch, your loop's packages, Ray)")
    kube.add_argument(
        "--storage-pvc",
        metavar="NAME",
        help="with --emit rayjob: a ReadWriteMany PersistentVolumeClaim for the results, mounted in every pod "
        "at /mnt/hpsearch-results (the search's storage_path)",
    )
    kube.add_argument("--namespace", help="with --emit rayjob: the Kubernetes namespace (default: kubectl's current)")
    kube.add_argument(
        "--auth-token",
        action="store_true",
        help="with --emit rayjob: Ray's token authentication (rayClusterSpec.authOptions {mode: token}): KubeRay makes "
        "a token Secret and gives it to every Ray pod and the submitter; needs KubeRay "
        f"{KUBERAY_SINCE['spec.rayClusterSpec.authOptions']} or later",
    )
    kube.add_argument(
        "--pre-running-deadline",
        metavar="SECONDS",
        type=int,
        help="with --emit rayjob: preRunningDeadlineSeconds: KubeRay fails the RayJob if its search has not started "
        "SECONDS after the RayJob's start (pods Pending, an image that does not pull); needs KubeRay "
        f"{KUBERAY_SINCE['spec.preRunningDeadlineSeconds']} or later",
    )
    kube.add_argument(
        "--fs-group",
        metavar="GID",
        type=int,
        help="with --emit rayjob: securityContext.fsGroup of every Ray pod, so that the image's user writes to a "
        "root-owned share (Filestore, NFS) whose driver applies fsGroup (rayproject/ray: 100); a pod field, "
        "any KubeRay (1.1.0 or later)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``hpsearch`` and ``python -m hpsearch``."""
    args = _parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except StorageFullError as err:  # not a usage mistake: the search ran and failed
        if args.debug:
            raise
        print(f"Error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except HpsearchError as err:
        if args.debug:
            raise
        print(f"Error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
