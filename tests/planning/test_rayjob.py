"""``hpsearch plan --emit rayjob``: the KubeRay RayJob it writes, read back and validated as the API server would.

Pure: no Ray, no Kubernetes. Every manifest a test here writes (through :func:`rayjob_manifest` or the
command) is parsed back from its YAML text and validated by :func:`check_manifest`, an autouse fixture
making sure none is left out:

- the RayJob against the *full* RayJob CRDs of KubeRay 1.1.0 and 1.7.0 (``tests/data/kuberay/``, where they
  came from is in its README): the fields the schema does not name are found as the API server prunes
  them, then the rest is validated with ``jsonschema`` (types, ``int32`` ranges, quantities, enums,
  required fields), and ``x-kubernetes-list-type`` keys are checked for duplicates. Nothing may be pruned
  by 1.7.0; by 1.1.0 only the fields newer KubeRay has (``KUBERAY_SINCE``), so a setting the manifest
  believes it makes is never silently dropped;
- the ConfigMap, the RayJob's metadata and every pod template against Kubernetes' own (strict) schemas of
  the oldest and newest Kubernetes that ``kubernetes-validate`` bundles.

Each schema is loaded once per session.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import shlex
import subprocess
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

import hpsearch.cli
import hpsearch.planning.rayjob
from hpsearch.cli import _parser, main
from hpsearch.errors import PlanError
from hpsearch.planning.cluster_shape import parse_node_groups
from hpsearch.planning.planner import GB
from hpsearch.planning.rayjob import (
    DEADLINE_MARGIN_S,
    HEAD_BASE_GB,
    IDLE_TIMEOUT_S,
    KUBERAY_SINCE,
    SPEC_MOUNT,
    STORAGE_MOUNT,
    SUBMITTER_BACKOFF_LIMIT,
    TTL_SECONDS,
    WORKER_BASE_GB,
    cluster_argument,
    deadline_margin_s,
    deadline_seconds,
    entrypoint_text,
    head_memory_gb,
    job_name,
    ray_groups,
    rayjob_plan,
)
from hpsearch.planning.rayjob import rayjob_manifest as _unvalidated_manifest
from hpsearch.planning.rayjob.yaml_text import _Doc, _dump_documents, _scalar
from hpsearch.runtime.search.autoscaling import autoscaling_for
from hpsearch.spec import Spec, load_spec, total_trials

KUBERAY = Path(__file__).resolve().parents[1] / "data" / "kuberay"
#: The oldest and the newest KubeRay whose RayJob CRD every manifest is validated against.
CRD_VERSIONS = ("1.1.0", "1.7.0")
#: The oldest and the newest Kubernetes whose schemas kubernetes-validate bundles.
K8S_VERSIONS = ("1.25.0", "1.37.0")
_FORMATS = jsonschema.FormatChecker()


@_FORMATS.checks("int32")
def _int32(value: object) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@_FORMATS.checks("int64")
def _int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@functools.cache
def crd_schema(version: str) -> dict[str, Any]:
    """The ``v1`` ``openAPIV3Schema`` of KubeRay ``version``'s RayJob CRD (loaded once per session)."""
    text = (KUBERAY / f"ray.io_rayjobs-v{version}.yaml").read_text(encoding="utf-8")
    crd = yaml.load(text, Loader=yaml.CSafeLoader)  # libyaml (in PyYAML's wheels): 10 times faster here
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema: dict[str, Any] = v1["schema"]["openAPIV3Schema"]
    return schema


@functools.cache
def _crd_validator(version: str) -> jsonschema.Draft4Validator:
    # A CRD's schema is OpenAPI 3.0: JSON Schema draft 4 plus x-kubernetes-* keys (which jsonschema ignores)
    return jsonschema.Draft4Validator(crd_schema(version), format_checker=_FORMATS)


@functools.cache
def _kubernetes_validator(version: str, kind: str) -> jsonschema.Draft202012Validator:
    """Kubernetes ``version``'s strict schema of ``kind`` (no unknown field), as kubernetes-validate bundles it."""
    folder = resources.files("kubernetes_validate") / "kubernetes-json-schema" / f"v{version}-local-strict"
    schema = json.loads((folder / f"{kind}.json").read_text(encoding="utf-8"))
    definitions = json.loads((folder / "_definitions.json").read_text(encoding="utf-8"))
    registry: Registry[Any] = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


@dataclass
class Validation:
    """What the API server of one KubeRay version does with a RayJob."""

    pruned: list[str] = field(default_factory=list)  # fields it would drop without a word
    errors: list[str] = field(default_factory=list)  # why it would refuse the RayJob
    unchecked: list[str] = field(default_factory=list)  # CEL rules (x-kubernetes-validations) on the way: not run


def _prune(value: Any, schema: Mapping[str, Any], path: str, found: Validation) -> Any:
    """``value`` as the API server keeps it: the fields ``schema`` does not name removed (and listed)."""
    if "x-kubernetes-validations" in schema:
        found.unchecked.append(path)
    if isinstance(value, dict) and not schema.get("x-kubernetes-preserve-unknown-fields"):
        properties, extra = schema.get("properties"), schema.get("additionalProperties")
        kept = {}
        for key, item in value.items():
            here = f"{path}.{key}" if path else key
            if properties is not None and key in properties:
                kept[key] = _prune(item, properties[key], here, found)
            elif isinstance(extra, dict):
                kept[key] = _prune(item, extra, here, found)
            elif extra is True:
                kept[key] = item
            else:
                found.pruned.append(here)
        return kept
    if isinstance(value, list):
        kind = schema.get("x-kubernetes-list-type")
        if kind in ("map", "set"):
            keys = schema.get("x-kubernetes-list-map-keys")
            seen = [json.dumps([i.get(k) for k in keys] if keys else i, sort_keys=True) for i in value]
            found.errors += [
                f"{path}: duplicate item {k} in a list-type {kind}" for k in set(seen) if seen.count(k) > 1
            ]
        return [_prune(item, schema.get("items", {}), f"{path}[{i}]", found) for i, item in enumerate(value)]
    return value


def validate_rayjob(job: Mapping[str, Any], version: str) -> Validation:
    """The RayJob as KubeRay ``version``'s API server takes it: pruned, then validated against the CRD.

    ``metadata`` is the API server's own ObjectMeta (the CRD leaves it a bare object): it is checked by
    :func:`kubernetes_errors` instead.
    """
    found = Validation()
    kept = _prune({k: v for k, v in job.items() if k != "metadata"}, crd_schema(version), "", found)
    for error in _crd_validator(version).iter_errors({**kept, "metadata": {}}):
        found.errors.append(f"{'.'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}")
    return found


def kubernetes_errors(config_map: Mapping[str, Any], job: Mapping[str, Any]) -> list[str]:
    """Every way the ConfigMap, the RayJob's metadata or a pod template breaks Kubernetes' strict schemas."""
    checks = [("configmap-v1", "ConfigMap", config_map), ("objectmeta-meta-v1", "RayJob metadata", job["metadata"])]
    checks += [("podtemplatespec-v1", f"pod template {i}", pod) for i, pod in enumerate(pods(job))]
    return [
        f"Kubernetes {version}, {what}: {'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for version in K8S_VERSIONS
        for kind, what, value in checks
        for e in _kubernetes_validator(version, kind).iter_errors(value)
    ]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _has(job: Mapping[str, Any], path: str) -> bool:
    value: Any = job
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return False
        value = value[key]
    return True


def newer_fields(job: Mapping[str, Any], version: str) -> list[str]:
    """The fields of ``job`` that KubeRay ``version`` does not have yet (:data:`KUBERAY_SINCE`)."""
    return sorted(p for p, since in KUBERAY_SINCE.items() if _has(job, p) and _version(since) > _version(version))


