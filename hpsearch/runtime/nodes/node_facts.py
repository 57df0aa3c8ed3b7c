"""What the node check learns on each node, and what it makes of it; nothing here imports Ray.

:mod:`hpsearch.runtime.nodes.node_check` runs :func:`probe_node` once on every node of a cluster
before the first trial. It returns plain values: the host's name and what that name resolves
to, the interface holding the node's Ray IP, ``GLOO_SOCKET_IFNAME`` and ``NCCL_SOCKET_IFNAME``,
the versions of Ray, hpsearch, torch and Python, whether the train loop unpickles there as
Ray's workers unpickle it, and whether ``storage_path`` is shared. :func:`assess` compares
them with the search process's own and says what refuses the search, in one message.

The probe is shipped to the nodes by value (this module needs only the standard library and
psutil, which ships with Ray), so a node with another hpsearch, or none, still answers.

:func:`apply_socket_pin` is what each Train worker runs before its Torch process group starts:
a host whose name resolves to a loopback address would make gloo tell the other hosts to
reach its workers there, and every trial that spans hosts would fail.
"""

from __future__ import annotations

import ipaddress
import os
import pickle
import socket
import sys
from collections.abc import Collection, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psutil

__all__ = [
    "GLOO_IFNAME",
    "NCCL_IFNAME",
    "VERSIONED",
    "Assessment",
    "NodeFacts",
    "apply_socket_pin",
    "assess",
    "interface_holding",
    "is_loopback",
    "local_versions",
    "probe_node",
    "resolve_hostname",
    "socket_pin",
]

#: The variable gloo reads for the interface its sockets bind to (and advertise to the other ranks).
GLOO_IFNAME = "GLOO_SOCKET_IFNAME"
#: NCCL's equivalent, for its bootstrap and socket transport.
NCCL_IFNAME = "NCCL_SOCKET_IFNAME"
#: What every node must run at the search process's version: three distributions and Python's minor version.
VERSIONED = ("ray", "hpsearch", "torch", "python")


# ----------------------------------------------------------------------------- facts of this host


def is_loopback(address: str) -> bool:
    """Whether ``address`` is reachable from this machine only: the one loopback rule of hpsearch.

    ``127.0.0.0/8``, ``::1`` and the IPv4-mapped ``::ffff:127.x.x.x`` (a dual-stack socket on
    127.0.0.1, as gRPC binds it) are; ``0.0.0.0``, ``::``, every interface address and
    anything that does not parse are not. A link-local address may carry a zone (``%eth0``).
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def resolve_hostname(hostname: str) -> tuple[tuple[str, ...], str | None]:
    """The addresses ``hostname`` resolves to, in the order gloo tries them, and the error when it does not resolve.

    Gloo (``torch.distributed``'s CPU backend) resolves the host's name as this does
    (``getaddrinfo``, any family, stream sockets) and binds to the first address that works; a
    name that does not resolve makes it fall back to 127.0.0.1.
    """
    try:
        found = socket.getaddrinfo(hostname, None, socket.AF_UNSPEC, socket.SOCK_STREAM)
    except OSError as err:
        return (), f"{type(err).__name__}: {err}"
    return tuple(dict.fromkeys(str(info[4][0]) for info in found)), None


def interface_holding(ip: str, interfaces: Mapping[str, Sequence[Any]] | None = None) -> str | None:
    """The network interface that holds ``ip`` (``psutil.net_if_addrs()`` unless given), or ``None``."""
    try:
        wanted = ipaddress.ip_address(ip.split("%")[0])
    except ValueError:
        return None
    for name, addresses in (psutil.net_if_addrs() if interfaces is None else interfaces).items():
        for entry in addresses:
            if entry.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            try:
                if ipaddress.ip_address(str(entry.address).split("%")[0]) == wanted:
                    return str(name)
            except ValueError:
                continue
    return None


def local_versions() -> dict[str, str | None]:
    """This process's ray, hpsearch and torch (as installed; torch is not imported) and Python's major.minor."""
    found: dict[str, str | None] = {}
    for name in VERSIONED[:-1]:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    found["python"] = f"{sys.version_info.major}.{sys.version_info.minor}"
    return found


def _storage_error(folder: str, token: str, node_id: str) -> str | None:
    """Read the search process's file in ``folder`` and write this node's; what went wrong, or ``None``."""
    probe = Path(folder)
    try:
        if (probe / "from-driver").read_text() != token:
            return f"{folder} holds other content there"
        (probe / f"from-{node_id}").write_text(token)
    except OSError as err:
        return f"{folder} is not reachable there ({err.strerror or err})"
    return None


def _loop_error(loop: bytes | None) -> str | None:
    """Unpickle the train loop as Ray's workers do; the exception's type and message, or ``None``."""
    if loop is None:
        return None
    try:
        pickle.loads(loop)  # cloudpickle's output is plain pickle; a by-value module comes with it
    except (Exception, SystemExit) as err:  # noqa: BLE001 - whatever the loop's import raises is the finding
        return f"{type(err).__name__}: {err}"
    return None


def probe_node(node_id: str, node_ip: str, folder: str | None, token: str, loop: bytes | None) -> dict[str, Any]:
    """Runs on one node (a zero-CPU task pinned there): this host's facts, as plain values.

    ``folder`` is the storage check's folder under ``storage_path`` (``None``: no storage
    check); ``loop`` the train loop as cloudpickle wrote it in the search process.
    """
    hostname = socket.gethostname()
    resolved, resolve_error = resolve_hostname(hostname)
    return {
        "hostname": hostname,
        "node_ip": node_ip,
        "resolved": list(resolved),
        "resolve_error": resolve_error,
        "interface": interface_holding(node_ip),
        "socket_env": {name: os.environ[name] for name in (GLOO_IFNAME, NCCL_IFNAME) if os.environ.get(name)},
        "versions": local_versions(),
        "storage_error": None if folder is None else _storage_error(folder, token, node_id),
        "loop_error": _loop_error(loop),
    }


# ----------------------------------------------------------------------------- the interface pin


def _name_is_loopback(resolved: Sequence[str]) -> bool:
    """Whether gloo would advertise a loopback address: the name's first address is one, or it does not resolve."""
    return not resolved or is_loopback(resolved[0])


