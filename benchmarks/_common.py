"""Helpers the benchmarks share.

- :func:`run_isolated`: run one way of a benchmark in its own Python process, in its own
  session, so that its embedded Ray and every process Ray starts can be found afterwards;
  any left behind are ended by PID and named in the result (Linux: reads ``/proc``).
- :func:`run_ways`: :func:`run_isolated` for each way of a benchmark in turn, a line as each ends.
- :func:`interrupt_when`: end a running Tune search gracefully from a watcher thread
  (a stall, a time budget) with the signal Tune itself takes as "stop".
- :func:`logs_folder`, :func:`print_table`, :func:`write_results`: the logs, the figures on screen and on disk.
- :func:`digits_epochs`: the shipped digits loop in one process, without Ray -- the work the
  overhead and search-quality benchmarks compare hpsearch against.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

#: A way that runs longer than this is broken, not slow: it is interrupted (a backstop only).
WAY_TIMEOUT_S = 30 * 60


def session_processes(sid: int) -> dict[int, str]:
    """PID -> name of every process in session ``sid``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended while we looked
            continue
        name_end = stat.rindex(")")
        fields = stat[name_end + 2 :].split()  # state, ppid, pgrp, session, ...
        if int(fields[3]) == sid:
            found[int(entry.name)] = stat[stat.index("(") + 1 : name_end]
    return found


