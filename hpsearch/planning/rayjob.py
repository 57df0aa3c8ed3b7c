"""A KubeRay ``RayJob`` for a spec and a described cluster: ``hpsearch plan SPEC --cluster SHAPE --emit rayjob``.

The plan says how many trials run at once and where; this module writes the same plan as the
two Kubernetes documents that run the search on a KubeRay cluster: a ``ConfigMap`` holding the
spec file (and the ``.py`` files it names by path), and a ``ray.io/v1`` ``RayJob`` whose Ray
cluster has the described node groups and whose entrypoint is ``hpsearch run SPEC --address auto``.
It is the plan rendered for a cluster manager, as :mod:`~hpsearch.planning.render` renders it for
a person: pure (no Ray, no Kubernetes client), plain data in, YAML text with comments out.

What it decides, and why (each also said in a comment of the manifest it writes):

- **The described nodes hold the pods.** Each ``--cluster`` shape is the room a pod has on its
  Kubernetes node (a little less than the machine: the kubelet keeps some). Whatever else runs in the
  pod is counted inside it, never added on top: KubeRay's autoscaler sidecar in the head pod
  (:data:`AUTOSCALER_CPU`, :data:`AUTOSCALER_MEMORY_GB`, when the cluster autoscales), and the memory
  Ray's own processes take (:data:`HEAD_BASE_GB` on the head, :data:`WORKER_BASE_GB` on a worker). Ray is
  started with what is left (``rayStartParams``: ``num-cpus``, ``memory`` in bytes), the plan is made
  for what Ray is started with (:func:`ray_groups`), and ``hpsearch run --cluster`` gets the same groups.
  ``ray start --num-cpus`` takes whole CPUs (KubeRay's autoscaler reads it with ``int()``), so a
  fractional CPU in ``--cluster`` is refused, and the head's Ray gets its CPUs less the sidecar's half
  CPU, rounded down (the half left over is the head processes'). A shape whose overheads alone do not
  fit is refused, saying by how much.
- **Head group.** The head pod has the head node's shape (its CPUs, GPUs and custom resources as
  ``rayStartParams``). Without a ``memory`` in its shape, its memory is what the plan puts there: the
  trial drivers times ``resources.driver_memory_gb``, any Train workers times
  ``resources.worker_memory_gb``, plus :data:`HEAD_BASE_GB`. Both per-trial figures are read from the
  spec, never fixed here. Each pod is sized for the trials that can exist: a node holds at most
  ``min(trials at once, total trials)`` of them.
- **Worker groups.** There is one ``workerGroupSpecs`` entry per node group after the head.
  If the head group has several nodes, its other nodes get an entry too. ``minReplicas`` and
  ``maxReplicas`` come from the group's ``min..max`` count. ``replicas``, the count the cluster
  starts with, is the *minimum*.

  When any group has a range, the entrypoint passes the groups, as Ray is started with them
  (:func:`ray_groups`), back as ``--cluster`` (:func:`cluster_argument`, one shell word). This is the same rule ``hpsearch run --cluster``
  applies itself (:func:`hpsearch.runtime.autoscaling.autoscaling_for`). ``hpsearch run`` then
  plans for the nodes up now plus every node the autoscaler may add. Trials that do not fit yet
  start their drivers, and their worker groups wait as pending placement groups. Ray's
  autoscaler (``enableInTreeAutoscaling``) adds nodes for that demand, up to ``maxReplicas``.
  A node takes minutes to start, because a machine must start and an image must be pulled. A
  trial waits ``failure.node_start_timeout_s`` for one. Idle nodes, for example at the end of
  the search, are removed after :data:`IDLE_TIMEOUT_S`, but never below ``minReplicas``.

  A fixed cluster has ``replicas = minReplicas = maxReplicas`` and no ``--cluster``, because
  ``run`` refuses a ``--cluster`` without a range.
- **Storage.** hpsearch writes its experiment folder with ordinary file I/O, so ``storage_path``
  is a folder: a ReadWriteMany ``PersistentVolumeClaim`` (``--storage-pvc``; EFS, Filestore, NFS)
  mounted at :data:`STORAGE_MOUNT` in every pod, passed as ``--set storage_path=...``. The claim
  is not part of the manifest, so deleting the RayJob never deletes the results. Without one
  the manifest is refused: the Ray cluster is deleted after the job (``shutdownAfterJobFinishes``),
  and with worker nodes every pod must reach the folder.
- **Deadline.** When the spec has a ``budget.max_wall_time``, ``activeDeadlineSeconds`` is that
  time plus :func:`deadline_margin_s`. KubeRay counts the deadline from the RayJob's start. That
  includes starting the cluster: the head and the ``minReplicas`` workers start before KubeRay
  submits the job. The budget counts only the search's own time. The nodes that the autoscaler
  adds for waiting trials start within that time.

- **The submitter.** KubeRay runs ``ray job submit`` in a Kubernetes Job whose ``backoffLimit`` is 2 unless
  ``submitterConfig`` (KubeRay 1.2.0 or later) says otherwise: a submitter that fails three times, for example
  when ``ray job logs --follow`` loses its connection in a long search, makes KubeRay fail the RayJob and
  delete its cluster. :data:`SUBMITTER_BACKOFF_LIMIT` raises it: from KubeRay 1.3.0 a retry finds the job
  submitted and only follows its logs again, so a retry never starts the search twice.
- **The entrypoint** passes two shells: KubeRay's submitter splits it into words, ``ray job submit`` joins them
  (``subprocess.list2cmdline``) and Ray's job supervisor runs the line with ``/bin/sh``. Each argument is
  quoted for both (:func:`entrypoint_text`), so a ``--set`` value reaches ``hpsearch run`` as written.
- **Opt-in fields**, each needing a newer KubeRay (:data:`KUBERAY_SINCE`): ``authOptions`` (Ray's token
  authentication), ``preRunningDeadlineSeconds``; and the pods' ``securityContext.fsGroup`` (any KubeRay).

Refusals raise :class:`~hpsearch.errors.PlanError`. The CLI prints it as a single ``Error:``
line and exits with 2.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from hpsearch.errors import PlanError, SpecError
from hpsearch.planning.cluster_shape import NodeGroup, cluster_text, fmt_count, nodes_at, parse_node_groups
from hpsearch.planning.for_spec import demand_for, plan_for
from hpsearch.planning.planner import GB, MEMORY, Plan, fmt_resources
from hpsearch.spec import Spec, total_trials

__all__ = [
    "rayjob_manifest",
    "rayjob_plan",
    "ray_groups",
    "entrypoint_text",
    "cluster_argument",
    "job_name",
    "deadline_seconds",
    "deadline_margin_s",
    "head_memory_gb",
    "HEAD_BASE_GB",
    "WORKER_BASE_GB",
    "AUTOSCALER_CPU",
    "AUTOSCALER_MEMORY_GB",
    "SUBMITTER_BACKOFF_LIMIT",
    "KUBERAY_SINCE",
    "DEADLINE_MARGIN_S",
    "TTL_SECONDS",
    "IDLE_TIMEOUT_S",
    "SPEC_MOUNT",
    "STORAGE_MOUNT",
]

#: Memory (GB) the head pod gets on top of the trials' drivers: the GCS, the raylet, the dashboard and
#: its agents, the search process itself (455 MB resident at the end of a 200-trial search,
#: ``benchmarks/scale.py``), and idle pool workers. An allowance, not a measurement of its own.
HEAD_BASE_GB = 2.0
#: Memory (GB) each worker pod gets on top of its Train workers: the raylet and the agents every Ray
#: node runs. An allowance, like :data:`HEAD_BASE_GB`.
WORKER_BASE_GB = 1.0
#: CPUs and memory (GB) of KubeRay's autoscaler sidecar, the second container of the head pod when
#: ``enableInTreeAutoscaling`` is on: KubeRay's defaults (500m, 512Mi), written in ``autoscalerOptions.resources``
#: so that what is counted inside the head node is what runs.
AUTOSCALER_CPU = 0.5
AUTOSCALER_MEMORY_GB = 0.5
#: ``submitterConfig.backoffLimit``: how often KubeRay's submitter Job may fail before KubeRay fails the RayJob
#: (and, with ``shutdownAfterJobFinishes``, deletes its cluster). KubeRay's default is 2. From KubeRay 1.3.0 a
#: retry runs ``ray job status`` first and, the job being there, only follows its logs again: it never starts the
#: search twice. Kubernetes waits 10 s, 20 s, 40 s, ... (at most 6 min) between retries, so a submitter that can
#: never reach the head gives up after about 35 min.
SUBMITTER_BACKOFF_LIMIT = 10
#: The KubeRay release whose RayJob CRD first has each field the manifest may write (read in KubeRay's
#: ``ray-operator/config/crd/bases/ray.io_rayjobs.yaml`` at each tag): an older API server drops the field
#: (or ``kubectl apply``'s strict field validation refuses it).
KUBERAY_SINCE = {
    "spec.submitterConfig": "1.2.0",
    "spec.rayClusterSpec.authOptions": "1.5.1",
    "spec.preRunningDeadlineSeconds": "1.6.0",
}
#: The fewest seconds added to ``budget.max_wall_time`` to make ``activeDeadlineSeconds``
#: (:func:`deadline_margin_s`). KubeRay counts from the RayJob's start, but the budget counts from the
#: search's start. The margin covers two things. First, the cluster's start: the head pod and the
#: ``minReplicas`` workers, with any machines the cloud adds and the images pulled. KubeRay submits the
#: job only once these pods run. Second, the search's own stop once its budget is spent: trials stopped,
#: files written. The margin is twice the default ``failure.node_start_timeout_s`` of 900 s, which is as
#: long as Ray's autoscaler waits for a node to start. That allows one node start for the cluster's
#: start, and as much again for the rest. Nodes that the autoscaler adds for waiting trials start during
#: the search, inside the budget.
DEADLINE_MARGIN_S = 1800
#: ``ttlSecondsAfterFinished``: how long the Ray cluster outlives the job, to read its logs and check the
#: results from the head pod before KubeRay deletes it.
TTL_SECONDS = 600
#: ``autoscalerOptions.idleTimeoutSeconds``: an idle worker node is removed after this long. A group never
#: goes below its ``minReplicas``. This is longer than Ray's default of 60 s, because a node started for a
#: trial takes minutes to start. So a node whose trial ended is kept for the next trial's workers, rather
#: than removed and started again. The nodes go at the end of the search, when no trial waits.
IDLE_TIMEOUT_S = 300
#: Where the ConfigMap holding the spec is mounted in every pod.
SPEC_MOUNT = "/etc/hpsearch"
#: Where the results volume is mounted in every pod; the search's ``storage_path``.
STORAGE_MOUNT = "/mnt/hpsearch-results"
#: The longest RayJob name KubeRay accepts: its RayCluster is the name plus 6 characters, at most 53.
MAX_NAME = 47
#: The largest ``activeDeadlineSeconds`` (an int32 in the CRD).
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
#: Kubernetes' name rules: a namespace is a DNS-1123 label, a PersistentVolumeClaim a DNS-1123 subdomain.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
#: Ray's own images (``rayproject/ray:2.60.0-py311-gpu``), and a tag that names its Ray (``myimage:ray-2.60.0``).
_RAY_IMAGES = frozenset({"ray", "ray-ml", "ray-llm"})
_VERSION_AT_START = re.compile(r"(\d+\.\d+\.\d+)(?![\d.])")
_RAY_IN_TAG = re.compile(r"(?:^|[-_.])ray[-_]?(\d+\.\d+\.\d+)(?![\d.])", re.IGNORECASE)
#: A word the second shell reads as it is (the characters ``shlex.quote`` leaves bare).
_SHELL_SAFE = re.compile(r"[\w@%+=:,./-]+", re.ASCII)
_SPEC_FILE = "spec.yaml"
_SPEC_VOLUME, _RESULTS_VOLUME, _SHM_VOLUME = "hpsearch-spec", "hpsearch-results", "shared-mem"
#: Resources the container spec carries; the rest go to Ray as ``rayStartParams``.
_CPU, _GPU = "CPU", "GPU"
_K8S_GPU = "nvidia.com/gpu"
_OBJECT_STORE = "object_store_memory"
#: ``storage_path: s3://bucket/x`` is read as a local folder ``<cwd>/s3:/bucket/x``: its trace.
_URI_TRACE = re.compile(r"/(s3|gs|gcs|abfs|abfss|az|hdfs|file):/")


def job_name(name: str) -> str:
    """The RayJob's name from the spec's: a DNS-1035 label (``[a-z]([-a-z0-9]*[a-z0-9])?``) of at most 47 characters.

    Example:
        >>> job_name("Digits_Quick v2")
        'digits-quick-v2'
    """
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug or not slug[0].isalpha():
        slug = f"hp-{slug}".rstrip("-")
    return slug[:MAX_NAME].rstrip("-")


def deadline_margin_s(spec: Spec) -> int:
    """The seconds ``activeDeadlineSeconds`` adds to ``budget.max_wall_time``: the cluster's start and the search's stop.

    :data:`DEADLINE_MARGIN_S`, or twice ``failure.node_start_timeout_s`` when that is longer: a spec that
    gives its nodes longer to start (large GPU images, a slow cloud) gets the cluster's start as long, so
    the deadline never ends a job whose nodes are still starting within the time the spec allows them.
    """
    return max(DEADLINE_MARGIN_S, 2 * math.ceil(spec.failure.node_start_timeout_s))


def deadline_seconds(spec: Spec) -> int | None:
    """``activeDeadlineSeconds``: ``budget.max_wall_time`` + :func:`deadline_margin_s` (``None`` without a wall-time budget)."""
    wall = spec.budget.max_wall_time
    if wall is None:
        return None
    return min(math.ceil(wall) + deadline_margin_s(spec), _INT32_MAX)


def cluster_argument(groups: Sequence[NodeGroup]) -> str:
    """The groups as one inline ``--cluster`` text for ``hpsearch run`` inside the job: ``1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}``.

    Normalised by :func:`~hpsearch.planning.cluster_shape.cluster_text`: inline whatever form ``plan``
    was given (a YAML file is not in the pod), ``memory`` in GB, every amount exact, so that
    :func:`~hpsearch.planning.cluster_shape.parse_node_groups` reads it back to the same groups.

    Raises:
        PlanError: A resource name that the inline form cannot carry (it would read back otherwise).

    Example:
        >>> cluster_argument(parse_node_groups("1x{CPU: 8, memory: 32} + 0..4x{GPU: 8, CPU: 8}"))
        '1x{CPU: 8, memory: 32} + 0..4x{CPU: 8, GPU: 8}'
    """
    text = cluster_text(groups)
    try:
        back = [(g.resources, g.min_count, g.max_count) for g in parse_node_groups(text)]
    except SpecError:
        back = []
    if back != [(g.resources, g.min_count, g.max_count) for g in groups]:
        raise PlanError(
            f"--cluster: the node groups cannot be written back as one inline --cluster for hpsearch run ({text!r} "
            "reads back otherwise): name the resources with letters, digits and _ . / -"
        )
    return text


def head_memory_gb(spec: Spec, drivers: int, workers: int = 0, *, base_gb: float = HEAD_BASE_GB) -> float:
    """The head pod's memory (GB) for ``drivers`` trial drivers and ``workers`` Train workers on it.

    ``drivers x resources.driver_memory_gb + workers x resources.worker_memory_gb + base_gb``.
    """
    return drivers * spec.resources.driver_memory_gb + workers * spec.resources.worker_memory_gb + base_gb


@dataclass
class _Doc:
    """One YAML document: its data and the comment lines to write before keys (by dotted path)."""

    data: dict[str, Any]
    comments: dict[str, list[str]] = field(default_factory=dict)
    header: list[str] = field(default_factory=list)

    def note(self, path: str, *lines: str) -> None:
        self.comments.setdefault(path, []).extend(lines)


@dataclass(frozen=True)
class _Group:
    """A Ray node group as the manifest writes it: the described node, what Ray is started with in its pod,
    a count range, and what the plan puts on one of its nodes."""

    name: str
    resources: Mapping[str, float]  # the --cluster shape: the room its pod has on a Kubernetes node
    ray: Mapping[str, float]  # what Ray is started with: the shape less what else the pod runs
    min_count: int
    max_count: int
    is_head: bool
    base_gb: float  # memory for Ray's own processes (and, on the head, the search process): an allowance
    autoscaler: bool = False  # the pod runs KubeRay's autoscaler sidecar (the head of an autoscaling cluster)
    workers: int = 0  # the most Train workers one node holds: in the plan, and of the trials that can exist
    drivers: int = 0  # the most trial drivers one node holds, likewise


@dataclass(frozen=True)
class _Options:
    """The opt-in fields of ``hpsearch plan --emit rayjob`` (none by default)."""

    auth_token: bool = False
    pre_running_deadline_s: int | None = None
    fs_group: int | None = None


def ray_groups(
    groups: Sequence[NodeGroup], *, head_base_gb: float = HEAD_BASE_GB, worker_base_gb: float = WORKER_BASE_GB
) -> list[NodeGroup]:
    """The node groups as Ray is started with them in the pods the manifest writes: what the plan is made for.

    The head node first (one node), then the head group's other nodes (workers of its shape) if it has
    several, then the other groups. Each is the described node less what else its pod runs: the head's
    CPUs less KubeRay's autoscaler sidecar, rounded down to whole CPUs (when the cluster autoscales), and,
    where the shape gives ``memory``, the memory less the sidecar and Ray's own processes
    (``head_base_gb``, ``worker_base_gb``).

    Raises:
        PlanError: A fractional CPU or GPU per node, or a node whose memory does not hold what runs there
            besides the trials (by how much).

    Example:
        >>> cluster_text(ray_groups(parse_node_groups("1x{CPU: 8, memory: 32} + 0..4x{CPU: 44, GPU: 4, memory: 170}")))
        '1x{CPU: 7, memory: 29.5} + 0..4x{CPU: 44, GPU: 4, memory: 169}'
    """
    return _node_groups(_groups_for(groups, head_base_gb, worker_base_gb))


def rayjob_plan(
    spec: Spec,
    groups: Sequence[NodeGroup],
    *,
    head_base_gb: float = HEAD_BASE_GB,
    worker_base_gb: float = WORKER_BASE_GB,
) -> Plan:
    """The plan the manifest is sized from: the spec's trials on :func:`ray_groups` at their maximum size.

    Raises:
        PlanError: As :func:`ray_groups`, or no trial fits (the planner's reason, and the nodes it planned for).
    """
    return _plan(spec, _groups_for(groups, head_base_gb, worker_base_gb))


def rayjob_manifest(
    spec: Spec,
    spec_path: str | Path,
    groups: Sequence[NodeGroup],
    *,
    image: str,
    storage_pvc: str | None,
    namespace: str | None = None,
    overrides: Sequence[str] = (),
    ray_version: str | None = None,
    command: str | None = None,
    ttl_seconds: int = TTL_SECONDS,
    head_base_gb: float = HEAD_BASE_GB,
    worker_base_gb: float = WORKER_BASE_GB,
    auth_token: bool = False,
    pre_running_deadline_s: int | None = None,
    fs_group: int | None = None,
) -> str:
    """The ConfigMap and RayJob documents that run ``spec`` on a KubeRay cluster of ``groups``, as YAML text.

    The pods are sized from :func:`rayjob_plan`: the plan at the groups' maximum size, as Ray is started in them.

    Args:
        spec: The validated spec (``--set`` overrides applied), for its name, figures and budget.
        spec_path: The spec file: its text goes into the ConfigMap as written.
        groups: The cluster's node groups (:func:`~hpsearch.planning.cluster_shape.parse_node_groups`): the
            room each pod has on its Kubernetes node.
        image: The container image every pod runs: hpsearch, the loop's packages and Ray installed.
        storage_pvc: A ReadWriteMany PersistentVolumeClaim for the results (required).
        namespace: The namespace of both documents (none: kubectl's current one).
        overrides: The ``--set KEY=VALUE`` given to ``hpsearch plan``, repeated in the entrypoint.
        ray_version: ``rayClusterSpec.rayVersion`` (the Ray installed here); omitted when ``None``.
        command: The command line that wrote the manifest, for its header.
        auth_token: ``rayClusterSpec.authOptions: {mode: token}`` (KubeRay 1.5.1 or later).
        pre_running_deadline_s: ``preRunningDeadlineSeconds`` (KubeRay 1.6.0 or later).
        fs_group: ``securityContext.fsGroup`` of every Ray pod.

    Raises:
        PlanError: No ``storage_pvc``; a namespace or claim name Kubernetes refuses; an image whose tag names
            another Ray than ``ray_version``; ``storage_path`` given as an object-store URI; a file the spec
            names that lies outside the spec's folder; a fractional CPU or GPU count per node; a node that does
            not hold what its pod runs besides the trials; no trial fits; an option out of its range.
    """
    spec_path = Path(spec_path).expanduser()
    _check_storage(spec, storage_pvc, groups)
    assert storage_pvc is not None  # _check_storage refused None
    _check_names(namespace, storage_pvc)
    _check_image(image, ray_version)
    options = _check_options(auth_token, pre_running_deadline_s, fs_group)
    name = job_name(spec.name)
    files = _spec_files(spec, spec_path)
    shapes = _groups_for(groups, head_base_gb, worker_base_gb)
    loaded = _with_loads(spec, shapes, _plan(spec, shapes))
    head, workers = loaded[0], loaded[1:]
    # `hpsearch run --cluster` takes the groups only with a min..max count among them, and refuses them
    # without (runtime/autoscaling.autoscaling_for): the same rule, on the groups as Ray is started with them.
    cluster = cluster_argument(_node_groups(shapes)) if any(g.autoscaling for g in groups) else None

    config_map = _config_map(name, namespace, files)
    job = _rayjob(
        spec,
        name,
        namespace,
        files,
        head,
        workers,
        cluster=cluster,
        image=image,
        storage_pvc=storage_pvc,
        overrides=overrides,
        ray_version=ray_version,
        ttl_seconds=ttl_seconds,
        options=options,
    )
    header = _header(spec, name, storage_pvc, ttl_seconds, command)
    return "\n".join(header) + "\n" + _dump_documents([config_map, job])


# ----------------------------------------------------------------------------- checks


def _check_storage(spec: Spec, storage_pvc: str | None, groups: Sequence[NodeGroup]) -> None:
    """Refuse what cannot keep the results: no claim, or an object-store URI read as a local folder."""
    trace = _URI_TRACE.search(str(spec.storage_path))
    if trace:
        uri = f"{trace.group(1)}://{str(spec.storage_path)[trace.end() :]}"
        raise PlanError(
            f"storage_path {uri} is an object-store URI, which hpsearch reads as the local folder "
            f"{spec.storage_path}: hpsearch writes its experiment folder with file I/O, so on Kubernetes the "
            "results go to a ReadWriteMany volume: pass --storage-pvc NAME (EFS on EKS, Filestore on GKE; "
            "README: Running on Kubernetes), and the RayJob sets storage_path to where it is mounted"
        )
    if storage_pvc:
        return
    has_workers = any(g.max_count > (1 if g.is_head else 0) for g in groups)
    why = (
        "the cluster has worker nodes, so every pod must reach storage_path, and the Ray cluster is deleted "
        "after the job (shutdownAfterJobFinishes)"
        if has_workers
        else "the Ray cluster, its head pod's disk included, is deleted after the job (shutdownAfterJobFinishes)"
    )
    raise PlanError(
        f"--emit rayjob needs --storage-pvc NAME: {why}; create a ReadWriteMany PersistentVolumeClaim "
        f"(EFS on EKS, Filestore on GKE; README: Running on Kubernetes) and name it: it is mounted at "
        f"{STORAGE_MOUNT} in every pod and becomes the search's storage_path"
    )


def _check_names(namespace: str | None, storage_pvc: str) -> None:
    """Refuse a namespace or claim name that Kubernetes would refuse, naming the rule."""
    if namespace is not None and not (len(namespace) <= 63 and _DNS1123_LABEL.fullmatch(namespace)):
        raise PlanError(
            f"--namespace {namespace!r} is not a Kubernetes namespace name: a namespace is a DNS-1123 label, at most "
            "63 characters of lowercase letters, digits and '-', starting and ending with a letter or digit "
            "(e.g. 'ml-team')"
        )
    if not (len(storage_pvc) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(storage_pvc)):
        raise PlanError(
            f"--storage-pvc {storage_pvc!r} is not a PersistentVolumeClaim name: a claim's name is a DNS-1123 "
            "subdomain, at most 253 characters of lowercase letters, digits, '-' and '.', each part between dots "
            "starting and ending with a letter or digit (e.g. 'hpsearch-results'); `kubectl get pvc` lists yours"
        )


def _image_ray_version(image: str) -> str | None:
    """The Ray version an image's tag says: ``rayproject/ray:2.60.0-py311`` (Ray's own images) or ``...:ray-2.60.0``."""
    reference = image.split("@", 1)[0]  # a digest says no version
    repository, _, tag = reference.rpartition("/")[2].partition(":")
    if not tag:
        return None
    at_start = _VERSION_AT_START.match(tag)
    if repository in _RAY_IMAGES and at_start:
        return at_start.group(1)
    named = _RAY_IN_TAG.search(tag)
    return named.group(1) if named else None


def _check_image(image: str, ray_version: str | None) -> None:
    """Refuse an image whose tag names another Ray than ``rayVersion`` (the Ray installed here)."""
    tagged = _image_ray_version(image)
    if ray_version is None or tagged is None or tagged == ray_version:
        return
    raise PlanError(
        f"--image {image} says Ray {tagged}, but this hpsearch runs Ray {ray_version}, which the manifest's "
        f"rayVersion says and the plan is made with: use an image of Ray {ray_version} (e.g. "
        f"rayproject/ray:{ray_version}-py311 with hpsearch installed), or write the manifest where Ray {tagged} "
        "is installed"
    )


def _check_options(auth_token: bool, pre_running_deadline_s: int | None, fs_group: int | None) -> _Options:
    """The opt-in fields, each within the range its Kubernetes field takes."""
    if pre_running_deadline_s is not None and not 1 <= pre_running_deadline_s <= _INT32_MAX:
        raise PlanError(
            f"--pre-running-deadline {pre_running_deadline_s}: preRunningDeadlineSeconds is a whole number of "
            f"seconds from 1 to {_INT32_MAX}"
        )
    if fs_group is not None and not 0 <= fs_group <= _INT64_MAX:
        raise PlanError(
            f"--fs-group {fs_group}: fsGroup is a group id, a whole number from 0 (e.g. 100, rayproject/ray's)"
        )
    return _Options(auth_token, pre_running_deadline_s, fs_group)


def _spec_files(spec: Spec, spec_path: Path) -> dict[str, str]:
    """The ConfigMap's files by their path relative to the spec's folder: the spec, and the ``.py`` files it names."""
    folder = spec_path.resolve().parent
    files = {_SPEC_FILE: spec_path.read_text(encoding="utf-8")}
    references = [("trainable", spec.trainable), *((f"datasets.{k}", v) for k, v in spec.datasets.items())]
    for key, ref in references:
        target = ref.rpartition(":")[0]
        if not target.endswith(".py"):
            continue  # a module: it must be importable in the image
        path = Path(target)
        try:
            relative = path.resolve().relative_to(folder)
        except ValueError:
            raise PlanError(
                f"{key} names {path}, outside the spec's folder {folder}: the RayJob ships the spec's folder's "
                "files it names in a ConfigMap; move the file beside the spec, or install it in the image "
                "and name it as module:function"
            ) from None
        files[relative.as_posix()] = path.read_text(encoding="utf-8")
    return files


# ----------------------------------------------------------------------------- the groups


def _groups_for(groups: Sequence[NodeGroup], head_base_gb: float, worker_base_gb: float) -> list[_Group]:
    """The manifest's groups: the head, the head group's other nodes (if any), then the other groups."""
    for group in groups:
        _check_whole(group.resources)
    first = groups[0]
    # (name, shape, min, max) of each worker group: the head group's other nodes are workers of the head's shape
    others = [(_group_name(i, g.resources), g.resources, g.min_count, g.max_count) for i, g in enumerate(groups) if i]
    if first.max_count > 1:
        others.insert(0, (_group_name(0, first.resources), first.resources, first.min_count - 1, first.max_count - 1))
    autoscaling = any(g.autoscaling for g in groups)
    head = _shape("head", first.resources, 1, 1, is_head=True, autoscaler=autoscaling, base_gb=head_base_gb)
    return [head, *(_shape(*o, is_head=False, autoscaler=False, base_gb=worker_base_gb) for o in others)]


def _check_whole(resources: Mapping[str, float]) -> None:
    """Refuse a fractional CPU (``ray start --num-cpus`` takes integers) or GPU (Kubernetes gives whole GPUs)."""
    cpus = resources.get(_CPU, 0.0)
    if cpus != int(cpus):
        raise PlanError(
            f"CPU: {cpus:g} per node in --cluster: `ray start --num-cpus` takes a whole number of CPUs (and "
            "KubeRay's autoscaler reads num-cpus with int()); describe each node with a whole number of CPUs, "
            f"e.g. CPU: {math.floor(cpus)} (trials may still use fractions of them)"
        )
    gpus = resources.get(_GPU, 0.0)
    if gpus != int(gpus):
        raise PlanError(
            f"GPU: {gpus:g} per node in --cluster: Kubernetes gives a pod whole GPUs ({_K8S_GPU}); "
            "describe each node with its whole number of GPUs (trials may still use fractions of them)"
        )


def _shape(
    name: str,
    resources: Mapping[str, float],
    min_count: int,
    max_count: int,
    *,
    is_head: bool,
    autoscaler: bool,
    base_gb: float,
) -> _Group:
    """A group whose Ray is started with the described node less what else its pod runs."""
    ray = dict(resources)
    if autoscaler and resources.get(_CPU, 0.0) > 0:
        ray[_CPU] = float(math.floor(resources[_CPU] - AUTOSCALER_CPU))
    if MEMORY in resources:
        memory = resources[MEMORY] / GB
        overheads = [(base_gb, _base_text(is_head))]
        if autoscaler:
            overheads.append((AUTOSCALER_MEMORY_GB, "KubeRay's autoscaler sidecar"))
        taken = sum(gb for gb, _ in overheads)
        room = _memory_quantity_gb(memory - (AUTOSCALER_MEMORY_GB if autoscaler else 0.0))  # the container's
        if room - base_gb <= 0:
            what = "the head node" if is_head else f"a node of worker group {name}"
            parts = " and ".join(f"{gb:g} GB for {why}" for gb, why in overheads)
            raise PlanError(
                f"memory: {memory:g} per node in --cluster: {what} does not hold what its pod runs besides the trials, "
                f"{parts}: {max(taken - memory, 1 / 1024):.3g} GB short, and nothing left for the trials; describe each "
                f"node with the memory a pod has on it (a little less than the machine's), more than {taken:g} GB "
                "(README: Running on Kubernetes)"
            )
        ray[MEMORY] = float(math.floor((room - base_gb) * GB))
    return _Group(name, dict(resources), ray, min_count, max_count, is_head, base_gb, autoscaler)


def _base_text(is_head: bool) -> str:
    return "Ray's head processes and the search process" if is_head else "Ray's own processes"


def _node_groups(shapes: Sequence[_Group]) -> list[NodeGroup]:
    return [NodeGroup(dict(g.ray), g.min_count, g.max_count, g.is_head) for g in shapes]


def _plan(spec: Spec, shapes: Sequence[_Group]) -> Plan:
    groups = _node_groups(shapes)
    try:
        return plan_for(spec, nodes_at(groups, "max"))
    except PlanError as err:
        raise PlanError(
            f"{err} (planned for the nodes as Ray is started in the pods, {cluster_text(groups, exact=False)}: the "
            "--cluster nodes less KubeRay's autoscaler sidecar and Ray's own processes; README: Running on Kubernetes)"
        ) from None


def _with_loads(spec: Spec, shapes: Sequence[_Group], plan: Plan) -> list[_Group]:
    """Each group with the most drivers and Train workers one of its nodes holds.

    That is what the plan puts on a node, but never more than the trials that can exist: ``total_trials``
    drivers, and their workers.
    """
    per_node = {u.node_id: (u.drivers, u.workers) for u in plan.usage}
    nodes = nodes_at(_node_groups(shapes), "max")
    trials = total_trials(spec)
    most_workers = trials * demand_for(spec).num_workers
    out: list[_Group] = []
    i = 0
    for group in shapes:
        loads = [per_node.get(node.node_id, (0, 0)) for node in nodes[i : i + group.max_count]]
        i += group.max_count
        drivers = min(max((d for d, _ in loads), default=0), trials)
        workers = min(max((w for _, w in loads), default=0), most_workers)
        out.append(replace(group, drivers=drivers, workers=workers))
    return out


def _group_name(index: int, resources: Mapping[str, float]) -> str:
    """``group1-cpu8-gpu8``: the group's place and its CPUs and GPUs (a label value: <= 63 characters)."""
    parts = [f"group{index}"]
    for key in (_CPU, _GPU):
        if resources.get(key):
            parts.append(f"{key.lower()}{_number(resources[key])}".replace(".", "p"))
    return "-".join(parts)[:63]


# ----------------------------------------------------------------------------- the documents


def _config_map(name: str, namespace: str | None, files: Mapping[str, str]) -> _Doc:
    doc = _Doc(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _metadata(f"{name}-spec", namespace, name),
            "data": {_key(path): text for path, text in files.items()},
        }
    )
    doc.header = [
        f"The spec as written{' and the .py files it names by path' if len(files) > 1 else ''}, mounted read-only "
        f"at {SPEC_MOUNT} in every pod. A loop named as module:function must be importable in the image.",
    ]
    return doc


