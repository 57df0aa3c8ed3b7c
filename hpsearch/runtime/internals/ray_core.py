"""Ray core: the switch that keeps an embedded Ray on the loopback, the driver's error printing, the node this
process is connected through, the head node's resource, Ray's settings read again.

Internals ``loopback-switch`` (:func:`loopback_flag`), ``driver-error-printing``
(:func:`set_driver_error_printing`), ``ray-node`` (:func:`current_node`), ``head-node-resource``,
``ray-config-reload`` (:func:`reload_ray_config`) and ``ray-draining-nodes`` (:func:`draining_nodes`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from hpsearch.errors import IncompatibleLibraryError
from hpsearch.runtime.internals.contract_checks import ContractBroken, _assigns, _mentions, _parameters, _resolve
from hpsearch.runtime.internals.registry import (
    HEAD_NODE_RESOURCE,
    LOOPBACK_ENV_VAR,
    available,
    library_versions,
    problem,
)

__all__ = [
    "NodeInfo",
    "current_node",
    "draining_nodes",
    "loopback_flag",
    "reload_ray_config",
    "set_driver_error_printing",
]


def _check_loopback() -> None:
    constants = _resolve("ray._private.ray_constants")
    if not isinstance(getattr(constants, "ENABLE_RAY_CLUSTER", None), bool):
        raise ContractBroken("ray._private.ray_constants.ENABLE_RAY_CLUSTER is no longer a bool")
    if getattr(constants, "ENABLE_RAY_CLUSTERS_ENV_VAR", None) != LOOPBACK_ENV_VAR:
        raise ContractBroken(f"ray._private.ray_constants no longer reads {LOOPBACK_ENV_VAR}")
    _mentions("ray._private.services:get_node_ip_address", "ray_constants.ENABLE_RAY_CLUSTER")


def _check_worker_logs() -> None:
    worker = _resolve("ray._private.worker")
    if not isinstance(getattr(worker, "_worker_logs_enabled", None), bool):
        raise ContractBroken("ray._private.worker._worker_logs_enabled is no longer a bool")
    _mentions("ray._private.worker:print_worker_logs", "_worker_logs_enabled")


def _check_node() -> None:
    _resolve("ray._private.worker:global_worker")
    _resolve("ray._private.worker:_global_node")
    node = _resolve("ray._private.node:Node")
    for name in ("get_logs_dir_path", "get_session_dir_path", "session_name"):
        if not hasattr(node, name):
            raise ContractBroken(f"ray._private.node.Node has no {name}")
    _assigns("ray._private.node:Node", "all_processes")


def _check_head_resource() -> None:
    value = getattr(_resolve("ray._common.constants"), "HEAD_NODE_RESOURCE_NAME", None)
    if value != HEAD_NODE_RESOURCE:
        raise ContractBroken(
            f"Ray's head-node resource is {value!r}, hpsearch places drivers on {HEAD_NODE_RESOURCE!r}"
        )


def _check_draining_nodes() -> None:
    _parameters("ray._private.state:GlobalState.get_draining_nodes")
    _resolve("ray._private.state:state")
    # {node id hex: deadline in ms, 0 = none}: the docstring is the contract Ray Train's watcher relies on too
    _mentions(
        "ray._private.state:GlobalState.get_draining_nodes", "timestamps in ms", "no deadline if the timestamp is 0"
    )


def _check_config_reload() -> None:
    _resolve("ray._raylet:Config.initialize")
    # a new local cluster in token mode gets a token made when it has none (Ray 2.58 and 2.60 alike)
    _mentions(
        "ray._private.authentication.authentication_token_setup:ensure_token_if_auth_enabled",
        "get_authentication_mode() != AuthenticationMode.TOKEN",
        "generate_and_save_token()",
    )


def reload_ray_config() -> bool:
    """Have Ray's core read its settings from the environment again, in this process (internal ``ray-config-reload``).

    Ray reads ``RAY_AUTH_MODE`` once, when Ray is imported. Ray 2.60's own ``ray.init`` sets it and calls
    this for a new local cluster (``_enable_token_auth``); Ray 2.58 does not. Returns whether it could.
    """
    if not available("ray-config-reload"):
        return False
    raylet: Any = import_module("ray._raylet")  # its type stubs leave out Config
    raylet.Config.initialize("")
    return True


@contextlib.contextmanager
def loopback_flag() -> Iterator[None]:
    """For the span of an embedded ``ray.init``: Ray's node address is the loopback (internal ``loopback-switch``).

    Ray reads :data:`LOOPBACK_ENV_VAR` into ``ray_constants.ENABLE_RAY_CLUSTER`` once, when it
    is first imported (usually long before ``ray.init``); the constant is set to what Ray
    would have read with the variable at 0, and restored after.

    Raises:
        IncompatibleLibraryError: when the internal is missing (an embedded Ray would listen
            on every interface).
    """
    if not available("loopback-switch"):
        raise IncompatibleLibraryError(
            f"the installed Ray ({library_versions()}) has no loopback switch hpsearch knows "
            f"({problem('loopback-switch')}); an embedded Ray would listen on every interface. "
            "Install a checked Ray, or start a cluster yourself and pass --address"
        )
    # lazy: a missing internal turns its feature off; it never fails the import
    from ray._private import ray_constants

    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def set_driver_error_printing(enabled: bool) -> bool:
    """Whether Ray prints the error messages its services publish to this driver (internal ``driver-error-printing``)."""
    if not available("driver-error-printing"):
        return False
    # lazy: a missing internal turns its feature off; it never fails the import
    import ray._private.worker as ray_worker

    ray_worker._worker_logs_enabled = enabled
    return True


def draining_nodes() -> dict[str, float | None] | None:
    """The nodes being drained, as ``{node id (hex): deadline (UNIX seconds) or None}`` (internal ``ray-draining-nodes``).

    ``None`` when the internal is missing. Ray Train's own preemption watcher asks the same (Ray 2.60); a node
    drained with no deadline has ``None``. Asks Ray's GCS: call it from a connected process.
    """
    if not available("ray-draining-nodes"):
        return None
    # lazy: a missing internal turns its feature off; it never fails the import
    from ray._private import state

    found: dict[str, int] = state.state.get_draining_nodes()
    return {str(node): (deadline_ms / 1000.0 if deadline_ms else None) for node, deadline_ms in found.items()}


@dataclass(frozen=True)
class NodeInfo:
    """The Ray node this driver runs on, as far as hpsearch needs it."""

    logs_dir: str | None
    session_dir: str | None
    session_name: str | None
    #: The PIDs of the processes Ray started for this node (only for a node this process started).
    started_pids: tuple[int, ...]


def current_node() -> NodeInfo | None:
    """The node this driver is connected through (internal ``ray-node``); ``None`` when not connected or unknown."""
    if not available("ray-node"):
        return None
    # lazy: a missing internal turns its feature off; it never fails the import
    import ray._private.worker as ray_worker

    node = ray_worker.global_worker.node if ray_worker.global_worker.connected else None
    if node is None:
        return None
    started = ray_worker._global_node  # set only for a node this process started (an embedded Ray)
    pids: list[int] = []
    if started is not None:
        for infos in started.all_processes.values():
            pids.extend(info.process.pid for info in infos)

    def ask(method: str) -> str | None:
        try:
            return str(getattr(node, method)())
        except Exception:  # noqa: BLE001 - where the logs are is a courtesy; never fail the search over it
            return None

    return NodeInfo(
        logs_dir=ask("get_logs_dir_path"),
        session_dir=ask("get_session_dir_path"),
        session_name=str(node.session_name),
        started_pids=tuple(pids),
    )
