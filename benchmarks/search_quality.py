"""Search quality per unit of compute: best validation accuracy against epochs and wall time.

The work: the digits MLP of ``search_spaces/digits_quick.yaml`` (6 searched hyperparameters:
lr, weight_decay, hidden, layers, dropout, batch_size; up to 10 epochs a trial), searched
four ways at the same budget of epochs, for several seeds:

  tpe_asha       hpsearch: Optuna TPE + ASHA (the shipped spec's searcher and scheduler)
  hyperopt_asha  hpsearch: HyperOpt TPE + the same ASHA
  random_fifo    hpsearch: random search, every trial to its last epoch
  optuna_plain   plain Optuna in one process, no Ray: TPE + SuccessiveHalvingPruner on
                 ASHA's rungs -- the tool a user would pick instead

hpsearch ways go through the public API (``hpsearch.load_spec`` of the shipped spec with
``--set``-style overrides, ``hpsearch.run``, ``hpsearch.load_results``). Every way and seed
runs in a Python process of its own (its own embedded Ray) with its own temporary storage.

Definitions:
  budget           B epochs per way and seed. random_fifo runs B / max-epochs trials. The
                   ASHA ways may start up to B trials and are stopped with the signal Tune takes
                   as "stop" (SIGUSR1: trials end gracefully) once B epochs are reported;
                   plain Optuna stops at its B-th epoch. Reports after the B-th are not counted.
  epochs consumed  every epoch any trial reported, in the order reported: an anytime curve.
                   hpsearch's report times are those of ``train/<trial_id>/hpsearch_history.jsonl``
                   in the experiment folder (Tune's own timestamp has whole-second steps).
  wall time        from the start of the search (hpsearch: Ray's start-up included, by
                   ``hpsearch.runtime.nodes.connect.connect`` as ``hpsearch.run`` does it; plain Optuna: loading
                   the data) to the report.
  to target        the first report with val_acc >= --target (0.97); medians over seeds count
                   a seed that never reached it as infinite.
  per-trial overhead  o = (P * W - E * s) / N for an hpsearch search of N trials and E epochs
                   that took W seconds after Ray's start with P trials at once, s being plain
                   Optuna's seconds per epoch in the same seed: the slot time a trial takes
                   beyond its training (start-up, reporting, teardown, scheduling gaps). P
                   parallel trials then take (t + o) / P per trial against plain Optuna's t, and
                   overtake it once a trial trains t > o / (P - 1) -- if plain Optuna gains
                   nothing from the extra cores within a trial.

Fairness: every way searches val_loss (the shipped spec's metric) over the same space, with
the model seeded by the benchmark seed; model-based searchers start with 4 random trials;
ASHA and the pruner use grace 2, reduction factor 2. hpsearch trials have 1 worker (0.9 CPU
and a 0.1-CPU driver: a trial per CPU, 2 at once here), so each runs plain Optuna's
single-threaded loop on the same batches -- 2-worker DDP on a model this small only adds
all-reduces and start-up. Plain Optuna runs one trial at a time, with 1 torch thread on the
shipped MLP (too small to gain from more) and all CPUs on the heavy one. hpsearch checkpoints
only a trial's last epoch (plain Optuna saves nothing): the ratios price distribution, not
checkpoints.

``--heavy``: the same MLP 3072 wide (so 5 searched hyperparameters), 3-4 layers, batch 32 or
64, up to 12 epochs: a full trial trains 1-2.5 minutes on one CPU (4.5-12 s an epoch; the run
prints the measured median). B = 80, 1 seed; plain Optuna uses every CPU (torch threads), and
hpsearch runs TPE + ASHA two ways: tpe_asha as above (a trial per CPU, 1 thread each), and

  tpe_asha_whole  one trial at a time, its worker given every CPU but the driver's 0.1 and as
                  many torch threads as plain Optuna (the example's ``threads`` key): on a
                  model that gains from threads, what a user should configure.

Besides time to target it reports the time to consume the whole budget, which does not hang
on one lucky trial, and tpe_asha_whole's per-trial overhead o (same threads as plain Optuna,
so o is measured there too).

Run (JSON and a plot under benchmarks/results/; times on a quiet 2-CPU machine):
  python benchmarks/search_quality.py            # 3 seeds x 4 ways, B = 80: ~25 min
  python benchmarks/search_quality.py --heavy    # ~25 min
  python benchmarks/search_quality.py --quick    # a smoke run: 1 seed, B = 20: ~3 min (--heavy --quick: B = 16)
  python benchmarks/search_quality.py --rescore benchmarks/results/search_quality.json --target 0.96
                                                 # the same runs' figures at another target, in a second
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._common import digits_epochs, interrupt_when, logs_folder, run_isolated  # noqa: E402
from benchmarks._machine import print_header  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
BASE_SPEC = ROOT / "search_spaces" / "digits_quick.yaml"
GRACE, REDUCTION, STARTUP_TRIALS = 2, 2, 4
LABELS = {
    "tpe_asha": "hpsearch Optuna TPE + ASHA",
    "hyperopt_asha": "hpsearch HyperOpt + ASHA",
    "random_fifo": "hpsearch random + FIFO",
    "optuna_plain": "plain Optuna TPE + SH pruner",
    "tpe_asha_whole": "hpsearch TPE + ASHA, 1 trial x all CPUs",
}
SEARCHERS = {
    "tpe_asha": {"type": "optuna", "sampler": "tpe", "n_startup_trials": STARTUP_TRIALS},
    "hyperopt_asha": {"type": "hyperopt", "n_initial_points": STARTUP_TRIALS},
    "random_fifo": {"type": "random"},
}
SEARCHERS["tpe_asha_whole"] = SEARCHERS["tpe_asha"]  # the same search; only the trial's resources differ
#: hpsearch ways with ASHA, compared with plain Optuna
HPSEARCH_ASHA = ("tpe_asha", "tpe_asha_whole")
HEAVY_SPACE = {
    "search_space.hidden": 3072,
    "search_space.layers": {"type": "int", "low": 3, "high": 4},
    "search_space.batch_size": {"type": "choice", "values": [32, 64]},
}
NOT_REACHED = "n/a (the median seed did not reach the target)"
Report = tuple[float, float]  # (seconds since the search started, val_acc), one per epoch consumed


@dataclass(frozen=True)
class Part:
    """One comparison: which ways, how big, and the defaults its flags start from."""

    name: str
    methods: tuple[str, ...]
    budget: int
    seeds: int
    epochs: int
    optuna_threads: int
    quick_budget: int
    quick_epochs: int


PARTS = {
    "shipped": Part("shipped", ("tpe_asha", "hyperopt_asha", "random_fifo", "optuna_plain"), 80, 3, 10, 1, 20, 10),
    "heavy": Part("heavy", ("tpe_asha", "tpe_asha_whole", "optuna_plain"), 80, 1, 12, os.cpu_count() or 1, 16, 4),
}


def spec_overrides(method: str, seed: int, budget: int, epochs: int, heavy: bool) -> list[str]:
    """The ``--set`` overrides of the shipped spec for one way and seed (JSON is YAML)."""
    settings: dict[str, Any] = {
        "name": f"{method}-seed{seed}",
        "search_space.epochs": epochs,
        "search_space.seed": seed,
        "search_space.checkpoint_every": epochs,
        **(HEAVY_SPACE if heavy else {}),
    }
    if method in SEARCHERS:
        asha = "_asha" in method
        cpus = os.cpu_count() or 1
        worker_cpus = round(cpus - 0.1, 2) if method.endswith("_whole") else 0.9  # + a 0.1-CPU driver
        settings.update(
            {
                "num_samples": budget if asha else budget // epochs,  # ASHA: more than B needs; stopped at B
                "searcher": {**SEARCHERS[method], "seed": seed},
                "scheduler": {"type": "asha", "max_t": epochs, "grace_period": GRACE, "reduction_factor": REDUCTION}
                if asha
                else {"type": "fifo"},
                "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": worker_cpus}},
                "resources.driver_cpus": 0.1,
            }
        )
        if method.endswith("_whole"):
            settings["search_space.threads"] = cpus
    return [f"{key}={json.dumps(value)}" for key, value in settings.items()]


# ----------------------------------------------------------------------------- one way and seed, in its own process


def run_hpsearch(job: dict[str, Any]) -> dict[str, Any]:
    """One hpsearch search through the public API; every report's time and val_acc."""
    import ray

    import hpsearch
    from hpsearch.experiment.layout import HISTORY_FILE, TRAIN_RUNS_DIR
    from hpsearch.runtime.nodes.connect import connect

    overrides = spec_overrides(job["method"], job["seed"], job["budget"], job["epochs"], job["heavy"])
    spec = hpsearch.load_spec(BASE_SPEC, overrides=[*overrides, f"storage_path={job['storage']}"])
    histories = f"{TRAIN_RUNS_DIR}/*/{HISTORY_FILE}"

    def budget_spent() -> str | None:  # random_fifo's trials use exactly the budget: never cut
        reported = sum(path.read_bytes().count(b"\n") for path in spec.experiment_dir.glob(histories))
        return (
            f"{job['budget']} epochs reported" if job["method"] != "random_fifo" and reported >= job["budget"] else None
        )

    start = time.time()
    try:
        connect()  # what hpsearch.run starts first, timed apart: a cost per search, not per trial
        ray_start = time.time() - start
        with interrupt_when(budget_spent, every_s=0.5):  # stops the search as Tune's own "stop" signal does
            hpsearch.run(spec)
        wall = time.time() - start
    finally:
        ray.shutdown()
    results = hpsearch.load_results(spec.experiment_dir)
    per_trial = [
        [json.loads(line) for line in path.read_text().splitlines()] for path in spec.experiment_dir.glob(histories)
    ]
    reports = sorted((r["time"] - start, r["val_acc"]) for trial in per_trial for r in trial)
    gaps = [b["time"] - a["time"] for trial in per_trial for a, b in zip(trial, trial[1:])]
    return {
        "wall_s": wall,
        "ray_start_s": ray_start,
        "trials": len(results.trials),
        "epochs_run": len(reports),
        "parallel": results.plan["max_concurrent_trials"],
        "epoch_s": statistics.median(gaps) if gaps else None,
        "reports": reports[: job["budget"]],
    }


