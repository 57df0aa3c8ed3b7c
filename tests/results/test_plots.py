"""Each plot draws under Agg from the results or from its data object; the data is tested in test_analysis."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from fake_experiment import standard_trials, write_experiment  # noqa: E402

from hpsearch import analysis as an  # noqa: E402
from hpsearch.results import plots  # noqa: E402

SINGLE = ["learning_curves", "optimization_history", "parallel_coordinates", "param_importances", "scheduler_effect"]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> an.Results:
    return an.load_results(write_experiment(tmp_path_factory.mktemp("plots") / "fake", standard_trials()))


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("name", SINGLE)
def test_each_plot_draws_on_a_new_figure(results: an.Results, name: str, tmp_path: Path) -> None:
    ax = getattr(plots, name)(results)
    assert ax.get_title()
    ax.figure.savefig(tmp_path / f"{name}.png")
    assert (tmp_path / f"{name}.png").stat().st_size > 1000


@pytest.mark.parametrize("name", SINGLE)
def test_each_plot_draws_on_the_given_axes_from_its_data_object(results: an.Results, name: str) -> None:
    _, ax = plt.subplots()
    data = getattr(an, name)(results)
    assert getattr(plots, name)(data, ax=ax) is ax


def test_param_vs_metric_one_panel_per_parameter_with_the_specs_log_axes(results: an.Results) -> None:
    axes = plots.param_vs_metric(results)
    assert [a.get_xlabel() for a in axes] == ["lr  (log)", "hidden", "layers", "dropout"]
    assert [a.get_xscale() for a in axes] == ["log", "linear", "linear", "linear"]
    assert [t.get_text() for t in axes[1].get_xticklabels()] == ["32", "64", "128"]
    assert axes[0].get_yscale() == "linear"  # best values span 0.1 .. 2.0: not more than LOG_SPAN (20x)


def test_param_vs_metric_on_given_axes(results: an.Results) -> None:
    _, axes = plt.subplots(1, 2)
    assert list(plots.param_vs_metric(results, params=["lr", "dropout"], ax=axes)) == list(axes)
    with pytest.raises(ValueError, match="pass one Axes per parameter: 4 parameter"):
        plots.param_vs_metric(results, ax=axes)


def test_learning_curves_mark_stopped_trials_and_the_best(results: an.Results) -> None:
    ax = plots.learning_curves(results)
    styles = [(line.get_color(), line.get_linestyle(), line.get_linewidth()) for line in ax.get_lines()]
    assert (plots.BEST_COLOR, "-", 2.6) in styles  # the best trial, thick
    assert any(c == plots.STATUS_STYLE["stopped"]["color"] and s == "--" for c, s, _ in styles)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["finished", "stopped early", "errored", "best: aaaa0003 (0.1)"]
    assert ax.get_yscale() == "log"


def test_scheduler_effect_title_states_the_saving(results: an.Results) -> None:
    ax = plots.scheduler_effect(results)
    assert ax.get_title() == (
        "ASHA stopped 2 of 5 trials early\n12 of 17 iterations run, 5 saved (29%; ~2 s of 2 min trial time)"
    )


def test_plots_of_an_experiment_without_trials_say_so(tmp_path: Path) -> None:
    empty = an.load_results(write_experiment(tmp_path / "empty", [], summary=False, outcomes=False))
    for name in SINGLE:
        ax = getattr(plots, name)(empty)
        assert ax.texts, name
    axes = plots.param_vs_metric(empty)
    assert axes[0].texts[0].get_text() == "no searched parameter with scored trials"


def test_importance_without_enough_trials_says_why(results: an.Results) -> None:
    ax = plots.param_importances(results.select(["aaaa0001"]))
    assert ax.texts[0].get_text() == "needs at least 4 finished or stopped trials with a value of val_loss, found 1"


def test_plots_with_nothing_to_draw_say_why(tmp_path: Path) -> None:
    from fake_experiment import FakeTrial

    trials = [
        FakeTrial("ffff0001", {"lr": 0.01}, [float("nan"), float("inf")]),
        FakeTrial("ffff0002", {"lr": 0.1}, [float("nan")], status="stopped"),
    ]
    results = an.load_results(write_experiment(tmp_path / "nan", trials))
    why = "every value of val_loss reported is NaN or infinite"
    for name in ("learning_curves", "optimization_history", "parallel_coordinates"):
        ax = getattr(plots, name)(results)
        assert [t.get_text() for t in ax.texts] == [why], name
        assert not ax.lines and not ax.collections, name
    assert plots.param_vs_metric(results)[0].texts[0].get_text() == "no searched parameter with scored trials"
    assert plots.scheduler_effect(results).patches  # iterations were run: the bars are drawn
