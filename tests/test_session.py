"""Ending what a killed run's embedded Ray left behind, on stand-in processes (no Ray is started).

Each test starts its own ``sleep``-like Python processes, names them in a recorded session the
way :mod:`hpsearch.runtime.session` records a real one, and checks which of them
``end_leftovers`` ends. Every process started here is ended by its PID at the end of its test.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from hpsearch import messages
from hpsearch.experiment.layout import RAY_SESSION_FILE
from hpsearch.runtime import session
from hpsearch.runtime.session import RaySession, SessionProcess

SLEEP = (
    "import os, sys, time\nlog = os.environ.get('HOLD_OPEN')\nheld = open(log, 'a') if log else None\ntime.sleep(120)\n"
)


@pytest.fixture
def started():
    """Start stand-in processes; every one still alive at the end is killed (by its PID)."""
    procs: list[subprocess.Popen] = []

    def start(*args: str, hold_open: Path | None = None) -> psutil.Process:
        env = dict(os.environ, HOLD_OPEN=str(hold_open)) if hold_open else dict(os.environ)
        proc = subprocess.Popen([sys.executable, "-c", SLEEP, *args], env=env)
        procs.append(proc)
        found = psutil.Process(proc.pid)
        if hold_open is not None:  # wait until it holds the file open, as an agent holds its log
            deadline = time.monotonic() + 20
            while not any(f.path == str(hold_open) for f in found.open_files()):
                assert time.monotonic() < deadline, "the stand-in never opened its file"
                time.sleep(0.05)
        return found

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def _gone_driver() -> SessionProcess:
    """A driver that has exited (a SIGKILLed ``hpsearch run``): its PID and start time no longer match anything."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    record = SessionProcess(pid=proc.pid, create_time=psutil.Process(proc.pid).create_time(), name="python")
    proc.wait(timeout=30)
    return record


def _session(folder: Path, processes: list[SessionProcess], *, driver: SessionProcess, host: str | None = None):
    return RaySession(
        session_name=folder.name,
        session_dir=str(folder),
        host=host or socket.gethostname(),
        driver=driver,
        processes=tuple(processes),
        recorded_at=time.time(),
    )


def _write(exp_dir: Path, recorded: RaySession) -> None:
    exp_dir.mkdir(parents=True, exist_ok=True)
    (exp_dir / RAY_SESSION_FILE).write_text(json.dumps(recorded.as_dict()))


def test_a_recorded_session_reads_back_as_written_and_a_damaged_record_reads_as_none(tmp_path):
    recorded = _session(
        tmp_path / "session_x",
        [SessionProcess(12, 1.5, "raylet"), SessionProcess(13, 2.5, "gcs_server")],
        driver=SessionProcess(11, 1.0, "python"),
    )
    _write(tmp_path / "exp", recorded)
    assert session.read(tmp_path / "exp") == recorded
    (tmp_path / "exp" / RAY_SESSION_FILE).write_text('{"session_name": "s", "processes": [')
    assert session.read(tmp_path / "exp") is None
    (tmp_path / "exp" / RAY_SESSION_FILE).write_text('{"session_name": "s", "processes": []}')
    assert session.read(tmp_path / "exp") is None
    assert session.read(tmp_path / "nothing-here") is None
    assert session.end_leftovers(tmp_path / "nothing-here") == []


def test_the_leftovers_of_a_killed_run_are_ended_and_named_in_one_line(tmp_path, started):
    folder = tmp_path / "session_2026-01-01_00-00-00_000000_1"
    (folder / "logs").mkdir(parents=True)
    by_command_line = started(str(folder))  # like gcs_server --log_dir=<session>/logs
    by_open_file = started(hold_open=folder / "logs" / "dashboard_agent.log")  # like ray::DashboardAgent
    recorded = _session(
        folder, [SessionProcess.of(by_command_line), SessionProcess.of(by_open_file)], driver=_gone_driver()
    )
    _write(tmp_path / "exp", recorded)
    out = io.StringIO()
    with messages.to(out):
        ended = session.end_leftovers(tmp_path / "exp")
    assert sorted(p.pid for p in ended) == sorted([by_command_line.pid, by_open_file.pid])
    for proc in (by_command_line, by_open_file):
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    line = out.getvalue()
    assert line.startswith(f"hpsearch: ended 2 process(es) left by the killed run of {folder.name} (")
    assert f"python {by_command_line.pid}" in line and f"python {by_open_file.pid}" in line
    with messages.to(out):
        assert session.end_leftovers(tmp_path / "exp") == []  # nothing is left the second time


