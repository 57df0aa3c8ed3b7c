"""``--cluster`` descriptions: inline shapes and YAML files, and their errors."""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path
from typing import Literal

import pytest

from hpsearch.errors import SpecError
from hpsearch.planning import cluster_shape
from hpsearch.planning.cluster_shape import (
    MAX_AMOUNT,
    MAX_FILE_BYTES,
    MAX_NODE_GROUPS,
    MAX_NODES,
    MAX_RESOURCES,
    MAX_TEXT_CHARS,
    ClusterShapeError,
    NodeGroup,
    cluster_text,
    fmt_count,
    is_spot,
    nodes_at,
    parse_cluster,
    parse_node_groups,
)
from hpsearch.planning.planner import GB

_AMOUNT = "must be a finite number >= 0 and <= 1,000,000,000"


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
        pytest.param("3x{CPU: -1}", f"--cluster term 1.CPU: {_AMOUNT}, got -1", id="negative"),
        pytest.param(
            "1x{CPU: 2} + x{GPU: 1}",
            "--cluster term 2: must look like 3x{CPU: 8, GPU: 1} or 0..4x{CPU: 8}, got 'x{GPU: 1}'",
            id="bad-count",
        ),
        pytest.param("2x{}", "--cluster term 1: must be a non-empty mapping of resources, got {}", id="empty"),
        pytest.param("1x{CPU: many}", f"--cluster term 1.CPU: {_AMOUNT}, got 'many'", id="not-a-number"),
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
        f"--cluster {path}: nodes[1].count: count must be a whole number >= 1, "
        "or min..max with 0 <= min <= max and max >= 1, got 0"
    )


# ----------------------------------------------------------------------------- node groups (autoscaling)

_ALLOWED = "count must be a whole number >= 1, or min..max with 0 <= min <= max and max >= 1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("{CPU: 2}", [({"CPU": 2.0}, 1, 1)], id="one-node"),
        pytest.param("3x{CPU: 2}", [({"CPU": 2.0}, 3, 3)], id="fixed"),
        pytest.param(
            "1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}",
            [({"CPU": 8.0}, 1, 1), ({"CPU": 8.0, "GPU": 8.0}, 0, 4)],
            id="autoscaled-gpu-workers",
        ),
        pytest.param("1..3x{CPU: 4}", [({"CPU": 4.0}, 1, 3)], id="head-group-autoscaled"),
        pytest.param("2 .. 2 x {CPU: 4}", [({"CPU": 4.0}, 2, 2)], id="spaces-and-equal-bounds"),
        pytest.param(
            "1x{CPU: 2} + 2..5 * {CPU: 1, memory: 4}",
            [({"CPU": 2.0}, 1, 1), ({"CPU": 1.0, "memory": 4.0 * GB}, 2, 5)],
            id="star-and-memory-in-gb",
        ),
    ],
)
def test_node_groups(text: str, expected: list[tuple[dict, int, int]]) -> None:
    groups = parse_node_groups(text)
    assert [(g.resources, g.min_count, g.max_count) for g in groups] == expected
    assert [g.is_head for g in groups] == [True] + [False] * (len(groups) - 1)
    assert [g.autoscaling for g in groups] == [low < high for _, low, high in expected]