def check_manifest(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The manifest's two documents, after validating them as the API servers would (see the module's doc)."""
    config_map, job = documents(text)
    for version in CRD_VERSIONS:
        found = validate_rayjob(job, version)
        assert found.errors == [], (version, found.errors)
        assert found.unchecked == [], (version, found.unchecked)  # a CEL rule on a field set here: not checkable
        assert sorted(found.pruned) == newer_fields(job, version), (version, found.pruned)
    assert kubernetes_errors(config_map, job) == []
    return config_map, job


@pytest.fixture(autouse=True)
def _every_manifest_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validate every manifest a test writes, through the function or the command, when it is written."""

    def validated(*args: Any, **kwargs: Any) -> str:
        text = _unvalidated_manifest(*args, **kwargs)
        check_manifest(text)
        return text

    monkeypatch.setattr(hpsearch.planning.rayjob, "rayjob_manifest", validated)
    monkeypatch.setattr(hpsearch.cli, "rayjob_manifest", validated)


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
    """The manifest for the spec file on ``cluster`` (validated by :func:`_every_manifest_is_validated`)."""
    spec = load_spec(spec_file, overrides=overrides)
    kwargs: dict[str, Any] = {"image": "registry.example/hpsearch:1", "storage_pvc": "results", **options}
    return hpsearch.planning.rayjob.rayjob_manifest(
        spec, spec_file, parse_node_groups(cluster), overrides=overrides, **kwargs
    )


def documents(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The manifest's ConfigMap and RayJob, read back (libyaml's safe loader: YAML 1.1 as PyYAML's, faster)."""
    docs = [d for d in yaml.load_all(text, Loader=yaml.CSafeLoader) if d is not None]
    assert [d["kind"] for d in docs] == ["ConfigMap", "RayJob"]
    return docs[0], docs[1]


def pods(job: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = job["spec"]["rayClusterSpec"]
    return [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster.get("workerGroupSpecs", []))]


# ----------------------------------------------------------------------------- the validation itself


def test_the_vendored_crds_are_kuberays_files_in_full() -> None:
    """Byte for byte the files the README there names (its sha256s), with nothing kept unknown, and no CEL rule
    on any field the manifests set (check_manifest would fail: they are not evaluated here)."""
    listed = dict(
        re.findall(r"\| (ray\.io_rayjobs-v[\d.]+\.yaml) \| ([0-9a-f]{64}) \|", (KUBERAY / "README.md").read_text())
    )
    assert sorted(listed) == [f"ray.io_rayjobs-v{v}.yaml" for v in CRD_VERSIONS]
    for name, digest in listed.items():
        text = (KUBERAY / name).read_bytes()
        assert hashlib.sha256(text).hexdigest() == digest, name
        assert b"x-kubernetes-preserve-unknown-fields" not in text  # every unknown field is pruned
    for version in CRD_VERSIONS:
        spec = crd_schema(version)["properties"]["spec"]
        groups = spec["properties"]["rayClusterSpec"]["properties"]["workerGroupSpecs"]["items"]
        assert {"groupName", "maxReplicas", "template"} <= set(groups["required"])


def test_each_newer_field_is_missing_from_the_oldest_crd_and_in_the_newest() -> None:
    """KUBERAY_SINCE (what the flags' help and the comments say) agrees with the two CRDs."""
    for path, since in KUBERAY_SINCE.items():
        assert _version("1.1.0") < _version(since) <= _version("1.7.0")
        *parents, name = path.split(".")
        for version, present in (("1.1.0", False), ("1.7.0", True)):
            schema = crd_schema(version)
            for key in parents:
                schema = schema["properties"][key]
            assert (name in schema["properties"]) is present, (version, path)


@pytest.mark.parametrize(
    ("change", "kind", "expected"),
    [
        (lambda j: j["spec"].__setitem__("shutdownAfterJobFinish", True), "pruned", "spec.shutdownAfterJobFinish"),
        (lambda j: j["spec"].__setitem__("ttlSecondsAfterFinished", "600"), "errors", "'600' is not of type 'integer'"),
        (lambda j: j["spec"].__setitem__("activeDeadlineSeconds", 2**31), "errors", "2147483648 is not a 'int32'"),
        (lambda j: j["spec"].__setitem__("shutdownAfterJobFinishes", "true"), "errors", "is not of type 'boolean'"),
        (lambda j: j["spec"].__setitem__("activeDeadlineSeconds", True), "errors", "True is not of type 'integer'"),
        (
            lambda j: j["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].pop("groupName"),
            "errors",
            "'groupName' is a required property",
        ),
        (
            lambda j: j["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"].__setitem__("num-cpus", 8),
            "errors",
            "rayStartParams.num-cpus: 8 is not of type 'string'",
        ),
        (
            lambda j: j["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].__setitem__("rayStartParams", "{}"),
            "errors",
            "rayStartParams: '{}' is not of type 'object'",  # what the serializer wrote for an empty map
        ),
        (
            lambda j: j["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].__setitem__("minReplica", 0),
            "pruned",
            "spec.rayClusterSpec.workerGroupSpecs[0].minReplica",
        ),
        (
            lambda j: pods(j)[0]["spec"]["containers"][0]["resources"]["limits"].__setitem__("memory", "32 GB"),
            "errors",
            "'32 GB' does not match",
        ),
        (
            lambda j: pods(j)[1]["spec"]["containers"][0]["resources"]["limits"].__setitem__("cpu", 8.5),
            "errors",
            "8.5 is not valid under any of the given schemas",
        ),
        (
            lambda j: pods(j)[0]["spec"].__setitem__("nodeSelectors", {}),
            "pruned",
            "spec.rayClusterSpec.headGroupSpec.template.spec.nodeSelectors",
        ),
        (
            lambda j: pods(j)[0]["spec"]["containers"][0].__setitem__("ports", [{"containerPort": 8265}] * 2),
            "errors",
            "ports: duplicate item [8265, null] in a list-type map",  # one port twice
        ),
        (
            lambda j: j["spec"]["rayClusterSpec"]["autoscalerOptions"].__setitem__("upscalingMode", "Fast"),
            "errors",
            "'Fast' is not one of",
        ),
    ],
)
def test_the_validation_finds_pruned_fields_and_wrong_values(
    spec_file: Path, change: Any, kind: str, expected: str
) -> None:
    """Each change to a valid manifest is found against both CRDs: an unknown field as pruned, a wrong value as
    an error."""
    _, job = documents(emit(spec_file))
    change(job)
    for version in CRD_VERSIONS:
        found = getattr(validate_rayjob(job, version), kind)
        found = [f for f in found if f not in newer_fields(job, version)]
        assert len(found) == 1 and expected in found[0], (version, found)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda c, j: c["metadata"].__setitem__("label", {}), "ConfigMap: metadata: Additional properties"),
        (lambda c, j: c.__setitem__("data", {"a": 1}), "ConfigMap: data.a: 1 is not of type 'string'"),
        (lambda c, j: j["metadata"].__setitem__("namespaces", "ml"), "RayJob metadata: <root>: Additional properties"),
        (
            lambda c, j: pods(j)[1]["spec"].__setitem__("securityContext", {"fsGroup": "100"}),
            "pod template 1: spec.securityContext.fsGroup: '100' is not of type 'integer'",
        ),
        (
            lambda c, j: pods(j)[0]["spec"]["containers"][0].__setitem__("resource", {}),
            "pod template 0: spec.containers.0: Additional properties are not allowed ('resource' was unexpected)",
        ),
    ],
)
def test_kubernetes_own_schemas_find_what_the_crd_leaves_open(spec_file: Path, change: Any, expected: str) -> None:
    """The ConfigMap, the RayJob's metadata and the pod templates against Kubernetes' strict schemas, both versions."""
    config_map, job = documents(emit(spec_file))
    change(config_map, job)
    errors = kubernetes_errors(config_map, job)
    assert [e.split(", ", 1)[0] for e in errors] == [f"Kubernetes {v}" for v in K8S_VERSIONS], errors
    assert all(expected in e for e in errors), errors


# ----------------------------------------------------------------------------- the manifest, valid for every shape


@pytest.mark.parametrize(
    "cluster",
    [
        GPU_CLUSTER,
        "1x{CPU: 16, GPU: 2, memory: 64}",  # a head that runs everything: no worker groups
        "1..3x{CPU: 8, GPU: 4, memory: 32}",  # the head group's other nodes are workers of its shape
        "1x{CPU: 4} + 2x{CPU: 8, GPU: 8, memory: 128} + 0..2x{CPU: 2, GPU: 1, TPU: 4}",
    ],
)
def test_the_manifest_reads_back_valid_against_the_rayjob_schema(spec_file: Path, cluster: str) -> None:
    config_map, job = documents(emit(spec_file, cluster, namespace="ml"))
    assert job["apiVersion"] == "ray.io/v1" and job["metadata"]["namespace"] == "ml"
    assert config_map["metadata"]["namespace"] == "ml"
    for version in CRD_VERSIONS:  # the one field KubeRay 1.1.0 lacks: a manifest needs KubeRay 1.2.0 or later
        assert validate_rayjob(job, version).pruned == (["spec.submitterConfig"] if version == "1.1.0" else [])


def test_empty_maps_and_lists_are_written_as_yaml_maps_and_lists(spec_file: Path) -> None:
    """An empty rayStartParams (a group of no CPU, GPU, memory or custom resource) is a map, not the text "{}"."""
    text = emit(spec_file, "1x{CPU: 8} + 2x{TPU: 0}", overrides=("scaling.use_gpu=false", CPU_WORKERS))
    _, job = documents(text)
    assert job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["rayStartParams"] == {}
    assert "        rayStartParams: {}" in text.splitlines()
    doc = _Doc({"a": {}, "b": [], "c": [{}, []], "d": {"e": {}}})
    assert yaml.safe_load(_dump_documents([doc])) == {"a": {}, "b": [], "c": [{}, []], "d": {"e": {}}}


def test_worker_groups_start_at_their_minimum_and_take_min_and_max_replicas_from_the_shape(spec_file: Path) -> None:
    text = emit(spec_file, "1x{CPU: 4} + 2x{CPU: 8, GPU: 8} + 0..4x{CPU: 8, GPU: 4}")
    _, job = documents(text)
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
    sidecar = {"cpu": "500m", "memory": "512Mi"}  # KubeRay's defaults, written so that they are counted
    assert cluster["autoscalerOptions"] == {
        "upscalingMode": "Default",
        "idleTimeoutSeconds": IDLE_TIMEOUT_S,
        "resources": {"requests": sidecar, "limits": sidecar},
    }
    for group, gpus in ((fixed, 8), (scaled, 4)):
        assert group["rayStartParams"] == {"num-cpus": "8", "num-gpus": str(gpus)}
        container = group["template"]["spec"]["containers"][0]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == gpus
        assert container["resources"]["requests"] == container["resources"]["limits"]


def test_a_fixed_cluster_has_no_autoscaler_and_the_head_groups_other_nodes_are_workers(spec_file: Path) -> None:
    _, job = documents(emit(spec_file, "3x{CPU: 8, GPU: 4}"))
    cluster = job["spec"]["rayClusterSpec"]
    assert "enableInTreeAutoscaling" not in cluster and "autoscalerOptions" not in cluster
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "8"  # no sidecar: Ray has the whole node
    (group,) = cluster["workerGroupSpecs"]
    assert (group["groupName"], group["replicas"], group["minReplicas"], group["maxReplicas"]) == (
        "group0-cpu8-gpu4",
        2,
        2,
        2,
    )
    _, job = documents(emit(spec_file, "2..4x{CPU: 8, GPU: 4}"))
    (group,) = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (1, 1, 3)  # the head is one of the 2..4
    assert job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] is True
    assert group["rayStartParams"]["num-cpus"] == "8"  # the head group's other nodes have no sidecar


