"""Every shape of experiment hpsearch can produce reads, ranks, reports and exports, and every view agrees.

One row per shape, built with the real writers (``fake_experiment``). For each: what
:func:`hpsearch.load_results` makes of it (statuses, best values, rank order), that the
summary file, ``Results.best``, ``best_trials``, the report's best-trials table and the
closing table of ``hpsearch run`` give each trial the same best value, that ``hpsearch
report`` writes HTML and Markdown with every plot drawn (a plot with nothing to draw says
why), and that ``hpsearch export`` writes an Optuna study.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from fake_experiment import FakeTrial, write_experiment  # noqa: E402

from hpsearch import analysis as an  # noqa: E402
from hpsearch.cli import main  # noqa: E402
from hpsearch.experiment import files  # noqa: E402
from hpsearch.experiment.layout import SPEC_FILE, SUMMARY_FILE  # noqa: E402
from hpsearch.formatting import cell  # noqa: E402
from hpsearch.results import report as report_module  # noqa: E402

NAN, INF = float("nan"), float("inf")
PLOTS = 6
#: The plots drawn from the search metric's values, and the one drawn from iterations.
VALUE_PLOTS = ("learning_curves", "optimization_history", "param_vs_metric", "parallel_coordinates")


def nothing(reason: str, *plots: str) -> dict[str, str]:
    """The same reason for ``plots`` (default: every plot of the metric's values)."""
    return {p: reason for p in plots or VALUE_PLOTS}


def cfg(lr: float, hidden: int = 64, layers: int = 2, dropout: float = 0.1) -> dict[str, Any]:
    return {"lr": lr, "hidden": hidden, "layers": layers, "dropout": dropout, "epochs": 4, "opt": {"momentum": 0.9}}


@dataclass
class Shape:
    """An experiment folder and what every view must make of it."""

    trials: list[FakeTrial]
    statuses: list[str]
    best: list[float | None]  # per trial, in creation order: None = no value; NaN and ±inf as they are
    order: list[str]  # the ranked trials, best first
    options: dict[str, Any] = field(default_factory=dict)  # for write_experiment
    reasons: dict[str, str] = field(default_factory=dict)  # plot -> why it has nothing to draw (else it draws)

    @property
    def interrupted(self) -> bool:
        """Whether the search ended before every trial did (as ``write_experiment`` decides by default)."""
        return self.options.get("interrupted", any(t.status in ("running", "pending") for t in self.trials))

    @property
    def ids(self) -> list[str]:
        return [t.trial_id for t in self.trials if t.status != "pending"] + [
            t.trial_id for t in self.trials if t.status == "pending"
        ]


SHAPES = [
    pytest.param(
        Shape(
            [
                FakeTrial("a0000001", cfg(0.01), [1.0, 0.5], checkpoint=False),
                FakeTrial("a0000002", cfg(0.001), [0.9], status="stopped", checkpoint=False),
                FakeTrial("a0000003", cfg(0.05), [0.7, 0.3], checkpoint=False),
            ],
            ["finished", "stopped", "finished"],
            [0.5, 0.9, 0.3],
            ["a0000003", "a0000001", "a0000002"],
        ),
        id="no-checkpoint",
    ),
    pytest.param(
        Shape(
            [
                FakeTrial("a0000001", cfg(0.01), [0.5], status="errored"),
                FakeTrial("a0000002", cfg(0.001), [], status="errored", error="ValueError: bad config"),
                FakeTrial("a0000003", cfg(0.05), [0.9, 0.4], status="errored"),
            ],
            ["errored", "errored", "errored"],
            [0.5, None, 0.4],
            [],
            reasons=nothing(
                "every trial with a finite value of val_loss errored", "param_vs_metric", "parallel_coordinates"
            ),
        ),
        id="all-errored",
    ),
    pytest.param(
        Shape(
            [
                FakeTrial("a0000001", cfg(0.01), [0.8], status="stopped"),
                FakeTrial("a0000002", cfg(0.001, 32), [0.9, 0.6], status="stopped"),
                FakeTrial("a0000003", cfg(0.05, 128), [1.2], status="stopped"),
            ],
            ["stopped", "stopped", "stopped"],
            [0.8, 0.6, 1.2],
            ["a0000002", "a0000001", "a0000003"],
        ),
        id="only-stopped",
    ),
    pytest.param(
        Shape(
            [],
            [],
            [],
            [],
            {"interrupted": True},
            {**nothing("no trial has started yet", *VALUE_PLOTS, "scheduler_effect")},
        ),
        id="interrupted-before-any-trial",
    ),
    pytest.param(
        Shape(
            [
                FakeTrial("a0000001", cfg(0.01), [], status="running"),
                FakeTrial("a0000002", cfg(0.001), [], status="running"),
                FakeTrial("a0000003", cfg(0.05), [], status="pending"),
            ],
            ["running", "running", "pending"],
            [None, None, None],
            [],
            {"state": True},
            nothing("no trial has reported yet", *VALUE_PLOTS, "scheduler_effect"),
        ),
        id="interrupted-before-any-report",
    ),
    pytest.param(
        Shape(
            [
                FakeTrial("a0000001", cfg(0.01), [None, 0.6, None, 0.4], extra={"val_acc": [0.1, 0.2, 0.3, 0.4]}),
                FakeTrial("a0000002", cfg(0.001), [None, None], extra={"val_acc": [0.5, 0.6]}),
                FakeTrial("a0000003", cfg(0.05), [0.5], status="stopped", extra={"val_acc": [0.7]}),
            ],
            ["finished", "finished", "stopped"],
            [0.4, None, 0.5],
            ["a0000001", "a0000003"],
        ),
        id="metric-missing-from-some-reports",
    ),
    pytest.param(
        Shape(
            [
                FakeTrial("a0000001", cfg(0.01), [None, None], extra={"val_acc": [0.5, 0.6]}),
                FakeTrial("a0000002", cfg(0.001), [None], status="stopped", extra={"val_acc": [0.2]}),
            ],
            ["finished", "stopped"],
            [None, None],
            [],
            reasons=nothing("no trial reported val_loss yet"),
        ),
        id="metric-never-reported",
    ),
    pytest.param(
        Shape(
            [
                FakeTrial("a0000001", cfg(0.01), [1.0]),
                FakeTrial("a0000002", cfg(0.001), [NAN]),
                FakeTrial("a0000003", cfg(0.05), [0.167]),
                FakeTrial("a0000004", cfg(0.02), [INF]),
                FakeTrial("a0000005", cfg(0.03), [-INF]),
                FakeTrial("a0000006", cfg(0.003), [NAN, 0.5, INF]),
            ],
            ["finished"] * 6,
            [1.0, NAN, 0.167, INF, -INF, 0.5],
            ["a0000003", "a0000006", "a0000001", "a0000002", "a0000004", "a0000005"],
        ),
        id="nan-and-inf",
    ),
    pytest.param(
        Shape(
            [
                FakeTrial("a0000001", cfg(0.01), [NAN, NAN]),
                FakeTrial("a0000002", cfg(0.001), [INF], status="stopped"),
                FakeTrial("a0000003", cfg(0.05), [NAN], status="errored"),
            ],
            ["finished", "stopped", "errored"],
            [NAN, INF, NAN],
            ["a0000001", "a0000002"],
            reasons=nothing("every value of val_loss reported is NaN or infinite"),
        ),
        id="all-nan-or-inf",
    ),
    pytest.param(
        Shape(
            [
                FakeTrial("a0000001", cfg(0.01), ["n/a", 0.4, 0.3], extra={"phase": ["warmup", "train", "train"]}),
                FakeTrial("a0000002", cfg(0.001), ["diverged", "diverged"], extra={"phase": ["warmup", "train"]}),
                FakeTrial("a0000003", cfg(0.05), [0.5], status="stopped", extra={"phase": ["warmup"]}),
            ],
            ["finished", "finished", "stopped"],
            [0.3, None, 0.5],
            ["a0000001", "a0000003"],
        ),
        id="non-numeric-metric",
    ),
    pytest.param(
        Shape(
            [
                FakeTrial("a0000001", cfg(0.01), [0.6, 0.3, 0.35, 0.32]),
                # epochs 1-2 ran before `hpsearch resume`: only train/<id>/hpsearch_history.jsonl holds them
                FakeTrial("a0000002", cfg(0.001), [0.9, 0.2, 0.5, 0.4], restarted=2),
            ],
            ["finished", "finished"],
            [0.3, 0.2],
            ["a0000002", "a0000001"],
        ),
        id="restarted-after-a-resume",
    ),
    pytest.param(
        Shape(
            [
                # stopped at epoch 2; epoch 3 reached the history while the nested run was torn down
                FakeTrial("a0000001", cfg(0.01), [0.9, 0.6, 0.3], status="stopped", after_stop=1),
                FakeTrial("a0000002", cfg(0.001), [0.8, 0.5, 0.4, 0.35]),
            ],
            ["stopped", "finished"],
            [0.3, 0.35],
            ["a0000001", "a0000002"],
        ),
        id="report-after-the-stop",
    ),
]


# ----------------------------------------------------------------------------- helpers


def same(actual: Any, expected: float | None) -> bool:
    """Equal best values: ``None`` (no value) as ``None``, NaN as NaN, ±inf as itself."""
    if expected is None:
        return actual is None
    if actual is None:
        return False
    if math.isnan(expected):
        return math.isnan(actual)
    return float(actual) == expected


def same_in_table(actual: Any, expected: float | None) -> bool:
    """A pandas float column has no ``None``: a trial without a value reads NaN there."""
    if expected is None:
        return actual is None or math.isnan(actual)
    return same(actual, expected)


def html_table(page: str, heading: str) -> list[list[str]]:
    """The rows of the first table after ``<h2>heading</h2>``, as text cells (header first)."""
    section = page.split(f"<h2>{heading}</h2>", 1)[1].split("<h2>", 1)[0]
    rows = []
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", section, flags=re.S):
        cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, flags=re.S)
        rows.append([html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells])
    return rows


