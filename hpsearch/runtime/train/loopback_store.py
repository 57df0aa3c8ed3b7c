"""Rank 0's rendezvous store on the loopback, for a nested run whose every rank is on this machine.

This module runs in each Train worker, before its Torch process group starts. PyTorch's rendezvous
store (``TCPStore``), which rank 0 serves for the process group, listens on every interface (``::``)
whatever ``MASTER_ADDR`` says, and has no option for an address. On an embedded Ray, every rank is on
this machine and reaches rank 0 at a loopback address, so that port need not be open to the
network. :func:`loopback_rendezvous` is a rendezvous method, registered with PyTorch's public
``torch.distributed.rendezvous.register_rendezvous_handler`` under :data:`SCHEME`, that serves the
store from a socket bound to the loopback address (``TCPStore(master_listen_fd=...)``); the other
ranks connect to it as ``tcp://`` would. hpsearch's mirror of Ray's Torch set-up uses it when rank
0's address is a loopback one (:func:`hpsearch.runtime.internals.lean_torch_config`).

Measured with torch 2.13.0 (2026-12-06): a 2-rank gloo group set up by ``env://`` left rank 0
listening on ``::`` (the store) besides gloo's own sockets; set up by this method, every socket of
both ranks was on 127.0.0.1, and an ``all_reduce`` across them gave the sum.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import timedelta
from importlib import import_module
from typing import Any
from urllib.parse import parse_qs, urlparse

from hpsearch.runtime.nodes.node_check import pin_worker_interface

__all__ = ["SCHEME", "loopback_rendezvous", "register", "prepare_worker"]

#: The rendezvous method's URL scheme: ``hpsearch-loopback://127.0.0.1:PORT``.
SCHEME = "hpsearch-loopback"
#: How many connections the store's socket queues before rank 0 accepts them.
_BACKLOG = 1024


def loopback_rendezvous(url: str, timeout: timedelta = timedelta(minutes=30), **_: Any) -> Iterator[Any]:
    """PyTorch's rendezvous method for ``hpsearch-loopback://ADDR:PORT?rank=R&world_size=N``.

    As ``tcp://``, but rank 0 serves the store from a socket bound to ``ADDR`` (a loopback address)
    instead of every interface. Yields ``(store, rank, world_size)`` once, as PyTorch expects.
    """
    from torch.distributed import TCPStore  # type: ignore[attr-defined]  # lazy: torch, in the Train worker only; public, re-exported from torch._C

    parsed = urlparse(url)
    query = parse_qs(parsed.query)
    if parsed.hostname is None or parsed.port is None or "rank" not in query or "world_size" not in query:
        raise ValueError(f"{SCHEME}:// rendezvous needs ADDR:PORT, rank and world_size: {url}")
    host, port = parsed.hostname, parsed.port
    rank, world_size = int(query["rank"][0]), int(query["world_size"][0])
    if rank == 0:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(_BACKLOG)
        store = TCPStore(host, port, world_size, True, timeout, master_listen_fd=listener.detach())
    else:
        store = TCPStore(host, port, world_size, False, timeout)
    yield (store, rank, world_size)
    raise RuntimeError(f"Unable to perform re-rendezvous using {SCHEME}:// method")  # as tcp:// says


def register() -> bool:
    """Make :data:`SCHEME` known to PyTorch in this process (once); whether this call registered it."""
    # lazy: as above (the module: torch.distributed's attribute is its function)
    rendezvous = import_module("torch.distributed.rendezvous")
    try:
        rendezvous.register_rendezvous_handler(SCHEME, loopback_rendezvous)
    except RuntimeError as err:  # registered before in this process: PyTorch refuses a second handler
        if "already registered" not in str(err):
            raise
        return False
    return True


def prepare_worker() -> dict[str, str]:
    """In each Train worker, before its process group starts: gloo's interface pinned where needed
    (:func:`hpsearch.runtime.nodes.node_check.pin_worker_interface`), and :data:`SCHEME` registered."""
    pinned = pin_worker_interface()
    register()
    return pinned
