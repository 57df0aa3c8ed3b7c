"""Warm start on the digits MLP: epochs to val_acc 0.97 of a search seeded by an earlier one, against a cold one.

Per seed s, three searches, each through hpsearch's public API (``hpsearch.run`` of a spec
dict), one after another in a Python process of the seed's own (its own embedded Ray, so
Ray's and the process's start-up are paid once per seed: ``_common.run_group``), in one
temporary storage folder:

  first  the earlier search: Optuna TPE with searcher seed 1000 + s (a different seed from
         the second searches', so that the cold search does not repeat it), TRIALS trials
  warm   Optuna TPE, seed s, ``warm_start: {from: <the first search's folder>}``: the first
         search's ended trials seed the sampler (they are not run again), TRIALS trials
  cold   the same search without ``warm_start``: same seed, same budget

Every search: the digits_quick.yaml space and metric (val_loss, min), the FIFO scheduler
(every trial runs all its epochs: warm and cold both consume TRIALS x EPOCHS epochs),
TPE with N_STARTUP random trials before its model takes over (the warm search's seeded
trials count towards them, as Optuna counts the trials of its study), the model seeded by
s, 1-worker trials (0.9 CPU and a 0.1-CPU driver: 2 at once on 2 CPUs).

Epochs to target, as ``search_quality.py`` counts them (its ``to_target``, reused): every
epoch any trial of the search reported, in the order reported (the ``time`` of each trial's
``train/<trial_id>/hpsearch_history.jsonl``), up to and including the first report with
val_acc >= 0.97; a search that never reaches it counts as infinite in the median over
seeds. The warm search's count starts at its own first trial: the first search's epochs are
spent already (they are listed apart, as the first search's own epochs to target).

Run (JSON under benchmarks/results/; times on a quiet 2-CPU machine):
  python benchmarks/warm_start.py            # 3 seeds x 3 searches, 4 trials x 20 epochs each: ~8 min quiet (13 min measured at load 3-7)
  python benchmarks/warm_start.py --quick    # a smoke run: 1 seed, 2 trials x 3 epochs each
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks import search_quality as sq  # noqa: E402
from benchmarks._common import (  # noqa: E402
    experiment_reports,
    logs_folder,
    metric_reports,
    print_table,
    run_group,
    run_here,
    run_search,
    sizes_from,
    stopped_note,
    to_target_rows,
    write_results,
)
from benchmarks._machine import print_header  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "warm_start.json"
BASE_SPEC = ROOT / "search_spaces" / "digits_quick.yaml"
ROLES = ("first", "warm", "cold")
LABELS = {"first": "first search (seed 1000+s)", "warm": "warm-started from it", "cold": "cold (same seed, budget)"}
FIRST_SEED_OFFSET = 1000
N_STARTUP = 3
#: Full size: 3 seeds x (first, warm, cold) x 4 trials of 20 epochs (8 minutes here); --quick: 1 seed, 2 trials of 3.
SEEDS, TRIALS, EPOCHS, TARGET = 3, 4, 20, 0.97
QUICK = {"seeds": 1, "trials": 2, "epochs": 3}


def spec_for(role: str, seed: int, trials: int, epochs: int, storage: str) -> dict[str, Any]:
    """One search of a seed, as a spec dict: digits_quick.yaml, TPE, FIFO; ``warm`` seeded from ``first``."""
    import yaml

    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; choose from {', '.join(ROLES)}")
    spec = yaml.safe_load(BASE_SPEC.read_text())
    space = copy.deepcopy(spec["search_space"])
    space.update(epochs=epochs, seed=seed, checkpoint_every=epochs)
    searcher_seed = seed + FIRST_SEED_OFFSET if role == "first" else seed
    spec.update(
        name=experiment_name(role, seed),
        num_samples=trials,
        search_space=space,
        searcher={"type": "optuna", "sampler": "tpe", "seed": searcher_seed, "n_startup_trials": N_STARTUP},
        scheduler={"type": "fifo"},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.9}},
        resources={"driver_cpus": 0.1},
        storage_path=storage,
    )
    if role == "warm":
        spec["warm_start"] = {"from": str(Path(storage) / experiment_name("first", seed))}
    return spec


def experiment_name(role: str, seed: int) -> str:
    return f"ws-{role}-seed{seed}"


def run_role(job: dict[str, Any]) -> dict[str, Any]:
    """One search in this process; every report's time and val_acc (``search_quality.Report``s)."""
    import hpsearch

    spec = spec_for(job["method"], job["seed"], job["trials"], job["epochs"], job["storage"])
    searched = run_search(spec)
    results = hpsearch.load_results(searched["experiment_dir"])
    reports = experiment_reports(searched["experiment_dir"], searched["start"])
    return {
        "wall_s": searched["wall_s"],
        "ray_start_s": searched["ray_start_s"],
        "stopped": searched["stopped"],
        "trials": len(results.trials),
        "finished": int((results.trials["status"] == "finished").sum()),
        "epochs_run": len(reports),
        "reports": metric_reports(reports, "val_acc"),
    }