@pytest.mark.parametrize(
    ("text", "messages"),
    [
        pytest.param("4..2x{CPU: 1}", [f"--cluster term 1: {_ALLOWED}, got '4..2'"], id="min-above-max"),
        pytest.param("1x{CPU: 1} + 0..0x{CPU: 1}", [f"--cluster term 2: {_ALLOWED}, got '0..0'"], id="max-zero"),
        pytest.param("1x{CPU: 1} + 0x{CPU: 1}", [f"--cluster term 2: {_ALLOWED}, got '0'"], id="fixed-zero"),
        pytest.param("1x{CPU: 1} + 1.5x{CPU: 1}", [f"--cluster term 2: {_ALLOWED}, got '1.5'"], id="fraction"),
        pytest.param("1x{CPU: 1} + 1...4x{CPU: 1}", [f"--cluster term 2: {_ALLOWED}, got '1...4'"], id="three-dots"),
        pytest.param(
            "0..4x{CPU: 8}",
            ["--cluster term 1: the head group (the first) needs at least 1 node: its min must be >= 1, got '0..4'"],
            id="head-min-zero",
        ),
        pytest.param(
            "0..1x{CPU: 1} + 3..1x{GPU: 1} + 1x{CPU: -1}",
            [
                "--cluster term 1: the head group (the first) needs at least 1 node: its min must be >= 1, got '0..1'",
                f"--cluster term 2: {_ALLOWED}, got '3..1'",
                f"--cluster term 3.CPU: {_AMOUNT}, got -1",
            ],
            id="all-problems-at-once",
        ),
    ],
)
def test_bad_node_groups(text: str, messages: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        parse_node_groups(text)
    assert [str(p) for p in info.value.problems] == messages


def test_parse_cluster_is_the_minimum_size() -> None:
    nodes = parse_cluster("1x{CPU: 8} + 1..4x{CPU: 8, GPU: 8} + 0..2x{CPU: 2}")
    assert [dict(n.resources) for n in nodes] == [{"CPU": 8.0}, {"CPU": 8.0, "GPU": 8.0}]
    assert [n.node_id for n in nodes] == ["head", "node1"]


@pytest.mark.parametrize(
    ("size", "ids", "heads"),
    [
        pytest.param("min", ["head"], [True], id="min"),
        pytest.param("max", ["head", "node1", "node2", "node3"], [True, False, False, False], id="max"),
        pytest.param([2, 1], ["head", "node1", "node2"], [True, False, False], id="counts"),
    ],
)
def test_nodes_at(size: Literal["min", "max"] | list[int], ids: list[str], heads: list[bool]) -> None:
    groups = parse_node_groups("1..2x{CPU: 4} + 0..2x{GPU: 1}")
    nodes = nodes_at(groups, size)
    assert [n.node_id for n in nodes] == ids
    assert [n.is_head for n in nodes] == heads


def test_nodes_at_refuses_counts_outside_the_range() -> None:
    groups = parse_node_groups("1x{CPU: 4} + 0..2x{GPU: 1}")
    with pytest.raises(ValueError, match="outside 0..2"):
        nodes_at(groups, [1, 3])
    with pytest.raises(ValueError, match="1 counts for 2 node groups"):
        nodes_at(groups, [1])


def test_fmt_count() -> None:
    assert [fmt_count(NodeGroup({"CPU": 1}, a, b, False)) for a, b in [(3, 3), (0, 4)]] == ["3", "0..4"]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        pytest.param("{CPU: 8, GPU: 8, count: 2}", (2, 2), id="count"),
        pytest.param("{CPU: 8, GPU: 8, count: '0..4'}", (0, 4), id="count-range"),
        pytest.param("{CPU: 8, GPU: 8, min_count: 1, max_count: 3}", (1, 3), id="min-max"),
    ],
)
def test_yaml_node_groups(tmp_path: Path, entry: str, expected: tuple[int, int]) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(f"nodes:\n  - {{CPU: 8, memory: 32}}\n  - {entry}\n")
    head, workers = parse_node_groups(str(path))
    assert (head.min_count, head.max_count, head.resources) == (1, 1, {"CPU": 8.0, "memory": 32.0 * GB})
    assert (workers.min_count, workers.max_count, workers.resources) == (*expected, {"CPU": 8.0, "GPU": 8.0})


@pytest.mark.parametrize(
    ("entries", "messages"),
    [
        pytest.param(
            ["{CPU: 8, min_count: 0, max_count: 2}"],
            [
                "nodes[0].min_count/max_count: the head group (the first) needs at least 1 node: its min must be "
                ">= 1, got '0..2'"
            ],
            id="head-min-zero",
        ),
        pytest.param(
            ["{CPU: 8}", "{CPU: 8, count: 2, max_count: 3}"],
            ["nodes[1].count: give either count or min_count and max_count, not both"],
            id="both-forms",
        ),
        pytest.param(
            ["{CPU: 8}", "{CPU: 8, max_count: 3}"],
            ["nodes[1].min_count: is needed with the other one (or use count)"],
            id="half-a-range",
        ),
        pytest.param(
            ["{CPU: 8}", "{CPU: 8, min_count: 0, max_count: two}"],
            ["nodes[1]: min_count and max_count must be whole numbers, got 0 and 'two'"],
            id="not-numbers",
        ),
        pytest.param(
            ["{CPU: 8}", "{CPU: 8, count: '5..1'}", "{GPU: 1, count: true}"],
            [f"nodes[1].count: {_ALLOWED}, got '5..1'", f"nodes[2].count: {_ALLOWED}, got True"],
            id="bad-counts",
        ),
    ],
)
def test_yaml_node_group_errors(tmp_path: Path, entries: list[str], messages: list[str]) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes:\n" + "".join(f"  - {e}\n" for e in entries))
    with pytest.raises(SpecError) as info:
        parse_node_groups(str(path))
    assert [str(p) for p in info.value.problems] == messages


