"""Which of an embedded Ray session's processes listen beyond the loopback: the README's promise, checked.

hpsearch starts its embedded Ray with every server on 127.0.0.1
(:func:`hpsearch.runtime.env.loopback_only`). That rests on a Ray switch meant for macOS and
Windows, so a Ray release that reads it differently would open the search's ports to the
network without a sound. :func:`check_loopback_only` measures instead: right after the
embedded ``ray.init`` it reads the listening sockets of the session's processes and refuses
the search (a :class:`~hpsearch.errors.ClusterError`) if any is bound beyond the loopback.

Which processes are checked: the ones that :func:`hpsearch.runtime.nodes.session.current_session`
records, so that a killed run can be cleaned up after. These are every process Ray's node
started (``gcs_server``, ``raylet``, the dashboard, the monitors) and all their descendants,
which include the agents and the workers. The check also covers the sockets the driver
itself opened during ``ray.init``, such as its core worker's gRPC server. A socket the
process held before, for example a notebook kernel's, is not Ray's. Both uses share one
source, so what is checked is exactly what would be cleaned up.

"Listening" is a TCP socket in ``LISTEN`` and a UDP socket bound with no peer (none of Ray
2.60's servers uses UDP; one would still be reachable). Beyond the loopback is anything but
``127.0.0.0/8``, ``::1`` and ``::ffff:127.x.x.x``: ``0.0.0.0``, ``::`` and every interface
address.

The check covers the search's life too: :class:`LoopbackWatch`, a Tune callback, reads the same
sockets again every 30 s while the search runs and when it ends, and says one line for each
socket it finds beyond the loopback (a trial's own code may open one; the search goes on).

Two servers a trial starts are not Ray's, and both are kept to the loopback on an embedded Ray,
where every rank is on this machine:

- PyTorch's rendezvous store (``TCPStore``), which rank 0 serves on ``MASTER_PORT``. PyTorch
  binds it to every interface, with no option for an address; hpsearch's set-up of a trial's
  process group serves it from a loopback socket instead
  (:mod:`hpsearch.runtime.train.loopback_store`). With the Ray work-arounds off
  (``HPSEARCH_RAY_WORKAROUNDS=0``) trials get Ray's own set-up, and the store listens on every
  interface: :func:`beyond_loopback` accepts it for a given worker PID on its ``MASTER_PORT``
  (``tcp_stores``), which is how ``tests/runtime/nodes/test_listening.py`` judges a search then.
- gloo's sockets, which listen on the address the host's name resolves to. On a host whose name
  resolves beyond the loopback, each worker pins gloo (and NCCL) to the loopback's interface
  (:func:`hpsearch.runtime.nodes.node_facts.socket_pin`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

import ray  # noqa: F401 - imported before psutil so that Ray's bundled copy is the one found

# isort: split
import psutil
from ray.tune import Callback

from hpsearch import messages
from hpsearch.errors import ClusterError
from hpsearch.runtime.nodes import session
from hpsearch.runtime.nodes.node_facts import is_loopback

__all__ = [
    "Listener",
    "is_loopback",
    "beyond_loopback",
    "listeners_of",
    "driver_listeners",
    "session_listeners",
    "settled",
    "refusal",
    "check_loopback_only",
    "LoopbackWatch",
]

#: How long :func:`settled` waits at most for the session's sockets to stop changing, and how often it looks.
SETTLE_TIMEOUT_S = 2.0
SETTLE_INTERVAL_S = 0.25
#: As in :mod:`hpsearch.runtime.nodes.session`: one process's start time reads the same each time, a reused PID's later.
_START_TIME_TOLERANCE_S = 0.05
#: At most this many sockets are named in the error (the rest are counted).
_MAX_NAMED = 20
#: This process's own sockets before it started its embedded Ray (set by :func:`check_loopback_only`).
_driver_before: frozenset[Listener] = frozenset()


@dataclass(frozen=True, order=True)
class Listener:
    """One listening socket: the process (name, PID), the local address and port, ``tcp`` or ``udp``."""

    process: str
    pid: int
    address: str
    port: int
    protocol: str = "tcp"

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.process} (PID {self.pid}) on {self.protocol} {host}:{self.port}"


def beyond_loopback(listeners: Iterable[Listener], *, tcp_stores: Collection[tuple[int, int]] = ()) -> list[Listener]:
    """The sockets bound beyond the loopback, sorted, but for PyTorch's rendezvous stores.

    Args:
        listeners: The sockets to judge.
        tcp_stores: ``(PID, MASTER_PORT)`` of each rank-0 training worker whose ``TCPStore``
            is running: that process's socket on that port is accepted (PyTorch binds it to
            every interface). Nothing else is; before the first trial there are none.
    """
    accepted = set(tcp_stores)
    return sorted(s for s in listeners if not is_loopback(s.address) and (s.pid, s.port) not in accepted)


def _psutil() -> Any:
    """psutil, imported after Ray at the top of this module (so Ray's bundled copy is the one found)."""
    return psutil


def listeners_of(processes: Iterable[psutil.Process]) -> list[Listener]:
    """Every listening socket (TCP ``LISTEN``, UDP bound with no peer) of these processes, sorted.

    A process that has ended, or cannot be read, is skipped.
    """
    ps = _psutil()
    found: set[Listener] = set()
    for proc in processes:
        with contextlib.suppress(ps.Error):
            name = _label(proc)
            for conn in proc.net_connections(kind="inet"):
                if conn.type == socket.SOCK_STREAM and conn.status == ps.CONN_LISTEN:
                    found.add(Listener(name, proc.pid, conn.laddr.ip, conn.laddr.port, "tcp"))
                elif conn.type == socket.SOCK_DGRAM and conn.laddr and conn.laddr.port and not conn.raddr:
                    found.add(Listener(name, proc.pid, conn.laddr.ip, conn.laddr.port, "udp"))
    return sorted(found)


def _label(proc: psutil.Process) -> str:
    """The process's name, and for a Python process the script or module it runs (Ray's monitors and dashboard)."""
    name: str = proc.name()
    if not name.startswith("python"):
        return name
    with contextlib.suppress(Exception):  # a command line that cannot be read leaves the plain name
        args = proc.cmdline()[1:]
        script = next((a for a in args if a.endswith(".py")), None)
        if script:
            return f"{name} {os.path.basename(script)}"
        if "-m" in args[:-1]:
            return f"{name} -m {args[args.index('-m') + 1]}"
    return name


def driver_listeners() -> frozenset[Listener]:
    """This process's listening sockets now: taken before ``ray.init``, so that only Ray's count after."""
    return frozenset(listeners_of([_psutil().Process(os.getpid())]))


def session_listeners(before: Collection[Listener] = ()) -> list[Listener] | None:
    """The listening sockets of the embedded Ray session this process started, sorted.

    Its processes as :func:`hpsearch.runtime.nodes.session.current_session` finds them, and this
    driver's sockets that are not in ``before`` (:func:`driver_listeners` before ``ray.init``).
    ``None`` when this process started no Ray session (not connected, or on ``--address``).
    """
    current = session.current_session()
    if current is None:
        return None
    ps = _psutil()
    processes = []
    for recorded in current.processes:
        with contextlib.suppress(ps.Error):
            proc = ps.Process(recorded.pid)
            if abs(proc.create_time() - recorded.create_time) <= _START_TIME_TOLERANCE_S:  # not a PID reused since
                processes.append(proc)
    driver = [
        dataclasses.replace(s, process=f"the driver ({s.process})")
        for s in listeners_of([ps.Process(os.getpid())])
        if s not in before
    ]
    return sorted({*listeners_of(processes), *driver})


def settled(
    read: Callable[[], list[Listener] | None],
    *,
    timeout_s: float = SETTLE_TIMEOUT_S,
    interval_s: float = SETTLE_INTERVAL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Listener] | None:
    """``read()`` again every ``interval_s`` until two readings agree, or ``timeout_s`` has passed; the last one.

    ``ray.init`` returns once the GCS and the raylet serve, but the raylet starts its agents
    and its first idle workers around then, and each opens its ports a moment after it starts.
    Reading until nothing changes catches those too, bounded so that a start is never held up
    for long (measured with Ray 2.60.0: every port is open at the first reading, ~0.3 s to agree).
    """
    deadline = clock() + timeout_s
    last = read()
    while clock() < deadline:
        sleep(interval_s)
        now = read()
        if now == last:
            break
        last = now
    return last


def refusal(found: Collection[Listener], ray_version: str = "") -> str:
    """The error for an embedded Ray whose processes listen beyond the loopback: what, why it stops, what to do."""
    shown = sorted(found)[:_MAX_NAMED]
    more = len(found) - len(shown)
    lines = [f"  {s}" for s in shown] + ([f"  ... and {more} more"] if more > 0 else [])
    version = f" {ray_version}" if ray_version else ""
    return (
        f"hpsearch's embedded Ray{version} listens beyond the loopback, where hpsearch expected every server of "
        "an embedded Ray on 127.0.0.1 only:\n"
        + "\n".join(lines)
        + "\nThe search did not start and the embedded Ray was shut down: those ports would let other machines "
        "reach it. This Ray no longer keeps to the loopback as hpsearch sets it up; please report this message. "
        "To run meanwhile, start a Ray cluster yourself (`ray start --head`), restrict who can reach its ports "
        "(a firewall), and pass its address with --address."
    )


def check_loopback_only(before: Collection[Listener] = ()) -> None:
    """Right after an embedded ``ray.init``: refuse the search if a process of the session listens beyond the loopback.

    ``before``: this process's sockets before ``ray.init`` (:func:`driver_listeners`). Does
    nothing when this process started no Ray session. The caller shuts Ray down on the error.

    Raises:
        ClusterError: Naming each process, address and port found beyond the loopback.
    """
    global _driver_before
    _driver_before = frozenset(before)  # for the watch while the search runs
    readings = settled(lambda: session_listeners(before))
    if readings is None:  # this Ray does not say which processes it started (internal ray-node, said at start)
        messages.say(
            "loopback check not run: the installed Ray does not say which processes it started, so the embedded "
            "Ray's servers were not checked for listening beyond 127.0.0.1"
        )
        return
    found = beyond_loopback(readings)
    if found:
        raise ClusterError(refusal(found, ray.__version__))


class LoopbackWatch(Callback):
    """While the search runs: the embedded Ray session's sockets read again every ``every_s``, and at the end.

    One line for each socket found beyond the loopback, once (the search goes on: such a socket is a
    trial's own code's, since Ray's were checked at the start). Silent on ``--address``, where this
    process started no Ray session.
    """

    #: How often the sockets are read while trials run; a reading takes a few milliseconds a process.
    EVERY_S = 30.0

    def __init__(self, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self.clock = clock
        self._next = 0.0
        self.said: list[Listener] = []

    def __getstate__(self) -> dict[str, Any]:
        return {"every_s": self.every_s, "clock": self.clock}  # a restored search reads afresh

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]  # a fresh watch, as built

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        now = self.clock()
        if now >= self._next:
            self._next = now + self.every_s
            self.look()

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self.look()

    def look(self) -> None:
        """Read the session's sockets now; one line for each new one beyond the loopback."""
        readings = session_listeners(_driver_before)
        if readings is None:
            return
        for found in beyond_loopback(readings):
            if found in self.said:
                continue
            self.said.append(found)
            messages.say(
                f"warning: {found} listens beyond the loopback while the search runs: other machines can reach "
                "that port. hpsearch's embedded Ray and its trials' process groups keep to 127.0.0.1; a trial's "
                "own code opened this one"
            )
