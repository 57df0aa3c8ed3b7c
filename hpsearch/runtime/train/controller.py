"""What runs in each nested run's Ray Train controller: every report on its way to Tune.

This module runs in the Train controller actor, ``ray::TrainController``. The trial driver's
``TorchTrainer.fit()`` starts it on the driver's node, with 0 CPUs. Ray Train pickles the run
config's callbacks into it. :func:`aggregating_callback` builds its callback in the trial
driver, bound to that trial's Tune session, so that callback must pickle. Its class is made in
the function and travels by value. What it calls is imported here by reference, because
hpsearch is installed on every node.

In the controller, for each report:

- every rank's report is combined into the single dict Tune sees (:mod:`hpsearch.runtime.train.aggregate`);
- ``epoch`` is added when the loop reports none;
- the report is checked to hold the search's metrics, and under pbt/pb2 a checkpoint;
- it is forwarded to Tune and appended to the trial's history file.

As the callback arrives in the controller's process (unpickled there), the controller records
itself for :class:`~hpsearch.runtime.ray_workarounds.OrphanReaper` and for the trial driver's
watchdog (:class:`hpsearch.runtime.rank_watch.Watchdog`, which ends a run whose ranks hang), and its
output is copied into the trial's ``logs/controller.log`` (:func:`hpsearch.runtime.rank_watch.keep_controller_output`).
It records itself again at the first report.

With the work-arounds on, the callback is a plain Train ``UserCallback`` that sends each report to
the trial driver through its :class:`ReportChannel` (a Unix socket on the driver's node, where Ray
Train starts the controller), instead of Ray's ``TuneReportCallback`` and the queue actor it starts
for every nested run; the driver hands each report to Tune with ``ray.tune.report``.
"""

from __future__ import annotations

import os
import pickle
import select
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ray.train import UserCallback
from ray.tune.integration.ray_train import CHECKPOINT_PATH_KEY, TuneReportCallback

from hpsearch.errors import CheckpointNotReportedError, MetricNotReportedError
from hpsearch.experiment import files
from hpsearch.experiment.layout import EPOCH
from hpsearch.experiment.metrics import flat_metrics, has_metric  # has_metric: Tune's lookup (a/b in {"a": {"b": ...}})
from hpsearch.runtime import ray_workarounds, retries
from hpsearch.runtime.rank_watch import keep_controller_output
from hpsearch.runtime.train.aggregate import aggregate_metrics
from hpsearch.spec import Aggregate

__all__ = [
    "CheckpointRules",
    "ReportChannel",
    "aggregating_callback",
    "checkpoint_problem",
    "fit_serving",
    "send_report",
]


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


class ReportChannel:
    """How each forwarded report reaches the trial driver without Ray's queue actor: a Unix socket of the driver's.

    Ray's ``TuneReportCallback`` hands every report to the driver through a ``ray.util.queue.Queue``: an
    actor of its own (``ray::_QueueActor``) started for every nested run, about 1.4 CPU-seconds a trial on
    this project's machine, which the driver's main thread polls. Ray Train starts the controller on the
    driver's node (internal ``train-controller-on-driver-node``), so a socket file in a folder only this
    user can enter reaches it. The driver's thread serves it (:meth:`serve`) while ``fit()`` runs in
    another (:func:`fit_serving`) and hands each report to Tune with ``ray.tune.report``, in order; the
    controller (:func:`send_report`) waits for each report to be taken, as it waits on the one-item queue.
    """

    #: How long the serving thread waits for a report before it looks whether the run is still going.
    WAIT_S = 0.2

    def __init__(self) -> None:
        self._folder = tempfile.mkdtemp(prefix="hpsearch-")  # mode 0700: only this user reaches the socket
        self.address = os.path.join(self._folder, "reports")
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.bind(self.address)
        self._socket.listen(8)

    def serve(self, running: Callable[[], bool], deliver: Callable[[dict[str, Any]], None]) -> None:
        """Hand every report sent to ``deliver``, one at a time, in order, until ``running()`` is false and
        none is waiting. A report is answered before it is delivered: the controller goes on while the
        driver hands it to Tune, and its next report waits until that one was taken."""
        while True:
            ready, _, _ = select.select([self._socket], [], [], self.WAIT_S)
            if not ready:
                if not running():  # a run's last report was answered before its fit() could return
                    return
                continue
            connection, _ = self._socket.accept()
            with connection:
                size = int.from_bytes(_read(connection, 8), "big")
                metrics = pickle.loads(_read(connection, size))
                connection.sendall(b"k")
            deliver(metrics)

    def close(self) -> None:
        self._socket.close()
        shutil.rmtree(self._folder, ignore_errors=True)


