"""Ray Train's worker: the ``TrainFnUtils`` every ``ray.train`` call of a worker goes through.

Internals ``train-worker-report`` (each report's metrics made plain, each rank's reports
watched) and ``train-worker-checkpoint`` (a run's start checkpoint offered to the loop).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hpsearch.runtime.internals.contract_checks import _mentions, _parameters, _resolve
from hpsearch.runtime.internals.registry import available

__all__ = ["offer_start_checkpoint", "watch_worker_reports", "wrap_worker_reports"]


def _check_worker_report() -> None:
    module = "ray.train.v2._internal.execution.train_fn_utils"
    _resolve(f"{module}:get_train_fn_utils")
    _parameters(f"{module}:TrainFnUtils.report", "metrics")


def _check_worker_checkpoint() -> None:
    module = "ray.train.v2._internal.execution.train_fn_utils"
    _parameters(f"{module}:TrainFnUtils.get_checkpoint")
    _mentions("ray.train.v2.api.train_fn_utils:get_checkpoint", "get_train_fn_utils().get_checkpoint()")


def wrap_worker_reports(transform: Callable[[Any], dict[str, Any]]) -> bool:
    """In a Train worker: pass every ``ray.train.report``'s metrics through ``transform`` (once per process).

    Internal ``train-worker-report``: every ``ray.train`` call on a V2 worker goes through the
    process's ``TrainFnUtils`` ("can be patched if new user APIs behaviors is wanted", Ray's
    comment). Returns ``False`` when the internal is missing or this is not a Train worker.
    """
    utils = _train_fn_utils("train-worker-report")
    if utils is None:
        return False
    if id(utils) in _WRAPPED_WORKER_UTILS:
        return True
    report = utils.report

    def plain_report(metrics: Mapping[str, Any], *args: Any, **kwargs: Any) -> None:
        report(transform(metrics), *args, **kwargs)

    utils.report = plain_report  # on this process's instance only
    _WRAPPED_WORKER_UTILS.add(id(utils))
    return True


_WRAPPED_WORKER_UTILS: set[int] = set()


def watch_worker_reports(entered: Callable[[], None], left: Callable[[bool], None]) -> bool:
    """In a Train worker: call ``entered()`` as each ``ray.train.report`` starts, and ``left(ok)`` as it
    returns (``ok``) or raises; hooks given again replace the earlier ones.

    The same internal as :func:`wrap_worker_reports` (``train-worker-report``): the process's
    ``TrainFnUtils.report``, which every ``ray.train.report`` goes through. Returns ``False`` when the
    internal is missing or this is not a Train worker.
    """
    utils = _train_fn_utils("train-worker-report")
    if utils is None:
        return False
    hooks = _REPORT_HOOKS.get(id(utils))
    _REPORT_HOOKS[id(utils)] = (entered, left)
    if hooks is not None:
        return True
    report = utils.report
    key = id(utils)

    def watched_report(*args: Any, **kwargs: Any) -> None:
        before, after = _REPORT_HOOKS[key]
        before()
        try:
            report(*args, **kwargs)
        except BaseException:
            after(False)
            raise
        after(True)

    utils.report = watched_report  # on this process's instance only
    return True


_REPORT_HOOKS: dict[int, tuple[Callable[[], None], Callable[[bool], None]]] = {}


def _train_fn_utils(key: str) -> Any | None:
    """This Train worker's ``TrainFnUtils`` (what every ``ray.train`` call goes through), or ``None`` when the
    internal ``key`` is missing or this is not a Train V2 worker."""
    if not available(key):
        return None
    # lazy: a missing internal turns its feature off; it never fails the import
    from ray.train.v2._internal.execution.train_fn_utils import get_train_fn_utils

    try:
        return get_train_fn_utils()
    except RuntimeError:  # not a Train V2 worker
        return None


def offer_start_checkpoint(start: Callable[[], Any]) -> bool:
    """In a Train worker: ``ray.train.get_checkpoint()`` returns ``start()`` while the run has no checkpoint of its own.

    Internal ``train-worker-checkpoint``: ``ray.train.get_checkpoint()`` is the process's
    ``TrainFnUtils.get_checkpoint()``, patched here on this process's instance, as
    :func:`wrap_worker_reports` patches its ``report``. Returns ``False`` when the internal is
    missing or this is not a Train worker.
    """
    utils = _train_fn_utils("train-worker-checkpoint")
    if utils is None:
        return False
    own = utils.get_checkpoint

    def own_or_start() -> Any:
        found = own()
        return found if found is not None else start()

    utils.get_checkpoint = own_or_start  # on this process's instance only
    return True
