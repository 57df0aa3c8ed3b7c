"""The bad-input corpus: every mistake exits 2 with one message naming its YAML path, and writes nothing.

Each row is a spec (or spec text) a user could really write, run through the real command.
"""

from __future__ import annotations

import copy
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpsearch.cli import main

INF, NAN = float("inf"), float("nan")
#: The longest file name of the file system the tests' folders are on (255 on ext4, tmpfs, xfs, btrfs).
NAME_MAX = os.pathconf(tempfile.gettempdir(), "PC_NAME_MAX")
PATH_MAX = os.pathconf(tempfile.gettempdir(), "PC_PATH_MAX")

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


def both(*patches: Callable[[dict], None]) -> Callable[[dict], None]:
    """One patch applying each of ``patches`` in turn."""

    def patch(spec: dict) -> None:
        for one in patches:
            one(spec)

    return patch


DELETE = object()
FILE_LOOP = """\
def not_a_loop(config, extra):
    pass

NOT_CALLABLE = 3

def train_loop(config):
    pass

def no_config():
    pass

def keyword_only(*, config):
    pass

class Loop:
    def __init__(self, config):
        self.config = config

async def async_loop(config):
    pass

def generator_loop(config):
    yield config
"""
#: A minimal spec as text, for the rows that need YAML no dict can produce.
TEXT = "name: t\ntrainable: loops.py:train_loop\nmetric: m\nmode: min\n"
#: A `ray job submit --working-dir` job's current folder (ray._private.runtime_env.working_dir).
JOB_DIR = "ray/session_2025-01-01_00-00-00_000000_4242/runtime_resources/working_dir_files/_ray_pkg_0123abcd"


@dataclass(frozen=True)
class Run:
    """A row that needs more than a spec: command-line arguments, files around it, another folder.

    ``spec`` is what goes into ``spec.yaml`` (a patch of GOOD, text, bytes, or None to write none);
    ``files`` maps relative paths to their text (None: a folder); ``spec_arg`` is the path given to
    the command; ``cwd`` the folder it runs in.
    """

    spec: Any = None
    argv: tuple[str, ...] = ()
    files: dict[str, str | None] = field(default_factory=dict)
    spec_arg: str = "spec.yaml"
    cwd: str = "."
    write_spec: bool = True


def with_set(*overrides: str, spec: Any = None) -> Run:
    """The GOOD spec (or ``spec``) run with ``--set`` for each override."""
    return Run(spec=spec, argv=tuple(arg for item in overrides for arg in ("--set", item)))


