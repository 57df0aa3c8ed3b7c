"""Sweep efficiency: N identical nested trials, three ways, on this machine.

The work: the shipped digits MLP (``hpsearch.examples.digits:train_loop``, hidden 2048,
2 layers, batch 64, one checkpoint at the end), each trial a 2-worker DDP
``TorchTrainer`` run with ``{CPU: 0.45}`` per worker, the same config in every trial.
The three ways:

  hpsearch  the spec through ``hpsearch.run`` (driver 0.1 CPU): hpsearch's planner decides
            how many trials run at once (on 2 CPUs: 2).
  tuned     the hand-written pattern of Ray's guide ("Hyperparameter Tuning with Ray Tune":
            Tune function trainable -> TorchTrainer -> TuneReportCallback), tuned as that
            guide advises: ``tune.with_resources(driver, {"CPU": 0.1})`` and
            ``max_concurrent_trials`` set by hand to the trials the CPUs hold.
  default   the same pattern with Ray's defaults: the driver takes 1 CPU and
            ``max_concurrent_trials`` is unset. On 2 CPUs Tune starts two drivers, which
            hold both CPUs, and no worker group can ever be placed.

Each way runs in its own Python process with its own embedded Ray (``--cpus`` CPUs), so no
setting leaks from one to the next; the hand-written ways keep every other Ray default
(e.g. Ray Train's 2 s controller poll), hpsearch its own. Figures per way:

- wall s: ``hpsearch.run`` / ``Tuner.fit()``, Ray already started.
- Σ training s: the pure training time of all trials. A trial's *pure training time* is
  the time its rank-0 worker spends in the digits loop up to its last report, minus the
  time it is blocked inside ``ray.train.report`` (Ray's barrier across workers, the
  controller's poll, the checkpoint upload): data loading, model set-up, the epochs,
  evaluation and writing the checkpoint file. Two trials at once share 2 CPUs, so a
  trial trains more slowly in a sweep than alone; ``--epochs`` sets the length.
- trials at once: hpsearch's plan; for the hand-written ways, what the CPUs allow for a
  whole trial (driver + 2 workers), which for ``default`` counts its 1-CPU driver.
- utilisation = Σ training s / (wall s x trials at once): the share of the trial slots'
  time spent training rather than starting, reporting and tearing down.
- stalled: no trial reported for ``--stall-s`` seconds. The search is then stopped (the
  signal Tune takes as "stop") and its process ends its Ray; the way's record says when
  and how many trials had finished. Ray processes a way leaves behind are ended by PID
  and named.

The issue's target: utilisation >= 0.8 for trials of >= 30 s on this machine, never a stall.

Run:  python benchmarks/sweep.py          # 8 trials of ~30-40 s of training per way: ~13-16 min on 2 CPUs
      python benchmarks/sweep.py --trials 2 --epochs 3 --stall-s 90   # smoke run, ~3.5 min
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._common import interrupt_when, logs_folder, print_table, run_ways, write_results  # noqa: E402
from benchmarks._machine import print_header  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "sweep.json"
WAYS = ("hpsearch", "tuned", "default")
MODEL = {"hidden": 2048, "layers": 2, "dropout": 0.1, "lr": 1e-3, "batch_size": 64, "seed": 0}
NUM_WORKERS = 2
WORKER_CPUS = 0.45
DRIVER_CPUS = 0.1  # hpsearch's and the tuned way's trial driver
RAY_DEFAULT_DRIVER_CPUS = 1.0  # what Tune gives a function trainable unless told otherwise
TARGET_UTILISATION = 0.8


def timed_train_loop(config: dict[str, Any]) -> None:
    """``hpsearch.examples.digits.train_loop``, its pure training time measured on rank 0.

    Rank 0 appends a line per report to ``<timing_dir>/<run name>.jsonl``, before reporting:
    its pure training time so far and the seconds it has spent blocked in earlier reports.
    """
    import ray.train

    from hpsearch.examples.digits import train_loop

    context = ray.train.get_context()
    report = ray.train.report
    if context.get_world_rank() == 0:
        log = Path(config["timing_dir"]) / f"{context.get_experiment_name()}.jsonl"
        start, blocked = time.perf_counter(), 0.0

        def timed_report(*args: Any, **kwargs: Any) -> None:
            nonlocal blocked
            called = time.perf_counter()
            with log.open("a") as out:
                out.write(json.dumps({"train_s": called - start - blocked, "report_wait_s": blocked}) + "\n")
            report(*args, **kwargs)
            blocked += time.perf_counter() - called

        ray.train.report = timed_report  # the loop reports through hpsearch.train -> ray.train.report
    try:
        train_loop(config)
    finally:
        ray.train.report = report


def trials_that_fit(cpus: float, driver_cpus: float) -> int:
    """Whole trials (a driver and its workers) the CPUs hold at once: the by-hand figure."""
    return math.floor(cpus / (driver_cpus + NUM_WORKERS * WORKER_CPUS) + 1e-9)


def utilisation(train_s: float, wall_s: float, at_once: int) -> float:
    """Σ pure training time / (wall time x trials at once)."""
    return train_s / (wall_s * at_once) if wall_s > 0 and at_once > 0 else 0.0


def stall_check(timing: Path, stall_s: float) -> Callable[[], str | None]:
    """A check for :func:`interrupt_when`: has no trial reported (or none started) for ``stall_s``?"""
    start = time.time()

    def check() -> str | None:
        last = max((p.stat().st_mtime for p in timing.glob("*.jsonl")), default=start)
        idle = time.time() - last
        return f"no trial reported for {idle:.0f} s" if idle > stall_s else None

    return check


# ----------------------------------------------------------------------------- one way, in its own process


def hpsearch_sweep(config: dict, trials: int, storage: str) -> tuple[Any, int]:
    """The sweep through hpsearch's public API; returns the ResultGrid and the plan's trials at once."""
    import hpsearch
    from hpsearch.experiment.layout import PLAN_FILE

    spec = hpsearch.load_spec(
        {
            "name": "hpsearch",
            "trainable": f"{Path(__file__).resolve()}:timed_train_loop",
            "metric": "val_loss",
            "mode": "min",
            "num_samples": trials,
            "search_space": config,
            "scaling": {"num_workers": NUM_WORKERS, "resources_per_worker": {"CPU": WORKER_CPUS}},
            "resources": {"driver_cpus": DRIVER_CPUS},
            "storage_path": storage,
        }
    )
    grid = hpsearch.run(spec)
    plan = json.loads((spec.experiment_dir / PLAN_FILE).read_text())
    return grid, plan["max_concurrent_trials"]


def handwritten_sweep(
    config: dict, trials: int, storage: str, driver_cpus: float | None, max_concurrent: int | None
) -> Any:
    """The pattern of Ray's guide; ``None`` keeps Ray's default for the driver's CPUs / concurrency."""
    from ray import train, tune
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    def train_driver(cfg: dict) -> None:
        TorchTrainer(
            timed_train_loop,
            train_loop_config=cfg,
            scaling_config=train.ScalingConfig(num_workers=NUM_WORKERS, resources_per_worker={"CPU": WORKER_CPUS}),
            run_config=train.RunConfig(
                name=tune.get_context().get_trial_name(),
                storage_path=f"{storage}/train",
                callbacks=[TuneReportCallback()],
            ),
        ).fit()

    trainable = train_driver if driver_cpus is None else tune.with_resources(train_driver, {"CPU": driver_cpus})
    tuner = tune.Tuner(
        trainable,
        param_space=config,
        tune_config=tune.TuneConfig(num_samples=trials, max_concurrent_trials=max_concurrent),
        run_config=tune.RunConfig(name="handwritten", storage_path=storage, verbose=0),
    )
    return tuner.fit()