# ----------------------------------------------------------------------------- spot groups

_HEAD_SPOT = (
    "the head group (the first) cannot be spot: the search process and the trial drivers run on the head node; "
    "put the spot nodes in a later group"
)


@pytest.mark.parametrize(
    "text",
    [
        "1x{CPU: 4} + 0..4x{CPU: 8, GPU: 1, spot}",
        "1x{CPU: 4} + 0..4x{spot, GPU: 1, CPU: 8}",
        "1x{CPU: 4} + 0..4x{CPU: 8, GPU: 1, spot: true}",
    ],
)
def test_a_bare_spot_marks_a_group_and_its_nodes_carry_rays_market_type_label(text: str) -> None:
    head, spot = parse_node_groups(text)
    assert (head.spot, spot.spot, spot.resources) == (False, True, {"CPU": 8.0, "GPU": 1.0})
    nodes = nodes_at([head, spot], "max")
    assert [dict(n.labels) for n in nodes] == [{}] + [{"ray.io/market-type": "spot"}] * 4
    assert [is_spot(n) for n in nodes] == [False] + [True] * 4


def test_cluster_text_writes_spot_back_and_reads_back_to_the_same_groups() -> None:
    groups = parse_node_groups("1x{CPU: 4, spot: false} + 2x{CPU: 8, memory: 16, spot} + 0..3x{GPU: 1, CPU: 2}")
    assert [g.spot for g in groups] == [False, True, False]
    text = cluster_text(groups)
    assert text == "1x{CPU: 4} + 2x{CPU: 8, memory: 16, spot} + 0..3x{CPU: 2, GPU: 1}"
    assert parse_node_groups(text) == groups
    assert cluster_text(groups, exact=False) == "1x{CPU: 4} + 2x{CPU: 8, memory: 16 GiB, spot} + 0..3x{CPU: 2, GPU: 1}"


def test_a_yaml_file_marks_a_spot_group_with_spot_true(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "nodes:\n  - {CPU: 8}\n  - {CPU: 8, GPU: 8, count: '0..4', spot: true}\n  - CPU: 2\n    spot: false\n"
    )
    groups = parse_node_groups(str(path))
    assert [(g.spot, g.min_count, g.max_count) for g in groups] == [(False, 1, 1), (True, 0, 4), (False, 1, 1)]
    assert parse_node_groups(cluster_text(groups)) == groups


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("1x{CPU: 4, spot} + 2x{CPU: 8}", f"--cluster term 1.spot: {_HEAD_SPOT}", id="head"),
        pytest.param("1..3x{CPU: 8, spot: true}", f"--cluster term 1.spot: {_HEAD_SPOT}", id="head-group-range"),
        pytest.param(
            "1x{CPU: 4} + 2x{CPU: 8, spot: 1}",
            "--cluster term 2.spot: marks the group as spot nodes: write it bare ({CPU: 8, spot}) or spot: true, "
            "got 1 (a custom resource cannot be named spot)",
            id="a-number",
        ),
        pytest.param(
            "1x{CPU: 4} + 2x{spot}",
            "--cluster term 2: a spot group needs its resources too, e.g. {CPU: 8, GPU: 1, spot}",
            id="nothing-else",
        ),
    ],
)
def test_a_bad_spot_group_is_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(ClusterShapeError) as info:
        parse_node_groups(text)
    assert str(info.value) == message


