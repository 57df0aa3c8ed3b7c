"""A conditional space on the digits MLP: Optuna TPE against random in epochs to val_acc 0.97.

The space: an optimizer choice and the parameters that exist only for one of them,

  optimizer: {type: choice, values: [sgd, adam]}
  momentum:  {type: float, low: 0.0, high: 0.99, when: {optimizer: sgd}}
  beta1:     {type: float, low: 0.8, high: 0.99, when: {optimizer: adam}}

with the learning rate over both optimizers' useful ranges (log 1e-4 to 0.3), and
digits_quick.yaml's hidden, layers, dropout and batch_size. A trial whose optimizer is sgd
has no beta1 in its config, one with adam no momentum; the script checks every trial's
config for it and records the result.

Two ways, each through hpsearch's public API (``hpsearch.run`` of a spec dict); each way
runs in a Python process of its own (its own embedded Ray), its seeds one after another in
it, so Ray's and the process's start-up are paid once per way (``_common.run_group``):

  tpe     ``searcher: {type: optuna, sampler: tpe, n_startup_trials: S}``: Optuna's TPE on a
          define-by-run space, so it models momentum only over the sgd trials
  random  ``searcher: {type: random}``: Tune's own sampling of the conditional space

Both: metric val_loss (min), the FIFO scheduler (the same epoch budget, trials x epochs),
the searcher and the model seeded by the seed, 1-worker trials (0.9 CPU and a 0.1-CPU
driver: 2 at once on 2 CPUs). Epochs to target are counted as ``search_quality.py`` counts
them (its ``to_target``, reused): every epoch any trial reported, in the order reported, up
to and including the first with val_acc >= 0.97; a seed that never reaches it counts as
infinite in the median.

Run (JSON under benchmarks/results/; times on a quiet 2-CPU machine):
  python benchmarks/conditional.py            # 3 seeds x 2 ways, 6 trials x 20 epochs: ~8 min quiet (12 min measured at load 4, less a hang)
  python benchmarks/conditional.py --quick    # a smoke run: 1 seed, 2 trials x 3 epochs
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
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

RESULTS = ROOT / "benchmarks" / "results" / "conditional.json"
BASE_SPEC = ROOT / "search_spaces" / "digits_quick.yaml"
LABELS = {"tpe": "Optuna TPE", "random": "random"}
#: Parameter -> the optimizer it exists for.
CONDITIONAL = {"momentum": "sgd", "beta1": "adam"}
SPACE: dict[str, Any] = {
    "optimizer": {"type": "choice", "values": ["sgd", "adam"]},
    "momentum": {"type": "float", "low": 0.0, "high": 0.99, "when": {"optimizer": "sgd"}},
    "beta1": {"type": "float", "low": 0.8, "high": 0.99, "when": {"optimizer": "adam"}},
    "lr": {"type": "float", "low": 1.0e-4, "high": 0.3, "log": True},
    "hidden": {"type": "choice", "values": [32, 64, 128, 256]},
    "layers": {"type": "int", "low": 1, "high": 3},
    "dropout": {"type": "float", "low": 0.0, "high": 0.4, "step": 0.1},
    "batch_size": {"type": "choice", "values": [32, 64, 128]},
}
#: Full size: 3 seeds x 2 ways x 6 trials of 20 epochs (8 minutes here); --quick: 1 seed, 2 trials of 3 epochs.
SEEDS, TRIALS, EPOCHS, TARGET = 3, 6, 20, 0.97
QUICK = {"seeds": 1, "trials": 2, "epochs": 3}


def searcher_for(method: str, seed: int, trials: int) -> dict[str, Any]:
    """TPE with a third of the trials random before its model takes over, or random."""
    if method == "tpe":
        return {"type": "optuna", "sampler": "tpe", "seed": seed, "n_startup_trials": max(1, trials // 3)}
    if method == "random":
        return {"type": "random", "seed": seed}
    raise ValueError(f"unknown method {method!r}; choose from {', '.join(LABELS)}")


def spec_for(method: str, seed: int, trials: int, epochs: int, storage: str) -> dict[str, Any]:
    """The search of one way and seed, as a spec dict: digits_quick.yaml with the conditional space."""
    import yaml

    spec = yaml.safe_load(BASE_SPEC.read_text())
    spec.update(
        name=f"cond-{method}-seed{seed}",
        num_samples=trials,
        search_space={**json.loads(json.dumps(SPACE)), "epochs": epochs, "seed": seed, "checkpoint_every": epochs},
        searcher=searcher_for(method, seed, trials),
        scheduler={"type": "fifo"},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.9}},
        resources={"driver_cpus": 0.1},
        storage_path=storage,
    )
    return spec


def condition_violations(configs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Each trial config where a conditional parameter is present without its optimizer or absent with it."""
    found = []
    for i, config in enumerate(configs):
        for name, optimizer in CONDITIONAL.items():
            value = config.get(name)
            present = value is not None and not (isinstance(value, float) and math.isnan(value))
            if present != (config.get("optimizer") == optimizer):
                state = "present" if present else "absent"
                found.append(f"trial {i}: {name} {state} with optimizer={config.get('optimizer')!r}")
    return found