def test_custom_resources_reach_ray_and_kubernetes(spec_file: Path) -> None:
    _, job = documents(emit(spec_file, "1x{CPU: 4} + 0..2x{CPU: 2, GPU: 1, TPU: 4}"))
    (group,) = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert group["groupName"] == "group1-cpu2-gpu1"
    assert group["rayStartParams"]["resources"] == '"{\\"TPU\\": 4}"'  # KubeRay's documented form
    assert shlex.split(group["rayStartParams"]["resources"]) == ['{"TPU": 4}']  # what `ray start` receives
    assert group["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "2"


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        (
            "1x{CPU: 7.5} + 0..2x{CPU: 8, GPU: 8}",
            "CPU: 7.5 per node in --cluster: `ray start --num-cpus` takes a whole number of CPUs (and KubeRay's "
            "autoscaler reads num-cpus with int()); describe each node with a whole number of CPUs, e.g. CPU: 7 "
            "(trials may still use fractions of them)",
        ),
        (
            "1x{CPU: 8} + 2x{CPU: 8, GPU: 0.5}",
            "GPU: 0.5 per node in --cluster: Kubernetes gives a pod whole GPUs (nvidia.com/gpu); describe each node "
            "with its whole number of GPUs (trials may still use fractions of them)",
        ),
    ],
)
def test_a_fractional_cpu_or_gpu_per_node_is_refused(spec_file: Path, cluster: str, message: str) -> None:
    with pytest.raises(PlanError) as err:
        emit(spec_file, cluster, overrides=("scaling.use_gpu=false", CPU_WORKERS))
    assert str(err.value) == message


# ----------------------------------------------------------------------------- sizes: the pods fit the described nodes


def pod_total(job: Mapping[str, Any], pod: Mapping[str, Any]) -> tuple[float, float]:
    """The CPUs and GiB a pod requests: its containers, and the head's autoscaler sidecar."""
    requests = [c["resources"]["requests"] for c in pod["spec"]["containers"]]
    cluster = job["spec"]["rayClusterSpec"]
    if pod is cluster["headGroupSpec"]["template"] and "autoscalerOptions" in cluster:
        requests.append(cluster["autoscalerOptions"]["resources"]["requests"])
    return sum(_cpus(r.get("cpu", 0)) for r in requests), sum(_gib(r["memory"]) for r in requests)


def _cpus(quantity: str | int) -> float:
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _gib(quantity: str) -> float:
    return int(quantity[:-2]) / (1 if quantity.endswith("Gi") else 1024)


@pytest.mark.parametrize(
    "cluster",
    [
        "1x{CPU: 8, memory: 32} + 0..4x{CPU: 8, GPU: 8, memory: 64}",
        "1x{CPU: 8, memory: 32.3} + 0..4x{CPU: 8, GPU: 8, memory: 64.7}",
        "1..3x{CPU: 8, GPU: 4, memory: 32}",
        "3x{CPU: 16, GPU: 4, memory: 96}",
    ],
)
def test_every_pod_fits_its_described_node_with_the_sidecar_and_the_allowances_inside(
    spec_file: Path, cluster: str
) -> None:
    """`memory: 32` is a pod of at most 32 GiB and the node's CPUs, sidecar included; Ray plans with the rest."""
    _, job = documents(emit(spec_file, cluster))
    described = [g.resources for g in parse_node_groups(cluster) for _ in range(1 + (g.max_count > 1 and g.is_head))]
    for pod, shape, group in zip(
        pods(job),
        described,
        [job["spec"]["rayClusterSpec"]["headGroupSpec"], *job["spec"]["rayClusterSpec"].get("workerGroupSpecs", [])],
    ):
        cpus, gib = pod_total(job, pod)
        assert cpus <= shape["CPU"] and gib <= shape["memory"] / GB, (cpus, gib, shape)
        assert shape["memory"] / GB - gib < 1 / 1024  # the whole node, to the MiB
        ray_memory = int(group["rayStartParams"]["memory"]) / GB
        base = HEAD_BASE_GB if group is job["spec"]["rayClusterSpec"]["headGroupSpec"] else WORKER_BASE_GB
        assert ray_memory <= gib - base  # what Ray plans the trials with leaves Ray's own processes their room
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]
    if "autoscalerOptions" in job["spec"]["rayClusterSpec"]:  # the sidecar's half CPU: whole CPUs for Ray
        assert head["rayStartParams"]["num-cpus"] == str(int(parse_node_groups(cluster)[0].resources["CPU"]) - 1)


