"""What Tune hands its callbacks, faked: a trial, and the events of a search in Tune's order.

The callbacks of a search (the outcome recorder, the progress printer, the trackers, the
budget's bookkeeping) are driven by hand with these, with no Ray and no training, and each
decision they make is asserted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(eq=False)  # hashable by identity, as Tune's trials are (Ray's TBX logger keys its writers by trial)
class FakeTrial:
    """The parts of a Tune ``Trial`` hpsearch's callbacks read."""

    trial_id: str
    config: dict[str, Any] = field(default_factory=dict)
    last_result: dict[str, Any] = field(default_factory=dict)
    local_path: str | None = None  # the trial's folder (``trial.path`` in storage, here the same)
    error: Any = None  # what get_error() returns (None: the recorder reads the trial's error.txt)
    status: str = "RUNNING"

    @property
    def path(self) -> str:
        return self.local_path or ""

    @property
    def evaluated_params(self) -> dict[str, Any]:
        return self.config

    def init_local_path(self) -> None:
        Path(self.path).mkdir(parents=True, exist_ok=True)

    def get_pickled_error(self) -> Any:
        return None

    def get_error(self) -> Any:
        return self.error


class TuneEvents:
    """Tune's calls to ``self.callbacks`` for a trial's start, end and error, in Tune's order."""

    callbacks: list[Any]

    def start(self, trial: FakeTrial) -> None:
        for callback in self.callbacks:
            callback.on_trial_start(0, [], trial)

    def complete(self, trial: FakeTrial) -> None:
        trial.status = "TERMINATED"
        for callback in self.callbacks:
            callback.on_trial_complete(0, [], trial)

    def error(self, trial: FakeTrial) -> None:
        trial.status = "ERROR"
        for callback in self.callbacks:
            callback.on_trial_error(0, [], trial)
