"""The node check's facts and verdicts, and the interface pin, without a cluster.

:func:`hpsearch.runtime.nodes.node_facts.probe_node` runs here as it runs on a node; the host's name
resolution and network interfaces are faked where a test needs a host whose name resolves to
a loopback address. The multi-host tests (``tests/end_to_end/test_multihost.py``) run the same check on
real hosts.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
from collections import namedtuple
from pathlib import Path

import pytest
from ray import cloudpickle

from hpsearch.planning.planner import Node
from hpsearch.runtime.nodes import node_check, node_facts
from hpsearch.runtime.nodes.node_facts import GLOO_IFNAME, NCCL_IFNAME, NodeFacts, assess, socket_pin
from hpsearch.spec import Scaling

Address = namedtuple("Address", "family address netmask broadcast ptp")

#: h2's interfaces, as psutil.net_if_addrs() lists them.
INTERFACES = {
    "lo": [Address(socket.AF_INET, "127.0.0.1", None, None, None), Address(socket.AF_INET6, "::1", None, None, None)],
    "veth0": [
        Address(socket.AF_INET, "10.0.0.2", "255.255.255.0", None, None),
        Address(socket.AF_INET6, "fe80::1%veth0", None, None, None),
    ],
}
V = {"ray": "2.60.0", "hpsearch": "0.1.0", "torch": "2.13.0+cpu", "python": "3.11"}


def _host(name: str, ip: str, resolved: tuple[str, ...], **facts) -> NodeFacts:
    return NodeFacts(f"{name}-node-id-0123456789", name, ip, resolved=resolved, interface="veth0", versions=V, **facts)


H1 = _host("h1", "10.0.0.1", ("10.0.0.1",))
H2 = _host("h2", "10.0.0.2", ("127.0.1.1",))  # Debian's `127.0.1.1 h2` line


def _assess(facts, **options):
    settings = {
        "own_versions": V,
        "own_host": "h1",
        "storage_path": "/shared/results",
        "loop": "/spec/loop.py:train",
        "workers": 2,
        **options,
    }
    return assess(facts, **settings)


# ----------------------------------------------------------------------------- the interface pin


@pytest.mark.parametrize(
    ("resolved", "node_ip", "interface", "environ", "expected"),
    [
        (("127.0.1.1",), "10.0.0.2", "veth0", {}, {GLOO_IFNAME: "veth0", NCCL_IFNAME: "veth0"}),
        ((), "10.0.0.2", "veth0", {}, {GLOO_IFNAME: "veth0", NCCL_IFNAME: "veth0"}),  # no name: gloo takes 127.0.0.1
        (("::1",), "10.0.0.2", "veth0", {NCCL_IFNAME: "ib0"}, {GLOO_IFNAME: "veth0"}),  # the user's NCCL choice stays
        (("127.0.1.1",), "10.0.0.2", "veth0", {GLOO_IFNAME: "eth1"}, {}),  # the user's gloo choice stays
        (("127.0.1.1",), "10.0.0.2", "veth0", {GLOO_IFNAME: ""}, {GLOO_IFNAME: "veth0", NCCL_IFNAME: "veth0"}),
        (("10.0.0.2", "127.0.1.1"), "10.0.0.2", "veth0", {}, {}),  # gloo takes the first address: the right one
        (("127.0.0.1",), "127.0.0.1", "lo", {}, {}),  # an embedded Ray on a loopback-named host: gloo is there
        ((), "127.0.0.1", "lo", {}, {}),  # no name: gloo takes 127.0.0.1
        # an embedded Ray on a host whose name resolves beyond the loopback: gloo kept to it (measured: else
        # gloo listened on the name's 10.77.0.1, in a network namespace of hpsearch's tests)
        (("10.77.0.1",), "127.0.0.1", "lo", {}, {GLOO_IFNAME: "lo", NCCL_IFNAME: "lo"}),
        (("10.77.0.1",), "127.0.0.1", "lo", {GLOO_IFNAME: "eth0"}, {}),  # the user's choice stays
        (("127.0.1.1",), "10.0.0.2", None, {}, {}),  # no interface holds the IP: nothing to pin to
    ],
)
def test_the_pin_is_the_interface_of_the_nodes_ip_only_where_the_hosts_name_is_a_loopback_one(
    resolved, node_ip, interface, environ, expected
) -> None:
    assert socket_pin(resolved=resolved, node_ip=node_ip, interface=interface, environ=environ) == expected


@pytest.fixture
def host_h2(monkeypatch: pytest.MonkeyPatch):
    """This process sees itself as h2: its name resolves to 127.0.1.1, its Ray IP 10.0.0.2 is on veth0."""
    monkeypatch.setattr(socket, "gethostname", lambda: "h2")

    def getaddrinfo(host, port, family=0, type=0, *rest):
        if host != "h2":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.1.1", 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(node_facts.psutil, "net_if_addrs", lambda: INTERFACES)
    for name in (GLOO_IFNAME, NCCL_IFNAME):
        # set first, so that pytest records them as absent and removes what a test sets: a leaked
        # GLOO_SOCKET_IFNAME=veth0 would hang every later search of the session on an interface it lacks
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)


def test_a_worker_on_a_loopback_named_host_pins_gloo_and_nccl_before_its_process_group(host_h2) -> None:
    assert node_facts.apply_socket_pin("10.0.0.2") == {GLOO_IFNAME: "veth0", NCCL_IFNAME: "veth0"}
    assert os.environ[GLOO_IFNAME] == "veth0" and os.environ[NCCL_IFNAME] == "veth0"


def test_a_worker_keeps_the_users_gloo_interface(host_h2, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GLOO_IFNAME, "eth7")
    assert node_facts.apply_socket_pin("10.0.0.2") == {}
    assert os.environ[GLOO_IFNAME] == "eth7" and NCCL_IFNAME not in os.environ


def test_the_train_worker_function_pins_to_its_nodes_ray_ip(host_h2, monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "10.0.0.2")
    environ: dict[str, str] = {}
    monkeypatch.setattr(node_facts.os, "environ", environ)
    assert node_check.pin_worker_interface() == {GLOO_IFNAME: "veth0", NCCL_IFNAME: "veth0"}
    assert environ == {GLOO_IFNAME: "veth0", NCCL_IFNAME: "veth0"}


def test_an_interface_is_found_by_its_address_in_either_family() -> None:
    assert node_facts.interface_holding("10.0.0.2", INTERFACES) == "veth0"
    assert node_facts.interface_holding("fe80::1", INTERFACES) == "veth0"
    assert node_facts.interface_holding("10.0.0.9", INTERFACES) is None
    assert node_facts.interface_holding("?", INTERFACES) is None


# ----------------------------------------------------------------------------- the probe, run here


def test_the_probe_reports_this_hosts_facts(host_h2, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NCCL_IFNAME, "ib0")
    (tmp_path / "from-driver").write_text("token")
    answer = node_facts.probe_node("n2", "10.0.0.2", str(tmp_path), "token", cloudpickle.dumps(len))
    assert answer == {
        "hostname": "h2",
        "node_ip": "10.0.0.2",
        "resolved": ["127.0.1.1"],
        "resolve_error": None,
        "interface": "veth0",
        "socket_env": {NCCL_IFNAME: "ib0"},
        "versions": node_facts.local_versions(),
        "storage_error": None,
        "loop_error": None,
    }
    assert (tmp_path / "from-n2").read_text() == "token"
    assert answer["versions"]["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert NodeFacts.from_probe("n2", answer).pin() == {GLOO_IFNAME: "veth0"}


def test_a_name_that_does_not_resolve_is_a_fact(host_h2, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "nowhere")
    answer = node_facts.probe_node("n2", "10.0.0.2", None, "token", None)
    assert answer["resolved"] == [] and answer["resolve_error"].startswith("gaierror: ")
    assert answer["storage_error"] is None and answer["loop_error"] is None  # neither was asked for


def test_the_storage_probe_names_a_folder_the_node_cannot_reach_or_that_is_another(tmp_path: Path) -> None:
    missing = tmp_path / "only-on-the-head"
    answer = node_facts.probe_node("n1", "10.0.0.1", str(missing), "token", None)
    assert answer["storage_error"] == f"{missing} is not reachable there (No such file or directory)"
    (tmp_path / "from-driver").write_text("another search's token")
    answer = node_facts.probe_node("n1", "10.0.0.1", str(tmp_path), "token", None)
    assert answer["storage_error"] == f"{tmp_path} holds other content there"


def test_a_loop_file_travels_with_its_helper_but_an_import_from_elsewhere_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpsearch.runtime.datasets import register_by_value
    from hpsearch.spec._imports import load_callable

    spec_dir, elsewhere = tmp_path / "spec", tmp_path / "site"
    spec_dir.mkdir()
    elsewhere.mkdir()
    (spec_dir / "helpers_nc.py").write_text("def scale(x):\n    return 2 * x\n")
    (elsewhere / "only_here_nc.py").write_text("def offset(x):\n    return x + 1\n")
    (spec_dir / "loop_nc.py").write_text(
        "from helpers_nc import scale\nimport only_here_nc\n\n"
        "def train(config):\n    return only_here_nc.offset(scale(config['x']))\n"
    )
    monkeypatch.syspath_prepend(str(elsewhere))
    monkeypatch.syspath_prepend(str(spec_dir))
    loop = load_callable(f"{spec_dir / 'loop_nc.py'}:train")
    register_by_value(loop)
    blob = cloudpickle.dumps(loop)
    # Another host: neither folder is on its path, nothing of the search is imported.
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in (str(spec_dir), str(elsewhere))])
    for name in [m for m in sys.modules if m.endswith("_nc") or "loop_nc" in m]:
        monkeypatch.delitem(sys.modules, name)
    answer = node_facts.probe_node("n2", "10.0.0.2", None, "", blob)
    assert answer["loop_error"] == "ModuleNotFoundError: No module named 'only_here_nc'"
    monkeypatch.syspath_prepend(str(elsewhere))  # installed there too: the helper came inside the pickle
    assert node_facts.probe_node("n2", "10.0.0.2", None, "", blob)["loop_error"] is None
    assert pickle.loads(blob)({"x": 3}) == 7


# ----------------------------------------------------------------------------- the verdict


def test_a_healthy_cluster_passes_silently() -> None:
    found = _assess([H1, _host("h2", "10.0.0.2", ("10.0.0.2",))])
    assert found.problems == [] and found.notes == [] and found.refusal() is None


def test_a_loopback_hostname_is_pinned_and_said_once_per_host() -> None:
    twin = NodeFacts("h2-second-raylet", "h2", "10.0.0.2", resolved=("127.0.1.1",), interface="veth0", versions=V)
    found = _assess([H1, H2, twin])
    assert found.problems == []
    assert found.notes == [
        "host h2 (10.0.0.2): its name resolves to 127.0.1.1; trial workers there use "
        "GLOO_SOCKET_IFNAME=veth0 and NCCL_SOCKET_IFNAME=veth0"
    ]


def test_a_loopback_hostname_is_refused_with_both_fixes_when_hpsearch_cannot_pin() -> None:
    off = "Ray internal torch-backend-start: ray.train.torch.config has no class _TorchBackend"
    found = _assess([H1, H2], pinning_off=off)
    assert found.notes == []
    assert found.refusal() == (
        "host h2 (10.0.0.2): its name resolves to 127.0.1.1, a loopback address, so gloo there would tell the other "
        "hosts to reach its trial workers at 127.0.1.1, and every 2-worker trial that spans hosts would fail (gloo: "
        "Connection refused, after its timeouts); hpsearch cannot set the interface itself here (Ray internal "
        "torch-backend-start: ray.train.torch.config has no class _TorchBackend). Fix one of:\n"
        "  - set GLOO_SOCKET_IFNAME=veth0 (NCCL_SOCKET_IFNAME=veth0 too with GPUs), the interface holding 10.0.0.2, "
        "in the environment of `ray start` on h2;\n"
        "  - make h2 resolve to 10.0.0.2 (a line `10.0.0.2 h2` in its /etc/hosts, in place of the loopback one)."
    )


def test_a_name_that_does_not_resolve_and_an_ip_on_no_interface_are_refused() -> None:
    h3 = NodeFacts(
        "h3-id", "h3", "10.0.0.3", resolve_error="gaierror: [Errno -2] Name or service not known", versions=V
    )
    message = _assess([H1, h3]).refusal()
    assert message == (
        "host h3 (10.0.0.3): its name does not resolve (gaierror: [Errno -2] Name or service not known), so gloo "
        "there falls back to 127.0.0.1 and would tell the other hosts to reach its trial workers there, and every "
        "2-worker trial that spans hosts would fail (gloo: Connection refused, after its timeouts); hpsearch cannot "
        "set the interface itself here (no interface there holds 10.0.0.3). Fix one of:\n"
        "  - set GLOO_SOCKET_IFNAME (NCCL_SOCKET_IFNAME too with GPUs) to the interface the other hosts reach h3 "
        "through, in the environment of `ray start` on h3;\n"
        "  - make h3 resolve to 10.0.0.3 (a line `10.0.0.3 h3` in its /etc/hosts)."
    )


@pytest.mark.parametrize(
    ("facts", "options"),
    [
        ([H1, H2], {"workers": 1}),  # one worker: no process group spans hosts
        ([H1, _host("h2", "10.0.0.2", ("127.0.1.1",), socket_env={GLOO_IFNAME: "eth0"})], {}),  # the user set it
        ([H1, H2], {"worker_nodes": {H1.node_id}}),  # no worker fits on h2 (a GPU trial, a CPU-only h2)
        ([_host("vm", "192.0.2.2", ("127.0.0.1",)), _host("vm", "192.0.2.2", ("127.0.0.1",))], {}),  # one host
    ],
    ids=["one-worker", "gloo-set-by-the-user", "no-worker-fits-there", "several-raylets-one-host"],
)
def test_a_loopback_hostname_matters_only_for_workers_on_several_hosts(facts, options) -> None:
    found = _assess(facts, pinning_off="off", **options)
    assert found.problems == [] and found.notes == []


def test_several_raylets_on_one_loopback_named_host_are_pinned_too_and_said_once() -> None:
    one_host = [
        _host("vm", "192.0.2.2", ("127.0.0.1",)),
        NodeFacts(**{**vars(_host("vm", "192.0.2.2", ("127.0.0.1",))), "node_id": "x"}),
    ]
    found = _assess(one_host)
    assert found.problems == []
    assert found.notes == [
        "host vm (192.0.2.2): its name resolves to 127.0.0.1; trial workers there use "
        "GLOO_SOCKET_IFNAME=veth0 and NCCL_SOCKET_IFNAME=veth0"
    ]


def test_storage_another_node_cannot_reach_is_refused_naming_its_host() -> None:
    h2 = _host(
        "h2", "10.0.0.2", ("10.0.0.2",), storage_error="/shared/results/.x is not reachable there (Permission denied)"
    )
    assert _assess([H1, h2]).refusal() == (
        "storage_path /shared/results is not shared by all 2 nodes of the cluster:\n"
        "  host h2 (10.0.0.2): /shared/results/.x is not reachable there (Permission denied)\n"
        "With several nodes, storage_path must be storage every node reaches at the same path (an NFS or other "
        "shared mount): trials checkpoint there and resume from there."
    )


def test_version_skew_is_one_table_of_every_node_marking_what_differs() -> None:
    h2 = _host("h2", "10.0.0.2", ("10.0.0.2",))
    h2 = NodeFacts(**{**vars(h2), "versions": {**V, "ray": "2.58.0", "python": "3.10"}})
    h3 = NodeFacts(**{**vars(_host("h3", "10.0.0.3", ("10.0.0.3",))), "versions": {**V, "hpsearch": None}})
    assert _assess([H1, h2, h3]).refusal() == (
        "2 of 3 nodes run other versions than this search process (* marks each difference):\n"
        "                      ray      hpsearch  torch       python\n"
        "  this process (h1)   2.60.0   0.1.0     2.13.0+cpu  3.11\n"
        "  host h1 (10.0.0.1)  2.60.0   0.1.0     2.13.0+cpu  3.11\n"
        "  host h2 (10.0.0.2)  2.58.0*  0.1.0     2.13.0+cpu  3.10*   differs: ray, python\n"
        "  host h3 (10.0.0.3)  2.60.0   none*     2.13.0+cpu  3.11    differs: hpsearch\n"
        "Install the same ray, hpsearch and torch, on the same Python minor version, on every node (one image or "
        "environment for all): a trial's driver, controller and workers pass pickled objects between nodes."
    )


def test_without_torch_here_the_nodes_torch_is_compared_among_them() -> None:
    odd = NodeFacts(**{**vars(_host("h3", "10.0.0.3", ("10.0.0.3",))), "versions": {**V, "torch": "2.5.0"}})
    nodes = [H1, _host("h2", "10.0.0.2", ("10.0.0.2",)), odd]
    message = _assess(nodes, own_versions={**V, "torch": None}).refusal()
    assert message is not None and message.startswith("1 of 3 nodes run other versions")
    lines = message.splitlines()
    assert "  this process (h1)   2.60.0  0.1.0     none        3.11" in lines
    assert "  host h3 (10.0.0.3)  2.60.0  0.1.0     2.5.0*      3.11    differs: torch" in lines


def test_a_loop_that_cannot_load_on_a_node_is_refused_with_its_error() -> None:
    h2 = _host("h2", "10.0.0.2", ("10.0.0.2",), loop_error="ModuleNotFoundError: No module named 'helpers'")
    assert _assess([H1, h2]).refusal() == (
        "the train loop /spec/loop.py:train cannot be loaded on 1 of 2 nodes, as Ray's workers load it there:\n"
        "  host h2 (10.0.0.2): ModuleNotFoundError: No module named 'helpers'\n"
        "hpsearch ships the loop's own .py file and the modules beside it to every node; whatever else it imports "
        "(an installed package, a module on this machine's PYTHONPATH) must be importable on every node."
    )


def test_every_problem_is_in_the_one_message_numbered_and_a_silent_node_is_named() -> None:
    silent = NodeFacts("h3-id", "h3", "10.0.0.3", probe_error="no answer within 60 s")
    bad = _host("h2", "10.0.0.2", ("127.0.1.1",), storage_error="/shared/results/.x is not reachable there (x)")
    message = _assess([H1, bad, silent], pinning_off="off").refusal()
    assert message is not None
    lines = message.splitlines()
    assert lines[0] == "the cluster's nodes cannot run this search (3 problems, found before the first trial):"
    assert lines[1] == (
        "1. 1 of 3 nodes did not answer hpsearch's check (a zero-CPU task on each node, waited for up to 60 s); a "
        "node that cannot run it cannot run trials either:"
    )
    assert lines[2] == "     host h3 (10.0.0.3): no answer within 60 s"
    assert lines[3].startswith("2. storage_path /shared/results is not shared by all 3 nodes of the cluster:")
    assert [line[:3] for line in lines if line[:1].isdigit()] == ["1. ", "2. ", "3. "]
    assert (
        lines[-1]
        == "     - make h2 resolve to 10.0.0.2 (a line `10.0.0.2 h2` in its /etc/hosts, in place of the loopback one)."
    )


def test_two_raylets_on_one_host_are_told_apart_by_their_node_id() -> None:
    first = _host("vm", "192.0.2.2", ("192.0.2.2",), storage_error="gone")
    second = NodeFacts(**{**vars(first), "node_id": "ffff0000ffff0000"})
    message = _assess([first, second]).refusal()
    assert message is not None
    assert "  host vm (192.0.2.2, node vm-node-id-0): gone" in message.splitlines()
    assert "  host vm (192.0.2.2, node ffff0000ffff): gone" in message.splitlines()


# ----------------------------------------------------------------------------- check_nodes without Ray


def test_the_check_is_skipped_on_one_node(tmp_path: Path) -> None:
    from hpsearch.spec import load_spec

    spec = load_spec(
        {
            "name": "one-node",
            "trainable": "hpsearch.examples.digits:train_loop",
            "metric": "val_loss",
            "mode": "min",
            "search_space": {"lr": 0.1},
            "storage_path": str(tmp_path / "results"),
        }
    )
    node_check.check_nodes(spec, [Node({"CPU": 2.0}, "head", is_head=True)])
    assert not (tmp_path / "results").exists()  # nothing written, Ray not needed


def test_worker_nodes_are_those_one_worker_of_some_trial_fits_on() -> None:
    nodes = [
        Node({"CPU": 4.0}, "head", is_head=True),
        Node({"CPU": 8.0, "GPU": 1.0}, "gpu"),
        Node({"CPU": 0.5}, "tiny"),
    ]
    assert node_check.worker_nodes(Scaling(num_workers=2, use_gpu=True), nodes) == {"gpu"}
    assert node_check.worker_nodes(Scaling(num_workers=2), nodes) == {"head", "gpu"}
    searched = Scaling(num_workers=2, resources_per_worker={"CPU": {"type": "choice", "values": [0.5, 6]}})
    assert node_check.worker_nodes(searched, nodes) == {"head", "gpu", "tiny"}
