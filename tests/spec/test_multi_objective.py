"""Several objectives: the spec's metric/mode lists, the searcher and scheduler they need, the
Pareto front and its hypervolume, the plot, the report, the closing table and the Optuna export.

Everything is pure (specs as dicts, experiment folders written by tests/fake_experiment.py with
the project's writers, Ray Tune's searchers and schedulers driven by hand without ``ray.init``)
except one small search on the session's Ray.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from pathlib import Path
from typing import Any

import matplotlib
import optuna
import pytest
import yaml
from fake_experiment import FakeTrial, spec_dict, write_experiment

from hpsearch import load_results, to_optuna_study
from hpsearch.analysis import pareto_front, pareto_front_table, summarize
from hpsearch.cli import main
from hpsearch.errors import ResultsError, SpecError
from hpsearch.experiment.ranking import dominates, hypervolume
from hpsearch.experiment.ranking import pareto_front as front_of_reports
from hpsearch.runtime.search.plugins import SchedulerContext, SearcherContext, build_scheduler, build_searcher
from hpsearch.spec import load_spec

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "search_spaces" / "digits_multi_objective.yaml"
NAN = float("nan")
MO = {"metric": ["val_loss", "n_params"], "mode": ["min", "min"]}
ASHA = {"type": "asha", "max_t": 4, "metric": "val_loss"}


def _spec(**changes: Any) -> dict[str, Any]:
    base = {
        "name": "mo",
        "trainable": "hpsearch.examples.digits:train_loop",
        **MO,
        "search_space": {"lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True}, "hidden": [16, 64]},
        "searcher": {"type": "optuna", "sampler": "nsga2"},
        "scheduler": ASHA,
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(raw, check_trainable=False)
    return [str(p) for p in info.value.problems]


# ----------------------------------------------------------------------------- the spec


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param(
            {"mode": ["min"]},
            "mode: has 1 mode(s) for 2 metric(s); give one mode (min or max) per metric",
            id="lengths-differ",
        ),
        pytest.param(
            {"mode": "min"},
            "mode: must be a list of 2 modes, one per metric (e.g. mode: [min, min]), got 'min'",
            id="mode-a-string",
        ),
        pytest.param(
            {"metric": "val_loss"},
            "mode: is a list, so metric must be a list of as many names, got 'val_loss'",
            id="metric-a-string",
        ),
        pytest.param(
            {"metric": ["val_loss", "val_loss"]},
            "metric[1]: 'val_loss' is already metric[0]; each objective needs its own metric",
            id="duplicate",
        ),
        pytest.param(
            {"mode": ["min", "minimise"]}, "mode[1]: must be 'min' or 'max', got 'minimise'", id="mode-not-min-max"
        ),
        pytest.param({"metric": ["val_loss", ""]}, "metric[1]: must be a non-empty string, got ''", id="empty-name"),
        pytest.param({"metric": [], "mode": []}, "metric: must name at least one metric, got []", id="no-objective"),
        pytest.param(
            {"searcher": {"type": "hyperopt"}},
            "searcher.type: searcher 'hyperopt' cannot search several objectives (HyperOpt minimises one number); "
            "use searcher optuna (sampler nsga2, nsga3, tpe, gp or random) or random",
            id="hyperopt-refused",
        ),
        pytest.param(
            {"searcher": {"type": "optuna", "sampler": "cmaes"}},
            "searcher.sampler: Optuna's 'cmaes' sampler cannot search several objectives (CMA-ES adapts to one "
            "number); use nsga2, nsga3, tpe, gp or random",
            id="cmaes-refused",
        ),
        pytest.param(
            {"scheduler": {"type": "asha"}},
            "scheduler.metric: is required with several objectives: a scheduler compares trials on one number, so "
            "name the metric it stops trials by (e.g. scheduler: {type: asha, metric: val_loss, mode: min})",
            id="scheduler-without-metric",
        ),
        pytest.param(
            {"scheduler": {"type": "median", "metric": "val_acc"}},
            "scheduler.mode: is required: 'val_acc' is not one of the objectives, so say which way is better",
            id="scheduler-other-metric-without-mode",
        ),
        pytest.param(
            {"scheduler": {"type": "hyperband", "metric": "n_params", "mode": "max"}},
            "scheduler.mode: must be 'min', the mode of objective 'n_params' (or left out), got 'max'",
            id="scheduler-mode-contradicts-objective",
        ),
        pytest.param(
            {"metric": "val_loss", "mode": "min", "scheduler": {"type": "asha", "metric": "val_acc"}},
            "scheduler.metric: must be the spec's metric 'val_loss' (or left out) with one objective: the scheduler "
            "stops trials by the number they are ranked by, got 'val_acc'",
            id="single-objective-scheduler-other-metric",
        ),
        pytest.param(
            {"metric": "val_loss", "mode": "min", "scheduler": {"type": "asha", "mode": "max"}},
            "scheduler.mode: must be the spec's mode 'min' (or left out), got 'max'",
            id="single-objective-scheduler-other-mode",
        ),
        pytest.param(
            {"searcher": {"type": "optuna", "sampler": "tpe", "population_size": 4}},
            "searcher.population_size: applies to samplers 'nsga2' and 'nsga3' only, not 'tpe'",
            id="population-size-not-nsga",
        ),
        pytest.param(
            {"searcher": {"type": "optuna", "sampler": "nsga2", "population_size": 1}},
            "searcher.population_size: must be greater than or equal to 2, got 1",
            id="population-size-too-small",
        ),
    ],
)
def test_each_multi_objective_mistake_is_one_problem_with_its_path(changes: dict[str, Any], expected: str) -> None:
    assert _problems(_spec(**changes)) == [expected]


def test_a_mistake_in_the_objectives_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_spec(mode=["min"], storage_path=str(tmp_path / "out"))))
    assert main(["run", str(path)]) == 2
    assert "mode: has 1 mode(s) for 2 metric(s)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("sampler", ["nsga2", "nsga3", "tpe", "gp", "random"])
def test_every_optuna_sampler_that_can_search_several_objectives_is_accepted(sampler: str) -> None:
    spec = load_spec(_spec(searcher={"type": "optuna", "sampler": sampler}), check_trainable=False)
    assert spec.objectives == (("val_loss", "min"), ("n_params", "min"))
    assert spec.multi_objective and (spec.metric, spec.mode) == ("val_loss", "min")  # the primary objective


def test_a_multi_objective_spec_round_trips_with_its_lists() -> None:
    spec = load_spec(_spec(scheduler={"type": "asha", "max_t": 4, "metric": "val_loss"}), check_trainable=False)
    data = spec.to_dict()
    assert (data["metric"], data["mode"]) == (["val_loss", "n_params"], ["min", "min"])
    assert data["scheduler"]["metric"] == "val_loss" and "mode" not in data["scheduler"]
    assert spec.scheduler_metric == ("val_loss", "min")  # the mode of the objective it names
    again = load_spec(yaml.safe_load(yaml.safe_dump(data)), check_trainable=False)
    assert again.objectives == spec.objectives and again.scheduler == spec.scheduler


def test_a_single_metric_is_unchanged() -> None:
    spec = load_spec(_spec(metric="val_acc", mode="max", scheduler={"type": "asha"}), check_trainable=False)
    assert spec.objectives == (("val_acc", "max"),) and not spec.multi_objective
    assert (spec.to_dict()["metric"], spec.to_dict()["mode"]) == ("val_acc", "max")
    assert "metric" not in spec.to_dict()["scheduler"]  # not written where the spec gave none
    assert spec.scheduler_metric == ("val_acc", "max")
    # a one-item list is one objective, written back as the name
    one = load_spec(_spec(metric=["val_acc"], mode=["max"], scheduler={"type": "asha"}), check_trainable=False)
    assert one.objectives == (("val_acc", "max"),) and one.to_dict()["metric"] == "val_acc"


def test_the_shipped_spec_is_valid_and_multi_objective() -> None:
    spec = load_spec(SHIPPED)
    assert spec.objectives == (("val_loss", "min"), ("n_params", "min"))
    assert spec.searcher.type == "optuna" and spec.searcher.options.sampler == "nsga2"  # type: ignore[attr-defined]  # OptunaOptions
    assert spec.scheduler.type == "asha" and spec.scheduler_metric == ("val_loss", "min")
    text = SHIPPED.read_text()
    assert text.startswith("# ") and "2-CPU laptop" in text


def test_every_report_must_hold_every_objective_and_the_schedulers_metric() -> None:
    from hpsearch.runtime.search.tuner import _required_metrics

    spec = load_spec(_spec(scheduler={"type": "asha", "metric": "val_acc", "mode": "max"}), check_trainable=False)
    assert _required_metrics(spec) == {"n_params": "metric", "val_acc": "metric"}  # besides the primary metric
    single = load_spec(_spec(metric="val_loss", mode="min", scheduler={"type": "asha"}), check_trainable=False)
    assert _required_metrics(single) == {}


# ----------------------------------------------------------------------------- searchers and schedulers, by hand


def _drive(searcher: Any, space: dict[str, Any], results: list[dict[str, float]]) -> None:
    """Tune's side of a search with TuneConfig(metric=None): properties, then suggest/complete per trial."""
    assert searcher.set_search_properties(None, None, space)
    for i, result in enumerate(results):
        trial_id = f"t{i}"
        config = searcher.suggest(trial_id)
        assert config is not None and 1e-4 <= config["lr"] <= 1e-1
        searcher.on_trial_complete(trial_id, result={**result, "config": config})


