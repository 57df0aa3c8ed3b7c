"""A report of one search: a self-contained HTML page, or Markdown with PNGs beside it.

What it holds: the trial counts, the best trial, the wall time, the budget that ended
the search and the resource-hours (in total, and per trial in the table of every trial),
what early stopping saved; every plot of :mod:`hpsearch.plots`; with several objectives the
Pareto front (its plot and a table of its trials); the best trials table; the errors (each
with the log of the rank it came from); every trial; every trial's logs (its latest attempt's
rank logs and its controller's, linked relative to the report); the spec and the resource plan. The HTML embeds its plots (base64 PNG) and
its style, so the one file can be mailed or attached to a ticket.

Example:
    >>> path = write_report("hpsearch-results/digits-quick")            # .../hpsearch_report.html
    >>> path = write_report("hpsearch-results/digits-quick", fmt="md")  # .../hpsearch_report.md + PNGs
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import json
import numbers
import os
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hpsearch import analysis as an
from hpsearch._version import __version__
from hpsearch.analysis import Results, best_trials, load_results
from hpsearch.analysis._results import RESOURCE_HOURS_PREFIX
from hpsearch.experiment import files
from hpsearch.experiment.layout import ERRORED, PLAN_FILE, REPORT_NAME, SPEC_FILE, STOPPED, TUNE_ERROR_FILE
from hpsearch.formatting import cell, duration, number, plural
from hpsearch.planning.planner import fmt_resources
from hpsearch.planning.versus import versus_actual, versus_wall
from hpsearch.results import plots

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "write_report",
    "render_html",
    "render_markdown",
    "report_figures",
    "trial_logs",
    "TrialLogs",
    "REPORT_NAME",
    "FORMATS",
]

FORMATS = ("html", "md")
_DPI = 110


@dataclass
class Figure:
    """One plot of the report: its PNG (or the error that kept it from being drawn) and a caption.

    A plot with nothing to draw is drawn all the same: an empty axes that says why, and the
    same reason as its caption.
    """

    key: str
    title: str
    caption: str
    png: bytes | None = None
    error: str = ""


def write_report(
    results: Results | str | os.PathLike[str], output: str | os.PathLike[str] | None = None, *, fmt: str = "html"
) -> Path:
    """Write the report of a search and return its path.

    Args:
        results: What :func:`hpsearch.load_results` returned, or an experiment folder.
        output: The file to write; default ``<experiment folder>/hpsearch_report.html`` (``.md``).
            Markdown's PNGs go beside it, named ``<stem>_<plot>.png``.
        fmt: ``"html"`` or ``"md"``.

    Raises:
        ResultsError: The report's file (or a PNG's) is a symlink, a hard link or not a regular file: not written.
    """
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if not isinstance(results, Results):
        results = load_results(results)
    path = Path(output) if output is not None else results.experiment_dir / f"{REPORT_NAME}.{fmt}"
    path.parent.mkdir(parents=True, exist_ok=True)
    figures = report_figures(results)
    # no write follows a link: a folder someone sent may hold a symlink where the report goes
    if fmt == "html":
        files.write_no_link(path, render_html(results, figures, base=path.parent).encode("utf-8"))
        return path
    images = {}
    for fig in figures:
        if fig.png is not None:
            image = path.with_name(f"{path.stem}_{fig.key}.png")
            files.write_no_link(image, fig.png)
            images[fig.key] = image.name
    files.write_no_link(path, render_markdown(results, figures, images, base=path.parent).encode("utf-8"))
    return path


# ----------------------------------------------------------------------------- figures


def report_figures(results: Results) -> list[Figure]:
    """Every plot as PNG bytes, with a caption read from the data; a plot that fails says why."""
    figures = []
    for key, title, compute, draw, size, caption in _plots():
        if key == "pareto_front" and not results.multi_objective:
            continue
        if key == "pbt_lineage" and not _population_based(results):
            continue
        fig = Figure(key, title, "")
        try:
            data = compute(results)
            fig.caption = caption(results, data)
            fig.png = _render(draw, data, size(data), sharey=key != "pareto_front")
        except Exception as err:  # noqa: BLE001 - one plot must not cost the whole report
            fig.error = f"{type(err).__name__}: {err}"
        figures.append(fig)
    return figures


def _render(draw: Callable[..., Any], data: Any, size: tuple[int, int, float, float], *, sharey: bool = True) -> bytes:
    from matplotlib.figure import Figure as MplFigure  # lazy: matplotlib is heavy; results/ imports without it

    rows, cols, width, height = size
    fig = MplFigure(figsize=(width, height), layout="constrained")
    if rows * cols == 1:
        draw(data, ax=fig.subplots())
    else:
        axes = fig.subplots(rows, cols, squeeze=False, sharey=sharey).ravel()
        n = len(data.panels)
        for extra in axes[n:]:
            fig.delaxes(extra)
        draw(data, ax=axes[: max(n, 1)])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI)
    return buffer.getvalue()


def _plots() -> list[tuple[Any, ...]]:
    """(key, title, analysis function, plot function, figure size, caption) per plot, in report order."""

    def one(w: float, h: float) -> Callable[[Any], tuple[int, int, float, float]]:
        return lambda _: (1, 1, w, h)

    def grid(data: Any) -> tuple[int, int, float, float]:
        if not data.panels:  # one empty axes that says why, as wide as the row it is shown in
            return 1, 1, 10.2, 2.4
        n = len(data.panels)
        cols = min(3, n)
        rows = -(-n // cols)
        return rows, cols, 3.4 * cols, 2.7 * rows + 0.4

    def curves(results: Results, data: Any) -> str:
        if data.reason:
            return _sentence(data.reason)
        stopped = sum(c.status == STOPPED for c in data.curves)
        text = f"{data.metric} at every {data.x_label} of each trial."
        if stopped:
            text += f" Dashed grey: the {stopped} trial(s) the scheduler stopped early (x where it stopped them)."
        if data.best_trial_id:
            text += f" Thick red: the best trial, {data.best_trial_id}."
        return text

    def history(results: Results, data: Any) -> str:
        if data.reason:
            return _sentence(data.reason)
        best = results.best
        if best is None:
            return (
                f"Each trial's best {data.metric}, in the order the searcher proposed them. No trial that did not "
                + (
                    f"error met the constraints with a finite value of {data.metric}: there is no best trial."
                    if results.constraints
                    else f"error has a finite value of {data.metric}: there is no best trial."
                )
            )
        first = next((n for n, b in zip(data.numbers, data.running_best) if b == best["best"]), None)
        return (
            f"Each trial's best {data.metric}, in the order the searcher proposed them; the line is the best so far. "
            f"The best value, {number(best['best'])}, was found by trial {first} of {len(data.numbers)}."
        )

    def params(results: Results, data: Any) -> str:
        if data.reason:
            return _sentence(data.reason + (f": {data.detail}" if data.detail else ""))
        logs = [p.axis.name for p in data.panels if p.axis.log]
        text = "Each trial's best value against each searched parameter (hollow: stopped early)."
        return text + (f" Log axes for {', '.join(logs)}, as the spec searched them." if logs else "")

    def parallel(results: Results, data: Any) -> str:
        if data.reason:
            return _sentence(data.reason)
        return "Each line is a trial, through its best metric value and its parameters; darker lines did better."

    def importance(results: Results, data: Any) -> str:
        if not data.importances:
            return f"Not computed: {data.reason}."
        top, value = next(iter(data.importances.items()))
        return (
            f"How much of the variation in {data.metric} each parameter explains ({data.evaluator}, Optuna's "
            f"evaluator, on {data.n_trials} trials). {top} explains the most ({value:.0%}). "
            "With few trials, read this as a hint, not a measurement."
        )

    def scheduler(results: Results, data: Any) -> str:
        if data.reason:
            return _sentence(data.reason)
        if data.scheduler == "fifo":
            return "No early stopping (FIFO scheduler): every trial ran to its end."
        stopped = data.statuses.count(STOPPED)
        return (
            f"Iterations each trial ran (budget {data.budget}). {data.scheduler.upper()} stopped {stopped} trial(s) early, "
            f"saving {data.saved} of {data.used + data.saved} iterations ({data.saved_fraction:.0%}) and "
            f"{'about ' if data.time_saved_s >= 1 else ''}{duration(data.time_saved_s)} of trial time: "
            "the time a nested trial takes to start is not saved."
        )

    def pareto_size(data: Any) -> tuple[int, int, float, float]:
        n = len(data.panels)
        if n <= 1:
            return 1, 1, 6.4, 4.6
        cols = min(3, n)
        rows = -(-n // cols)
        return rows, cols, 4.0 * cols, 3.4 * rows + 0.4

    def pareto(results: Results, data: Any) -> str:
        first = results.objectives[0][0]
        left = (
            f" {data.left_out} trial(s) without a finite number for every objective are not drawn."
            if data.left_out
            else ""
        )
        pairs = " Three or more objectives: one plot per pair." if len(data.panels) > 1 else ""
        infeasible = data.feasible.count(False)
        apart = (
            f" {infeasible} trial(s) violate the constraints: grey crosses, never on the front."
            if infeasible
            else (" Only trials that meet the constraints can be on the front." if results.constraints else "")
        )
        point = "its feasible report with the best" if results.constraints else "its report with the best"
        return (
            f"{sum(data.on_front)} of {len(data.trial_ids)} trials are on the front (dark red): no other trial is "
            f"at least as good in every objective and better in one. A trial's point is {point} "
            f"{first} (the first objective).{pairs}{apart}{left}"
        )

    def lineage_size(data: Any) -> tuple[int, int, float, float]:
        return 1, 1, 7.0, max(2.4, 0.45 * len(data.trials) + 1.2)

    def lineage(results: Results, data: Any) -> str:
        copied = len({t for t, *_ in data.exploits})
        return (
            f"{len(data.exploits)} exploits: each arrow goes from the donor's lane, at the epoch whose checkpoint "
            f"the trial continued from, into that trial (its own line was cut at the x). {copied} of "
            f"{len(data.trials)} trials continued from another's checkpoint at least once."
        )

    return [
        ("pareto_front", "Pareto front", an.pareto_front, plots.pareto_front, pareto_size, pareto),
        ("pbt_lineage", "PBT lineage", an.pbt_lineage, plots.pbt_lineage, lineage_size, lineage),
        ("learning_curves", "Learning curves", an.learning_curves, plots.learning_curves, one(5.8, 3.8), curves),
        (
            "optimization_history",
            "Optimisation history",
            an.optimization_history,
            plots.optimization_history,
            one(5.8, 3.8),
            history,
        ),
        ("param_vs_metric", "Parameters vs metric", an.param_vs_metric, plots.param_vs_metric, grid, params),
        (
            "parallel_coordinates",
            "Parallel coordinates",
            an.parallel_coordinates,
            plots.parallel_coordinates,
            one(10.2, 4.0),
            parallel,
        ),
        (
            "param_importances",
            "Parameter importance",
            an.param_importances,
            plots.param_importances,
            one(5.8, 3.8),
            importance,
        ),
        ("scheduler_effect", "Early stopping", an.scheduler_effect, plots.scheduler_effect, one(5.8, 3.8), scheduler),
    ]


# ----------------------------------------------------------------------------- facts


def _facts(results: Results) -> list[tuple[str, str]]:
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
        held = ", ".join(f"{number(h)} {r}-hours" for r, h in results.resource_hours.items())
        facts.append(("Resource-hours", held))
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


def _sentence(reason: str) -> str:
    """A plot's reason (``no trial reported val_loss yet``) as a caption: ``No trial reported val_loss yet.``"""
    return reason[:1].upper() + reason[1:] + ("" if reason.endswith(".") else ".")