def test_the_readme_head_of_8_cpus_and_32_gib_is_8_cpus_and_32_gib_in_all(spec_file: Path) -> None:
    text = emit(spec_file, "1x{CPU: 8, memory: 32} + 0..4x{CPU: 8, GPU: 8}")
    _, job = documents(text)
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]
    assert pod_total(job, pods(job)[0]) == (8.0, 32.0)
    assert head["template"]["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "7500m", "memory": "32256Mi"}
    assert head["rayStartParams"] == {"dashboard-host": "0.0.0.0", "num-cpus": "7", "memory": str(int(29.5 * GB))}
    assert cluster_argument(ray_groups(parse_node_groups("1x{CPU: 8, memory: 32} + 0..4x{CPU: 8, GPU: 8}"))) == (
        "1x{CPU: 7, memory: 29.5} + 0..4x{CPU: 8, GPU: 8}"
    )
    for line in (
        "        # num-cpus: the --cluster shape's CPU: 8 less KubeRay's autoscaler sidecar (0.5 CPU; the container",
        "        # memory: 29.5 GiB (in bytes), the memory Ray plans the trials with: the --cluster shape's 32 GiB,",
        "        # less KubeRay's autoscaler sidecar (0.5 GiB), less 2 GiB for Ray's head processes and the search",
    ):
        assert line in text.splitlines(), line


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        (
            "1x{CPU: 8, memory: 2} + 0..4x{CPU: 8, GPU: 8}",
            "memory: 2 per node in --cluster: the head node does not hold what its pod runs besides the trials, 2 GiB "
            "for Ray's head processes and the search process and 0.5 GiB for KubeRay's autoscaler sidecar: 0.5 GiB "
            "short, and nothing left for the trials; describe each node with the memory a pod has on it (a little "
            "less than the machine's), more than 2.5 GiB (README: Running on Kubernetes)",
        ),
        (
            "1x{CPU: 8, memory: 32} + 2x{CPU: 8, GPU: 8, memory: 0.75}",
            "memory: 0.75 per node in --cluster: a node of worker group group1-cpu8-gpu8 does not hold what its pod "
            "runs besides the trials, 1 GiB for Ray's own processes: 0.25 GiB short, and nothing left for the trials; "
            "describe each node with the memory a pod has on it (a little less than the machine's), more than 1 GiB "
            "(README: Running on Kubernetes)",
        ),
    ],
)
def test_a_node_that_does_not_hold_its_pods_overheads_is_refused_saying_by_how_much(
    spec_file: Path, cluster: str, message: str
) -> None:
    with pytest.raises(PlanError) as err:
        emit(spec_file, cluster)
    assert str(err.value) == message


def test_when_memory_is_short_for_the_trials_the_plan_runs_fewer_and_says_where_it_planned(spec_file: Path) -> None:
    """Ray plans with the node less its overheads: a 5 GiB head leaves 2.5 GiB for 3 GiB drivers, a 12 GiB head 9.5 GiB."""
    with pytest.raises(PlanError) as err:
        emit(spec_file, "1x{CPU: 8, memory: 5} + 0..4x{CPU: 8, GPU: 8}")
    assert str(err.value).endswith(
        "(planned for the nodes as Ray is started in the pods, 1x{CPU: 7, memory: 2.5 GiB} + 0..4x{CPU: 8, GPU: 8}: "
        "the --cluster nodes less KubeRay's autoscaler sidecar and Ray's own processes; README: Running on Kubernetes)"
    )
    plan = rayjob_plan(load_spec(spec_file), parse_node_groups("1x{CPU: 8, memory: 12} + 0..4x{CPU: 8, GPU: 8}"))
    assert plan.max_concurrent_trials == 3  # (12 - 0.5 - 2) GB / 3 GiB per driver


# ----------------------------------------------------------------------------- the head, from the spec's figures


def test_head_memory_is_the_drivers_times_the_specs_figure_plus_the_base(spec_file: Path) -> None:
    spec = load_spec(spec_file, overrides=("num_samples=20",))
    plan = rayjob_plan(spec, parse_node_groups(GPU_CLUSTER))
    head_usage = next(u for u in plan.usage if u.is_head)
    assert head_usage.drivers == plan.max_concurrent_trials == 16  # 4 nodes x 8 GPUs / 2 per trial
    _, job = documents(emit(spec_file, overrides=("num_samples=20",)))
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]
    container = head["template"]["spec"]["containers"][0]
    expected = math.ceil(16 * 3 + HEAD_BASE_GB)  # resources.driver_memory_gb: 3 in the spec
    assert container["resources"]["limits"]["memory"] == f"{expected}Gi"
    assert head["rayStartParams"] == {"dashboard-host": "0.0.0.0", "num-cpus": "7"}  # 8 less the sidecar's half
    assert container["resources"]["limits"]["cpu"] == "7500m"
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    # the figure is the spec's: another value, another head
    _, job = documents(emit(spec_file, overrides=("num_samples=20", "resources.driver_memory_gb=0.5")))
    memory = pods(job)[0]["spec"]["containers"][0]["resources"]["limits"]["memory"]
    assert memory == f"{math.ceil(16 * 0.5 + HEAD_BASE_GB)}Gi"
    assert head_memory_gb(spec, 16) == 16 * 3 + HEAD_BASE_GB
    assert head_memory_gb(spec, 2, 3) == 2 * 3 + 3 * 2 + HEAD_BASE_GB  # and worker_memory_gb for workers on it


@pytest.mark.parametrize(("samples", "head_gi", "worker_gi"), [(8, 26, 17), (4, 14, 17), (1, 5, 5)])
def test_each_pod_is_sized_for_the_trials_that_can_exist(
    spec_file: Path, samples: int, head_gi: int, worker_gi: int
) -> None:
    """16 trials fit at once, but a spec of 8, 4 or 1 has only that many drivers, and their workers."""
    text = emit(spec_file, overrides=(f"num_samples={samples}",))
    _, job = documents(text)
    assert total_trials(load_spec(spec_file, overrides=(f"num_samples={samples}",))) == samples
    head, worker = (p["spec"]["containers"][0]["resources"]["limits"]["memory"] for p in pods(job))
    assert head == f"{head_gi}Gi"  # min(16, samples) drivers x 3 GiB + 2 GiB
    assert worker == f"{worker_gi}Gi"  # min(8, 2 x samples) workers x 2 GiB + 1 GiB
    assert f"of the spec's {samples} trial(s)." in " ".join(text.split())


def test_the_pbt_example_of_4_trials_gets_a_head_for_4_drivers() -> None:
    """The issue's case: the 4-trial PBT spec was given a 97Gi head on a 4-CPU head for the trials that could
    run at once; it gets 4 drivers' memory."""
    spec_path = Path(__file__).resolve().parents[2] / "search_spaces" / "digits_pbt.yaml"
    spec = load_spec(spec_path)
    assert total_trials(spec) == 4
    text = hpsearch.planning.rayjob.rayjob_manifest(
        spec, spec_path, parse_node_groups("1x{CPU: 4} + 0..4x{CPU: 8, GPU: 8}"), image="i:1", storage_pvc="results"
    )
    _, job = documents(text)
    memory = pods(job)[0]["spec"]["containers"][0]["resources"]["limits"]["memory"]
    assert memory == f"{math.ceil(4 * spec.resources.driver_memory_gb + HEAD_BASE_GB)}Gi"


