"""One door to other libraries' internals: only the package ``hpsearch/runtime/internals/`` touches them.

Walks every module of the package (its syntax tree, not its imports at run time) and fails,
naming the file and line, when a module other than the door:

- imports a private module of Ray or of the other libraries whose internals hpsearch uses
  (``ray._private``, ``ray._common``, any ``ray.*._internal``, ``ray.experimental.internal_kv``,
  and any module or name starting with ``_`` of Ray, Optuna, HyperOpt, MLflow, TensorBoardX or torch);
- reads or writes an underscore attribute of an object that is not hpsearch's own (a method's ``self`` is
  its class's own; a nested function's own ``self``, such as a wrapper's put on a torch class, is not);
- subclasses one of those libraries' classes and overrides, reads or writes one of its private
  names (checked on the classes themselves, against the installed library's source).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pkgutil
import re
import textwrap
from pathlib import Path

import pytest

import hpsearch

PACKAGE = Path(hpsearch.__file__).resolve().parent
DOOR = PACKAGE / "runtime" / "internals"
#: The libraries whose internals go through the door.
WATCHED = ("ray", "optuna", "hyperopt", "mlflow", "tensorboardX", "torch")
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
    """``x._name`` where ``x`` is neither a name of hpsearch's own nor the ``self``/``cls`` of a method of a class
    defined here (such a class's library bases are checked on the classes themselves).

    A method's first parameter is exempt in the method and in the functions it holds, unless one of them
    takes a parameter of that name: a nested function's own ``self`` (a wrapper put on another library's
    class) is that library's object. A static method has no ``self``.
    """
    own = _own_names(tree)
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, exempt: frozenset[str], in_class: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            outer = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
            outer += [] if isinstance(node, ast.Lambda) else node.decorator_list
            for child in outer:  # evaluated where the function is defined
                visit(child, exempt, False)
            params = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
            params += [a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None]
            inner = exempt - set(params)
            if in_class and params and not _static(node):
                inner |= {params[0]}
            body = node.body if isinstance(node.body, list) else [node.body]
            for child in body:
                visit(child, inner, False)
            return
        if isinstance(node, ast.ClassDef):
            for child in [*node.decorator_list, *node.bases, *node.keywords]:
                visit(child, exempt, False)
            for child in node.body:
                visit(child, exempt, True)
            return
        if isinstance(node, ast.Attribute) and _private(node.attr):
            value = node.value
            if not (isinstance(value, ast.Name) and (value.id in own or value.id in exempt)):
                found.append((node.lineno, f"reads or writes .{node.attr} of {ast.unparse(value)}"))
        for child in ast.iter_child_nodes(node):
            visit(child, exempt, False)

    visit(tree, frozenset(), False)
    return [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}" for line, what in sorted(found, key=lambda f: f[0])]


def _private(attr: str) -> bool:
    return attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__"))


def _static(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> bool:
    decorators = [] if isinstance(function, ast.Lambda) else function.decorator_list
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in decorators)


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


#: The packages every install has (pyproject's dependencies); a module missing another needs an extra.
CORE_PACKAGES = {"ray", "torch", "optuna", "hyperopt", "numpy", "pandas", "yaml", "pydantic", "matplotlib", "psutil"}
#: Modules not checked because the optional extra they import is not installed: module -> the missing package.
WITHOUT_EXTRA: dict[str, str] = {}


def _hpsearch_classes() -> list[type]:
    import hpsearch.runtime  # noqa: F401 - the package whose modules are walked below

    classes = []
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="hpsearch."):
        if info.name == "hpsearch.__main__" or _in_door(info.name):
            continue
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as err:  # an example of an optional extra (lightning, transformers) on [dev] alone
            missing = (err.name or "").split(".")[0]
            if missing in CORE_PACKAGES or not missing:
                raise
            WITHOUT_EXTRA[info.name] = missing
            continue
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


HPSEARCH_CLASSES = _hpsearch_classes()


def test_a_module_left_unchecked_is_one_whose_extra_is_missing_and_is_named() -> None:
    """The door is checked on every module an install can import; under CI (every extra installed), on all."""
    if WITHOUT_EXTRA:
        named = ", ".join(f"{module} (needs {package})" for module, package in sorted(WITHOUT_EXTRA.items()))
        assert not os.environ.get("CI"), f"CI installs every extra, yet these did not import: {named}"
        pytest.skip(f"not checked, their optional extra is not installed: {named}")


@pytest.mark.parametrize("cls", HPSEARCH_CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
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


def test_a_closures_own_self_is_another_librarys_object_and_is_checked() -> None:
    """Only a method's ``self`` (and what closes over it) is exempt: a wrapper's ``self`` is torch's optimizer."""
    source = (
        "import functools\n"
        "class Keeper:\n"
        "    def method(self):\n"
        "        self._mine = 1  # hpsearch's own class: allowed\n"
        "        def later():\n"
        "            return self._mine  # the method's self, closed over: allowed\n"
        "        return later\n"
        "    @classmethod\n"
        "    def make(cls):\n"
        "        return cls._made  # allowed\n"
        "    @staticmethod\n"
        "    def helper(self):\n"
        "        return self._secret  # a static method has no self\n"
        "    def wrap(self, load):\n"
        "        @functools.wraps(load)\n"
        "        def load_state_dict(self, state_dict):\n"
        "            self._last_lr = []  # a torch scheduler's, as the class calls the wrapper\n"
        "        return load_state_dict\n"
        "def keep(load):\n"
        "    def load_state_dict(self, state_dict):\n"
        "        self._hp_donor_lr = None\n"
        "    return lambda self: self._hidden\n"
    )
    path = PACKAGE / "runtime" / "example.py"
    assert [p.split(": ", 1)[1] for p in _attribute_problems(path, ast.parse(source))] == [
        "reads or writes ._secret of self",
        "reads or writes ._last_lr of self",
        "reads or writes ._hp_donor_lr of self",
        "reads or writes ._hidden of self",
    ]
