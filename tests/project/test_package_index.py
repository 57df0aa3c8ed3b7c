"""Every package's ``__init__`` is its index, and the tree keeps a shape a newcomer can read.

Each package's docstring names every module and subpackage in it, one line each
(``- :mod:`~hpsearch.pkg.module`: what it is``), and names nothing that is gone; a new module
is listed the day it lands. No module passes 800 lines, and no function 80 lines of code (its
docstring, which documents it, not counted) unless its body is a table (one literal). The tests
mirror the package: tests/spec/ tests hpsearch/spec/. Pure text checks: milliseconds.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "hpsearch"
#: ``- :mod:`~hpsearch.x.y`: ...`` at the start of a docstring line.
INDEX_LINE = re.compile(r"^\s*- :mod:`~?(hpsearch(?:\.\w+)+)`", re.MULTILINE)
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80


def _name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def _packages() -> list[Path]:
    return sorted(p.parent for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts)


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("package", _packages(), ids=lambda p: _name(p / "__init__.py").removesuffix(".__init__"))
def test_a_packages_init_names_each_of_its_modules_and_nothing_else(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    named = set(INDEX_LINE.findall(doc))
    parent = _name(package / "__init__.py").removesuffix(".__init__")
    members = {f"{parent}.{p.stem}" for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")} | {
        f"{parent}.{p.name}" for p in package.iterdir() if (p / "__init__.py").is_file()
    }
    assert sorted(members - named) == [], f"{package / '__init__.py'}: add a '- :mod:' line for each"
    assert sorted(named - members) == [], f"{package / '__init__.py'}: names what is not in the package"


def _is_table(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function whose body, past its docstring, is one statement holding one literal (a table)."""
    body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
    if len(body) != 1:
        return False
    value = getattr(body[0], "value", None)
    return isinstance(value, ast.Dict | ast.List | ast.Tuple | ast.Set)


def _code_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines, from its ``def`` to its end, less its docstring's."""
    lines = (fn.end_lineno or fn.lineno) - fn.lineno + 1
    if ast.get_docstring(fn) is not None:
        doc = fn.body[0]
        lines -= (doc.end_lineno or doc.lineno) - doc.lineno + 1
    return lines


def test_no_module_is_over_800_lines_and_no_function_over_80_unless_a_table() -> None:
    long_modules, long_functions = [], []
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_MODULE_LINES:
            long_modules.append(f"{_name(path)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _is_table(node):
                lines = _code_lines(node)
                if lines > MAX_FUNCTION_LINES:
                    long_functions.append(f"{_name(path)}:{node.lineno} {node.name}: {lines} lines")
    assert long_modules == [], f"cut these at their seams (at most {MAX_MODULE_LINES} lines)"
    assert long_functions == [], f"split these into named steps (at most {MAX_FUNCTION_LINES} lines)"


def test_the_index_rule_catches_a_module_left_out_and_one_gone(tmp_path: Path) -> None:
    doc = "- :mod:`~hpsearch.pkg.kept`: here.\n- :mod:`hpsearch.pkg.gone`: removed.\n  - :mod:`~hpsearch.pkg.sub`: x\n"
    assert set(INDEX_LINE.findall(doc)) == {"hpsearch.pkg.kept", "hpsearch.pkg.gone", "hpsearch.pkg.sub"}
    table = ast.parse('def f():\n    """Doc."""\n    return {\n        "a": 1,\n    }\n').body[0]
    loop = ast.parse("def g():\n    x = 1\n    return x\n").body[0]
    assert isinstance(table, ast.FunctionDef) and isinstance(loop, ast.FunctionDef)
    assert _is_table(table) and not _is_table(loop)
    assert _code_lines(table) == 4 and _code_lines(loop) == 3


#: The test folders beside the package's own (tests/<package>/..., as hpsearch/<package>/...): what
#: crosses packages. Every other folder of test files must be a package of hpsearch.
TESTS = PACKAGE.parent / "tests"
CROSS_CUTTING = {
    "cli": "the hpsearch command (hpsearch/cli.py) as a user runs it",
    "train": "hpsearch.train and the loops other people write (Lightning, HF, FSDP, elastic)",
    "end_to_end": "whole searches across the layers: faults, hosts of their own, ray job submit",
    "project": "the tree's own rules: layers, indexes, imports, the README, the gate",
    "benchmarks": "the pure helpers of benchmarks/",
}


def test_the_tests_mirror_the_package() -> None:
    # a test of hpsearch/planning/estimate/ lives under tests/planning/, of hpsearch/runtime/search/ under
    # tests/runtime/search/; no test file at the top, where nothing says what it tests
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []
    for path in sorted(TESTS.rglob("test_*.py")):
        folder = path.parent.relative_to(TESTS)
        if folder.parts[0] == "data":
            continue
        if folder.parts[0] in CROSS_CUTTING:
            assert len(folder.parts) == 1, f"{path}: the cross-cutting folders are flat"
            continue
        assert (PACKAGE / folder / "__init__.py").is_file(), (
            f"{path}: tests/{folder.as_posix()} is not a package of hpsearch, nor one of {sorted(CROSS_CUTTING)}"
        )
