"""OrphanReaper: which controllers it ends, and when (fake State API and kill; no Ray started)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from hpsearch.experiment.layout import CONTROLLER_FILE
from hpsearch.runtime.ray_workarounds import OrphanReaper, orphan_groups


class World:
    """Controllers that are alive until killed, and a clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0
        self.alive_pids: set[int] = set()
        self.killed: list[tuple[str, int]] = []

    def alive(self, actor_id: str, pid: int) -> bool:
        return pid in self.alive_pids

    def kill(self, node_id: str, pid: int, create_time: float | None) -> None:
        self.killed.append((node_id, pid))
        self.alive_pids.discard(pid)


def _record(train_dir: Path, trial_id: str, pid: int) -> None:
    (train_dir / trial_id).mkdir(parents=True)
    (train_dir / trial_id / CONTROLLER_FILE).write_text(
        json.dumps({"actor_id": f"a{pid}", "node_id": "n1", "pid": pid})
    )


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def reaper(tmp_path: Path, world: World, said) -> OrphanReaper:
    return OrphanReaper(tmp_path, grace_s=15, alive=world.alive, kill=world.kill, clock=lambda: world.now)


def _end(reaper: OrphanReaper, trial_id: str) -> None:
    reaper.on_trial_complete(0, [], SimpleNamespace(trial_id=trial_id))


def test_a_controller_alive_after_the_grace_is_ended_and_reported(tmp_path, world, reaper, said) -> None:
    _record(tmp_path, "t1", pid=41)
    world.alive_pids.add(41)
    _end(reaper, "t1")
    world.now += 14
    reaper.on_step_end(0, [])
    assert world.killed == []  # still within its grace: it may be exiting normally
    world.now += 2
    reaper.on_step_end(0, [])
    assert world.killed == [("n1", 41)] and reaper.ended == ["t1"]
    assert "trial t1: its Ray Train controller was still running 15 s after the trial ended" in said.getvalue()
    world.now += 100
    reaper.on_step_end(0, [])
    assert len(world.killed) == 1  # checked once


def test_controllers_that_exited_and_runs_that_never_reported_are_left_alone(tmp_path, world, reaper, said) -> None:
    _record(tmp_path, "gone", pid=7)
    _end(reaper, "gone")
    _end(reaper, "never-reported")  # no controller file
    world.now += 20
    reaper.on_step_end(0, [])
    assert world.killed == [] and said.getvalue() == ""


def test_at_the_end_of_the_search_it_waits_only_while_a_controller_is_still_alive(
    tmp_path, world, reaper, monkeypatch
) -> None:
    _record(tmp_path, "hung", pid=9)
    _record(tmp_path, "exiting", pid=10)
    world.alive_pids.update({9, 10})
    _end(reaper, "exiting")
    _end(reaper, "hung")
    naps = []

    def sleep(seconds: float) -> None:  # time passes; the exiting controller is gone after 1 s
        naps.append(seconds)
        world.now += seconds
        if sum(naps) >= 1:
            world.alive_pids.discard(10)

    monkeypatch.setattr("hpsearch.runtime.ray_workarounds.time.sleep", sleep)
    reaper.on_experiment_end([])
    assert world.killed == [("n1", 9)]
    assert 14 <= sum(naps) <= 16  # waited out the hung one's grace, not longer


def test_a_state_api_failure_never_kills(tmp_path, world) -> None:
    def broken(actor_id: str, pid: int) -> bool:
        raise RuntimeError("dashboard unreachable")

    reaper = OrphanReaper(tmp_path, grace_s=0, alive=broken, kill=world.kill, clock=lambda: world.now)
    _record(tmp_path, "t", pid=3)
    _end(reaper, "t")
    reaper.on_step_end(0, [])
    assert world.killed == []


WORKERS = [{"CPU": 0.9}]


