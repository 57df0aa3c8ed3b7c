"""A KubeRay ``RayJob`` for a spec and a described cluster: ``hpsearch plan SPEC --cluster SHAPE --emit rayjob``.

The plan says how many trials run at once and where; this module writes the same plan as the
two Kubernetes documents that run the search on a KubeRay cluster: a ``ConfigMap`` holding the
spec file (and the ``.py`` files it names by path), and a ``ray.io/v1`` ``RayJob`` whose Ray
cluster has the described node groups and whose entrypoint is ``hpsearch run SPEC --address auto``.
It is the plan rendered for a cluster manager, as :mod:`~hpsearch.planning.render` renders it for
a person: pure (no Ray, no Kubernetes client), plain data in, YAML text with comments out.

The pods are sized in :mod:`.sizing`, the refusals made in :mod:`.checks`, the entrypoint quoted in
:mod:`.shell`, the comments written in :mod:`.comments` and the text in :mod:`.yaml_text`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpsearch.errors import PlanError
from hpsearch.planning.cluster_shape import SPOT_ENV, SPOT_VALUE, NodeGroup
from hpsearch.planning.rayjob.checks import _check_image, _check_names, _check_options, _check_storage, _Options
from hpsearch.planning.rayjob.comments import _comment_rayjob, _header
from hpsearch.planning.rayjob.credentials import credentials_for
from hpsearch.planning.rayjob.kuberay import (
    IDLE_TIMEOUT_S,
    SPEC_MOUNT,
    STORAGE_MOUNT,
    SUBMITTER_BACKOFF_LIMIT,
    TTL_SECONDS,
    deadline_seconds,
    job_name,
)
from hpsearch.planning.rayjob.shell import entrypoint_text
from hpsearch.planning.rayjob.sizing import (
    _CPU,
    _GPU,
    _K8S_GPU,
    AUTOSCALER_CPU,
    AUTOSCALER_MEMORY_GB,
    HEAD_BASE_GB,
    WORKER_BASE_GB,
    _container_memory,
    _cpu_quantity,
    _Group,
    _groups_for,
    _memory_quantity,
    _node_groups,
    _plan,
    _start_params,
    _with_loads,
    cluster_argument,
)
from hpsearch.planning.rayjob.yaml_text import _Doc, _dump_documents
from hpsearch.spec import Spec

__all__ = ["rayjob_manifest"]

_SPEC_FILE = "spec.yaml"
_SPEC_VOLUME, _RESULTS_VOLUME, _SHM_VOLUME = "hpsearch-spec", "hpsearch-results", "shared-mem"


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
    credentials = credentials_for(spec, _spec_files(spec, spec_path), _SPEC_FILE, overrides)
    files, overrides = credentials.files, credentials.overrides
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
        head_env=credentials.env(name),
    )
    header = _header(spec, name, storage_pvc, ttl_seconds, command, credentials=credentials, namespace=namespace)
    return "\n".join(header) + "\n" + _dump_documents([config_map, job])


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
    head_env: Sequence[Mapping[str, Any]] = (),
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
        "template": _pod_template(spec, "ray-head", image, head, volumes, options, env=head_env),
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
    env: Sequence[Mapping[str, Any]] = (),
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
    main: dict[str, Any] = {"name": container, "image": image}
    if group.spot:  # Ray labels the node spot from it, as the plan that sized this manifest expects
        env = [*env, {"name": SPOT_ENV, "value": SPOT_VALUE}]
    if env:  # the head's credentials (the job's Secret: rayjob/credentials.py); a spot group's mark
        main["env"] = [dict(e) for e in env]
    main["resources"] = {"requests": dict(amounts), "limits": dict(amounts)}
    main["volumeMounts"] = [mount for _, mount in volumes]
    pod["containers"] = [main]
    pod["volumes"] = [volume for volume, _ in volumes]
    return {"spec": pod}
