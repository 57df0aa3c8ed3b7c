"""A PyTorch Lightning loop written as Ray's Lightning guide writes it, searched unchanged.

Without the ``lightning`` extra, a spec whose loop imports Lightning is refused when it is checked
(exit 2), with the extra's pip line (the first tests: no Ray). Then one search of the shipped spec
(search_spaces/lightning_digits.yaml), shrunk with ``--set`` to a grid of two learning rates, FIFO,
2 workers of 0.45 CPU and drivers of 0.05 CPU: a target on ``val_loss`` that the good learning rate
reaches at its first epoch ends it, and ``hpsearch resume`` with the target out of reach runs every
trial to the end from Ray's Lightning checkpoints. Both trials' workers import Lightning (about 5 s
of this machine each), so the search and its resume take two to four minutes here.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from leftovers import placement_groups_left

from hpsearch.cli import main
from hpsearch.experiment import files

SPEC = Path(__file__).resolve().parents[2] / "search_spaces" / "lightning_digits.yaml"
GOOD_LR, BAD_LR = 0.03, 1.0e-4
#: Lightning's epochs 0 to 3. An epoch takes about a second: the target stops the good trial an epoch or
#: so after its first, and the bad one (started with it) is still running then, so the cut lands mid-trial.
EPOCHS = 4
#: The good learning rate's val_loss is well below this after one epoch, the bad one's (about 2.3) far above.
TARGET = 1.0
INSTALL = 'pip install "hpsearch[lightning]"'


@pytest.fixture
def without_lightning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lightning as if not installed: importing it (or Ray's Lightning module) fails as it would then."""
    for name in ("lightning", "pytorch_lightning"):
        monkeypatch.setitem(sys.modules, name, None)  # `import lightning` raises ModuleNotFoundError
    for name in list(sys.modules):
        if name.startswith(("lightning.", "pytorch_lightning.", "ray.train.lightning")) or name.endswith(
            "examples.lightning_digits"
        ):
            monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("import lightning.pytorch as pl\n", id="lightning"),
        pytest.param("import pytorch_lightning as pl\n", id="pytorch-lightning"),
        # Ray's module raises its own ModuleNotFoundError, from the one about pytorch_lightning
        pytest.param("from ray.train.lightning import RayTrainReportCallback\n", id="ray-first"),
    ],
)
def test_a_loop_file_that_imports_lightning_without_it_names_the_extra(
    tmp_path: Path, without_lightning: None, source: str
) -> None:
    from hpsearch.spec import load_spec
    from hpsearch.spec._imports import load_callable

    loop = tmp_path / "loop.py"
    loop.write_text(source + "\n\ndef train_loop(config):\n    pass\n")
    with pytest.raises(ValueError) as err:
        load_callable(f"{loop}:train_loop")
    assert str(err.value) == f"importing {loop} failed: needs the lightning package, which is not installed: {INSTALL}"
    with pytest.raises(
        ValueError,
        match=r"trainable: importing .* needs the lightning package, which is not installed: pip install \"hpsearch\[lightning\]\"",
    ):
        load_spec({**yaml.safe_load(SPEC.read_text()), "trainable": f"{loop}:train_loop"})


def test_the_shipped_spec_without_lightning_exits_2_with_the_pip_line(
    tmp_path: Path, without_lightning: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["run", str(SPEC), "--set", f"storage_path={out}"]) == 2
    err = capsys.readouterr().err
    assert (
        "trainable: cannot import module 'hpsearch.examples.lightning_digits': "
        f"needs the lightning package, which is not installed: {INSTALL}"
    ) in err
    assert "Traceback" not in err
    assert not out.exists()


def test_another_missing_module_is_still_named_as_it_failed(tmp_path: Path) -> None:
    from hpsearch.spec._imports import load_callable

    loop = tmp_path / "loop.py"
    loop.write_text("import no_such_package_hps\n")
    with pytest.raises(ValueError, match="ModuleNotFoundError: No module named 'no_such_package_hps'$"):
        load_callable(f"{loop}:train_loop")


@pytest.fixture(scope="module")
def search(_ray_session, tmp_path_factory) -> dict[str, Any]:
    """The search cut by its target, then resumed; what the history held at the cut. Run once for the module.

    Module-scoped, so it checks for left-over placement groups itself, as ``ray_cluster`` does per test.
    """
    pytest.importorskip("lightning", reason=f"the lightning extra: {INSTALL}")
    import hpsearch

    before = set(_ray_session.util.placement_group_table())
    tmp_path = tmp_path_factory.mktemp("lightning")
    overrides = {
        "storage_path": str(tmp_path),
        "num_samples": "1",
        "search_space.lr": f"{{type: grid, values: [{GOOD_LR}, {BAD_LR}]}}",
        "search_space.hidden": "64",
        "search_space.epochs": str(EPOCHS),
        "searcher": "{type: random, seed: 0}",
        "scheduler": "{type: fifo}",
        "resources.driver_cpus": "0.05",
        "budget": f"{{target: {{val_loss: {TARGET}}}}}",
    }
    sets = [arg for key, value in overrides.items() for arg in ("--set", f"{key}={value}")]
    started = time.monotonic()
    assert main(["run", str(SPEC), *sets]) == 0
    exp = tmp_path / "lightning-digits"
    cut = {tid: files.read_history(exp, tid) for tid in hpsearch.load_results(exp).trials["trial_id"]}
    summary = files.read_summary(exp)
    assert main(["resume", str(exp), "--set", "budget.target.val_loss=1.0e-9"]) == 0
    print(f"lightning search + resume: {time.monotonic() - started:.1f} s")
    yield {"exp": exp, "cut": cut, "cut_summary": summary}
    left = placement_groups_left(_ray_session, before)
    assert not left, f"placement groups left behind by the Lightning search: {left}"


