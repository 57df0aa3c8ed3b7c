"""A search's room on a cluster it shares with other searches: its share, and its trials held until room is free.

On a cluster given with ``--address`` (or a ``ray job submit`` job's), every search registers with the
cluster's register (:mod:`hpsearch.runtime.nodes.register`) and beats every
:data:`~hpsearch.planning.shares.BEAT_S` seconds, from a thread of its own, with where it stands:
trials running, done, wanted, its best value. The answer is how many trials it may run at once now
(:mod:`hpsearch.planning.shares` says how shares are decided). An embedded Ray is this search's alone:
there is no register, and nothing here changes what the search does.

The share is kept at the one place Tune makes trials: the searcher. Each of hpsearch's searchers is
built gated (:class:`GatedVariantGenerator`, :class:`GatedLimiter`): it makes no new trial while the
search runs as many as it may. So a held trial has no driver and asks Ray for nothing: it cannot wait
out a worker group's start timeout for room another search holds. Running trials are never stopped;
a population (PBT) is made whole or not at all.

Everything here runs in the SEARCH PROCESS. :data:`GATE` is this process's view of its share: the
callback (:class:`RoomKeeper`) sets it, the searchers read it. Both may be unpickled from a folder on
``resume``, as separate objects, so neither holds the other.
"""

from __future__ import annotations

import getpass
import math
import socket
import threading
import time
import uuid
from dataclasses import replace
from typing import Any

import ray
from ray.tune import Callback
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.basic_variant import BasicVariantGenerator

from hpsearch import messages
from hpsearch.experiment.ranking import is_better
from hpsearch.planning.for_spec import demand_for
from hpsearch.planning.planner import TrialDemand
from hpsearch.planning.shares import BEAT_S, Entry
from hpsearch.runtime.nodes import connect as ray_cluster
from hpsearch.spec import Spec, total_trials

__all__ = ["GATE", "GatedVariantGenerator", "GatedLimiter", "RoomKeeper", "keeper_for", "REPEAT_S"]

#: While a search gets no room, it says so again this often.
REPEAT_S = 180.0
_LIVE = frozenset({"PENDING", "RUNNING", "PAUSED"})
_ENDED = frozenset({"TERMINATED", "ERROR"})


class _Gate:
    """This process's share: how many trials the search may have at once (``None``: its own plan decides)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.allowed: int | None = None
        self.whole = False
        self.wanted = 0
        self.live = 0
        self.started = 0
        self.waiting = 0

    def may_start(self) -> bool:
        """Whether the searcher may make one more trial now."""
        if self.allowed is None:
            return True
        if self.whole:  # a population starts whole, or waits whole
            return self.allowed >= self.wanted > 0
        return self.live + self.started < self.allowed

    def made(self) -> None:
        """The searcher made a trial: counted until the next step recounts the live ones."""
        self.started += 1


#: The search process's share (one search at a time runs in a process).
GATE = _Gate()


class GatedVariantGenerator(BasicVariantGenerator):
    """Tune's random and grid generator, which makes no trial while the search has all the room its share gives."""

    def next_trial(self) -> Any:
        if not GATE.may_start():
            return None
        trial = super().next_trial()  # type: ignore[no-untyped-call]  # Tune's, unannotated
        if trial is not None:
            GATE.made()
        return trial


class GatedLimiter(ConcurrencyLimiter):
    """Tune's ``ConcurrencyLimiter``, which also suggests nothing while the search has all the room its share gives."""

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if not GATE.may_start():
            return None
        suggestion = super().suggest(trial_id)
        if isinstance(suggestion, dict):  # not None, nor Tune's FINISHED marker
            GATE.made()
        return suggestion


