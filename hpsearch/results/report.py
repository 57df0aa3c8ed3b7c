"""A report of one search: a self-contained HTML page, or Markdown with PNGs beside it.

What it holds: the trial counts, the best trial, the wall time, the budget that ended
the search and the resource-hours (in total, and per trial in the table of every trial),
what early stopping saved; every plot of :mod:`hpsearch.plots`; with several objectives the
Pareto front (its plot and a table of its trials); the best trials table; the errors (each
with the log of the rank it came from); every trial; every trial's logs (its latest attempt's
rank logs and its controller's, linked relative to the report); the spec and the resource plan. The HTML embeds its plots (base64 PNG) and
its style, so the one file can be mailed or attached to a ticket.

:func:`write_report` is here; the report's parts are in :mod:`~hpsearch.results.report_content`, its plots
in :mod:`~hpsearch.results.report_figures`, and its two formats in :mod:`~hpsearch.results.report_html`
and :mod:`~hpsearch.results.report_markdown` (this module re-exports their public names).

Example:
    >>> path = write_report("hpsearch-results/digits-quick")            # .../hpsearch_report.html
    >>> path = write_report("hpsearch-results/digits-quick", fmt="md")  # .../hpsearch_report.md + PNGs
"""

from __future__ import annotations

import os
from pathlib import Path

from hpsearch.analysis import Results, load_results
from hpsearch.experiment import files
from hpsearch.experiment.layout import REPORT_NAME
from hpsearch.results.report_content import TrialLogs, trial_logs
from hpsearch.results.report_figures import Figure, report_figures
from hpsearch.results.report_html import render_html
from hpsearch.results.report_markdown import md, render_markdown

__all__ = [
    "write_report",
    "render_html",
    "render_markdown",
    "report_figures",
    "trial_logs",
    "TrialLogs",
    "REPORT_NAME",
    "FORMATS",
    "Figure",
    "md",
]

FORMATS = ("html", "md")


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
