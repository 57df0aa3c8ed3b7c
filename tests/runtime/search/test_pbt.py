"""Population-based training without Ray: the spec's pbt/pb2 sections, the driver's start and
report checks, the optimizer's hyperparameters after a donor's checkpoint, the driver slots, and
the lineage (table, plot data, report) of a fake experiment written with the project's writers.

The searches themselves are in tests/runtime/search/test_pbt_search.py.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib
import pytest
import torch
import yaml
from fake_experiment import T0, FakeTrial, spec_dict, write_experiment

from hpsearch import load_results
from hpsearch.analysis import pbt_lineage
from hpsearch.cli import main
from hpsearch.errors import CheckpointNotReportedError, SpecError
from hpsearch.experiment import files
from hpsearch.experiment.layout import POINTER_FILE, START_FILE
from hpsearch.spec import load_spec
from hpsearch.spec.population import PB2_INSTALL

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "search_spaces" / "digits_pbt.yaml"
LR = {"type": "float", "low": 1.0e-4, "high": 1.0e-1, "log": True}
PBT = {"type": "pbt", "hyperparam_mutations": {"lr": LR}}


def _spec(**changes: Any) -> dict[str, Any]:
    base = {
        "name": "pbt",
        "trainable": "hpsearch.examples.digits:train_loop",
        "metric": "val_loss",
        "mode": "min",
        "num_samples": 4,
        "search_space": {"lr": LR, "optimizer": "sgd", "hidden": {"type": "choice", "values": [16, 64]}},
        "scheduler": PBT,
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
            {"scheduler": {"type": "pbt", "hyperparam_mutations": {"lrr": LR}}},
            "scheduler.hyperparam_mutations.lrr: is not a parameter of search_space; did you mean 'lr'? "
            "(search_space has: lr, optimizer, hidden)",
            id="unknown-key",
        ),
        pytest.param(
            {
                "scheduler": {
                    "type": "pbt",
                    "hyperparam_mutations": {"optimizer": {"type": "float", "low": 0, "high": 1}},
                }
            },
            "scheduler.hyperparam_mutations.optimizer: is a float mutation, but search_space.optimizer holds other "
            "values than numbers ('sgd'); use type: choice",
            id="float-on-strings",
        ),
        pytest.param(
            {"scheduler": {"type": "pbt", "hyperparam_mutations": {"hidden": {"type": "grid", "values": [16, 32]}}}},
            "scheduler.hyperparam_mutations.hidden: must be a float, int or choice distribution without 'when'; "
            "it is of type 'grid'",
            id="grid-mutation",
        ),
        pytest.param(
            {"scheduler": {"type": "pbt", "hyperparam_mutations": {"lr": {**LR, "low": 0.5}}}},
            "scheduler.hyperparam_mutations.lr.low: must be less than high (0.1), got 0.5",
            id="bounds",
        ),
        pytest.param(
            {"scheduler": {"type": "pbt", "hyperparam_mutations": {}}},
            "scheduler.hyperparam_mutations: must have at least 1 value, got {}",
            id="no-mutations",
        ),
        pytest.param(
            {"scheduler": {**PBT, "quantile_fraction": 0.6}},
            "scheduler.quantile_fraction: must be less than or equal to 0.5, got 0.6",
            id="quantile",
        ),
        pytest.param(
            {"scheduler": {**PBT, "perturbation_interval": 0}},
            "scheduler.perturbation_interval: must be greater than 0, got 0",
            id="interval",
        ),
        pytest.param(
            {"searcher": {"type": "optuna"}},
            "searcher.type: must be 'random' with scheduler 'pbt', got 'optuna': pbt changes each trial's config "
            "while it trains, so a model-based searcher would learn from configs no trial ran whole (leave searcher "
            "out, or set type: random)",
            id="model-based-searcher",
        ),
        pytest.param(
            {"metric": ["val_loss", "n_params"], "mode": ["min", "min"]},
            "metric: scheduler 'pbt' takes one objective (pbt ranks the population on one number), got 2: "
            "val_loss, n_params",
            id="several-objectives",
        ),
        pytest.param(
            {"resources": {"driver_node": "any"}},
            "resources.driver_node: must be 'head' with scheduler 'pbt', got 'any': the population takes turns "
            "through the head node's trial-driver slots",
            id="driver-anywhere",
        ),
        pytest.param(
            {"scheduler": {"type": "pb2", "hyperparam_bounds": {"lr": [0.1, 0.01]}}},
            "scheduler.hyperparam_bounds.lr: must be [low, high] with low < high, got [0.1, 0.01]",
            id="pb2-reversed",
        ),
        pytest.param(
            {"scheduler": {"type": "pb2", "hyperparam_bounds": {"lr": [1.0e-3, 0.1]}}},
            "scheduler.hyperparam_bounds.lr: must hold search_space.lr's range [0.0001, 0.1] (PB2 models the "
            "population inside its bounds), got [0.001, 0.1]",
            id="pb2-narrower-than-the-space",
        ),
        pytest.param(
            {"scheduler": {"type": "pb2", "hyperparam_bounds": {"optimizer": [0, 1]}}},
            "scheduler.hyperparam_bounds.optimizer: PB2 models numbers only, but search_space.optimizer is a const",
            id="pb2-not-a-number",
        ),
        pytest.param(
            {"scheduler": {"type": "pb2", "hyperparam_bounds": {"momentum": [0, 1]}}},
            "scheduler.hyperparam_bounds.momentum: is not a parameter of search_space "
            "(search_space has: lr, optimizer, hidden)",
            id="pb2-unknown-key",
        ),
    ],
)
def test_each_pbt_mistake_is_one_problem_with_its_path(changes: dict[str, Any], expected: str) -> None:
    assert _problems(_spec(**changes)) == [expected]


def test_pb2_without_its_dependencies_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sklearn" else real(name, *a))
    problems = _problems(_spec(scheduler={"type": "pb2", "hyperparam_bounds": {"lr": [1.0e-4, 0.1]}}))
    assert problems == [f"scheduler.type: pb2 needs scikit-learn, not installed: {PB2_INSTALL}"]


def test_a_pbt_mistake_exits_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_spec(searcher={"type": "hyperopt"}, storage_path=str(tmp_path / "out"))))
    assert main(["run", str(path)]) == 2
    assert "searcher.type: must be 'random' with scheduler 'pbt', got 'hyperopt'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_shipped_spec_is_valid_and_round_trips() -> None:
    spec = load_spec(SHIPPED)
    assert spec.population_based and spec.scheduler.type == "pbt" and spec.searcher.type == "random"
    data = spec.to_dict()
    assert data["scheduler"]["hyperparam_mutations"] == {"lr": {"type": "float", "low": 1e-3, "high": 0.3, "log": True}}
    assert data["scheduler"]["perturbation_factors"] == [1.2, 0.8]
    again = load_spec(yaml.safe_load(yaml.safe_dump(data)), check_trainable=False)
    assert again.scheduler == spec.scheduler


def test_the_schedulers_are_built_with_their_options(tmp_path: Path) -> None:
    from ray.tune.search.sample import Float

    from hpsearch.runtime.search.pbt import HpsearchPB2, HpsearchPBT
    from hpsearch.runtime.search.plugins import SchedulerContext, build_scheduler

    spec = load_spec(SHIPPED)
    pbt = build_scheduler(spec.scheduler, SchedulerContext("val_loss", "min", experiment_dir=tmp_path))
    assert isinstance(pbt, HpsearchPBT) and pbt._time_attr == "epoch" and pbt._perturbation_interval == 2
    assert isinstance(pbt._hyperparam_mutations["lr"], Float) and pbt._quantile_fraction == 0.25
    pb2_spec = load_spec(
        _spec(scheduler={"type": "pb2", "hyperparam_bounds": {"lr": [1.0e-4, 0.1]}}), check_trainable=False
    )
    pb2 = build_scheduler(pb2_spec.scheduler, SchedulerContext("val_loss", "min"))
    assert isinstance(pb2, HpsearchPB2) and pb2._hyperparam_bounds == {"lr": [1.0e-4, 0.1]}
    import pickle

    assert pickle.loads(pickle.dumps(pbt))._hp_experiment_dir == str(tmp_path)  # Tune pickles it into its state


# ----------------------------------------------------------------------------- the driver


def test_driver_slots_let_the_plans_trials_run_and_no_more() -> None:
    from hpsearch.runtime.search.pbt import MAX_GATED, driver_slot

    for k in range(1, 40):
        slot, gated = driver_slot(k), min(k, MAX_GATED)
        assert gated * slot + gated * 0.001 <= 1.0  # k drivers and each run's placement-group cleaner fit
        assert (gated + 1) * slot > 1.0  # one more driver does not
        assert round(slot / 1e-4) * 1e-4 == pytest.approx(slot)  # in Ray's resource unit


class _Checkpoint:
    """What the driver reads of Tune's checkpoint: ``as_directory()``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        yield str(self.folder)


