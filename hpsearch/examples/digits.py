"""Ray Train per-worker training loop for an MLP on scikit-learn's digits data.

`train_loop` runs inside every worker of a
``ray.train.torch.TorchTrainer(train_loop, train_loop_config=config, ...)``.
It uses the bundled 8x8 digits dataset (no download), scaled to [0, 1], with a
fixed stratified 80/20 train/validation split (``random_state=0``) that is the
same on every worker and independent of ``seed``. The training split is
sharded across workers by ``prepare_data_loader``; every worker evaluates the
whole validation split with its (DDP-synchronised, hence identical) model.

Each epoch every rank reports, through :func:`hpsearch.train.report`, the metrics
``epoch`` (1-based), ``train_loss`` (this rank's mean training loss), ``val_loss``,
``val_acc``, ``n_params`` and ``lr_now`` (the learning rate the epoch trained with); on checkpoint epochs rank 0 saves the model, the optimizer, the
epoch and the random states (under ``parallel: fsdp`` every rank also saves its own shard
of the model and optimizer). The loop resumes from the latest checkpoint with
:func:`hpsearch.train.restore`, continuing exactly where it stopped.

Config keys (missing keys take the default, unknown keys are ignored):
    hidden (int): Width of each hidden layer. Default 128.
    layers (int): Number of hidden layers. Default 2.
    dropout (float): Dropout probability after each hidden layer. Default 0.1.
    lr (float): Learning rate. Default 1e-3.
    weight_decay (float): Weight decay. Default 0.0.
    optimizer (str): ``adamw``, ``adam`` or ``sgd``. Default ``adamw``.
    beta1 (float): Adam's and AdamW's first beta (read only for them). Default 0.9.
    momentum (float): SGD's momentum (read only for sgd). Default 0.0.
    batch_size (int): Per-worker batch size. Default 64.
    epochs (int): Total number of epochs, counting resumed ones. Default 10.
    seed (int): Seed for torch, numpy and ``random`` (model init, dropout).
        Default 0.
    checkpoint_every (int): Save a checkpoint every this many epochs; the
        last epoch is always checkpointed. Default 1.
    threads (int): Torch threads per worker. Default 1: the shipped model is
        too small to gain from more, and workers sharing a machine would only
        contend; give a wide model a worker of several CPUs and as many threads.
    parallel (str): ``ddp`` (the default): ``prepare_model`` wraps the model in
        ``DistributedDataParallel``, every rank holds all of it. ``fsdp``: it is
        wrapped in ``FullyShardedDataParallel`` instead, each rank holding a
        shard of the parameters, gradients and optimizer state (each rank's
        shard is then checkpointed by that rank, see :mod:`hpsearch.train`);
        evaluation runs through the wrapped model (its forward gathers the
        shards). On GPU workers that is ``prepare_model(model,
        parallel_strategy="fsdp")``; on CPU workers Ray's ``prepare_model``
        refuses FSDP (it requires CUDA), so the loop wraps the model itself
        with the device FSDP needs there (``device_id=cpu``; gloo).
    precision (str): ``32`` (the default): float32 throughout. ``bf16``: the
        forward passes and the loss (training and evaluation) run under
        ``torch.autocast`` with bfloat16, on CPU or GPU; the parameters, the
        gradients and the optimizer state stay float32 (bfloat16 needs no loss
        scaling).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import ray.train
import ray.train.torch
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from hpsearch import train as hp

_SPLIT_SEED = 0
_VAL_FRACTION = 0.2
_N_FEATURES, _N_CLASSES = 64, 10  # 8x8 pixels, 10 digits


def _load_split() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return ``(x_train, y_train, x_val, y_val)`` for the fixed split."""
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=_VAL_FRACTION, stratify=y, random_state=_SPLIT_SEED)
    return (
        torch.from_numpy(x_tr),
        torch.from_numpy(y_tr),
        torch.from_numpy(x_va),
        torch.from_numpy(y_va),
    )


def _build_model(n_in: int, n_out: int, hidden: int, layers: int, dropout: float) -> nn.Module:
    """Build an MLP with ``layers`` hidden layers of width ``hidden``."""
    blocks: list[nn.Module] = []
    width = n_in
    for _ in range(layers):
        blocks += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
        width = hidden
    blocks.append(nn.Linear(width, n_out))
    return nn.Sequential(*blocks)


def build_model(config: Mapping[str, Any]) -> nn.Module:
    """The MLP :func:`train_loop` trains for this config (``hidden``, ``layers``, ``dropout``; same defaults).

    A trial's config (``results.best.to_dict()``, say) rebuilds its model, for :func:`hpsearch.load_model`.
    """
    return _build_model(
        _N_FEATURES,
        _N_CLASSES,
        int(config.get("hidden", 128)),
        int(config.get("layers", 2)),
        float(config.get("dropout", 0.1)),
    )