def run_way(way: str, trials: int, epochs: int, cpus: int | None, stall_s: float, storage: str) -> dict:
    """One way's sweep, in this process with its own embedded Ray; returns its figures."""
    import ray

    timing = Path(storage, "timing")
    timing.mkdir(parents=True)
    config = {**MODEL, "epochs": epochs, "checkpoint_every": epochs, "timing_dir": str(timing)}
    if way == "hpsearch":
        from hpsearch.runtime.nodes.connect import connect

        connect(num_cpus=cpus)
    else:
        ray.init(
            address="local",
            num_cpus=cpus,
            include_dashboard=True,
            dashboard_host="127.0.0.1",
            log_to_driver=False,
            logging_level="WARNING",
        )
    total_cpus = ray.cluster_resources()["CPU"]
    start = time.monotonic()
    with interrupt_when(stall_check(timing, stall_s)) as stall:
        if way == "hpsearch":
            grid, at_once = hpsearch_sweep(config, trials, storage)
        else:
            tuned = way == "tuned"
            at_once = trials_that_fit(total_cpus, DRIVER_CPUS if tuned else RAY_DEFAULT_DRIVER_CPUS)
            grid = handwritten_sweep(
                config, trials, storage, DRIVER_CPUS if tuned else None, at_once if tuned else None
            )
    wall = time.monotonic() - start
    finished = sum(1 for r in grid if r.error is None and (r.metrics or {}).get("epoch") == epochs)
    ray.shutdown()
    per_trial = [json.loads(p.read_text().splitlines()[-1]) for p in sorted(timing.glob("*.jsonl"))]
    return {
        "cpus": total_cpus,
        "wall_s": wall,
        "finished": finished,
        "trials_at_once": at_once,
        "per_trial": per_trial,
        "stall": stall or None,
    }


