"""``import hpsearch`` and loading a spec stay light: no Ray, torch, Optuna, HyperOpt or matplotlib."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from pure_core import LIGHT_PACKAGES, NOT_AT_IMPORT, PURE_MODULES, PURE_PACKAGES

HEAVY = ["torch", "optuna", "hyperopt", "matplotlib", "ray"]

SCRIPT = """
import json, sys
import hpsearch
after_import = sorted(m for m in {heavy} if m in sys.modules)
spec = hpsearch.load_spec(
    {{
        "name": "light",
        "trainable": "hpsearch.examples.digits:train_loop",
        "metric": "loss",
        "mode": "min",
        "search_space": {{"lr": {{"type": "float", "low": 1.0e-4, "high": 0.1, "log": True}},
                         "b": {{"type": "choice", "values": [1, 2]}}}},
        "searcher": {{"type": "optuna", "sampler": "tpe"}},
        "scheduler": {{"type": "asha", "max_t": 5}},
        "scaling": {{"num_workers": 2, "use_gpu": True}},
    }},
    check_trainable=False,
)
try:
    hpsearch.load_spec({{"name": "bad"}}, check_trainable=False)
except hpsearch.SpecError:
    pass
after_load = sorted(m for m in {heavy} if m in sys.modules)
print(json.dumps({{"after_import": after_import, "after_load": after_load, "name": spec.name}}))
"""


def test_import_and_load_spec_pull_in_no_heavy_module() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(heavy=HEAVY)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"after_import": [], "after_load": [], "name": "light"}


def test_public_names_resolve_lazily() -> None:
    import hpsearch

    assert {"load_spec", "build_tuner", "run", "make_trainable", "Spec", "SpecError", "PlanError"} <= set(dir(hpsearch))
    # the spec package's index re-exports them from the modules that define them
    assert hpsearch.load_spec is hpsearch.spec.load_spec and hpsearch.load_spec.__module__ == "hpsearch.spec.load"
    assert hpsearch.Spec is hpsearch.spec.Spec and hpsearch.Spec.__module__ == "hpsearch.spec.model"


# ----------------------------------------------------------------------------- the pure core (tests/pure_core.py) never loads Ray

PACKAGE = Path(__import__("hpsearch").__file__).parent
#: What importing a module of the pure core (or of the results side) must not load: tests/pure_core.py.
NEVER = list(NOT_AT_IMPORT)


def _pure_modules() -> list[str]:
    """Every module of the pure core and of the light packages (tests/pure_core.py), found by walking their folders."""
    names = list(PURE_MODULES)
    for package in (*PURE_PACKAGES, *LIGHT_PACKAGES):
        names.append(package)
        folder = PACKAGE.joinpath(*package.split(".")[1:])
        # walk_packages imports subpackages only (to look inside them); the pure packages have none that need Ray.
        names += [info.name for info in pkgutil.walk_packages([str(folder)], prefix=f"{package}.")]
    return names


PROBE = """
import importlib, json, sys
importlib.import_module({name!r})
print(json.dumps(sorted(m for m in {never!r} if m in sys.modules)))
"""


def test_the_pure_core_is_found_by_walking_its_folders() -> None:
    modules = _pure_modules()
    assert {
        "hpsearch.spec.plugins",
        "hpsearch.planning.planner",
        "hpsearch.experiment.files",
        "hpsearch.analysis._load",
        "hpsearch.results.report",
        "hpsearch.errors",
    } <= set(modules)
    assert not [m for m in modules if m.startswith("hpsearch.runtime")]


@pytest.mark.parametrize("module", _pure_modules())
def test_a_pure_or_results_module_loads_neither_ray_nor_torch_when_imported(module: str) -> None:
    """Imported alone, in a fresh interpreter, so no other module's imports count."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(name=module, never=NEVER)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [], f"{module} imports them"


# ----------------------------------------------------------------------------- the public names


def test_every_exception_is_exported_from_hpsearch() -> None:
    import hpsearch
    from hpsearch import errors

    exceptions = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == errors.__name__
    }
    assert len(exceptions) >= 8 and exceptions == set(errors.__all__) - {"Problem"}  # all listed in errors.__all__
    assert exceptions <= set(hpsearch.__all__)
    for name in exceptions:
        assert getattr(hpsearch, name) is getattr(errors, name)


def test_version_comes_from_the_package_metadata() -> None:
    from importlib.metadata import version

    import hpsearch

    assert hpsearch.__version__ == version("hpsearch")
    assert "__version__" in hpsearch.__all__


def test_the_lazy_table_points_at_the_runtime_and_every_listed_name_resolves() -> None:
    import hpsearch

    assert (
        hpsearch._LAZY["build_tuner"]
        == hpsearch._LAZY["run"]
        == hpsearch._LAZY["resume"]
        == "hpsearch.runtime.search.tuner"
    )
    assert hpsearch._LAZY["make_trainable"] == "hpsearch.runtime.trial.trainable"
    assert {"analysis", "plots"} <= set(hpsearch.__all__)
    for name in hpsearch.__all__:
        assert getattr(hpsearch, name) is not None, name
    assert hpsearch.build_tuner.__module__ == "hpsearch.runtime.search.tuner"
    assert hpsearch.make_trainable.__module__ == "hpsearch.runtime.trial.trainable"
