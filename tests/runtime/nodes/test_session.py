"""Ending what a killed run's embedded Ray left behind, on stand-in processes (no Ray is started).

Each test starts its own ``sleep``-like Python processes, titled as Ray titles its agents
(``ray::DashboardAgent``), names them in a recorded session the way
:mod:`hpsearch.runtime.nodes.session` records a real one, and checks which of them ``end_leftovers``
ends. Every process started here is ended by its PID at the end of its test. Damaged and
hostile records are refused in one line; one test (marked ``ray``) checks that a live Ray
session's processes survive every such record.
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
from hpsearch.runtime.nodes import session
from hpsearch.runtime.nodes.session import RaySession, SessionProcess

#: A Python another user may run (this project's virtual environment may sit in root's home).
OTHERS_PYTHON = "/usr/bin/python3"
#: How Ray titles the agents a killed run leaves (``ray::DashboardAgent``): a stand-in titled so is Ray's.
AGENT = "ray::DashboardAgent"
SLEEP = (
    "import os, sys, time\nlog = os.environ.get('HOLD_OPEN')\nheld = open(log, 'a') if log else None\ntime.sleep(120)\n"
)


@pytest.fixture
def started():
    """Start stand-in processes; every one still alive at the end is killed (by its PID)."""
    procs: list[subprocess.Popen] = []

    def start(
        *args: str, hold_open: Path | None = None, title: str | None = AGENT, user: int | None = None
    ) -> psutil.Process:
        env = dict(os.environ, HOLD_OPEN=str(hold_open)) if hold_open else dict(os.environ)
        proc = subprocess.Popen(
            [title or sys.executable, "-c", SLEEP, *args],
            executable=sys.executable if user is None else OTHERS_PYTHON,
            env=env,
            user=user,
        )
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
    folder = tmp_path / "ray" / "session_2026-01-01_00-00-00_000000_1"
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
    folder = tmp_path / "ray" / "session_2026-01-01_00-00-00_000000_3"
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
        not_ray = started(hold_open=folder / "logs" / "raylet.out", title=None)  # a user's `tail -f` of a log
        _write(tmp_path / "exp", _session(folder, [], driver=_gone_driver()))
        ended = session.end_leftovers(tmp_path / "exp")
        assert [p.pid for p in ended] == [idle.pid]
        assert not_ray.is_running()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_no_other_process_is_ended(tmp_path, started):
    folder = tmp_path / "ray" / "session_2026-01-01_00-00-00_000000_2"
    folder.mkdir(parents=True)
    unrelated = started()  # right PID and start time, but nothing of the session in it
    # names the session, but its start time is not the one recorded: a reused PID (not titled as Ray's
    # agents, which a look for the session's later workers would find by their title and folder)
    reused = started(str(folder), title=None)
    recorded = _session(
        folder,
        [SessionProcess.of(unrelated), SessionProcess(reused.pid, reused.create_time() - 30.0, "raylet")],
        driver=_gone_driver(),
    )
    _write(tmp_path / "exp", recorded)
    assert session.end_leftovers(tmp_path / "exp") == []
    assert unrelated.is_running() and reused.is_running()


def test_nothing_is_ended_while_the_recording_driver_runs_or_on_another_machine(tmp_path, started):
    folder = tmp_path / "ray" / "session_2026-01-01_00-00-00_000000_3"
    folder.mkdir(parents=True)
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


# ----------------------------------------------------------------------------- a record not to be trusted

NAME = "session_2026-01-01_00-00-00_000000_7"


def _hostile(tmp_path: Path, started, *, ended: bool = False, **changes: str) -> tuple[Path, psutil.Process, str]:
    """A stand-in agent of a real-looking session, and a record of it with ``changes`` made; the line said."""
    folder = tmp_path / "ray" / NAME
    folder.mkdir(parents=True, exist_ok=True)
    agent = started(str(folder))
    recorded = _session(folder, [SessionProcess.of(agent)], driver=_gone_driver()).as_dict()
    recorded.update(changes)
    (tmp_path / "exp").mkdir(exist_ok=True)
    (tmp_path / "exp" / RAY_SESSION_FILE).write_text(json.dumps(recorded))
    out = io.StringIO()
    with messages.to(out):
        assert [p.pid for p in session.end_leftovers(tmp_path / "exp")] == ([agent.pid] if ended else [])
    return folder, agent, out.getvalue()


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"session_name": ""}, "its session name '' is not one Ray gives"),
        ({"session_name": "ray"}, "its session name 'ray' is not one Ray gives"),
        ({"session_dir": "/"}, "its session folder '/' is not that session's folder in a Ray temp root"),
        ({"session_dir": "/tmp"}, "its session folder '/tmp' is not that session's folder"),
        ({"session_dir": f"/tmp/ray/../ray/{NAME}"}, "is not that session's folder in a Ray temp root"),
        ({"session_dir": f"/tmp/elsewhere/{NAME}"}, "is not that session's folder in a Ray temp root"),
        ({"session_dir": f"/tmp/ray/{NAME[:-1]}8"}, "is not that session's folder in a Ray temp root"),
        ({"session_dir": f"ray/{NAME}"}, "is not that session's folder in a Ray temp root"),
        ({"driver": "me"}, "it is not a session record"),
    ],
)
def test_a_damaged_or_hostile_record_is_said_in_one_line_and_never_acted_on(tmp_path, started, changes, why):
    _, agent, said = _hostile(tmp_path, started, **changes)
    assert said.count("\n") == 1 and said.startswith("hpsearch: the Ray session record ")
    assert why in said and said.rstrip().endswith(
        "no process was ended (end any that a killed search left yourself, by PID)"
    )
    assert agent.is_running() and agent.status() != psutil.STATUS_ZOMBIE


def test_a_record_or_session_folder_of_another_user_or_behind_a_link_is_not_used(tmp_path, started):
    if os.geteuid() != 0:
        pytest.skip("needs root, to give a file to another user")
    folder, _, said = _hostile(tmp_path, started, ended=True)  # the control: a sound record is acted on
    assert said.startswith("hpsearch: ended 1 process(es) left by the killed run of")
    record = tmp_path / "exp" / RAY_SESSION_FILE
    for damage, why in (
        (lambda: os.chown(record, 65534, 65534), "it belongs to another user (uid 65534)"),
        (lambda: os.chown(folder, 65534, 65534), f"its session folder {folder} is not a folder of this user's"),
    ):
        agent = started(str(folder))
        record.write_text(json.dumps(_session(folder, [SessionProcess.of(agent)], driver=_gone_driver()).as_dict()))
        damage()
        out = io.StringIO()
        with messages.to(out):
            assert session.end_leftovers(tmp_path / "exp") == []
        assert why in out.getvalue() and agent.is_running()
        os.chown(record, 0, 0)
        os.chown(folder, 0, 0)
    real = tmp_path / "real-record.json"
    record.rename(real)
    record.symlink_to(real)
    agent = started(str(folder))
    real.write_text(json.dumps(_session(folder, [SessionProcess.of(agent)], driver=_gone_driver()).as_dict()))
    out = io.StringIO()
    with messages.to(out):
        assert session.end_leftovers(tmp_path / "exp") == []
    assert "it is not a regular file" in out.getvalue() and agent.is_running()


def test_only_ray_processes_of_this_user_naming_that_exact_session_are_ended(tmp_path, started):
    folder = tmp_path / "ray" / NAME
    (folder / "logs").mkdir(parents=True)
    plain = started(str(folder), title=None)  # names the session, but is no process of Ray's
    longer_name = started(f"--session-name={NAME}0")  # another session whose name starts with this one's
    others = [plain, longer_name]
    if os.geteuid() == 0 and os.access(OTHERS_PYTHON, os.X_OK):
        others.append(started(str(folder), user=65534))  # Ray's and naming it, but another user's
    agent = started(f"--session-name={NAME}")
    _write(tmp_path / "exp", _session(folder, [SessionProcess.of(p) for p in [*others, agent]], driver=_gone_driver()))
    assert [p.pid for p in session.end_leftovers(tmp_path / "exp")] == [agent.pid]
    assert all(p.is_running() for p in others)


def test_a_session_whose_raylet_still_runs_is_a_live_search_and_nothing_of_it_is_ended(tmp_path, started):
    folder = tmp_path / "ray" / NAME
    (folder / "logs").mkdir(parents=True)
    raylet = started(f"--session_dir={folder}", title="raylet")  # the other search's raylet, alive
    agent = started(hold_open=folder / "logs" / "dashboard_agent.log")
    _write(tmp_path / "exp", _session(folder, [SessionProcess.of(agent)], driver=_gone_driver()))
    assert session.end_leftovers(tmp_path / "exp") == []
    assert raylet.is_running() and agent.is_running()


@pytest.mark.ray
def test_a_live_ray_sessions_processes_survive_every_record_that_names_them(tmp_path, _ray_session):
    """Another search runs (this test session's Ray): records naming its session, damaged or not, end nothing."""
    from hpsearch.runtime.internals import current_node

    node = current_node()
    assert node is not None and node.session_name and node.session_dir
    live = session.current_session()
    assert live is not None and live.processes
    gone = _gone_driver()
    records = [
        RaySession(live.session_name, live.session_dir, live.host, gone, live.processes),  # its driver "gone"
        RaySession("", "/", live.host, gone, live.processes),
        RaySession(live.session_name, "/tmp", live.host, gone, live.processes),
    ]
    for recorded in records:
        _write(tmp_path / "exp", recorded)
        with messages.to(io.StringIO()):
            assert session.end_leftovers(tmp_path / "exp") == []
    assert (
        all(psutil.pid_exists(p.pid) for p in live.processes if psutil.pid_exists(p.pid))
        and _ray_session.is_initialized()
    )
    assert _ray_session.cluster_resources()  # the session still answers


@pytest.mark.parametrize("command", ["run --overwrite", "resume"])
def test_run_overwrite_and_resume_end_the_leftovers_before_their_ray_starts(tmp_path, started, monkeypatch, command):
    from hpsearch.experiment import files
    from hpsearch.runtime.nodes import connect as cluster
    from hpsearch.runtime.search import tuner
    from hpsearch.spec import load_spec

    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(
        json.dumps(
            {
                "name": "exp",
                "trainable": f"{Path(__file__).resolve().parents[2] / 'loops.py'}:quadratic",
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
    folder = tmp_path / "ray" / "session_2026-01-01_00-00-00_000000_4"
    folder.mkdir(parents=True)
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
    from hpsearch.runtime.nodes.session import kill_if_still

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
