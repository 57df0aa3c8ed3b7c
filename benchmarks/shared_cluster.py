"""Two searches on one cluster at once, against the same two one after the other.

The cluster: the multi-host harness of the tests (``tests/multihost.py``): two hosts, each its own
network namespace running ``ray start --num-cpus 1`` with token authentication, on this machine.
A trial is one worker of ``{CPU: 0.8}`` and a 0.1-CPU driver on the head, so the cluster holds 2
trials at once, and so does each search's own plan. Each search runs ``--trials`` trials of
``--reports`` reports ``--report-s`` seconds apart (the harness's ``one_rank`` loop) through
``hpsearch run --address``, as a user would.

Two ways, each on a cluster of its own:

- ``at-once``: both searches started together; they register with the cluster's register and share it.
- ``one-after-other``: the second started when the first has ended.

For each search: its wall time (the command's start to its end), and its trials at once over time
(a trial counts from its first report to its last, read from Tune's ``result.json``), sampled every
``--sample-s`` seconds from the first start. Needs root, ``ip``, ``unshare`` and ``nsenter``, as the
multi-host tests do.

Run:  python benchmarks/shared_cluster.py          # ~5 min on 2 CPUs
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._common import print_table, write_results  # noqa: E402
from benchmarks._machine import print_header  # noqa: E402

DATA = ROOT / "tests" / "data" / "multihost"
RESULTS = Path(__file__).resolve().parent / "results" / "shared_cluster.json"
NAMES = ("search-a", "search-b")


def _spec(folder: Path, name: str, args: argparse.Namespace) -> Path:
    spec = {
        "name": name,
        "trainable": f"{DATA / 'span_loop.py'}:one_rank",
        "metric": "loss",
        "mode": "min",
        "num_samples": args.trials,
        "search_space": {
            "x": {"type": "float", "low": 0.0, "high": 1.0},
            "epochs": args.reports,
            "sleep_s": args.report_s,
        },
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.8}},
        "resources": {"driver_cpus": 0.1},
        "failure": {"trial_retries": 0},
        "storage_path": str(folder / "results"),
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _spans(exp: Path) -> list[tuple[float, float]]:
    """Each trial's first and last report, UNIX seconds."""
    spans = []
    for result in exp.glob("*/result.json"):
        stamps = [float(json.loads(line)["timestamp"]) for line in result.read_text().splitlines() if line.strip()]
        if stamps:
            spans.append((min(stamps), max(stamps)))
    return spans


def _timeline(spans: dict[str, list[tuple[float, float]]], start: float, end: float, every: float) -> list[dict]:
    """Trials at once of each search, every ``every`` seconds from ``start``."""
    rows = []
    t = start
    while t <= end:
        rows.append({"t_s": round(t - start, 1), **{n: sum(a <= t <= b for a, b in s) for n, s in spans.items()}})
        t += every
    return rows


def _run(hosts: Any, spec: Path) -> subprocess.Popen[str]:
    return hosts.popen("h1", [sys.executable, "-m", "hpsearch", "run", str(spec), "--address", hosts.address])


def _way(way: str, args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests"))  # the multi-host harness lives with the tests that use it
    from multihost import Hosts  # lazy: the harness needs root and sits with the tests

    with Hosts(["h1", "h2"], loopback_names=["h1", "h2"], ray_on=["h1", "h2"]) as hosts:
        specs = {name: _spec(hosts.shared, name, args) for name in NAMES}
        walls: dict[str, float] = {}
        began = time.time()
        if way == "at-once":
            runs = {name: (_run(hosts, specs[name]), time.time()) for name in NAMES}
            for name, (run, t0) in runs.items():
                _, err = run.communicate(timeout=1800)
                walls[name] = time.time() - t0
                assert run.returncode == 0, err[-3000:]
        else:
            for name in NAMES:
                t0 = time.time()
                run = _run(hosts, specs[name])
                _, err = run.communicate(timeout=1800)
                walls[name] = time.time() - t0
                assert run.returncode == 0, err[-3000:]
        ended = time.time()
        spans = {name: _spans(hosts.shared / "results" / name) for name in NAMES}
        counts = {}
        for name in NAMES:
            summary = json.loads((hosts.shared / "results" / name / "hpsearch_summary.json").read_text())
            counts[name] = summary["counts"]
    return {
        "wall_s": {n: round(w, 1) for n, w in walls.items()},
        "all_done_s": round(ended - began, 1),
        "counts": counts,
        "timeline": _timeline(spans, began, ended, args.sample_s),
        "most_at_once": max(sum(r[n] for n in NAMES) for r in _timeline(spans, began, ended, 0.5)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=4, help="trials per search (default 4)")
    parser.add_argument("--reports", type=int, default=3, help="reports per trial (default 3)")
    parser.add_argument("--report-s", type=float, default=4.0, help="seconds between reports (default 4)")
    parser.add_argument("--sample-s", type=float, default=5.0, help="the timeline's step (default 5 s)")
    args = parser.parse_args()
    command, machine = print_header()
    ways = {way: _way(way, args) for way in ("at-once", "one-after-other")}
    rows = [
        [way, *(f"{r['wall_s'][n]:.0f} s" for n in NAMES), f"{r['all_done_s']:.0f} s", str(r["most_at_once"])]
        for way, r in ways.items()
    ]
    print_table(["way", *(f"{n} wall" for n in NAMES), "both done", "most at once"], rows)
    for row in ways["at-once"]["timeline"]:
        print(f"  at once, t={row['t_s']:>5} s: " + ", ".join(f"{n} {row[n]}" for n in NAMES))
    write_results(RESULTS, {"command": command, "machine": machine, "args": vars(args), "ways": ways})


if __name__ == "__main__":
    main()