@pytest.mark.parametrize("sampler", ["nsga2", "nsga3", "tpe", "random"])
def test_the_optuna_searcher_gets_every_objective(sampler: str) -> None:
    from ray import tune

    spec = load_spec(
        _spec(
            searcher={
                "type": "optuna",
                "sampler": sampler,
                "seed": 0,
                **({"population_size": 2} if "nsga" in sampler else {}),
            }
        ),
        check_trainable=False,
    )
    limiter = build_searcher(spec.searcher, SearcherContext(["val_loss", "n_params"], ["min", "min"], 2))
    searcher = limiter.searcher
    _drive(
        limiter,
        {"lr": tune.loguniform(1e-4, 1e-1)},
        [{"val_loss": 1.0 / (i + 1), "n_params": 100.0 * i} for i in range(5)],
    )
    study = searcher._ot_study
    assert [d.name for d in study.directions] == ["MINIMIZE", "MINIMIZE"]
    assert [t.values for t in study.trials][:2] == [[1.0, 0.0], [0.5, 100.0]]


def test_the_random_searcher_needs_no_metric() -> None:
    from ray import tune

    spec = load_spec(_spec(searcher={"type": "random", "seed": 0}), check_trainable=False)
    generator = build_searcher(spec.searcher, SearcherContext(["val_loss", "n_params"], ["min", "min"], 2))
    assert generator.set_search_properties(None, None, {"lr": tune.loguniform(1e-4, 1e-1)})


