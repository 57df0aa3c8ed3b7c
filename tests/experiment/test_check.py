"""``hpsearch check``'s judgement and its one-trial spec, without Ray: each check fails on a folder built to fail it.

The folders are written with the project's own writers (the usage record of each run of the trial, the
history the controller appends, the outcome the recorder writes), as the check's two runs write them.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest

from hpsearch.experiment import files
from hpsearch.experiment.check import (
    MIN_CHECK_WORKERS,
    CheckSetup,
    check_folder,
    check_setup,
    first_point,
    judge,
)
from hpsearch.spec import load_spec, space

SPEC = Path(__file__).resolve().parents[2] / "search_spaces" / "digits_quick.yaml"
T0 = 1_700_000_000.0
TRIAL = "run_a1b2c_00000"
RES = {"CPU": 1.0}


def _setup(tmp_path: Path, reports: int = 2, **changes: Any) -> CheckSetup:
    spec = load_spec(SPEC, overrides=[f"storage_path={tmp_path}", *(f"{k}={v}" for k, v in changes.items())])
    setup = check_setup(spec, reports)
    setup.run_dir.mkdir(parents=True)
    return setup


def _report(setup: CheckSetup, at: float, epoch: int | None, checkpoint: bool = True, **metrics: Any) -> None:
    folder = setup.run_dir / "train" / TRIAL
    folder.mkdir(parents=True, exist_ok=True)
    path = None
    if checkpoint:
        path = folder / f"checkpoint_{at:.0f}"
        path.mkdir()
    values = {"val_loss": 0.5, **metrics}
    if epoch is not None:
        values["epoch"] = epoch
    with mock.patch.object(files.time, "time", return_value=at):  # the controller forwarded it at `at`
        files.append_history(folder, values, checkpoint_path=str(path) if path else None)


def _run(setup: CheckSetup, started: float, ended: float | None) -> None:
    files.record_trial_stint(setup.run_dir, TRIAL, started_at=started, ended_at=ended, resources=RES)


def _ranks(*counts: int, attempt: int = 1) -> Any:
    return SimpleNamespace(attempt=attempt, ranks=[SimpleNamespace(rank=r, reports=n) for r, n in enumerate(counts)])


def _good(setup: CheckSetup) -> None:
    _run(setup, T0, T0 + 20)  # the first run: cut after its 2nd report
    _report(setup, T0 + 12, 1)
    _report(setup, T0 + 14, 2)
    _run(setup, T0 + 30, T0 + 47)  # the restored run: stopped at its first report
    _report(setup, T0 + 44, 3)


def test_a_loop_that_does_everything_passes_and_its_times_are_measured(tmp_path: Path) -> None:
    setup = _setup(tmp_path)
    _good(setup)
    report = judge(setup, progress=[_ranks(2, 2), _ranks(1, 1, attempt=2)])
    assert report.ok, [v.line() for v in report.verdicts]
    assert [v.name for v in report.verdicts] == ["ranks", "metric", "checkpoint", "restore"]
    assert report.verdicts[3].text == "a new run restored from that checkpoint: its first report was epoch 3"
    m = report.measured
    assert (m.startup_s, m.report_s, m.restore_startup_s, m.teardown_s) == (12.0, 2.0, 14.0, 3.0)
    record = report.as_dict(setup, spec=str(SPEC))
    assert record["ok"] is True and record["workers"] == 2 and record["startup_s"] == 12.0


def test_a_loop_that_never_checkpoints_fails_the_checkpoint_and_the_restore(tmp_path: Path) -> None:
    setup = _setup(tmp_path)
    _run(setup, T0, T0 + 20)
    _report(setup, T0 + 12, 1, checkpoint=False)
    _report(setup, T0 + 14, 2, checkpoint=False)
    _run(setup, T0 + 30, T0 + 47)
    _report(setup, T0 + 44, 1, checkpoint=False)
    report = judge(setup, progress=[_ranks(2, 2)])
    failed = {v.name: v.text for v in report.failed()}
    assert set(failed) == {"checkpoint", "restore"}
    assert "no report carried a checkpoint (2 reports)" in failed["checkpoint"]
    assert "ray.train.report(..., checkpoint=" in failed["checkpoint"]
    assert failed["restore"] == "not tried: the first run wrote no checkpoint to restore from"


def test_a_loop_that_starts_over_instead_of_restoring_is_named(tmp_path: Path) -> None:
    setup = _setup(tmp_path)
    _run(setup, T0, T0 + 20)
    _report(setup, T0 + 12, 1)
    _report(setup, T0 + 14, 2)
    _run(setup, T0 + 30, T0 + 47)
    _report(setup, T0 + 44, 1)  # from scratch
    (restore,) = judge(setup, progress=[_ranks(2, 2)]).failed()
    assert restore.name == "restore"
    assert restore.text.startswith(
        "the restored run's first report was epoch 1, but the latest checkpoint was of epoch 2"
    )
    assert "ray.train.get_checkpoint()" in restore.text


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        ({"val_loss": float("nan")}, "val_loss was nan at epoch 2, not a finite number"),
        ({"val_loss": None}, "val_loss was None at epoch 2, not a finite number"),
    ],
)
def test_a_metric_that_is_not_finite_fails_naming_the_epoch(
    tmp_path: Path, metrics: dict[str, Any], expected: str
) -> None:
    setup = _setup(tmp_path)
    _run(setup, T0, T0 + 20)
    _report(setup, T0 + 12, 1)
    _report(setup, T0 + 14, 2, **metrics)
    (verdict,) = judge(setup, progress=[_ranks(2, 2)], restored_started=False).failed()[:1]
    assert verdict.name == "metric" and verdict.text == expected


def test_a_missing_metric_fails_with_what_the_loop_reported(tmp_path: Path) -> None:
    setup = _setup(tmp_path, metric="accuracy", mode="max")
    _run(setup, T0, T0 + 20)
    _report(setup, T0 + 12, 1, loss=0.3)
    verdict = next(v for v in judge(setup, progress=[_ranks(1, 1)]).verdicts if v.name == "metric")
    assert not verdict.ok
    assert verdict.text == "accuracy is missing from the report of epoch 1 (it had: val_loss, loss, epoch)"


def test_a_constrained_metric_missing_fails_naming_its_constraint(tmp_path: Path) -> None:
    setup = _setup(tmp_path)
    setup = check_setup(
        load_spec({**setup.spec.to_dict(), "constraints": [{"metric": "n_params", "max": 1000}]}), setup.reports
    )
    setup.run_dir.mkdir(parents=True, exist_ok=True)
    _run(setup, T0, T0 + 20)
    _report(setup, T0 + 12, 1, loss=0.3)
    verdict = next(v for v in judge(setup, progress=[_ranks(1, 1)]).verdicts if v.name == "metric")
    assert not verdict.ok
    assert verdict.text == (
        "n_params, the metric of constraints[0], is missing from the report of epoch 1 (it had: val_loss, loss, epoch)"
    )


def test_a_constrained_metric_in_every_report_passes_and_is_named(tmp_path: Path) -> None:
    setup = check_setup(
        load_spec({**_setup(tmp_path).spec.to_dict(), "constraints": [{"metric": "n_params", "max": 1000}]}), 2
    )
    setup.run_dir.mkdir(parents=True, exist_ok=True)
    _run(setup, T0, T0 + 20)
    _report(setup, T0 + 12, 1, n_params=900)
    _report(setup, T0 + 14, 2, n_params=float("nan"))  # NaN makes a report infeasible, not the loop wrong
    verdict = next(v for v in judge(setup, progress=[_ranks(1, 1)]).verdicts if v.name == "metric")
    assert verdict.ok and verdict.text.endswith("; so did the constrained n_params")


def test_ranks_that_report_a_different_number_of_times_or_never_start_fail_named(tmp_path: Path) -> None:
    setup = _setup(tmp_path)
    _good(setup)
    uneven = judge(setup, progress=[_ranks(3, 2)])
    assert [v.name for v in uneven.failed()] == ["ranks"]
    assert uneven.failed()[0].text == "attempt 1: the ranks reported a different number of times (rank 0: 3, rank 1: 2)"
    missing = judge(setup, progress=[_ranks(2)])
    assert missing.failed()[0].text == "attempt 1: rank(s) 1 never started (of 2 workers)"
    nothing = judge(setup, progress=[])
    assert nothing.failed()[0].text == "no rank of the trial's 2 workers recorded a start"


def test_a_trial_that_ended_by_itself_says_how_to_check_the_restore(tmp_path: Path) -> None:
    setup = _setup(tmp_path)
    _run(setup, T0, T0 + 20)
    _report(setup, T0 + 12, 1)
    _report(setup, T0 + 14, 2)
    (verdict,) = judge(setup, progress=[_ranks(2, 2)], restored_started=False).failed()
    assert verdict.name == "restore"
    assert "ended by itself after 2 reports" in verdict.text and "--reports 1" in verdict.text
    assert judge(setup, progress=[_ranks(2, 2)], restored_started=False).measured.teardown_s is None


def test_a_trial_that_never_started_is_one_failed_line(tmp_path: Path) -> None:
    report = judge(_setup(tmp_path))
    assert not report.ok and [v.text for v in report.verdicts] == ["the trial never started"]


def test_the_first_point_takes_first_values_and_low_ends_and_drops_inactive_parameters() -> None:
    tree, problems = space.parse_search_space(
        {
            "model": {"type": "choice", "values": ["mlp", "cnn"]},
            "lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
            "layers": {"type": "int", "low": 2, "high": 4},
            "kernel": {"type": "choice", "values": [3, 5], "when": {"model": ["cnn"]}},
            "opt": {"beta": {"type": "grid", "values": [0.9, 0.99]}},
            "epochs": 10,
        }
    )
    assert not problems
    assert first_point(tree) == {"model": "mlp", "lr": 1e-4, "layers": 2, "opt.beta": 0.9, "epochs": 10}


def test_the_check_runs_one_fifo_trial_at_the_first_point_with_two_workers_at_least(tmp_path: Path) -> None:
    spec = load_spec(SPEC, overrides=[f"storage_path={tmp_path}", "scaling.num_workers=1", "search_space.lr=0.01"])
    setup = check_setup(spec, 3)
    checked = setup.spec
    assert setup.folder == check_folder(spec.experiment_dir) == tmp_path / "digits-quick.check"
    assert checked.experiment_dir == tmp_path / "digits-quick.check" / "run"
    assert (checked.num_samples, checked.searcher.type, checked.scheduler.type) == (1, "random", "fifo")
    assert checked.scaling.workers == MIN_CHECK_WORKERS and setup.reports == 3
    assert (checked.failure.worker_retries, checked.failure.trial_retries) == (0, 0)
    assert setup.point["lr"] == 0.01 and setup.point["hidden"] == 32 and setup.point["layers"] == 1
    assert all(isinstance(p, space.ConstParam) for _, p in space.iter_params(checked.search_space))
    assert (checked.trainable, checked.metric, checked.objectives) == (spec.trainable, spec.metric, spec.objectives)


def test_an_elastic_or_searched_scale_is_checked_at_its_first_size(tmp_path: Path) -> None:
    base = [f"storage_path={tmp_path}"]
    elastic = load_spec(SPEC, overrides=[*base, "scaling.num_workers={min: 3, max: 6}"])
    assert check_setup(elastic).workers == 3
    searched = load_spec(SPEC, overrides=[*base, "scaling.num_workers={type: choice, values: [4, 2]}"])
    setup = check_setup(searched)
    assert setup.workers == 4 and setup.point["scaling.num_workers"] == 4


def test_fewer_than_one_report_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--reports must be at least 1, got 0"):
        check_setup(load_spec(SPEC, overrides=[f"storage_path={tmp_path}"]), 0)


def test_a_trial_that_failed_before_the_cut_is_not_restored_and_shows_its_error(tmp_path: Path) -> None:
    setup = _setup(tmp_path)
    _run(setup, T0, T0 + 20)
    _report(setup, T0 + 12, 1)
    files.append_outcome(
        setup.run_dir, files.Outcome(trial_id=TRIAL, status="errored", error="ValueError: rank 1 fails at epoch 2")
    )
    report = judge(setup, progress=[_ranks(1, 1)], restored_started=False)
    restore = next(v for v in report.verdicts if v.name == "restore")
    assert restore.text == "not tried: the trial failed before the cut (its error is below)"
    assert report.error == "ValueError: rank 1 fails at epoch 2" and not report.ok


def test_the_cpus_busy_over_a_phase_come_from_the_machines_samples() -> None:
    from hpsearch.experiment.check import busy_cpus

    # busy CPU-seconds so far, sampled at 0, 1, 3 and 4 s: 2 CPUs busy for 1 s, then 1, then 0.5
    samples = [(0.0, 0.0), (1.0, 2.0), (3.0, 4.0), (4.0, 4.5)]
    assert busy_cpus(samples, 0.0, 1.0) == pytest.approx(2.0)
    assert busy_cpus(samples, 0.5, 2.0) == pytest.approx((3.0 - 1.0) / 1.5)  # linear between samples
    assert busy_cpus(samples, 1.0, 4.0) == pytest.approx(2.5 / 3)
    # not covered, empty or backwards: unknown, never a guess
    assert busy_cpus(samples, -1.0, 2.0) is None and busy_cpus(samples, 3.0, 5.0) is None
    assert busy_cpus([], 0.0, 1.0) is None and busy_cpus(samples, 2.0, 2.0) is None
