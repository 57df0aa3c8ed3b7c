"""``hpsearch report``: a self-contained HTML page, or Markdown with PNGs beside it."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from fake_experiment import hostile_experiment, standard_trials, write_experiment  # noqa: E402

from hpsearch import analysis as an  # noqa: E402
from hpsearch.cli import main  # noqa: E402
from hpsearch.results.report import REPORT_NAME, report_figures, write_report  # noqa: E402

PLOTS = [
    "learning_curves",
    "optimization_history",
    "param_vs_metric",
    "parallel_coordinates",
    "param_importances",
    "scheduler_effect",
]


@pytest.fixture(scope="module")
def exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_experiment(tmp_path_factory.mktemp("report") / "fake", standard_trials())


@pytest.fixture(scope="module")
def page(exp: Path) -> str:
    return write_report(exp).read_text(encoding="utf-8")


def test_html_report_is_written_into_the_experiment_folder_by_default(exp: Path, page: str) -> None:
    assert (exp / f"{REPORT_NAME}.html").is_file()
    assert page.startswith("<!doctype html>")


def test_html_report_is_self_contained(page: str) -> None:
    assert not re.search(r"""(src|href)=['"]?(https?:|//|file:)""", page)
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == len(PLOTS)
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)


def test_html_report_content(page: str) -> None:
    assert "<h1>fake</h1>" in page
    assert "5 (2 finished, 2 stopped early, 1 errored)" in page  # counts
    assert "0.1 (trial aaaa0003, iteration 3)" in page  # the best
    assert "2 min 03 s" in page  # wall time (123.4 s)
    assert "<h2>Errors (1)</h2>" in page and "RuntimeError: CUDA out of memory" in page
    assert "error.txt" in page
    assert "<h2>Best trials</h2>" in page and "<tr class='best'><td>aaaa0003</td>" in page
    assert "hpsearch_spec.yaml" in page and "reduction_factor: 2.0" in page  # the spec
    assert "2 trial(s) at once (capacity 2)" in page  # the plan
    assert "Could not draw" not in page


def test_markdown_report_with_pngs_beside_it(exp: Path, tmp_path: Path) -> None:
    path = write_report(exp, tmp_path / "out" / "search.md", fmt="md")
    text = path.read_text()
    for name in PLOTS:
        assert f"(<search_{name}.png>)" in text
        assert (tmp_path / "out" / f"search_{name}.png").read_bytes().startswith(b"\x89PNG")
    # every string's punctuation escaped (CommonMark's backslash escapes), an error as code
    assert "| trial\\_id | status | iterations | best\\_iteration | val\\_loss |" in text
    assert "- `aaaa0004`: `RuntimeError: CUDA out of memory`" in text


