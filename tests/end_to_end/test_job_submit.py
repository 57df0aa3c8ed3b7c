"""`ray job submit` of a search to a cluster started with `ray start --head`, as the README shows it.

The cluster is this test's own: `ray start --head --block` runs as a child process with
its own ports, temporary folder and authentication token (``RAY_AUTH_TOKEN``: it does not
depend on, or change, ``~/.ray/auth_token``). It is stopped by ending that process and
checking that every process it started is gone: never with `ray stop`, which would end
every Ray on the machine.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from hpsearch import load_results
from hpsearch.runtime.nodes.connect import _free_port as free_port

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

LOOPS = Path(__file__).resolve().parents[1] / "loops.py"
#: The venv's own `ray` (and `hpsearch`) commands: the cluster's jobs run with this bin folder first on PATH.
BIN = Path(sys.executable).parent
RAY = str(BIN / "ray")
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class HeadNode:
    """A running `ray start --head` and what a client needs to reach it."""

    dashboard: str  # http://127.0.0.1:<port>, the Jobs API
    client_env: dict[str, str]  # RAY_AUTH_MODE=token and the token, as the README says


def _clean_env() -> dict[str, str]:
    """This process's environment without its RAY_* settings (they name the suite's other, embedded Ray)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def _dashboard_answers(request: urllib.request.Request) -> bool:
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


def _wait_until_up(head: subprocess.Popen, dashboard: str, agent_port: int, token: str, log: Path) -> None:
    """Until the dashboard answers an authenticated request and the head's dashboard agent listens.

    The Jobs API is the dashboard's; it hands each job to the head node's agent, and waits
    only 10 s for one (ray/dashboard/consts.py, WAIT_AVAILABLE_AGENT_TIMEOUT).
    """
    request = urllib.request.Request(f"{dashboard}/api/version", headers={"Authorization": f"Bearer {token}"})
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if head.poll() is not None:
            raise AssertionError(f"`ray start --head` exited with {head.returncode}:\n{log.read_text()[-3000:]}")
        if _dashboard_answers(request) and _listens(agent_port):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the head node was not up after {START_TIMEOUT_S:.0f} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)


def _stop(head: subprocess.Popen) -> list[str]:
    """End `ray start --block` and every process under it, by PID; return those that outlived it (then killed)."""
    import psutil

    try:
        started = psutil.Process(head.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        started = []
    # SIGTERM: `ray start --block` drains the node (RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0: at once), then
    # ends every process it started (ray/_private/node.py, _register_shutdown_hooks).
    head.send_signal(signal.SIGTERM)
    try:
        head.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        head.kill()
        head.wait()

    def alive() -> list:
        left = []
        for proc in started:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    left.append(proc)
            except psutil.NoSuchProcess:
                pass
        return left

    deadline = time.monotonic() + STOP_TIMEOUT_S
    while alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    left = alive()
    names = []
    for proc in left:
        try:
            names.append(f"{proc.pid}:{proc.name()}")
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    return names


@pytest.fixture(scope="module")
def head_node() -> Iterator[HeadNode]:
    # Ray's unix sockets live in <temp>/session_<date>_<pid>/sockets/: the whole path must stay under
    # 107 bytes, which pytest's tmp_path (/tmp/pytest-of-<user>/pytest-<n>/<test>0/...) can pass.
    temp_dir = Path(tempfile.mkdtemp(prefix="hpj", dir="/tmp"))
    log = temp_dir / "ray-start.log"
    token = secrets.token_hex(32)
    port, dashboard_port, client_port, agent_port = (free_port() for _ in range(4))
    dashboard = f"http://127.0.0.1:{dashboard_port}"
    env = _clean_env() | {
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        # Ray Train's placement-group cleaner asks this cluster's State API, not the suite's other Ray.
        "RAY_API_SERVER_ADDRESS": dashboard,
        # SIGTERM stops the node at once instead of draining it for up to 30 s.
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    command = [
        RAY, "start", "--head", "--block", "--num-cpus", "2",
        "--port", str(port),
        "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard_port),
        # Ray's defaults for these two are fixed ports (10001, 52365) another Ray on the machine may hold.
        "--ray-client-server-port", str(client_port),
        "--dashboard-agent-listen-port", str(agent_port),
        "--temp-dir", str(temp_dir),
    ]  # fmt: skip
    with log.open("w") as out:
        head = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_until_up(head, dashboard, agent_port, token, log)
        client_env = _clean_env() | {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
        yield HeadNode(dashboard=dashboard, client_env=client_env)
    finally:
        left = _stop(head)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert not left, f"processes of `ray start --head` still running after it ended (now killed): {left}"


def _working_dir(folder: Path, **spec_changes) -> Path:
    """A folder to submit: a tiny spec and its train loop, referenced relative to the spec as users do."""
    folder.mkdir()
    shutil.copy(LOOPS, folder / "loops.py")
    spec = {
        "name": "job-submit",
        "trainable": "loops.py:quadratic",
        "metric": "loss",
        "mode": "min",
        "num_samples": 2,
        "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}, "epochs": 1},
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.45}},
        "resources": {"driver_cpus": 0.1},
        **spec_changes,
    }
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def _submit(head: HeadNode, working_dir: Path, submission_id: str) -> subprocess.CompletedProcess:
    """The README's command: `ray job submit --working-dir . -- hpsearch run spec.yaml --address auto`."""
    command = [
        RAY, "job", "submit", "--address", head.dashboard, "--submission-id", submission_id,
        "--working-dir", ".", "--", "hpsearch", "run", "spec.yaml", "--address", "auto",
    ]  # fmt: skip
    return subprocess.run(command, cwd=working_dir, env=head.client_env, capture_output=True, text=True, timeout=400)


@pytest.mark.full
def test_a_submitted_search_keeps_every_trial_in_its_absolute_storage_path(head_node, tmp_path):
    shared = tmp_path / "shared"  # stands for storage every node reaches
    working_dir = _working_dir(tmp_path / "project", storage_path=str(shared))
    done = _submit(head_node, working_dir, f"hpsearch-ok-{uuid.uuid4().hex[:8]}")
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    results = load_results(shared / "job-submit")
    assert len(results.trials) == 2
    assert list(results.trials["status"]) == ["finished", "finished"]


@pytest.mark.full
def test_a_relative_storage_path_is_refused_before_anything_runs(head_node, tmp_path):
    # No storage_path: the default ./hpsearch-results would land in Ray's copy of the working directory.
    working_dir = _working_dir(tmp_path / "project")
    submission_id = f"hpsearch-refused-{uuid.uuid4().hex[:8]}"
    refused = _submit(head_node, working_dir, submission_id)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0, output[-4000:]
    assert "failed with exit code 2" in output, output[-4000:]
    logs = subprocess.run(
        [RAY, "job", "logs", "--address", head_node.dashboard, submission_id],
        env=head_node.client_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert logs.returncode == 0, logs.stderr[-2000:]
    text = " ".join(logs.stdout.split())  # the message may be wrapped
    assert "inside a Ray job's temporary working directory" in text, logs.stdout[-4000:]
    assert "use an absolute path on storage every node reaches" in text, logs.stdout[-4000:]
