"""Per-trial overhead: the same training run four ways, side by side, in one run on one machine.

The work: the shipped digits MLP (hidden 128, 2 layers, batch 64, lr 3e-3), a fixed number
of epochs, one worker. The four ways:

  a. plain   -- a PyTorch loop in one process, no Ray;
  b. tune    -- a plain Tune function trainable doing the loop itself (no Ray Train);
  c. nested  -- the hand-written pattern from Ray's docs: Tune function trainable ->
                TorchTrainer -> TuneReportCallback, with Ray's defaults (the trial driver
                takes 1 CPU, controller polling every 2 s);
  d. hpsearch -- ``hpsearch.make_trainable`` (driver 0.25 CPU on the head, polling 0.1 s,
                reports aggregated across ranks, the trial actor reused as ``hpsearch run`` does);
  e. fresh    -- the same with a fresh trial actor per trial (``resources.reuse_actors: false``).

Each of b-d runs its trials one at a time (so per-trial costs do not overlap) in its own
Python process with its own embedded Ray, so no setting leaks from one to the next. Per
trial it reports: cost (the search's wall time / trials: start-up, training, teardown),
time to the first reported metric (Tune's ``time_total_s`` at the first report), the time
between reports as Tune sees them, and the overhead over (a). Ratios are measured in the
same run; absolute times on a shared machine drift.

It also says where a trial's seconds go, from timestamps taken by a Tune callback (trial
started, each result, trial ended) and by the train loop itself (first and last line):

  turnaround  -- previous trial ended -> this trial's driver started (Tune: stop the old
                 actor, free its placement group, start a fresh actor process; hpsearch:
                 reset the previous trial's actor instead);
  start       -- driver started -> train loop running (b: the loop runs in the driver;
                 c, d: Train controller, worker group, process group);
  to report   -- train loop running -> its first metric reaches Tune;
  reporting   -- first -> last metric at Tune;
  teardown    -- last metric at Tune -> trial ended (c, d: workers, placement group and
                 controller shut down).

Run:  python benchmarks/overhead.py [--trials 3] [--epochs 5] [--ways hpsearch fresh ...]
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

from benchmarks._common import digits_epochs, logs_folder, run_isolated  # noqa: E402
from benchmarks._machine import print_header  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "overhead.json"
CONFIG = {"hidden": 128, "layers": 2, "dropout": 0.1, "lr": 3e-3, "batch_size": 64, "seed": 0}
VARIANTS = ("plain", "tune", "nested", "hpsearch", "fresh")
#: The variants that run hpsearch's trial driver; ``fresh`` is hpsearch with a new actor per trial.
HPSEARCH_VARIANTS = ("hpsearch", "fresh")


# ----------------------------------------------------------------------------- the work, without Ray Train


def plain_training(config: dict, report) -> None:
    """The digits loop of hpsearch.examples.digits, one process, one thread, no Ray Train."""
    import torch

    torch.set_num_threads(1)
    for epoch, _, metrics in digits_epochs(config):
        report({"epoch": epoch, "val_loss": metrics["val_loss"]})


# ----------------------------------------------------------------------------- where the seconds go

STAGES = ("turnaround", "start", "to_report", "reporting", "teardown")


def stamp(path: str, event: str) -> None:
    """Append one timestamped event; the loop's events come from the worker processes."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"event": event, "t": time.time()}) + "\n")


def stamped(loop, path: str):
    """The train loop, stamping its first and last line (trials run one at a time)."""

    def train_loop(config):
        stamp(path, "loop_start")
        loop(config)
        stamp(path, "loop_end")

    return train_loop


def stages(events: list[dict]) -> list[dict[str, float | None]]:
    """Per trial, the seconds of each stage in STAGES, from the stamped events of a run."""
    events = sorted(events, key=lambda e: e["t"])
    trials, current, previous_end = [], None, None
    for e in events:
        kind, t = e["event"], e["t"]
        if kind == "trial_start":
            current = {"trial_start": t, "results": [], "previous_end": previous_end}
        elif current is None:
            continue
        elif kind == "loop_start":
            current.setdefault("loop_start", t)
        elif kind == "result":
            current["results"].append(t)
        elif kind == "trial_end":
            current["trial_end"] = previous_end = t
            trials.append(current)
            current = None
    rows = []
    for tr in trials:
        first, last = tr["results"][0], tr["results"][-1]
        loop_start = tr.get("loop_start", tr["trial_start"])
        rows.append(
            {
                "turnaround": None if tr["previous_end"] is None else tr["trial_start"] - tr["previous_end"],
                "start": loop_start - tr["trial_start"],
                "to_report": first - loop_start,
                "reporting": last - first,
                "teardown": tr["trial_end"] - last,
            }
        )
    return rows


