"""Connect to Ray and read the cluster's shape, node by node, for the planner.

With no address, hpsearch starts an embedded local Ray **with its dashboard on
127.0.0.1**: the dashboard serves the State API that Ray Train's placement-group
cleanup needs; without it every trial stopped early (ASHA) leaks its workers'
placement group and the search deadlocks (docs/architecture.md, "The facts about Ray
that shaped the design"). The environment Ray is started with is set by
:mod:`hpsearch.runtime.env`.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import uuid
from pathlib import Path
from typing import Any

from hpsearch.errors import ClusterError
from hpsearch.planning.planner import HEAD_RESOURCE, Node
from hpsearch.runtime.env import apply_driver_defaults, pin_state_api

__all__ = ["connect", "cluster_nodes", "check_shared_storage"]


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
    apply_driver_defaults()
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
        # Ray Train's placement-group cleaner must ask this cluster's State API (see env.STATE_API_ADDRESS).
        port = _free_port()
        pin_state_api(port)
        # address="local": always a new embedded cluster, never one found on the machine by accident.
        ray.init(
            address="local",
            include_dashboard=True,
            dashboard_host="127.0.0.1",
            dashboard_port=port,
            num_cpus=num_cpus,
            **common,
        )
    return True


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


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
    for info in ray.nodes():  # type: ignore[no-untyped-call]  # Ray's nodes() has no annotations
        if not info.get("Alive", False):
            continue
        raw = info.get("Resources", {})
        resources = {k: float(v) for k, v in raw.items() if not k.startswith("node:")}
        nodes.append(
            Node(
                resources=resources,
                node_id=info.get("NodeID", ""),
                is_head=HEAD_RESOURCE in raw,
                labels=dict(info.get("Labels") or {}),
            )
        )
    return nodes


_PROBE_DIR = ".hpsearch-storage-check-"


def check_shared_storage(storage_path: Path, nodes: list[Node], *, timeout_s: float = 60.0) -> None:
    """With several nodes, check that every node can read and write ``storage_path``.

    A node-local path otherwise fails only at a trial's first checkpoint. Writes one
    file from here, has a zero-CPU task on every node read it and write its own, then
    removes them all.

    Raises:
        ClusterError: Naming the nodes that cannot reach the folder.
    """
    if len(nodes) <= 1:
        return
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    token = uuid.uuid4().hex
    probe_dir = Path(storage_path) / f"{_PROBE_DIR}{token}"
    probe_dir.mkdir(parents=True, exist_ok=True)
    try:
        (probe_dir / "from-driver").write_text(token)
        probe = ray.remote(num_cpus=0, max_retries=0)(_probe_storage)
        refs = {
            node.node_id: probe.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False)
            ).remote(str(probe_dir), token, node.node_id)
            for node in nodes
        }
        failures = []
        for node_id, ref in refs.items():
            try:
                error = ray.get(ref, timeout=timeout_s)
            except Exception as err:  # noqa: BLE001 - a node that cannot run the probe cannot run trials either
                error = f"the check could not run there: {type(err).__name__}: {err}"
            if error is None and not (probe_dir / f"from-{node_id}").is_file():
                error = "its file did not appear here"
            if error:
                failures.append(f"node {node_id}: {error}")
        if failures:
            raise ClusterError(
                f"storage_path {storage_path} is not shared by all {len(nodes)} nodes of the cluster:\n  "
                + "\n  ".join(failures)
                + "\nWith several nodes, storage_path must be storage every node reaches at the same path "
                "(an NFS or other shared mount): trials checkpoint there and resume from there."
            )
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)


def _probe_storage(folder: str, token: str, node_id: str) -> str | None:
    """Runs on one node: read the driver's file, write this node's."""
    probe = Path(folder)
    try:
        if (probe / "from-driver").read_text() != token:
            return f"{folder} holds other content there"
        (probe / f"from-{node_id}").write_text(token)
    except OSError as err:
        return f"{folder} is not reachable there ({err.strerror or err})"
    return None
