"""A train loop whose ranks meet over the network: each epoch, an all_reduce and the ranks' hostnames.

It imports a helper module that sits beside it, as a user's loop imports their own model code:
hosts other than the one that loads the spec do not have this folder on their path.
"""

from __future__ import annotations

import socket
import time

import ray.train
import torch
import torch.distributed as dist
from span_helpers import scaled_loss


def all_reduce_hosts(config: dict) -> None:
    """Rank r contributes r + 1: every rank's sum is 1 + 2 + ... + world size, on whatever hosts they run."""
    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    for epoch in range(1, config.get("epochs", 1) + 1):
        total = torch.tensor([float(rank + 1)])
        dist.all_reduce(total)
        hosts: list = [None] * world
        dist.all_gather_object(hosts, socket.gethostname())
        ray.train.report(
            {
                "loss": scaled_loss(config["x"], epoch),
                "sum": float(total.item()),
                "hosts": ",".join(sorted(set(hosts))),
                "epoch": epoch,
            }
        )


def checkpointed(config: dict) -> None:
    """DDP across the hosts: a tiny model trained and checkpointed every epoch with hpsearch.train.

    Rank 0 writes ``epoch-<n>`` into ``config["progress_dir"]`` once epoch n is reported, so a test
    knows when to kill a host; ``started_at`` is the epoch this run continued from.
    """
    from pathlib import Path

    import ray.train.torch

    from hpsearch import train as hp

    context = ray.train.get_context()
    model = ray.train.torch.prepare_model(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    start = hp.restore(model=model, optimizer=optimizer)
    for epoch in range(start, config["epochs"] + 1):
        loss = model(torch.ones(1, 1)).pow(2).sum()
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradient across the hosts
        optimizer.step()
        time.sleep(config.get("sleep_s", 0.0))
        hp.report({"loss": float(loss), "started_at": start}, epoch=epoch, model=model, optimizer=optimizer)
        if context.get_world_rank() == 0:
            Path(config["progress_dir"], f"epoch-{epoch}").touch()


def one_rank(config: dict) -> None:
    """One worker, reporting ``loss`` each epoch after ``sleep_s``, and the host it ran on."""
    for epoch in range(1, config.get("epochs", 1) + 1):
        time.sleep(config.get("sleep_s", 0.0))
        ray.train.report({"loss": scaled_loss(config["x"], epoch), "host": socket.gethostname(), "epoch": epoch})


def until_released(config: dict) -> None:
    """One worker reporting ``loss`` and its host every ``sleep_s``, until the file ``config["release"]`` exists.

    A test holds such a trial running for as long as it needs, whatever the machine's speed.
    """
    from pathlib import Path

    epoch = 0
    while True:
        epoch += 1
        time.sleep(config.get("sleep_s", 0.0))
        ray.train.report({"loss": scaled_loss(config["x"], epoch), "host": socket.gethostname(), "epoch": epoch})
        if Path(config["release"]).exists():
            return


def drained(config: dict) -> None:
    """DDP across the hosts, a report every ``step_s`` seconds: ``steps`` reports an epoch over ``epochs`` epochs,
    checkpointed through hpsearch.train at each epoch's end only. So a checkpoint within an epoch is the one a
    drain notice brings (hpsearch.train.report saves at the first report after it, once).

    Rank 0 writes ``epoch-<e>-step-<s>`` into ``config["progress_dir"]`` once step s of epoch e is reported, so a
    test knows where the loop is (when to drain a host) and which steps ran twice. The step is saved with each
    checkpoint (``extra``): a run restarted from a notice's checkpoint continues the epoch after that step;
    ``started_at`` is the epoch this run started in.
    """
    from pathlib import Path

    import ray.train.torch

    from hpsearch import train as hp

    context = ray.train.get_context()
    model = ray.train.torch.prepare_model(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps, place = config["steps"], {}
    start = hp.restore(model=model, optimizer=optimizer, extra=place)
    first_epoch, first_step = start, 1
    if place.get("step", steps) < steps:  # saved within an epoch (a notice's checkpoint): the rest of that epoch
        first_epoch, first_step = start - 1, place["step"] + 1
    for epoch in range(first_epoch, config["epochs"] + 1):
        for step in range(first_step if epoch == first_epoch else 1, steps + 1):
            loss = model(torch.ones(1, 1)).pow(2).sum()
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradient across the hosts
            optimizer.step()
            time.sleep(config["step_s"])
            hp.report(
                {"loss": float(loss), "step": step, "started_at": first_epoch},
                epoch=epoch,
                model=model,
                optimizer=optimizer,
                checkpoint=step == steps,
                extra={"step": step},
            )
            if context.get_world_rank() == 0:
                Path(config["progress_dir"], f"epoch-{epoch}-step-{step}").touch()
            Path(config["progress_dir"], f"host-{socket.gethostname()}").touch()  # every rank: where it trained
