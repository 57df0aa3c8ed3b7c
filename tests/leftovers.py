"""The placement groups a search left behind: what the Ray tests check after each search."""

from __future__ import annotations

import time
from typing import Any

#: How long a search's placement groups may take to go once it ended (Ray Train's cleaner, hpsearch's sweep).
LEFTOVER_GRACE_S = 20.0


def placement_groups_left(ray: Any, before: set[str], grace_s: float = LEFTOVER_GRACE_S) -> dict[str, dict[str, Any]]:
    """The placement groups not in ``before`` and not removed, waiting up to ``grace_s`` for them to go."""
    deadline = time.monotonic() + grace_s
    while True:
        left = {
            pg_id: {"state": g["state"], "bundles": list(g["bundles"].values()), "strategy": g["strategy"]}
            for pg_id, g in ray.util.placement_group_table().items()
            if pg_id not in before and g["state"] != "REMOVED"
        }
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def train_leftovers(ray: Any, timeout_s: float = LEFTOVER_GRACE_S) -> tuple[list[Any], list[str]]:
    """Placement groups not removed and Train actors still alive once things settle, waiting up to ``timeout_s``."""
    from ray.util.state import list_actors

    deadline = time.monotonic() + timeout_s
    while True:
        groups = [g for g in ray.util.placement_group_table().values() if g["state"] != "REMOVED"]
        actors = [
            a.class_name
            for a in list_actors(filters=[("state", "=", "ALIVE")], limit=1000)
            if "Train" in a.class_name or "Worker" in a.class_name or "Trainable" in a.class_name
        ]
        if (not groups and not actors) or time.monotonic() > deadline:
            return groups, actors
        time.sleep(0.5)
