"""Tune's side of a trial: the trial driver's session, the trainable's class, the SIGUSR1 handler, a trial's retries.

Internals ``tune-session-queues`` and ``tune-session-report`` (:class:`DriverSession`),
``trainable-mixins`` (:func:`add_trainable_mixin`), ``tune-interrupt``
(:func:`tune_interrupt_installed`), ``tune-trial-retries`` (:func:`set_trial_retries_left`) and
``tune-callback-usage`` (:func:`count_callbacks_by_name`).
"""

from __future__ import annotations

import queue
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Any

from hpsearch.errors import IncompatibleLibraryError
from hpsearch.runtime.internals.contract_checks import (
    ContractBroken,
    _assigns,
    _mentions,
    _parameters,
    _resolve,
    _source,
)
from hpsearch.runtime.internals.registry import TUNE_INTERRUPT_HANDLER, available

__all__ = [
    "DriverSession",
    "add_trainable_mixin",
    "count_callbacks_by_name",
    "count_callbacks_without_imports",
    "set_trial_retries_left",
    "tune_interrupt_installed",
]

_SESSION = "ray.train._internal.session"
_USAGE = "ray.air._internal.usage"
#: The integrations' callbacks Ray's usage tag counts by class name, beside Tune's default ones
#: (``_count_callbacks`` in ray/air/_internal/usage.py imports each class to read its name).
_INTEGRATION_CALLBACKS = ("WandbLoggerCallback", "MLflowLoggerCallback", "CometLoggerCallback", "AimLoggerCallback")
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


def _check_callback_usage() -> None:
    # the module's source, not _count_callbacks': in a search's process that name is hpsearch's own once patched
    _mentions(
        _USAGE,
        "callback_counts = _count_callbacks(callbacks)",
        "def _count_callbacks(",
        *(f"import {name}" for name in _INTEGRATION_CALLBACKS),
        "DEFAULT_CALLBACK_CLASSES",
        'callback_counts["CustomLoggerCallback"] += 1',
        'callback_counts["CustomCallback"] += 1',
    )
    _mentions("ray.tune.tune:run", "air_usage.tag_callbacks(callbacks)")
    _resolve("ray.tune.utils.callback:DEFAULT_CALLBACK_CLASSES")


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


# ----------------------------------------------------------------------------- the callbacks' usage tag


def count_callbacks_by_name(callbacks: Sequence[Any] | None) -> dict[str, int]:
    """Ray's usage count of a search's callbacks (class name -> count), told by name alone.

    The same counts as Ray's ``_count_callbacks``, which imports the MLflow, W&B, Comet and Aim
    integrations (and with them MLflow and W&B when installed: about 1.1 CPU-seconds at every
    ``Tuner.fit``) only to read four class names.
    """
    # lazy: Tune's callback classes, needed in the search's process only (a trial's processes use this module too)
    from ray.tune import Callback
    from ray.tune.logger import LoggerCallback  # lazy: as above
    from ray.tune.utils.callback import DEFAULT_CALLBACK_CLASSES  # lazy: as above

    built_in = {*_INTEGRATION_CALLBACKS, *(cls.__name__ for cls in DEFAULT_CALLBACK_CLASSES)}
    counts: Counter[str] = Counter()
    for callback in callbacks or ():
        if not isinstance(callback, Callback):
            continue  # Tune refuses it later; Ray does not count it either
        name = type(callback).__name__
        if name in built_in:
            counts[name] += 1
        elif isinstance(callback, LoggerCallback):
            counts["CustomLoggerCallback"] += 1
        else:
            counts["CustomCallback"] += 1
    return dict(counts)


def count_callbacks_without_imports() -> bool:
    """In the search process, before ``Tuner.fit``: Ray's usage tag counts the callbacks by name
    (:func:`count_callbacks_by_name`, internal ``tune-callback-usage``). Whether it could."""
    if not available("tune-callback-usage"):
        return False
    usage: Any = import_module(_USAGE)
    usage._count_callbacks = count_callbacks_by_name
    return True


# ----------------------------------------------------------------------------- a trial's retries


def set_trial_retries_left(trial: Any, left: int) -> bool:
    """In the search process: let Tune retry ``trial`` at most ``left`` more times, whatever
    ``failure.trial_retries`` left (internal ``tune-trial-retries``: its ``max_failures``, which Tune's
    ``should_recover`` compares with its failures so far). Whether it could."""
    if not available("tune-trial-retries"):
        return False
    trial.max_failures = trial.run_metadata.num_failures + left
    return True