def test_a_driver_continues_its_own_run_or_starts_a_new_one_from_the_donors_checkpoint(tmp_path: Path) -> None:
    from hpsearch.runtime.trial.pbt_driver import resolve_start

    runs = tmp_path / "train"
    donor_ckpt = runs / "t1" / "checkpoint_a"
    donor_ckpt.mkdir(parents=True)
    assert resolve_start("t2", str(runs), None).name == "t2"  # first start: the trial's own run
    own = tmp_path / "own"
    files.write_pointer(own, {"trial_id": "t2", "storage": "t2", "name": "pbt-t1-e2", "checkpoint": "x", "epoch": 3})
    start = resolve_start("t2", str(runs), _Checkpoint(own))
    assert (start.storage, start.name, start.donor) == ("t2", "pbt-t1-e2", None)  # paused: the same run carries on

    donor = tmp_path / "donor"
    files.write_pointer(
        donor, {"trial_id": "t1", "storage": ".", "name": "t1", "checkpoint": "t1/checkpoint_a", "epoch": 4}
    )
    assert (donor / POINTER_FILE).exists()
    start = resolve_start("t2", str(runs), _Checkpoint(donor))
    assert (start.storage, start.name) == ("t2", "pbt-t1-e4")
    assert start.donor is not None and start.donor.epoch == 4 and start.donor.checkpoint == str(donor_ckpt)
    written = files.read_json(runs / "t2" / "pbt-t1-e4" / START_FILE)
    assert written == {"checkpoint": str(donor_ckpt), "donor_trial_id": "t1", "donor_epoch": 4}

    gone = tmp_path / "gone"
    files.write_pointer(gone, {"trial_id": "t1", "storage": ".", "name": "t1", "checkpoint": "t1/nothing", "epoch": 6})
    with pytest.raises(FileNotFoundError, match="continue from trial t1's checkpoint of epoch 6"):
        resolve_start("t2", str(runs), _Checkpoint(gone))


