"""Lightning train loops written the way Ray Train's Lightning guide writes them, for the tests.

None of them uses :mod:`hpsearch.train`. Referenced as ``tests/lightning_loops.py:<function>``
(Ray pickles them by value; the test folder is not importable on Ray's workers).
"""

from __future__ import annotations

import os
from typing import Any

import lightning.pytorch as pl
import ray.train
import torch
from ray.train.lightning import RayDDPStrategy, RayLightningEnvironment, RayTrainReportCallback, prepare_trainer

from hpsearch.examples.lightning_digits import DigitsClassifier, dataloaders


class LrLoggingClassifier(DigitsClassifier):
    """The example's module, also logging the learning rate its optimizer trains with (``lr_now``)."""

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        optimizer = self.optimizers()
        assert isinstance(optimizer, pl.core.optimizer.LightningOptimizer)
        self.log("lr_now", optimizer.param_groups[0]["lr"], on_step=False, on_epoch=True, sync_dist=True)
        return super().training_step(batch, batch_idx)


def guide_loop_logging_lr(config: dict[str, Any]) -> None:
    """Ray's Lightning guide, word for word but for the module: resume with ``trainer.fit(ckpt_path=...)``
    from ``ray.train.get_checkpoint()``, which under PBT is the donor's checkpoint after an exploit."""
    torch.set_num_threads(1)
    pl.seed_everything(int(config.get("seed", 0)), workers=True, verbose=False)
    model = LrLoggingClassifier(lr=float(config["lr"]), hidden=int(config.get("hidden", 32)))
    train_loader, val_loader = dataloaders(int(config.get("batch_size", 32)))
    trainer = pl.Trainer(
        devices="auto",
        accelerator="cpu",
        strategy=RayDDPStrategy(),  # type: ignore[no-untyped-call]  # Ray's __init__ has no annotations
        plugins=[RayLightningEnvironment()],  # type: ignore[no-untyped-call]  # as RayDDPStrategy's
        callbacks=[RayTrainReportCallback()],
        enable_progress_bar=False,
        max_epochs=int(config["epochs"]),
        enable_checkpointing=False,
        logger=False,
        enable_model_summary=False,
    )
    trainer = prepare_trainer(trainer)
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as ckpt_dir:
            ckpt_path = os.path.join(ckpt_dir, RayTrainReportCallback.CHECKPOINT_NAME)
            trainer.fit(model, train_dataloaders=train_loader, val_dataloaders=val_loader, ckpt_path=ckpt_path)
    else:
        trainer.fit(model, train_dataloaders=train_loader, val_dataloaders=val_loader)
