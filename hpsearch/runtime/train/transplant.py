"""A run that starts from another trial's checkpoint, as any train loop restores it.

Under population-based training an exploited trial's next nested run starts from the donor's
checkpoint, with a mutated config (:mod:`hpsearch.runtime.trial.pbt_driver` writes the run's start
file). Loops written as Ray's guides write them restore with ``ray.train.get_checkpoint()``:
plain PyTorch (``torch.load``), Lightning (``trainer.fit(ckpt_path=...)``) and the Hugging Face
``Trainer`` (``trainer.train(resume_from_checkpoint=...)``). Ray Train V2 gives a new run no
checkpoint, so such a loop would start from scratch. And once it loads the donor's optimizer
state, the optimizer takes the donor's learning rate back, not the mutated one (ray-project/ray
issue 36660 is this for Lightning).

:func:`take_over` runs in every Train worker before the loop, in a run with a start file and no
checkpoint of its own:

- ``ray.train.get_checkpoint()`` returns the donor's checkpoint (internal
  ``train-worker-checkpoint``), until the run reports a checkpoint of its own;
- every optimizer keeps the hyperparameters the loop built it with from the new config when it
  loads a state: ``lr``, ``weight_decay``, ``momentum``, ``betas``..., as
  :func:`hpsearch.train.restore` does; an LR scheduler that loads a state keeps the base rates
  it was built with, and its optimizer's rates are the donor's scaled by new base / donor base
  (a mutated ``lr`` of 1.2x the donor's continues the schedule at 1.2x).

The optimizer's and scheduler's own ``load_state_dict`` are wrapped, in this worker process only,
for this run only (a worker that restarts is a new process, and then the run has its own
checkpoint), through the door (internals ``torch-optimizer-load`` and ``torch-scheduler-load``).
Everything else of the donor's state (moments, step counts, the schedule's progress, the model)
is loaded as saved. With the Ray work-arounds off (``HPSEARCH_RAY_WORKAROUNDS=0``, as the search
process read it), PyTorch is left as it is: the optimizer takes the donor's hyperparameters back,
as under Ray alone; the donor's checkpoint is still offered, or the run would start from scratch.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

import ray.train

from hpsearch.experiment import files
from hpsearch.runtime.internals import (
    Load,
    offer_start_checkpoint,
    set_last_lr,
    wrap_optimizer_load,
    wrap_scheduler_loads,
)

__all__ = ["start_checkpoint", "take_over"]


def start_checkpoint() -> ray.train.Checkpoint | None:
    """The donor checkpoint this run starts from under population-based training (written into the
    run's folder by the trial driver), or ``None``."""
    try:
        storage = ray.train.get_context().get_storage()
        fs, folder = storage.storage_filesystem, storage.experiment_fs_path
    except (AttributeError, NotImplementedError, RuntimeError):  # not a Train worker
        return None
    start = files.read_start(fs, folder)
    return ray.train.Checkpoint(start["checkpoint"], filesystem=fs) if start else None


def take_over(keep_hyperparameters: bool = True) -> bool:
    """In a Train worker, before the loop: if this run starts from a donor's checkpoint, make the loop see
    it and, with ``keep_hyperparameters`` (the Ray work-arounds on), keep its optimizers' new
    hyperparameters (see the module's doc). Whether it starts from a donor's checkpoint."""
    try:
        if ray.train.get_checkpoint() is not None:
            return False  # the run's own checkpoint (a restarted worker group): restored as saved
    except RuntimeError:  # not in a Ray Train run (the loop called directly)
        return False
    donor = start_checkpoint()
    if donor is None:
        return False
    offer_start_checkpoint(lambda: donor)
    if keep_hyperparameters:
        keep_built_hyperparameters()
    return True


_INSTALLED = False
#: Each optimizer's learning rates as it loaded them, before its built ones were put back (read by its scheduler's
#: load, which continues the donor's schedule from them).
_DONOR_LR: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()
#: The schedulers in their outermost load: a subclass's load that calls its base's is adjusted once, by the outer.
_LOADING: weakref.WeakSet[Any] = weakref.WeakSet()


def keep_built_hyperparameters() -> None:
    """From now on in this process, an optimizer or LR scheduler that loads a state keeps the
    hyperparameters it was built with (see the module's doc); where the door's internal is missing,
    PyTorch's own load stays (the search said so at its start)."""
    global _INSTALLED
    if _INSTALLED:
        return
    wrap_optimizer_load(_keeping_optimizer)
    wrap_scheduler_loads(_keeping_scheduler)
    _INSTALLED = True


def _keeping_optimizer(load: Load) -> Load:
    @functools.wraps(load)
    def load_optimizer(optimizer: Any, state_dict: dict[str, Any]) -> None:
        built = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
        load(optimizer, state_dict)
        _DONOR_LR[optimizer] = [group.get("lr") for group in optimizer.param_groups]
        for group, values in zip(optimizer.param_groups, built):
            group.update({k: v for k, v in values.items() if k != "initial_lr"})

    return load_optimizer


def _keeping_scheduler(load: Load) -> Load:
    @functools.wraps(load)
    def load_scheduler(scheduler: Any, state_dict: dict[str, Any]) -> None:
        if scheduler in _LOADING:  # a subclass's load calling its base's: the outer one adjusts
            load(scheduler, state_dict)
            return
        built_base = list(getattr(scheduler, "base_lrs", []) or [])
        _LOADING.add(scheduler)
        try:
            load(scheduler, state_dict)
        finally:
            _LOADING.discard(scheduler)
        donor_base = list(getattr(scheduler, "base_lrs", []) or [])
        optimizer = getattr(scheduler, "optimizer", None)
        if optimizer is None or not built_base or len(built_base) != len(donor_base):
            return
        if len(built_base) != len(optimizer.param_groups):
            return
        donor_lr = _DONOR_LR.get(optimizer)
        for i, group in enumerate(optimizer.param_groups):
            current = donor_lr[i] if donor_lr and donor_lr[i] is not None else group.get("lr")
            if donor_base[i] and current is not None:
                group["lr"] = current * built_base[i] / donor_base[i]
            group["initial_lr"] = built_base[i]
        scheduler.base_lrs = built_base
        set_last_lr(scheduler, [group["lr"] for group in optimizer.param_groups])

    return load_scheduler
