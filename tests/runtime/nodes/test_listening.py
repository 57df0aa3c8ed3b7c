"""What an embedded Ray listens on, and who it lets in: the README's security claim, measured.

During a search on the embedded Ray (the session-wide one, started by ``connect()`` as
``hpsearch run`` starts it), every listening TCP socket of this process and its descendants
is read with psutil; the only one beyond the loopback must be PyTorch's rendezvous store of
the trial's process group. Then clients without Ray's token knock on the GCS and the
dashboard, and must be turned away. And the check ``connect()`` makes right after an
embedded Ray starts (hpsearch.runtime.nodes.listening): its judgement on fake sockets, and a run
with the loopback switch forced off (tests/loopback_off.py), which it must stop.
"""

from __future__ import annotations

import http.server
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
from hpsearch.runtime import env
from hpsearch.runtime.nodes import connect as cluster
from hpsearch.runtime.nodes import listening
from hpsearch.runtime.nodes.listening import Listener

LOOPS = Path(__file__).resolve().parents[2] / "listening_loops.py"
LOOPBACK_OFF = Path(__file__).resolve().parents[2] / "loopback_off.py"
LOOPBACK = frozenset({"127.0.0.1", "::ffff:127.0.0.1", "::1"})


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
@pytest.mark.full
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
        me = psutil.Process()
        # what the ranks opened at their start: read until two readings agree, not after a fixed wait
        seen["listeners"] = listening.settled(lambda: listening.listeners_of([me, *me.children(recursive=True)]))
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

    # Nothing beyond the loopback, PyTorch's rendezvous store included: with every rank on this machine, rank 0
    # serves it from a loopback socket (runtime/train/loopback_store.py), where PyTorch's own env:// binds it to
    # every interface; and gloo's own sockets stay on the loopback too.
    rank0 = seen["ranks"][0]
    beyond = [(name, pid, ip, port) for name, pid, ip, port in sockets if ip not in LOOPBACK]
    assert beyond == [], beyond
    assert rank0["master_addr"] == "127.0.0.1"  # the node's address, which the workers connect to
    store = [
        (name, pid, ip, port)
        for name, pid, ip, port in sockets
        if (pid, port) == (rank0["pid"], int(rank0["master_port"]))
    ]
    assert [ip for _, _, ip, _ in store] == ["127.0.0.1"], store  # the store, served on the loopback
    # hpsearch's own judgement agrees
    assert listening.beyond_loopback(seen["listeners"]) == []

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
@pytest.mark.tier  # on the lowest Ray too: Ray 2.58 does not turn token authentication on by itself
@pytest.mark.timeout(120)
def test_a_client_without_the_token_is_refused_by_the_gcs_and_the_dashboard(ray_cluster, tmp_path):
    from ray._raylet import AuthenticationTokenLoader

    token = AuthenticationTokenLoader.instance().get_raw_token()
    assert token
    assert cluster._answers_without_token(os.environ[env.STATE_API_ADDRESS.name]) is False
    token_file = Path.home() / ".ray" / "auth_token"
    if not os.environ.get("RAY_AUTH_TOKEN") and token_file.is_file():  # Ray's token file, made private
        assert token_file.stat().st_mode & 0o077 == 0

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


# The check after an embedded Ray starts (hpsearch.runtime.nodes.listening).


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.1.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),  # gRPC's dual-stack socket on 127.0.0.1
        ("0.0.0.0", False),
        ("::", False),
        ("192.0.2.2", False),
        ("fd00::2", False),
        ("fe80::1%eth0", False),
        ("::ffff:192.0.2.2", False),
        ("", False),
        ("not-an-address", False),
    ],
)
def test_only_loopback_addresses_count_as_loopback(address, loopback):
    from hpsearch.runtime.nodes import node_facts

    assert listening.is_loopback(address) is loopback
    # one rule: the node check's gloo test (a host name that resolves to the loopback) uses it too
    assert listening.is_loopback is node_facts.is_loopback