def test_a_spot_head_in_a_file_is_refused_naming_the_file_and_the_node(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("- {CPU: 8, spot: true}\n- {CPU: 8, count: 2}\n")
    with pytest.raises(ClusterShapeError) as info:
        parse_node_groups(str(path))
    assert str(info.value) == f"--cluster {path}: nodes[0].spot: {_HEAD_SPOT}"


QUICK = Path(__file__).resolve().parents[2] / "search_spaces" / "digits_quick.yaml"


def groups_of(text: str) -> list[tuple[dict[str, float], int, int, bool, bool]]:
    return [(g.resources, g.min_count, g.max_count, g.is_head, g.spot) for g in parse_node_groups(text)]


@pytest.mark.parametrize(
    "cluster",
    [
        "1x{CPU: 8, memory: 32} + 0..2x{CPU: 4, memory: 16}",
        "1x{memory: 32.5, CPU: 8} + 0..4x{GPU: 8, CPU: 2.5, memory: 0.3}",
        "1..3x{CPU: 8, accel/x-1.0: 0.25}",
        "1x{CPU: 8} + 0..2x{CPU: 4, GPU: 1, spot}",
    ],
)
def test_the_cluster_of_plan_as_json_is_read_back_by_cluster_to_the_same_groups(
    cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hpsearch plan --format json`'s "cluster" is a --cluster text: the same parser reads the same groups."""
    import json

    from hpsearch.cli import main

    assert main(["plan", str(QUICK), "--cluster", cluster, "--format", "json"]) == 0
    written = json.loads(capsys.readouterr().out)["cluster"]
    assert groups_of(written) == groups_of(cluster)
    assert "GB" not in written


def test_a_plans_title_writes_memory_for_people_and_the_json_for_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    """The text plan's title keeps `memory: 32 GiB`; only the JSON's "cluster" is the --cluster form."""
    from hpsearch.cli import main

    cluster = "1x{CPU: 8, memory: 32} + 0..2x{CPU: 4, memory: 16}"
    assert main(["plan", str(QUICK), "--cluster", cluster]) == 0
    title = capsys.readouterr().out.splitlines()[0]
    assert "cluster 1x{CPU: 8, memory: 32 GiB} + 0..2x{CPU: 4, memory: 16 GiB} (1 to 3 nodes)" in title


# ----------------------------------------------------------------------------- bounds: refused at once, in one line

_HEX = (
    "0x" + "f" * 4000
)  # a YAML int of 4,800 digits, more than Python writes out; 4,002 characters, under the text bound


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "1000000000x{CPU: 4}",
            "--cluster term 1: count must be at most 10,000 nodes, got '1000000000'",
            id="1e9-nodes",
        ),
        pytest.param(
            "9" * 20 + "x{CPU: 4}",
            f"--cluster term 1: count must be at most 10,000 nodes, got '{'9' * 20}'",
            id="20-digit-count",
        ),
        pytest.param(
            "1x{CPU: 4} + 0..10001x{CPU: 4}",
            "--cluster term 2: count must be at most 10,000 nodes, got '0..10001'",
            id="range-above-the-bound",
        ),
        pytest.param(
            "1x{CPU: 4} + 0..5000x{CPU: 4} + 0..5000x{GPU: 1}",
            "--cluster: must have at most 10,000 nodes in all, got 10,001 at the maximum size (1 + 0..5000 + 0..5000)",
            id="total-above-the-bound",
        ),
        pytest.param("1x{CPU: .nan}", f"--cluster term 1.CPU: {_AMOUNT}, got nan", id="nan"),
        pytest.param("1x{CPU: .inf}", f"--cluster term 1.CPU: {_AMOUNT}, got inf", id="inf"),
        pytest.param("1x{GPU: -.inf}", f"--cluster term 1.GPU: {_AMOUNT}, got -inf", id="minus-inf"),
        pytest.param("1x{CPU: 1e400}", f"--cluster term 1.CPU: {_AMOUNT}, got inf", id="overflows-to-inf"),
        pytest.param("1x{CPU: -0.5}", f"--cluster term 1.CPU: {_AMOUNT}, got -0.5", id="negative-fraction"),
        pytest.param("1x{CPU: 1000000001}", f"--cluster term 1.CPU: {_AMOUNT}, got 1000000001", id="above-max-amount"),
        pytest.param(
            "1x{CPU: 8, memory: 34359738368}",
            f"--cluster term 1.memory: {_AMOUNT} (GiB), got 34359738368",
            id="memory-in-bytes-not-gib",
        ),
        pytest.param(
            "1x{CPU: " + _HEX + "}",
            f"--cluster term 1.CPU: {_AMOUNT}, got a number too long to write out",
            id="int-too-long-to-write",
        ),
        pytest.param(
            "1x{CPU: " + "1" * 33 + "}",
            f"--cluster term 1: a number must have at most 32 digits, got one of 33: '{'1' * 33}'",
            id="33-digits",
        ),
        pytest.param(
            "1x{CPU: " + "9" * 5000 + "}",
            f"--cluster: must be at most 4,096 characters, got 5,009: '1x{{CPU: {'9' * 48}...",
            id="5000-digits",
        ),
        pytest.param(
            " + ".join(["1x{CPU: 1}"] * 33),
            "--cluster: must have at most 32 node groups (terms joined by +), got 33",
            id="33-groups",
        ),
        pytest.param(
            "1x{" + ", ".join(f"r{i}: 1" for i in range(65)) + "}",
            "--cluster term 1: a node must have at most 64 resources, got 65",
            id="65-resources",
        ),
    ],
)
def test_a_description_past_a_bound_is_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(ClusterShapeError) as info:
        parse_node_groups(text)
    assert str(info.value) == message
    assert isinstance(info.value, SpecError)  # callers that catch SpecError still do


def test_the_bounds_are_the_documented_ones() -> None:
    assert (MAX_NODES, MAX_NODE_GROUPS, MAX_RESOURCES, MAX_AMOUNT) == (10_000, 32, 64, 1_000_000_000)
    assert (MAX_TEXT_CHARS, MAX_FILE_BYTES) == (4096, 65536)


@pytest.mark.parametrize(
    "text",
    [
        "10000x{CPU: 1}",
        "1x{CPU: 4} + 0..9999x{CPU: 4}",
        " + ".join(["1x{CPU: 1}"] * 32),
        "1x{" + ", ".join(f"r{i}: 1" for i in range(64)) + "}",
        "1x{CPU: 1000000000, memory: 1000000000, GPU: 0}",
    ],
)
def test_a_description_at_the_bounds_is_read(text: str) -> None:
    groups = parse_node_groups(text)
    assert sum(g.max_count for g in groups) <= MAX_NODES
    assert len(nodes_at(groups, "max")) == sum(g.max_count for g in groups)


def test_a_huge_count_is_refused_before_anything_is_built_per_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_shape, "Node", lambda *a, **k: pytest.fail("a node was built"))
    tracemalloc.start()
    start = time.perf_counter()
    try:
        for text in ["1000000000x{CPU: 4}", "1x{CPU: 4} + 0.." + "9" * 30 + "x{CPU: 4}"]:
            with pytest.raises(ClusterShapeError, match="count must be at most 10,000 nodes"):
                parse_node_groups(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 1.0
    assert peak < 1_000_000
    # A group built by hand is checked too, before its first node.
    with pytest.raises(ValueError, match="1,000,000,000 nodes is more than a cluster may have"):
        nodes_at([NodeGroup({"CPU": 4.0}, 10**9, 10**9, is_head=True)], "max")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(
            "- {CPU: 4}\n- {CPU: 4, count: 20000}\n",
            "nodes[1].count: count must be at most 10,000 nodes, got 20000",
            id="count",
        ),
        pytest.param(
            "- {CPU: 4}\n- {CPU: 4, min_count: 0, max_count: 10001}\n",
            "nodes[1].min_count/max_count: count must be at most 10,000 nodes, got '0..10001'",
            id="min-max",
        ),
        pytest.param(
            "- {CPU: 4, count: 6000}\n- {CPU: 4, count: '0..4001'}\n",
            "nodes: must have at most 10,000 nodes in all, got 10,001 at the maximum size (6000 + 0..4001)",
            id="total",
        ),
        pytest.param("- {CPU: .nan}\n", f"nodes[0].CPU: {_AMOUNT}, got nan", id="nan"),
        pytest.param("- {CPU: -4}\n", f"nodes[0].CPU: {_AMOUNT}, got -4", id="negative"),
        pytest.param(
            "- {CPU: 4, count: 0x" + "f" * 60000 + "}\n",
            "nodes[0].count: count must be at most 10,000 nodes, got a number too long to write out",
            id="hex-count-too-long-to-write",
        ),
        pytest.param(
            "- {CPU: " + "9" * 5000 + "}\n",
            f"a number must have at most 32 digits, got one of 5,000: '{'9' * 56}...",
            id="5000-digits",
        ),
        pytest.param(
            "".join("- {CPU: 1}\n" for _ in range(33)),
            "nodes: must have at most 32 node groups, got 33",
            id="33-groups",
        ),
        pytest.param(
            "# padding\n" * 7000,
            "must be a file of at most 64 KiB, got a larger one",
            id="too-big",
        ),
        pytest.param("- {CPU: 4, since: 2001-13-45}\n", "not valid YAML: month must be in 1..12", id="bad-date"),
    ],
)
def test_a_file_past_a_bound_is_refused_in_one_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(content)
    with pytest.raises(ClusterShapeError) as info:
        parse_node_groups(str(path))
    assert str(info.value) == f"--cluster {path}: {message}"


@pytest.mark.timeout(10)
def test_a_fifo_a_folder_or_a_device_is_refused_without_reading_it(tmp_path: Path) -> None:
    fifo = tmp_path / "cluster.fifo"
    os.mkfifo(fifo)  # nobody writes to it: a plain open() would wait for a writer forever
    for path, what in [(fifo, "a FIFO (named pipe)"), (tmp_path, "a folder"), (Path("/dev/null"), "a device")]:
        with pytest.raises(ClusterShapeError) as info:
            parse_node_groups(str(path))
        assert str(info.value) == f"--cluster {path}: must be a regular YAML file, got {what}"