def test_a_paused_run_that_went_on_past_its_pause_continues_from_the_checkpoint_tune_holds(tmp_path: Path) -> None:
    # Synch PBT paused t2 at its epoch-2 report; before the pause took effect its nested run trained epoch 3 and
    # wrote that checkpoint. Ray Train would resume the run from epoch 3, whose report Tune never had: with 3
    # epochs, the loop would have nothing left to train and the trial would end at epoch 2 with no report.
    import os

    from hpsearch.runtime.trial.pbt_driver import resolve_start

    runs = tmp_path / "train"
    at_pause, later = runs / "t2" / "checkpoint_2026-12-03_07-26-40.1", runs / "t2" / "checkpoint_2026-12-03_07-26-41.2"
    for age, folder in ((20.0, at_pause), (10.0, later)):
        folder.mkdir(parents=True)
        os.utime(folder, (folder.stat().st_atime, folder.stat().st_mtime - age))
    pointer = tmp_path / "pointer"
    files.write_pointer(
        pointer, {"trial_id": "t2", "storage": ".", "name": "t2", "checkpoint": f"t2/{at_pause.name}", "epoch": 2}
    )
    start = resolve_start("t2", str(runs), _Checkpoint(pointer))
    assert (start.storage, start.name) == ("t2", "pbt-t2-e2")  # a new run, from the checkpoint of the pause
    assert start.donor is not None and (start.donor.trial_id, start.donor.epoch) == ("t2", 2)
    assert files.read_json(runs / "t2" / "pbt-t2-e2" / START_FILE) == {
        "checkpoint": str(at_pause),
        "donor_trial_id": "t2",
        "donor_epoch": 2,
    }
    # paused there again (a retry): another new run, never the first one's, which went on to its own later epochs
    (runs / "t2" / "pbt-t2-e2" / "checkpoint_x").mkdir()
    assert resolve_start("t2", str(runs), _Checkpoint(pointer)).name == "pbt-t2-e2-2"

    # the run stopped at the checkpoint Tune holds: it carries on, as before
    pointer_latest = tmp_path / "latest"
    files.write_pointer(
        pointer_latest, {"trial_id": "t2", "storage": ".", "name": "t2", "checkpoint": f"t2/{later.name}", "epoch": 3}
    )
    start = resolve_start("t2", str(runs), _Checkpoint(pointer_latest))
    assert (start.storage, start.name, start.donor) == (".", "t2", None)


