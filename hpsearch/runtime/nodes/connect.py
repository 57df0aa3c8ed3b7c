"""Connect to Ray and read the cluster's shape, node by node, for the planner.

With no address, hpsearch starts an embedded local Ray **with its dashboard on
127.0.0.1**. The dashboard serves the State API, which Ray Train's placement-group
cleanup needs. Without it, every trial stopped early (ASHA) leaks its workers'
placement group, and the search deadlocks. See docs/architecture.md, "The facts about
Ray that shaped the design".

Every other server of an embedded Ray listens on 127.0.0.1 as well: the GCS, the
raylet, the agents, and every worker's (:func:`hpsearch.runtime.env.loopback_only`).
This is checked right after Ray starts (:mod:`hpsearch.runtime.nodes.listening`). A socket
beyond the loopback stops the search. An embedded Ray also runs with Ray's token
authentication on every supported Ray (Ray 2.60 turns it on for a new local cluster, 2.58 does
not: :func:`hpsearch.runtime.env.token_authentication` does it there as Ray 2.60 does), with Ray's
token file readable by its owner only. Its dashboard is asked right after it starts: one that
answers without the token stops the search. A ``RAY_AUTH_MODE`` that turns it off is refused. On ``--address``, a cluster whose dashboard
takes a job request without a token gets one warning line. The environment Ray is started with is set by
:mod:`hpsearch.runtime.env`.
"""

from __future__ import annotations

import logging
import os
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

import ray
from ray.util.state import list_placement_groups

from hpsearch import messages
from hpsearch.errors import ClusterError
from hpsearch.planning.planner import HEAD_RESOURCE, Node
from hpsearch.runtime.env import (
    apply_driver_defaults,
    loopback_only,
    pin_state_api,
    private_token_file,
    token_authentication,
)
from hpsearch.runtime.nodes import listening, ray_logs

__all__ = [
    "connect",
    "job_cluster_address",
    "shared_cluster",
    "cluster_nodes",
    "waiting_worker_groups",
    "count_waiting",
    "is_worker_group",
]


def connect(address: str | None = None, *, verbose: bool = False, num_cpus: int | None = None) -> bool:
    """Make sure this process is connected to Ray; return True if this call started it.

    Args:
        address: ``None`` for an embedded local Ray (or the one already running in this
            process; in a ``ray job submit`` command, the job's cluster), else an existing
            cluster's address (``"auto"``, ``"ray://..."``, ``"host:port"``).
        verbose: Print Ray's own log lines on this terminal: the workers' output, Ray's
            warnings and Tune's errors. Without it they are kept in Ray's session folder
            only (see :mod:`hpsearch.runtime.nodes.ray_logs`).
        num_cpus: CPUs for an embedded local Ray (default: all of this machine's).
    """
    global _SHARED
    if ray.is_initialized():
        return False
    address = address or job_cluster_address()
    _SHARED = bool(address)
    if not address:
        _refuse_auth_off()  # before anything starts
    apply_driver_defaults()
    # Ray's lines go to its session folder, and to the terminal only when verbose (ray_logs says how).
    ray_logs.before_init(verbose=verbose)
    common: dict[str, Any] = {
        "log_to_driver": verbose,
        "logging_level": logging.INFO,  # what the terminal shows is ray_logs' business; the file keeps INFO
        "configure_logging": True,
    }
    if address:
        try:
            context = ray.init(address=address, **common)
        except ConnectionError as err:
            ray_logs.abandon()
            raise ClusterError(_cannot_connect(address, err)) from err
        line = _open_cluster_line(address, getattr(context, "dashboard_url", None))
        if line is not None:
            messages.say(line)
    else:
        # Ray Train's placement-group cleaner must ask this cluster's State API (see env.STATE_API_ADDRESS).
        port = _free_port()
        pin_state_api(port)
        token_authentication()  # on Ray 2.58 as on 2.60, with a private token file
        before = listening.driver_listeners()  # this process's own sockets are not the embedded Ray's
        # address="local" always starts a new embedded cluster, never one found on the machine by accident.
        # loopback_only puts every server of it on 127.0.0.1, not only the dashboard (see env.LOOPBACK_ONLY).
        with loopback_only():
            ray.init(
                address="local",
                include_dashboard=True,
                dashboard_host="127.0.0.1",
                dashboard_port=port,
                num_cpus=num_cpus,
                **common,
            )
        try:  # ... and measured: a server beyond the loopback stops the search before anything is written
            listening.check_loopback_only(before)
            private_token_file()  # Ray's ~/.ray/auth_token, if Ray made it, with the umask's mode: 0600
            _require_token(f"127.0.0.1:{port}")
        except ClusterError:
            ray.shutdown()
            ray_logs.abandon()
            raise
    ray_logs.after_init()
    return True


#: Whether this process joined a cluster other searches may share (``--address``, a job's cluster), not
#: an embedded Ray of its own: only then does a search register (runtime/search/room.py).
_SHARED = False


def shared_cluster() -> bool:
    """Whether this process's Ray is a cluster it may share with other searches (it connected to an address)."""
    return _SHARED and ray.is_initialized()