def _group(
    pg_id: str, bundles: list[dict], *, job: str = "01000000", age_s: float = 60, state: str = "CREATED"
) -> dict:
    return {
        "placement_group_id": pg_id,
        "state": state,
        "creator_job_id": job,
        "is_detached": False,
        "bundles": [{"unit_resources": b} for b in bundles],
        "stats": {"creation_request_received_ns": str(int((1000 - age_s) * 1e9))},
    }


def test_orphan_groups_are_our_unused_worker_groups_older_than_the_grace() -> None:
    groups = [
        _group("leaked", [{"CPU": 0.9000000001}]),
        _group("in-use", [{"CPU": 0.9}]),
        _group("young", [{"CPU": 0.9}], age_s=3),
        _group("driver", [{"CPU": 0.1, "node:__internal_head__": 0.001}]),
        _group("two-workers", [{"CPU": 0.9}, {"CPU": 0.9}]),
        _group("other-job", [{"CPU": 0.9}], job="02000000"),
        _group("removed", [{"CPU": 0.9}], state="REMOVED"),
    ]
    actors = [{"placement_group_id": "in-use"}, {"placement_group_id": None}]
    assert orphan_groups(groups, actors, "01000000", [WORKERS], now_ns=int(1000e9), min_age_s=15) == ["leaked"]
    assert orphan_groups(groups, actors, "01000000", [WORKERS], now_ns=int(1000e9), min_age_s=0) == ["leaked", "young"]


def test_a_group_that_waited_for_a_node_is_as_old_as_its_placement() -> None:
    # requested 60 s ago, placed 55 s later (a node the autoscaler started): 5 s old, not an orphan yet
    waited = _group("waited", [{"CPU": 0.9}])
    waited["stats"]["end_to_end_creation_latency_us"] = str(55 * 1_000_000)
    assert orphan_groups([waited], [], "01000000", [WORKERS], now_ns=int(1000e9), min_age_s=15) == []
    assert orphan_groups([waited], [], "01000000", [WORKERS], now_ns=int(1011e9), min_age_s=15) == ["waited"]


def test_with_several_worker_shapes_a_group_of_any_of_them_is_an_orphan() -> None:
    groups = [
        _group("one-worker", [{"CPU": 0.9}]),
        _group("two-workers", [{"CPU": 0.9}] * 2),
        _group("gpu", [{"GPU": 1}]),
    ]
    shapes = [[{"CPU": 0.9}], [{"CPU": 0.9}] * 2]
    assert orphan_groups(groups, [], "01000000", shapes, now_ns=int(1000e9), min_age_s=15) == [
        "one-worker",
        "two-workers",
    ]
    assert orphan_groups(groups, [], "01000000", [], now_ns=int(1000e9), min_age_s=0) == []


def test_the_sweep_runs_every_few_seconds_and_at_the_end_and_says_what_it_removed(
    tmp_path, world, monkeypatch, said
) -> None:
    removed: list[str] = []
    state = ([_group("leaked", WORKERS)], [], "01000000")
    reaper = OrphanReaper(
        tmp_path,
        worker_bundles=WORKERS,
        grace_s=15,
        sweep_every_s=10,
        alive=world.alive,
        kill=world.kill,
        live_state=lambda: state,
        remove_group=removed.append,
        clock=lambda: world.now,
    )
    reaper.on_step_end(0, [])
    assert removed == []  # not due yet
    world.now += 10
    reaper.on_step_end(0, [])
    assert removed == ["leaked"] and reaper.removed == ["leaked"]
    assert "removed placement group leaked: a trial's worker group that no process uses" in said.getvalue()
    state = ([_group("fresh", WORKERS, age_s=1)], [], "01000000")
    naps = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        world.now += seconds

    monkeypatch.setattr("hpsearch.runtime.ray_workarounds.time.sleep", sleep)
    reaper.on_experiment_end([])
    assert removed == ["leaked", "fresh"]  # at the end nothing runs: any age counts...
    assert sum(naps) == pytest.approx(5.0)  # ...once Ray Train's cleaner has had 5 s to remove it


