"""A real multi-node Ray cluster on this machine (Ray's ``cluster_utils``): plan, run, refuse.

Three raylets: a 1-CPU head that holds the trial drivers, and two worker nodes with a
custom ``accel`` resource standing in for GPUs. ``hpsearch`` runs as a separate process
with ``--address``, exactly as a user runs it against a ``ray start`` cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpsearch.experiment.layout import PLAN_FILE, RAY_SESSION_FILE, SUMMARY_FILE
from hpsearch.runtime.cluster import _free_port as free_port

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

LOOPS = Path(__file__).resolve().parent / "loops.py"


@pytest.fixture(scope="module")
def three_node_cluster():
    from ray._raylet import node_ip_address_from_perspective
    from ray.cluster_utils import Cluster

    port = free_port()
    # The machine's address, as `ray start` gives a node. Left to Ray, the nodes would take this process's
    # node address: the loopback when the session's embedded Ray is connected here, which the hpsearch
    # subprocesses' `--address 127.0.0.1:...` would then resolve to the machine's address, and miss.
    ip = node_ip_address_from_perspective()
    # Its raylets (and so Ray Train's placement-group cleaners) must ask this cluster's State API,
    # not the one of the session's other local Ray.
    saved = os.environ.get("RAY_API_SERVER_ADDRESS")
    os.environ["RAY_API_SERVER_ADDRESS"] = f"http://127.0.0.1:{port}"
    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": port,
            "node_ip_address": ip,
        },
    )
    try:
        cluster.add_node(num_cpus=2, resources={"accel": 2}, node_ip_address=ip)
        cluster.add_node(num_cpus=2, resources={"accel": 2}, node_ip_address=ip)
        cluster.wait_for_nodes()
        yield cluster.address
    finally:
        cluster.shutdown()
        if saved is None:
            os.environ.pop("RAY_API_SERVER_ADDRESS", None)
        else:
            os.environ["RAY_API_SERVER_ADDRESS"] = saved


def _hpsearch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpsearch", *args], capture_output=True, text=True, timeout=400)


def _spec(tmp_path: Path, **overrides) -> Path:
    spec = {
        "name": "multinode",
        "trainable": f"{LOOPS}:quadratic",
        "metric": "loss",
        "mode": "min",
        "num_samples": 4,
        "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}, "epochs": 3, "sleep_s": 0.3},
        "scaling": {
            "num_workers": 2,
            "resources_per_worker": {"CPU": 0.5, "accel": 1},
            "placement_strategy": "STRICT_PACK",
        },
        "resources": {"driver_cpus": 0.25},
        "storage_path": str(tmp_path / "results"),
        **overrides,
    }
    path = tmp_path / "multinode.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_search_on_three_nodes_starts_trials_only_as_fast_as_workers_can_be_placed(three_node_cluster, tmp_path):
    spec = _spec(tmp_path)
    done = _hpsearch("run", str(spec), "--address", three_node_cluster)
    assert done.returncode == 0, done.stderr[-3000:]
    exp_dir = tmp_path / "results" / "multinode"

    plan = json.loads((exp_dir / PLAN_FILE).read_text())
    assert plan["max_concurrent_trials"] == 2  # one STRICT_PACK pair of accel workers per worker node
    head = next(n for n in plan["nodes"] if n["is_head"])
    assert head["drivers"] == 2 and head["workers"] == 0  # drivers on the head, apart from the workers
    assert sorted(n["workers"] for n in plan["nodes"] if not n["is_head"]) == [2, 2]

    summary = json.loads((exp_dir / SUMMARY_FILE).read_text())
    assert summary["counts"] == {"finished": 4, "stopped": 0, "errored": 0}
    assert not (exp_dir / RAY_SESSION_FILE).exists()  # a cluster hpsearch did not start: none of its processes is ours
    # No trial waited on a placement group: its first report came within its start-up time (~5-10 s,
    # slower on a loaded machine); a wait would last the 60 s worker-group start timeout, then error.
    for trial_dir in (p for p in exp_dir.iterdir() if (p / "result.json").is_file()):
        first = json.loads((trial_dir / "result.json").read_text().splitlines()[0])
        assert first["time_this_iter_s"] < 55, (trial_dir.name, first["time_this_iter_s"])


def test_a_trial_the_cluster_can_never_hold_is_refused_before_anything_starts(three_node_cluster, tmp_path):
    spec = _spec(
        tmp_path,
        scaling={
            "num_workers": 3,
            "resources_per_worker": {"CPU": 0.5, "accel": 1},
            "placement_strategy": "STRICT_PACK",
        },
    )
    expected = (
        "Error: STRICT_PACK puts all 3 workers of {CPU: 0.5, accel: 1, memory: 0.7 GB} on one node, "
        "but the node with the most room holds 2"
    )
    planned = _hpsearch("plan", str(spec), "--address", three_node_cluster)
    assert planned.returncode == 2
    assert expected in planned.stderr
    ran = _hpsearch("run", str(spec), "--address", three_node_cluster)
    assert ran.returncode == 2
    assert expected in ran.stderr
    assert not (tmp_path / "results" / "multinode").exists()
