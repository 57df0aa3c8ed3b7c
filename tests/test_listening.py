"""What an embedded Ray listens on, and who it lets in: the README's security claim, measured.

During a search on the embedded Ray (the session-wide one, started by ``connect()`` as
``hpsearch run`` starts it), every listening TCP socket of this process and its descendants
is read with psutil; the only one beyond the loopback must be PyTorch's rendezvous store of
the trial's process group. Then clients without Ray's token knock on the GCS and the
dashboard, and must be turned away.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
import yaml

from hpsearch.cli import main
from hpsearch.errors import ClusterError
from hpsearch.runtime import cluster, env

LOOPS = Path(__file__).resolve().parent / "listening_loops.py"
LOOPBACK = frozenset({"127.0.0.1", "::ffff:127.0.0.1", "::1"})
EVERY_INTERFACE = frozenset({"0.0.0.0", "::"})


def _spec(folder: Path, name: str, hold_dir: Path) -> Path:
    spec = {
        "name": name,
        "trainable": f"{LOOPS}:hold",
        "metric": "loss",
        "mode": "min",
        "num_samples": 1,
        "search_space": {"dir": str(hold_dir)},
        "searcher": {"type": "random"},
        "scaling": {"num_workers": 2, "resources_per_worker": {"CPU": 0.45}},
        "resources": {"driver_cpus": 0.1},
        "storage_path": str(folder / "results"),
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _listening(processes: list[psutil.Process]) -> list[tuple[str, int, str, int]]:
    """(process name, PID, address, port) of every listening TCP socket of these processes."""
    found = []
    for proc in processes:
        try:
            name = proc.name()
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    found.append((name, proc.pid, conn.laddr.ip, conn.laddr.port))
        except psutil.Error:  # ended meanwhile
            continue
    return sorted(found)


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_every_server_of_an_embedded_ray_listens_on_loopback_during_a_search(ray_cluster, tmp_path):
    hold_dir = tmp_path / "hold"
    hold_dir.mkdir()
    spec = _spec(tmp_path, "listening", hold_dir)
    seen: dict = {}

    def look_while_the_trial_runs() -> None:
        deadline = time.monotonic() + 180
        while not all((hold_dir / f"rank{r}.json").exists() for r in (0, 1)):
            if time.monotonic() > deadline:
                return
            time.sleep(0.2)
        time.sleep(1.0)
        me = psutil.Process()
        seen["sockets"] = _listening([me, *me.children(recursive=True)])
        seen["ranks"] = [json.loads((hold_dir / f"rank{r}.json").read_text()) for r in (0, 1)]
        (hold_dir / "release").touch()

    looker = threading.Thread(target=look_while_the_trial_runs, daemon=True)
    looker.start()
    try:
        assert main(["run", str(spec)]) == 0
    finally:
        (hold_dir / "release").touch()
        looker.join(timeout=10)
    assert "sockets" in seen, "the trial's workers never started"
    sockets = seen["sockets"]
    print("\n".join(f"{name:28} {pid:>7}  {ip}:{port}" for name, pid, ip, port in sockets))

    # The one socket beyond the loopback: PyTorch's TCPStore, which rank 0 serves on MASTER_PORT for the
    # trial's process group (torch binds it to every interface; Ray has no say in it).
    rank0 = seen["ranks"][0]
    beyond = [(name, pid, ip, port) for name, pid, ip, port in sockets if ip not in LOOPBACK]
    assert [(pid, port) for _, pid, _, port in beyond] == [(rank0["pid"], int(rank0["master_port"]))], beyond
    assert beyond[0][2] in EVERY_INTERFACE
    assert rank0["master_addr"] == "127.0.0.1"  # the node's address, which the workers connect to

    # ... and Ray's servers are all there, on the loopback.
    on_loopback = {name for name, _, ip, _ in sockets if ip in LOOPBACK}
    for kind in ("gcs_server", "raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent", "ray::RayTrainWorker"):
        assert kind in on_loopback, f"no {kind} listening on the loopback: {sorted(on_loopback)}"
    assert any(name.startswith("ray::TrainController") for name in on_loopback)
    ports = {(pid, port) for _, pid, ip, port in sockets if ip in LOOPBACK}
    gcs_port = int(ray_cluster.get_runtime_context().gcs_address.rsplit(":", 1)[1])
    dashboard_port = int(os.environ[env.STATE_API_ADDRESS.name].rsplit(":", 1)[1])
    assert gcs_port in {port for _, port in ports}
    assert dashboard_port in {port for _, port in ports}
    assert any(pid == os.getpid() for pid, _ in ports)  # this driver's own gRPC server


@pytest.mark.ray
@pytest.mark.timeout(120)
def test_a_client_without_the_token_is_refused_by_the_gcs_and_the_dashboard(ray_cluster, tmp_path):
    from ray._raylet import AuthenticationTokenLoader

    token = AuthenticationTokenLoader.instance().get_raw_token()
    assert token

    # The dashboard (its State API): no token 401, a wrong one 403, the cluster's 200.
    url = os.environ[env.STATE_API_ADDRESS.name] + "/api/v0/nodes"

    def status(authorization: str | None) -> int:
        request = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as err:
            return err.code

    assert status(None) == 401
    assert status("Bearer " + "0" * len(token)) == 403
    assert status(f"Bearer {token}") == 200

    # The GCS: a gRPC client in a fresh process, which finds no token (HOME is an empty folder).
    gcs = ray_cluster.get_runtime_context().gcs_address
    ask = f"from ray._raylet import GcsClient\nprint(GcsClient(address={gcs!r}).internal_kv_keys(b'', None))"
    home = tmp_path / "home"
    home.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH_", "RAY_ADDRESS"))} | {"HOME": str(home)}

    def client(**extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", ask], env=base | extra, capture_output=True, text=True, timeout=60)

    for refused in (client(), client(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="0" * len(token))):
        assert refused.returncode != 0
        assert "Authentication token is missing or incorrect" in refused.stderr, refused.stderr[-2000:]
    allowed = client(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    assert "session_name" in allowed.stdout


@pytest.mark.parametrize("mode", ["disabled", "DISABLED", "", "off"])
def test_an_embedded_ray_is_never_started_without_token_authentication(monkeypatch, mode):
    monkeypatch.setenv("RAY_AUTH_MODE", mode)
    with pytest.raises(ClusterError, match=f"RAY_AUTH_MODE={mode!r} would start hpsearch's embedded Ray without"):
        cluster._refuse_auth_off()


@pytest.mark.parametrize("mode", [None, "token", "TOKEN"])
def test_token_authentication_as_ray_defaults_to_it_is_accepted(monkeypatch, mode):
    if mode is None:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    else:
        monkeypatch.setenv("RAY_AUTH_MODE", mode)
    cluster._refuse_auth_off()


@pytest.mark.ray  # it would start a Ray if the refusal failed
@pytest.mark.timeout(120)
def test_run_refuses_token_authentication_off_with_exit_2_and_writes_nothing(tmp_path):
    spec = _spec(tmp_path, "no-auth", tmp_path)
    environ = dict(os.environ, RAY_AUTH_MODE="disabled")
    done = subprocess.run(
        [sys.executable, "-m", "hpsearch", "run", str(spec)], env=environ, capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Error: RAY_AUTH_MODE='disabled' would start hpsearch's embedded Ray without token authentication" in (
        done.stderr
    )
    assert "Started a local Ray instance" not in done.stderr + done.stdout
    assert not (tmp_path / "results").exists()


def test_loopback_only_is_set_around_ray_init_and_then_restored():
    from ray._private import ray_constants, services

    before = ray_constants.ENABLE_RAY_CLUSTER
    environ = {env.LOOPBACK_ONLY.name: "1"}
    with env.loopback_only(environ):
        assert environ == {env.LOOPBACK_ONLY.name: "0"}
        assert ray_constants.ENABLE_RAY_CLUSTER is False
        assert services.get_node_ip_address() == "127.0.0.1"  # what an embedded Ray's node is given
    assert environ == {env.LOOPBACK_ONLY.name: "1"}
    assert ray_constants.ENABLE_RAY_CLUSTER is before
    environ = {}
    with env.loopback_only(environ):
        pass
    assert environ == {}