def test_a_ray_worker_started_after_the_record_is_ended_too(tmp_path, started):
    """An idle worker the raylet started after the session was recorded, left when its raylet was killed."""
    folder = tmp_path / "session_2026-01-01_00-00-00_000000_3"
    (folder / "logs").mkdir(parents=True)
    log = folder / "logs" / "worker-01.out"
    proc = subprocess.Popen(
        ["ray::IDLE", "-c", SLEEP], executable=sys.executable, env=dict(os.environ, HOLD_OPEN=str(log))
    )
    idle = psutil.Process(proc.pid)
    try:
        deadline = time.monotonic() + 20
        while not any(f.path == str(log) for f in idle.open_files()):
            assert time.monotonic() < deadline, "the stand-in never opened its log"
            time.sleep(0.05)
        not_ray = started(hold_open=folder / "logs" / "raylet.out")  # a user's `tail -f` of a log: not Ray's
        _write(tmp_path / "exp", _session(folder, [], driver=_gone_driver()))
        ended = session.end_leftovers(tmp_path / "exp")
        assert [p.pid for p in ended] == [idle.pid]
        assert not_ray.is_running()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_no_other_process_is_ended(tmp_path, started):
    folder = tmp_path / "session_2026-01-01_00-00-00_000000_2"
    folder.mkdir()
    unrelated = started()  # right PID and start time, but nothing of the session in it
    reused = started(str(folder))  # names the session, but its start time is not the one recorded: a reused PID
    recorded = _session(
        folder,
        [SessionProcess.of(unrelated), SessionProcess(reused.pid, reused.create_time() - 30.0, "raylet")],
        driver=_gone_driver(),
    )
    _write(tmp_path / "exp", recorded)
    assert session.end_leftovers(tmp_path / "exp") == []
    assert unrelated.is_running() and reused.is_running()


def test_nothing_is_ended_while_the_recording_driver_runs_or_on_another_machine(tmp_path, started):
    folder = tmp_path / "session_2026-01-01_00-00-00_000000_3"
    folder.mkdir()
    proc = started(str(folder))
    driver_alive = SessionProcess.of(psutil.Process(os.getpid()))  # the search is still running
    _write(tmp_path / "exp", _session(folder, [SessionProcess.of(proc)], driver=driver_alive))
    assert session.end_leftovers(tmp_path / "exp") == []
    elsewhere = _session(folder, [SessionProcess.of(proc)], driver=_gone_driver(), host=socket.gethostname() + "-x")
    _write(tmp_path / "exp", elsewhere)
    assert session.end_leftovers(tmp_path / "exp") == []
    assert proc.is_running()


def test_nothing_is_recorded_without_ray_or_on_a_cluster_this_process_did_not_start(tmp_path, monkeypatch):
    import ray

    monkeypatch.setattr(ray._private.worker, "_global_node", None)  # not connected
    assert session.current_session() is None
    node_of_a_driver_on_address = type("Node", (), {"all_processes": {}, "session_name": "s"})()  # Ray started nothing
    monkeypatch.setattr(ray._private.worker, "_global_node", node_of_a_driver_on_address)
    assert session.current_session() is None
    assert session.record(tmp_path) is None
    assert not (tmp_path / RAY_SESSION_FILE).exists()


@pytest.mark.parametrize("command", ["run --overwrite", "resume"])
def test_run_overwrite_and_resume_end_the_leftovers_before_their_ray_starts(tmp_path, started, monkeypatch, command):
    from hpsearch.experiment import files
    from hpsearch.runtime import cluster, tuner
    from hpsearch.spec import load_spec

    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(
        json.dumps(
            {
                "name": "exp",
                "trainable": f"{Path(__file__).resolve().parent / 'loops.py'}:quadratic",
                "metric": "loss",
                "mode": "min",
                "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
                "storage_path": str(tmp_path / "results"),
            }
        )
    )
    spec = load_spec(spec_path)
    exp_dir = spec.experiment_dir
    exp_dir.mkdir(parents=True)
    files.write_spec(exp_dir, spec.to_dict())  # the folder of a search that was killed
    folder = tmp_path / "session_2026-01-01_00-00-00_000000_4"
    folder.mkdir()
    agent = started(str(folder))
    _write(exp_dir, _session(folder, [SessionProcess.of(agent)], driver=_gone_driver()))

    running_when_ray_starts = []

    def connect(*args, **kwargs):
        running_when_ray_starts.append(agent.is_running() and agent.status() != psutil.STATUS_ZOMBIE)
        raise RuntimeError("Ray would start here")

    monkeypatch.setattr(cluster, "connect", connect)
    out = io.StringIO()
    with pytest.raises(RuntimeError, match="Ray would start here"):
        if command == "resume":
            tuner.resume(exp_dir, stream=out)
        else:
            tuner.run(spec, overwrite=True, stream=out)
    assert running_when_ray_starts == [False]
    assert f"hpsearch: ended 1 process(es) left by the killed run of {folder.name}" in out.getvalue()


# ----------------------------------------------------------------------------- no blind SIGKILL


def test_a_recorded_pid_is_killed_only_while_it_is_still_that_process(tmp_path) -> None:
    """A Train controller's record (PID, start time, name) versus a PID the system gave to another process."""
    from hpsearch.runtime.session import kill_if_still

    earlier = subprocess.Popen(["sleep", "60"])
    recorded = psutil.Process(earlier.pid).create_time()
    earlier.kill()
    earlier.wait()
    other = subprocess.Popen(["sleep", "60"])  # the process now behind "the" PID, as if the PID were reused
    try:
        started = psutil.Process(other.pid).create_time()
        assert not kill_if_still(other.pid, recorded - 5.0, named="sleep")  # another start time: not ours
        assert not kill_if_still(other.pid, None, named="sleep")  # no start time recorded: proves nothing
        assert not kill_if_still(other.pid, started, named="TrainController")  # not a controller
        assert other.poll() is None  # still running after all three
        assert not kill_if_still(earlier.pid, recorded, named="sleep")  # gone
        assert kill_if_still(other.pid, started, named="sleep")
        assert other.wait(timeout=10) == -9
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
