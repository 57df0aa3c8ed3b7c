"""Head-node memory: what every trial of a search adds to the node its driver runs on, measured.

The work: for each N of ``--trials`` (1 2 4 8), a search of N trivial nested trials that all run
at once on this one node, through ``hpsearch.run`` (what users get): 1 worker of
``{CPU: 0.1}`` and a 0.05-CPU driver per trial, ``max_concurrent_trials: N``, the planner's
memory estimates set to 0 (they would cap N: they are what this benchmark measures). Each
worker's loop reports ``--reports`` times, then drops a marker file and waits for a release
file. Once every worker has dropped its marker and the session's processes have settled
(every trial has each of its kinds of process, and none has come or gone for ``--settle-s``:
some of a nested run's actors start after its workers run), the search is in its steady
state: every trial's driver, queue, Train controller, placement-group cleaner,
synchronisation actor and worker alive and idle. The script then snapshots every process of
the Ray session (``--samples`` times, ``--every-s`` apart) with psutil, releases the loops,
and the search ends. Each N runs in a Python process of its own with its own embedded Ray
(``_common.run_isolated``), so that no process of one N is counted at the next.

Each process is told apart by the title Ray gives it (``ray::TrainController``,
``ray::RayTrainWorker``...; :data:`KINDS`) and counted under a kind. Per kind: how many, and
their memory three ways, from psutil's ``memory_full_info``:

- RSS, the resident set: what ``top`` and Ray's dashboard show; it counts every shared page
  (libpython, Ray's core worker library, torch's libraries) once in *each* process that
  maps it, so summing it over processes overstates the memory used;
- PSS, the proportional set: each shared page divided among the processes that map it. Summed
  over the processes it is the memory they use together, and a slope of summed PSS over N
  is what one more trial really adds. **The slopes and the head sizes use PSS** for that reason;
- USS, the unique set: what ending the process alone would free (a lower bound).

The slopes: least squares over N of the summed memory of (a) the processes a trial puts on
the node of its driver -- :data:`HEAD_KINDS` (the Tune trial actor, Tune's queue actor, the Train
controller, the placement-group cleaner, the synchronisation actor; the dataset manager and
preemption watcher when Ray starts them) -- per trial, and (b) the Train workers, per worker.
The base is the intercept of everything else (the search process, the GCS, the raylet, the
dashboard and its agents, idle pool workers) plus that of (a): the head with no trial. Then
the trials at once a head of 16, 64 and 256 GB holds, running only the drivers and their
nested runs' actors (the workers on other nodes): floor((head - base) / per trial), and the
same below the 95% of the node's memory past which Ray's memory monitor kills workers.

MB and GB here are 2**20 and 2**30 bytes (the planner's GB). Needs Linux (``/proc``).

Run:  python benchmarks/head_memory.py                     # N = 1 2 4 8: ~8 min on 2 CPUs (11 GB at N = 8)
      python benchmarks/head_memory.py --trials 1 2        # smoke run, ~2 min
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._common import logs_folder, print_table, run_isolated, session_processes, write_results  # noqa: E402
from benchmarks._machine import print_header  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "head_memory.json"
WORKER_CPUS = 0.1
DRIVER_CPUS = 0.05
MB = 2**20
GB = 2**30
#: The head sizes the benchmark says how many trials at once each holds.
HEAD_SIZES_GB = (16, 64, 256)
#: Ray's memory monitor kills workers once the node uses more than this fraction of its memory (its default).
RAY_MEMORY_THRESHOLD = 0.95
#: The memory figures psutil gives per process (``memory_full_info``), in the order shown.
MEASURES = ("rss", "pss", "uss")
#: The one the slopes and the head sizes use (see the module's docstring).
SLOPE_MEASURE = "pss"

# ----------------------------------------------------------------------------- telling processes apart

#: (kind, pattern) in order: the first pattern that matches a process's title (its command line as Ray
#: sets it, ``ray::TrainController.run``) or, failing that, its name, gives its kind.
KINDS: tuple[tuple[str, str], ...] = (
    ("trial actor", r"^ray::(ImplicitFunc|_Inner|FunctionTrainable)\b"),
    ("queue actor", r"^ray::_QueueActor\b"),
    ("train controller", r"^ray::TrainController\b"),
    ("pg cleaner", r"^ray::PlacementGroupCleaner\b"),
    ("sync actor", r"^ray::SynchronizationActor\b"),
    ("dataset manager", r"^ray::(DatasetManager|DatasetsSetupCallback|_DatasetManager)\b"),
    ("preemption watcher", r"^ray::\w*Preempt\w*\b"),
    ("train worker", r"^ray::RayTrainWorker\b"),
    ("idle worker", r"^ray::IDLE\b"),
    ("gcs", r"\bgcs_server\b"),
    ("raylet", r"\braylet\b"),
    ("dashboard agent", r"^ray::DashboardAgent\b|dashboard/agent\.py"),
    ("runtime env agent", r"^ray::RuntimeEnvAgent\b|runtime_env/agent/main\.py"),
    ("dashboard", r"dashboard/dashboard\.py|^ray-dashboard-|multiprocessing\.forkserver.*ray\.dashboard"),
    ("log monitor", r"log_monitor\.py"),
    ("monitor", r"autoscaler/_private/monitor\.py|\bmonitor\.py\b"),
    ("autoscaling coordinator", r"^ray::_AutoscalingCoordinatorActor\b"),
    ("other ray actor", r"^ray::"),
)
#: What a trial puts on the node of its driver (the head, where hpsearch pins the drivers).
HEAD_KINDS = (
    "trial actor",
    "queue actor",
    "train controller",
    "pg cleaner",
    "sync actor",
    "dataset manager",
    "preemption watcher",
)
WORKER_KINDS = ("train worker",)
SEARCH_PROCESS = "search process"
OTHER = "other"


def classify(title: str, name: str = "", *, is_search_process: bool = False) -> str:
    """The kind of a process of the Ray session, from its title (``/proc/PID/cmdline``) and name.

    The search process (the one running ``hpsearch.run``) is told apart by PID, not title: it is
    a plain ``python``. A process none of :data:`KINDS` matches is ``"other"``.
    """
    if is_search_process:
        return SEARCH_PROCESS
    for kind, pattern in KINDS:
        if re.search(pattern, title) or (name and re.search(pattern, name)):
            return kind
    return OTHER


def group(kind_of: Iterable[tuple[str, Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """Per kind, ``count`` and the sum of each of :data:`MEASURES`, from (kind, memory) per process."""
    out: dict[str, dict[str, float]] = {}
    for kind, memory in kind_of:
        row = out.setdefault(kind, {"count": 0, **dict.fromkeys(MEASURES, 0.0)})
        row["count"] += 1
        for measure in MEASURES:
            row[measure] += memory.get(measure, 0.0)
    return out


def mean_of(snapshots: Sequence[Mapping[str, Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """Several snapshots' :func:`group` tables as one: each figure's mean (a kind missing from one counts 0)."""
    kinds = sorted({kind for snap in snapshots for kind in snap})
    return {
        kind: {
            key: sum(snap.get(kind, {}).get(key, 0.0) for snap in snapshots) / len(snapshots)
            for key in ("count", *MEASURES)
        }
        for kind in kinds
    }


def torch_loaded(processes: Iterable[Mapping]) -> dict[str, str]:
    """Per kind, whether its processes have torch loaded: "yes" (all), "no" (none), "some", or "?" (unread)."""
    seen: dict[str, set] = {}
    for proc in processes:
        seen.setdefault(proc["kind"], set()).add(proc.get("torch"))
    words = {frozenset({True}): "yes", frozenset({False}): "no"}
    return {kind: words.get(frozenset(v), "?" if v == {None} else "some") for kind, v in seen.items()}


def composition(kinds: Iterable[str]) -> dict[str, int]:
    """How many processes of each kind, idle pool workers left out (Ray starts and ends them as it sees fit)."""
    counts: dict[str, int] = {}
    for kind in kinds:
        if kind != "idle worker":
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def complete(counts: Mapping[str, int], trials: int, workers: int) -> bool:
    """Does every trial have all its processes: each of :data:`HEAD_KINDS` none or a multiple of ``trials``
    (a kind some trials have and others not yet is still starting), ``trials * workers`` workers?"""
    head = all(counts.get(kind, 0) % trials == 0 for kind in HEAD_KINDS)
    return head and all(counts.get(kind, 0) == trials * workers for kind in WORKER_KINDS)


def slim(run: Mapping) -> dict:
    """One N's record as written: each snapshot as its :func:`group` table, the processes of the last one only
    (titles cut to 80 characters), and the processes before the search as a :func:`group` table."""
    out = {k: v for k, v in run.items() if k not in ("snapshots", "idle")}
    out["snapshots_by_kind"] = [group((p["kind"], p) for p in snap) for snap in run["snapshots"]]
    out["processes"] = [{**p, "title": p["title"][:80]} for p in (run["snapshots"] or [[]])[-1]]
    out["before_search_by_kind"] = group((p["kind"], p) for p in run.get("idle", []))
    return out


def part(by_kind: Mapping[str, Mapping[str, float]], kinds: Iterable[str] | None, measure: str) -> float:
    """The summed ``measure`` of ``kinds`` (None: every kind *not* in :data:`HEAD_KINDS` or :data:`WORKER_KINDS`)."""
    chosen = set(kinds) if kinds is not None else set(by_kind) - set(HEAD_KINDS) - set(WORKER_KINDS)
    return sum(row[measure] for kind, row in by_kind.items() if kind in chosen)


# ----------------------------------------------------------------------------- the figures


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least squares ``y = slope * x + intercept``: (slope, intercept). One point: slope 0 through it.

    Raises:
        ValueError: No points, or as many xs as ys not given.
    """
    if not xs or len(xs) != len(ys):
        raise ValueError(f"need as many xs as ys, at least one: got {len(xs)} and {len(ys)}")
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0, my
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def trials_held(head_gb: float, base_gb: float, per_trial_gb: float, usable: float = 1.0) -> int:
    """How many trials at once a head of ``head_gb`` holds: floor((usable * head - base) / per trial), never below 0.

    ``usable``: the fraction of the head's memory the trials may fill (Ray's memory monitor starts
    killing workers when the node's use passes ``RAY_memory_usage_threshold``, 0.95 by default).

    Raises:
        ValueError: ``per_trial_gb`` is not positive, or ``usable`` not in (0, 1].
    """
    if per_trial_gb <= 0:
        raise ValueError(f"per_trial_gb must be positive, got {per_trial_gb}")
    if not 0 < usable <= 1:
        raise ValueError(f"usable must be in (0, 1], got {usable}")
    return max(0, math.floor((usable * head_gb - base_gb) / per_trial_gb))


