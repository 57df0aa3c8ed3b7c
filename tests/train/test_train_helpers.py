"""hpsearch.train: a run interrupted and resumed from its checkpoint ends exactly where an uninterrupted one does."""

from __future__ import annotations

import math

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

CONFIG = {"lr": 3e-3, "hidden": 64, "layers": 2, "dropout": 0.2, "batch_size": 64, "seed": 7}


def _fit(storage: str, name: str, epochs: int):
    from ray import train
    from ray.train.torch import TorchTrainer

    from hpsearch.examples.digits import train_loop

    trainer = TorchTrainer(
        train_loop,
        train_loop_config={**CONFIG, "epochs": epochs},
        scaling_config=train.ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.45}),
        run_config=train.RunConfig(name=name, storage_path=storage),
    )
    return trainer.fit()


@pytest.mark.full
def test_interrupted_and_resumed_equals_uninterrupted(ray_cluster, tmp_path):
    """Same seed: 4 epochs straight vs 2 epochs, stop, then resume to 4 (dropout, shuffling, AdamW state)."""
    straight = _fit(str(tmp_path), "straight", epochs=4).metrics
    _fit(str(tmp_path), "interrupted", epochs=2)
    result = _fit(str(tmp_path), "interrupted", epochs=4)  # same name: resumes from the epoch-2 checkpoint
    # The run's checkpoints: epochs 1-2 from the first fit, 3-4 from the second (not 1-4 again).
    assert list(result.metrics_dataframe["epoch"]) == [1, 2, 3, 4]
    resumed = result.metrics
    assert resumed["epoch"] == straight["epoch"] == 4
    for key in ("val_loss", "val_acc", "train_loss"):
        assert math.isclose(resumed[key], straight[key], rel_tol=1e-6, abs_tol=1e-9), (key, resumed, straight)
