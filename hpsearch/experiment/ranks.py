"""Deprecated: the old name of :mod:`hpsearch.experiment.worker_ranks` (a Train worker's rank).

Renamed so that "rank" in :mod:`hpsearch.experiment` means one thing per module: a trial's place in
the ranking is :mod:`~hpsearch.experiment.ranking`, a worker's rank is ``worker_ranks``. Importing
this module warns and gives the same objects.
"""

from __future__ import annotations

import warnings

from hpsearch.experiment.worker_ranks import *  # noqa: F403 - the old module's names, re-exported unchanged
from hpsearch.experiment.worker_ranks import __all__ as __all__

warnings.warn(
    "hpsearch.experiment.ranks is deprecated: import hpsearch.experiment.worker_ranks instead",
    DeprecationWarning,
    stacklevel=2,
)
