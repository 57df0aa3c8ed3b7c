"""Ray Train's Torch backend: each trial's Torch process group, set up by Ray's backend or by hpsearch's mirror
of it, which the Train controller unpickles without importing torch.

Internals ``torch-backend-start`` (:func:`torch_config_with_worker_setup`) and ``torch-backend-mirror``
(:func:`lean_torch_config`).
"""

from __future__ import annotations

import ast
import functools
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpsearch.runtime.internals.contract_checks import ContractBroken, _mentions, _parameters, _resolve
from hpsearch.runtime.internals.registry import TORCH_BACKEND_CLASS, available
from hpsearch.runtime.nodes.node_facts import is_loopback

__all__ = ["MIRRORED_BACKENDS", "lean_torch_config", "torch_config_with_worker_setup"]


def _ray_train_source(*parts: str) -> str:
    """The source of a module of ``ray.train`` (its path under the package), read from its file."""
    path = Path(_resolve("ray.train").__file__).parent.joinpath(*parts)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise ContractBroken(f"cannot read {path} ({err})") from None


def _torch_config_source() -> str:
    """``ray.train.torch.config``'s source, read from its file: importing it imports torch (seconds), and
    the search process, which checks every contract at start, never needs torch."""
    return _ray_train_source("torch", "config.py")


def _config_definitions() -> dict[str, ast.ClassDef | ast.FunctionDef]:
    """The classes and functions ``ray.train.torch.config`` defines, by name (parsed, not imported)."""
    tree = ast.parse(_torch_config_source())
    return {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}


def _check_torch_backend() -> None:
    defined = _config_definitions()

    def member(cls: str, name: str) -> ast.FunctionDef:
        found = defined.get(cls)
        if not isinstance(found, ast.ClassDef):
            raise ContractBroken(f"ray.train.torch.config has no class {cls}")
        for node in found.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node
        raise ContractBroken(f"ray.train.torch.config.{cls} has no {name}")

    on_start = member(TORCH_BACKEND_CLASS, "on_start")
    if [a.arg for a in on_start.args.args] != ["self", "worker_group", "backend_config"]:
        raise ContractBroken(
            f"ray.train.torch.config.{TORCH_BACKEND_CLASS}.on_start no longer takes (worker_group, backend_config)"
        )
    if "_setup_torch_process_group" not in ast.unparse(on_start):
        raise ContractBroken(
            f"ray.train.torch.config.{TORCH_BACKEND_CLASS}.on_start no longer sets up the process group"
        )
    setup = defined.get("_setup_torch_process_group")
    if setup is None or "init_process_group(" not in ast.unparse(setup):
        raise ContractBroken("ray.train.torch.config._setup_torch_process_group no longer calls init_process_group")
    if f"return {TORCH_BACKEND_CLASS}" not in ast.unparse(member("TorchConfig", "backend_cls")):
        raise ContractBroken(f"ray.train.torch.config.TorchConfig.backend_cls no longer returns {TORCH_BACKEND_CLASS}")
    _mentions(
        "ray.train.v2._internal.callbacks.backend_setup:BackendSetupCallback",
        "backend_config.backend_cls()",
        "self._backend.on_start(",
    )
    _parameters("ray.train.v2._internal.execution.worker_group.execution_group:ExecutionGroup.execute", "fn")


def _config_text(defined: dict[str, ast.ClassDef | ast.FunctionDef], name: str, member: str | None = None) -> str:
    """The source of ``name`` (or of its method ``member``) in ``ray.train.torch.config``, as Python unparses it."""
    node: ast.AST | None = defined.get(name)
    if member is not None and isinstance(node, ast.ClassDef):
        node = next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == member), None)
    if node is None:
        raise ContractBroken(f"ray.train.torch.config has no {name}{'.' + member if member else ''}")
    return ast.unparse(node)


def _holds(where: str, source: str, *parts: str) -> None:
    """``ray.train.torch.config.<where>`` (its ``source``) still holds each of ``parts``."""
    missing = [p for p in parts if p not in source]
    if missing:
        raise ContractBroken(f"ray.train.torch.config.{where} no longer does {', '.join(missing)}")


