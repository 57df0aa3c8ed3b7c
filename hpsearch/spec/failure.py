"""The ``failure`` section: retries at each level, and the timeouts that end a stuck start or report."""

from __future__ import annotations

from pydantic import Field, PositiveFloat

from hpsearch.spec._validation import StrictModel

__all__ = ["FailureSettings"]


class FailureSettings(StrictModel):
    """Retries, kept apart by level, each bounded so that a bug fails fast instead of looping."""

    worker_retries: int = Field(default=1, ge=0)
    trial_retries: int = Field(default=0, ge=0)
    controller_retries: int = Field(default=2, ge=0)
    #: Worker-group restarts after a node of the trial was drained (a spot reclaim: Ray Train's
    #: ``max_preemption_failures``), counted apart: a preemption never spends ``worker_retries`` or
    #: ``trial_retries``. Ray's own default is no limit; bounded here like every other retry, so a trial on
    #: nodes drained again and again ends in an error instead of restarting for ever. A loop that fails while it
    #: drains restarts as that failure, counted against ``worker_retries`` (Ray Train's rule).
    preemption_retries: int = Field(default=10, ge=0, le=1000)
    worker_start_timeout_s: PositiveFloat = 60.0
    #: On an autoscaling cluster (``run --cluster`` with ``min..max`` counts): how long a worker group
    #: may wait for a node the autoscaler starts, in place of ``worker_start_timeout_s`` when longer.
    #: 900 s is how long Ray's own autoscaler waits for a node to start (``AUTOSCALER_NODE_START_WAIT_S``).
    node_start_timeout_s: PositiveFloat = 900.0
    #: A trial that sends no report for this long is ended and recorded as stalled, naming the ranks
    #: that reached the report in progress and those that did not. Off (``None``) by default: a long
    #: first epoch or a long evaluation every few epochs must never be killed. Ranks that end their
    #: loops having reported unequally fail their trial at once, whatever this says.
    report_timeout_s: PositiveFloat | None = None
    #: Ray Train's preemption options (Ray 2.60): how long the surviving workers may keep running past a
    #: drained node's deadline, to finish a just-in-time checkpoint, and whether Ray Train's own report and
    #: preemption collectives may complete without the preempted workers. Ray's defaults: 0 and false.
    preemption_grace_s: float = Field(default=0.0, ge=0.0, le=3600.0, allow_inf_nan=False)
    relax_collectives_on_preemption: bool = False

    def preemption_options(self) -> dict[str, float | bool]:
        """The preemption options set away from Ray's defaults, by Ray Train's ``FailureConfig`` names."""
        chosen: dict[str, float | bool] = {}
        if self.preemption_grace_s:
            chosen["preemption_grace_s"] = self.preemption_grace_s
        if self.relax_collectives_on_preemption:
            chosen["relax_collectives_on_preemption"] = True
        return chosen

    def start_timeout_s(self, autoscaling: bool) -> float:
        """The worker-group start timeout a trial gets: longer on an autoscaling cluster, to let a node boot."""
        return (
            max(self.worker_start_timeout_s, self.node_start_timeout_s) if autoscaling else self.worker_start_timeout_s
        )
