"""hpsearch results as an Optuna study: states, values, intermediate values, distributions, storage."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from fake_experiment import FakeTrial, standard_trials, write_experiment
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from hpsearch import to_optuna_study
from hpsearch.analysis import load_results
from hpsearch.cli import main
from hpsearch.errors import ExportError


@pytest.fixture
def exp(tmp_path: Path) -> Path:
    return write_experiment(tmp_path / "fake", standard_trials())


def test_states_values_and_intermediate_values(exp: Path) -> None:
    study = to_optuna_study(load_results(exp))
    assert study.study_name == "fake" and study.direction == optuna.study.StudyDirection.MINIMIZE
    trials = study.trials
    assert [t.state for t in trials] == [
        TrialState.COMPLETE,
        TrialState.PRUNED,
        TrialState.COMPLETE,
        TrialState.FAIL,
        TrialState.PRUNED,
    ]
    assert [t.value for t in trials] == [0.2, None, 0.1, None, None]  # a complete trial's value is its best
    assert trials[2].intermediate_values == {1: 0.8, 2: 0.25, 3: 0.1, 4: 0.15}
    assert trials[4].intermediate_values == {1: 0.9, 2: 0.6}
    assert study.best_trial.user_attrs["trial_id"] == "aaaa0003"


def test_params_and_distributions_come_from_the_spec(exp: Path) -> None:
    trial = to_optuna_study(load_results(exp)).trials[0]
    assert trial.params == {"lr": 0.01, "hidden": 64, "layers": 2, "dropout": 0.1}
    assert trial.distributions == {
        "lr": FloatDistribution(1e-4, 0.1, log=True),
        "hidden": CategoricalDistribution([32, 64, 128]),
        "layers": IntDistribution(1, 3),
        "dropout": FloatDistribution(0.0, 0.4, step=0.1),
    }


def test_user_attrs_keep_what_optuna_has_no_field_for(exp: Path) -> None:
    study = to_optuna_study(load_results(exp))
    attrs = study.trials[3].user_attrs
    assert attrs["trial_id"] == "aaaa0004" and attrs["status"] == "errored"
    assert attrs["error"] == "RuntimeError: CUDA out of memory"
    assert attrs["epochs"] == 4 and attrs["opt.momentum"] == 0.9  # constants of the config
    assert study.user_attrs == {"hpsearch_experiment_dir": str(exp.resolve()), "metric": "val_loss", "mode": "min"}


def test_stopped_as_complete(exp: Path) -> None:
    study = to_optuna_study(load_results(exp), stopped_as_complete=True)
    assert [t.state.name for t in study.trials].count("COMPLETE") == 4
    assert study.trials[1].value == 2.0


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_written_to_sqlite_and_read_back_by_optunas_tools(exp: Path, tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    url = f"sqlite:///{tmp_path / 'search.db'}"
    to_optuna_study(exp, storage=url)  # an experiment folder works as well
    study = optuna.load_study(study_name="fake", storage=url)
    assert len(study.trials) == 5
    assert study.trials[2].intermediate_values == {1: 0.8, 2: 0.25, 3: 0.1, 4: 0.15}
    optuna.visualization.matplotlib.plot_intermediate_values(study)
    optuna.visualization.matplotlib.plot_optimization_history(study)
    with pytest.raises(ExportError, match="study 'fake' already exists"):
        to_optuna_study(exp, storage=url)
    to_optuna_study(exp, storage=url, overwrite=True)
    assert len(optuna.load_study(study_name="fake", storage=url).trials) == 5


def test_cli_export(exp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["export", str(exp), "--optuna", url, "--study-name", "mine"]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"Exported 5 trials (2 complete, 2 pruned, 1 failed) to Optuna study 'mine' in {url}\n"
        f"Look at it with: optuna-dashboard {url}\n"
    )
    assert main(["export", str(exp), "--optuna", url, "--study-name", "mine"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: study 'mine' already exists") and err.count("\n") == 1


def test_the_export_error_is_one_class() -> None:
    from hpsearch.results import optuna_export

    assert optuna_export.ExportError is ExportError


def test_a_trial_without_a_finite_best_is_failed_with_the_reason(tmp_path: Path) -> None:
    # Optuna takes no NaN (nor ±inf) as a complete trial's value: such trials are FAIL, and say why
    config = {"lr": 0.01, "hidden": 64, "layers": 2, "dropout": 0.1, "epochs": 4, "opt": {"momentum": 0.9}}
    trials = [
        FakeTrial("eeee0001", config, [1.0]),
        FakeTrial("eeee0002", config, [float("nan")]),
        FakeTrial("eeee0003", config, [0.167]),
        FakeTrial("eeee0004", config, [float("nan"), float("-inf")]),  # only NaN and ±inf: the last is its best
        FakeTrial("eeee0005", config, ["diverged"]),
        FakeTrial("eeee0006", config, [float("nan"), 0.5, float("inf")], status="stopped"),
    ]
    url = f"sqlite:///{tmp_path / 'nan.db'}"
    to_optuna_study(write_experiment(tmp_path / "nan", trials), storage=url, stopped_as_complete=True)
    study = optuna.load_study(study_name="nan", storage=url)  # what a storage round trip keeps
    states = [t.state for t in study.trials]
    complete, fail = TrialState.COMPLETE, TrialState.FAIL
    assert states == [complete, fail, complete, fail, fail, complete]
    assert [t.value for t in study.trials] == [1.0, None, 0.167, None, None, 0.5]
    attrs = [t.user_attrs for t in study.trials]
    assert attrs[1]["fail_reason"] == "its best val_loss (nan) is not a finite number"
    assert attrs[3]["fail_reason"] == "its best val_loss (-inf) is not a finite number"
    assert attrs[4]["fail_reason"] == "it reported no number for val_loss"
    assert [a["best"] for a in attrs] == [1.0, "nan", 0.167, "-inf", None, 0.5]
    assert [a["rank"] for a in attrs] == [3, 4, 1, 5, None, 2]  # the one ranking, NaN and -inf last
    assert "fail_reason" not in attrs[0]
    assert study.trials[5].intermediate_values == {2: 0.5}  # NaN and inf are not intermediate values
    assert study.best_trial.user_attrs["trial_id"] == "eeee0003"  # hpsearch's best trial


def test_the_export_replaces_the_live_study_of_the_same_folder_only(exp: Path, tmp_path: Path) -> None:
    """`tracking.optuna` writes the study live; exporting the folder afterwards replaces it, and nothing else."""
    from hpsearch.analysis._optuna import LIVE_ATTR, study_attrs

    url = f"sqlite:///{tmp_path / 'live.db'}"

    def live_study(name: str, folder: Path) -> None:
        study = optuna.create_study(storage=url, study_name=name)
        for key, value in {**study_attrs(folder.resolve(), "val_loss", "min"), LIVE_ATTR: True}.items():
            study.set_user_attr(key, value)
        study.add_trial(optuna.trial.create_trial(state=TrialState.RUNNING))

    live_study("fake", exp)
    study = to_optuna_study(exp, storage=url)  # no overwrite needed: it is this search's live study
    assert len(study.trials) == 5 and LIVE_ATTR not in study.user_attrs
    with pytest.raises(ExportError, match="study 'fake' already exists"):  # an exported study: refused as before
        to_optuna_study(exp, storage=url)
    live_study("other", tmp_path / "elsewhere")
    with pytest.raises(ExportError, match="study 'other' already exists"):  # another folder's live study
        to_optuna_study(exp, storage=url, study_name="other")
