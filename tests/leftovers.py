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
