"""Tiny 2-worker loops for tests/runtime/train/test_rank_logs.py and tests/runtime/train/test_stalls.py: no torch, no model.

Each rank prints a line per epoch from Python and writes one straight to file descriptor 2 (as
C code such as gloo's does), then reports ``loss``. ``config["case"]`` says how it misbehaves:

- ``prints``: nothing more; both ranks report every epoch;
- ``fails``: rank 1 raises ValueError at epoch 2, in every run of the loop;
- ``skips_last``: rank 1 returns before its last report, while rank 0 makes it;
- ``stalls``: rank 1 sleeps for ever before its second report.
"""

from __future__ import annotations

import os
import time
from typing import Any

import ray.train


def train_loop(config: dict[str, Any]) -> None:
    rank = ray.train.get_context().get_world_rank()
    case = config["case"]
    reports = int(config.get("reports", 2))
    for epoch in range(1, reports + 1):
        print(f"loop says: rank {rank} epoch {epoch}")
        os.write(2, f"fd 2 says: rank {rank} epoch {epoch}\n".encode())
        if rank == 1 and epoch == 2 and case == "fails":
            raise ValueError(f"rank 1 fails at epoch {epoch}")
        if rank == 1 and epoch == 2 and case == "stalls":
            time.sleep(3600)
        if rank == 1 and epoch == reports and case == "skips_last":
            return
        ray.train.report({"loss": 1.0 / epoch, "epoch": epoch})
