"""Beyond this machine, by simulation: ASHA's predicted utilisation as the trials at once grow from 8 to 512.

The ASHA paper (Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020)
reports a near-linear speedup with workers: its workers swap one configuration for the next for
free. An hpsearch trial is a nested Ray Train run, and every trial pays a start-up (its driver, the
nested run, its worker group) and a teardown. ASHA makes most trials short (with ``reduction_factor``
rf, a share 1 - 1/rf of them stop at the first rung), so that per-trial cost weighs on exactly the
trials ASHA runs most of. This benchmark runs ``hpsearch plan --estimate``'s schedule model
(:mod:`hpsearch.planning.estimate`, pure: no Ray, nothing trains) on the same ASHA search at each
number of trials at once, with hpsearch's per-trial costs and with none (the paper's assumption),
and prints:

1. the issue's search, 1,000 trials, at 8 to 512 at once (a fixed search on a growing cluster): the
   wall time, the speedup over 8 at once against the linear one, and the utilisation (the share of the
   slots' time spent training);
2. a search that grows with the cluster (``--trials-per-slot`` trials per slot): the same;
3. at the largest number at once, the utilisation as the epoch time grows: where the per-trial cost
   stops mattering.

"Effective workers" is the training done per second in units of one worker training without a
pause (trials at once x utilisation): the paper's linear scaling is effective workers = workers.

The per-trial costs: from ``--check FILE`` (``hpsearch check``'s ``hpsearch_check.json``) if given,
else this machine's measurements: a nested trial's start-up 10-16 s and teardown 1-7 s
(``benchmarks/overhead.py``, hpsearch's trial actors reused, 2 CPUs), taken as 13 s and 4 s, the
range's ends shown as a low-high utilisation. The benchmark says which it used.

Run:  python benchmarks/estimate_scale.py [--check FILE] [--epoch-time 60] [--trials 1000] [--seeds 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._common import print_table, write_results  # noqa: E402
from benchmarks._machine import print_header  # noqa: E402
from hpsearch.planning.estimate import (  # noqa: E402
    EPOCH_VARIATION,
    Estimate,
    Timing,
    Workload,
    estimate,
    timing_from,
)

RESULTS = ROOT / "benchmarks" / "results" / "estimate_scale.json"
SLOTS = (8, 16, 32, 64, 128, 256, 512)
EPOCH_TIMES = (1, 5, 15, 30, 60, 120, 300, 600)
#: This machine's per-trial costs (benchmarks/overhead.py): start-up 10-16 s, teardown 1-7 s; the middle is used.
DEFAULT_STARTUP = (10.0, 13.0, 16.0)
DEFAULT_TEARDOWN = (1.0, 4.0, 7.0)
ASHA = {"grace_period": 1, "reduction_factor": 3, "max_t": 27, "brackets": 1}


def costs(args: argparse.Namespace) -> tuple[dict[str, Timing], str]:
    """The timings to compare: low, mid and high per-trial cost, and none; and where they come from."""
    if args.check:
        record = json.loads(Path(args.check).read_text(encoding="utf-8"))
        t = timing_from(record, check_file=args.check, spec_arg="SPEC", epoch_s=args.epoch_time)
        mid = timed(args.epoch_time, t.startup_s, t.teardown_s)
        source = f"{t.source}: start-up {t.startup_s:.3g} s, teardown {t.teardown_s:.3g} s"
        low = high = mid
    else:
        low, mid, high = (timed(args.epoch_time, s, d) for s, d in zip(DEFAULT_STARTUP, DEFAULT_TEARDOWN, strict=True))
        source = (
            "this machine's measurements (benchmarks/overhead.py): start-up 10-16 s, teardown 1-7 s; "
            "13 s and 4 s used, the ends as the low-high range"
        )
    return {"low": low, "mid": mid, "high": high, "none": timed(args.epoch_time, 0.0, 0.0)}, source


def timed(epoch_s: float, startup_s: float, teardown_s: float) -> Timing:
    """A trial's costs as ``plan --estimate`` takes them: each trial's epoch time within EPOCH_VARIATION."""
    return Timing(epoch_s, startup_s, teardown_s, variation=EPOCH_VARIATION)


def median_of(est: Estimate, attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in est.runs)


def utilisation(est: Estimate) -> float:
    """The median run's share of the slots' time spent training."""
    return statistics.median(r.utilisation(est.slots) for r in est.runs)


def row_for(slots: int, trials: int, timings: dict[str, Timing], seeds: int) -> dict[str, Any]:
    """One number of trials at once: the estimate with each per-trial cost."""
    out: dict[str, Any] = {"slots": slots, "trials": trials}
    w = Workload(trials=trials, slots=slots, epochs=(ASHA["max_t"],), scheduler="asha", options=ASHA)
    for name, timing in timings.items():
        est = estimate(w, timing, seeds=seeds)
        out[name] = {
            "wall_s": median_of(est, "wall_s"),
            "wall_low_s": est.wall.low,
            "wall_high_s": est.wall.high,
            "utilisation": utilisation(est),
            "epochs": median_of(est, "epochs"),
        }
    return out


def util_range(row: dict[str, Any]) -> str:
    """The utilisation from the highest per-trial cost to the lowest."""
    low, high = sorted(100 * row[k]["utilisation"] for k in ("low", "high"))
    return f"{low:.0f}-{high:.0f}%" if round(low) != round(high) else f"{low:.0f}%"


def table(rows: list[dict[str, Any]], title: str) -> list[list[str]]:
    """Rows for print_table: speedups against the first row (8 at once), utilisation with each cost."""
    base = rows[0]
    printed = []
    for r in rows:
        linear = r["slots"] / base["slots"]
        throughput = {k: r["trials"] / r[k]["wall_s"] for k in ("mid", "none")}
        base_throughput = {k: base["trials"] / base[k]["wall_s"] for k in ("mid", "none")}
        speedup = {k: throughput[k] / base_throughput[k] for k in throughput}
        printed.append(
            [
                str(r["slots"]),
                f"{r['trials']:,}",
                f"{r['mid']['wall_s'] / 60:.1f}",
                f"{r['none']['wall_s'] / 60:.1f}",
                f"{linear:g}",
                f"{speedup['mid']:.2f}",
                f"{speedup['none']:.2f}",
                util_range(r),
                f"{100 * r['mid']['utilisation']:.0f}%",
                f"{100 * r['none']['utilisation']:.0f}%",
                f"{r['slots'] * r['mid']['utilisation']:.0f}",
                f"{r['slots'] * r['none']['utilisation']:.0f}",
            ]
        )
        r["speedup"] = speedup
        r["linear"] = linear
    print(f"\n{title}")
    return printed


HEADER = [
    "at once",
    "trials",
    "wall min",
    "(no cost)",
    "linear",
    "speedup",
    "(no cost)",
    "util range",
    "util",
    "(no cost)",
    "eff. workers",
    "(no cost)",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="FILE", help="hpsearch check's hpsearch_check.json: its per-trial costs")
    parser.add_argument("--epoch-time", type=float, default=60.0, help="seconds per epoch (default 60)")
    parser.add_argument("--trials", type=int, default=1000, help="the fixed search's trials (default 1,000)")
    parser.add_argument("--trials-per-slot", type=int, default=16, help="the growing search's trials per slot")
    parser.add_argument("--seeds", type=int, default=20, help="simulated runs per figure (default 20)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    command, machine = print_header()
    timings, source = costs(args)
    print(f"per-trial cost: {source}")
    print(
        f"ASHA: grace_period {ASHA['grace_period']}, reduction_factor {ASHA['reduction_factor']}, "
        f"max_t {ASHA['max_t']} (rungs at 1, 3, 9, 27 epochs); {args.epoch_time:g} s per epoch; "
        f"median of {args.seeds} simulated runs; 'no cost' = no start-up or teardown (the ASHA paper's workers)"
    )
    started = time.perf_counter()
    fixed = [row_for(k, args.trials, timings, args.seeds) for k in SLOTS]
    print_table(
        HEADER, table(fixed, f"1. a fixed search of {args.trials:,} trials (speedup: trials per hour over 8 at once)")
    )
    mid = timings["mid"]
    path = mid.startup_s + ASHA["max_t"] * mid.epoch_s + mid.teardown_s
    print(
        f"no search is shorter than its longest trial: start-up + {ASHA['max_t']} epochs + teardown = "
        f"{path / 60:.1f} min; the fixed search's speedup bends as its wall time nears that, with or without "
        "per-trial cost, and the last trials promoted run while the other slots idle"
    )
    growing = [row_for(k, k * args.trials_per_slot, timings, args.seeds) for k in SLOTS]
    print_table(
        HEADER,
        table(
            growing,
            f"2. a search that grows with the cluster: {args.trials_per_slot} trials per slot (speedup: the same)",
        ),
    )

    top = SLOTS[-1]
    sweep = []
    for epoch in EPOCH_TIMES:
        scaled = {k: timed(epoch, t.startup_s, t.teardown_s) for k, t in timings.items() if k in ("mid", "none")}
        r = row_for(top, top * args.trials_per_slot, scaled, args.seeds)
        sweep.append({"epoch_s": epoch, **r})
    print(f"\n3. {top} at once, {top * args.trials_per_slot:,} trials: utilisation as the epoch time grows")
    print_table(
        ["epoch s", "util", "(no cost)", "cost's share of a first-rung trial"],
        [
            [
                f"{r['epoch_s']:g}",
                f"{100 * r['mid']['utilisation']:.0f}%",
                f"{100 * r['none']['utilisation']:.0f}%",
                f"{100 * cost_share(timings['mid'], r['epoch_s']):.0f}%",
            ]
            for r in sweep
        ],
    )
    matters = [r["epoch_s"] for r in sweep if r["mid"]["utilisation"] < 0.9 * r["none"]["utilisation"]]
    bend = max(matters, default=None)
    if bend is not None:
        print(
            f"the per-trial cost takes more than a tenth of the training throughput up to {bend:g} s per epoch "
            f"(start-up + teardown {timings['mid'].startup_s + timings['mid'].teardown_s:g} s against "
            f"{ASHA['grace_period']} epoch(s) before the first rung)"
        )
    elapsed = time.perf_counter() - started
    print(f"\nsimulated in {elapsed:.1f} s")
    write_results(
        args.out,
        {
            "benchmark": "estimate_scale",
            "command": command,
            "machine": machine,
            "per_trial_cost": source,
            "asha": ASHA,
            "epoch_s": args.epoch_time,
            "seeds": args.seeds,
            "fixed": fixed,
            "growing": growing,
            "epoch_sweep": sweep,
            "cost_matters_up_to_epoch_s": bend,
            "elapsed_s": elapsed,
        },
    )
    return 0


def cost_share(timing: Timing, epoch_s: float) -> float:
    """What share of a trial stopped at the first rung (grace_period epochs) is start-up and teardown."""
    overhead = timing.startup_s + timing.teardown_s
    return overhead / (overhead + ASHA["grace_period"] * epoch_s)


if __name__ == "__main__":
    raise SystemExit(main())
