"""The example loops under FSDP, cut once and resumed by Ray Train (tests/train/test_fsdp.py).

Referenced as ``tests/data/fsdp_loops.py:cut_once`` (Ray pickles it by value; the test folder is not
importable on Ray's workers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray.train


def cut_once(config: dict[str, Any]) -> None:
    """Run the example loop ``config["case"]["loop"]`` names (``digits`` or ``lightning_digits``) on the config
    with the case's keys in it. The trial's first run trains ``cut_after`` epochs and then raises on every
    rank, so Ray Train starts the worker group again (``failure.worker_retries``) and the loop resumes from that
    run's last checkpoint: a file per rank in ``config["marks"]`` says the cut happened."""
    case = config["case"]
    if case["loop"] == "digits":
        from hpsearch.examples.digits import train_loop  # lazy: one of two loops, by the case
    else:
        from hpsearch.examples.lightning_digits import train_loop  # lazy: as above
    run = {**config, **case}
    mark = Path(config["marks"], f"{case['name']}-rank{ray.train.get_context().get_world_rank()}")
    if mark.exists():
        train_loop(run)
        return
    train_loop({**run, "epochs": config["cut_after"]})
    mark.touch()
    raise RuntimeError(f"cut after {config['cut_after']} epoch(s), to be resumed")
