"""The spec's ``tracking`` section: every trial as one run in each experiment tracker.

Each tracker is an optional extra; one whose package is missing is refused here, at
validation, with the line that installs it. Pure: packages are looked up, never imported.

Relative locations are resolved against the current directory, as ``storage_path`` is, when
the spec is read: ``file:./mlruns`` (or a bare ``./mlruns``) -> ``file:///abs/mlruns``, and
``sqlite:///digits.db`` (SQLAlchemy's relative form) -> ``sqlite:////abs/digits.db``. The spec
as run therefore names absolute locations, and ``hpsearch resume`` run from any folder
writes to the same store. Server URLs (``http://…``, ``postgresql://…``) are kept as given.

MLflow's store when the spec names none (:func:`mlflow_tracking_uri`): ``MLFLOW_TRACKING_URI``
if set, else the SQLite store MLflow recommends, ``sqlite:///<experiment folder>/mlflow.db``:
in the folder, as W&B's offline runs and TensorBoard's event files are, so it moves, is copied
and is deleted (``run --overwrite``) with its search. MLflow 3 refuses a ``file:`` store unless
``MLFLOW_ALLOW_FILE_STORE=true`` in every process that opens it, the viewer's included
(:func:`mlflow_file_store_problem`): hpsearch does not set it on the user's behalf.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
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
    "MLFLOW_DB",
    "MLFLOW_ARTIFACTS",
    "mlflow_tracking_uri",
    "is_mlflow_file_store",
    "mlflow_file_store_problem",
]

#: The default MLflow store, in the experiment folder (``sqlite:///<experiment>/mlflow.db``).
MLFLOW_DB = "mlflow.db"
#: Where the default store's experiment keeps artifacts (MLflow's server calls its own ``mlartifacts``).
MLFLOW_ARTIFACTS = "mlartifacts"


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


def mlflow_tracking_uri(
    tracking_uri: str | None, experiment_dir: str | Path, environ: Mapping[str, str] | None = None
) -> str:
    """The MLflow store a search writes to: the spec's ``tracking_uri``, else ``MLFLOW_TRACKING_URI``, else
    ``sqlite:///<experiment_dir>/mlflow.db`` (absolute).

    Not MLflow's own default, ``sqlite:///mlflow.db`` in the current directory (``./mlruns`` when that
    already holds runs): a resume run from another directory would write to another store.
    """
    env = os.environ if environ is None else environ
    if tracking_uri:
        return tracking_uri
    if env.get("MLFLOW_TRACKING_URI"):
        return absolute_mlflow_uri(env["MLFLOW_TRACKING_URI"])
    return f"sqlite:///{Path(os.path.abspath(Path(experiment_dir).expanduser())) / MLFLOW_DB}"


def is_mlflow_file_store(uri: str) -> bool:
    """Whether MLflow reads ``uri`` as its file store: ``file:…`` or a bare path (no scheme)."""
    return uri.startswith("file:") or absolute_mlflow_uri(uri).startswith("file:")


def mlflow_file_store_problem(
    tracking_uri: str | None, experiment_dir: str | Path, environ: Mapping[str, str] | None = None
) -> Problem | None:
    """A file store MLflow 3 would refuse (``MLFLOW_ALLOW_FILE_STORE`` not true), as a problem saying what to do.

    MLflow raises for a ``file:`` store in its client and its server alike unless the variable is
    ``true`` (or ``1``). Setting it in the search's process only would write runs that
    ``mlflow ui`` and ``mlflow.search_runs`` then refuse to read, so the search is refused
    instead, before anything is written, with the two ways out. Pure: MLflow is not imported.
    """
    env = os.environ if environ is None else environ
    uri = mlflow_tracking_uri(tracking_uri, experiment_dir, env)
    if not is_mlflow_file_store(uri) or env.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() in ("true", "1"):
        return None
    folder = uri[len("file://") :] if uri.startswith("file://") else uri
    named = f"is {uri!r}" if tracking_uri else f"is not set and MLFLOW_TRACKING_URI={uri!r} is"
    return Problem(
        "tracking.mlflow.tracking_uri",
        f"{named}, an MLflow file store, which MLflow 3 refuses (in hpsearch's writes and in `mlflow ui`/"
        "`mlflow.search_runs` alike) unless MLFLOW_ALLOW_FILE_STORE=true: use the SQLite store MLflow recommends "
        "(leave tracking_uri out for <experiment folder>/mlflow.db, or set sqlite:///mlflow.db; "
        f"`mlflow migrate-filestore --source {folder} --target sqlite:///mlflow.db` copies existing runs into one), "
        "or export MLFLOW_ALLOW_FILE_STORE=true in the shell that runs hpsearch and in the one that reads the runs",
    )


class MlflowSettings(StrictModel):
    """MLflow: one run per trial in ``experiment_name`` (default: the search's name)."""

    # default: MLFLOW_TRACKING_URI, else sqlite:///<experiment folder>/mlflow.db (mlflow_tracking_uri)
    tracking_uri: str | None = Field(default=None, min_length=1)
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