def _gap(value: Any) -> Any:
    """A value from a table, ``None`` where it is NaN/NA/NaT (a gap: shown ``-``)."""
    try:
        return None if value is None or bool(value != value) else value
    except (TypeError, ValueError):  # pandas' NA
        return None


def _gaps(table: pd.DataFrame) -> pd.DataFrame:
    """The table's cells as Python objects, every NaN/NA/NaT a gap (``None``, shown ``-``)."""
    shown: pd.DataFrame = table.astype("object").where(table.notna(), None)
    return shown


def _best_table(results: Results, n: int = 10) -> pd.DataFrame:
    """The best trials, best first. Their metric values are reported values (NaN shown ``nan``);
    other metrics missing at the best iteration, and parameters a trial has not, are gaps."""
    table = best_trials(results, n).drop(columns=["number"])
    shown: pd.DataFrame = _gaps(table)
    shown[results.metric] = table[results.metric].astype("object")
    return shown


def _population_based(results: Results) -> bool:
    return results.scheduler.get("type") in ("pbt", "pb2")


def _lineage_table(results: Results) -> pd.DataFrame:
    """The exploits as the report lists them: who copied whom at which epochs, the values then,
    what changed, and the seconds from the pause to the trial's next report."""
    columns = ["trial_id", "epoch", "donor_trial_id", "donor_epoch", "value", "donor_value", "changed", "exploit_s"]
    table: pd.DataFrame = results.lineage[columns]
    return table


