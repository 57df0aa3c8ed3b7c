"""Ray Tune's TensorBoardX logger callback: its per-trial writers and results.

Internal ``tensorboard-writers`` (:class:`TBXWriters`).
"""

from __future__ import annotations

from typing import Any

from hpsearch.runtime.internals.contract_checks import _assigns

__all__ = ["TBXWriters"]


def _check_tbx() -> None:
    _assigns("ray.tune.logger.tensorboardx:TBXLoggerCallback", "_trial_writer", "_trial_result")


class TBXWriters:
    """Mixed before Ray's ``TBXLoggerCallback``: its per-trial writers and hparams results (internal ``tensorboard-writers``)."""

    @property
    def trial_writers(self) -> dict[Any, Any]:
        """Trial -> its open ``SummaryWriter``."""
        writers: dict[Any, Any] = self._trial_writer  # type: ignore[attr-defined]  # Ray's
        return writers

    @property
    def trial_results(self) -> dict[Any, Any]:
        """Trial -> the metrics Ray writes as the trial's hparams entry when it ends."""
        results: dict[Any, Any] = self._trial_result  # type: ignore[attr-defined]  # Ray's
        return results

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its callbacks into the experiment state; open writers are not picklable.
        return {**self.__dict__, "_trial_writer": {}, "_trial_result": {}}
