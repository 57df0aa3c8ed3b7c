"""OrphanReaper: which controllers it ends, and when (fake State API and kill; no Ray started)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from hpsearch.orphans import CONTROLLER_FILE, OrphanReaper


class World:
    """Controllers that are alive until killed, and a clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0
        self.alive_pids: set[int] = set()
        self.killed: list[tuple[str, int]] = []

    def alive(self, actor_id: str, pid: int) -> bool:
        return pid in self.alive_pids

    def kill(self, node_id: str, pid: int) -> None:
        self.killed.append((node_id, pid))
        self.alive_pids.discard(pid)


def _record(train_dir: Path, trial_id: str, pid: int) -> None:
    (train_dir / trial_id).mkdir(parents=True)
    (train_dir / trial_id / CONTROLLER_FILE).write_text(json.dumps({"actor_id": f"a{pid}", "node_id": "n1", "pid": pid}))


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def reaper(tmp_path: Path, world: World) -> OrphanReaper:
    return OrphanReaper(tmp_path, grace_s=15, stream=io.StringIO(), alive=world.alive, kill=world.kill,
                        clock=lambda: world.now)


def _end(reaper: OrphanReaper, trial_id: str) -> None:
    reaper.on_trial_complete(0, [], SimpleNamespace(trial_id=trial_id))


def test_a_controller_alive_after_the_grace_is_ended_and_reported(tmp_path, world, reaper) -> None:
    _record(tmp_path, "t1", pid=41)
    world.alive_pids.add(41)
    _end(reaper, "t1")
    world.now += 14
    reaper.on_step_end(0, [])
    assert world.killed == []  # still within its grace: it may be exiting normally
    world.now += 2
    reaper.on_step_end(0, [])
    assert world.killed == [("n1", 41)] and reaper.ended == ["t1"]
    assert "trial t1: its Ray Train controller was still running 15 s after the trial ended" in reaper.stream.getvalue()
    world.now += 100
    reaper.on_step_end(0, [])
    assert len(world.killed) == 1  # checked once


def test_controllers_that_exited_and_runs_that_never_reported_are_left_alone(tmp_path, world, reaper) -> None:
    _record(tmp_path, "gone", pid=7)
    _end(reaper, "gone")
    _end(reaper, "never-reported")  # no controller file
    world.now += 20
    reaper.on_step_end(0, [])
    assert world.killed == [] and reaper.stream.getvalue() == ""


def test_at_the_end_of_the_search_it_waits_only_while_a_controller_is_still_alive(tmp_path, world, reaper, monkeypatch) -> None:
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

    monkeypatch.setattr("hpsearch.orphans.time.sleep", sleep)
    reaper.on_experiment_end([])
    assert world.killed == [("n1", 9)]
    assert 14 <= sum(naps) <= 16  # waited out the hung one's grace, not longer


def test_a_state_api_failure_never_kills(tmp_path, world) -> None:
    def broken(actor_id: str, pid: int) -> bool:
        raise RuntimeError("dashboard unreachable")

    reaper = OrphanReaper(tmp_path, grace_s=0, stream=io.StringIO(), alive=broken, kill=world.kill, clock=lambda: world.now)
    _record(tmp_path, "t", pid=3)
    _end(reaper, "t")
    reaper.on_step_end(0, [])
    assert world.killed == []


@pytest.mark.ray
def test_on_ray_a_recorded_actor_still_alive_is_ended_through_the_state_api(ray_cluster, tmp_path) -> None:
    import os
    import time

    from hpsearch.orphans import record_controller

    @ray_cluster.remote(num_cpus=0)
    class Stuck:
        def record(self, trial_dir: str) -> int:
            record_controller(trial_dir)
            return os.getpid()

    stuck = Stuck.remote()
    ray_cluster.get(stuck.record.remote(str(tmp_path / "t1")))
    reaper = OrphanReaper(tmp_path, grace_s=0, stream=io.StringIO())
    _end(reaper, "t1")
    reaper.on_step_end(0, [])
    assert reaper.ended == ["t1"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and reaper._is_alive(json.loads((tmp_path / "t1" / CONTROLLER_FILE).read_text())):
        time.sleep(0.2)
    with pytest.raises(ray_cluster.exceptions.RayActorError):
        ray_cluster.get(stuck.record.remote(str(tmp_path / "t2")), timeout=10)
