"""``--cluster`` descriptions: inline shapes and YAML files, and their errors."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from hpsearch.errors import SpecError
from hpsearch.planning.cluster_shape import NodeGroup, fmt_count, nodes_at, parse_cluster, parse_node_groups
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
            "--cluster term 2: must look like 3x{CPU: 8, GPU: 1} or 0..4x{CPU: 8}, got 'x{GPU: 1}'",
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
        f"invalid spec in {path} (1 problem):\n  - nodes[1].count: count must be a whole number >= 1, "
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
                "--cluster term 3.CPU: must be a number >= 0, got -1",
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


QUICK = Path(__file__).resolve().parents[1] / "search_spaces" / "digits_quick.yaml"


def groups_of(text: str) -> list[tuple[dict[str, float], int, int, bool]]:
    return [(g.resources, g.min_count, g.max_count, g.is_head) for g in parse_node_groups(text)]


@pytest.mark.parametrize(
    "cluster",
    [
        "1x{CPU: 8, memory: 32} + 0..2x{CPU: 4, memory: 16}",
        "1x{memory: 32.5, CPU: 8} + 0..4x{GPU: 8, CPU: 2.5, memory: 0.3}",
        "1..3x{CPU: 8, accel/x-1.0: 0.25}",
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
