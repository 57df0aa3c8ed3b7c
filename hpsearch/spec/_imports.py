"""Load the user's train loop from ``"module:function"`` or ``"path/to/file.py:function"``.

A function loaded from a file lives in a module named by :func:`is_file_module`; the
runtime registers that module with Ray's cloudpickle to be pickled *by value*, since the
trial drivers and Train workers cannot import a file that only the launching machine has
on its path. The same holds for the modules that file imports from its own folder (a
``helpers.py`` beside it), and for a ``package.module`` found in a folder that is not an
installed one (the spec's folder): :func:`by_value_modules` names every module the import
brought in from that folder, for the runtime to register too. Nothing here imports Ray.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import json
import site
import sys
import sysconfig
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

__all__ = ["ByValue", "by_value_modules", "load_callable", "resolve_reference"]


def resolve_reference(ref: str, base_dir: Path) -> str:
    """Make a file reference absolute (relative paths are relative to the spec's folder)."""
    target, _, func = ref.rpartition(":")
    if target.endswith(".py"):
        path = Path(target).expanduser()
        if not path.is_absolute():
            path = (base_dir / path).resolve()
        return f"{path}:{func}"
    return ref


#: Modules imported from a ``path/to/file.py`` reference are named with this prefix.
_FILE_MODULE_PREFIX = "hpsearch_user_"


def is_file_module(name: str) -> bool:
    """Whether a module was imported from a file by :func:`load_callable`.

    Such a module cannot be imported by name on Ray's workers, so the runtime registers it
    with Ray's cloudpickle to be shipped by value, with the modules :func:`by_value_modules` names.
    """
    return name.startswith(_FILE_MODULE_PREFIX) and name in sys.modules


#: Each module a :func:`load_callable` import brought into ``sys.modules``, with its file (a
#: namespace package: its folder). Kept across loads, so a helper that an earlier load (the
#: spec's check, a dataset factory) imported first still counts for a later one.
_BROUGHT_IN: dict[str, Path] = {}
#: The folder each loaded module's own modules come from: a file's parent, or the folder a
#: ``package.module``'s top-level package was found in, when that is not an installed one.
_FOLDERS: dict[str, Path] = {}


@dataclass(frozen=True)
class ByValue:
    """What the runtime registers with Ray's cloudpickle for one loaded callable.

    Attributes:
        folder: The folder the callable's own modules come from, or ``None`` (an installed module).
        modules: The modules to pickle by value: the file's module and every module its import
            brought in from ``folder`` or below it (installed packages and hpsearch excluded).
        compiled: Compiled extension modules from ``folder``, as ``(name, file)``: Ray cannot ship
            them, so another host imports them by name, or fails.
    """

    folder: Path | None
    modules: tuple[str, ...]
    compiled: tuple[tuple[str, Path], ...] = ()

    def warning(self) -> str | None:
        """The message for compiled modules that cannot travel, or ``None`` when every module can."""
        if not self.compiled:
            return None
        names = ", ".join(f"{name} ({path.name})" for name, path in self.compiled)
        return (
            f"compiled module {names} in {self.folder} cannot be shipped to Ray's workers by value (it "
            "travels only by name): on a cluster of several hosts, that folder must be at the same path on "
            "every host and on its PYTHONPATH, or the module installed there"
        )


def by_value_modules(fn: Callable[..., Any]) -> ByValue:
    """The modules a callable from :func:`load_callable` needs pickled by value, for hosts that lack its folder.

    A function from a ``.py`` file needs its own module and each module that file imported
    from its folder or below (``from helpers import make_model``); a function of a
    ``package.module`` found outside the installed packages needs that package's modules.
    Anything else (an installed package, hpsearch, the standard library) is imported by name.
    """
    name = str(getattr(fn, "__module__", None) or "")
    own = (name,) if is_file_module(name) else ()
    folder = _FOLDERS.get(name)
    if folder is None:
        return ByValue(None, own)
    modules, compiled = set(own), []
    for module, path in sorted(_BROUGHT_IN.items()):
        if module not in sys.modules or not path.is_relative_to(folder) or _installed(module, path):
            continue
        if path.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            compiled.append((module, path))
        else:
            modules.add(module)
    return ByValue(folder, tuple(sorted(modules)), tuple(compiled))


def load_callable(ref: str, base_dir: Path | None = None, *, loop: bool = True) -> Callable[..., Any]:
    """Import and return the callable named by ``ref`` (with ``loop``: checked to be a train loop).

    Raises:
        ValueError: with a message fit to show the user (what failed and why).
    """
    target, sep, func_name = ref.rpartition(":")
    if not sep or not target or not func_name:
        raise ValueError(f"must look like 'package.module:function' or 'path/to/file.py:function', got {ref!r}")
    if target.endswith(".py"):
        path = Path(resolve_reference(ref, base_dir or Path.cwd()).rpartition(":")[0])
        if not path.is_file():
            raise ValueError(f"file not found: {path}")
        with _recording() as brought_in, _on_path(path.parent):
            module = _import_file(path)
        _refuse_without_extra(module, brought_in, f"importing {path} failed")
        _FOLDERS[module.__name__] = path.resolve().parent  # resolved, as the modules' files are
        _BROUGHT_IN[module.__name__] = path.resolve()
    else:
        try:
            with _recording() as brought_in:
                module = _import_module(target, base_dir)
        except SystemExit as err:
            raise ValueError(_exited_on_import(f"importing module {target!r}", err)) from None
        except _BesideTheSpec:
            raise
        except Exception as err:  # noqa: BLE001 - any import failure is the user's to see
            raise ValueError(f"cannot import module {target!r}: {_import_failure(err)}") from None
        _refuse_without_extra(module, brought_in, f"cannot import module {target!r}")
        _note_local_package(module)
    obj = getattr(module, func_name, None)
    if obj is None:
        public = sorted(
            n
            for n, v in vars(module).items()
            if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
        )
        hint = f" (callables there: {', '.join(public[:8])})" if public else ""
        raise ValueError(f"{target!r} has no attribute {func_name!r}{hint}")
    if not callable(obj):
        raise ValueError(f"{ref!r} is not a callable but a {type(obj).__name__}: {obj!r:.60}")
    if loop:
        _check_per_worker_loop(ref, obj)
    return cast("Callable[..., Any]", obj)


class _BesideTheSpec(ValueError):
    """A package beside the spec that cannot be imported from where hpsearch runs (the message says what to do)."""


def _import_module(target: str, base_dir: Path | None) -> ModuleType:
    """``import target``; a package that is not importable from here but sits in ``base_dir`` (the spec's
    folder) is refused with what to do: it would import here only with the spec's folder on the path,
    and the search and its resume import the loop again, from wherever they run."""
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as err:
        top = target.partition(".")[0]
        if err.name != top or base_dir is None:
            raise
        folder = base_dir.resolve()
        if not ((folder / top).is_dir() or (folder / f"{top}.py").is_file()):
            raise
        as_file = f"{target.replace('.', '/')}.py"
        raise _BesideTheSpec(
            f"cannot import module {target!r}: {top} is in the spec's folder {folder}, which is not on Python's path "
            f"here ({Path.cwd()}): run hpsearch from {folder}, install {top} (pip install -e), or name the loop "
            f"by its file ({as_file}:<function>)"
        ) from None


def _check_per_worker_loop(ref: str, obj: Callable[..., Any]) -> None:
    """A per-worker train loop is a plain function called as ``train_loop(config)``: one argument.

    Ray Train calls it on every worker and waits for it to return: a class would only be
    instantiated, and an ``async def`` or generator function would return without running.
    """
    if inspect.isclass(obj):
        raise ValueError(
            f"{ref!r} is a class; it must be a per-worker train loop function called as train_loop(config) "
            "(Ray Tune's class trainables cannot run as a Ray Train loop)"
        )
    for is_kind, kind in (
        (inspect.iscoroutinefunction, "an async function"),
        (inspect.isgeneratorfunction, "a generator function (it yields)"),
        (inspect.isasyncgenfunction, "an async generator function"),
    ):
        if is_kind(obj):
            raise ValueError(
                f"{ref!r} is {kind}, which returns without running its body when Ray Train calls it; "
                "it must be a plain function called as train_loop(config)"
            )
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):  # builtins and some C callables have none: let Ray try
        return
    try:
        signature.bind({})
    except TypeError:
        raise ValueError(
            f"{ref!r} must be a per-worker train loop called as train_loop(config), "
            f"but its signature is {obj.__name__}{signature}"
        ) from None


