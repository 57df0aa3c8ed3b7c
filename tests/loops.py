"""Small per-worker train loops for the integration tests.

Referenced as ``tests/loops.py:<function>`` so hpsearch loads them by file path and
Ray pickles them by value (the test folder is not importable on Ray's workers).
"""

from __future__ import annotations

import time

import ray.train


def rank_report(config: dict) -> None:
    """Each rank reports its own rank: Tune should see the aggregate, not rank 0's value."""
    rank = ray.train.get_context().get_world_rank()
    for epoch in range(1, config.get("epochs", 2) + 1):
        ray.train.report({"score": float(rank), "score_max": float(rank), "epoch": epoch, "tag": f"rank{rank}"})


def quadratic(config: dict) -> None:
    """A fast loss surface with a minimum at x=0.3 that improves with epochs (``sleep_s`` per epoch)."""
    x = config["x"]
    for epoch in range(1, config.get("epochs", 4) + 1):
        time.sleep(config.get("sleep_s", 0.0))
        ray.train.report({"loss": (x - 0.3) ** 2 + 1.0 / epoch, "epoch": epoch})


def maybe_raise(config: dict) -> None:
    """Raises on ``x == "bad"``; reports a constant otherwise."""
    if config["x"] == "bad":
        raise ValueError(f"x={config['x']!r} is not a usable value")
    for epoch in range(1, 3):
        ray.train.report({"loss": 1.0 / epoch, "epoch": epoch})


def killable(config: dict) -> None:
    """Writes each rank's PID, then trains a tiny model, checkpointing every epoch with hpsearch.train."""
    import os
    from pathlib import Path

    import ray.train.torch
    import torch

    from hpsearch import train as hp

    rank = ray.train.get_context().get_world_rank()
    Path(config["pid_dir"], f"rank{rank}.pid").write_text(str(os.getpid()))
    model = ray.train.torch.prepare_model(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    start = hp.restore(model=model, optimizer=optimizer)
    for epoch in range(start, config["epochs"] + 1):
        time.sleep(config.get("sleep_s", 0.0))
        hp.report({"loss": 1.0 / epoch, "started_at": start}, epoch=epoch, model=model, optimizer=optimizer)


def budget_loop(config: dict) -> None:
    """Reports ``loss`` and ``score`` (= the epoch) each epoch, each with a checkpoint from rank 0.

    Continues from its latest checkpoint (``resumed_from``: the first epoch of this run);
    raises on ``x == "bad"``, before any report. Fed a ``train`` dataset (the spec's
    ``datasets``), it reads its shard each epoch and reports the ``rows`` it held.
    """
    import json
    import os
    import tempfile

    if config["x"] == "bad":
        raise ValueError(f"x={config['x']!r} is not a usable value")
    start = 1
    found = ray.train.get_checkpoint()
    if found is not None:
        with found.as_directory() as folder, open(os.path.join(folder, "state.json")) as f:
            start = json.load(f)["epoch"] + 1
    rank = ray.train.get_context().get_world_rank()
    try:
        shard = ray.train.get_dataset_shard("train")
    except KeyError:  # a search without datasets
        shard = None
    for epoch in range(start, config["epochs"] + 1):
        time.sleep(config.get("sleep_s", 0.0))
        metrics = {
            "loss": float(config["x"]) + 1.0 / epoch,
            "score": float(epoch),
            "epoch": epoch,
            "resumed_from": start,
        }
        if shard is not None:
            metrics["rows"] = sum(len(batch["x"]) for batch in shard.iter_batches(batch_size=16))
        if rank != 0:
            ray.train.report(metrics)
            continue
        with tempfile.TemporaryDirectory() as folder:
            with open(os.path.join(folder, "state.json"), "w") as f:
                json.dump({"epoch": epoch}, f)
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(folder))


def fails_after_a_good_epoch(config: dict) -> None:
    """Reports a good loss at epoch 1; then, for ``x > 0.5``, raises as an out-of-memory crash would.
    Each report also holds the model's ``size`` (``100 x``), for a constraint."""
    x = config["x"]
    ray.train.report({"loss": 0.01 * x if x > 0.5 else (x - 0.3) ** 2 + 0.5, "size": 100 * x, "epoch": 1})
    if x > 0.5:
        raise MemoryError(f"x={x:.3f}: out of memory in epoch 2 (a test's stand-in for a CUDA OOM)")
    ray.train.report({"loss": (x - 0.3) ** 2 + 0.25, "size": 100 * x, "epoch": 2})


def fails_the_same_way_or_dies(config: dict) -> None:
    """Reports epoch 1, then in epoch 2: ``x == "bad"`` raises the same ``ValueError`` every time (a bug);
    ``x == "dies"`` ends its worker process, as an out-of-memory kill does, in its first two attempts (counted
    in ``config["scratch"]``), and trains on in the third. No checkpoints: each attempt starts at epoch 1."""
    import os
    from pathlib import Path

    ray.train.report({"loss": 1.0, "epoch": 1})
    if config["x"] == "bad":
        raise ValueError(f"batch {int(time.time() * 1000) % 1000} holds a NaN label")  # the number differs each time
    attempts = Path(config["scratch"]) / "attempts"
    attempts.mkdir(parents=True, exist_ok=True)
    (attempts / f"{os.getpid()}").touch()
    if len(list(attempts.iterdir())) <= 2:
        os._exit(1)
    for epoch in (2, 3):
        ray.train.report({"loss": 1.0 / epoch, "epoch": epoch})


def big_checkpoints(config: dict) -> None:
    """Saves an 8 MB checkpoint every epoch (``epochs``, default 3): on a small disk, the storage fills up."""
    import os
    import tempfile

    from ray.train import Checkpoint

    for epoch in range(1, config.get("epochs", 3) + 1):
        with tempfile.TemporaryDirectory() as folder:
            with open(os.path.join(folder, "weights.bin"), "wb") as f:
                f.write(os.urandom(8 << 20))
            ray.train.report({"loss": 1.0 / epoch, "epoch": epoch}, checkpoint=Checkpoint.from_directory(folder))
