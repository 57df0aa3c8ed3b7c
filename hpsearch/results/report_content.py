"""What the report shows, whatever its format: the facts, the tables, the errors, the logs, the plan.

The HTML page (:mod:`~hpsearch.results.report_html`) and the Markdown (:mod:`~hpsearch.results.report_markdown`)
render the same parts from here, so the two formats cannot say different things.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpsearch.analysis import Results, best_trials
from hpsearch.analysis._results import RESOURCE_HOURS_PREFIX
from hpsearch.experiment import files
from hpsearch.experiment.layout import ERRORED, STOPPED, TUNE_ERROR_FILE
from hpsearch.formatting import cell, duration, number, plural, resource_hours
from hpsearch.planning.planner import fmt_resources
from hpsearch.planning.versus import versus_actual, versus_wall

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "facts",
    "gap",
    "gaps",
    "best_table",
    "best_title",
    "population_based",
    "exploits_table",
    "pareto_table",
    "trials_table",
    "errors",
    "preemptions_table",
    "TrialLogs",
    "trial_logs",
    "failing_log",
    "plan_lines",
]


def facts(results: Results) -> list[tuple[str, str]]:
    """(label, value) pairs for the header cards."""
    counts = results.counts
    shown = [f"{n} {'stopped early' if s == STOPPED else s}" for s, n in counts.items() if n]
    best = results.best
    spec = results.spec or {}
    searcher = spec.get("searcher") or {}
    scheduler = results.scheduler
    facts = [
        ("Trials", f"{len(results.trials)}" + (f" ({', '.join(shown)})" if shown else "")),
        *(
            [
                ("Objectives", ", ".join(f"{m} ({d})" for m, d in results.objectives)),
                ("Pareto front", f"{len(results.pareto)} trials"),
            ]
            if results.multi_objective
            else []
        ),
        (
            f"Best {results.metric} ({results.mode})",
            "-"
            if best is None
            else f"{number(best['best'])} (trial {best['trial_id']}, iteration {cell(best['best_iteration'])})",
        ),
        (
            "Wall time",
            "-"
            if results.wall_time_s is None
            else duration(results.wall_time_s) + ("" if results.ended else " so far"),
        ),
    ]
    # the summary's comparison (over the run and every resume), else the estimate of a search not ended yet
    versus = (files.read_summary(results.experiment_dir) or {}).get("estimate") if results.ended else None
    if not isinstance(versus, dict):
        versus = versus_actual(files.read_estimate(results.experiment_dir), wall_time_s=None, resource_hours={})
        if versus is not None:
            versus["not_compared"] = "the search has not ended"
    if versus is not None:
        facts.append(("Estimated at the start", versus_wall(versus)))
    if results.constraints:
        ranked = results.ranked()
        met = int(results.feasible[ranked.index].sum())
        rules = "; ".join(c.text for c in results.constraints)
        facts.append(("Constraints", f"{rules}: {met} of {len(ranked)} ranked trials met them"))
    if results.ended_by:
        facts.append(("Ended by its budget", results.ended_reason or results.ended_by))
    if results.resource_hours:
        facts.append(("Resource-hours", resource_hours(results.resource_hours)))
    restarts = results.preemptions["restarted"]
    if restarts.any():  # Ray Train's restarts inside the trials: no trial errored of them
        restarted = results.preemptions[restarts]["trial_id"].nunique()
        facts.append(
            ("Preempted", f"{plural(int(restarts.sum()), 'restart')} of {plural(restarted, 'trial')}, not errors")
        )
    if searcher:
        extra = f" ({searcher['sampler']})" if searcher.get("sampler") else ""
        facts.append(("Searcher", f"{searcher.get('type', 'random')}{extra}"))
    if scheduler:
        budget = f", max_t {scheduler['max_t']}" if scheduler.get("max_t") is not None else ""
        facts.append(("Scheduler", f"{scheduler.get('type', 'fifo')}{budget}"))
    plan = results.plan or {}
    if plan.get("max_concurrent_trials") is not None:
        workers = plan.get("num_workers")
        each = f" ({plural(workers, 'worker')} each)" if workers else ""
        facts.append(("Trials at once", f"{plan['max_concurrent_trials']}{each}"))
    return facts


def gap(value: Any) -> Any:
    """A value from a table, ``None`` where it is NaN/NA/NaT (a gap: shown ``-``)."""
    try:
        return None if value is None or bool(value != value) else value
    except (TypeError, ValueError):  # pandas' NA
        return None


def gaps(table: pd.DataFrame) -> pd.DataFrame:
    """The table's cells as Python objects, every NaN/NA/NaT a gap (``None``, shown ``-``)."""
    shown: pd.DataFrame = table.astype("object").where(table.notna(), None)
    return shown