def _import_file(path: Path) -> ModuleType:
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    name = f"{_FILE_MODULE_PREFIX}{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as err:
        del sys.modules[name]
        raise ValueError(_exited_on_import(f"importing {path}", err)) from None
    except Exception as err:  # noqa: BLE001
        del sys.modules[name]
        raise ValueError(f"importing {path} failed: {_import_failure(err)}") from None
    return module


#: The packages an extra of hpsearch installs, by the top-level module a train loop imports: module ->
#: (package, extra). A loop whose import fails for want of one is refused with the extra's pip line, as
#: a missing tracker is. The lightning package brings the older pytorch_lightning module too; the
#: transformers extra brings accelerate, which transformers' Trainer needs.
EXTRA_OF_MODULE: dict[str, tuple[str, str]] = {
    "lightning": ("lightning", "lightning"),
    "pytorch_lightning": ("lightning", "lightning"),
    "transformers": ("transformers", "transformers"),
    "accelerate": ("accelerate", "transformers"),
}
#: Ray's integration modules that import without the packages they integrate, by those packages' top-level
#: modules (each in :data:`EXTRA_OF_MODULE`). ``ray.train.huggingface.transformers`` catches the ImportError
#: and raises it only when ``prepare_trainer`` is called, on the Train workers; ``transformers.Trainer``
#: needs accelerate only once it is built, there too. A loop that uses the module without them is refused
#: when it is loaded, as one whose own import fails.
NEEDS_OF_RAY_MODULE: dict[str, tuple[str, ...]] = {
    "ray.train.huggingface": ("transformers", "accelerate"),
}