@pytest.mark.ray
@pytest.mark.timeout(600)  # the first Ray test runs the search and its resume (the fixture)
@pytest.mark.full
def test_the_logged_val_loss_ranks_the_trials_and_every_trial_finishes(search) -> None:
    import hpsearch

    assert search["cut_summary"]["ended_by"] == "target"
    results = hpsearch.load_results(search["exp"])
    assert results.metric == "val_loss"
    trials = results.trials.sort_values("rank")
    assert list(trials["status"]) == ["finished", "finished"], trials[["lr", "status", "error"]]
    assert list(trials["lr"]) == [GOOD_LR, BAD_LR]  # the better learning rate ranks first
    for trial in trials.to_dict("records"):
        history = results.history[results.history["trial_id"] == trial["trial_id"]].sort_values("iteration")
        # What RayTrainReportCallback reports every epoch: the logged metrics, Lightning's epoch (from 0) and step.
        assert history["epoch"].tolist() == list(range(EPOCHS))
        assert history["iteration"].tolist() == list(range(EPOCHS))
        assert {"val_loss", "val_acc", "train_loss", "step"} <= set(history.columns)
        assert history["step"].is_monotonic_increasing and history["step"].iloc[-1] > 0
        assert trial["best"] == pytest.approx(history["val_loss"].min())
        assert trial["last"] == pytest.approx(history["val_loss"].iloc[-1])


@pytest.mark.ray
@pytest.mark.full
def test_the_checkpoints_are_lightnings_and_hold_the_model_that_logged_the_metric(search) -> None:
    import torch
    from ray.train.lightning import RayTrainReportCallback

    import hpsearch
    from hpsearch.examples.digits import _load_split
    from hpsearch.examples.lightning_digits import DigitsClassifier

    results = hpsearch.load_results(search["exp"])
    _, _, x_va, y_va = _load_split()
    for trial in results.trials.to_dict("records"):
        history = results.history[results.history["trial_id"] == trial["trial_id"]].sort_values("iteration")
        assert history["checkpoint"].notna().all()  # every epoch's report carries one
        ckpt = Path(history["checkpoint"].iloc[-1]) / RayTrainReportCallback.CHECKPOINT_NAME
        assert ckpt.is_file() and Path(trial["best_checkpoint"]).is_dir()
        # The last checkpoint's model, evaluated on the whole validation split, gives the val_loss it logged.
        model = DigitsClassifier.load_from_checkpoint(ckpt, map_location="cpu")
        assert model.hparams["lr"] == trial["lr"]
        model.eval()
        with torch.no_grad():
            val_loss = torch.nn.functional.cross_entropy(model(x_va), y_va).item()
        assert val_loss == pytest.approx(history["val_loss"].iloc[-1], rel=1e-4)
    # hpsearch.load_model: the best trial's best checkpoint, through the class's load_from_checkpoint, in one call
    best = hpsearch.load_model(results, DigitsClassifier)
    assert isinstance(best, DigitsClassifier) and not best.training and best.hparams["lr"] == GOOD_LR
    with torch.no_grad():
        val_loss = torch.nn.functional.cross_entropy(best(x_va), y_va).item()
    at_best = results.history[results.history["checkpoint"] == results.best["best_checkpoint"]]  # its report
    assert val_loss == pytest.approx(at_best["val_loss"].item(), rel=1e-4)


@pytest.mark.ray
@pytest.mark.full
def test_resume_continues_each_cut_trial_from_its_checkpoint(search) -> None:
    exp, cut = search["exp"], search["cut"]
    resumed = 0
    for trial_id, before in cut.items():
        after = files.read_history(exp, trial_id)[len(before) :]
        checkpointed = [r["epoch"] for r in before if r.get("checkpoint_path")]
        if not after:
            assert [r["epoch"] for r in before] == list(range(EPOCHS))  # it had ended before the cut
            continue
        resumed += 1
        # The first epoch after the resume is the one after the checkpoint: nothing trained twice, nothing skipped.
        assert after[0]["epoch"] == (checkpointed[-1] + 1 if checkpointed else 0)
        assert [r["epoch"] for r in after] == list(range(after[0]["epoch"], EPOCHS))
    assert resumed >= 1, {tid: [r["epoch"] for r in h] for tid, h in cut.items()}


