"""The cluster's register of hpsearch searches: one detached, named Ray actor every search on the cluster talks to.

The actor, ``register`` in the ``hpsearch`` namespace, runs on the head node and outlives the search
that made it: the first search on a cluster creates it (``get_if_exists``), the others find it by
name. It holds a :class:`~hpsearch.planning.shares.Book` and reads the cluster's nodes itself, so each
search's heartbeat is answered with its share as the cluster is now. It holds nothing a search
cannot tell it again: a register that restarts (``max_restarts``) is whole after one heartbeat of each
search, and a search that dies is dropped after :data:`~hpsearch.planning.shares.TTL_S`.

The actor's methods run in the REGISTER ACTOR; the functions below run in the search process,
``hpsearch status`` and ``hpsearch plan --address``.
"""

from __future__ import annotations

import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from hpsearch.planning.planner import Node
from hpsearch.planning.shares import Allotment, Book, Entry
from hpsearch.runtime.nodes.connect import cluster_nodes

__all__ = ["NAME", "NAMESPACE", "SearchRegister", "register", "find_register", "listing"]

NAME = "register"
NAMESPACE = "hpsearch"
#: How long a call to the register may take before the search goes on without its answer.
CALL_TIMEOUT_S = 10.0


class SearchRegister:
    """The actor's class: a :class:`~hpsearch.planning.shares.Book` over the cluster's live nodes."""

    def __init__(self) -> None:
        self._book = Book()

    def beat(self, entry: Entry) -> tuple[Allotment, str | None]:
        """A search says where it stands; it is told how many trials it may run at once, and why it waits."""
        return self._book.beat(entry, _nodes(), time.time())

    def leave(self, key: str) -> None:
        """A search ended: its room goes to the others at once."""
        self._book.leave(key)

    def listing(self) -> tuple[list[tuple[Entry, Allotment]], list[Node]]:
        """Every search on the register with its allotment, and the nodes they share."""
        nodes = _nodes()
        return self._book.listing(nodes, time.time()), nodes


def _nodes() -> list[Node]:
    """The cluster's live nodes, without the ``node:`` markers (the planner's view)."""
    return cluster_nodes()


def _head_node_id() -> str | None:
    for node in cluster_nodes():
        if node.is_head:
            return node.node_id
    return None


def register() -> Any:
    """The cluster's register (an actor handle), created on the head node by the first search that asks."""
    head = _head_node_id()
    options: dict[str, Any] = {
        "name": NAME,
        "namespace": NAMESPACE,
        "lifetime": "detached",
        "get_if_exists": True,
        "num_cpus": 0,
        "max_restarts": -1,
        "max_task_retries": 3,
    }
    if head is not None:  # the head lives as long as the cluster: a register there is never preempted with a node
        # Not soft: measured on Ray 2.60, a soft affinity put it on another node of an idle two-node cluster.
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(head, soft=False)
    return ray.remote(SearchRegister).options(**options).remote()


def find_register() -> Any | None:
    """The cluster's register, or ``None`` when no search has made one."""
    try:
        return ray.get_actor(NAME, namespace=NAMESPACE)
    except ValueError:  # Ray's answer for a name no live actor has
        return None


def listing() -> tuple[list[tuple[Entry, Allotment]], list[Node]]:
    """What ``hpsearch status`` shows: every registered search and its allotment, and the cluster's nodes."""
    handle = find_register()
    if handle is None:
        return [], cluster_nodes()
    return ray.get(handle.listing.remote(), timeout=CALL_TIMEOUT_S)  # type: ignore[no-any-return]  # the actor's own type