def test_reports_under_pbt_need_a_checkpoint_and_a_continued_run_its_donors_epoch() -> None:
    from hpsearch.runtime.train.controller import CheckpointRules, checkpoint_problem

    checks = CheckpointRules(True)
    assert checkpoint_problem(checks, {"epoch": 1}, object(), first=True) is None
    problem = checkpoint_problem(checks, {"epoch": 3}, None, first=False)
    assert problem == (
        "pbt/pb2 need a checkpoint with every report; epoch 3 had none: report with "
        "hpsearch.train.report(..., model=...) or ray.train.report(..., checkpoint=...)"
    )
    donor = CheckpointRules(True, donor_epoch=4)
    assert checkpoint_problem(donor, {"epoch": 5}, object(), first=True) is None
    restarted = checkpoint_problem(donor, {"epoch": 1}, object(), first=True)
    assert restarted == (
        "this run continues from a checkpoint of epoch 4, but the loop reported epoch 1: "
        "restore from ray.train.get_checkpoint() at the loop's start, or hpsearch.train.restore(model=...)"
    )
    error = CheckpointNotReportedError(restarted)
    import pickle

    assert str(pickle.loads(pickle.dumps(error))) == restarted  # crosses Ray's processes whole


# ----------------------------------------------------------------------------- the optimizer after an exploit


def _trained(lr: float, scheduler: bool) -> tuple[torch.nn.Module, dict[str, Any], dict[str, Any] | None]:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5) if scheduler else None
    for _ in range(2):
        opt.zero_grad()
        model(torch.ones(4, 3)).sum().backward()
        opt.step()
        if sched is not None:
            sched.step()
    return model, opt.state_dict(), sched.state_dict() if sched is not None else None


def test_a_donors_optimizer_state_takes_the_new_configs_hyperparameters() -> None:
    from hpsearch.train import _hyperparameters, apply_hyperparameters

    _, donor_opt, _ = _trained(0.1, scheduler=False)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.12, momentum=0.8, weight_decay=1e-3)  # the mutated config
    built = _hyperparameters(opt)
    opt.load_state_dict(donor_opt)
    assert opt.param_groups[0]["lr"] == 0.1  # what a plain load leaves (ray-project/ray#36660)
    apply_hyperparameters(opt, built)
    group = opt.param_groups[0]
    assert (group["lr"], group["momentum"], group["weight_decay"]) == (0.12, 0.8, 1e-3)
    buffers = [opt.state[p]["momentum_buffer"] for p in model.parameters()]
    assert all(b is not None and b.abs().sum() > 0 for b in buffers)  # the donor's momentum is kept


def test_with_an_lr_scheduler_the_schedule_continues_at_the_new_base_rate() -> None:
    from hpsearch.train import _hyperparameters, apply_hyperparameters

    _, donor_opt, donor_sched = _trained(0.1, scheduler=True)  # 0.1 halved twice: 0.025
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.12, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    built, base = _hyperparameters(opt), list(sched.base_lrs)
    opt.load_state_dict(donor_opt)
    assert donor_sched is not None
    sched.load_state_dict(donor_sched)
    apply_hyperparameters(opt, built, scheduler=sched, base_lrs=base)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.025 * 1.2)  # the donor's progress, at 1.2x its base
    assert sched.base_lrs == [0.12] and sched.get_last_lr() == [pytest.approx(0.03)]
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.015)  # and the schedule goes on from there