def test_a_plot_that_fails_is_reported_not_fatal(exp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("no luck")

    monkeypatch.setattr(an, "parallel_coordinates", broken)
    figures = {f.key: f for f in report_figures(an.load_results(exp))}
    assert figures["parallel_coordinates"].png is None
    assert figures["parallel_coordinates"].error == "RuntimeError: no luck"
    assert figures["learning_curves"].png is not None


def test_cli_report_prints_the_path(exp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "r.html"
    assert main(["report", str(exp), "-o", str(target)]) == 0
    assert capsys.readouterr().out == f"{target}\n"
    assert target.read_text().startswith("<!doctype html>")
    assert (
        main(
            ["report", str(exp), "--format", "md", "--metric", "val_acc", "--mode", "max", "-o", str(tmp_path / "r.md")]
        )
        == 0
    )
    assert "val\\_acc" in (tmp_path / "r.md").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "{tmp}/missing"], "Error: experiment folder {tmp}/missing does not exist\n"),
        (
            ["report", "{tmp}"],
            "Error: {tmp} is not an experiment folder (no hpsearch_spec.yaml, no Tune trial folders)\n",
        ),
        (
            ["report", "{exp}", "--metric", "val_acx", "--mode", "max"],
            "Error: no trial reported metric 'val_acx'; did you mean 'val_acc'? (reported: epoch, train_loss, val_loss, val_acc)\n",
        ),
    ],
    ids=["missing", "not-an-experiment", "unknown-metric"],
)
def test_cli_report_user_errors_exit_2_with_one_line(
    exp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    filled = [a.format(tmp=tmp_path, exp=exp) for a in args]
    assert main(filled) == 2
    captured = capsys.readouterr()
    assert captured.err == message.format(tmp=tmp_path.resolve(), exp=exp)
    assert captured.out == ""


def test_report_of_a_search_that_has_not_ended_says_so(tmp_path: Path) -> None:
    trials = standard_trials()
    trials[4].status = "running"
    exp = write_experiment(tmp_path / "live", trials, summary=False)
    page = write_report(exp).read_text()
    assert "<strong>the search has not ended</strong>" in page
    assert "1 running" in page


def test_a_plot_with_nothing_to_draw_says_why_instead_of_failing(tmp_path: Path) -> None:
    from fake_experiment import FakeTrial

    trials = [FakeTrial("ffff0001", {"lr": 0.01}, ["diverged"]), FakeTrial("ffff0002", {"lr": 0.1}, [])]
    page = write_report(write_experiment(tmp_path / "strings", trials)).read_text(encoding="utf-8")
    assert "Could not draw" not in page
    assert len(re.findall(r"src='data:image/png;base64,", page)) == len(PLOTS)  # an empty plot is drawn too
    assert "<figcaption>No trial reported a number for val_loss.</figcaption>" in page


# ----------------------------------------------------------------------------- hostile names and values


def test_every_string_of_a_hostile_folder_is_escaped_in_html(tmp_path: Path) -> None:
    from html.parser import HTMLParser

    page = write_report(hostile_experiment(tmp_path / "hostile")).read_text(encoding="utf-8")
    allowed = {"html", "head", "meta", "title", "style", "body", "main", "h1", "h2", "h3", "p", "code", "div"}
    allowed |= {"strong", "span", "table", "tr", "th", "td", "details", "summary", "figure", "img", "figcaption"}
    allowed |= {"a", "br", "ul", "li", "pre"}
    found: list[tuple[str, list[tuple[str, str | None]]]] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, attrs))

    Tags().feed(page)
    assert {tag for tag, _ in found} <= allowed
    for tag, attrs in found:
        assert not [name for name, _ in attrs if name.startswith("on")], (tag, attrs)
        if tag == "img":
            assert dict(attrs)["src"].startswith("data:image/png;base64,")
        if tag == "a":
            assert not str(dict(attrs)["href"]).lower().startswith("javascript:")
    assert "<script" not in page and "<img src=x" not in page and "hpsearchPwned" in page  # shown, as text
    assert "&lt;img src=x onerror=window.hpsearchPwned=3&gt;" in page  # the first objective's name, escaped
    assert "<h2>Best trials by &lt;img src=x onerror=window.hpsearchPwned=3&gt; (the first objective)</h2>" in page


def _without_code(text: str) -> str:
    """Markdown text without its code spans (CommonMark shows a code span's content literally, HTML included)."""
    return re.sub(r"(`+).+?(?<!`)\1(?!`)", "", text)


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells, split at the pipes that are not escaped."""
    return re.split(r"(?<!\\)\|", line.strip().strip("|"))


def test_every_string_of_a_hostile_folder_is_escaped_in_markdown(tmp_path: Path) -> None:
    text = write_report(hostile_experiment(tmp_path / "hostile"), fmt="md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].startswith("# ") and "\\<\\/title\\>\\<script\\>" in lines[0]  # the name: one escaped line
    shown = _without_code(text.split("```")[0])  # before the spec, outside code spans: every < escaped
    assert not re.search(r"(?<!\\)<(script|img)", shown)
    tables = 0
    for i, line in enumerate(lines):
        if line.startswith("|---"):  # a table: every row has the header's cells
            tables += 1
            width = len(_cells(lines[i - 1]))
            for row in lines[i + 1 :]:
                if not row.startswith("|"):
                    break
                assert len(_cells(row)) == width, (lines[i - 1], row)
    assert tables >= 3  # the front, the best trials, every trial
    for line in text.split("```")[0].splitlines():  # no heading, list item or cell holds raw HTML or a link of its own
        if line.startswith(("#", "- ", "|")):
            assert not re.search(r"(?<!\\)<(img|script|/)", _without_code(line).replace("](<", "](")), line
            assert "](javascript" not in line
    fence = re.search(r"^(`{3,})yaml$", text, re.M)
    assert fence and len(fence.group(1)) > 3  # the spec's own ``` cannot close it
    markdown_it = pytest.importorskip("markdown_it")
    rendered = markdown_it.MarkdownIt("commonmark").enable("table").render(text)
    assert (
        "<script" not in rendered
        and '<img src="x"' not in rendered
        and "javascript:" not in rendered.replace("javascript:alert", "")
    )
    assert 'href="javascript' not in rendered