def predicted(totals: Mapping[int, float], n: int) -> float:
    """The summed memory at ``n`` trials from that measured at fewer: the least-squares line through them;
    from one point, in proportion to N (an overestimate: the base is counted N times).

    Raises:
        ValueError: Nothing measured yet.
    """
    if not totals:
        raise ValueError("nothing measured to predict from")
    if len(totals) == 1:
        ((n0, total),) = totals.items()
        return total * n / n0
    slope, intercept = fit_line(list(totals), list(totals.values()))
    return slope * n + intercept


#: The most of the memory available now that a search of the next N is predicted to take before it is skipped.
MEMORY_FRACTION = 0.8


def summarize(points: Mapping[int, Mapping[str, Mapping[str, float]]], workers: int) -> dict:
    """The slopes, the base and the head sizes from each N's per-kind table (:func:`mean_of`), in GB.

    ``workers``: Train workers per trial (the per-worker slope is the workers' slope over N / workers).
    """
    ns = sorted(points)
    fits = {}
    for name, kinds in (("head", HEAD_KINDS), ("workers", WORKER_KINDS), ("fixed", None)):
        for measure in MEASURES:
            ys = [part(points[n], kinds, measure) / GB for n in ns]
            slope, intercept = fit_line(ns, ys)
            fits[f"{name}_{measure}"] = {"slope_gb": slope, "intercept_gb": intercept}
    m = SLOPE_MEASURE
    per_trial = fits[f"head_{m}"]["slope_gb"]
    per_worker = fits[f"workers_{m}"]["slope_gb"] / workers
    # What the head holds with no trial running: everything but the trials' own processes, at N = 0.
    base = fits[f"fixed_{m}"]["intercept_gb"] + fits[f"head_{m}"]["intercept_gb"]
    per_kind = {}
    for kind in sorted({k for n in ns for k in points[n]}):
        rows = [points[n].get(kind, {}) for n in ns]
        per_kind[kind] = {
            "count_by_n": {n: row.get("count", 0.0) for n, row in zip(ns, rows)},
            **{
                f"{measure}_mb_per_process": _per_process(rows, measure)
                for measure in MEASURES  # the mean over every N of the kind's sum / its count
            },
            f"{m}_slope_mb_per_trial": fit_line(ns, [row.get(m, 0.0) / MB for row in rows])[0],
        }
    return {
        "ns": ns,
        "measure": m,
        "fits": fits,
        "per_trial_head_gb": per_trial,
        "per_worker_gb": per_worker,
        "base_gb": base,
        "per_kind": per_kind,
        "head_holds": {
            str(size): trials_held(size, base, per_trial) if per_trial > 0 else None for size in HEAD_SIZES_GB
        },
        "head_holds_below_ray_threshold": {
            str(size): trials_held(size, base, per_trial, RAY_MEMORY_THRESHOLD) if per_trial > 0 else None
            for size in HEAD_SIZES_GB
        },
    }


