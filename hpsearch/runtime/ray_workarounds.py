"""Work-arounds for Ray bugs, all in this one module, with one switch to turn them off.

Ray version: bugs 1 and 2 below were seen on Ray 2.60.0, the version this project is tested
with, on this project's 2-CPU machine. hpsearch also changes some of Ray's settings through
environment defaults. Those are not here: they are in :mod:`hpsearch.runtime.env`, each
with its measurement.

The switch: ``HPSEARCH_RAY_WORKAROUNDS=0`` turns every work-around here off. ``false``,
``no`` and ``off`` work too. Set it in the environment of the process that runs the search.
Any other value, or none, leaves the work-arounds on. The switch is read once, when the
tuner builds its callbacks (:func:`workarounds_enabled`). When it is off, the search has no
:class:`OrphanReaper` callback, the controllers of the nested runs do not call
:func:`record_controller`, and the drivers do not call :func:`wait_for_forwarded_reports`.
The same switch turns off the cuts of a nested run's helper processes
(``benchmarks/trial_start.py`` measures them): with it off, every trial driver starts Ray's own
nested run, with its Ray Data ``DatasetManager``, its placement-group cleaner and its queue actor.
It also leaves PyTorch's ``load_state_dict`` as it is in a run that starts from a PBT donor's
checkpoint (:mod:`hpsearch.runtime.train.transplant`): the optimizer takes the donor's hyperparameters
back, as with Ray alone (ray-project/ray issue 36660); the donor's checkpoint is still offered.

Bug 1: a Ray Train controller that never exits. When Tune stops a trial (ASHA, a failure,
the end of the search), the trial driver exits and Ray terminates the Ray Train controller
it owned; Ray Train's placement-group cleaner then frees the workers' reservation once it
sees the controller dead. The controller, an async actor, sometimes never exits: it drains
its in-flight ``run`` task, which no longer makes progress ("Async actor is draining 1
in-flight task(s) before exiting" is the last line of its log). Its workers' placement group
then stays reserved for the rest of the search, and on a small machine later trials wait for
room that never comes. Seen for about one in a few dozen stopped trials. (Likely related:
since ray-project/ray pull request 64405 an exiting async actor lets its in-flight tasks
finish first, and that pull request notes that a task that never finishes then needs
``ray.kill``.)

Bug 2: a worker group created as its controller dies. When a trial is stopped, its worker
can die a moment before its controller. Ray Train's failure policy then retries the worker
group (``failure.worker_retries``) and creates a new placement group. The controller is
terminated before it registers that group with the cleaner, so nothing ever removes the
group. This was seen for 2 of 13 stopped trials in one search. After that, no trial could
be placed.

:class:`OrphanReaper`, a Tune callback, handles both, with Ray's public APIs only (the
State API ``ray.util.state``, tasks with node affinity, ``remove_placement_group``):

- Bug 1: each nested run records its controller (actor id, node, pid) when it first reports
  (:func:`record_controller`, called from :mod:`hpsearch.runtime.trial.trainable`). ``grace_s``
  after a trial ended, a controller still alive is ended with SIGKILL by a zero-CPU task on
  its node, and Ray Train's cleaner frees its placement group.
- Bug 2: every ``sweep_every_s`` (and when the search ends) it removes this job's placement
  groups shaped like a trial's worker group that no live actor uses and that are older than
  ``grace_s``: a worker group's actors are requested moments after its group is made.

Bug 3: a trial driver that never returns after its last report. Reports pass through two
one-item queues. Ray Train's ``TuneReportCallback``, in the controller, puts each report on
a one-item queue actor and returns. The trial driver's main thread (Tune's
``FunctionTrainable.step``) takes the report from there and puts it on the session's
one-item result queue. When the nested run ends, the driver function returns. Tune's
wrapper then at once puts its closing ``RESULT_DUPLICATE`` result on that same result
queue. Nothing makes the controller wait for the driver to take the last report. So the last
report may still be on the queue actor at that moment. The main thread then takes it and
blocks forever trying to put it on the full result queue, and that thread is the only one
that would empty the queue. The call chain is in ``ray/train/_internal/session.py``:
``_get_result_from_queues`` -> ``report`` -> ``_report_training_result`` ->
``result_queue.put``. It was seen with ``py-spy``: a trial had reported all 20 epochs, its
driver was stuck, and the search waited forever. Under load this hit about one trial in a
hundred. The driver calls :func:`wait_for_forwarded_reports` after ``fit()`` returns. It
waits until both queues are empty, so the closing result always comes after the last report.

How to tell whether the work-arounds are still needed, for example after a Ray upgrade:

- Every action prints one line. Bug 1 prints "its Ray Train controller was still running
  ... after the trial ended". Bug 2 prints "removed placement group ...: a trial's worker
  group that no process uses".
- The bugs are gone when two things hold. A long search with an early-stopping scheduler
  (ASHA) prints neither line. And the same search, run with ``HPSEARCH_RAY_WORKAROUNDS=0``,
  leaves no placement group behind: once it ends, ``ray.util.placement_group_table()``
  shows only ``REMOVED`` ones, and no trial waits for room forever.
- The ``ray``-marked tests check exactly that after every test (``tests/conftest.py``).
  For example: ``HPSEARCH_RAY_WORKAROUNDS=0 pytest tests/end_to_end/test_integration.py -k asha``.
  The leaks are intermittent, so run it several times.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import ray
from ray.tune import Callback
from ray.util.placement_group import PlacementGroup, placement_group_table, remove_placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from ray.util.state import get_actor, list_actors, list_placement_groups

from hpsearch import messages
from hpsearch.experiment import files
from hpsearch.runtime.internals import DriverSession
from hpsearch.runtime.nodes.connect import is_worker_group
from hpsearch.runtime.nodes.session import CONTROLLER_PROCESS, this_process

__all__ = [
    "SWITCH",
    "workarounds_enabled",
    "OrphanReaper",
    "orphan_groups",
    "record_controller",
    "wait_for_forwarded_reports",
]

#: The environment variable that switches every work-around here off (``0``).
SWITCH = "HPSEARCH_RAY_WORKAROUNDS"
_OFF = ("0", "false", "no", "off")
#: How long after its trial ended a controller may still be exiting before it is ended,
#: and how old an unused worker group must be before it counts as left over.
GRACE_S = 15.0
#: How often the placement groups are swept while the search runs.
SWEEP_EVERY_S = 10.0
#: At the end of a search, how long unused worker groups get to be removed by Ray Train.
END_SETTLE_S = 5.0
#: How often an ended trial's worker group is looked at until it is removed.
FREE_EVERY_S = 0.25
#: After the search: how long its worker groups still in use may take to be freed (OrphanReaper.drain),
#: and how long one must have been unused before the drain removes it (Ray Train's cleaner polls every second).
DRAIN_S = 15.0
DRAIN_UNUSED_S = 3.0


def workarounds_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the work-arounds are on: unless ``HPSEARCH_RAY_WORKAROUNDS`` is ``0`` (or false/no/off)."""
    value = (os.environ if environ is None else environ).get(SWITCH, "")
    return value.strip().lower() not in _OFF