def test_at_the_end_groups_that_ray_train_removes_meanwhile_are_not_touched(tmp_path, world, monkeypatch, said) -> None:
    removed: list[str] = []
    views = iter([([_group("slow", WORKERS, age_s=1)], [], "01000000")] * 2 + [([], [], "01000000")] * 10)
    reaper = OrphanReaper(
        tmp_path,
        worker_bundles=WORKERS,
        live_state=lambda: next(views),
        remove_group=removed.append,
        clock=lambda: world.now,
    )
    monkeypatch.setattr(
        "hpsearch.runtime.ray_workarounds.time.sleep", lambda seconds: setattr(world, "now", world.now + seconds)
    )
    reaper.on_experiment_end([])
    assert removed == [] and said.getvalue() == ""


def test_without_worker_bundles_nothing_is_swept(tmp_path, world) -> None:
    def live_state():
        raise AssertionError("the State API should not be asked")

    reaper = OrphanReaper(tmp_path, worker_bundles=None, live_state=live_state, clock=lambda: world.now)
    world.now += 1000
    reaper.on_step_end(0, [])
    reaper.on_experiment_end([])


def _group_record(train_dir: Path, trial_id: str, group_id: str) -> None:
    from hpsearch.experiment import files

    files.write_worker_group(train_dir / trial_id, group_id=group_id, run_name=trial_id)


def test_an_ended_trials_worker_group_is_freed_once_its_controller_is_gone(tmp_path, world, said) -> None:
    """Ray Train's placement-group cleaner's job, done by the search process for every trial."""
    removed: list[str] = []
    reserved = {"g1", "g2"}
    reaper = OrphanReaper(
        tmp_path,
        grace_s=15,
        alive=world.alive,
        kill=world.kill,
        remove_group=lambda g: (removed.append(g), reserved.discard(g)),
        clock=lambda: world.now,
        group_removed=lambda g: g not in reserved,
        controller_running=lambda record: record["pid"] in world.alive_pids,
        free_every_s=0.25,
    )
    _record(tmp_path, "t1", pid=41)
    _group_record(tmp_path, "t1", "g1")
    world.alive_pids.add(41)
    _end(reaper, "t1")
    world.now += 0.25
    reaper.on_step_end(0, [])
    assert removed == []  # its controller is still ending: the group may still be in use
    world.alive_pids.discard(41)
    world.now += 0.1
    reaper.on_step_end(0, [])
    assert removed == []  # looked at every 0.25 s, not at every step
    world.now += 0.15
    reaper.on_step_end(0, [])
    assert removed == ["g1"] and reaper.freed == ["g1"]
    world.now += 1
    reaper.on_step_end(0, [])
    assert removed == ["g1"]  # once
    assert said.getvalue() == ""  # Ray's cleaner says nothing either


def test_a_group_ray_train_removed_itself_is_left_alone_and_a_retried_trial_frees_its_old_one(tmp_path, world) -> None:
    removed: list[str] = []
    reserved = {"old"}
    reaper = OrphanReaper(
        tmp_path,
        remove_group=removed.append,
        clock=lambda: world.now,
        group_removed=lambda g: g not in reserved,
        controller_running=lambda record: False,
    )
    _record(tmp_path, "done", pid=5)
    _group_record(tmp_path, "done", "shut-down-by-ray")  # a run that ended by itself removed its group
    _end(reaper, "done")
    _record(tmp_path, "retried", pid=6)
    _group_record(tmp_path, "retried", "old")
    reaper.on_trial_recover(0, [], SimpleNamespace(trial_id="retried"))
    _group_record(tmp_path, "retried", "new")  # the next run of the trial records its own group at once
    reserved.add("new")
    world.now += 1
    reaper.on_step_end(0, [])
    assert removed == ["old"]  # the run that ended, never the one that started since


