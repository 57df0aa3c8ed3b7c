"""The ``hpsearch`` command: a thin command table over the public API.

Exit codes: 0 when at least one trial finished without error, 1 when none did (or
an unexpected failure), 2 for a bad spec or bad usage. A user mistake prints one
``Error:`` block and no traceback (``--debug`` shows it).
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from hpsearch.errors import HpsearchError

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _load(args: argparse.Namespace):
    from hpsearch.spec import load_spec

    return load_spec(args.spec, overrides=args.set or ())


def cmd_validate(args: argparse.Namespace) -> int:
    """Check a spec (and that its trainable imports) without starting Ray."""
    from hpsearch.tuner import total_trials

    spec = _load(args)
    n = total_trials(spec)
    print(
        f"{args.spec}: valid. {n} trial{'s' if n != 1 else ''} of {spec.scaling.num_workers} worker(s) each; "
        f"searcher {spec.searcher.type}, scheduler {spec.scheduler.type}; "
        f"results in {spec.experiment_dir}"
    )
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """Run a search; print the best trials, the experiment folder and the wall time."""
    from hpsearch.summary import best_trials_table
    from hpsearch.tuner import run_with_summary, varying_params

    spec = _load(args)
    _, summary = run_with_summary(spec, address=args.address, overwrite=args.overwrite, verbose=args.verbose)
    counts = ", ".join(f"{summary.count(s)} {s}" for s in ("finished", "stopped", "errored"))
    print(f"\nBest trials by {spec.metric} ({spec.mode}):")
    print(best_trials_table(summary, varying=varying_params(spec)))
    errored = [t for t in summary.trials if t.status == "errored"]
    if errored:
        print(f"\nErrors ({len(errored)}):")
        for trial in errored:
            print(f"  {trial.trial_id}: {trial.error}\n    folder: {trial.path}")
    print(f"\nExperiment folder: {spec.experiment_dir}")
    n = len(summary.trials)
    print(f"Wall time: {summary.wall_time_s:.1f} s ({n} trial{'s' if n != 1 else ''}: {counts})")
    ok = summary.count("finished") + summary.count("stopped")
    return EXIT_OK if ok > 0 else EXIT_FAILED


def cmd_plan(args: argparse.Namespace) -> int:
    """Show how many trials of a spec run at once, where, and what stays idle, without starting any trial."""
    import json

    from hpsearch.plan_report import render_plan
    from hpsearch.tuner import plan_for, total_trials

    spec = _load(args)
    if args.cluster:
        from hpsearch.cluster_shape import parse_cluster

        nodes = parse_cluster(args.cluster)
        where = "the described cluster"
    else:
        import ray

        from hpsearch.cluster import cluster_nodes, connect

        started = connect(args.address)
        try:
            nodes = cluster_nodes()
        finally:
            if started:
                ray.shutdown()
        where = f"the cluster at {args.address}" if args.address else "this machine"
    plan = plan_for(spec, nodes)
    if args.format == "json":
        print(json.dumps({"name": spec.name, "total_trials": total_trials(spec), **plan.as_dict()}, indent=2))
    else:
        title = f"Plan for {spec.name} on {where} ({len(nodes)} node{'s' if len(nodes) != 1 else ''})"
        print(render_plan(plan, title=title, total_trials=total_trials(spec)))
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpsearch",
        description="Hyperparameter search on Ray Tune where every trial is a Ray Train TorchTrainer run.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def spec_command(name: str, func: Callable[[argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
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

    run_p = spec_command("run", cmd_run, "run a search")
    run_p.add_argument("--address", help="an existing Ray cluster (e.g. 'auto' or 'host:6379'); default: embedded local Ray")
    run_p.add_argument("--overwrite", action="store_true", help="delete an existing experiment folder of the same name first")
    run_p.add_argument("--verbose", action="store_true", help="show the Train workers' own output")
    spec_command("validate", cmd_validate, "check a spec without starting Ray")
    plan_p = spec_command("plan", cmd_plan, "show the resource plan for a spec without starting any trial")
    target = plan_p.add_mutually_exclusive_group()
    target.add_argument("--address", help="plan against a running Ray cluster (e.g. 'auto')")
    target.add_argument(
        "--cluster",
        metavar="SHAPE",
        help="plan against a described cluster: '4x{CPU: 32, GPU: 8}', '1x{CPU: 16} + 3x{CPU: 8, GPU: 3}' "
        "(memory in GB; the first node is the head) or a YAML file listing nodes",
    )
    plan_p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``hpsearch`` and ``python -m hpsearch``."""
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except HpsearchError as err:
        if args.debug:
            raise
        print(f"Error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