GCS_EVERYWHERE = Listener("gcs_server", 100, "::", 6379)
RAYLET_ON_IP = Listener("raylet", 101, "192.0.2.2", 40001)
AGENT_ALL_V4 = Listener("ray::DashboardAgent", 102, "0.0.0.0", 52365)
MONITOR_UDP = Listener("python", 103, "0.0.0.0", 5353, "udp")
ON_LOOPBACK = [
    Listener("gcs_server", 100, "::ffff:127.0.0.1", 6380),
    Listener("raylet", 101, "127.0.0.1", 40002),
    Listener("ray::IDLE", 104, "::1", 40003),
]


def test_every_socket_beyond_the_loopback_is_found_and_none_on_it():
    found = listening.beyond_loopback([*ON_LOOPBACK, MONITOR_UDP, RAYLET_ON_IP, GCS_EVERYWHERE, AGENT_ALL_V4])
    assert found == sorted([GCS_EVERYWHERE, RAYLET_ON_IP, AGENT_ALL_V4, MONITOR_UDP])
    assert listening.beyond_loopback(ON_LOOPBACK) == []


def test_the_tcp_store_is_accepted_only_for_its_worker_on_its_master_port():
    store = Listener("ray::RayTrainWorker", 200, "0.0.0.0", 29500)
    other_worker_same_port = Listener("ray::RayTrainWorker", 201, "0.0.0.0", 29500)
    same_worker_other_port = Listener("ray::RayTrainWorker", 200, "::", 29501)
    sockets = [*ON_LOOPBACK, store, other_worker_same_port, same_worker_other_port]
    assert listening.beyond_loopback(sockets, tcp_stores=[(200, 29500)]) == sorted(
        [other_worker_same_port, same_worker_other_port]
    )
    assert store in listening.beyond_loopback(sockets)  # no exception unless a running store is named


def test_the_sockets_are_read_until_two_readings_agree_within_a_bound():
    now = [0.0]
    readings = iter([[GCS_EVERYWHERE], [GCS_EVERYWHERE, RAYLET_ON_IP], [GCS_EVERYWHERE, RAYLET_ON_IP], [AGENT_ALL_V4]])

    def sleep(seconds):
        now[0] += seconds

    got = listening.settled(lambda: next(readings), timeout_s=2.0, interval_s=0.25, clock=lambda: now[0], sleep=sleep)
    assert got == [GCS_EVERYWHERE, RAYLET_ON_IP]
    assert now[0] == 0.5

    now[0] = 0.0
    counter = iter(range(1000))
    changing = listening.settled(
        lambda: [Listener("ray::IDLE", next(counter), "::", 1)],
        timeout_s=2.0,
        interval_s=0.25,
        clock=lambda: now[0],
        sleep=sleep,
    )
    assert now[0] == 2.0  # never agreed: given up at the bound, with the last reading
    assert changing == [Listener("ray::IDLE", 8, "::", 1)]


def test_the_refusal_names_each_process_address_and_port_and_says_what_to_do():
    message = listening.refusal([RAYLET_ON_IP, GCS_EVERYWHERE, MONITOR_UDP], "2.60.0")
    assert "embedded Ray 2.60.0 listens beyond the loopback" in message
    assert "expected every server of an embedded Ray on 127.0.0.1 only" in message
    assert "  gcs_server (PID 100) on tcp [::]:6379\n" in message
    assert "  raylet (PID 101) on tcp 192.0.2.2:40001\n" in message
    assert "  python (PID 103) on udp 0.0.0.0:5353\n" in message
    assert "please report this message" in message
    assert "`ray start --head`" in message and "--address" in message
    many = listening.refusal([Listener("ray::IDLE", pid, "::", 1000 + pid) for pid in range(25)])
    assert many.count("ray::IDLE (PID") == 20 and "... and 5 more" in many


