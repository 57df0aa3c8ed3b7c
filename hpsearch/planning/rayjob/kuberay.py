"""What the RayJob says to KubeRay beyond the cluster: its name, its deadline, the submitter's retries, the
cluster's time to live and idle timeout, the mounts, and which KubeRay each optional field needs.

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
- **Opt-in fields**, each needing a newer KubeRay (:data:`KUBERAY_SINCE`): ``authOptions`` (Ray's token
  authentication), ``preRunningDeadlineSeconds``; and the pods' ``securityContext.fsGroup`` (any KubeRay).
"""

from __future__ import annotations

import math
import re

from hpsearch.spec import Spec

__all__ = [
    "job_name",
    "deadline_seconds",
    "deadline_margin_s",
    "SUBMITTER_BACKOFF_LIMIT",
    "KUBERAY_SINCE",
    "DEADLINE_MARGIN_S",
    "TTL_SECONDS",
    "IDLE_TIMEOUT_S",
    "SPEC_MOUNT",
    "STORAGE_MOUNT",
]

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