# ----------------------------------------------------------------------------- one variant, in its own process


def run_variant(variant: str, trials: int, epochs: int, storage: str) -> dict:
    config = {**CONFIG, "epochs": epochs}
    if variant == "plain":
        times = []
        for _ in range(trials):
            start = time.perf_counter()
            stamps: list[float] = []
            plain_training(config, lambda m, stamps=stamps, start=start: stamps.append(time.perf_counter() - start))
            times.append({"cost_s": time.perf_counter() - start, "report_times_s": stamps})
        return {"trials": times, "wall_s": sum(t["cost_s"] for t in times)}

    import ray
    from ray import tune

    events = f"{storage}/events.jsonl"
    Path(storage).mkdir(parents=True, exist_ok=True)

    class Stamps(tune.Callback):
        def on_trial_start(self, iteration, trials, trial, **info):
            stamp(events, "trial_start")

        def on_trial_result(self, iteration, trials, trial, result, **info):
            stamp(events, "result")

        def on_trial_complete(self, iteration, trials, trial, **info):
            stamp(events, "trial_end")

    if variant in HPSEARCH_VARIANTS:
        from hpsearch.runtime.env import apply_fit_defaults
        from hpsearch.runtime.nodes.connect import connect

        apply_fit_defaults()  # Tune's state saved every second, as `hpsearch run` sets it before Tuner.fit
        connect()  # hpsearch's embedded Ray: dashboard on loopback
    else:
        ray.init(
            address="local",
            include_dashboard=True,
            dashboard_host="127.0.0.1",
            log_to_driver=False,
            logging_level="WARNING",
        )

    if variant == "tune":

        def trainable(cfg):
            stamp(events, "loop_start")
            plain_training(cfg, tune.report)

    elif variant == "nested":
        from ray import train
        from ray.train.torch import TorchTrainer
        from ray.tune.integration.ray_train import TuneReportCallback

        from hpsearch.examples.digits import train_loop as digits_loop

        train_loop = stamped(digits_loop, events)

        def trainable(cfg):  # as in Ray's "Hyperparameter Tuning with Ray Tune" guide for Train V2
            trainer = TorchTrainer(
                train_loop,
                train_loop_config=cfg,
                scaling_config=train.ScalingConfig(num_workers=1),
                run_config=train.RunConfig(
                    name=tune.get_context().get_trial_name(),
                    storage_path=storage + "/train",
                    callbacks=[TuneReportCallback()],
                ),
            )
            trainer.fit()

    else:
        from hpsearch import make_trainable
        from hpsearch.examples.digits import train_loop as digits_loop

        trainable = make_trainable(
            stamped(digits_loop, events),
            scaling={"num_workers": 1, "resources_per_worker": {"CPU": 1}},
            storage_path=storage + "/train",
        )

    tuner = tune.Tuner(
        trainable,
        param_space=config,
        # hpsearch reuses a finished trial's actor (runtime/trial/reuse.py), as `hpsearch run` does; Ray's
        # documented pattern keeps Tune's default (off), which its nested runs need under early stopping
        tune_config=tune.TuneConfig(num_samples=trials, max_concurrent_trials=1, reuse_actors=variant == "hpsearch"),
        run_config=tune.RunConfig(name=variant, storage_path=storage, verbose=0, callbacks=[Stamps()]),
    )
    start = time.perf_counter()
    grid = tuner.fit()
    wall = time.perf_counter() - start
    out = []
    for result in grid:
        if result.error is not None:
            raise RuntimeError(f"{variant}: a trial failed: {result.error}")
        history = result.metrics_dataframe
        out.append({"report_times_s": [float(t) for t in history["time_total_s"]]})
    ray.shutdown()
    for trial in out:
        trial["cost_s"] = wall / trials
    with open(events, encoding="utf-8") as lines:
        return {"trials": out, "wall_s": wall, "stages": stages([json.loads(line) for line in lines])}


