"""Population-based training on the digits MLP with SGD: PBT against ASHA + random and random + FIFO.

The work: ``search_spaces/digits_pbt.yaml`` (SGD with momentum 0.9, the learning rate searched
log-uniformly in [1e-3, 0.3], everything else fixed), where the learning rate's schedule
matters: a large rate learns fast early and stalls later, a small one the reverse. Per seed s,
three searches through hpsearch's public API (``hpsearch.run`` of a spec dict), one after
another in a Python process of the seed's own (``_common.run_group``):

  pbt     scheduler pbt (perturbation every INTERVAL epochs, quantile 0.25, lr mutated x1.2/x0.8
          or resampled with probability 0.25), random initial population, searcher seed s
  asha    random search + ASHA (grace INTERVAL, reduction 2, max_t EPOCHS), searcher seed s
  random  random search + FIFO, searcher seed s

Each way starts TRIALS trials of at most EPOCHS epochs (the same budget: TRIALS x EPOCHS;
ASHA stops some early and uses less), 1-worker trials as the shipped spec has them (0.4 CPU + a
0.05-CPU driver: all 4 at once on 2 CPUs, so PBT never pauses a trial only to let another run);
the model's seed is s in every way.

Figures per way: the best val_acc any report reached (median over seeds), the epochs to
val_acc >= TARGET as ``search_quality.py`` counts them (every epoch any trial reported, in the
order reported, up to the first report at the target; a seed that never reaches it counts as
infinite in the median), the epochs run. For PBT also: exploits, and each exploit's cost
(``Results.lineage``'s ``exploit_s``: from the pause the scheduler decided to the trial's next
report, i.e. the nested run's teardown, a new trial actor, a new nested run from the donor's
checkpoint and its first epoch).

Run (JSON under benchmarks/results/):
  python benchmarks/pbt.py            # 3 seeds x 3 ways, 4 trials x 12 epochs each
  python benchmarks/pbt.py --quick    # a smoke run: 1 seed, 2 trials x 4 epochs
"""

from __future__ import annotations

import argparse
import json
import statistics
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
    methods_from,
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

RESULTS = ROOT / "benchmarks" / "results" / "pbt.json"
BASE_SPEC = ROOT / "search_spaces" / "digits_pbt.yaml"
WAYS = ("pbt", "asha", "random")
LABELS = {"pbt": "PBT (random population)", "asha": "random + ASHA", "random": "random + FIFO"}
#: Full size: 3 seeds x 3 ways x 4 trials of 12 epochs, a perturbation every 3; --quick: 1 seed, 2 trials of 4.
SEEDS, TRIALS, EPOCHS, INTERVAL, TARGET = 3, 4, 12, 3, 0.97
QUICK = {"seeds": 1, "trials": 2, "epochs": 4}