def _per_process(rows: Sequence[Mapping[str, float]], measure: str) -> float | None:
    counted = [row for row in rows if row.get("count")]
    if not counted:
        return None
    return sum(row[measure] / row["count"] for row in counted) / len(counted) / MB


# ----------------------------------------------------------------------------- one N, in its own process


def waiting_loop(config: dict) -> None:
    """Reports ``config["reports"]`` times, drops a marker, then waits for the release file (at most an hour)."""
    import os
    import time
    from pathlib import Path

    import ray.train

    for epoch in range(1, config["reports"] + 1):
        ray.train.report({"loss": config["x"] / epoch, "epoch": epoch})
    markers = Path(config["markers"])
    (markers / f"ready-{os.getpid()}").touch()
    deadline = time.monotonic() + 3600
    while not (markers / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.2)


def snapshot(search_pid: int) -> list[dict]:
    """Every process of this session (the search process's): PID, title, kind and memory in bytes."""
    import psutil

    found = []
    for pid, name in session_processes(os.getsid(search_pid)).items():
        try:
            proc = psutil.Process(pid)
            title = " ".join(proc.cmdline())
            info = proc.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue  # ended while we looked (a zombie has no memory to count)
        found.append(
            {
                "pid": pid,
                "name": name,
                "title": title[:200],
                "kind": classify(title, name, is_search_process=pid == search_pid),
                **{measure: float(getattr(info, measure)) for measure in MEASURES},
                "torch": _maps_torch(pid),
            }
        )
    return found