@pytest.mark.parametrize("scheduler", ["asha", "median", "hyperband"])
def test_a_multi_objective_scheduler_is_built_with_its_own_metric(scheduler: str) -> None:
    spec = load_spec(_spec(scheduler={"type": scheduler, "metric": "val_loss"}), check_trainable=False)
    built = build_scheduler(spec.scheduler, SchedulerContext(*spec.scheduler_metric, own=spec.multi_objective))
    assert (built.metric, built._mode) == ("val_loss", "min")
    assert built.set_search_properties(None, None)  # TuneConfig(metric=None): Ray accepts it as built
    single = load_spec(_spec(metric="val_loss", mode="min", scheduler={"type": scheduler}), check_trainable=False)
    plain = build_scheduler(single.scheduler, SchedulerContext(*single.scheduler_metric))
    assert plain.metric is None and plain.set_search_properties("val_loss", "min")  # Tune hands it the metric


# ----------------------------------------------------------------------------- the front and its hypervolume


@pytest.mark.parametrize(
    ("reports", "modes", "front"),
    [
        pytest.param(
            {"a": [(1, [0.5, 10])], "b": [(1, [0.3, 20])], "c": [(1, [0.6, 20])]},
            ["min", "min"],
            ["b", "a"],
            id="min-min",
        ),
        pytest.param(
            {"a": [(1, [0.5, 10])], "b": [(1, [0.3, 20])], "c": [(1, [0.6, 20])]}, ["max", "max"], ["c"], id="max-max"
        ),
        pytest.param(
            {"a": [(1, [0.5, 10])], "b": [(1, [0.5, 10])]}, ["min", "min"], ["a", "b"], id="equal-points-both-on"
        ),
        pytest.param({"a": [(1, [0.5, 10])], "b": [(1, [0.5, 11])]}, ["min", "min"], ["a"], id="weakly-dominated-off"),
        pytest.param(
            {"a": [(1, [0.5, 10])], "b": [(1, [NAN, 1])], "c": [(1, [0.1, NAN])], "d": [(1, [0.2, None])]},
            ["min", "min"],
            ["a"],
            id="nan-and-missing-never-on-nor-dominating",
        ),
        pytest.param(
            {"a": [(1, [0.5, 10])], "b": [(1, [0.1, float("-inf")])]}, ["min", "min"], ["a"], id="infinite-never-on"
        ),
        pytest.param(
            # the point is the report with the best first objective (epoch 2), not each objective's best
            {"a": [(1, [0.9, 1]), (2, [0.2, 50]), (3, [0.4, 2])], "b": [(1, [0.3, 10])]},
            ["min", "min"],
            ["a", "b"],  # a's best of each, (0.2, 1), would dominate b
            id="point-at-the-best-primary-report",
        ),
        pytest.param(
            {"a": [(1, [0.2, 50]), (2, [0.2, 10])], "b": [(1, [0.3, 40])]},
            ["min", "min"],
            ["a", "b"],
            id="earliest-best-primary-wins-a-tie",
        ),
    ],
)
def test_the_front_is_the_non_dominated_points(reports: dict[str, Any], modes: list[str], front: list[str]) -> None:
    found = front_of_reports(reports, modes)  # type: ignore[arg-type]  # str modes from the table
    assert [p.trial_id for p in found.front] == front


