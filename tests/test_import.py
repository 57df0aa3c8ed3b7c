"""``import hpsearch`` and loading a spec stay light: no Ray, torch, Optuna, HyperOpt or matplotlib."""

from __future__ import annotations

import json
import subprocess
import sys

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
    assert hpsearch.load_spec.__module__ == "hpsearch.spec"
    assert hpsearch.Spec.__module__ == "hpsearch.spec"
