"""Rank 0's rendezvous store on the loopback: a real 2-rank gloo group, every socket on 127.0.0.1.

No Ray: two processes set up their process group as hpsearch's mirror of Ray's Torch set-up has
every rank of an embedded Ray's trial do it (``hpsearch-loopback://``), and one with PyTorch's own
``tcp://`` beside it shows what the method changes: the store listens on every interface there.
"""

from __future__ import annotations

import datetime
import socket
from typing import Any

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from hpsearch.runtime.train import loopback_store  # noqa: E402 - after the skip: it needs torch

EVERY_INTERFACE = ("0.0.0.0", "::")


def _rank(rank: int, url: str, queue: Any) -> None:
    import psutil

    loopback_store.register()
    assert loopback_store.register() is False  # once per process: a second call changes nothing
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=60))
    total = torch.ones(1)
    dist.all_reduce(total)
    dist.barrier()  # both ranks' sockets are open before either is read
    listening = sorted({c.laddr.ip for c in psutil.Process().net_connections("inet") if c.status == "LISTEN"})
    queue.put((rank, total.item(), listening))
    dist.barrier()
    dist.destroy_process_group()


def _group(scheme: str) -> dict[int, tuple[float, list[str]]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = torch.multiprocessing.get_context("spawn")
    queue = context.Queue()
    ranks = [context.Process(target=_rank, args=(r, f"{scheme}://127.0.0.1:{port}", queue)) for r in (0, 1)]
    for process in ranks:
        process.start()
    try:
        seen = [queue.get(timeout=120) for _ in ranks]
    finally:
        for process in ranks:
            process.join(timeout=60)
    assert [p.exitcode for p in ranks] == [0, 0]
    return {rank: (total, listening) for rank, total, listening in seen}


@pytest.mark.timeout(240)
def test_every_socket_of_a_group_set_up_through_the_loopback_store_is_on_the_loopback() -> None:
    ours = _group(loopback_store.SCHEME)
    assert {rank: total for rank, (total, _) in ours.items()} == {0: 2.0, 1: 2.0}  # the all_reduce crossed
    assert all(ip.startswith("127.") for _, listening in ours.values() for ip in listening), ours
    # PyTorch's own tcp:// for the same group: rank 0's store listens on every interface
    theirs = _group("tcp")
    assert any(ip in EVERY_INTERFACE for ip in theirs[0][1]), theirs


def test_the_method_says_what_its_url_lacks() -> None:
    with pytest.raises(ValueError, match="needs ADDR:PORT, rank and world_size"):
        next(loopback_store.loopback_rendezvous(f"{loopback_store.SCHEME}://127.0.0.1:29500"))