def test_the_check_refuses_a_session_listening_beyond_the_loopback(monkeypatch):
    monkeypatch.setattr(listening, "session_listeners", lambda before=(): [*ON_LOOPBACK, GCS_EVERYWHERE])
    with pytest.raises(ClusterError, match=r"gcs_server \(PID 100\) on tcp \[::\]:6379"):
        listening.check_loopback_only()


def test_the_check_passes_a_session_on_the_loopback_silently(monkeypatch, said):
    monkeypatch.setattr(listening, "session_listeners", lambda before=(): ON_LOOPBACK)
    listening.check_loopback_only()
    assert said.getvalue() == ""


def test_a_check_that_cannot_run_says_so_in_one_line(monkeypatch, said):
    """The check runs right after an embedded Ray starts; a Ray that does not say its processes is not checked."""
    monkeypatch.setattr(listening, "session_listeners", lambda before=(): None)
    listening.check_loopback_only()  # the search goes on: the check is a guard, not a requirement of Ray
    assert said.getvalue().splitlines() == [
        "hpsearch: loopback check not run: the installed Ray does not say which processes it started, so the embedded "
        "Ray's servers were not checked for listening beyond 127.0.0.1"
    ]


def test_the_driver_sockets_held_before_ray_started_are_not_counted(monkeypatch):
    import socket

    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        mine = (os.getpid(), "0.0.0.0", port)
        before = listening.driver_listeners()
        assert mine in {(s.pid, s.address, s.port) for s in before}
        monkeypatch.setattr("hpsearch.runtime.nodes.session.current_session", lambda: _NO_PROCESSES)
        assert listening.session_listeners(before) == []
        found = listening.session_listeners()  # as if opened during ray.init: then it is the session's
        assert [(s.pid, s.address, s.port) for s in found] == [mine]
        assert found[0].process.startswith("the driver (python")


def test_listening_tcp_and_bound_udp_sockets_are_read_but_not_connected_ones():
    import socket

    me = psutil.Process()
    with (
        socket.socket() as everywhere,
        socket.socket() as local,
        socket.socket() as not_listening,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp_bound,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp_connected,
    ):
        everywhere.bind(("0.0.0.0", 0))
        everywhere.listen()
        local.bind(("127.0.0.1", 0))
        local.listen()
        not_listening.bind(("0.0.0.0", 0))
        udp_bound.bind(("0.0.0.0", 0))
        udp_connected.connect(("192.0.2.9", 53))  # a peer: a client's socket, not a server's
        found = {(s.protocol, s.address, s.port) for s in listening.listeners_of([me])}
        ours = {
            ("tcp", "0.0.0.0", everywhere.getsockname()[1]),
            ("tcp", "127.0.0.1", local.getsockname()[1]),
            ("udp", "0.0.0.0", udp_bound.getsockname()[1]),
        }
        assert ours <= found
        assert not {port for _, _, port in found} & {not_listening.getsockname()[1], udp_connected.getsockname()[1]}


class _NoProcesses:
    processes = ()


_NO_PROCESSES = _NoProcesses()


