"""The manifest's comments: its header (how to run it, where the results go, how to keep them) and, above each
key, why it holds what it holds. Each decision the manifest makes is said where it is made.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

from hpsearch.planning.cluster_shape import SPOT_ENV, SPOT_LABEL, fmt_count
from hpsearch.planning.rayjob.checks import _Options
from hpsearch.planning.rayjob.credentials import Credentials, secret_name
from hpsearch.planning.rayjob.kuberay import (
    DEADLINE_MARGIN_S,
    IDLE_TIMEOUT_S,
    KUBERAY_SINCE,
    SPEC_MOUNT,
    STORAGE_MOUNT,
    deadline_margin_s,
)
from hpsearch.planning.rayjob.sizing import (
    _CPU,
    _GPU,
    AUTOSCALER_CPU,
    AUTOSCALER_MEMORY_GB,
    _base_text,
    _container_memory,
    _cpu_quantity,
    _Group,
)
from hpsearch.planning.rayjob.yaml_text import _Doc
from hpsearch.planning.resources import GB, MEMORY, fmt_resources
from hpsearch.spec import Spec, total_trials


def _header(
    spec: Spec,
    name: str,
    storage_pvc: str,
    ttl_seconds: int,
    command: str | None,
    *,
    credentials: Credentials | None = None,
    namespace: str | None = None,
) -> list[str]:
    folder = f"{STORAGE_MOUNT}/{spec.name}"
    lines = [
        f'A KubeRay RayJob that runs the hpsearch search "{spec.name}", and a ConfigMap holding its spec.',
    ]
    if command:
        lines.append(f"Written by: {command}")
    lines += [
        "",
        "Run it (the KubeRay operator v1.1 or later installed; README: Running on Kubernetes):",
        *_secret_lines(name, credentials, namespace),
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


def _secret_lines(name: str, credentials: Credentials | None, namespace: str | None) -> list[str]:
    """The command that creates the job's Secret, when the tracker URLs need one (never its values)."""
    if credentials is None or not credentials.variables:
        return []
    values = " ".join(f"--from-literal={v}=..." for v in credentials.variables)
    moved = f" ({', '.join(credentials.literal)}: the password the spec held, left out of this file)"
    return [
        f"  kubectl create secret generic {secret_name(name)}{f' -n {namespace}' if namespace else ''} {values}",
        f"                                        # the tracker URLs' credentials{moved if credentials.literal else ''}",
    ]


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
    """Say above each key of the RayJob why it holds what it holds: the job's keys, then the cluster's."""
    _comment_job(doc, spec, cluster, deadline, ttl_seconds, options)
    _comment_cluster(doc, spec, head, workers, cluster, options)


def _comment_job(
    doc: _Doc, spec: Spec, cluster: str | None, deadline: int | None, ttl_seconds: int, options: _Options
) -> None:
    """The job's keys: the entrypoint, the deadlines, the cluster's time to live, the submitter, authentication."""
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


def _comment_cluster(
    doc: _Doc, spec: Spec, head: _Group, workers: Sequence[_Group], cluster: str | None, options: _Options
) -> None:
    """The Ray cluster's keys: the autoscaler, the head group, and each worker group."""
    node_start = spec.failure.start_timeout_s(autoscaling=True)
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
        if g.spot:
            doc.note(f"{path}.template.spec.containers[0].env", *_SPOT_LINES)
        doc.note(f"{path}.template.spec.securityContext", *_fs_group_lines(options))
        doc.note(f"{path}.template.spec.containers[0].resources", *_memory_lines(spec, g))
        doc.note(f"{path}.template.spec.volumes", *_placement_placeholders(g.resources))


#: What a spot group's pods need beyond the manifest: the cloud's own spot node selector and toleration.
_SPOT_LINES = (
    f"A spot group (--cluster ..., spot): Ray labels these nodes spot ({SPOT_LABEL}) from {SPOT_ENV}, as",
    "the plan that sized this manifest counts them. Putting the pods on spot machines is your cloud's: add its node",
    'selector and toleration to template.spec (GKE: cloud.google.com/gke-spot: "true"; EKS:',
    "eks.amazonaws.com/capacityType: SPOT; AKS: kubernetes.azure.com/scalesetpriority: spot).",
)


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
    sidecar = f", less KubeRay's autoscaler sidecar ({AUTOSCALER_MEMORY_GB:g} GiB)," if group.autoscaler else ""
    return textwrap.wrap(
        f"memory: {group.ray[MEMORY] / GB:.4g} GiB (in bytes), the memory Ray plans the trials with: the --cluster "
        f"shape's {group.resources[MEMORY] / GB:g} GiB{sidecar} less {group.base_gb:g} GiB for "
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
        parts.append(f"{group.drivers} driver(s) x {r.driver_memory_gb:g} GiB (resources.driver_memory_gb)")
    if group.workers or not group.is_head:
        parts.append(f"{group.workers} Train worker(s) x {r.worker_memory_gb:g} GiB (resources.worker_memory_gb)")
    trials = " + ".join(parts) or "no trial"
    base = f"{group.base_gb:g} GiB for {_base_text(group.is_head)} (an allowance)"
    if MEMORY in group.resources:
        sidecar = f" less KubeRay's autoscaler sidecar ({AUTOSCALER_MEMORY_GB:g} GiB)" if group.autoscaler else ""
        text = (
            f"memory: the --cluster shape's {group.resources[MEMORY] / GB:g} GiB{sidecar} = {quantity}: {base}, and "
            f"Ray's memory (rayStartParams) for the trials, of which the plan puts {trials} here."
        )
    else:
        text = (
            f"memory: {trials} + {base} = {memory:.3g} GiB, rounded up to {quantity}: the most the plan puts here, "
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