def _refuse_without_extra(module: ModuleType, brought_in: set[str], what: str) -> None:
    """Refuse a loaded module whose Ray integration lacks a package, as if its import had failed.

    The module uses an integration when one of its names comes from it (``from ray.train.huggingface.transformers
    import RayTrainReportCallback``, a module alias) or when its import brought the integration in (``import
    ray.train.huggingface.transformers``). On refusal the module and the integration modules it brought in leave
    ``sys.modules``, so that loading it again, refused again or with the extra installed since, imports them anew.

    Raises:
        ValueError: ``what``, then the extra's pip line.
    """
    missing = _missing_extra(module, brought_in)
    if missing is None:
        return
    for name in brought_in | {module.__name__}:
        if name == module.__name__ or name.startswith(tuple(NEEDS_OF_RAY_MODULE)):
            sys.modules.pop(name, None)
    raise ValueError(f"{what}: {missing}")


def _missing_extra(module: ModuleType, brought_in: set[str]) -> str | None:
    """The pip line of an extra that a loaded module's Ray integration needs and lacks, or ``None``."""
    used = set(brought_in)
    for value in list(vars(module).values()):
        try:
            name = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
        except Exception:  # noqa: BLE001 - a lazy proxy among the module's names may fail any way; it names nothing
            continue
        if isinstance(name, str):
            used.add(name)
    for ray_module, needs in NEEDS_OF_RAY_MODULE.items():
        if not any(name == ray_module or name.startswith(f"{ray_module}.") for name in used):
            continue
        for top in needs:
            try:
                found = importlib.util.find_spec(top) is not None
            except (ImportError, ValueError):  # a module in sys.modules without a spec, a broken parent
                found = False
            if not found:
                package, extra = EXTRA_OF_MODULE[top]
                return f'needs the {package} package, which is not installed: pip install "hpsearch[{extra}]"'
    return None