def _key(path: str) -> str:
    """A ConfigMap key for a file's relative path (keys allow ``[-._a-zA-Z0-9]``)."""
    return re.sub(r"[^-._a-zA-Z0-9]", "_", path.replace("/", "__"))


def _metadata(name: str, namespace: str | None, instance: str) -> dict[str, Any]:
    """``metadata``: the name, the namespace if given, and labels that find both documents of one job."""
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {"app.kubernetes.io/name": "hpsearch", "app.kubernetes.io/instance": instance}
    return meta


def _rayjob(
    spec: Spec,
    name: str,
    namespace: str | None,
    files: Mapping[str, str],
    head: _Group,
    workers: Sequence[_Group],
    *,
    cluster: str | None,
    image: str,
    storage_pvc: str,
    overrides: Sequence[str],
    ray_version: str | None,
    ttl_seconds: int,
    options: _Options,
) -> _Doc:
    entrypoint = entrypoint_text(
        [
            "hpsearch",
            "run",
            f"{SPEC_MOUNT}/{_SPEC_FILE}",
            "--address",
            "auto",
            *(("--cluster", cluster) if cluster is not None else ()),
            "--set",
            f"storage_path={STORAGE_MOUNT}",
            *(arg for o in overrides if not o.startswith("storage_path=") for arg in ("--set", o)),
        ]
    )
    deadline = deadline_seconds(spec)
    job_spec: dict[str, Any] = {"entrypoint": entrypoint, "submissionMode": "K8sJobMode"}
    if deadline is not None:
        job_spec["activeDeadlineSeconds"] = deadline
    if options.pre_running_deadline_s is not None:
        job_spec["preRunningDeadlineSeconds"] = options.pre_running_deadline_s
    job_spec["shutdownAfterJobFinishes"] = True
    job_spec["ttlSecondsAfterFinished"] = ttl_seconds
    job_spec["submitterConfig"] = {"backoffLimit": SUBMITTER_BACKOFF_LIMIT}
    autoscaling = cluster is not None
    ray_cluster: dict[str, Any] = {}
    if ray_version:
        ray_cluster["rayVersion"] = ray_version
    if options.auth_token:
        ray_cluster["authOptions"] = {"mode": "token"}
    if autoscaling:
        sidecar = {"cpu": _cpu_quantity(AUTOSCALER_CPU), "memory": _memory_quantity(AUTOSCALER_MEMORY_GB, up=True)}
        ray_cluster["enableInTreeAutoscaling"] = True
        ray_cluster["autoscalerOptions"] = {
            "upscalingMode": "Default",
            "idleTimeoutSeconds": IDLE_TIMEOUT_S,
            "resources": {"requests": dict(sidecar), "limits": dict(sidecar)},
        }
    volumes = _volumes(name, files, storage_pvc)
    ray_cluster["headGroupSpec"] = {
        "rayStartParams": {"dashboard-host": "0.0.0.0", **_start_params(head.ray)},
        "template": _pod_template(spec, "ray-head", image, head, volumes, options),
    }
    worker_specs = [
        {
            "groupName": g.name,
            "replicas": g.min_count,
            "minReplicas": g.min_count,
            "maxReplicas": g.max_count,
            "rayStartParams": _start_params(g.ray),
            "template": _pod_template(spec, "ray-worker", image, g, volumes, options),
        }
        for g in workers
    ]
    if worker_specs:
        ray_cluster["workerGroupSpecs"] = worker_specs
    job_spec["rayClusterSpec"] = ray_cluster
    doc = _Doc(
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": _metadata(name, namespace, name), "spec": job_spec}
    )
    _comment_rayjob(doc, spec, head, workers, cluster, deadline, ttl_seconds, options)
    return doc


