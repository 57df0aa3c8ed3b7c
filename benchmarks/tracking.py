"""Tracking overhead: the same small search with every tracker on against every tracker off.

The search: the shipped digits example (random searcher, seed 0, so both ways run the same
configurations), FIFO, ``--trials`` trials of ``--epochs`` epochs, 1 worker of 0.45 CPU and a
0.1-CPU driver each, 2 at once. The two ways:

  off -- no ``tracking`` section (Tune still adds its own TensorBoardX logger, as in every search);
  on  -- all four trackers: MLflow (its SQLite store), W&B (offline), TensorBoard and a live Optuna
         study (SQLite), each in the experiment's temporary folder: no network.

Each way runs in its own Python process with its own embedded Ray (`_common.run_isolated`);
``--repeats`` alternates them (off, on, off, on, ...). Per way it reports the search's wall
time (``Tuner.fit()``, from hpsearch's summary), the mean trial time (driver start to last
report, Tune's ``time_total_s``), and, for ``on``, the seconds spent inside the trackers'
callbacks in the search process (Tune's event loop waits for them): the ratio on/off is the
figure, the callback seconds say where a difference comes from.

Run:  python benchmarks/tracking.py [--trials 4] [--epochs 3] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._common import logs_folder, print_table, run_isolated, write_results  # noqa: E402
from benchmarks._machine import print_header  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "tracking.json"
WAYS = ("off", "on")
#: The hooks Tune calls on a callback in the search process, timed in the `on` way (a logger
#: callback's log_trial_* run inside them).
HOOKS = ("setup", "on_trial_start", "on_trial_result", "on_trial_complete", "on_trial_error", "on_experiment_end")


def spec_for(way: str, storage: Path, trials: int, epochs: int) -> dict:
    """The search, as a spec dict: the shipped quick spec shrunk, with or without the trackers."""
    import yaml

    spec = yaml.safe_load((ROOT / "search_spaces" / "digits_quick.yaml").read_text())
    spec.update(
        name=f"tracking-{way}",
        num_samples=trials,
        storage_path=str(storage),
        searcher={"type": "random", "seed": 0},
        scheduler={"type": "fifo"},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.45}},
    )
    spec["search_space"]["epochs"] = epochs
    if way == "on":
        spec["tracking"] = {
            "mlflow": True,  # the SQLite store in the experiment folder, MLflow's recommended local store
            "wandb": {"mode": "offline"},
            "tensorboard": True,
            "optuna": f"sqlite:///{storage / 'optuna.db'}",
        }
    return spec


def timed_trackers() -> dict[str, float]:
    """Wrap every tracker hook to add its seconds to the returned dict (per tracker class)."""
    import functools

    from hpsearch.runtime.search import tracking

    spent: dict[str, float] = {}
    for cls in (tracking.MlflowTracker, tracking.WandbTracker, tracking.TensorboardTracker, tracking.OptunaTracker):
        for hook in HOOKS:
            original = getattr(cls, hook)

            @functools.wraps(original)
            def wrapper(self, *args, __original=original, __name=cls.__name__, **kwargs):
                began = time.perf_counter()
                try:
                    return __original(self, *args, **kwargs)
                finally:
                    spent[__name] = spent.get(__name, 0.0) + time.perf_counter() - began

            setattr(cls, hook, wrapper)
    return spent


def run_way(way: str, storage: str, trials: int, epochs: int) -> dict:
    """One search in this process; its figures as a dict."""
    import ray

    from hpsearch import load_results
    from hpsearch.runtime.search.tuner import run

    spent = timed_trackers() if way == "on" else {}
    spec = spec_for(way, Path(storage), trials, epochs)
    began = time.perf_counter()
    summary = run(spec, stream=sys.stderr).summary
    whole_s = time.perf_counter() - began
    results = load_results(Path(storage) / spec["name"])
    ray.shutdown()
    finished = int((results.trials["status"] == "finished").sum())
    return {
        "way": way,
        "search_s": summary.wall_time_s,
        "run_s": whole_s,
        "finished": finished,
        "trial_s": [float(t) for t in results.trials["wall_time_s"]],
        "mean_trial_s": float(results.trials["wall_time_s"].mean()),
        "tracker_callback_s": {k: round(v, 3) for k, v in spent.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)  # internal: one way, JSON out
    parser.add_argument("--storage", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.way:
        print(json.dumps(run_way(args.way, args.storage, args.trials, args.epochs)))
        return 0

    command, machine = print_header()
    print(f"work: digits, {args.trials} trials x {args.epochs} epochs, 1 worker each, 2 at once; ways {WAYS}\n")
    logs = logs_folder("tracking")
    runs: dict[str, list[dict]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="hpsearch-tracking-") as storage:
        for repeat in range(args.repeats):
            for way in WAYS:
                t0 = time.perf_counter()
                flags = ["--trials", str(args.trials), "--epochs", str(args.epochs)]
                result, left = run_isolated(
                    [__file__, "--way", way, "--storage", f"{storage}/{way}-{repeat}", *flags],
                    log=logs / f"{way}-{repeat}.log",
                )
                runs[way].append({**result, "left_behind": left})
                note = f"; ended {len(left)} Ray process(es) it left behind" if left else ""
                print(f"  {way:<4} #{repeat + 1} done in {time.perf_counter() - t0:6.1f} s{note}", flush=True)
    rows = {
        way: {
            "search_s": statistics.median(r["search_s"] for r in found),
            "mean_trial_s": statistics.median(r["mean_trial_s"] for r in found),
            "finished": min(r["finished"] for r in found),
            "tracker_callback_s": statistics.median(sum(r["tracker_callback_s"].values()) for r in found),
        }
        for way, found in runs.items()
    }
    ratio_search = rows["on"]["search_s"] / rows["off"]["search_s"]
    ratio_trial = rows["on"]["mean_trial_s"] / rows["off"]["mean_trial_s"]
    print()
    print_table(
        ["way", "search s", "mean trial s", "finished", "in tracker callbacks s"],
        [
            [
                w,
                f"{r['search_s']:.1f}",
                f"{r['mean_trial_s']:.2f}",
                f"{r['finished']}/{args.trials}",
                f"{r['tracker_callback_s']:.2f}",
            ]  # fmt: skip
            for w, r in rows.items()
        ],
    )
    per_tracker = runs["on"][-1]["tracker_callback_s"]
    print(f"\nin each tracker's callbacks (s, last `on` run): {per_tracker}")
    print(f"tracking on / off: search wall time {ratio_search:.2f}x, mean trial time {ratio_trial:.2f}x")
    write_results(
        args.out,
        {
            "benchmark": "tracking",
            "command": command,
            "machine": machine,
            "trials": args.trials,
            "epochs": args.epochs,
            "repeats": args.repeats,
            "ways": rows,
            "ratio_search_wall_time": ratio_search,
            "ratio_mean_trial_time": ratio_trial,
            "raw": runs,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
