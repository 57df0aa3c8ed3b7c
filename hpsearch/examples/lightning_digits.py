"""A PyTorch Lightning train loop, written the way Ray Train's Lightning guide writes it, searched unchanged.

The same digits data and MLP as :mod:`hpsearch.examples.digits` (scikit-learn's bundled 8x8 digits,
no download; the fixed stratified 80/20 split), as a :class:`DigitsClassifier` ``LightningModule``.
:func:`train_loop` runs inside every worker of the trial's ``TorchTrainer``: it builds a
``lightning.pytorch.Trainer`` with Ray's strategy, environment and report callback
(``ray.train.lightning``), passes it through ``prepare_trainer``, and resumes from Ray's checkpoint
as the guide does. Nothing in it knows about hpsearch.

What reaches the search is what ``RayTrainReportCallback`` reports at the end of every training epoch
(after that epoch's validation): every metric the module logged with ``self.log`` (``train_loss``,
``val_loss``, ``val_acc``, averaged across the workers: ``sync_dist=True``), plus ``epoch``
(Lightning's ``current_epoch``, counted from 0) and ``step`` (the optimizer steps so far), with a
checkpoint: a folder holding Lightning's ``checkpoint.ckpt`` (``RayTrainReportCallback.CHECKPOINT_NAME``).
The spec's ``metric`` is a name the module logs: ``val_loss`` in search_spaces/lightning_digits.yaml.

Needs the ``lightning`` extra (``pip install "hpsearch[lightning]"``).

Config keys (missing keys take the default, unknown keys are ignored):
    lr (float): AdamW's learning rate. Default 1e-3.
    hidden (int): Width of each hidden layer. Default 64.
    layers (int): Number of hidden layers. Default 1.
    dropout (float): Dropout probability after each hidden layer. Default 0.0.
    batch_size (int): Per-worker batch size. Default 32.
    epochs (int): Lightning's ``max_epochs``, counting resumed ones. Default 5.
    seed (int): ``lightning.pytorch.seed_everything`` (model init, dropout, shuffling). Default 0.
    threads (int): Torch threads per worker. Default 1.
    strategy (str): ``ddp`` (the default): Ray's ``RayDDPStrategy``. ``fsdp``: Ray's ``RayFSDPStrategy``,
        with ``state_dict_type="sharded"``: the model and optimizer are sharded across the workers, and each
        checkpoint is a folder ``checkpoint.ckpt/`` of ``torch.distributed.checkpoint`` shards (one file per
        worker, and ``meta.pt``), which ``trainer.fit(ckpt_path=...)`` resumes from;
        ``python -m lightning.pytorch.utilities.consolidate_checkpoint`` turns it into one file for
        ``load_from_checkpoint``. (Lightning's ``full`` checkpoint, gathered to rank 0 with
        ``offload_to_cpu``, crashes FSDP on CPU.) On CPU workers :class:`DigitsClassifier` wraps its MLP
        in FSDP itself, in ``configure_model``: Lightning's own wrapping passes FSDP no CPU device, which
        FSDP then refuses.
    precision (str): Lightning's ``precision``. Default ``32-true``. ``bf16-mixed`` computes in bfloat16:
        under ``ddp`` through ``torch.autocast`` (on CPU too); under ``fsdp`` through FSDP's
        ``MixedPrecision`` (the parameters are cast to bfloat16 for each forward and backward, the
        sharded float32 copy is what the optimizer updates).
"""

from __future__ import annotations

import os
from typing import Any

import lightning.pytorch as pl
import ray.train
import torch
from lightning.pytorch.strategies import FSDPStrategy
from ray.train.lightning import (
    RayDDPStrategy,
    RayFSDPStrategy,
    RayLightningEnvironment,
    RayTrainReportCallback,
    prepare_trainer,
)
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from hpsearch.examples.digits import _build_model, _load_split

__all__ = ["DigitsClassifier", "dataloaders", "train_loop"]

_N_FEATURES = 64  # 8x8 pixels
_N_CLASSES = 10