def _check_torch_mirror() -> None:
    """Ray's ``_TorchBackend`` still does in the controller, for gloo and nccl, what ``lean_torch_config`` does."""
    defined = _config_definitions()

    def text(name: str, member: str | None = None) -> str:
        return _config_text(defined, name, member)

    _check_mirrored_start(text(TORCH_BACKEND_CLASS, "on_start"))
    _holds(
        f"{TORCH_BACKEND_CLASS}.on_shutdown",
        text(TORCH_BACKEND_CLASS, "on_shutdown"),
        "worker_group.execute_async(_shutdown_torch, destroy_process_group=len(worker_group) > 1)",
        "TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S",
        "DEFAULT_TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S",
        "ray.get(futures, timeout=timeout_s)",
    )
    _holds(TORCH_BACKEND_CLASS, text(TORCH_BACKEND_CLASS), "share_cuda_visible_devices: bool = True")
    _holds(
        "TorchConfig",
        text("TorchConfig"),
        "backend: Optional[str] = None",
        "init_method: str = 'env'",
        "timeout_s: int = 1800",
        "return TorchConfigContextManager",
        "return TrainingFramework.TORCH",
    )
    _holds(
        "_setup_torch_process_group",
        text("_setup_torch_process_group"),
        "def _setup_torch_process_group(backend: str, world_rank: int, world_size: int, init_method: str, "
        "timeout_s: int=1800):",
    )
    _holds("_shutdown_torch", text("_shutdown_torch"), "def _shutdown_torch(destroy_process_group=False):")
    _holds(
        "_set_torch_distributed_env_vars",
        text("_set_torch_distributed_env_vars"),
        "def _set_torch_distributed_env_vars():",
    )
    _check_trainer_backend_names()


def _check_mirrored_start(on_start: str) -> None:
    """Ray's ``_TorchBackend.on_start`` still takes, for gloo and nccl, the steps ``LeanTorchBackend.on_start`` takes."""
    _holds(
        f"{TORCH_BACKEND_CLASS}.on_start",
        on_start,
        "backend = backend_config.backend",
        "master_addr, master_port = worker_group.execute_single(0, get_address_and_port)",
        "if backend_config.init_method == 'env':",
        "os.environ['MASTER_ADDR'] = addr",
        "os.environ['MASTER_PORT'] = str(port)",
        "url = 'env://'",
        "url = f'tcp://{build_address(master_addr, master_port)}'",
        "worker_group.execute(_set_torch_distributed_env_vars)",
        "worker_group.execute_single_async(i, _setup_torch_process_group, backend=backend, world_rank=i, "
        "world_size=len(worker_group), init_method=url, timeout_s=backend_config.timeout_s)",
        "ray.get(setup_futures)",
    )
    # Between the init method and the process groups, only TPU (tpu_dist) steps, which hpsearch hands to Ray.
    middle = on_start.split("url = f'tcp://", 1)[1].split("worker_group.execute(_set_torch_distributed_env_vars)")[0]
    allowed = ("else:", "if backend == 'tpu_dist':", "if not isinstance(worker_group, V1WorkerGroup):")
    steps = [line.strip() for line in middle.splitlines()[1:] if re.match(r" {8}\S", line)]
    if any(step not in allowed for step in steps):
        raise ContractBroken(f"ray.train.torch.config.{TORCH_BACKEND_CLASS}.on_start has another step: {steps}")


def _check_trainer_backend_names() -> None:
    """TorchTrainer names the backend (gloo, or nccl with GPUs) when its config has none; Ray's helpers the lean
    backend calls are still there."""
    trainer = _ray_train_source("v2", "torch", "torch_trainer.py")  # read: importing it imports torch
    if 'torch_config.backend = "nccl" if is_gpu_training else "gloo"' not in trainer:
        raise ContractBroken("ray.train.v2.torch.torch_trainer.TorchTrainer no longer names gloo or nccl itself")
    _mentions("ray.train._internal.utils:get_address_and_port", "get_node_ip_address()")
    for name in ("backend_cls", "train_func_context", "framework"):
        if not isinstance(getattr(_resolve("ray.train.backend:BackendConfig"), name, None), property):
            raise ContractBroken(f"ray.train.backend.BackendConfig.{name} is no longer a property")
    _resolve("ray.train.v2._internal.util:TrainingFramework.TORCH")


