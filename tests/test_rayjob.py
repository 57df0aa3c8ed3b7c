"""``hpsearch plan --emit rayjob``: the KubeRay RayJob it writes, read back and checked against KubeRay's schema.

Pure: no Ray, no Kubernetes. Every manifest is parsed back from its YAML text and each of its
documents is checked field by field: the RayJob against the schema subset of KubeRay's
``ray.io_rayjobs`` CRD in ``tests/data/rayjob_crd_subset.yaml`` (where it came from and what was
trimmed is in its header), the ConfigMap against Kubernetes' core/v1 ConfigMap fields below. An
unknown field name fails, a wrong type fails, a missing required field fails.
"""

from __future__ import annotations

import math
import re
import shlex
import textwrap
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpsearch.cli import _parser, main
from hpsearch.errors import PlanError
from hpsearch.planning.cluster_shape import nodes_at, parse_node_groups
from hpsearch.planning.for_spec import plan_for
from hpsearch.planning.rayjob import (
    DEADLINE_MARGIN_S,
    HEAD_BASE_GB,
    IDLE_TIMEOUT_S,
    SPEC_MOUNT,
    STORAGE_MOUNT,
    TTL_SECONDS,
    _Doc,
    _dump_documents,
    _scalar,
    cluster_argument,
    deadline_margin_s,
    deadline_seconds,
    head_memory_gb,
    job_name,
    rayjob_manifest,
)
from hpsearch.runtime.autoscaling import autoscaling_for
from hpsearch.spec import Spec, load_spec

CRD = yaml.safe_load((Path(__file__).parent / "data" / "rayjob_crd_subset.yaml").read_text(encoding="utf-8"))

