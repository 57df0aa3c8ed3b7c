"""A train loop that holds its nested run open while a test looks at the sockets (tests/runtime/nodes/test_listening.py).

Referenced as ``tests/listening_loops.py:hold`` (loaded by file path, pickled by value).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import ray.train


def hold(config: dict) -> None:
    """Write this rank's PID and torch's rendezvous address, wait for ``release``, then report once."""
    folder = Path(config["dir"])
    rank = ray.train.get_context().get_world_rank()
    info = {
        "pid": os.getpid(),
        "master_addr": os.environ.get("MASTER_ADDR"),
        "master_port": os.environ.get("MASTER_PORT"),
    }
    (folder / f"rank{rank}.json").write_text(json.dumps(info))
    deadline = time.monotonic() + config.get("hold_s", 120)
    while not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    ray.train.report({"loss": 0.0, "epoch": 1})
