"""What a search says when it starts: the search, its folder, the cluster, where Ray keeps its logs, the plan's notes.

Code here runs in the search's process, before the first trial (``run``; ``resume`` says where
Ray's logs are).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpsearch.experiment import files
from hpsearch.formatting import plural
from hpsearch.planning.planner import Plan
from hpsearch.runtime.nodes import ray_logs
from hpsearch.spec import Spec, total_trials

__all__ = ["banner", "banner_head", "describe_autoscaling", "record_ray_logs"]


def record_ray_logs(exp_dir: Path, address: str | None, *, verbose: bool) -> str:
    """Note in the experiment folder where this Ray session keeps its logs; return the banner's line about it."""
    logs = ray_logs.describe(address)
    try:
        files.append_ray_logs(exp_dir, logs)
    except OSError:  # the search matters more than this note, and the banner still says where the logs are
        pass
    shown = "" if verbose else " (--verbose shows them here)"
    if logs.logs_dir is None:  # a Ray Client driver has no session folder of its own
        return f"Ray's logs: on the cluster's nodes{shown}; this driver's: {logs.driver_log}"
    where = " on this node (each node keeps its own)" if address else ""
    return f"Ray's logs: {logs.logs_dir}{where}{shown}"


def banner(spec: Spec, plan: Plan, logs_line: str = "", scaling: Mapping[str, Any] | None = None) -> list[str]:
    """The lines ``run`` says before the first trial: the search, its folder, the cluster, Ray's logs, the plan's notes."""
    entry = (scaling or {}).get("autoscaling")
    grows = [describe_autoscaling(spec, plan, entry)] if entry else []
    return [
        *banner_head(spec, plan),
        *grows,
        *([logs_line] if logs_line else []),
        *(f"note: {w}" for w in plan.warnings),
    ]


def describe_autoscaling(spec: Spec, plan: Plan, entry: Mapping[str, Any]) -> str:
    """The banner's line for an autoscaling cluster, from the plan file's ``autoscaling`` entry."""
    at_start = entry["at_start"]
    up = plural(entry["nodes_at_start"], "node")
    fits = (
        f"{at_start['max_concurrent_trials']} trial(s) at once fit on the {up} up now"
        if not at_start.get("waits_for_autoscaler")
        else f"no trial fits on the {up} up now ({at_start['reason']})"
    )
    return (
        f"autoscaling cluster {entry['cluster']}: {fits}, {plan.max_concurrent_trials} with every node the "
        f"autoscaler can add ({entry['max_nodes']} nodes); trials beyond what fits wait for a node up to "
        f"{spec.failure.start_timeout_s(autoscaling=True):g} s (failure.node_start_timeout_s)"
    )


def banner_head(spec: Spec, plan: Plan) -> list[str]:
    largest = spec.scaling.largest()
    worker = ", ".join(f"{k}: {v:g}" for k, v in largest.worker_bundle().items())
    up_to = "up to " if spec.scaling.searched() else ""  # with searched scaling, the plan is for the largest trial
    return [
        f"{spec.name}: {plural(total_trials(spec), 'trial')} ({spec.searcher.type} searcher, "
        f"{spec.scheduler.type} scheduler), {plan.max_concurrent_trials} at once; each trial = {up_to}"
        f"{largest.num_workers} worker(s) of {{{worker}}} + a driver of {{CPU: {spec.resources.driver_cpus:g}}}",
        f"experiment folder {spec.experiment_dir}",
    ]
