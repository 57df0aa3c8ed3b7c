"""The trial driver watching its own node for a drain, when drivers may run on any node.

This module runs in the trial driver (the Tune trial's actor), beside :mod:`hpsearch.runtime.trial.driver`,
which starts a :class:`DrainWatch` for each nested run under ``resources.driver_node: any``. A thread asks
Ray every :attr:`DrainWatch.POLL_S` seconds which nodes are being drained (``ray drain-node``, what an
autoscaler or KubeRay sends before a spot node goes). When the driver's own node is among them, it writes
the notice into the trial's folder once (:func:`hpsearch.experiment.driver_drains.write_notice`) and stops
asking. The loop's rank 0 saves a checkpoint at its next report, and the search's scheduler pauses the trial
at the report that carries it (:mod:`hpsearch.runtime.search.drained_drivers`); the whole design is in
:mod:`hpsearch.experiment.driver_drains`.

A drain of a worker's node is Ray Train's to tell the loop (``ray.train.get_preemption_info()``); this watch
covers the one node Ray Train does not: the driver's, which holds the nested run's controller too.
"""

from __future__ import annotations

import socket
import threading
import time

import ray

from hpsearch import messages
from hpsearch.experiment import driver_drains
from hpsearch.runtime.internals import available, draining_nodes

__all__ = ["DrainWatch"]


class DrainWatch:
    """Watch this process's node for a drain while a nested run is fitted; a context manager.

    Asking costs one call to Ray's GCS a second per trial driver. A failed call is asked again at the next
    poll; the watch never fails the trial.
    """

    #: Seconds between two questions to Ray. A drain gives tens of seconds of notice (20 s in the harness).
    POLL_S = 1.0

    def __init__(self, trial_folder: str, trial_id: str) -> None:
        self.trial_folder = trial_folder
        self.trial_id = trial_id
        self._stop = threading.Event()

    def __enter__(self) -> DrainWatch:
        # a notice left by the trial's previous driver is spent: that driver's node is being (or was) drained
        driver_drains.clear_notice(self.trial_folder)
        if not available("ray-draining-nodes"):  # said once at the search's start
            return self
        node_id = ray.get_runtime_context().get_node_id()
        threading.Thread(target=self._watch, args=(node_id,), name="hpsearch-drain-watch", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _watch(self, node_id: str) -> None:
        while not self._stop.wait(self.POLL_S):
            try:
                drains = draining_nodes() or {}
            except Exception:  # noqa: BLE001 - the GCS did not answer this time: ask again at the next poll
                continue
            if node_id in drains:
                self._noticed(node_id, drains[node_id])
                return

    def _noticed(self, node_id: str, deadline: float | None) -> None:
        notice = driver_drains.DriverNotice(
            node_id=node_id, host=socket.gethostname(), noticed_at=time.time(), deadline=deadline
        )
        try:
            driver_drains.write_notice(self.trial_folder, notice)
        except OSError as err:  # without it the trial fails at the deadline, and is retried as a failure
            messages.say(f"trial {self.trial_id}: could not write its drain notice ({err})")
            return
        left = f"{notice.time_left(time.time()):.0f} s before its deadline" if deadline else "with no deadline"
        messages.say(
            f"trial {self.trial_id}: the node of its driver ({notice.host}) is being drained, {left}: "
            "it saves a checkpoint at its next report, then pauses and resumes on another node"
        )