@pytest.mark.ray
@pytest.mark.timeout(60)
def test_the_embedded_ray_passes_the_check_with_its_servers_seen_on_the_loopback(ray_cluster):
    found = listening.session_listeners()
    assert found is not None, "the session's Ray was not found as one this process started"
    names = {s.process for s in found}
    assert {"gcs_server", "raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= names, names
    assert any(s.pid == os.getpid() for s in found)  # this driver's own gRPC server
    assert listening.beyond_loopback(found) == []


def _alive(pid: int, create_time: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - create_time) < 0.05 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.ray  # starts its own Ray, with the loopback switch off
@pytest.mark.timeout(240)
@pytest.mark.full
def test_run_with_the_loopback_switch_off_stops_with_exit_2_before_any_trial_and_leaves_nothing(tmp_path):
    hold_dir = tmp_path / "hold"
    hold_dir.mkdir()
    (hold_dir / "release").touch()  # a trial that ran anyway would end at once, not hold the test up
    spec = _spec(tmp_path, "switch-off", hold_dir)
    record = tmp_path / "session.jsonl"
    environ = {k: v for k, v in os.environ.items() if k != env.LOOPBACK_ONLY.name}  # Ray's Linux default
    done = subprocess.run(
        [sys.executable, str(LOOPBACK_OFF), str(record), "run", str(spec)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    error = done.stderr[done.stderr.index("Error: ") :]
    assert "listens beyond the loopback, where hpsearch expected every server of an embedded Ray on 127.0.0.1" in error
    assert "gcs_server (PID " in error and "raylet (PID " in error, error
    assert "--address" in error
    assert not (tmp_path / "results").exists()  # nothing written: the experiment folder was never made
    assert not list(hold_dir.glob("rank*.json"))  # no trial ran
    processes = [json.loads(line) for line in record.read_text().splitlines()]
    assert {p["name"] for p in processes} >= {"gcs_server", "raylet"}
    deadline = time.monotonic() + 30
    while (left := [p for p in processes if _alive(p["pid"], p["create_time"])]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"the embedded Ray's processes outlived the refused run: {left}"


# ----------------------------------------------------------------------------- token authentication, no Ray


def test_rays_token_file_is_made_private_never_through_a_link(tmp_path) -> None:
    token = tmp_path / "auth_token"
    token.write_text("t" * 32)
    token.chmod(0o644)  # as Ray writes it, with the umask's mode
    assert env.private_token_file(token) is True and token.stat().st_mode & 0o777 == 0o600
    assert env.private_token_file(token) is False  # already private
    link = tmp_path / "link"
    link.symlink_to(token)
    token.chmod(0o644)
    assert env.private_token_file(link) is False and token.stat().st_mode & 0o777 == 0o644  # never through a link
    assert env.private_token_file(tmp_path / "missing") is False


class _Dashboard(http.server.BaseHTTPRequestHandler):
    """A stand-in dashboard that answers its job API with ``code``."""

    code = 200

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(self.code)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.mark.parametrize(("code", "open_"), [(200, True), (401, False), (403, False), (500, None)])
def test_a_cluster_that_takes_jobs_without_a_token_is_named_in_one_line(code, open_) -> None:
    handler = type("Dashboard", (_Dashboard,), {"code": code})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"127.0.0.1:{server.server_port}"
        assert cluster._answers_without_token(url) is open_
        line = cluster._open_cluster_line("host:6379", url)
        if open_:
            assert line is not None and line.startswith(
                "warning: the Ray cluster at host:6379 runs without token authentication: anyone who reaches its "
                "ports can run code as you on it. Start it with RAY_AUTH_MODE=token"
            )
        elif open_ is False:
            assert line is None
        else:
            assert (
                line
                == "cannot check whether the Ray cluster at host:6379 requires a token: its dashboard did not answer"
            )
    finally:
        server.shutdown()
        server.server_close()
    assert cluster._open_cluster_line("host:6379", None) == (
        "cannot check whether the Ray cluster at host:6379 requires a token: it names no dashboard"
    )


def test_token_authentication_is_turned_on_with_a_private_token_file_made_first(tmp_path) -> None:
    """What Ray 2.60 does for a new local cluster, and Ray 2.58 does not: on, with a token only its owner reads."""
    token = tmp_path / "home" / ".ray" / "auth_token"
    environ: dict[str, str] = {}
    assert env.token_authentication(environ, token_file=str(token)) is True
    assert environ == {"RAY_AUTH_MODE": "token"}
    text = token.read_text(encoding="ascii")
    assert len(text) == 64 and int(text, 16) >= 0  # Ray's own format: 256 bits as hex
    assert token.stat().st_mode & 0o777 == 0o600 and token.parent.stat().st_mode & 0o777 == 0o700
    # a token file already there is Ray's to read, untouched (made private once Ray started)
    assert env.token_authentication(environ := {}, token_file=str(token)) is True
    assert token.read_text(encoding="ascii") == text
    # a user's mode wins (any value but token was refused before), and a token in the environment makes no file
    assert env.token_authentication(environ := {"RAY_AUTH_MODE": "TOKEN"}, token_file=str(tmp_path / "a")) is False
    assert environ == {"RAY_AUTH_MODE": "TOKEN"} and not (tmp_path / "a").exists()
    assert env.token_authentication(environ := {"RAY_AUTH_TOKEN": "x"}, token_file=str(tmp_path / "b")) is True
    assert environ["RAY_AUTH_MODE"] == "token" and not (tmp_path / "b").exists()
    # never through a link: one planted at the token's path is left alone, and its target not written
    target = tmp_path / "elsewhere"
    (tmp_path / "c").symlink_to(target)
    assert env.token_authentication({}, token_file=str(tmp_path / "c")) is True and not target.exists()
    # a home where no token file can be made: Ray makes it, or says why it cannot; never a traceback here
    (tmp_path / "file").write_text("", encoding="utf-8")
    assert env.token_authentication({}, token_file=str(tmp_path / "file" / ".ray" / "auth_token")) is True


def test_an_embedded_ray_whose_dashboard_takes_jobs_without_a_token_is_refused(monkeypatch, said) -> None:
    monkeypatch.setattr(cluster, "_answers_without_token", lambda dashboard: True)
    with pytest.raises(ClusterError, match=r"took a job request without a token: token authentication is off"):
        cluster._require_token("127.0.0.1:8265")
    monkeypatch.setattr(cluster, "_answers_without_token", lambda dashboard: False)
    cluster._require_token("127.0.0.1:8265")
    assert said.getvalue() == ""
    monkeypatch.setattr(cluster, "_answers_without_token", lambda dashboard: None)
    cluster._require_token("127.0.0.1:8265")
    assert (
        said.getvalue()
        .strip()
        .endswith("cannot check that the embedded Ray requires a token: its dashboard (127.0.0.1:8265) did not answer")
    )


# ----------------------------------------------------------------------------- the watch while the search runs


def test_the_watch_reads_the_sockets_every_interval_and_says_each_one_beyond_the_loopback_once(
    monkeypatch, said
) -> None:
    import pickle

    now = [0.0]
    readings = [
        [Listener("raylet", 10, "127.0.0.1", 6000)],
        [Listener("raylet", 10, "127.0.0.1", 6000), Listener("ray::RayTrainWorker", 42, "0.0.0.0", 6006)],
        [Listener("ray::RayTrainWorker", 42, "0.0.0.0", 6006)],
    ]
    reads: list[int] = []

    def session_listeners(before):
        reads.append(1)
        return readings[min(len(reads), len(readings)) - 1]

    monkeypatch.setattr(listening, "session_listeners", session_listeners)
    watch = listening.LoopbackWatch(every_s=30, clock=lambda: now[0])
    watch.on_step_end(1, [])  # the first step reads
    now[0] = 10.0
    watch.on_step_end(2, [])  # within the interval: no reading
    assert len(reads) == 1 and said.getvalue() == ""
    now[0] = 31.0
    watch.on_step_end(3, [])
    watch.on_experiment_end([])  # the end reads too; the same socket is not said again
    assert len(reads) == 3
    lines = said.getvalue().strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(
        "warning: ray::RayTrainWorker (PID 42) on tcp 0.0.0.0:6006 listens beyond the loopback while the search "
        "runs: other machines can reach that port. hpsearch's embedded Ray and its trials' process groups keep "
        "to 127.0.0.1; a trial's own code opened this one"
    )
    watch.clock = time.monotonic  # Tune pickles its callbacks (with the search's clock): a restored watch reads afresh
    restored = pickle.loads(pickle.dumps(watch))
    assert restored.every_s == 30 and restored.said == []


def test_the_watch_is_silent_where_this_process_started_no_ray(monkeypatch, said) -> None:
    monkeypatch.setattr(listening, "session_listeners", lambda before: None)
    listening.LoopbackWatch().on_experiment_end([])
    assert said.getvalue() == ""