# ----------------------------------------------------------------------------- the lineage


def _experiment(tmp_path: Path) -> Path:
    trials = [
        FakeTrial("aaaa0001", {"lr": 0.05}, [1.0, 0.5, 0.4, 0.3], start=0),
        FakeTrial("aaaa0002", {"lr": 0.06}, [2.3, 2.2, 0.45, 0.35], start=1),
    ]
    exp = write_experiment(tmp_path / "exp", trials, spec=spec_dict(scheduler=PBT, searcher={"type": "random"}))
    files.append_lineage(
        files.run_dir(exp, "aaaa0002"),
        {
            "time": T0 + 21.5,  # the pause: the trial's epochs 2 and 3 are reported at T0 + 22
            "trial_id": "aaaa0002",
            "epoch": 2,
            "donor_trial_id": "aaaa0001",
            "donor_epoch": 2,
            "metric": "val_loss",
            "value": 2.2,
            "donor_value": 0.5,
            "old_config": {"lr": 0.0002, "opt": {"momentum": 0.9}},
            "new_config": {"lr": 0.06, "opt": {"momentum": 0.9}},
        },
    )
    return exp


def test_load_results_shows_each_exploit_in_the_lineage_table(tmp_path: Path) -> None:
    exp = _experiment(tmp_path)
    lineage = load_results(exp).lineage
    assert len(lineage) == 1
    row = lineage.iloc[0]
    assert (row["trial_id"], row["epoch"], row["donor_trial_id"], row["donor_epoch"]) == ("aaaa0002", 2, "aaaa0001", 2)
    assert (row["value"], row["donor_value"], row["number"], row["donor_number"]) == (2.2, 0.5, 2, 1)
    assert row["changed"] == "lr 0.0002 -> 0.06"
    assert (row["old.lr"], row["new.lr"]) == (0.0002, 0.06)
    assert "old.opt.momentum" not in lineage  # only what changed
    assert row["exploit_s"] == pytest.approx(0.5)  # to the first report of epoch 3 (the donor's epoch + 1)


def test_the_lineage_plot_data_and_the_report(tmp_path: Path) -> None:
    exp = _experiment(tmp_path)
    data = pbt_lineage(load_results(exp))
    assert data.trials == ["aaaa0001", "aaaa0002"]
    assert data.exploits == [("aaaa0002", 2.0, "aaaa0001", 2.0)]
    assert ("aaaa0002", 1.0, 4.0) in data.spans
    assert main(["report", str(exp), "--format", "md"]) == 0
    page = (exp / "hpsearch_report.md").read_text()
    assert "## PBT lineage (1 exploits)" in page and "| aaaa0002 | 2 | aaaa0001 | 2 |" in page
    assert (exp / "hpsearch_report_pbt_lineage.png").stat().st_size > 1000


def test_a_search_without_pbt_has_an_empty_lineage_and_no_lineage_section(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "exp", [FakeTrial("aaaa0001", {"lr": 0.05}, [1.0, 0.5])])
    results = load_results(exp)
    assert results.lineage.empty and list(results.lineage.columns[:3]) == ["trial_id", "number", "epoch"]
    assert main(["report", str(exp), "--format", "md"]) == 0
    assert "PBT lineage" not in (exp / "hpsearch_report.md").read_text()


# ----------------------------------------------------------------------------- usage across pauses


def test_a_paused_trial_holds_nothing_until_it_runs_again(tmp_path: Path) -> None:
    """PBT (and HyperBand) pause trials: a pause ends the driver's run in the usage file, so
    resource-hours and budgets count only the time a trial held its resources."""
    from fake_tune import FakeTrial as TuneTrial

    from hpsearch.runtime.search.outcomes import OutcomeRecorder

    exp = write_experiment(tmp_path / "exp", [], spec=spec_dict(scheduler=PBT, searcher={"type": "random"}))
    recorder = OutcomeRecorder(exp)
    trial = TuneTrial("aaaa0001")
    recorder.on_trial_start(0, [trial], trial)
    recorder.on_step_end(1, [trial])  # running: nothing ends
    trial.status = "PAUSED"
    recorder.on_step_end(2, [trial])
    recorder.on_step_end(3, [trial])  # ended once
    trial.status = "RUNNING"
    recorder.on_trial_start(4, [trial], trial)
    trial.status = "TERMINATED"
    recorder.on_trial_complete(5, [trial], trial)
    runs = files.read_usage(exp).trials["aaaa0001"]
    assert [run.end for run in runs] == ["paused", "finished"]
    assert all(run.ended_at is not None for run in runs) and runs[0].ended_at <= runs[1].started_at


