"""Does TPE learn to avoid a region where trials fail? ``searcher.failed_trials: infeasible`` against ``ignore``.

The trap, as users meet it: a batch size too large for the GPU. The space is ``batch_size`` (a choice of
6: 16, 32, 64, 128, 512, 1024) and ``lr`` (log-uniform, 1e-4 to 1e-1). The loss prefers larger batches
and an ``lr`` near 1e-2, so a trial at 512 or 1,024 reports a *good* loss at its first epoch, and then
errors (out of memory), always. A searcher that learns nothing from the errors keeps proposing the two
failing sizes at the rate of its prior, a third of its trials; one that takes them as infeasible stops.

Each way is hpsearch's TPE built from a spec exactly as ``hpsearch run`` builds it
(``searchers_on_tables.hpsearch_searcher``: ``load_spec``, ``build_searcher``, a concurrency of 1),
driven in this one process as Tune drives it (no Ray is started): ``suggest``, ``on_trial_result``
with the first epoch's report, then, for a failing trial, ``on_trial_complete(trial_id, error=True)``
with no result, as Tune's controller calls it (``TuneController._process_trial_failure``), else
``on_trial_complete(trial_id, result)``.

  infeasible   ``searcher: {type: optuna, sampler: tpe, seed: S}`` (``failed_trials: infeasible``, the default)
  ignore       the same with ``failed_trials: ignore`` (told as failed: Optuna's samplers skip FAIL trials)

Figures, per way, over the seeds: the share of the trials after TPE's 10 random start-up trials that were
proposed in the failing region, and the best loss of the trials that did not fail.

Run (JSON under benchmarks/results/):
  python benchmarks/failed_trials.py                       # 20 seeds x 60 trials (about a minute)
  python benchmarks/failed_trials.py --seeds 3 --trials 40
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._common import print_table, write_results  # noqa: E402
from benchmarks._machine import print_header  # noqa: E402
from benchmarks.searchers_on_tables import hpsearch_searcher  # noqa: E402 - the builder `hpsearch run` uses

BATCH_SIZES = (16, 32, 64, 128, 512, 1024)
FAILS_FROM = 512  # out of memory from this batch size on, always, after the first epoch
STARTUP = 10  # TPE's random trials before its model takes over (n_startup_trials)
WAYS = ("infeasible", "ignore")


def spec_dict(way: str, seed: int, trials: int) -> dict:
    """The spec a user would write: the space, the metric and the searcher, ``failed_trials`` as ``way``."""
    return {
        "name": f"failed-{way}",
        "trainable": "hpsearch.examples.digits:train_loop",  # never run here: the searcher alone is driven
        "metric": "loss",
        "mode": "min",
        "num_samples": trials,
        "search_space": {
            "batch_size": {"type": "choice", "values": list(BATCH_SIZES)},
            "lr": {"type": "float", "low": 1.0e-4, "high": 1.0e-1, "log": True},
        },
        "searcher": {
            "type": "optuna",
            "sampler": "tpe",
            "seed": seed,
            "n_startup_trials": STARTUP,
            "failed_trials": way,
        },
    }


def loss(config: dict) -> float:
    """Lower with larger batches and with ``lr`` near 1e-2: the failing sizes look best at their first epoch."""
    return (math.log10(config["lr"]) + 2.0) ** 2 + 4.0 / math.log2(config["batch_size"])


def fails(config: dict) -> bool:
    return int(config["batch_size"]) >= FAILS_FROM


def run_way(way: str, seed: int, trials: int) -> dict:
    """One search: each trial's config, and whether it failed."""
    import hpsearch  # lazy: only a search needs the spec's reader

    spec = hpsearch.load_spec(spec_dict(way, seed, trials))
    searcher, param_space, metric, mode = hpsearch_searcher(spec)
    searcher.set_search_properties(metric, mode, param_space, num_samples=trials)  # as tune.run calls it
    configs, failed, losses = [], [], []
    for i in range(trials):
        trial_id = f"{i:05d}"
        config = searcher.suggest(trial_id)
        if not isinstance(config, dict):
            raise RuntimeError(f"{way} suggested {config!r} for trial {i} of {trials}")
        first = {"loss": loss(config), "epoch": 1, "training_iteration": 1}
        searcher.on_trial_result(trial_id, first)  # its first epoch's report, good even where it then fails
        if fails(config):
            searcher.on_trial_complete(trial_id, error=True)  # as Tune's controller tells an errored trial
        else:
            searcher.on_trial_complete(trial_id, first)
            losses.append(first["loss"])
        configs.append({"batch_size": int(config["batch_size"]), "lr": float(config["lr"])})
        failed.append(fails(config))
    return {"configs": configs, "failed": failed, "best": min(losses) if losses else None}


def summarize(runs: dict[str, list[dict]]) -> dict:
    out = {}
    for way, searches in runs.items():
        shares = [sum(s["failed"][STARTUP:]) / max(1, len(s["failed"]) - STARTUP) for s in searches]
        bests = [s["best"] for s in searches if s["best"] is not None]
        out[way] = {
            "failing_share_after_startup": {
                "median": statistics.median(shares),
                "mean": statistics.fmean(shares),
                "min": min(shares),
                "max": max(shares),
            },
            "best_loss_median": statistics.median(bests) if bests else None,
            "failed_trials_median": statistics.median(sum(s["failed"]) for s in searches),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "failed_trials.json")
    args = parser.parse_args(argv)
    command, machine = print_header()
    started = time.monotonic()
    runs = {way: [run_way(way, seed, args.trials) for seed in range(args.seeds)] for way in WAYS}
    summary = summarize(runs)
    print(f"\n{args.seeds} seeds x {args.trials} trials; batch sizes {FAILS_FROM}+ fail after their first epoch\n")
    rows = []
    for way, s in summary.items():
        share = s["failing_share_after_startup"]
        best = s["best_loss_median"]
        rows.append(
            [
                way,
                f"{share['median']:.1%} ({share['min']:.0%} to {share['max']:.0%})",
                f"{s['failed_trials_median']:g}",
                "-" if best is None else f"{best:.4f}",
            ]
        )
    print_table(
        ["failed_trials", "failing region, after the start-up (median, range)", "failed trials", "best loss"], rows
    )
    write_results(
        args.out,
        {
            "command": command,
            "machine": machine,
            "seeds": args.seeds,
            "trials": args.trials,
            "startup_trials": STARTUP,
            "summary": summary,
            "seconds": round(time.monotonic() - started, 1),
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
