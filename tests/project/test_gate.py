"""The landing gate's promises, checked without Ray: tests/README.md's tables hold, and the ceiling bites.

The gate (``bash .ci/run``) runs every unit test and the Ray tests not marked ``full``. Its
tables say which gate test runs each part of hpsearch end to end, and, for each test left to
the full suite, which gate test still runs its module. These tests read the tables and the
test files' syntax trees, so a module added to ``runtime/``, a test marked ``full`` or a renamed
test fails here, in milliseconds, until the tables say the truth again.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

import pytest
import trial_starts

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
README = TESTS / "README.md"
RUNTIME = REPO / "hpsearch" / "runtime"
REF = re.compile(r"`(tests/(?:\w+/)*test_\w+\.py)::(\w+)`")


def _table(heading: str) -> list[list[str]]:
    """The rows (cells as written) of the first Markdown table after ``heading`` in tests/README.md."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if line.startswith("|") and not set(line) <= set("|-: "):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[1:]  # without the header


def _marks(node: ast.AST) -> set[str]:
    """The ``pytest.mark.<name>`` names in a decorator list or a ``pytestmark`` value."""
    return {
        sub.attr
        for sub in ast.walk(node)
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute) and sub.value.attr == "mark"
    }


@cache
def _tests(path: str) -> dict[str, set[str]]:
    """Each test function of a test file, with the marks it carries (its own and the module's)."""
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    module: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in stmt.targets):
            module |= _marks(stmt.value)
    out = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name.startswith("test_"):
            out[stmt.name] = module | set().union(*(_marks(d) for d in stmt.decorator_list))
    return out


def _refs(cell: str) -> list[tuple[str, str]]:
    found = REF.findall(cell)
    assert found, f"no `tests/<folder>/test_x.py::test_name` in {cell!r}"
    return found


PARTS = _table("## What the gate runs end to end")
LEFT = _table("## Tests only in the full suite")


def test_every_runtime_module_has_a_row_in_the_parts_table() -> None:
    # every module, by its path under runtime/; the door (internals/) is one part, a package of accessors
    modules = {
        "`runtime/internals/`" if p.parent.name == "internals" else f"`runtime/{p.relative_to(RUNTIME).as_posix()}`"
        for p in RUNTIME.rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }
    named = {row[0] for row in PARTS}
    assert modules - named == set(), "runtime modules with no gate test in tests/README.md"


@pytest.mark.parametrize("row", PARTS, ids=[row[0].strip("`") for row in PARTS])
def test_each_part_names_gate_tests_that_exist(row: list[str]) -> None:
    for path, name in _refs(row[1]):
        marks = _tests(path).get(name)
        assert marks is not None, f"{path}::{name} does not exist"
        assert "full" not in marks, f"{path}::{name} is marked full: it is not in the gate"


def test_every_test_marked_full_is_in_the_table_with_a_gate_test_that_covers_its_module() -> None:
    listed = {ref for row in LEFT for ref in _refs(row[0])}
    marked = {
        (path, name)
        for path in (p.relative_to(REPO).as_posix() for p in TESTS.rglob("test_*.py"))
        for name, marks in _tests(path).items()
        if "full" in marks
    }
    assert marked - listed == set(), "tests marked full but not in tests/README.md's table"
    assert listed - marked == set(), "tests in the table that are not marked full"
    for row in LEFT:
        for path, name in _refs(row[1]):
            assert "full" not in _tests(path).get(name, {"full"}), f"{row[0]}: {path}::{name} is not a gate test"


def test_the_ceiling_is_a_positive_count() -> None:
    assert trial_starts.ceiling() > 0


def _summary(tmp_path: Path, starts: list[int], *args: str) -> int:
    """.ci/summary.py's exit status over records of two stages and these counts of trial starts."""
    spec = importlib.util.spec_from_file_location("ci_summary", REPO / ".ci" / "summary.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "stages.tsv").write_text("install\t120\t0\nray\t600\t0\n")
    (tmp_path / "trial_starts.txt").write_text("".join(f"{n}\n" for n in starts))
    return int(module.main([str(tmp_path), *args]))


def test_the_gate_fails_with_one_line_past_the_ceiling_and_the_full_suite_has_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ceiling = trial_starts.ceiling()
    assert _summary(tmp_path, [ceiling - 1, 1], "--gate") == 0  # at the ceiling: passes
    assert f"Nested trial starts: {ceiling} of the gate's ceiling of {ceiling}" in capsys.readouterr().out
    assert _summary(tmp_path, [ceiling, 1], "--gate") == 1
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if line.startswith("CI: ")]
    assert f"the gate started {ceiling + 1} nested trials, past its ceiling of {ceiling}" in line
    assert "   720 s  in all" in out and "   600 s  ray" in out
    assert _summary(tmp_path, [ceiling * 2]) == 0  # the full suite: counted, not held
    assert f"Nested trial starts: {ceiling * 2} (the full suite: no ceiling)" in capsys.readouterr().out


def test_the_summary_runs_with_a_python_that_has_no_hpsearch(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "stages.tsv").write_text("install\t120\t0\n")
    (tmp_path / "trial_starts.txt").write_text("1\n")
    # -S: no site-packages, as .ci/run's closing step runs after the environment is deactivated (or never made)
    done = subprocess.run(
        [sys.executable, "-S", str(REPO / ".ci" / "summary.py"), str(tmp_path), "--gate"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Nested trial starts: 1 of the gate's ceiling" in done.stdout


def test_the_starts_are_counted_from_each_trials_worker_group_record(tmp_path: Path) -> None:
    from hpsearch.experiment import files

    for trial, starts in (("a_00000", 1), ("a_00001", 3)):
        for _ in range(starts):  # the first start and two restarts
            files.write_worker_group(tmp_path / "exp" / "train" / trial, group_id="g", run_name=trial, workers=2)
    files.write_worker_group(tmp_path / "exp" / "train" / "a_00002", group_id="g", run_name="a_00002")  # no start
    assert trial_starts.count(tmp_path) == 4