class _RestoredTrial:
    """The parts of a Tune trial restored by ``Tuner.restore`` that Ray's PBT reads."""

    def __init__(self, trial_id: str, time: int, loss: float | None, checkpoint: str | None) -> None:
        from types import SimpleNamespace

        self.trial_id, self.experiment_tag, self.config = trial_id, trial_id, {"lr": 0.01}
        self.status = "PENDING"  # Tune requeues every unfinished trial as pending
        self.last_result = {} if loss is None else {"training_iteration": time, "loss": loss}
        self.checkpoint = checkpoint
        self.temporary_state = SimpleNamespace(saving_to=None)
        self.run_metadata = SimpleNamespace(
            checkpoint_manager=SimpleNamespace(checkpoint_config=SimpleNamespace(num_to_keep=None))
        )

    def __repr__(self) -> str:
        return self.trial_id

    def is_finished(self) -> bool:
        return self.status in ("TERMINATED", "ERROR")

    def set_status(self, status: str) -> None:
        self.status = status


def test_a_resumed_synch_population_waits_for_its_slowest_trial_before_the_donor_hands_over() -> None:
    """Tune saves no scheduler state: after a resume Ray's PBT would count every trial from 0, let the trials that
    waited at the perturbation point run ahead, and hand the weaker trial a later (perhaps the last) checkpoint.
    hpsearch's scheduler brings each restored trial's time, score and checkpoint back."""
    from types import SimpleNamespace

    from ray.tune.schedulers import PopulationBasedTraining

    from hpsearch.runtime.internals import Exploit
    from hpsearch.runtime.search.pbt import HpsearchPBT

    exploits: list[Exploit] = []

    class Recording(HpsearchPBT, PopulationBasedTraining):
        def on_exploit(self, exploit: Exploit) -> None:
            exploits.append(exploit)  # Ray's step itself needs a running Tune

    pbt = Recording(
        time_attr="training_iteration", metric="loss", mode="min", perturbation_interval=2, quantile_fraction=0.34,
        synch=True, hyperparam_mutations={"lr": [0.01, 0.02]},
    )  # fmt: skip
    # cut by the budget: a and b wait at the perturbation point (epoch 2), c is at epoch 1
    a, b, c = (
        _RestoredTrial("a", 2, 0.1, "ck-a-2"),
        _RestoredTrial("b", 2, 0.5, "ck-b-2"),
        _RestoredTrial("c", 1, 0.9, "ck-c-1"),
    )
    trials = [a, b, c]
    controller = SimpleNamespace(
        search_alg=None,
        get_trials=lambda: trials,
        get_live_trials=lambda: trials,
        _schedule_trial_save=lambda trial, result=None: None,  # as Tune answers for a trial with no actor
    )
    for trial in trials:  # in Tune's order: the latest result first
        pbt.on_trial_add(controller, trial)

    assert (a.status, b.status, c.status) == ("PAUSED", "PAUSED", "PENDING")  # Tune starts every pending trial
    assert pbt.choose_trial_to_run(controller) is c  # a and b wait for c at epoch 2
    c.status = "RUNNING"
    pbt.on_trial_result(controller, c, {"training_iteration": 2, "loss": 0.95})
    assert [(e.trial, e.donor, e.donor_checkpoint) for e in exploits] == [(c, a, "ck-a-2")]  # a's epoch 2, not later
    assert pbt.choose_trial_to_run(controller) in (a, b)  # the next interval is open to all