def entrypoint_text(args: Sequence[str]) -> str:
    """The RayJob's ``entrypoint`` for ``args``: each quoted for the two shells it passes, so each arrives as written.

    KubeRay's submitter splits the entrypoint into words as a shell does (Go's shlex in KubeRay 1.1 and 1.2, the
    bash script of ``ray job status || ray job submit`` from 1.3). ``ray job submit -- WORDS`` joins the words
    with ``subprocess.list2cmdline``, and Ray's job supervisor runs that line with ``/bin/sh``. So each argument
    is quoted for ``/bin/sh`` after ``list2cmdline`` (:func:`_for_the_job_shell`), and that word is quoted for
    the first shell. A word ``/bin/sh`` reads as it is stays bare.

    Example:
        >>> entrypoint_text(["hpsearch", "run", "--set", "name=$HOME", "--set", "x={a: 1}"])
        "hpsearch run --set 'name=\\\\$HOME' --set 'x={a: 1}'"
    """
    return " ".join(shlex.quote(_for_the_job_shell(arg)) for arg in args)


def _for_the_job_shell(arg: str) -> str:
    """The word ``ray job submit`` must be given for ``/bin/sh`` to read ``arg`` back after ``list2cmdline``.

    ``list2cmdline`` leaves a word without blanks as it is, but for a ``"``, which it writes ``\\"`` (doubling the
    backslashes just before it): ``/bin/sh`` reads that unquoted, so each other character it would take as
    syntax is escaped, a backslash or a line break single-quoted. A word with a blank (or none at all) it wraps
    in double quotes, with the same escapes: inside them ``/bin/sh`` unescapes ``\\ $ ` "``, so those are escaped,
    and what ``list2cmdline`` will add is taken off first.
    """
    if _SHELL_SAFE.fullmatch(arg):
        return arg
    if not arg or " " in arg or "\t" in arg:
        inside = re.sub(r'([\\$`"])', r"\\\1", arg)  # what /bin/sh must read between the double quotes
        # list2cmdline writes 2n+1 backslashes before a " for n, and 2n at the end for n: take them off
        return re.sub(r'(\\*)("|\Z)', lambda m: m.group(1)[: len(m.group(1)) // 2] + m.group(2), inside)
    return "".join(_unquoted(ch) for ch in arg)


def _unquoted(ch: str) -> str:
    """One character of a word without blanks, as ``/bin/sh`` must read it after ``list2cmdline``."""
    if ch == '"':
        return ch  # list2cmdline writes \" (no backslash comes before it here), which /bin/sh reads as "
    if ch in "\\\n":
        return f"'{ch}'"  # a backslash-newline would join lines, and \\ before a " would be doubled
    return ch if _SHELL_SAFE.fullmatch(ch) else "\\" + ch


def _volumes(name: str, files: Mapping[str, str], storage_pvc: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each pod's (volume, mount) pairs: the spec's ConfigMap, the results claim, and /dev/shm for the object store."""
    config_map: dict[str, Any] = {"name": f"{name}-spec"}
    if any("/" in path for path in files):
        config_map["items"] = [{"key": _key(path), "path": path} for path in files]
    return [
        (
            {"name": _SPEC_VOLUME, "configMap": config_map},
            {"name": _SPEC_VOLUME, "mountPath": SPEC_MOUNT, "readOnly": True},
        ),
        (
            {"name": _RESULTS_VOLUME, "persistentVolumeClaim": {"claimName": storage_pvc}},
            {"name": _RESULTS_VOLUME, "mountPath": STORAGE_MOUNT},
        ),
        ({"name": _SHM_VOLUME, "emptyDir": {"medium": "Memory"}}, {"name": _SHM_VOLUME, "mountPath": "/dev/shm"}),
    ]


def _pod_template(
    spec: Spec,
    container: str,
    image: str,
    group: _Group,
    volumes: Sequence[tuple[dict[str, Any], dict[str, Any]]],
    options: _Options,
) -> dict[str, Any]:
    amounts: dict[str, Any] = {}
    if group.resources.get(_CPU):
        amounts["cpu"] = _cpu_quantity(group.resources[_CPU] - (AUTOSCALER_CPU if group.autoscaler else 0.0))
    amounts["memory"] = _container_memory(spec, group)[1]
    if group.resources.get(_GPU):
        amounts[_K8S_GPU] = int(group.resources[_GPU])
    pod: dict[str, Any] = {}
    if options.fs_group is not None:
        pod["securityContext"] = {"fsGroup": options.fs_group}
    pod["containers"] = [
        {
            "name": container,
            "image": image,
            "resources": {"requests": dict(amounts), "limits": dict(amounts)},
            "volumeMounts": [mount for _, mount in volumes],
        }
    ]
    pod["volumes"] = [volume for volume, _ in volumes]
    return {"spec": pod}


def _container_memory(spec: Spec, group: _Group) -> tuple[float, str]:
    """The Ray container's memory (GB, and as a quantity): the described node's, less the sidecar, rounded down
    to whole MiB; or, without a ``memory`` in the shape, what the plan puts there and Ray's own, rounded up."""
    if MEMORY in group.resources:
        memory = group.resources[MEMORY] / GB - (AUTOSCALER_MEMORY_GB if group.autoscaler else 0.0)
        return memory, _memory_quantity(memory, up=False)
    need = _need_gb(spec, group)
    return need, _memory_quantity(need, up=True)


def _need_gb(spec: Spec, group: _Group) -> float:
    r = spec.resources
    return group.drivers * r.driver_memory_gb + group.workers * r.worker_memory_gb + group.base_gb


def _memory_quantity(gb: float, *, up: bool) -> str:
    """A Kubernetes memory quantity: whole GiB (``28Gi``), else MiB (``27648Mi``); rounded ``up`` or down."""
    if up:
        return f"{math.ceil(gb)}Gi" if gb >= 1 else f"{math.ceil(gb * 1024)}Mi"
    mib = round(_memory_quantity_gb(gb) * 1024)
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def _memory_quantity_gb(gb: float) -> float:
    """``gb`` rounded down to whole MiB: a container's memory inside a node of ``gb``."""
    return math.floor(round(gb * 1024, 6)) / 1024


def _start_params(resources: Mapping[str, float]) -> dict[str, str]:
    """``ray start`` options for what Ray is started with: ``num-cpus``, ``num-gpus``, ``memory`` (bytes),
    ``object-store-memory``, ``resources``."""
    params: dict[str, str] = {}
    if _CPU in resources:
        params["num-cpus"] = str(int(resources[_CPU]))  # whole: _check_whole refused a fraction
    if resources.get(_GPU):
        params["num-gpus"] = str(int(resources[_GPU]))
    if MEMORY in resources:
        params["memory"] = str(int(resources[MEMORY]))
    if resources.get(_OBJECT_STORE):
        params["object-store-memory"] = str(int(resources[_OBJECT_STORE]))
    custom = {k: v for k, v in resources.items() if k not in (_CPU, _GPU, MEMORY, _OBJECT_STORE) and v > 0}
    if custom:
        # KubeRay's documented form ('"{\"Custom1\": 1}"'): the value reaches `ray start` through a shell.
        text = json.dumps({k: _json_number(v) for k, v in custom.items()})
        params["resources"] = '"' + text.replace('"', '\\"') + '"'
    return params


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _json_number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def _cpu_quantity(cpus: float) -> str:
    """A Kubernetes CPU quantity: ``8``, or millicores (``2500m``) for a fraction."""
    return _number(cpus) if float(cpus).is_integer() else f"{math.ceil(cpus * 1000)}m"


# ----------------------------------------------------------------------------- comments


def _header(spec: Spec, name: str, storage_pvc: str, ttl_seconds: int, command: str | None) -> list[str]:
    folder = f"{STORAGE_MOUNT}/{spec.name}"
    lines = [
        f'A KubeRay RayJob that runs the hpsearch search "{spec.name}", and a ConfigMap holding its spec.',
    ]
    if command:
        lines.append(f"Written by: {command}")
    lines += [
        "",
        "Run it (the KubeRay operator v1.1 or later installed; README: Running on Kubernetes):",
        "  kubectl apply -f rayjob.yaml",
        f"  kubectl get rayjob {name} -w          # JOB STATUS: RUNNING, then SUCCEEDED or FAILED",
        f"  kubectl logs -f job/{name}            # the search's output (KubeRay's submitter Job)",
        "",
        f"Where the results go: storage_path is {STORAGE_MOUNT}, where the PersistentVolumeClaim "
        f'"{storage_pvc}" is mounted',
        f"in every pod: the experiment folder is {folder} (hpsearch_summary.json, the trials, the checkpoints).",
        "The claim is not in this file: deleting the RayJob never deletes it.",
        "",
        f"shutdownAfterJobFinishes: KubeRay deletes the Ray cluster (head and worker pods) {ttl_seconds} s after",
        "the search ends; the RayJob and the ConfigMap stay until you delete them. Before deleting them,",
        f"check that the results are kept, from the head pod within those {ttl_seconds} s:",
        f"  CLUSTER=$(kubectl get rayjob {name} -o jsonpath='{{.status.rayClusterName}}')",
        "  HEAD=$(kubectl get pod -l ray.io/cluster=$CLUSTER,ray.io/node-type=head -o name)",
        f"  kubectl exec $HEAD -- ls {folder}      # hpsearch_summary.json, hpsearch_trials.jsonl, ...",
        f"  kubectl cp ${{HEAD#pod/}}:{folder} ./{spec.name} && hpsearch report ./{spec.name}",
        "then: kubectl delete -f rayjob.yaml     (the claim, and the results on it, stay)",
        "",
        "Paths in the spec resolve inside the pods: warm_start.from against "
        f"{SPEC_MOUNT}, tracking stores against the head's",
        f"working directory: point them under {STORAGE_MOUNT} (--set) to keep them.",
    ]
    if spec.warm_start.source is not None:
        lines.append(
            f"This spec's warm_start.from is {spec.warm_start.source}, a folder on the machine that wrote this file."
        )
    return [f"# {line}".rstrip() for line in lines]


def _comment_rayjob(
    doc: _Doc,
    spec: Spec,
    head: _Group,
    workers: Sequence[_Group],
    cluster: str | None,
    deadline: int | None,
    ttl_seconds: int,
    options: _Options,
) -> None:
    node_start = spec.failure.start_timeout_s(autoscaling=True)
    doc.note(
        "spec.entrypoint",
        "Runs on the head pod (Ray's job supervisor is placed there), as `ray job submit` from KubeRay's",
        f"submitter Job; the spec is the ConfigMap's copy, the results go to the claim at {STORAGE_MOUNT}.",
        "To run it again: a new --set name=..., or `hpsearch resume` of the folder (an existing folder is refused).",
        "Each argument is quoted for the two shells it passes (the submitter's, then /bin/sh after `ray job submit`",
        "joins the words), so a --set value arrives as written: $, quotes, spaces and backslashes included.",
    )
    if cluster is not None:
        doc.note(
            "spec.entrypoint",
            "--cluster: the node groups as Ray is started in the pods (those `hpsearch plan` was given, less what else",
            "each pod runs: see rayStartParams), inline. With it `hpsearch run` plans for the nodes up now plus every",
            "node the autoscaler may add: trials that do not fit yet start their drivers, and their worker groups wait",
            "for a node (pending placement groups: the demand Ray's autoscaler adds nodes for), each up to",
            f"failure.node_start_timeout_s ({node_start:g} s). Without it, only the nodes up at the start count.",
        )
    if deadline is not None:
        assert spec.budget.max_wall_time is not None
        started = "the head and the minReplicas workers" if cluster is not None else "the head and the workers"
        added = " Nodes the autoscaler adds for waiting trials start within the budget." if cluster is not None else ""
        text = (
            f"budget.max_wall_time ({spec.budget.max_wall_time:g} s) + {deadline_margin_s(spec)} s (twice "
            f"failure.node_start_timeout_s, at least {DEADLINE_MARGIN_S} s) for the cluster to start ({started}: "
            f"machines added, images pulled; KubeRay submits the job once they run) and for the search to stop.{added} "
            "Past it KubeRay fails the RayJob (DeadlineExceeded) and deletes the cluster: the checkpoints on the "
            "claim are kept, and `hpsearch resume` continues the search."
        )
        doc.note("spec.activeDeadlineSeconds", *textwrap.wrap(text, 104))
    if options.pre_running_deadline_s is not None:
        text = (
            f"--pre-running-deadline (KubeRay {KUBERAY_SINCE['spec.preRunningDeadlineSeconds']} or later): KubeRay "
            f"fails the RayJob if its search has not started {options.pre_running_deadline_s} s after the RayJob's "
            "start, for example when no node holds a pod (Pending) or the image does not pull, instead of waiting."
        )
        doc.note("spec.preRunningDeadlineSeconds", *textwrap.wrap(text, 104))
    if deadline is None:
        doc.note("spec.shutdownAfterJobFinishes", "No activeDeadlineSeconds: the spec has no budget.max_wall_time.")
    doc.note(
        "spec.ttlSecondsAfterFinished",
        f"The Ray cluster is deleted {ttl_seconds} s after the job ends: check the results first (top of this file).",
    )
    text = (
        f"KubeRay {KUBERAY_SINCE['spec.submitterConfig']} or later (1.1 has no submitterConfig: its API server drops "
        "it, or `kubectl apply` refuses it). The submitter Job may fail this often before KubeRay fails the RayJob "
        "and deletes its cluster; KubeRay's default, 2, can end a long search whose `ray job logs --follow` loses "
        "its connection. From KubeRay 1.3 a retry finds the job submitted and only follows its logs again: it never "
        "starts the search twice. Kubernetes waits 10 s, 20 s, ... (at most 6 min) between tries."
    )
    doc.note("spec.submitterConfig", *textwrap.wrap(text, 104))
    if options.auth_token:
        text = (
            f"--auth-token (KubeRay {KUBERAY_SINCE['spec.rayClusterSpec.authOptions']} or later): Ray's token "
            "authentication. KubeRay makes a Secret named as the RayCluster (key auth_token) and gives the token to "
            "every Ray pod and to the submitter; a `ray job submit` or dashboard from elsewhere needs it "
            "(RAY_AUTH_TOKEN): kubectl get secret $CLUSTER -o jsonpath='{.data.auth_token}' | base64 -d"
        )
        doc.note("spec.rayClusterSpec.authOptions", *textwrap.wrap(text, 100))
    if cluster is not None:
        doc.note(
            "spec.rayClusterSpec.autoscalerOptions",
            "Ray's autoscaler adds a worker node while trials' worker groups wait for one, up to each group's",
            f"maxReplicas, and removes one left idle for {IDLE_TIMEOUT_S} s, never below minReplicas (Ray's default, 60 s,",
            "would remove a node between one trial and the next, and starting it again takes minutes).",
        )
        doc.note(
            "spec.rayClusterSpec.autoscalerOptions.resources",
            "The autoscaler's sidecar container in the head pod: KubeRay's defaults, written here because they are",
            "counted inside the head node (the head's Ray container gets the rest).",
        )
    r = spec.resources
    text = (
        f"The head node: the search process and the trial drivers (resources.driver_node: {r.driver_node}); it "
        f"holds {head.drivers} driver(s)" + (f" and {head.workers} Train worker(s)" if head.workers else "") + ": "
        f"the most the plan puts here, and of the spec's {total_trials(spec)} trial(s). dashboard-host 0.0.0.0: the "
        "submitter reaches the Jobs API through the head's Service (restrict it with a NetworkPolicy where other "
        "workloads share the cluster)."
    )
    doc.note("spec.rayClusterSpec.headGroupSpec", *textwrap.wrap(text, 100))
    head_path = "spec.rayClusterSpec.headGroupSpec"
    doc.note(f"{head_path}.rayStartParams.num-cpus", *_cpu_lines(head))
    doc.note(f"{head_path}.rayStartParams.memory", *_ray_memory_lines(head))
    doc.note(f"{head_path}.template.spec.securityContext", *_fs_group_lines(options))
    doc.note(f"{head_path}.template.spec.containers[0].resources", *_memory_lines(spec, head))
    doc.note(f"{head_path}.template.spec.volumes", *_placement_placeholders(head.resources))
    for i, g in enumerate(workers):
        path = f"spec.rayClusterSpec.workerGroupSpecs[{i}]"
        doc.note(
            path,
            f"{fmt_count(g)} node(s) of {fmt_resources(g.resources)}: up to {g.workers} Train worker(s) each in the plan.",
        )
        if g.min_count < g.max_count:
            doc.note(
                f"{path}.replicas",
                f"Starts at its minimum ({g.min_count}): `hpsearch run --cluster` plans for every node up to maxReplicas",
                f"({g.max_count}), and the autoscaler adds them as trials wait for their workers. A node takes minutes to",
                f"start (a machine, the image); a trial waits up to failure.node_start_timeout_s ({node_start:g} s) for one.",
            )
        doc.note(f"{path}.rayStartParams.memory", *_ray_memory_lines(g))
        doc.note(f"{path}.template.spec.securityContext", *_fs_group_lines(options))
        doc.note(f"{path}.template.spec.containers[0].resources", *_memory_lines(spec, g))
        doc.note(f"{path}.template.spec.volumes", *_placement_placeholders(g.resources))


def _cpu_lines(group: _Group) -> list[str]:
    """Why ``num-cpus`` is what it is: the shape's whole CPUs, the head's less the autoscaler sidecar."""
    if not group.autoscaler or not group.resources.get(_CPU):
        return []
    cpus = group.resources[_CPU]
    return textwrap.wrap(
        f"num-cpus: the --cluster shape's CPU: {cpus:g} less KubeRay's autoscaler sidecar ({AUTOSCALER_CPU:g} CPU; "
        f"the container gets {_cpu_quantity(cpus - AUTOSCALER_CPU)}), rounded down ({int(group.ray[_CPU])}): `ray "
        "start --num-cpus` takes whole CPUs, and the half CPU left is the head processes'.",
        96,
    )


def _ray_memory_lines(group: _Group) -> list[str]:
    """Why Ray's ``memory`` is what it is: the shape's memory less what else the pod runs."""
    if MEMORY not in group.ray:
        return []
    sidecar = f", less KubeRay's autoscaler sidecar ({AUTOSCALER_MEMORY_GB:g} GB)," if group.autoscaler else ""
    return textwrap.wrap(
        f"memory: {group.ray[MEMORY] / GB:.4g} GB (in bytes), the memory Ray plans the trials with: the --cluster "
        f"shape's {group.resources[MEMORY] / GB:g} GB{sidecar} less {group.base_gb:g} GB for "
        f"{_base_text(group.is_head)} (an allowance), all inside the described node.",
        96,
    )


def _fs_group_lines(options: _Options) -> list[str]:
    if options.fs_group is None:
        return []
    return textwrap.wrap(
        f"--fs-group: the volumes' files belong to group {options.fs_group}, so the image's user (rayproject/ray: "
        "uid 1000, gid 100) writes to a share whose root is root's, where the volume's driver applies fsGroup.",
        96,
    )


def _memory_lines(spec: Spec, group: _Group) -> list[str]:
    """Where the Ray container's memory comes from, for its comment."""
    r = spec.resources
    memory, quantity = _container_memory(spec, group)
    parts = []
    if group.drivers:
        parts.append(f"{group.drivers} driver(s) x {r.driver_memory_gb:g} GB (resources.driver_memory_gb)")
    if group.workers or not group.is_head:
        parts.append(f"{group.workers} Train worker(s) x {r.worker_memory_gb:g} GB (resources.worker_memory_gb)")
    trials = " + ".join(parts) or "no trial"
    base = f"{group.base_gb:g} GB for {_base_text(group.is_head)} (an allowance)"
    if MEMORY in group.resources:
        sidecar = f" less KubeRay's autoscaler sidecar ({AUTOSCALER_MEMORY_GB:g} GB)" if group.autoscaler else ""
        text = (
            f"memory: the --cluster shape's {group.resources[MEMORY] / GB:g} GB{sidecar} = {quantity}: {base}, and "
            f"Ray's memory (rayStartParams) for the trials, of which the plan puts {trials} here."
        )
    else:
        text = (
            f"memory: {trials} + {base} = {memory:.3g} GB, rounded up to {quantity}: the most the plan puts here, "
            "and of the trials that can exist."
        )
    if group.is_head:
        text += (
            " Ray keeps 30% of it for its object store (/dev/shm, used as objects are stored): with datasets, "
            "add their size."
        )
    return textwrap.wrap(text, 96)


def _placement_placeholders(resources: Mapping[str, float]) -> list[str]:
    """Commented nodeSelector/tolerations to fill in for the node pool this group's pods must land on."""
    if resources.get(_GPU):
        return [
            "Place these pods on the GPU node pool (uncomment and fill in; a pod asking for nvidia.com/gpu",
            "lands only on nodes whose NVIDIA device plugin advertises GPUs):",
            "nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}     # GKE: the pool's GPU type",
            "nodeSelector: {eks.amazonaws.com/nodegroup: gpu-nodes}          # EKS: the managed node group",
            "tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]   # if the GPU nodes are tainted",
        ]
    return [
        "To place these pods on a node pool (uncomment and fill in):",
        "nodeSelector: {cloud.google.com/gke-nodepool: cpu-pool}   # GKE; EKS: {eks.amazonaws.com/nodegroup: cpu-nodes}",
    ]


# ----------------------------------------------------------------------------- YAML with comments


def _dump_documents(docs: Iterable[_Doc]) -> str:
    out: list[str] = []
    for doc in docs:
        out.append("---")
        out += [f"# {line}" for line in doc.header]
        out += _mapping(doc.data, 0, "", doc.comments)
    return "\n".join(out) + "\n"


def _mapping(data: Mapping[str, Any], indent: int, path: str, comments: Mapping[str, list[str]]) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    for key, value in data.items():
        here = f"{path}.{key}" if path else key
        out += [f"{pad}# {line}".rstrip() for line in comments.get(here, ())]
        out += _entry(f"{pad}{_scalar(key)}:", value, indent, here, comments)
    return out


def _entry(prefix: str, value: Any, indent: int, path: str, comments: Mapping[str, list[str]]) -> list[str]:
    """``prefix`` (``key:`` or ``- key:``) followed by ``value``, nested under ``indent``."""
    if isinstance(value, Mapping) and value:
        return [prefix, *_mapping(value, indent + 2, path, comments)]
    if isinstance(value, list) and value:
        return [prefix, *_sequence(value, indent + 2, path, comments)]
    if isinstance(value, Mapping) or isinstance(value, list):  # empty: a YAML map or list, never the text "{}"
        return [f"{prefix} {{}}" if isinstance(value, Mapping) else f"{prefix} []"]
    if isinstance(value, str) and "\n" in value and _literal_ok(value):
        # |2: the content is indented 2 past the key (so a first line may start with spaces);
        # chomping: "-" no final line break, "" one, "+" several (each kept).
        chomp = "-" if not value.endswith("\n") else ("+" if value.endswith("\n\n") else "")
        body = value if chomp == "-" else value[:-1]
        pad = " " * (indent + 2)
        return [f"{prefix} |2{chomp}", *(f"{pad}{line}".rstrip() if line else "" for line in body.split("\n"))]
    return [f"{prefix} {_scalar(value)}"]


def _sequence(items: Sequence[Any], indent: int, path: str, comments: Mapping[str, list[str]]) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    for i, item in enumerate(items):
        here = f"{path}[{i}]"
        out += [f"{pad}# {line}".rstrip() for line in comments.get(here, ())]
        if isinstance(item, Mapping) and item:
            lines = _mapping(item, indent + 2, here, comments)
            first = next(j for j, line in enumerate(lines) if not line.lstrip().startswith("#"))
            out += lines[:first]  # the first key's comments go above the dash
            out.append(f"{pad}- {lines[first][indent + 2 :]}")
            out += lines[first + 1 :]
        else:
            out += _entry(f"{pad}-", item, indent, here, comments)
    return out


def _literal_ok(text: str) -> bool:
    """Whether ``text`` can be a literal block scalar as is: some content, printable, no carriage returns, no
    trailing spaces (YAML would drop them, and read a block of empty lines as "")."""
    return (
        text.strip("\n") != ""
        and all(ch == "\n" or ch == "\t" or ch.isprintable() for ch in text)
        and not any(line != line.rstrip(" \t") for line in text.split("\n"))
    )


_PLAIN = re.compile(r"[A-Za-z0-9_./@%+=~-][A-Za-z0-9_./@%+=~:, -]*")


def _scalar(value: Any) -> str:
    """A YAML scalar that reads back as ``value``, under YAML 1.1 (PyYAML) and 1.2 alike."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    text = str(value)
    if (
        _PLAIN.fullmatch(text)
        and not text.endswith((" ", ":"))
        and ": " not in text
        and " #" not in text
        and yaml.safe_load(text) == text
    ):
        return text
    return json.dumps(text, ensure_ascii=False)
