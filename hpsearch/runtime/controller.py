"""What runs in each nested run's Ray Train controller: every report on its way to Tune.

This module runs in the Train controller actor, ``ray::TrainController``. The trial driver's
``TorchTrainer.fit()`` starts it on the driver's node, with 0 CPUs. Ray Train pickles the run
config's callbacks into it. :func:`aggregating_callback` builds its callback in the trial
driver, bound to that trial's Tune session, so that callback must pickle. Its class is made in
the function and travels by value. What it calls is imported here by reference, because
hpsearch is installed on every node.

In the controller, for each report:

- every rank's report is combined into the single dict Tune sees (:mod:`hpsearch.runtime.aggregate`);
- ``epoch`` is added when the loop reports none;
- the report is checked to hold the search's metrics, and under pbt/pb2 a checkpoint;
- it is forwarded to Tune and appended to the trial's history file.

As the callback arrives in the controller's process (unpickled there), the controller records
itself for :class:`~hpsearch.runtime.ray_workarounds.OrphanReaper` and for the trial driver's
watchdog (:class:`hpsearch.runtime.rank_watch.Watchdog`, which ends a run whose ranks hang), and its
output is copied into the trial's ``logs/controller.log`` (:func:`hpsearch.runtime.rank_watch.keep_controller_output`).
It records itself again at the first report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ray.tune.integration.ray_train import TuneReportCallback

from hpsearch.errors import CheckpointNotReportedError, MetricNotReportedError
from hpsearch.experiment import files
from hpsearch.experiment.layout import EPOCH
from hpsearch.experiment.metrics import flat_metrics, has_metric  # has_metric: Tune's lookup (a/b in {"a": {"b": ...}})
from hpsearch.runtime import ray_workarounds, retries
from hpsearch.runtime.aggregate import aggregate_metrics
from hpsearch.runtime.rank_watch import keep_controller_output
from hpsearch.spec import Aggregate

__all__ = ["CheckpointRules", "aggregating_callback", "checkpoint_problem"]


@dataclass(frozen=True)
class CheckpointRules:
    """What a population-based trial's reports must carry.

    Each report needs a checkpoint. In a run that continues from a donor's checkpoint of
    ``donor_epoch``, the first report's epoch must come after it.
    """

    required: bool
    donor_epoch: int | None = None


def checkpoint_problem(checks: CheckpointRules, metrics: Mapping[str, Any], checkpoint: Any, first: bool) -> str | None:
    """Why a report cannot go on under population-based training, or ``None``."""
    epoch = metrics.get(EPOCH)
    # one line each, short enough that the trial's error line (200 characters) keeps all of it
    if checks.donor_epoch is not None and first and isinstance(epoch, (int, float)) and epoch <= checks.donor_epoch:
        return (
            f"this run continues from a checkpoint of epoch {checks.donor_epoch}, but the loop reported "
            f"epoch {epoch}: restore from ray.train.get_checkpoint() at the loop's start, or hpsearch.train.restore(model=...)"
        )
    if checks.required and checkpoint is None:
        return (
            f"pbt/pb2 need a checkpoint with every report; epoch {epoch} had none: report with "
            "hpsearch.train.report(..., model=...) or ray.train.report(..., checkpoint=...)"
        )
    return None


def aggregating_callback(
    aggregate: Aggregate,
    run_folder: str,
    record_controller: bool = True,
    *,
    required: Mapping[str, str] | Sequence[str] = (),
    checkpoints: CheckpointRules | None = None,
    search: str = "",
) -> Any:
    """A ``TuneReportCallback`` that forwards the aggregate of all ranks, not rank 0's dict.

    It is built inside the trial, because Ray's callback binds to the Tune session of the
    trial that constructs it. Each forwarded report is also appended to the history file in
    ``run_folder``, the nested run's folder. With ``record_controller``, the controller also
    records itself there for :class:`hpsearch.runtime.ray_workarounds.OrphanReaper`.

    The ``required`` metrics are the spec's metric, every objective, the scheduler's metric and every
    constrained metric (a mapping gives the spec key naming each: ``constraints[0]``; a name alone is the
    spec's ``metric``). A report without one of them raises :class:`MetricNotReportedError`, naming the
    first one missing. The report then never reaches Tune, whose own check would end the whole search
    with a ``TuneError``. Ray Train wraps the error in a ``ControllerError``. Its failure policy
    never retries that, since only failures to start the worker group are retryable controller
    errors. So ``fit()`` raises the error in the trial driver at once, without restarting the
    worker group.

    With ``search`` (the search run's token), the controller also judges each failure of the worker group
    (:mod:`hpsearch.runtime.retries`): a repeat of the failure before it is not restarted again.
    """

    named_by = dict(required) if isinstance(required, Mapping) else dict.fromkeys(required, "metric")

    class AggregatingTuneReportCallback(TuneReportCallback):
        reports = 0

        def __setstate__(self, state: dict[str, Any]) -> None:
            # Unpickled: in the controller's process as it starts (and maybe elsewhere, which changes nothing).
            self.__dict__.update(state)
            if keep_controller_output(run_folder):  # its output into the trial's logs/controller.log
                ray_workarounds.record_controller(run_folder)  # before any worker starts: the watchdog can end it
            if search:
                retries.install(run_folder, search)  # before any worker group can fail

        def after_report(self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any) -> None:
            if self.reports == 0 and record_controller:  # this runs in the controller: say which process to check on
                ray_workarounds.record_controller(run_folder)
            self.reports += 1
            combined = aggregate_metrics(metrics, aggregate.method)
            reported = list(flat_metrics(combined))  # the names as the spec's metric can give them
            # Schedulers count epochs, because epochs survive restarts and Tune's iterations start again at 1.
            # A loop that reports none gets its reports numbered, from 1 in each run of the trial.
            combined.setdefault(EPOCH, self.reports)
            retries.saw_epoch(combined[EPOCH])  # a failure after this report happened in the next epoch
            missing = next((m for m in named_by if not has_metric(combined, m)), None)
            if missing is not None:
                raise MetricNotReportedError(missing, reported, named_by[missing])
            if checkpoints is not None:
                problem = checkpoint_problem(checkpoints, combined, checkpoint, first=self.reports == 1)
                if problem is not None:
                    raise CheckpointNotReportedError(problem)
            super().after_report(run_context, [combined], checkpoint)
            _append_history(run_folder, combined, checkpoint)

    return AggregatingTuneReportCallback()  # type: ignore[no-untyped-call]  # Ray's __init__ has no annotations


def _append_history(run_folder: str, metrics: dict[str, Any], checkpoint: Any) -> None:
    """Keep every report of a trial, across restarts, where Tune does not overwrite it."""
    try:
        files.append_history(run_folder, metrics, checkpoint_path=checkpoint.path if checkpoint is not None else None)
    except OSError:  # the history is a record, and the report itself already went to Tune
        pass