def test_at_the_end_of_the_search_every_ended_trials_group_is_freed(tmp_path, world, monkeypatch) -> None:
    removed: list[str] = []
    reaper = OrphanReaper(
        tmp_path,
        grace_s=15,
        alive=world.alive,
        kill=world.kill,
        remove_group=removed.append,
        clock=lambda: world.now,
        group_removed=lambda g: g in removed,
        controller_running=lambda record: record["pid"] in world.alive_pids,
    )
    monkeypatch.setattr(
        "hpsearch.runtime.ray_workarounds.time.sleep", lambda seconds: setattr(world, "now", world.now + seconds)
    )
    _record(tmp_path, "t1", pid=41)
    _group_record(tmp_path, "t1", "g1")
    world.alive_pids.add(41)
    _end(reaper, "t1")
    reaper.on_experiment_end([])  # its controller hangs: ended after its grace, then its group freed
    assert world.killed == [("n1", 41)] and removed == ["g1"]


def test_at_the_end_a_controller_still_exiting_has_its_group_freed_once_it_is_gone(
    tmp_path, world, monkeypatch
) -> None:
    """Tune stops the trial actors just before the end: a controller's process can outlive its actor a moment."""
    removed: list[str] = []
    exiting = iter([True, True, False])  # the process is seen running twice more, then gone
    reaper = OrphanReaper(
        tmp_path,
        grace_s=15,
        alive=world.alive,  # the State API already says the actor is dead
        kill=world.kill,
        remove_group=removed.append,
        clock=lambda: world.now,
        group_removed=lambda g: g in removed,
        controller_running=lambda record: next(exiting, False),
        free_every_s=0.25,
    )
    monkeypatch.setattr(
        "hpsearch.runtime.ray_workarounds.time.sleep", lambda seconds: setattr(world, "now", world.now + seconds)
    )
    _record(tmp_path, "t1", pid=41)
    _group_record(tmp_path, "t1", "g1")
    _end(reaper, "t1")
    started = world.now
    reaper.on_experiment_end([])
    assert removed == ["g1"] and world.killed == [] and world.now - started <= 1.0  # as it went, not after a grace


