"""Train loops written for plain Ray Train, the way its documentation writes them.

None of them uses :mod:`hpsearch.train`: they call ``ray.train.get_context()``,
``ray.train.torch.prepare_model``, ``ray.train.report`` and ``Checkpoint.from_directory``
on temporary directories, as Ray Train's guides do. hpsearch must run each unchanged.

Every loop trains a tiny model for real (DDP across the workers) and reports a loss the
config decides: ``(x - 0.3) ** 2 + 1 / epoch``, so a search over ``x`` ranks its trials
by ``|x - 0.3|``. Referenced as ``tests/user_loops.py:<function>`` (Ray pickles them by
value; the test folder is not importable on Ray's workers); :func:`by_case` runs the
loop its config names, so that one search can try several of them.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import numpy as np
import ray.train
import ray.train.torch
import torch
from ray.train import Checkpoint


def _setup(config: dict[str, Any]) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = ray.train.torch.prepare_model(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config.get("lr", 0.01))
    return model, optimizer


def _train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> torch.Tensor:
    """One real optimisation step (gradients all-reduced across the workers by DDP)."""
    inputs = torch.randn(8, 4)
    loss = torch.nn.functional.mse_loss(model(inputs), inputs.sum(dim=1, keepdim=True))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


def _loss(config: dict[str, Any], epoch: int) -> float:
    return (config["x"] - 0.3) ** 2 + 1.0 / epoch


def every_rank_checkpoint(config: dict[str, Any]) -> None:
    """Every rank saves its own file into its own temporary directory and reports it."""
    rank = ray.train.get_context().get_world_rank()
    model, optimizer = _setup(config)
    for epoch in range(1, config.get("epochs", 2) + 1):
        train_loss = _train_step(model, optimizer)
        metrics = {"loss": _loss(config, epoch), "train_loss": train_loss.item(), "epoch": epoch}
        with tempfile.TemporaryDirectory() as folder:
            torch.save(
                {"model": model.state_dict(), "epoch": epoch},
                os.path.join(folder, f"model-rank{rank}.pt"),
            )
            ray.train.report(metrics, checkpoint=Checkpoint.from_directory(folder))


def minimal_loop(config: dict[str, Any]) -> None:
    """The smallest loop: ``config.get(key, default)`` for the keys the search does not set, no ``epoch`` key.

    hpsearch numbers its reports (``epoch`` 1, 2, ...) for the schedulers.
    """
    epochs = config.get("epochs", 2)
    batches = config.get("batches_per_epoch", 2)
    model, optimizer = _setup(config)  # lr: config.get("lr", 0.01)
    for epoch in range(1, epochs + 1):
        for _ in range(batches):
            _train_step(model, optimizer)
        ray.train.report({"loss": _loss(config, epoch), "lr": config.get("lr", 0.01)})


def rank0_metric(config: dict[str, Any]) -> None:
    """Only rank 0 computes the validation metric; the other ranks report ``{}`` (the barrier needs them)."""
    rank = ray.train.get_context().get_world_rank()
    model, optimizer = _setup(config)
    for epoch in range(1, config["epochs"] + 1):
        _train_step(model, optimizer)
        if rank == 0:
            with tempfile.TemporaryDirectory() as folder:
                torch.save(model.module.state_dict(), os.path.join(folder, "model.pt"))  # DDP keeps it in .module
                ray.train.report(
                    {"loss": _loss(config, epoch), "epoch": epoch}, checkpoint=Checkpoint.from_directory(folder)
                )
        else:
            ray.train.report({})


def numpy_metrics(config: dict[str, Any]) -> None:
    """Metrics as NumPy scalars (float32, float64, int64, bool_), with a checkpoint each epoch."""
    model, optimizer = _setup(config)
    seen = np.int64(0)
    for epoch in range(1, config["epochs"] + 1):
        _train_step(model, optimizer)
        seen += 8
        losses = np.array([_loss(config, epoch)], dtype=np.float32)
        metrics = {
            "loss": np.float64(_loss(config, epoch)),
            "loss32": losses.mean(),  # np.float32
            "samples": seen,  # np.int64
            "improving": np.bool_(epoch > 1),
            "epoch": np.int64(epoch),
        }
        with tempfile.TemporaryDirectory() as folder:
            torch.save(model.state_dict(), os.path.join(folder, "model.pt"))
            ray.train.report(metrics, checkpoint=Checkpoint.from_directory(folder))


def tensor_metrics(config: dict[str, Any]) -> None:
    """Metrics as 0-d torch tensors (the loss straight from the criterion), with a checkpoint each epoch."""
    model, optimizer = _setup(config)
    for epoch in range(1, config["epochs"] + 1):
        train_loss = _train_step(model, optimizer)
        loss = (torch.tensor(config["x"]) - 0.3) ** 2 + 1.0 / epoch  # a 0-d tensor
        metrics = {"loss": loss, "train_loss": train_loss, "epoch": torch.tensor(epoch)}
        with tempfile.TemporaryDirectory() as folder:
            torch.save(model.state_dict(), os.path.join(folder, "model.pt"))
            ray.train.report(metrics, checkpoint=Checkpoint.from_directory(folder))


def prints_and_returns(config: dict[str, Any]) -> dict[str, Any]:
    """Prints a lot (every step, to stdout and stderr) and returns its final metrics and weights (tensors)."""
    import sys

    model, optimizer = _setup(config)
    loss = float("nan")
    for epoch in range(1, config["epochs"] + 1):
        for step in range(config.get("lines_per_epoch", 5000)):
            print(f"epoch {epoch} step {step}: " + "x" * 100)
        print(f"epoch {epoch} done " * 200, file=sys.stderr, flush=True)
        _train_step(model, optimizer)
        loss = _loss(config, epoch)
        ray.train.report({"loss": loss, "epoch": epoch})
    return {"final_loss": loss, "weights": model.state_dict()}


def misnamed_metric(config: dict[str, Any]) -> None:
    """Reports ``loss`` and ``val_los`` (a typo) where the spec's metric is ``val_loss``.

    Each start of the loop leaves a file in ``config["starts_dir"]``, to count its runs.
    """
    from pathlib import Path

    Path(config["starts_dir"], f"start-{os.getpid()}-{time.monotonic_ns()}").touch()
    model, optimizer = _setup(config)
    for epoch in range(1, config.get("epochs", 2) + 1):
        train_loss = _train_step(model, optimizer)
        ray.train.report({"loss": train_loss.item(), "val_los": _loss(config, epoch), "epoch": epoch})


LOOPS = {
    loop.__name__: loop
    for loop in (every_rank_checkpoint, minimal_loop, rank0_metric, numpy_metrics, tensor_metrics, prints_and_returns)
}


def by_case(config: dict[str, Any]) -> Any:
    """Run the loop ``config["case"]["loop"]`` names, unchanged, on the config with the case's keys in it.

    ``LOOPS``, not ``globals()``: Ray pickles this module by value, with only the names a function uses.
    """
    case = config["case"]
    return LOOPS[case["loop"]]({**config, **case})


def fails_on_exploit(config: dict[str, Any]) -> None:
    """Restores as Ray's guides do (``ray.train.get_checkpoint()``, ``torch.load``, ``load_state_dict``), and
    raises when the checkpoint it is given was saved with another ``lr``: the first run after a population-based
    exploit, which hands the trial a better trial's checkpoint with a mutated learning rate. The error says what
    the loop was given: the checkpoint's epoch and ``lr``, and the ``lr`` its optimizer has after the load."""
    model, optimizer = _setup(config)
    start = 1
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            state = torch.load(os.path.join(folder, "state.pt"))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if state["lr"] != config["lr"]:
            # a test that needs the other trials to wait for this one first says how long to take before failing
            time.sleep(config.get("fail_after_s", 0.0))
            raise RuntimeError(
                f"given a checkpoint of epoch {state['epoch']} saved with lr {state['lr']}; config lr {config['lr']}, "
                f"optimizer lr {optimizer.param_groups[0]['lr']}"
            )
        start = state["epoch"] + 1
    for epoch in range(start, config.get("epochs", 2) + 1):
        _train_step(model, optimizer)
        time.sleep(config.get("sleep_s", 0.0))
        with tempfile.TemporaryDirectory() as folder:
            state = {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "epoch": epoch,
                "lr": config["lr"],
            }
            torch.save(state, os.path.join(folder, "state.pt"))
            ray.train.report(
                {"loss": _loss(config, epoch), "epoch": epoch}, checkpoint=Checkpoint.from_directory(folder)
            )