def socket_pin(
    *, resolved: Sequence[str], node_ip: str, interface: str | None, environ: Mapping[str, str]
) -> dict[str, str]:
    """The variables a Train worker needs so that gloo (and NCCL) use the interface of the node's Ray IP.

    gloo listens on, and tells its peers, the address the host's name resolves to. Two cases need
    the node's interface instead, where ``GLOO_SOCKET_IFNAME`` is not set already and an interface
    holds the node's IP:

    - the host's name resolves to a loopback address (or not at all) while the node's Ray IP is
      not a loopback one: the other hosts' workers could not reach this one;
    - the node's Ray IP is a loopback one (an embedded Ray: every rank on this machine) while the
      host's name resolves beyond it: gloo would listen where other machines reach it.

    Then ``GLOO_SOCKET_IFNAME``, and ``NCCL_SOCKET_IFNAME`` when it is not set either. Empty elsewhere.
    """
    if environ.get(GLOO_IFNAME) or interface is None or is_loopback(node_ip) == _name_is_loopback(resolved):
        return {}
    pin = {GLOO_IFNAME: interface}
    if not environ.get(NCCL_IFNAME):
        pin[NCCL_IFNAME] = interface
    return pin


def apply_socket_pin(node_ip: str, environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """In a Train worker, before ``torch.distributed`` starts: set what :func:`socket_pin` says; return it.

    ``node_ip`` is the node's Ray IP; ``environ`` is ``os.environ`` unless given.
    """
    env = os.environ if environ is None else environ
    resolved, _ = resolve_hostname(socket.gethostname())
    pin = socket_pin(resolved=resolved, node_ip=node_ip, interface=interface_holding(node_ip), environ=env)
    env.update(pin)
    return pin


# ----------------------------------------------------------------------------- the facts, compared


@dataclass(frozen=True)
class NodeFacts:
    """What the node check learned on one node (``probe_error``: why it learned nothing there)."""

    node_id: str
    hostname: str
    node_ip: str
    resolved: tuple[str, ...] = ()
    resolve_error: str | None = None
    interface: str | None = None
    socket_env: Mapping[str, str] = field(default_factory=dict)
    versions: Mapping[str, str | None] = field(default_factory=dict)
    storage_error: str | None = None
    loop_error: str | None = None
    probe_error: str | None = None

    @classmethod
    def from_probe(cls, node_id: str, answer: Mapping[str, Any]) -> NodeFacts:
        """From :func:`probe_node`'s answer (plain values, so any hpsearch's probe reads)."""
        return cls(
            node_id=node_id,
            hostname=str(answer.get("hostname") or "?"),
            node_ip=str(answer.get("node_ip") or "?"),
            resolved=tuple(answer.get("resolved") or ()),
            resolve_error=answer.get("resolve_error"),
            interface=answer.get("interface"),
            socket_env=dict(answer.get("socket_env") or {}),
            versions=dict(answer.get("versions") or {}),
            storage_error=answer.get("storage_error"),
            loop_error=answer.get("loop_error"),
        )

    @property
    def answered(self) -> bool:
        """Whether the probe ran there (else only Ray's name and IP for the node are known)."""
        return self.probe_error is None

    def pin(self) -> dict[str, str]:
        """What hpsearch's interface pin sets for trial workers on this node (:func:`socket_pin`)."""
        return socket_pin(
            resolved=self.resolved, node_ip=self.node_ip, interface=self.interface, environ=self.socket_env
        )


@dataclass(frozen=True)
class Assessment:
    """What :func:`assess` found: ``problems`` refuse the search (one message), ``notes`` are printed."""

    problems: list[str]
    notes: list[str]

    def refusal(self) -> str | None:
        """The one message that refuses the search, or ``None`` when nothing does (several problems: numbered)."""
        if len(self.problems) <= 1:
            return self.problems[0] if self.problems else None
        parts = [f"{i}. " + problem.replace("\n", "\n   ") for i, problem in enumerate(self.problems, 1)]
        header = f"the cluster's nodes cannot run this search ({len(parts)} problems, found before the first trial):"
        return "\n".join([header, *parts])


def _labels(facts: Sequence[NodeFacts]) -> dict[str, str]:
    """``host h2 (10.0.0.2)`` for each node id, with Ray's node id where two nodes share a host and IP."""
    seen: dict[tuple[str, str], int] = {}
    for f in facts:
        seen[(f.hostname, f.node_ip)] = seen.get((f.hostname, f.node_ip), 0) + 1
    return {
        f.node_id: f"host {f.hostname} ({f.node_ip}"
        + (f", node {f.node_id[:12]})" if seen[(f.hostname, f.node_ip)] > 1 else ")")
        for f in facts
    }


def assess(
    facts: Sequence[NodeFacts],
    *,
    own_versions: Mapping[str, str | None],
    own_host: str,
    storage_path: str,
    loop: str,
    workers: int,
    worker_nodes: Collection[str] | None = None,
    pinning_off: str | None = None,
    timeout_s: float = 60.0,
) -> Assessment:
    """Compare every node's facts with the search process's own; each problem is one part of the refusal.

    Args:
        facts: One per node of the cluster.
        own_versions: The search process's :func:`local_versions`.
        own_host: The search process's host name (the versions table's first row).
        storage_path: The spec's ``storage_path``, as the refusal names it.
        loop: The spec's train loop reference, as the refusal names it.
        workers: The most Train workers a trial has.
        worker_nodes: The ids of the nodes a Train worker fits on (``None``: every node).
        pinning_off: Why hpsearch cannot pin trial workers' interface (``None``: it can).
        timeout_s: How long the check waited for each node (named for a node that did not answer).
    """
    labels = _labels(facts)
    answered = [f for f in facts if f.answered]
    problems: list[str] = []
    silent = [f for f in facts if not f.answered]
    if silent:
        problems.append(
            f"{len(silent)} of {len(facts)} nodes did not answer hpsearch's check (a zero-CPU task on each node, "
            f"waited for up to {timeout_s:g} s); a node that cannot run it cannot run trials either:\n  "
            + "\n  ".join(f"{labels[f.node_id]}: {f.probe_error}" for f in silent)
        )
    storage = [f for f in answered if f.storage_error]
    if storage:
        problems.append(
            f"storage_path {storage_path} is not shared by all {len(facts)} nodes of the cluster:\n  "
            + "\n  ".join(f"{labels[f.node_id]}: {f.storage_error}" for f in storage)
            + "\nWith several nodes, storage_path must be storage every node reaches at the same path "
            "(an NFS or other shared mount): trials checkpoint there and resume from there."
        )
    skew = _version_skew(answered, labels, own_versions, own_host)
    if skew:
        problems.append(skew)
    loops = [f for f in answered if f.loop_error]
    if loops:
        problems.append(
            f"the train loop {loop} cannot be loaded on {len(loops)} of {len(facts)} nodes, as Ray's workers "
            "load it there:\n  "
            + "\n  ".join(f"{labels[f.node_id]}: {f.loop_error}" for f in loops)
            + "\nhpsearch ships the loop's own .py file and the modules beside it to every node; whatever else it "
            "imports (an installed package, a module on this machine's PYTHONPATH) must be importable on every node."
        )
    loopback, notes = _loopback_hosts(answered, labels, workers, worker_nodes, pinning_off)
    problems.extend(loopback)
    return Assessment(problems, notes)


def _version_skew(
    facts: Sequence[NodeFacts], labels: Mapping[str, str], own: Mapping[str, str | None], own_host: str
) -> str | None:
    """The versions table, when a node runs another version than the search process (``*`` marks each)."""
    reference = {name: own.get(name) or _most_common(f.versions.get(name) for f in facts) for name in VERSIONED}
    differing = {f.node_id: [n for n in VERSIONED if f.versions.get(n) != reference[n]] for f in facts}
    if not any(differing.values()):
        return None
    rows = [["", *VERSIONED, ""], [f"this process ({own_host})", *(own.get(n) or "none" for n in VERSIONED), ""]]
    for f in facts:
        off = differing[f.node_id]
        cells = [(f.versions.get(n) or "none") + ("*" if n in off else "") for n in VERSIONED]
        rows.append([labels[f.node_id], *cells, f"differs: {', '.join(off)}" if off else ""])
    widths = [max(len(row[i]) for row in rows) for i in range(len(VERSIONED) + 1)]
    table = "\n  ".join(
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths)), row[-1]]).rstrip() for row in rows
    )
    bad = sum(1 for off in differing.values() if off)
    return (
        f"{bad} of {len(facts)} nodes run other versions than this search process (* marks each difference):\n  "
        + table
        + "\nInstall the same ray, hpsearch and torch, on the same Python minor version, on every node (one image or "
        "environment for all): a trial's driver, controller and workers pass pickled objects between nodes."
    )