def summarize(raw: dict[str, dict]) -> dict[str, dict]:
    rows = {}
    for variant, data in raw.items():
        trials = data["trials"]
        gaps = [b - a for t in trials for a, b in zip(t["report_times_s"], t["report_times_s"][1:])]
        rows[variant] = {
            "cost_s": statistics.median(t["cost_s"] for t in trials),
            "first_report_s": statistics.median(t["report_times_s"][0] for t in trials),
            "between_reports_s": statistics.median(gaps) if gaps else None,
        }
    base = rows["plain"]["cost_s"] if "plain" in rows else 0.0  # without the plain way: overhead = cost
    for variant, row in rows.items():
        row["overhead_s"] = row["cost_s"] - base
        per_trial = raw[variant].get("stages", [])
        for stage in STAGES:
            values = [t[stage] for t in per_trial if t[stage] is not None]
            row[f"{stage}_s"] = statistics.median(values) if values else None
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--ways", nargs="+", choices=VARIANTS, default=list(VARIANTS), help="variants to run (all)")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # internal: one variant, JSON out
    parser.add_argument("--storage", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.variant:
        print(json.dumps(run_variant(args.variant, args.trials, args.epochs, args.storage)))
        return 0

    command, machine = print_header()
    print(f"work: digits MLP {CONFIG}, {args.epochs} epochs, 1 worker; {args.trials} trials per way, one at a time\n")
    raw = {}
    logs = logs_folder("overhead")
    with tempfile.TemporaryDirectory(prefix="hpsearch-overhead-") as storage:
        for variant in args.ways:
            t0 = time.perf_counter()
            raw[variant], left = run_isolated(
                [
                    __file__,
                    "--variant",
                    variant,
                    "--trials",
                    str(args.trials),
                    "--epochs",
                    str(args.epochs),
                    "--storage",
                    f"{storage}/{variant}",
                ],
                log=logs / f"{variant}.log",
            )
            note = f"; ended {len(left)} Ray process(es) it left behind: {', '.join(left)}" if left else ""
            print(f"  {variant:<9} done in {time.perf_counter() - t0:6.1f} s{note}", flush=True)
    rows = summarize(raw)
    print(f"\n{'way':<10}{'per trial s':>12}{'first report s':>16}{'between reports s':>19}{'overhead s':>12}")
    for variant, row in rows.items():
        between = f"{row['between_reports_s']:.2f}" if row["between_reports_s"] is not None else "-"
        print(
            f"{variant:<10}{row['cost_s']:>12.2f}{row['first_report_s']:>16.2f}{between:>19}{row['overhead_s']:>12.2f}"
        )
    print(f"\nwhere a trial's seconds go (median s): {', '.join(STAGES)}")
    for variant, row in rows.items():
        if variant != "plain":
            cells = "".join(f"{row[f'{s}_s']:>12.2f}" if row[f"{s}_s"] is not None else f"{'-':>12}" for s in STAGES)
            print(f"{variant:<10}{cells}")
    ratio = None
    if "hpsearch" in rows and "nested" in rows:
        ratio = rows["hpsearch"]["overhead_s"] / rows["nested"]["overhead_s"]
        print(
            f"\nhpsearch's overhead over plain PyTorch is {ratio:.0%} of the hand-written nested pattern's "
            f"(target: <= 40%); between reports {rows['hpsearch']['between_reports_s']:.2f} s (target: <= 0.3 s)"
        )
    if "hpsearch" in rows and "fresh" in rows:
        saved = rows["fresh"]["cost_s"] - rows["hpsearch"]["cost_s"]
        print(f"reusing the trial actor: {saved:+.2f} s per trial saved against a fresh actor per trial")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "overhead",
                "command": command,
                "machine": machine,
                "epochs": args.epochs,
                "trials_per_way": args.trials,
                "config": CONFIG,
                "per_trial": rows,
                "raw": raw,
                "hpsearch_overhead_vs_nested": ratio,
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
