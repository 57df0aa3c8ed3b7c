"""``--cluster`` descriptions: inline shapes and YAML files, and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpsearch.errors import SpecError
from hpsearch.planning.cluster_shape import parse_cluster
from hpsearch.planning.planner import GB


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("4x{CPU: 32, GPU: 8}", [{"CPU": 32.0, "GPU": 8.0}] * 4, id="counted"),
        pytest.param("{CPU: 2}", [{"CPU": 2.0}], id="one-node-no-count"),
        pytest.param(
            "1x{CPU: 16} + 3x{CPU: 8, GPU: 3}",
            [{"CPU": 16.0}] + [{"CPU": 8.0, "GPU": 3.0}] * 3,
            id="head-plus-gpu-workers",
        ),
        pytest.param("2 x {CPU: 4, memory: 16}", [{"CPU": 4.0, "memory": 16.0 * GB}] * 2, id="memory-in-gb"),
        pytest.param("1x{CPU: 1, accel: 0.5}", [{"CPU": 1.0, "accel": 0.5}], id="custom-fractional"),
    ],
)
def test_inline_shapes(text: str, expected: list[dict]) -> None:
    nodes = parse_cluster(text)
    assert [dict(n.resources) for n in nodes] == expected
    assert [n.is_head for n in nodes] == [True] + [False] * (len(nodes) - 1)
    assert nodes[0].node_id == "head"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "3x CPU: 8",
            "--cluster: no such file, and not a description like 3x{CPU: 8, GPU: 1}: '3x CPU: 8'",
            id="no-braces",
        ),
        pytest.param("3x{CPU: -1}", "--cluster term 1.CPU: must be a number >= 0, got -1", id="negative"),
        pytest.param(
            "1x{CPU: 2} + x{GPU: 1}",
            "--cluster term 2: must look like 3x{CPU: 8, GPU: 1}, got 'x{GPU: 1}'",
            id="bad-count",
        ),
        pytest.param("2x{}", "--cluster term 1: must be a non-empty mapping of resources, got {}", id="empty"),
        pytest.param("1x{CPU: many}", "--cluster term 1.CPU: must be a number >= 0, got 'many'", id="not-a-number"),
    ],
)
def test_bad_inline_shapes(text: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_cluster(text)
    assert [str(p) for p in info.value.problems] == [message]


def test_yaml_file_with_counts(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes:\n  - {CPU: 16, memory: 64}\n  - {count: 2, CPU: 8, GPU: 3}\n")
    nodes = parse_cluster(str(path))
    assert [dict(n.resources) for n in nodes] == [{"CPU": 16.0, "memory": 64.0 * GB}] + [{"CPU": 8.0, "GPU": 3.0}] * 2
    assert nodes[0].is_head


def test_yaml_file_errors_name_the_file_and_the_node(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("- {CPU: 16}\n- {count: 0, CPU: 8}\n")
    with pytest.raises(SpecError) as info:
        parse_cluster(str(path))
    assert str(info.value) == (
        f"invalid spec in {path} (1 problem):\n  - nodes[1].count: must be a whole number >= 1, got 0"
    )
