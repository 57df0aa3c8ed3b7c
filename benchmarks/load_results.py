"""How long ``hpsearch.load_results`` takes on a big experiment folder: 1,000 trials x 100 reports.

The issue asks that "loading a folder of 1,000 trials x 100 reports takes under a few
seconds". This writes a synthetic experiment folder in the on-disk format of a real
search (``tests/fake_experiment.py``: the hpsearch files, one Tune trial folder per
trial with ``params.json``, a 100-line ``result.json`` carrying Tune's housekeeping
keys and the config in every row, ``progress.csv``, two kept checkpoints per trial
under ``train/``, Tune's ``experiment_state``) into a temporary folder, then times
``load_results`` on it: in a fresh Python process (imports included, the cost a
notebook pays once) and in-process (the call alone), and writes the figures to
``benchmarks/results/load_results.json``. The files are in the OS cache (just written).

Run:  python benchmarks/load_results.py [--trials 1000] [--reports 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._machine import print_header  # noqa: E402
from tests.fake_experiment import FakeTrial, write_experiment  # noqa: E402  (tests/ is a namespace package)

BUDGET_S = 3.0
RESULTS = ROOT / "benchmarks" / "results" / "load_results.json"


def make_trials(n: int, reports: int, seed: int = 0) -> list[FakeTrial]:
    rng = random.Random(seed)
    trials = []
    for i in range(n):
        lr = 10 ** rng.uniform(-4, -1)
        start, floor = rng.uniform(1.0, 2.5), rng.uniform(0.05, 0.5)
        values = [floor + (start - floor) * 0.95**k + rng.gauss(0, 0.01) for k in range(reports)]
        status = "errored" if i % 50 == 49 else "stopped" if i % 3 == 1 else "finished"
        config = {
            "lr": lr,
            "hidden": rng.choice([32, 64, 128]),
            "layers": rng.randint(1, 3),
            "dropout": rng.choice([0.0, 0.1, 0.2, 0.3, 0.4]),
            "epochs": reports,
            "opt": {"momentum": 0.9},
        }
        trials.append(
            FakeTrial(
                f"{i:08x}", config, values, status=status, extra={"val_acc": [1 - v / 3 for v in values]}, start=i * 5.0
            )
        )
    return trials


def time_fresh_process(exp: Path) -> float:
    script = (
        "import time; t = time.perf_counter()\n"
        "import hpsearch\n"
        f"r = hpsearch.load_results({str(exp)!r})\n"
        "print(time.perf_counter() - t)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--reports", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    command, machine = print_header()

    tmp = Path(tempfile.mkdtemp(prefix="hpsearch-bench-"))
    try:
        exp = tmp / "bench"
        start = time.perf_counter()
        write_experiment(exp, make_trials(args.trials, args.reports), state=True)
        size = sum(f.stat().st_size for f in exp.rglob("*") if f.is_file())
        print(
            f"folder: {args.trials} trials x {args.reports} reports, {size / 1e6:.0f} MB on disk "
            f"(written in {time.perf_counter() - start:.1f} s)"
        )

        import hpsearch

        fresh = [time_fresh_process(exp) for _ in range(args.repeats)]
        calls = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            results = hpsearch.load_results(exp)
            calls.append(time.perf_counter() - start)
        rows, trials = len(results.history), len(results.trials)
        assert trials == args.trials and rows == args.trials * args.reports, (trials, rows)
        figure = statistics.median(fresh)
        print(
            f"load_results in a fresh process (imports included): median {figure:.2f} s (min {min(fresh):.2f}, "
            f"{args.repeats} runs)"
        )
        print(f"load_results call alone: median {statistics.median(calls):.2f} s (min {min(calls):.2f})")
        print(
            f"-> {trials} trials, {rows} history rows; budget {BUDGET_S:g} s: "
            f"{'within' if figure < BUDGET_S else 'OVER'}"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "load_results",
                "command": command,
                "machine": machine,
                "budget_s": BUDGET_S,
                "folder": {"trials": args.trials, "reports_per_trial": args.reports, "bytes": size},
                "fresh_process_s": {"median": figure, "min": min(fresh), "runs": fresh},
                "call_s": {"median": statistics.median(calls), "min": min(calls), "runs": calls},
                "history_rows": rows,
                "within_budget": figure < BUDGET_S,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