#: Set by Ray's job supervisor in the environment of a ``ray job submit`` entrypoint
#: (ray/dashboard/modules/job/job_supervisor.py, Ray 2.60), beside ``RAY_ADDRESS``.
JOB_MARKER = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def job_cluster_address(environ: Mapping[str, str] | None = None) -> str | None:
    """``"auto"`` when this process is a Ray job's command, else ``None``.

    A job must use the cluster it was submitted to (Ray sets ``RAY_ADDRESS`` for it, which
    ``"auto"`` follows): an embedded Ray started inside a job is a second cluster, whose
    workers cannot fetch the job's working-directory package, and every trial errors.
    """
    env = os.environ if environ is None else environ
    return "auto" if env.get(JOB_MARKER) else None


#: Ray's switch for token authentication, read from the environment only; a new local cluster
#: has it on unless this says otherwise (any value but ``token``, in any case, turns it off).
AUTH_MODE = "RAY_AUTH_MODE"


def _refuse_auth_off() -> None:
    """Refuse to start an embedded Ray without token authentication (the user's ``RAY_AUTH_MODE``)."""
    mode = os.environ.get(AUTH_MODE)
    if mode is not None and mode.lower() != "token":
        raise ClusterError(
            f"{AUTH_MODE}={mode!r} would start hpsearch's embedded Ray without token authentication, and "
            "hpsearch keeps it on: without it any process on this machine can run code in the search through "
            f"Ray's ports. Unset {AUTH_MODE} (or set {AUTH_MODE}=token), or run on a Ray cluster you started "
            "yourself (`ray start --head`) with --address."
        )


def _require_token(dashboard: str) -> None:
    """Right after an embedded Ray started: its dashboard must refuse a request without the token."""
    answered = _answers_without_token(dashboard)
    if answered:
        raise ClusterError(
            f"the embedded Ray's dashboard ({dashboard}) took a job request without a token: token "
            f"authentication is off, and any process on this machine could run code in the search. Set "
            f"{AUTH_MODE}=token in the environment before Python starts, or run on a Ray cluster you started "
            "yourself with it (ray start --head) and --address"
        )
    if answered is None:
        messages.say(f"cannot check that the embedded Ray requires a token: its dashboard ({dashboard}) did not answer")


def _answers_without_token(dashboard: str) -> bool | None:
    """Whether the cluster's dashboard answers a request that carries no token (Ray's job API, which
    runs code); ``None`` when it cannot be asked."""
    url = dashboard if "://" in dashboard else f"http://{dashboard}"
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/jobs/", timeout=10) as reply:
            return 200 <= int(reply.status) < 300
    except urllib.error.HTTPError as err:
        if err.code in (401, 403):
            return False
        return None
    except (OSError, ValueError):
        return None


def _open_cluster_line(address: str, dashboard: str | None) -> str | None:
    """One line when the cluster at ``address`` runs without token authentication, or when that cannot be checked."""
    if not dashboard:
        return f"cannot check whether the Ray cluster at {address} requires a token: it names no dashboard"
    answered = _answers_without_token(dashboard)
    if answered is None:
        return f"cannot check whether the Ray cluster at {address} requires a token: its dashboard did not answer"
    if answered:
        return (
            f"warning: the Ray cluster at {address} runs without token authentication: anyone who reaches its "
            f"ports can run code as you on it. Start it with {AUTH_MODE}=token (ray start --head, or KubeRay's "
            "authOptions: {mode: token}), and give this process the token (RAY_AUTH_TOKEN or ~/.ray/auth_token)"
        )
    return None


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


#: A placement group Ray has not placed yet (``PENDING``), or is placing again after a node left.
_NOT_PLACED = frozenset({"PENDING", "RESCHEDULING"})


def _bundles(bundles: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Bundles compared as Ray keeps them (amounts rounded to Ray's precision, so 0.1 + 0.2 is 0.3)."""
    return [{k: round(float(v), 6) for k, v in bundle.items()} for bundle in bundles]


def is_worker_group(group: Mapping[str, Any], job_id: str, shapes: list[list[dict[str, float]]]) -> bool:
    """Whether a placement group, as the State API lists it (``detail=True``), is ``job_id``'s and shaped
    like one of ``shapes`` (the worker groups a trial of the search can make)."""
    bundles = _bundles([b.get("unit_resources", {}) for b in group.get("bundles") or []])
    return group.get("creator_job_id") == job_id and any(bundles == _bundles(shape) for shape in shapes)


def count_waiting(groups: list[dict[str, Any]], job_id: str, shapes: list[list[dict[str, float]]]) -> int:
    """How many of ``job_id``'s placement groups shaped like one of ``shapes`` (trials' worker groups)
    Ray has not placed yet; ``groups`` as the State API lists them (``detail=True``)."""
    return sum(1 for g in groups if g.get("state") in _NOT_PLACED and is_worker_group(g, job_id, shapes))


def waiting_worker_groups(shapes: list[list[dict[str, float]]]) -> int:
    """How many trials of this search have a worker group that Ray has not placed yet.

    Such a trial's driver runs, but its workers wait for room. The count is this job's pending
    placement groups that are shaped like a worker group, as the State API lists them.
    """

    groups = list_placement_groups(
        filters=[("state", "!=", "REMOVED")], detail=True, limit=10_000, raise_on_missing_output=False
    )
    return count_waiting([vars(g) for g in groups], ray.get_runtime_context().get_job_id(), shapes)
