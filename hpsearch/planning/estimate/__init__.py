"""How long a search will take and what it will use, before it runs (``hpsearch plan SPEC --estimate``).

- :mod:`~hpsearch.planning.estimate.timing`: what one trial costs (``Timing``), from ``hpsearch check``'s record and the flags.
- :mod:`~hpsearch.planning.estimate.workload`: the search as the model runs it (``Workload``), from a spec and its plan.
- :mod:`~hpsearch.planning.estimate.engine`: one simulated search: the plan's trial slots as a discrete-event simulation.
- :mod:`~hpsearch.planning.estimate.policy`: a scheduler model's interface and the trial it sees; FIFO, the base model.
- :mod:`~hpsearch.planning.estimate.asha`: Tune's ASHA re-derived (rungs, brackets, the ``np.nanpercentile`` cutoff).
- :mod:`~hpsearch.planning.estimate.median`: Tune's median stopping rule re-derived.
- :mod:`~hpsearch.planning.estimate.hyperband`: Tune's synchronous HyperBand re-derived (bands, brackets, halving).
- :mod:`~hpsearch.planning.estimate.pbt`: Tune's PBT (and PB2's schedule) re-derived (turns, quantiles, exploits, synch).
- :mod:`~hpsearch.planning.estimate.spread`: a figure over the simulated searches (``Spread``) and NumPy's percentile, to the last bit.
- :mod:`~hpsearch.planning.estimate.outcome`: the estimate: ``SEEDS`` simulated searches read as ranges, with their notes.

A model of the schedule, not a scheduler: the search itself still runs on Tune. Pure: no Ray.
"""

from __future__ import annotations

from hpsearch._renamed import renamed
from hpsearch.planning.estimate.engine import SimulatedSearch, simulate
from hpsearch.planning.estimate.outcome import SEEDS, Estimate, estimate
from hpsearch.planning.estimate.spread import PERCENTILES, Spread
from hpsearch.planning.estimate.timing import EPOCH_VARIATION, Timing, timing_from
from hpsearch.planning.estimate.workload import EPOCHS_KEY, Workload, epochs_for, trial_resources, workload_for

__all__ = [
    "SEEDS",
    "PERCENTILES",
    "EPOCH_VARIATION",
    "EPOCHS_KEY",
    "Timing",
    "Workload",
    "SimulatedSearch",
    "Spread",
    "Estimate",
    "timing_from",
    "epochs_for",
    "workload_for",
    "trial_resources",
    "simulate",
    "estimate",
]

__getattr__ = renamed(
    __name__, {"Run": ("SimulatedSearch", SimulatedSearch)}
)  # "run" is the command and Ray Train's run