def test_errored_trials_have_no_point_and_a_point_is_one_report() -> None:
    found = front_of_reports(
        {"a": [(1, [0.1, 1])], "b": [(1, [0.9, 30]), (2, [0.5, 20]), (3, [0.7, 5])]},
        ["min", "min"],
        statuses={"a": "errored"},
    )
    assert [(p.trial_id, p.iteration, p.values) for p in found.points] == [("b", 2, (0.5, 20.0))]


@pytest.mark.parametrize(
    ("points", "reference", "modes", "expected"),
    [
        pytest.param([(1, 3), (2, 2), (3, 1)], (4, 4), ["min", "min"], 6.0, id="2d-staircase"),
        pytest.param([(1, 1)], (2, 3), ["min", "min"], 2.0, id="2d-one-box"),
        pytest.param([(1, 3), (2, 2), (1, 3)], (4, 4), ["min", "min"], 5.0, id="2d-duplicates-count-once"),
        pytest.param([(5, 1), (1, 1)], (4, 4), ["min", "min"], 9.0, id="2d-point-beyond-reference-adds-nothing"),
        pytest.param([(3, 2), (2, 1)], (0, 4), ["max", "min"], 8.0, id="2d-a-max-objective"),
        pytest.param([(1, 1, 1)], (2, 2, 2), ["min"] * 3, 1.0, id="3d-one-box"),
        # boxes [1,3]x[2,3]x[2,3] (2) and [2,3]x[1,3]x[1,3] (4) overlap in [2,3]x[2,3]x[2,3] (1)
        pytest.param([(1, 2, 2), (2, 1, 1)], (3, 3, 3), ["min"] * 3, 5.0, id="3d-overlap"),
        pytest.param([(0.5,)], (2,), ["min"], 1.5, id="1d"),
        pytest.param([], (2, 2), ["min", "min"], 0.0, id="empty"),
    ],
)
def test_hypervolume_hand_computed(points: list[Any], reference: Any, modes: list[str], expected: float) -> None:
    assert hypervolume(points, reference, modes) == pytest.approx(expected)  # type: ignore[arg-type]  # str modes


def test_hypervolume_matches_optuna_on_random_fronts() -> None:
    import numpy as np
    from optuna._hypervolume import compute_hypervolume  # Optuna's exact WFG, to check against

    rng = random.Random(0)
    for dims, n in itertools.product((2, 3, 4), (1, 5, 12)):
        points = [tuple(rng.random() for _ in range(dims)) for _ in range(n)]
        ref = (1.1,) * dims
        expected = compute_hypervolume(np.array(points), np.array(ref), assume_pareto=False)
        assert hypervolume(points, ref, ["min"] * dims) == pytest.approx(expected, rel=1e-12)


def test_dominates() -> None:
    assert dominates((1, 1), (1, 2), ["min", "min"]) and not dominates((1, 2), (1, 2), ["min", "min"])
    assert dominates((2, 1), (1, 2), ["max", "min"]) and not dominates((1, 1), (2, 0), ["min", "min"])


# ----------------------------------------------------------------------------- results from a folder


def _mo_trials() -> list[FakeTrial]:
    def t(i: int, loss: list[Any], params: list[Any], status: str = "finished", hidden: int = 32) -> FakeTrial:
        return FakeTrial(
            f"abcd{i:04d}", {"lr": 0.01 * i, "hidden": hidden}, loss, status=status, extra={"n_params": params}
        )

    return [
        t(1, [0.5, 0.4], [100, 100]),  # point (0.4, 100) at epoch 2: on the front
        t(2, [0.3, 0.35], [200, 200], status="stopped", hidden=64),  # (0.3, 200) at epoch 1: on the front
        t(3, [0.6, 0.45], [300, 300], hidden=128),  # (0.45, 300): dominated by both
        t(4, [NAN], [50]),  # NaN loss: never on the front
        t(5, [0.2], [NAN]),  # NaN size: never on the front
        t(6, [0.1], [10], status="errored"),  # errored: no point
    ]