def compare(summary: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Warm against cold: the ratio of their median epochs to target, and per seed who got there first."""
    warm, cold = summary["warm"], summary["cold"]
    per_seed = []
    for w, c in zip(warm["epochs_to_target"], cold["epochs_to_target"]):
        per_seed.append("tie" if w == c else "warm" if c is None or (w is not None and w < c) else "cold")
    return {
        "warm_vs_cold_median_epochs": sq.ratio(warm["median_epochs_to_target"], cold["median_epochs_to_target"]),
        "sooner_per_seed": per_seed,
        "warm_sooner_in": per_seed.count("warm"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 seed, 2 trials x 3 epochs per search")
    parser.add_argument("--seeds", type=int, help=f"seeds 0..N-1 (default {SEEDS})")
    parser.add_argument("--trials", type=int, help=f"trials per search (default {TRIALS})")
    parser.add_argument("--epochs", type=int, help=f"epochs per trial (default {EPOCHS})")
    parser.add_argument("--target", type=float, default=TARGET, help="val_acc to reach (default %(default)s)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON record (default %(default)s)")
    parser.add_argument("--jobs", help=argparse.SUPPRESS)  # internal: a seed's searches, JSON in and out
    args = parser.parse_args()

    if args.jobs:
        print(json.dumps(run_here(json.loads(args.jobs), run_role)))
        return 0

    sizes = sizes_from(args, {"seeds": SEEDS, "trials": TRIALS, "epochs": EPOCHS}, QUICK)
    command, machine = print_header()
    print(
        f"work: digits MLP (digits_quick.yaml's space, metric val_loss), Optuna TPE ({N_STARTUP} startup trials), "
        f"FIFO; per seed a first search, then warm and cold ones, {sizes['trials']} trials x {sizes['epochs']} "
        f"epochs each; seeds 0..{sizes['seeds'] - 1}; target val_acc >= {args.target}\n"
    )
    logs = logs_folder("warm-start")
    runs = []
    began = time.perf_counter()
    for seed in range(sizes["seeds"]):  # a process (and an embedded Ray) per seed: first, then warm and cold
        jobs = [{"method": role, "seed": seed, "trials": sizes["trials"], "epochs": sizes["epochs"]} for role in ROLES]
        with tempfile.TemporaryDirectory(prefix="hpsearch-warm-start-", ignore_cleanup_errors=True) as storage:
            group = run_group(__file__, [{**job, "storage": storage} for job in jobs], logs / f"seed{seed}.log")
        for run in group:
            if not run["reports"]:
                raise SystemExit(
                    f"{run['method']} seed {seed}: no trial reported val_acc; its log: {logs}/seed{seed}.log"
                )
            runs.append(run)
            epochs, _ = sq.to_target(run["reports"], args.target)
            reached = f"target at epoch {epochs}" if epochs else "target not reached"
            print(
                f"[{time.perf_counter() - began:6.0f} s] seed {seed} {run['method']:<5} {run['finished']}/{run['trials']} "
                f"finished, {run['epochs_run']} epochs in {run['wall_s']:.1f} s; {reached}; best val_acc "
                f"{max(a for _, a in run['reports']):.3f}{stopped_note(run)}",
                flush=True,
            )
    total_s = time.perf_counter() - began

    summary = sq.summarize(runs, ROLES, args.target)
    comparison = compare(summary)
    print()
    budget = {role: sizes["trials"] * sizes["epochs"] for role in ROLES}
    print_table(*to_target_rows(summary, LABELS, budget))
    ratio = comparison["warm_vs_cold_median_epochs"]
    print(
        f"(epochs to val_acc >= {args.target}: every epoch any trial of that search reported, in order; '-': not reached)"
    )
    print(
        f"median epochs to target, warm / cold: {'-' if ratio is None else f'{ratio:.2f}'}; warm got there sooner "
        f"in {comparison['warm_sooner_in']} of {len(comparison['sooner_per_seed'])} seeds "
        f"({', '.join(comparison['sooner_per_seed'])})"
    )
    print(f"whole benchmark: {total_s:.0f} s")
    write_results(
        args.out,
        {
            "benchmark": "warm_start",
            "command": command,
            "machine": machine,
            "date": machine["date"],
            "wall_s": total_s,
            "target_val_acc": args.target,
            "sizes": sizes,
            "spec_seed0": {r: spec_for(r, 0, sizes["trials"], sizes["epochs"], "<temporary>") for r in ROLES},
            "summary": summary,
            **comparison,
            "runs": runs,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
