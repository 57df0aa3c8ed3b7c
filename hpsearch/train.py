"""Checkpoint helpers for per-worker train loops: report-and-save in one call, restore in one call.

Use them inside the function you give ``TorchTrainer`` (or ``trainable:`` in a spec)::

    from hpsearch import train as hp

    def train_loop(config):
        model = ray.train.torch.prepare_model(build_model(config))
        optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"])
        start = hp.restore(model=model, optimizer=optimizer)      # 1, or the epoch after the checkpoint
        for epoch in range(start, config["epochs"] + 1):
            ...
            hp.report({"val_loss": val_loss}, epoch=epoch, model=model, optimizer=optimizer)

What a checkpoint holds: the model (unwrapped from DDP), the optimizer, the LR scheduler
if any, the epoch and the random-number states of Python, NumPy and torch (CPU, and CUDA
when present), so a resumed trial continues with the results it would have had. Only
rank 0 writes files; every rank still calls ``ray.train.report`` (it is a barrier). Rank
0's random states are restored on every rank: with ranks seeded alike and given equal
shards (``DistributedSampler`` pads them), their states are the same.

A model sharded by FSDP (``FullyShardedDataParallel``, as ``prepare_model(...,
parallel_strategy="fsdp")`` wraps it, or ``fully_shard``) is saved sharded: no rank holds the
whole model, so every rank writes its own shard of the model and the optimizer with
``torch.distributed.checkpoint`` (``get_state_dict``, then ``save``: collectives, every rank
takes part) into the folder :data:`SHARDS_DIR` of its own temporary checkpoint folder, rank 0
also writes the rest (epoch, scheduler, random states, extra) and the shards' index, and every
rank reports its folder. Ray Train gives all ranks' reports of one epoch the same checkpoint
folder in storage and uploads each rank's files into it, so the stored checkpoint holds every
shard. :func:`restore` loads it on every rank (``load``, then ``set_state_dict``); one process
with no process group can read every shard too (``torch.distributed.checkpoint.load``).

Which checkpoints are kept (``checkpoint.num_to_keep`` in the spec): the best by the
search metric, and always the latest, from which a restarted trial resumes.

Drained nodes (a spot reclaim, ``ray drain-node``): :func:`report` asks Ray Train whether a node of the
worker group is being drained, at every call on every rank (``ray.train.get_preemption_info()``, a barrier),
and saves a checkpoint at the first report after a notice even where the loop's cadence would not; Ray Train
restarts the worker group from it at the drain's deadline, counted apart from failures
(``failure.preemption_retries``). On a Ray without the call (:func:`preemption_notices`) it checkpoints at the
loop's cadence only. With drivers on any node (``resources.driver_node: any``), rank 0 also reads at each call
whether the trial driver's own node is being drained (its notice in the trial's folder; every rank together,
one broadcast, when FSDP shards the model), and saves there the same way; the trial is then paused and resumed
on another node (:mod:`hpsearch.experiment.driver_drains`).

Population-based training (``scheduler: pbt`` or ``pb2``): when the scheduler exploits, the
weaker trial's next run starts from the donor's checkpoint, with a mutated config.
:func:`restore` loads the donor's checkpoint (model, optimizer state, LR scheduler, epoch) and
then gives the optimizer the hyperparameters the loop built it with from the *new* config,
so a mutated ``lr`` takes effect instead of the donor's. What a loop must do: build the model,
optimizer and LR scheduler from ``config`` as usual, call :func:`restore` before training, and
report with :func:`report` (a checkpoint with every report).
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np
import ray
import ray.train
import torch
from ray.train.collective import broadcast_from_rank_zero

from hpsearch.experiment import driver_drains, files

__all__ = ["report", "restore", "apply_hyperparameters", "preemption_notices", "STATE_FILE", "SHARDS_DIR"]

#: The file, inside each checkpoint directory, that holds the training state.
STATE_FILE = "hpsearch_state.pt"
#: The folder, inside the checkpoint of an FSDP-sharded model, that holds every rank's shard of the
#: model and optimizer (``torch.distributed.checkpoint``'s format: ``.metadata`` and ``__<rank>_0.distcp``).
SHARDS_DIR = "hpsearch_shards"


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)  # DistributedDataParallel keeps the model in .module


def _sharded(model: torch.nn.Module) -> bool:
    """Whether FSDP shards the model's parameters across the ranks (``FullyShardedDataParallel`` or
    ``fully_shard``, at the root or on any submodule)."""
    # Whoever wrapped the model imported torch.distributed.fsdp; importing it here would cost every
    # other loop seconds (about 2.5 s on this project's machine).
    fsdp = sys.modules.get("torch.distributed.fsdp")
    if fsdp is None:
        return False
    kinds = tuple(
        kind
        for kind in (getattr(fsdp, "FullyShardedDataParallel", None), getattr(fsdp, "FSDPModule", None))
        if isinstance(kind, type)
    )
    return bool(kinds) and any(isinstance(module, kinds) for module in model.modules())


def _save_shards(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None, folder: str) -> None:
    """Write this rank's shard of the model and optimizer into ``folder``. A collective: every rank calls it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict  # lazy: sharded models only
    from torch.distributed.checkpoint.state_dict_saver import save  # lazy: as above (dcp.save)

    # full_state_dict=False: each rank's own shard (DTensor / ShardedTensor), nothing gathered.
    model_state, optimizer_state = get_state_dict(
        model, [optimizer] if optimizer is not None else [], options=StateDictOptions(full_state_dict=False)
    )
    shards: dict[str, Any] = {"model": model_state}
    if optimizer is not None:
        shards["optimizer"] = optimizer_state
    save(shards, checkpoint_id=folder)