def best_table(results: Results, n: int = 10) -> pd.DataFrame:
    """The best trials, best first. Their metric values are reported values (NaN shown ``nan``);
    other metrics missing at the best iteration, and parameters a trial has not, are gaps."""
    table = best_trials(results, n).drop(columns=["number"])
    shown: pd.DataFrame = gaps(table)
    shown[results.metric] = table[results.metric].astype("object")
    return shown


def population_based(results: Results) -> bool:
    return results.scheduler.get("type") in ("pbt", "pb2")


def exploits_table(results: Results) -> pd.DataFrame:
    """The exploits as the report lists them: who copied whom at which epochs, the values then,
    what changed, and the seconds from the pause to the trial's next report."""
    columns = ["trial_id", "epoch", "donor_trial_id", "donor_epoch", "value", "donor_value", "changed", "exploit_s"]
    table: pd.DataFrame = results.lineage[columns]
    return table


def pareto_table(results: Results) -> pd.DataFrame:
    """The front's trials, best first by the first objective; parameters a trial has not are gaps."""
    table = results.pareto.drop(columns=["number"])
    return gaps(table)


def best_title(results: Results) -> str:
    return f"Best trials by {results.metric} (the first objective)" if results.multi_objective else "Best trials"


def trials_table(results: Results) -> pd.DataFrame:
    """Every trial; its best and last value of the metric are gaps where it reported no number of it."""
    held = [
        c for c in results.trials.columns if c.startswith(RESOURCE_HOURS_PREFIX) and results.trials[c].notna().any()
    ]
    cols = ["trial_id", "status", "iterations", "best", "last", "best_iteration"]
    cols += ["violation"] * bool(results.constraints) + ["wall_time_s", *held, *results.params]
    table = results.trials[[c for c in cols if c in results.trials]]
    shown = gaps(table)
    for col in ("best", "last"):
        shown[col] = table[col].astype("object").where(results.has_value, None)
    renamed: pd.DataFrame = shown.rename(
        columns={
            "best": f"best {results.metric}",
            "last": f"last {results.metric}",
            "wall_time_s": "time (s)",
            **{c: f"{c[len(RESOURCE_HOURS_PREFIX) :]}-hours" for c in held},
        }
    )
    return renamed


def errors(results: Results) -> list[dict[str, str]]:
    trials = results.trials[results.trials["status"] == ERRORED]
    return [
        {
            "trial_id": r.trial_id,
            "error": r.error or "(no message)",
            "file": str(Path(r.trial_dir) / TUNE_ERROR_FILE) if r.trial_dir else "-",
        }
        for r in trials.itertuples(index=False)
    ]


