"""A Hugging Face ``transformers.Trainer`` loop written as Ray's Transformers guide writes it, searched unchanged.

Without the ``transformers`` extra, a spec whose loop imports transformers, accelerate or Ray's
``ray.train.huggingface`` is refused when it is checked (exit 2), with the extra's pip line (the first
tests: no Ray). Ray's module imports without transformers (it raises only in ``prepare_trainer``, on the
workers), so that refusal looks at what the loop took from it. Then one search of the shipped spec
(search_spaces/transformers_tiny.yaml), shrunk with ``--set`` to a grid of two learning rates, FIFO,
2 workers of 0.45 CPU and drivers of 0.05 CPU: a target on ``eval_loss`` that the good learning rate
reaches at its first epoch ends it, and ``hpsearch resume`` with the target out of reach runs every trial
to the end from the Trainer's checkpoints. Each trial's driver and workers import transformers (seconds
each), twice (the search and its resume): the search and its resume take about three minutes here (172 s).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from leftovers import placement_groups_left

from hpsearch.cli import main
from hpsearch.experiment import files

SPEC = Path(__file__).resolve().parents[2] / "search_spaces" / "transformers_tiny.yaml"
GOOD_LR, BAD_LR = 3.0e-3, 1.0e-5
#: The Trainer's epochs 1.0 to 3.0. The good trial's first epoch ends the search; the bad one, started a few
#: seconds after it, is still running then, so the cut lands mid-trial for at least one of them.
EPOCHS = 3
#: Measured (2 workers): the good learning rate's eval_loss is about 0.004 after one epoch, the bad one's 0.693 (ln 2).
TARGET = 0.1
INSTALL = 'pip install "hpsearch[transformers]"'
#: The modules an import of the loop brings in again once the hidden packages are back.
_FRESH = ("transformers.", "accelerate.", "ray.train.huggingface")


@pytest.fixture
def hide(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """``hide("transformers")``: the package as if not installed, as importing it (or Ray's module) would then fail.

    What the test imports meanwhile (Ray's module, caught without transformers) is dropped at its end.
    """
    before = set(sys.modules)

    def hide(*names: str) -> None:
        for name in names:
            monkeypatch.setitem(sys.modules, name, None)  # `import name` raises ModuleNotFoundError
            for loaded in list(sys.modules):
                if loaded.startswith((f"{name}.", "ray.train.huggingface")) or loaded.endswith(
                    "examples.transformers_tiny"
                ):
                    monkeypatch.delitem(sys.modules, loaded)

    yield hide
    for name in set(sys.modules) - before:
        if name.startswith(_FRESH):
            del sys.modules[name]


@pytest.mark.parametrize(
    ("hidden", "source", "package"),
    [
        pytest.param("transformers", "import transformers\n", "transformers", id="transformers"),
        pytest.param("accelerate", "import accelerate\n", "accelerate", id="accelerate"),
        # Ray's module imports without transformers: what the loop took from it is looked at
        pytest.param(
            "transformers",
            "from ray.train.huggingface.transformers import RayTrainReportCallback, prepare_trainer\n",
            "transformers",
            id="ray-names",
        ),
        pytest.param("transformers", "import ray.train.huggingface.transformers\n", "transformers", id="ray-module"),
        # transformers imports without accelerate, and its Trainer needs it only once built, on the workers
        pytest.param(
            "accelerate",
            "from ray.train.huggingface.transformers import RayTrainReportCallback\n",
            "accelerate",
            id="ray-without-accelerate",
        ),
    ],
)
def test_a_loop_file_that_needs_the_extra_without_it_names_the_extra(
    tmp_path: Path, hide: Callable[..., None], hidden: str, source: str, package: str
) -> None:
    from hpsearch.spec import load_spec
    from hpsearch.spec._imports import load_callable

    if hidden == "accelerate" and "ray" in source:
        pytest.importorskip("transformers", reason=f"the transformers extra: {INSTALL}")
    hide(hidden)
    loop = tmp_path / "loop.py"
    loop.write_text(source + "\n\ndef train_loop(config):\n    pass\n")
    with pytest.raises(ValueError) as err:
        load_callable(f"{loop}:train_loop")
    assert str(err.value) == f"importing {loop} failed: needs the {package} package, which is not installed: {INSTALL}"
    with pytest.raises(
        ValueError,
        match=rf"trainable: importing .* needs the {package} package, which is not installed: pip install \"hpsearch\[transformers\]\"",
    ):
        load_spec({**yaml.safe_load(SPEC.read_text()), "trainable": f"{loop}:train_loop"})


def test_a_loop_that_does_not_use_rays_module_is_not_refused_for_it(tmp_path: Path, hide: Callable[..., None]) -> None:
    """Another loop loaded in a process that has Ray's module (caught without transformers) loads as before."""
    from hpsearch.spec._imports import load_callable

    hide("transformers")
    import ray.train.huggingface.transformers  # noqa: F401 - in sys.modules, as after an earlier loop's load

    loop = tmp_path / "plain.py"
    loop.write_text("import ray.train\n\n\ndef train_loop(config):\n    pass\n")
    assert load_callable(f"{loop}:train_loop").__name__ == "train_loop"


def test_the_shipped_spec_without_transformers_exits_2_with_the_pip_line(
    tmp_path: Path, hide: Callable[..., None], capsys: pytest.CaptureFixture[str]
) -> None:
    hide("transformers")
    out = tmp_path / "out"
    assert main(["run", str(SPEC), "--set", f"storage_path={out}"]) == 2
    err = capsys.readouterr().err
    assert (
        "trainable: cannot import module 'hpsearch.examples.transformers_tiny': "
        f"needs the transformers package, which is not installed: {INSTALL}"
    ) in err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.fixture(scope="module")
def search(_ray_session, tmp_path_factory) -> dict[str, Any]:
    """The search cut by its target, then resumed; what the history held at the cut. Run once for the module.

    Module-scoped, so it checks for left-over placement groups itself, as ``ray_cluster`` does per test.
    """
    pytest.importorskip("transformers", reason=f"the transformers extra: {INSTALL}")
    import hpsearch

    before = set(_ray_session.util.placement_group_table())
    tmp_path = tmp_path_factory.mktemp("transformers")
    overrides = {
        "storage_path": str(tmp_path),
        "num_samples": "1",
        "search_space.learning_rate": f"{{type: grid, values: [{GOOD_LR}, {BAD_LR}]}}",
        "search_space.weight_decay": "0.01",
        "search_space.epochs": str(EPOCHS),
        "searcher": "{type: random, seed: 0}",
        "scheduler": "{type: fifo}",
        "resources.driver_cpus": "0.05",
        "budget": f"{{target: {{eval_loss: {TARGET}}}}}",
    }
    sets = [arg for key, value in overrides.items() for arg in ("--set", f"{key}={value}")]
    started = time.monotonic()
    assert main(["run", str(SPEC), *sets]) == 0
    exp = tmp_path / "transformers-tiny"
    cut = {tid: files.read_history(exp, tid) for tid in hpsearch.load_results(exp).trials["trial_id"]}
    summary = files.read_summary(exp)
    assert main(["resume", str(exp), "--set", "budget.target.eval_loss=1.0e-9"]) == 0
    print(f"transformers search + resume: {time.monotonic() - started:.1f} s")
    yield {"exp": exp, "cut": cut, "cut_summary": summary}
    left = placement_groups_left(_ray_session, before)
    assert not left, f"placement groups left behind by the transformers search: {left}"


@pytest.mark.ray
@pytest.mark.timeout(600)  # the first Ray test runs the search and its resume (the fixture)
def test_the_eval_loss_ranks_the_trials_and_every_trial_finishes(search) -> None:
    import hpsearch

    assert search["cut_summary"]["ended_by"] == "target"
    results = hpsearch.load_results(search["exp"])
    assert results.metric == "eval_loss"
    trials = results.trials.sort_values("rank")
    assert list(trials["status"]) == ["finished", "finished"], trials[["learning_rate", "status", "error"]]
    assert list(trials["learning_rate"]) == [GOOD_LR, BAD_LR]  # the better learning rate ranks first
    for trial in trials.to_dict("records"):
        history = results.history[results.history["trial_id"] == trial["trial_id"]].sort_values("iteration")
        # What RayTrainReportCallback reports at every save: the Trainer's logs so far, its epoch (a float,
        # from 1.0) and step. The history's learning_rate is the Trainer's logged one (decaying), not the config's.
        assert history["epoch"].tolist() == [float(e) for e in range(1, EPOCHS + 1)]
        assert history["iteration"].tolist() == list(range(1, EPOCHS + 1))
        assert {"eval_loss", "loss", "learning_rate", "step"} <= set(history.columns)
        assert history["step"].is_monotonic_increasing and history["step"].iloc[0] > 0
        assert history["learning_rate"].iloc[0] < trial["learning_rate"]  # linear decay from the config's
        assert trial["best"] == pytest.approx(history["eval_loss"].min())
        assert trial["last"] == pytest.approx(history["eval_loss"].iloc[-1])
    good, bad = trials.to_dict("records")
    assert good["best"] < TARGET < bad["best"]


@pytest.mark.ray
def test_the_checkpoints_are_the_trainers_and_hold_the_model_that_logged_the_metric(search) -> None:
    import torch
    from ray.train.huggingface.transformers import RayTrainReportCallback
    from transformers import AutoModelForSequenceClassification, BertForSequenceClassification

    import hpsearch
    from hpsearch.examples.transformers_tiny import N_EVAL, MarkerDataset

    results = hpsearch.load_results(search["exp"])
    data = MarkerDataset(N_EVAL, seed=1)
    for trial in results.trials.to_dict("records"):
        history = results.history[results.history["trial_id"] == trial["trial_id"]].sort_values("iteration")
        assert history["checkpoint"].notna().all()  # every epoch's report carries one
        assert Path(trial["best_checkpoint"]).is_dir()
        ckpt = Path(history["checkpoint"].iloc[-1]) / RayTrainReportCallback.CHECKPOINT_NAME
        # rank 0's model, optimizer and state, and each worker's RNG state, merged by Ray
        for name in ("model.safetensors", "optimizer.pt", "trainer_state.json", "rng_state_0.pth", "rng_state_1.pth"):
            assert (ckpt / name).is_file(), sorted(p.name for p in ckpt.iterdir())
        state = json.loads((ckpt / "trainer_state.json").read_text())
        assert state["global_step"] == history["step"].iloc[-1] and state["epoch"] == EPOCHS
        # The last checkpoint's model, evaluated on the whole eval set, gives the eval_loss the Trainer logged.
        model = BertForSequenceClassification.from_pretrained(ckpt).eval()
        with torch.no_grad():
            loss = model(input_ids=data.input_ids, attention_mask=torch.ones_like(data.input_ids), labels=data.labels)
        assert loss.loss.item() == pytest.approx(history["eval_loss"].iloc[-1], rel=1e-3)
        # hpsearch.load_model: the trial's best checkpoint, through the model class's from_pretrained, in one call
        best = hpsearch.load_model(results, AutoModelForSequenceClassification, trial_id=trial["trial_id"])
        assert isinstance(best, BertForSequenceClassification) and not best.training
        with torch.no_grad():
            loss = best(input_ids=data.input_ids, attention_mask=torch.ones_like(data.input_ids), labels=data.labels)
        at_best = history[history["checkpoint"] == trial["best_checkpoint"]]  # the report it came with
        assert loss.loss.item() == pytest.approx(at_best["eval_loss"].item(), rel=1e-3)


@pytest.mark.ray
def test_resume_continues_each_cut_trial_from_its_checkpoint(search) -> None:
    exp, cut = search["exp"], search["cut"]
    resumed = 0
    for trial_id, before in cut.items():
        after = files.read_history(exp, trial_id)[len(before) :]
        checkpointed = [int(r["epoch"]) for r in before if r.get("checkpoint_path")]
        if not after:
            assert [r["epoch"] for r in before] == list(range(1, EPOCHS + 1))  # it had ended before the cut
            continue
        resumed += 1
        # The first epoch after the resume is the one after the checkpoint: nothing trained twice, nothing skipped.
        first = checkpointed[-1] + 1 if checkpointed else 1
        assert [r["epoch"] for r in after] == list(range(first, EPOCHS + 1))
    assert resumed >= 1, {tid: [r["epoch"] for r in h] for tid, h in cut.items()}
