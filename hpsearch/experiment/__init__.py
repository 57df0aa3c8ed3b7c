"""The experiment folder, without Ray: its names, its trial statuses, its readers and writers, the ranking.

- :mod:`~hpsearch.experiment.layout`: every file and folder name, and :data:`TrialStatus`.
- :mod:`~hpsearch.experiment.files`: the readers and writers of every file hpsearch writes (re-exporting the next six).
- :mod:`~hpsearch.experiment.folder_io`: low-level reading and writing, and the folder's safety rules for paths and links.
- :mod:`~hpsearch.experiment.folder_format`: the folder's format version; a newer one refused.
- :mod:`~hpsearch.experiment.spec_as_run`: the spec as run, written once and read back by one reader.
- :mod:`~hpsearch.experiment.usage`: every run of each trial's driver and of the search (budgets, resource-hours).
- :mod:`~hpsearch.experiment.attempts`: a trial's attempt folders, each rank's log and progress record.
- :mod:`~hpsearch.experiment.preemptions`: the drain notices an attempt's loop read, and the restart that followed.
- :mod:`~hpsearch.experiment.driver_drains`: a trial driver's node being drained: its notice, the save, the pause.
- :mod:`~hpsearch.experiment.tune_files`: Ray Tune's own files (trial folders, its experiment state), read as data.
- :mod:`~hpsearch.experiment.trial_status`: the one rule for a trial's status, from its records and Tune's files.
- :mod:`~hpsearch.experiment.metrics`: a report's metrics flattened as Tune does, and its epoch.
- :mod:`~hpsearch.experiment.ranking`: the rule for a trial's best value and the order of trials, used everywhere.
- :mod:`~hpsearch.experiment.worker_ranks`: a Train worker rank's progress, and the hangs it shows.
- :mod:`~hpsearch.experiment.ranks`: deprecated: ``worker_ranks``' old name, which warns and re-exports it.
- :mod:`~hpsearch.experiment.failures`: a worker group's failures compared attempt by attempt (no blind retries).
- :mod:`~hpsearch.experiment.tracebacks`: the line of an error that says what went wrong.
- :mod:`~hpsearch.experiment.check`: ``hpsearch check``'s one-trial spec and its verdicts, read from its folder.
- :mod:`~hpsearch.experiment.folder_lock`: one search per folder: the lock ``run``, ``resume`` and ``check`` take.
"""

from hpsearch.experiment.files import experiment_spec, is_experiment
from hpsearch.experiment.layout import STATUSES, TrialStatus

__all__ = ["is_experiment", "experiment_spec", "STATUSES", "TrialStatus"]
