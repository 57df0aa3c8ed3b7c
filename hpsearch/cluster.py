"""Connect to Ray and read the cluster's shape, node by node, for the planner.

With no address, hpsearch starts an embedded local Ray **with its dashboard on
127.0.0.1**: the dashboard serves the State API that Ray Train's placement-group
cleanup needs; without it every trial stopped early (ASHA) leaks its workers'
placement group and the search deadlocks (DESIGN.md, "Facts that bite").
"""

from __future__ import annotations

import logging
import os
from typing import Any

from hpsearch.errors import ClusterError
from hpsearch.planner import Node
from hpsearch.trainable import RAY_TRAIN_ENV_DEFAULTS

__all__ = ["connect", "cluster_nodes"]

_ENV = {"RAY_TRAIN_V2_ENABLED": "1"}


def connect(address: str | None = None, *, verbose: bool = False, num_cpus: int | None = None) -> bool:
    """Make sure this process is connected to Ray; return True if this call started it.

    Args:
        address: ``None`` for an embedded local Ray (or the one already running in this
            process), else an existing cluster's address (``"auto"``, ``"ray://..."``, ``"host:port"``).
        verbose: Forward the workers' output to this terminal.
        num_cpus: CPUs for an embedded local Ray (default: all of this machine's).
    """
    import ray

    if ray.is_initialized():
        return False
    for key, value in {**RAY_TRAIN_ENV_DEFAULTS, **_ENV}.items():
        os.environ.setdefault(key, value)
    common: dict[str, Any] = {
        "log_to_driver": verbose,
        "logging_level": logging.INFO if verbose else logging.WARNING,
        "configure_logging": True,
    }
    if address:
        try:
            ray.init(address=address, **common)
        except ConnectionError as err:
            raise ClusterError(_cannot_connect(address, err)) from err
    else:
        ray.init(include_dashboard=True, dashboard_host="127.0.0.1", num_cpus=num_cpus, **common)
    return True


def _cannot_connect(address: str, err: Exception) -> str:
    message = f"cannot connect to the Ray cluster at {address!r}: {err}"
    if address != "auto" and os.environ.get("RAY_AUTH_MODE") is None:
        message += (
            "\nRay clusters use token authentication by default, and Ray only sends the token to an "
            "explicit address when RAY_AUTH_MODE=token is set (the token comes from RAY_AUTH_TOKEN or "
            "~/.ray/auth_token). Set it, or use --address auto on a node of the cluster."
        )
    return message


def cluster_nodes() -> list[Node]:
    """The alive nodes of the connected cluster with their total resources."""
    import ray

    nodes = []
    for info in ray.nodes():
        if not info.get("Alive", False):
            continue
        resources = {
            k: float(v) for k, v in info.get("Resources", {}).items() if not k.startswith("node:")
        }
        nodes.append(Node(resources=resources, node_id=info.get("NodeID", "")))
    return nodes
