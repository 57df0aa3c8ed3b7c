"""Scale: a search of 200 trivial nested trials through hpsearch, on this machine.

The work: a per-worker loop that trains nothing and reports ``--reports`` times (a loss
computed from the sampled ``x``), 1 worker of ``{CPU: 0.1}`` per trial plus a 0.1-CPU
driver, 200 samples, random searcher, FIFO, run by ``hpsearch.run``; hpsearch's planner
decides how many trials run at once (from the CPUs and its memory estimate per trial).
The search runs in its own Python process with its own embedded Ray: the *driver
process*, the one that runs the Tuner.

Figures: wall s (``hpsearch.run``, Ray already started), trials per minute, trials that
finished, the driver process's memory when the search has ended (resident set ``VmRSS``,
and its peak ``ru_maxrss``), the placement groups still ``CREATED`` at that point, before
``ray.shutdown()`` (0 when every trial's Tune and Train groups were removed), and the Ray
processes left behind once that process ended (ended here, by PID, and named).

Run:  python benchmarks/scale.py                # 200 trials: ~33 min on 2 CPUs (6.2 trials a minute)
      python benchmarks/scale.py --trials 12    # smoke run, ~2 min
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._common import logs_folder, print_table, run_isolated, write_results  # noqa: E402
from benchmarks._machine import print_header  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "scale.json"
WORKER_CPUS = 0.1
DRIVER_CPUS = 0.1


def trivial_loop(config: dict) -> None:
    """Reports ``config["reports"]`` times, training nothing."""
    import ray.train

    for epoch in range(1, config["reports"] + 1):
        ray.train.report({"loss": config["x"] / epoch, "epoch": epoch})


def vmrss_mb() -> float:
    """This process's resident set now, in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def run_search(trials: int, reports: int, storage: str) -> dict:
    """The search, in this (the driver) process; returns its figures."""
    import ray
    import ray.util

    import hpsearch
    from hpsearch.experiment.layout import PLAN_FILE
    from hpsearch.runtime.nodes.connect import connect

    connect()
    spec = hpsearch.load_spec(
        {
            "name": "scale",
            "trainable": f"{Path(__file__).resolve()}:trivial_loop",
            "metric": "loss",
            "mode": "min",
            "num_samples": trials,
            "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}, "reports": reports},
            "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": WORKER_CPUS}},
            "resources": {"driver_cpus": DRIVER_CPUS},
            "storage_path": storage,
        }
    )
    start = time.monotonic()
    grid = hpsearch.run(spec)
    wall = time.monotonic() - start
    groups = ray.util.placement_group_table().values()
    figures = {
        "wall_s": wall,
        "finished": sum(1 for r in grid if r.error is None),
        "trials_at_once": json.loads((spec.experiment_dir / PLAN_FILE).read_text())["max_concurrent_trials"],
        "driver_rss_mb": vmrss_mb(),
        "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KB on Linux
        "placement_groups_created": sum(1 for g in groups if g["state"] == "CREATED"),
        "placement_groups_in_table": len(groups),  # removed ones too, as far as Ray keeps them
    }
    ray.shutdown()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--reports", type=int, default=3, help="reports per trial (default 3)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--search", action="store_true", help=argparse.SUPPRESS)  # internal: the search, JSON out
    parser.add_argument("--storage", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.search:
        print(json.dumps(run_search(args.trials, args.reports, args.storage)))
        return 0

    command, machine = print_header()
    print(
        f"work: {args.trials} trivial nested trials ({args.reports} reports each, no training), 1 worker of "
        f"{{CPU: {WORKER_CPUS}}} + a {DRIVER_CPUS}-CPU driver each; random searcher, FIFO"
    )
    logs = logs_folder("scale")
    with tempfile.TemporaryDirectory(prefix="hpsearch-scale-") as storage:
        r, left = run_isolated(
            [__file__, "--search", "--trials", str(args.trials), "--reports", str(args.reports), "--storage", storage],
            log=logs / "search.log",
            timeout_s=90 * 60,  # 200 trials take ~33 min here: past _common's 30-min backstop
        )
    r["left_behind"] = left
    r["trials_per_minute"] = r["finished"] / r["wall_s"] * 60
    print_table(
        ["finished", "wall s", "trials/min", "at once", "driver RSS MB", "peak RSS MB", "PGs CREATED", "left behind"],
        [
            [
                f"{r['finished']}/{args.trials}",
                f"{r['wall_s']:.1f}",
                f"{r['trials_per_minute']:.1f}",
                str(r["trials_at_once"]),
                f"{r['driver_rss_mb']:.0f}",
                f"{r['driver_peak_rss_mb']:.0f}",
                str(r["placement_groups_created"]),
                ", ".join(left) or "none",
            ]
        ],
    )
    write_results(
        args.out,
        {
            "benchmark": "scale",
            "command": command,
            "machine": machine,
            "trials": args.trials,
            "reports": args.reports,
            "worker_cpus": WORKER_CPUS,
            "driver_cpus": DRIVER_CPUS,
            "logs": str(logs),
            **r,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
