"""The experiment folder, without Ray: its names, its trial statuses, its readers and writers, the ranking.

- :mod:`~hpsearch.experiment.layout`: every file and folder name, and :data:`TrialStatus`.
- :mod:`~hpsearch.experiment.files`: the readers and writers of every file hpsearch writes.
- :mod:`~hpsearch.experiment.ranking`: the rule for a trial's best value and the order of trials,
  used everywhere.
- :mod:`~hpsearch.experiment.tracebacks`: the line of an error that says what went wrong.
"""

from hpsearch.experiment.files import experiment_spec, is_experiment
from hpsearch.experiment.layout import STATUSES, TrialStatus

__all__ = ["is_experiment", "experiment_spec", "STATUSES", "TrialStatus"]
