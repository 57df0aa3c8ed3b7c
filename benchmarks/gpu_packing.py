"""GPU packing: digits-MLP trials packed at a quarter GPU each versus one trial per GPU.

Needs a GPU: without one visible to torch (or without ``nvidia-smi``) it says so and exits 2.

The work: the shipped digits MLP (``hpsearch.examples.digits:train_loop``, wider than the
quick search's: hidden 2048, 3 layers, batch 64, one checkpoint at the end), ``--trials``
identical trials per way, 1 worker per trial (two DDP ranks on one GPU are refused by
NCCL), through ``hpsearch.run`` with ``scaling.use_gpu: true``. Ray Train's
``prepare_model`` / ``prepare_data_loader`` put the model and every batch on the worker's
GPU. The two ways:

  packed  ``resources_per_worker: {CPU: 1, GPU: 0.25}``: the planner fits 4 trials per GPU;
  whole   ``resources_per_worker: {CPU: 1, GPU: 1}``: one trial per GPU.

Each way runs in its own Python process with its own embedded Ray; while its search runs,
``nvidia-smi`` samples every GPU's utilisation and memory every 0.5 s. Figures per way:
trials finished; wall s (``hpsearch.run``, Ray already started); trials per hour =
finished trials / (end of the last finished trial - start of the search); trials at once
(hpsearch's plan); mean GPU utilisation (nvidia-smi's ``utilization.gpu``: the share of
time a kernel ran, averaged over all samples of all GPUs); peak GPU memory used.

Device time: a way whose search passes ``--budget-s`` (default 100 s) is stopped as Ctrl-C
would stop it and counts the trials that finished (trials per hour stays fair: it runs to
the last trial that ended). With Ray's start-up and shut-down the script takes at most
~2 x (budget + 45 s), under 5 min; with the defaults on 1 H200 and 16 CPUs, about 3 min.

Run:  python benchmarks/gpu_packing.py [--trials 6] [--epochs 20] [--budget-s 100]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._common import interrupt_when, logs_folder, print_table, run_ways, write_results  # noqa: E402
from benchmarks._machine import print_header  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "gpu_packing.json"
MODEL = {"hidden": 2048, "layers": 3, "dropout": 0.1, "lr": 1e-3, "batch_size": 64, "seed": 0}
WAYS = {"packed": {"CPU": 1, "GPU": 0.25}, "whole": {"CPU": 1, "GPU": 1}}
SMI_QUERY = ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits", "-lms", "500"]


@contextlib.contextmanager
def gpu_samples() -> Iterator[list[tuple[float, float]]]:
    """While the body runs, sample (utilisation %, memory MiB) of every GPU; filled in at the end."""
    samples: list[tuple[float, float]] = []
    with tempfile.TemporaryFile("w+") as out:
        smi = subprocess.Popen(SMI_QUERY, stdout=out, stderr=subprocess.DEVNULL, text=True)
        try:
            yield samples
        finally:
            smi.terminate()
            smi.wait()
            out.seek(0)
            for line in out:
                with contextlib.suppress(ValueError):
                    util, memory = line.split(",")
                    samples.append((float(util), float(memory)))


def run_way(way: str, trials: int, epochs: int, budget_s: float, storage: str) -> dict:
    """One way's search, in this process; returns its figures."""
    import ray

    import hpsearch
    from hpsearch.experiment.layout import PLAN_FILE
    from hpsearch.runtime.nodes.connect import connect

    connect()
    spec = hpsearch.load_spec(
        {
            "name": way,
            "trainable": "hpsearch.examples.digits:train_loop",
            "metric": "val_loss",
            "mode": "min",
            "num_samples": trials,
            "search_space": {**MODEL, "epochs": epochs, "checkpoint_every": epochs},
            "scaling": {"num_workers": 1, "use_gpu": True, "resources_per_worker": WAYS[way]},
            "storage_path": storage,
        }
    )
    started_at, start = time.time(), time.monotonic()

    def over_budget() -> str | None:
        return f"budget of {budget_s:g} s spent" if time.monotonic() - start > budget_s else None

    with gpu_samples() as samples, interrupt_when(over_budget) as cut:
        hpsearch.run(spec)
    wall = time.monotonic() - start
    trials_table = hpsearch.load_results(spec.experiment_dir).trials
    done = trials_table[trials_table["status"] == "finished"]
    span = done["ended_at"].max().timestamp() - started_at if len(done) else wall
    ray.shutdown()
    utils = [u for u, _ in samples]
    return {
        "wall_s": wall,
        "finished": len(done),
        "trials_per_hour": len(done) / span * 3600 if len(done) else 0.0,
        "trials_at_once": json.loads((spec.experiment_dir / PLAN_FILE).read_text())["max_concurrent_trials"],
        "gpu_util_mean": sum(utils) / len(utils) if utils else None,
        "gpu_memory_peak_mib": max((m for _, m in samples), default=None),
        "samples": len(samples),
        "budget_hit": cut or None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6, help="identical trials per way (default 6)")
    parser.add_argument("--epochs", type=int, default=20, help="epochs per trial (default 20)")
    parser.add_argument("--budget-s", type=float, default=100.0, help="cap on each way's search, seconds (100)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)  # internal: one way, JSON out
    parser.add_argument("--storage", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.way:
        print(json.dumps(run_way(args.way, args.trials, args.epochs, args.budget_s, args.storage)))
        return 0

    import torch

    if not torch.cuda.is_available() or shutil.which("nvidia-smi") is None:
        print(
            "gpu_packing: needs a GPU that torch can use and nvidia-smi to sample it; "
            f"here torch.cuda.is_available() is {torch.cuda.is_available()} and nvidia-smi is "
            f"{shutil.which('nvidia-smi') or 'not on PATH'}. Run it on a GPU machine.",
            file=sys.stderr,
        )
        return 2
    command, machine = print_header()
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    print(f"gpus: {', '.join(gpus)}")
    print(
        f"work: digits MLP {MODEL}, {args.epochs} epochs, 1 worker; {args.trials} identical trials per way; "
        f"each way's search capped at {args.budget_s:g} s"
    )
    flags = ["--trials", args.trials, "--epochs", args.epochs, "--budget-s", args.budget_s]
    logs = logs_folder("gpu-packing")
    with tempfile.TemporaryDirectory(prefix="hpsearch-gpu-packing-") as storage:
        ways = run_ways(__file__, WAYS, flags, storage, logs)

    print()
    print_table(
        ["way", "worker", "finished", "wall s", "trials/hour", "at once", "GPU util %", "GPU MiB peak", "budget hit"],
        [
            [
                way,
                json.dumps(WAYS[way]).replace('"', ""),
                f"{r['finished']}/{args.trials}",
                f"{r['wall_s']:.1f}",
                f"{r['trials_per_hour']:.0f}",
                str(r["trials_at_once"]),
                "-" if r["gpu_util_mean"] is None else f"{r['gpu_util_mean']:.1f}",
                "-" if r["gpu_memory_peak_mib"] is None else f"{r['gpu_memory_peak_mib']:.0f}",
                "yes" if r["budget_hit"] else "no",
            ]
            for way, r in ways.items()
        ],
    )
    if ways["whole"]["trials_per_hour"]:
        print(
            f"\npacking at 0.25 GPU: {ways['packed']['trials_per_hour'] / ways['whole']['trials_per_hour']:.2f}x "
            "the trials per hour of one trial per GPU"
        )
    write_results(
        args.out,
        {
            "benchmark": "gpu_packing",
            "command": command,
            "machine": machine,
            "gpus": gpus,
            "model": MODEL,
            "epochs": args.epochs,
            "trials": args.trials,
            "budget_s": args.budget_s,
            "worker_resources": WAYS,
            "logs": str(logs),
            "ways": ways,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