def run_plain_optuna(job: dict[str, Any]) -> dict[str, Any]:
    """Plain Optuna in this process: TPE + successive halving, the digits loop, the same budget."""
    import optuna
    import torch

    import hpsearch
    from hpsearch.examples.digits import _load_split

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    torch.set_num_threads(job["threads"])
    spec = hpsearch.load_spec(
        BASE_SPEC, overrides=spec_overrides(job["method"], job["seed"], job["budget"], job["epochs"], job["heavy"])
    )
    space = spec.to_dict()["search_space"]
    start = time.time()
    data = _load_split()
    reports: list[Report] = []
    epoch_times: list[float] = []
    study = optuna.create_study(
        direction="minimize" if spec.mode == "min" else "maximize",
        sampler=optuna.samplers.TPESampler(seed=job["seed"], n_startup_trials=STARTUP_TRIALS),
        pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=GRACE, reduction_factor=REDUCTION),
    )

    def objective(trial: optuna.Trial) -> float:
        config = suggest(trial, space)
        for epoch, seconds, metrics in digits_epochs(config, data):
            reports.append((time.time() - start, metrics["val_acc"]))
            epoch_times.append(seconds)
            trial.report(metrics[spec.metric], epoch)
            if len(reports) >= job["budget"]:
                study.stop()
                raise optuna.TrialPruned()
            if trial.should_prune():
                raise optuna.TrialPruned()
        return metrics[spec.metric]

    study.optimize(objective)
    return {
        "wall_s": time.time() - start,
        "ray_start_s": 0.0,
        "trials": len(study.trials),
        "epochs_run": len(reports),
        "parallel": 1,
        "epoch_s": statistics.mean(epoch_times),
        "reports": reports,
    }


