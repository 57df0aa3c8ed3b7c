"""End nested-run controllers that outlive their trial, so their workers' resources come back.

When Tune stops a trial (ASHA, a failure, the end of the search), the trial driver exits
and Ray terminates the Ray Train controller it owned; Ray Train's placement-group cleaner
then frees the workers' reservation once it sees the controller dead. On Ray 2.60 the
controller, an async actor, sometimes never exits: it drains its in-flight ``run`` task,
which no longer makes progress ("Async actor is draining 1 in-flight task(s) before
exiting" is the last line of its log). Its workers' placement group then stays reserved
for the rest of the search, and on a small machine later trials wait for room that never
comes. Seen on this project's 2-CPU machine for about one in a few dozen stopped trials.

Each nested run records its controller (actor id, node, pid) when it first reports (see
:mod:`hpsearch.trainable`). :class:`OrphanReaper`, a Tune callback, checks each ended
trial's controller once the trial has been over for ``grace_s``; one still alive then is
ended with SIGKILL by a zero-CPU task on its node, and Ray Train's cleaner frees the rest.
Only Ray's public APIs are used: the State API (``ray.util.state``), tasks with node
affinity, and ``os.kill``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO

__all__ = ["CONTROLLER_FILE", "OrphanReaper", "record_controller"]

#: Written into ``<train>/<trial_id>/`` by the nested run's controller: who to check on.
CONTROLLER_FILE = "hpsearch_controller.json"
#: How long after its trial ended a controller may still be exiting before it is ended.
GRACE_S = 15.0


def record_controller(trial_dir: str) -> None:
    """Record the calling process as a trial's controller (called inside the controller)."""
    import ray

    context = ray.get_runtime_context()
    record = {"actor_id": context.get_actor_id(), "node_id": context.get_node_id(), "pid": os.getpid()}
    try:
        os.makedirs(trial_dir, exist_ok=True)
        with open(os.path.join(trial_dir, CONTROLLER_FILE), "w", encoding="utf-8") as out:
            json.dump(record, out)
    except OSError:  # without the record the trial is only not checked on
        pass


def _actor_alive(actor_id: str, pid: int) -> bool:
    from ray.util.state import get_actor

    state = get_actor(actor_id, timeout=10)
    return state is not None and state.state == "ALIVE" and state.pid == pid


def _kill_on_node(node_id: str, pid: int) -> None:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0, max_retries=0)
    def kill(target: int) -> None:
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass

    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    ray.get(kill.options(scheduling_strategy=strategy).remote(pid), timeout=30)


def _tune_callback_base() -> type:
    from ray import tune

    return tune.Callback


class OrphanReaper(_tune_callback_base()):
    """Tune callback: end the Ray Train controller of a trial that ended ``grace_s`` ago."""

    def __init__(
        self,
        train_dir: str | Path,
        *,
        grace_s: float = GRACE_S,
        stream: TextIO | None = None,
        alive: Callable[[str, int], bool] = _actor_alive,
        kill: Callable[[str, int], None] = _kill_on_node,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.train_dir = Path(train_dir)
        self.grace_s = grace_s
        self.stream = stream
        self._alive, self._kill, self._clock = alive, kill, clock
        self._due: dict[str, float] = {}  # trial id -> when to check its controller
        self.ended: list[str] = []  # trials whose controller had to be ended

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._due[trial.trial_id] = self._clock() + self.grace_s

    on_trial_error = on_trial_complete

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        now = self._clock()
        for trial_id in [t for t, due in self._due.items() if due <= now]:
            del self._due[trial_id]
            self._check(trial_id)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        """Wait out the last trials' grace (only while their controllers are still alive)."""
        for trial_id, due in sorted(self._due.items(), key=lambda item: item[1]):
            record = self._record(trial_id)
            while record is not None and self._clock() < due and self._is_alive(record):
                time.sleep(0.5)
            self._check(trial_id)
        self._due.clear()

    def _record(self, trial_id: str) -> dict | None:
        try:
            return json.loads((self.train_dir / trial_id / CONTROLLER_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # the run never reported: nothing of it is known to be running

    def _is_alive(self, record: dict) -> bool:
        try:
            return self._alive(record["actor_id"], record["pid"])
        except Exception:  # the State API is unavailable: leave the controller to Ray
            return False

    def _check(self, trial_id: str) -> None:
        record = self._record(trial_id)
        if record is None or not self._is_alive(record):
            return
        try:
            self._kill(record["node_id"], record["pid"])
        except Exception as err:  # noqa: BLE001 - a failed clean-up must not stop the search
            self._say(f"hpsearch: trial {trial_id}: its Ray Train controller outlived it and could not be ended: {err}")
            return
        self.ended.append(trial_id)
        self._say(
            f"hpsearch: trial {trial_id}: its Ray Train controller was still running {self.grace_s:g} s after "
            "the trial ended (a Ray hang on exit); ended it so its workers' resources are freed"
        )

    def _say(self, text: str) -> None:
        print(text, file=self.stream or sys.stderr, flush=True)
