"""The report as Markdown, with its plots as PNGs beside it (:func:`render_markdown`).

Every string from the folder shows literally: :func:`md` backslash-escapes CommonMark's ASCII
punctuation, code spans are fenced longer than any run of backticks in them, and links are
percent-encoded, so nothing a folder holds becomes markup.
"""

from __future__ import annotations

import numbers
import re
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hpsearch.analysis import Results
from hpsearch.formatting import cell, number
from hpsearch.results import report_content as content
from hpsearch.results.report_figures import Figure
from hpsearch.spec.credentials import redact_tree

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["render_markdown", "md"]


def render_markdown(
    results: Results, figures: list[Figure], images: dict[str, str], *, base: Path | None = None
) -> str:
    """The report as Markdown; ``images`` maps a figure's key to its PNG's path relative to the report,
    and its links to the logs are relative to ``base`` (the report's folder; default the experiment folder)."""
    logs = content.trial_logs(results, base)
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
    lines += [f"- **{md(k)}:** {md(v)}" for k, v in content.facts(results)]
    best = results.best
    if best is not None:
        config = ", ".join(f"{p}={cell(content.gap(best.get(p)))}" for p in results.params)
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
        front = content.pareto_table(results)
        lines += ["", f"## Pareto front ({len(front)} trials)", "", _table_md(front)]
    if content.population_based(results):
        exploits = content.exploits_table(results)
        lines += ["", f"## PBT lineage ({len(exploits)} exploits)", "", _table_md(exploits)]
    lines += ["", f"## {md(content.best_title(results))}", "", _table_md(content.best_table(results))]
    errors = content.errors(results)
    lines += ["", f"## Errors ({len(errors)})", ""]
    for x in errors:
        log = content.failing_log(logs.get(x["trial_id"]), x["error"])
        link = f"; [{log[0]}](<{_md_link(log[1])}>)" if log else ""
        lines.append(f"- {_md_code(x['trial_id'])}: {_md_code(x['error'])} ({_md_code(x['file'])}{link})")
    if not errors:
        lines.append("No trial errored.")
    lines += _preemptions_md(results)
    lines += ["", f"## All trials ({len(results.trials)})", "", _table_md(content.trials_table(results))]
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
    lines += [f"- {md(line)}" for line in content.plan_lines(results.plan)]
    if results.spec:
        text = yaml.safe_dump(redact_tree(results.spec), sort_keys=False).rstrip()  # an older folder may hold one
        fence = "`" * max(3, _longest_backticks(text) + 1)  # no line of the spec can close it (CommonMark 4.5)
        lines += ["", f"{fence}yaml", text, fence]
    return "\n".join(lines) + "\n"


def _preemptions_md(results: Results) -> list[str]:
    """Each drain notice a trial's loop read and the restart that followed (nothing when no node was drained)."""
    table = content.preemptions_table(results)
    if table.empty:
        return []
    return [
        "",
        f"## Preempted ({len(table)})",
        "",
        "Nodes drained under a trial (a spot reclaim): Ray Train started its workers again from the latest "
        "checkpoint, inside the trial. Restarts, not errors.",
        "",
        _table_md(table),
    ]


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
