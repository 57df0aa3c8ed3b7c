"""What one nested trial's start costs in CPU, by process kind, measured.

The work: ``--trials`` (3) trials one after another (``max_concurrent_trials: 1``), each a
nested Ray Train run of ``--workers`` (2) workers of ``{CPU: 0.5}`` whose loop only reports
``--reports`` (2) times, through ``hpsearch.run`` (what users get), in a Python process of its
own with its own embedded Ray (``_common.run_isolated``). A thread of that process samples
every process of its session every ``--every-s`` (0.25 s) with psutil: each process's
cumulative CPU time (user + system; a process's reaped children are not added, they are
sampled themselves), keyed by PID and start time, keeping each process's last reading, so a
process that ended between two samples keeps what it used up to the last one. Each process
counts under the kind of the last title Ray gave it (:data:`KINDS`: ``ray::TrainController``,
``ray::RayTrainWorker``, ``ray::PlacementGroupCleaner``, ``ray::DatasetManager``,
``ray::SynchronizationActor``, ``ray::_QueueActor``, ``ray::ImplicitFunc``: the trial driver;
the raylet, the GCS, the dashboard and its agents by their command lines; the search process
by its PID), so a worker Ray started for an actor counts under that actor.

What is counted is the CPU each process used from just before ``hpsearch.run`` to just after
it returned (the embedded Ray's own start is not counted), divided by the trials: the CPU one
trial's start, two reports and teardown cost. The processes that run with no trial at all (the
dashboard, the GCS, the raylet) are counted too; their idle rate, sampled for ``--idle-s``
before the search, is printed beside them.

``--ways`` runs it with hpsearch's cuts of a trial's helpers on (``hpsearch``, the default) and
off (``ray-defaults``: ``HPSEARCH_RAY_WORKAROUNDS=0``, Ray's own nested run), each in its own
process and Ray. Needs Linux (``/proc``) and psutil.

Run:  python benchmarks/trial_start.py                          # ~1.5 min on 2 CPUs
      python benchmarks/trial_start.py --ways hpsearch ray-defaults   # both, ~3 min
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._common import logs_folder, print_table, run_isolated, session_processes, write_results  # noqa: E402
from benchmarks._machine import print_header  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "trial_start.json"
WORKER_CPUS = 0.5
DRIVER_CPUS = 0.1
#: The ways: hpsearch as ``run`` runs it, and with its Ray work-arounds and cuts off (Ray's own nested run).
WAYS: dict[str, dict[str, str]] = {"hpsearch": {}, "ray-defaults": {"HPSEARCH_RAY_WORKAROUNDS": "0"}}

# ----------------------------------------------------------------------------- telling processes apart

#: (kind, pattern) in order: the first pattern that matches a process's title (its command line as Ray
#: sets it, ``ray::TrainController.run``) or, failing that, its name, gives its kind.
KINDS: tuple[tuple[str, str], ...] = (
    ("trial driver", r"^ray::(ImplicitFunc|_Inner|FunctionTrainable)\b"),
    ("queue actor", r"^ray::_QueueActor\b"),
    ("train controller", r"^ray::TrainController\b"),
    ("pg cleaner", r"^ray::PlacementGroupCleaner\b"),
    ("sync actor", r"^ray::SynchronizationActor\b"),
    ("dataset manager", r"^ray::(DatasetManager|_DatasetManager)\b"),
    ("preemption watcher", r"^ray::\w*Preempt\w*\b"),
    ("train worker", r"^ray::RayTrainWorker\b"),
    ("gcs", r"^\S*gcs_server\b"),
    ("raylet", r"^\S*/raylet\b"),
    ("idle worker", r"^ray::IDLE\b|default_worker\.py"),
    ("dashboard agent", r"^ray::DashboardAgent\b|dashboard/agent\.py"),
    ("runtime env agent", r"^ray::RuntimeEnvAgent\b|runtime_env/agent/main\.py"),
    ("dashboard", r"dashboard/dashboard\.py|^ray-dashboard-|multiprocessing\.forkserver.*ray\.dashboard"),
    ("log monitor", r"log_monitor\.py"),
    ("monitor", r"autoscaler/_private/monitor\.py|\bmonitor\.py\b"),
    ("autoscaling coordinator", r"^ray::_AutoscalingCoordinatorActor\b"),
    ("other ray task or actor", r"^ray::"),
)
#: A nested trial's own processes, in the order the table shows them.
TRIAL_KINDS = (
    "train worker",
    "train controller",
    "pg cleaner",
    "dataset manager",
    "sync actor",
    "queue actor",
    "trial driver",
    "preemption watcher",
)
SEARCH_PROCESS = "search process"
OTHER = "other"
#: Kinds that never replace a kind already seen for a process (a worker becomes an actor, not the reverse).
_VAGUE = ("idle worker", "other ray task or actor", OTHER)


def classify(title: str, name: str = "", *, is_search_process: bool = False) -> str:
    """The kind of a process of the Ray session, from its title (``/proc/PID/cmdline``) and name.

    The search process (the one running ``hpsearch.run``) is told apart by PID: it is a plain
    ``python``. A process none of :data:`KINDS` matches is ``"other"``.
    """
    if is_search_process:
        return SEARCH_PROCESS
    for kind, pattern in KINDS:
        if re.search(pattern, title) or (name and re.search(pattern, name)):
            return kind
    return OTHER


class CpuLedger:
    """Each process's last cumulative CPU seconds and last title, keyed by (PID, start time).

    A PID reused by a new process is a new key. A title Ray changes as a worker becomes an actor
    (``default_worker.py`` -> ``ray::IDLE`` -> ``ray::TrainController``) is replaced, except by
    an idle title: the process counts under the last actor or task it ran.
    """

    def __init__(self) -> None:
        self.cpu: dict[tuple[int, float], float] = {}
        self.kind: dict[tuple[int, float], str] = {}
        self.title: dict[tuple[int, float], str] = {}

    def see(self, key: tuple[int, float], cpu_s: float, kind: str, title: str) -> None:
        """One reading of a process: its cumulative CPU seconds, its kind and title now."""
        self.cpu[key] = max(cpu_s, self.cpu.get(key, 0.0))
        # An exiting process's title can read empty (its name then gives only "ray::..."): keep what it was.
        if key not in self.kind or (title and kind not in _VAGUE):
            self.kind[key], self.title[key] = kind, title

    def used_since(self, before: Mapping[tuple[int, float], float]) -> dict[tuple[int, float], float]:
        """CPU seconds each process used since the readings ``before`` (a process not in it: all it used)."""
        return {key: cpu - before.get(key, 0.0) for key, cpu in self.cpu.items()}

    def by_kind(self, used: Mapping[tuple[int, float], float]) -> dict[str, dict[str, float]]:
        """Per kind: ``processes`` (those that used any CPU) and ``cpu_s``."""
        out: dict[str, dict[str, float]] = {}
        for key, seconds in used.items():
            if seconds <= 0:
                continue
            row = out.setdefault(self.kind[key], {"processes": 0, "cpu_s": 0.0})
            row["processes"] += 1
            row["cpu_s"] += seconds
        return out


def sample(ledger: CpuLedger, search_pid: int) -> None:
    """Read every process of the search process's session into ``ledger``."""
    import psutil

    for pid, name in session_processes(os.getsid(search_pid)).items():
        try:
            proc = psutil.Process(pid)
            with proc.oneshot():
                times = proc.cpu_times()
                key = (pid, proc.create_time())
                title = " ".join(proc.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue  # ended while we looked: its last reading stands
        kind = classify(title, name, is_search_process=pid == search_pid)
        ledger.see(key, times.user + times.system, kind, title[:120])


def per_trial(by_kind: Mapping[str, Mapping[str, float]], trials: int) -> dict[str, dict[str, float]]:
    """``by_kind`` divided by the trials: CPU seconds and processes per trial."""
    return {
        kind: {"processes": row["processes"] / trials, "cpu_s": row["cpu_s"] / trials} for kind, row in by_kind.items()
    }


def total(rows: Mapping[str, Mapping[str, float]], kinds: Iterable[str] | None = None) -> float:
    """The summed ``cpu_s`` of ``kinds`` (every kind when None)."""
    chosen = None if kinds is None else set(kinds)
    return sum(row["cpu_s"] for kind, row in rows.items() if chosen is None or kind in chosen)


# ----------------------------------------------------------------------------- one way, in its own process


def two_reports(config: dict[str, Any]) -> None:
    """The trivial loop: ``config["reports"]`` reports from every rank, nothing else."""
    import ray.train

    for epoch in range(1, config["reports"] + 1):
        ray.train.report({"loss": config["x"] / epoch, "epoch": epoch})


def measure(trials: int, workers: int, reports: int, every_s: float, idle_s: float, storage: str) -> dict[str, Any]:
    """The search, sampled; returns per kind the CPU seconds used during it and the idle rates before it."""
    import hpsearch
    from hpsearch.runtime.nodes.connect import connect

    connect()
    spec = hpsearch.load_spec(
        {
            "name": "trial_start",
            "trainable": f"{Path(__file__).resolve()}:two_reports",
            "metric": "loss",
            "mode": "min",
            "num_samples": trials,
            "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}, "reports": reports},
            "scaling": {"num_workers": workers, "resources_per_worker": {"CPU": WORKER_CPUS}},
            "resources": {"driver_cpus": DRIVER_CPUS, "max_concurrent_trials": 1},
            "storage_path": storage,
        }
    )
    ledger = CpuLedger()
    pid = os.getpid()
    sample(ledger, pid)
    idle_start, t_idle = dict(ledger.cpu), time.monotonic()
    time.sleep(idle_s)
    sample(ledger, pid)
    idle_rate = {
        kind: row["cpu_s"] / (time.monotonic() - t_idle)
        for kind, row in ledger.by_kind(ledger.used_since(idle_start)).items()
    }

    stop = threading.Event()

    def sampler() -> None:
        while not stop.wait(every_s):
            sample(ledger, pid)

    sample(ledger, pid)
    before = dict(ledger.cpu)
    thread = threading.Thread(target=sampler, daemon=True)
    started = time.monotonic()
    thread.start()
    grid = hpsearch.run(spec, stream=sys.stderr)
    search_s = time.monotonic() - started
    stop.set()
    thread.join()
    sample(ledger, pid)
    used = ledger.used_since(before)
    import ray

    ray.shutdown()
    return {
        "trials": trials,
        "finished": sum(1 for r in grid if r.error is None),
        "search_s": search_s,
        "by_kind": ledger.by_kind(used),
        "idle_rate_cpu_s_per_s": idle_rate,
        "processes": sorted(
            (
                {"kind": ledger.kind[k], "title": ledger.title[k], "cpu_s": round(s, 3)}
                for k, s in used.items()
                if s > 0
            ),
            key=lambda p: -float(p["cpu_s"]),
        ),
    }


# ----------------------------------------------------------------------------- the table on screen


def show(results: Mapping[str, Mapping[str, Any]]) -> None:
    """Per kind, CPU seconds per trial for each way, with the processes per trial, and the totals."""
    ways = list(results)
    tables = {way: per_trial(r["by_kind"], r["trials"]) for way, r in results.items()}
    kinds = [k for k in (*TRIAL_KINDS, SEARCH_PROCESS) if any(k in t for t in tables.values())]
    kinds += sorted(
        {k for t in tables.values() for k in t} - set(kinds),
        key=lambda k: -max(t.get(k, {}).get("cpu_s", 0) for t in tables.values()),
    )
    rows = []
    for kind in kinds:
        cells = [kind]
        for way in ways:
            row = tables[way].get(kind)
            cells.append("-" if row is None else f"{row['cpu_s']:.2f} ({row['processes']:.3g})")
        idle = results[ways[0]]["idle_rate_cpu_s_per_s"].get(kind)
        cells.append("" if not idle else f"{idle * results[ways[0]]['search_s'] / results[ways[0]]['trials']:.2f}")
        rows.append(cells)
    rows.append(["trial's own processes", *(f"{total(tables[w], TRIAL_KINDS):.2f}" for w in ways), ""])
    rows.append(["all", *(f"{total(tables[w]):.2f}" for w in ways), ""])
    print("\nCPU-seconds per trial by process kind (processes per trial in brackets)")
    print_table(["kind", *ways, f"idle share ({ways[0]})"], rows)
    for way, r in results.items():
        print(f"{way}: {r['finished']}/{r['trials']} trials finished, search {r['search_s']:.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="trials, one after another (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="Train workers per trial (default 2)")
    parser.add_argument("--reports", type=int, default=2, help="reports per trial (default 2)")
    parser.add_argument("--every-s", type=float, default=0.25, help="seconds between samples (default 0.25)")
    parser.add_argument("--idle-s", type=float, default=3.0, help="idle sampling before the search (default 3)")
    parser.add_argument("--ways", nargs="+", choices=list(WAYS), default=["hpsearch"], help="default: hpsearch")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # internal: one way, JSON out
    parser.add_argument("--storage", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.measure:
        print(json.dumps(measure(args.trials, args.workers, args.reports, args.every_s, args.idle_s, args.storage)))
        return 0

    command, machine = print_header()
    print(
        f"work: {args.trials} trials one after another, {args.workers} workers of {{CPU: {WORKER_CPUS}}} + a "
        f"{DRIVER_CPUS}-CPU driver each, a loop of {args.reports} reports; every process sampled every "
        f"{args.every_s:g} s; ways: {', '.join(args.ways)}"
    )
    logs = logs_folder("trial_start")
    results: dict[str, dict[str, Any]] = {}
    for way in args.ways:
        t0 = time.perf_counter()
        saved = {name: os.environ.get(name) for name in WAYS[way]}
        os.environ.update(WAYS[way])  # the way's process inherits it
        try:
            with tempfile.TemporaryDirectory(prefix="hpsearch-trial-start-") as storage:
                flags = ["--trials", args.trials, "--workers", args.workers, "--reports", args.reports]
                flags += ["--every-s", args.every_s, "--idle-s", args.idle_s, "--storage", storage]
                r, left = run_isolated([__file__, "--measure", *map(str, flags)], log=logs / f"{way}.log")
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        r["left_behind"] = left
        results[way] = r
        note = f"; ended {len(left)} process(es) it left behind: {', '.join(left)}" if left else ""
        print(f"  {way:<12} done in {time.perf_counter() - t0:6.1f} s{note}", flush=True)
    show(results)
    write_results(
        args.out,
        {
            "benchmark": "trial_start",
            "command": command,
            "machine": machine,
            "trials": args.trials,
            "workers": args.workers,
            "worker_cpus": WORKER_CPUS,
            "driver_cpus": DRIVER_CPUS,
            "reports": args.reports,
            "every_s": args.every_s,
            "logs": str(logs),
            "per_trial": {way: per_trial(r["by_kind"], r["trials"]) for way, r in results.items()},
            "trial_processes_cpu_s_per_trial": {
                way: total(per_trial(r["by_kind"], r["trials"]), TRIAL_KINDS) for way, r in results.items()
            },
            "all_cpu_s_per_trial": {way: total(per_trial(r["by_kind"], r["trials"])) for way, r in results.items()},
            "runs": results,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
