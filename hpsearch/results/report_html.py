"""The report as one self-contained HTML page: its style and its plots (base64 PNG) embedded (:func:`render_html`).

Every string from the folder is escaped (``html.escape``); a link to a log is percent-encoded and
relative to the page, so the one file can be mailed or attached to a ticket.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from hpsearch._version import __version__
from hpsearch.analysis import Results
from hpsearch.experiment.layout import PLAN_FILE, SPEC_FILE, STOPPED
from hpsearch.formatting import cell, duration, number
from hpsearch.results import report_content as content
from hpsearch.results.report_content import TrialLogs
from hpsearch.results.report_figures import Figure
from hpsearch.spec.credentials import redact_tree

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["render_html"]

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


def render_html(results: Results, figures: list[Figure], *, base: Path | None = None) -> str:
    """The report as one self-contained HTML page; its links to the logs are relative to ``base`` (the
    folder the page is written to; default the experiment folder)."""
    e = html.escape
    logs = content.trial_logs(results, base)
    out = [*_head_html(results), *_best_html(results), *_plots_html(figures)]
    if results.multi_objective:
        front = content.pareto_table(results)
        out += [f"<h2>Pareto front ({len(front)} trials)</h2>", _table_html(front, results)]
    if content.population_based(results):
        exploits = content.exploits_table(results)
        out += [f"<h2>PBT lineage ({len(exploits)} exploits)</h2>", _table_html(exploits, results)]
    best = content.best_table(results)
    out += [f"<h2>{e(content.best_title(results))}</h2>", _table_html(best, results, mark_best=True)]
    out += _errors_html(results, logs) + _preemptions_html(results)
    out += [
        f"<h2>All trials ({len(results.trials)})</h2>",
        "<details><summary>show the table</summary>",
        _table_html(content.trials_table(results), results, mark_best=True),
        "</details>",
    ]
    out += _logs_section_html(logs) + _spec_and_plan_html(results)
    out.append(f"<p class='muted' style='margin-top:30px'>hpsearch {e(__version__)}</p></main></body></html>")
    return "\n".join(out)


def _head_html(results: Results) -> list[str]:
    """The page's head, its title and the cards of facts."""
    e = html.escape
    return [
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
            for k, v in content.facts(results)
        ),
        "</div>",
    ]


def _best_html(results: Results) -> list[str]:
    """The best trial's card (nothing without a best trial)."""
    e = html.escape
    best = results.best
    if best is None:
        return []
    config = {p: content.gap(best.get(p)) for p in results.params}
    return [
        "<h2>Best trial</h2><div class='card best-card'>",
        f"<div><strong>{e(str(best['trial_id']))}</strong> {_badge(best['status'])} &middot; {e(results.metric)} "
        f"<strong>{e(number(best['best']))}</strong> at iteration {e(cell(best['best_iteration']))} "
        f"(last {e(number(best['last']))}, {e(cell(best['iterations']))} iterations, {e(duration(best['wall_time_s']))})</div>",
        "<div><code>" + e(", ".join(f"{k}={cell(v)}" for k, v in config.items())) + "</code></div>",
        f"<div class='muted'>best checkpoint kept: <code>{e(str(best['best_checkpoint'] or '-'))}</code></div>",
        "</div>",
    ]


#: The rows of plots on the page: two side by side where they fit.
_PLOT_ROWS = [
    ("pareto_front",),
    ("pbt_lineage",),
    ("learning_curves", "optimization_history"),
    ("param_vs_metric",),
    ("parallel_coordinates",),
    ("param_importances", "scheduler_effect"),
]


def _plots_html(figures: list[Figure]) -> list[str]:
    out = ["<h2>Plots</h2>"]
    by_key = {f.key: f for f in figures}
    for row in _PLOT_ROWS:
        cells = [by_key[k] for k in row if k in by_key]
        out.append("<div class='row grid2'>" if len(cells) > 1 else "<div class='row'>")
        out += [_figure_html(f) for f in cells]
        out.append("</div>")
    return out


def _errors_html(results: Results, logs: dict[str, TrialLogs]) -> list[str]:
    """Each errored trial's line, the file with its traceback and the log it came from."""
    e = html.escape
    errors = content.errors(results)
    out = [f"<h2>Errors ({len(errors)})</h2>"]
    if not errors:
        return [*out, "<p class='muted'>No trial errored.</p>"]
    out.append(
        "<div class='scroll'><table><tr><th>trial</th><th class='t'>error (and the file with its traceback)</th></tr>"
    )
    for x in errors:
        log = content.failing_log(logs.get(x["trial_id"]), x["error"])
        link = f" &middot; <a href='{_href(log[1])}'>{e(log[0])}</a>" if log else ""
        out.append(
            f"<tr><td>{e(x['trial_id'])}</td><td class='t wrap'><span class='err'>{e(x['error'])}</span><br>"
            f"<code class='muted'>{e(x['file'])}</code>{link}</td></tr>"
        )
    out.append("</table></div>")
    return out


def _preemptions_html(results: Results) -> list[str]:
    """Each drain notice a trial's loop read and the restart that followed (nothing when no node was drained)."""
    table = content.preemptions_table(results)
    if table.empty:
        return []
    return [
        f"<h2>Preempted ({len(table)})</h2>",
        "<p class='muted'>Nodes drained under a trial (a spot reclaim): Ray Train started its workers again from "
        "the latest checkpoint, inside the trial. Restarts, not errors.</p>",
        _table_html(table, results),
    ]


def _logs_section_html(logs: dict[str, TrialLogs]) -> list[str]:
    """The table of each trial's logs (nothing when no trial kept any)."""
    e = html.escape
    if not logs:
        return []
    return [
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


def _spec_and_plan_html(results: Results) -> list[str]:
    e = html.escape
    out = ["<h2>Spec and plan</h2>"]
    plan_lines = content.plan_lines(results.plan)
    if plan_lines:
        out.append("<ul>" + "".join(f"<li>{e(line)}</li>" for line in plan_lines) + "</ul>")
    if results.spec:
        spec_text = yaml.safe_dump(redact_tree(results.spec), sort_keys=False)  # a folder written before redaction
        out.append(f"<details><summary>the spec as run ({SPEC_FILE})</summary><pre>{e(spec_text)}</pre></details>")
    if results.plan:
        out.append(
            f"<details><summary>the resource plan ({PLAN_FILE})</summary><pre>{e(json.dumps(results.plan, indent=2))}</pre></details>"
        )
    return out


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
