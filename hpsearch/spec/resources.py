"""The ``resources`` section: what hpsearch reserves for each trial's driver, and trials at once."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt

from hpsearch.spec._validation import StrictModel

__all__ = ["Resources"]


class Resources(StrictModel):
    """What hpsearch reserves for the trial driver, and how many trials may run at once."""

    driver_cpus: PositiveFloat = 0.25
    max_concurrent_trials: Literal["auto"] | PositiveInt = "auto"
    driver_node: Literal["head", "any"] = "head"
    driver_memory_gb: float = Field(default=1.0, ge=0)
    worker_memory_gb: float = Field(default=0.7, ge=0)
    #: Run the next trial in a finished trial's driver actor (Tune's ``reuse_actors``), which saves
    #: starting a process per trial; the previous nested run is ended first (runtime/trial/reuse.py).
    reuse_actors: bool = True
    #: This search's weight on a cluster other searches share (``--address``): shares of the cluster are
    #: in proportion to it (planning/shares.py). It changes nothing for a search alone.
    priority: float = Field(default=1.0, gt=0, le=1000, allow_inf_nan=False)
