"""A search on an autoscaling Ray cluster: what hpsearch is told, what it gives Tune, what it says.

Ray 2.60 gives a driver no way to learn which nodes its cluster's autoscaler may add. The
autoscaler keeps its node types to itself. Ray Train and Ray Data read them with
``ray._private.state.state.get_cluster_config()``, but that returns ``None``, because nothing
in Ray 2.60 reports that config to the GCS. And ``ray.nodes()`` lists only the nodes that are
up now. So the user describes the cluster, as for ``plan``:
``hpsearch run --address ... --cluster '1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}'``.

With that description, the search is planned on the nodes up now plus every node the
autoscaler may still add (:func:`hpsearch.planning.autoscale.plan_run`). Tune gets the
concurrency of that plan. Trials beyond what fits now still start their drivers, on the head
as planned. Their worker groups wait as pending placement groups. That pending demand is what
makes Ray's autoscaler start nodes. As nodes join, Ray places the groups and the trials grow at
once. No trial is started that the full cluster could not hold. Meanwhile:

- Each trial's worker-group start timeout is ``failure.node_start_timeout_s`` instead of
  ``failure.worker_start_timeout_s``. Its default of 900 s is as long as Ray's autoscaler
  waits for a node to start.
- The progress printer says whether the waiting trials are ``waiting for a node to start``
  or ``cannot be placed``. The first means nodes the autoscaler may add would hold them. The
  second means the cluster is at its maximum size, or its other nodes would not hold them.
  This is printed when it changes and with every status line.

The described groups are recorded in the experiment's plan file, so ``resume`` knows them too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hpsearch.errors import ClusterError
from hpsearch.planning.autoscale import waiting_for_workers
from hpsearch.planning.cluster_shape import NodeGroup, parse_node_groups
from hpsearch.runtime.nodes.connect import cluster_nodes, waiting_worker_groups
from hpsearch.spec import FailureSettings, Spec

__all__ = ["Autoscaling", "autoscaling_for", "from_plan", "failure_for", "worker_shapes", "placement_status"]


@dataclass(frozen=True)
class Autoscaling:
    """The node groups an autoscaling cluster may grow to, and the ``--cluster`` text that gave them."""

    cluster: str
    groups: tuple[NodeGroup, ...]


def autoscaling_for(cluster: str | None, address: str | None) -> Autoscaling | None:
    """``run --cluster``: the groups the cluster at ``address`` may grow to (``None`` without ``--cluster``).

    Raises:
        SpecError: The description is wrong (``--cluster term N``: what is allowed).
        ClusterError: No ``address`` (an embedded Ray has no autoscaler), or no group with a
            ``min..max`` count (nothing for the autoscaler to add).
    """
    if cluster is None:
        return None
    groups = tuple(parse_node_groups(cluster))
    if not address:
        raise ClusterError(
            "--cluster on run describes what the autoscaler of the cluster at --address may add to it; hpsearch's "
            "embedded Ray has no autoscaler: give --address (or run it as a Ray job), or leave --cluster out"
        )
    if not any(g.autoscaling for g in groups):
        raise ClusterError(
            f"--cluster {cluster!r} gives every node group a fixed count: on run, --cluster says what the "
            "autoscaler may add, as min..max counts (e.g. '1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}'); use "
            "`hpsearch plan --cluster` to plan for a cluster you do not have"
        )
    return Autoscaling(cluster, groups)


def from_plan(plan: Mapping[str, Any] | None) -> Autoscaling | None:
    """The groups a search was run with, from its plan file's ``autoscaling`` entry (``resume``)."""
    entry = (plan or {}).get("autoscaling")
    if not isinstance(entry, Mapping) or not entry.get("cluster"):
        return None
    return Autoscaling(str(entry["cluster"]), tuple(parse_node_groups(str(entry["cluster"]))))


def failure_for(spec: Spec, autoscaling: Autoscaling | None) -> FailureSettings:
    """The spec's ``failure`` settings as a trial gets them: on an autoscaling cluster, a worker group may
    wait ``failure.node_start_timeout_s`` for a node to start."""
    timeout = spec.failure.start_timeout_s(autoscaling=autoscaling is not None)
    return spec.failure.model_copy(update={"worker_start_timeout_s": timeout})


def worker_shapes(spec: Spec) -> list[list[dict[str, float]]]:
    """Every worker group a trial of the spec can make (several when the search varies the trials' scale)."""
    return [[scaling.worker_bundle()] * scaling.workers for scaling in spec.scaling.combinations()]


def placement_status(spec: Spec, groups: tuple[NodeGroup, ...]) -> str | None:
    """Why trials of this search wait for their workers, or ``None`` when none waits (asks Ray)."""
    waiting = waiting_worker_groups(worker_shapes(spec))
    if not waiting:
        return None
    return waiting_for_workers(spec, groups, cluster_nodes(), waiting)
