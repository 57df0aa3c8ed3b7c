"""Reading an experiment folder without Ray, and the data every plot is drawn from."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from fake_experiment import FakeTrial, standard_trials, write_experiment

from hpsearch import analysis as an
from hpsearch.analysis import ExperimentNotFoundError, ResultsError, load_results
from hpsearch.experiment.layout import OUTCOMES_FILE, SPEC_FILE, SUMMARY_FILE
from hpsearch.spec.space import FloatParam

IDS = ["aaaa0001", "aaaa0002", "aaaa0003", "aaaa0004", "aaaa0005"]


@pytest.fixture
def exp(tmp_path: Path) -> Path:
    return write_experiment(tmp_path / "fake", standard_trials())


@pytest.fixture
def results(exp: Path) -> an.Results:
    return load_results(exp)


# ----------------------------------------------------------------------------- trials


def test_trials_table_one_row_per_trial_in_creation_order(results: an.Results) -> None:
    t = results.trials
    assert list(t["trial_id"]) == IDS
    assert list(t["number"]) == [1, 2, 3, 4, 5]
    assert list(t["status"]) == ["finished", "stopped", "finished", "errored", "stopped"]
    assert list(t["iterations"]) == [4, 1, 4, 1, 2]
    assert list(t["best"]) == [0.2, 2.0, 0.1, 0.05, 0.6]
    assert list(t["last"]) == [0.2, 2.0, 0.15, 0.05, 0.6]
    assert list(t["best_iteration"]) == [4, 1, 3, 1, 2]
    assert list(t["wall_time_s"]) == [22.0, 20.5, 22.0, 20.5, 21.0]
    assert list(t["error"]) == ["", "", "", "RuntimeError: CUDA out of memory", ""]


def test_trials_table_columns_fixed_then_every_config_value_flattened(results: an.Results) -> None:
    columns = list(results.trials.columns)
    config = ["lr", "hidden", "layers", "dropout", "epochs", "opt.momentum"]
    fixed = list(an.TRIAL_COLUMNS)
    expected = fixed[: fixed.index("wall_time_s") + 1] + config + fixed[fixed.index("wall_time_s") + 1 :]
    assert columns == expected + ["resource_hours.CPU"]  # a resource-hours column per resource, CPU always
    assert results.trials.loc[2, ["lr", "hidden", "opt.momentum"]].tolist() == [0.05, 128, 0.9]
    assert results.params == ["lr", "hidden", "layers", "dropout"]  # constants are not searched


def test_best_is_the_best_non_errored_trial(results: an.Results) -> None:
    # aaaa0004 reported 0.05 but errored: it is not the best
    assert results.best["trial_id"] == "aaaa0003"
    assert results.best["best"] == 0.1
    assert results.counts == {"finished": 2, "stopped": 2, "errored": 1, "running": 0, "pending": 0}


def test_folders_and_the_best_checkpoint_still_on_disk(results: an.Results, exp: Path) -> None:
    row = results.trials.set_index("trial_id").loc["aaaa0003"]
    assert row["run_dir"] == str(exp.resolve() / "train" / "aaaa0003")
    assert Path(row["trial_dir"]).name.startswith("hpsearch_train_loop_aaaa0003_3_")
    # the last two checkpoints are kept (epochs 3 and 4); epoch 3 has the best val_loss
    assert Path(row["best_checkpoint"]).name == "checkpoint_2026-11-30_09-46-02.000003"
    # aaaa0001 is best at epoch 4, which is kept
    first = results.trials.set_index("trial_id").loc["aaaa0001"]
    assert Path(first["best_checkpoint"]).name == "checkpoint_2026-11-30_09-46-03.000001"


def test_best_checkpoint_is_none_when_no_checkpoint_is_kept(tmp_path: Path) -> None:
    results = load_results(write_experiment(tmp_path / "e", standard_trials(), keep=0))
    assert results.trials["best_checkpoint"].isna().all()


def test_paths_recorded_before_the_folder_moved_point_into_it_now(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "moved", standard_trials(), recorded_dir="/old/place/moved")
    results = load_results(exp)
    assert all(p.startswith(str(exp.resolve() / "train")) for p in results.history["checkpoint"])
    assert results.trials["best_checkpoint"].notna().all()


def test_times(results: an.Results) -> None:
    first = results.trials.loc[0]
    assert first["ended_at"] == pd.Timestamp(1_796_031_965 + 22, unit="s", tz="UTC")  # from hpsearch_trials.jsonl
    assert first["started_at"] == pd.Timestamp(1_796_031_965, unit="s", tz="UTC")
    assert results.wall_time_s == 123.4  # from the summary


# ----------------------------------------------------------------------------- history


def test_history_one_row_per_report(results: an.Results) -> None:
    h = results.history
    assert list(h.columns) == [*an.HISTORY_COLUMNS[:-1], "epoch", "train_loss", "val_loss", "val_acc", "checkpoint"]
    assert len(h) == 12
    assert h["trial_id"].tolist()[:5] == ["aaaa0001"] * 4 + ["aaaa0002"]  # in trial order
    assert h[h["trial_id"] == "aaaa0003"]["val_loss"].tolist() == [0.8, 0.25, 0.1, 0.15]
    assert h[h["trial_id"] == "aaaa0003"]["wall_time_s"].tolist() == [20.5, 21.0, 21.5, 22.0]


def test_history_prefers_epoch_and_keeps_the_last_report_of_a_repeated_epoch(tmp_path: Path) -> None:
    # a retried trial: Tune's counter restarts at 1, the loop resumes at epoch 3 and repeats it
    trial = FakeTrial("bbbb0001", {"lr": 0.01}, [0.9, 0.7, 0.5, 0.45, 0.3], epochs=[1, 2, 3, 3, 4])
    exp = write_experiment(tmp_path / "retry", [trial])
    rows = [json.loads(x) for x in next(exp.glob("hpsearch_*/result.json")).read_text().splitlines()]
    for row, counter in zip(rows, [1, 2, 3, 1, 2]):
        row["training_iteration"] = counter
    next(exp.glob("hpsearch_*/result.json")).write_text("".join(json.dumps(r) + "\n" for r in rows))
    h = load_results(exp).history
    assert h["iteration"].tolist() == [1, 2, 3, 4]
    assert h["val_loss"].tolist() == [0.9, 0.7, 0.45, 0.3]  # epoch 3 as reported the second time
    assert h["training_iteration"].tolist() == [1, 2, 1, 2]
    assert load_results(exp).trials.loc[0, "iterations"] == 4


def test_history_after_a_resume_restores_the_epochs_tune_dropped(tmp_path: Path) -> None:
    # after `hpsearch resume` Tune's result.json holds only the rows after the restart (epochs 3-4);
    # hpsearch's own train/<trial_id>/hpsearch_history.jsonl holds every report (epochs 1-3, then 3-4)
    trial = FakeTrial("dddd0001", {"lr": 0.01}, [0.5, 0.3], epochs=[3, 4])
    exp = write_experiment(tmp_path / "resumed", [trial])
    kept = exp / "train" / "dddd0001" / "hpsearch_history.jsonl"
    kept.parent.mkdir(parents=True, exist_ok=True)
    records = [(1, 0.9), (2, 0.7), (3, 0.55), (3, 0.5), (4, 0.3)]
    kept.write_text("".join(json.dumps({"time": 1.0e9 + e, "epoch": e, "val_loss": v}) + "\n" for e, v in records))
    h = load_results(exp).history
    assert h["iteration"].tolist() == [1, 2, 3, 4]  # every epoch once, in order
    assert h["val_loss"].tolist() == [0.9, 0.7, 0.5, 0.3]  # epochs 3-4 as Tune saw them after the restart


def test_history_without_epoch_uses_tunes_counter_and_keeps_every_report(tmp_path: Path) -> None:
    trial = FakeTrial("cccc0001", {"lr": 0.01}, [0.9, 0.7], report_epoch=False)
    h = load_results(write_experiment(tmp_path / "noepoch", [trial])).history
    assert h["iteration"].tolist() == [1, 2]
    assert "epoch" not in h


def test_a_half_written_last_line_is_skipped(exp: Path) -> None:
    result = next(exp.glob("hpsearch_train_loop_aaaa0001_*/result.json"))
    result.write_text(result.read_text() + '{"epoch": 5, "val_lo')
    assert load_results(exp).trials.loc[0, "iterations"] == 4


# ----------------------------------------------------------------------------- statuses


def test_status_from_the_outcomes_file_wins_over_the_summary(exp: Path) -> None:
    summary = json.loads((exp / SUMMARY_FILE).read_text())
    summary["trials"][0]["status"] = "stopped"
    (exp / SUMMARY_FILE).write_text(json.dumps(summary))
    assert load_results(exp).trials.loc[0, "status"] == "finished"


def test_status_from_the_summary_without_an_outcomes_file(exp: Path) -> None:
    (exp / OUTCOMES_FILE).unlink()
    assert list(load_results(exp).trials["status"]) == ["finished", "stopped", "finished", "errored", "stopped"]


def test_status_from_tunes_files_for_a_folder_without_hpsearch_records(tmp_path: Path) -> None:
    # no outcomes file, no summary: error.txt -> errored; Tune's TERMINATED before max_t (4) -> stopped
    exp = write_experiment(tmp_path / "old", standard_trials(), outcomes=False, summary=False, state=True)
    results = load_results(exp)
    assert list(results.trials["status"]) == ["finished", "stopped", "finished", "errored", "stopped"]
    assert results.trials.loc[3, "error"] == "RuntimeError: CUDA out of memory"  # from error.txt
    assert not results.ended
    assert results.wall_time_s == pytest.approx(71.0)  # first start to last end


def test_a_running_search(tmp_path: Path) -> None:
    trials = standard_trials()
    trials[4].status = "running"
    exp = write_experiment(tmp_path / "live", trials, summary=False, state=False)
    results = load_results(exp)
    assert results.trials.loc[4, "status"] == "running"
    assert pd.isna(results.trials.loc[4, "ended_at"])
    assert results.trials.loc[0, "status"] == "finished"


def test_pending_trials_from_tunes_state(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "live", standard_trials()[:1], summary=False, outcomes=False, state=True)
    state_file = next(exp.glob("experiment_state-*.json"))
    state = json.loads(state_file.read_text())
    pending = {"trial_id": "dddd0009", "status": "PENDING", "config": {"lr": 0.02}, "experiment_tag": "2_lr=0.02"}
    state["trial_data"].append([json.dumps(pending), "{}"])
    state_file.write_text(json.dumps(state))
    trials = load_results(exp).trials
    assert trials["trial_id"].tolist() == ["aaaa0001", "dddd0009"]
    assert trials.loc[1, ["number", "status", "iterations", "lr"]].tolist() == [2, "pending", 0, 0.02]


# ----------------------------------------------------------------------------- options and errors


def test_another_metric_and_mode(exp: Path) -> None:
    results = load_results(exp, metric="val_acc", mode="max")
    assert (results.metric, results.mode) == ("val_acc", "max")
    assert results.trials["best"].tolist() == [0.85, 0.1, 0.9, 0.99, 0.5]
    assert results.best["trial_id"] == "aaaa0003"


def test_a_metric_nobody_reported_is_refused_with_a_suggestion(exp: Path) -> None:
    with pytest.raises(ResultsError, match=r"no trial reported metric 'val_acx'; did you mean 'val_acc'\?"):
        load_results(exp, metric="val_acx", mode="max")
    with pytest.raises(ResultsError, match="mode must be 'min' or 'max'"):
        load_results(exp, metric="val_acc")  # another metric needs its mode


def test_missing_and_non_experiment_folders(tmp_path: Path, exp: Path) -> None:
    with pytest.raises(ExperimentNotFoundError, match="does not exist"):
        load_results(tmp_path / "nope")
    with pytest.raises(ExperimentNotFoundError, match=r"is not an experiment folder .*experiments inside it: fake"):
        load_results(tmp_path)
    assert isinstance(ExperimentNotFoundError("x"), FileNotFoundError)


def test_a_plain_tune_folder_needs_metric_and_mode(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "tune", standard_trials(), spec=None, summary=False, outcomes=False, state=True)
    with pytest.raises(ResultsError, match="pass metric= and mode="):
        load_results(exp)
    results = load_results(exp, metric="val_loss", mode="min")
    assert results.name == "tune"
    assert results.params == ["lr", "hidden", "layers", "dropout"]  # the config values that differ
    assert results.space == {}


def test_an_experiment_that_has_not_started_a_trial(tmp_path: Path) -> None:
    results = load_results(write_experiment(tmp_path / "new", [], summary=False, outcomes=False))
    assert results.trials.empty and results.history.empty
    assert results.best is None
    assert "0 trials" in repr(results)


def test_space_carries_the_specs_distributions(results: an.Results) -> None:
    assert results.space["lr"] == FloatParam(low=1e-4, high=0.1, log=True)
    assert results.spec["name"] == "fake" and results.plan["max_concurrent_trials"] == 2


def test_select_restricts_trials_and_history(results: an.Results) -> None:
    sub = results.select(["aaaa0001", "aaaa0005"])
    assert sub.trials["trial_id"].tolist() == ["aaaa0001", "aaaa0005"]
    assert set(sub.history["trial_id"]) == {"aaaa0001", "aaaa0005"}
    assert sub.best["trial_id"] == "aaaa0001"


def test_repr(results: an.Results) -> None:
    assert (
        repr(results) == "<Results 'fake': 5 trials (2 finished, 2 stopped, 1 errored); best val_loss=0.1 (aaaa0003)>"
    )


def test_loading_results_imports_no_ray_matplotlib_or_optuna(exp: Path) -> None:
    script = (
        "import sys, hpsearch\n"
        f"r = hpsearch.load_results({str(exp)!r})\n"
        "print(sorted(m for m in ('ray', 'matplotlib', 'optuna', 'torch') if m in sys.modules), len(r.trials))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[] 5"


# ----------------------------------------------------------------------------- plot data


def test_best_trials_table(results: an.Results) -> None:
    table = an.best_trials(results, n=3)
    assert table["trial_id"].tolist() == ["aaaa0003", "aaaa0001", "aaaa0005"]  # errored one left out
    assert list(table.columns) == [
        "trial_id",
        "number",
        "status",
        "iterations",
        "best_iteration",
        "val_loss",
        "train_loss",
        "val_acc",
        "lr",
        "hidden",
        "layers",
        "dropout",
    ]
    # the other metrics are those of the best iteration (epoch 3 of aaaa0003), not of the last
    assert table.loc[0, ["val_loss", "val_acc"]].tolist() == [0.1, 0.9]
    assert len(an.best_trials(results, n=None)) == 4


def test_learning_curves_data(results: an.Results) -> None:
    data = an.learning_curves(results)
    assert [c.trial_id for c in data.curves] == IDS
    third = data.curves[2]
    assert (third.status, third.x, third.y) == ("finished", [1.0, 2.0, 3.0, 4.0], [0.8, 0.25, 0.1, 0.15])
    assert data.curves[1].status == "stopped"
    assert (data.x_label, data.best_trial_id, data.max_t, data.rungs) == ("epoch", "aaaa0003", 4.0, [1, 2])
    assert data.log_y  # 0.05 .. 2.0 spans 40x
    assert an.learning_curves(results, "val_acc").curves[0].y == [0.5, 0.7, 0.8, 0.85]


def test_optimization_history_data(results: an.Results) -> None:
    data = an.optimization_history(results)
    assert data.numbers == [1, 2, 3, 4, 5]
    assert data.values == [0.2, 2.0, 0.1, 0.05, 0.6]
    assert data.running_best == [0.2, 0.2, 0.1, 0.1, 0.1]  # the errored trial's 0.05 does not count
    assert data.best_trial_id == "aaaa0003"


def test_optimization_history_for_mode_max(exp: Path) -> None:
    data = an.optimization_history(load_results(exp, metric="val_acc", mode="max"))
    assert data.running_best == [0.85, 0.85, 0.9, 0.9, 0.9]


def test_param_vs_metric_data(results: an.Results) -> None:
    data = an.param_vs_metric(results)
    by_name = {p.axis.name: p for p in data.panels}
    assert list(by_name) == ["lr", "hidden", "layers", "dropout"]
    assert (by_name["lr"].axis.kind, by_name["lr"].axis.log) == ("float", True)
    assert (by_name["layers"].axis.kind, by_name["layers"].axis.log) == ("int", False)
    assert by_name["lr"].trial_ids == ["aaaa0001", "aaaa0002", "aaaa0003", "aaaa0005"]  # no errored trial
    assert by_name["lr"].x == [0.01, 0.0001, 0.05, 0.003]
    assert by_name["lr"].y == [0.2, 2.0, 0.1, 0.6]
    hidden = by_name["hidden"]
    assert hidden.axis.categories == (32, 64, 128) and hidden.axis.labels == ("32", "64", "128")
    assert hidden.values == [64, 32, 128, 128]
    # two trials at 128, spread around index 2, the better one left
    assert hidden.x == [1.0, 0.0, 2 - an._params.CATEGORY_SPREAD, 2 + an._params.CATEGORY_SPREAD]
    assert [p.axis.name for p in an.param_vs_metric(results, ["dropout"]).panels] == ["dropout"]


def test_parallel_coordinates_data(results: an.Results) -> None:
    data = an.parallel_coordinates(results)
    assert [a.name for a in data.axes] == ["val_loss", "lr", "hidden", "layers", "dropout"]
    assert data.trial_ids == ["aaaa0001", "aaaa0002", "aaaa0003", "aaaa0005"]
    third = data.positions[2]
    # lr 0.05 on the spec's log range 1e-4..1e-1; hidden 128 is the last category; layers 3 of 1..3
    assert third[1] == pytest.approx((math.log10(0.05) + 4) / 3)
    assert third[2:] == [1.0, 1.0, pytest.approx(0.75)]
    assert third[0] == 0.0  # the best value sits at the bottom of the metric's (log) axis
    assert data.tick_labels[1] == ["0.0001", "0.000562", "0.00316", "0.0178", "0.1"]
    assert data.tick_labels[2] == ["32", "64", "128"]


def test_scheduler_effect_data(results: an.Results) -> None:
    data = an.scheduler_effect(results)
    assert (data.scheduler, data.full_iterations, data.rungs) == ("asha", 4, [1, 2])
    assert data.iterations == [4, 1, 4, 1, 2]
    assert (data.used, data.saved) == (12, 5)  # stopped: (4 - 1) + (4 - 2)
    assert data.saved_fraction == pytest.approx(5 / 17)
    assert data.time_saved_s == pytest.approx(5 * 0.5)  # 0.5 s per epoch, start-up excluded
    assert data.time_used_s == pytest.approx(22 + 20.5 + 22 + 20.5 + 21)


def test_the_old_budget_names_still_answer_with_a_deprecation(results: an.Results) -> None:
    # max_t was called "budget" while budget: is also the spec's section of search-wide limits
    with pytest.warns(DeprecationWarning, match="LearningCurves.max_t"):
        assert an.learning_curves(results).budget == 4.0
    with pytest.warns(DeprecationWarning, match="SchedulerEffect.full_iterations"):
        assert an.scheduler_effect(results).budget == 4


def test_scheduler_effect_without_a_scheduler_uses_the_longest_trial(exp: Path) -> None:
    spec = (exp / SPEC_FILE).read_text().replace("type: asha", "type: fifo")
    (exp / SPEC_FILE).write_text(spec)
    data = an.scheduler_effect(load_results(exp))
    assert (data.scheduler, data.full_iterations, data.rungs) == ("fifo", 4, [])


def test_param_importances_from_optunas_evaluator(results: an.Results) -> None:
    data = an.param_importances(results)
    assert set(data.importances) == {"lr", "hidden", "layers", "dropout"}
    assert sum(data.importances.values()) == pytest.approx(1.0)
    assert list(data.importances.values()) == sorted(data.importances.values(), reverse=True)
    assert (data.evaluator, data.n_trials, data.include_stopped) == ("fANOVA", 4, True)


def test_param_importances_needs_enough_trials(results: an.Results) -> None:
    assert an._params.MIN_TRIALS_FOR_IMPORTANCE == 4
    data = an.param_importances(results, include_stopped=False)  # 2 finished trials
    assert (data.n_trials, data.importances) == (2, {})
    assert data.reason == "needs at least 4 finished trials with a value of val_loss, found 2"


def test_error_message_from_error_txt_keeps_the_line_after_a_colon(tmp_path: Path) -> None:
    trials = standard_trials()
    trials[3].error = (
        "ray.train.ControllerError: Training failed due to controller error:\n"
        "The worker group startup timed out after 60.0 seconds waiting for 2 workers."
    )
    results = load_results(write_experiment(tmp_path / "ray-error", trials))
    assert results.trials.loc[3, "error"] == (
        "ray.train.ControllerError: Training failed due to controller error: "
        "The worker group startup timed out after 60.0 seconds waiting for 2 workers."
    )


def test_an_interrupted_search_has_not_ended_and_its_unended_trials_are_not_finished(tmp_path: Path) -> None:
    trials = standard_trials()
    trials[4].status = "running"  # no outcome line: it had not ended when the search was interrupted
    exp = write_experiment(tmp_path / "interrupted", trials)
    summary = json.loads((exp / SUMMARY_FILE).read_text())
    summary["interrupted"] = True
    summary["trials"][4]["status"] = "finished"  # what summarize() says of a trial with no outcome
    (exp / SUMMARY_FILE).write_text(json.dumps(summary))
    results = load_results(exp)
    assert not results.ended
    assert list(results.trials["status"]) == ["finished", "stopped", "finished", "errored", "running"]


# ----------------------------------------------------------------------------- gaps, NaN and what the fake writes


def test_a_report_without_the_metric_is_no_value_and_a_reported_nan_is_one(tmp_path: Path) -> None:
    # in the history table both read NaN; the ranking tells a report without val_loss from a NaN
    trials = [
        FakeTrial("ffff0001", {"lr": 0.01}, [None, 0.4], extra={"val_acc": [0.1, 0.2]}),
        FakeTrial("ffff0002", {"lr": 0.02}, [None, None], extra={"val_acc": [0.3, 0.4]}),
        FakeTrial("ffff0003", {"lr": 0.03}, [float("nan")], extra={"val_acc": [0.5]}),
    ]
    exp = write_experiment(tmp_path / "gaps", trials)
    results = load_results(exp)
    assert results.history["val_loss"].isna().tolist() == [True, False, True, True, True]
    assert results.has_value.tolist() == [True, False, True]
    assert list(results.ranked()["trial_id"]) == ["ffff0001", "ffff0003"]  # the NaN last
    assert pd.isna(results.trials.loc[1, "rank"])  # never reported val_loss: not ranked
    assert results.trials.loc[0, "best_iteration"] == 2
    summary = json.loads((exp / SUMMARY_FILE).read_text())
    assert [t["best"] for t in summary["trials"]][:2] == [0.4, None]
    assert math.isnan(summary["trials"][2]["best"])
    assert "__has_metric__" not in results.history  # the marker is gone once the trials are ranked


def test_the_fake_writes_with_the_real_writers(exp: Path) -> None:
    from hpsearch.experiment import files

    assert files.read_spec(exp)["name"] == "fake" and files.read_plan(exp)["capacity"] == 2
    records = files.read_outcome_records(exp)
    assert {t: r["status"] for t, r in records.items()} == dict(
        zip(IDS, ["finished", "stopped", "finished", "errored", "stopped"])
    )
    assert records["aaaa0004"]["error"] == "RuntimeError: CUDA out of memory"
    assert [r["val_loss"] for r in files.read_history(exp, "aaaa0003")] == [0.8, 0.25, 0.1, 0.15]
    assert files.read_history(exp, "aaaa0003")[0]["checkpoint_path"].endswith("checkpoint_2026-11-30_09-46-00.000003")
    assert files.read_controller(files.run_dir(exp, "aaaa0003"))["pid"] == 4242
    summary = files.read_summary(exp)  # written as a search ends: by reading the folder back
    assert summary["best_trial_id"] == "aaaa0003" and summary["wall_time_s"] == 123.4
    assert [t["best"] for t in summary["trials"]] == [0.2, 2.0, 0.1, 0.05, 0.6]


def test_plot_data_without_values_says_why(tmp_path: Path) -> None:
    trials = [FakeTrial("ffff0001", {"lr": 0.01}, ["diverged", "diverged"]), FakeTrial("ffff0002", {"lr": 0.1}, [])]
    results = load_results(write_experiment(tmp_path / "strings", trials))
    why = "no trial reported a number for val_loss"
    assert an.learning_curves(results).reason == why
    assert an.optimization_history(results).reason == why
    assert an.parallel_coordinates(results).reason == why
    assert (an.param_vs_metric(results).reason, an.param_vs_metric(results).detail) == (
        "no searched parameter with scored trials",
        why,
    )
    assert an.scheduler_effect(results).reason is None  # the trials ran iterations
    assert an.learning_curves(load_results(write_experiment(tmp_path / "e", standard_trials()))).reason is None


def test_each_trials_history_reads_in_epoch_order_whatever_order_the_reports_were_written(tmp_path: Path) -> None:
    """A report that reached the history file but not Tune before a cut, then the resumed run's reports: the
    file holds epoch 1 before epoch 0 came back from Tune's side; the table is in epoch order."""
    trials = [
        FakeTrial("aaaa0001", {"lr": 0.01, "hidden": 32}, [0.5, 0.9, 0.4, 0.3], epochs=[1, 0, 2, 3]),
        FakeTrial("aaaa0002", {"lr": 0.02, "hidden": 64}, [0.8, 0.7], epochs=[0, 1]),
    ]
    history = an.load_results(write_experiment(tmp_path / "exp", trials)).history
    assert list(history["trial_id"]) == ["aaaa0001"] * 4 + ["aaaa0002"] * 2  # trials in their table's order
    assert list(history["iteration"]) == [0, 1, 2, 3, 0, 1]
    assert list(history["val_loss"])[:4] == [0.9, 0.5, 0.4, 0.3]  # each value with its epoch