def test_a_head_shape_with_memory_gives_its_pod_that_memory_and_the_comment_says_why(spec_file: Path) -> None:
    text = emit(spec_file, "1x{CPU: 8, memory: 96} + 0..4x{CPU: 8, GPU: 8}")
    _, job = documents(text)
    assert pods(job)[0]["spec"]["containers"][0]["resources"]["limits"]["memory"] == "97792Mi"  # 95.5 GiB
    comment = " ".join(line.strip().lstrip("# ") for line in text.splitlines() if line.strip().startswith("#"))
    assert (
        "memory: the --cluster shape's 96 GiB less KubeRay's autoscaler sidecar (0.5 GiB) = 97792Mi: 2 GiB for Ray's "
        "head processes and the search process (an allowance), and Ray's memory (rayStartParams) for the trials, of "
        "which the plan puts 8 driver(s) x 3 GiB (resources.driver_memory_gb) here."
    ) in comment


# ----------------------------------------------------------------------------- entrypoint, deadline, lifecycle


def sh_words(line: str) -> list[str]:
    """The words a POSIX shell makes of ``line``, failing on anything it would expand or run instead.

    Quote removal as POSIX says (Python's shlex keeps the backslash of ``\\$`` inside double quotes, where
    sh drops it): a backslash quotes the next character (and a backslash-newline goes); single quotes keep
    everything; inside double quotes a backslash quotes only ``$ ` " \\`` and a newline. An unquoted or
    double-quoted ``$`` or backquote (an expansion), an unquoted operator or glob, or a ``#`` or ``~`` starting
    a word fails: the argument would not arrive as written.
    """
    words: list[str] = []
    word: list[str] | None = None
    i = 0
    while i < len(line):
        c = line[i]
        if c in " \t\n":
            if word is not None:
                words.append("".join(word))
            word, i = None, i + 1
            continue
        if word is None:
            assert c not in "#~", f"sh reads {line[i:]!r} as a comment or a home folder"
            word = []
        if c == "\\":
            word += [] if line[i + 1] == "\n" else [line[i + 1]]
            i += 2
        elif c == "'":
            end = line.index("'", i + 1)
            word.append(line[i + 1 : end])
            i = end + 1
        elif c == '"':
            i += 1
            while line[i] != '"':
                if line[i] == "\\" and line[i + 1] in '$`"\\\n':
                    word += [] if line[i + 1] == "\n" else [line[i + 1]]
                    i += 2
                else:
                    assert line[i] not in "$`", f"sh expands {line[i:]!r}"
                    word.append(line[i])
                    i += 1
            i += 1
        else:
            assert c not in "$`;&|<>()*?[", f"sh expands or runs {line[i:]!r}"
            word.append(c)
            i += 1
    return words if word is None else [*words, "".join(word)]


def through_kuberay(entrypoint: str) -> list[str]:
    """The argv `hpsearch` gets from a RayJob's entrypoint: parsed as the two shells do, joined as Ray does between.

    KubeRay's submitter splits the entrypoint into words (Go's shlex in KubeRay 1.1 and 1.2, bash from 1.3),
    `ray job submit -- WORDS` joins them with subprocess.list2cmdline (ray/dashboard/modules/job/cli.py), and
    Ray's job supervisor runs that line with /bin/sh (subprocess.Popen(..., shell=True)).
    """
    return sh_words(subprocess.list2cmdline(sh_words(entrypoint)))


def through_real_shells(entrypoint: str) -> list[str]:
    """The same with the real shells: bash splits the entrypoint, /bin/sh runs what list2cmdline joined."""
    words = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {entrypoint}"], capture_output=True, text=True, check=True
    ).stdout.split("\0")[:-1]
    line = subprocess.list2cmdline(words)
    out = subprocess.run(["/bin/sh", "-c", f"printf '%s\\0' {line}"], capture_output=True, text=True, check=True)
    return out.stdout.split("\0")[:-1]


ODD_VALUES = [
    "plain",
    "with space",
    "$HOME",
    "cost: $5 and ${x} and $(date) and `date`",
    'say "hi"',
    "it's",
    "back\\slash",
    "ends in a backslash\\",
    'a \\" mix \\\\" of $ and \'',
    "tab\there",
    "line\nbreak",
    "no_blank\\\"$'`!*?[]{}();&|<>#~",
    "\\",
    '"',
    "",
    "ünïcödé ✓",
]


@pytest.mark.parametrize("value", ODD_VALUES)
def test_every_argument_survives_both_shells(value: str) -> None:
    """$, quotes, spaces, backslashes: each argument reaches `hpsearch run` as written, through both shells."""
    args = ["hpsearch", "run", "--set", f"tracking.tags={value}", value]
    entrypoint = entrypoint_text(args)
    assert through_kuberay(entrypoint) == args
    if "\0" not in value:
        assert through_real_shells(entrypoint) == args
    assert yaml.safe_load(f"entrypoint: {_scalar(entrypoint)}") == {"entrypoint": entrypoint}  # and YAML keeps it


def test_a_plain_argument_stays_bare_and_one_with_blanks_is_quoted_once() -> None:
    assert entrypoint_text(["hpsearch", "run", "--set", "a.b=1", "--cluster", "1x{CPU: 8}"]) == (
        "hpsearch run --set a.b=1 --cluster '1x{CPU: 8}'"
    )
    assert entrypoint_text(["--set", "name=$HOME"]) == "--set 'name=\\$HOME'"


def test_the_entrypoint_runs_the_configmaps_spec_against_the_jobs_cluster(spec_file: Path) -> None:
    lr = "search_space.lr={type: float, low: 0.001, high: 0.1}"  # spaces and braces: quoted for the shell
    tag = 'search_space.note={type: choice, values: ["$HOME", "a \\"b\\" c", "d\\\\e"]}'  # $, quotes, backslashes
    overrides = ("num_samples=4", lr, tag, "storage_path=/somewhere/else", "name=Kube_Search.2")
    _, job = documents(emit(spec_file, overrides=overrides))
    entrypoint = job["spec"]["entrypoint"]
    expected = [
        "hpsearch",
        "run",
        f"{SPEC_MOUNT}/spec.yaml",
        "--address",
        "auto",
        "--cluster",
        "1x{CPU: 7} + 0..4x{CPU: 8, GPU: 8}",  # as Ray is started: the head less the autoscaler sidecar
        "--set",
        f"storage_path={STORAGE_MOUNT}",
        "--set",
        "num_samples=4",
        "--set",
        lr,
        "--set",
        tag,
        "--set",
        "name=Kube_Search.2",
    ]
    assert through_kuberay(entrypoint) == expected
    assert through_real_shells(entrypoint) == expected
    assert "'search_space.lr={type: float, low: 0.001, high: 0.1}'" in entrypoint
    assert job["metadata"]["name"] == "kube-search-2"
    assert job["spec"]["submissionMode"] == "K8sJobMode"
    spec = load_spec(spec_file, overrides=expected[10::2])  # the values `run` gets make the same spec
    assert spec.search_space["note"].values == ["$HOME", 'a "b" c', "d\\e"]  # type: ignore[union-attr]


def run_args(job: Mapping[str, Any]) -> Any:
    """The entrypoint as the two shells split it and `hpsearch run` parses it."""
    argv = through_kuberay(job["spec"]["entrypoint"])
    assert argv[:2] == ["hpsearch", "run"]
    return _parser().parse_args(argv[1:])