def _pareto_table(results: Results) -> pd.DataFrame:
    """The front's trials, best first by the first objective; parameters a trial has not are gaps."""
    table = results.pareto.drop(columns=["number"])
    return _gaps(table)


def _best_title(results: Results) -> str:
    return f"Best trials by {results.metric} (the first objective)" if results.multi_objective else "Best trials"


def _trials_table(results: Results) -> pd.DataFrame:
    """Every trial; its best and last value of the metric are gaps where it reported no number of it."""
    held = [
        c for c in results.trials.columns if c.startswith(RESOURCE_HOURS_PREFIX) and results.trials[c].notna().any()
    ]
    cols = ["trial_id", "status", "iterations", "best", "last", "best_iteration"]
    cols += ["violation"] * bool(results.constraints) + ["wall_time_s", *held, *results.params]
    table = results.trials[[c for c in cols if c in results.trials]]
    shown = _gaps(table)
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


def _errors(results: Results) -> list[dict[str, str]]:
    trials = results.trials[results.trials["status"] == ERRORED]
    return [
        {
            "trial_id": r.trial_id,
            "error": r.error or "(no message)",
            "file": str(Path(r.trial_dir) / TUNE_ERROR_FILE) if r.trial_dir else "-",
        }
        for r in trials.itertuples(index=False)
    ]


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