def end_session(sid: int, settle_s: float = 15.0) -> list[str]:
    """Give the processes of session ``sid`` (one this script started) ``settle_s`` to exit,
    then end those left by PID; return their names (empty: nothing was left behind)."""
    deadline = time.monotonic() + settle_s
    while (left := session_processes(sid)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if not left:
        return []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in session_processes(sid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        time.sleep(2)
    return sorted(left.values())


def run_isolated(argv: Sequence[str], log: Path, timeout_s: float = WAY_TIMEOUT_S) -> tuple[dict, list[str]]:
    """Run ``python *argv`` in a new session; return the JSON it prints last and what it left behind.

    Its stderr goes to ``log``. Past ``timeout_s`` it gets SIGINT (Tune then ends the search
    and the process shuts its Ray down), and SIGKILL a minute later.

    Raises:
        SystemExit: It failed or printed no JSON; the end of its log is shown.
    """
    with log.open("w") as err:
        child = subprocess.Popen(
            [sys.executable, *argv], stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True
        )
        try:
            out, _ = child.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGINT)
            try:
                out, _ = child.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                out, _ = child.communicate()
    left = end_session(child.pid)
    lines = out.strip().splitlines()
    if child.returncode != 0 or not lines:
        print(log.read_text()[-3000:], file=sys.stderr)
        raise SystemExit(f"{' '.join(map(str, argv))} failed (exit {child.returncode}); its log: {log}")
    return json.loads(lines[-1]), left


def run_ways(script: str, ways: Iterable[str], flags: Sequence[object], storage: str, logs: Path) -> dict[str, dict]:
    """Run ``python script --way WAY --storage STORAGE/WAY *flags`` for each way with :func:`run_isolated`
    (its stderr in ``LOGS/WAY.log``), printing a line as each ends; return way -> the JSON it printed,
    plus ``left_behind``."""
    results = {}
    for way in ways:
        t0 = time.perf_counter()
        result, left = run_isolated(
            [script, "--way", way, "--storage", f"{storage}/{way}", *map(str, flags)], log=logs / f"{way}.log"
        )
        results[way] = {**result, "left_behind": left}
        note = f"; ended {len(left)} Ray process(es) it left behind: {', '.join(left)}" if left else ""
        print(f"  {way:<9} done in {time.perf_counter() - t0:6.1f} s{note}", flush=True)
    return results


@contextlib.contextmanager
def interrupt_when(check: Callable[[], str | None], every_s: float = 1.0) -> Iterator[dict]:
    """While the body runs, call ``check()`` every ``every_s``; once it returns a reason, send
    this process SIGUSR1, on which a running ``Tuner.fit()`` stops its trials and returns.

    Yields a dict that then holds ``reason`` and ``after_s`` (seconds into the body).
    Call it only once the body is about to start a search: before Tune installs its
    handler, SIGUSR1 ends the process.
    """
    verdict: dict = {}
    done = threading.Event()
    start = time.monotonic()

    def watch() -> None:
        while not done.wait(every_s):
            reason = check()
            if reason:
                verdict.update(reason=reason, after_s=round(time.monotonic() - start, 1))
                os.kill(os.getpid(), signal.SIGUSR1)
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield verdict
    finally:
        done.set()
        watcher.join()


def digits_epochs(
    config: dict[str, Any], data: Sequence[Any] | None = None
) -> Iterator[tuple[int, float, dict[str, float]]]:
    """``hpsearch.examples.digits``' loop on one worker, without Ray: (epoch, seconds, metrics) per epoch.

    The same model, optimiser (AdamW, ``weight_decay`` 0 unless the config says), batches and
    seeding as the example; ``seconds`` is the epoch's training and evaluation, and ``metrics``
    holds ``val_loss`` and ``val_acc``. ``data`` is ``_load_split()``'s four tensors (loaded here
    if not given). Torch's thread count is the caller's to set.
    """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from hpsearch.examples.digits import _build_model, _load_split, _seed_everything

    x_tr, y_tr, x_va, y_va = data if data is not None else _load_split()
    _seed_everything(config["seed"])
    model = _build_model(x_tr.shape[1], 10, config["hidden"], config["layers"], config["dropout"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=config.get("weight_decay", 0.0))
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(TensorDataset(x_tr, y_tr), batch_size=config["batch_size"], shuffle=True)
    for epoch in range(1, config["epochs"] + 1):
        began = time.perf_counter()
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            logits = model(x_va)
            metrics = {
                "val_loss": loss_fn(logits, y_va).item(),
                "val_acc": (logits.argmax(1) == y_va).float().mean().item(),
            }
        yield epoch, time.perf_counter() - began, metrics


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Columns sized to fit; the first left-aligned, the others right-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        first, *rest = (str(cell) for cell in row)
        print(f"{first:<{widths[0]}}" + "".join(f"  {c:>{w}}" for c, w in zip(rest, widths[1:])))


def logs_folder(benchmark: str) -> Path:
    """A new folder for the ways' logs, kept after the run (a stall or an error is read there); says where."""
    folder = Path(tempfile.mkdtemp(prefix=f"hpsearch-{benchmark}-logs-"))
    print(f"logs: {folder}\n")
    return folder


def write_results(path: Path, record: dict) -> None:
    """Write a benchmark's JSON record and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2))
    try:
        shown = path.resolve().relative_to(Path.cwd())
    except ValueError:
        shown = path
    print(f"wrote {shown}")


# ----------------------------------------------------------------------------- searches in a process of their own


def sizes_from(args: Any, defaults: dict[str, int], quick: dict[str, int]) -> dict[str, int]:
    """A benchmark's sizes (``seeds``, ``trials``, ``epochs``): its defaults, ``--quick``'s, then each flag given."""
    sizes = {**defaults, **(quick if args.quick else {})}
    sizes.update({k: getattr(args, k) for k in ("seeds", "trials", "epochs") if getattr(args, k)})
    return sizes


def methods_from(parser: Any, args: Any, labels: Iterable[str]) -> tuple[str, ...]:
    """The ways ``--methods`` chose (all of ``labels`` without it); an unknown one is the parser's error."""
    known = tuple(labels)
    methods = tuple(args.methods.split(",")) if args.methods else known
    if unknown := set(methods) - set(known):
        parser.error(f"unknown method(s) {', '.join(sorted(unknown))}; choose from {', '.join(known)}")
    return methods


def run_group(script: str, jobs: Sequence[dict[str, Any]], log: Path, timeout_s: float = WAY_TIMEOUT_S) -> list[dict]:
    """``python script --jobs JSON`` in its own session (:func:`run_isolated`): several searches one after
    another in one process and one embedded Ray (what :func:`run_here` does there), so that Ray's
    start-up and the process's are paid once per group, not per search. Returns each job merged with
    the JSON the process printed for it, and ``left_behind`` (what the group left: named on screen)."""
    results, left = run_isolated([script, "--jobs", json.dumps(list(jobs))], log=log, timeout_s=timeout_s)
    if left:
        print(f"  {log.stem}: ended {len(left)} process(es) it left behind: {', '.join(left)}", flush=True)
    return [{**job, **result, "left_behind": left} for job, result in zip(jobs, results["results"])]


def run_here(jobs: Sequence[dict[str, Any]], run_one: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """In the group's process: ``run_one(job)`` for each job in order, then Ray shut down; ``{"results": [...]}``."""
    import ray

    try:
        return {"results": [run_one(dict(job)) for job in jobs]}
    finally:
        ray.shutdown()


#: A search none of whose trials has reported for this long is stuck, not slow (seen once on Ray 2.60: a
#: trial's driver blocked forever in Tune's ``_TrainSession._report_training_result`` -> ``Queue.put`` after
#: its nested run had reported its last epoch); :func:`run_search` stops it as Tune's own "stop" does.
STALL_S = 120.0


def history_stall_check(experiment_dir: str | os.PathLike[str], stall_s: float) -> Callable[[], str | None]:
    """A check for :func:`interrupt_when`: has no trial of the folder reported (or none started) for ``stall_s``?

    It looks at the newest ``train/<trial_id>/hpsearch_history.jsonl``, which every report appends to.
    """
    from hpsearch.experiment.layout import HISTORY_FILE, TRAIN_RUNS_DIR

    start = time.time()

    def check() -> str | None:
        files = Path(experiment_dir).glob(f"{TRAIN_RUNS_DIR}/*/{HISTORY_FILE}")
        last = max((p.stat().st_mtime for p in files), default=start)
        idle = time.time() - last
        return f"no trial reported for {idle:.0f} s" if idle > stall_s else None

    return check


def run_search(spec: Any, stall_s: float | None = STALL_S) -> dict[str, Any]:
    """One search in this process through the public API (``hpsearch.run``), timed.

    ``spec`` is anything ``hpsearch.run`` takes (a dict, a file, a Spec). The first search of a
    process starts the embedded Ray (``connect``, timed apart as ``search_quality.py`` does: a cost
    per process, not per trial); later ones reuse it (``ray_start_s`` 0). A search with no report
    for ``stall_s`` is stopped (:func:`history_stall_check`; None: never). Returns the experiment
    folder, ``start`` (the epoch time the search started: report times are measured from it),
    ``wall_s`` (``hpsearch.run``'s), ``ray_start_s`` and ``stopped`` (why it was stopped, or None).
    Progress lines go to stderr.
    """
    import ray

    import hpsearch
    from hpsearch.runtime.nodes.connect import connect

    spec = hpsearch.load_spec(spec)
    began = time.time()
    if not ray.is_initialized():
        connect()  # what hpsearch.run starts first; it reuses this Ray
    start = time.time()
    check = history_stall_check(spec.experiment_dir, stall_s) if stall_s is not None else (lambda: None)
    with interrupt_when(check) as verdict:  # fires only after stall_s, long after Tune has its handler
        hpsearch.run(spec, stream=sys.stderr)
    return {
        "experiment_dir": str(spec.experiment_dir),
        "start": start,
        "wall_s": time.time() - start,
        "ray_start_s": start - began,
        "stopped": verdict.get("reason"),
    }


def stopped_note(run: dict[str, Any]) -> str:
    """The words a progress line adds for a search :func:`run_search` stopped ('' if it was not)."""
    return f"; STOPPED ({run['stopped']}): its unfinished trials were ended" if run.get("stopped") else ""


def experiment_reports(experiment_dir: str | os.PathLike[str], start: float = 0.0) -> list[dict[str, Any]]:
    """Every report of every trial of an experiment folder, in the order hpsearch forwarded them.

    Read from each ``train/<trial_id>/hpsearch_history.jsonl`` (the file ``search_quality.py``
    reads: its ``time`` has sub-second steps, Tune's timestamp whole seconds). Each report gains
    ``trial_id`` and ``seconds`` (its ``time`` less ``start``). No Ray.
    """
    from hpsearch.experiment.layout import HISTORY_FILE, TRAIN_RUNS_DIR

    reports = []
    for path in Path(experiment_dir).glob(f"{TRAIN_RUNS_DIR}/*/{HISTORY_FILE}"):
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):  # a line cut short by a kill
                report = json.loads(line)
                reports.append({**report, "trial_id": path.parent.name, "seconds": report["time"] - start})
    return sorted(reports, key=lambda r: r["time"])


def metric_reports(reports: Sequence[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """(seconds, value of ``key``) of each report holding it, in order: ``search_quality.Report``s,
    which its ``to_target``, ``anytime`` and ``summarize`` take."""
    return [(r["seconds"], float(r[key])) for r in reports if isinstance(r.get(key), (int, float))]


def to_target_rows(
    summary: dict[str, dict[str, Any]], labels: dict[str, str], budget: dict[str, int] | None = None
) -> tuple[list[str], list[list[str]]]:
    """``search_quality.summarize``'s figures as a table (header, rows) for :func:`print_table`:
    per way, the seeds that reached the target, the epochs to it per seed and their median
    ('-': not reached), the median best val_acc and trials; ``budget``: the epochs each way had."""
    header = ["way", "reached", "epochs to target per seed", "median", "best val_acc", "trials"]
    if budget:
        header.append("epoch budget")
    rows = []
    for way, row in summary.items():
        per_seed = ", ".join("-" if e is None else str(e) for e in row["epochs_to_target"])
        median = row["median_epochs_to_target"]
        cells = [
            labels.get(way, way),
            f"{row['reached']}/{row['seeds']}",
            per_seed,
            "-" if median is None else f"{median:g}",
            f"{row['median_best_val_acc']:.3f}",
            f"{row['median_trials']:g}",
        ]
        if budget:
            cells.append(str(budget.get(way, "")))
        rows.append(cells)
    return header, rows
