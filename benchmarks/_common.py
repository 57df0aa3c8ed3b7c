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
