"""Multi-objective search on the digits MLP: the hypervolume of each sampler's Pareto front.

The work: the shipped digits loop (``hpsearch.examples.digits``), two objectives, both
minimised: ``val_loss`` and ``n_params`` (the model's trainable parameters, which the loop
reports each epoch). The space is digits_quick.yaml's with ``hidden`` an int on a log scale
(8-256) instead of four choices, so that model sizes run from 610 to 150,794 parameters
and the front has more than a dozen possible sizes to trade against the loss.

Three ways, each through hpsearch's public API (``hpsearch.run`` of a spec dict,
``hpsearch.load_results``); each way runs in a Python process of its own (its own embedded
Ray), its seeds one after another in it, so Ray's and the process's start-up are paid once
per way (``_common.run_group``):

  nsga2   ``searcher: {type: optuna, sampler: nsga2, population_size: P}``, P = half the
          trials: two generations (Optuna's default of 50 would keep every trial in the
          random first one)
  tpe     ``searcher: {type: optuna, sampler: tpe, n_startup_trials: S}`` (Optuna's
          multi-objective TPE), S = a third of the trials (at least 1) random first
  random  ``searcher: {type: random}``

Every way: ``metric: [val_loss, n_params]``, ``mode: [min, min]``, the FIFO scheduler (every
trial runs all its epochs: the same epoch budget, trials x epochs, for each way), the same
seed for the searcher and the model, 1-worker trials (0.9 CPU and a 0.1-CPU driver: 2 at
once on 2 CPUs).

The figure: the hypervolume of the search's front, ``hpsearch.load_results(folder).hypervolume(REFERENCE)``
with the fixed reference point REFERENCE = (val_loss 1.0, n_params 160,000): a
model that learned anything beats chance's loss (ln 10 = 2.3) by far, and the largest model
in the space has 150,794 parameters. It is also given as a fraction of the box
[0, 1.0] x [0, 160,000] (both objectives are >= 0, so 1.0 would be a perfect model with no
parameters). Per way: each seed's hypervolume and their median; a model-based sampler
"beats random" when its median is higher. The script also computes the hypervolume of the
front's points itself (a 2-D sweep) and records whether it matches the API's.

Run (JSON under benchmarks/results/; times on a quiet 2-CPU machine):
  python benchmarks/multi_objective.py            # 3 seeds x 3 ways, 4 trials x 20 epochs: ~8 min quiet (14 min measured at load 6)
  python benchmarks/multi_objective.py --trials 12 --seeds 5   # a fairer fight (not run: ~35 min by the figures above)
  python benchmarks/multi_objective.py --quick    # a smoke run: 1 seed, 2 trials x 3 epochs
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._common import (  # noqa: E402
    experiment_reports,
    logs_folder,
    methods_from,
    print_table,
    run_group,
    run_here,
    run_search,
    sizes_from,
    stopped_note,
    write_results,
)
from benchmarks._machine import print_header  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "multi_objective.json"
BASE_SPEC = ROOT / "search_spaces" / "digits_quick.yaml"
OBJECTIVES = ("val_loss", "n_params")
MODES = ("min", "min")
#: The hypervolume's reference point, (val_loss, n_params): fixed, so seeds and ways compare.
REFERENCE = (1.0, 160_000.0)
LABELS = {"nsga2": "Optuna NSGA-II", "tpe": "Optuna TPE (multi-objective)", "random": "random"}
MODEL_BASED = ("nsga2", "tpe")
#: Full size: 3 seeds x 3 ways x 4 trials of 20 epochs (8 minutes here); --quick: 1 seed, 2 trials of 3 epochs.
SEEDS, TRIALS, EPOCHS = 3, 4, 20
QUICK = {"seeds": 1, "trials": 2, "epochs": 3}


def searcher_for(method: str, seed: int, trials: int) -> dict[str, Any]:
    """The searcher section of one way: NSGA-II with a population of half the trials (two
    generations; Optuna's default of 50 would leave every trial in the random first one),
    TPE with a third of the trials random before its model takes over, or random."""
    if method == "nsga2":
        return {"type": "optuna", "sampler": "nsga2", "seed": seed, "population_size": max(2, trials // 2)}
    if method == "tpe":
        return {"type": "optuna", "sampler": "tpe", "seed": seed, "n_startup_trials": max(1, trials // 3)}
    if method == "random":
        return {"type": "random", "seed": seed}
    raise ValueError(f"unknown method {method!r}; choose from {', '.join(LABELS)}")


def spec_for(method: str, seed: int, trials: int, epochs: int, storage: str) -> dict[str, Any]:
    """The search of one way and seed, as a spec dict: digits_quick.yaml with two objectives."""
    import yaml

    spec = yaml.safe_load(BASE_SPEC.read_text())
    space = copy.deepcopy(spec["search_space"])
    space.update(
        hidden={"type": "int", "low": 8, "high": 256, "log": True},
        epochs=epochs,
        seed=seed,
        checkpoint_every=epochs,  # the last epoch only: the figures price the search, not checkpoints
    )
    spec.update(
        name=f"mo-{method}-seed{seed}",
        metric=list(OBJECTIVES),
        mode=list(MODES),
        num_samples=trials,
        search_space=space,
        searcher=searcher_for(method, seed, trials),
        scheduler={"type": "fifo"},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.9}},
        resources={"driver_cpus": 0.1},
        storage_path=storage,
    )
    return spec


def mlp_params(hidden: int, layers: int, n_in: int = 64, n_out: int = 10) -> int:
    """The trainable parameters of the digits MLP (weights and biases), as the loop counts them."""
    return (n_in + 1) * hidden + (layers - 1) * (hidden + 1) * hidden + (hidden + 1) * n_out


# ----------------------------------------------------------------------------- figures (pure)


def pareto_2d(points: Sequence[Sequence[float]]) -> list[tuple[float, float]]:
    """The non-dominated points of a 2-objective minimisation, by the first objective; NaN never on it."""
    finite = sorted({(float(a), float(b)) for a, b in points if math.isfinite(a) and math.isfinite(b)})
    front: list[tuple[float, float]] = []
    for a, b in finite:  # by the first objective, then the second: a point is kept if it improves the second
        if not front or b < front[-1][1]:
            front.append((a, b))
    return front


def hypervolume_2d(points: Sequence[Sequence[float]], reference: Sequence[float]) -> float:
    """The area dominated by ``points`` and bounded by ``reference`` (2 objectives, both minimised).

    Points not strictly better than the reference in both objectives add nothing.
    """
    ra, rb = reference
    inside = [(a, b) for a, b in pareto_2d(points) if a < ra and b < rb]
    area, top = 0.0, rb
    for a, b in inside:  # sorted by a, b falling: each adds the strip between it and the previous point's b
        area += (ra - a) * (top - b)
        top = b
    return area


def box_fraction(hypervolume: float, reference: Sequence[float]) -> float:
    """A hypervolume as a fraction of the box between the origin and the reference (objectives >= 0)."""
    return hypervolume / math.prod(reference)


def summarize(runs: Sequence[dict[str, Any]], methods: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per way: each seed's hypervolume (API), its box fraction, the median, front sizes and epochs run."""
    out = {}
    for method in methods:
        mine = sorted((r for r in runs if r["method"] == method), key=lambda r: r["seed"])
        volumes = [r["hypervolume"] for r in mine]
        out[method] = {
            "seeds": [r["seed"] for r in mine],
            "hypervolume": volumes,
            "median_hypervolume": statistics.median(volumes) if volumes else None,
            "median_box_fraction": box_fraction(statistics.median(volumes), REFERENCE) if volumes else None,
            "front_sizes": [len(r["front"]) for r in mine],
            "epochs_run": [r["epochs_run"] for r in mine],
            "trials": [r["trials"] for r in mine],
        }
    return out


def verdicts(summary: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per model-based way in the summary: does its median hypervolume beat random's, and in how many seeds."""
    if "random" not in summary:
        return {}
    base = summary["random"]
    by_seed = dict(zip(base["seeds"], base["hypervolume"]))
    out = {}
    for method in (m for m in MODEL_BASED if m in summary):
        row = summary[method]
        mine, rnd = row["median_hypervolume"], base["median_hypervolume"]
        paired = [(hv, by_seed[s]) for s, hv in zip(row["seeds"], row["hypervolume"]) if s in by_seed]
        out[method] = {
            "beats_random_on_median": mine is not None and rnd is not None and mine > rnd,
            "median_ratio_to_random": mine / rnd if mine is not None and rnd else None,
            "seeds_won": sum(hv > r for hv, r in paired),
            "seeds_compared": len(paired),
        }
    return out


def verdict_lines(found: dict[str, dict[str, Any]]) -> list[str]:
    """The verdicts in words, as printed and recorded."""
    lines = []
    for method, v in found.items():
        ratio = v["median_ratio_to_random"]
        shown = "-" if ratio is None else f"{ratio:.3f}x"
        word = "beats" if v["beats_random_on_median"] else "does NOT beat"
        lines.append(
            f"{LABELS[method]} {word} random on median hypervolume ({shown} random's; "
            f"higher in {v['seeds_won']} of {v['seeds_compared']} seeds)"
        )
    return lines


def table(summary: dict[str, dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The table printed: per way, each seed's hypervolume as a fraction of the box, the median, front sizes."""
    header = ["way", "hypervolume per seed (fraction of box)", "median", "median (raw)", "front sizes", "epochs run"]
    rows = []
    for method, row in summary.items():
        rows.append(
            [
                LABELS.get(method, method),
                ", ".join(f"{box_fraction(hv, REFERENCE):.4f}" for hv in row["hypervolume"]),
                "-" if row["median_box_fraction"] is None else f"{row['median_box_fraction']:.4f}",
                "-" if row["median_hypervolume"] is None else f"{row['median_hypervolume']:,.0f}",
                ", ".join(map(str, row["front_sizes"])),
                ", ".join(map(str, row["epochs_run"])),
            ]
        )
    return header, rows


# ----------------------------------------------------------------------------- one way and seed, in its own process


def front_points(results: Any) -> list[list[float]]:
    """The objectives of each trial on ``results.pareto``, in the objectives' order."""
    pareto = results.pareto
    return [[float(row[m]) for m in OBJECTIVES] for _, row in pareto.iterrows()]


def run_way(job: dict[str, Any]) -> dict[str, Any]:
    """One search in this process; its hypervolume through the API, the front, the check."""
    import hpsearch

    spec = spec_for(job["method"], job["seed"], job["trials"], job["epochs"], job["storage"])
    searched = run_search(spec)
    results = hpsearch.load_results(searched["experiment_dir"])
    volume = float(results.hypervolume(list(REFERENCE)))
    front = front_points(results)
    check = hypervolume_2d(front, REFERENCE)
    reports = experiment_reports(searched["experiment_dir"], searched["start"])
    return {
        "wall_s": searched["wall_s"],
        "ray_start_s": searched["ray_start_s"],
        "stopped": searched["stopped"],
        "trials": len(results.trials),
        "finished": int((results.trials["status"] == "finished").sum()),
        "epochs_run": len(reports),
        "hypervolume": volume,
        "hypervolume_check": check,
        "check_matches": math.isclose(volume, check, rel_tol=1e-9, abs_tol=1e-9),
        "front": front,
        "points": [[float(r[m]) for m in OBJECTIVES] for r in reports if all(m in r for m in OBJECTIVES)],
    }


# ----------------------------------------------------------------------------- the whole comparison


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 seed, 2 trials x 3 epochs")
    parser.add_argument("--seeds", type=int, help=f"seeds 0..N-1 (default {SEEDS})")
    parser.add_argument("--trials", type=int, help=f"trials per way and seed (default {TRIALS})")
    parser.add_argument("--epochs", type=int, help=f"epochs per trial (default {EPOCHS})")
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
        f"work: digits MLP, objectives {list(OBJECTIVES)} ({'/'.join(MODES)}), FIFO; {sizes['trials']} trials x "
        f"{sizes['epochs']} epochs per way and seed ({sizes['trials'] * sizes['epochs']} epochs), seeds "
        f"0..{sizes['seeds'] - 1}; 1 worker x 0.9 CPU + 0.1-CPU driver, 2 at once; hypervolume reference {REFERENCE}\n"
    )
    logs = logs_folder("multi-objective")
    runs = []
    began = time.perf_counter()
    for method in methods:  # a process (and an embedded Ray) per way, its seeds one after another
        jobs = [
            {"method": method, "seed": seed, "trials": sizes["trials"], "epochs": sizes["epochs"]}
            for seed in range(sizes["seeds"])
        ]
        with tempfile.TemporaryDirectory(prefix="hpsearch-mo-", ignore_cleanup_errors=True) as storage:
            group = run_group(__file__, [{**job, "storage": storage} for job in jobs], logs / f"{method}.log")
        for run in group:
            runs.append(run)
            mismatch = (
                "" if run["check_matches"] else f"; CHECK MISMATCH: own 2-D sweep {run['hypervolume_check']:,.0f}"
            )
            print(
                f"[{time.perf_counter() - began:6.0f} s] {method:<7} seed {run['seed']} {run['finished']}/{run['trials']} "
                f"finished, {run['epochs_run']} epochs in {run['wall_s']:.1f} s; front of {len(run['front'])}, "
                f"hypervolume {run['hypervolume']:,.0f} ({box_fraction(run['hypervolume'], REFERENCE):.4f} of the box)"
                f"{mismatch}{stopped_note(run)}",
                flush=True,
            )
    total_s = time.perf_counter() - began

    summary = summarize(runs, methods)
    found = verdicts(summary)
    print()
    print_table(*table(summary))
    print(f"(hypervolume reference point (val_loss, n_params) = {REFERENCE}; box = [0, 1.0] x [0, 160,000])")
    lines = verdict_lines(found)
    for line in lines:
        print(line)
    print(f"whole benchmark: {total_s:.0f} s")
    write_results(
        args.out,
        {
            "benchmark": "multi_objective",
            "command": command,
            "machine": machine,
            "date": machine["date"],
            "wall_s": total_s,
            "objectives": list(OBJECTIVES),
            "modes": list(MODES),
            "reference": list(REFERENCE),
            "sizes": sizes,
            "spec_seed0": {m: spec_for(m, 0, sizes["trials"], sizes["epochs"], "<temporary>") for m in methods},
            "summary": summary,
            "verdicts": found,
            "verdict_lines": lines,
            "checks_match": all(r["check_matches"] for r in runs),
            "runs": runs,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