def same_groups(cluster: str) -> list[tuple[dict[str, float], int, int, bool]]:
    """The groups as Ray is started with them in the pods, which `run --cluster` must read back."""
    return [(g.resources, g.min_count, g.max_count, g.is_head) for g in ray_groups(parse_node_groups(cluster))]


@pytest.mark.parametrize(
    ("cluster", "normalised"),
    [
        (GPU_CLUSTER, "1x{CPU: 7} + 0..4x{CPU: 8, GPU: 8}"),
        (  # memory in GB, less the sidecar and Ray's own; amounts exact, CPU and GPU first
            "1x{memory: 32.5, CPU: 8} + 0..4x{GPU: 8, CPU: 2, memory: 1.5}",
            "1x{CPU: 7, memory: 30} + 0..4x{CPU: 2, GPU: 8, memory: 0.5}",
        ),
        ("1..3x{CPU: 8, GPU: 4}", "1x{CPU: 7, GPU: 4} + 0..2x{CPU: 8, GPU: 4}"),  # the head has the sidecar
        (  # custom resources, one whose name needs quoting (a quote and a space; "on" reads as true bare)
            '1x{CPU: 4} + 2x{CPU: 8, GPU: 8} + 0..2x{CPU: 8, TPU: 4, "it\'s big": 1, "on": 1, accel/x-1.0: 0.25}',
            '1x{CPU: 3} + 2x{CPU: 8, GPU: 8} + 0..2x{CPU: 8, TPU: 4, accel/x-1.0: 0.25, "it\'s big": 1, "on": 1}',
        ),
    ],
)
def test_an_autoscaling_clusters_groups_reach_run_as_one_cluster_argument(
    spec_file: Path, cluster: str, normalised: str
) -> None:
    """The entrypoint's --cluster: one word, which `hpsearch run` accepts and reads to the groups of the pods."""
    _, job = documents(emit(spec_file, cluster, overrides=("scaling.use_gpu=false", CPU_WORKERS)))
    argv = through_kuberay(job["spec"]["entrypoint"])
    assert argv.count("--cluster") == 1
    assert argv[argv.index("--cluster") + 1] == normalised
    assert through_real_shells(job["spec"]["entrypoint"]) == argv
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
    _, job = documents(emit(spec_file, str(path)))
    args = run_args(job)
    assert args.cluster == "1x{CPU: 7, memory: 29.5} + 0..4x{CPU: 8, GPU: 8}"
    assert [(g.resources, g.min_count, g.max_count, g.is_head) for g in parse_node_groups(args.cluster)] == (
        same_groups(str(path))
    )


@pytest.mark.parametrize(
    "cluster", ["3x{CPU: 8, GPU: 4}", "1x{CPU: 16, GPU: 2, memory: 64}", "1x{CPU: 4} + 2x{GPU: 8}"]
)
def test_a_fixed_cluster_passes_no_cluster_to_run(spec_file: Path, cluster: str) -> None:
    """`run` refuses --cluster without a min..max group (nothing for an autoscaler to add): none is passed."""
    text = emit(spec_file, cluster, overrides=("scaling.use_gpu=false", CPU_WORKERS))
    _, job = documents(text)
    assert run_args(job).cluster is None
    assert "--cluster" not in through_kuberay(job["spec"]["entrypoint"])
    assert "enableInTreeAutoscaling" not in job["spec"]["rayClusterSpec"]
    for group in job["spec"]["rayClusterSpec"].get("workerGroupSpecs", []):
        assert group["replicas"] == group["minReplicas"] == group["maxReplicas"]


def test_a_resource_name_the_inline_form_cannot_carry_is_refused() -> None:
    groups = parse_node_groups("1x{CPU: 4} + 0..2x{CPU: 8}")
    odd = [groups[0], replace(groups[1], resources={"CPU": 8.0, "a}+{b": 1.0})]
    with pytest.raises(PlanError, match=r"^--cluster: the node groups cannot be written back as one inline --cluster"):
        cluster_argument(odd)


def test_the_deadline_is_the_wall_time_budget_plus_the_margin(spec_file: Path) -> None:
    _, job = documents(emit(spec_file, overrides=("budget.max_wall_time=2h",)))
    assert job["spec"]["activeDeadlineSeconds"] == 7200 + DEADLINE_MARGIN_S
    _, job = documents(emit(spec_file, overrides=("budget.max_wall_time=90.5",)))
    assert job["spec"]["activeDeadlineSeconds"] == 91 + DEADLINE_MARGIN_S
    _, job = documents(emit(spec_file))
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
    _, job = documents(text)
    assert job["spec"]["activeDeadlineSeconds"] == 3600 + 3002
    assert (
        "  # budget.max_wall_time (3600 s) + 3002 s (twice failure.node_start_timeout_s, at least 1800 s) for the"
        in (text.splitlines())
    )
    assert "failure.node_start_timeout_s (1500.5 s)" in text  # the entrypoint's and the groups' comments say it


def test_the_cluster_is_shut_down_after_a_ttl_and_the_comments_say_how_to_keep_the_results(spec_file: Path) -> None:
    text = emit(spec_file, overrides=("budget.max_wall_time=1h",))
    _, job = documents(text)
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
    config_map, job = documents(text)
    for line in uncommented.splitlines():
        key, value = yaml.safe_load(textwrap.dedent(line)).popitem()
        for pod in pods(job):
            pod["spec"][key] = value
    for version in CRD_VERSIONS:  # uncommented, the placeholders are fields both KubeRay versions keep, and valid
        found = validate_rayjob(job, version)
        assert (found.errors, found.unchecked, sorted(found.pruned)) == ([], [], newer_fields(job, version))
    assert kubernetes_errors(config_map, job) == []


# ----------------------------------------------------------------------------- storage


def test_every_pod_mounts_the_results_claim_and_the_spec(spec_file: Path) -> None:
    _, job = documents(emit(spec_file))
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
    config_map, job = documents(emit(spec_file))
    assert config_map["metadata"]["name"] == "kube-search-spec"
    assert config_map["data"] == {"spec.yaml": SPEC_TEXT, "loop.py": LOOP}


def test_files_in_subfolders_are_mapped_to_their_paths(spec_file: Path) -> None:
    (spec_file.parent / "loops").mkdir()
    (spec_file.parent / "loops" / "train.py").write_text(LOOP, encoding="utf-8")
    config_map, job = documents(emit(spec_file, overrides=("trainable=loops/train.py:train",)))
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
    config_map, job = documents(out)
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


OPTIONS_ONLY_WITH_EMIT = (
    "--image, --storage-pvc, --namespace, --auth-token, --pre-running-deadline and --fs-group are options of "
    "--emit rayjob"
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
            OPTIONS_ONLY_WITH_EMIT,
        ),
        (
            ["--cluster", GPU_CLUSTER, "--storage-pvc", "r"],
            OPTIONS_ONLY_WITH_EMIT,
        ),
        (["--cluster", GPU_CLUSTER, "--auth-token"], OPTIONS_ONLY_WITH_EMIT),
        (["--cluster", GPU_CLUSTER, "--pre-running-deadline", "0"], OPTIONS_ONLY_WITH_EMIT),
        (["--cluster", GPU_CLUSTER, "--fs-group", "0"], OPTIONS_ONLY_WITH_EMIT),
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
    text = capsys.readouterr().out
    out = " ".join(text.split())
    for option in ("--emit {rayjob}", "--image IMAGE", "--storage-pvc NAME", "--namespace NAMESPACE"):
        assert option in out
    helps = {}  # each option's help: its line and those below it, up to the next option
    for block in re.split(r"\n(?=  -)", text):
        first, _, rest = block.strip().partition(" ")
        helps[first] = " ".join(rest.split())
    for option, version in (
        ("--auth-token", "needs KubeRay 1.5.1 or later"),
        ("--pre-running-deadline", "needs KubeRay 1.6.0 or later"),
        ("--fs-group", "any KubeRay (1.1.0 or later)"),
    ):
        assert version in helps[option], (option, helps[option])  # each opt-in option's help names its KubeRay