def preemptions_table(results: Results) -> pd.DataFrame:
    """Each drain notice a trial's loop read, as the report lists it: the drained hosts (the trial driver's, said),
    the drain's reason, the seconds of warning it gave, the epoch of the notice and of the checkpoint saved then,
    and the restart: the attempt that continued, from the checkpoint of which epoch, and the reports lost (made
    again)."""
    columns = {
        "trial_id": "trial_id",
        "attempt": "attempt",
        "hosts": "hosts",
        "reason": "reason",
        "warning_s": "warning (s)",
        "epoch": "notice at epoch",
        "saved_epoch": "saved epoch",
        "restart_attempt": "restarted as attempt",
        "restored_epoch": "from epoch",
        "reports_lost": "reports lost",
    }
    table = results.preemptions[list(columns)].copy()
    table["hosts"] = [
        (", ".join(h for h in hosts if h) or "-") + (" (the trial's driver)" if driver else "")
        for hosts, driver in zip(table["hosts"], results.preemptions["driver"], strict=True)
    ]
    table["reason"] = [reason or "-" for reason in table["reason"]]
    shown: pd.DataFrame = gaps(table).rename(columns=columns)
    return shown


@dataclass
class TrialLogs:
    """A trial's logs as the report links them: its latest attempt's rank logs and its controller's."""

    trial_id: str
    attempt: int | None  # the latest attempt's number; None: no attempt recorded (only a controller log)
    attempts: int
    folder: str | None  # the latest attempt's folder, relative to the report
    ranks: list[tuple[int, str]]  # (rank, its log relative to the report), the ranks that started
    controller: str | None  # the controller's log relative to the report, when there is one


def _relative(target: Path, base: Path) -> str:
    return Path(os.path.relpath(target, base)).as_posix()


def trial_logs(results: Results, base: Path | None = None) -> dict[str, TrialLogs]:
    """Each trial's logs (trial id -> :class:`TrialLogs`), paths relative to ``base`` (the report's folder;
    default the experiment folder). Trials that kept none are left out."""
    base = Path(base) if base is not None else results.experiment_dir
    out = {}
    exp = results.experiment_dir
    for trial_id in results.trials["trial_id"]:
        folder = files.trial_folder(exp, str(trial_id))
        if folder is None:  # its folder leads out of the experiment folder: shown without links
            continue
        attempts = files.read_rank_progress(folder)
        controller = files.controller_log(folder)
        has_controller = controller.is_file() and files.inside(controller, exp)
        if not attempts and not has_controller:
            continue
        latest = attempts[-1] if attempts and files.inside(attempts[-1].folder, exp) else None
        if latest is None and not has_controller:
            continue
        out[str(trial_id)] = TrialLogs(
            trial_id=str(trial_id),
            attempt=latest.attempt if latest is not None else None,
            attempts=len(attempts),
            folder=_relative(latest.folder, base) if latest is not None else None,
            ranks=[
                (r.rank, _relative(r.log, base)) for r in latest.ranks if r.log is not None and files.inside(r.log, exp)
            ]
            if latest
            else [],
            controller=_relative(controller, base) if has_controller else None,
        )
    return out


def plan_lines(plan: dict[str, Any] | None) -> list[str]:
    if not plan:
        return []

    lines = [
        f"{plan.get('max_concurrent_trials', '?')} trial(s) at once (capacity {plan.get('capacity', '?')})",
        f"per trial: driver {fmt_resources(plan.get('driver_bundle') or {})} + {plan.get('num_workers', '?')} worker(s) x "
        f"{fmt_resources(plan.get('worker_bundle') or {})}, placed {plan.get('placement_strategy', '?')}",
    ]
    for node in plan.get("nodes", []):
        res = {k: v for k, v in (node.get("resources") or {}).items() if k in ("CPU", "GPU", "memory")}
        head = " (head)" if node.get("is_head") else ""
        lines.append(f"node {str(node.get('node_id', ''))[:12]}{head}: {fmt_resources(res)}")
    lines += [f"note: {w}" for w in plan.get("warnings", [])]
    return lines


def failing_log(logs: TrialLogs | None, error: str) -> tuple[str, str] | None:
    """The log an errored trial's error came from, as (text, relative path): the rank its line names
    (``(rank 1; its log: ...)``), else the latest attempt's folder."""
    if logs is None or logs.folder is None:
        return None
    for rank, log in logs.ranks:
        if f"(rank {rank}; its log: " in error:
            return f"the log of rank {rank}", log
    return f"the logs of attempt {logs.attempt}", logs.folder + "/"
