"""How big each pod is, and what Ray is started with in it: the groups the plan is made for.

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
  (:func:`ray_groups`), back as ``--cluster`` (:func:`cluster_argument`, one shell word). This is
  the same rule ``hpsearch run --cluster`` applies itself (:func:`hpsearch.runtime.search.autoscaling.autoscaling_for`). ``hpsearch run`` then
  plans for the nodes up now plus every node the autoscaler may add. Trials that do not fit yet
  start their drivers, and their worker groups wait as pending placement groups. Ray's
  autoscaler (``enableInTreeAutoscaling``) adds nodes for that demand, up to ``maxReplicas``.
  A node takes minutes to start, because a machine must start and an image must be pulled. A
  trial waits ``failure.node_start_timeout_s`` for one. Idle nodes, for example at the end of
  the search, are removed after :data:`~.kuberay.IDLE_TIMEOUT_S`, but never below ``minReplicas``.

  A fixed cluster has ``replicas = minReplicas = maxReplicas`` and no ``--cluster``, because
  ``run`` refuses a ``--cluster`` without a range.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hpsearch.errors import PlanError, SpecError
from hpsearch.planning.cluster_shape import NodeGroup, cluster_text, nodes_at, parse_node_groups
from hpsearch.planning.for_spec import demand_for, plan_for
from hpsearch.planning.planner import Plan
from hpsearch.planning.resources import GB, MEMORY
from hpsearch.spec import Spec, total_trials

__all__ = [
    "ray_groups",
    "rayjob_plan",
    "cluster_argument",
    "head_memory_gb",
    "HEAD_BASE_GB",
    "WORKER_BASE_GB",
    "AUTOSCALER_CPU",
    "AUTOSCALER_MEMORY_GB",
]

#: Memory (GiB) the head pod gets on top of the trials' drivers: the GCS, the raylet, the dashboard and
#: its agents, the search process itself (455 MB resident at the end of a 200-trial search,
#: ``benchmarks/scale.py``), and idle pool workers. An allowance, not a measurement of its own.
HEAD_BASE_GB = 2.0
#: Memory (GiB) each worker pod gets on top of its Train workers: the raylet and the agents every Ray
#: node runs. An allowance, like :data:`HEAD_BASE_GB`.
WORKER_BASE_GB = 1.0
#: CPUs and memory (GiB) of KubeRay's autoscaler sidecar, the second container of the head pod when
#: ``enableInTreeAutoscaling`` is on: KubeRay's defaults (500m, 512Mi), written in ``autoscalerOptions.resources``
#: so that what is counted inside the head node is what runs.
AUTOSCALER_CPU = 0.5
AUTOSCALER_MEMORY_GB = 0.5
#: Resources the container spec carries; the rest go to Ray as ``rayStartParams``.
_CPU, _GPU = "CPU", "GPU"
_K8S_GPU = "nvidia.com/gpu"
_OBJECT_STORE = "object_store_memory"


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
    spot: bool = False  # preemptible nodes: its pods carry Ray's market-type label (SPOT_ENV)


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


def cluster_argument(groups: Sequence[NodeGroup]) -> str:
    """The groups as one inline ``--cluster`` text for ``hpsearch run`` inside the job: ``1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}``.

    Normalised by :func:`~hpsearch.planning.cluster_shape.cluster_text`: inline whatever form ``plan``
    was given (a YAML file is not in the pod), ``memory`` in GiB, every amount exact, so that
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
    """The head pod's memory (GiB) for ``drivers`` trial drivers and ``workers`` Train workers on it.

    ``drivers x resources.driver_memory_gb + workers x resources.worker_memory_gb + base_gb``.
    """
    return drivers * spec.resources.driver_memory_gb + workers * spec.resources.worker_memory_gb + base_gb


def _groups_for(groups: Sequence[NodeGroup], head_base_gb: float, worker_base_gb: float) -> list[_Group]:
    """The manifest's groups: the head, the head group's other nodes (if any), then the other groups."""
    for group in groups:
        _check_whole(group.resources)
    first = groups[0]
    # (name, shape, min, max, spot) of each worker group: the head group's other nodes are workers of the head's
    # shape, never spot
    others = [
        (_group_name(i, g.resources), g.resources, g.min_count, g.max_count, g.spot) for i, g in enumerate(groups) if i
    ]
    if first.max_count > 1:
        others.insert(
            0, (_group_name(0, first.resources), first.resources, first.min_count - 1, first.max_count - 1, False)
        )
    autoscaling = any(g.autoscaling for g in groups)
    head = _shape("head", first.resources, 1, 1, is_head=True, autoscaler=autoscaling, base_gb=head_base_gb)
    workers = [
        _shape(name, shape, low, high, is_head=False, autoscaler=False, base_gb=worker_base_gb, spot=spot)
        for name, shape, low, high, spot in others
    ]
    return [head, *workers]


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
    spot: bool = False,
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
            parts = " and ".join(f"{gb:g} GiB for {why}" for gb, why in overheads)
            raise PlanError(
                f"memory: {memory:g} per node in --cluster: {what} does not hold what its pod runs besides the trials, "
                f"{parts}: {max(taken - memory, 1 / 1024):.3g} GiB short, and nothing left for the trials; describe each "
                f"node with the memory a pod has on it (a little less than the machine's), more than {taken:g} GiB "
                "(README: Running on Kubernetes)"
            )
        ray[MEMORY] = float(math.floor((room - base_gb) * GB))
    return _Group(name, dict(resources), ray, min_count, max_count, is_head, base_gb, autoscaler, spot=spot)


def _base_text(is_head: bool) -> str:
    return "Ray's head processes and the search process" if is_head else "Ray's own processes"


def _node_groups(shapes: Sequence[_Group]) -> list[NodeGroup]:
    return [NodeGroup(dict(g.ray), g.min_count, g.max_count, g.is_head, spot=g.spot) for g in shapes]


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


def _container_memory(spec: Spec, group: _Group) -> tuple[float, str]:
    """The Ray container's memory (GiB, and as a quantity): the described node's, less the sidecar, rounded down
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
