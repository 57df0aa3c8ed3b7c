"""The ``checkpoint`` section: Ray Train's ``CheckpointConfig`` for each trial's nested run."""

from __future__ import annotations

from pydantic import PositiveInt

from hpsearch.spec._validation import StrictModel

__all__ = ["CheckpointSettings"]


class CheckpointSettings(StrictModel):
    """Ray Train's ``CheckpointConfig`` for each trial's nested run."""

    num_to_keep: PositiveInt | None = 2