def suggest(trial: Any, space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A config from an Optuna trial, for a flat hpsearch search space (``Spec.to_dict()`` form)."""
    config = {}
    for name, p in space.items():
        if p["type"] == "float":
            config[name] = trial.suggest_float(name, p["low"], p["high"], log=p["log"], step=p.get("step"))
        elif p["type"] == "int":
            config[name] = trial.suggest_int(name, p["low"], p["high"], log=p["log"], step=p.get("step") or 1)
        elif p["type"] == "choice":
            config[name] = trial.suggest_categorical(name, p["values"])
        else:
            config[name] = p["value"]
    return config


# ----------------------------------------------------------------------------- figures (pure)


def anytime(reports: Sequence[Report]) -> tuple[list[int], list[float], list[float]]:
    """Epochs consumed, wall time and best val_acc so far, at each report."""
    best, running = [], -math.inf
    for _, acc in reports:
        running = max(running, acc)
        best.append(running)
    return list(range(1, len(reports) + 1)), [t for t, _ in reports], best


def to_target(reports: Sequence[Report], target: float) -> tuple[int | None, float | None]:
    """Epochs consumed and wall time at the first report reaching ``target`` (None, None if none does)."""
    for epoch, (seconds, acc) in enumerate(reports, start=1):
        if acc >= target:
            return epoch, seconds
    return None, None


def median(values: Sequence[float | None]) -> float | None:
    """The median, a target never reached (None) counting as infinite; None if the median is one."""
    middle = statistics.median(math.inf if v is None else v for v in values)
    return middle if math.isfinite(middle) else None


def ratio(num: float | None, den: float | None) -> float | None:
    """num / den, where both are known."""
    return num / den if num is not None and den else None


def per_trial_overhead(run: dict[str, Any], plain_epoch_s: float) -> float:
    """o = (P * W - E * s) / N: a trial's slot time beyond its training (see the module docstring)."""
    searching = run["wall_s"] - run["ray_start_s"]
    return (run["parallel"] * searching - run["epochs_run"] * plain_epoch_s) / run["trials"]


def overtake_s(overhead_s: float, parallel: int) -> float:
    """Training time per trial above which P parallel hpsearch trials beat sequential plain Optuna."""
    return overhead_s / (parallel - 1)


def summarize(runs: list[dict[str, Any]], methods: Sequence[str], target: float) -> dict[str, dict[str, Any]]:
    """Per way: seeds that reached the target, epochs and wall time to it, and medians over seeds."""
    out = {}
    for method in methods:
        mine = [r for r in runs if r["method"] == method]
        hits = [to_target(r["reports"], target) for r in mine]
        out[method] = {
            "reached": sum(e is not None for e, _ in hits),
            "seeds": len(mine),
            "epochs_to_target": [e for e, _ in hits],
            "wall_s_to_target": [s for _, s in hits],
            "median_epochs_to_target": median([e for e, _ in hits]),
            "median_wall_s_to_target": median([s for _, s in hits]),
            "median_wall_s_at_budget": statistics.median(r["reports"][-1][0] for r in mine),
            "median_best_val_acc": statistics.median(max(a for _, a in r["reports"]) for r in mine),
            "median_trials": statistics.median(r["trials"] for r in mine),
        }
    return out


def plot(runs: list[dict[str, Any]], methods: Sequence[str], target: float, title: str, path: Path) -> None:
    """Best val_acc against epochs consumed and against wall time: each seed faint, the median bold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for color, method in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], methods):
        curves = [anytime(r["reports"]) for r in runs if r["method"] == method]
        for ax, axis in zip(axes, (0, 1)):
            for curve in curves:
                ax.step(curve[axis], curve[2], where="post", color=color, alpha=0.25, lw=0.8)
            # from when every seed has a report; a seed that spent its budget keeps its best
            low, high = max(c[axis][0] for c in curves), max(c[axis][-1] for c in curves)
            grid = np.arange(low, high + 1) if axis == 0 else np.geomspace(low, high, 200)
            at = [np.asarray(c[2])[np.searchsorted(c[axis], grid, side="right") - 1] for c in curves]
            ax.step(
                grid,
                np.median(at, axis=0),
                where="post",
                color=color,
                lw=2,
                label=LABELS[method] if axis == 0 else None,
            )
    for ax, xlabel in zip(axes, ("epochs consumed (all trials)", "wall time (s, log scale)")):
        ax.axhline(target, color="grey", ls="--", lw=0.8, label=f"target {target}" if ax is axes[0] else None)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[1].set_xscale("log")
    axes[0].set_ylim(max(0.5, axes[0].get_ylim()[0]), 1.0)
    axes[0].set_ylabel("best val_acc so far")
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----------------------------------------------------------------------------- the whole comparison


def run_job(job: dict[str, Any], logs: Path) -> dict[str, Any]:
    """One way and seed in a fresh Python process (its own Ray, its own session) with its own
    temporary storage; what it leaves behind is ended and named."""
    name = f"{job['method']}-seed{job['seed']}"
    with tempfile.TemporaryDirectory(prefix="hpsearch-search-quality-", ignore_cleanup_errors=True) as storage:
        result, left = run_isolated(
            [__file__, "--job", json.dumps({**job, "storage": storage})], log=logs / f"{name}.log"
        )
    if left:
        print(f"  {name}: ended {len(left)} process(es) it left behind: {', '.join(left)}", flush=True)
    return {**job, **result, "left_behind": left}


def fmt(value: float | None, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def compare(part: Part, summary: dict[str, dict[str, Any]], runs: list[dict[str, Any]], heavy: bool) -> dict[str, Any]:
    """Print and return the ratios, the trial size, the per-trial overhead and the overtaking point."""
    out: dict[str, Any] = {"ratios": {}}
    if {"tpe_asha", "random_fifo"} <= set(part.methods):
        tpe, rnd = summary["tpe_asha"]["median_epochs_to_target"], summary["random_fifo"]["median_epochs_to_target"]
        out["ratios"]["tpe_asha_vs_random_fifo_epochs"] = value = ratio(tpe, rnd)
        if value is not None:
            shown = f"{value:.2f}"
        elif tpe is not None:  # random + FIFO needs more than the budget
            shown = f"< {tpe / part.budget:.2f} (random + FIFO did not reach the target in {part.budget} epochs)"
        else:
            shown = NOT_REACHED
        print(f"epochs to target, TPE + ASHA / random + FIFO: {shown} (target: <= 1/3)")
    if "optuna_plain" not in part.methods:
        return out
    for way in (m for m in HPSEARCH_ASHA if m in part.methods):
        hps, plain = summary[way]["median_wall_s_to_target"], summary["optuna_plain"]["median_wall_s_to_target"]
        out["ratios"][f"{way}_vs_optuna_plain_wall"] = value = ratio(hps, plain)
        goal = " (target on 2 CPUs: <= 1.5x)" if heavy else ""
        shown = f"{value:.2f}x" if value is not None else NOT_REACHED
        print(f"wall time to target, {LABELS[way]} / plain Optuna: {shown}{goal}")
        out["ratios"][f"{way}_vs_optuna_plain_wall_at_budget"] = value = ratio(
            summary[way]["median_wall_s_at_budget"], summary["optuna_plain"]["median_wall_s_at_budget"]
        )
        print(f"wall time to consume the whole budget, {LABELS[way]} / plain Optuna: {value:.2f}x")
    plain_epoch_s = {r["seed"]: r["epoch_s"] for r in runs if r["method"] == "optuna_plain"}
    searches = [r for r in runs if r["method"] in SEARCHERS and r["seed"] in plain_epoch_s]
    out["full_trial_train_s"] = full = {"optuna_plain": statistics.median(plain_epoch_s.values()) * part.epochs}
    for method in dict.fromkeys(r["method"] for r in searches):
        epoch_s = [r["epoch_s"] for r in searches if r["method"] == method and r["epoch_s"]]
        full[method] = statistics.median(epoch_s) * part.epochs if epoch_s else None
    print(
        f"a full trial of {part.epochs} epochs trains (median time between a trial's reports x {part.epochs}): "
        + "; ".join(f"{LABELS[m]} ~{fmt(t, '.1f')} s" for m, t in full.items())
        + f" (plain Optuna: {part.optuna_threads} thread(s))"
    )
    if whole := [r for r in searches if r["method"].endswith("_whole")]:  # as many threads as plain Optuna
        out["per_trial_overhead_whole_s"] = o_whole = statistics.median(
            per_trial_overhead(r, plain_epoch_s[r["seed"]]) for r in whole
        )
        print(
            f"per-trial overhead of {LABELS['tpe_asha_whole']} (one trial at a time, {part.optuna_threads} "
            f"thread(s) like plain Optuna): {o_whole:.1f} s"
        )
    searches = [r for r in searches if not r["method"].endswith("_whole")]  # o below: 1-thread workers
    if heavy or not searches:  # on the heavy part plain Optuna's threads differ from a worker's: o is not measured
        return out
    overheads = [per_trial_overhead(r, plain_epoch_s[r["seed"]]) for r in searches]
    o = statistics.median(overheads)
    out["per_trial_overhead_s"] = {"median": o, "parallel": searches[0]["parallel"], "searches": overheads}
    out["overtake_train_s"] = overtake = {p: overtake_s(o, p) for p in (2, 4, 8, 16, 32, 64)}
    print(
        f"per-trial overhead o of hpsearch ({searches[0]['parallel']} trials at once here): {o:.1f} s "
        f"(median of {len(overheads)} searches)"
    )
    print(
        "P parallel hpsearch trials overtake sequential plain Optuna once a trial trains longer than o / (P - 1): "
        + ", ".join(f"P={p}: {t:.1f} s" for p, t in overtake.items())
    )
    return out


def report(part: Part, runs: list[dict[str, Any]], target: float, heavy: bool) -> tuple[dict, dict]:
    """Print the table of medians and the comparisons; return both."""
    summary = summarize(runs, part.methods, target)
    w = max(len(LABELS[m]) for m in summary) + 2
    print(
        f"\n{'way':<{w}}{'reached':>8}{'epochs to target':>18}{'wall s to target':>18}{'best val_acc':>14}"
        f"{'trials':>8}{'s at budget':>13}"
    )
    for method, row in summary.items():
        print(
            f"{LABELS[method]:<{w}}{row['reached']:>5}/{row['seeds']:<2}{fmt(row['median_epochs_to_target']):>18}"
            f"{fmt(row['median_wall_s_to_target'], '.1f'):>18}{row['median_best_val_acc']:>14.3f}"
            f"{row['median_trials']:>8.0f}{row['median_wall_s_at_budget']:>13.1f}"
        )
    print("(medians over seeds; '-': the median seed did not reach the target within the budget)\n")
    return summary, compare(part, summary, runs, heavy)


def rescore(path: Path, target: float) -> int:
    """The figures of earlier runs at another target: same runs, same budget, no Ray."""
    record = json.loads(path.read_text())
    runs = record["runs"]
    methods = tuple(dict.fromkeys(r["method"] for r in runs))
    part = replace(
        PARTS[record["part"]],
        methods=methods,
        budget=record["budget_epochs"],
        seeds=record["seeds"],
        epochs=record["max_epochs_per_trial"],
        optuna_threads=record["optuna_threads"],
    )
    print(f"runs of: {record['command']} ({record['machine']['date']}); rescored at target val_acc >= {target}")
    for run in runs:
        epochs, seconds = to_target(run["reports"], target)
        reached = f"target at epoch {epochs} ({seconds:.1f} s)" if epochs else "target not reached"
        print(f"  seed {run['seed']} {run['method']:<14} {reached}")
    report(part, runs, target, record["part"] == "heavy")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--heavy", action="store_true", help="the heavy variant: tpe_asha and tpe_asha_whole against optuna_plain"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 seed and a small budget")
    parser.add_argument("--seeds", type=int, help="seeds 0..N-1 (default 3; --heavy 1)")
    parser.add_argument("--budget", type=int, help="epochs per way and seed (default 80, also with --heavy)")
    parser.add_argument("--epochs", type=int, help="max epochs per trial (default 10; --heavy 12)")
    parser.add_argument("--target", type=float, default=0.97, help="val_acc to reach (default 0.97)")
    parser.add_argument("--methods", help=f"comma-separated subset of {','.join(LABELS)}")
    parser.add_argument("--optuna-threads", type=int, help="plain Optuna's torch threads (default 1; --heavy all CPUs)")
    parser.add_argument(
        "--rescore",
        type=Path,
        metavar="JSON",
        help="no new runs: summarise the runs in a results JSON of this script again, at --target",
    )
    parser.add_argument("--job", help=argparse.SUPPRESS)  # internal: one way and seed, JSON in and out
    args = parser.parse_args()

    if args.job:
        job = json.loads(args.job)
        print(json.dumps((run_plain_optuna if job["method"] == "optuna_plain" else run_hpsearch)(job)))
        return 0
    if args.rescore:
        return rescore(args.rescore, args.target)

    part = PARTS["heavy" if args.heavy else "shipped"]
    if args.quick:
        part = replace(part, seeds=1, budget=part.quick_budget, epochs=part.quick_epochs)
    part = replace(
        part,
        seeds=args.seeds or part.seeds,
        budget=args.budget or part.budget,
        epochs=args.epochs or part.epochs,
        optuna_threads=args.optuna_threads or part.optuna_threads,
        methods=tuple(args.methods.split(",")) if args.methods else part.methods,
    )
    if unknown := set(part.methods) - set(LABELS):
        parser.error(f"unknown method(s) {', '.join(sorted(unknown))}; choose from {', '.join(LABELS)}")
    if "random_fifo" in part.methods and part.budget % part.epochs:
        parser.error(f"--budget ({part.budget}) must be a multiple of --epochs ({part.epochs}) for random_fifo")

    command, machine = print_header()
    print(
        f"part: {part.name} MLP; budget {part.budget} epochs per way and seed, up to {part.epochs} epochs a trial, "
        f"seeds 0..{part.seeds - 1}, target val_acc >= {args.target}; plain Optuna with "
        f"{part.optuna_threads} torch thread(s)\n"
    )

    runs = []
    logs = logs_folder("search-quality")
    began = time.perf_counter()
    for seed in range(part.seeds):
        for method in part.methods:
            run = run_job(
                {
                    "method": method,
                    "seed": seed,
                    "budget": part.budget,
                    "epochs": part.epochs,
                    "heavy": args.heavy,
                    "threads": part.optuna_threads,
                },
                logs,
            )
            runs.append(run)
            epochs, seconds = to_target(run["reports"], args.target)
            reached = f"target at epoch {epochs} ({seconds:.1f} s)" if epochs else "target not reached"
            print(
                f"[{time.perf_counter() - began:6.0f} s] seed {seed} {method:<14}{run['trials']:4d} trials, "
                f"{len(run['reports'])} epochs by {run['reports'][-1][0]:6.1f} s; {reached}; "
                f"best val_acc {max(a for _, a in run['reports']):.3f}",
                flush=True,
            )

    summary, comparison = report(part, runs, args.target, args.heavy)
    record = {
        "benchmark": "search_quality",
        "part": part.name,
        "command": command,
        "machine": machine,
        "budget_epochs": part.budget,
        "max_epochs_per_trial": part.epochs,
        "seeds": part.seeds,
        "target_val_acc": args.target,
        "optuna_threads": part.optuna_threads,
        "spec": {
            "base": str(BASE_SPEC.relative_to(ROOT)),
            "overrides_seed0": {m: spec_overrides(m, 0, part.budget, part.epochs, args.heavy) for m in part.methods},
        },
        "summary": summary,
        **comparison,
    }
    stem = "search_quality_heavy" if args.heavy else "search_quality"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps({**record, "runs": runs}, indent=1))
    title = (
        f"digits MLP ({part.name}): budget {part.budget} epochs per way, {part.seeds} seed(s); "
        f"{machine['cpu_count']} CPUs, {machine['date'][:10]}\n{command}"
    )
    plot(runs, part.methods, args.target, title, RESULTS / f"{stem}.png")
    print(f"wrote benchmarks/results/{stem}.json and {stem}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