def _load_shards(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer | None, folder: str, with_optimizer: bool
) -> None:
    """Load the model's (and, when both were saved and given, the optimizer's) shards from ``folder`` into
    this rank's part of them. A collective: every rank calls it."""
    from torch.distributed.checkpoint.state_dict import (  # lazy: sharded checkpoints only
        StateDictOptions,
        get_state_dict,
        set_state_dict,
    )
    from torch.distributed.checkpoint.state_dict_loader import load  # lazy: as above (dcp.load)

    optimizers = [optimizer] if optimizer is not None and with_optimizer else []
    options = StateDictOptions(full_state_dict=False)
    # The state dicts to load into: the shapes and shards of this rank's model and optimizer.
    model_state, optimizer_state = get_state_dict(model, optimizers, options=options)
    shards: dict[str, Any] = {"model": model_state}
    if optimizers:
        shards["optimizer"] = optimizer_state
    load(shards, checkpoint_id=folder)
    set_state_dict(
        model,
        optimizers,
        model_state_dict=shards["model"],
        optim_state_dict=shards.get("optimizer", {}),
        options=options,
    )


def _rng_states() -> dict[str, Any]:
    states: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_rng_states(states: Mapping[str, Any]) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def report(
    metrics: Mapping[str, Any],
    *,
    epoch: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    checkpoint: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Report one epoch's metrics from this rank, with a checkpoint from rank 0 (from every rank when FSDP
    shards the model: each writes its shard).

    Call it on every rank, once per epoch (or per step: every rank equally often). ``epoch`` is added to the
    metrics (the schedulers count epochs, which survive restarts; Tune's iteration count does not).

    A drained node (a spot reclaim): where Ray Train tells a loop of one (:func:`preemption_notices`), each
    call first asks ``ray.train.get_preemption_info()``, which is a barrier like ``ray.train.report``: every
    rank must call it equally often, and every rank calls this equally often, so the rule holds. The first
    report after a notice saves a checkpoint even with ``checkpoint=False``, once per notice (not again
    while no new node is drained); Ray Train restarts the worker group from it at the drain's deadline. With
    drivers on any node, a drain of the trial driver's own node saves the same way, and the trial is paused at
    that report and resumed on another node (:mod:`hpsearch.experiment.driver_drains`). Rank 0
    records the notice once in its attempt's folder (``preemption.json``: the drained hosts, the deadline,
    this ``epoch`` and report; see :mod:`hpsearch.experiment.preemptions`). A checkpoint saved in the middle
    of an epoch holds that ``epoch``: :func:`restore` returns the epoch after it, so a loop that reports
    more than once per epoch saves its place within the epoch in ``extra`` and continues from there.

    Args:
        metrics: This rank's metrics; hpsearch aggregates them across ranks.
        epoch: The epoch just finished, counting from 1.
        model: The model (DDP- or FSDP-wrapped, or not).
        optimizer: Its optimizer, saved with it.
        scheduler: An LR scheduler (anything with ``state_dict``), saved with it.
        checkpoint: False to report without saving (e.g. to checkpoint every k epochs); a drain notice saves
            anyway, once.
        extra: Anything else picklable to save (e.g. a data-loader position).
    """
    metrics = {**metrics, "epoch": epoch}
    sharded = _sharded(model)
    checkpoint = _NOTICES.before_report(epoch, checkpoint, sharded)
    if not checkpoint:
        ray.train.report(metrics, checkpoint=None)
        return
    rank = ray.train.get_context().get_world_rank()
    if rank != 0 and not sharded:
        ray.train.report(metrics, checkpoint=None)
        _NOTICES.saved()
        return
    with tempfile.TemporaryDirectory() as folder:
        if sharded:  # every rank, in the same order: the shards are written collectively
            _save_shards(model, optimizer, os.path.join(folder, SHARDS_DIR))
        if rank == 0:
            state = {
                "epoch": epoch,
                "model": None if sharded else _unwrap(model).state_dict(),
                "optimizer": None if sharded or optimizer is None else optimizer.state_dict(),
                "scheduler": scheduler.state_dict() if scheduler is not None else None,
                "rng": _rng_states(),
                "extra": dict(extra or {}),
                # what SHARDS_DIR holds, in a sharded checkpoint
                "shards": {"model": True, "optimizer": optimizer is not None} if sharded else None,
            }
            torch.save(state, os.path.join(folder, STATE_FILE))
        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(folder))
    _NOTICES.saved()


def preemption_notices() -> bool:
    """Whether the installed Ray Train tells a loop that a node of its worker group is being drained.

    It does through ``ray.train.get_preemption_info()`` (Ray Train V2's public API, alpha): in Ray 2.60, and
    in the Ray 2.58.1 this project's CI installs as its lowest. On a Ray Train without it, :func:`report`
    checkpoints at the loop's own cadence only, and nothing is said. The one place hpsearch asks.
    """
    return hasattr(ray.train, "get_preemption_info")


class _Notices:
    """What this worker's reports know of a drain: the latest notice read, and whether a checkpoint was saved
    since. One per process: a Train worker process runs one attempt of one trial."""

    def __init__(self) -> None:
        self.latest: Any = None  # the latest PreemptionInfo Ray gave (every rank gets rank 0's)
        self.pending = False  # a notice came and no checkpoint was saved since
        self.reports = 0  # this process's calls of report, from 1
        self.driver_noticed: float | None = None  # when the trial driver read the drain of its node, if it did

    def before_report(self, epoch: int, checkpoint: bool, sharded: bool = False) -> bool:
        """Ask Ray whether a node is being drained (a barrier: every rank, every report); whether this report saves."""
        self.reports += 1
        info = ray.train.get_preemption_info() if preemption_notices() else None
        if info is not None and info != self.latest:  # a new notice (another node drained: Ray merges them)
            self.latest, self.pending = info, True
            if ray.train.get_context().get_world_rank() == 0:
                _record_notice(info, epoch, self.reports, forced=not checkpoint)
        self._driver_notice(epoch, checkpoint, sharded)
        return checkpoint or self.pending

    def _driver_notice(self, epoch: int, checkpoint: bool, sharded: bool) -> None:
        """Rank 0 (every rank with a sharded model): whether the trial driver's node is being drained."""
        folder = driver_drains.watched_folder()
        if folder is None:  # the driver is on the head node: it goes only with the whole cluster
            return
        rank = ray.train.get_context().get_world_rank()
        notice = driver_drains.read_notice(folder) if rank == 0 else None
        if sharded:  # every rank saves its shard, together: rank 0's reading decides for all, in one broadcast
            notice = broadcast_from_rank_zero(notice)
        if notice is None or notice.noticed_at == self.driver_noticed:
            return
        self.driver_noticed, self.pending = notice.noticed_at, True
        if rank == 0:
            try:  # said before this report leaves: the scheduler pauses the trial at the result that carries it
                driver_drains.mark_saved(folder, notice, report=self.reports, epoch=epoch)
            except OSError:  # the scheduler pauses it anyway as the deadline nears; the checkpoint is saved
                pass
            _record_driver_notice(notice, epoch, self.reports, forced=not checkpoint)

    def saved(self) -> None:
        """A report with a checkpoint returned: the notice's checkpoint is in storage."""
        self.pending = False


_NOTICES = _Notices()


def _record_notice(info: Any, epoch: int, report: int, *, forced: bool) -> None:
    """Rank 0: record a drain notice in this attempt's folder (``preemption.json``), once; a record, never an error."""
    folder = files.current_attempt()
    if folder is None:  # not under hpsearch's worker wrapper (a loop run by Ray Train alone): nowhere to keep it
        return
    try:
        nodes_now = ray.nodes()  # type: ignore[no-untyped-call]  # Ray's API is unannotated
        hosts = {str(n.get("NodeID")): str(n.get("NodeManagerHostname") or "") for n in nodes_now}
        deadline = info.deadline_ms / 1000.0 if info.deadline_ms else None
        nodes = [
            {"node_id": node, "host": hosts.get(node, ""), "ranks": sorted(ranks)}
            for node, ranks in sorted(info.preempted_node_to_ranks.items())
        ]
        files.append_notice(
            folder, deadline=deadline, nodes=nodes, epoch=epoch, report=report, saved_epoch=epoch, forced=forced
        )
    except Exception:  # noqa: BLE001 - the checkpoint matters, not its record
        pass


def _record_driver_notice(notice: driver_drains.DriverNotice, epoch: int, report: int, *, forced: bool) -> None:
    """Rank 0: record the drain of the trial driver's node in this attempt's ``preemption.json``, as a drained
    node holding no rank (``"driver": true``); a record, never an error."""
    folder = files.current_attempt()
    if folder is None:
        return
    try:
        node = {"node_id": notice.node_id, "host": notice.host, "ranks": [], "driver": True}
        files.append_notice(
            folder, deadline=notice.deadline, nodes=[node], epoch=epoch, report=report, saved_epoch=epoch, forced=forced
        )
    except Exception:  # noqa: BLE001 - the checkpoint matters, not its record
        pass


def restore(
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    extra: dict[str, Any] | None = None,
) -> int:
    """Load the latest checkpoint of this run, if any; return the first epoch still to run.

    Call it at the start of the loop, on every rank, after ``prepare_model`` and after
    building the optimizer (its state then lands on the model's device) and the LR scheduler.
    Returns 1 when the run starts fresh. ``extra``, if given, is updated with what
    :func:`report` saved as ``extra``. A sharded (FSDP) checkpoint is loaded by every rank
    together (a collective), each into its own shard.

    Under population-based training a run may start from another trial's checkpoint (an
    exploit). Then the optimizer keeps the donor's state (moments, step counts) but takes the
    hyperparameters it was built with here, from the mutated config: every ``param_group``
    key (``lr``, ``weight_decay``, ``momentum``, ``betas``, ...) is set back to its value
    before the load. With an LR scheduler, its progress is the donor's and its base rates the
    new ones: each group's ``lr`` is the donor's current ``lr`` scaled by new base / donor's
    base (a mutated ``lr`` of 1.2x the donor's continues the schedule at 1.2x). An ordinary
    resume of the trial's own run restores everything as saved.

    Raises:
        FileNotFoundError: The checkpoint was not written by :func:`report`.
        ValueError: The checkpoint holds a whole model and ``model`` is sharded by FSDP.
    """
    # In a run from a donor's checkpoint, get_checkpoint() returns it where the installed Ray allows, and the
    # optimizer's and scheduler's loads then keep the new hyperparameters themselves (runtime/train/transplant.py);
    # otherwise the run's start file names it, and the hyperparameters are re-applied here.
    found, transplant = ray.train.get_checkpoint(), False
    if found is None:
        found = _start_checkpoint()
        transplant = found is not None
    if found is None:
        return 1
    built = _hyperparameters(optimizer) if transplant and optimizer is not None else None
    built_base = list(getattr(scheduler, "base_lrs", []) or []) if transplant else []
    with found.as_directory() as folder:
        path = os.path.join(folder, STATE_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"checkpoint {found.path} has no {STATE_FILE}: it was not saved by hpsearch.train.report"
            )
        # The RNG states hold numpy arrays and Python tuples: not loadable with weights_only=True.
        state = torch.load(path, map_location="cpu", weights_only=False)
        shards = state.get("shards")
        if shards:  # every rank loads its part, while the folder is there
            _load_shards(model, optimizer, os.path.join(folder, SHARDS_DIR), with_optimizer=bool(shards["optimizer"]))
    if not shards:
        if _sharded(model):
            raise ValueError(
                f"checkpoint {found.path} holds a whole model, saved from a model FSDP did not shard; this model "
                "is sharded: restore it into the model as it was saved (the same parallel strategy)"
            )
        _unwrap(model).load_state_dict(state["model"])
        if optimizer is not None and state.get("optimizer") is not None:
            optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state.get("scheduler") is not None:
        scheduler.load_state_dict(state["scheduler"])
    if built is not None and optimizer is not None:
        apply_hyperparameters(optimizer, built, scheduler=scheduler, base_lrs=built_base)
    if extra is not None:
        extra.update(state.get("extra") or {})
    _set_rng_states(state["rng"])
    return int(state["epoch"]) + 1


def _hyperparameters(optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """Each param group's hyperparameters (every key but its parameters), as the loop built them."""
    return [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]


def apply_hyperparameters(
    optimizer: torch.optim.Optimizer,
    built: list[dict[str, Any]],
    *,
    scheduler: Any = None,
    base_lrs: list[float] | None = None,
) -> None:
    """After loading a donor's optimizer (and LR scheduler) state, give each param group the
    hyperparameters ``built`` holds (see :func:`restore`); with a scheduler, rescale its rates."""
    scaled = scheduler is not None and base_lrs and len(base_lrs) == len(optimizer.param_groups)
    donor_base = list(getattr(scheduler, "base_lrs", [])) if scaled else []
    for i, (group, values) in enumerate(zip(optimizer.param_groups, built)):
        current = group.get("lr")
        for key, value in values.items():
            if key not in ("lr", "initial_lr"):
                group[key] = value
        if scaled and base_lrs is not None and donor_base[i] and current is not None:
            group["lr"] = current * base_lrs[i] / donor_base[i]
            group["initial_lr"] = base_lrs[i]
        elif "lr" in values:
            group["lr"] = values["lr"]
    if scaled and base_lrs is not None:
        # Through the scheduler's public state: its base rates, and the rates get_last_lr() returns
        # (PyTorch's LRScheduler.state_dict holds both; they are its checkpoint format).
        state = scheduler.state_dict()
        state["base_lrs"] = list(base_lrs)
        state["_last_lr"] = [group["lr"] for group in optimizer.param_groups]
        scheduler.load_state_dict(state)


def _start_checkpoint() -> ray.train.Checkpoint | None:
    """The donor checkpoint this run starts from under population-based training (written into the
    run's folder by the trial driver, :mod:`hpsearch.runtime.trial.pbt_driver`), or ``None``."""
    try:
        storage = ray.train.get_context().get_storage()
        fs, folder = storage.storage_filesystem, storage.experiment_fs_path
    except (AttributeError, NotImplementedError):  # an older Ray Train without the run's storage
        return None
    start = files.read_start(fs, folder)
    return ray.train.Checkpoint(start["checkpoint"], filesystem=fs) if start else None