def md_table(text: str, heading: str) -> list[list[str]]:
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")]
    # each cell as it reads: the Markdown report escapes every punctuation character of a string
    return [[re.sub(r"\\(.)", r"\1", c.strip()) for c in line.strip("|").split(" | ")] for line in lines]


def text_table(table: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in table.splitlines()]


def column(rows: list[list[str]], name: str) -> dict[str, str]:
    """trial id -> the cell of column ``name``, from table rows whose header names ``trial_id``."""
    if not rows:
        return {}
    header = rows[0]
    at, key = header.index(name), header.index("trial_id")
    return {r[key]: r[at] for r in rows[1:]}


def ids_in(rows: list[list[str]]) -> list[str]:
    return [r[rows[0].index("trial_id")] for r in rows[1:]] if rows else []


def one_error_block(err: str) -> bool:
    return err.startswith("Error: ") and err.count("Error:") == 1 and "Traceback" not in err


# ----------------------------------------------------------------------------- the shapes


@dataclass
class Built:
    """A shape's folder, read back, with the report's figures (drawn once: drawing is what takes time)."""

    shape: Shape
    exp: Path
    results: an.Results
    figures: list[Any]


@pytest.fixture(scope="module", params=SHAPES)
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    shape: Shape = request.param
    exp = write_experiment(tmp_path_factory.mktemp("shape") / "shape", shape.trials, **shape.options)
    results = an.load_results(exp)
    return Built(shape, exp, results, report_module.report_figures(results))