def lean_torch_config(
    set_master: Callable[[str, int], object],
    setup: Callable[[], object] | None = None,
    loopback_rendezvous: str | None = None,
) -> Any | None:
    """A backend config that sets up each trial's Torch process group as Ray's ``TorchConfig()`` does, and that
    the Train controller unpickles without importing torch; ``setup`` (if given) runs on every worker first.

    Internal ``torch-backend-mirror``: Ray's ``TorchConfig`` lives in ``ray.train.torch.config``, which imports
    torch, and the controller unpickles it (with the callbacks that hold it): about 1.5 CPU-seconds a trial
    in a process that never runs torch. This config's backend does in the controller what Ray's
    ``_TorchBackend`` does there for gloo and nccl (the master address from rank 0, ``MASTER_ADDR`` and
    ``MASTER_PORT`` or a ``tcp://`` URL, each rank's distributed environment and process group, the shutdown
    with Ray's timeout), and has the workers call Ray's own functions for each step, imported there. Any
    other backend is handed to Ray's ``_TorchBackend`` itself. ``None`` when the internal is missing: the
    trainer then takes :func:`torch_config_with_worker_setup` or Ray's own ``TorchConfig``.

    ``set_master(addr, port)`` runs on every worker with rank 0's address, as Ray's ``set_env_vars`` does
    (:func:`hpsearch.runtime.env.set_torch_master`: the one module that sets environment variables).
    ``loopback_rendezvous``: a rendezvous scheme that ``setup`` registers with PyTorch on every worker, used
    instead of ``env://`` when rank 0's address is a loopback one (every rank on this machine), for gloo and
    nccl (:mod:`hpsearch.runtime.train.loopback_store`).
    """
    if not available("torch-backend-mirror"):
        return None
    config = _lean_torch_config_class()()
    config.worker_setup = setup
    config.set_master = set_master
    config.loopback_rendezvous = loopback_rendezvous
    return config


#: The backends whose set-up :func:`lean_torch_config` does itself; any other is Ray's ``_TorchBackend``'s.
MIRRORED_BACKENDS = ("gloo", "nccl")


def _on_worker_torch_env() -> None:
    """On a Train worker: Ray's ``_set_torch_distributed_env_vars`` (LOCAL_RANK, RANK, WORLD_SIZE, ...)."""
    from ray.train.torch.config import _set_torch_distributed_env_vars  # lazy: torch, on the worker only

    _set_torch_distributed_env_vars()  # type: ignore[no-untyped-call]  # Ray's, unannotated


def _on_worker_process_group(**kwargs: Any) -> None:
    """On a Train worker: Ray's ``_setup_torch_process_group`` (``init_process_group``, NCCL's variables)."""
    from ray.train.torch.config import _setup_torch_process_group  # lazy: torch, on the worker only

    _setup_torch_process_group(**kwargs)


def _on_worker_shutdown(destroy_process_group: bool) -> None:
    """On a Train worker: Ray's ``_shutdown_torch``."""
    from ray.train.torch.config import _shutdown_torch  # lazy: torch, on the worker only

    _shutdown_torch(destroy_process_group=destroy_process_group)  # type: ignore[no-untyped-call]  # Ray's