def _plan_lines(plan: dict[str, Any] | None) -> list[str]:
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


# ----------------------------------------------------------------------------- HTML

_CSS = """
:root { --ink:#1f2328; --muted:#59636e; --line:#d8dee4; --bg:#f6f8fa; --accent:#2166ac; --best:#b2182b; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--ink); background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 28px 60px; }
h1 { font-size: 26px; margin: 0 0 2px; }
h2 { font-size: 18px; margin: 34px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.sub { color: var(--muted); margin: 0 0 18px; font-size: 13px; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(200px, 1fr)); gap: 10px; }
.card { background: var(--bg); border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
.card .v { font-size: 15px; font-weight: 600; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 18px; }
.row { margin-bottom: 22px; }
@media (max-width: 900px) { .grid2 { grid-template-columns: 1fr; } }
figure { margin: 0; }
figure img { width: 100%; height: auto; border: 1px solid var(--line); border-radius: 6px; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
figure h3 { font-size: 15px; margin: 0 0 6px; }
table { border-collapse: collapse; font-size: 13px; width: 100%; }
.scroll { overflow-x: auto; }
th, td { padding: 5px 9px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { background: var(--bg); font-weight: 600; }
th:first-child, td:first-child, td.t, th.t { text-align: left; }
tr.best td { background: #fbeaec; }
td.wrap { white-space: normal; }
.badge { display: inline-block; padding: 0 7px; border-radius: 10px; font-size: 12px; font-weight: 600; }
.finished { background: #dbe9f6; color: #1d4f86; }
.stopped { background: #eceff1; color: #555; }
.errored { background: #fbe0dc; color: #a3321f; }
.running, .pending { background: #fdebd9; color: #8a4b14; }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 12px; overflow-x: auto; font-size: 12px; }
details summary { cursor: pointer; color: var(--accent); margin: 6px 0; }
.err { color: #a3321f; }
.muted { color: var(--muted); }
.best-card { border-left: 4px solid var(--best); }
"""


def _href(path: str) -> str:
    return html.escape(urllib.parse.quote(path), quote=True)


def _logs_html(logs: TrialLogs) -> str:
    """A trial's logs as links: its latest attempt's folder, each rank's log, the controller's log."""
    e = html.escape
    parts = []
    if logs.folder is not None:
        parts.append(f"<a href='{_href(logs.folder + '/')}'>attempt-{logs.attempt}/</a>:")
        parts += [f"<a href='{_href(log)}'>rank {rank}</a>" for rank, log in logs.ranks]
    if logs.controller is not None:
        parts.append(f"<a href='{_href(logs.controller)}'>{e('controller')}</a>")
    return " ".join(parts)


