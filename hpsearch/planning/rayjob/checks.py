"""What the manifest refuses before it is written: a storage that cannot keep the results, a namespace or claim
name Kubernetes refuses, an image of another Ray, an opt-in field out of its range.

Storage: hpsearch writes its experiment folder with ordinary file I/O, so ``storage_path`` is a
folder: a ReadWriteMany ``PersistentVolumeClaim`` (``--storage-pvc``; EFS, Filestore, NFS) mounted at
:data:`~.kuberay.STORAGE_MOUNT` in every pod, passed as ``--set storage_path=...``. The claim is not
part of the manifest, so deleting the RayJob never deletes the results. Without one the manifest is
refused: the Ray cluster is deleted after the job (``shutdownAfterJobFinishes``), and with worker
nodes every pod must reach the folder.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hpsearch.errors import PlanError
from hpsearch.planning.cluster_shape import NodeGroup
from hpsearch.planning.rayjob.kuberay import _INT32_MAX, STORAGE_MOUNT
from hpsearch.spec import Spec

_INT64_MAX = 2**63 - 1
#: Kubernetes' name rules: a namespace is a DNS-1123 label, a PersistentVolumeClaim a DNS-1123 subdomain.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
#: Ray's own images (``rayproject/ray:2.60.0-py311-gpu``), and a tag that names its Ray (``myimage:ray-2.60.0``).
_RAY_IMAGES = frozenset({"ray", "ray-ml", "ray-llm"})
_VERSION_AT_START = re.compile(r"(\d+\.\d+\.\d+)(?![\d.])")
_RAY_IN_TAG = re.compile(r"(?:^|[-_.])ray[-_]?(\d+\.\d+\.\d+)(?![\d.])", re.IGNORECASE)
#: ``storage_path: s3://bucket/x`` is read as a local folder ``<cwd>/s3:/bucket/x``: its trace.
_URI_TRACE = re.compile(r"/(s3|gs|gcs|abfs|abfss|az|hdfs|file):/")


@dataclass(frozen=True)
class _Options:
    """The opt-in fields of ``hpsearch plan --emit rayjob`` (none by default)."""

    auth_token: bool = False
    pre_running_deadline_s: int | None = None
    fs_group: int | None = None


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