def _url_address(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"  # Ray's build_address: IPv6 in brackets


@functools.cache
def _lean_torch_backend_class() -> type:
    """The backend class of :func:`lean_torch_config`'s config, made once per process."""
    import ray  # lazy: this module is imported before Ray in the search process
    from ray.exceptions import GetTimeoutError  # lazy: as above
    from ray.train._internal.utils import get_address_and_port  # lazy: as above
    from ray.train.backend import Backend  # lazy: as above
    from ray.train.constants import (  # lazy: as above
        DEFAULT_TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S,
        TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S,
    )

    log = logging.getLogger("ray.train.torch.config")

    class LeanTorchBackend(Backend):
        """Ray's ``_TorchBackend`` for gloo and nccl, run in the controller without torch."""

        share_cuda_visible_devices = True

        def on_start(self, worker_group: Any, backend_config: Any) -> None:
            if backend_config.worker_setup is not None:
                worker_group.execute(backend_config.worker_setup)
            if backend_config.backend not in MIRRORED_BACKENDS or backend_config.init_method not in ("env", "tcp"):
                backend_config.ray_backend().on_start(worker_group, backend_config.ray_config())  # imports torch
                return
            master_addr, master_port = worker_group.execute_single(0, get_address_and_port)
            if backend_config.init_method == "env":
                worker_group.execute(backend_config.set_master, addr=master_addr, port=master_port)
                url = "env://"
                if backend_config.loopback_rendezvous and is_loopback(master_addr):  # every rank on this machine
                    url = f"{backend_config.loopback_rendezvous}://{_url_address(master_addr, master_port)}"
            else:
                url = f"tcp://{_url_address(master_addr, master_port)}"
            worker_group.execute(_on_worker_torch_env)
            ray.get(
                [
                    worker_group.execute_single_async(
                        rank,
                        _on_worker_process_group,
                        backend=backend_config.backend,
                        world_rank=rank,
                        world_size=len(worker_group),
                        init_method=url,
                        timeout_s=backend_config.timeout_s,
                    )
                    for rank in range(len(worker_group))
                ]
            )

        def on_shutdown(self, worker_group: Any, backend_config: Any) -> None:
            if backend_config.backend not in MIRRORED_BACKENDS:
                backend_config.ray_backend().on_shutdown(worker_group, backend_config.ray_config())
                return
            futures = worker_group.execute_async(_on_worker_shutdown, destroy_process_group=len(worker_group) > 1)
            timeout_s = int(
                os.environ.get(TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S, DEFAULT_TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S)
            )
            try:
                ray.get(futures, timeout=timeout_s)
            except GetTimeoutError:
                log.warning(f"Torch process group shutdown timed out after {timeout_s} seconds")

    return LeanTorchBackend


@functools.cache
def _lean_torch_config_class() -> type:
    """The config class of :func:`lean_torch_config`, made once per process; Ray's cloudpickle sends it (and its
    backend) to the controller and the workers by value, and the functions above by reference."""
    from ray.train.backend import BackendConfig  # lazy: this module is imported before Ray in the search process
    from ray.train.v2._internal.util import TrainingFramework  # lazy: as above

    backend = _lean_torch_backend_class()

    class LeanTorchConfig(BackendConfig):
        """Ray's ``TorchConfig()`` (its defaults), with :class:`LeanTorchBackend`; ``worker_setup`` runs first."""

        def __init__(self) -> None:
            self.backend: str | None = None  # TorchTrainer sets gloo or nccl from the scaling config
            self.init_method = "env"
            self.timeout_s = 1800
            self.worker_setup: Callable[[], object] | None = None
            self.set_master: Callable[[str, int], object] | None = None
            self.loopback_rendezvous: str | None = None

        @property
        def backend_cls(self) -> type:
            return backend

        @property
        def train_func_context(self) -> Any:
            from ray.train.torch.config import TorchConfigContextManager  # lazy: read in the driver only (torch)

            return TorchConfigContextManager

        @property
        def framework(self) -> Any:
            return TrainingFramework.TORCH

        def to_dict(self) -> dict[str, Any]:
            return {"backend": self.backend, "init_method": self.init_method, "timeout_s": self.timeout_s}

        def ray_config(self) -> Any:
            from ray.train.torch.config import TorchConfig  # lazy: only a backend hpsearch does not mirror

            return TorchConfig(backend=self.backend, init_method=self.init_method, timeout_s=self.timeout_s)

        def ray_backend(self) -> Any:
            from ray.train.torch.config import _TorchBackend  # lazy: as above

            return _TorchBackend()

    return LeanTorchConfig


def torch_config_with_worker_setup(setup: Callable[[], object]) -> Any | None:
    """Ray's ``TorchConfig`` (its defaults), whose backend first runs ``setup`` on every Train worker.

    Internal ``torch-backend-start``: ``setup`` runs in each worker after the worker group
    starts and before Ray's backend sets up the Torch process group there (the environment it
    sets is what ``init_process_group`` reads). ``None`` when the internal is missing: the
    trainer then takes Ray's own ``TorchConfig``.
    """
    if not available("torch-backend-start"):
        return None
    config = _setup_torch_config_class()()
    config.worker_setup = setup
    return config


@functools.cache
def _setup_torch_config_class() -> type:
    """``TorchConfig`` with a backend that runs the config's ``worker_setup`` first; made once per process.

    Defined here, not at import: ``ray.train.torch`` imports torch. Ray's cloudpickle sends the
    classes to the Train controller by value.
    """
    # lazy: ray.train.torch imports torch (seconds), and only a trial driver builds a TorchConfig
    from ray.train.torch.config import TorchConfig, _TorchBackend

    class SetupTorchBackend(_TorchBackend):
        """Ray's Torch backend; the config's ``worker_setup`` runs on every worker before the process group."""

        def on_start(self, worker_group: Any, backend_config: Any) -> None:
            worker_group.execute(backend_config.worker_setup)
            _TorchBackend.on_start(self, worker_group, backend_config)

    class SetupTorchConfig(TorchConfig):
        """Ray's ``TorchConfig``, with :class:`SetupTorchBackend` as its backend."""

        @property
        def backend_cls(self) -> type:
            return SetupTorchBackend

    return SetupTorchConfig
