"""The layer rule, for every import: arrows point down, no cycles, and a lazy import says why.

docs/architecture.md ("The layers and the dependency rule") draws hpsearch's layers; this test
reads every module of the package with :mod:`ast` and checks each import against them: at
module level and inside functions (``import x``, ``from x import y``, relative imports),
``TYPE_CHECKING`` blocks included (mypy follows them, and an upward one hides a real
coupling). It fails naming the importing module, the line, the imported module and the rule.

Why a test and not import-linter: import-linter builds its graph with grimp, which does see
imports inside functions, but it reports a broken contract as a chain of modules, and it cannot
check the third rule here, that an import left inside a function says on its line (or the line
above) why it must stay lazy. One AST walk checks all three, adds no dependency to CI, and
the layers stay written once, here, next to the rule they enforce.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
from pure_core import LIGHT_PACKAGES, NEVER_ANYWHERE, PURE_MODULES, PURE_PACKAGES

PACKAGE = Path(__file__).resolve().parents[2] / "hpsearch"

#: The layers, top first; a module may import its own layer's modules (without cycles) and any layer
#: below. Within a layer, modules of different columns (the tuple's items) never import each other.
#: Each entry is a module or a package prefix; the longest matching prefix decides a module's place.
LAYERS: list[tuple[str, tuple[tuple[str, ...], ...]]] = [
    ("the entry points", (("hpsearch", "hpsearch.cli", "hpsearch.__main__"),)),
    (
        "the Ray edges and the results side",
        (("hpsearch.runtime",), ("hpsearch.results",), ("hpsearch.train", "hpsearch.examples")),
    ),
    ("analysis", (("hpsearch.analysis",),)),
    ("experiment", (("hpsearch.experiment",),)),
    ("planning", (("hpsearch.planning",),)),
    ("spec", (("hpsearch.spec",),)),
    # the folder's names (and whether a folder is laid out as an experiment) are plain constants
    # that spec/ checks `warm_start.from` with; they import nothing of hpsearch
    (
        "the leaves",
        (
            (
                "hpsearch._renamed",
                "hpsearch._version",
                "hpsearch.errors",
                "hpsearch.formatting",
                "hpsearch.messages",
                "hpsearch.experiment.layout",
            ),
        ),
    ),
]

#: The words a lazy import's comment starts with (``# lazy: optuna is optional and slow to import``).
LAZY_MARK = "# lazy:"


@dataclass(frozen=True)
class Import:
    importer: str
    line: int
    imported: str
    in_function: bool
    comment: str  # the import line's comment, or the one on the line above


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _comment(lines: list[str], line: int) -> str:
    """The ``#`` comment on the import's first line, or the line above when that is a comment line."""
    here = lines[line - 1]
    if "#" in here:
        return here[here.index("#") :]
    above = lines[line - 2].strip() if line >= 2 else ""
    return above if above.startswith("#") else ""


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import of an hpsearch module in ``path``, at any depth, resolved to the module it loads."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def target(module: str, attribute: str | None) -> str | None:
        # `from hpsearch import analysis` imports the module hpsearch.analysis, not hpsearch's __init__
        if attribute is not None and f"{module}.{attribute}" in modules:
            return f"{module}.{attribute}"
        while module and module not in modules:
            module = module.rpartition(".")[0]
        return module or None

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == "hpsearch" and (t := target(alias.name, None)):
                        found.append(Import(name, child.lineno, t, in_function, _comment(lines, child.lineno)))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - child.level + 1]
                    module = ".".join(base + ([child.module] if child.module else []))
                else:
                    module = child.module or ""
                if module.split(".")[0] == "hpsearch":
                    for t in dict.fromkeys(target(module, alias.name) for alias in child.names):
                        if t:
                            found.append(Import(name, child.lineno, t, in_function, _comment(lines, child.lineno)))
            visit(child, nested)

    visit(ast.parse(source, filename=str(path)), False)
    return found


