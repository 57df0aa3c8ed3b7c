"""Reading the cluster's shape and the connection error, without starting Ray."""

from __future__ import annotations

import pytest

from hpsearch.planning.planner import Node
from hpsearch.runtime.nodes import connect as cluster


def test_cluster_nodes_reads_alive_nodes_and_marks_the_head(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    fake = [
        {
            "Alive": True,
            "NodeID": "gpu",
            "Resources": {"CPU": 8.0, "GPU": 4.0, "node:10.0.0.2": 1.0},
            "Labels": {"ray.io/node-id": "gpu"},
        },
        {"Alive": False, "NodeID": "dead", "Resources": {"CPU": 64.0}},
        {
            "Alive": True,
            "NodeID": "head",
            "Resources": {"CPU": 2.0, "memory": 1e9, "node:10.0.0.1": 1.0, "node:__internal_head__": 1.0},
        },
    ]
    monkeypatch.setattr(ray, "nodes", lambda: fake)
    assert cluster.cluster_nodes() == [
        Node({"CPU": 8.0, "GPU": 4.0}, "gpu", labels={"ray.io/node-id": "gpu"}),
        Node({"CPU": 2.0, "memory": 1e9}, "head", is_head=True),
    ]


def test_connection_error_explains_token_authentication(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    message = cluster._cannot_connect(
        "10.0.0.1:6379", ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")
    )
    assert message.splitlines() == [
        "cannot connect to the Ray cluster at '10.0.0.1:6379': Failed to connect to Ray cluster at 10.0.0.1:6379",
        "Ray clusters use token authentication by default, and Ray only sends the token to an explicit address "
        "when RAY_AUTH_MODE=token is set (the token comes from RAY_AUTH_TOKEN or ~/.ray/auth_token). "
        "Set it, or use --address auto on a node of the cluster.",
    ]
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert "\n" not in cluster._cannot_connect("10.0.0.1:6379", ConnectionError("refused"))


def test_a_ray_job_command_uses_the_jobs_cluster_not_an_embedded_one():
    from hpsearch.runtime.nodes.connect import JOB_MARKER, job_cluster_address

    assert job_cluster_address({JOB_MARKER: '{"runtime_env": {}}', "RAY_ADDRESS": "127.0.0.1:6379"}) == "auto"
    assert job_cluster_address({"RAY_ADDRESS": "127.0.0.1:6379"}) is None
    assert job_cluster_address({}) is None
