"""The digits example fed by Ray Data: dataset factories and a loop that reads ``get_dataset_shard``.

The same MLP, split and metrics as :mod:`hpsearch.examples.digits`, written the way Ray
Train's documentation writes a Ray Data loop: the data comes from the trainer's
``datasets=`` (hpsearch passes the spec's ``datasets`` section), the training split is
sharded across the workers by Ray (``data.split: [train]``), and every worker reads the whole
validation set.

- :func:`train_set` and :func:`val_set` are the factories the spec names
  (``datasets: {train: hpsearch.examples.digits_data:train_set, ...}``). Each returns a
  ``ray.data.Dataset`` of rows ``{"x": float32[64], "y": int64}``, pixels scaled to [0, 1]
  by a ``map_batches`` step (the "preprocessing" a real pipeline has). With
  ``materialize: once`` hpsearch calls them once per search and every trial reads the same
  blocks.
- :func:`train_loop` reads ``ray.train.get_dataset_shard("train")`` and ``("val")`` with
  ``iter_torch_batches``, reports ``train_loss``, ``val_loss`` and ``val_acc`` every epoch from
  every rank, checkpoints from rank 0 and resumes with :func:`hpsearch.train.restore`.

Unlike the DataLoader example, a run is not repeatable to the last digit: Ray Data hands the
training blocks to the workers as they ask for them, so which rows a worker trains on can differ
from run to run (the shuffle within a worker is seeded).

Config keys: as :mod:`hpsearch.examples.digits` (``hidden``, ``layers``, ``dropout``, ``lr``,
``weight_decay``, ``batch_size``, ``epochs``, ``seed``, ``checkpoint_every``, ``threads``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import ray.data
import ray.train
import ray.train.torch
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

from hpsearch import train as hp
from hpsearch.examples.digits import _build_model, _seed_everything

_N_FEATURES = 64
_N_CLASSES = 10


def _rows(which: str) -> ray.data.Dataset:
    """One side of the example's fixed split, as raw pixel rows (0-16), scaled by a Ray Data step."""
    digits = load_digits()
    x_tr, x_va, y_tr, y_va = train_test_split(
        digits.data.astype(np.float32),
        digits.target.astype(np.int64),
        test_size=0.2,
        stratify=digits.target,
        random_state=0,
    )
    x, y = (x_tr, y_tr) if which == "train" else (x_va, y_va)
    rows = [{"x": features, "y": int(label)} for features, label in zip(x, y, strict=True)]
    return ray.data.from_items(rows).map_batches(_scale, batch_format="numpy")  # type: ignore[arg-type]  # Ray's UDF union type matches no plain function


def _scale(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The preprocessing step: pixels 0-16 -> [0, 1]."""
    return {"x": (batch["x"] / 16.0).astype(np.float32), "y": batch["y"]}


def train_set() -> ray.data.Dataset:
    """The training split (1,437 rows), the dataset the spec names ``train``."""
    return _rows("train")


def val_set() -> ray.data.Dataset:
    """The validation split (360 rows), the dataset the spec names ``val``."""
    return _rows("val")


def train_loop(config: dict[str, Any]) -> None:
    """Train the digits MLP on one Ray Train worker from the trainer's Ray Data datasets."""
    torch.set_num_threads(int(config.get("threads", 1)))
    batch_size = int(config.get("batch_size", 64))
    epochs = int(config.get("epochs", 10))
    checkpoint_every = max(1, int(config.get("checkpoint_every", 1)))
    seed = int(config.get("seed", 0))
    _seed_everything(seed)

    model = ray.train.torch.prepare_model(
        _build_model(
            _N_FEATURES,
            _N_CLASSES,
            int(config.get("hidden", 128)),
            int(config.get("layers", 2)),
            float(config.get("dropout", 0.1)),
        )
    )
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=float(config.get("lr", 1e-3)), weight_decay=float(config.get("weight_decay", 0.0))
    )
    start_epoch = hp.restore(model=model, optimizer=optimizer)
    loss_fn = nn.CrossEntropyLoss()
    train_shard = ray.train.get_dataset_shard("train")  # this worker's part of the split
    val_data = ray.train.get_dataset_shard("val")  # not in data.split: the whole set on every worker
    dtypes = {"x": torch.float32, "y": torch.int64}
    device = ray.train.torch.get_device()

    for epoch in range(start_epoch, epochs + 1):
        model.train()
        loss_sum, n_seen = 0.0, 0
        batches = train_shard.iter_torch_batches(
            batch_size=batch_size,
            dtypes=dtypes,
            device=device,
            local_shuffle_buffer_size=4 * batch_size,
            local_shuffle_seed=seed + epoch,
        )
        for batch in batches:
            optimizer.zero_grad()
            loss = loss_fn(model(batch["x"]), batch["y"])
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(batch["y"])
            n_seen += len(batch["y"])

        net = getattr(model, "module", model)  # the unwrapped module: no DDP collectives in evaluation
        net.eval()
        val_loss_sum, correct, n_val = 0.0, 0, 0
        with torch.no_grad():
            for batch in val_data.iter_torch_batches(batch_size=512, dtypes=dtypes, device=device):
                logits = net(batch["x"])
                val_loss_sum += loss_fn(logits, batch["y"]).item() * len(batch["y"])
                correct += int((logits.argmax(dim=1) == batch["y"]).sum().item())
                n_val += len(batch["y"])
        metrics = {
            "train_loss": loss_sum / max(n_seen, 1),
            "val_loss": val_loss_sum / max(n_val, 1),
            "val_acc": correct / max(n_val, 1),
        }
        save = epoch % checkpoint_every == 0 or epoch == epochs
        hp.report(metrics, epoch=epoch, model=model, optimizer=optimizer, checkpoint=save)