def _read(connection: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = connection.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the report's sender closed the connection halfway")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def send_report(address: str, metrics: Mapping[str, Any]) -> None:
    """In the controller: send one report to the trial driver's :class:`ReportChannel`; return once it took it."""
    payload = pickle.dumps(dict(metrics), protocol=pickle.HIGHEST_PROTOCOL)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(address)
        connection.sendall(len(payload).to_bytes(8, "big") + payload)
        if connection.recv(1) != b"k":
            raise ConnectionError("the trial driver closed its report channel before taking the report")


def fit_serving(fit: Callable[[], Any], channel: ReportChannel, deliver: Callable[[dict[str, Any]], None]) -> None:
    """In the trial driver: run ``fit()`` in a thread of its own while this thread serves ``channel``; raise
    what ``fit()`` raised. The channel is closed when this returns or raises (Tune stopping the trial raises
    ``SystemExit`` out of ``deliver``; the nested run then ends with the driver's actor, as before)."""
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            fit()
        except BaseException as err:  # noqa: BLE001 - handed to the serving thread, which raises it
            outcome["error"] = err

    thread = threading.Thread(target=run, name="hpsearch-nested-fit", daemon=True)
    thread.start()
    try:
        channel.serve(thread.is_alive, deliver)
    finally:
        channel.close()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]


def aggregating_callback(
    aggregate: Aggregate,
    run_folder: str,
    record_controller: bool = True,
    *,
    required: Mapping[str, str] | Sequence[str] = (),
    checkpoints: CheckpointRules | None = None,
    search: str = "",
    channel: str | None = None,
) -> Any:
    """A ``TuneReportCallback`` that forwards the aggregate of all ranks, not rank 0's dict.

    It is built inside the trial, because Ray's callback binds to the Tune session of the
    trial that constructs it. Each forwarded report is also appended to the history file in
    ``run_folder``, the nested run's folder. With ``record_controller``, the controller also
    records itself there for :class:`hpsearch.runtime.ray_workarounds.OrphanReaper`.

    With ``channel`` (a :class:`ReportChannel`'s address), the callback is a plain Train
    ``UserCallback`` that sends each report, with Ray's ``checkpoint_path`` key as Ray's callback
    adds it, to the trial driver through the channel; no queue actor is started.

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

    base: type = UserCallback if channel is not None else TuneReportCallback

    class AggregatingTuneReportCallback(base):  # type: ignore[misc]  # one of Ray's two callback classes
        def __init__(self) -> None:
            super().__init__()
            # Instance state of its own: pickle calls __setstate__ only when the state is not empty, and
            # Ray's UserCallback (unlike TuneReportCallback, with its queue) leaves none.
            self.reports = 0

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
            if channel is None:
                super().after_report(run_context, [combined], checkpoint)
            else:  # what Ray's TuneReportCallback puts on its queue: the metrics, and where the checkpoint went
                send_report(channel, {**combined, CHECKPOINT_PATH_KEY: checkpoint.path} if checkpoint else combined)
            _append_history(run_folder, combined, checkpoint)

    return AggregatingTuneReportCallback()


def _append_history(run_folder: str, metrics: dict[str, Any], checkpoint: Any) -> None:
    """Keep every report of a trial, across restarts, where Tune does not overwrite it."""
    try:
        files.append_history(run_folder, metrics, checkpoint_path=checkpoint.path if checkpoint is not None else None)
    except OSError:  # the history is a record, and the report itself already went to Tune
        pass