def _failing_log(logs: TrialLogs | None, error: str) -> tuple[str, str] | None:
    """The log an errored trial's error came from, as (text, relative path): the rank its line names
    (``(rank 1; its log: ...)``), else the latest attempt's folder."""
    if logs is None or logs.folder is None:
        return None
    for rank, log in logs.ranks:
        if f"(rank {rank}; its log: " in error:
            return f"the log of rank {rank}", log
    return f"the logs of attempt {logs.attempt}", logs.folder + "/"


def render_html(results: Results, figures: list[Figure], *, base: Path | None = None) -> str:
    """The report as one self-contained HTML page; its links to the logs are relative to ``base`` (the
    folder the page is written to; default the experiment folder)."""

    e = html.escape
    logs = trial_logs(results, base)
    best = results.best
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{e(results.name)}: hpsearch report</title><style>{_CSS}</style></head><body><main>",
        f"<h1>{e(results.name)}</h1>",
        f"<p class='sub'>hpsearch report &middot; <code>{e(str(results.experiment_dir))}</code> &middot; "
        f"generated {dt.datetime.now().strftime('%Y-%m-%d %H:%M')}"
        + (
            ""
            if results.ended
            else " &middot; <strong>the search has not ended</strong> (it is running, or was interrupted: "
            "<code>hpsearch resume</code> continues it)"
        )
        + "</p>",
        "<div class='cards'>",
        *(
            f"<div class='card'><div class='k'>{e(k)}</div><div class='v'>{e(v)}</div></div>"
            for k, v in _facts(results)
        ),
        "</div>",
    ]
    if best is not None:
        config = {p: _gap(best.get(p)) for p in results.params}
        out += [
            "<h2>Best trial</h2><div class='card best-card'>",
            f"<div><strong>{e(str(best['trial_id']))}</strong> {_badge(best['status'])} &middot; {e(results.metric)} "
            f"<strong>{e(number(best['best']))}</strong> at iteration {e(cell(best['best_iteration']))} "
            f"(last {e(number(best['last']))}, {e(cell(best['iterations']))} iterations, {e(duration(best['wall_time_s']))})</div>",
            "<div><code>" + e(", ".join(f"{k}={cell(v)}" for k, v in config.items())) + "</code></div>",
            f"<div class='muted'>best checkpoint kept: <code>{e(str(best['best_checkpoint'] or '-'))}</code></div>",
            "</div>",
        ]
    out.append("<h2>Plots</h2>")
    by_key = {f.key: f for f in figures}
    layout = [
        ("pareto_front",),
        ("pbt_lineage",),
        ("learning_curves", "optimization_history"),
        ("param_vs_metric",),
        ("parallel_coordinates",),
        ("param_importances", "scheduler_effect"),
    ]
    for row in layout:
        cells = [by_key[k] for k in row if k in by_key]
        out.append("<div class='row grid2'>" if len(cells) > 1 else "<div class='row'>")
        out += [_figure_html(f) for f in cells]
        out.append("</div>")
    if results.multi_objective:
        front = _pareto_table(results)
        out += [f"<h2>Pareto front ({len(front)} trials)</h2>", _table_html(front, results)]
    if _population_based(results):
        exploits = _lineage_table(results)
        out += [f"<h2>PBT lineage ({len(exploits)} exploits)</h2>", _table_html(exploits, results)]
    out += [f"<h2>{e(_best_title(results))}</h2>", _table_html(_best_table(results), results, mark_best=True)]
    errors = _errors(results)
    out.append(f"<h2>Errors ({len(errors)})</h2>")
    if errors:
        out.append(
            "<div class='scroll'><table><tr><th>trial</th><th class='t'>error (and the file with its traceback)</th></tr>"
        )
        for x in errors:
            log = _failing_log(logs.get(x["trial_id"]), x["error"])
            link = f" &middot; <a href='{_href(log[1])}'>{e(log[0])}</a>" if log else ""
            out.append(
                f"<tr><td>{e(x['trial_id'])}</td><td class='t wrap'><span class='err'>{e(x['error'])}</span><br>"
                f"<code class='muted'>{e(x['file'])}</code>{link}</td></tr>"
            )
        out.append("</table></div>")
    else:
        out.append("<p class='muted'>No trial errored.</p>")
    out += [
        f"<h2>All trials ({len(results.trials)})</h2>",
        "<details><summary>show the table</summary>",
        _table_html(_trials_table(results), results, mark_best=True),
        "</details>",
    ]
    if logs:
        out += [
            f"<h2>Logs ({len(logs)} trials)</h2>",
            "<details><summary>each trial's latest attempt: every rank's output, and the controller's</summary>",
            "<div class='scroll'><table><tr><th class='t'>trial</th><th>attempt</th><th class='t'>logs</th></tr>",
            *(
                f"<tr><td>{e(t.trial_id)}</td><td>{'-' if t.attempt is None else f'{t.attempt} of {t.attempts}'}</td>"
                f"<td class='t'>{_logs_html(t)}</td></tr>"
                for t in logs.values()
            ),
            "</table></div></details>",
        ]
    out.append("<h2>Spec and plan</h2>")
    plan_lines = _plan_lines(results.plan)
    if plan_lines:
        out.append("<ul>" + "".join(f"<li>{e(line)}</li>" for line in plan_lines) + "</ul>")
    if results.spec:
        spec_text = yaml.safe_dump(results.spec, sort_keys=False)
        out.append(f"<details><summary>the spec as run ({SPEC_FILE})</summary><pre>{e(spec_text)}</pre></details>")
    if results.plan:
        out.append(
            f"<details><summary>the resource plan ({PLAN_FILE})</summary><pre>{e(json.dumps(results.plan, indent=2))}</pre></details>"
        )
    out.append(f"<p class='muted' style='margin-top:30px'>hpsearch {e(__version__)}</p></main></body></html>")
    return "\n".join(out)


