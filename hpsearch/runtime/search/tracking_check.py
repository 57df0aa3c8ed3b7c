"""The trackers checked at start: each store opened once, before the experiment folder is written.

``run`` and ``resume`` call :func:`check_tracking` (through
:mod:`hpsearch.runtime.search.preflight`), so a tracker that cannot be set up is refused with its
YAML path and what to do (exit 2), never found out mid-search. The callbacks themselves are
:mod:`hpsearch.runtime.search.tracking`'s.
"""

from __future__ import annotations

import json
import netrc
import os

from hpsearch.errors import Problem, SpecError
from hpsearch.runtime.env import mlflow_probe
from hpsearch.runtime.search.tracking import (
    MLFLOW_URI_FIELD,
    OPTUNA_FIELD,
    is_default_mlflow_store,
    open_mlflow_experiment,
    open_optuna_storage,
    optuna_study_owner,
    quiet_mlflow_db,
)
from hpsearch.spec import Spec
from hpsearch.spec.credentials import redact_url, resolve_url, url_problems
from hpsearch.spec.tracking import mlflow_file_store_problem, mlflow_tracking_uri

__all__ = ["check_tracking"]


def check_tracking(spec: Spec) -> None:
    """Open every tracker of ``spec.tracking`` before the search starts; refuse one that cannot be set up.

    MLflow: a ``file:`` store is refused unless ``MLFLOW_ALLOW_FILE_STORE=true`` (MLflow 3 would
    refuse it, and so would every reader of the runs); any other store but the default one (in
    the experiment folder, which ``run`` has not written yet) is opened and the experiment
    found or created (one try, 10 s at most). W&B online: an API key must be known
    (``WANDB_API_KEY`` or ``wandb login``).
    Optuna: the storage is opened, and a study of the search's name that another experiment
    folder wrote is refused. TensorBoard writes into the experiment folder: nothing to check.

    Raises:
        SpecError: naming ``tracking.<tracker>``, what failed and what to do.
    """
    tracking, problems = spec.tracking, []
    env = [os.environ.get(name) for name in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE")]  # both decide too
    key = json.dumps([str(spec.experiment_dir), tracking.model_dump(), env], sort_keys=True, default=str)
    if key in _CHECKED:  # `run` checks before it writes the folder, callbacks_for again: once is enough
        return
    urls = {MLFLOW_URI_FIELD: tracking.mlflow and tracking.mlflow.tracking_uri, OPTUNA_FIELD: tracking.optuna}
    problems = [p for field, url in urls.items() if url for p in url_problems(field, url, os.environ)]
    if problems:  # a ${VAR} not set, or a resume that needs the password the folder does not keep
        raise SpecError(problems, source=str(spec.source) if spec.source else None)
    if tracking.mlflow is not None:
        uri = resolve_url(
            MLFLOW_URI_FIELD, mlflow_tracking_uri(tracking.mlflow.tracking_uri, spec.experiment_dir), os.environ
        )
        file_store = mlflow_file_store_problem(tracking.mlflow.tracking_uri, spec.experiment_dir)
        if file_store is not None:
            problems.append(file_store)
        elif not is_default_mlflow_store(uri, spec.experiment_dir):  # the default: a SQLite file the storage check
            try:  # proved writable; opening it now would write into the folder before `run` makes it
                with mlflow_probe(), quiet_mlflow_db():
                    open_mlflow_experiment(uri, tracking.mlflow.experiment_name or spec.name)
            except Exception as err:  # noqa: BLE001 - whatever MLflow raises, the user must read why
                problems.append(
                    Problem(MLFLOW_URI_FIELD, f"cannot open MLflow at {redact_url(uri)!r}: {_one_line(err)}")
                )
    if tracking.wandb is not None and tracking.wandb.mode == "online" and not _wandb_key_known():
        problems.append(
            Problem(
                "tracking.wandb.mode",
                "is online, but no W&B API key is known: run `wandb login` or set WANDB_API_KEY, "
                "or set tracking.wandb.mode: offline (and `wandb sync` later)",
            )
        )
    if tracking.optuna is not None:
        shown = redact_url(tracking.optuna)  # the storage as the spec as run writes it: no password
        try:
            owner = optuna_study_owner(
                open_optuna_storage(resolve_url(OPTUNA_FIELD, tracking.optuna, os.environ)), spec.name
            )
        except Exception as err:  # noqa: BLE001
            problems.append(Problem(OPTUNA_FIELD, f"cannot open Optuna storage {shown!r}: {_one_line(err)}"))
        else:
            if owner is not None and owner != str(spec.experiment_dir):
                problems.append(
                    Problem(
                        "tracking.optuna",
                        f"study {spec.name!r} in {shown} holds another search"
                        + (f" ({owner})" if owner else "")
                        + ": choose another name (--set name=...) or storage, or delete that study "
                        f"(optuna delete-study --study-name {spec.name} --storage {shown})",
                    )
                )
    if problems:
        raise SpecError(problems, source=str(spec.source) if spec.source else None)
    _CHECKED.add(key)


#: The tracking settings already checked in this process (successfully).
_CHECKED: set[str] = set()


def _wandb_key_known() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True

    try:
        hosts = netrc.netrc(os.environ.get("NETRC")).hosts
    except (OSError, netrc.NetrcParseError):
        return False
    host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://")[-1].split("/")[0]
    return host in hosts


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:300]}"
