"""A train loop that reports what the helper module beside it computes (the Ray test in tests/spec/test_loop_imports.py)."""

import ray.train
from loop_helpers import make_model


def train_loop(config: dict) -> None:
    for epoch in (1, 2):
        ray.train.report({"layers": make_model(config["width"])["layers"], "epoch": epoch})
