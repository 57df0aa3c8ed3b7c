"""A resumed population-based search carries on where it was: Ray's PBT given back each restored trial's state.

Tune saves no scheduler in its experiment state, so after ``Tuner.restore`` Ray's PBT counts
every trial from time 0. Under ``synch`` a trial that was waiting at the perturbation point then
runs ahead of the others, and the weaker trials copy its later (perhaps its last) checkpoint.
:class:`hpsearch.runtime.search.pbt.HpsearchPBT` (and ``HpsearchPB2``) call the two functions here, which
read and write the scheduler's state through the door's accessors (internal ``pbt-exploit``).
"""

from __future__ import annotations

from typing import Any

from ray.tune.experiment import Trial

from hpsearch.runtime import internals

__all__ = ["carry_on", "keep_restored_checkpoint"]


def carry_on(scheduler: internals.ExploitHook, trial: Any) -> None:
    """As Tune adds ``trial`` to ``scheduler``: for a trial restored by a resume, the scheduler state it had.

    Its time, score and checkpoint come back from its last result, and the population waits at the
    next perturbation point that not every unfinished trial has reached: a trial restored at a
    perturbation point is paused there (Tune starts every pending trial), and the scheduler runs it
    when its turn comes. A new trial keeps Ray's fresh state.
    """
    if not internals.available("pbt-exploit") or trial.last_result.get(scheduler.time_attr) is None:
        return  # a new trial: Ray's fresh state is right
    states = scheduler.trial_states
    interval = int(scheduler.perturbation_interval)
    result = dict(trial.last_result)
    state = states[trial]
    state.last_train_time = result[scheduler.time_attr]
    state.last_result = result
    metric = scheduler.scheduler_metric
    if metric is not None and result.get(metric) is not None:
        state.last_score = scheduler.metric_sign * result[metric]
    state.last_checkpoint = trial.checkpoint
    if not scheduler.synch:
        state.last_perturbation_time = (state.last_train_time // interval) * interval
        return
    unfinished = [t for t in states if t.status not in (Trial.TERMINATED, Trial.ERROR)]
    if not unfinished:
        return
    sync = (min(states[t].last_train_time for t in unfinished) // interval + 1) * interval
    scheduler.next_perturbation_sync = sync
    for t in unfinished:
        states[t].last_perturbation_time = sync - interval
    time = state.last_train_time
    if trial.status == Trial.PENDING and time > 0 and time % interval == 0 and trial.checkpoint is not None:
        # At a perturbation point: it may have to wait there for the others, and Tune starts every
        # pending trial at once, so it waits paused, as Ray's synch PBT leaves it; the scheduler
        # runs it again once the population reached the point (HpsearchPBT.choose_trial_to_run).
        trial.set_status(Trial.PAUSED)


def keep_restored_checkpoint(scheduler: internals.ExploitHook, trial: Any, upper_quantile: list[Any]) -> None:
    """After Ray's step at a perturbation point: a top trial restored by a resume and not started yet keeps its
    latest checkpoint.

    Ray asks a top trial's actor to save, and such a trial has none, so Ray would record no
    checkpoint and skip the exploit. It hands over the checkpoint it would start from.
    """
    if trial not in upper_quantile or trial.status not in ("PENDING", "PAUSED"):
        return
    state = scheduler.trial_states[trial]
    if state.last_checkpoint is None:
        state.last_checkpoint = trial.checkpoint