def wait_for_forwarded_reports(
    session: DriverSession | None = None, *, timeout_s: float = 30.0, settle_s: float = 0.2, poll_s: float = 0.05
) -> bool:
    """In a trial driver, after the nested run's ``fit()`` returned: wait until Tune has every report (bug 3).

    Returns when the report queue actor and the session's result queue are both empty twice,
    ``settle_s`` apart. One check is not enough, because the driver's main thread holds a
    report for a moment between the two queues. Also returns after ``timeout_s``. Returns
    ``True`` if the queues emptied.

    ``session`` is this Tune trial's session; it is looked up when not given. Outside a Tune
    trial the function returns at once. It also returns at once when Ray's session has no
    queues that hpsearch knows (:mod:`hpsearch.runtime.internals`); the search says so
    once, at its start.
    """
    session = session or DriverSession.current()
    if session is None or not session.forwarded_any():  # no report was ever forwarded: nothing to wait for
        return True
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if session.stop_requested():  # Tune is done with this trial (a reused actor): nobody reads
            return False
        if session.queues_empty():
            time.sleep(settle_s)
            if session.queues_empty():
                return True
        time.sleep(poll_s)
    return False


def record_controller(trial_dir: str) -> None:
    """Record the calling process as a trial's controller (called inside the controller)."""
    context = ray.get_runtime_context()
    try:
        files.write_controller(
            trial_dir,
            actor_id=context.get_actor_id(),
            node_id=context.get_node_id(),
            pid=os.getpid(),
            create_time=this_process().create_time,
        )
    except OSError:  # without the record the trial is only not checked on
        pass


