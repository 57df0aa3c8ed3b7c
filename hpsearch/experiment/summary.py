"""What a finished search amounts to: per-trial outcomes, the best trials, the errors.

Pure functions over plain data, shared by :func:`hpsearch.run` (which writes the
summary file) and the CLI (which prints the table).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = [
    "TrialOutcome",
    "SearchSummary",
    "summarize",
    "best_trials_table",
    "short_error",
    "error_excerpt",
    "read_outcome_records",
    "flatten_config",
    "TUNE_COLUMNS",
]

_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit))\b.*")


def short_error(error: BaseException | str | None, limit: int = 200) -> str:
    """The line of an error (or a traceback text) that says what went wrong."""
    if error is None:
        return ""
    text = str(error).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    at = next((i for i in range(len(lines) - 1, -1, -1) if _ERROR_LINE.match(lines[i])), None)
    chosen = lines[at] if at is not None else None
    if chosen is not None and chosen.endswith(":") and at + 1 < len(lines):
        chosen = f"{chosen} {lines[at + 1]}"  # "ControllerError: ... failed due to controller error:" + its cause
    if chosen is None:
        chosen = f"{type(error).__name__}: {lines[0]}" if lines and isinstance(error, BaseException) else (lines[0] if lines else "")
    return chosen if len(chosen) <= limit else chosen[: limit - 3] + "..."


def error_excerpt(error: BaseException | str | None, max_lines: int = 12) -> str:
    """The end of the innermost traceback in an error: the user's frames and the error line.

    A failed nested run's error holds Ray's frames first and the worker's traceback last.
    """
    if error is None:
        return ""
    lines = str(error).rstrip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().startswith("Traceback (most recent call last)")]
    block = lines[starts[-1]:] if starts else lines
    if len(block) > max_lines:
        block = [block[0], "  ..."] + block[-(max_lines - 2):]
    return "\n".join(block)


def flatten_config(config: dict, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}} -> {"a.b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_config(value, name + "."))
        else:
            out[name] = value
    return out

#: Columns Tune adds to every result; everything else a trial reports is a user metric.
TUNE_COLUMNS = frozenset(
    {
        "timestamp", "checkpoint_dir_name", "done", "training_iteration", "trial_id", "date",
        "time_this_iter_s", "time_total_s", "pid", "hostname", "node_ip", "time_since_restore",
        "iterations_since_restore", "checkpoint_path", "config", "experiment_tag", "should_checkpoint",
    }
)


@dataclass
class TrialOutcome:
    """One trial at the end of a search."""

    trial_id: str
    status: str  # "finished" | "stopped" (early, by the scheduler) | "errored"
    config: dict[str, Any]
    metrics: dict[str, Any]  # the last report
    best: float | None  # best value of the search metric over the trial's reports
    iterations: int  # epochs reported (Tune's training_iteration if the trial reports no epoch)
    error: str = ""
    traceback: str = ""  # the end of the innermost traceback (the user's frames), for errored trials
    path: str = ""


@dataclass
class SearchSummary:
    """A search's outcome, as written to ``hpsearch_summary.json``."""

    name: str
    metric: str
    mode: str
    wall_time_s: float
    trials: list[TrialOutcome] = field(default_factory=list)
    #: True when the search stopped before every trial ended (Ctrl-C): resume it.
    interrupted: bool = False

    def count(self, status: str) -> int:
        return sum(1 for t in self.trials if t.status == status)

    @property
    def best(self) -> TrialOutcome | None:
        scored = [t for t in self.trials if t.best is not None and t.status != "errored"]
        if not scored:
            return None
        pick = min if self.mode == "min" else max
        return pick(scored, key=lambda t: t.best)

    def as_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "name": self.name,
            "metric": self.metric,
            "mode": self.mode,
            "wall_time_s": round(self.wall_time_s, 2),
            "interrupted": self.interrupted,
            "counts": {s: self.count(s) for s in ("finished", "stopped", "errored")},
            "best_trial_id": best.trial_id if best else None,
            "trials": [asdict(t) for t in self.trials],
        }


def _best_of(history: Sequence[float], mode: str) -> float | None:
    values = [float(v) for v in history if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not values:
        return None
    return min(values) if mode == "min" else max(values)


def summarize(
    result_grid: Any,
    *,
    name: str,
    metric: str,
    mode: str,
    wall_time_s: float,
    outcomes: Mapping[str, str] | None = None,
) -> SearchSummary:
    """Build a :class:`SearchSummary` from a Tune ``ResultGrid``.

    ``outcomes`` (trial id -> "finished" | "stopped" | "errored") says which trials the
    scheduler stopped early; Tune's results alone cannot tell.
    """
    summary = SearchSummary(name=name, metric=metric, mode=mode, wall_time_s=wall_time_s)
    for result in result_grid:
        metrics = dict(result.metrics or {})
        history = result.metrics_dataframe
        values = list(history[metric]) if history is not None and metric in history else [metrics.get(metric)]
        trial_id = str(metrics.get("trial_id") or Path(str(result.path)).name)
        status = "errored" if result.error is not None else (outcomes or {}).get(trial_id, "finished")
        summary.trials.append(
            TrialOutcome(
                trial_id=trial_id,
                status=status,
                config=dict(result.config or {}),
                metrics={k: v for k, v in metrics.items() if k not in TUNE_COLUMNS or k == "training_iteration"},
                best=_best_of(values, mode),
                iterations=int(metrics.get("epoch") or metrics.get("training_iteration") or 0),
                error=short_error(result.error),
                traceback=error_excerpt(result.error),
                path=str(result.path or ""),
            )
        )
    return summary


def best_trials_table(summary: SearchSummary, *, n: int = 5, varying: Sequence[str] | None = None) -> str:
    """A fixed-width table of the ``n`` best trials: id, status, metric, other metrics, config."""
    ranked = sorted(
        (t for t in summary.trials if t.best is not None and t.status != "errored"),
        key=lambda t: t.best,
        reverse=summary.mode == "max",
    )[:n]
    if not ranked:
        return "(no trial reported the metric)"
    extra = [k for k in ranked[0].metrics if k not in (summary.metric, "training_iteration")][:3]
    header = ["trial_id", "status", "iters", f"{summary.metric} (best)", *extra]
    flat_configs = [flatten_config(t.config) for t in ranked]
    params = list(varying) if varying is not None else list(flat_configs[0])
    header += params
    rows = [header]
    for trial, flat in zip(ranked, flat_configs):
        rows.append(
            [trial.trial_id, trial.status, str(trial.iterations), _cell(trial.best)]
            + [_cell(trial.metrics.get(k)) for k in extra]
            + [_cell(flat.get(p)) for p in params]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def read_outcome_records(path: Path) -> dict[str, dict[str, Any]]:
    """Trial id -> its last end record in an outcomes file (a retried trial can end more than once).

    A line cut short by a kill, or a missing file, is skipped rather than an error.
    """
    out: dict[str, dict[str, Any]] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("trial_id"):
            out[str(record["trial_id"])] = record
    return out