LOOPS = Path(__file__).resolve().parents[1] / "lightning_loops.py"


def _spec_file(tmp_path: Path, name: str, scheduler: dict[str, Any], lrs: list[float], epochs: int) -> Path:
    """A search of ``tests/lightning_loops.py:guide_loop_logging_lr``: a grid of learning rates, 1-worker trials."""
    spec = {
        "name": name,
        "trainable": f"{LOOPS}:guide_loop_logging_lr",
        "metric": "val_loss",
        "mode": "min",
        "search_space": {"lr": {"type": "grid", "values": lrs}, "hidden": 32, "epochs": epochs},
        "searcher": {"type": "random", "seed": 0},
        "scheduler": scheduler,
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.45}},
        "resources": {"driver_cpus": 0.05, "max_concurrent_trials": 2},
        "failure": {"worker_retries": 0},
        "storage_path": str(tmp_path / "results"),
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.ray
@pytest.mark.timeout(400)
def test_asha_stops_the_worse_lightning_trial_at_its_first_rung(ray_cluster: Any, tmp_path: Path) -> None:
    """One trial at a time, the good learning rate first: ASHA's first rung (Lightning's epoch 1, its second
    epoch) then holds the good trial's val_loss, and the worse trial stops there."""
    pytest.importorskip("lightning", reason=f"the lightning extra: {INSTALL}")
    import hpsearch

    scheduler = {"type": "asha", "max_t": 2, "grace_period": 1, "reduction_factor": 2}
    spec = _spec_file(tmp_path, "asha", scheduler, [GOOD_LR, BAD_LR], epochs=3)
    assert main(["run", str(spec), "--set", "resources.max_concurrent_trials=1"]) == 0
    results = hpsearch.load_results(tmp_path / "results" / "asha")
    by_lr = results.trials.set_index("lr")
    assert by_lr.loc[GOOD_LR, "status"] == "finished" and by_lr.loc[GOOD_LR, "last_iteration"] == 2
    assert by_lr.loc[BAD_LR, "status"] == "stopped", by_lr[["status", "error"]]
    assert by_lr.loc[BAD_LR, "last_iteration"] == 1  # the rung, at the end of its second epoch (epochs count from 0)


@pytest.mark.ray
@pytest.mark.timeout(500)
@pytest.mark.full
def test_under_pbt_a_guide_loop_continues_from_the_donor_with_the_mutated_lr(ray_cluster: Any, tmp_path: Path) -> None:
    """The loop restores as Ray's guide does (``trainer.fit(ckpt_path=...)`` from ``ray.train.get_checkpoint()``),
    with no hpsearch helper. After the exploit it trains on from the donor's checkpoint (its val_loss the donor's,
    not its own) with the mutated learning rate in its optimizer (not the donor's, which Lightning's restore of the
    optimizer state would bring back: ray-project/ray#36660)."""
    pytest.importorskip("lightning", reason=f"the lightning extra: {INSTALL}")
    import hpsearch

    scheduler = {
        "type": "pbt",
        "perturbation_interval": 1,  # at Lightning's epoch 1: the first report is epoch 0
        "quantile_fraction": 0.5,  # of 2: the worse copies the better
        "resample_probability": 0.0,  # lr x1.2 or x0.8 of the donor's
        "synch": True,  # both ranked at epoch 1: the exploit is certain
        "hyperparam_mutations": {"lr": {"type": "float", "low": 1.0e-4, "high": 0.1, "log": True}},
    }
    spec = _spec_file(tmp_path, "pbt", scheduler, [GOOD_LR, BAD_LR], epochs=3)
    assert main(["run", str(spec)]) == 0
    exp = tmp_path / "results" / "pbt"
    results = hpsearch.load_results(exp)
    assert sorted(results.trials["status"]) == ["finished", "finished"]
    # ranked at epochs 1 and 2: the exploit at epoch 2, the last, leaves nothing to train; the one at epoch 1 is checked
    [exploit] = [row for row in results.lineage.to_dict("records") if row["epoch"] == 1]
    assert exploit["donor_epoch"] == 1
    [record] = [r for r in files.read_lineage(exp, exploit["trial_id"]) if r["epoch"] == 1]
    new_lr = record["new_config"]["lr"]
    assert new_lr in (pytest.approx(GOOD_LR * 1.2), pytest.approx(GOOD_LR * 0.8))
    history = results.history[results.history["trial_id"] == exploit["trial_id"]].set_index("epoch")
    assert list(history.index) == [0, 1, 2]  # Lightning continued at the epoch after the donor's
    after = history.loc[2]  # its report of epoch 2, the first after the exploit
    assert after["lr_now"] == pytest.approx(new_lr)  # the optimizer trains with the mutated lr
    assert after["val_loss"] < 0.5 * exploit["value"]  # the donor's model: its own was far worse
    assert after["val_loss"] < 2.0 * exploit["donor_value"]
