"""A train loop's helper modules travel with it to hosts that lack its folder.

A loop given as ``path/to/loop.py:train_loop`` that imports ``loop_helpers`` beside it, or
a ``loop_pkg.train:train_loop`` found in the spec's folder (not installed), is pickled in
the launching process and unpickled in trial drivers and Train workers on other hosts. There
the folder is not on ``sys.path``, so every module the loop's import brought in from it must
be pickled by value. These tests pickle the loaded loop with Ray's cloudpickle, move the
folder away, and call the loop in a fresh Python whose path lacks it, as another host would.
Only the last test starts Ray (marked ``ray``): a search whose Train workers lack the folder.
"""

from __future__ import annotations

import importlib.machinery
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ray import cloudpickle

from hpsearch import messages
from hpsearch.runtime import datasets
from hpsearch.runtime.datasets import register_by_value
from hpsearch.spec import _imports
from hpsearch.spec._imports import by_value_modules, load_callable

DATA = Path(__file__).resolve().parents[1] / "data" / "loop_imports"
LOCAL_NAMES = ("loop_helpers", "loop_tools", "loop_pkg", "loop_fast", _imports._FILE_MODULE_PREFIX)

#: Run in a fresh interpreter: unpickle the loop from stdin and call it, as a remote trial driver would.
REMOTE = """
import json, sys
from ray import cloudpickle
loop = cloudpickle.loads(sys.stdin.buffer.read())
print(json.dumps(loop({"width": 2})))
"""


def _local(name: str) -> bool:
    return name.split(".")[0] in LOCAL_NAMES or name.startswith(_imports._FILE_MODULE_PREFIX)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the loops' folder (the spec's folder); the test runs from another folder, with a clean slate."""
    spec_dir = tmp_path / "spec_dir"
    shutil.copytree(DATA, spec_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(_imports, "_BROUGHT_IN", {})
    monkeypatch.setattr(_imports, "_FOLDERS", {})
    yield spec_dir
    for name in [n for n in cloudpickle.list_registry_pickle_by_value() if _local(n) and n in sys.modules]:
        cloudpickle.unregister_pickle_by_value(sys.modules[name])
    for name in [n for n in sys.modules if _local(n)]:
        del sys.modules[name]


def _call_elsewhere(payload: bytes, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Unpickle and call the loop in a fresh Python whose cwd and sys.path hold none of the loops' folder."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", REMOTE],
        input=payload.decode("latin-1"),
        encoding="latin-1",
        capture_output=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def _ship(fn: Callable[..., Any], folder: Path) -> tuple[bytes, Path]:
    """Pickle ``fn`` and move its folder away, so no path in the pickle still leads to it."""
    payload = cloudpickle.dumps(fn)
    folder.rename(folder.with_name("moved_away"))
    return payload, folder.parent / "elsewhere"


def test_a_loop_file_selects_itself_and_the_modules_it_imports_from_its_folder(folder: Path) -> None:
    """loop.py imports loop_helpers beside it, which imports the package loop_tools below it; nothing installed counts."""
    loop = load_callable(f"{folder / 'loop.py'}:train_loop")  # from another cwd: the file's folder is put on the path

    shipment = by_value_modules(loop)

    assert shipment.folder == folder.resolve()
    assert shipment.modules == tuple(sorted((loop.__module__, "loop_helpers", "loop_tools", "loop_tools.scale")))
    assert shipment.compiled == ()
    assert shipment.warning() is None
    assert str(folder) not in sys.path  # only for the import, as `python loop.py` would have it


def test_a_package_in_the_spec_folder_selects_its_modules(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(folder))
    loop = load_callable("loop_pkg.train:train_loop", folder)

    shipment = by_value_modules(loop)

    assert shipment.folder == folder.resolve()
    assert shipment.modules == ("loop_pkg", "loop_pkg.layers", "loop_pkg.train")


def test_a_later_load_counts_the_helpers_an_earlier_load_imported(folder: Path) -> None:
    """The spec's check (or a dataset factory) may import the helpers first: the loop still ships them."""
    (folder / "factory.py").write_text("from loop_helpers import make_model\n\ndef make():\n    return make_model(1)\n")
    load_callable(f"{folder / 'factory.py'}:make", loop=False)

    loop = load_callable(f"{folder / 'loop.py'}:train_loop")

    assert {"loop_helpers", "loop_tools", "loop_tools.scale"} <= set(by_value_modules(loop).modules)


def test_a_loop_loads_while_another_thread_imports(folder: Path) -> None:
    """Another thread importing as a loop loads (a notebook's, Ray's, a watcher's) never fails the load:
    the modules the load brought in are found from a copy of ``sys.modules``, not while it grows."""
    import threading
    import types

    from hpsearch.spec._imports import _recording

    stop = threading.Event()

    added = [f"_hpsearch_test_import_{n}" for n in range(2000)]

    def importing() -> None:  # as imports do: sys.modules grows (and, here, shrinks again)
        while not stop.is_set():
            for name in added:
                sys.modules[name] = types.ModuleType(name)
            for name in added:
                sys.modules.pop(name, None)

    churn = threading.Thread(target=importing, daemon=True)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns often, as on a loaded machine
    churn.start()
    try:
        for _ in range(100):
            with _recording():
                pass
    finally:
        stop.set()
        churn.join()
        sys.setswitchinterval(interval)
        for name in added:
            sys.modules.pop(name, None)


