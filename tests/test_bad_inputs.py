"""The bad-input corpus: every mistake exits 2 with one message naming its YAML path, and writes nothing.

Each row is a spec (or spec text) a user could really write, run through the real command.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpsearch.cli import main

GOOD: dict[str, Any] = {
    "name": "bad-input",
    "trainable": "hpsearch.examples.digits:train_loop",
    "metric": "val_loss",
    "mode": "min",
    "num_samples": 2,
    "search_space": {
        "lr": {"type": "float", "low": 1.0e-4, "high": 1.0e-1, "log": True},
        "layers": {"type": "int", "low": 1, "high": 3},
        "hidden": {"type": "choice", "values": [32, 64]},
        "epochs": 2,
    },
    "searcher": {"type": "optuna", "seed": 0},
    "scheduler": {"type": "asha", "max_t": 2, "grace_period": 1},
    "scaling": {"num_workers": 2, "resources_per_worker": {"CPU": 0.45}},
    "resources": {"driver_cpus": 0.1},
    "storage_path": "results",
}


def put(path: str, value: Any) -> Callable[[dict], None]:
    """Set (or, with value=DELETE, remove) a dotted key of the spec."""

    def patch(spec: dict) -> None:
        *parents, last = path.split(".")
        node = spec
        for key in parents:
            node = node.setdefault(key, {})
        if value is DELETE:
            node.pop(last, None)
        else:
            node[last] = value

    return patch


DELETE = object()
FILE_LOOP = "def not_a_loop(config, extra):\n    pass\n\nNOT_CALLABLE = 3\n\ndef train_loop(config):\n    pass\n"

CORPUS = [
    # --- YAML itself
    (
        "yaml-syntax",
        "name: x\nsearch_space: {lr: [1, 2\n",
        "<spec>: not valid YAML: line 3, column 1: expected ',' or ']', but got '<stream end>'",
    ),
    (
        "yaml-duplicate-key",
        "name: a\nname: b\n",
        "<spec>: not valid YAML: line 2, column 1: duplicate key 'name' (first on line 1, again on line 2)",
    ),
    ("yaml-not-a-mapping", "- just\n- a list\n", "<spec>: a spec must be a mapping of keys, got ['just', 'a list']"),
    (
        "yaml-python-object",
        "name: !!python/object/apply:os.system ['echo hi']\n",
        "<spec>: not valid YAML: line 1, column 7: could not determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'",
    ),
    # --- top level
    ("missing-name", put("name", DELETE), "name: required key is missing"),
    ("missing-metric", put("metric", DELETE), "metric: required key is missing"),
    (
        "unknown-top-key",
        put("serch_space", {}),
        "serch_space: unknown key; did you mean 'search_space'? (allowed: name, trainable, metric, mode, num_samples, search_space, searcher, scheduler, scaling, resources, failure, checkpoint, aggregate, storage_path)",
    ),
    ("mode-typo", put("mode", "minimize"), "mode: must be 'min' or 'max', got 'minimize'"),
    ("num-samples-zero", put("num_samples", 0), "num_samples: must be greater than 0, got 0"),
    ("num-samples-string", put("num_samples", "ten"), "num_samples: must be a valid integer, got 'ten'"),
    (
        "name-path-separator",
        put("name", "runs/../../etc"),
        "name: must use only letters, digits, '.', '_' and '-' and not start with '.', got 'runs/../../etc'",
    ),
    (
        "name-dot-dot",
        put("name", ".."),
        "name: must use only letters, digits, '.', '_' and '-' and not start with '.', got '..'",
    ),
    ("name-not-a-string", put("name", 12), "name: must be a valid string, got 12"),
    ("metric-empty", put("metric", ""), "metric: must be a non-empty string, got ''"),
    # --- search space
    (
        "space-not-a-mapping",
        put("search_space", [1, 2]),
        "search_space: must be a mapping of parameter names, got [1, 2]",
    ),
    (
        "space-unknown-type",
        put("search_space.lr", {"type": "loguniform", "low": 1, "high": 2}),
        "search_space.lr.type: unknown distribution type 'loguniform' (allowed: 'float', 'int', 'choice', 'grid' or 'const'; to pass a mapping with a 'type' key as a constant, write {type: const, value: ...})",
    ),
    (
        "space-type-typo",
        put("search_space.lr.type", "flot"),
        "search_space.lr.type: unknown distribution type 'flot'; did you mean 'float'? (allowed: 'float', 'int', 'choice', 'grid' or 'const'; to pass a mapping with a 'type' key as a constant, write {type: const, value: ...})",
    ),
    (
        "space-unknown-key",
        put("search_space.lr.logg", True),
        "search_space.lr.logg: unknown key; did you mean 'log'? (allowed: low, high, log, step)",
    ),
    (
        "space-nested-unknown-key",
        put("search_space.optim", {"beta": {"type": "float", "low": 0.8, "high": 0.99, "stepp": 0.01}}),
        "search_space.optim.beta.stepp: unknown key; did you mean 'step'? (allowed: low, high, log, step)",
    ),
    (
        "space-low-above-high",
        put("search_space.layers", {"type": "int", "low": 4, "high": 2}),
        "search_space.layers.low: must be less than high (2), got 4",
    ),
    (
        "space-low-equals-high",
        put("search_space.lr", {"type": "float", "low": 0.1, "high": 0.1}),
        "search_space.lr.low: must be less than high (0.1), got 0.1",
    ),
    (
        "space-log-zero-low",
        put("search_space.lr.low", 0.0),
        "search_space.lr.low: must be > 0 when log is true, got 0.0",
    ),
    (
        "space-log-negative-low",
        put("search_space.lr.low", -1.0),
        "search_space.lr.low: must be > 0 when log is true, got -1.0",
    ),
    (
        "space-step-off-grid",
        put("search_space.layers", {"type": "int", "low": 1, "high": 9, "step": 2}),
        "search_space.layers.low: must be a multiple of step (2), got 1",
    ),
    (
        "space-step-and-log",
        put("search_space.lr.step", 0.01),
        "search_space.lr.step: cannot be combined with log: true",
    ),
    (
        "space-negative-step",
        put("search_space.layers.step", -1),
        "search_space.layers.step: must be greater than or equal to 1, got -1",
    ),
    (
        "space-int-float-bound",
        put("search_space.layers.high", 3.5),
        "search_space.layers.high: must be a valid integer, got 3.5",
    ),
    (
        "space-quoted-number",
        "name: q\ntrainable: loops.py:train_loop\nmetric: m\nmode: min\nsearch_space:\n  lr: {type: float, low: '1e-4', high: 1}\n",
        "search_space.lr.low: must be a valid number (write it as a number, e.g. 1.0e-4, not as a string), got '1e-4'",
    ),
    ("space-missing-high", put("search_space.lr.high", DELETE), "search_space.lr.high: required key is missing"),
    (
        "space-empty-choice",
        put("search_space.hidden.values", []),
        "search_space.hidden.values: must have at least 1 value, got []",
    ),
    (
        "space-choice-not-a-list",
        put("search_space.hidden.values", 64),
        "search_space.hidden.values: must be a valid list, got 64",
    ),
    (
        "space-empty-grid",
        put("search_space.hidden", {"type": "grid", "values": []}),
        "search_space.hidden.values: must have at least 1 value, got []",
    ),
    (
        "space-dotted-name",
        put("search_space", {"a.b": 1}),
        "search_space.a.b: parameter names must be non-empty strings without '.' or '/', got 'a.b'",
    ),
    (
        "grid-with-optuna",
        put("search_space.hidden.type", "grid"),
        "search_space.hidden: grid values need searcher random; searcher 'optuna' cannot take them (use type: choice)",
    ),
    # --- searcher / scheduler
    (
        "unknown-searcher",
        put("searcher.type", "bayesopt"),
        "searcher.type: unknown searcher 'bayesopt'; did you mean 'hyperopt'? (allowed: 'random', 'optuna' or 'hyperopt')",
    ),
    (
        "searcher-typo",
        put("searcher.type", "optuan"),
        "searcher.type: unknown searcher 'optuan'; did you mean 'optuna'? (allowed: 'random', 'optuna' or 'hyperopt')",
    ),
    (
        "searcher-unknown-option",
        put("searcher.n_startup", 5),
        "searcher.n_startup: unknown key; did you mean 'n_startup_trials'? (allowed: sampler, seed, n_startup_trials)",
    ),
    (
        "sampler-typo",
        put("searcher.sampler", "tpee"),
        "searcher.sampler: must be 'tpe', 'cmaes', 'gp' or 'random', got 'tpee'; did you mean 'tpe'?",
    ),
    (
        "unknown-scheduler",
        put("scheduler.type", "pbt"),
        "scheduler.type: unknown scheduler 'pbt' (allowed: 'fifo', 'asha', 'median' or 'hyperband')",
    ),
    (
        "scheduler-unknown-option",
        put("scheduler.grace_perod", 1),
        "scheduler.grace_perod: unknown key; did you mean 'grace_period'? (allowed: max_t, grace_period, reduction_factor, brackets, time_attr)",
    ),
    ("grace-above-max-t", put("scheduler.grace_period", 5), "scheduler.grace_period: must be <= max_t (2), got 5"),
    (
        "fifo-with-options",
        put("scheduler", {"type": "fifo", "max_t": 3}),
        "scheduler.max_t: unknown key; scheduler 'fifo' takes no options",
    ),
    (
        "reduction-factor-one",
        put("scheduler.reduction_factor", 1),
        "scheduler.reduction_factor: must be greater than 1, got 1",
    ),
    # --- scaling / resources / failure / aggregate
    ("zero-workers", put("scaling.num_workers", 0), "scaling.num_workers: must be greater than 0, got 0"),
    ("negative-workers", put("scaling.num_workers", -2), "scaling.num_workers: must be greater than 0, got -2"),
    (
        "negative-worker-cpu",
        put("scaling.resources_per_worker", {"CPU": -1}),
        "scaling.resources_per_worker.CPU: must be >= 0, got -1.0",
    ),
    (
        "gpu-without-use-gpu",
        put("scaling.resources_per_worker", {"CPU": 1, "GPU": 1}),
        "scaling.use_gpu: must be true when resources_per_worker asks for GPU",
    ),
    (
        "gpu-one-and-a-half",
        put("scaling", {"num_workers": 1, "use_gpu": True, "resources_per_worker": {"GPU": 1.5}}),
        "scaling.resources_per_worker.GPU: must be a fraction of one GPU or a whole number of GPUs, got 1.5",
    ),
    (
        "strategy-typo",
        put("scaling.placement_strategy", "pack"),
        "scaling.placement_strategy: must be 'PACK', 'SPREAD', 'STRICT_PACK' or 'STRICT_SPREAD', got 'pack'; did you mean 'PACK'?",
    ),
    ("driver-cpus-zero", put("resources.driver_cpus", 0), "resources.driver_cpus: must be greater than 0, got 0"),
    (
        "max-concurrent-words",
        put("resources.max_concurrent_trials", "many"),
        "resources.max_concurrent_trials: must be 'auto' or a valid integer, got 'many'",
    ),
    (
        "driver-node-typo",
        put("resources.driver_node", "worker"),
        "resources.driver_node: must be 'head' or 'any', got 'worker'",
    ),
    (
        "negative-retries",
        put("failure.worker_retries", -1),
        "failure.worker_retries: must be greater than or equal to 0, got -1",
    ),
    (
        "aggregate-typo",
        put("aggregate.metrics", {"val_loss": "avg"}),
        "aggregate.metrics.val_loss: must be 'mean', 'min', 'max', 'sum' or 'rank0', got 'avg'",
    ),
    # --- trainable and paths
    (
        "trainable-no-colon",
        put("trainable", "hpsearch.examples.digits.train_loop"),
        "trainable: must look like 'package.module:function' or 'path/to/file.py:function', got 'hpsearch.examples.digits.train_loop'",
    ),
    (
        "trainable-no-module",
        put("trainable", "no_such_module:train_loop"),
        "trainable: cannot import module 'no_such_module': ModuleNotFoundError: No module named 'no_such_module'",
    ),
    (
        "trainable-no-function",
        put("trainable", "hpsearch.examples.digits:train"),
        "trainable: 'hpsearch.examples.digits' has no attribute 'train' (callables there: train_loop)",
    ),
    (
        "trainable-missing-file",
        put("trainable", "missing.py:train_loop"),
        "trainable: file not found: {tmp}/missing.py",
    ),
    (
        "trainable-not-callable",
        put("trainable", "loops.py:NOT_CALLABLE"),
        "trainable: 'loops.py:NOT_CALLABLE' is not a callable but a int: 3",
    ),
    (
        "trainable-not-a-per-worker-loop",
        put("trainable", "loops.py:not_a_loop"),
        "trainable: 'loops.py:not_a_loop' must be a per-worker train loop called as train_loop(config), but its signature is not_a_loop(config, extra)",
    ),
    (
        "storage-path-is-a-file",
        put("storage_path", "loops.py"),
        "storage_path: must be a folder, but 'loops.py' is a file",
    ),
]


def _write(tmp: Path, case: Any) -> Path:
    (tmp / "loops.py").write_text(FILE_LOOP)
    path = tmp / "spec.yaml"
    if isinstance(case, str):
        path.write_text(case)
    else:
        spec = copy.deepcopy(GOOD)
        case(spec)
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.parametrize(("case", "expected"), [pytest.param(c, e, id=i) for i, c, e in CORPUS])
def test_bad_input_exits_2_with_one_message_and_writes_nothing(case, expected, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, case)
    before = sorted(p.name for p in tmp_path.iterdir())

    code = main(["run", str(path)])

    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    message = expected.replace("{tmp}", str(tmp_path))
    assert err == f"Error: invalid spec in {path} (1 problem):\n  - {message}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_the_corpus_is_big_enough():
    assert len(CORPUS) >= 40


def test_gpus_asked_of_a_cluster_without_gpus(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec = copy.deepcopy(GOOD)
    spec["scaling"] = {"num_workers": 2, "use_gpu": True}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["plan", str(path), "--cluster", "2x{CPU: 8}"]) == 2
    assert capsys.readouterr().err == "Error: a worker needs GPU: 1 but the largest node has GPU: 0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]
