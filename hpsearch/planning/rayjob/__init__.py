"""The plan as a KubeRay ``RayJob`` (``hpsearch plan SPEC --cluster SHAPE --emit rayjob``): plain data in, YAML text out.

- :mod:`~hpsearch.planning.rayjob.manifest`: the ConfigMap and the RayJob that run the search (``rayjob_manifest``).
- :mod:`~hpsearch.planning.rayjob.sizing`: each pod's size and what Ray is started with in it; the plan made for that.
- :mod:`~hpsearch.planning.rayjob.credentials`: a tracker URL's password taken from a Secret, not written in the manifest.
- :mod:`~hpsearch.planning.rayjob.checks`: what is refused before writing (storage, names, image, opt-in fields).
- :mod:`~hpsearch.planning.rayjob.kuberay`: the job's name, deadline, retries, timeouts, mounts; each field's KubeRay.
- :mod:`~hpsearch.planning.rayjob.shell`: the entrypoint, each argument quoted for the two shells it passes.
- :mod:`~hpsearch.planning.rayjob.comments`: the manifest's header and the comment that says why above each key.
- :mod:`~hpsearch.planning.rayjob.yaml_text`: YAML text with comments above keys (PyYAML writes none; it checks each scalar).

Pure: no Ray, no Kubernetes client. Refusals raise :class:`~hpsearch.errors.PlanError`; the CLI prints it as a
single ``Error:`` line and exits with 2.
"""

from __future__ import annotations

from hpsearch.planning.rayjob.kuberay import (
    DEADLINE_MARGIN_S,
    IDLE_TIMEOUT_S,
    KUBERAY_SINCE,
    SPEC_MOUNT,
    STORAGE_MOUNT,
    SUBMITTER_BACKOFF_LIMIT,
    TTL_SECONDS,
    deadline_margin_s,
    deadline_seconds,
    job_name,
)
from hpsearch.planning.rayjob.manifest import rayjob_manifest
from hpsearch.planning.rayjob.shell import entrypoint_text
from hpsearch.planning.rayjob.sizing import (
    AUTOSCALER_CPU,
    AUTOSCALER_MEMORY_GB,
    HEAD_BASE_GB,
    WORKER_BASE_GB,
    cluster_argument,
    head_memory_gb,
    ray_groups,
    rayjob_plan,
)

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
