from .layers import OFFSET, widen


def train_loop(config: dict) -> dict:
    return {"width": widen(config["width"]) + OFFSET, "made_by": widen.__module__}