def test_a_new_population_is_left_to_ray() -> None:
    from types import SimpleNamespace

    from ray.tune.schedulers import PopulationBasedTraining

    from hpsearch.runtime.internals import ExploitHook

    class Plain(ExploitHook, PopulationBasedTraining):
        pass

    pbt = Plain(
        time_attr="training_iteration", metric="loss", mode="min", perturbation_interval=2, synch=True,
        hyperparam_mutations={"lr": [0.01, 0.02]},
    )  # fmt: skip
    trials = [_RestoredTrial("a", 0, None, None), _RestoredTrial("b", 0, None, None)]
    controller = SimpleNamespace(search_alg=None, get_trials=lambda: trials, get_live_trials=lambda: trials)
    for trial in trials:
        pbt.on_trial_add(controller, trial)
    assert pbt.choose_trial_to_run(controller) is trials[0]
    assert [pbt._trial_state[t].last_train_time for t in trials] == [0, 0]


@pytest.mark.parametrize("left_by", ["ERROR", "TERMINATED"])
def test_a_synch_population_goes_on_when_a_trial_ends_before_the_perturbation_point(left_by: str, said) -> None:
    """Ray's synch PBT runs no trial already at the point until every live one reached it: a trial that errors
    (or is stopped) on its way there left the others paused for ever. They are ranked without it and go on."""
    from types import SimpleNamespace

    from ray.tune.schedulers import PopulationBasedTraining

    from hpsearch.runtime.internals import Exploit
    from hpsearch.runtime.search.pbt import HpsearchPBT

    exploits: list[Exploit] = []

    class Recording(HpsearchPBT, PopulationBasedTraining):
        def on_exploit(self, exploit: Exploit) -> None:
            exploits.append(exploit)  # Ray's step itself needs a running Tune

    pbt = Recording(
        time_attr="training_iteration", metric="loss", mode="min", perturbation_interval=2, quantile_fraction=0.5,
        synch=True, hyperparam_mutations={"lr": [0.01, 0.02]},
    )  # fmt: skip
    a, b, c = (_RestoredTrial(name, 0, None, None) for name in "abc")
    trials = [a, b, c]
    controller = SimpleNamespace(
        search_alg=None,
        get_trials=lambda: trials,
        get_live_trials=lambda: [t for t in trials if not t.is_finished()],
        _schedule_trial_save=lambda trial, result=None: None,
    )
    for trial in trials:
        pbt.on_trial_add(controller, trial)
        trial.status = "RUNNING"
    for trial, loss in ((a, 0.1), (b, 0.5)):  # a and b reach epoch 2 and wait there for c, paused
        trial.last_result = {"training_iteration": 2, "loss": loss}
        trial.checkpoint = f"ck-{trial.trial_id}-2"
        pbt.on_trial_result(controller, trial, trial.last_result)
        trial.status = "PAUSED"
    c.status = left_by  # c ends at epoch 1 (its loop raised, or a budget stopped it)
    chosen = pbt.choose_trial_to_run(controller)
    assert chosen in (a, b)  # Ray's own choice is None here: the search would wait for c for ever
    assert [(e.trial, e.donor) for e in exploits] == [(b, a)]  # ranked without c: b copies a
    assert said.getvalue().splitlines() == [
        "pbt: trial c ended before training_iteration 2, where the population waits to be ranked; "
        "the 2 other trial(s) are ranked without it and carry on"
    ]
    chosen.status = "RUNNING"
    assert pbt.choose_trial_to_run(controller) in (a, b)  # both are open to run to the next point


def test_an_async_population_never_waits_for_a_trial_that_ended() -> None:
    """Without synch, Ray's PBT runs any paused trial: a trial that ended holds nothing up (nothing to add)."""
    from types import SimpleNamespace

    from hpsearch.runtime.search.pbt import HpsearchPBT

    pbt = HpsearchPBT(
        time_attr="training_iteration", metric="loss", mode="min", perturbation_interval=2, synch=False,
        hyperparam_mutations={"lr": [0.01, 0.02]},
    )  # fmt: skip
    a, c = _RestoredTrial("a", 0, None, None), _RestoredTrial("c", 0, None, None)
    trials = [a, c]
    controller = SimpleNamespace(search_alg=None, get_trials=lambda: trials, get_live_trials=lambda: [a])
    for trial in trials:
        pbt.on_trial_add(controller, trial)
    a.status, c.status = "PAUSED", "ERROR"
    assert pbt.choose_trial_to_run(controller) is a
