"""Ray Tune's HyperOpt searcher: its HyperOpt ``Trials`` and the trials it suggested.

Internal ``hyperopt-trials`` (:class:`HyperOptTrialsHook`).
"""

from __future__ import annotations

from typing import Any

from hpsearch.runtime.internals.contract_checks import _assigns, _resolve
from hpsearch.runtime.internals.registry import available

__all__ = ["HyperOptTrialsHook"]


def _check_hyperopt() -> None:
    searcher = "ray.tune.search.hyperopt.hyperopt_search:HyperOptSearch"
    _resolve(f"{searcher}._setup_hyperopt")
    _assigns(searcher, "_hpopt_trials", "_live_trial_mapping", "domain", "rstate", "metric_op")


class HyperOptTrialsHook:
    """Mixed before Ray's ``HyperOptSearch``: its HyperOpt ``Trials`` and live trials (internal ``hyperopt-trials``)."""

    def _setup_hyperopt(self) -> None:
        super()._setup_hyperopt()  # type: ignore[misc]  # Ray's, next in the MRO
        if available("hyperopt-trials"):  # a spec that needs the hook was refused at start
            self.after_hyperopt_setup()

    def after_hyperopt_setup(self) -> None:
        """Called once HyperOpt's domain and trials exist."""

    @property
    def hyperopt_trials(self) -> Any:
        """HyperOpt's ``Trials`` of this searcher."""
        return self._hpopt_trials  # type: ignore[attr-defined]  # Ray's

    @property
    def live_trials(self) -> dict[str, Any]:
        """Tune trial id -> (HyperOpt trial id, trial document) of the trials suggested and not completed."""
        live: dict[str, Any] = self._live_trial_mapping  # type: ignore[attr-defined]  # Ray's
        return live
