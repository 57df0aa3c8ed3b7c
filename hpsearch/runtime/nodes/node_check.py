"""The node check: every node of a cluster probed once, before the first trial, and the search refused in one message.

With several nodes, :func:`check_nodes` runs one zero-CPU task pinned to each alive node
(:func:`hpsearch.runtime.nodes.node_facts.probe_node`, shipped by value so that a node with another
hpsearch still answers) and waits for them all together, up to a timeout. Each reads and writes
a file under ``storage_path``, unpickles the train loop as Ray's workers will, and reports its
host name and what it resolves to, the interface of its Ray IP, ``GLOO_SOCKET_IFNAME`` and
``NCCL_SOCKET_IFNAME``, and its Ray, hpsearch, torch and Python versions.
:func:`hpsearch.runtime.nodes.node_facts.assess` compares them with the search process's own, and a
:class:`~hpsearch.errors.ClusterError` names each bad node by host name and IP.

A host whose name resolves to a loopback address is refused only where hpsearch cannot pin
its trial workers' interface: :func:`pin_worker_interface` runs in every Train worker before
its Torch process group starts (internal ``torch-backend-start``), and the check prints one
line per host it pins.
"""

from __future__ import annotations

import dataclasses
import shutil
import socket
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray import cloudpickle
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from hpsearch import messages
from hpsearch.errors import ClusterError
from hpsearch.runtime import internals
from hpsearch.runtime.nodes import node_facts
from hpsearch.runtime.nodes.node_facts import NodeFacts

if TYPE_CHECKING:
    from hpsearch.planning.planner import Node
    from hpsearch.spec import Scaling, Spec

__all__ = ["PROBE_DIR", "check_nodes", "pin_worker_interface", "worker_nodes"]

#: The folder the storage check writes in ``storage_path`` (``<this><token>``), removed after.
PROBE_DIR = ".hpsearch-storage-check-"
#: The internal that lets each Train worker pin its interface before the process group starts.
PIN_INTERNAL = "torch-backend-start"


def check_nodes(spec: Spec, nodes: Sequence[Node], *, timeout_s: float = 60.0) -> None:
    """With several nodes, check every node once, before the first trial; refuse the search in one message.

    Checks that every node reaches ``storage_path``, runs the search process's ray, hpsearch,
    torch and Python minor version, can load the train loop, and (for trials of several
    workers) that trial workers on different hosts can reach each other: a host whose name
    resolves to a loopback address is named, unless hpsearch pins its workers' interface,
    which prints one line per host. Skipped on one node.

    Raises:
        ClusterError: Naming each bad node by host name and IP, what is wrong there and what to do.
    """
    if len(nodes) <= 1:
        return
    token = uuid.uuid4().hex
    probe_dir = Path(spec.storage_path) / f"{PROBE_DIR}{token}"
    probe_dir.mkdir(parents=True, exist_ok=True)
    try:
        (probe_dir / "from-driver").write_text(token)
        facts = _probe_all(nodes, str(probe_dir), token, _pickled_loop(spec), timeout_s)
        facts = _without_departed(facts)
        facts = [f if f.storage_error or not f.answered or _wrote_back(probe_dir, f) else _lost(f) for f in facts]
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    pinning_off = internals.broken().get(PIN_INTERNAL)
    found = node_facts.assess(
        facts,
        own_versions=node_facts.local_versions(),
        own_host=socket.gethostname(),
        storage_path=str(spec.storage_path),
        loop=spec.trainable,
        workers=spec.scaling.workers,
        worker_nodes=worker_nodes(spec.scaling, nodes),
        pinning_off=None if pinning_off is None else f"Ray internal {PIN_INTERNAL}: {pinning_off}",
        timeout_s=timeout_s,
    )
    refusal = found.refusal()
    if refusal is not None:
        raise ClusterError(refusal)
    for note in found.notes:
        messages.say(note)


def worker_nodes(scaling: Scaling, nodes: Sequence[Node]) -> set[str]:
    """The ids of the nodes one Train worker fits on, of any trial the scaling allows (by total resources)."""
    bundles = [one.worker_bundle() for one in scaling.combinations()]
    return {
        node.node_id
        for node in nodes
        if any(all(node.resources.get(k, 0.0) >= v for k, v in bundle.items()) for bundle in bundles)
    }


