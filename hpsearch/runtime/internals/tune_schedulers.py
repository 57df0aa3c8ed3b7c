"""Tune's schedulers: Ray's exploit step and the per-trial state of ``PopulationBasedTraining``, and a pause
whose actor is not kept for reuse.

Internal ``tune-pause-no-reuse`` (:func:`pause_without_reuse`). Internal ``pbt-exploit``: :class:`ExploitHook`
overrides the two private steps of Ray's scheduler and calls hooks with public names; it reads and writes the
scheduler's private state through named accessors. What hpsearch does with them (the lineage, a population that
keeps moving, a resumed one that carries on) is :mod:`hpsearch.runtime.search.pbt`'s and
:mod:`hpsearch.runtime.search.resume_state`'s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hpsearch.runtime.internals.contract_checks import _assigns, _mentions, _parameters
from hpsearch.runtime.internals.registry import available

__all__ = ["Exploit", "ExploitHook", "pause_without_reuse"]

_CONTROLLER = "ray.tune.execution.tune_controller"


def _check_pause_without_reuse() -> None:
    _assigns(f"{_CONTROLLER}:TrialRunnerWrapper", "_tune_controller")
    _assigns(f"{_CONTROLLER}:TuneController", "_reuse_actors")
    _parameters(f"{_CONTROLLER}:TuneController.pause_trial", "trial", "should_checkpoint")
    _mentions(f"{_CONTROLLER}:TuneController._wrapped", '"pause_trial"')
    _mentions(f"{_CONTROLLER}:TuneController._maybe_cache_trial_actor", "if not self._reuse_actors:")
    _mentions(f"{_CONTROLLER}:TuneController._schedule_trial_stop", "self._maybe_cache_trial_actor(trial)")


def pause_without_reuse(tune_controller: Any, trial: Any) -> bool:
    """Pause ``trial`` now, from a scheduler's ``on_trial_result``, with no Tune checkpoint, and end its actor
    (internal ``tune-pause-no-reuse``): Tune would otherwise keep the actor for the next trial to reuse
    (``resources.reuse_actors``), on a node that is going away. Returns whether it could.

    ``tune_controller`` is what Tune hands a scheduler; its ``pause_trial`` is the public part, as Ray's PBT
    pauses a trial. Tune keeps an actor for reuse when its controller's ``_reuse_actors`` is set, which it
    reads as the trial's actor stops, within ``pause_trial``: it is off for that call alone.
    """
    if not available("tune-pause-no-reuse"):
        return False
    controller = tune_controller._tune_controller  # the TuneController behind the scheduler's wrapper
    reuse = controller._reuse_actors
    controller._reuse_actors = False
    try:
        tune_controller.pause_trial(trial, should_checkpoint=False)
    finally:
        controller._reuse_actors = reuse
    return True


def _check_exploit() -> None:
    scheduler = "ray.tune.schedulers.pbt:PopulationBasedTraining"
    _parameters(f"{scheduler}._exploit", "tune_controller", "trial", "trial_to_clone")
    _assigns(
        scheduler, "_trial_state", "_time_attr", "_metric", "_metric_op", "_synch", "_perturbation_interval",
        "_next_perturbation_sync",
    )  # fmt: skip
    _assigns(
        "ray.tune.schedulers.pbt:_PBTTrialState",
        "last_result", "last_checkpoint", "last_score", "last_train_time", "last_perturbation_time",
    )  # fmt: skip
    _parameters(f"{scheduler}.on_trial_add", "tune_controller", "trial")
    _parameters("ray.tune.experiment.trial:Trial.set_status", "status")
    _parameters(f"{scheduler}._checkpoint_or_exploit", "trial", "tune_controller", "upper_quantile", "lower_quantile")
    _parameters(f"{scheduler}.choose_trial_to_run", "tune_controller")
    _parameters(f"{scheduler}.on_trial_result", "tune_controller", "trial", "result")
    _mentions(f"{scheduler}.on_trial_result", "_next_perturbation_sync", "get_live_trials")


@dataclass(frozen=True)
class Exploit:
    """One exploit of PBT (or PB2), as :meth:`ExploitHook.on_exploit` is given it.

    ``trial`` continues from ``donor``'s checkpoint with a mutated config once :meth:`run`
    (Ray's own exploit step) returns; the results are each trial's last, before the exploit.
    """

    trial: Any
    donor: Any
    own_result: dict[str, Any]
    donor_result: dict[str, Any]
    donor_checkpoint: Any
    run: Callable[[], None]


class ExploitHook:
    """Mixed before Ray's ``PopulationBasedTraining`` (or ``PB2``): :meth:`on_exploit` around each exploit,
    :meth:`after_checkpoint_or_exploit` after Ray's step at a perturbation point, and the scheduler's state.

    Internal ``pbt-exploit``. Without it, the exploit goes on without the hook, and the step's hook is
    not called.
    """

    def _exploit(self, tune_controller: Any, trial: Any, trial_to_clone: Any) -> None:
        ray_exploit = functools.partial(super()._exploit, tune_controller, trial, trial_to_clone)  # type: ignore[misc]  # Ray's, next in the MRO
        if not available("pbt-exploit"):  # the exploit goes on, unrecorded (said at the search's start)
            ray_exploit()
            return
        own, donor = self.trial_states[trial], self.trial_states[trial_to_clone]
        self.on_exploit(
            Exploit(
                trial=trial,
                donor=trial_to_clone,
                own_result=dict(own.last_result or {}),
                donor_result=dict(donor.last_result or {}),
                donor_checkpoint=donor.last_checkpoint,
                run=ray_exploit,
            )
        )

    def on_exploit(self, exploit: Exploit) -> None:
        """Called for each exploit; must call ``exploit.run()`` (Ray's step) once."""
        exploit.run()

    def _checkpoint_or_exploit(
        self, trial: Any, tune_controller: Any, upper_quantile: list[Any], lower_quantile: list[Any]
    ) -> None:
        """Ray's step (a top trial's checkpoint saved, or a bottom trial exploited), then the hook's."""
        super()._checkpoint_or_exploit(trial, tune_controller, upper_quantile, lower_quantile)  # type: ignore[misc]  # Ray's
        if available("pbt-exploit"):
            self.after_checkpoint_or_exploit(trial, upper_quantile)

    def after_checkpoint_or_exploit(self, trial: Any, upper_quantile: list[Any]) -> None:
        """Called after Ray's step for ``trial`` at a perturbation point (``upper_quantile``: the top trials)."""

    @property
    def time_attr(self) -> str:
        """The result key PBT counts time in."""
        return str(self._time_attr)  # type: ignore[attr-defined]  # Ray's

    @property
    def scheduler_metric(self) -> str | None:
        """The metric PBT ranks trials by."""
        metric: str | None = self._metric  # type: ignore[attr-defined]  # Ray's
        return metric

    @property
    def metric_sign(self) -> float:
        """1.0 when PBT maximizes its metric, -1.0 when it minimizes it: a trial's score is the metric times it."""
        return float(self._metric_op)  # type: ignore[attr-defined]  # Ray's

    @property
    def synch(self) -> bool:
        """Whether the population is perturbed at once, when every live trial reached the perturbation point."""
        return bool(self._synch)  # type: ignore[attr-defined]  # Ray's

    @property
    def perturbation_interval(self) -> float:
        """How far apart, in :attr:`time_attr`, the perturbation points are."""
        return self._perturbation_interval  # type: ignore[attr-defined, no-any-return]  # Ray's, as Ray set it

    @property
    def next_perturbation_sync(self) -> float:
        """Under ``synch``: the perturbation point the population waits at."""
        return self._next_perturbation_sync  # Ray's, as Ray set it (the setter below declares it)

    @next_perturbation_sync.setter
    def next_perturbation_sync(self, point: float) -> None:
        self._next_perturbation_sync = point  # Ray's, read by its synch step

    @property
    def trial_states(self) -> dict[Any, Any]:
        """Trial -> Ray's state of it (``last_result``, ``last_checkpoint``, ``last_score``, ``last_train_time``,
        ``last_perturbation_time``), read and written as Ray's own steps do."""
        states: dict[Any, Any] = self._trial_state  # type: ignore[attr-defined]  # Ray's, set in its __init__
        return states
