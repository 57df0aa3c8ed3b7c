"""PyTorch's optimizers and LR schedulers, as a run started from a donor's checkpoint loads their state.

Internals ``torch-optimizer-load`` (:func:`wrap_optimizer_load`) and ``torch-scheduler-load``
(:func:`wrap_scheduler_loads`, :func:`set_last_lr`): ``torch.optim.Optimizer.load_state_dict`` and
each LR scheduler class's own ``load_state_dict`` are replaced on the classes, for the whole Train
worker process, and a scheduler's last rates are written. What the replacements do (the mutated
hyperparameters kept) is :mod:`hpsearch.runtime.train.transplant`'s.

The checks read torch's source files: the search process checks every contract at its start and
never imports torch (seconds).
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpsearch.runtime.internals.contract_checks import ContractBroken, _unset
from hpsearch.runtime.internals.registry import available

__all__ = ["Load", "load_state_dict_targets", "set_last_lr", "wrap_optimizer_load", "wrap_scheduler_loads"]

#: A ``load_state_dict`` method: ``load(self, state_dict)``.
Load = Callable[[Any, dict[str, Any]], None]


def _torch_source(*parts: str) -> str:
    """The source of a module of torch (its path under the package), read from its file, not imported."""
    found = importlib.util.find_spec("torch")
    if found is None or not found.submodule_search_locations:
        raise ContractBroken("torch is not installed")
    path = Path(next(iter(found.submodule_search_locations))).joinpath(*parts)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise ContractBroken(f"cannot read {path} ({err})") from None


def _classes(*parts: str) -> dict[str, ast.ClassDef]:
    """The classes a module of torch defines, by name."""
    tree = ast.parse(_torch_source(*parts))
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _loads_a_state_dict(where: str, cls: ast.ClassDef) -> None:
    """``cls`` defines ``load_state_dict(self, state_dict)``, which a replacement is called as."""
    load = _method(cls, "load_state_dict")
    if load is None:
        raise ContractBroken(f"{where} has no load_state_dict")
    args = [a.arg for a in load.args.args]
    if args != ["self", "state_dict"] or load.args.vararg or load.args.kwonlyargs:
        raise ContractBroken(f"{where}.load_state_dict no longer takes (state_dict) alone: {ast.unparse(load.args)}")


def _sets(where: str, cls: ast.ClassDef, *attrs: str) -> None:
    missing = _unset(ast.unparse(cls), *attrs)
    if missing:
        raise ContractBroken(f"{where} no longer sets {', '.join(missing)}")


def _check_optimizer_load() -> None:
    optimizer = _classes("optim", "optimizer.py").get("Optimizer")
    if optimizer is None:
        raise ContractBroken("torch.optim.optimizer has no class Optimizer")
    _loads_a_state_dict("torch.optim.Optimizer", optimizer)
    _sets("torch.optim.Optimizer", optimizer, "param_groups")


def _check_scheduler_load() -> None:
    classes = _classes("optim", "lr_scheduler.py")
    base = classes.get("LRScheduler")
    if base is None:
        raise ContractBroken("torch.optim.lr_scheduler has no class LRScheduler")
    _loads_a_state_dict("torch.optim.lr_scheduler.LRScheduler", base)
    _sets("torch.optim.lr_scheduler.LRScheduler", base, "optimizer", "base_lrs", "_last_lr")
    last = _method(base, "get_last_lr")
    if last is None or "return self._last_lr" not in ast.unparse(last):
        raise ContractBroken("torch.optim.lr_scheduler.LRScheduler.get_last_lr no longer returns _last_lr")
    for name, cls in classes.items():  # every scheduler that loads its own way is replaced too
        if _method(cls, "load_state_dict") is not None:
            _loads_a_state_dict(f"torch.optim.lr_scheduler.{name}", cls)


def load_state_dict_targets() -> list[tuple[type, str]]:
    """The ``load_state_dict`` methods the wraps below replace: the optimizer's, then each LR scheduler class's
    that defines its own (``LambdaLR`` replaces the base class's without calling it)."""
    import torch  # lazy: the worker's loop imports torch anyway; the door imports without it

    schedulers = [
        cls
        for cls in vars(torch.optim.lr_scheduler).values()
        if isinstance(cls, type)
        and issubclass(cls, torch.optim.lr_scheduler.LRScheduler)
        and "load_state_dict" in vars(cls)
    ]
    return [(torch.optim.Optimizer, "load_state_dict"), *((cls, "load_state_dict") for cls in schedulers)]


def wrap_optimizer_load(wrap: Callable[[Load], Load]) -> bool:
    """For the rest of this process, ``torch.optim.Optimizer.load_state_dict`` is ``wrap(its own)``, on the class:
    the loop's optimizers and Lightning's or the Trainer's alike (internal ``torch-optimizer-load``). Whether
    it could."""
    if not available("torch-optimizer-load"):
        return False
    cls, name = load_state_dict_targets()[0]
    setattr(cls, name, wrap(vars(cls)[name]))
    return True


def wrap_scheduler_loads(wrap: Callable[[Load], Load]) -> bool:
    """For the rest of this process, each LR scheduler class's own ``load_state_dict`` is ``wrap(its own)``, on the
    classes (internal ``torch-scheduler-load``). Whether it could."""
    if not available("torch-scheduler-load"):
        return False
    for cls, name in load_state_dict_targets()[1:]:
        setattr(cls, name, wrap(vars(cls)[name]))
    return True


def set_last_lr(scheduler: Any, rates: list[Any]) -> None:
    """What ``scheduler.get_last_lr()`` returns until its next step (internal ``torch-scheduler-load``: its
    ``_last_lr``, which PyTorch sets at each step)."""
    scheduler._last_lr = rates