@pytest.fixture
def shape(built: Built) -> Shape:
    return built.shape


@pytest.fixture
def exp(built: Built) -> Path:
    return built.exp


def test_load_results_statuses_best_values_and_rank_order(shape: Shape, built: Built) -> None:
    results = built.results
    trials = results.trials
    assert list(trials["trial_id"]) == shape.ids
    assert list(trials["status"]) == shape.statuses
    assert all(same_in_table(a, e) for a, e in zip(trials["best"], shape.best, strict=True)), (
        list(trials["best"]),
        shape.best,
    )
    assert list(results.ranked()["trial_id"]) == shape.order
    assert list(trials.set_index("trial_id").loc[shape.order, "rank"]) == list(range(1, len(shape.order) + 1))
    unranked = [t for t in shape.ids if t not in shape.order]
    assert trials.set_index("trial_id").loc[unranked, "rank"].isna().all()
    finite = [t for t in shape.order if math.isfinite(shape.best[shape.ids.index(t)])]
    assert (None if results.best is None else results.best["trial_id"]) == (finite[0] if finite else None)
    assert list(results.ranked(finite=True)["trial_id"]) == finite
    # no checkpoint reported (this once raised KeyError: '_v'): no best checkpoint
    without = [t.trial_id for t in shape.trials if not t.checkpoint]
    assert trials.set_index("trial_id").loc[without, "best_checkpoint"].isna().all()
    # every report in the history counts: those before a restart and those after a stop
    for trial in shape.trials:
        if trial.restarted or trial.after_stop:
            assert trials.set_index("trial_id").loc[trial.trial_id, "iterations"] == len(trial.values)