class DigitsClassifier(pl.LightningModule):
    """The digits MLP of :mod:`hpsearch.examples.digits` as a ``LightningModule``.

    Its hyperparameters are saved in Lightning's checkpoint (``save_hyperparameters``), so
    ``DigitsClassifier.load_from_checkpoint(path)`` rebuilds the trained model.
    """

    def __init__(self, lr: float = 1e-3, hidden: int = 64, layers: int = 1, dropout: float = 0.0) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.lr = lr
        self.model = _build_model(_N_FEATURES, _N_CLASSES, hidden, layers, dropout)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)  # type: ignore[no-any-return]  # nn.Module.__call__ is untyped

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = self.loss_fn(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss  # type: ignore[no-any-return]  # nn.Module.__call__ is untyped

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        # Averaged over the epoch's batches (weighted by their size) and across the workers.
        self.log("val_loss", self.loss_fn(logits, y), sync_dist=True)
        self.log("val_acc", (logits.argmax(dim=1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=self.lr)

    def configure_model(self) -> None:
        """Under an FSDP strategy on CPU, wrap the MLP in FSDP here, as the strategy would have.

        Lightning's ``FSDPStrategy`` wraps with ``device_id=root_device.index``, ``None`` on CPU, and
        ``FullyShardedDataParallel`` without a device refuses a machine with no accelerator; given
        ``device_id=cpu`` it shards over gloo. The strategy then finds the model wrapped and leaves it.
        Does nothing under any other strategy, on GPU, or without a trainer (``load_from_checkpoint`` calls
        this hook too).
        """
        try:
            strategy = self.trainer.strategy
        except RuntimeError:  # "is not attached to a `Trainer`"
            return
        if not isinstance(strategy, FSDPStrategy) or strategy.root_device.type != "cpu":
            return
        from torch.distributed.fsdp import FullyShardedDataParallel  # lazy: a 2-3 s import, only for FSDP

        if isinstance(self.model, FullyShardedDataParallel):
            return
        self.model = FullyShardedDataParallel(
            self.model,
            cpu_offload=strategy.cpu_offload,
            mixed_precision=strategy.mixed_precision_config,
            sharding_strategy=strategy.sharding_strategy,
            device_id=strategy.root_device,
            **strategy.kwargs,
        )


def dataloaders(batch_size: int) -> tuple[DataLoader[Any], DataLoader[Any]]:
    """The training and validation loaders of the fixed split (Lightning shards both across the workers)."""
    x_tr, y_tr, x_va, y_va = _load_split()
    train = DataLoader(TensorDataset(x_tr, y_tr), batch_size=batch_size, shuffle=True)
    val = DataLoader(TensorDataset(x_va, y_va), batch_size=256)
    return train, val


def train_loop(config: dict[str, Any]) -> None:
    """Train :class:`DigitsClassifier` on one Ray Train worker, as Ray's Lightning guide does.

    Args:
        config: Hyperparameters; see the module docstring for keys and defaults.
    """
    torch.set_num_threads(int(config.get("threads", 1)))
    pl.seed_everything(int(config.get("seed", 0)), workers=True, verbose=False)

    model = DigitsClassifier(
        lr=float(config.get("lr", 1e-3)),
        hidden=int(config.get("hidden", 64)),
        layers=int(config.get("layers", 1)),
        dropout=float(config.get("dropout", 0.0)),
    )
    train_loader, val_loader = dataloaders(int(config.get("batch_size", 32)))

    strategy = str(config.get("strategy", "ddp"))
    if strategy not in ("ddp", "fsdp"):
        raise ValueError(f"strategy must be 'ddp' or 'fsdp', got {strategy!r}")

    trainer = pl.Trainer(
        devices="auto",
        accelerator="cpu",  # the shipped spec's workers have no GPU; Ray's guide writes "auto" for GPU workers
        strategy=(
            RayDDPStrategy()  # type: ignore[no-untyped-call]  # Ray's __init__ has no annotations
            if strategy == "ddp"
            else RayFSDPStrategy(state_dict_type="sharded")  # type: ignore[no-untyped-call]  # as RayDDPStrategy's
        ),
        precision=str(config.get("precision", "32-true")),  # type: ignore[arg-type]  # Lightning's Literal
        plugins=[RayLightningEnvironment()],  # type: ignore[no-untyped-call]  # as RayDDPStrategy's
        callbacks=[RayTrainReportCallback()],  # reports the logged metrics and a checkpoint every epoch
        enable_progress_bar=False,
        max_epochs=int(config.get("epochs", 5)),
        # RayTrainReportCallback checkpoints and Ray keeps the reports: no second copy in the working directory
        enable_checkpointing=False,
        logger=False,
        enable_model_summary=False,
    )
    trainer = prepare_trainer(trainer)

    checkpoint = ray.train.get_checkpoint()  # set when the trial resumes (or a scheduler restarts it)
    if checkpoint:
        with checkpoint.as_directory() as ckpt_dir:
            ckpt_path = os.path.join(ckpt_dir, RayTrainReportCallback.CHECKPOINT_NAME)
            trainer.fit(model, train_dataloaders=train_loader, val_dataloaders=val_loader, ckpt_path=ckpt_path)
    else:
        trainer.fit(model, train_dataloaders=train_loader, val_dataloaders=val_loader)