def _actor_alive(actor_id: str, pid: int) -> bool:
    state = get_actor(actor_id, timeout=10)
    return state is not None and state.state == "ALIVE" and state.pid == pid


def _kill_on_node(node_id: str, pid: int, create_time: float | None) -> None:
    """SIGKILL the recorded controller on its node, only if that PID is still the controller."""

    @ray.remote(num_cpus=0, max_retries=0)
    def kill(target: int, started: float | None) -> bool:
        # lazy: the task runs on the controller node; it imports this there, not pickled with the task
        from hpsearch.runtime.nodes.session import kill_if_still

        return kill_if_still(target, started, named=CONTROLLER_PROCESS)

    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    ray.get(kill.options(scheduling_strategy=strategy).remote(pid, create_time), timeout=30)


def _controller_running(record: Mapping[str, Any]) -> bool:
    """Whether a recorded Train controller still runs: its process, when it is on this node (its PID and start
    time; no call to anything); else the State API."""
    if record.get("node_id") == ray.get_runtime_context().get_node_id() and record.get("create_time") is not None:
        import psutil  # lazy: only a search that frees worker groups gets here

        try:
            proc = psutil.Process(int(record["pid"]))
            same = abs(float(proc.create_time()) - float(record["create_time"])) < 0.01
            return bool(same and proc.status() != psutil.STATUS_ZOMBIE)
        except (psutil.Error, ValueError, TypeError):
            return False
    return _actor_alive(str(record["actor_id"]), int(record["pid"]))


def _group_removed(group_id: str) -> bool:
    """Whether a placement group is removed (or unknown to Ray): the GCS's table, not the State API."""
    group = PlacementGroup(ray.PlacementGroupID(bytes.fromhex(group_id)))
    try:
        return placement_group_table(group).get("state") in (None, "REMOVED")
    except Exception:  # noqa: BLE001 - an unknown group is no group
        return True


def _live_state() -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """This cluster's CREATED placement groups and non-dead actors (State API), and our job id."""
    groups = list_placement_groups(
        filters=[("state", "=", "CREATED")], detail=True, limit=10_000, raise_on_missing_output=False
    )
    actors = list_actors(filters=[("state", "!=", "DEAD")], detail=True, limit=10_000, raise_on_missing_output=False)
    return [vars(g) for g in groups], [vars(a) for a in actors], ray.get_runtime_context().get_job_id()


def _remove_group(group_id: str) -> None:
    remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(group_id))))


def orphan_groups(
    groups: list[dict[str, Any]],
    actors: list[dict[str, Any]],
    job_id: str,
    shapes: list[list[dict[str, float]]],
    now_ns: int,
    min_age_s: float,
) -> list[str]:
    """Ids of ``job_id``'s placement groups shaped like one of ``shapes`` (worker groups) that no live actor uses.

    ``groups`` and ``actors`` as the State API lists them (``detail=True``); only groups
    placed at least ``min_age_s`` before ``now_ns`` count (requested, plus the time placing took).
    """
    in_use = {a.get("placement_group_id") for a in actors}
    found = []
    for g in groups:
        stats = g.get("stats") or {}
        # A group counts as placed at its request time plus the time placing took. A group that
        # waited minutes for a node the autoscaler started is new when placed, and its controller
        # has yet to start its workers in it.
        latency_ns = int(stats.get("end_to_end_creation_latency_us") or 0) * 1000
        created_ns = int(stats.get("creation_request_received_ns") or now_ns) + latency_ns
        if (
            g.get("state") == "CREATED"
            and is_worker_group(g, job_id, shapes)
            and not g.get("is_detached")
            and g["placement_group_id"] not in in_use
            and now_ns - created_ns >= min_age_s * 1e9
        ):
            found.append(g["placement_group_id"])
    return found