def spec_for(way: str, seed: int, trials: int, epochs: int, storage: str) -> dict[str, Any]:
    """One search of a seed, as a spec dict: digits_pbt.yaml with the way's searcher and scheduler."""
    import yaml

    if way not in WAYS:
        raise ValueError(f"unknown way {way!r}; choose from {', '.join(WAYS)}")
    spec = yaml.safe_load(BASE_SPEC.read_text())
    interval = min(INTERVAL, max(1, epochs // 2))
    spec["search_space"].update(epochs=epochs, seed=seed)
    if way == "pbt":
        spec["scheduler"]["perturbation_interval"] = interval
    elif way == "asha":
        spec["scheduler"] = {"type": "asha", "max_t": epochs, "grace_period": interval, "reduction_factor": 2}
    else:
        spec["scheduler"] = {"type": "fifo"}
    spec.update(
        name=f"pbt-bench-{way}-seed{seed}",
        num_samples=trials,
        searcher={"type": "random", "seed": seed},
        storage_path=storage,
    )
    return spec


def run_way(job: dict[str, Any]) -> dict[str, Any]:
    """One search in this process: every report's time and val_acc, and the exploits' costs."""
    import hpsearch

    spec = spec_for(job["method"], job["seed"], job["trials"], job["epochs"], job["storage"])
    searched = run_search(spec)
    results = hpsearch.load_results(searched["experiment_dir"])
    reports = experiment_reports(searched["experiment_dir"], searched["start"])
    lineage = results.lineage
    costs = [float(s) for s in lineage["exploit_s"].dropna()]
    return {
        "wall_s": searched["wall_s"],
        "ray_start_s": searched["ray_start_s"],
        "stopped": searched["stopped"],
        "trials": len(results.trials),
        "finished": int((results.trials["status"] == "finished").sum()),
        "epochs_run": len(reports),
        "reports": metric_reports(reports, "val_acc"),
        "exploits": len(lineage),
        "exploit_s": costs,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 seed, 2 trials x 4 epochs per search")
    parser.add_argument("--seeds", type=int, help=f"seeds 0..N-1 (default {SEEDS})")
    parser.add_argument("--trials", type=int, help=f"trials per search (default {TRIALS})")
    parser.add_argument("--epochs", type=int, help=f"epochs per trial (default {EPOCHS})")
    parser.add_argument("--methods", help=f"comma-separated ways (default: {','.join(WAYS)})")
    parser.add_argument("--target", type=float, default=TARGET, help="val_acc to reach (default %(default)s)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON record (default %(default)s)")
    parser.add_argument("--jobs", help=argparse.SUPPRESS)  # internal: a seed's searches, JSON in and out
    args = parser.parse_args()

    if args.jobs:
        print(json.dumps(run_here(json.loads(args.jobs), run_way)))
        return 0

    sizes = sizes_from(args, {"seeds": SEEDS, "trials": TRIALS, "epochs": EPOCHS}, QUICK)
    ways = methods_from(parser, args, WAYS)
    command, machine = print_header()
    print(
        f"work: digits MLP, SGD (momentum 0.9), lr searched in [1e-3, 0.3] (log); ways {', '.join(ways)}; "
        f"{sizes['trials']} trials x {sizes['epochs']} epochs per search; seeds 0..{sizes['seeds'] - 1}; "
        f"target val_acc >= {args.target}\n"
    )
    logs = logs_folder("pbt")
    runs = []
    began = time.perf_counter()
    for seed in range(sizes["seeds"]):
        jobs = [{"method": w, "seed": seed, "trials": sizes["trials"], "epochs": sizes["epochs"]} for w in ways]
        with tempfile.TemporaryDirectory(prefix="hpsearch-pbt-", ignore_cleanup_errors=True) as storage:
            group = run_group(__file__, [{**job, "storage": storage} for job in jobs], logs / f"seed{seed}.log")
        for run in group:
            if not run["reports"]:
                raise SystemExit(
                    f"{run['method']} seed {seed}: no trial reported val_acc; its log: {logs}/seed{seed}.log"
                )
            runs.append(run)
            epochs, _ = sq.to_target(run["reports"], args.target)
            reached = f"target at epoch {epochs}" if epochs else "target not reached"
            exploits = f"; {run['exploits']} exploits" if run["method"] == "pbt" else ""
            print(
                f"[{time.perf_counter() - began:6.0f} s] seed {seed} {run['method']:<6} {run['finished']}/{run['trials']} "
                f"finished, {run['epochs_run']} epochs in {run['wall_s']:.1f} s; {reached}; best val_acc "
                f"{max(a for _, a in run['reports']):.3f}{exploits}{stopped_note(run)}",
                flush=True,
            )
    total_s = time.perf_counter() - began

    summary = sq.summarize(runs, ways, args.target)
    costs = [s for run in runs if run["method"] == "pbt" for s in run["exploit_s"]]
    exploit = {
        "exploits": sum(run["exploits"] for run in runs if run["method"] == "pbt"),
        "timed": len(costs),
        "median_s": statistics.median(costs) if costs else None,
        "min_s": min(costs) if costs else None,
        "max_s": max(costs) if costs else None,
    }
    print()
    print_table(*to_target_rows(summary, LABELS, {w: sizes["trials"] * sizes["epochs"] for w in ways}))
    print(
        f"(epochs to val_acc >= {args.target}: every epoch any trial of that search reported, in order; '-': not reached)"
    )
    for way in ways:
        run_epochs = [run["epochs_run"] for run in runs if run["method"] == way]
        print(f"{LABELS[way]}: epochs run per seed {run_epochs}")
    if exploit["median_s"] is not None:
        print(
            f"PBT exploits: {exploit['exploits']} ({exploit['timed']} timed: the trial reported again); "
            f"pause to next report median {exploit['median_s']:.1f} s (min {exploit['min_s']:.1f}, max {exploit['max_s']:.1f})"
        )
    print(f"whole benchmark: {total_s:.0f} s")
    write_results(
        args.out,
        {
            "benchmark": "pbt",
            "command": command,
            "machine": machine,
            "date": machine["date"],
            "wall_s": total_s,
            "target_val_acc": args.target,
            "sizes": sizes,
            "spec_seed0": {w: spec_for(w, 0, sizes["trials"], sizes["epochs"], "<temporary>") for w in ways},
            "summary": summary,
            "exploit_cost": exploit,
            "runs": runs,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
