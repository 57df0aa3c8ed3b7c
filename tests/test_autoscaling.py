"""A search on a cluster that grows while it runs (Ray's ``cluster_utils``), as an autoscaler grows one.

A 2-CPU head node alone fits one trial (a 0.1-CPU driver + one 1-CPU worker) at once; with the
2-CPU node that ``--cluster '1x{CPU: 2} + 0..1x{CPU: 2}'`` says the autoscaler may add, three.
``hpsearch run --address ... --cluster ...`` starts three trials: one trains, two wait for a
node, and the progress lines say so. The test then adds the node, as an autoscaler would: the
two waiting trials are placed on it, the trials at once grow from one to at least two, no trial
fails, and no placement group is left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from hpsearch.experiment.layout import PLAN_FILE, SUMMARY_FILE
from hpsearch.runtime.cluster import _free_port as free_port

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

LOOPS = Path(__file__).resolve().parent / "loops.py"
SHAPE = "1x{CPU: 2} + 0..1x{CPU: 2}"
WAITING = "waiting for a node to start"


@pytest.fixture
def growing_cluster():
    """A 1-node cluster (the head, 2 CPUs) with its dashboard, and the means to add a 2-CPU node to it."""
    from ray._raylet import node_ip_address_from_perspective
    from ray.cluster_utils import Cluster

    port = free_port()
    ip = node_ip_address_from_perspective()  # the machine's address, as `ray start` gives a node (see test_multinode)
    saved = os.environ.get("RAY_API_SERVER_ADDRESS")
    os.environ["RAY_API_SERVER_ADDRESS"] = f"http://127.0.0.1:{port}"
    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={
            "num_cpus": 2,
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": port,
            "node_ip_address": ip,
        },
    )
    try:
        cluster.wait_for_nodes()
        yield cluster, ip, f"http://127.0.0.1:{port}"
    finally:
        cluster.shutdown()
        if saved is None:
            os.environ.pop("RAY_API_SERVER_ADDRESS", None)
        else:
            os.environ["RAY_API_SERVER_ADDRESS"] = saved


def _spec(tmp_path: Path) -> Path:
    spec = {
        "name": "growing",
        "trainable": f"{LOOPS}:quadratic",
        "metric": "loss",
        "mode": "min",
        "num_samples": 3,
        "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}, "epochs": 6, "sleep_s": 1.0},
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 1}},
        "resources": {"driver_cpus": 0.1, "reuse_actors": False},
        # a node that never comes would fail the test in minutes, not after Ray's 15
        "failure": {"node_start_timeout_s": 120},
        "storage_path": str(tmp_path / "results"),
    }
    path = tmp_path / "growing.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _placement_groups(dashboard: str) -> list[dict]:
    from ray.util.state import list_placement_groups

    groups = list_placement_groups(address=dashboard, detail=True, limit=1000, raise_on_missing_output=False)
    return [vars(g) for g in groups if g.state != "REMOVED"]


def _intervals(exp_dir: Path) -> list[tuple[float, float]]:
    """Each trial's first and last report, in wall-clock seconds (Tune's result rows)."""
    spans = []
    for result in exp_dir.glob("*/result.json"):
        rows = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        stamps = [float(r["timestamp"]) for r in rows]
        spans.append((min(stamps), max(stamps)))
    return spans


def _most_at_once(spans: list[tuple[float, float]], after: float = float("-inf")) -> int:
    """The most trials reporting at one moment (at or after ``after``)."""
    moments = [t for span in spans for t in span if t >= after]
    return max((sum(1 for a, b in spans if a <= t <= b) for t in moments), default=0)


def test_trials_wait_for_a_node_and_run_on_it_when_it_joins(growing_cluster, tmp_path):
    cluster, ip, dashboard = growing_cluster
    spec = _spec(tmp_path)
    search = subprocess.Popen(
        [sys.executable, "-m", "hpsearch", "run", str(spec), "--address", cluster.address, "--cluster", SHAPE],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    waiting = threading.Event()

    def read() -> None:
        assert search.stdout is not None
        for line in search.stdout:
            lines.append(line)
            if WAITING in line:
                waiting.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert waiting.wait(timeout=150), "".join(lines)[-4000:]
        added_at = time.time()
        cluster.add_node(num_cpus=2, node_ip_address=ip)  # what the autoscaler would do
        assert search.wait(timeout=150) == 0, "".join(lines)[-4000:]
    finally:
        if search.poll() is None:
            search.kill()
    reader.join(timeout=10)
    out = "".join(lines)
    print(out)  # what the search printed, for `pytest -s`
    exp_dir = tmp_path / "results" / "growing"

    plan = json.loads((exp_dir / PLAN_FILE).read_text())
    assert plan["max_concurrent_trials"] == 3  # the head and the node the autoscaler may add
    assert plan["autoscaling"]["cluster"] == SHAPE
    assert plan["autoscaling"]["at_start"]["max_concurrent_trials"] == 1  # the head alone
    assert (
        "hpsearch: autoscaling cluster 1x{CPU: 2} + 0..1x{CPU: 2}: 1 trial(s) at once fit on the 1 node up now, "
        "3 with every node the autoscaler can add (2 nodes); trials beyond what fits wait for a node up to 120 s "
        "(failure.node_start_timeout_s)"
    ) in out
    assert "2 trials waiting for a node to start: their workers fit on nodes the autoscaler can add" in out, out
    assert "cannot be placed" not in out, out

    summary = json.loads((exp_dir / SUMMARY_FILE).read_text())
    assert summary["counts"] == {"finished": 3, "stopped": 0, "errored": 0}, out
    spans = _intervals(exp_dir)
    assert len(spans) == 3
    assert sum(1 for first, _ in spans if first < added_at) <= 1  # before the node: one trial trained
    assert _most_at_once(spans, after=added_at) >= 2  # with it: the two that waited train together

    deadline = time.monotonic() + 20
    while (left := _placement_groups(dashboard)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == []
