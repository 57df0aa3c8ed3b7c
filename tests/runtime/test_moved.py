"""The runtime modules' old names still import, as the modules they moved to (no Ray started).

Tune pickled hpsearch's objects into experiment folders by module name before ``runtime/`` was
grouped by process; ``hpsearch resume`` of such a folder, and user code importing the old names,
must find them.
"""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

import pytest

from hpsearch.runtime import moved


def test_every_old_name_is_the_module_it_moved_to_and_warns_once_naming_it() -> None:
    assert len(moved.MOVED) >= 29
    for old, new in moved.MOVED.items():
        module = importlib.import_module(new)
        sys.modules.pop(old, None)
        with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new}; import it from there"):
            aliased = importlib.import_module(old)
        assert aliased is module and module.__spec__.name == new  # the module keeps its real name


def test_an_object_pickled_under_an_old_name_loads_in_a_fresh_process() -> None:
    """As an experiment folder written before the move holds it (Tune's tuner.pkl, the searcher's state)."""
    old = pickle.dumps(("hpsearch.runtime.searchers", "ResumableOptunaSearch"))
    code = (
        "import pickle, sys, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "import hpsearch.runtime\n"
        "module, name = pickle.loads(sys.stdin.buffer.read())\n"
        "blob = pickle.dumps(None).replace(b'N', b'c' + module.encode() + b'\\n' + name.encode() + b'\\n', 1)\n"
        "cls = pickle.loads(blob)\n"
        "print(cls.__module__, cls.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], input=old, capture_output=True, check=True, timeout=120)
    assert out.stdout.decode().split() == ["hpsearch.runtime.search.searchers", "ResumableOptunaSearch"]


def test_names_that_never_moved_are_left_to_the_import_system() -> None:
    finder = moved.MovedModules()
    assert finder.find_spec("hpsearch.runtime.search.tuner", None) is None
    assert finder.find_spec("hpsearch.runtime.not_a_module", None) is None
    assert sum(isinstance(f, moved.MovedModules) for f in sys.meta_path) == 1  # installed once
