"""The spec's ``tracking`` section: every trial as one run in each experiment tracker.

Each tracker is an optional extra; one whose package is missing is refused here, at
validation, with the line that installs it. Pure: packages are looked up, never imported.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Literal

from pydantic import Field

from hpsearch.errors import Problem
from hpsearch.spec._validation import StrictModel, join_path, validate_section

__all__ = ["Tracking", "MlflowSettings", "WandbSettings", "TRACKER_PACKAGES", "parse_tracking"]


class MlflowSettings(StrictModel):
    """MLflow: one run per trial in ``experiment_name`` (default: the search's name)."""

    tracking_uri: str | None = Field(default=None, min_length=1)
    experiment_name: str | None = Field(default=None, min_length=1)


class WandbSettings(StrictModel):
    """Weights & Biases: one run per trial in ``project`` (default: the search's name)."""

    project: str | None = Field(default=None, min_length=1)
    entity: str | None = Field(default=None, min_length=1)
    group: str | None = Field(default=None, min_length=1)
    mode: Literal["online", "offline", "disabled"] = "online"


class Tracking(StrictModel):
    """Which trackers record the search. All off by default."""

    mlflow: MlflowSettings | None = None
    wandb: WandbSettings | None = None
    tensorboard: bool = False
    optuna: str | None = Field(default=None, min_length=1)  # an Optuna storage URL, e.g. sqlite:///digits.db

    def enabled(self) -> list[str]:
        """The trackers switched on, in the order of the spec reference."""
        names = []
        if self.mlflow is not None:
            names.append("mlflow")
        if self.wandb is not None:
            names.append("wandb")
        if self.tensorboard:
            names.append("tensorboard")
        if self.optuna is not None:
            names.append("optuna")
        return names


#: tracker -> (module that must be importable, the extra that installs it)
TRACKER_PACKAGES: dict[str, tuple[str, str]] = {
    "mlflow": ("mlflow", "mlflow"),
    "wandb": ("wandb", "wandb"),
    "tensorboard": ("tensorboardX", "tensorboard"),
    "optuna": ("optuna", "dashboard"),
}


def parse_tracking(raw: Any) -> tuple[Tracking | None, list[Problem]]:
    """Validate ``tracking``; a tracker whose package is missing is a problem naming its pip line."""
    if isinstance(raw, dict):  # `mlflow: true` / `wandb: {}` / `mlflow:` (null) all mean "on, with defaults"
        raw = dict(raw)
        for key in ("mlflow", "wandb"):
            if key in raw and (raw[key] is True or raw[key] is None):
                raw[key] = {}
            elif key in raw and raw[key] is False:
                del raw[key]
    settings, problems = validate_section(Tracking, raw, "tracking")
    if settings is None:
        return None, problems
    for name in settings.enabled():
        module, extra = TRACKER_PACKAGES[name]
        if importlib.util.find_spec(module) is None:
            problems.append(
                Problem(
                    join_path("tracking", name),
                    f'needs the {module} package, which is not installed: pip install "hpsearch[{extra}]"',
                )
            )
    return (None if problems else settings), problems
