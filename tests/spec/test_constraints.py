"""Outcome constraints: the spec's section, the one ranking, every view, and what each searcher is told.

Pure: experiment folders are written with the project's writers (``fake_experiment``), searchers are
driven through Tune's ``Searcher`` API in this process. The Ray search that runs constraints and errored
trials together is ``tests/runtime/search/test_failed_trials_search.py``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import optuna
import pytest
from fake_experiment import FakeTrial, spec_dict, write_experiment

from hpsearch import load_results, to_optuna_study
from hpsearch.analysis import best_trials, best_trials_table, feasible_line, pareto_front, summarize
from hpsearch.cli import main
from hpsearch.errors import MetricNotReportedError
from hpsearch.experiment.ranking import best_checkpoint, rank_trials
from hpsearch.experiment.ranking import pareto_front as front_of_reports
from hpsearch.runtime.search.budget import BudgetTracker
from hpsearch.runtime.search.plugins import SearcherContext, build_searcher
from hpsearch.runtime.search.searchers import FAILED_CONSTRAINT
from hpsearch.runtime.search.tuner import _required_metrics
from hpsearch.spec import load_spec
from hpsearch.spec.constraints import Constraint, violation

INF, NAN = math.inf, math.nan
SIZE = [{"metric": "n_params", "max": 1000}]


# ----------------------------------------------------------------------------- the rule


def test_a_constraint_measures_how_far_a_value_lies_past_its_bounds() -> None:
    at_most = Constraint(metric="n_params", max=1000)
    between = Constraint(metric="ratio", min=0.1, max=0.9)
    assert at_most.excess(900) == -100 and at_most.excess(1000) == 0 and at_most.excess(1250) == 250
    assert between.excess(0.05) == pytest.approx(0.05) and between.excess(0.95) == pytest.approx(0.05)
    assert between.excess(0.5) < 0
    for missing in (None, NAN, INF, "big", True):  # not a finite number: violated, whatever the bound
        assert at_most.excess(missing) == INF
    assert violation({"n_params": 1250, "ratio": 0.95}, [at_most, between]) == pytest.approx(250.05)
    assert violation({"n_params": 10, "ratio": 0.5}, [at_most, between]) == 0.0
    assert at_most.text == "n_params <= 1000" and between.text == "0.1 <= ratio <= 0.9"
    assert Constraint(metric="acc", min=0.9).text == "acc >= 0.9"


def test_the_ranking_puts_feasible_trials_first_then_infeasible_by_violation_then_nan() -> None:
    reports = {
        "fast-but-big": [(1, 0.1)],
        "ok": [(1, 0.5)],
        "slightly-big": [(1, 0.2)],
        "nan": [(1, NAN)],
        "better-ok": [(1, 0.4)],
        "nothing": [],
    }
    violations = {"fast-but-big": [500.0], "ok": [0.0], "slightly-big": [5.0], "nan": [0.0], "better-ok": [0.0]}
    ranking = rank_trials(reports, "min", violations=violations)
    assert [s.trial_id for s in ranking.ranked] == ["better-ok", "ok", "slightly-big", "fast-but-big", "nan"]
    assert ranking.best is not None and ranking.best.trial_id == "better-ok"
    assert ranking["slightly-big"].violation == 5.0 and not ranking["slightly-big"].feasible
    assert ranking["nothing"].rank is None
    # a NaN best keeps its own report's violation: it met the constraint, it just has no number to rank by
    assert ranking["nan"].violation == 0.0 and ranking["nan"].feasible and not ranking["nan"].finite


def test_a_trials_best_value_is_its_best_feasible_report() -> None:
    # epoch 3 has the lowest loss but broke the constraint; epoch 2 is the best that held it
    reports = {"t": [(1, 0.9), (2, 0.6), (3, 0.3), (4, 0.7)]}
    score = rank_trials(reports, "min", violations={"t": [0.0, 0.0, 12.0, 0.0]})["t"]
    assert (score.best, score.best_iteration, score.violation) == (0.6, 2, 0.0)
    # no feasible report: the least violating one (the better value on a tie), and the trial is infeasible
    score = rank_trials(reports, "min", violations={"t": [3.0, 1.0, 1.0, 2.0]})["t"]
    assert (score.best, score.best_iteration, score.violation) == (0.3, 3, 1.0)


def test_no_best_trial_when_none_met_the_constraints() -> None:
    ranking = rank_trials({"a": [(1, 0.1)], "b": [(1, 0.2)]}, "min", violations={"a": [2.0], "b": [1.0]})
    assert [s.trial_id for s in ranking.ranked] == ["b", "a"]
    assert ranking.best is None


def test_without_constraints_the_ranking_is_unchanged() -> None:
    reports = {"a": [(1, 0.5), (2, 0.3)], "b": [(1, NAN)], "c": [(1, 0.2)]}
    plain = rank_trials(reports, "min")
    assert [(s.trial_id, s.best_iteration, s.rank, s.violation) for s in plain.scores] == [
        ("c", 1, 1, None),
        ("a", 2, 2, None),
        ("b", 1, 3, None),
    ]
    assert all(s.feasible for s in plain.scores) and plain.best is not None and plain.best.trial_id == "c"


def test_the_best_checkpoint_is_a_feasible_reports() -> None:
    reports = [("c1", 0.9), ("c2", 0.5), ("c3", 0.2)]
    kept = {"c1", "c2", "c3"}.__contains__
    assert best_checkpoint(reports, "min", kept) == "c3"
    assert best_checkpoint(reports, "min", kept, violations=[0.0, 0.0, 4.0]) == "c2"


def test_only_feasible_points_are_on_the_pareto_front() -> None:
    reports = {
        "a": [(1, [0.5, 10])],
        "b": [(1, [0.3, 20])],
        "dominates-all-but-too-big": [(1, [0.1, 5])],
    }
    front = front_of_reports(
        reports, ["min", "min"], violations={"a": [0.0], "b": [0.0], "dominates-all-but-too-big": [7.0]}
    )
    assert [p.trial_id for p in front.front] == ["b", "a"]  # the infeasible point neither joins nor dominates
    infeasible = next(p for p in front.points if p.trial_id == "dominates-all-but-too-big")
    assert not infeasible.on_front and not infeasible.feasible and infeasible.violation == 7.0


# ----------------------------------------------------------------------------- the spec


def test_the_spec_reads_and_writes_its_constraints(tmp_path: Path) -> None:
    spec = load_spec(
        spec_dict(constraints=[{"metric": "n_params", "max": 1.0e6}, {"metric": "acc", "min": 0.5, "max": 1}]),
        check_trainable=False,
    )
    assert spec.constraints == (Constraint(metric="n_params", max=1.0e6), Constraint(metric="acc", min=0.5, max=1))
    assert spec.to_dict()["constraints"] == [
        {"metric": "n_params", "max": 1.0e6},
        {"metric": "acc", "max": 1, "min": 0.5},
    ]
    assert "constraints" not in load_spec(spec_dict(), check_trainable=False).to_dict()  # older folders read the same


def test_every_report_must_hold_each_constrained_metric_named_by_its_key() -> None:
    spec = load_spec(spec_dict(constraints=[{"metric": "val_loss", "max": 2}, {"metric": "n_params", "max": 10}]))
    required = _required_metrics(spec)
    assert required["n_params"] == "constraints[1]"
    assert "val_loss" not in required  # the spec's metric is required as the metric
    err = MetricNotReportedError("n_params", ["val_loss", "n_param", "epoch"], "constraints[1]")
    assert str(err) == (
        "the loop did not report 'n_params', the metric of constraints[1]; did you mean 'n_param'? "
        "(it reported: val_loss, n_param, epoch)"
    )
    import pickle

    back = pickle.loads(pickle.dumps(err))  # crosses Ray's processes as its parts
    assert str(back) == str(err) and back.named_by == "constraints[1]"


def test_a_bad_constraint_exits_2_before_ray_starts_and_writes_nothing(tmp_path: Path, capsys) -> None:
    import yaml

    path = tmp_path / "spec.yaml"
    raw = spec_dict(storage_path=str(tmp_path / "out"), constraints=[{"metric": "latency_ms", "max": ".inf"}])
    text = yaml.safe_dump(raw, sort_keys=False).replace("'.inf'", ".inf")
    path.write_text(text)
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "constraints[0].max: must be a finite number, got inf" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- every view of a folder


def _trials() -> list[FakeTrial]:
    def t(i: int, loss: list[float], size: list[float], **kw: Any) -> FakeTrial:
        return FakeTrial(f"c0de{i:04d}", {"lr": 0.01 * i, "hidden": 32}, loss, extra={"n_params": size}, **kw)

    return [
        t(1, [0.5, 0.4], [900, 900]),  # feasible, best 0.4
        t(2, [0.3, 0.1], [800, 5000]),  # its 0.1 broke the constraint: best feasible is 0.3 at epoch 1
        t(3, [0.05, 0.04], [1500, 1200]),  # never feasible: least violation 200 at epoch 2
        t(4, [0.2], [3000]),  # never feasible, violation 2000
        t(5, [0.01], [10], status="errored"),  # errored: not ranked
    ]


@pytest.fixture
def constrained(tmp_path: Path) -> Path:
    return write_experiment(tmp_path / "c", _trials(), spec=spec_dict("c", constraints=SIZE))


def test_load_results_ranks_by_feasibility_then_value(constrained: Path) -> None:
    results = load_results(constrained)
    ranked = results.ranked()
    assert list(ranked["trial_id"]) == ["c0de0002", "c0de0001", "c0de0003", "c0de0004"]
    assert list(ranked["best"]) == [0.3, 0.4, 0.04, 0.2]
    assert list(ranked["violation"]) == [0.0, 0.0, 200.0, 2000.0]
    assert list(ranked["best_iteration"]) == [1, 2, 2, 1]
    assert results.best is not None and results.best["trial_id"] == "c0de0002"
    assert list(results.feasible) == [True, True, False, False, True]  # the errored trial has no best report
    table = best_trials(results)
    assert list(table.columns[4:7]) == ["best_iteration", "val_loss", "violation"]  # after the value it ranks by
    assert list(table["n_params"]) == [800, 900, 1200, 3000]  # each at its best report


def test_the_closing_table_and_summary_say_which_trials_met_the_constraints(constrained: Path) -> None:
    summary = summarize(load_results(constrained))
    assert summary.best is not None and summary.best.trial_id == "c0de0002"
    assert [t.trial_id for t in summary.ranked()] == ["c0de0002", "c0de0001", "c0de0003", "c0de0004"]
    table = best_trials_table(summary)
    header, first, _, third = table.splitlines()[:4]
    assert "val_loss (best)  feasible" in header
    assert "yes" in first and "no (violated by 200)" in third
    assert feasible_line(summary) == (
        "Constraints (n_params <= 1000): 2 of 4 ranked trials met them; the others rank after, by violation"
    )
    saved = summary.as_dict()
    assert saved["constraints"] == ["n_params <= 1000"] and saved["best_trial_id"] == "c0de0002"


def test_no_trial_met_them_means_no_best_trial(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "none", _trials()[2:4], spec=spec_dict("none", constraints=SIZE))
    results = load_results(exp)
    assert results.best is None and list(results.ranked()["trial_id"]) == ["c0de0003", "c0de0004"]
    summary = summarize(results)
    assert summary.best is None
    assert feasible_line(summary) == (
        "Constraints (n_params <= 1000): no trial met them, so there is no best trial; the table ranks by violation"
    )


def test_the_optuna_export_carries_the_constraint_values(constrained: Path) -> None:
    study = to_optuna_study(constrained)
    trials = {t.user_attrs["trial_id"]: t for t in study.trials}
    assert trials["c0de0002"].constraints == {"0": -200.0}  # at its best report, epoch 1
    assert trials["c0de0003"].constraints == {"0": 200.0}
    assert trials["c0de0003"].system_attrs["constraints"] == [200.0]  # the list optuna-dashboard reads
    assert trials["c0de0003"].user_attrs["constraints"] == {"n_params <= 1000": 200.0}
    assert study.best_trial.user_attrs["trial_id"] == "c0de0002"  # Optuna's best is hpsearch's best feasible


def test_the_export_to_a_storage_keeps_them(constrained: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    assert main(["export", str(constrained), "--optuna", url]) == 0
    study = optuna.load_study(study_name="c", storage=url)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    feasible = [t.user_attrs["trial_id"] for t in complete if max(t.constraints.values()) <= 0]
    assert sorted(feasible) == ["c0de0001", "c0de0002"]


def _mo_trials() -> list[FakeTrial]:
    def t(i: int, loss: float, latency: float, size: float) -> FakeTrial:
        return FakeTrial(f"beef{i:04d}", {"lr": 0.01 * i}, [loss], extra={"latency": [latency], "n_params": [size]})

    return [t(1, 0.5, 10, 100), t(2, 0.3, 20, 100), t(3, 0.1, 5, 5000), t(4, 0.6, 30, 100)]


def test_the_pareto_front_holds_feasible_trials_only_and_the_plot_draws_the_others_apart(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from hpsearch import plots

    spec = spec_dict("mo", metric=["val_loss", "latency"], mode=["min", "min"], constraints=SIZE)
    spec["scheduler"] = {"type": "fifo"}
    results = load_results(write_experiment(tmp_path / "mo", _mo_trials(), spec=spec))
    assert list(results.pareto["trial_id"]) == ["beef0002", "beef0001"]  # beef0003 dominates both, but is too big
    data = pareto_front(results)
    assert dict(zip(data.trial_ids, data.feasible)) == {
        "beef0001": True,
        "beef0002": True,
        "beef0003": False,
        "beef0004": True,
    }
    ax = plots.pareto_front(data)
    assert "1 infeasible (x)" in ax.get_title()
    assert any("infeasible (1)" == t.get_text() for t in ax.get_legend().get_texts())
    summary = summarize(results)
    assert [p["trial_id"] for p in summary.pareto] == ["beef0002", "beef0001"]


def test_the_report_says_how_many_trials_met_the_constraints(constrained: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(constrained), "--output", str(out)]) == 0
    html = out.read_text()
    assert "n_params &lt;= 1000: 2 of 4 ranked trials met them" in html


# ----------------------------------------------------------------------------- what the searchers are told


def _searcher(searcher: dict[str, Any], constraints: list[dict[str, Any]] = SIZE) -> Any:
    raw = spec_dict(searcher=searcher, constraints=constraints, scheduler={"type": "fifo"})
    raw["search_space"] = {"lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True}}
    spec = load_spec(raw, check_trainable=False)
    found = build_searcher(spec.searcher, SearcherContext(spec.metric, spec.mode, 1, constraints=spec.constraints))
    found.set_search_properties(spec.metric, spec.mode, {"lr": hpsearch_space_lr()}, num_samples=20)
    return found


def hpsearch_space_lr() -> Any:
    from ray import tune

    return tune.loguniform(1e-4, 1e-1)


def _drive(searcher: Any, n: int, result: Any, fail: Any = lambda config: False) -> list[dict[str, Any]]:
    configs = []
    for i in range(n):
        trial_id = f"{i:05d}"
        config = searcher.suggest(trial_id)
        report = {**result(config), "training_iteration": 1}
        searcher.on_trial_result(trial_id, report)
        if fail(config):
            searcher.on_trial_complete(trial_id, error=True)
        else:
            searcher.on_trial_complete(trial_id, report)
        configs.append(config)
    return configs


def test_optuna_is_told_every_trials_constraints_and_gp_samples_on_past_a_failed_trial() -> None:
    # GP needs the same number of constraints on every trial: each gets the spec's and the failed-trial one
    searcher = _searcher({"type": "optuna", "sampler": "gp", "seed": 1, "n_startup_trials": 3})
    _drive(
        searcher,
        8,
        lambda c: {"val_loss": abs(math.log10(c["lr"]) + 2), "n_params": c["lr"] * 1e5},
        fail=lambda c: c["lr"] > 0.05,
    )
    study = searcher.searcher._ot_study
    trials = study.get_trials(deepcopy=False)
    assert {tuple(t.constraints) for t in trials} == {("n_params", FAILED_CONSTRAINT)}
    for trial in trials:
        if trial.user_attrs.get("hpsearch_failed"):
            assert trial.constraints[FAILED_CONSTRAINT] == 1.0
        else:
            assert trial.constraints["n_params"] == pytest.approx(trial.params["lr"] * 1e5 - 1000)
            assert trial.constraints[FAILED_CONSTRAINT] == 0.0


def test_tpe_learns_to_keep_to_the_feasible_region() -> None:
    # the loss prefers a large lr; n_params grows with lr, and lr > 0.01 breaks the constraint
    def result(c: dict[str, Any]) -> dict[str, float]:
        return {"val_loss": -math.log10(c["lr"]) / 4, "n_params": c["lr"] * 1e5}

    def share(constraints: list[dict[str, Any]]) -> float:
        configs = _drive(
            _searcher({"type": "optuna", "sampler": "tpe", "seed": 3, "n_startup_trials": 5}, constraints), 30, result
        )
        later = configs[5:]
        return sum(c["lr"] > 0.01 for c in later) / len(later)

    with_them, without = share(SIZE), share([])
    # measured over seeds 0-4: 0.36-0.44 of the trials after the start-up with them, 0.72-0.84 without
    assert with_them < 0.5 < without


def test_hyperopt_is_told_an_infeasible_trial_as_the_worst_value_so_far(monkeypatch) -> None:
    searcher = _searcher({"type": "hyperopt", "seed": 0})
    told: list[float] = []
    inner = searcher.searcher
    original = type(inner).__mro__[2].on_trial_complete  # Ray's HyperOptSearch, after the mixin

    def spy(self: Any, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        told.append(None if result is None else result["val_loss"])
        original(self, trial_id, result=result, error=error)

    monkeypatch.setattr(type(inner).__mro__[2], "on_trial_complete", spy)
    values = iter([0.5, 0.9, 0.1, 0.3])  # the third is the best loss, but breaks the constraint
    sizes = iter([10, 10, 5000, 10])
    _drive(searcher, 4, lambda c: {"val_loss": next(values), "n_params": next(sizes)})
    assert told == [0.5, 0.9, 0.9, 0.3]


# ----------------------------------------------------------------------------- the budget


def test_an_infeasible_report_reaches_no_target(tmp_path: Path) -> None:
    spec = load_spec(spec_dict(constraints=SIZE, budget={"target": {"val_loss": 0.2}}), check_trainable=False)
    tracker = BudgetTracker(tmp_path, spec.budget, started_at=0.0, constraints=spec.constraints, clock=lambda: 0.0)
    tracker.observe("big", {"val_loss": 0.1, "n_params": 5000})
    assert "val_loss" not in tracker.best
    tracker.observe("small", {"val_loss": 0.15, "n_params": 500})
    assert tracker.best["val_loss"] == (0.15, "small")


def test_load_model_says_when_no_trial_met_the_constraints(tmp_path: Path) -> None:
    from hpsearch import load_model
    from hpsearch.errors import ResultsError

    exp = write_experiment(tmp_path / "none", _trials()[2:4], spec=spec_dict("none", constraints=SIZE))
    with pytest.raises(ResultsError, match=r"no trial met the constraints \(n_params <= 1000\), so none is the best"):
        load_model(exp, object())


def test_the_shipped_constrained_search_is_valid() -> None:
    spec = load_spec(Path(__file__).resolve().parents[2] / "search_spaces" / "digits_constrained.yaml")
    assert spec.constraints == (Constraint(metric="n_params", max=20000),)
    assert spec.aggregate.method("n_params") == "rank0"  # a whole number, as the constraint reads it


def test_nsga2_is_told_the_constraints_under_several_objectives() -> None:
    from ray import tune

    raw = spec_dict(
        metric=["val_loss", "latency"],
        mode=["min", "min"],
        searcher={"type": "optuna", "sampler": "nsga2", "seed": 0, "population_size": 4},
        scheduler={"type": "fifo"},
        constraints=SIZE,
    )
    raw["search_space"] = {"lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True}}
    spec = load_spec(raw, check_trainable=False)
    metrics, modes = [m for m, _ in spec.objectives], [d for _, d in spec.objectives]
    searcher = build_searcher(spec.searcher, SearcherContext(metrics, modes, 1, constraints=spec.constraints))
    searcher.set_search_properties(None, None, {"lr": tune.loguniform(1e-4, 1e-1)}, num_samples=12)
    _drive(searcher, 12, lambda c: {"val_loss": -c["lr"], "latency": c["lr"], "n_params": c["lr"] * 1e5})
    trials = searcher.searcher._ot_study.get_trials(deepcopy=False)
    assert len(trials) == 12 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    for trial in trials:
        assert trial.constraints["n_params"] == pytest.approx(trial.params["lr"] * 1e5 - 1000)
    feasible = [t for t in trials if t.constraints["n_params"] <= 0]
    assert {t.number for t in searcher.searcher._ot_study.best_trials} <= {t.number for t in feasible}
