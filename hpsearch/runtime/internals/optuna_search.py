"""Ray Tune's Optuna searcher: the study it builds and the Optuna trial behind each Tune trial.

Internals ``optuna-study-setup`` (:meth:`OptunaStudyHook.after_study_setup`,
:meth:`OptunaStudyHook.knows_trial`), ``optuna-constraints`` (:meth:`OptunaStudyHook.set_constraints`)
and ``optuna-failed-trials`` (:meth:`OptunaStudyHook.tell_study`). What hpsearch tells the study
(an errored trial as infeasible) is :mod:`hpsearch.runtime.search.searchers`'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hpsearch.runtime.internals.contract_checks import _assigns, _parameters
from hpsearch.runtime.internals.registry import available

__all__ = ["OptunaStudyHook"]

_SEARCHER = "ray.tune.search.optuna.optuna_search:OptunaSearch"


def _check_optuna() -> None:
    _parameters(f"{_SEARCHER}._setup_study", "mode")
    _assigns(_SEARCHER, "_ot_study", "_space", "_metric", "_ot_trials")


def _check_optuna_failed() -> None:
    _parameters(f"{_SEARCHER}.on_trial_complete", "trial_id", "result", "error")
    _assigns(_SEARCHER, "_ot_study", "_ot_trials", "_completed_trials")


def _check_optuna_constraints() -> None:
    _parameters(f"{_SEARCHER}.on_trial_complete", "trial_id", "result", "error")
    _assigns(_SEARCHER, "_ot_trials")
    _parameters(
        "optuna.trial._trial:Trial.set_constraint", "key", "value"
    )  # Optuna 5's; constraints_func is deprecated


class OptunaStudyHook:
    """Mixed before Ray's ``OptunaSearch``: :meth:`after_study_setup` once its study exists (internal ``optuna-study-setup``)."""

    def _setup_study(self, mode: str | list[str]) -> None:
        super()._setup_study(mode)  # type: ignore[misc]  # Ray's, next in the MRO
        if not available("optuna-study-setup"):  # a spec that needs the hook was refused at start
            return
        self.after_study_setup(
            self._ot_study,  # type: ignore[attr-defined]  # Ray's
            self._space,  # type: ignore[attr-defined]  # Ray's
            self._metric,  # type: ignore[attr-defined]  # Ray's
        )

    def after_study_setup(self, study: Any, space: Any, metric: str | list[str] | None) -> None:
        """Called with the new study, the searcher's space and its metric (a list with several objectives)."""

    def optuna_trial(self, trial_id: str) -> Any:
        """The Optuna trial this Tune trial was suggested as (internal ``optuna-failed-trials``)."""
        return self._ot_trials[trial_id]  # type: ignore[attr-defined]  # Ray's

    def tell_study(self, trial_id: str, values: float | list[float], state: Any) -> None:
        """Tell the study this Tune trial's ``values`` and Optuna ``state`` now, and have Ray's own later
        completion of it ignored (internal ``optuna-failed-trials``: a completed trial is in Ray's
        ``_completed_trials``)."""
        self._ot_study.tell(self.optuna_trial(trial_id), values, state=state)  # type: ignore[attr-defined]  # Ray's
        self._completed_trials.add(trial_id)  # type: ignore[attr-defined]  # Ray's: a second completion is ignored

    def set_constraints(self, trial_id: str, constraints: Mapping[str, float]) -> bool:
        """Set the constraint values (name -> value, feasible when at most 0) of this Tune trial's Optuna trial,
        before Ray's ``on_trial_complete`` tells it (internal ``optuna-constraints``). Whether it could."""
        if not available("optuna-constraints"):
            return False
        trial = self._ot_trials.get(trial_id)  # type: ignore[attr-defined]  # Ray's
        if trial is None:
            return False
        for name, value in constraints.items():
            trial.set_constraint(name, value)
        return True

    def knows_trial(self, trial_id: str) -> bool:
        """Whether the study holds an Optuna trial for this Tune trial.

        One that Tune restored but the searcher's saved state never suggested does not (see
        :class:`hpsearch.runtime.search.searchers.ResumableOptunaSearch`). Without the internal, every
        trial counts as known, which is Ray's own behaviour.
        """
        if not available("optuna-study-setup"):
            return True
        return trial_id in self._ot_trials  # type: ignore[attr-defined]  # Ray's
