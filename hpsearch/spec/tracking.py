"""The spec's ``tracking`` section: every trial as one run in each experiment tracker.

Each tracker is an optional extra; one whose package is missing is refused here, at
validation, with the line that installs it. Pure: packages are looked up, never imported.

Relative locations are resolved against the current directory, as ``storage_path`` is, when
the spec is read: ``file:./mlruns`` (or a bare ``./mlruns``) -> ``file:///abs/mlruns``, and
``sqlite:///digits.db`` (SQLAlchemy's relative form) -> ``sqlite:////abs/digits.db``. The spec
as run therefore names absolute locations, and ``hpsearch resume`` run from any folder
writes to the same store. Server URLs (``http://…``, ``postgresql://…``) are kept as given.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from hpsearch.errors import Problem
from hpsearch.spec._validation import StrictModel, join_path, validate_section

__all__ = [
    "Tracking",
    "MlflowSettings",
    "WandbSettings",
    "TRACKER_PACKAGES",
    "parse_tracking",
    "absolute_mlflow_uri",
    "absolute_sqlite_url",
]


def absolute_mlflow_uri(uri: str) -> str:
    """An MLflow tracking URI with a relative local path made absolute (against the current directory)."""
    if uri.startswith("sqlite:"):
        return absolute_sqlite_url(uri)
    if uri.startswith("file:"):
        path = uri[len("file:") :]
        if path.startswith("//"):  # file://host/path or file:///abs: already absolute
            return uri
        return Path(os.path.abspath(Path(path).expanduser())).as_uri()
    if ":" not in uri.split("/", 1)[0] and not uri.startswith("databricks"):  # a bare path: a file store to MLflow
        return Path(os.path.abspath(Path(uri).expanduser())).as_uri()
    return uri


def absolute_sqlite_url(url: str) -> str:
    """A SQLAlchemy SQLite URL with a relative database file made absolute; other URLs unchanged.

    ``sqlite:///x.db`` is relative, ``sqlite:////abs/x.db`` absolute, ``sqlite://`` (no file) in memory.
    """
    prefix, sep, rest = url.partition(":///")
    if not sep or not prefix.startswith("sqlite") or rest.startswith("/") or not rest:
        return url
    path, query, params = rest.partition("?")
    return f"{prefix}:///{os.path.abspath(Path(path).expanduser())}{query}{params}"


class MlflowSettings(StrictModel):
    """MLflow: one run per trial in ``experiment_name`` (default: the search's name)."""

    tracking_uri: str | None = Field(default=None, min_length=1)  # default: MLflow's (MLFLOW_TRACKING_URI, ...)
    experiment_name: str | None = Field(default=None, min_length=1)

    @field_validator("tracking_uri")
    @classmethod
    def _absolute(cls, uri: str | None) -> str | None:
        return None if uri is None else absolute_mlflow_uri(uri)


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

    @field_validator("optuna")
    @classmethod
    def _absolute(cls, url: str | None) -> str | None:
        return None if url is None else absolute_sqlite_url(url)

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