def _badge(status: str) -> str:
    label = "stopped early" if status == STOPPED else status
    return f"<span class='badge {html.escape(status)}'>{html.escape(label)}</span>"


def _figure_html(fig: Figure) -> str:
    e = html.escape
    if fig.png is None:
        return f"<figure><h3>{e(fig.title)}</h3><p class='err'>Could not draw this plot: {e(fig.error)}</p></figure>"
    data = base64.b64encode(fig.png).decode("ascii")
    return (
        f"<figure><h3>{e(fig.title)}</h3><img alt='{e(fig.title)}' src='data:image/png;base64,{data}'>"
        f"<figcaption>{e(fig.caption)}</figcaption></figure>"
    )


def _table_html(table: pd.DataFrame, results: Results, *, mark_best: bool = False) -> str:
    e = html.escape
    if table.empty:
        return "<p class='muted'>No trial reported the metric yet.</p>"
    best = results.best
    best_id = None if best is None else best["trial_id"]
    head = "".join(f"<th{' class=t' if c in ('trial_id', 'status') else ''}>{e(str(c))}</th>" for c in table.columns)
    rows = []
    for record in table.to_dict("records"):
        cls = " class='best'" if mark_best and record.get("trial_id") == best_id else ""
        cells = []
        for col, value in record.items():
            if col == "status":
                cells.append(f"<td class='t'>{_badge(str(value))}</td>")
            else:
                cells.append(f"<td>{e(cell(value))}</td>")
        rows.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return f"<div class='scroll'><table><tr>{head}</tr>{''.join(rows)}</table></div>"


# ----------------------------------------------------------------------------- Markdown