def test_the_spec_a_manifest_ships_is_valid_where_the_pod_reads_it(spec_file: Path, tmp_path: Path) -> None:
    """The ConfigMap's files, laid out as the pod mounts them, make a spec that loads with the entrypoint's --set."""
    config_map, job = documents(emit(spec_file, overrides=("num_samples=3",)))
    mount = tmp_path / "pod" / "etc-hpsearch"
    mount.mkdir(parents=True)
    for key, text in config_map["data"].items():
        (mount / key).write_text(text, encoding="utf-8")
    args = through_kuberay(job["spec"]["entrypoint"])
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    storage = tmp_path / "pod" / "results"
    sets = [f"storage_path={storage}" if s.startswith("storage_path=") else s for s in sets]
    spec: Spec = load_spec(mount / "spec.yaml", overrides=sets)
    assert (
        spec.num_samples == 3 and spec.storage_path == storage and spec.trainable.endswith("etc-hpsearch/loop.py:train")
    )


# ----------------------------------------------------------------------------- names, image, submitter, opt-in fields


@pytest.mark.parametrize("namespace", ["ML", "ml_team", "-ml", "ml-", "ml.team", "a" * 64, ""])
def test_a_namespace_kubernetes_refuses_is_refused_naming_the_rule(spec_file: Path, namespace: str) -> None:
    with pytest.raises(PlanError) as err:
        emit(spec_file, namespace=namespace)
    assert str(err.value) == (
        f"--namespace {namespace!r} is not a Kubernetes namespace name: a namespace is a DNS-1123 label, at most 63 "
        "characters of lowercase letters, digits and '-', starting and ending with a letter or digit (e.g. 'ml-team')"
    )


@pytest.mark.parametrize("claim", ["Results", "results_1", "-r", "r-", "a..b", "a.-b", "a" * 254])
def test_a_claim_name_kubernetes_refuses_is_refused_naming_the_rule(spec_file: Path, claim: str) -> None:
    with pytest.raises(PlanError) as err:
        emit(spec_file, storage_pvc=claim)
    assert str(err.value) == (
        f"--storage-pvc {claim!r} is not a PersistentVolumeClaim name: a claim's name is a DNS-1123 subdomain, at "
        "most 253 characters of lowercase letters, digits, '-' and '.', each part between dots starting and ending "
        "with a letter or digit (e.g. 'hpsearch-results'); `kubectl get pvc` lists yours"
    )


@pytest.mark.parametrize(
    ("namespace", "claim"), [("ml-team", "hpsearch-results"), ("a" * 63, "results.v1.x"), ("0", "a" * 253)]
)
def test_names_kubernetes_takes_are_taken(spec_file: Path, namespace: str, claim: str) -> None:
    _, job = documents(emit(spec_file, namespace=namespace, storage_pvc=claim))
    assert job["metadata"]["namespace"] == namespace
    assert pods(job)[0]["spec"]["volumes"][1]["persistentVolumeClaim"] == {"claimName": claim}


@pytest.mark.parametrize(
    ("image", "says"),
    [
        ("rayproject/ray:2.58.0-py311", "2.58.0"),
        ("docker.io/rayproject/ray-ml:2.9.0", "2.9.0"),
        ("localhost:5000/ray:2.59.1-py310-gpu", "2.59.1"),
        ("registry.example/team/hpsearch:ray-2.58.0", "2.58.0"),
        ("registry.example/hpsearch:py311_ray2.58.0_cu121", "2.58.0"),
    ],
)
def test_an_image_whose_tag_says_another_ray_is_refused(spec_file: Path, image: str, says: str) -> None:
    with pytest.raises(PlanError) as err:
        emit(spec_file, image=image, ray_version="2.60.0")
    assert str(err.value) == (
        f"--image {image} says Ray {says}, but this hpsearch runs Ray 2.60.0, which the manifest's rayVersion says "
        "and the plan is made with: use an image of Ray 2.60.0 (e.g. rayproject/ray:2.60.0-py311 with hpsearch "
        f"installed), or write the manifest where Ray {says} is installed"
    )


@pytest.mark.parametrize(
    "image",
    [
        "rayproject/ray:2.60.0-py311-gpu",
        "rayproject/ray:2.60.0",
        "rayproject/ray:latest",  # no version in the tag: nothing to compare
        "rayproject/ray@sha256:" + "0" * 64,
        "registry.example/hpsearch:1",
        "registry.example/hpsearch:2.58.0",  # the image's own version, not Ray's
        "registry.example/team/hpsearch:ray-2.60.0",
    ],
)
def test_an_image_of_the_same_ray_or_of_no_ray_version_is_taken(spec_file: Path, image: str) -> None:
    _, job = documents(emit(spec_file, image=image, ray_version="2.60.0"))
    assert job["spec"]["rayClusterSpec"]["rayVersion"] == "2.60.0"
    assert {p["spec"]["containers"][0]["image"] for p in pods(job)} == {image}


def test_the_command_refuses_an_image_of_another_ray_than_its_own(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", str(spec_file), "--cluster", GPU_CLUSTER, "--emit", "rayjob", "--storage-pvc", "results"]
    assert main([*argv, "--image", "rayproject/ray:1.13.0-py38"]) == 2
    assert capsys.readouterr().err.startswith("Error: --image rayproject/ray:1.13.0-py38 says Ray 1.13.0, but ")


def test_the_submitter_may_fail_more_often_than_kuberays_default_and_the_comment_says_why(spec_file: Path) -> None:
    text = emit(spec_file)
    _, job = documents(text)
    assert job["spec"]["submitterConfig"] == {"backoffLimit": SUBMITTER_BACKOFF_LIMIT}
    assert SUBMITTER_BACKOFF_LIMIT > 2  # KubeRay's default (ray-operator/controllers/ray/rayjob_controller.go)
    comment = " ".join(line.strip().lstrip("# ") for line in text.splitlines() if line.startswith("  # "))
    assert "KubeRay 1.2.0 or later (1.1 has no submitterConfig" in comment
    assert "KubeRay's default, 2, can end a long search" in comment
    assert "it never starts the search twice" in comment


def test_the_opt_in_fields_are_written_only_when_asked_and_need_the_kuberay_they_name(spec_file: Path) -> None:
    """authOptions (token), preRunningDeadlineSeconds and fsGroup: KubeRay 1.7.0 keeps them all; 1.1.0 drops
    submitterConfig, authOptions and preRunningDeadlineSeconds (and keeps fsGroup, a pod field)."""
    _, plain = documents(emit(spec_file))
    assert "authOptions" not in plain["spec"]["rayClusterSpec"] and "preRunningDeadlineSeconds" not in plain["spec"]
    assert all("securityContext" not in pod["spec"] for pod in pods(plain))
    text = emit(spec_file, auth_token=True, pre_running_deadline_s=1800, fs_group=100)
    _, job = documents(text)
    assert job["spec"]["rayClusterSpec"]["authOptions"] == {"mode": "token"}
    assert job["spec"]["preRunningDeadlineSeconds"] == 1800
    assert [pod["spec"]["securityContext"] for pod in pods(job)] == [{"fsGroup": 100}] * 2
    assert validate_rayjob(job, "1.7.0") == Validation()
    assert validate_rayjob(job, "1.1.0") == Validation(
        pruned=["spec.preRunningDeadlineSeconds", "spec.submitterConfig", "spec.rayClusterSpec.authOptions"]
    )
    comment = " ".join(line.strip().lstrip("# ") for line in text.splitlines() if line.strip().startswith("#"))
    for said in (
        "--auth-token (KubeRay 1.5.1 or later): Ray's token authentication.",
        "--pre-running-deadline (KubeRay 1.6.0 or later): KubeRay fails the RayJob if its search has not started "
        "1800 s after the RayJob's start",
        "--fs-group: the volumes' files belong to group 100",
    ):
        assert said in comment, said


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"pre_running_deadline_s": 0},
            "--pre-running-deadline 0: preRunningDeadlineSeconds is a whole number of seconds from 1 to 2147483647",
        ),
        (
            {"pre_running_deadline_s": 2**31},
            "--pre-running-deadline 2147483648: preRunningDeadlineSeconds is a whole "
            "number of seconds from 1 to 2147483647",
        ),
        ({"fs_group": -1}, "--fs-group -1: fsGroup is a group id, a whole number from 0 (e.g. 100, rayproject/ray's)"),
    ],
)
def test_an_opt_in_value_out_of_its_fields_range_is_refused(
    spec_file: Path, options: dict[str, int], message: str
) -> None:
    with pytest.raises(PlanError) as err:
        emit(spec_file, **options)
    assert str(err.value) == message


