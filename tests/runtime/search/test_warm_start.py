"""Warm start: points validated against the search space and run first; an earlier search's trials seed the searcher.

Validation is table-driven and pure; the earlier search is a folder written by
``tests/fake_experiment.py`` (the project's own writers). The searchers are driven by hand,
without Ray; the Ray search of ``tests/spec/test_conditional.py`` is also warm-started, from such a folder.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_experiment import FakeTrial, spec_dict, write_experiment

from hpsearch import messages
from hpsearch.errors import SpecError
from hpsearch.runtime.search.plugins import SearcherContext, build_searcher
from hpsearch.runtime.search.tune_space import to_tune
from hpsearch.spec import load_spec
from hpsearch.spec.space import parse_search_space

ROOT = Path(__file__).resolve().parents[3]

#: The earlier search's space, and this one's (lr's high is lower: trial 3 does not fit).
EARLIER = {
    "lr": {"type": "float", "low": 1.0e-4, "high": 1.0e-1, "log": True},
    "hidden": {"type": "choice", "values": [32, 64, 128]},
    "layers": {"type": "int", "low": 1, "high": 3},
    "epochs": 1,
}
SPACE = {**EARLIER, "lr": {"type": "float", "low": 1.0e-4, "high": 3.0e-2, "log": True}}


def cfg(lr: float, hidden: int, layers: int) -> dict[str, Any]:
    return {"lr": lr, "hidden": hidden, "layers": layers, "epochs": 1}


TRIALS = [
    FakeTrial("aaaa0001", cfg(0.01, 64, 2), [1.0, 0.5, 0.2], extra={"val_acc": [0.5, 0.7, 0.9]}),
    FakeTrial("aaaa0002", cfg(0.0001, 32, 1), [2.0], status="stopped", extra={"val_acc": [0.1]}, start=1),
    FakeTrial("aaaa0003", cfg(0.05, 128, 3), [0.8, 0.1], extra={"val_acc": [0.6, 0.9]}, start=25),
    FakeTrial("aaaa0004", cfg(0.001, 64, 1), [0.05], status="errored", extra={"val_acc": [0.99]}, start=30),
    FakeTrial("aaaa0005", cfg(0.003, 128, 2), [0.9, 0.6], status="stopped", extra={"val_acc": [0.4, 0.5]}, start=50),
]
#: What the fitting ended trials seed: (config, last val_loss).
SEEDS = [(cfg(0.01, 64, 2), 0.2), (cfg(0.0001, 32, 1), 2.0), (cfg(0.003, 128, 2), 0.6)]


@pytest.fixture
def earlier(tmp_path: Path) -> Path:
    exp = tmp_path / "results" / "earlier"
    write_experiment(exp, TRIALS, spec=spec_dict("earlier", search_space=EARLIER, storage_path=str(exp.parent)))
    return exp


def spec(tmp_path: Path, warm_start: Any, **changes: Any) -> dict[str, Any]:
    return {
        "name": "warm",
        "trainable": "json:dumps",
        "metric": "val_loss",
        "mode": "min",
        "num_samples": 3,
        "search_space": SPACE,
        "searcher": {"type": "optuna", "seed": 0},
        "storage_path": str(tmp_path / "results"),
        "warm_start": warm_start,
        **changes,
    }


# ----------------------------------------------------------------------------- validation

COND = {
    "optimizer": {"type": "choice", "values": ["sgd", "adam"]},
    "momentum": {"type": "float", "low": 0.0, "high": 0.99, "when": {"optimizer": "sgd"}},
    "model": {"width": {"type": "int", "low": 8, "high": 64, "step": 8}},
}

# fmt: off
BAD_POINTS = [
    pytest.param([{"lrr": 0.01}], "warm_start.points[0].lrr", "unknown parameter; did you mean 'lr'?", id="unknown-key"),
    pytest.param([{"lr": 0.05}], "warm_start.points[0].lr", "must be between 0.0001 and 0.03 (both included), got 0.05", id="above-high"),
    pytest.param([{"lr": "0.01"}], "warm_start.points[0].lr", "must be a finite number, got '0.01'", id="float-type"),
    pytest.param([{"layers": 2.5}], "warm_start.points[0].layers", "must be an integer, got 2.5", id="int-type"),
    pytest.param([{"layers": 4}], "warm_start.points[0].layers", "must be between 1 and 3 (both included), got 4", id="int-bound-inclusive"),
    pytest.param([{"hidden": 48}], "warm_start.points[0].hidden", "must be one of [32, 64, 128], got 48", id="not-a-choice"),
    pytest.param([{"epochs": 2}], "warm_start.points[0].epochs", "is the constant 1 in this search space, got 2", id="constant"),
    pytest.param([{}, {"lr": 1}], "warm_start.points[1].lr", "must be between", id="second-point"),
    pytest.param([{}, {}, {}, {}], "warm_start.points", "has 4 points but num_samples is 3", id="more-points-than-samples"),
    pytest.param({"lr": 0.01}, "warm_start.points", "must be a list of parameter mappings", id="not-a-list"),
]
BAD_CONDITIONAL = [
    pytest.param([{"optimizer": "adam", "momentum": 0.5}], "warm_start.points[0].momentum",
                 "is set, but its condition is false in this point (when: {optimizer: 'sgd'}; the point has optimizer: 'adam')",
                 id="condition-false"),
    pytest.param([{"momentum": 0.5}], "warm_start.points[0].momentum", "set optimizer too (to 'sgd')", id="controller-left-out"),
    pytest.param([{"model": {"width": 12}}], "warm_start.points[0].model.width", "must be a multiple of step 8, got 12", id="step"),
    pytest.param([{"model.widht": 16}], "warm_start.points[0].model.widht", "did you mean 'model.width'?", id="nested-typo"),
]
# fmt: on


def problems_of(raw: dict[str, Any]) -> list[Any]:
    with pytest.raises(SpecError) as err:
        load_spec(raw, check_trainable=False)
    return err.value.problems


@pytest.mark.parametrize(("points", "path", "message"), BAD_POINTS)
def test_a_bad_point_is_one_problem_naming_its_key(tmp_path: Path, points: Any, path: str, message: str) -> None:
    found = problems_of(spec(tmp_path, {"points": points}))
    assert [p.path for p in found] == [path]
    assert message in found[0].message


@pytest.mark.parametrize(("points", "path", "message"), BAD_CONDITIONAL)
def test_a_point_must_respect_conditions(tmp_path: Path, points: Any, path: str, message: str) -> None:
    found = problems_of(spec(tmp_path, {"points": points}, search_space=COND))
    assert [p.path for p in found] == [path]
    assert message in found[0].message


def test_from_is_checked_before_anything_runs(tmp_path: Path, earlier: Path) -> None:
    base = spec(tmp_path, None)
    cases = {
        "does not exist: run the earlier search first": {"from": str(tmp_path / "nope")},
        "is not an hpsearch experiment folder": {"from": str(tmp_path)},
        "is this search's own experiment folder": {"from": str(tmp_path / "results" / "warm")},
    }
    for message, warm in cases.items():
        found = [(p.path, p.message) for p in _problems(load_spec, {**base, "warm_start": warm})]
        assert len(found) == 1 and found[0][0] == "warm_start.from" and message in found[0][1], found
    typo = _problems(load_spec, {**base, "warm_start": {"form": str(earlier)}})
    assert [(p.path, "did you mean 'from'?" in p.message) for p in typo] == [("warm_start.form", True)]
    found = _problems(
        load_spec,
        {
            **base,
            "warm_start": {"points": [{"lr": 0.01}]},
            "search_space": {**SPACE, "hidden": {"type": "grid", "values": [32, 64]}},
            "searcher": {"type": "random"},
        },
    )
    assert [p.path for p in found] == ["warm_start.points"] and "grid" in found[0].message


def _problems(loader: Any, raw: dict[str, Any]) -> list[Any]:
    with pytest.raises(SpecError) as err:
        loader(raw)
    return err.value.problems


def test_from_resolves_against_the_spec_files_folder_and_round_trips(tmp_path: Path, earlier: Path) -> None:
    folder = tmp_path / "specs"
    folder.mkdir()
    path = folder / "warm.yaml"
    raw = spec(tmp_path, {"points": [{"lr": 0.01, "layers": 2}], "from": "../results/earlier"})
    path.write_text(yaml.safe_dump(raw))
    loaded = load_spec(path, check_trainable=False)
    assert loaded.warm_start.source == earlier.resolve()
    assert loaded.warm_start.points == ({"lr": 0.01, "layers": 2},)
    again = load_spec({**loaded.to_dict()}, check_trainable=False)
    assert again.warm_start == loaded.warm_start
    assert "warm_start" not in load_spec(spec(tmp_path, None), check_trainable=False).to_dict()


def test_the_shipped_spec_is_refused_until_digits_quick_ran() -> None:
    shipped = ROOT / "search_spaces" / "digits_warm_start.yaml"
    if (ROOT / "hpsearch-results" / "digits-quick").exists():
        pytest.skip("digits-quick has run here")
    found = _problems(lambda s: load_spec(s, overrides=["trainable=json:dumps"]), shipped)
    assert [p.path for p in found] == ["warm_start.from"] and "run the earlier search first" in found[0].message


# ----------------------------------------------------------------------------- the earlier trials


def test_ended_trials_that_fit_seed_with_their_last_value(earlier: Path) -> None:
    from hpsearch.runtime.search.warm_start import earlier_trials

    tree, _ = parse_search_space(SPACE)
    found = earlier_trials(earlier, tree, (("val_loss", "min"),))
    assert [(c, v) for c, v in found.seeds] == [(c, (v,)) for c, v in SEEDS]
    assert found.skipped == ("lr must be between 0.0001 and 0.03 (both included), got 0.05",)
    assert found.unused == 1  # the errored trial
    assert found.line("optuna") == (  # said as "hpsearch: warm start: ..." (hpsearch.messages adds the prefix)
        "warm start: 3 trials of earlier seed the searcher; 1 skipped (not in this search space: lr must be "
        "between 0.0001 and 0.03 (both included), got 0.05); 1 not ended or without a finite value of every objective"
    )
    assert "the random searcher cannot learn from them" in found.line("random")
    both = earlier_trials(earlier, tree, (("val_loss", "min"), ("val_acc", "max")))
    assert [v for _, v in both.seeds] == [(0.2, 0.9), (2.0, 0.1), (0.6, 0.5)]
    other, _ = parse_search_space({**SPACE, "dropout": {"type": "float", "low": 0.0, "high": 0.5}})
    assert set(earlier_trials(earlier, other, (("val_loss", "min"),)).skipped) == {
        "dropout is missing",
        found.skipped[0],
    }


def test_an_earlier_trial_that_breaks_the_constraints_seeds_with_the_worst_value(earlier: Path) -> None:
    from hpsearch.runtime.search.warm_start import earlier_trials
    from hpsearch.spec.constraints import Constraint

    tree, _ = parse_search_space(SPACE)
    found = earlier_trials(earlier, tree, (("val_loss", "min"),), (Constraint(metric="val_acc", min=0.6),))
    assert [v for _, v in found.seeds] == [(0.2,), (2.0,), (2.0,)]  # val_acc 0.1 and 0.5 break it: 0.6 -> 2.0
    assert found.infeasible == 2
    assert found.line("optuna").endswith("; 2 broke the constraints, told with the seeds' worst value")


def context(tmp_path: Path, earlier: Path, searcher: dict[str, Any], **changes: Any) -> SearcherContext:
    from hpsearch.runtime.search.warm_start import with_space

    raw = spec(tmp_path, {"points": [{"lr": 0.02, "layers": 3}], "from": str(earlier)}, searcher=searcher, **changes)
    loaded = load_spec(raw, check_trainable=False)
    out = io.StringIO()
    with messages.to(out):
        ctx = with_space(loaded, SearcherContext("val_loss", "min", 1))
    assert out.getvalue().splitlines()[0] == "hpsearch: warm start: 1 point run first"
    return ctx


def test_optuna_gets_the_earlier_trials_and_the_point_first(tmp_path: Path, earlier: Path) -> None:
    from optuna.trial import TrialState

    ctx = context(tmp_path, earlier, {"type": "optuna", "seed": 0})
    limiter = build_searcher(load_spec(spec(tmp_path, None), check_trainable=False).searcher, ctx)
    tree, _ = parse_search_space(SPACE)
    limiter.set_search_properties("val_loss", "min", to_tune(tree, searcher="optuna"))  # as Tune does
    study = limiter.searcher._ot_study
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert [(t.params, t.value) for t in done] == [({k: c[k] for k in ("lr", "hidden", "layers")}, v) for c, v in SEEDS]
    first = limiter.suggest("t0")
    assert first["lr"] == 0.02 and first["layers"] == 3 and first["hidden"] in (32, 64, 128)
    limiter.on_trial_complete("t0", {"val_loss": 0.3})
    assert len(study.trials) == 4


def test_a_resumed_optuna_searcher_is_not_seeded_twice(tmp_path: Path, earlier: Path) -> None:
    ctx = context(tmp_path, earlier, {"type": "optuna", "seed": 0})
    choice = load_spec(spec(tmp_path, None), check_trainable=False).searcher
    tree, _ = parse_search_space(SPACE)
    first = build_searcher(choice, ctx)
    first.set_search_properties("val_loss", "min", to_tune(tree, searcher="optuna"))
    first.suggest("t0")
    first.on_trial_complete("t0", {"val_loss": 0.3})
    first.save(str(tmp_path / "searcher.pkl"))
    again = build_searcher(choice, ctx)  # Tuner.restore: the pickled searcher is set up, then its state restored
    again.set_search_properties("val_loss", "min", to_tune(tree, searcher="optuna"))
    again.restore(str(tmp_path / "searcher.pkl"))
    assert len(again.searcher._ot_study.trials) == 4  # 3 seeds and 1 run, once


def test_a_killed_optuna_search_resumes_with_trials_its_saved_state_never_suggested(tmp_path: Path, said) -> None:
    """Tune writes its trials, then the searcher's state: a search killed between the two resumes with a trial the
    restored study does not know. Ray's OptunaSearch fails the whole resume with a KeyError at its first result;
    hpsearch's runs it to its end, says so once, and Optuna goes on learning from the trials it knows."""
    from optuna.trial import TrialState

    choice = load_spec(spec(tmp_path, None), check_trainable=False).searcher  # no warm start: the plain searcher
    ctx = SearcherContext(metric="val_loss", mode="min", max_concurrent=2)
    tree, _ = parse_search_space(SPACE)
    killed = build_searcher(choice, ctx)
    killed.set_search_properties("val_loss", "min", to_tune(tree, searcher="optuna"))
    killed.suggest("t0")
    killed.save(str(tmp_path / "searcher.pkl"))  # the last searcher state written before the kill, as Tune writes it:
    limiter_state = killed.get_state()  # the searcher, and its concurrency limiter apart
    killed.suggest("t1")  # in Tune's saved trials, not in the saved searcher state
    resumed = build_searcher(choice, ctx)
    resumed.set_search_properties("val_loss", "min", to_tune(tree, searcher="optuna"))
    resumed.restore(str(tmp_path / "searcher.pkl"))
    resumed.set_state(limiter_state)
    for epoch in (1, 2):
        resumed.on_trial_result("t1", {"val_loss": 0.5, "training_iteration": epoch})
    resumed.on_trial_complete("t1", {"val_loss": 0.4})
    resumed.on_trial_complete("t0", {"val_loss": 0.3})
    study = resumed.searcher._ot_study
    assert [(t.state, t.value) for t in study.trials] == [(TrialState.COMPLETE, 0.3)]
    lines = said.getvalue().splitlines()
    assert lines == [
        "optuna: trial t1 was started after the searcher's last saved state (the search was killed); "
        "it runs to its end, but Optuna does not learn from its results"
    ]
    assert resumed.suggest("t2")["lr"] > 0  # the study goes on suggesting