def _maps_torch(pid: int) -> bool | None:
    """Has the process loaded torch (``libtorch`` mapped)? None if its maps cannot be read."""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None


#: How long after every worker is ready the processes may take to settle before they are measured anyway.
SETTLE_TIMEOUT_S = 300.0


def wait_settled(trials: int, workers: int, settle_s: float) -> bool:
    """Wait until the session's processes are :func:`complete` and their :func:`composition` has not changed
    for ``settle_s`` (some of a nested run's actors, the preemption watcher, start after its workers
    run: seen 2 of 8 at N = 8 on a loaded machine); False if that took over :data:`SETTLE_TIMEOUT_S`."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = composition(kinds(os.getpid()))
        if now != last:
            last, since = now, time.monotonic()
        elif complete(now, trials, workers) and time.monotonic() - since >= settle_s:
            return True
        time.sleep(1.0)
    return False


def kinds(search_pid: int) -> list[str]:
    """The kind of every process of this session (the search process's), without its memory."""
    import psutil

    found = []
    for pid, name in session_processes(os.getsid(search_pid)).items():
        try:
            title = " ".join(psutil.Process(pid).cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        found.append(classify(title, name, is_search_process=pid == search_pid))
    return found


def measure(
    trials: int, workers: int, reports: int, settle_s: float, samples: int, every_s: float, storage: str
) -> dict:
    """The search of ``trials`` at once, snapshotted in its steady state; returns the snapshots (bytes)."""
    import hpsearch
    from hpsearch.runtime.nodes.connect import connect

    markers = Path(storage) / "markers"
    markers.mkdir(parents=True)
    t0 = time.monotonic()
    connect()
    ray_start_s = time.monotonic() - t0
    import ray

    node = {k: v / GB for k, v in ray.cluster_resources().items() if k in ("memory", "object_store_memory")}
    idle = snapshot(os.getpid())  # Ray and this process before any trial: N = 0, Tune not imported yet
    spec = hpsearch.load_spec(
        {
            "name": f"head_memory_{trials}",
            "trainable": f"{Path(__file__).resolve()}:waiting_loop",
            "metric": "loss",
            "mode": "min",
            "num_samples": trials,
            "search_space": {
                "x": {"type": "float", "low": 0.0, "high": 1.0},
                "reports": reports,
                "markers": str(markers),
            },
            "scaling": {"num_workers": workers, "resources_per_worker": {"CPU": WORKER_CPUS}},
            "resources": {
                "driver_cpus": DRIVER_CPUS,
                "max_concurrent_trials": trials,
                "driver_memory_gb": 0,
                "worker_memory_gb": 0,
            },
            "storage_path": storage,
        }
    )
    state: dict = {"snapshots": [], "ready_after_s": None, "steady_after_s": None, "settled": None, "error": None}

    def watch() -> None:
        try:
            deadline = time.monotonic() + 600
            while len(list(markers.glob("ready-*"))) < trials * workers:
                if time.monotonic() > deadline:
                    state["error"] = (
                        f"only {len(list(markers.glob('ready-*')))} of {trials * workers} workers got ready in 600 s"
                    )
                    return
                time.sleep(0.5)
            state["ready_after_s"] = time.monotonic() - started
            state["settled"] = wait_settled(trials, workers, settle_s)
            state["steady_after_s"] = time.monotonic() - started
            for i in range(samples):
                if i:
                    time.sleep(every_s)
                state["snapshots"].append(snapshot(os.getpid()))
        finally:
            (markers / "release").touch()

    started = time.monotonic()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    grid = hpsearch.run(spec, stream=sys.stderr)
    watcher.join()
    ray.shutdown()
    return {
        "trials": trials,
        "workers": workers,
        "ray_start_s": ray_start_s,
        "search_s": time.monotonic() - started,
        "node_resources_gb": node,  # what Ray reports for this node, which the planner counts memory against
        "finished": sum(1 for r in grid if r.error is None),
        **state,
        "idle": idle,
    }


# ----------------------------------------------------------------------------- the table on screen


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def show(points: Mapping[int, Mapping[str, Mapping[str, float]]], summary: Mapping, torch: Mapping[str, str]) -> None:
    ns, m = summary["ns"], summary["measure"]
    print(f"\nper kind: processes at each N; MB per process (mean over N); {m.upper()} slope MB per trial")
    order = [*HEAD_KINDS, *WORKER_KINDS]
    kinds = [k for k in order if k in summary["per_kind"]] + [k for k in summary["per_kind"] if k not in order]
    rows = []
    for kind in kinds:
        row = summary["per_kind"][kind]
        rows.append(
            [
                kind,
                " ".join(f"{row['count_by_n'][n]:g}" for n in ns),
                *(_mb(row[f"{measure}_mb_per_process"]) for measure in MEASURES),
                f"{row[f'{m}_slope_mb_per_trial']:+,.0f}",
                torch.get(kind, "-"),
            ]
        )
    print_table(
        [
            "kind",
            "processes (N=" + ",".join(map(str, ns)) + ")",
            "RSS MB",
            "PSS MB",
            "USS MB",
            "slope MB/trial",
            "torch",
        ],
        rows,
    )
    print("\nby N: summed memory, MB")
    rows = []
    for n in ns:
        by_kind = points[n]
        rows.append(
            [
                str(n),
                f"{sum(r['count'] for r in by_kind.values()):g}",
                _mb(sum(r["rss"] for r in by_kind.values()) / MB),
                _mb(sum(r["pss"] for r in by_kind.values()) / MB),
                _mb(part(by_kind, None, m) / MB),
                _mb(part(by_kind, HEAD_KINDS, m) / MB),
                _mb(part(by_kind, WORKER_KINDS, m) / MB),
            ]
        )
    print_table(["N", "processes", "RSS total", "PSS total", f"fixed {m}", f"per-trial head {m}", f"workers {m}"], rows)
    if len(ns) < 2:
        print("\none N measured: no slope, no head sizes (give --trials two or more Ns)")
        return
    fits = summary["fits"]
    print(
        f"\nslopes ({m.upper()}): {summary['per_trial_head_gb'] * 1024:,.0f} MB per trial on the head "
        f"(RSS: {fits['head_rss']['slope_gb'] * 1024:,.0f}), {summary['per_worker_gb'] * 1024:,.0f} MB per worker "
        f"(RSS: {fits['workers_rss']['slope_gb'] * 1024:,.0f}); fixed processes {fits[f'fixed_{m}']['slope_gb'] * 1024:+,.0f} "
        f"MB per trial; base (N = 0) {summary['base_gb']:.2f} GB"
    )
    held = ", ".join(
        f"{size} GB: {n} ({summary['head_holds_below_ray_threshold'][size]})"
        for size, n in summary["head_holds"].items()
    )
    print(
        "trials at once a head holds (drivers and their nested runs' actors only, workers elsewhere; "
        f"in brackets: below Ray's {RAY_MEMORY_THRESHOLD:.0%} memory-monitor threshold): {held}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[1, 2, 4, 8], help="the Ns (default 1 2 4 8)")
    parser.add_argument("--workers", type=int, default=1, help="Train workers per trial (default 1)")
    parser.add_argument("--reports", type=int, default=3, help="reports per trial before it waits (default 3)")
    parser.add_argument(
        "--settle-s", type=float, default=10.0, help="how long the processes must stay unchanged (default 10)"
    )
    parser.add_argument("--samples", type=int, default=3, help="snapshots per N (default 3)")
    parser.add_argument("--every-s", type=float, default=2.0, help="seconds between snapshots (default 2)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # internal: one N, JSON out
    parser.add_argument("--storage", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.measure:
        (n,) = args.trials
        r = measure(n, args.workers, args.reports, args.settle_s, args.samples, args.every_s, args.storage)
        print(json.dumps(r))
        return 0

    command, machine = print_header()
    print(
        f"work: N trivial nested trials at once (N = {' '.join(map(str, args.trials))}), {args.workers} worker(s) of "
        f"{{CPU: {WORKER_CPUS}}} + a {DRIVER_CPUS}-CPU driver each, {args.reports} reports then waiting; "
        f"{args.samples} snapshots {args.every_s:g} s apart once the processes are unchanged for {args.settle_s:g} s"
    )
    logs = logs_folder("head_memory")
    runs: dict[int, dict] = {}
    skipped: dict[int, str] = {}
    for n in sorted(set(args.trials)):
        totals = {m: sum(p[SLOPE_MEASURE] for p in r["snapshots"][-1]) for m, r in runs.items()}
        available = _memory_available()
        if totals and (need := predicted(totals, n)) > MEMORY_FRACTION * available:
            skipped[n] = (
                f"predicted {need / GB:.1f} GB ({SLOPE_MEASURE.upper()}, from N = {', '.join(map(str, totals))}) "
                f"> {MEMORY_FRACTION:.0%} of the {available / GB:.1f} GB available"
            )
            print(f"  N = {n}: SKIPPED, {skipped[n]}", flush=True)
            continue
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="hpsearch-head-memory-") as storage:
            flags = ["--reports", args.reports, "--settle-s", args.settle_s, "--samples", args.samples]
            flags += ["--every-s", args.every_s, "--workers", args.workers]
            r, left = run_isolated(
                [__file__, "--measure", "--trials", str(n), *map(str, flags), "--storage", storage],
                log=logs / f"n{n}.log",
            )
        if r["error"] or not r["snapshots"]:
            raise SystemExit(f"N = {n}: {r['error'] or 'no snapshot taken'}; its log: {logs / f'n{n}.log'}")
        r["left_behind"] = left
        runs[n] = r
        note = f"; ended {len(left)} process(es) it left behind: {', '.join(left)}" if left else ""
        print(
            f"  N = {n}: ready after {r['ready_after_s']:.1f} s, steady after {r['steady_after_s']:.1f} s"
            f"{'' if r['settled'] else ' (NOT SETTLED: measured anyway)'}, search {r['search_s']:.1f} s, "
            f"{r['finished']}/{n} finished, in {time.perf_counter() - t0:.1f} s{note}",
            flush=True,
        )
    points = {n: mean_of([group((p["kind"], p) for p in snap) for snap in r["snapshots"]]) for n, r in runs.items()}
    summary = summarize(points, args.workers)
    torch = torch_loaded(runs[max(runs)]["snapshots"][-1])
    show(points, summary, torch)
    idle = group((p["kind"], p) for p in runs[min(runs)]["idle"])
    write_results(
        args.out,
        {
            "benchmark": "head_memory",
            "command": command,
            "machine": machine,
            "memory_total_gb": _memory_total_gb(),
            "trials": sorted(runs),
            "skipped": {str(n): why for n, why in skipped.items()},
            "workers_per_trial": args.workers,
            "worker_cpus": WORKER_CPUS,
            "driver_cpus": DRIVER_CPUS,
            "reports": args.reports,
            "settle_s": args.settle_s,
            "samples": args.samples,
            "logs": str(logs),
            **summary,
            "torch_loaded": torch,
            "by_n": {str(n): points[n] for n in sorted(points)},
            "ray_alone": idle,  # before the first search: Ray started, Tune not yet imported
            "runs": {str(n): slim(r) for n, r in runs.items()},
        },
    )
    return 0


def _memory_total_gb() -> float:
    import psutil

    return psutil.virtual_memory().total / GB


def _memory_available() -> float:
    import psutil

    return float(psutil.virtual_memory().available)


if __name__ == "__main__":
    sys.exit(main())
