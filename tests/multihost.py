"""Several hosts on one machine, for the tests that need a real multi-host Ray cluster.

Each host is what a cluster node is to Ray and to PyTorch:

- its own network namespace, with ``eth0`` on a private bridge (the bridge lives in a namespace
  of its own, so nothing touches the machine's network) and its own loopback;
- its own hostname and ``/etc/hosts`` (UTS and mount namespaces), which can map its own name to
  ``127.0.1.1`` as Debian's default does;
- its own processes (a PID namespace, whose first process reaps orphans and whose end ends them all);
- a private ``/tmp/ray`` and ``/dev/shm``, and a node-local scratch folder at :attr:`Hosts.scratch`,
  the same path on every host with different contents;
- the shared folder :attr:`Hosts.shared`, the same path and the same files on every host.

Every host runs ``ray start`` with token authentication; the first is the head. Commands run on
a host through ``nsenter`` (:meth:`Hosts.run`, :meth:`Hosts.popen`). :meth:`Hosts.close` ends every
process by ending each host's PID namespace, then deletes the namespaces (and with them the links
and mounts), also when a test failed. It needs root, ``ip``, ``unshare`` and ``nsenter``; elsewhere
:func:`unavailable` says why, and the tests skip with that reason.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from trial_starts import count_before_removing

#: The venv's own commands (``ray``, ``hpsearch``): the same files on every host.
BIN = Path(sys.executable).parent
SUBNET = "10.213.0"
START_TIMEOUT_S = 120.0
#: Each host's object store: small, as the hosts share this machine's memory.
OBJECT_STORE_BYTES = 300_000_000
#: The reaper every host's PID namespace starts with: orphans are re-parented to it, and a zombie
#: left unreaped would look alive to Ray and to psutil.
_INIT = (
    "import os, time\n"
    "while True:\n"
    "    try:\n"
    "        os.wait()\n"
    "    except ChildProcessError:\n"
    "        time.sleep(0.2)\n"
)


def unavailable() -> str | None:
    """Why hosts cannot be built here, or ``None`` when they can."""
    if os.geteuid() != 0:
        return "the multi-host tests need root (network, UTS, mount and PID namespaces); CI runs as root"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"the multi-host tests need `{tool}` (iproute2 / util-linux)"
    probe = f"hpprobe{secrets.token_hex(3)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _sh(*args: str) -> None:
    done = subprocess.run(list(args), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")


@dataclass
class Host:
    """One host: its name, address, namespace and first process (PID in this machine's view)."""

    name: str
    ip: str
    netns: str
    folder: Path  # its private files: ray/, shm is a tmpfs, scratch/
    init: psutil.Process | None = None
    unshare: subprocess.Popen | None = None
    loopback_name: bool = False  # /etc/hosts maps its own name to 127.0.1.1


@dataclass
class Hosts:
    """N hosts on a private bridge, each running Ray; the first is the head. Use as a context manager."""

    names: Sequence[str]
    loopback_names: Sequence[str] = ()  # hosts whose own name resolves to 127.0.1.1
    ray_on: Sequence[str] | None = None  # hosts that start Ray at once (default: all); the first is the head
    num_cpus: int = 1
    env: Mapping[str, str] = field(default_factory=dict)  # added to every `ray start` (e.g. GLOO_SOCKET_IFNAME)
    hosts: list[Host] = field(default_factory=list)
    token: str = field(default_factory=lambda: secrets.token_hex(32))
    _id: str = field(default_factory=lambda: secrets.token_hex(2))
    _root: Path = field(init=False)

    def __post_init__(self) -> None:
        self._root = Path(tempfile.mkdtemp(prefix=f"hpmh{self._id}-", dir="/tmp"))

    # ------------------------------------------------------------------ paths every host sees

    @property
    def shared(self) -> Path:
        """The same folder, same files, on every host (and in the test)."""
        return self._root / "shared"

    @property
    def scratch(self) -> Path:
        """A node-local folder: the same path on every host, each with its own contents."""
        return self._root / "scratch"

    @property
    def head(self) -> Host:
        return self.hosts[0]

    @property
    def address(self) -> str:
        return f"{self.head.ip}:6379"

    # ------------------------------------------------------------------ life cycle

    def __enter__(self) -> Hosts:
        try:
            self._build()
            starting = [h for h in self.hosts if self.ray_on is None or h.name in self.ray_on]
            for host in starting:
                self.start_ray(host)
            self.wait_for_nodes(len(starting))
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _build(self) -> None:
        self.shared.mkdir()
        self.scratch.mkdir()
        switch = f"hp{self._id}sw"
        _sh("ip", "netns", "add", switch)
        self._switch = switch
        _sh("ip", "-n", switch, "link", "add", "br0", "type", "bridge")
        _sh("ip", "-n", switch, "link", "set", "br0", "up")
        for index, name in enumerate(self.names, start=1):
            host = Host(
                name=name,
                ip=f"{SUBNET}.{10 + index}",
                netns=f"hp{self._id}{name}",
                folder=self._root / "hosts" / name,
                loopback_name=name in self.loopback_names,
            )
            self.hosts.append(host)
            for sub in ("ray", "shm", "scratch"):
                (host.folder / sub).mkdir(parents=True)
            inside, outside = f"hp{self._id}{index}h", f"hp{self._id}{index}s"
            _sh("ip", "netns", "add", host.netns)
            _sh("ip", "link", "add", inside, "type", "veth", "peer", "name", outside)
            _sh("ip", "link", "set", inside, "netns", host.netns)
            _sh("ip", "link", "set", outside, "netns", switch)
            _sh("ip", "-n", switch, "link", "set", outside, "master", "br0")
            _sh("ip", "-n", switch, "link", "set", outside, "up")
            _sh("ip", "-n", host.netns, "link", "set", inside, "name", "eth0")
            _sh("ip", "-n", host.netns, "addr", "add", f"{host.ip}/24", "dev", "eth0")
            _sh("ip", "-n", host.netns, "link", "set", "eth0", "up")
            _sh("ip", "-n", host.netns, "link", "set", "lo", "up")
        for host in self.hosts:
            self._start_host(host)

    def _hosts_file(self, host: Host) -> str:
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
        for other in self.hosts:
            own = other is host
            lines.append(f"{'127.0.1.1' if own and host.loopback_name else other.ip} {other.name}")
        return "\n".join(lines) + "\n"

    def _start_host(self, host: Host) -> None:
        hosts_file = host.folder / "hosts"
        hosts_file.write_text(self._hosts_file(host))
        ready = host.folder / "ready"
        setup = " && ".join(
            [
                f"hostname {host.name}",
                f"mount --bind {hosts_file} /etc/hosts",
                "mkdir -p /tmp/ray",
                f"mount --bind {host.folder / 'ray'} /tmp/ray",
                "mount -t tmpfs -o size=4g tmpfs /dev/shm",
                f"mount --bind {host.folder / 'scratch'} {self.scratch}",
                f"touch {ready}",
                f"exec {sys.executable} -c {_quote(_INIT)}",
            ]
        )
        host.unshare = subprocess.Popen(
            ["ip", "netns", "exec", host.netns, "unshare", "--uts", "--mount", "--pid", "--fork", "--mount-proc",
             "--propagation", "private", "--", "/bin/sh", "-c", setup],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not ready.exists():
            if host.unshare.poll() is not None:
                raise RuntimeError(f"host {host.name} did not start: {host.unshare.stderr.read().decode()}")  # type: ignore[union-attr]  # piped above
            if time.monotonic() > deadline:
                raise RuntimeError(f"host {host.name} did not start within 30 s")
            time.sleep(0.05)
        children = psutil.Process(host.unshare.pid).children()
        assert len(children) == 1, children
        host.init = children[0]

    def close(self) -> None:
        """End every process of every host, then remove the namespaces, links, mounts and folders."""
        for host in self.hosts:
            if host.init is not None:
                try:
                    host.init.kill()  # the PID namespace's first process: the kernel ends all the others
                except psutil.NoSuchProcess:
                    pass
            if host.unshare is not None:
                try:
                    host.unshare.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    host.unshare.kill()
                    host.unshare.wait()
        for host in self.hosts:
            subprocess.run(["ip", "netns", "del", host.netns], capture_output=True)
        if getattr(self, "_switch", None):
            subprocess.run(["ip", "netns", "del", self._switch], capture_output=True)
        count_before_removing(self._root)  # the gate's count of nested trial starts keeps this harness's
        shutil.rmtree(self._root, ignore_errors=True)

    # ------------------------------------------------------------------ running things on a host

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def environ(self, **extra: str) -> dict[str, str]:
        """The environment of a command on a host: this one's, without its Ray settings, with the token."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "GLOO_", "NCCL_"))}
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
        env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token, "RAY_USAGE_STATS_ENABLED": "0"}
        return env | dict(self.env) | extra

    def command(self, host: Host, args: Sequence[str], cwd: Path | None = None) -> list[str]:
        """``args`` as run on ``host``, in ``cwd`` (entering a mount namespace otherwise moves to its ``/``)."""
        assert host.init is not None, f"host {host.name} is not running"
        # not this repository (its hpsearch.egg-info would be the hpsearch every host's workers see first)
        return ["nsenter", "-t", str(host.init.pid), "-n", "-u", "-m", "-p", f"--wd={cwd or self.shared}", "--", *args]

    def run(
        self, host: Host | str, args: Sequence[str], *, timeout: float = 300, env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """Run a command on a host and wait for it."""
        host = self.host(host) if isinstance(host, str) else host
        return subprocess.run(
            self.command(host, args, cwd), env=dict(env or self.environ()), capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip

    def popen(
        self, host: Host | str, args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.Popen[str]:
        host = self.host(host) if isinstance(host, str) else host
        return subprocess.Popen(
            self.command(host, args, cwd), env=dict(env or self.environ()), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def start_ray(self, host: Host | str, *, env: Mapping[str, str] | None = None) -> None:
        """``ray start`` on a host: the head, or a worker joining it."""
        host = self.host(host) if isinstance(host, str) else host
        common = [
            "--num-cpus", str(self.num_cpus), "--node-ip-address", host.ip, "--disable-usage-stats",
            "--object-store-memory", str(OBJECT_STORE_BYTES),
        ]  # fmt: skip
        if host is self.head:
            args = [str(BIN / "ray"), "start", "--head", "--port", "6379", "--dashboard-host", host.ip, *common]
        else:
            args = [str(BIN / "ray"), "start", "--address", self.address, *common]
        done = self.run(host, args, timeout=START_TIMEOUT_S, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"`ray start` on {host.name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")

    def wait_for_nodes(self, count: int, timeout: float = START_TIMEOUT_S) -> None:
        """Until the cluster has ``count`` alive nodes, as the head sees it."""
        script = (
            "import ray; ray.init(address='auto', logging_level='ERROR'); print(sum(n['Alive'] for n in ray.nodes()))"
        )
        deadline = time.monotonic() + timeout
        while True:
            done = self.run(self.head, [sys.executable, "-c", script], timeout=timeout)
            if done.returncode == 0 and done.stdout.strip().splitlines()[-1:] == [str(count)]:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the cluster did not reach {count} nodes: {done.stdout[-1000:]} {done.stderr[-2000:]}"
                )
            time.sleep(1)

    def kill_host(self, host: Host | str) -> None:
        """Every process of a host ends at once, as when its machine dies (its network stays)."""
        host = self.host(host) if isinstance(host, str) else host
        assert host.init is not None
        for proc in host.init.children(recursive=True):
            try:
                proc.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"