def billion_laughs(levels: int = 9, width: int = 10) -> str:
    """A few hundred bytes of YAML whose aliases expand to width ** levels values (10 ** 9 by default)."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return TEXT + "\n".join(lines) + "\n"


LONG_STORAGE = "/".join(["d" * 200] * 20)  # each part fits NAME_MAX; the whole passes PATH_MAX
BIG = "9" * 5000  # past Python's 4,300-digit conversion limit
#: What a spec's integers must be (hpsearch.spec._yaml.INT_MIN/INT_MAX).
INT64 = "must be an integer of at most 64 bits (-9223372036854775808 to 9223372036854775807)"
#: A spec of 20,000+ values as written: refused at the limit, before the rest is read.
MANY_VALUES = TEXT + "notes: [" + "1, " * 25_000 + "1]\n"
PADDED = TEXT + "# padding\n" * 120_000  # 1.2 MB: more than a spec may be

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
        "serch_space: unknown key; did you mean 'search_space'? (allowed: name, trainable, metric, mode, num_samples, search_space, searcher, scheduler, scaling, resources, failure, checkpoint, aggregate, datasets, data, tracking, budget, warm_start, constraints, storage_path)",
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
        "search_space.lr.logg: unknown key; did you mean 'log'? (allowed: low, high, log, step, when)",
    ),
    (
        "space-nested-unknown-key",
        put("search_space.optim", {"beta": {"type": "float", "low": 0.8, "high": 0.99, "stepp": 0.01}}),
        "search_space.optim.beta.stepp: unknown key; did you mean 'step'? (allowed: low, high, log, step, when)",
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
        "searcher.n_startup: unknown key; did you mean 'n_startup_trials'? (allowed: sampler, seed, n_startup_trials, population_size, failed_trials)",
    ),
    (
        "sampler-typo",
        put("searcher.sampler", "tpee"),
        "searcher.sampler: must be 'tpe', 'cmaes', 'gp', 'random', 'nsga2' or 'nsga3', got 'tpee'; did you mean 'tpe'?",
    ),
    (
        "unknown-scheduler",
        put("scheduler.type", "pbtt"),
        "scheduler.type: unknown scheduler 'pbtt'; did you mean 'pbt'? (allowed: 'fifo', 'asha', 'median', 'hyperband', "
        "'pbt' or 'pb2')",
    ),
    (
        "scheduler-unknown-option",
        put("scheduler.grace_perod", 1),
        "scheduler.grace_perod: unknown key; did you mean 'grace_period'? (allowed: max_t, grace_period, reduction_factor, brackets, time_attr, metric, mode)",
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
        "trainable: 'hpsearch.examples.digits' has no attribute 'train' (callables there: build_model, train_loop, validation_split)",
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
    # --- round 2: numbers that are not finite, in every field hpsearch interprets as a number
    ("space-high-inf", put("search_space.lr.high", INF), "search_space.lr.high: must be a finite number, got inf"),
    (
        "space-low-minus-inf",
        put("search_space.lr", {"type": "float", "low": -INF, "high": 1.0}),
        "search_space.lr.low: must be a finite number, got -inf",
    ),
    ("space-low-nan", put("search_space.lr.low", NAN), "search_space.lr.low: must be a finite number, got nan"),
    (
        "space-step-inf",
        put("search_space.dropout", {"type": "float", "low": 0.0, "high": 0.5, "step": INF}),
        "search_space.dropout.step: must be a finite number, got inf",
    ),
    (
        "space-bound-overflows-to-inf",
        TEXT + "search_space:\n  lr: {type: float, low: 1.0e-4, high: 1e999}\n",
        "search_space.lr.high: must be a finite number, got inf",
    ),
    (
        "space-yaml-dot-nan",
        TEXT + "search_space:\n  wd: {type: float, low: .NaN, high: 0.1}\n",
        "search_space.wd.low: must be a finite number, got nan",
    ),
    (
        "space-int-bound-inf",
        put("search_space.layers.high", INF),
        "search_space.layers.high: must be a valid integer, got inf",
    ),
    ("num-samples-inf", put("num_samples", INF), "num_samples: must be a valid integer, got inf"),
    (
        "worker-cpu-inf",
        put("scaling.resources_per_worker", {"CPU": INF}),
        "scaling.resources_per_worker.CPU: must be a finite number, got inf",
    ),
    (
        "worker-gpu-nan",
        put("scaling", {"num_workers": 1, "use_gpu": True, "resources_per_worker": {"GPU": NAN}}),
        "scaling.resources_per_worker.GPU: must be a finite number, got nan",
    ),
    ("driver-cpus-inf", put("resources.driver_cpus", INF), "resources.driver_cpus: must be a finite number, got inf"),
    (
        "driver-memory-nan",
        put("resources.driver_memory_gb", NAN),
        "resources.driver_memory_gb: must be a finite number, got nan",
    ),
    (
        "worker-memory-minus-inf",
        put("resources.worker_memory_gb", -INF),
        "resources.worker_memory_gb: must be a finite number, got -inf",
    ),
    (
        "max-concurrent-inf",
        put("resources.max_concurrent_trials", INF),
        "resources.max_concurrent_trials: must be 'auto' or a valid integer, got inf",
    ),
    (
        "start-timeout-inf",
        put("failure.worker_start_timeout_s", INF),
        "failure.worker_start_timeout_s: must be a finite number, got inf",
    ),
    ("trial-retries-inf", put("failure.trial_retries", INF), "failure.trial_retries: must be a valid integer, got inf"),
    (
        "asha-reduction-factor-inf",
        put("scheduler.reduction_factor", INF),
        "scheduler.reduction_factor: must be a finite number, got inf",
    ),
    (
        "median-grace-period-nan",
        put("scheduler", {"type": "median", "grace_period": NAN}),
        "scheduler.grace_period: must be a finite number, got nan",
    ),
    (
        "median-time-slice-inf",
        put("scheduler", {"type": "median", "min_time_slice": INF}),
        "scheduler.min_time_slice: must be a finite number, got inf",
    ),
    (
        "hyperband-reduction-factor-nan",
        put("scheduler", {"type": "hyperband", "reduction_factor": NAN}),
        "scheduler.reduction_factor: must be a finite number, got nan",
    ),
    ("searcher-seed-inf", put("searcher.seed", INF), "searcher.seed: must be a valid integer, got inf"),
    (
        "num-to-keep-inf",
        put("checkpoint.num_to_keep", INF),
        "checkpoint.num_to_keep: must be a valid integer, got inf",
    ),
    # --- names and paths the file system cannot hold
    (
        "name-longer-than-name-max",
        put("name", "n" * (NAME_MAX + 1)),
        f"name: must be at most {NAME_MAX} characters long (the longest file name the file system at {{tmp}} "
        f"allows), got {NAME_MAX + 1} characters: '{'n' * 56}...",
    ),
    (
        "storage-folder-name-longer-than-name-max",
        put("storage_path", "runs/" + "s" * (NAME_MAX + 1)),
        f"storage_path: the folder name '{'s' * 56}... is {NAME_MAX + 1} bytes long, but the file system at {{tmp}} "
        f"allows at most {NAME_MAX}",
    ),
    (
        "storage-path-longer-than-path-max",
        put("storage_path", LONG_STORAGE),
        "storage_path: the experiment folder's path would be {experiment_dir_bytes} bytes long; with up to 512 "
        f"more for the trial folders and files inside it, paths would pass the file system's limit of {PATH_MAX} "
        "(PATH_MAX): choose a shorter storage_path (or name)",
    ),
    ("storage-path-empty", put("storage_path", ""), "storage_path: must be a non-empty string, got ''"),
    (
        "storage-path-of-an-unknown-user",
        put("storage_path", "~no-such-user-hpsearch/results"),
        "storage_path: cannot resolve '~no-such-user-hpsearch/results' to a folder: Could not determine home "
        "directory.",
    ),
    ("storage-path-a-list", put("storage_path", ["runs"]), "storage_path: must be a valid string, got ['runs']"),
    # --- a storage_path that cannot be created or written (found by trying, before Ray; nothing left behind)
    (
        "storage-path-under-a-file",
        put("storage_path", "loops.py/results"),
        "storage_path: cannot create {tmp}/loops.py/results: {tmp}/loops.py is a file, not a folder",
    ),
    (
        "storage-path-in-a-ray-job-working-dir",
        Run(files={JOB_DIR: None}, cwd=JOB_DIR),
        f"storage_path: {{tmp}}/{JOB_DIR}/results is inside a Ray job's temporary working directory (under "
        f"{{tmp}}/{JOB_DIR.partition('/working_dir_files')[0]}), which Ray deletes after the job; a relative "
        "storage_path, like the default ./hpsearch-results, lands there under `ray job submit --working-dir`: "
        "use an absolute path on storage every node reaches, e.g. --set storage_path=/mnt/shared/hpsearch-results",
    ),
    (
        "storage-path-in-ray-py-modules",
        put("storage_path", "ray/session_x/runtime_resources/py_modules_files/_ray_pkg_1/out"),
        "storage_path: {tmp}/ray/session_x/runtime_resources/py_modules_files/_ray_pkg_1/out is inside a Ray "
        "job's temporary working directory (under {tmp}/ray/session_x/runtime_resources), which Ray deletes after "
        "the job; a relative storage_path, like the default ./hpsearch-results, lands there under `ray job submit "
        "--working-dir`: use an absolute path on storage every node reaches, e.g. --set "
        "storage_path=/mnt/shared/hpsearch-results",
    ),
    # --- --set values the flag cannot take (the message names the flag)
    (
        "set-unparsable-value",
        with_set("scaling.num_workers=[1"),
        "--set scaling.num_workers=[1: not valid YAML: line 1, column 3: expected ',' or ']', but got '<stream end>'",
    ),
    (
        "set-unclosed-quote",
        with_set("name='abc"),
        "--set name='abc: not valid YAML: line 1, column 5: found unexpected end of stream",
    ),
    (
        "set-without-equals",
        with_set("scaling.num_workers"),
        "--set scaling.num_workers: must be KEY=VALUE with a dotted KEY, e.g. --set scaling.num_workers=2",
    ),
    (
        "set-without-key",
        with_set("=2"),
        "--set =2: must be KEY=VALUE with a dotted KEY, e.g. --set scaling.num_workers=2",
    ),
    (
        "set-empty-key-part",
        with_set("scaling..num_workers=2"),
        "--set scaling..num_workers=2: the key 'scaling..num_workers' has an empty part; write a dotted key like "
        "scaling.num_workers",
    ),
    (
        "set-through-a-scalar",
        with_set("mode.goal=min"),
        "--set mode.goal=min: cannot set mode.goal: mode holds 'min', not a mapping",
    ),
    (
        "set-python-tag",
        with_set("name=!!python/object/apply:os.system [ls]"),
        "--set name=!!python/object/apply:os.system [ls]: not valid YAML: line 1, column 1: could not determine a "
        "constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'",
    ),
    (
        "set-duplicate-key",
        with_set("scaling={num_workers: 1, num_workers: 2}"),
        "--set scaling={num_workers: 1, num_workers: 2}: not valid YAML: line 1, column 18: duplicate key "
        "'num_workers' (first on line 1, again on line 1)",
    ),
    (
        "set-alias-bomb",
        with_set("search_space.x=" + billion_laughs(6).removeprefix(TEXT).replace("\n", ", ").join("{}")),
        "--set search_space.x={l0: &l0 [lol, lol, lol, lol, lol, lol, lo...: not valid YAML: the document expands "
        "to more than 100,000 values once its aliases (*name) are expanded; a spec may use anchors and aliases, "
        "but at most 100,000 values in all",
    ),
    ("set-breaks-a-value", with_set("num_samples=0"), "num_samples: must be greater than 0, got 0"),
    (
        "set-unknown-key",
        with_set("scaling.num_worker=2"),
        "scaling.num_worker: unknown key; did you mean 'num_workers'? (allowed: num_workers, use_gpu, "
        "resources_per_worker, placement_strategy, resize_interval_s)",
    ),
    ("set-nan", with_set("search_space.lr.low=.nan"), "search_space.lr.low: must be a finite number, got nan"),
    (
        "set-quoted-number",
        with_set("num_samples='4'"),
        "num_samples: must be a valid integer (write it as a number, e.g. 1.0e-4, not as a string), got '4'",
    ),
    # --- train loops Ray Train cannot call as train_loop(config)
    (
        "trainable-takes-no-config",
        put("trainable", "loops.py:no_config"),
        "trainable: 'loops.py:no_config' must be a per-worker train loop called as train_loop(config), but its "
        "signature is no_config()",
    ),
    (
        "trainable-keyword-only-config",
        put("trainable", "loops.py:keyword_only"),
        "trainable: 'loops.py:keyword_only' must be a per-worker train loop called as train_loop(config), but its "
        "signature is keyword_only(*, config)",
    ),
    (
        "trainable-is-a-class",
        put("trainable", "loops.py:Loop"),
        "trainable: 'loops.py:Loop' is a class; it must be a per-worker train loop function called as "
        "train_loop(config) (Ray Tune's class trainables cannot run as a Ray Train loop)",
    ),
    (
        "trainable-is-async",
        put("trainable", "loops.py:async_loop"),
        "trainable: 'loops.py:async_loop' is an async function, which returns without running its body when Ray "
        "Train calls it; it must be a plain function called as train_loop(config)",
    ),
    (
        "trainable-is-a-generator",
        put("trainable", "loops.py:generator_loop"),
        "trainable: 'loops.py:generator_loop' is a generator function (it yields), which returns without running "
        "its body when Ray Train calls it; it must be a plain function called as train_loop(config)",
    ),
    (
        "trainable-file-syntax-error",
        Run(spec=put("trainable", "broken.py:train_loop"), files={"broken.py": "def train_loop(config)\n    pass\n"}),
        "trainable: importing {tmp}/broken.py failed: SyntaxError: expected ':' (broken.py, line 1)",
    ),
    (
        "trainable-file-exits-on-import",
        Run(
            spec=put("trainable", "script.py:train_loop"),
            files={"script.py": "import sys\n\ndef train_loop(config):\n    pass\n\nsys.exit(3)\n"},
        ),
        "trainable: importing {tmp}/script.py called sys.exit(3); a file that runs a script when imported must "
        'guard that code with `if __name__ == "__main__":`',
    ),
    (
        "trainable-not-a-string",
        put("trainable", ["loops.py:train_loop"]),
        "trainable: must be a valid string, got ['loops.py:train_loop']",
    ),
    (
        "trainable-no-function-name",
        put("trainable", "loops.py:"),
        "trainable: must look like 'package.module:function' or 'path/to/file.py:function', got 'loops.py:'",
    ),
    (
        "trainable-a-constant",
        put("trainable", "math:pi"),
        "trainable: 'math:pi' is not a callable but a float: 3.141592653589793",
    ),
    # --- spec files that are not a YAML spec
    (
        "spec-empty",
        b"",
        "<spec>: the spec file is empty; a spec needs at least name, trainable, metric and mode",
    ),
    (
        "spec-only-comments",
        "# TODO: write the spec\n",
        "<spec>: the spec file holds no keys, only comments or null; a spec needs at least name, trainable, metric "
        "and mode",
    ),
    (
        "spec-binary",
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        "<spec>: not a text file (a NUL byte at byte 8); a spec is a YAML text file (wrong file?)",
    ),
    (
        "spec-invalid-utf8",
        b"name: caf\xe9\n",
        "<spec>: not UTF-8 text (byte 0xe9 at byte 9); save the spec as UTF-8",
    ),
    (
        "spec-utf16",
        "name: x\n".encode("utf-16"),
        "<spec>: UTF-16 text (it starts with a UTF-16 byte order mark); save the spec as UTF-8",
    ),
    (
        "spec-is-a-folder",
        Run(spec_arg="specs", files={"specs/a.yaml": TEXT, "specs/notes.txt": "x"}, write_spec=False),
        "<spec>: is a folder, not a spec file (YAML files in it: a.yaml)",
    ),
    (
        "spec-missing",
        Run(spec_arg="missing.yaml", write_spec=False),
        "<spec>: cannot read the spec file: No such file or directory",
    ),
    (
        "spec-missing-close-name",
        Run(spec_arg="spec.yml"),
        "<spec>: cannot read the spec file: No such file or directory; did you mean 'spec.yaml'?",
    ),
    (
        "yaml-alias-bomb",
        billion_laughs(),
        "<spec>: not valid YAML: the document expands to more than 100,000 values once its aliases (*name) are "
        "expanded; a spec may use anchors and aliases, but at most 100,000 values in all",
    ),
    (
        "yaml-recursive-alias",
        TEXT + "search_space: &s {inner: *s}\n",
        "<spec>: not valid YAML: line 5, column 15: an alias refers to a value that contains it (a recursive "
        "structure cannot be a spec value)",
    ),
    (
        "yaml-nested-too-deeply",
        TEXT + "search_space: {x: " + "[" * 600 + "]" * 600 + "}\n",
        "<spec>: not valid YAML: it is nested too deeply to read (a spec needs only a few levels)",
    ),
    (
        "yaml-tab-indent",
        "name: x\n\tmetric: m\n",
        "<spec>: not valid YAML: line 2, column 1: found character '\\t' that cannot start any token",
    ),
    ("yaml-number-key", TEXT + "1: one\n", "<spec>: a spec's keys must be strings, got 1"),
    (
        "yaml-too-many-values",
        MANY_VALUES,
        # the document, the 4 keys of TEXT and their values, notes and its list: 11 values before the list's first
        f"<spec>: not valid YAML: line 5, column {len('notes: [') + 3 * (20_000 - 11) + 1}: it holds more than "
        "20,000 values; a spec holds a few hundred (wrong file?)",
    ),
    (
        "spec-too-large",
        PADDED,
        f"<spec>: the file is {len(PADDED):,} bytes, over the limit of 1 MiB (1,048,576 bytes); a spec is a small "
        "YAML file (wrong file?)",
    ),
    (
        "spec-a-device",
        Run(spec_arg="/dev/zero", write_spec=False),
        "<spec>: is a character device, not a spec file; hpsearch reads a spec only from a regular file (save it "
        "to one)",
    ),
    # --- integers past 64 bits, and past what Python converts: one problem at their path, not a traceback
    (
        "int-5000-digits-num-samples",
        TEXT + f"num_samples: {BIG}\n",
        f"num_samples: {INT64}, got {'9' * 20}... (5,000 digits)",
    ),
    (
        "int-5000-digits-space-bound",
        TEXT + f"search_space:\n  n: {{type: int, low: 1, high: {BIG}}}\n",
        f"search_space.n.high: {INT64}, got {'9' * 20}... (5,000 digits)",
    ),
    (
        "int-5000-digits-choice-value",
        TEXT + f"search_space:\n  n: {{type: choice, values: [1, -{BIG}]}}\n",
        f"search_space.n.values[1]: {INT64}, got -{'9' * 19}... (5,000 digits)",
    ),
    (
        "int-5000-digits-num-workers",
        TEXT + f"scaling: {{num_workers: {BIG}}}\n",
        f"scaling.num_workers: {INT64}, got {'9' * 20}... (5,000 digits)",
    ),
    (
        "int-hex-4000-digits-seed",
        TEXT + f"searcher: {{type: optuna, seed: 0x{'f' * 4000}}}\n",
        f"searcher.seed: {INT64}, got 0x{'f' * 18}... (4,000 digits)",
    ),
    (
        "int-sexagesimal-300000-parts",  # 1:59:59:... is base 60 in YAML 1.1: converting it takes quadratic time
        TEXT + "num_samples: 1" + ":59" * 300_000 + "\n",
        f"num_samples: {INT64}, got 1:59:59:59:59:59:59:... (600,001 digits)",
    ),
    ("int-past-64-bits", put("searcher.seed", 2**64), f"searcher.seed: {INT64}, got 18446744073709551616"),
    (
        "set-int-5000-digits",
        with_set(f"num_samples={BIG}"),
        f"--set num_samples={'9' * 45}...: {INT64}, got {'9' * 20}... (5,000 digits)",
    ),
    (
        "set-int-5000-digits-in-a-mapping",
        with_set(f"scaling={{num_workers: {BIG}}}"),
        f"--set scaling={{num_workers: {'9' * 35}...: scaling.num_workers: {INT64}, got {'9' * 20}... (5,000 digits)",
    ),
    # --- other realistic mistakes
    ("mode-uppercase", put("mode", "MIN"), "mode: must be 'min' or 'max', got 'MIN'; did you mean 'min'?"),
    (
        "name-with-a-space",
        put("name", "my search"),
        "name: must use only letters, digits, '.', '_' and '-' and not start with '.', got 'my search'",
    ),
    (
        "metric-a-list-mode-a-string",
        put("metric", ["val_loss", "val_acc"]),
        "mode: must be a list of 2 modes, one per metric (e.g. mode: [min, min]), got 'min'",
    ),
    (
        "scaling-typo",
        put("scalng", {"num_workers": 2}),
        "scalng: unknown key; did you mean 'scaling'? (allowed: name, trainable, metric, mode, num_samples, "
        "search_space, searcher, scheduler, scaling, resources, failure, checkpoint, aggregate, datasets, data, tracking, budget, warm_start, constraints, storage_path)",
    ),
    (
        "num-workers-string",
        put("scaling.num_workers", "2"),
        "scaling.num_workers: must be a valid integer (write it as a number, e.g. 1.0e-4, not as a string), got '2'",
    ),
    ("use-gpu-string", put("scaling.use_gpu", "true"), "scaling.use_gpu: must be a valid boolean, got 'true'"),
    (
        "resources-per-worker-a-number",
        put("scaling.resources_per_worker", 1),
        "scaling.resources_per_worker: must be a valid dictionary, got 1",
    ),
    # --- constraints
    (
        "constraints-not-a-list",
        put("constraints", {"metric": "n_params", "max": 1.0e6}),
        "constraints: must be a list such as [{metric: n_params, max: 1.0e6}], got {'metric': 'n_params', 'max': 1000000.0}",
    ),
    (
        "constraint-without-bound",
        put("constraints", [{"metric": "n_params"}]),
        "constraints[0]: needs a bound, max, min or both: e.g. {metric: n_params, max: 20} keeps n_params at most 20, "
        "got {'metric': 'n_params'}",
    ),
    (
        "constraint-unknown-key",
        put("constraints", [{"metric": "latency_ms", "max": 20, "below": 10}]),
        "constraints[0].below: unknown key (allowed: metric, max, min)",
    ),
    (
        "constraint-infinite-bound",
        put("constraints", [{"metric": "latency_ms", "max": float("inf")}]),
        "constraints[0].max: must be a finite number, got inf",
    ),
    (
        "constraint-empty-range",
        put("constraints", [{"metric": "ratio", "min": 0.9, "max": 0.1}]),
        "constraints[0].min: must be at most max (0.1), got 0.9: no value could hold both",
    ),
    (
        "constraint-metric-twice",
        put("constraints", [{"metric": "n_params", "max": 1.0e6}, {"metric": "n_params", "min": 10}]),
        "constraints[1].metric: 'n_params' is already constrained by constraints[0]; give both bounds in one item "
        "({metric: ..., min: ..., max: ...})",
    ),
    (
        "constraints-with-cmaes",
        lambda spec: spec.update(
            constraints=[{"metric": "n_params", "max": 1.0e6}], searcher={"type": "optuna", "sampler": "cmaes"}
        ),
        "searcher.sampler: 'cmaes' cannot search under constraints: Optuna's CmaEsSampler ignores them; "
        "use tpe, gp, nsga2 or nsga3 (or leave out constraints)",
    ),
    (
        "constraint-not-a-mapping",
        put("constraints", ["n_params <= 1e6"]),
        "constraints[0]: must be a mapping such as {metric: n_params, max: 1.0e6}, got 'n_params <= 1e6'",
    ),
    ("space-null-bound", put("search_space.lr.low", None), "search_space.lr.low: must be a valid number, got None"),
    (
        "space-const-without-value",
        put("search_space.epochs", {"type": "const"}),
        "search_space.epochs.value: required key is missing",
    ),
    (
        "space-log-int-from-zero",
        put("search_space.layers", {"type": "int", "low": 0, "high": 3, "log": True}),
        "search_space.layers.low: must be > 0 when log is true, got 0",
    ),
    (
        "space-slash-in-name",
        put("search_space", {"optim/lr": 0.1}),
        "search_space.optim/lr: parameter names must be non-empty strings without '.' or '/', got 'optim/lr'",
    ),
    (
        "grid-with-hyperopt",
        both(put("searcher", {"type": "hyperopt"}), put("search_space.hidden.type", "grid")),
        "search_space.hidden: grid values need searcher random; searcher 'hyperopt' cannot take them (use type: "
        "choice)",
    ),
    (
        "n-startup-trials-with-cmaes",
        put("searcher", {"type": "optuna", "sampler": "cmaes", "n_startup_trials": 5}),
        "searcher.n_startup_trials: applies to samplers 'tpe' and 'gp' only, not 'cmaes'",
    ),
    ("searcher-a-list", put("searcher", ["optuna"]), "searcher: must be a mapping with a 'type' key, got ['optuna']"),
    (
        "scheduler-type-a-number",
        put("scheduler", {"type": 3}),
        "scheduler.type: unknown scheduler 3 (allowed: 'fifo', 'asha', 'median', 'hyperband', 'pbt' or 'pb2')",
    ),
    ("asha-max-t-zero", put("scheduler.max_t", 0), "scheduler.max_t: must be greater than 0, got 0"),
    ("num-to-keep-zero", put("checkpoint.num_to_keep", 0), "checkpoint.num_to_keep: must be greater than 0, got 0"),
    (
        "controller-retries-fraction",
        put("failure.controller_retries", 1.5),
        "failure.controller_retries: must be a valid integer, got 1.5",
    ),
    (
        "max-concurrent-zero",
        put("resources.max_concurrent_trials", 0),
        "resources.max_concurrent_trials: must be 'auto' or greater than 0, got 0",
    ),
    (
        "aggregate-default-typo",
        put("aggregate.default", "average"),
        "aggregate.default: must be 'mean', 'min', 'max', 'sum' or 'rank0', got 'average'",
    ),
    # --- datasets and data (Ray Data)
    (
        "dataset-factory-missing",
        put("datasets", {"train": "loops.py:train_set"}),
        "datasets.train: 'loops.py' has no attribute 'train_set' (callables there: Loop, async_loop, generator_loop, keyword_only, no_config, not_a_loop, train_loop)",
    ),
    (
        "dataset-factory-class",
        put("datasets", {"train": "loops.py:Loop"}),
        "datasets.train: 'loops.py:Loop' is a class; a dataset factory is a function returning a ray.data.Dataset",
    ),
    (
        "dataset-factory-async",
        put("datasets", {"train": "loops.py:async_loop"}),
        "datasets.train: 'loops.py:async_loop' is an async function; a dataset factory is a plain function returning a ray.data.Dataset",
    ),
    (
        "dataset-factory-two-args",
        put("datasets", {"train": "loops.py:not_a_loop"}),
        "datasets.train: 'loops.py:not_a_loop' must be called as factory() or factory(config), but its signature is not_a_loop(config, extra)",
    ),
    (
        "dataset-factory-config-with-once",
        put("datasets", {"train": "loops.py:train_loop"}),
        "datasets.train: train_loop(config) takes the trial's config, but data.materialize is 'once' (built once for every trial, it gets no config): give it no required argument, or set data.materialize: per_trial",
    ),
    (
        "dataset-name-with-space",
        put("datasets", {"my data": "loops.py:no_config"}),
        "datasets.my data: a dataset name must be letters, digits, '_', '.', '-' (not first), got 'my data'",
    ),
    (
        "datasets-a-list",
        put("datasets", ["loops.py:no_config"]),
        "datasets: must be a mapping of dataset names to 'module:function' factories, got ['loops.py:no_config']",
    ),
    (
        "data-split-unknown",
        both(put("datasets", {"train": "loops.py:no_config"}), put("data", {"split": ["valid"]})),
        "data.split[0]: names no dataset: 'valid' (datasets: train)",
    ),
    (
        "data-materialize-typo",
        both(put("datasets", {"train": "loops.py:no_config"}), put("data", {"materialize": "per-trial"})),
        "data.materialize: must be 'once' or 'per_trial', got 'per-trial'; did you mean 'per_trial'?",
    ),
    (
        "data-without-datasets",
        put("data", {"cpus": 2}),
        "data: has no effect without a datasets section (name the datasets to feed)",
    ),
]


def _write(tmp: Path, case: Any) -> tuple[Path, Run]:
    """Lay out one row's files in ``tmp``; return the path to give the command and the row as a Run."""
    run = case if isinstance(case, Run) else Run(spec=case)
    (tmp / "loops.py").write_text(FILE_LOOP)
    for rel, text in run.files.items():
        target = tmp / rel
        if text is None:
            target.mkdir(parents=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    if run.write_spec:
        path = tmp / "spec.yaml"
        if isinstance(run.spec, bytes):
            path.write_bytes(run.spec)
        elif isinstance(run.spec, str):
            path.write_text(run.spec)
        else:
            spec = copy.deepcopy(GOOD)
            if run.spec is not None:
                run.spec(spec)
            path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return tmp / run.spec_arg, run


def _tree(folder: Path) -> list[str]:
    """Every file and folder under ``folder``, to show that a refused run left nothing behind."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _expected(message: str, tmp: Path) -> str:
    experiment_dir = tmp / LONG_STORAGE / GOOD["name"]
    return message.replace("{tmp}", str(tmp)).replace(
        "{experiment_dir_bytes}", str(len(os.fsencode(str(experiment_dir))))
    )


@pytest.mark.parametrize(("case", "expected"), [pytest.param(c, e, id=i) for i, c, e in CORPUS])
def test_bad_input_exits_2_with_one_message_and_writes_nothing(case, expected, tmp_path, monkeypatch, capsys):
    path, run = _write(tmp_path, case)
    monkeypatch.chdir(tmp_path / run.cwd)
    before = _tree(tmp_path)

    code = main(["run", str(path), *run.argv])

    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    assert err == f"Error: invalid spec in {path} (1 problem):\n  - {_expected(expected, tmp_path)}\n"
    assert _tree(tmp_path) == before  # nothing written: no experiment folder, no probe file, no storage folder


def test_the_corpus_is_big_enough():
    assert len(CORPUS) >= 80
    assert len({row[0] for row in CORPUS}) == len(CORPUS)  # ids are unique


def test_gpus_asked_of_a_cluster_without_gpus(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec = copy.deepcopy(GOOD)
    spec["scaling"] = {"num_workers": 2, "use_gpu": True}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["plan", str(path), "--cluster", "2x{CPU: 8}"]) == 2
    assert capsys.readouterr().err == "Error: a worker needs GPU: 1 but the largest node has GPU: 0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]


#: Spec files each command must refuse at once: (id, what to lay out in the folder, the message).
NOT_SPECS = [
    (
        "fifo",
        "fifo",
        "<spec>: is a named pipe (FIFO), not a spec file; hpsearch reads a spec only from a regular file (save it "
        "to one)",
    ),
    (
        "15-mib",
        "15-mib",
        "<spec>: the file is 15,728,640 bytes, over the limit of 1 MiB (1,048,576 bytes); a spec is a small YAML "
        "file (wrong file?)",
    ),
    ("not-utf8", b"name: caf\xe9\n", "<spec>: not UTF-8 text (byte 0xe9 at byte 9); save the spec as UTF-8"),
    (
        "alias-bomb",
        billion_laughs(),
        "<spec>: not valid YAML: the document expands to more than 100,000 values once its aliases (*name) are "
        "expanded; a spec may use anchors and aliases, but at most 100,000 values in all",
    ),
    ("many-values", MANY_VALUES, next(e for i, _, e in CORPUS if i == "yaml-too-many-values")),
    ("5000-digits", TEXT + f"num_samples: {BIG}\n", f"num_samples: {INT64}, got {'9' * 20}... (5,000 digits)"),
]


@pytest.mark.parametrize("command", ["run", "validate", "check", "plan"])
@pytest.mark.parametrize(("what", "expected"), [pytest.param(w, e, id=i) for i, w, e in NOT_SPECS])
def test_each_command_refuses_a_file_that_is_no_spec_at_once_in_one_block(
    command, what, expected, tmp_path, monkeypatch, capsys
):
    """Issue 36: one `Error:` block, exit 2, no traceback, nothing written, Ray not started, in well under 2 s
    and a few MB (a FIFO nobody writes to is not waited on; a 15 MiB file is not read; a bomb is not expanded)."""
    import time
    import tracemalloc

    from hpsearch.runtime.nodes import connect as cluster

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "spec.yaml"
    if what == "fifo":
        os.mkfifo(path)
    elif what == "15-mib":
        with open(path, "wb") as f:
            f.truncate(15 * 2**20)
    else:
        path.write_bytes(what if isinstance(what, bytes) else what.encode())
    monkeypatch.setattr(cluster, "connect", lambda *a, **k: pytest.fail("Ray was started"))
    before = _tree(tmp_path)
    # the CPU the refusal costs, not the wall time: the bound holds on a busy machine too (xdist, a search beside it)
    start = time.process_time()
    code = main([command, str(path)])
    seconds = time.process_time() - start
    assert code == 2
    assert capsys.readouterr().err == f"Error: invalid spec in {path} (1 problem):\n  - {expected}\n"
    assert _tree(tmp_path) == before
    assert seconds < 2.0
    if command == "validate":  # again, measured (tracing slows Python down some 3 times): each reads the spec alike
        tracemalloc.start()
        try:
            assert main([command, str(path)]) == 2
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 40 * 2**20  # bytes allocated while refusing it


# ----------------------------------------------------------------------------- bad flags, refused before Ray starts

BAD_FLAGS = [
    (
        ["check", "{spec}", "--report-timeout", "-1"],
        "argument --report-timeout: must be a number of seconds above 0, got '-1'",
    ),
    (
        ["check", "{spec}", "--report-timeout", "nan"],
        "argument --report-timeout: must be a number of seconds above 0, got 'nan'",
    ),
    (
        ["check", "{spec}", "--report-timeout", "0"],
        "argument --report-timeout: must be a number of seconds above 0, got '0'",
    ),
    (["check", "{spec}", "--reports", "0"], "argument --reports: must be a whole number of at least 1, got '0'"),
]


@pytest.mark.parametrize(("argv", "expected"), BAD_FLAGS, ids=[" ".join(a[2:]) for a, _ in BAD_FLAGS])
def test_a_bad_flag_exits_2_in_one_line_before_ray_starts(argv, expected, tmp_path, monkeypatch, capsys):
    from hpsearch.runtime.nodes import connect as cluster

    monkeypatch.chdir(tmp_path)
    path, _ = _write(tmp_path, Run(spec=None))
    monkeypatch.setattr(cluster, "connect", lambda *a, **k: pytest.fail("Ray was started"))
    before = _tree(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main([a.replace("{spec}", str(path)) for a in argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"hpsearch {argv[0]}: error: {expected}" and "Traceback" not in err
    assert _tree(tmp_path) == before


_AMOUNT = "must be a finite number >= 0 and <= 1,000,000,000"


def _cluster(command: str, cluster: str, expected: str, case: str, *more: str) -> Any:
    """A row of BAD_CLUSTERS: ``hpsearch plan`` (or ``run``, given the --address it needs) with ``--cluster``."""
    argv = ["plan", "{spec}"] if command == "plan" else ["run", "{spec}", "--address", "127.0.0.1:1"]
    return pytest.param([*argv, "--cluster", cluster, *more], expected, id=f"{command}-{case}")


#: ``--cluster`` values past a bound (hpsearch.planning.cluster_shape's MAX_*), refused through main's `Error:` line.
BAD_CLUSTERS = [
    _cluster(
        "plan", "1000000000x{CPU: 4}", "--cluster term 1: count must be at most 10,000 nodes, got '1000000000'", "1e9"
    ),
    _cluster(
        "plan",
        "9" * 20 + "x{CPU: 4}",
        f"--cluster term 1: count must be at most 10,000 nodes, got '{'9' * 20}'",
        "20-digit-count",
    ),
    _cluster(
        "plan",
        "1x{CPU: 4} + 0..6000x{CPU: 4} + 0..6000x{CPU: 4}",
        "--cluster: must have at most 10,000 nodes in all, got 12,001 at the maximum size (1 + 0..6000 + 0..6000)",
        "total-nodes",
    ),
    _cluster("plan", "1x{CPU: .nan}", f"--cluster term 1.CPU: {_AMOUNT}, got nan", "nan"),
    _cluster("plan", "1x{GPU: .inf}", f"--cluster term 1.GPU: {_AMOUNT}, got inf", "inf"),
    _cluster("plan", "2x{CPU: -4}", f"--cluster term 1.CPU: {_AMOUNT}, got -4", "negative"),
    _cluster(
        "plan",
        "1x{CPU: " + "9" * 5000 + "}",
        f"--cluster: must be at most 4,096 characters, got 5,009: '1x{{CPU: {'9' * 48}...",
        "5000-digit-amount",
    ),
    _cluster(
        "plan",
        "1x{CPU: " + "1" * 40 + "}",
        f"--cluster term 1: a number must have at most 32 digits, got one of 40: '{'1' * 40}'",
        "40-digit-amount",
    ),
    _cluster(
        "plan",
        "{tmp}/cluster.fifo",
        "--cluster {tmp}/cluster.fifo: must be a regular YAML file, got a FIFO (named pipe)",
        "fifo",
    ),
    _cluster(
        "plan", "{tmp}/big.yaml", "--cluster {tmp}/big.yaml: must be a file of at most 64 KiB, got a larger one", "big"
    ),
    _cluster(
        "plan",
        "1x{CPU: 8} + 0..100000x{CPU: 8, GPU: 8}",
        "--cluster term 2: count must be at most 10,000 nodes, got '0..100000'",
        "emit-rayjob-100000-nodes",
        *["--emit", "rayjob", "--image", "example/hpsearch:1"],
    ),
    _cluster(
        "run",
        "1x{CPU: 4} + 0..100000x{CPU: 4}",
        "--cluster term 2: count must be at most 10,000 nodes, got '0..100000'",
        "100000-nodes",
    ),
    _cluster("run", "1x{CPU: 4} + 0..4x{CPU: .nan}", f"--cluster term 2.CPU: {_AMOUNT}, got nan", "nan"),
]


@pytest.mark.parametrize(("argv", "expected"), BAD_CLUSTERS)
def test_a_bad_cluster_exits_2_in_one_error_line_at_once_before_ray_starts(
    argv, expected, tmp_path, monkeypatch, capsys
):
    from hpsearch.runtime.nodes import connect as cluster

    monkeypatch.chdir(tmp_path)
    path, _ = _write(tmp_path, Run(spec=None))
    os.mkfifo(tmp_path / "cluster.fifo")  # nobody writes to it: reading it would wait forever
    (tmp_path / "big.yaml").write_text("# padding\n" * 7000)
    monkeypatch.setattr(cluster, "connect", lambda *a, **k: pytest.fail("Ray was started"))
    before = _tree(tmp_path)
    start = time.process_time()  # CPU, not wall time, as above
    code = main([a.replace("{spec}", str(path)).replace("{tmp}", str(tmp_path)) for a in argv])
    assert time.process_time() - start < 2.0
    assert code == 2
    assert capsys.readouterr().err == f"Error: {expected.replace('{tmp}', str(tmp_path))}\n"  # one line, no traceback
    assert _tree(tmp_path) == before
