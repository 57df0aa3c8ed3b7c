"""A per-worker loop for tests/runtime/search/test_scaling_search.py: it reports the size of the worker group it runs in.

Referenced as ``tests/scaling_loops.py:world_size`` so hpsearch loads it by file path and Ray
pickles it by value (the test folder is not importable on Ray's workers).
"""

from __future__ import annotations

import ray.train


def world_size(config: dict) -> None:
    """Reports the trial's world size and the worker count its config says, so a test can compare them."""
    size = ray.train.get_context().get_world_size()
    said = config.get("scaling", {}).get("num_workers")
    for epoch in range(1, config.get("epochs", 1) + 1):
        ray.train.report({"loss": 1.0 / size, "world_size": size, "config_workers": said, "epoch": epoch})
