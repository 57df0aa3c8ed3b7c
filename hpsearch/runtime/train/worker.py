"""What runs in each Ray Train worker of a nested run, around the user's loop.

This module runs in every Train worker actor, ``ray::RayTrainWorker``. There is one per rank,
on any node. The trial driver hands Ray Train the function :func:`worker_loop` returns, and Ray
pickles it into each worker. So this module stays light to import there: no Tune, no torch of
its own, nothing of the search process. The function it returns is a closure over the user's
loop alone.

In the worker, rank 0 records the run's worker placement group for a reused trial actor
(:func:`hpsearch.runtime.trial.reuse.record_worker_group`). Every rank keeps its log and its progress
(reports entered and completed, how its loop ended) in its attempt's folder of the trial's
``logs/`` (:class:`hpsearch.runtime.rank_watch.RankRecord`), which the trial driver watches for
unequal reports and stalls. While the loop runs, the process knows that attempt's folder
(:func:`hpsearch.experiment.files.set_current_attempt`), where :func:`hpsearch.train.report` records a notice
that a node of the worker group is being drained, and where it reads the notice the trial driver writes when
its own node is (:func:`hpsearch.experiment.driver_drains.watch_folder`). Every report is made plain Python before Ray sees it
(:func:`plain_reports`). The loop's return value is dropped.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from hpsearch.experiment import files
from hpsearch.experiment.driver_drains import watch_folder
from hpsearch.runtime.internals import wrap_worker_reports
from hpsearch.runtime.rank_watch import RankRecord
from hpsearch.runtime.train import transplant
from hpsearch.runtime.train.aggregate import plain_metrics
from hpsearch.runtime.trial import reuse

__all__ = ["worker_loop", "plain_reports"]


def worker_loop(
    train_loop: Callable[..., Any],
    run_folder: str | None = None,
    *,
    workarounds: bool = True,
    driver_drains: bool = False,
) -> Callable[..., None]:
    """The user's loop as each Train worker runs it: reports made plain, the return value dropped.

    With ``run_folder`` (the trial's ``train/<trial_id>/``), rank 0 records the run's worker
    placement group there first (:func:`hpsearch.runtime.trial.reuse.record_worker_group`), and every
    rank keeps its output and progress in the folder's ``logs/attempt-<N>/`` while its loop runs
    (:class:`hpsearch.runtime.rank_watch.RankRecord`; an error the loop raises ends its log).

    ``driver_drains``: the trial driver watches its node for a drain (``resources.driver_node: any``), and
    :func:`hpsearch.train.report` reads its notice in ``run_folder`` (:mod:`hpsearch.experiment.driver_drains`).

    ``workarounds``: the Ray work-arounds' switch as the search process read it; off, a run from a donor's
    checkpoint leaves PyTorch's ``load_state_dict`` as it is (:func:`hpsearch.runtime.train.transplant.take_over`).

    The loop keeps its arity. Ray Train calls a loop that has a required parameter with the
    config, and a loop without one with nothing. The loop's return value would travel to the
    controller, and Ray refuses that for anything holding a tensor. Nothing reads it.
    """
    required = _required_parameters(train_loop)
    if required > 1:
        return train_loop  # Ray Train refuses it with its own message

    def hpsearch_worker(*args: dict[str, Any]) -> None:  # a *args counts as one: Ray Train passes the config
        record = None
        if run_folder is not None:
            reuse.record_worker_group(run_folder)
            record = RankRecord.start(run_folder)
        # where hpsearch.train.report records a drain notice the loop reads (experiment/preemptions.py)
        files.set_current_attempt(record.folder if record is not None else None)
        watch_folder(run_folder if driver_drains and run_folder is not None else None)
        transplant.take_over(workarounds)  # a run from a donor's checkpoint (pbt/pb2): the loop sees it as its own
        plain_reports()
        try:
            train_loop(*args[:required])
        except BaseException as err:
            if record is not None:
                record.end(err)
            raise
        finally:
            files.set_current_attempt(None)
            watch_folder(None)
        if record is not None:
            record.end()

    return hpsearch_worker


def _required_parameters(fn: Callable[..., Any]) -> int:
    """How many arguments Ray Train takes ``fn`` to require.

    They are the positional ones without a default, with a ``*args`` counting as one. This is the
    rule of ``ray.train._internal.utils.count_required_parameters``.
    """
    positional = (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
    )
    return sum(1 for p in inspect.signature(fn).parameters.values() if p.default is p.empty and p.kind in positional)


def plain_reports() -> None:
    """Make every ``ray.train.report`` of this worker pass its metrics through :func:`plain_metrics`.

    Ray Train refuses a metric that is a torch tensor, with a ``ValueError`` in the worker. Its
    checkpoint bookkeeping fails on a NumPy ``float32`` or ``int64``, because its pydantic
    snapshot cannot serialise them. So a loop that reports ``loss`` as the criterion returned it
    would fail. If Ray's worker has no report that hpsearch can wrap (the internal
    ``train-worker-report``), the search says so at its start. Reports then go through
    unchanged, and the controller still converts NumPy values.
    """
    wrap_worker_reports(plain_metrics)
