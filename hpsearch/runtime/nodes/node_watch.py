"""Nodes that leave or join the cluster during a search, said as they happen and on the trials they hit.

On a multi-host cluster a host can die: its power, its network, an out-of-memory kill of its
raylet. Ray marks the node dead some seconds later (its health checks), and every Train
worker there dies with it. Ray Train then starts the trial's worker group again, where there
is room (``failure.worker_retries``, each start waiting up to ``failure.worker_start_timeout_s``),
and the trial continues from its latest checkpoint. When no node has room and the host does not
come back, the trial fails with Ray Train's "worker group startup timed out", which does not say
that a host was lost, nor which.

:class:`NodeWatch`, a Tune callback in the ``hpsearch run`` process, asks Ray which nodes are
alive (``ray.nodes()``, every ``every_s`` seconds). It prints one line when a node leaves, naming
its host name and IP and the trials whose workers ran there (rank 0 of each nested run records
its workers' nodes: :func:`hpsearch.experiment.files.write_worker_group`), and one line when a
node joins. :meth:`NodeWatch.note_for` gives the words that start the error line of a trial that
lost its workers' host, so the terminal, ``hpsearch_trials.jsonl`` and every view of the results
name the lost host.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray.tune import Callback

from hpsearch import messages
from hpsearch.experiment import files

__all__ = ["NodeWatch", "NodeState", "ray_nodes"]


@dataclass(frozen=True)
class NodeState:
    """One node as Ray lists it: its id, address, host name, and whether it is alive."""

    node_id: str
    ip: str
    hostname: str
    alive: bool

    def name(self) -> str:
        """``host (ip)``, or the IP alone when the host name is the IP or unknown."""
        if self.hostname and self.hostname != self.ip:
            return f"{self.hostname} ({self.ip})"
        return self.ip


def ray_nodes() -> list[NodeState]:
    """The cluster's nodes, from Ray's public ``ray.nodes()``: dead ones stay listed with ``Alive`` false."""
    return [
        NodeState(
            node_id=str(node.get("NodeID", "")),
            ip=str(node.get("NodeManagerAddress", "")),
            hostname=str(node.get("NodeManagerHostname", "")),
            alive=bool(node.get("Alive")),
        )
        for node in ray.nodes()  # type: ignore[no-untyped-call]  # Ray's function has no annotations
    ]


def _which(trial_ids: Sequence[str]) -> str:
    return f"trial {trial_ids[0]} had" if len(trial_ids) == 1 else f"trials {', '.join(trial_ids)} had"


@dataclass(frozen=True)
class _Lost:
    node: NodeState
    at: float  # seconds since the search started, when the loss was seen


class NodeWatch(Callback):
    """A Tune callback that says when a node leaves or joins, and which trials had workers on it.

    Args:
        train_dir: The experiment's folder of nested runs (``<experiment>/train``): each trial's
            run folder records its workers' nodes.
        retry_hint: What Ray Train does next for a trial that lost its workers, as words for the
            line (the spec's ``failure`` settings).
        drained_hint: The same for a trial whose loop read that the node was being drained (a spot
            reclaim): a preemption, which Ray Train counts apart (``failure.preemption_retries``).
        nodes: Lists the cluster's nodes (:func:`ray_nodes`); a test passes its own.
        every_s: Seconds between two looks at the nodes.
        clock: Seconds, for the interval and the time shown on each line.
    """

    def __init__(
        self,
        train_dir: str | Path,
        retry_hint: str,
        *,
        drained_hint: str = "it was drained: Ray Train starts them again from its checkpoint, a preemption",
        nodes: Callable[[], Sequence[NodeState]] = ray_nodes,
        every_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.train_dir = Path(train_dir)
        self.retry_hint = retry_hint
        self.drained_hint = drained_hint
        self._nodes = nodes
        self.every_s = every_s
        self._clock = clock
        self._start = clock()
        self._last_look: float | None = None
        self._alive: dict[str, NodeState] | None = None  # node id -> node, as last seen; None before the first look
        self.lost: dict[str, _Lost] = {}  # trial id -> the node it lost workers on (the latest)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Restored by a resume in a new process, on a cluster that may differ: look again from scratch.
        self.__dict__.update(state)
        self._start = self._clock()
        self._last_look = None
        self._alive = None

    def _elapsed(self, at: float | None = None) -> str:
        seconds = int(self._clock() - self._start if at is None else at)
        return f"[{seconds // 60:02d}:{seconds % 60:02d}]"

    def look(self, trials: Sequence[Any] = ()) -> None:
        """Compare the nodes alive now with the last look, and say what changed."""
        self._last_look = self._clock()
        try:
            now = {node.node_id: node for node in self._nodes() if node.alive}
        except Exception:  # noqa: BLE001 - a look at the nodes must never break the search
            return
        before, self._alive = self._alive, now
        if before is None:
            return
        for node_id, node in before.items():
            if node_id not in now:
                self._left(node, trials)
        for node_id, node in now.items():
            if node_id not in before:
                messages.line(f"{self._elapsed()} node     {node.name()} joined the cluster")

    def _left(self, node: NodeState, trials: Sequence[Any]) -> None:
        at = self._clock() - self._start
        hit = [trial.trial_id for trial in trials if trial.status == "RUNNING" and self._held(trial.trial_id, node)]
        for trial_id in hit:
            self.lost[trial_id] = _Lost(node, at)
        if hit:
            drained = [trial_id for trial_id in hit if self._drained(trial_id, node)]
            then = "; ".join(
                f"{_which(ids)} workers there: {hint}"
                for ids, hint in ((drained, self.drained_hint), ([t for t in hit if t not in drained], self.retry_hint))
                if ids
            )
        else:
            then = "no running trial had workers there"
        messages.line(f"{self._elapsed(at)} node     {node.name()} left the cluster; {then}")

    def _drained(self, trial_id: str, node: NodeState) -> bool:
        """Whether the trial's loop read that ``node`` was being drained (its attempts' notices)."""
        return any(node.node_id in p.node_ids for p in files.read_preemptions(self.train_dir / trial_id))

    def _held(self, trial_id: str, node: NodeState) -> bool:
        record = files.read_worker_group(self.train_dir / trial_id) or {}
        return node.node_id in (record.get("node_ids") or [])

    def note_for(self, trial_id: str) -> str:
        """Words that start the error line of a trial whose workers' host left the cluster, else ``""``."""
        lost = self.lost.get(trial_id)
        if lost is None:
            return ""
        self.look()
        back = self._alive is not None and any(n.ip == lost.node.ip for n in self._alive.values())
        after = "it came back later" if back else "it did not come back"
        return f"its workers' host {lost.node.name()} left the cluster at {self._elapsed(lost.at)} and {after}; "

    # -- Tune callback hooks
    def setup(
        self, stop: Any = None, num_samples: int | None = None, total_num_samples: int | None = None, **info: Any
    ) -> None:
        self.look()

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        if self._last_look is None or self._clock() - self._last_look >= self.every_s:
            self.look(trials)