def _most_common(values: Iterable[str | None]) -> str | None:
    """The value most nodes have: torch need not be installed where the search runs, so the nodes agree among
    themselves."""
    counts: dict[str, int] = {}
    for value in values:
        if value is not None:
            counts[value] = counts.get(value, 0) + 1
    return max(counts, key=lambda v: counts[v]) if counts else None


def _loopback_hosts(
    facts: Sequence[NodeFacts],
    labels: Mapping[str, str],
    workers: int,
    worker_nodes: Collection[str] | None,
    pinning_off: str | None,
) -> tuple[list[str], list[str]]:
    """Hosts whose name resolves to a loopback address: a note where hpsearch pins their workers' interface,
    else a refusal.

    Only for trials of several workers on the nodes a worker fits on. A refusal only when those
    are more than one host (two IPs): gloo on one host reaches itself over the loopback.
    """
    hosting = [f for f in facts if worker_nodes is None or f.node_id in worker_nodes]
    if workers <= 1:
        return [], []
    several_hosts = len({f.node_ip for f in hosting}) > 1
    problems: list[str] = []
    notes: list[str] = []
    seen: set[tuple[str, str]] = set()
    for f in hosting:
        host = (f.hostname, f.node_ip)
        if host in seen or f.socket_env.get(GLOO_IFNAME) or is_loopback(f.node_ip):
            continue
        if not _name_is_loopback(f.resolved):
            continue
        seen.add(host)
        label = f"host {f.hostname} ({f.node_ip})"
        resolves = f"resolves to {f.resolved[0]}" if f.resolved else f"does not resolve ({f.resolve_error})"
        pin = f.pin()
        if pinning_off is None and pin:
            notes.append(
                f"{label}: its name {resolves}; trial workers there use "
                + " and ".join(f"{k}={v}" for k, v in pin.items())
            )
            continue
        if not several_hosts:
            continue
        if f.resolved:
            gloo = (
                f"{resolves}, a loopback address, so gloo there would tell the other hosts to reach its trial "
                f"workers at {f.resolved[0]}"
            )
        else:
            gloo = (
                f"{resolves}, so gloo there falls back to 127.0.0.1 and would tell the other hosts to reach its "
                "trial workers there"
            )
        if f.interface is not None:
            variable = (
                f"set {GLOO_IFNAME}={f.interface} ({NCCL_IFNAME}={f.interface} too with GPUs), the interface "
                f"holding {f.node_ip},"
            )
        else:
            variable = (
                f"set {GLOO_IFNAME} ({NCCL_IFNAME} too with GPUs) to the interface the other hosts reach "
                f"{f.hostname} through,"
            )
        cannot = pinning_off or f"no interface there holds {f.node_ip}"
        problems.append(
            f"{label}: its name {gloo}, and every {workers}-worker trial that spans hosts would fail (gloo: Connection "
            f"refused, after its timeouts); hpsearch cannot set the interface itself here ({cannot}). Fix one of:\n"
            f"  - {variable} in the environment of `ray start` on {f.hostname};\n"
            f"  - make {f.hostname} resolve to {f.node_ip} (a line `{f.node_ip} {f.hostname}` in its /etc/hosts"
            + (", in place of the loopback one)." if f.resolved else ").")
        )
    return problems, notes