@pytest.mark.parametrize(
    "ref",
    ["json:dumps", "yaml:safe_load", "hpsearch.spec._imports:resolve_reference"],
    ids=["stdlib", "site-packages", "editable-hpsearch"],
)
def test_an_installed_module_is_left_to_be_imported_by_name(ref: str) -> None:
    assert by_value_modules(load_callable(ref, loop=False)) == _imports.ByValue(None, ())


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("{folder}/loop.py:train_loop", {"layers": 12, "made_by": "loop_helpers"}),
        ("loop_pkg.train:train_loop", {"width": 21, "made_by": "loop_pkg.layers"}),
    ],
    ids=["file", "package"],
)
def test_the_registered_loop_runs_where_its_folder_is_not(
    folder: Path, monkeypatch: pytest.MonkeyPatch, ref: str, expected: dict[str, Any]
) -> None:
    monkeypatch.syspath_prepend(str(folder))
    loop = load_callable(ref.format(folder=folder), folder)
    register_by_value(loop)  # what make_trainable does with the loop

    payload, cwd = _ship(loop, folder)
    done = _call_elsewhere(payload, cwd)

    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == expected


@pytest.mark.parametrize(
    ("ref", "missing"),
    [("{folder}/loop.py:train_loop", "loop_helpers"), ("loop_pkg.train:train_loop", "loop_pkg")],
    ids=["file", "package"],
)
def test_without_the_helpers_registered_the_remote_host_cannot_import_them(
    folder: Path, monkeypatch: pytest.MonkeyPatch, ref: str, missing: str
) -> None:
    """The control: only the loop file's own module by value (as before), and the helpers go by name and fail."""
    monkeypatch.syspath_prepend(str(folder))
    loop = load_callable(ref.format(folder=folder), folder)
    if _imports.is_file_module(loop.__module__):
        cloudpickle.register_pickle_by_value(sys.modules[loop.__module__])

    payload, cwd = _ship(loop, folder)
    done = _call_elsewhere(payload, cwd)

    assert done.returncode != 0
    assert f"ModuleNotFoundError: No module named '{missing}'" in done.stderr


def test_a_compiled_module_beside_the_loop_is_named_once_with_what_to_do(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compiled extension cannot be pickled by value: the user hears, once, that the folder must be on every host."""
    monkeypatch.setattr(datasets, "_WARNED", set())
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (folder / "fast_loop.py").write_text(
        "import sys, types\n"
        "from pathlib import Path\n"
        "fast = types.ModuleType('loop_fast')\n"
        f"fast.__file__ = str(Path(__file__).with_name('loop_fast{suffix}'))\n"
        "sys.modules['loop_fast'] = fast  # as `import loop_fast` of a compiled module leaves it\n"
        "from loop_helpers import make_model\n\n"
        "def train_loop(config):\n    return make_model(1)\n"
    )
    loop = load_callable(f"{folder / 'fast_loop.py'}:train_loop")

    shipment = by_value_modules(loop)
    said = io.StringIO()
    with messages.to(said):
        register_by_value(loop)
        register_by_value(loop)

    assert shipment.compiled == (("loop_fast", (folder / f"loop_fast{suffix}").resolve()),)
    assert "loop_fast" not in shipment.modules and "loop_helpers" in shipment.modules
    assert said.getvalue().count("\n") == 1
    assert f"compiled module loop_fast (loop_fast{suffix}) in {folder.resolve()}" in said.getvalue()
    assert "same path on every host and on its PYTHONPATH" in said.getvalue()


# A real search on a host that lacks the loop's folder: tests/end_to_end/test_multihost.py (span_loop.py imports
# span_helpers.py beside it; its Train workers run on another host).


def test_a_package_beside_the_spec_not_importable_from_here_is_refused_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mypkg.loops:train_loop` in the spec's folder, hpsearch run from elsewhere: one line with the three ways out."""
    project = tmp_path / "proj"
    (project / "mypkg_beside").mkdir(parents=True)
    (project / "mypkg_beside" / "__init__.py").write_text("")
    (project / "mypkg_beside" / "loops.py").write_text("def train_loop(config):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as refused:
        load_callable("mypkg_beside.loops:train_loop", project)
    assert str(refused.value) == (
        f"cannot import module 'mypkg_beside.loops': mypkg_beside is in the spec's folder {project}, which is not on "
        f"Python's path here ({tmp_path}): run hpsearch from {project}, install mypkg_beside (pip install -e), or "
        "name the loop by its file (mypkg_beside/loops.py:<function>)"
    )
    with pytest.raises(ValueError, match="No module named 'nowhere_pkg'"):  # not beside the spec: Python's own words
        load_callable("nowhere_pkg.loops:train_loop", project)
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))  # as `python -m hpsearch` in that folder has it
    try:
        assert load_callable("mypkg_beside.loops:train_loop", project).__name__ == "train_loop"
    finally:
        for name in ("mypkg_beside.loops", "mypkg_beside"):
            sys.modules.pop(name, None)
