"""What a trial uses that no bundle reserves: the CPU its helper processes use on its driver's node, measured.

``hpsearch plan`` prints it under "not reserved" and ``--format json`` under ``not_reserved``: a figure
to read next to the plan, not a reservation the planner makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["HelperCpu", "HELPER_CPU"]


@dataclass(frozen=True)
class HelperCpu:
    """What a nested trial's helper processes use on its driver's node, where Ray reserves no CPU for them.

    Ray Train starts the controller, the synchronisation actor and the placement-group cleaner of every nested
    run with 0 CPUs, on
    the trial driver's node, so no plan of bundles counts them; the trial driver uses CPU beyond its
    own small bundle while its run starts. A measured figure, not a reservation: ``cpu_s`` is the
    CPU-seconds one trial's start, reports and teardown cost in those processes (``processes``), and
    ``ray_defaults_cpu_s`` the same with ``HPSEARCH_RAY_WORKAROUNDS=0`` (Ray's own nested run, which
    also starts a queue actor and a Ray Data DatasetManager beside it).
    """

    cpu_s: float
    ray_defaults_cpu_s: float
    processes: tuple[str, ...]
    measured: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "cpu_s_per_trial": self.cpu_s,
            "ray_defaults_cpu_s_per_trial": self.ray_defaults_cpu_s,
            "processes": list(self.processes),
            "measured": self.measured,
        }


#: The figure ``hpsearch plan`` gives for what a trial's helpers use beyond the plan (benchmarks/trial_start.py).
HELPER_CPU = HelperCpu(
    # trial driver + Train controller + sync actor: 1.00 + 1.75 + 1.34 (runs: 4.8, 4.1, 4.1), plus Ray Train's
    # placement-group cleaner, which the search keeps: 1.53 on the same quiet host (trial_start_before.json)
    cpu_s=5.6,
    ray_defaults_cpu_s=11.5,  # the same 2.79 + 3.09 + 1.44, cleaner 1.70, DatasetManager 1.51, queue actor 0.93
    processes=("trial driver", "Train controller", "synchronisation actor", "placement-group cleaner"),
    measured=(
        "benchmarks/trial_start.py: 3 sequential 2-worker trials of a 2-report loop, Ray 2.60.0, 2 CPUs, "
        "median of 3 runs, 2026-12-04"
    ),
)