@pytest.fixture
def mo_exp(tmp_path: Path) -> Path:
    spec = spec_dict("mo", **MO, scheduler={**ASHA, "time_attr": "training_iteration"})
    return write_experiment(tmp_path / "mo", _mo_trials(), spec=spec)


def test_results_pareto_holds_the_front_best_first(mo_exp: Path) -> None:
    results = load_results(mo_exp)
    assert results.multi_objective and results.objectives == (("val_loss", "min"), ("n_params", "min"))
    assert (results.metric, results.mode) == ("val_loss", "min")
    front = results.pareto
    assert list(front.columns[:6]) == ["trial_id", "number", "status", "iteration", "val_loss", "n_params"]
    assert front[["trial_id", "iteration", "val_loss", "n_params"]].values.tolist() == [
        ["abcd0002", 1, 0.3, 200.0],
        ["abcd0001", 2, 0.4, 100.0],
    ]
    assert front["hidden"].tolist() == [64, 32]  # the searched parameters follow
    # (1 - 0.3) * (400 - 200) + (1 - 0.4) * (200 - 100)
    assert results.hypervolume([1.0, 400]) == pytest.approx(200.0)
    assert results.hypervolume((0.35, 400)) == pytest.approx(0.05 * 200)  # only trial 2 is inside the reference


@pytest.mark.parametrize("reference", [[1.0], [1.0, 2.0, 3.0], [1.0, NAN], ["a", 1]])
def test_a_bad_reference_is_refused(mo_exp: Path, reference: list[Any]) -> None:
    with pytest.raises(ResultsError, match="one .*per objective"):
        load_results(mo_exp).hypervolume(reference)


def test_a_single_objective_folder_has_one_objective(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "one", _mo_trials()[:3])
    results = load_results(exp)
    assert results.objectives == (("val_loss", "min"),) and not results.multi_objective
    assert results.pareto["trial_id"].tolist() == ["abcd0002"]  # one objective: the best trial
    assert results.hypervolume([1.0]) == pytest.approx(0.7)
    # ranking by another metric is a single-objective view of a multi-objective folder
    assert load_results(
        write_experiment(tmp_path / "mo", _mo_trials(), spec=spec_dict("mo", **MO)), metric="n_params", mode="min"
    ).objectives == (("n_params", "min"),)


def test_the_summary_and_the_closing_table_list_the_front(mo_exp: Path) -> None:
    summary = summarize(load_results(mo_exp))
    data = summary.as_dict()
    assert data["objectives"] == [["val_loss", "min"], ["n_params", "min"]]
    assert [p["trial_id"] for p in data["pareto"]] == ["abcd0002", "abcd0001"]
    table = pareto_front_table(summary, varying=["lr", "hidden"]).splitlines()
    assert table[0].split() == ["trial_id", "status", "reports", "epoch", "val_loss", "n_params", "lr", "hidden"]
    assert [row.split()[:6] for row in table[1:]] == [
        ["abcd0002", "stopped", "2", "1", "0.3", "200"],
        ["abcd0001", "finished", "2", "2", "0.4", "100"],
    ]


def test_the_plot_data_and_the_staircase(mo_exp: Path) -> None:
    data = pareto_front(load_results(mo_exp))
    assert data.trial_ids == ["abcd0001", "abcd0002", "abcd0003"]  # complete points only
    assert data.on_front == [True, True, False] and data.left_out == 2
    assert data.pairs == [(0, 1)]
    assert data.staircase(0, 1) == ([0.3, 0.4, 0.4], [200.0, 200.0, 100.0])


