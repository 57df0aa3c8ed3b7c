"""Conditional parameters (``when``): validated with their YAML paths, and sampled only where they exist.

The validation is table-driven and pure. The translations are checked by driving Ray Tune's
searchers by hand (``suggest`` / ``on_trial_complete`` / ``next_trial``), without starting Ray;
one small Ray search checks what Tune records and what ``load_results`` reads back.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpsearch.runtime.search.plugins import SearcherContext, build_searcher
from hpsearch.runtime.search.tune_space import JOINT_GRID_KEY, to_tune
from hpsearch.spec import load_spec, total_trials
from hpsearch.spec.plugins import SEARCHERS
from hpsearch.spec.space import (
    active_config,
    grid_points,
    parse_search_space,
)

ROOT = Path(__file__).resolve().parents[2]

#: The issue's space, plus a chain (warmup exists only with sgd and cosine) and a nested group.
SPACE: dict[str, Any] = {
    "optimizer": {"type": "choice", "values": ["sgd", "adam"]},
    "momentum": {"type": "float", "low": 0.0, "high": 0.99, "when": {"optimizer": "sgd"}},
    "beta1": {"type": "float", "low": 0.8, "high": 0.99, "when": {"optimizer": "adam"}},
    "sched": {"type": "choice", "values": ["none", "cosine"], "when": {"optimizer": ["sgd", "adam"]}},
    "warmup": {"type": "int", "low": 1, "high": 5, "when": {"sched": "cosine", "optimizer": "sgd"}},
    "model": {
        "kind": {"type": "choice", "values": ["mlp", "cnn"]},
        "width": {"type": "int", "low": 8, "high": 64, "step": 8, "when": {"model.kind": "mlp"}},
    },
    "epochs": 3,
}


def tree_of(raw: dict[str, Any]) -> Any:
    tree, problems = parse_search_space(raw)
    assert problems == []
    return tree


def expected_keys(config: dict[str, Any]) -> set[str]:
    """The dotted keys a config of SPACE must hold: exactly its active parameters."""
    keys = {"optimizer", "sched", "model.kind", "epochs"}
    keys.add("momentum" if config["optimizer"] == "sgd" else "beta1")
    if config["optimizer"] == "sgd" and config["sched"] == "cosine":
        keys.add("warmup")
    if config["model"]["kind"] == "mlp":
        keys.add("model.width")
    return keys


def dotted(config: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, value in config.items():
        name = f"{prefix}{key}"
        out |= dotted(value, name + ".") if isinstance(value, dict) else {name}
    return out


# ----------------------------------------------------------------------------- validation

# fmt: off
BAD = [
    pytest.param(
        {"momentum": {"type": "float", "low": 0, "high": 1.0, "when": {"optimizr": "sgd"}}},
        "search_space.momentum.when.optimizr", "names no parameter of the search space; did you mean 'optimizer'?",
        id="misspelt-controller",
    ),
    pytest.param(
        {"momentum": {"type": "float", "low": 0, "high": 1.0, "when": {"lr": 0.1}}},
        "search_space.momentum.when.lr", "'lr' is a float parameter; a condition can only name a choice, grid or constant",
        id="controller-not-categorical",
    ),
    pytest.param(
        {"momentum": {"type": "float", "low": 0, "high": 1.0, "when": {"optimizer": "sgdd"}}},
        "search_space.momentum.when.optimizer", "'sgdd' is not a value of 'optimizer' (its values: ['sgd', 'adam'])",
        id="value-not-among-values",
    ),
    pytest.param(
        {"momentum": {"type": "float", "low": 0, "high": 1.0, "when": {"epochs": 5}}},
        "search_space.momentum.when.epochs", "5 is not a value of 'epochs' (its values: [3])",
        id="value-not-the-constant",
    ),
    pytest.param(
        {"momentum": {"type": "float", "low": 0, "high": 1.0, "when": {"model": "mlp"}}},
        "search_space.momentum.when.model", "'model' is a group, not a parameter; name one of its parameters (model.kind",
        id="names-a-group",
    ),
    pytest.param(
        {"a": {"type": "choice", "values": [1, 2], "when": {"b": 1}},
         "b": {"type": "choice", "values": [1, 2], "when": {"a": 1}}},
        "search_space.a.when.b", "conditions form a cycle: a -> b -> a",
        id="cycle",
    ),
    pytest.param(
        {"a": {"type": "choice", "values": [1, 2], "when": {"a": 1}}},
        "search_space.a.when.a", "'a' cannot depend on itself",
        id="self",
    ),
    pytest.param(
        {"g": {"type": "grid", "values": [1, 2], "when": {"optimizer": "sgd"}}},
        "search_space.g.when.optimizer", "a grid's condition can only name grid or constant parameters",
        id="grid-on-a-choice",
    ),
    pytest.param(
        {"momentum": {"type": "float", "low": 0, "high": 1.0, "when": "optimizer"}},
        "search_space.momentum.when", "must map parameter names to a value or a list of values",
        id="not-a-mapping",
    ),
    pytest.param(
        {"momentum": {"type": "float", "low": 0, "high": 1.0, "when": {"optimizer": []}}},
        "search_space.momentum.when.optimizer", "must give at least one value",
        id="no-values",
    ),
    pytest.param(
        {"model": {"depth": {"type": "int", "low": 1, "high": 3, "when": {"kind": "cnn"}}}},
        "search_space.model.depth.when.kind", "did you mean 'model.kind'?",
        id="nested-relative-name",
    ),
]
# fmt: on


@pytest.mark.parametrize(("extra", "path", "message"), BAD)
def test_a_bad_condition_is_one_problem_at_its_yaml_path(extra: dict[str, Any], path: str, message: str) -> None:
    raw = {
        **{k: v for k, v in SPACE.items() if k in ("optimizer", "epochs")},
        "lr": {"type": "float", "low": 1e-4, "high": 0.1},
        "model": dict(SPACE["model"]),
    }
    for key, value in extra.items():
        if key == "model":
            raw["model"] = {**raw["model"], **value}
        else:
            raw[key] = value
    _, problems = parse_search_space(raw)
    assert [p.path for p in problems] == [path]
    assert message in problems[0].message


def test_validate_refuses_a_bad_condition_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hpsearch.cli import main

    spec = yaml.safe_load((ROOT / "search_spaces" / "digits_conditional.yaml").read_text())
    spec["search_space"]["momentum"]["when"] = {"optimiser": "sgd"}
    spec["trainable"] = "json:dumps"  # a light import: the check under test is the condition's
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "search_space.momentum.when.optimiser" in err and "did you mean 'optimizer'?" in err


def test_conditions_are_normalised_chains_and_nested_groups_are_valid() -> None:
    tree = tree_of(SPACE)
    assert tree["momentum"].when == {"optimizer": ["sgd"]}
    assert tree["sched"].when == {"optimizer": ["sgd", "adam"]}
    assert tree["model"]["width"].when == {"model.kind": ["mlp"]}
    # the spec as run keeps them, and reads back the same
    spec = load_spec(
        {"name": "c", "trainable": "x:y", "metric": "loss", "mode": "min", "search_space": SPACE},
        check_trainable=False,
    )
    again = load_spec(
        {**spec.to_dict(), "storage_path": str(spec.storage_path)},
        check_trainable=False,
    )
    assert again.search_space == spec.search_space


def test_active_config_drops_what_does_not_exist_chains_included() -> None:
    tree = tree_of(SPACE)
    flat = {"optimizer": "adam", "momentum": 0.5, "beta1": 0.9, "sched": "cosine", "warmup": 2}
    assert active_config(tree, flat) == {"optimizer": "adam", "beta1": 0.9, "sched": "cosine"}
    flat["optimizer"] = "sgd"
    assert active_config(tree, flat) == {"optimizer": "sgd", "momentum": 0.5, "sched": "cosine", "warmup": 2}


def test_conditional_grids_expand_only_where_they_exist() -> None:
    raw = {
        "optimizer": {"type": "grid", "values": ["sgd", "adam"]},
        "momentum": {"type": "grid", "values": [0.9, 0.99], "when": {"optimizer": "sgd"}},
    }
    tree = tree_of(raw)
    assert grid_points(tree) == [
        {"optimizer": "sgd", "momentum": 0.9},
        {"optimizer": "sgd", "momentum": 0.99},
        {"optimizer": "adam"},
    ]
    spec = load_spec(
        {"name": "g", "trainable": "x:y", "metric": "loss", "mode": "min", "num_samples": 2, "search_space": raw},
        check_trainable=False,
    )
    assert total_trials(spec) == 6


# ----------------------------------------------------------------------------- translation, per searcher


def build(kind: str, tree: Any, *, max_concurrent: int = 1, **options: Any) -> Any:
    choice, problems = SEARCHERS.parse({"type": kind, "seed": 0, **options}, "searcher")
    assert choice is not None, problems
    return build_searcher(choice, SearcherContext("loss", "min", max_concurrent, space=tree))


def test_optuna_suggests_only_active_parameters_define_by_run() -> None:
    tree = tree_of(SPACE)
    assert to_tune(tree, searcher="optuna") == {}  # the searcher carries the whole space
    limiter = build("optuna", tree, n_startup_trials=3)
    for i in range(12):
        config = limiter.suggest(f"t{i}")
        assert dotted(config) == expected_keys(config), config
        assert config["epochs"] == 3
        limiter.on_trial_complete(f"t{i}", {"loss": float(i % 5)})
    study = limiter.searcher._ot_study
    for trial in study.trials:  # TPE's history: each trial's distributions are its active parameters only
        names = {k.replace("/", ".") for k in trial.distributions}
        assert names == expected_keys({**trial.params, "model": {"kind": trial.params["model/kind"]}}) - {"epochs"}
    assert any("momentum" in t.params for t in study.trials) and any("beta1" in t.params for t in study.trials)


def test_hyperopt_nests_choices_and_keeps_only_active_parameters() -> None:
    from hyperopt.pyll import Apply

    tree = tree_of(SPACE)
    assert to_tune(tree, searcher="hyperopt") == {}
    limiter = build("hyperopt", tree, n_initial_points=4)
    searcher = limiter.searcher
    top = searcher._space
    assert set(top) == {"optimizer", "model/kind"}  # the dependents live in the choices' branches
    assert isinstance(top["optimizer"], Apply) and top["optimizer"].name == "switch"
    for i in range(16):
        config = limiter.suggest(f"t{i}")
        assert dotted(config) == expected_keys(config), config
        limiter.on_trial_complete(f"t{i}", {"loss": float(i % 5)})
    for doc in searcher._hpopt_trials.trials:  # what TPE learns from: no value of an inactive parameter
        vals = {k.replace("/", "."): v for k, v in doc["misc"]["vals"].items() if v}
        optimizer = ["sgd", "adam"][vals["optimizer"][0]]
        sched = ["none", "cosine"][vals["sched"][0]]
        kind = ["mlp", "cnn"][vals["model.kind"][0]]
        assert set(vals) == expected_keys({"optimizer": optimizer, "sched": sched, "model": {"kind": kind}}) - {
            "epochs"
        }


def random_trials(tree: Any, num_samples: int, **options: Any) -> list[Any]:
    generator = build("random", tree, max_concurrent=0, **options)
    generator.add_configurations(
        {"exp": {"run": lambda config: None, "config": to_tune(tree, searcher="random"), "num_samples": num_samples}}
    )
    trials = []
    while (trial := generator.next_trial()) is not None:
        trials.append(trial)
    return trials


def test_random_drops_inactive_parameters_from_the_trial_tune_records() -> None:
    tree = tree_of(SPACE)
    trials = random_trials(tree, 12)
    assert len(trials) == 12
    for trial in trials:
        assert dotted(trial.config) == expected_keys(trial.config), trial.config
        shown = {k.replace("/", ".") for k in trial.evaluated_params}
        assert shown == expected_keys(trial.config) - {"epochs"}
        if trial.config["optimizer"] == "adam":
            assert "momentum" not in trial.experiment_tag and "beta1=" in trial.experiment_tag


def test_random_grid_over_a_conditional_parameter_is_3_trials_not_4() -> None:
    raw = {
        "optimizer": {"type": "grid", "values": ["sgd", "adam"]},
        "momentum": {"type": "grid", "values": [0.9, 0.99], "when": {"optimizer": "sgd"}},
        "beta1": {"type": "float", "low": 0.8, "high": 0.99, "when": {"optimizer": "adam"}},
    }
    tree = tree_of(raw)
    assert list(to_tune(tree)) == ["beta1", JOINT_GRID_KEY]  # one grid over the combinations that exist
    configs = [t.config for t in random_trials(tree, 1)]
    assert [{k: v for k, v in c.items() if k != "beta1"} for c in configs] == [
        {"optimizer": "sgd", "momentum": 0.9},
        {"optimizer": "sgd", "momentum": 0.99},
        {"optimizer": "adam"},
    ]
    assert "beta1" in configs[2] and all("beta1" not in c for c in configs[:2])


@pytest.mark.parametrize("kind", ["optuna", "hyperopt", "random"])
def test_without_conditions_every_searcher_is_what_ray_builds(kind: str) -> None:
    """No ``when``: the same Ray searcher, so the same seed gives the same configs as before."""
    from ray.tune.search.basic_variant import BasicVariantGenerator

    from hpsearch.runtime.search.room import GatedVariantGenerator

    raw = {k: v for k, v in SPACE.items() if k not in ("momentum", "beta1", "sched", "warmup", "model")}
    tree = tree_of({**raw, "lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True}})
    with_tree, without = build(kind, tree), build(kind, None)
    inner = type(with_tree if kind == "random" else with_tree.searcher)
    assert inner is type(without if kind == "random" else without.searcher)
    # Ray's, able to resume a killed search (tests/runtime/search/test_warm_start.py); it suggests as Ray's does
    if kind == "optuna":
        from ray.tune.search.optuna import OptunaSearch

        from hpsearch.runtime.search.searchers import ResumableOptunaSearch

        assert inner is ResumableOptunaSearch and inner.suggest is OptunaSearch.suggest
    else:
        # Ray's own; the random generator only gated by the search's share of a shared cluster (room.py)
        gated = kind == "random" and inner is GatedVariantGenerator and issubclass(inner, BasicVariantGenerator)
        assert gated or (kind != "random" and inner.__module__.startswith("ray."))
    if kind == "random":
        return
    space = to_tune(tree, searcher=kind)
    for limiter in (with_tree, without):
        limiter.set_search_properties("loss", "min", space)
    first = [with_tree.suggest(f"a{i}") for i in range(3)]
    assert first == [without.suggest(f"a{i}") for i in range(3)]


# ----------------------------------------------------------------------------- one Ray search


@pytest.mark.ray
def test_a_conditional_warm_started_search_records_only_active_parameters(ray_cluster: Any, tmp_path: Path) -> None:
    """The random searcher's path (Tune draws every parameter, the inactive ones are dropped) on Ray,
    warm-started: the points run first, the earlier trials are not run again (the one search for both)."""
    from fake_experiment import FakeTrial, spec_dict, write_experiment

    from hpsearch import load_results
    from hpsearch.runtime.search.tuner import run

    spec = yaml.safe_load((ROOT / "search_spaces" / "digits_conditional.yaml").read_text())
    space = spec["search_space"]
    space["optimizer"]["values"] = ["sgd", "adam"]
    space["beta1"]["when"] = {"optimizer": "adam"}
    space["epochs"] = 1
    earlier = [
        FakeTrial(
            "cccc0001",
            {
                "optimizer": "sgd",
                "momentum": 0.9,
                "lr": 0.01,
                "hidden": 32,
                "layers": 1,
                "weight_decay": 1e-4,
                "batch_size": 64,
                "epochs": 1,
            },
            [0.5],
        )
    ]
    write_experiment(tmp_path / "earlier", earlier, spec=spec_dict("earlier", search_space=space))
    spec.update(
        name="cond",
        storage_path=str(tmp_path),
        num_samples=2,
        searcher={"type": "random", "seed": 3},
        scheduler={"type": "fifo"},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.45}},
        warm_start={"points": [{"optimizer": "sgd", "momentum": 0.5}, {"optimizer": "adam"}], "from": "earlier"},
    )
    path = tmp_path / "cond.yaml"
    path.write_text(yaml.safe_dump(spec))  # `from` is relative to the spec file's folder
    out = io.StringIO()
    run(path, stream=out)
    assert "warm start: 2 points run first" in out.getvalue()
    assert "1 trial of earlier fit, but the random searcher cannot learn from them" in out.getvalue()
    exp = tmp_path / "cond"
    configs = sorted((json.loads(p.read_text()) for p in exp.glob("*/params.json")), key=lambda c: c["optimizer"])
    assert [c["optimizer"] for c in configs] == ["adam", "sgd"]  # the two points, and nothing else
    adam, sgd = configs
    assert "momentum" not in adam and 0.8 <= adam["beta1"] <= 0.99  # drawn by Tune; its momentum dropped
    assert sgd["momentum"] == 0.5 and "beta1" not in sgd
    trials = load_results(exp).trials.set_index("optimizer")
    assert math.isnan(trials.loc["adam", "momentum"]) and math.isnan(trials.loc["sgd", "beta1"])
    assert trials["status"].eq("finished").all()


# ----------------------------------------------------------------------------- analysis


def test_absent_parameters_are_empty_cells_and_views_say_over_how_many_trials(tmp_path: Path) -> None:
    from fake_experiment import FakeTrial, spec_dict, write_experiment

    from hpsearch import load_results
    from hpsearch.analysis import parallel_coordinates, param_importances, param_vs_metric

    space = {
        "optimizer": {"type": "choice", "values": ["sgd", "adam"]},
        "momentum": {"type": "float", "low": 0.0, "high": 0.99, "when": {"optimizer": "sgd"}},
        "nesterov": {"type": "choice", "values": [True, False], "when": {"optimizer": "sgd", "momentum": 0.5}},
        "lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
    }
    trials = []
    for i in range(12):
        config: dict[str, Any] = {"optimizer": "sgd" if i < 5 else "adam", "lr": 10 ** (-1 - i / 4)}
        if i < 5:
            config["momentum"] = 0.1 * i
        trials.append(FakeTrial(f"bbbb{i:04d}", config, [1.0 / (i + 1)], start=i))
    exp = write_experiment(tmp_path / "c", trials, spec=spec_dict("c", search_space=space, storage_path=str(tmp_path)))
    results = load_results(exp)
    table = results.trials
    assert table["momentum"].isna().tolist() == [False] * 5 + [True] * 7
    assert "nesterov" in table and table["nesterov"].isna().all()  # no trial had it: still a column, all empty
    panels = {p.axis.name: p for p in param_vs_metric(results).panels}
    assert panels["momentum"].note == "momentum: 5 of 12 trials" and len(panels["momentum"].x) == 5
    assert panels["lr"].note is None
    assert parallel_coordinates(results).notes == ["momentum: 5 of 12 trials"]
    rated = param_importances(results)
    assert rated.notes["momentum"].startswith("momentum: 5 of 12 trials, rated over those trials")
    assert set(rated.importances) == {"optimizer", "lr", "momentum"}
    assert math.isclose(sum(v for k, v in rated.importances.items() if k != "momentum"), 1.0)

    # the plots draw those notes where a reader looks: the panel's title, under the lines, beside the bars
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hpsearch import plots

    def texts(fig: Any) -> list[str]:
        return [t.get_text() for ax in fig.axes for t in [ax.title, *ax.texts, ax.xaxis.label]]

    axes = plots.param_vs_metric(results)
    assert "5 of 12 trials" in texts(axes[0].figure)
    ax = plots.parallel_coordinates(results)
    assert "only some trials have: momentum: 5 of 12 trials" in texts(ax.figure)
    ax = plots.param_importances(results)
    assert any(t.startswith("momentum: 5 of 12 trials, rated over those trials") for t in texts(ax.figure))
    assert "momentum *" in [label.get_text() for label in ax.get_yticklabels()]
    plt.close("all")