def lazy_imports(path: Path) -> list[tuple[int, str, str]]:
    """Every import inside a function (of any module, hpsearch's or not): line, module, its comment."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    out: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                what = (
                    child.names[0].name if isinstance(child, ast.Import) else "." * child.level + (child.module or "")
                )
                out.append((child.lineno, what, _comment(lines, child.lineno)))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(source, filename=str(path)), False)
    return out


def place(module: str) -> tuple[int, int, str]:
    """The module's layer (0 is the top), its column within the layer, and the layer's name."""
    best: tuple[int, int, int, str] | None = None  # prefix length, layer, column, name
    for rank, (layer, columns) in enumerate(LAYERS):
        for col, prefixes in enumerate(columns):
            for prefix in prefixes:
                if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                    best = (len(prefix), rank, col, layer)
    assert best is not None, f"{module} is in no layer: add it to LAYERS (and to docs/architecture.md)"
    return best[1], best[2], best[3]


MODULES = all_modules()
IMPORTS = [imp for name, path in MODULES.items() for imp in imports_of(name, path, MODULES)]


def _where(imp: Import) -> str:
    kind = "inside a function" if imp.in_function else "at module level"
    return f"{imp.importer} line {imp.line} imports {imp.imported} ({kind})"


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        place(module)


def test_every_import_points_down_or_within_its_column() -> None:
    wrong = []
    for imp in IMPORTS:
        if imp.imported == imp.importer or (imp.imported != "hpsearch" and imp.importer.startswith(imp.imported + ".")):
            continue  # a module and the subpackage it lives in (whose __init__ runs first anyway)
        (rank, col, layer), (to_rank, to_col, to_layer) = place(imp.importer), place(imp.imported)
        if to_rank < rank:
            wrong.append(f"{_where(imp)}: {layer!r} may not import the layer above it, {to_layer!r}")
        elif to_rank == rank and to_col != col:
            wrong.append(f"{_where(imp)}: within {layer!r}, the columns never import each other")
    assert not wrong, "an arrow points up:\n" + "\n".join(wrong)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return out


def test_no_cycles_among_hpsearch_modules_counting_imports_inside_functions() -> None:
    edges: dict[str, set[str]] = {}
    for imp in IMPORTS:
        # a package's __init__ importing its own modules (re-exports) is not a cycle with them
        if imp.importer.startswith(imp.imported + ".") or imp.imported.startswith(imp.importer + "."):
            continue
        edges.setdefault(imp.importer, set()).add(imp.imported)
    found = []
    for component in _cycles(edges):
        arrows = [_where(i) for i in IMPORTS if i.importer in component and i.imported in component]
        found.append(" <-> ".join(component) + ":\n  " + "\n  ".join(arrows))
    assert not found, "import cycles:\n" + "\n".join(found)


def _silent_lazy_imports(module: str) -> list[str]:
    return [
        f"{module} line {line} imports {what} inside a function with no '{LAZY_MARK} <why>' comment on its line or "
        "the line above: import it at the top of the module, or say why it must stay lazy"
        for line, what, comment in lazy_imports(MODULES[module])
        if LAZY_MARK not in comment
    ]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_an_import_inside_a_function_says_why_it_is_lazy(module: str) -> None:
    silent = _silent_lazy_imports(module)
    assert not silent, "\n".join(silent)


def heavy_imports(path: Path, heavy: tuple[str, ...]) -> list[tuple[int, str]]:
    """Every absolute import of a ``heavy`` package in ``path``, at any depth: line and module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        found += [(node.lineno, name) for name in names if name.split(".")[0] in heavy]
    return sorted(found)


@pytest.mark.parametrize("package", sorted(NEVER_ANYWHERE))
def test_a_pure_package_never_imports_ray_even_inside_a_function(package: str) -> None:
    """No ``import ray`` in the pure core at any depth (nor torch in the spec and the leaves): tests/pure_core.py."""
    heavy = NEVER_ANYWHERE[package]
    found = [
        f"{module} line {line} imports {what}"
        for module, path in MODULES.items()
        if module == package or module.startswith(package + ".")
        for line, what in heavy_imports(path, heavy)
    ]
    assert not found, f"{package} must not import {' or '.join(heavy)}:\n" + "\n".join(found)


def test_the_layers_below_the_results_side_are_the_pure_core() -> None:
    """LAYERS and tests/pure_core.py (which tests/project/test_import.py checks) name the same pure core."""
    first = [name for name, _ in LAYERS].index("analysis")
    below = {prefix for _, columns in LAYERS[first:] for column in columns for prefix in column}
    assert below == {*PURE_PACKAGES, *PURE_MODULES, "hpsearch.experiment.layout"}
    above = {prefix for _, columns in LAYERS[:first] for column in columns for prefix in column}
    assert set(LIGHT_PACKAGES) <= above  # light at import, but not pure
    assert set(NEVER_ANYWHERE) == {*PURE_PACKAGES, *PURE_MODULES}


# ----------------------------------------------------------------------------- the checker itself


def test_the_checker_sees_imports_at_every_depth_and_resolves_relative_ones(tmp_path: Path) -> None:
    """A function-level, a relative and a ``from package import module`` import are each found."""
    source = tmp_path / "mod.py"
    source.write_text(
        "from hpsearch import analysis\n"
        "def f():\n"
        "    if True:\n"
        "        from ..runtime.search import tuner  # lazy: a reason\n"
        "    import hpsearch.spec.space\n"
    )
    modules = {**MODULES, "hpsearch.spec.mod": source}
    found = [(i.line, i.imported, i.in_function) for i in imports_of("hpsearch.spec.mod", source, modules)]
    assert found == [
        (1, "hpsearch.analysis", False),
        (4, "hpsearch.runtime.search.tuner", True),
        (5, "hpsearch.spec.space", True),
    ]
    assert [(line, comment) for line, _, comment in lazy_imports(source)] == [(4, "# lazy: a reason"), (5, "")]
    assert place("hpsearch.spec.mod")[0] > place("hpsearch.runtime.search.tuner")[0]  # so line 4 points up


def test_the_heavy_import_finder_sees_lazy_and_dotted_imports(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("import json\ndef f():\n    from ray import tune\n    import torch.nn\nfrom .ray import x\n")
    assert heavy_imports(source, ("ray", "torch")) == [(3, "ray"), (4, "torch.nn")]


def test_the_cycle_finder_names_every_module_of_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