def pin_worker_interface() -> dict[str, str]:
    """In each Train worker, before its Torch process group starts: pin gloo's (and NCCL's) interface where needed.

    On a host whose name resolves to a loopback address while the node's Ray IP is not one,
    and without ``GLOO_SOCKET_IFNAME``: sets it (and ``NCCL_SOCKET_IFNAME`` when unset) to the
    interface holding the node's Ray IP. Returns what it set (empty elsewhere).
    """
    return node_facts.apply_socket_pin(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]  # Ray's API is unannotated


def _pickled_loop(spec: Spec) -> bytes | None:
    """The train loop as Ray's cloudpickle sends it to the workers (its .py file and helpers by value).

    ``None`` when it does not pickle here: Tune then fails on it as it always has, with its own message.
    """
    # lazy: Train workers import this module for pin_worker_interface, and need nothing of datasets
    from hpsearch.runtime.datasets import register_by_value

    loop = spec.load_trainable()
    register_by_value(loop)
    try:
        blob: bytes = cloudpickle.dumps(loop)  # type: ignore[no-untyped-call]  # vendored, unannotated
    except Exception:  # noqa: BLE001 - not this check's finding: nothing about the nodes is learned from it
        return None
    return blob


def _probe_all(nodes: Sequence[Node], folder: str, token: str, loop: bytes | None, timeout_s: float) -> list[NodeFacts]:
    """One probe per node, all at once; a node that does not answer within ``timeout_s`` is named as such."""
    known = _ray_nodes()
    module = sys.modules[node_facts.__name__]
    cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]  # vendored, unannotated
    try:  # the probe travels by value: a node with another hpsearch, or none, still answers
        probe = ray.remote(num_cpus=0, max_retries=0)(node_facts.probe_node)
        loop_ref: Any = ray.put(loop)  # once, for every node's probe
        refs = {
            node.node_id: probe.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False)
            ).remote(node.node_id, known.get(node.node_id, ("?", "?"))[1], folder, token, loop_ref)
            for node in nodes
        }
    finally:
        cloudpickle.unregister_pickle_by_value(module)  # type: ignore[no-untyped-call]  # vendored, unannotated
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
    done = set(ready)
    facts = []
    for node_id, ref in refs.items():
        hostname, ip = known.get(node_id, ("?", "?"))
        if ref not in done:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - a probe that cannot be cancelled ends with its node; the finding stands
                pass
            facts.append(NodeFacts(node_id, hostname, ip, probe_error=f"no answer within {timeout_s:g} s"))
            continue
        try:
            answer: dict[str, Any] = ray.get(ref)
        except Exception as err:  # noqa: BLE001 - a node that cannot run the probe cannot run trials either
            facts.append(NodeFacts(node_id, hostname, ip, probe_error=f"the check could not run there: {_short(err)}"))
            continue
        facts.append(NodeFacts.from_probe(node_id, answer))
    return facts


def _without_departed(facts: list[NodeFacts]) -> list[NodeFacts]:
    """Drop the nodes that did not answer because they left the cluster meanwhile (Ray lists them dead now).

    A node that dies just before a search starts is still listed alive until Ray's health checks
    notice; it holds no trial, so it is no reason to refuse the search. One line names it.
    """
    alive = {str(info.get("NodeID", "")) for info in ray.nodes() if info.get("Alive")}  # type: ignore[no-untyped-call]  # Ray's nodes() has no annotations
    kept = []
    for fact in facts:
        if fact.answered or fact.node_id in alive:
            kept.append(fact)
        else:
            messages.say(
                f"host {fact.hostname} ({fact.node_ip}) left the cluster during hpsearch's node check; no trial runs there"
            )
    return kept


def _ray_nodes() -> dict[str, tuple[str, str]]:
    """Node id -> (host name, IP), as Ray knows its nodes."""
    return {
        str(info.get("NodeID", "")): (
            str(info.get("NodeManagerHostname", "?")),
            str(info.get("NodeManagerAddress", "?")),
        )
        for info in ray.nodes()  # type: ignore[no-untyped-call]  # Ray's nodes() has no annotations
    }


def _wrote_back(probe_dir: Path, facts: NodeFacts) -> bool:
    return (probe_dir / f"from-{facts.node_id}").is_file()


def _lost(facts: NodeFacts) -> NodeFacts:
    """A node whose storage write said it worked, but whose file never appeared here: not the same folder."""
    return dataclasses.replace(facts, storage_error="its file did not appear here (a folder of its own there)")


def _short(err: BaseException) -> str:
    """An error from a probe, in one line: Ray's task error is its cause's last line."""
    text = str(err).strip().splitlines()
    return text[-1] if text else type(err).__name__
