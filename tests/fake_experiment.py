"""Write experiment folders in the on-disk format of a real search, without Ray.

The layout and every file's shape copy a folder ``hpsearch run`` wrote (Ray 2.60):
the hpsearch files, one Tune trial folder per trial (``params.json``, ``result.json``
with Tune's housekeeping keys in every row, ``progress.csv``, ``error.txt`` for errored
trials), ``train/<trial_id>/checkpoint_*`` (the last ``keep`` checkpoints) and, on
request, Tune's ``experiment_state-*.json``. Used by the unit tests and by
``benchmarks/load_results.py``.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from hpsearch.runtime.tuner import OUTCOMES_FILE, PLAN_FILE, SPEC_FILE, SUMMARY_FILE

T0 = 1_796_031_965  # the start of the search, in UNIX seconds
STARTUP_S = 20.0  # a nested trial's start-up before its first report
STEP_S = 0.5  # seconds per reported epoch


@dataclass
class FakeTrial:
    """One trial: its config, the metric at each report and how it ended."""

    trial_id: str
    config: dict[str, Any]
    values: Sequence[float]
    status: str = "finished"  # finished | stopped | errored | running
    epochs: Sequence[int] | None = None  # default 1..len(values); None entries: no epoch key
    report_epoch: bool = True
    extra: dict[str, Sequence[Any]] = field(default_factory=dict)  # more metrics, one value per report
    error: str = "RuntimeError: CUDA out of memory"
    start: float | None = None  # seconds after T0


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
) -> Path:
    """Write an experiment folder at ``exp``; paths inside files name ``recorded_dir`` (default ``exp``)."""
    exp.mkdir(parents=True, exist_ok=True)
    recorded = recorded_dir or str(exp)
    spec_data = spec_dict(exp.name) if spec is True else (spec or None)
    if spec_data:
        (exp / SPEC_FILE).write_text(yaml.safe_dump(spec_data, sort_keys=False), encoding="utf-8")
    if plan:
        (exp / PLAN_FILE).write_text(json.dumps(PLAN), encoding="utf-8")
    outcome_lines, summary_trials, state_entries = [], [], []
    for number, trial in enumerate(trials, start=1):
        folder = exp / trial_dir_name(number, trial)
        folder.mkdir()
        (folder / "params.json").write_text(json.dumps(trial.config), encoding="utf-8")
        rows = _rows(trial, number, recorded)
        with open(folder / "result.json", "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")
        if progress_csv and rows:
            keys = [k for k in rows[0] if k != "config"]
            with open(folder / "progress.csv", "w", newline="", encoding="utf-8") as out:
                writer = csv.DictWriter(out, fieldnames=keys, extrasaction="ignore")
                writer.writeheader()
                writer.writerows(rows)
        if trial.status == "errored":
            (folder / "error.txt").write_text(
                f'Failure # 1 (occurred at 2026-11-30_09-47-00)\nTraceback (most recent call last):\n  File "x.py", line 1\n{trial.error}\n',
                encoding="utf-8",
            )
        run_dir = exp / "train" / trial.trial_id
        run_dir.mkdir(parents=True)
        for row in rows[-keep:] if keep else []:
            (run_dir / Path(row["checkpoint_path"]).name).mkdir()
        last = rows[-1] if rows else {}
        ended = T0 + (trial.start or 0) + STARTUP_S + STEP_S * len(rows)
        if trial.status != "running":
            outcome_lines.append(
                {
                    "trial_id": trial.trial_id,
                    "status": trial.status,
                    "iterations": last.get("training_iteration", 0),
                    "ended_at": ended,
                    "error": trial.error if trial.status == "errored" else "",
                }
            )
        summary_trials.append(
            {
                "trial_id": trial.trial_id,
                "status": trial.status,
                "config": trial.config,
                "metrics": {},
                "best": None,
                "iterations": last.get("training_iteration", 0),
                "error": trial.error if trial.status == "errored" else "",
                "path": str(folder),
            }
        )
        tune_status = {"errored": "ERROR", "running": "RUNNING"}.get(trial.status, "TERMINATED")
        state_entries.append(
            [
                json.dumps(
                    {
                        "trial_id": trial.trial_id,
                        "status": tune_status,
                        "config": trial.config,
                        "experiment_tag": f"{number}_x",
                        "relative_logdir": folder.name,
                    }
                ),
                json.dumps({"last_result": last}),
            ]
        )
    if outcomes:
        (exp / OUTCOMES_FILE).write_text("".join(json.dumps(o) + "\n" for o in outcome_lines), encoding="utf-8")
    if summary:
        data = {"name": exp.name, "metric": "val_loss", "mode": "min", "wall_time_s": 123.4, "trials": summary_trials}
        (exp / SUMMARY_FILE).write_text(json.dumps(data), encoding="utf-8")
    if state:
        data = {"trial_data": state_entries, "runner_data": {}, "stats": {"start_time": T0}}
        (exp / "experiment_state-2026-11-30_09-46-05.json").write_text(json.dumps(data), encoding="utf-8")
    return exp


def _rows(trial: FakeTrial, number: int, recorded: str) -> list[dict[str, Any]]:
    epochs = list(trial.epochs) if trial.epochs is not None else list(range(1, len(trial.values) + 1))
    rows = []
    start = T0 + (trial.start or 0)
    for i, (value, epoch) in enumerate(zip(trial.values, epochs)):
        total = STARTUP_S + STEP_S * (i + 1)
        row: dict[str, Any] = {}
        if trial.report_epoch and epoch is not None:
            row["epoch"] = epoch
        row.update({"train_loss": value * 1.1, "val_loss": value})
        row.update({k: v[i] for k, v in trial.extra.items()})
        row.update(
            {
                "checkpoint_path": f"{recorded}/train/{trial.trial_id}/checkpoint_2026-11-30_09-46-{i:02d}.{number:06d}",
                "timestamp": int(start + total),
                "checkpoint_dir_name": None,
                "done": False,
                "training_iteration": i + 1,
                "trial_id": trial.trial_id,
                "date": "2026-11-30_09-46-30",
                "time_this_iter_s": STARTUP_S + STEP_S if i == 0 else STEP_S,
                "time_total_s": total,
                "pid": 1,
                "hostname": "vm",
                "node_ip": "192.0.2.2",
                "config": trial.config,
                "time_since_restore": total,
                "iterations_since_restore": i + 1,
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