# Kubernetes' ObjectMeta (the CRD leaves `metadata` a bare object) and core/v1 ConfigMap: the fields
# these manifests may use, as the Kubernetes API reference names and types them.
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
OBJECT_META = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
    "required": ["name"],
}
CONFIG_MAP = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string", "enum": ["v1"]},
        "kind": {"type": "string", "enum": ["ConfigMap"]},
        "metadata": OBJECT_META,
        "data": _STRING_MAP,
        "binaryData": _STRING_MAP,
        "immutable": {"type": "boolean"},
    },
    "required": ["apiVersion", "kind", "metadata"],
}
RAYJOB = {**CRD, "properties": {**CRD["properties"], "metadata": OBJECT_META}, "required": ["apiVersion", "kind"]}
_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def schema_errors(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Every way ``value`` breaks ``schema`` (an OpenAPI v3 schema as a CRD writes it), each with its path."""
    where = path or "<root>"
    if "anyOf" in schema:  # int-or-string quantities
        if not any(not schema_errors(value, branch, path) for branch in schema["anyOf"]):
            return [f"{where}: {value!r} is none of {[b.get('type') for b in schema['anyOf']]}"]
        if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            return [f"{where}: {value!r} does not match {schema['pattern']}"]
        return []
    kind = schema.get("type")
    errors: list[str] = []
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {type(value).__name__} {value!r}"]
        properties, extra = schema.get("properties"), schema.get("additionalProperties")
        for key, item in value.items():
            here = f"{path}.{key}" if path else key
            if properties is not None:
                if key not in properties:
                    errors.append(f"{here}: unknown field (allowed: {', '.join(sorted(properties))})")
                else:
                    errors += schema_errors(item, properties[key], here)
            elif extra is not None:
                errors += schema_errors(item, extra, here)
        errors += [f"{where}: missing required field {key!r}" for key in schema.get("required", ()) if key not in value]
        return errors
    if kind == "array":
        if not isinstance(value, list):
            return [f"{where}: expected an array, got {type(value).__name__} {value!r}"]
        for i, item in enumerate(value):
            errors += schema_errors(item, schema.get("items", {}), f"{path}[{i}]")
        return errors
    if kind == "string":
        if not isinstance(value, str):
            return [f"{where}: expected a string, got {type(value).__name__} {value!r}"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{where}: {value!r} is not one of {schema['enum']}"]
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return [f"{where}: {value!r} does not match {schema['pattern']}"]
        return []
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return [f"{where}: expected an integer, got {type(value).__name__} {value!r}"]
        low, high = _RANGES.get(schema.get("format", ""), (-math.inf, math.inf))
        return [] if low <= value <= high else [f"{where}: {value} is outside {schema['format']}"]
    if kind == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{where}: expected a number, got {type(value).__name__} {value!r}"]
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{where}: expected a boolean, got {type(value).__name__} {value!r}"]
    return []  # no type: anything (an array's items when the schema gives none)


LOOP = "def train(config):\n    return None\n"
SPEC_TEXT = textwrap.dedent(
    """\
    # a spec as a user writes it: comments, flow mappings, a relative file loop
    name: kube-search
    trainable: loop.py:train
    metric: val_loss
    mode: min
    num_samples: 8
    search_space:
      lr: {type: float, low: 1.0e-4, high: 1.0e-1, log: true}
    scaling:
      num_workers: 2
      use_gpu: true
      resources_per_worker: {CPU: 1, GPU: 1}
    resources:
      driver_cpus: 0.25
      driver_memory_gb: 3
      worker_memory_gb: 2
    """
)
GPU_CLUSTER = "1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}"
CPU_WORKERS = "scaling.resources_per_worker={CPU: 1}"


@pytest.fixture
def spec_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop.py").write_text(LOOP, encoding="utf-8")
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC_TEXT, encoding="utf-8")
    return path


def emit(spec_file: Path, cluster: str = GPU_CLUSTER, overrides: tuple[str, ...] = (), **options: Any) -> str:
    spec = load_spec(spec_file, overrides=overrides)
    groups = parse_node_groups(cluster)
    plan = plan_for(spec, nodes_at(groups, "max"))
    kwargs: dict[str, Any] = {"image": "registry.example/hpsearch:1", "storage_pvc": "results", **options}
    return rayjob_manifest(spec, spec_file, groups, plan, overrides=overrides, **kwargs)


def documents(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    assert [d["kind"] for d in docs] == ["ConfigMap", "RayJob"]
    return docs[0], docs[1]


def assert_valid(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    config_map, job = documents(text)
    assert schema_errors(config_map, CONFIG_MAP) == []
    assert schema_errors(job, RAYJOB) == []
    return config_map, job


def pods(job: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = job["spec"]["rayClusterSpec"]
    return [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster.get("workerGroupSpecs", []))]


# ----------------------------------------------------------------------------- the schema check itself


def test_the_vendored_schema_is_the_rayjob_crd_subset_with_the_fields_used() -> None:
    spec = CRD["properties"]["spec"]
    assert spec["required"] == ["entrypoint"]
    assert spec["properties"]["activeDeadlineSeconds"] == {"format": "int32", "type": "integer"}
    groups = spec["properties"]["rayClusterSpec"]["properties"]["workerGroupSpecs"]["items"]
    assert groups["required"] == ["groupName", "maxReplicas", "minReplicas", "rayStartParams", "template"]
    head = spec["properties"]["rayClusterSpec"]["properties"]["headGroupSpec"]["properties"]["template"]
    assert groups["properties"]["template"] == head  # one pod-template schema for the head and the workers


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda j: j["spec"].__setitem__("shutdownAfterJobFinish", True), "spec.shutdownAfterJobFinish: unknown field"),
        (lambda j: j["spec"].__setitem__("ttlSecondsAfterFinished", "600"), "expected an integer, got str '600'"),
        (lambda j: j["spec"].__setitem__("activeDeadlineSeconds", 2**31), "2147483648 is outside int32"),
        (lambda j: j["spec"].__setitem__("shutdownAfterJobFinishes", "true"), "expected a boolean, got str"),
        (lambda j: j["spec"].__setitem__("activeDeadlineSeconds", True), "expected an integer, got bool"),
        (lambda j: j["spec"].pop("entrypoint"), "spec: missing required field 'entrypoint'"),
        (
            lambda j: j["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"].__setitem__("num-cpus", 8),
            "rayStartParams.num-cpus: expected a string, got int 8",
        ),
        (
            lambda j: j["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].__setitem__("minReplica", 0),
            "workerGroupSpecs[0].minReplica: unknown field",
        ),
        (
            lambda j: pods(j)[0]["spec"]["containers"][0]["resources"]["limits"].__setitem__("memory", "32 GB"),
            "'32 GB' does not match",
        ),
        (
            lambda j: pods(j)[1]["spec"]["containers"][0]["resources"]["limits"].__setitem__("cpu", 8.5),
            "8.5 is none of ['integer', 'string']",
        ),
        (lambda j: pods(j)[0]["spec"].__setitem__("nodeSelectors", {}), "spec.nodeSelectors: unknown field"),
        (
            lambda j: j["spec"]["rayClusterSpec"]["autoscalerOptions"].__setitem__("upscalingMode", "Fast"),
            "'Fast' is not one of",
        ),
        (lambda j: j["metadata"].__setitem__("label", {}), "metadata.label: unknown field"),
    ],
)
def test_the_schema_check_fails_unknown_fields_and_wrong_types(spec_file: Path, change: Any, expected: str) -> None:
    _, job = assert_valid(emit(spec_file))
    change(job)
    errors = schema_errors(job, RAYJOB)
    assert len(errors) == 1 and expected in errors[0], errors


# ----------------------------------------------------------------------------- the manifest, valid for every shape


@pytest.mark.parametrize(
    "cluster",
    [
        GPU_CLUSTER,
        "1x{CPU: 16, GPU: 2, memory: 64}",  # a head that runs everything: no worker groups
        "1..3x{CPU: 8, GPU: 4, memory: 32}",  # the head group's other nodes are workers of its shape
        "1x{CPU: 4} + 2x{CPU: 8, GPU: 8, memory: 128} + 0..2x{CPU: 2.5, GPU: 1, TPU: 4}",
    ],
)
def test_the_manifest_reads_back_valid_against_the_rayjob_schema(spec_file: Path, cluster: str) -> None:
    config_map, job = assert_valid(emit(spec_file, cluster, namespace="ml"))
    assert job["apiVersion"] == "ray.io/v1" and job["metadata"]["namespace"] == "ml"
    assert config_map["metadata"]["namespace"] == "ml"


def test_worker_groups_start_at_their_minimum_and_take_min_and_max_replicas_from_the_shape(spec_file: Path) -> None:
    text = emit(spec_file, "1x{CPU: 4} + 2x{CPU: 8, GPU: 8} + 0..4x{CPU: 8, GPU: 4}")
    _, job = assert_valid(text)
    cluster = job["spec"]["rayClusterSpec"]
    fixed, scaled = cluster["workerGroupSpecs"]
    assert (fixed["groupName"], fixed["replicas"], fixed["minReplicas"], fixed["maxReplicas"]) == (
        "group1-cpu8-gpu8",
        2,
        2,
        2,
    )
    # starts at its minimum: `hpsearch run --cluster` plans for the nodes the autoscaler may add, and waits for them
    assert (scaled["groupName"], scaled["replicas"], scaled["minReplicas"], scaled["maxReplicas"]) == (
        "group2-cpu8-gpu4",
        0,
        0,
        4,
    )
    for line in (
        "        # Starts at its minimum (0): `hpsearch run --cluster` plans for every node up to maxReplicas",
        "        # start (a machine, the image); a trial waits up to failure.node_start_timeout_s (900 s) for one.",
        f"    # maxReplicas, and removes one left idle for {IDLE_TIMEOUT_S} s, never below minReplicas (Ray's default, 60 s,",
    ):
        assert line in text.splitlines(), line
    assert "maximum" not in text.replace("maxReplicas", "")  # the reasoning for starting at max is gone
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["autoscalerOptions"] == {"upscalingMode": "Default", "idleTimeoutSeconds": IDLE_TIMEOUT_S}
    for group, gpus in ((fixed, 8), (scaled, 4)):
        assert group["rayStartParams"] == {"num-cpus": "8", "num-gpus": str(gpus)}
        container = group["template"]["spec"]["containers"][0]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == gpus
        assert container["resources"]["requests"] == container["resources"]["limits"]


def test_a_fixed_cluster_has_no_autoscaler_and_the_head_groups_other_nodes_are_workers(spec_file: Path) -> None:
    _, job = assert_valid(emit(spec_file, "3x{CPU: 8, GPU: 4}"))
    cluster = job["spec"]["rayClusterSpec"]
    assert "enableInTreeAutoscaling" not in cluster and "autoscalerOptions" not in cluster
    (group,) = cluster["workerGroupSpecs"]
    assert (group["groupName"], group["replicas"], group["minReplicas"], group["maxReplicas"]) == (
        "group0-cpu8-gpu4",
        2,
        2,
        2,
    )
    _, job = assert_valid(emit(spec_file, "2..4x{CPU: 8, GPU: 4}"))
    (group,) = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (1, 1, 3)  # the head is one of the 2..4
    assert job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] is True


def test_custom_resources_and_fractional_cpus_reach_ray_and_kubernetes(spec_file: Path) -> None:
    _, job = assert_valid(emit(spec_file, "1x{CPU: 4} + 0..2x{CPU: 2.5, GPU: 1, TPU: 4}"))
    (group,) = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert group["groupName"] == "group1-cpu2p5-gpu1"
    assert group["rayStartParams"]["resources"] == '"{\\"TPU\\": 4}"'  # KubeRay's documented form
    assert shlex.split(group["rayStartParams"]["resources"]) == ['{"TPU": 4}']  # what `ray start` receives
    assert group["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "2500m"


def test_a_fractional_gpu_per_node_is_refused(spec_file: Path) -> None:
    with pytest.raises(PlanError, match=r"^GPU: 0.5 per node in --cluster: Kubernetes gives a pod whole GPUs"):
        emit(spec_file, "1x{CPU: 8} + 2x{CPU: 8, GPU: 0.5}", overrides=("scaling.use_gpu=false", CPU_WORKERS))


# ----------------------------------------------------------------------------- the head, from the spec's figures


def test_head_memory_is_the_drivers_times_the_specs_figure_plus_the_base(spec_file: Path) -> None:
    spec = load_spec(spec_file)
    groups = parse_node_groups(GPU_CLUSTER)
    plan = plan_for(spec, nodes_at(groups, "max"))
    head_usage = next(u for u in plan.usage if u.is_head)
    assert head_usage.drivers == plan.max_concurrent_trials == 16  # 4 nodes x 8 GPUs / 2 per trial
    _, job = assert_valid(emit(spec_file))
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]
    container = head["template"]["spec"]["containers"][0]
    expected = math.ceil(16 * 3 + HEAD_BASE_GB)  # resources.driver_memory_gb: 3 in the spec
    assert container["resources"]["limits"]["memory"] == f"{expected}Gi"
    assert head["rayStartParams"] == {"dashboard-host": "0.0.0.0", "num-cpus": "8"}
    assert container["resources"]["limits"]["cpu"] == "8" and "nvidia.com/gpu" not in container["resources"]["limits"]
    # the figure is the spec's: another value, another head
    _, job = documents(emit(spec_file, overrides=("resources.driver_memory_gb=0.5",)))
    memory = pods(job)[0]["spec"]["containers"][0]["resources"]["limits"]["memory"]
    assert memory == f"{math.ceil(16 * 0.5 + HEAD_BASE_GB)}Gi"
    assert head_memory_gb(spec, 16) == 16 * 3 + HEAD_BASE_GB
    assert head_memory_gb(spec, 2, 3) == 2 * 3 + 3 * 2 + HEAD_BASE_GB  # and worker_memory_gb for workers on it


def test_a_head_shape_with_more_memory_keeps_it_and_the_comment_says_why(spec_file: Path) -> None:
    text = emit(spec_file, "1x{CPU: 8, memory: 96} + 0..4x{CPU: 8, GPU: 8}")
    _, job = assert_valid(text)
    assert pods(job)[0]["spec"]["containers"][0]["resources"]["limits"]["memory"] == "96Gi"
    assert "# memory: 16 driver(s) x 3 GB (resources.driver_memory_gb)" in text
    assert f"# + {HEAD_BASE_GB:g} GB for Ray's head processes and the search process (an allowance) = 50 GB" in text
    assert "# (the --cluster shape says 96 GB: the larger, 96 GB, is used), rounded up." in text


# ----------------------------------------------------------------------------- entrypoint, deadline, lifecycle


def test_the_entrypoint_runs_the_configmaps_spec_against_the_jobs_cluster(spec_file: Path) -> None:
    lr = "search_space.lr={type: float, low: 0.001, high: 0.1}"  # spaces and braces: quoted for the shell
    overrides = ("num_samples=4", lr, "storage_path=/somewhere/else", "name=Kube_Search.2")
    _, job = assert_valid(emit(spec_file, overrides=overrides))
    entrypoint = job["spec"]["entrypoint"]
    assert shlex.split(entrypoint) == [
        "hpsearch",
        "run",
        f"{SPEC_MOUNT}/spec.yaml",
        "--address",
        "auto",
        "--cluster",
        GPU_CLUSTER,
        "--set",
        f"storage_path={STORAGE_MOUNT}",
        "--set",
        "num_samples=4",
        "--set",
        lr,
        "--set",
        "name=Kube_Search.2",
    ]
    assert "'search_space.lr={type: float, low: 0.001, high: 0.1}'" in entrypoint
    assert job["metadata"]["name"] == "kube-search-2"
    assert job["spec"]["submissionMode"] == "K8sJobMode"


def run_args(job: Mapping[str, Any]) -> Any:
    """The entrypoint as the shell splits it and `hpsearch run` parses it."""
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:2] == ["hpsearch", "run"]
    return _parser().parse_args(argv[1:])


def same_groups(cluster: str) -> list[tuple[dict[str, float], int, int, bool]]:
    return [(g.resources, g.min_count, g.max_count, g.is_head) for g in parse_node_groups(cluster)]


@pytest.mark.parametrize(
    ("cluster", "normalised"),
    [
        (GPU_CLUSTER, GPU_CLUSTER),
        (  # memory in GB as given, amounts exact, CPU and GPU first
            "1x{memory: 32.5, CPU: 8} + 0..4x{GPU: 8, CPU: 2.5, memory: 0.3}",
            "1x{CPU: 8, memory: 32.5} + 0..4x{CPU: 2.5, GPU: 8, memory: 0.3}",
        ),
        ("1..3x{CPU: 8, GPU: 4}", "1..3x{CPU: 8, GPU: 4}"),  # the head group's own range
        (  # custom resources, one whose name needs quoting (a space; "on" reads as true bare), and a fixed group
            '1x{CPU: 4} + 2x{CPU: 8, GPU: 8} + 0..2x{CPU: 8, TPU: 4, "it\'s big": 1, "on": 1, accel/x-1.0: 0.25}',
            '1x{CPU: 4} + 2x{CPU: 8, GPU: 8} + 0..2x{CPU: 8, TPU: 4, accel/x-1.0: 0.25, "it\'s big": 1, "on": 1}',
        ),
    ],
)
def test_an_autoscaling_clusters_groups_reach_run_as_one_cluster_argument(
    spec_file: Path, cluster: str, normalised: str
) -> None:
    """The entrypoint's --cluster: one shell word, which `hpsearch run` accepts and reads to the same groups."""
    _, job = assert_valid(emit(spec_file, cluster, overrides=("scaling.use_gpu=false", CPU_WORKERS)))
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv.count("--cluster") == 1
    assert argv[argv.index("--cluster") + 1] == normalised
    args = run_args(job)
    assert (args.spec, args.address, args.cluster) == (f"{SPEC_MOUNT}/spec.yaml", "auto", normalised)
    autoscaling = autoscaling_for(args.cluster, args.address)  # what `run` does with it: accepted, not refused
    assert autoscaling is not None
    assert [(g.resources, g.min_count, g.max_count, g.is_head) for g in autoscaling.groups] == same_groups(cluster)
    assert cluster_argument(parse_node_groups(normalised)) == normalised  # normalising is idempotent


def test_a_cluster_file_is_passed_to_run_inline(spec_file: Path, tmp_path: Path) -> None:
    """`plan --cluster FILE`: the file is not in the pod, so the entrypoint carries its groups inline."""
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes:\n  - {CPU: 8, memory: 32}\n  - {CPU: 8, GPU: 8, min_count: 0, max_count: 4}\n")
    _, job = assert_valid(emit(spec_file, str(path)))
    args = run_args(job)
    assert args.cluster == "1x{CPU: 8, memory: 32} + 0..4x{CPU: 8, GPU: 8}"
    assert same_groups(args.cluster) == same_groups(str(path))


@pytest.mark.parametrize(
    "cluster", ["3x{CPU: 8, GPU: 4}", "1x{CPU: 16, GPU: 2, memory: 64}", "1x{CPU: 4} + 2x{GPU: 8}"]
)
def test_a_fixed_cluster_passes_no_cluster_to_run(spec_file: Path, cluster: str) -> None:
    """`run` refuses --cluster without a min..max group (nothing for an autoscaler to add): none is passed."""
    text = emit(spec_file, cluster, overrides=("scaling.use_gpu=false", CPU_WORKERS))
    _, job = assert_valid(text)
    assert run_args(job).cluster is None
    assert "--cluster" not in shlex.split(job["spec"]["entrypoint"])
    assert "enableInTreeAutoscaling" not in job["spec"]["rayClusterSpec"]
    for group in job["spec"]["rayClusterSpec"].get("workerGroupSpecs", []):
        assert group["replicas"] == group["minReplicas"] == group["maxReplicas"]


def test_a_resource_name_the_inline_form_cannot_carry_is_refused() -> None:
    groups = parse_node_groups("1x{CPU: 4} + 0..2x{CPU: 8}")
    odd = [groups[0], replace(groups[1], resources={"CPU": 8.0, "a}+{b": 1.0})]
    with pytest.raises(PlanError, match=r"^--cluster: the node groups cannot be written back as one inline --cluster"):
        cluster_argument(odd)


def test_the_deadline_is_the_wall_time_budget_plus_the_margin(spec_file: Path) -> None:
    _, job = assert_valid(emit(spec_file, overrides=("budget.max_wall_time=2h",)))
    assert job["spec"]["activeDeadlineSeconds"] == 7200 + DEADLINE_MARGIN_S
    _, job = assert_valid(emit(spec_file, overrides=("budget.max_wall_time=90.5",)))
    assert job["spec"]["activeDeadlineSeconds"] == 91 + DEADLINE_MARGIN_S
    _, job = assert_valid(emit(spec_file))
    assert "activeDeadlineSeconds" not in job["spec"]
    assert deadline_seconds(load_spec(spec_file, overrides=["budget.max_wall_time=100000d"])) == 2**31 - 1


def test_the_margin_leaves_the_cluster_a_node_start_and_grows_with_the_specs_node_start_timeout(
    spec_file: Path,
) -> None:
    spec = load_spec(spec_file)
    assert spec.failure.node_start_timeout_s == 900  # the default the margin is twice of
    assert deadline_margin_s(spec) == DEADLINE_MARGIN_S == 2 * 900
    slow = ("budget.max_wall_time=1h", "failure.node_start_timeout_s=1500.5")
    assert deadline_margin_s(load_spec(spec_file, overrides=slow)) == 3002
    text = emit(spec_file, overrides=slow)
    _, job = assert_valid(text)
    assert job["spec"]["activeDeadlineSeconds"] == 3600 + 3002
    assert (
        "  # budget.max_wall_time (3600 s) + 3002 s (twice failure.node_start_timeout_s, at least 1800 s) for the"
        in (text.splitlines())
    )
    assert "failure.node_start_timeout_s (1500.5 s)" in text  # the entrypoint's and the groups' comments say it


def test_the_cluster_is_shut_down_after_a_ttl_and_the_comments_say_how_to_keep_the_results(spec_file: Path) -> None:
    text = emit(spec_file, overrides=("budget.max_wall_time=1h",))
    _, job = assert_valid(text)
    assert job["spec"]["shutdownAfterJobFinishes"] is True
    assert job["spec"]["ttlSecondsAfterFinished"] == TTL_SECONDS
    folder = f"{STORAGE_MOUNT}/kube-search"
    for line in (
        f"# in every pod: the experiment folder is {folder} (hpsearch_summary.json, the trials, the checkpoints).",
        "# The claim is not in this file: deleting the RayJob never deletes it.",
        f"# shutdownAfterJobFinishes: KubeRay deletes the Ray cluster (head and worker pods) {TTL_SECONDS} s after",
        "#   CLUSTER=$(kubectl get rayjob kube-search -o jsonpath='{.status.rayClusterName}')",
        f"#   kubectl exec $HEAD -- ls {folder}      # hpsearch_summary.json, hpsearch_trials.jsonl, ...",
        f"#   kubectl cp ${{HEAD#pod/}}:{folder} ./kube-search && hpsearch report ./kube-search",
        "# then: kubectl delete -f rayjob.yaml     (the claim, and the results on it, stay)",
        "  # budget.max_wall_time (3600 s) + 1800 s (twice failure.node_start_timeout_s, at least 1800 s) for the",
        "  # cluster to start (the head and the minReplicas workers: machines added, images pulled; KubeRay submits",
    ):
        assert line in text.splitlines(), line


def test_gpu_pods_carry_commented_placement_placeholders_that_are_valid_when_uncommented(spec_file: Path) -> None:
    text = emit(spec_file)
    placeholders = [line for line in text.splitlines() if re.match(r"\s*# (nodeSelector|tolerations): ", line)]
    assert placeholders
    uncommented = "\n".join(line.replace("# ", "", 1).split("   #")[0] for line in placeholders)
    for line in uncommented.splitlines():
        key, value = yaml.safe_load(textwrap.dedent(line)).popitem()
        pod_spec = CRD["properties"]["spec"]["properties"]["rayClusterSpec"]["properties"]["headGroupSpec"]
        schema = pod_spec["properties"]["template"]["properties"]["spec"]["properties"][key]
        assert schema_errors(value, schema) == [], line


# ----------------------------------------------------------------------------- storage


def test_every_pod_mounts_the_results_claim_and_the_spec(spec_file: Path) -> None:
    _, job = assert_valid(emit(spec_file))
    for pod in pods(job):
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["hpsearch-results"]["persistentVolumeClaim"] == {"claimName": "results"}
        assert volumes["hpsearch-spec"]["configMap"] == {"name": "kube-search-spec"}
        mounts = {m["name"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
        assert mounts["hpsearch-results"]["mountPath"] == STORAGE_MOUNT
        assert mounts["hpsearch-spec"] == {"name": "hpsearch-spec", "mountPath": SPEC_MOUNT, "readOnly": True}
        assert mounts["shared-mem"]["mountPath"] == "/dev/shm"


@pytest.mark.parametrize(
    ("cluster", "why"),
    [
        (
            GPU_CLUSTER,
            "the cluster has worker nodes, so every pod must reach storage_path, and the Ray cluster is deleted "
            "after the job (shutdownAfterJobFinishes)",
        ),
        (
            "1x{CPU: 8, GPU: 2}",
            "the Ray cluster, its head pod's disk included, is deleted after the job (shutdownAfterJobFinishes)",
        ),
    ],
)
def test_without_a_claim_the_manifest_is_refused_saying_what_to_pass(spec_file: Path, cluster: str, why: str) -> None:
    with pytest.raises(PlanError) as err:
        emit(spec_file, cluster, storage_pvc=None)
    assert str(err.value) == (
        f"--emit rayjob needs --storage-pvc NAME: {why}; create a ReadWriteMany PersistentVolumeClaim "
        "(EFS on EKS, Filestore on GKE; README: Running on Kubernetes) and name it: it is mounted at "
        f"{STORAGE_MOUNT} in every pod and becomes the search's storage_path"
    )


def test_an_object_store_storage_path_is_refused_naming_the_uri(spec_file: Path) -> None:
    with pytest.raises(PlanError, match=r"^storage_path s3://bucket/hp is an object-store URI, which hpsearch reads"):
        emit(spec_file, overrides=("storage_path=s3://bucket/hp",))
    with pytest.raises(PlanError, match=r"^storage_path gs://b/x is an object-store URI"):
        emit(spec_file, overrides=("storage_path=gs://b/x",), storage_pvc=None)


# ----------------------------------------------------------------------------- the ConfigMap


def test_the_configmap_holds_the_spec_as_written_and_the_loop_file(spec_file: Path) -> None:
    config_map, job = assert_valid(emit(spec_file))
    assert config_map["metadata"]["name"] == "kube-search-spec"
    assert config_map["data"] == {"spec.yaml": SPEC_TEXT, "loop.py": LOOP}


def test_files_in_subfolders_are_mapped_to_their_paths(spec_file: Path) -> None:
    (spec_file.parent / "loops").mkdir()
    (spec_file.parent / "loops" / "train.py").write_text(LOOP, encoding="utf-8")
    config_map, job = assert_valid(emit(spec_file, overrides=("trainable=loops/train.py:train",)))
    assert config_map["data"]["loops__train.py"] == LOOP
    volume = next(v for v in pods(job)[0]["spec"]["volumes"] if v["name"] == "hpsearch-spec")
    assert volume["configMap"]["items"] == [
        {"key": "spec.yaml", "path": "spec.yaml"},
        {"key": "loops__train.py", "path": "loops/train.py"},
    ]


def test_a_loop_file_outside_the_specs_folder_is_refused(spec_file: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "loop.py").write_text(LOOP, encoding="utf-8")
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "spec.yaml"
    spec.write_text(SPEC_TEXT.replace("loop.py:train", "../elsewhere/loop.py:train"), encoding="utf-8")
    with pytest.raises(PlanError, match=r"^trainable names .*elsewhere/loop.py, outside the spec's folder"):
        emit(spec)


# ----------------------------------------------------------------------------- names and YAML


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("digits-quick", "digits-quick"),
        ("Digits_Quick v2", "digits-quick-v2"),
        ("2024-sweep", "hp-2024-sweep"),
        ("x" * 60, "x" * 47),
        ("a" * 46 + "-b", "a" * 46),
    ],
)
def test_the_job_name_is_a_dns_1035_label_kuberay_accepts(name: str, expected: str) -> None:
    assert job_name(name) == expected
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", expected) and len(expected) <= 47


@pytest.mark.parametrize(
    "text",
    [
        "plain\nlines\n",
        "no final newline",
        "  indented first line\n\tand a tab\n",
        "trailing blank lines\n\n\n",
        "trailing spaces   \nare kept\n",
        "# a comment: with - dashes\nkey: 'quoted' # and \"more\"\n",
        "ünïcödé ✓\n",
        "carriage\r\nreturns\r\n",
        "",
        "\n",
    ],
)
def test_multiline_and_odd_strings_read_back_exactly(text: str) -> None:
    doc = _Doc({"data": {"file": text, "other": "after"}})
    assert yaml.safe_load(_dump_documents([doc])) == {"data": {"file": text, "other": "after"}}


@pytest.mark.parametrize(
    "value", ["8", "0.0.0.0", "yes", "no", "on", "off", "null", "~", "true", "1e3", "a: b", "a #b", ":", "-", "", "x:"]
)
def test_scalars_read_back_as_the_same_string(value: str) -> None:
    assert yaml.safe_load(f"k: {_scalar(value)}") == {"k": value}


# ----------------------------------------------------------------------------- the command


def test_the_command_writes_only_the_manifest_to_stdout(spec_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", str(spec_file), "--cluster", GPU_CLUSTER, "--emit", "rayjob", "--image", "img:1"]
    assert main([*argv, "--storage-pvc", "results", "--set", "budget.max_wall_time=1h"]) == 0
    out, err = capsys.readouterr()
    config_map, job = assert_valid(out)
    assert job["spec"]["activeDeadlineSeconds"] == 3600 + DEADLINE_MARGIN_S
    assert pods(job)[0]["spec"]["containers"][0]["image"] == "img:1"
    assert out.startswith('# A KubeRay RayJob that runs the hpsearch search "kube-search"')
    assert (
        f"# Written by: hpsearch plan {spec_file} --cluster '{GPU_CLUSTER}' --emit rayjob --image img:1 "
        "--storage-pvc results --set budget.max_wall_time=1h" in out.splitlines()
    )
    assert err == (
        "hpsearch: RayJob kube-search: 16 trial(s) at once with every node the autoscaler can add (5 nodes; the "
        "cluster starts at its minimum, 1, and grows as trials wait); apply it with kubectl apply -f "
        "(README: Running on Kubernetes)\n"
    )
    argv[3] = "3x{CPU: 8, GPU: 8}"
    assert main([*argv, "--storage-pvc", "results"]) == 0
    assert capsys.readouterr().err == (
        "hpsearch: RayJob kube-search: 10 trial(s) at once on the cluster (3 nodes); "
        "apply it with kubectl apply -f (README: Running on Kubernetes)\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--emit", "rayjob", "--image", "i", "--storage-pvc", "r"],
            "--emit rayjob needs --cluster SHAPE: the node groups the Kubernetes cluster gives Ray, "
            "e.g. --cluster '1x{CPU: 8, memory: 32} + 0..4x{CPU: 8, GPU: 8, memory: 64}'",
        ),
        (
            ["--address", "auto", "--emit", "rayjob", "--image", "i"],
            "--emit rayjob needs --cluster SHAPE: the node groups the Kubernetes cluster gives Ray, "
            "e.g. --cluster '1x{CPU: 8, memory: 32} + 0..4x{CPU: 8, GPU: 8, memory: 64}'",
        ),
        (
            ["--cluster", GPU_CLUSTER, "--image", "i"],
            "--image, --storage-pvc and --namespace are options of --emit rayjob",
        ),
        (
            ["--cluster", GPU_CLUSTER, "--storage-pvc", "r"],
            "--image, --storage-pvc and --namespace are options of --emit rayjob",
        ),
        (
            ["--cluster", GPU_CLUSTER, "--emit", "rayjob", "--image", "i", "--format", "json"],
            "--emit rayjob writes YAML: leave out --format json",
        ),
        (
            ["--cluster", GPU_CLUSTER, "--emit", "rayjob", "--storage-pvc", "r"],
            "--emit rayjob needs --image IMAGE: a container image with hpsearch, your train loop's packages "
            "and the same Ray as here installed (README: Running on Kubernetes)",
        ),
        (
            ["--cluster", GPU_CLUSTER, "--emit", "rayjob", "--image", "i"],
            "--emit rayjob needs --storage-pvc NAME: the cluster has worker nodes, so every pod must reach "
            "storage_path, and the Ray cluster is deleted after the job (shutdownAfterJobFinishes); create a "
            "ReadWriteMany PersistentVolumeClaim (EFS on EKS, Filestore on GKE; README: Running on Kubernetes) "
            "and name it: it is mounted at /mnt/hpsearch-results in every pod and becomes the search's storage_path",
        ),
    ],
)
def test_a_bad_combination_is_one_error_line_and_exit_2(
    spec_file: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["plan", str(spec_file), *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"Error: {message}\n"


def test_the_options_are_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for option in ("--emit {rayjob}", "--image IMAGE", "--storage-pvc NAME", "--namespace NAMESPACE"):
        assert option in out


def test_the_spec_a_manifest_ships_is_valid_where_the_pod_reads_it(spec_file: Path, tmp_path: Path) -> None:
    """The ConfigMap's files, laid out as the pod mounts them, make a spec that loads with the entrypoint's --set."""
    config_map, job = assert_valid(emit(spec_file, overrides=("num_samples=3",)))
    mount = tmp_path / "pod" / "etc-hpsearch"
    mount.mkdir(parents=True)
    for key, text in config_map["data"].items():
        (mount / key).write_text(text, encoding="utf-8")
    args = shlex.split(job["spec"]["entrypoint"])
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    storage = tmp_path / "pod" / "results"
    sets = [f"storage_path={storage}" if s.startswith("storage_path=") else s for s in sets]
    spec: Spec = load_spec(mount / "spec.yaml", overrides=sets)
    assert (
        spec.num_samples == 3 and spec.storage_path == storage and spec.trainable.endswith("etc-hpsearch/loop.py:train")
    )
