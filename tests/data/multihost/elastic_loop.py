"""An elastic trial's loop: DDP over however many workers Ray gives it, continuing from its checkpoint.

Ray Train restarts an elastic trial's worker group when it resizes it, and the new group runs the
loop from the start: ``hpsearch.train.restore`` finds the latest checkpoint, so each epoch is
trained once whatever the group's size.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import ray.train
import ray.train.torch
import torch
import torch.distributed as dist

from hpsearch import train as hp


def grows(config: dict) -> None:
    """A tiny model trained and checkpointed each epoch; each report says the group's size and hosts.

    It runs until the file ``config["release"]`` exists (a test holds the trial for as long as it
    needs), at most ``config["max_epochs"]`` epochs.
    """
    context = ray.train.get_context()
    world = context.get_world_size()
    model = ray.train.torch.prepare_model(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    start = hp.restore(model=model, optimizer=optimizer)
    for epoch in range(start, config.get("max_epochs", 200) + 1):
        loss = model(torch.ones(1, 1)).pow(2).sum()
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradient across the group
        optimizer.step()
        hosts: list = [socket.gethostname()] * world
        if dist.is_initialized():
            dist.all_gather_object(hosts, socket.gethostname())
        time.sleep(config.get("sleep_s", 0.0))
        metrics = {"loss": float(loss), "world": world, "hosts": ",".join(sorted(set(hosts))), "started_at": start}
        hp.report(metrics, epoch=epoch, model=model, optimizer=optimizer)
        if Path(config["release"]).exists():
            return
