"""One door to other libraries' internals: only the package ``hpsearch/runtime/internals/`` touches them.

Walks every module of the package (its syntax tree, not its imports at run time) and fails,
naming the file and line, when a module other than the door:

- imports a private module of Ray or of the other libraries whose internals hpsearch uses
  (``ray._private``, ``ray._common``, any ``ray.*._internal``, ``ray.experimental.internal_kv``,
  and any module or name starting with ``_`` of Ray, Optuna, HyperOpt, MLflow or TensorBoardX);
- reads or writes an underscore attribute of an object that is not hpsearch's own;
- subclasses one of those libraries' classes and overrides, reads or writes one of its private
  names (checked on the classes themselves, against the installed library's source).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import textwrap
from pathlib import Path

import pytest

import hpsearch

PACKAGE = Path(hpsearch.__file__).resolve().parent
DOOR = PACKAGE / "runtime" / "internals"
#: The libraries whose internals go through the door.
WATCHED = ("ray", "optuna", "hyperopt", "mlflow", "tensorboardX")
DOOR_MODULE = "hpsearch.runtime.internals"
_PRIVATE_MODULE = re.compile(r"(^|\.)_[a-z]|^ray\.experimental\.internal_kv")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if DOOR not in p.parents)


def _watched(module: str) -> bool:
    return module.split(".")[0] in WATCHED


def _import_problems(path: Path, tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in names:
            if not _watched(module):
                continue
            if _PRIVATE_MODULE.search(module):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: imports {module}")
            elif name is not None and name.startswith("_"):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: imports {module}.{name}")
    return found


def _own_names(tree: ast.AST) -> set[str]:
    """Names bound in the module to hpsearch's own things: its modules, classes, functions and globals."""
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (node.module.startswith("hpsearch") or node.level):
            own.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            own.update(alias.asname or alias.name for alias in node.names if alias.name.startswith("hpsearch"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
    if isinstance(tree, ast.Module):
        for node in tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            own.update(t.id for t in targets if isinstance(t, ast.Name))
    return own


def _attribute_problems(path: Path, tree: ast.AST) -> list[str]:
    """``x._name`` where ``x`` is neither ``self``/``cls`` (checked on the classes) nor a name of hpsearch's own."""
    own = _own_names(tree) | {"self", "cls"}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        attr = node.attr
        if not attr.startswith("_") or (attr.startswith("__") and attr.endswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in own:
            continue
        found.append(
            f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: reads or writes .{attr} of {ast.unparse(node.value)}"
        )
    return found


def test_only_the_door_imports_private_modules_of_ray_and_the_other_libraries() -> None:
    found = [p for path in _modules() for p in _import_problems(path, ast.parse(path.read_text(encoding="utf-8")))]
    assert found == [], "private imports outside hpsearch/runtime/internals/:\n" + "\n".join(found)


def test_only_the_door_reads_or_writes_underscore_attributes_of_other_objects() -> None:
    found = [p for path in _modules() for p in _attribute_problems(path, ast.parse(path.read_text(encoding="utf-8")))]
    assert found == [], "underscore attributes of other objects outside hpsearch/runtime/internals/:\n" + "\n".join(
        found
    )


def _private_names_of(cls: type) -> set[str]:
    """The single-underscore names a library class defines or sets on its instances (from its source)."""
    names = {n for n in vars(cls) if n.startswith("_") and not n.startswith("__")}
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return names
    return names | set(re.findall(r"self\.(_[A-Za-z]\w*)", source)) - {n for n in names if n.startswith("__")}


def _in_door(module: str) -> bool:
    return module == DOOR_MODULE or module.startswith(f"{DOOR_MODULE}.")


def _hpsearch_classes() -> list[type]:
    import hpsearch.runtime  # noqa: F401 - the package whose modules are walked below

    classes = []
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="hpsearch."):
        if info.name == "hpsearch.__main__" or _in_door(info.name):
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == info.name:
                classes.append(cls)
    return classes


def _self_names(cls: type) -> set[str]:
    """The underscore names a class's own code defines, reads or writes on ``self``."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return set()
    names = {
        node.name
        for node in getattr(tree.body[0], "body", [])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))  # methods it overrides
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


@pytest.mark.parametrize("cls", _hpsearch_classes(), ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_no_subclass_outside_the_door_touches_a_private_name_of_its_library_base(cls: type) -> None:
    bases = [b for b in cls.__mro__[1:] if _watched(b.__module__) and not _in_door(b.__module__)]
    if not bases:
        return
    theirs = set().union(*(_private_names_of(b) for b in bases))
    touched = sorted(_self_names(cls) & theirs)
    assert touched == [], (
        f"{cls.__module__}.{cls.__qualname__} touches private names of "
        f"{', '.join(b.__qualname__ for b in bases)}: {touched}; go through hpsearch/runtime/internals/"
    )


# ----------------------------------------------------------------------------- the checks catch what they should


def test_the_checks_catch_a_private_import_an_underscore_attribute_and_a_private_override(
    tmp_path, monkeypatch
) -> None:
    source = (
        "from ray._private import worker\n"
        "from ray.train._internal.session import get_session\n"
        "from ray.experimental.internal_kv import _internal_kv_get\n"
        "from ray.tune.schedulers import PopulationBasedTraining\n"
        "from hpsearch.experiment import files\n"
        "def f(session):\n"
        "    files._write_json  # hpsearch's own: allowed\n"
        "    return session._inter_actor_queue\n"
        "class Lineage(PopulationBasedTraining):\n"
        "    def _exploit(self, tune_controller, trial, trial_to_clone):\n"
        "        return self._trial_state\n"
    )
    path = PACKAGE / "runtime" / "example.py"  # only its name is used in the messages
    tree = ast.parse(source)
    assert [p.split(": ", 1)[1] for p in _import_problems(path, tree)] == [
        "imports ray._private",
        "imports ray.train._internal.session",
        "imports ray.experimental.internal_kv",
    ]
    assert [p.split(": ", 1)[1] for p in _attribute_problems(path, tree)] == [
        "reads or writes ._inter_actor_queue of session"
    ]
    (tmp_path / "door_example.py").write_text(source.replace("from ray._private import worker\n", ""), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    cls = importlib.import_module("door_example").Lineage
    base = cls.__mro__[1]
    assert sorted(_self_names(cls) & _private_names_of(base)) == ["_exploit", "_trial_state"]