class OrphanReaper(Callback):
    """Tune callback: end the Ray Train controller of a trial that ended ``grace_s`` ago, sweep the worker
    groups no process uses, and free each ended trial's worker group once its controller is gone.

    The last is what Ray Train's placement-group cleaner does, done here as soon as the controller is gone:
    a nested run Ray Train ends by itself removes its own worker group, but one whose controller dies with
    its trial (Tune stops it, a reused actor ends it) leaves it reserved until Ray's cleaner (it polls every
    second) sees the controller gone. Here the ended trials' groups are looked at every ``free_every_s``
    (the GCS's table, and the controller's process when it runs on this node). Ray's cleaner stays: a
    stopped trial's reused actor that Tune keeps cached past the search's end ends its run after this
    callback's last call, and only the cleaner then frees that run's group (measured: without it, the
    Optuna-ASHA search with reused actors and the multi-objective search each left a group reserved).
    """

    def __init__(
        self,
        train_dir: str | Path,
        *,
        worker_bundles: list[dict[str, float]] | None = None,
        worker_shapes: list[list[dict[str, float]]] | None = None,
        grace_s: float = GRACE_S,
        sweep_every_s: float = SWEEP_EVERY_S,
        alive: Callable[[str, int], bool] = _actor_alive,
        kill: Callable[[str, int, float | None], None] = _kill_on_node,
        live_state: Callable[[], tuple[list[dict[str, Any]], list[dict[str, Any]], str]] = _live_state,
        remove_group: Callable[[str], None] = _remove_group,
        clock: Callable[[], float] = time.monotonic,
        group_removed: Callable[[str], bool] = _group_removed,
        controller_running: Callable[[Mapping[str, Any]], bool] = _controller_running,
        free_every_s: float = FREE_EVERY_S,
    ) -> None:
        self.train_dir = Path(train_dir)
        # The worker groups a trial can make: one shape, or several when trials differ in scale.
        self.shapes = [*([worker_bundles] if worker_bundles else []), *(worker_shapes or [])]
        self.grace_s = grace_s
        self.sweep_every_s = sweep_every_s
        self._alive, self._kill, self._clock = alive, kill, clock
        self._live_state, self._remove_group = live_state, remove_group
        self._due: dict[str, float] = {}  # trial id -> when to check its controller
        self._next_sweep = clock() + sweep_every_s
        self.ended: list[str] = []  # trials whose controller had to be ended
        self.removed: list[str] = []  # placement groups removed by the sweep
        self._group_removed, self._controller_running = group_removed, controller_running
        self.free_every_s = free_every_s
        # worker group id -> (its trial, that run's controller record as the trial ended): freed once it is gone
        self._freeing: dict[str, tuple[str, dict[str, Any] | None]] = {}
        self._next_free = clock()
        self.freed: list[str] = []  # ended trials' worker groups removed here

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Tune pickles its callbacks into the experiment state; one saved by an earlier hpsearch lacks these.
        self.__dict__.update(state)
        self.__dict__.setdefault("_group_removed", _group_removed)
        self.__dict__.setdefault("_controller_running", _controller_running)
        self.__dict__.setdefault("free_every_s", FREE_EVERY_S)
        self.__dict__.setdefault("_freeing", {})
        self.__dict__.setdefault("_next_free", 0.0)
        self.__dict__.setdefault("freed", [])

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._due[trial.trial_id] = self._clock() + self.grace_s
        self._watch_group(trial.trial_id)

    on_trial_error = on_trial_complete

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        # Tune runs the trial again, and its next run makes a worker group of its own: free this run's.
        self._watch_group(trial.trial_id)

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        now = self._clock()
        for trial_id in [t for t, due in self._due.items() if due <= now]:
            del self._due[trial_id]
            self._check(trial_id)
        if self._freeing and now >= self._next_free:
            self._next_free = now + self.free_every_s
            self._free_groups()
        if now >= self._next_sweep:
            self._next_sweep = now + self.sweep_every_s
            self._sweep(self.grace_s)

    def _watch_group(self, trial_id: str) -> None:
        """Remember the worker group of a trial's run that just ended, with that run's controller."""
        group = files.read_worker_group(self.train_dir / trial_id)
        group_id = (group or {}).get("group_id")
        if group_id:
            self._freeing[str(group_id)] = (trial_id, self._record(trial_id))

    def _free_groups(self) -> None:
        """Remove each ended trial's worker group that is still reserved once its controller is gone."""
        for group_id, (_trial_id, controller) in list(self._freeing.items()):
            try:
                if not self._group_removed(group_id):
                    if controller is not None and self._controller_running(controller):
                        continue  # still ending (or a reused actor's run, which the next trial ends first)
                    self._remove_group(group_id)
                    self.freed.append(group_id)
            except Exception:  # noqa: BLE001 - removed meanwhile, or Ray refused: the sweep looks again
                pass
            del self._freeing[group_id]

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        """Wait out the last trials' grace (only while their controllers are still alive), then sweep."""
        for trial_id, due in sorted(self._due.items(), key=lambda item: item[1]):
            record = self._record(trial_id)
            while record is not None and self._clock() < due and self._is_alive(record):
                time.sleep(0.5)
            self._check(trial_id)
        self._due.clear()
        # Tune stopped every trial actor just before this call, and a controller dies with its actor a moment
        # later: look again until each ended trial's group is freed, or END_SETTLE_S passed.
        deadline = self._clock() + END_SETTLE_S
        self._free_groups()
        while self._freeing and self._clock() < deadline:
            time.sleep(self.free_every_s)
            self._free_groups()
        # No trial runs any more: an unused worker group of ours is left over, once Ray
        # Train's own cleaner (it polls every second) has had a moment to remove it.
        self._sweep(0.0, settle_s=END_SETTLE_S)

    def drain(self, timeout_s: float = DRAIN_S, unused_s: float = DRAIN_UNUSED_S) -> None:
        """After ``Tuner.fit`` returned: wait up to ``timeout_s`` until none of this search's worker groups is left.

        Tune's last clean-up ends the trial actors it kept cached for reuse, and their nested runs end a
        moment after :meth:`on_experiment_end` looked: a group still used by their workers then was no
        orphan, and an intermittent one stayed reserved once they died (seen in the reuse search, on Ray
        2.58.1). Each group left is removed once no process has used it for ``unused_s``, time enough for
        Ray Train's cleaner to do it first. Returns at once when none is left, as after most searches.
        """
        if not self.shapes or not ray.is_initialized():
            return
        deadline = self._clock() + timeout_s
        unused_since: dict[str, float] = {}
        while True:
            try:
                groups, actors, job_id = self._live_state()
            except Exception:  # noqa: BLE001 - the State API is unavailable: leave the groups to Ray
                return
            left = [g for g in groups if g.get("state") == "CREATED" and is_worker_group(g, job_id, self.shapes)]
            if not left:
                return
            now = self._clock()
            unused = set(orphan_groups(left, actors, job_id, self.shapes, time.time_ns(), 0.0))
            unused_since = {g: unused_since.get(g, now) for g in unused}
            for group_id in [g for g, since in unused_since.items() if now - since >= unused_s]:
                del unused_since[group_id]
                self._remove(group_id, "after the search: a trial's worker group no process used")
            if now >= deadline:
                return
            time.sleep(0.5)

    def _orphans(self, min_age_s: float) -> list[str]:
        try:
            groups, actors, job_id = self._live_state()
        except Exception:  # the State API is unavailable: leave the groups to Ray
            return []
        return orphan_groups(groups, actors, job_id, self.shapes, time.time_ns(), min_age_s)

    def _sweep(self, min_age_s: float, settle_s: float = 0.0) -> None:
        if not self.shapes:
            return
        orphans = self._orphans(min_age_s)
        deadline = self._clock() + settle_s
        while orphans and self._clock() < deadline:
            time.sleep(0.5)
            orphans = self._orphans(min_age_s)
        for group_id in orphans:
            self._remove(
                group_id,
                "a trial's worker group that no process uses (its Ray Train controller ended before registering "
                "it for clean-up)",
            )

    def _remove(self, group_id: str, why: str) -> None:
        """Remove an unused worker group, and say so in one line: ``removed placement group <id>: <why>``."""
        try:
            self._remove_group(group_id)
        except Exception:  # noqa: BLE001 - removed meanwhile, or Ray refused: not worth stopping for
            return
        self.removed.append(group_id)
        messages.say(f"removed placement group {group_id}: {why}")

    def _record(self, trial_id: str) -> dict[str, Any] | None:
        # None: the run never reported; nothing of it is known to be running.
        return files.read_controller(self.train_dir / trial_id)

    def _is_alive(self, record: dict[str, Any]) -> bool:
        try:
            return self._alive(record["actor_id"], record["pid"])
        except Exception:  # the State API is unavailable: leave the controller to Ray
            return False

    def _check(self, trial_id: str) -> None:
        record = self._record(trial_id)
        if record is None or not self._is_alive(record):
            return
        try:
            self._kill(record["node_id"], record["pid"], record.get("create_time"))
        except Exception as err:  # noqa: BLE001 - a failed clean-up must not stop the search
            messages.say(f"trial {trial_id}: its Ray Train controller outlived it and could not be ended: {err}")
            return
        self.ended.append(trial_id)
        messages.say(
            f"trial {trial_id}: its Ray Train controller was still running {self.grace_s:g} s after "
            "the trial ended (a Ray hang on exit); ended it so its workers' resources are freed"
        )
