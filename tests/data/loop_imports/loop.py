"""A train loop that imports a helper module beside it (tests/spec/test_loop_imports.py)."""

from loop_helpers import make_model


def train_loop(config: dict) -> dict:
    return make_model(config["width"])