@pytest.mark.ray
def test_on_ray_a_recorded_actor_still_alive_is_ended_through_the_state_api(ray_cluster, tmp_path) -> None:
    import os
    import time

    from hpsearch.runtime.ray_workarounds import record_controller

    @ray_cluster.remote(num_cpus=0)
    class TrainController:  # named as Ray Train's: the reaper ends a recorded PID only while it still names it
        def record(self, trial_dir: str) -> int:
            record_controller(trial_dir)
            return os.getpid()

    stuck = TrainController.remote()
    ray_cluster.get(stuck.record.remote(str(tmp_path / "t1")))
    reaper = OrphanReaper(tmp_path, grace_s=0)
    _end(reaper, "t1")
    reaper.on_step_end(0, [])
    assert reaper.ended == ["t1"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and reaper._is_alive(json.loads((tmp_path / "t1" / CONTROLLER_FILE).read_text())):
        time.sleep(0.2)
    with pytest.raises(ray_cluster.exceptions.RayActorError):
        ray_cluster.get(stuck.record.remote(str(tmp_path / "t2")), timeout=10)


@pytest.mark.ray
def test_on_ray_the_sweep_removes_an_unused_worker_shaped_group_and_keeps_one_in_use(ray_cluster, tmp_path) -> None:
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    unused = placement_group([{"CPU": 0.05}])
    used = placement_group([{"CPU": 0.05}])
    ray_cluster.get([unused.ready(), used.ready()], timeout=30)

    @ray_cluster.remote(num_cpus=0.05)
    class Worker:
        def ping(self) -> bool:
            return True

    worker = Worker.options(scheduling_strategy=PlacementGroupSchedulingStrategy(used)).remote()
    assert ray_cluster.get(worker.ping.remote(), timeout=30)
    reaper = OrphanReaper(tmp_path, worker_bundles=[{"CPU": 0.05}])
    reaper.on_experiment_end([])
    assert reaper.removed == [unused.id.hex()]
    table = ray_cluster.util.placement_group_table()
    assert table[unused.id.hex()]["state"] == "REMOVED" and table[used.id.hex()]["state"] == "CREATED"
    ray_cluster.kill(worker)
    ray_cluster.util.remove_placement_group(used)


# ----------------------------------------------------------------------------- the switch (no Ray started)


@pytest.mark.parametrize(
    ("value", "on"),
    [(None, True), ("1", True), ("", True), ("0", False), (" off ", False), ("false", False), ("No", False)],
)
def test_the_switch_turns_the_workarounds_off_only_when_asked(value, on) -> None:
    from hpsearch.runtime.ray_workarounds import SWITCH, workarounds_enabled

    assert SWITCH == "HPSEARCH_RAY_WORKAROUNDS"
    assert workarounds_enabled({} if value is None else {SWITCH: value}) is on


def _spec(tmp_path: Path):
    from hpsearch.spec import load_spec

    return load_spec(
        {
            "name": "switch",
            "trainable": "hpsearch.examples.digits:train_loop",
            "metric": "loss",
            "mode": "min",
            "search_space": {"lr": {"type": "float", "low": 1e-4, "high": 0.1, "log": True}},
            "scheduler": {"type": "asha", "max_t": 4},
            "storage_path": str(tmp_path),
        },
        check_trainable=False,
    )


def test_the_callbacks_are_the_recorder_the_printer_the_node_watch_then_the_reaper_when_on(tmp_path) -> None:
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    from hpsearch.runtime.nodes.listening import LoopbackWatch
    from hpsearch.runtime.nodes.node_watch import NodeWatch
    from hpsearch.runtime.search.outcomes import OutcomeRecorder
    from hpsearch.runtime.search.progress import ProgressPrinter
    from hpsearch.runtime.search.room import RoomKeeper
    from hpsearch.runtime.search.tuner import callbacks_for

    spec = _spec(tmp_path)
    on = callbacks_for(spec, concurrency=2, workarounds=True)
    # Tune's CSV and JSON loggers last, named so that Tune adds no TensorBoard logger of its own
    assert [type(c) for c in on] == [
        OutcomeRecorder,
        ProgressPrinter,
        NodeWatch,
        RoomKeeper,
        OrphanReaper,
        LoopbackWatch,
        CSVLoggerCallback,
        JsonLoggerCallback,
    ]
    recorder, printer, watch, _, reaper, _, _, _ = on
    assert printer.recorder is recorder and recorder.max_t == ("epoch", 4)
    assert recorder.error_note == watch.note_for  # an errored trial's line names a lost host
    assert reaper.train_dir == spec.experiment_dir / "train" == watch.train_dir
    assert [type(c) for c in callbacks_for(spec, concurrency=2, workarounds=False)] == [
        OutcomeRecorder,
        ProgressPrinter,
        NodeWatch,
        RoomKeeper,
        CSVLoggerCallback,
        JsonLoggerCallback,
    ]


def test_a_search_over_the_trials_scale_sweeps_every_worker_group_shape_a_trial_can_make(tmp_path) -> None:
    from hpsearch.runtime.search.tuner import callbacks_for
    from hpsearch.spec import load_spec

    spec = load_spec(
        {
            "name": "scales",
            "trainable": "hpsearch.examples.digits:train_loop",
            "metric": "loss",
            "mode": "min",
            "scaling": {
                "num_workers": {"type": "choice", "values": [1, 2]},
                "resources_per_worker": {"CPU": {"type": "choice", "values": [0.45, 0.9]}},
            },
            "resources": {"driver_cpus": 0.45, "driver_node": "any"},
            "storage_path": str(tmp_path),
        },
        check_trainable=False,
    )
    [reaper] = [c for c in callbacks_for(spec, concurrency=1, workarounds=True) if isinstance(c, OrphanReaper)]
    # a 1-worker group of {CPU: 0.45} looks like a trial driver's group (driver_node: any): never swept
    assert reaper.shapes == [[{"CPU": 0.9}], [{"CPU": 0.45}] * 2, [{"CPU": 0.9}] * 2]


@pytest.mark.parametrize("switch", ["1", "0"])
def test_build_tuner_reads_the_switch_for_its_callbacks_and_its_nested_runs(tmp_path, monkeypatch, switch) -> None:
    """build_tuner with the cluster given as data plans and builds without starting Ray."""
    from hpsearch.planning.planner import Node
    from hpsearch.runtime.search import tuner

    monkeypatch.setenv("HPSEARCH_RAY_WORKAROUNDS", switch)
    monkeypatch.delenv("RAY_AIR_NEW_OUTPUT", raising=False)  # build_tuner sets it; restored after the test
    seen: dict = {}
    real_callbacks, real_trainable = tuner.callbacks_for, tuner.make_trainable

    def callbacks_for(spec, **kwargs):
        seen["callbacks"] = real_callbacks(spec, **kwargs)
        return seen["callbacks"]

    def make_trainable(*args, **kwargs):
        seen["record_controller"] = kwargs["record_controller"]
        return real_trainable(*args, **kwargs)

    monkeypatch.setattr(tuner, "callbacks_for", callbacks_for)
    monkeypatch.setattr(tuner, "make_trainable", make_trainable)
    import ray

    def no_ray(*args, **kwargs):
        raise AssertionError("build_tuner with nodes given must not start or connect to Ray")

    monkeypatch.setattr(ray, "init", no_ray)  # another test's session Ray may be up: it must not be started here
    monkeypatch.setattr("hpsearch.runtime.nodes.connect.connect", no_ray)
    was_up = ray.is_initialized()
    tuner.build_tuner(_spec(tmp_path), nodes=[Node({"CPU": 2.0, "memory": 8e9}, "head", is_head=True)])
    assert ray.is_initialized() is was_up
    on = switch == "1"
    assert [type(c).__name__ for c in seen["callbacks"]] == [
        "OutcomeRecorder",
        "ProgressPrinter",
        "NodeWatch",
        "RoomKeeper",
    ] + (["OrphanReaper", "LoopbackWatch"] if on else []) + ["CSVLoggerCallback", "JsonLoggerCallback"]
    assert seen["record_controller"] is on


# ----------------------------------------------------------------------------- bug 3: the driver's last report


class _Queue:
    """A queue whose ``empty()`` answers from a script, one answer per call (then the last forever)."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers
        self.calls = 0

    def empty(self) -> bool:
        self.calls += 1
        return self.answers[min(self.calls, len(self.answers)) - 1]


class _Session:
    """The attributes of Ray's ``_TrainSession`` that ``DriverSession`` reads (tests/runtime/test_ray_contract.py checks Ray's)."""

    def __init__(self, reports: _Queue | None, results: _Queue) -> None:
        self._inter_actor_queue = reports
        self.result_queue = results
        self.stop_event = threading.Event()


def _driver(reports: _Queue | None, results: _Queue):
    from hpsearch.runtime.internals import DriverSession

    return DriverSession(_Session(reports, results))


def test_the_driver_returns_only_once_both_report_queues_stay_empty() -> None:
    from hpsearch.runtime.ray_workarounds import wait_for_forwarded_reports

    # the last report is still on the queue actor twice, then in the driver's hands (both empty once,
    # then the result queue holds it), then Tune has it: both empty at two looks settle_s apart
    reports = _Queue([False, False, True, True, True])
    results = _Queue([True, False, True, True])
    session = _driver(reports, results)
    assert wait_for_forwarded_reports(session, settle_s=0.0, poll_s=0.0) is True
    assert reports.calls == 6 and results.calls == 4


def test_a_report_never_taken_gives_up_after_the_timeout_and_no_queue_means_nothing_to_wait_for() -> None:
    from hpsearch.runtime.ray_workarounds import wait_for_forwarded_reports

    stuck = _driver(_Queue([False]), _Queue([True]))
    started = time.monotonic()
    assert wait_for_forwarded_reports(stuck, timeout_s=0.3, settle_s=0.0, poll_s=0.01) is False
    assert 0.3 <= time.monotonic() - started < 2
    assert wait_for_forwarded_reports(_driver(None, _Queue([False]))) is True  # no report was ever forwarded


def test_after_the_search_the_drain_waits_for_groups_still_in_use_and_removes_one_left_unused(
    tmp_path, world, monkeypatch, said
) -> None:
    """Tune's last clean-up ends its cached trial actors after the reaper's last call: their groups are drained."""
    monkeypatch.setattr("hpsearch.runtime.ray_workarounds.ray.is_initialized", lambda: True)
    worker = {"placement_group_id": "cached", "state": "ALIVE"}
    views = iter(
        [
            ([_group("cached", WORKERS), _group("freed", WORKERS)], [worker], "01000000"),  # both in use... then
            ([_group("cached", WORKERS)], [], "01000000"),  # the cached actor's workers died; Ray freed the other
            ([_group("cached", WORKERS)], [], "01000000"),
            ([_group("cached", WORKERS)], [], "01000000"),
            ([_group("cached", WORKERS)], [], "01000000"),
            ([_group("cached", WORKERS)], [], "01000000"),
            ([_group("cached", WORKERS)], [], "01000000"),
            ([_group("cached", WORKERS)], [], "01000000"),
            ([], [], "01000000"),
        ]
    )
    removed: list[str] = []
    state = {"live_state": lambda: next(views), "remove_group": removed.append, "clock": lambda: world.now}
    sweeper = OrphanReaper(tmp_path, worker_bundles=WORKERS, **state)
    monkeypatch.setattr("hpsearch.runtime.ray_workarounds.time.sleep", lambda s: setattr(world, "now", world.now + s))
    sweeper.drain(timeout_s=15, unused_s=3)
    assert removed == ["cached"]  # once unused for 3 s: Ray Train's cleaner had its chance first
    assert "removed placement group cached: after the search: a trial's worker group no process used" in said.getvalue()


def test_the_drain_returns_at_once_when_nothing_is_left_and_gives_up_at_its_deadline(
    tmp_path, world, monkeypatch, said
) -> None:
    monkeypatch.setattr("hpsearch.runtime.ray_workarounds.ray.is_initialized", lambda: True)
    looks: list[int] = []

    def live_state():
        looks.append(1)
        return [], [], "01000000"

    OrphanReaper(tmp_path, worker_bundles=WORKERS, live_state=live_state, clock=lambda: world.now).drain()
    assert looks == [1]
    worker = {"placement_group_id": "busy", "state": "ALIVE"}
    removed: list[str] = []
    reaper = OrphanReaper(
        tmp_path,
        worker_bundles=WORKERS,
        live_state=lambda: ([_group("busy", WORKERS)], [worker], "01000000"),
        remove_group=removed.append,
        clock=lambda: world.now,
    )
    monkeypatch.setattr("hpsearch.runtime.ray_workarounds.time.sleep", lambda s: setattr(world, "now", world.now + s))
    start = world.now
    reaper.drain(timeout_s=15)
    assert removed == [] and world.now - start == pytest.approx(15.0)  # a group in use is never removed
    monkeypatch.setattr("hpsearch.runtime.ray_workarounds.ray.is_initialized", lambda: False)
    reaper.drain()  # no Ray in this process: nothing to ask
    assert said.getvalue() == ""