def render_markdown(
    results: Results, figures: list[Figure], images: dict[str, str], *, base: Path | None = None
) -> str:
    """The report as Markdown; ``images`` maps a figure's key to its PNG's path relative to the report,
    and its links to the logs are relative to ``base`` (the report's folder; default the experiment folder)."""
    logs = trial_logs(results, base)
    lines = [
        f"# {md(results.name)}",
        "",
        f"hpsearch report of {_md_code(str(results.experiment_dir))}"
        + (
            ""
            if results.ended
            else " (the search has not ended: it is running, or was interrupted and `hpsearch resume` continues it)"
        ),
        "",
    ]
    lines += [f"- **{md(k)}:** {md(v)}" for k, v in _facts(results)]
    best = results.best
    if best is not None:
        config = ", ".join(f"{p}={cell(_gap(best.get(p)))}" for p in results.params)
        lines += [
            "",
            "## Best trial",
            "",
            f"**{md(best['trial_id'])}**: {md(results.metric)} {number(best['best'])} at iteration "
            f"{cell(best['best_iteration'])}; {_md_code(config)}; "
            f"best checkpoint kept: {_md_code(str(best['best_checkpoint'] or '-'))}",
        ]
    lines += ["", "## Plots"]
    for fig in figures:
        lines += ["", f"### {md(fig.title)}", ""]
        lines.append(
            f"![{md(fig.title)}](<{_md_link(images[fig.key])}>)"
            if fig.key in images
            else f"Could not draw this plot: {md(fig.error)}"
        )
        if fig.caption:
            lines += ["", md(fig.caption)]
    if results.multi_objective:
        front = _pareto_table(results)
        lines += ["", f"## Pareto front ({len(front)} trials)", "", _table_md(front)]
    if _population_based(results):
        exploits = _lineage_table(results)
        lines += ["", f"## PBT lineage ({len(exploits)} exploits)", "", _table_md(exploits)]
    lines += ["", f"## {md(_best_title(results))}", "", _table_md(_best_table(results))]
    errors = _errors(results)
    lines += ["", f"## Errors ({len(errors)})", ""]
    for x in errors:
        log = _failing_log(logs.get(x["trial_id"]), x["error"])
        link = f"; [{log[0]}](<{_md_link(log[1])}>)" if log else ""
        lines.append(f"- {_md_code(x['trial_id'])}: {_md_code(x['error'])} ({_md_code(x['file'])}{link})")
    if not errors:
        lines.append("No trial errored.")
    lines += ["", f"## All trials ({len(results.trials)})", "", _table_md(_trials_table(results))]
    if logs:
        lines += [
            "",
            f"## Logs ({len(logs)} trials)",
            "",
            "Each trial's latest attempt: every rank's output, and the controller's.",
            "",
        ]
        for t in logs.values():
            links = [f"[attempt-{t.attempt}/](<{_md_link(t.folder)}/>):"] if t.folder is not None else []
            links += [f"[rank {rank}](<{_md_link(log)}>)" for rank, log in t.ranks]
            links += [f"[controller](<{_md_link(t.controller)}>)"] if t.controller is not None else []
            of = f" (attempt {t.attempt} of {t.attempts})" if t.attempt is not None else ""
            lines.append(f"- {_md_code(t.trial_id)}{of}: " + " ".join(links))
    lines += ["", "## Spec and plan", ""]
    lines += [f"- {md(line)}" for line in _plan_lines(results.plan)]
    if results.spec:
        text = yaml.safe_dump(results.spec, sort_keys=False).rstrip()
        fence = "`" * max(3, _longest_backticks(text) + 1)  # no line of the spec can close it (CommonMark 4.5)
        lines += ["", f"{fence}yaml", text, fence]
    return "\n".join(lines) + "\n"


def _table_md(table: pd.DataFrame) -> str:
    if table.empty:
        return "No trial reported the metric yet."
    cols = [md(c) for c in table.columns]
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for record in table.to_dict("records"):
        out.append("| " + " | ".join(_md_cell(v) for v in record.values()) + " |")
    return "\n".join(out)


#: CommonMark's ASCII punctuation (the spec, 2.1), every one of which may be backslash-escaped (2.4): escaped,
#: each shows as itself, never as markup (emphasis, a link, a table's cell border, raw HTML such as <script>).
_MD_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
_BACKTICKS = re.compile(r"`+")


def md(text: Any) -> str:
    """``text`` as Markdown that shows it literally, on one line: every ASCII punctuation character backslash-escaped
    (CommonMark's rule: any of them may be), each line break a space. The one escape for every string the Markdown
    report shows outside code (headings, table cells, list items); a number formatted here needs none."""
    return _MD_PUNCTUATION.sub(r"\\\1", " ".join(str(text).splitlines()))


def _md_cell(value: Any) -> str:
    """A table cell: a number or a time as :func:`~hpsearch.formatting.cell` writes it (digits, ``.``, ``-``, ``e``,
    ``:``: shown as is), anything else (a string from the folder) through :func:`md`."""
    if value is None or isinstance(value, numbers.Number) or hasattr(value, "strftime"):
        return cell(value)
    if type(value).__name__ in ("NAType", "NaTType"):  # pandas' gaps: "-"
        return cell(value)
    return md(cell(value))


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def _md_code(text: str) -> str:
    """``text`` as an inline code span (nothing in it is markup), on one line: its delimiter a run of backticks
    longer than any in the text, padded with spaces when the text has backticks (CommonMark 6.1)."""
    flat = " ".join(str(text).splitlines())
    fence = "`" * (_longest_backticks(flat) + 1)
    return f"{fence} {flat} {fence}" if "`" in flat else f"{fence}{flat}{fence}"


def _md_link(path: str) -> str:
    """A relative link's destination, percent-encoded as the HTML report's are: no character of it is markup."""
    return urllib.parse.quote(path)