# ----------------------------------------------------------------------------- all ways, side by side


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8, help="identical trials per way (default 8)")
    parser.add_argument(
        "--epochs",
        type=int,
        default=22,
        help="epochs per trial (default 22: ~30-40 s of training, 1.3-1.8 s an epoch, on 2 CPUs)",
    )
    parser.add_argument("--cpus", type=int, default=None, help="CPUs of each way's Ray (default: all of them)")
    parser.add_argument("--stall-s", type=float, default=120.0, help="no report for this long is a stall (120)")
    parser.add_argument("--ways", nargs="+", choices=WAYS, default=list(WAYS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)  # internal: one way, JSON out
    parser.add_argument("--storage", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.way:
        print(json.dumps(run_way(args.way, args.trials, args.epochs, args.cpus, args.stall_s, args.storage)))
        return 0

    command, machine = print_header()
    print(
        f"work: digits MLP {MODEL}, {args.epochs} epochs; {args.trials} identical trials per way, each "
        f"{NUM_WORKERS} workers x {{CPU: {WORKER_CPUS}}}; stall = no report for {args.stall_s:g} s"
    )
    flags = ["--trials", args.trials, "--epochs", args.epochs, "--stall-s", args.stall_s]
    flags += ["--cpus", args.cpus] if args.cpus else []
    logs = logs_folder("sweep")
    with tempfile.TemporaryDirectory(prefix="hpsearch-sweep-") as storage:
        ways = run_ways(__file__, args.ways, flags, storage, logs)

    rows = []
    for way, r in ways.items():
        r["train_s"] = sum(t["train_s"] for t in r["per_trial"])
        r["utilisation"] = utilisation(r["train_s"], r["wall_s"], r["trials_at_once"])
        stalled = f"yes, at {r['stall']['after_s']:.0f} s" if r["stall"] else "no"
        rows.append(
            [
                way,
                f"{r['finished']}/{args.trials}",
                f"{r['wall_s']:.1f}",
                f"{r['train_s']:.1f}",
                str(r["trials_at_once"]),
                f"{r['utilisation']:.2f}",
                stalled,
            ]
        )
    print()
    print_table(["way", "finished", "wall s", "Σ training s", "at once", "utilisation", "stalled"], rows)
    print(f"\neach way's Ray had {next(iter(ways.values()))['cpus']:g} CPUs")
    for way, r in ways.items():
        trials = r["per_trial"]
        line = f"{way}: no trial trained"
        if trials:
            line = (
                f"{way}: {sum(t['train_s'] for t in trials) / len(trials):.1f} s of training per trial, "
                f"{sum(t['report_wait_s'] for t in trials) / len(trials):.1f} s blocked in reports"
            )
        if r["stall"]:
            line += (
                f"; stalled after {r['stall']['after_s']:.0f} s ({r['stall']['reason']}), "
                f"{r['finished']} of {args.trials} trials finished"
            )
        print(line)
    if "hpsearch" in ways:
        h = ways["hpsearch"]
        trained = [t["train_s"] for t in h["per_trial"]]
        if trained and sum(trained) / len(trained) >= 30:
            met = h["utilisation"] >= TARGET_UTILISATION and not h["stall"] and h["finished"] == args.trials
            verdict = "met" if met else "not met"
        else:
            verdict = "does not apply: trials of under 30 s"
        print(
            f"hpsearch: utilisation {h['utilisation']:.2f}, {'STALLED' if h['stall'] else 'no stall'} "
            f"(target: >= {TARGET_UTILISATION} for trials of >= 30 s, never a stall: {verdict})"
        )
    write_results(
        args.out,
        {
            "benchmark": "sweep",
            "command": command,
            "machine": machine,
            "model": MODEL,
            "epochs": args.epochs,
            "trials": args.trials,
            "num_workers": NUM_WORKERS,
            "worker_cpus": WORKER_CPUS,
            "stall_s": args.stall_s,
            "logs": str(logs),
            "ways": ways,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
