"""Write experiment folders in the on-disk format of a real search, without Ray.

Every hpsearch file goes through the writers a real search uses
(:mod:`hpsearch.experiment.files`): the spec as run, the plan, one outcome line per trial
end, each nested run's history (every report, across restarts) and controller record,
and the summary, which, as at the end of ``hpsearch run``, :func:`hpsearch.analysis.summarize_experiment`
writes by reading the folder back. Tune's own files have no hpsearch writer; they are
written here in Tune's format (Ray 2.60), under the names of :mod:`hpsearch.experiment.layout`:
one trial folder per started trial (``params.json``, ``result.json`` with Tune's
housekeeping keys in every row, ``progress.csv``, ``error.txt`` for errored trials),
``train/<trial_id>/checkpoint_*`` (the last ``keep`` checkpoints) and, on request, Tune's
``experiment_state-*.json``. Used by the unit tests and by ``benchmarks/load_results.py``.

What a trial can be made to look like (:class:`FakeTrial`): any status (``pending``
trials have no folder, only an entry in Tune's state), reports whose metric is missing
(``None``), NaN, ±inf or a string, no checkpoints, reports made before a restart (only
the history file holds them) and reports that reached the history after the scheduler
stopped the trial (Tune's ``result.json`` does not hold them).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpsearch.experiment import files
from hpsearch.experiment.files import Outcome, run_dir
from hpsearch.experiment.layout import (
    EPOCH,
    ERRORED,
    FORMAT_FILE,
    FORMAT_VERSION,
    PENDING,
    RUNNING,
    TUNE_COLUMNS,
    TUNE_ERROR_FILE,
    TUNE_PARAMS_FILE,
    TUNE_RESULT_FILE,
    TUNE_STATE_GLOB,
)
from hpsearch.experiment.metrics import report_epoch

T0 = 1_796_031_965  # the start of the search, in UNIX seconds
STARTUP_S = 20.0  # a nested trial's start-up before its first report
STEP_S = 0.5  # seconds per reported epoch
WALL_TIME_S = 123.4  # the search's wall time, as the summary records it
#: One trial's resources under spec_dict(): a 0.1-CPU driver and 2 workers of 0.45 CPU.
RESOURCES = {"CPU": 1.0}
#: Tune's CSV copy of result.json: Tune writes it and hpsearch never reads it, so layout has no name for it.
TUNE_PROGRESS_FILE = "progress.csv"
_STAMP = "2026-11-30_09-46-05"
_TUNE_STATES = {ERRORED: "ERROR", RUNNING: "RUNNING", PENDING: "PENDING"}  # else TERMINATED


@dataclass
class FakeTrial:
    """One trial: its config, the metric at each report and how it ended.

    ``values`` are the search metric (``val_loss``) of each report: a number (NaN and ±inf
    too), a string, or ``None`` for a report without the metric.
    """

    trial_id: str
    config: dict[str, Any]
    values: Sequence[Any]
    status: str = "finished"  # finished | stopped | errored | running | pending (pending: not started, no folder)
    epochs: Sequence[int] | None = None  # default 1..len(values); None entries: no epoch key
    report_epoch: bool = True
    extra: dict[str, Sequence[Any]] = field(default_factory=dict)  # more metrics, one value per report
    error: str = "RuntimeError: CUDA out of memory"
    start: float | None = None  # seconds after T0
    checkpoint: bool = True  # False: no report carried a checkpoint
    restarted: int = 0  # the first `restarted` reports came before a restart: only the history file holds them
    after_stop: int = 0  # the last `after_stop` reports reached the history after the stop: not in result.json
    ended_by: str | None = None  # the budget that stopped it (status "stopped"): it was running when the search ended
    resources: dict[str, float] | None = None  # what it held (write_experiment(usage=True)); default RESOURCES


SPACE = {
    "lr": {"type": "float", "low": 1.0e-4, "high": 1.0e-1, "log": True},
    "hidden": {"type": "choice", "values": [32, 64, 128]},
    "layers": {"type": "int", "low": 1, "high": 3, "log": False},
    "dropout": {"type": "float", "low": 0.0, "high": 0.4, "log": False, "step": 0.1},
    "epochs": {"type": "const", "value": 4},
    "opt": {"momentum": {"type": "const", "value": 0.9}},
}


def spec_dict(name: str = "fake", **changes: Any) -> dict[str, Any]:
    spec = {
        "name": name,
        "trainable": "hpsearch.examples.digits:train_loop",
        "metric": "val_loss",
        "mode": "min",
        "num_samples": 4,
        "search_space": SPACE,
        "searcher": {"type": "optuna", "sampler": "tpe", "seed": 0},
        "scheduler": {
            "type": "asha",
            "max_t": 4,
            "grace_period": 1,
            "reduction_factor": 2.0,
            "brackets": 1,
            "time_attr": "training_iteration",
        },
        "scaling": {
            "num_workers": 2,
            "use_gpu": False,
            "resources_per_worker": {"CPU": 0.45},
            "placement_strategy": "PACK",
        },
        "resources": {"driver_cpus": 0.1, "max_concurrent_trials": "auto"},
        "storage_path": "/somewhere/else",
    }
    spec.update(changes)
    return spec


PLAN = {
    "max_concurrent_trials": 2,
    "capacity": 2,
    "per_trial": {"CPU": 1.0},
    "driver_bundle": {"CPU": 0.1},
    "worker_bundle": {"CPU": 0.45},
    "num_workers": 2,
    "placement_strategy": "PACK",
    "driver_node": "head",
    "warnings": [],
    "nodes": [{"node_id": "n0", "is_head": True, "resources": {"CPU": 2.0}, "used": {}, "drivers": 2, "workers": 4}],
}


def trial_dir_name(number: int, trial: FakeTrial) -> str:
    tag = ",".join(f"{k}={v}" for k, v in sorted(trial.config.items()) if not isinstance(v, dict))
    return f"hpsearch_train_loop_{trial.trial_id}_{number}_{tag}_2026-11-30_09-46-05"


def write_experiment(
    exp: Path,
    trials: Sequence[FakeTrial],
    *,
    spec: dict[str, Any] | None | bool = True,
    plan: bool = True,
    outcomes: bool = True,
    summary: bool = True,
    state: bool = False,
    keep: int = 2,
    recorded_dir: str | None = None,
    progress_csv: bool = True,
    history: bool = True,
    interrupted: bool | None = None,
    wall_time_s: float = WALL_TIME_S,
    usage: bool = False,
    ended_by: str | None = None,
    ended_reason: str = "",
    folder_format: int | None = FORMAT_VERSION,
) -> Path:
    """Write an experiment folder at ``exp``; paths inside files name ``recorded_dir`` (default ``exp``).

    Args:
        spec: ``True``: :func:`spec_dict`; a dict: that spec; ``None``/``False``: no spec (a plain Tune folder).
        outcomes: Write an outcome line for every trial that ended.
        summary: End as a search does: read the folder back and write the summary
            (``interrupted``: default, when a trial had not ended).
        state: Write Tune's ``experiment_state-*.json``.
        keep: How many of each trial's last checkpoints are still on disk.
        history: Write each nested run's history file (a real search always does).
        usage: Write ``hpsearch_usage.jsonl`` as a search does: one search run from ``T0`` for
            ``wall_time_s``, and one run per started trial from its start to its end (a running
            trial's run has no end), holding its ``resources``.
        ended_by: The budget that ended the search (the summary's ``ended_by``), ``ended_reason`` in words.
        folder_format: The format the folder records, as a search writes it (``None``: none, a folder written
            before formats were recorded; a number: that version, e.g. one newer than this hpsearch's).
    """
    exp.mkdir(parents=True, exist_ok=True)
    recorded = recorded_dir or str(exp)
    spec_data = spec_dict(exp.name) if spec is True else (spec or None)
    if folder_format is not None and spec is not None and spec is not False:
        files.write_format(exp)  # as `hpsearch run` does, before anything else
        if folder_format != FORMAT_VERSION:
            (exp / FORMAT_FILE).write_text(json.dumps({"format": folder_format, "hpsearch": "9.9"}), encoding="utf-8")
    if spec_data:
        files.write_spec(exp, spec_data)
    if plan:
        files.write_plan(exp, PLAN)
    state_entries = []
    for number, trial in enumerate(trials, start=1):
        reports = _reports(trial, number, recorded)
        rows = reports[trial.restarted : len(reports) - trial.after_stop]  # what Tune's result.json holds
        folder = exp / trial_dir_name(number, trial)
        if trial.status != PENDING:  # Tune makes a trial's folder when it starts it
            _write_tune_trial(folder, trial, rows, progress_csv)
            _write_run(exp, trial, reports, keep, history)
        last = rows[-1] if rows else {}
        ended_at = T0 + (trial.start or 0) + STARTUP_S + STEP_S * len(reports)
        if usage and trial.status != PENDING:
            held = trial.resources if trial.resources is not None else RESOURCES
            started = T0 + (trial.start or 0)
            files.record_trial_stint(exp, trial.trial_id, started_at=started, resources=held)
            if trial.status != RUNNING:
                files.record_trial_stint(
                    exp, trial.trial_id, started_at=started, resources=held, ended_at=ended_at, end=trial.status
                )
        if outcomes and trial.status not in (RUNNING, PENDING):
            files.append_outcome(
                exp,
                Outcome(
                    trial_id=trial.trial_id,
                    status=trial.status,  # type: ignore[arg-type]
                    reports=len(rows),
                    last_epoch=report_epoch(last),
                    ended_at=ended_at,
                    error=trial.error if trial.status == ERRORED else "",
                    ended_by=trial.ended_by,
                ),
            )
        state_entries.append(
            [
                json.dumps(
                    {
                        "trial_id": trial.trial_id,
                        "status": _TUNE_STATES.get(trial.status, "TERMINATED"),
                        "config": trial.config,
                        "experiment_tag": f"{number}_x",
                        "relative_logdir": folder.name,
                    }
                ),
                json.dumps({"last_result": last}),
            ]
        )
    if state:
        data = {"trial_data": state_entries, "runner_data": {}, "stats": {"start_time": T0}}
        (exp / TUNE_STATE_GLOB.replace("*", _STAMP)).write_text(json.dumps(data), encoding="utf-8")
    if usage:
        files.record_search_stint(exp, started_at=T0)
        if summary:
            files.record_search_stint(exp, started_at=T0, ended_at=T0 + wall_time_s, ended_by=ended_by)
    if summary:
        if interrupted is None:
            interrupted = ended_by is None and any(t.status in (RUNNING, PENDING) for t in trials)
        _write_summary(exp, spec_data, wall_time_s, interrupted, ended_by, ended_reason)
    return exp


def _write_summary(
    exp: Path,
    spec: dict[str, Any] | None,
    wall_time_s: float,
    interrupted: bool,
    ended_by: str | None = None,
    ended_reason: str = "",
) -> None:
    """What a search ends with: read the folder back, summarise it, write ``hpsearch_summary.json``."""
    from hpsearch.analysis import load_results, summarize, summarize_experiment

    if spec:
        summarize_experiment(
            exp, wall_time_s=wall_time_s, interrupted=interrupted, ended_by=ended_by, ended_reason=ended_reason
        )
    else:  # a folder without a spec cannot be read back without being told the metric
        results = load_results(exp, metric="val_loss", mode="min")
        files.write_summary(exp, summarize(results, wall_time_s=wall_time_s, interrupted=interrupted).as_dict())


def _write_tune_trial(folder: Path, trial: FakeTrial, rows: list[dict[str, Any]], progress_csv: bool) -> None:
    """Tune's files of one trial: params.json, result.json, progress.csv, error.txt."""
    folder.mkdir()
    (folder / TUNE_PARAMS_FILE).write_text(json.dumps(trial.config), encoding="utf-8")
    with open(folder / TUNE_RESULT_FILE, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
    if progress_csv and rows:
        keys = [k for k in rows[0] if k != "config"]
        with open(folder / TUNE_PROGRESS_FILE, "w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, fieldnames=keys, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    if trial.status == ERRORED:
        traceback = 'Traceback (most recent call last):\n  File "x.py", line 1\n'
        (folder / TUNE_ERROR_FILE).write_text(
            f"Failure # 1 (occurred at 2026-11-30_09-47-00)\n{traceback}{trial.error}\n", encoding="utf-8"
        )


def _write_run(exp: Path, trial: FakeTrial, reports: list[dict[str, Any]], keep: int, history: bool) -> None:
    """The nested Train run's folder: its kept checkpoints, its controller record and its history."""
    folder = run_dir(exp, trial.trial_id)
    folder.mkdir(parents=True)
    checkpoints = [r["checkpoint_path"] for r in reports if "checkpoint_path" in r]
    for path in checkpoints[-keep:] if keep else []:
        (folder / Path(path).name).mkdir()
    if reports:
        files.write_controller(folder, actor_id="a" * 32, node_id="n" * 56, pid=4242)
    if not history:
        return
    for report in reports:
        # what the nested run forwarded to Tune (the user's metrics and epoch), when it did
        metrics = {k: v for k, v in report.items() if k not in TUNE_COLUMNS}
        metrics["time"] = report["timestamp"]  # a fixed time instead of the clock's, so the folder is the same each run
        files.append_history(folder, metrics, checkpoint_path=report.get("checkpoint_path"))


def _reports(trial: FakeTrial, number: int, recorded: str) -> list[dict[str, Any]]:
    """Every report of the trial, as Tune's result.json rows (Tune's counters restart after ``restarted``)."""
    epochs = list(trial.epochs) if trial.epochs is not None else list(range(1, len(trial.values) + 1))
    rows = []
    start = T0 + (trial.start or 0)
    for i, (value, epoch) in enumerate(zip(trial.values, epochs, strict=False)):
        total = STARTUP_S + STEP_S * (i + 1)
        since = i + 1 - (trial.restarted if i >= trial.restarted else 0)  # Tune's counter, from 1 in each run
        row: dict[str, Any] = {}
        if trial.report_epoch and epoch is not None:
            row[EPOCH] = epoch
        if value is not None:
            row["train_loss"] = value * 1.1 if isinstance(value, (int, float)) else value
            row["val_loss"] = value
        row.update({k: v[i] for k, v in trial.extra.items()})
        if trial.checkpoint:
            row["checkpoint_path"] = (
                f"{recorded}/train/{trial.trial_id}/checkpoint_2026-11-30_09-46-{i:02d}.{number:06d}"
            )
        row.update(
            {
                "timestamp": int(start + total),
                "checkpoint_dir_name": None,
                "done": False,
                "training_iteration": since,
                "trial_id": trial.trial_id,
                "date": "2026-11-30_09-46-30",
                "time_this_iter_s": STARTUP_S + STEP_S if since == 1 else STEP_S,
                "time_total_s": total,
                "pid": 1,
                "hostname": "vm",
                "node_ip": "192.0.2.2",
                "config": trial.config,
                "time_since_restore": STARTUP_S + STEP_S * since,
                "iterations_since_restore": since,
            }
        )
        rows.append(row)
    return rows


def standard_trials() -> list[FakeTrial]:
    """Five trials: two finished, two stopped early, one errored (whose low value must not count)."""

    def cfg(lr: float, hidden: int, layers: int, dropout: float) -> dict[str, Any]:
        return {"lr": lr, "hidden": hidden, "layers": layers, "dropout": dropout, "epochs": 4, "opt": {"momentum": 0.9}}

    return [
        FakeTrial("aaaa0001", cfg(0.01, 64, 2, 0.1), [1.0, 0.5, 0.3, 0.2], extra={"val_acc": [0.5, 0.7, 0.8, 0.85]}),
        FakeTrial("aaaa0002", cfg(0.0001, 32, 1, 0.0), [2.0], status="stopped", extra={"val_acc": [0.1]}, start=1),
        FakeTrial(
            "aaaa0003",
            cfg(0.05, 128, 3, 0.3),
            [0.8, 0.25, 0.1, 0.15],
            extra={"val_acc": [0.6, 0.8, 0.9, 0.88]},
            start=25,
        ),
        FakeTrial("aaaa0004", cfg(0.001, 64, 1, 0.2), [0.05], status="errored", extra={"val_acc": [0.99]}, start=30),
        FakeTrial(
            "aaaa0005", cfg(0.003, 128, 2, 0.4), [0.9, 0.6], status="stopped", extra={"val_acc": [0.4, 0.5]}, start=50
        ),
    ]


# ----------------------------------------------------------------------------- a hostile folder

#: Strings a folder someone sent may hold in any field the report shows (no "/" where it names a folder).
HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "<script>window.hpsearchPwned=1",  # no closing tag: a "/" cannot be in a folder name
    "a|b",
    "`tick`",
    "[click](javascript:alert(1))",
    "q\"uo'te",
    "new\nline",
]
HOSTILE_PARAM = "<img src=x onerror=alert(2)>|`p`"  # a parameter's name (no "." or "/": the spec refuses them)
HOSTILE_METRIC = "<img src=x onerror=window.hpsearchPwned=3>"  # the first objective's name: once written unescaped
HOSTILE_ID = "<img src=x onerror=window.hpsearchPwned=4>|`x`"  # a trial id (a folder name: no "/")


def hostile_experiment(folder: Path) -> Path:
    """A multi-objective search whose every shown string is hostile: name, metrics, parameters, ids, error, spec."""
    space = {
        HOSTILE_PARAM: {"type": "choice", "values": HOSTILE[:3]},
        "lr": {"type": "float", "low": 0.01, "high": 0.1},
    }
    spec = spec_dict(
        "</title><script>window.hpsearchPwned=5</script>|`x`\n# h",
        metric=[HOSTILE_METRIC, "val_loss"],
        mode=["min", "min"],
        search_space=space,
        scheduler={"type": "fifo"},
        notes="</pre><script>window.hpsearchPwned=6</script>\n```\n",
    )
    trials = [
        FakeTrial(
            HOSTILE_ID if i == 0 else f"good000{i}",
            {HOSTILE_PARAM: value, "lr": 0.01 * (i + 1)},
            [1.0 / (i + 1), 0.5 / (i + 1)],
            extra={HOSTILE_METRIC: [float(i), float(i) / 2]},
            status="errored" if i == 1 else "finished",
            error="</span><script>window.hpsearchPwned=7</script>|`e`\n[x](javascript:alert(1))",
        )
        for i, value in enumerate(HOSTILE)
    ]
    return write_experiment(folder, trials, spec=spec, summary=False)
