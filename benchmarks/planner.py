"""How long resource planning takes on a big cluster: 1,000 nodes, ~10,000 worker bundles.

The issue asks that "planning for 1,000 nodes and 10,000 bundles takes well under a
second". This times ``plan_trials`` (capacity search, placement of every bundle, usage
and warnings: the whole call) for each placement strategy, with the trial drivers
anywhere (``driver_node: any``) and pinned to a CPU-only head node, and writes the
figures to ``benchmarks/results/planner.json``.

Cluster: 1,000 GPU nodes of {CPU: 32, GPU: 8, memory: 256 GB}; for ``driver_node: head``
a CPU-only head node of {CPU: 400, memory: 2048 GB} is added. A trial: 8 workers of
{CPU: 1.5, GPU: 0.5, memory: 8 GB} plus a driver of {CPU: 0.25, memory: 1 GB}.
``requested=1250`` places exactly 10,000 worker bundles (+ 1,250 drivers); ``auto``
places every trial that fits (2,000 trials, 16,000 workers with the drivers anywhere).

Run:  python benchmarks/planner.py [--repeats 5] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._machine import print_header  # noqa: E402
from hpsearch.planning.planner import GB, Node, TrialDemand, plan_trials  # noqa: E402

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
NODES = 1000
GPU_NODE = {"CPU": 32, "GPU": 8, "memory": 256 * GB}
HEAD_NODE = {"CPU": 400, "memory": 2048 * GB}
WORKER = {"CPU": 1.5, "GPU": 0.5}
WORKER_MEMORY = 8 * GB
DRIVER = {"CPU": 0.25}
DRIVER_MEMORY = 1 * GB
NUM_WORKERS = 8
REQUESTED = 1250  # 1,250 trials x 8 workers = 10,000 worker bundles
BUDGET_S = 1.0
RESULTS = ROOT / "benchmarks" / "results" / "planner.json"


def make_cluster(driver_node: str) -> list[Node]:
    nodes = [Node(dict(GPU_NODE), node_id=f"gpu{i:04d}") for i in range(NODES)]
    if driver_node == "head":
        return [Node(dict(HEAD_NODE), node_id="head", is_head=True), *nodes]
    nodes[0] = Node(dict(GPU_NODE), node_id="gpu0000", is_head=True)
    return nodes


def make_demand(strategy: str, driver_node: str) -> TrialDemand:
    return TrialDemand(
        DRIVER, WORKER, NUM_WORKERS, strategy, driver_node, driver_memory=DRIVER_MEMORY, worker_memory=WORKER_MEMORY
    )


def time_one(nodes: list[Node], demand: TrialDemand, requested, repeats: int) -> dict:
    times = []
    plan = None
    for _ in range(repeats):
        start = time.perf_counter()
        plan = plan_trials(nodes, demand, requested=requested)
        times.append(time.perf_counter() - start)
    assert plan is not None
    workers = sum(len(p.worker_nodes) for p in plan.placements)
    return {
        "strategy": demand.strategy,
        "driver_node": demand.driver_node,
        "requested": requested,
        "nodes": len(nodes),
        "capacity": plan.capacity,
        "trials": plan.max_concurrent_trials,
        "worker_bundles": workers,
        "driver_bundles": len(plan.placements),
        "repeats": repeats,
        "min_s": min(times),
        "median_s": statistics.median(times),
        "max_s": max(times),
        "under_budget": statistics.median(times) < BUDGET_S,
    }


def profile_one(nodes: list[Node], demand: TrialDemand, requested, top: int = 12) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    plan_trials(nodes, demand, requested=requested)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    text = out.getvalue()
    return text[text.index("ncalls") - 3 :] if "ncalls" in text else text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile the slowest configuration")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    command, machine = print_header()
    print(
        f"cluster: {NODES} x {GPU_NODE['CPU']} CPU / {GPU_NODE['GPU']} GPU / {GPU_NODE['memory'] // GB} GB "
        f"(+ CPU-only head {HEAD_NODE['CPU']} CPU for driver_node=head); trial: {NUM_WORKERS} x {WORKER} "
        f"+ {WORKER_MEMORY // GB} GB, driver {DRIVER} + {DRIVER_MEMORY // GB} GB"
    )
    print(f"timing plan_trials(), whole call, {args.repeats} repeats each; budget {BUDGET_S:g} s\n")

    header = (
        f"{'driver_node':<11} {'strategy':<13} {'requested':>9} {'capacity':>8} {'trials':>6} {'workers':>7} "
        f"{'min s':>7} {'median s':>8}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for driver_node in ("any", "head"):
        nodes = make_cluster(driver_node)
        for strategy in STRATEGIES:
            for requested in (REQUESTED, "auto"):
                row = time_one(nodes, make_demand(strategy, driver_node), requested, args.repeats)
                rows.append(row)
                flag = "" if row["under_budget"] else "  OVER BUDGET"
                print(
                    f"{driver_node:<11} {strategy:<13} {str(requested):>9} {row['capacity']:>8} {row['trials']:>6} "
                    f"{row['worker_bundles']:>7} {row['min_s']:>7.3f} {row['median_s']:>8.3f}{flag}",
                    flush=True,
                )

    ten_k = [r for r in rows if r["requested"] == REQUESTED]
    over = [r for r in ten_k if not r["under_budget"]]
    print()
    if over:
        for r in over:
            print(
                f"OVER BUDGET at 10,000 worker bundles: {r['strategy']} (driver_node={r['driver_node']}) "
                f"median {r['median_s']:.3f} s = {r['median_s'] / BUDGET_S:.2f}x the {BUDGET_S:g} s budget"
            )
    else:
        print(f"every strategy plans 10,000 worker bundles in under {BUDGET_S:g} s")

    profile = None
    if args.profile:
        slowest = max(ten_k, key=lambda r: r["median_s"])
        nodes = make_cluster(slowest["driver_node"])
        print(
            f"\ncProfile of the slowest: {slowest['strategy']}, driver_node={slowest['driver_node']}, "
            f"requested={REQUESTED}"
        )
        profile = profile_one(nodes, make_demand(slowest["strategy"], slowest["driver_node"]), REQUESTED)
        print(profile)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "planner",
                "command": command,
                "machine": machine,
                "budget_s": BUDGET_S,
                "cluster": {"gpu_nodes": NODES, "gpu_node": GPU_NODE, "head_node_for_driver_node_head": HEAD_NODE},
                "trial": {
                    "num_workers": NUM_WORKERS,
                    "worker": WORKER,
                    "worker_memory": WORKER_MEMORY,
                    "driver": DRIVER,
                    "driver_memory": DRIVER_MEMORY,
                },
                "results": rows,
                "over_budget_at_10k": [f"{r['strategy']}/{r['driver_node']}" for r in over],
                "profile_of_slowest": profile,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