def validation_split() -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed validation split every trial evaluates on: ``(x_val, y_val)``."""
    _, _, x_va, y_va = _load_split()
    return x_va, y_va


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _optimizer(config: dict[str, Any], model: nn.Module, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """``optimizer``: adamw (the default), adam or sgd; ``beta1`` (adam, adamw: 0.9) and ``momentum``
    (sgd: 0.0) are read only for the optimizer that has them (conditional parameters are absent otherwise)."""
    kind = str(config.get("optimizer", "adamw"))
    if kind == "sgd":
        return torch.optim.SGD(
            model.parameters(), lr=lr, momentum=float(config.get("momentum", 0.0)), weight_decay=weight_decay
        )
    betas = (float(config.get("beta1", 0.9)), 0.999)
    if kind == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)
    if kind != "adamw":
        raise ValueError(f"optimizer must be 'adamw', 'adam' or 'sgd', got {kind!r}")
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)


def _prepare_model(model: nn.Module, parallel: str, device: torch.device) -> nn.Module:
    """``parallel``: ``ddp`` wraps the model as ``prepare_model`` does by default; ``fsdp`` shards it (FSDP)."""
    if parallel == "ddp":
        return ray.train.torch.prepare_model(model)
    if parallel != "fsdp":
        raise ValueError(f"parallel must be 'ddp' or 'fsdp', got {parallel!r}")
    if device.type != "cpu":
        return ray.train.torch.prepare_model(model, parallel_strategy="fsdp")
    # On CPU, Ray's prepare_model raises "FSDP is only available with GPU-enabled training" whenever CUDA is
    # unavailable, and FullyShardedDataParallel without a device_id needs an accelerator; with device_id=cpu
    # it shards over gloo. So: moved to the device by prepare_model, wrapped here, as prepare_model would.
    model = ray.train.torch.prepare_model(model, parallel_strategy=None)
    if ray.train.get_context().get_world_size() == 1:
        return model  # as prepare_model: nothing to shard across
    from torch.distributed.fsdp import FullyShardedDataParallel  # lazy: a 2-3 s import, only for parallel: fsdp

    return FullyShardedDataParallel(model, device_id=device)


def _autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """``precision``: ``32`` runs as written; ``bf16`` runs the block under bfloat16 autocast."""
    if precision == "32":
        return contextlib.nullcontext()
    if precision != "bf16":
        raise ValueError(f"precision must be '32' or 'bf16', got {precision!r}")
    return torch.autocast(device.type, dtype=torch.bfloat16)


def train_loop(config: dict[str, Any]) -> None:
    """Train the digits MLP on one Ray Train worker.

    Args:
        config: Hyperparameters; see the module docstring for keys and
            defaults.
    """
    torch.set_num_threads(int(config.get("threads", 1)))

    lr = float(config.get("lr", 1e-3))
    weight_decay = float(config.get("weight_decay", 0.0))
    batch_size = int(config.get("batch_size", 64))
    epochs = int(config.get("epochs", 10))
    seed = int(config.get("seed", 0))
    checkpoint_every = max(1, int(config.get("checkpoint_every", 1)))
    parallel = str(config.get("parallel", "ddp"))
    precision = str(config.get("precision", "32"))

    _seed_everything(seed)
    device = ray.train.torch.get_device()

    x_tr, y_tr, x_va, y_va = _load_split()
    x_va, y_va = x_va.to(device), y_va.to(device)
    net = build_model(config)
    # Counted before wrapping: FSDP's ranks each hold a (flattened, padded) shard of the parameters.
    n_params = sum(p.numel() for p in net.parameters() if p.requires_grad)
    model = _prepare_model(net, parallel, device)
    optimizer = _optimizer(config, model, lr, weight_decay)
    # After prepare_model, so the optimizer's state lands on the model's device. Under pbt/pb2 it may load
    # another trial's checkpoint, and then keeps this config's lr, weight decay, momentum and betas.
    start_epoch = hp.restore(model=model, optimizer=optimizer)  # 1 unless resuming
    loss_fn = nn.CrossEntropyLoss()

    train_loader = ray.train.torch.prepare_data_loader(
        DataLoader(TensorDataset(x_tr, y_tr), batch_size=batch_size, shuffle=True)
    )
    sampler = getattr(train_loader, "sampler", None)

    for epoch in range(start_epoch, epochs + 1):
        if sampler is not None and hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)

        model.train()
        loss_sum, n_seen = 0.0, 0
        for xb, yb in train_loader:
            optimizer.zero_grad()
            with _autocast(precision, device):
                loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(yb)
            n_seen += len(yb)

        # Evaluate the unwrapped module: no DDP collectives, full split. FSDP's unwrapped module holds only
        # this rank's shard: every rank evaluates through the wrapper, whose forward gathers the parameters.
        net = model if parallel == "fsdp" else getattr(model, "module", model)
        net.eval()
        with torch.no_grad(), _autocast(precision, device):
            logits = net(x_va)
            val_loss = loss_fn(logits, y_va).item()
            val_acc = (logits.argmax(dim=1) == y_va).float().mean().item()

        metrics = {
            "train_loss": loss_sum / max(n_seen, 1),
            "val_loss": val_loss,
            "val_acc": val_acc,
            # the model's size, an objective of search_spaces/digits_multi_objective.yaml
            "n_params": n_params,
            # the learning rate this epoch trained with: under pbt it follows the mutations
            "lr_now": optimizer.param_groups[0]["lr"],
        }
        save = epoch % checkpoint_every == 0 or epoch == epochs
        hp.report(metrics, epoch=epoch, model=model, optimizer=optimizer, checkpoint=save)
