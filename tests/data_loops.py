"""Dataset factories and a loop for tests/runtime/test_datasets.py, written as Ray Train's docs write Ray Data loops.

Every factory call appends a line to a log, so a test can count how often the datasets
were built: with ``materialize: once`` the log is named by ``HPSEARCH_TEST_DATA_LOG`` (the
search process's environment: the factory runs there), with ``per_trial`` by the trial's
config key ``data_log`` (the factory runs in each trial driver and gets the config).
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import ray.data
import ray.train

#: Rows in the training set: even, so two workers' equal shards hold all of them.
TRAIN_ROWS = 64
VAL_ROWS = 10


def _log(path: str | None, **event: object) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({**event, "pid": os.getpid(), "t": time.time()}) + "\n")


def _double(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A preprocessing step that runs as Ray Data tasks (1 CPU each, Ray Data's default)."""
    return {"x": batch["x"] * 2.0, "y": batch["y"]}


def train_set() -> ray.data.Dataset:
    """64 rows ``{x: float, y: int}`` doubled by a map_batches step; logs each call."""
    _log(os.environ.get("HPSEARCH_TEST_DATA_LOG"), dataset="train")
    return (
        ray.data.range(TRAIN_ROWS)
        .map_batches(lambda b: {"x": b["id"].astype(np.float32), "y": b["id"] % 2}, batch_format="numpy")
        .map_batches(_double, batch_format="numpy")
    )


def val_set() -> ray.data.Dataset:
    """10 rows, read whole by every worker (not in ``data.split``)."""
    _log(os.environ.get("HPSEARCH_TEST_DATA_LOG"), dataset="val")
    return ray.data.from_items([{"x": float(i), "y": i % 2} for i in range(VAL_ROWS)])


def train_set_for(config: dict) -> ray.data.Dataset:
    """``per_trial``: built by each trial driver, from the trial's config (``scale`` multiplies x)."""
    _log(config.get("data_log"), dataset="train", scale=config.get("scale", 1.0))
    scale = float(config.get("scale", 1.0))
    return ray.data.range(TRAIN_ROWS).map_batches(
        lambda b: {"x": b["id"].astype(np.float32) * scale, "y": b["id"] % 2}, batch_format="numpy"
    )


def not_a_dataset() -> list[int]:
    """A factory returning a list, not a Dataset."""
    return [1, 2, 3]


def raises() -> ray.data.Dataset:
    """A factory that raises."""
    raise RuntimeError("the bucket is gone")


def read_shards(config: dict) -> None:
    """Each epoch: the rows and the sum of x this worker's shard held, and the rows of the whole val set."""
    train_shard = ray.train.get_dataset_shard("train")
    try:
        val = ray.train.get_dataset_shard("val")
    except KeyError:  # a search that feeds only "train"
        val = None
    started = time.perf_counter()
    for epoch in range(1, int(config.get("epochs", 1)) + 1):
        rows, x_sum, first_batch_s = 0, 0.0, None
        for batch in train_shard.iter_torch_batches(batch_size=8):
            if first_batch_s is None:
                first_batch_s = time.perf_counter() - started
            rows += len(batch["x"])
            x_sum += float(batch["x"].sum())
        time.sleep(float(config.get("sleep_s", 0.0)))
        val_rows = sum(len(b["x"]) for b in val.iter_torch_batches(batch_size=4)) if val is not None else 0
        ray.train.report(
            {
                "epoch": epoch,
                "rows": rows,
                "x_sum": x_sum,
                "val_rows": val_rows,
                "loss": 1.0 / epoch,
                "first_batch_s": first_batch_s or 0.0,
            }
        )