def test_every_view_gives_each_trial_the_same_best_value(shape: Shape, exp: Path, built: Built) -> None:
    results = built.results
    expected = dict(zip(shape.ids, shape.best, strict=True))
    # the summary a search ends with, as written and as read back
    summary = an.summarize_experiment(exp, wall_time_s=1.0, interrupted=shape.interrupted)
    written = {t["trial_id"]: t for t in json.loads((exp / SUMMARY_FILE).read_text())["trials"]}
    assert list(written) == shape.ids
    for trial_id, value in expected.items():
        assert same(written[trial_id]["best"], value), (trial_id, written[trial_id]["best"], value)
    assert [t.trial_id for t in summary.ranked()] == shape.order
    best_id = None if results.best is None else results.best["trial_id"]
    assert (None if summary.best is None else summary.best.trial_id) == best_id
    assert json.loads((exp / SUMMARY_FILE).read_text())["best_trial_id"] == best_id
    # Results.trials and best_trials
    by_id = results.trials.set_index("trial_id")
    for trial_id, value in expected.items():
        assert same_in_table(by_id.loc[trial_id, "best"], value), trial_id
    table = an.best_trials(results, n=None)
    assert list(table["trial_id"]) == shape.order
    assert all(same(v, expected[t]) for t, v in zip(table["trial_id"], table["val_loss"], strict=True))
    # the closing table of `hpsearch run`: the ranked trials, best first, each with its best value
    closing = an.best_trials_table(summary, n=len(shape.ids) or 1)
    if shape.order:
        rows = text_table(closing)
        assert ids_in(rows) == shape.order
        assert column(rows, "val_loss (best)") == {t: cell(expected[t]) for t in shape.order}
    else:
        # nothing ranks: either no trial reported the metric, or only errored ones did (and the line says so)
        assert closing == "(no trial reported the metric)" or (
            closing.startswith("(no trial ranks: ") and closing.endswith("errored)")
        )
    # the report's best-trials table, in HTML and Markdown
    figures = built.figures
    page = report_module.render_html(results, figures)
    markdown = report_module.render_markdown(results, figures, {f.key: f"{f.key}.png" for f in figures})
    for rows in (html_table(page, "Best trials"), md_table(markdown, "Best trials")):
        assert ids_in(rows) == shape.order
        assert column(rows, "val_loss") == {t: cell(expected[t]) for t in shape.order}


