"""Spec loading and validation: every user mistake is one exact line, all found at once."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_experiment import write_experiment

from hpsearch.analysis import load_results, summarize
from hpsearch.errors import HpsearchError, SpecError
from hpsearch.spec import SPEC_KEYS, FailureSettings, load_spec, total_trials, varying_params
from hpsearch.spec.objectives import is_multi_objective, objectives_or_primary
from hpsearch.spec.space import ChoiceParam, ConstParam, FloatParam, GridParam, IntParam

TRAIN_PY = """\
def train_loop(config):
    return None


CONFIG = {"epochs": 3}
"""

#: A small valid spec; the table below patches one fragment of it at a time.
BASE: dict[str, Any] = {
    "name": "unit",
    "trainable": "train.py:train_loop",
    "metric": "loss",
    "mode": "min",
    "search_space": {"lr": {"type": "float", "low": 1.0e-4, "high": 1.0e-1, "log": True}},
}

ALLOWED_TOP = (
    "name, trainable, metric, mode, num_samples, search_space, searcher, scheduler, scaling, "
    "resources, failure, checkpoint, aggregate, datasets, data, tracking, budget, warm_start, constraints, storage_path"
)


def write_spec(folder: Path, spec: dict[str, Any], filename: str = "spec.yaml") -> Path:
    path = folder / filename
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def spec_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path holding ``train.py``, and the current directory (for relative storage paths)."""
    (tmp_path / "train.py").write_text(TRAIN_PY, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def problems_of(err: SpecError) -> list[str]:
    return [str(p) for p in err.problems]


# --------------------------------------------------------------------------- a valid spec


def test_minimal_dict_spec_gets_every_default() -> None:
    spec = load_spec(
        {"name": "mini", "trainable": "pkg.mod:fn", "metric": "loss", "mode": "max"}, check_trainable=False
    )
    assert spec.to_dict() == {
        "name": "mini",
        "trainable": "pkg.mod:fn",
        "metric": "loss",
        "mode": "max",
        "num_samples": 1,
        "search_space": {},
        "searcher": {"type": "random", "seed": None},
        "scheduler": {"type": "fifo"},
        "scaling": {"num_workers": 1, "use_gpu": False, "resources_per_worker": None, "placement_strategy": "PACK"},
        "resources": {
            "driver_cpus": 0.25,
            "max_concurrent_trials": "auto",
            "driver_node": "head",
            "driver_memory_gb": 1.0,
            "worker_memory_gb": 0.7,
            "reuse_actors": True,
            "priority": 1.0,
        },
        "failure": {
            "worker_retries": 1,
            "trial_retries": 0,
            "controller_retries": 2,
            "preemption_retries": 10,
            "worker_start_timeout_s": 60.0,
            "node_start_timeout_s": 900.0,
            "report_timeout_s": None,
            "preemption_grace_s": 0.0,
            "relax_collectives_on_preemption": False,
        },
        "checkpoint": {"num_to_keep": 2},
        "aggregate": {"default": "mean", "metrics": {}},
        "datasets": {},
        "data": {"split": ["train"], "materialize": "once", "cpus": None},
        "tracking": {"tensorboard": False},
        "budget": {"max_wall_time": None, "max_failed_trials": None, "target": {}, "max_resource_hours": {}},
        "storage_path": str(Path("hpsearch-results").resolve()),
    }
    assert spec.source is None


def test_to_dict_round_trips_through_yaml(spec_dir: Path) -> None:
    raw = {
        **BASE,
        "num_samples": 3,
        "search_space": {
            "lr": {"type": "float", "low": 1.0e-4, "high": 1.0e-1, "log": True},
            "dropout": {"type": "float", "low": 0.0, "high": 0.4, "step": 0.1},
            "opt": {"betas": {"b1": 0.9}, "layers": {"type": "int", "low": 1, "high": 3}},
            "batch": {"type": "grid", "values": [32, 64]},
            "extra": {"type": "const", "value": {"type": "literal"}},
        },
        "scheduler": {"type": "asha", "max_t": 9, "grace_period": 3},
        "scaling": {"num_workers": 2, "resources_per_worker": {"CPU": 0.5}},
    }
    spec = load_spec(write_spec(spec_dir, raw))
    again = load_spec(write_spec(spec_dir, spec.to_dict(), "as_run.yaml"))
    assert again == spec
    assert again.to_dict() == spec.to_dict()


def test_spec_from_yaml_file(spec_dir: Path) -> None:
    path = spec_dir / "spec.yaml"
    path.write_text(
        "name: from-file\n"
        "trainable: train.py:train_loop\n"
        "metric: val_loss\n"
        "mode: min\n"
        "num_samples: 4\n"
        "search_space:\n"
        "  lr: {type: float, low: 1e-4, high: 1e-1, log: true}\n"
        "  wd: {type: float, low: 1E-6, high: 1.0e-2, log: true}\n"
        "  hidden: {type: choice, values: [32, 64]}\n"
        "  layers: {type: int, low: 1, high: 3}\n"
        "  epochs: 5\n"
        "searcher: {type: optuna, seed: 0}\n"
        "scheduler: asha\n",
        encoding="utf-8",
    )
    spec = load_spec(path)
    assert spec.source == path
    assert spec.num_samples == 4
    assert spec.search_space == {
        "lr": FloatParam(low=1e-4, high=1e-1, log=True),
        "wd": FloatParam(low=1e-6, high=1e-2, log=True),
        "hidden": ChoiceParam(values=[32, 64]),
        "layers": IntParam(low=1, high=3),
        "epochs": ConstParam(value=5),
    }
    assert spec.searcher.as_dict() == {
        "type": "optuna",
        "sampler": "tpe",
        "seed": 0,
        "n_startup_trials": None,
        "failed_trials": "infeasible",
    }
    assert spec.scheduler.type == "asha"


def test_yaml_1e_minus_4_without_a_dot_is_a_float(spec_dir: Path) -> None:
    path = spec_dir / "spec.yaml"
    path.write_text(
        "name: n\ntrainable: train.py:train_loop\nmetric: m\nmode: min\n"
        "search_space:\n  lr: {type: float, low: 1e-4, high: 1e-1}\n  tag: 1e-4\n",
        encoding="utf-8",
    )
    spec = load_spec(path)
    assert spec.search_space["lr"].low == 1e-4 and isinstance(spec.search_space["lr"].low, float)
    assert spec.search_space["tag"] == ConstParam(value=1e-4)
    assert isinstance(spec.search_space["tag"].value, float)


def test_numeric_string_bound_says_how_to_write_a_number() -> None:
    with pytest.raises(SpecError) as info:
        load_spec(
            {**BASE, "search_space": {"lr": {"type": "float", "low": "1e-4", "high": 0.1}}}, check_trainable=False
        )
    assert problems_of(info.value) == [
        "search_space.lr.low: must be a valid number (write it as a number, e.g. 1.0e-4, not as a string), got '1e-4'"
    ]


def test_nested_groups_and_a_const_that_looks_like_a_distribution() -> None:
    spec = load_spec(
        {
            **BASE,
            "search_space": {
                "optimizer": {
                    "lr": {"type": "float", "low": 0.1, "high": 1.0},
                    "betas": {"b1": 0.9, "b2": {"type": "choice", "values": [0.99, 0.999]}},
                },
                "extra": {"type": "const", "value": {"type": "literal"}},
                "epochs": 3,
            },
        },
        check_trainable=False,
    )
    assert spec.search_space == {
        "optimizer": {
            "lr": FloatParam(low=0.1, high=1.0),
            "betas": {"b1": ConstParam(value=0.9), "b2": ChoiceParam(values=[0.99, 0.999])},
        },
        "extra": ConstParam(value={"type": "literal"}),
        "epochs": ConstParam(value=3),
    }
    assert varying_params(spec) == ["optimizer.lr", "optimizer.betas.b2"]


@pytest.mark.parametrize(
    ("search_space", "num_samples", "expected"),
    [
        ({}, 4, 4),
        ({"b": {"type": "grid", "values": [1, 2, 3]}}, 2, 6),
        ({"b": {"type": "grid", "values": [1, 2, 3]}, "g": {"x": {"type": "grid", "values": ["a", "b"]}}}, 1, 6),
        ({"c": {"type": "choice", "values": [1, 2, 3]}}, 5, 5),
    ],
    ids=["no-grid", "grid-times-samples", "two-grids-multiply", "choice-is-not-a-grid"],
)
def test_total_trials(search_space: dict, num_samples: int, expected: int) -> None:
    spec = load_spec({**BASE, "num_samples": num_samples, "search_space": search_space}, check_trainable=False)
    assert total_trials(spec) == expected


# --------------------------------------------------------------------------- one mistake -> one exact line


def _set(path: str, value: Any):
    """A patch that sets a dotted path in the spec (``None`` removes the key)."""

    def patch(spec: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = spec
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value

    return patch


def _space(**params: Any):
    return _set("search_space", params)


BAD_FRAGMENTS = [
    pytest.param(
        _set("serch_space", {}),
        f"serch_space: unknown key; did you mean 'search_space'? (allowed: {ALLOWED_TOP})",
        id="top-level-key-typo",
    ),
    pytest.param(
        _space(lr={"type": "float", "low": 0.1, "high": 1.0, "stpe": 0.1}),
        "search_space.lr.stpe: unknown key; did you mean 'step'? (allowed: low, high, log, step, when)",
        id="distribution-key-typo",
    ),
    pytest.param(
        _space(lr={"type": "flaot", "low": 0.1, "high": 1.0}),
        "search_space.lr.type: unknown distribution type 'flaot'; did you mean 'float'? (allowed: 'float', 'int', "
        "'choice', 'grid' or 'const'; to pass a mapping with a 'type' key as a constant, write {type: const, value: ...})",
        id="distribution-type-typo",
    ),
    pytest.param(
        _space(lr={"type": "float", "low": 1.0, "high": 1.0}),
        "search_space.lr.low: must be less than high (1.0), got 1.0",
        id="low-equals-high",
    ),
    pytest.param(
        _space(n={"type": "int", "low": 5, "high": 2}),
        "search_space.n.low: must be less than high (2), got 5",
        id="int-low-above-high",
    ),
    pytest.param(
        _space(lr={"type": "float", "low": 0.0, "high": 1.0, "log": True}),
        "search_space.lr.low: must be > 0 when log is true, got 0.0",
        id="log-with-low-zero",
    ),
    pytest.param(
        _space(d={"type": "float", "low": 0.0, "high": 0.45, "step": 0.1}),
        "search_space.d.high: must be a multiple of step (0.1), got 0.45",
        id="float-high-not-multiple-of-step",
    ),
    pytest.param(
        _space(n={"type": "int", "low": 1, "high": 10, "step": 2}),
        "search_space.n.low: must be a multiple of step (2), got 1",
        id="int-low-not-multiple-of-step",
    ),
    pytest.param(
        _space(d={"type": "float", "low": 0.1, "high": 0.5, "step": 0.1, "log": True}),
        "search_space.d.step: cannot be combined with log: true",
        id="step-with-log",
    ),
    pytest.param(
        _space(d={"type": "float", "low": 0.0, "high": 1.0, "step": -0.1}),
        "search_space.d.step: must be greater than 0, got -0.1",
        id="negative-step",
    ),
    pytest.param(
        _space(**{"a.b": 1}),
        "search_space.a.b: parameter names must be non-empty strings without '.' or '/', got 'a.b'",
        id="dotted-parameter-name",
    ),
    pytest.param(
        _space(c={"type": "choice", "values": []}),
        "search_space.c.values: must have at least 1 value, got []",
        id="empty-choice-values",
    ),
    pytest.param(_set("num_samples", 0), "num_samples: must be greater than 0, got 0", id="num-samples-zero"),
    pytest.param(_set("num_samples", 2.0), "num_samples: must be a valid integer, got 2.0", id="num-samples-float"),
    pytest.param(_set("mode", "mni"), "mode: must be 'min' or 'max', got 'mni'; did you mean 'min'?", id="mode-typo"),
    pytest.param(_set("name", None), "name: required key is missing", id="name-missing"),
    pytest.param(
        _set("name", ".hidden"),
        "name: must use only letters, digits, '.', '_' and '-' and not start with '.', got '.hidden'",
        id="name-starts-with-dot",
    ),
    pytest.param(
        _set("name", "a/b"),
        "name: must use only letters, digits, '.', '_' and '-' and not start with '.', got 'a/b'",
        id="name-with-slash",
    ),
    pytest.param(
        _set("metric", ""),
        "metric: must be a non-empty string, got ''",
        id="metric-empty",
    ),
    pytest.param(
        _set("searcher", {"type": "optuan"}),
        "searcher.type: unknown searcher 'optuan'; did you mean 'optuna'? (allowed: 'random', 'optuna' or 'hyperopt')",
        id="searcher-type-typo",
    ),
    pytest.param(
        _set("searcher", "hyperpot"),
        "searcher.type: unknown searcher 'hyperpot'; did you mean 'hyperopt'? "
        "(allowed: 'random', 'optuna' or 'hyperopt')",
        id="searcher-shorthand-typo",
    ),
    pytest.param(
        _set("searcher", {"type": "optuna", "seeed": 1}),
        "searcher.seeed: unknown key; did you mean 'seed'? (allowed: sampler, seed, n_startup_trials, population_size, failed_trials)",
        id="searcher-option-typo",
    ),
    pytest.param(
        _set("searcher", {"type": "optuna", "sampler": "tpee"}),
        "searcher.sampler: must be 'tpe', 'cmaes', 'gp', 'random', 'nsga2' or 'nsga3', got 'tpee'; did you mean 'tpe'?",
        id="optuna-sampler-typo",
    ),
    pytest.param(
        _set("searcher", {"type": "optuna", "sampler": "cmaes", "n_startup_trials": 3}),
        "searcher.n_startup_trials: applies to samplers 'tpe' and 'gp' only, not 'cmaes'",
        id="optuna-startup-with-cmaes",
    ),
    pytest.param(
        _set("searcher", [1]), "searcher: must be a mapping with a 'type' key, got [1]", id="searcher-not-a-mapping"
    ),
    pytest.param(
        _set("scheduler", "ashaa"),
        "scheduler.type: unknown scheduler 'ashaa'; did you mean 'asha'? "
        "(allowed: 'fifo', 'asha', 'median', 'hyperband', 'pbt' or 'pb2')",
        id="scheduler-type-typo",
    ),
    pytest.param(
        _set("scheduler", {"type": "asha", "max_tt": 3}),
        "scheduler.max_tt: unknown key; did you mean 'max_t'? "
        "(allowed: max_t, grace_period, reduction_factor, brackets, time_attr, metric, mode)",
        id="scheduler-option-typo",
    ),
    pytest.param(
        _set("scheduler", {"type": "asha", "max_t": 5, "grace_period": 10}),
        "scheduler.grace_period: must be <= max_t (5), got 10",
        id="asha-grace-period-above-max-t",
    ),
    pytest.param(
        _set("scheduler", {"type": "asha", "reduction_factor": 1}),
        "scheduler.reduction_factor: must be greater than 1, got 1",
        id="asha-reduction-factor-one",
    ),
    pytest.param(
        _set("scheduler", {"max_t": 5}),
        "scheduler.max_t: unknown key; scheduler 'fifo' takes no options",
        id="option-for-default-fifo",
    ),
    pytest.param(
        lambda s: (
            _set("searcher", {"type": "optuna"})(s),
            _space(batch={"type": "grid", "values": [32, 64]})(s),
        ),
        "search_space.batch: grid values need searcher random; searcher 'optuna' cannot take them (use type: choice)",
        id="grid-with-optuna",
    ),
    pytest.param(
        lambda s: (_set("searcher", "hyperopt")(s), _space(batch={"type": "grid", "values": [32, 64]})(s)),
        "search_space.batch: grid values need searcher random; searcher 'hyperopt' cannot take them (use type: choice)",
        id="grid-with-hyperopt",
    ),
    pytest.param(
        _set("scaling", {"resources_per_worker": {"GPU": 1}}),
        "scaling.use_gpu: must be true when resources_per_worker asks for GPU",
        id="gpu-resources-without-use-gpu",
    ),
    pytest.param(
        _set("scaling", {"resources_per_worker": {"CPU": -1}}),
        "scaling.resources_per_worker.CPU: must be >= 0, got -1.0",
        id="negative-worker-resource",
    ),
    pytest.param(
        _set("scaling", {"resources_per_worker": {"CPU": 0}}),
        "scaling.resources_per_worker: must ask for some resource (e.g. {CPU: 1}), got {'CPU': 0.0}",
        id="zero-worker-resources",
    ),
    pytest.param(
        _set("scaling", {"num_workers": 0}), "scaling.num_workers: must be greater than 0, got 0", id="zero-workers"
    ),
    pytest.param(
        _set("scaling", {"placement_strategy": "SPRED"}),
        "scaling.placement_strategy: must be 'PACK', 'SPREAD', 'STRICT_PACK' or 'STRICT_SPREAD', got 'SPRED'; "
        "did you mean 'SPREAD'?",
        id="placement-strategy-typo",
    ),
    pytest.param(
        _set("resources", {"max_concurrent_trials": "many"}),
        "resources.max_concurrent_trials: must be 'auto' or a valid integer, got 'many'",
        id="max-concurrent-trials-many",
    ),
    pytest.param(
        _set("resources", {"driver_cpus": 0}),
        "resources.driver_cpus: must be greater than 0, got 0",
        id="driver-cpus-zero",
    ),
    pytest.param(
        _set("failure", {"trial_retries": -1}),
        "failure.trial_retries: must be greater than or equal to 0, got -1",
        id="negative-retries",
    ),
    pytest.param(
        _set("aggregate", {"default": "meen"}),
        "aggregate.default: must be 'mean', 'min', 'max', 'sum' or 'rank0', got 'meen'; did you mean 'mean'?",
        id="aggregate-default-typo",
    ),
    pytest.param(
        _set("aggregate", {"metrics": {"loss": "mx"}}),
        "aggregate.metrics.loss: must be 'mean', 'min', 'max', 'sum' or 'rank0', got 'mx'; did you mean 'max'?",
        id="aggregate-metric-method-typo",
    ),
    pytest.param(
        _set("trainable", "no_such_module_hps:train_loop"),
        "trainable: cannot import module 'no_such_module_hps': ModuleNotFoundError: No module named 'no_such_module_hps'",
        id="trainable-module-not-importable",
    ),
    pytest.param(
        _set("trainable", "train.py:trian_loop"),
        "trainable: 'train.py' has no attribute 'trian_loop' (callables there: train_loop)",
        id="trainable-missing-attribute",
    ),
    pytest.param(
        _set("trainable", "train.py:CONFIG"),
        "trainable: 'train.py:CONFIG' is not a callable but a dict: {'epochs': 3}",
        id="trainable-not-callable",
    ),
    pytest.param(
        _set("trainable", "train_loop"),
        "trainable: must look like 'package.module:function' or 'path/to/file.py:function', got 'train_loop'",
        id="trainable-without-colon",
    ),
]


@pytest.mark.parametrize(("patch", "expected"), BAD_FRAGMENTS)
def test_each_mistake_is_one_exact_problem_line(spec_dir: Path, patch, expected: str) -> None:
    raw = copy.deepcopy(BASE)
    patch(raw)
    path = write_spec(spec_dir, raw)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert problems_of(info.value) == [expected]
    assert str(info.value) == f"invalid spec in {path} (1 problem):\n  - {expected}"


def test_trainable_file_not_found_names_the_absolute_path(spec_dir: Path) -> None:
    path = write_spec(spec_dir, {**BASE, "trainable": "loops/missing.py:train_loop"})
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert problems_of(info.value) == [f"trainable: file not found: {spec_dir.resolve() / 'loops' / 'missing.py'}"]


def test_grid_is_allowed_with_the_random_searcher() -> None:
    spec = load_spec(
        {**BASE, "searcher": {"type": "random", "seed": 1}, "search_space": {"b": {"type": "grid", "values": [1, 2]}}},
        check_trainable=False,
    )
    assert spec.search_space == {"b": GridParam(values=[1, 2])}


def test_all_problems_come_back_in_one_error() -> None:
    bad = {
        "name": "five-mistakes",
        "trainable": "pkg.mod:fn",
        "metric": "loss",
        "mode": "mni",
        "num_samples": 0,
        "serch_space": {},
        "searcher": "optuan",
        "scheduler": {"type": "asha", "max_t": 1, "grace_period": 2},
        "resources": {"driver_cpus": 0},
    }
    with pytest.raises(SpecError) as info:
        load_spec(bad, check_trainable=False)
    err = info.value
    assert len(err.problems) >= 5
    assert {p.path for p in err.problems} >= {
        "mode",
        "num_samples",
        "serch_space",
        "searcher.type",
        "scheduler.grace_period",
        "resources.driver_cpus",
    }
    lines = str(err).splitlines()
    assert lines[0] == f"invalid spec ({len(err.problems)} problems):"
    assert lines[1:] == [f"  - {p}" for p in err.problems]


def test_spec_error_is_also_a_value_error() -> None:
    with pytest.raises(ValueError):
        load_spec({"name": "x"}, check_trainable=False)
    assert issubclass(SpecError, HpsearchError)


def test_spec_keys_are_the_documented_top_level_keys() -> None:
    assert ", ".join(SPEC_KEYS) == ALLOWED_TOP


# --------------------------------------------------------------------------- YAML problems


def test_duplicate_yaml_key_names_both_lines(spec_dir: Path) -> None:
    path = spec_dir / "dup.yaml"
    path.write_text("name: a\nmetric: loss\nmode: min\nname: b\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert problems_of(info.value) == [
        "<spec>: not valid YAML: line 4, column 1: duplicate key 'name' (first on line 1, again on line 4)"
    ]


def test_duplicate_key_inside_a_distribution(spec_dir: Path) -> None:
    path = spec_dir / "dup.yaml"
    path.write_text("name: a\nsearch_space:\n  lr:\n    type: float\n    low: 0.1\n    low: 0.2\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert problems_of(info.value) == [
        "<spec>: not valid YAML: line 6, column 5: duplicate key 'low' (first on line 5, again on line 6)"
    ]


def test_invalid_yaml_syntax_names_the_line(spec_dir: Path) -> None:
    path = spec_dir / "broken.yaml"
    path.write_text("name: a\nmetric: [loss\nmode: min\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value) == (
        f"invalid spec in {path} (1 problem):\n"
        "  - <spec>: not valid YAML: line 3, column 5: expected ',' or ']', but got ':'"
    )


def test_spec_file_that_is_not_a_mapping(spec_dir: Path) -> None:
    path = spec_dir / "list.yaml"
    path.write_text("- name\n- metric\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert problems_of(info.value) == ["<spec>: a spec must be a mapping of keys, got ['name', 'metric']"]


def test_missing_spec_file(spec_dir: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(spec_dir / "nope.yaml")
    assert problems_of(info.value) == ["<spec>: cannot read the spec file: No such file or directory"]


def test_missing_spec_file_suggests_a_close_name(spec_dir: Path) -> None:
    write_spec(spec_dir, BASE, "search.yaml")
    with pytest.raises(SpecError) as info:
        load_spec(spec_dir / "serch.yaml")
    assert problems_of(info.value) == [
        "<spec>: cannot read the spec file: No such file or directory; did you mean 'search.yaml'?"
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "the spec file is empty; a spec needs at least name, trainable, metric and mode"),
        (b"  \n\n", "the spec file is empty; a spec needs at least name, trainable, metric and mode"),
        (
            b"# name: x\n",
            "the spec file holds no keys, only comments or null; a spec needs at least name, trainable, metric and mode",
        ),
        (b"\x80\x04\x95name: x", "not UTF-8 text (byte 0x80 at byte 0); save the spec as UTF-8"),
        (b"name: caf\xe9\n", "not UTF-8 text (byte 0xe9 at byte 9); save the spec as UTF-8"),
        (b"PK\x03\x04\x00\x00", "not a text file (a NUL byte at byte 4); a spec is a YAML text file (wrong file?)"),
        (
            "name: x\n".encode("utf-16"),
            "UTF-16 text (it starts with a UTF-16 byte order mark); save the spec as UTF-8",
        ),
    ],
    ids=["empty", "blank", "only-comments", "pickle", "latin-1", "zip", "utf-16"],
)
def test_a_spec_file_that_is_not_yaml_text(spec_dir: Path, content: bytes, expected: str) -> None:
    path = spec_dir / "spec.yaml"
    path.write_bytes(content)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert problems_of(info.value) == [f"<spec>: {expected}"]


def test_a_utf8_byte_order_mark_is_fine(spec_dir: Path) -> None:
    path = spec_dir / "spec.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + yaml.safe_dump(BASE).encode())
    assert load_spec(path).name == "unit"


def test_a_folder_given_as_the_spec_lists_the_yaml_files_in_it(spec_dir: Path) -> None:
    write_spec(spec_dir, BASE, "a.yaml")
    write_spec(spec_dir, BASE, "b.yml")
    with pytest.raises(SpecError) as info:
        load_spec(spec_dir)
    assert problems_of(info.value) == ["<spec>: is a folder, not a spec file (YAML files in it: a.yaml, b.yml)"]


def test_a_spec_file_too_large_to_be_a_spec_is_refused_unread(spec_dir: Path) -> None:
    import time

    path = spec_dir / "big.yaml"
    with open(path, "wb") as f:  # 15 MiB (sparse): refused by its size, before it is opened, let alone parsed
        f.truncate(15 * 2**20)
    start = time.perf_counter()
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert time.perf_counter() - start < 1.0
    assert problems_of(info.value) == [
        "<spec>: the file is 15,728,640 bytes, over the limit of 1 MiB (1,048,576 bytes); a spec is a small YAML "
        "file (wrong file?)"
    ]


def test_a_spec_file_of_exactly_the_size_limit_is_read(spec_dir: Path) -> None:
    from hpsearch.spec._yaml import MAX_SPEC_BYTES

    text = yaml.safe_dump({**BASE, "name": "at-the-limit"})
    path = spec_dir / "spec.yaml"
    path.write_text(text + "#" * (MAX_SPEC_BYTES - len(text) - 1) + "\n", encoding="utf-8")
    assert path.stat().st_size == MAX_SPEC_BYTES
    assert load_spec(path).name == "at-the-limit"


def test_a_spec_that_grows_past_the_limit_while_read_is_counted(
    spec_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file whose size says little (one in /proc says 0) is counted as it is read."""
    import os as real_os

    from hpsearch.spec import _yaml

    path = spec_dir / "big.yaml"
    path.write_text("name: x\n" + "# padding\n" * 2**17, encoding="utf-8")  # 1.25 MiB

    class SaysEmpty:
        def __init__(self, info: real_os.stat_result) -> None:
            self.st_mode, self.st_size = info.st_mode, 0

    monkeypatch.setattr(_yaml.os, "fstat", lambda fd: SaysEmpty(real_os.stat(fd)))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert problems_of(info.value) == [
        "<spec>: the file is more than 1,048,576 bytes, over the limit of 1 MiB (1,048,576 bytes); a spec is a "
        "small YAML file (wrong file?)"
    ]


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(spec_dir: Path) -> None:
    import os
    import threading

    fifo = spec_dir / "spec.yaml"
    os.mkfifo(fifo)  # nobody writes to it: a blocking open or read would wait forever
    refused: list[SpecError] = []

    def load() -> None:
        with pytest.raises(SpecError) as info:
            load_spec(fifo)
        refused.append(info.value)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=5)
    if reader.is_alive():  # it blocked: let it go (a writer that closes at once gives it end-of-file), then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading the spec waited on the named pipe")
    assert [problems_of(err) for err in refused] == [
        [
            "<spec>: is a named pipe (FIFO), not a spec file; hpsearch reads a spec only from a regular file "
            "(save it to one)"
        ]
    ]


def test_a_device_is_refused_and_a_symlink_to_a_spec_is_read(spec_dir: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_spec("/dev/zero")  # endless: read whole, it would fill the memory
    assert problems_of(info.value) == [
        "<spec>: is a character device, not a spec file; hpsearch reads a spec only from a regular file (save it "
        "to one)"
    ]
    link = spec_dir / "link.yaml"
    link.symlink_to(write_spec(spec_dir, BASE))
    assert load_spec(link).name == "unit"


def test_a_module_that_exits_when_imported_is_reported_not_obeyed(
    spec_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (spec_dir / "train_script.py").write_text("import sys\n\ndef train_loop(config):\n    pass\n\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(spec_dir))
    with pytest.raises(SpecError) as info:
        load_spec({**BASE, "trainable": "train_script:train_loop"})
    assert problems_of(info.value) == [
        "trainable: importing module 'train_script' called sys.exit(0); a file that runs a script when imported "
        'must guard that code with `if __name__ == "__main__":`'
    ]


# --------------------------------------------------------------------------- anchors, aliases, bombs


def test_anchors_aliases_and_merge_keys_are_allowed(spec_dir: Path) -> None:
    path = spec_dir / "spec.yaml"
    path.write_text(
        "name: anchors\ntrainable: train.py:train_loop\nmetric: loss\nmode: min\n"
        "scheduler: {type: asha, <<: &budget {max_t: 4, grace_period: 1}}\n"
        "search_space:\n  a: &pick {type: choice, values: [1, 2]}\n  b: *pick\n  budget: *budget\n",
        encoding="utf-8",
    )
    spec = load_spec(path)
    assert spec.scheduler.as_dict()["max_t"] == 4
    assert spec.search_space["a"] == spec.search_space["b"] == ChoiceParam(values=[1, 2])
    assert spec.search_space["budget"] == {"max_t": ConstParam(value=4), "grace_period": ConstParam(value=1)}


def billion_laughs(levels: int = 9, width: int = 10) -> str:
    """YAML of a few hundred bytes whose aliases expand to width ** levels values (10 ** 9 by default)."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_bomb_is_refused_without_expanding_it(spec_dir: Path) -> None:
    import time
    import tracemalloc

    path = spec_dir / "bomb.yaml"
    path.write_text(billion_laughs(), encoding="utf-8")
    assert path.stat().st_size < 1000
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(SpecError) as info:
        load_spec(path)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert problems_of(info.value) == [
        "<spec>: not valid YAML: the document expands to more than 100,000 values once its aliases (*name) are "
        "expanded; a spec may use anchors and aliases, but at most 100,000 values in all"
    ]
    assert seconds < 1.0
    assert peak < 20 * 2**20  # bytes: the composed document, not its expansion


def test_a_document_just_under_the_value_limit_is_read(spec_dir: Path) -> None:
    path = spec_dir / "wide.yaml"
    thousand = ", ".join(["1"] * 1000)
    copies = ", ".join(["*v"] * 90)  # 90 x 1,001 values: under the limit
    path.write_text(f"{yaml.safe_dump(BASE)}extra_values: &v [{thousand}]\ncopies: [{copies}]\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:  # read fine: refused for its unknown keys, not for its size
        load_spec(path)
    assert [p.path for p in info.value.problems] == ["extra_values", "copies"]


def test_a_recursive_alias_is_refused(spec_dir: Path) -> None:
    path = spec_dir / "loop.yaml"
    path.write_text("name: x\nsearch_space: &s {inner: *s}\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert problems_of(info.value) == [
        "<spec>: not valid YAML: line 2, column 15: an alias refers to a value that contains it "
        "(a recursive structure cannot be a spec value)"
    ]


def test_deeply_nested_yaml_is_refused_not_a_recursion_error(spec_dir: Path) -> None:
    path = spec_dir / "deep.yaml"
    path.write_text("name: " + "[" * 600 + "]" * 600 + "\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert problems_of(info.value) == [
        "<spec>: not valid YAML: it is nested too deeply to read (a spec needs only a few levels)"
    ]


def test_a_spec_of_more_values_than_any_spec_holds_is_refused_once_it_has_read_them(spec_dir: Path) -> None:
    from hpsearch.spec._yaml import MAX_WRITTEN_VALUES

    # 900 kB of 300,003 values, then a list never closed: a reader that went on past the limit would meet that
    # error at the end of the file and report it instead of the limit.
    path = spec_dir / "wide.yaml"
    path.write_text("name: x\nnotes: [" + "1, " * 300_000 + "1]\nunclosed: [1, 2\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    column = len("notes: [") + 3 * (MAX_WRITTEN_VALUES - 5) + 1  # the document, name, x, notes, the list: 5
    assert problems_of(info.value) == [
        f"<spec>: not valid YAML: line 2, column {column}: it holds more than 20,000 values; a spec holds a few "
        "hundred (wrong file?)"
    ]


BIG = "9" * 5000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"num_samples: {BIG}", f"num_samples: {{}}, got {'9' * 20}... (5,000 digits)"),
        (
            f"search_space:\n  n: {{type: int, low: 1, high: -{BIG}}}",
            f"search_space.n.high: {{}}, got -{'9' * 19}... (5,000 digits)",
        ),
        (
            f"search_space:\n  c: {{type: choice, values: [1, {BIG}, {BIG}]}}",
            f"search_space.c.values[1]: {{}}, got {'9' * 20}... (5,000 digits) (and 1 more such integers)",
        ),
        (f"scaling: {{num_workers: {BIG}}}", f"scaling.num_workers: {{}}, got {'9' * 20}... (5,000 digits)"),
        (
            f"searcher: {{type: optuna, seed: 0x{'f' * 4000}}}",
            f"searcher.seed: {{}}, got 0x{'f' * 18}... (4,000 digits)",
        ),
        ("num_samples: 1" + ":59" * 300_000, "num_samples: {}, got 1:59:59:59:59:59:59:... (600,001 digits)"),
        ("num_samples: 9223372036854775808", "num_samples: {}, got 9223372036854775808"),
    ],
    ids=["5000-digits", "negative-bound", "in-a-list", "num-workers", "hex", "sexagesimal", "just-past-64-bits"],
)
def test_an_integer_past_64_bits_is_one_problem_with_its_path(spec_dir: Path, text: str, expected: str) -> None:
    import time

    path = spec_dir / "spec.yaml"
    spec = {k: v for k, v in BASE.items() if k != "search_space"}
    path.write_text(yaml.safe_dump(spec) + text + "\n", encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert time.perf_counter() - start < 2.0
    allowed = "must be an integer of at most 64 bits (-9223372036854775808 to 9223372036854775807)"
    assert problems_of(info.value) == [expected.format(allowed)]


def test_an_integer_past_64_bits_in_a_dict_is_one_problem_even_past_what_python_writes_out() -> None:
    allowed = "must be an integer of at most 64 bits (-9223372036854775808 to 9223372036854775807)"
    with pytest.raises(SpecError) as info:
        load_spec({**BASE, "num_samples": 10**5000}, check_trainable=False)
    assert problems_of(info.value) == [f"num_samples: {allowed}, got an integer of about 5,001 digits"]
    with pytest.raises(SpecError) as info:
        load_spec({**BASE, "num_samples": 2**63}, check_trainable=False)
    assert problems_of(info.value) == [f"num_samples: {allowed}, got 9223372036854775808"]
    assert load_spec({**BASE, "searcher": {"type": "optuna", "seed": 2**63 - 1}}, check_trainable=False)


# --------------------------------------------------------------------------- --set overrides


def test_overrides_create_nested_keys_and_read_values_as_yaml(spec_dir: Path) -> None:
    path = write_spec(spec_dir, BASE)
    spec = load_spec(
        path,
        overrides=[
            "num_samples=3",
            "searcher.type=hyperopt",
            "scheduler.type=asha",
            "scheduler.max_t=5",
            "scaling.resources_per_worker.CPU=0.5",
            "search_space.lr.high=1e-2",
            "name=renamed",
        ],
    )
    assert spec.num_samples == 3 and type(spec.num_samples) is int
    assert spec.searcher.type == "hyperopt"
    assert spec.scheduler.as_dict()["max_t"] == 5
    assert spec.scaling.resources_per_worker == {"CPU": 0.5}
    assert spec.search_space["lr"].high == 1e-2
    assert spec.name == "renamed"
    assert spec.experiment_dir.name == "renamed"


def test_override_values_that_break_the_spec_are_reported_like_the_file(spec_dir: Path) -> None:
    path = write_spec(spec_dir, BASE)
    with pytest.raises(SpecError) as info:
        load_spec(path, overrides=["num_samples=0", "mode=mx"])
    assert problems_of(info.value) == [
        "mode: must be 'min' or 'max', got 'mx'; did you mean 'max'?",
        "num_samples: must be greater than 0, got 0",
    ]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("foo", "--set foo: must be KEY=VALUE with a dotted KEY, e.g. --set scaling.num_workers=2"),
        ("=3", "--set =3: must be KEY=VALUE with a dotted KEY, e.g. --set scaling.num_workers=2"),
        ("a..b=1", "--set a..b=1: the key 'a..b' has an empty part; write a dotted key like scaling.num_workers"),
        ("name.x=3", "--set name.x=3: cannot set name.x: name holds 'unit', not a mapping"),
        (
            "scaling.num_workers=[1",
            "--set scaling.num_workers=[1: not valid YAML: line 1, column 3: expected ',' or ']', but got "
            "'<stream end>'",
        ),
        (
            "search_space.x=" + billion_laughs(5).replace("\n", ", ").join("{}"),
            "--set search_space.x={l0: &l0 [lol, lol, lol, lol, lol, lol, lo...: not valid YAML: the "
            "document expands to more than 100,000 values once its aliases (*name) are expanded; a spec may use "
            "anchors and aliases, but at most 100,000 values in all",
        ),
        (
            f"num_samples={BIG}",
            f"--set num_samples={'9' * 45}...: must be an integer of at most 64 bits (-9223372036854775808 to "
            f"9223372036854775807), got {'9' * 20}... (5,000 digits)",
        ),
        (
            f"scaling={{num_workers: 2, resources_per_worker: {{CPU: {BIG}}}}}",
            f"--set scaling={{num_workers: 2, resources_per_worker: {{CPU: 9999...: "
            "scaling.resources_per_worker.CPU: must be an integer of at most 64 bits (-9223372036854775808 to "
            f"9223372036854775807), got {'9' * 20}... (5,000 digits)",
        ),
    ],
    ids=[
        "no-equals-sign",
        "no-key",
        "empty-path-part",
        "through-a-scalar",
        "not-yaml",
        "alias-bomb",
        "5000-digits",
        "5000-digits-inside",
    ],
)
def test_bad_override(spec_dir: Path, override: str, expected: str) -> None:
    path = write_spec(spec_dir, BASE)
    with pytest.raises(SpecError) as info:
        load_spec(path, overrides=[override])
    assert str(info.value) == f"invalid spec in {path} (1 problem):\n  - {expected}"


def test_override_option_of_a_shorthand_plugin(spec_dir: Path) -> None:
    path = write_spec(spec_dir, {**BASE, "scheduler": "asha"})
    spec = load_spec(path, overrides=["scheduler.max_t=5"])
    assert spec.scheduler.as_dict()["max_t"] == 5


# --------------------------------------------------------------------------- paths


def test_relative_file_trainable_resolves_against_the_spec_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec_folder = tmp_path / "specs"
    (spec_folder / "loops").mkdir(parents=True)
    (spec_folder / "loops" / "train.py").write_text(TRAIN_PY, encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the trainable is found relative to the spec, not the cwd
    path = write_spec(spec_folder, {**BASE, "trainable": "loops/train.py:train_loop"})

    spec = load_spec(path)

    assert spec.trainable == f"{spec_folder.resolve() / 'loops' / 'train.py'}:train_loop"
    assert Path(spec.trainable.rpartition(":")[0]).is_absolute()
    loop = spec.load_trainable()
    assert callable(loop) and loop.__name__ == "train_loop"
    assert loop({}) is None


def test_storage_path_is_absolute_and_experiment_dir_is_storage_over_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = load_spec({**BASE, "name": "exp-1", "storage_path": "runs/here"}, check_trainable=False)
    assert spec.storage_path == (tmp_path / "runs" / "here").resolve()
    assert spec.storage_path.is_absolute()
    assert spec.experiment_dir == spec.storage_path / "exp-1"
    assert not (tmp_path / "runs").exists()  # loading a spec writes nothing


def test_default_storage_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = load_spec(BASE, check_trainable=False)
    assert spec.experiment_dir == tmp_path.resolve() / "hpsearch-results" / "unit"


def test_dict_source_is_not_modified() -> None:
    raw = copy.deepcopy(BASE)
    load_spec(raw, overrides=["num_samples=2", "scheduler.type=asha"], check_trainable=False)
    assert raw == BASE


# ----------------------------------------------------------------------------- the objectives, one rule


def test_the_objectives_are_the_given_ones_else_the_one_metric_and_mode() -> None:
    assert objectives_or_primary("loss", "min") == (("loss", "min"),)
    assert objectives_or_primary("loss", "min", [("a", "max"), ("b", "min")]) == (("a", "max"), ("b", "min"))
    assert not is_multi_objective((("loss", "min"),)) and is_multi_objective([("a", "max"), ("b", "min")])


@pytest.mark.parametrize("metric, mode", [("loss", "min"), (["loss", "n_params"], ["min", "min"])])
def test_the_spec_its_results_and_its_summary_agree_on_the_objectives(tmp_path: Path, metric: Any, mode: Any) -> None:
    """Three views that could drift: the spec, ``load_results`` of its folder, and the summary written from it."""
    raw = {**BASE, "trainable": "hpsearch.examples.digits:train_loop", "metric": metric, "mode": mode}
    spec = load_spec({**raw, "searcher": "random", "storage_path": str(tmp_path)}, check_trainable=False)
    results = load_results(write_experiment(tmp_path / spec.name, [], spec=spec.to_dict(), summary=False))
    summary = summarize(results, wall_time_s=1.0)
    assert results.objectives == spec.objectives and results.multi_objective == spec.multi_objective
    assert tuple(map(tuple, summary.objectives)) == spec.objectives
    assert summary.multi_objective == spec.multi_objective == isinstance(metric, list)


def test_the_old_name_failure_still_resolves_with_a_deprecation_warning() -> None:
    """The spec's retry settings are FailureSettings; Failure (a recorded failure's name elsewhere) still works."""
    import hpsearch.spec as spec_package

    with pytest.warns(DeprecationWarning, match=r"hpsearch\.spec\.Failure is deprecated: import hpsearch\.spec\.Fail"):
        from hpsearch.spec import Failure
    assert Failure is FailureSettings
    with pytest.warns(DeprecationWarning, match="FailureSettings"):
        assert spec_package.Failure is FailureSettings
    assert {"Failure", "FailureSettings"} <= set(spec_package.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Failures'"):
        spec_package.Failures  # noqa: B018  # the attribute access is what is tested


@pytest.mark.parametrize(
    ("value", "accepted"),
    [(0, True), (30, True), (3600, True), (-1, False), (3601, False), (".inf", False), (".nan", False), ("a", False)],
)
def test_the_preemption_grace_period_is_a_finite_number_of_seconds_up_to_an_hour(value, accepted, spec_dir) -> None:
    text = yaml.safe_dump({**copy.deepcopy(BASE), "failure": {"preemption_grace_s": 0}}).replace(
        "preemption_grace_s: 0", f"preemption_grace_s: {value}"
    )
    path = spec_dir / "s.yaml"
    path.write_text(text, encoding="utf-8")
    if accepted:
        assert load_spec(path).failure.preemption_grace_s == float(value)
    else:
        with pytest.raises(SpecError) as refused:
            load_spec(path)
        assert [p.split(":")[0] for p in problems_of(refused.value)] == ["failure.preemption_grace_s"]
