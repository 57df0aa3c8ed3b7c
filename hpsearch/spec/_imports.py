"""Load the user's train loop from ``"module:function"`` or ``"path/to/file.py:function"``.

A function loaded from a file lives in a module named by :func:`is_file_module`; the
runtime registers that module with Ray's cloudpickle to be pickled *by value*, since the
trial drivers and Train workers cannot import a file that only the launching machine has
on its path. Nothing here imports Ray.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, cast

__all__ = ["load_callable", "resolve_reference"]


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
    with Ray's cloudpickle to be shipped by value (:func:`hpsearch.runtime.trainable.make_trainable`).
    """
    return name.startswith(_FILE_MODULE_PREFIX) and name in sys.modules


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
        module = _import_file(path)
    else:
        try:
            module = importlib.import_module(target)
        except SystemExit as err:
            raise ValueError(_exited_on_import(f"importing module {target!r}", err)) from None
        except Exception as err:  # noqa: BLE001 - any import failure is the user's to see
            raise ValueError(f"cannot import module {target!r}: {type(err).__name__}: {err}") from None
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
        raise ValueError(f"importing {path} failed: {type(err).__name__}: {err}") from None
    return module


def _exited_on_import(what: str, err: SystemExit) -> str:
    """A script's main code run at import ended in sys.exit: say so instead of exiting hpsearch."""
    return (
        f"{what} called sys.exit({err.code!r}); a file that runs a script when imported must "
        'guard that code with `if __name__ == "__main__":`'
    )