def test_the_command_writes_the_opt_in_fields_and_says_them_in_the_header(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", str(spec_file), "--cluster", GPU_CLUSTER, "--emit", "rayjob", "--image", "img:1"]
    flags = ["--auth-token", "--pre-running-deadline", "600", "--fs-group", "0"]
    assert main([*argv, "--storage-pvc", "results", *flags]) == 0
    out = capsys.readouterr().out
    _, job = documents(out)
    assert (job["spec"]["preRunningDeadlineSeconds"], pods(job)[1]["spec"]["securityContext"]) == (600, {"fsGroup": 0})
    assert (
        f"# Written by: hpsearch plan {spec_file} --cluster '{GPU_CLUSTER}' --emit rayjob --image img:1 "
        "--storage-pvc results --auth-token --pre-running-deadline 600 --fs-group 0" in out.splitlines()
    )


# ----------------------------------------------------------------------------- the README's examples

ROOT = Path(__file__).resolve().parents[2]
#: The machines the README's Kubernetes steps name, as their nodes' allocatable CPUs and GiB (EKS's AMI: the
#: instance's vCPUs and memory less the kubelet's kube-reserved, 11 MiB per pod it may run + 255 MiB and 6% of
#: one core and less of the others, the 100 MiB eviction threshold, and what the kernel keeps), rounded down.
#: GKE's e2-standard-8 and g2-standard-48 (the GKE steps) have the same vCPUs and memory.
MACHINES = {"m6i.2xlarge": (7.9, 30.0), "g5.12xlarge": (47.8, 186.0)}


def readme_rayjob_commands() -> list[list[str]]:
    """Every `hpsearch plan ... --emit rayjob` the README shows with a real shape, as argv."""
    text = (ROOT / "README.md").read_text(encoding="utf-8").replace("\\\n", " ")
    commands = []
    for match in re.finditer(r"hpsearch plan [^`\n]*--emit rayjob[^`\n]*", text):
        line = match.group(0).split(" > ", 1)[0]
        if "SHAPE" not in line:  # the synopsis: placeholders
            commands.append(shlex.split(line))
    return commands


def test_the_readme_shows_rayjob_examples_on_the_machines_it_names() -> None:
    commands = readme_rayjob_commands()
    assert len(commands) >= 2
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for machine in MACHINES:
        assert machine in text, machine


def test_every_readme_rayjob_example_is_written_and_fits_the_machines_it_names(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each example runs as written (a user's my_spec.yaml is the shipped quick spec) and its pods fit: the head
    on an m6i.2xlarge, the GPU workers on a g5.12xlarge, each pod with its sidecar and allowances inside."""
    monkeypatch.chdir(ROOT)
    for argv in readme_rayjob_commands():
        argv = ["search_spaces/digits_quick.yaml" if a == "my_spec.yaml" else a for a in argv]
        assert main(argv[1:]) == 0, argv
        out, err = capsys.readouterr()
        assert err.startswith("hpsearch: RayJob digits-quick: ")
        _, job = documents(out)
        for pod in pods(job):
            machine = (
                "g5.12xlarge"
                if "nvidia.com/gpu" in pod["spec"]["containers"][0]["resources"]["limits"]
                else ("m6i.2xlarge")
            )
            cpus, gib = pod_total(job, pod)
            assert cpus <= MACHINES[machine][0] and gib <= MACHINES[machine][1], (argv, machine, cpus, gib)


# ----------------------------------------------------------------------------- credentials


def test_a_tracker_urls_password_goes_into_a_secret_the_head_pod_reads_never_into_the_manifest(
    spec_file: Path,
) -> None:
    password = "s3cret-pw"
    spec_file.write_text(
        SPEC_TEXT
        + f"tracking:\n  optuna: postgresql://alice:{password}@db.internal/optuna\n"
        + "  mlflow: {tracking_uri: 'https://bob:${MLFLOW_PW}@mlflow.internal'}\n",
        encoding="utf-8",
    )
    text = emit(spec_file, namespace="ml")
    assert password not in text
    config_map, job = documents(text)
    assert (
        "optuna: postgresql://alice:${HPSEARCH_OPTUNA_PASSWORD}@db.internal/optuna" in config_map["data"]["spec.yaml"]
    )
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    secret = "kube-search-credentials"
    assert head["env"] == [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": name}}}
        for name in ("HPSEARCH_OPTUNA_PASSWORD", "MLFLOW_PW")
    ]
    assert all("env" not in pod["spec"]["containers"][0] for pod in pods(job)[1:])  # the search runs on the head
    assert (
        f"#   kubectl create secret generic {secret} -n ml --from-literal=HPSEARCH_OPTUNA_PASSWORD=... "
        "--from-literal=MLFLOW_PW=..."
    ) in text.splitlines()


def test_a_password_given_with_set_is_moved_out_of_the_entrypoint_too(spec_file: Path) -> None:
    override = "tracking.optuna=postgresql://alice:pw-from-set@db/optuna"
    text = emit(spec_file, overrides=(override,))
    assert "pw-from-set" not in text
    _, job = documents(text)
    # quoted for both shells, so hpsearch, not a shell, expands it in the search process
    assert r"alice:\$\{HPSEARCH_OPTUNA_PASSWORD\}@db" in job["spec"]["entrypoint"]


def test_a_spec_without_credentials_has_no_secret(spec_file: Path) -> None:
    text = emit(spec_file)
    _, job = documents(text)
    assert all("env" not in pod["spec"]["containers"][0] for pod in pods(job))
    assert "credentials" not in text


def test_a_spot_group_keeps_its_mark_its_pods_tell_ray_and_the_comment_says_what_the_cloud_needs(
    spec_file: Path,
) -> None:
    import ray._raylet

    from hpsearch.planning.cluster_shape import SPOT_ENV

    assert ray._raylet.NODE_MARKET_TYPE_ENV == SPOT_ENV  # what Ray reads a node's market type from
    text = emit(spec_file, "1x{CPU: 8} + 0..4x{CPU: 8, GPU: 4, spot}")
    _, job = documents(text)
    cluster = job["spec"]["rayClusterSpec"]
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert all(e["name"] != SPOT_ENV for e in head.get("env", []))  # the head is never spot
    (group,) = cluster["workerGroupSpecs"]
    assert {"name": SPOT_ENV, "value": "spot"} in group["template"]["spec"]["containers"][0]["env"]
    assert "A spot group" in text and "cloud.google.com/gke-spot" in text
    argv = through_kuberay(job["spec"]["entrypoint"])
    assert argv[argv.index("--cluster") + 1].endswith("spot}")  # `run` plans with the spot nodes marked
