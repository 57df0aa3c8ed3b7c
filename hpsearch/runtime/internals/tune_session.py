"""Tune's side of a trial: the trial driver's session, the trainable's class, the SIGUSR1 handler, a trial's retries.

Internals ``tune-session-queues`` and ``tune-session-report`` (:class:`DriverSession`),
``trainable-mixins`` (:func:`add_trainable_mixin`), ``tune-interrupt``
(:func:`tune_interrupt_installed`) and ``tune-trial-retries`` (:func:`set_trial_retries_left`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from hpsearch.errors import IncompatibleLibraryError
from hpsearch.runtime.internals.registry import (
    TUNE_INTERRUPT_HANDLER,
    ContractBroken,
    _assigns,
    _mentions,
    _parameters,
    _resolve,
    _source,
    available,
)

__all__ = ["DriverSession", "add_trainable_mixin", "set_trial_retries_left", "tune_interrupt_installed"]

_SESSION = "ray.train._internal.session"
_SESSION_QUEUE_ATTRS = ("result_queue", "error_queue", "stop_event", "training_thread", "continue_lock")


def _check_session_queues() -> None:
    _resolve(f"{_SESSION}:get_session")
    _assigns(f"{_SESSION}:_TrainSession", "_inter_actor_queue", "training_started", *_SESSION_QUEUE_ATTRS)
    # The driver's main thread moves each forwarded report from the queue actor to the result queue.
    _mentions(f"{_SESSION}:_TrainSession._get_result_from_queues", "self._inter_actor_queue", "self.report(")


def _check_session_report() -> None:
    _check_session_queues()
    _parameters(f"{_SESSION}:_TrainSession.report", "metrics", "checkpoint")
    _resolve("ray.tune.integration.ray_train:CHECKPOINT_PATH_KEY")


def _check_mixins() -> None:
    _mentions("ray.tune.trainable.function_trainable:wrap_function", "__mixins__")
    _mentions("ray.tune.trainable.util:with_parameters", "__mixins__")


def _check_tune_interrupt() -> None:
    _mentions("ray.tune.tune:_setup_signal_catching", f"def {TUNE_INTERRUPT_HANDLER}(", "SIGUSR1")


def _check_trial_retries() -> None:
    _assigns("ray.tune.experiment.trial:Trial", "max_failures")
    if "self.run_metadata.num_failures <= self.max_failures" not in _source(
        _resolve("ray.tune.experiment.trial:Trial.should_recover")
    ):
        raise ContractBroken("Trial.should_recover does not compare run_metadata.num_failures with max_failures")


# ----------------------------------------------------------------------------- a trial driver's Tune session


class DriverSession:
    """A trial driver's Tune session (Ray Train's ``_TrainSession``): its queues, stop event and ``report``.

    Internals ``tune-session-queues`` and ``tune-session-report``. Tune runs the driver's
    function in a thread of the trial actor; Ray Train's ``TuneReportCallback`` puts each
    report on a one-item queue actor, and the actor's main thread moves it to the session's
    result queue through ``report``.
    """

    _originals: dict[int, Callable[..., None]] = {}

    def __init__(self, session: Any) -> None:
        self.session = session

    @classmethod
    def current(cls) -> DriverSession | None:
        """This process's Tune session; ``None`` outside a Tune trial or when the internal is missing."""
        if not available("tune-session-queues"):
            return None
        # lazy: a missing internal turns its feature off; it never fails the import
        from ray.train._internal.session import get_session

        session = get_session()
        return None if session is None else cls(session)

    @property
    def training_thread(self) -> threading.Thread | None:
        """The thread running the driver's function (``None`` before it started)."""
        thread: threading.Thread | None = self.session.training_thread
        return thread if self.session.training_started else None

    def forwarded_any(self) -> bool:
        """Whether Ray Train has forwarded a report to this session (its queue actor exists)."""
        return self.session._inter_actor_queue is not None

    def queues_empty(self) -> bool:
        """Whether no report is waiting, on the queue actor or in the result queue."""
        reports = self.session._inter_actor_queue
        try:
            return (reports is None or bool(reports.empty())) and bool(self.session.result_queue.empty())
        except Exception:  # noqa: BLE001 - the queue actor is gone: nothing is left to forward
            return True

    def stop_requested(self) -> bool:
        """Whether Tune is done with this trial (its stop event is set)."""
        return bool(self.session.stop_event.is_set())

    def stop_and_release(self) -> None:
        """Tell the driver's thread to stop, empty the queues and let a thread blocked on them go on."""
        self.session.stop_event.set()  # a thread reporting its last result leaves quietly
        self.drain()
        self.session.continue_lock.release()

    def drain(self) -> None:
        """Empty the session's queues: reports of a stopped trial that nobody will read."""
        for q in (self.session.result_queue, self.session.error_queue):
            while True:
                try:
                    q.get_nowait()
                except queue.Empty:
                    break
        reports = self.session._inter_actor_queue
        if reports is not None:
            try:
                while not reports.empty():
                    reports.get_nowait()
            except Exception:  # noqa: BLE001 - the queue actor is gone with the run
                pass

    def wrap_report(self, wrap: Callable[[Callable[..., None]], Callable[..., None]]) -> None:
        """Replace this session's ``report`` by ``wrap(original)``; again on the same session, the first is kept."""
        if not available("tune-session-report"):
            raise IncompatibleLibraryError("Ray's Tune session has no report hpsearch can wrap (tune-session-report)")
        original = self._originals.setdefault(id(self.session), self.session.report)
        self.session.report = wrap(original)


def add_trainable_mixin(fn: Callable[..., Any], mixin: type) -> bool:
    """Have Tune build ``fn``'s trainable class with ``mixin`` first (internal ``trainable-mixins``).

    Returns ``False`` (and changes nothing) when the installed Tune no longer reads the hook.
    """
    if not available("trainable-mixins"):
        return False
    fn.__mixins__ = (mixin,)  # type: ignore[attr-defined]  # the attribute Tune's wrap_function reads
    return True


def tune_interrupt_installed(handler: Any) -> bool:
    """Whether ``handler`` (the process's SIGUSR1 handler) is Tune's own (internal ``tune-interrupt``)."""
    return available("tune-interrupt") and getattr(handler, "__name__", "") == TUNE_INTERRUPT_HANDLER


# ----------------------------------------------------------------------------- a trial's retries


def set_trial_retries_left(trial: Any, left: int) -> bool:
    """In the search process: let Tune retry ``trial`` at most ``left`` more times, whatever
    ``failure.trial_retries`` left (internal ``tune-trial-retries``: its ``max_failures``, which Tune's
    ``should_recover`` compares with its failures so far). Whether it could."""
    if not available("tune-trial-retries"):
        return False
    trial.max_failures = trial.run_metadata.num_failures + left
    return True