def run_way(job: dict[str, Any]) -> dict[str, Any]:
    """One search in this process; every report's time and val_acc, and each trial's conditional parameters."""
    import pandas as pd

    import hpsearch

    spec = spec_for(job["method"], job["seed"], job["trials"], job["epochs"], job["storage"])
    searched = run_search(spec)
    results = hpsearch.load_results(searched["experiment_dir"])
    reports = experiment_reports(searched["experiment_dir"], searched["start"])
    columns = [c for c in ("optimizer", *CONDITIONAL) if c in results.trials]
    configs = [  # an absent parameter is an empty cell of `trials`: left out, as it is from the trial's config
        {k: v.item() if hasattr(v, "item") else v for k, v in row.items() if not pd.isna(v)}
        for row in results.trials[columns].to_dict("records")
    ]
    return {
        "wall_s": searched["wall_s"],
        "ray_start_s": searched["ray_start_s"],
        "stopped": searched["stopped"],
        "trials": len(results.trials),
        "finished": int((results.trials["status"] == "finished").sum()),
        "epochs_run": len(reports),
        "reports": metric_reports(reports, "val_acc"),
        "configs": configs,
        "condition_violations": condition_violations(configs),
    }


def optimizer_counts(runs: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per way, how many trials used each optimizer (over every seed)."""
    out: dict[str, dict[str, int]] = {}
    for run in runs:
        counts = out.setdefault(run["method"], {})
        for config in run["configs"]:
            counts[str(config.get("optimizer"))] = counts.get(str(config.get("optimizer")), 0) + 1
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 seed, 2 trials x 3 epochs")
    parser.add_argument("--seeds", type=int, help=f"seeds 0..N-1 (default {SEEDS})")
    parser.add_argument("--trials", type=int, help=f"trials per way and seed (default {TRIALS})")
    parser.add_argument("--epochs", type=int, help=f"epochs per trial (default {EPOCHS})")
    parser.add_argument("--target", type=float, default=TARGET, help="val_acc to reach (default %(default)s)")
    parser.add_argument("--methods", help=f"comma-separated subset of {','.join(LABELS)}")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON record (default %(default)s)")
    parser.add_argument("--jobs", help=argparse.SUPPRESS)  # internal: a way's searches, JSON in and out
    args = parser.parse_args()

    if args.jobs:
        print(json.dumps(run_here(json.loads(args.jobs), run_way)))
        return 0

    sizes = sizes_from(args, {"seeds": SEEDS, "trials": TRIALS, "epochs": EPOCHS}, QUICK)
    methods = methods_from(parser, args, LABELS)

    command, machine = print_header()
    print(
        f"work: digits MLP, optimizer sgd|adam with momentum (sgd) and beta1 (adam), metric val_loss, FIFO; "
        f"{sizes['trials']} trials x {sizes['epochs']} epochs per way and seed, seeds 0..{sizes['seeds'] - 1}; "
        f"target val_acc >= {args.target}\n"
    )
    logs = logs_folder("conditional")
    runs = []
    began = time.perf_counter()
    for method in methods:  # a process (and an embedded Ray) per way, its seeds one after another
        jobs = [
            {"method": method, "seed": seed, "trials": sizes["trials"], "epochs": sizes["epochs"]}
            for seed in range(sizes["seeds"])
        ]
        with tempfile.TemporaryDirectory(prefix="hpsearch-conditional-", ignore_cleanup_errors=True) as storage:
            group = run_group(__file__, [{**job, "storage": storage} for job in jobs], logs / f"{method}.log")
        for run in group:
            if not run["reports"]:
                raise SystemExit(
                    f"{method} seed {run['seed']}: no trial reported val_acc; its log: {logs}/{method}.log"
                )
            runs.append(run)
            epochs, _ = sq.to_target(run["reports"], args.target)
            reached = f"target at epoch {epochs}" if epochs else "target not reached"
            bad = f"; CONDITIONS VIOLATED: {run['condition_violations']}" if run["condition_violations"] else ""
            print(
                f"[{time.perf_counter() - began:6.0f} s] {method:<6} seed {run['seed']} {run['finished']}/{run['trials']} "
                f"finished, {run['epochs_run']} epochs in {run['wall_s']:.1f} s; {reached}; best val_acc "
                f"{max(a for _, a in run['reports']):.3f}{bad}{stopped_note(run)}",
                flush=True,
            )
    total_s = time.perf_counter() - began

    summary = sq.summarize(runs, methods, args.target)
    ratio = sq.ratio(
        summary.get("tpe", {}).get("median_epochs_to_target"), summary.get("random", {}).get("median_epochs_to_target")
    )
    counts = optimizer_counts(runs)
    violations = [v for r in runs for v in r["condition_violations"]]
    print()
    print_table(*to_target_rows(summary, LABELS, {m: sizes["trials"] * sizes["epochs"] for m in methods}))
    print(f"(epochs to val_acc >= {args.target}: every epoch any trial reported, in order; '-': not reached)")
    print(f"median epochs to target, TPE / random: {'-' if ratio is None else f'{ratio:.2f}'}")
    print("trials per optimizer: " + "; ".join(f"{LABELS[m]} {c}" for m, c in counts.items()))
    print(
        "conditional parameters present exactly where their condition holds: "
        + ("yes, in every trial" if not violations else f"NO: {violations}")
    )
    print(f"whole benchmark: {total_s:.0f} s")
    write_results(
        args.out,
        {
            "benchmark": "conditional",
            "command": command,
            "machine": machine,
            "date": machine["date"],
            "wall_s": total_s,
            "target_val_acc": args.target,
            "sizes": sizes,
            "spec_seed0": {m: spec_for(m, 0, sizes["trials"], sizes["epochs"], "<temporary>") for m in methods},
            "summary": summary,
            "tpe_vs_random_median_epochs": ratio,
            "trials_per_optimizer": counts,
            "condition_violations": violations,
            "runs": runs,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