def test_report_and_export_from_the_command_line(
    shape: Shape,
    exp: Path,
    built: Built,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    figures = built.figures
    # every plot is drawn; one with nothing to draw says why, in the plot and in its caption
    assert [f.png is not None for f in figures] == [True] * PLOTS, [f.error for f in figures]
    assert all(f.caption for f in figures)
    # the figures are drawn once: the command lines below render them into HTML and Markdown
    monkeypatch.setattr(report_module, "report_figures", lambda _results: figures)
    html_path, md_path = tmp_path / "report.html", tmp_path / "report.md"
    assert main(["report", str(exp), "-o", str(html_path)]) == 0
    assert main(["report", str(exp), "--format", "md", "-o", str(md_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"{html_path}\n{md_path}\n" and captured.err == ""
    page = html_path.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "<h1>shape</h1>" in page
    assert len(re.findall(r"<img ", page)) == PLOTS
    assert "Could not draw" not in page
    markdown = md_path.read_text(encoding="utf-8")
    assert markdown.startswith("# shape\n") and "Could not draw" not in markdown
    assert all((tmp_path / f"report_{f.key}.png").is_file() for f in figures)

    url = f"sqlite:///{tmp_path / 'study.db'}"
    code = main(["export", str(exp), "--optuna", url])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.startswith(f"Exported {len(shape.ids)} trials") and captured.err == ""


def test_the_optuna_study_holds_the_one_rankings_values(shape: Shape, built: Built) -> None:
    import optuna

    results = built.results
    study = an._optuna.in_memory_study(results, stopped_as_complete=True)
    expected = dict(zip(shape.ids, shape.best, strict=True))
    assert [t.user_attrs["trial_id"] for t in study.trials] == shape.ids
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    for trial in complete:  # a complete trial's value is its best, always finite (Optuna takes no NaN)
        assert trial.value == expected[trial.user_attrs["trial_id"]] and math.isfinite(trial.value)
    for trial in study.trials:
        value = expected[trial.user_attrs["trial_id"]]
        if trial.user_attrs["status"] in ("finished", "stopped") and value is not None and not math.isfinite(value):
            assert trial.state == optuna.trial.TrialState.FAIL
            assert "not a finite number" in trial.user_attrs["fail_reason"]
    best = results.best
    if complete:
        assert study.best_trial.user_attrs["trial_id"] == best["trial_id"]
    else:
        assert best is None


def test_a_plot_with_nothing_to_draw_says_why(shape: Shape, built: Built) -> None:
    import matplotlib.pyplot as plt

    from hpsearch.results import plots

    results = built.results
    for name in (*VALUE_PLOTS, "scheduler_effect"):
        data = getattr(an, name)(results)
        expected = shape.reasons.get(name)
        # param_vs_metric says it has no panel, and why no trial has a value to draw
        reason = data.detail if name == "param_vs_metric" and data.reason else data.reason
        assert reason == expected, name
        if expected is None:
            continue
        figure = plt.figure()
        try:
            drawn = getattr(plots, name)(data, ax=figure.subplots())
            axes = drawn[0] if name == "param_vs_metric" else drawn
            assert [t.get_text() for t in axes.texts] == [data.reason], name
            assert not axes.lines and not axes.collections and not axes.patches, name
        finally:
            plt.close(figure)
        caption = next(f.caption for f in built.figures if f.key == name)
        assert expected[1:] in caption and caption.endswith("."), (name, caption)  # as a sentence
    importances = an.param_importances(results)
    assert bool(importances.importances) != bool(importances.reason)


# ----------------------------------------------------------------------------- not an experiment


@pytest.mark.parametrize("what", ["empty-folder", "missing-folder", "a-file", "spec-only"])
@pytest.mark.parametrize("command", ["report", "export"])
def test_a_folder_that_is_not_an_experiment_exits_2_with_one_error(
    what: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "target"
    if what == "empty-folder":
        target.mkdir()
    elif what == "a-file":
        target.write_text("not an experiment\n")
    elif what == "spec-only":  # a folder whose spec cannot be read
        target.mkdir()
        (target / SPEC_FILE).write_text(": not yaml [\n")
    argv = [command, str(target)] + (["--optuna", f"sqlite:///{tmp_path / 'x.db'}"] if command == "export" else [])
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert one_error_block(captured.err), captured.err
    assert captured.err.count("\n") == 1 and captured.out == ""
    assert files.read_summary(tmp_path) is None  # nothing was written
