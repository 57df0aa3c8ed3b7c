"""Budgets: limits that end a search (wall time, failed trials, a target, resource-hours).

The logic is driven by hand (a fake clock, fake trials, experiment folders written with the
project's writers); the Ray tests at the end run small searches that each budget ends.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from data_loops import TRAIN_ROWS
from fake_experiment import RESOURCES, T0, WALL_TIME_S, FakeTrial, standard_trials, write_experiment
from fake_tune import FakeTrial as TuneTrial

from hpsearch import messages
from hpsearch.analysis import load_results, summarize_experiment
from hpsearch.cli import _report_search, main
from hpsearch.errors import SpecError
from hpsearch.experiment import files
from hpsearch.experiment.files import Outcome
from hpsearch.experiment.layout import ERRORED, FINISHED, STOPPED, SUMMARY_FILE
from hpsearch.formatting import hours
from hpsearch.results.report import render_markdown
from hpsearch.runtime.search import budget as rb
from hpsearch.runtime.search.outcomes import OutcomeRecorder
from hpsearch.spec.budget import Budget, BudgetUse, Target, format_duration, parse_budget


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def budget(**raw: Any) -> Budget:
    parsed, problems = parse_budget(raw, metric="val_loss", mode="min")
    assert not problems and parsed is not None
    return parsed


# ----------------------------------------------------------------------------- the spec section


def test_durations_read_back_as_the_spec_says_them() -> None:
    assert [format_duration(s) for s in (7200, 5400, 90, 45, 0.5, 86400)] == [
        "2h",
        "1h30m",
        "1m30s",
        "45s",
        "0.5s",
        "1d",
    ]
    assert budget(max_wall_time="1h30m").max_wall_time == 5400.0


def test_each_limit_is_reached_when_the_use_reaches_it_not_before() -> None:
    b = budget(max_wall_time="2h", max_failed_trials=3, max_resource_hours={"GPU": 10})
    assert b.reached(BudgetUse(wall_time_s=7199.0, failed_trials=2, resource_hours={"GPU": 9.99})) is None
    wall = b.reached(BudgetUse(wall_time_s=7200.0))
    assert wall is not None and wall.budget == "max_wall_time"
    assert wall.message == "the wall-time budget of 2h was reached (2h used)"
    assert wall.resume_hint("/x") == "hpsearch resume /x --set budget.max_wall_time=4h"
    failed = b.reached(BudgetUse(failed_trials=3))  # 3 ends the search at the 3rd failure: at most 3 fail
    assert failed is not None and failed.budget == "max_failed_trials" and failed.key == "budget.max_failed_trials"
    gpu = b.reached(BudgetUse(resource_hours={"GPU": 10.0, "CPU": 99.0}))
    assert gpu is not None and gpu.budget == "max_resource_hours" and "10 GPU-hours" in gpu.message


def test_the_target_is_mode_aware_and_another_metric_needs_its_mode() -> None:
    b = budget(target={"val_loss": 0.1, "val_acc": {"value": 0.98, "mode": "max"}})
    assert b.target == {"val_loss": Target(value=0.1, mode="min"), "val_acc": Target(value=0.98, mode="max")}
    assert b.reached(BudgetUse(best={"val_loss": 0.11, "val_acc": 0.97})) is None
    low = b.reached(BudgetUse(best={"val_loss": 0.1}, best_trial={"val_loss": "t1"}))
    assert low is not None and low.message == "the target val_loss <= 0.1 was reached by trial t1 (val_loss=0.1)"
    high = b.reached(BudgetUse(best={"val_acc": 0.99}))
    assert high is not None and high.budget == "target" and high.key == "budget.target.val_acc.value"
    _, problems = parse_budget({"target": {"val_acc": 0.98}}, metric="val_loss", mode="min")
    assert [p.path for p in problems] == ["budget.target.val_acc"]


# ----------------------------------------------------------------------------- measuring, by hand


def tracker(exp: Path, b: Budget, clock: Clock, **kw: Any) -> rb.BudgetTracker:
    return rb.BudgetTracker(exp, b, started_at=clock.now, clock=clock, poll_s=0.0, **kw)


def test_wall_time_counts_the_earlier_runs_and_this_one(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, budget(max_wall_time=100), clock, previous_s=60.0)
    clock.now += 39.0
    assert t.check() is None and t.use().wall_time_s == 99.0
    clock.now += 1.0
    reached = t.check()
    assert reached is not None and reached.budget == "max_wall_time"
    clock.now += 100.0
    assert t.check() is reached  # once reached, it stays the reason


def test_failed_trials_count_each_trial_once_by_its_latest_end(tmp_path: Path) -> None:
    clock = Clock()
    t = tracker(tmp_path, budget(max_failed_trials=2), clock)
    files.append_outcome(tmp_path, Outcome("a", ERRORED))
    files.append_outcome(tmp_path, Outcome("a", ERRORED))  # the same trial again: still one
    files.append_outcome(tmp_path, Outcome("b", ERRORED))
    files.append_outcome(tmp_path, Outcome("b", FINISHED))  # retried (resume --retry-errored), then finished
    assert t.use().failed_trials == 1 and t.check() is None
    files.append_outcome(tmp_path, Outcome("c", ERRORED))
    reached = t.check()
    assert reached is not None and reached.message == "the failed-trials budget of 2 was reached (2 trials errored)"


def test_the_target_counts_every_finite_report_by_its_mode(tmp_path: Path) -> None:
    t = tracker(tmp_path, budget(target={"val_acc": {"value": 0.9, "mode": "max"}}), Clock())
    for value in (0.5, float("nan"), "0.95", None, float("inf") * 0):
        t.observe("a", {"val_acc": value})
    assert t.check() is None
    t.observe("b", {"val_acc": 0.91})
    t.observe("a", {"val_acc": 0.6})
    reached = t.check()
    assert reached is not None and "by trial b (val_acc=0.91)" in reached.message


def test_resource_hours_count_running_trials_until_now_and_killed_runs_until_their_last_record(tmp_path: Path) -> None:
    clock = Clock(T0 + 1000)
    # an earlier search run, killed: its trial run has no end; it counts until the last thing recorded (T0 + 600)
    files.record_search_stint(tmp_path, started_at=T0)
    files.record_trial_stint(tmp_path, "old", started_at=T0, resources={"CPU": 2.0})
    files.record_trial_stint(tmp_path, "done", started_at=T0 + 300, resources={"CPU": 1.0})
    files.record_trial_stint(tmp_path, "done", started_at=T0 + 300, ended_at=T0 + 600, resources={"CPU": 1.0})
    files.record_search_stint(tmp_path, started_at=clock.now)  # this run of the search (begin() records it)
    t = tracker(tmp_path, budget(max_resource_hours={"CPU": 0.9, "GPU": 1.0}), clock)
    files.record_trial_stint(tmp_path, "now", started_at=clock.now, resources={"CPU": 1.0, "GPU": 0.5})
    clock.now += 1800  # the running trial has held 1 CPU and 0.5 GPU for half an hour
    use = t.use()
    assert use.resource_hours["CPU"] == pytest.approx((2 * 600 + 300 + 1800) / 3600)
    assert use.resource_hours["GPU"] == pytest.approx(0.25)
    reached = t.check()
    assert reached is not None and reached.budget == "max_resource_hours" and "CPU-hours" in reached.message


# ----------------------------------------------------------------------------- the recorder's runs


def test_the_recorder_records_each_run_of_a_driver_with_the_trials_resources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = write_experiment(tmp_path / "exp", [], summary=False)  # the spec as run: 0.1-CPU driver + 2 x 0.45 CPU
    clock = Clock()
    monkeypatch.setattr("hpsearch.runtime.search.outcomes.time.time", clock)
    recorder = OutcomeRecorder(exp)
    trial = TuneTrial("t1", error="ValueError: bad")
    recorder.on_trial_start(0, [], trial)
    clock.now += 10
    recorder.on_trial_recover(0, [], trial)  # Tune retries it: this run ends, the next starts at its next start
    clock.now += 5
    recorder.on_trial_start(0, [], trial)
    clock.now += 20
    recorder.on_trial_error(0, [], trial)
    runs = files.read_usage(exp).trials["t1"]
    assert [(r.started_at - T0, r.ended_at - T0 if r.ended_at else None, r.end) for r in runs] == [
        (0, 10, "retried"),
        (15, 35, ERRORED),
    ]
    assert runs[0].resources == pytest.approx(RESOURCES)
    assert files.read_usage(exp).trial_seconds("t1") == 30.0  # the 5 s between its runs held nothing


# ----------------------------------------------------------------------------- the stopper, by hand


class Out(io.StringIO):
    pass


def test_the_stopper_ends_the_search_once_and_says_which_budget(tmp_path: Path) -> None:
    previous = signal.signal(signal.SIGUSR1, signal.SIG_DFL)  # no Tune handler (a Ray test may have left one)
    try:
        _stop_tunes_way(tmp_path)
    finally:
        signal.signal(signal.SIGUSR1, previous)


def _stop_tunes_way(tmp_path: Path) -> None:
    stopper = rb.BudgetStopper(tmp_path, budget(target={"val_loss": 0.5}))
    with messages.to(out := Out()):
        assert stopper("a", {"val_loss": 0.7}) is False
        assert stopper.stop_all() is False
        stopper("b", {"val_loss": 0.4})
        # no Tune handler for SIGUSR1: the search is ended Tune's way (stop_all), each trial at its next result
        assert stopper.stop_all() is True
        assert stopper("a", {"val_loss": 0.6}) is True
    assert out.getvalue().count("hpsearch: the target val_loss <= 0.5 was reached by trial b") == 1
    restored = pickle.loads(pickle.dumps(stopper))  # Tune pickles it into its state; a restore measures afresh
    assert "stream" not in vars(restored) and restored.stop_all() is False


def test_the_stopper_interrupts_tune_like_ctrl_c_where_tune_listens(tmp_path: Path) -> None:
    got: list[int] = []

    def signal_interrupt_tune_run(sig: int, frame: Any) -> None:  # the name of Tune's handler (tune.py)
        got.append(sig)

    previous = signal.signal(signal.SIGUSR1, signal_interrupt_tune_run)
    try:
        stopper = rb.BudgetStopper(tmp_path, budget(max_wall_time=1))
        stopper.tracker().started_at -= 5
        assert stopper.stop_all() is False  # Tune ends its loop after this step, its trials kept RUNNING
        assert got == [signal.SIGUSR1]
        assert stopper("a", {}) is False  # trials are not stopped one by one
        assert stopper.stop_all() is False and got == [signal.SIGUSR1]  # once
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_search_run_in_progress_gives_the_stopper_its_budget(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "exp", [], summary=False)
    old = rb.BudgetStopper(exp, budget(max_wall_time=1))  # e.g. the one Tune restored, with the old budget
    spec = files.experiment_spec(exp, overrides=["budget.max_wall_time=4h"])
    tracker = rb.begin(spec)
    try:
        assert old.tracker() is tracker and tracker.budget.max_wall_time == 4 * 3600
    finally:
        rb.finish(tracker)
    assert old.tracker() is not tracker


# ----------------------------------------------------------------------------- the end of a run


def test_finish_records_the_running_trials_as_stopped_by_the_budget(tmp_path: Path) -> None:
    trials = [FakeTrial("aaaa0001", {"x": 1}, [1.0, 0.5]), FakeTrial("aaaa0002", {"x": 2}, [0.9], status="running")]
    exp = write_experiment(tmp_path / "exp", trials, summary=False, usage=False)
    spec = files.experiment_spec(exp, overrides=["budget.max_wall_time=10"])
    clock = Clock(T0 + 100)
    tracker = rb.begin(spec, clock=clock)
    files.record_trial_stint(exp, "aaaa0002", started_at=clock.now + 1, resources=RESOURCES)  # running
    clock.now += 10
    assert tracker.check() is not None
    reached = rb.finish(tracker)
    assert reached is not None and reached.budget == "max_wall_time"
    record = files.read_outcome_records(exp)["aaaa0002"]
    assert (record["status"], record["ended_by"], record["reports"], record["last_epoch"]) == (
        STOPPED,
        "max_wall_time",
        1,
        1,
    )
    usage = files.read_usage(exp)
    assert usage.trials["aaaa0002"][0].end == "budget" and usage.trials["aaaa0002"][0].ended_at == clock.now
    assert usage.searches[-1].end == "max_wall_time" and usage.wall_time_s() == 10.0
    assert files.read_outcome_records(exp)["aaaa0001"].get("ended_by") is None


def test_an_interrupted_run_ends_its_trials_runs_but_records_no_outcome(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "exp", [], summary=False)
    spec = files.experiment_spec(exp)
    clock = Clock(T0)
    tracker = rb.begin(spec, clock=clock)
    files.record_trial_stint(exp, "t", started_at=T0 + 1, resources=RESOURCES)
    clock.now += 30
    assert rb.finish(tracker) is None
    assert files.read_usage(exp).trials["t"][0].end == "interrupted"
    assert files.read_outcome_records(exp) == {}
    assert rb.begin(spec, clock=Clock(T0 + 100)).previous_s == 30.0  # a resume counts the earlier run's time


# ----------------------------------------------------------------------------- resume: the budget only


def test_resume_refuses_any_override_but_the_budget_and_num_samples_before_ray_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = write_experiment(tmp_path / "exp", standard_trials(), usage=True)
    argv = ["resume", str(exp), "--set", "search_space.epochs=10", "--set", "budget.max_wall_time=4h"]
    assert main([*argv, "--set", "num_samples=10"]) == 2
    err = capsys.readouterr().err
    assert "--set search_space.epochs=10: cannot be changed on resume: only budget keys" in err
    assert "--set budget.max_wall_time=4h:" not in err and "--set num_samples=10:" not in err


def test_resume_refuses_to_shrink_a_search_naming_the_trials_already_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = write_experiment(tmp_path / "exp", standard_trials(), usage=True)  # num_samples 4
    started = len(files.read_usage(exp).trials)
    assert main(["resume", str(exp), "--set", "num_samples=2"]) == 2
    err = capsys.readouterr().err
    assert (
        f"--set num_samples=2: is below the 4 this search was started with ({started} trials already run): "
        "a search only grows on resume; give num_samples of 4 or more"
    ) in err


def test_resume_of_a_spent_budget_says_so_at_once_with_the_set_that_raises_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = write_experiment(tmp_path / "exp", standard_trials(), usage=True)  # 123.4 s of wall time
    before = (exp / "hpsearch_spec.yaml").read_text()
    assert main(["resume", str(exp), "--set", "budget.max_wall_time=2m"]) == 2
    err = capsys.readouterr().err
    assert "budget.max_wall_time: is already spent: the wall-time budget of 2m was reached (2m3s used)" in err
    assert f"hpsearch resume {exp.resolve()} --set budget.max_wall_time=4m" in err
    assert (exp / "hpsearch_spec.yaml").read_text() == before  # nothing written
    with pytest.raises(SpecError, match="budget.max_failed_trials: is already spent"):
        rb.check_not_spent(files.experiment_spec(exp, overrides=["budget.max_failed_trials=1"]))
    with pytest.raises(SpecError, match=r"budget.target.val_loss.value: is already spent.*by trial aaaa0004"):
        rb.check_not_spent(files.experiment_spec(exp, overrides=["budget.target.val_loss=0.2"]))
    rb.check_not_spent(files.experiment_spec(exp, overrides=["budget.max_wall_time=4h"]))  # raised: it may resume


# ----------------------------------------------------------------------------- what the results show


def budget_folder(tmp_path: Path) -> Path:
    trials = standard_trials()
    trials[4] = FakeTrial(**{**trials[4].__dict__, "ended_by": "max_wall_time"})
    trials[2] = FakeTrial(**{**trials[2].__dict__, "resources": {"CPU": 1.0, "GPU": 2.0}})
    return write_experiment(
        tmp_path / "exp",
        trials,
        usage=True,
        ended_by="max_wall_time",
        ended_reason="the wall-time budget of 2m was reached (2m3s used)",
    )


def test_load_results_has_each_trials_resource_hours_and_the_total(tmp_path: Path) -> None:
    results = load_results(budget_folder(tmp_path))
    t = results.trials.set_index("trial_id")
    # aaaa0001: 4 reports -> its driver ran 20 s of start-up + 4 x 0.5 s = 22 s, holding 1 CPU
    assert t.loc["aaaa0001", "driver_time_s"] == 22.0
    assert t.loc["aaaa0001", "resource_hours.CPU"] == pytest.approx(22.0 / 3600)
    assert t.loc["aaaa0003", "resource_hours.GPU"] == pytest.approx(2 * 22.0 / 3600)
    assert t.loc["aaaa0001", "resource_hours.GPU"] == 0.0
    assert list(results.trials.columns[-2:]) == ["resource_hours.CPU", "resource_hours.GPU"]
    assert results.resource_hours == pytest.approx({"CPU": t["resource_hours.CPU"].sum(), "GPU": 2 * 22.0 / 3600})
    assert results.ended_by == "max_wall_time" and results.ended_reason.startswith("the wall-time budget")
    assert "resource_hours.CPU" not in results.params


def test_an_old_folder_reads_nan_resource_hours(tmp_path: Path) -> None:
    results = load_results(write_experiment(tmp_path / "old", standard_trials()))
    assert results.trials["driver_time_s"].isna().all() and results.trials["resource_hours.CPU"].isna().all()
    assert results.resource_hours == {} and results.ended_by is None


def test_a_running_trial_counts_until_its_last_report(tmp_path: Path) -> None:
    trials = [FakeTrial("aaaa0001", {"x": 1}, [1.0, 0.5, 0.4], status="running")]
    results = load_results(write_experiment(tmp_path / "exp", trials, usage=True, summary=False))
    assert results.trials.loc[0, "driver_time_s"] == int(20.0 + 3 * 0.5)  # the fake's report times are whole seconds


def test_the_summary_says_which_budget_ended_the_search_and_the_resource_hours(tmp_path: Path) -> None:
    exp = budget_folder(tmp_path)
    summary = json.loads((exp / SUMMARY_FILE).read_text())
    assert summary["ended_by"] == "max_wall_time" and summary["interrupted"] is False
    assert summary["ended_reason"] == "the wall-time budget of 2m was reached (2m3s used)"
    assert summary["total_wall_time_s"] == WALL_TIME_S
    assert summary["resource_hours"]["GPU"] == pytest.approx(2 * 22.0 / 3600)
    by_id = {t["trial_id"]: t for t in summary["trials"]}
    assert by_id["aaaa0005"]["ended_by"] == "max_wall_time" and by_id["aaaa0005"]["status"] == STOPPED
    assert by_id["aaaa0001"]["resource_hours"] == {"CPU": pytest.approx(22.0 / 3600), "GPU": 0.0}


def test_the_closing_lines_say_which_budget_and_how_to_continue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = budget_folder(tmp_path)
    summary = summarize_experiment(
        exp,
        wall_time_s=60.0,
        interrupted=False,
        ended_by="max_wall_time",
        ended_reason="the wall-time budget of 2m was reached (2m3s used)",
        resume_hint=f"hpsearch resume {exp} --set budget.max_wall_time=4m",
    )
    assert _report_search(files.experiment_spec(exp), summary) == 0  # trials finished: 0, not 130
    lines = capsys.readouterr().out.splitlines()
    assert lines[-4] == "Wall time: 60.0 s (5 trials: 2 finished, 2 stopped, 1 errored)"
    assert lines[-3] == (
        "Resource-hours: 0.0294 CPU-hours, 0.0122 GPU-hours (every trial, from its driver's start to its end)"
    )
    assert lines[-2:] == [
        "Ended by its budget: the wall-time budget of 2m was reached (2m3s used)",
        f"Continue it with a raised budget: hpsearch resume {exp} --set budget.max_wall_time=4m",
    ]


def test_a_search_a_budget_ended_with_no_trial_finished_exits_1(tmp_path: Path) -> None:
    trials = [FakeTrial(f"aaaa000{i}", {"x": i}, [], status="errored") for i in (1, 2)]
    exp = write_experiment(tmp_path / "exp", trials, usage=True, ended_by="max_failed_trials")
    summary = summarize_experiment(exp, wall_time_s=1.0, interrupted=False, ended_by="max_failed_trials")
    assert _report_search(files.experiment_spec(exp), summary) == 1


def test_a_trial_the_budget_stopped_before_its_first_report_is_no_success(tmp_path: Path) -> None:
    """Two trials failed and ended the search as a third started: stopped with nothing reported, it did no work."""
    failed = [FakeTrial(f"aaaa000{i}", {"x": i}, [], status="errored") for i in (1, 2)]
    started = FakeTrial("aaaa0003", {"x": 3}, [], status="stopped")
    exp = write_experiment(tmp_path / "exp", [*failed, started], usage=True, ended_by="max_failed_trials")
    summary = summarize_experiment(exp, wall_time_s=1.0, interrupted=False, ended_by="max_failed_trials")
    assert _report_search(files.experiment_spec(exp), summary) == 1
    reported = FakeTrial("aaaa0003", {"x": 3}, [{"loss": 1.0}], status="stopped")
    exp = write_experiment(tmp_path / "exp2", [*failed, reported], usage=True, ended_by="max_failed_trials")
    summary = summarize_experiment(exp, wall_time_s=1.0, interrupted=False, ended_by="max_failed_trials")
    assert _report_search(files.experiment_spec(exp), summary) == 0  # stopped with results: it did work


def test_the_report_shows_the_budget_and_the_resource_hours(tmp_path: Path) -> None:
    page = render_markdown(load_results(budget_folder(tmp_path)), [], {})
    page = re.sub(r"\\(.)", r"\1", page)  # as it reads: Markdown escapes every punctuation character of a string
    assert "Ended by its budget" in page and "the wall-time budget of 2m was reached" in page
    assert "Resource-hours" in page and "GPU-hours" in page
    assert "| CPU-hours |" in page.replace("CPU-hours | GPU-hours", "CPU-hours |")


# ----------------------------------------------------------------------------- on Ray: each budget ends a search

LOOPS = Path(__file__).resolve().parents[2] / "loops.py"
DATA_LOOPS = Path(__file__).resolve().parents[2] / "data_loops.py"


def _spec(folder: Path, name: str, **changes: Any) -> Path:
    spec = {
        "name": name,
        "trainable": f"{LOOPS}:budget_loop",
        "metric": "loss",
        "mode": "min",
        "num_samples": 4,
        "search_space": {"x": {"type": "choice", "values": [0.0, 0.5]}, "epochs": 3, "sleep_s": 0.5},
        "searcher": {"type": "random", "seed": 0},
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.45}},
        "resources": {"driver_cpus": 0.1, "max_concurrent_trials": 2},
        "storage_path": str(folder / "results"),
        **changes,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _exp(tmp_path: Path, name: str) -> Path:
    return tmp_path / "results" / name


def _summary(exp: Path) -> dict[str, Any]:
    return json.loads((exp / SUMMARY_FILE).read_text())


@pytest.mark.ray
@pytest.mark.timeout(300)
@pytest.mark.full
def test_a_target_ends_the_search_and_resume_with_a_raised_target_continues_it(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also a Ray Data search across resume: its `once` dataset is built again by the resume (the blocks
    went with the run that made them) and every trial, before and after, reads all of it."""
    data_log = tmp_path / "factory.jsonl"
    monkeypatch.setenv("HPSEARCH_TEST_DATA_LOG", str(data_log))  # the factory runs in this process (once)
    spec = _spec(
        tmp_path,
        "target",
        num_samples=2,
        search_space={"x": 0.0, "epochs": 4, "sleep_s": 0.5},
        budget={"target": {"score": {"value": 2, "mode": "max"}}},
        datasets={"train": f"{DATA_LOOPS}:train_set"},
        data={"materialize": "once", "cpus": 0.5},
    )
    exp = _exp(tmp_path, "target")
    assert main(["run", str(spec)]) == 0  # trials stopped by a budget, with values: 0, not 130
    out = capsys.readouterr()
    summary = _summary(exp)
    assert summary["ended_by"] == "target" and summary["interrupted"] is False
    assert "the target score >= 2 was reached by trial" in summary["ended_reason"]
    assert "Ended by its budget: the target score >= 2 was reached" in out.out
    assert "--set budget.target.score.value=" in out.out
    records = files.read_outcome_records(exp)
    started = files.read_usage(exp).trials
    assert len(started) <= 2 and set(records) == set(started)  # no trial started after the target was reached
    assert {r["status"] for r in records.values()} == {STOPPED}
    assert {r["ended_by"] for r in records.values()} == {"target"}
    reported = {t: files.read_history(exp, t) for t in records}
    assert max(len(h) for h in reported.values()) >= 2  # the trial that reached score 2
    for history in reported.values():  # stopped cleanly: the latest reports' checkpoints kept (num_to_keep 2)
        assert all(Path(row["checkpoint_path"]).is_dir() for row in history[-2:])

    assert len(data_log.read_text().splitlines()) == 1  # built once for the run, whatever the trials

    assert main(["resume", str(exp), "--set", "budget.target.score.value=100"]) == 0
    assert len(data_log.read_text().splitlines()) == 2  # and once more for the resume
    summary = _summary(exp)
    assert summary["ended_by"] is None and summary["counts"]["finished"] == 2
    assert yaml.safe_load((exp / "hpsearch_spec.yaml").read_text())["budget"]["target"]["score"]["value"] == 100
    for trial_id, before in reported.items():  # the stopped trials continued from their latest checkpoint
        history = files.read_history(exp, trial_id)
        assert history[-1]["epoch"] == 4
        if before:
            first = history[len(before)]
            assert first["epoch"] == first["resumed_from"] > before[-1]["epoch"]  # not from epoch 1
        assert {row["rows"] for row in history} == {TRAIN_ROWS}  # every epoch, before and after the resume


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_failed_trials_end_the_search_and_no_trial_starts_after(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(
        tmp_path,
        "failing",
        num_samples=6,
        search_space={"x": "bad", "epochs": 2},
        failure={"worker_retries": 0},
        budget={"max_failed_trials": 2},
    )
    exp = _exp(tmp_path, "failing")
    assert main(["run", str(spec)]) == 1  # no trial finished
    summary = _summary(exp)
    assert summary["ended_by"] == "max_failed_trials" and summary["counts"]["errored"] == 2
    records = files.read_outcome_records(exp)
    second_failure = sorted(r["ended_at"] for r in records.values() if r["status"] == ERRORED)[1]
    runs = files.read_usage(exp).trials
    assert len(runs) < 6
    assert all(run.started_at <= second_failure for trial in runs.values() for run in trial)
    assert {r["status"] for r in records.values()} <= {ERRORED, STOPPED}
    capsys.readouterr()


@pytest.mark.ray
@pytest.mark.timeout(300)
@pytest.mark.full
def test_wall_time_then_resource_hours_end_the_search_counted_across_resume(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(
        tmp_path,
        "wall",
        num_samples=6,
        search_space={"x": 0.0, "epochs": 3, "sleep_s": 0.5},
        budget={"max_wall_time": "10s"},
    )
    exp = _exp(tmp_path, "wall")
    # 1 when the cut came before any trial reported (a loaded machine): a stopped trial with no report is no success
    assert main(["run", str(spec)]) in (0, 1)
    summary = _summary(exp)
    assert summary["ended_by"] == "max_wall_time" and summary["ended_reason"].startswith("the wall-time budget of 10s")
    usage = files.read_usage(exp)
    search = usage.searches[0]
    assert search.ended_at is not None and 10 <= search.ended_at - search.started_at < 60
    assert all(r.started_at < search.started_at + 10.5 for runs in usage.trials.values() for r in runs)
    assert 0 < len(usage.trials) < 6
    per_trial = {t["trial_id"]: t for t in summary["trials"]}
    for trial_id, runs in usage.trials.items():
        (run,) = runs
        assert run.resources == {"CPU": pytest.approx(0.55)}  # its 0.1-CPU driver and one 0.45-CPU worker
        held = per_trial[trial_id]["resource_hours"]["CPU"]
        assert held == pytest.approx(0.55 * (run.ended_at - run.started_at) / 3600)
        history = files.read_history(exp, trial_id)
        if history:  # start-up counted: the driver started well before the first report
            assert run.started_at < history[0]["time"] - 1 and run.ended_at >= history[-1]["time"]
    assert summary["resource_hours"]["CPU"] == pytest.approx(sum(t["resource_hours"]["CPU"] for t in summary["trials"]))
    used = summary["resource_hours"]["CPU"]
    out = capsys.readouterr().out
    assert f"Resource-hours: {hours(used)} CPU-hours" in out

    limit = used + 0.0008  # about 2.5 s more of two trials at once
    assert main(
        ["resume", str(exp), "--set", "budget.max_wall_time=1h", "--set", f"budget.max_resource_hours.CPU={limit}"]
    ) in (0, 1)  # as above: the budget may end it before a report
    summary = _summary(exp)
    assert summary["ended_by"] == "max_resource_hours"
    assert summary["resource_hours"]["CPU"] >= limit
    assert summary["total_wall_time_s"] >= 10 + summary["wall_time_s"] - 1
    capsys.readouterr()


def test_a_trial_a_budget_stopped_reads_running_again_once_resume_restarts_it(tmp_path: Path) -> None:
    trials = [FakeTrial("aaaa0001", {"x": 1}, [1.0, 0.5], status="stopped", ended_by="max_wall_time")]
    exp = write_experiment(tmp_path / "exp", trials, usage=True, ended_by="max_wall_time")
    assert list(load_results(exp).trials["status"]) == [STOPPED]
    files.record_trial_stint(exp, "aaaa0001", started_at=T0 + 500, resources=RESOURCES)  # resume restarted it
    assert list(load_results(exp).trials["status"]) == ["running"]