class RoomKeeper(Callback):
    """The Tune callback that registers the search, beats, sets :data:`GATE` and says when trials wait for room."""

    def __init__(
        self,
        *,
        name: str,
        folder: str,
        priority: float,
        demand: TrialDemand,
        concurrency: int,
        total: int | None,
        metric: str,
        mode: str,
        whole: bool,
    ) -> None:
        self._template = Entry(
            key="",
            name=name,
            user=_user(),
            host=socket.gethostname(),
            folder=folder,
            priority=priority,
            demand=demand,
            wanted=concurrency,
            total=total,
            metric=metric,
            whole=whole,
        )
        self._concurrency = concurrency
        self._mode = mode
        self._fresh()

    def _fresh(self) -> None:
        self._handle: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._running = self._done = 0
        self._best: float | None = None
        self._line: str | None = None
        self._said: str | None = None
        self._said_at = 0.0
        self._quiet_error = False

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k in ("_template", "_concurrency", "_mode")}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fresh()

    # -- the register
    def _entry(self) -> Entry:
        total = self._template.total
        left = self._concurrency if total is None else max(0, min(self._concurrency, total - self._done))
        return replace(
            self._template, wanted=left, running=self._running, done=self._done, best=self._best, seen_at=time.time()
        )

    def _beat(self) -> None:
        entry = self._entry()  # what the register is told is what the gate then holds to
        try:
            allotment, line = ray.get(self._handle.beat.remote(entry), timeout=BEAT_S * 3)
        except Exception as err:  # noqa: BLE001 - a register that does not answer must never stop the search
            if not self._quiet_error:
                self._quiet_error = True
                messages.say(
                    f"warning: the cluster's register of searches did not answer ({err}); this search keeps "
                    f"its last share of the cluster until it does"
                )
            return
        self._quiet_error = False
        GATE.wanted = entry.wanted
        GATE.allowed = allotment.granted
        GATE.waiting = allotment.waiting
        self._line = line if GATE.waiting else None
        self._say_waiting()

    def _loop(self) -> None:
        while not self._stop.wait(BEAT_S):
            try:
                self._beat()
            except Exception as err:  # noqa: BLE001 - a beat that fails must not end the beats: the register would drop the search
                messages.say(f"warning: this search's beat to the cluster's register failed: {err!r}")

    # -- Tune's hooks
    def setup(
        self, stop: Any = None, num_samples: int | None = None, total_num_samples: int | None = None, **info: Any
    ) -> None:
        GATE.reset()
        if not ray_cluster.shared_cluster():
            return
        # lazy: the register's module is needed only on a shared cluster
        from hpsearch.runtime.nodes.register import register

        self._template = replace(self._template, key=uuid.uuid4().hex)
        GATE.whole = self._template.whole
        try:
            self._handle = register()
        except Exception as err:  # noqa: BLE001 - without a register, the search runs on its own plan, as before
            messages.say(
                f"warning: could not join the cluster's register of searches ({err}): this search takes "
                "its own plan's trials at once, whatever other searches run"
            )
            return
        self._beat()  # before Tune makes the first trial: it starts within its share
        self._thread = threading.Thread(target=self._loop, name="hpsearch-register-beat", daemon=True)
        self._thread.start()

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        GATE.live = sum(1 for t in trials if t.status in _LIVE)
        GATE.started = 0
        self._running = sum(1 for t in trials if t.status in ("RUNNING", "PENDING"))  # holding or asking for room
        self._done = sum(1 for t in trials if t.status in _ENDED)

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        value = result.get(self._template.metric)
        if isinstance(value, (int, float)) and math.isfinite(value):
            if self._best is None or is_better(float(value), self._best, self._mode):  # type: ignore[arg-type]  # min|max
                self._best = float(value)

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self._stop.set()
        if self._thread is not None:  # no beat after the leave: it would register the search again
            self._thread.join(timeout=BEAT_S * 3 + 1)
        if self._handle is not None:
            try:
                ray.get(self._handle.leave.remote(self._template.key), timeout=BEAT_S * 3)
            except Exception:  # noqa: BLE001, S110 - the register drops a silent search after its TTL anyway
                pass
        GATE.reset()

    def _say_waiting(self) -> None:
        """Say when trials start waiting for room, who holds it, and again every :data:`REPEAT_S` while they wait.

        Said from the beat, not from Tune's steps: a search with no live trial is held inside Tune's wait
        for the searcher's next trial, where no callback is called.
        """
        line, now = self._line, time.monotonic()
        if line is None:
            if self._said is not None:
                messages.say(f"room     this search has the room it wants again: {GATE.allowed} trial(s) at once")
            self._said = None
            return
        if line != self._said or now - self._said_at >= REPEAT_S:
            messages.say(line)
            self._said, self._said_at = line, now


def keeper_for(spec: Spec, concurrency: int) -> RoomKeeper:
    """The spec's :class:`RoomKeeper`: its trial's needs, its priority, and ``concurrency``, its plan's trials at once."""
    return RoomKeeper(
        name=spec.name,
        folder=str(spec.experiment_dir),
        priority=spec.resources.priority,
        demand=demand_for(spec),
        concurrency=concurrency,
        total=total_trials(spec) if total_trials(spec) > 0 else None,
        metric=spec.metric,
        mode=spec.mode,
        whole=spec.population_based,
    )


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a user with no name in the password database (a container's uid)
        return "unknown"