def test_optuna_conditional_and_multi_objective_seeds(tmp_path: Path, earlier: Path) -> None:
    """Seeds of a define-by-run space get their distributions from the tree; several objectives: values."""
    from hpsearch.runtime.search.searchers import HpsearchOptunaSearch, OptunaSpace

    tree, _ = parse_search_space({**SPACE, "momentum": {"type": "float", "low": 0, "high": 1, "when": {"layers": 2}}})
    search = HpsearchOptunaSearch(
        OptunaSpace(tree),
        metric=["val_loss", "val_acc"],
        mode=["min", "max"],
        hp_tree=tree,
        hp_seeds=[(cfg(0.01, 64, 1), (0.2, 0.9)), ({**cfg(0.02, 32, 2), "momentum": 0.5}, (0.3, 0.8))],
        hp_points=[{"layers": 2}],
    )
    trials = search._ot_study.trials
    assert [t.values for t in trials[:2]] == [[0.2, 0.9], [0.3, 0.8]]
    assert "momentum" not in trials[0].distributions and "momentum" in trials[1].distributions
    point = search.suggest("p")
    assert point["layers"] == 2 and 0 <= point["momentum"] <= 1 and point["epochs"] == 1


def test_hyperopt_holds_the_earlier_trials_as_done_and_runs_points_first(tmp_path: Path, earlier: Path) -> None:
    import hyperopt as hpo

    ctx = context(tmp_path, earlier, {"type": "hyperopt", "seed": 0, "n_initial_points": 2})
    limiter = build_searcher(
        load_spec(spec(tmp_path, None, searcher={"type": "hyperopt", "seed": 0}), check_trainable=False).searcher, ctx
    )
    tree, _ = parse_search_space(SPACE)
    limiter.set_search_properties("val_loss", "min", to_tune(tree, searcher="hyperopt"))
    trials = limiter.searcher._hpopt_trials
    done = [t for t in trials.trials if t["state"] == hpo.base.JOB_STATE_DONE]
    assert [t["result"]["loss"] for t in done] == [v for _, v in SEEDS]
    assert [t["misc"]["vals"]["hidden"] for t in done] == [[1], [0], [2]]  # choices as HyperOpt's indices
    first = limiter.suggest("t0")
    assert first["lr"] == 0.02 and first["layers"] == 3 and first["hidden"] in (32, 64, 128)  # hidden: drawn
    limiter.on_trial_complete("t0", {"val_loss": 0.4})
    following = limiter.suggest("t1")  # TPE runs on the seeds and the point
    assert set(following) == {"lr", "hidden", "layers", "epochs"} and math.isfinite(following["lr"])


def test_random_runs_the_point_first_and_is_told_of_no_earlier_trial(tmp_path: Path, earlier: Path) -> None:
    ctx = context(tmp_path, earlier, {"type": "random", "seed": 0})
    assert ctx.seeds == ()  # it could not learn from them
    generator = build_searcher(
        load_spec(spec(tmp_path, None, searcher={"type": "random"}), check_trainable=False).searcher, ctx
    )
    tree, _ = parse_search_space(SPACE)
    generator.add_configurations({"exp": {"run": lambda c: None, "config": to_tune(tree), "num_samples": 3}})
    first = generator.next_trial().config
    assert first["lr"] == 0.02 and first["layers"] == 3 and first["epochs"] == 1