def _import_failure(err: BaseException) -> str:
    """What an import's failure says to the user: the exception, or, for a package an extra of hpsearch
    installs, its pip line.

    The missing module is looked for along the exception's chain too: ``ray.train.lightning`` raises
    its own ``ModuleNotFoundError`` (without a module name) from the one about ``pytorch_lightning``.
    """
    seen: BaseException | None = err
    for _ in range(8):  # a chain of causes is short; a cycle must not loop
        if seen is None:
            break
        name = seen.name if isinstance(seen, ModuleNotFoundError) else None
        top = (name or "").partition(".")[0]
        if top in EXTRA_OF_MODULE:
            package, extra = EXTRA_OF_MODULE[top]
            return f'needs the {package} package, which is not installed: pip install "hpsearch[{extra}]"'
        seen = seen.__cause__ or seen.__context__
    return f"{type(err).__name__}: {err}"


def _exited_on_import(what: str, err: SystemExit) -> str:
    """A script's main code run at import ended in sys.exit: say so instead of exiting hpsearch."""
    return (
        f"{what} called sys.exit({err.code!r}); a file that runs a script when imported must "
        'guard that code with `if __name__ == "__main__":`'
    )


@contextlib.contextmanager
def _recording() -> Iterator[set[str]]:
    """Note in :data:`_BROUGHT_IN` every module imported inside the block (also when the import fails); the
    set it gives holds their names once the block has ended."""
    # sys.modules.copy(), not iterating sys.modules: another thread may import while this one does (a
    # notebook's, Ray's, a test's watcher), and iterating a dict that grows raises RuntimeError.
    before = set(sys.modules.copy())
    brought_in: set[str] = set()
    try:
        yield brought_in
    finally:
        now = sys.modules.copy()  # one snapshot: a module another thread removes meanwhile is looked up in it
        brought_in.update(n for n in now if n not in before)
        for name in brought_in:
            where = _location(now[name]) if name in now else None
            if where is not None:
                _BROUGHT_IN[name] = where


@contextlib.contextmanager
def _on_path(folder: Path) -> Iterator[None]:
    """Put ``folder`` first on ``sys.path`` for the block, as ``python file.py`` does, so the file imports what is beside it."""
    entry = str(folder)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added and entry in sys.path:
            sys.path.remove(entry)


def _location(module: ModuleType | None) -> Path | None:
    """A module's file, a namespace package's folder, or ``None`` (a builtin module, a blocked name)."""
    if module is None:
        return None
    file = getattr(module, "__file__", None)
    if isinstance(file, str):
        return Path(file).resolve()
    spec = module.__spec__
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]).resolve() if locations else None


def _note_local_package(module: ModuleType) -> None:
    """Remember the folder of a ``package.module``'s top-level package, when it is not an installed one."""
    top = module.__name__.partition(".")[0]
    where, own = _location(sys.modules.get(top)), _location(module)
    if where is None or own is None or _installed(top, where):
        return
    # pkg/__init__.py and a top-level mod.py sit in the folder the import found; a namespace package is that folder's child
    _FOLDERS[module.__name__] = where.parent.parent if where.name.partition(".")[0] == "__init__" else where.parent
    _BROUGHT_IN[top] = where
    _BROUGHT_IN[module.__name__] = own


def _installed(name: str, path: Path) -> bool:
    """Whether a module comes with the environment: the standard library, site-packages, an editable install, hpsearch."""
    top = name.partition(".")[0]
    if is_file_module(name):
        return False
    if top == "hpsearch" or {"site-packages", "dist-packages"} & set(path.parts):
        return True
    return any(path.is_relative_to(root) for root in _installed_roots()) or top in _editable_packages()


@functools.cache  # the same for the life of the process
def _installed_roots() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    roots = [*(paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")), *site.getsitepackages()]
    return tuple({Path(root).resolve() for root in roots})


@functools.cache  # reading every distribution's metadata takes about half a second; asked only for local candidates
def _editable_packages() -> frozenset[str]:
    """The top-level names of packages installed in editable mode (``pip install -e``): the user installed them."""
    editable = set()
    for dist in importlib.metadata.distributions():
        try:
            info = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            continue
        if isinstance(info, dict) and isinstance(info.get("dir_info"), dict) and info["dir_info"].get("editable"):
            editable.add(dist.metadata["Name"])
    return frozenset(top for top, names in importlib.metadata.packages_distributions().items() if editable & set(names))
