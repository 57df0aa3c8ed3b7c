"""hpsearch.load_model: the best trial's checkpoint back in its model, in one call, whatever wrote it.

The experiment is written with the project's writers (tests/fake_experiment.py); each checkpoint's
content with its framework's own writer: Lightning's ``Trainer.save_checkpoint`` (what Ray's
``RayTrainReportCallback`` calls), Hugging Face's ``save_pretrained`` (what the ``Trainer`` saves and
Ray's callback copies as ``checkpoint/``), and ``torch.save(model.state_dict())`` as Ray Train's guides
write a plain checkpoint. ``hpsearch.train``'s own format is loaded in tests/train/test_train_helpers.py,
from checkpoints a real run wrote; Lightning's again in tests/train/test_lightning.py.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from fake_experiment import FakeTrial, standard_trials, write_experiment

import hpsearch
from hpsearch import analysis as an
from hpsearch.errors import ResultsError


@pytest.fixture
def results(tmp_path: Path) -> an.Results:
    return an.load_results(write_experiment(tmp_path / "fake", standard_trials()))


def _best_folder(results: an.Results) -> Path:
    assert results.best is not None
    return Path(results.best["best_checkpoint"])


def test_a_plain_state_dict_loads_into_the_model_built_as_the_loop_built_it(results: an.Results) -> None:
    torch.manual_seed(1)
    trained = torch.nn.Linear(4, 2)
    torch.save(trained.state_dict(), _best_folder(results) / "model.pt")
    fresh = torch.nn.Linear(4, 2)
    loaded = hpsearch.load_model(results, fresh)
    assert loaded is fresh and not loaded.training
    assert torch.equal(loaded.weight, trained.weight) and torch.equal(loaded.bias, trained.bias)
    # the folder works as well as the results read from it
    again = hpsearch.load_model(results.experiment_dir, torch.nn.Linear(4, 2))
    assert torch.equal(again.weight, trained.weight)


def test_another_trial_or_a_folder_can_be_named(results: an.Results, tmp_path: Path) -> None:
    first = results.trials.set_index("trial_id").loc["aaaa0001", "best_checkpoint"]
    model = torch.nn.Linear(3, 1)
    torch.save({"epoch": 4, "model_state_dict": model.state_dict()}, Path(first) / "state.pth")
    assert torch.equal(hpsearch.load_model(results, torch.nn.Linear(3, 1), trial_id="aaaa0001").weight, model.weight)
    assert torch.equal(hpsearch.load_model(None, torch.nn.Linear(3, 1), checkpoint=first).weight, model.weight)


def test_a_lightning_checkpoint_loads_through_the_module_class(results: an.Results) -> None:
    pl = pytest.importorskip("lightning.pytorch")
    from torch.utils.data import DataLoader, TensorDataset

    from hpsearch.examples.lightning_digits import DigitsClassifier

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    model = DigitsClassifier(lr=0.02, hidden=32)
    data = DataLoader(TensorDataset(torch.randn(64, 64), torch.randint(0, 10, (64,))), batch_size=32)
    trainer = pl.Trainer(
        max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False
    )
    trainer.fit(model, data)
    trainer.save_checkpoint(_best_folder(results) / "checkpoint.ckpt")

    loaded = hpsearch.load_model(results, DigitsClassifier)
    assert isinstance(loaded, DigitsClassifier) and not loaded.training
    assert loaded.hparams["lr"] == 0.02 and loaded.hparams["hidden"] == 32  # rebuilt from its hyperparameters
    x = torch.randn(5, 64)
    model.eval()
    assert torch.equal(loaded(x), model(x))
    with pytest.raises(ResultsError, match=r"is Lightning's \(checkpoint.ckpt\): pass the LightningModule class"):
        hpsearch.load_model(results, "DigitsClassifier")


def test_a_hugging_face_checkpoint_loads_through_from_pretrained(results: an.Results) -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, num_labels=2
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config).eval()
    model.save_pretrained(_best_folder(results) / "checkpoint")

    loaded = hpsearch.load_model(results, transformers.AutoModelForSequenceClassification)
    assert isinstance(loaded, transformers.BertForSequenceClassification) and not loaded.training
    ids = torch.randint(0, 32, (2, 6))
    assert torch.allclose(loaded(input_ids=ids).logits, model(input_ids=ids).logits)
    with pytest.raises(ResultsError, match=r"Hugging Face Trainer's \(checkpoint/\): pass the model class"):
        hpsearch.load_model(results, model)


def test_what_cannot_be_loaded_is_said(results: an.Results, tmp_path: Path) -> None:
    with pytest.raises(
        ResultsError, match=r"holds nothing: not one this can read \(hpsearch.train's hpsearch_state.pt"
    ):
        hpsearch.load_model(results, torch.nn.Linear(1, 1))  # the fake checkpoint folder is empty
    torch.save(torch.nn.Linear(1, 1).state_dict(), _best_folder(results) / "model.pt")
    with pytest.raises(ResultsError, match=r"holds a state_dict: pass the model built as the loop built it"):
        hpsearch.load_model(results, torch.nn.Linear)
    with pytest.raises(ResultsError, match=r"no trial 'nope'; its trials: aaaa0001, aaaa0002"):
        hpsearch.load_model(results, torch.nn.Linear(1, 1), trial_id="nope")
    with pytest.raises(ResultsError, match=r"is not a folder on this machine"):
        hpsearch.load_model(results, torch.nn.Linear(1, 1), checkpoint=tmp_path / "gone")

    bare = write_experiment(tmp_path / "bare", [FakeTrial("bbbb0001", {"lr": 0.1}, [0.5], checkpoint=False)])
    with pytest.raises(ResultsError, match=r"trial bbbb0001 has no checkpoint on disk: its loop reported without one"):
        hpsearch.load_model(bare, torch.nn.Linear(1, 1))