def test_pareto_front_draws_two_objectives_and_a_grid_for_three(tmp_path: Path, mo_exp: Path) -> None:
    import hpsearch

    ax = hpsearch.plots.pareto_front(load_results(mo_exp))
    assert ax.get_xlabel() == "val_loss (lower is better)" and "2 of 3 trials" in ax.get_title()
    rng = random.Random(1)
    trials = [
        FakeTrial(
            f"bbbb{i:04d}",
            {"lr": 0.01},
            [rng.random()],
            extra={"n_params": [rng.randint(1, 9)], "val_acc": [rng.random()]},
        )
        for i in range(8)
    ]
    three = {"metric": ["val_loss", "n_params", "val_acc"], "mode": ["min", "min", "max"]}
    exp = write_experiment(tmp_path / "three", trials, spec=spec_dict("three", **three))
    axes = hpsearch.plots.pareto_front(load_results(exp))
    assert [a.get_ylabel() for a in axes] == [
        "n_params (lower is better)",
        "val_acc (higher is better)",
        "val_acc (higher is better)",
    ]


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_the_report_shows_the_front_and_its_trials(mo_exp: Path, fmt: str) -> None:
    from hpsearch.results.report import write_report

    text = write_report(mo_exp, fmt=fmt).read_text()
    if fmt == "md":  # the facts as they read: every punctuation character of a string is escaped in Markdown
        text = re.sub(r"\\(.)", r"\1", text)
    assert "Pareto front (2 trials)" in text and "val_loss (min), n_params (min)" in text
    front = text[text.index("Pareto front (2 trials)") :]
    assert front.index("abcd0002") < front.index("abcd0001")
    if fmt == "md":
        assert (mo_exp / "hpsearch_report_pareto_front.png").is_file()
    else:
        assert "<h3>Pareto front</h3><img" in text


def test_a_single_objective_report_has_no_front(tmp_path: Path) -> None:
    from hpsearch.results.report import write_report

    text = write_report(write_experiment(tmp_path / "one", _mo_trials()[:3])).read_text()
    assert "Pareto front" not in text and "<h2>Best trials</h2>" in text


def test_export_writes_a_study_with_a_direction_per_objective(
    mo_exp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'mo.db'}"
    assert main(["export", str(mo_exp), "--optuna", storage]) == 0
    assert "Exported 6 trials" in capsys.readouterr().out
    study = optuna.load_study(study_name="mo", storage=storage)
    assert [d.name for d in study.directions] == ["MINIMIZE", "MINIMIZE"]
    assert study.metric_names == ["val_loss", "n_params"]
    assert [(t.state.name, t.values) for t in study.trials] == [
        ("COMPLETE", [0.4, 100.0]),
        ("PRUNED", None),  # stopped early: PRUNED as for one objective; its point is a user attribute
        ("COMPLETE", [0.45, 300.0]),
        ("FAIL", None),
        ("FAIL", None),
        ("FAIL", None),
    ]
    assert study.trials[1].user_attrs["point"] == {"val_loss": 0.3, "n_params": 200.0}
    assert study.trials[4].user_attrs["fail_reason"] == (
        "its point (the report with its best val_loss) has no finite number for n_params"
    )
    complete = to_optuna_study(load_results(mo_exp), stopped_as_complete=True)
    assert sorted(t.user_attrs["trial_id"] for t in complete.best_trials) == ["abcd0001", "abcd0002"]  # the front


# ----------------------------------------------------------------------------- one real search


@pytest.mark.ray
@pytest.mark.timeout(300)
@pytest.mark.full
def test_a_multi_objective_search_on_ray(ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped spec, shrunk: 2 one-worker digits trials of 1 epoch, at once, NSGA-II and ASHA on val_loss."""
    code = main(
        [
            "run",
            str(SHIPPED),
            *("--set", "num_samples=2", "--set", "search_space.epochs=1", "--set", "scheduler.max_t=1"),
            *("--set", "scheduler.grace_period=1"),
            *("--set", "scaling.num_workers=1", "--set", "searcher.population_size=2"),
            *("--set", f"storage_path={tmp_path}"),
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "Pareto front by val_loss (min), n_params (min)" in out.out and "Best trials by" not in out.out
    exp = tmp_path / "digits-multi-objective"
    results = load_results(exp)
    front = results.pareto
    assert len(front) >= 1
    points = [tuple(p) for p in front[["val_loss", "n_params"]].itertuples(index=False)]
    assert all(math.isfinite(v) for p in points for v in p)
    assert not any(dominates(a, b, ["min", "min"]) for a in points for b in points)
    assert (results.history["n_params"] > 0).all() and results.history["n_params"].notna().all()
    assert results.hypervolume([10.0, 1e6]) > 0
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert main(["export", str(exp), "--optuna", storage]) == 0
    study = optuna.load_study(study_name="digits-multi-objective", storage=storage)
    assert [d.name for d in study.directions] == ["MINIMIZE", "MINIMIZE"]
