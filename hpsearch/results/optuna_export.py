"""hpsearch results as an Optuna study: Optuna's plots, importances and ``optuna-dashboard`` on a search.

Each trial becomes an Optuna trial with its parameters (distributions from the spec, so
log scales and steps carry over), its intermediate values (the metric at every
iteration) and its outcome: finished -> ``COMPLETE``, stopped early by the scheduler ->
``PRUNED``, errored -> ``FAIL``, running -> ``RUNNING``, pending -> ``WAITING``. A
complete trial's value is its *best* value of the metric, as hpsearch ranks trials; one
whose best is not a finite number (NaN, ±inf, or none) is ``FAIL``, with a
``fail_reason`` user attribute, since Optuna takes only finite values. Everything else
(trial id, iterations, best and last value, rank, folders, best checkpoint, constant
config values) is kept in the trial's ``user_attrs``.

A search with several objectives becomes a multi-objective study: one direction per
objective, each complete trial's ``values`` its point (every objective at its best first
objective), the objectives' names as the study's metric names. Optuna's ``best_trials``
are hpsearch's Pareto front, less its early-stopped trials unless ``stopped_as_complete``
(``PRUNED`` trials have no values in Optuna; their ``point`` user attribute holds them).

The conversion itself is :mod:`hpsearch.analysis._optuna`; this module adds the storage.
The spec's ``tracking.optuna`` tracker (:mod:`hpsearch.runtime.search.tracking`) writes the same
study while the search runs, with the same conversion; exporting the search to that storage
afterwards replaces the live study (recognised by its ``hpsearch_experiment_dir`` and
``hpsearch_written_live`` user attributes) with the exported one, without ``overwrite``: the same trials, states, values
and intermediate values, plus every user attribute the finished folder can tell.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from hpsearch.analysis import Results, load_results
from hpsearch.analysis._optuna import (
    LIVE_ATTR,
    direction,
    directions,
    frozen_trials,
    optuna_distributions,
    study_attrs,
    study_owner,
)
from hpsearch.errors import ExportError
from hpsearch.experiment import files

if TYPE_CHECKING:  # pragma: no cover
    import optuna

__all__ = ["to_optuna_study", "optuna_distributions", "ExportError"]


def to_optuna_study(
    results: Results | str | os.PathLike[str],
    *,
    storage: str | None = None,
    study_name: str | None = None,
    overwrite: bool = False,
    stopped_as_complete: bool = False,
) -> optuna.Study:
    """Build an Optuna study holding a search's trials.

    Args:
        results: What :func:`hpsearch.load_results` returned, or an experiment folder.
        storage: An Optuna storage URL (``"sqlite:///search.db"``) to write the study to;
            by default an in-memory study.
        study_name: Default: the search's name.
        overwrite: Replace a study of the same name in ``storage``. A study this same search wrote
            there live (the ``tracking.optuna`` study of this experiment folder) is always replaced.
        stopped_as_complete: Mark early-stopped trials ``COMPLETE`` (with their best value)
            instead of ``PRUNED``, e.g. for importance evaluators, which read complete trials only.

    Returns:
        An ``optuna.Study``; its ``user_attrs`` name the experiment folder and the metric.

    Raises:
        ExportError: ``storage`` cannot be opened, or holds the study and ``overwrite`` is false, or is an
            SQLite file in the experiment folder that is a symlink.

    Example:
        >>> study = to_optuna_study(load_results("hpsearch-results/digits-quick"))
        >>> optuna.visualization.matplotlib.plot_intermediate_values(study)
    """
    import optuna  # lazy: optuna is heavy; results/ imports without it

    if not isinstance(results, Results):
        results = load_results(results)
    name = study_name or results.name
    if storage is not None:
        _check_no_link(storage, results.experiment_dir)
    if storage is not None and not overwrite:
        overwrite = _is_this_search(storage, name, str(results.experiment_dir))
    if storage is not None and overwrite:
        try:
            optuna.delete_study(study_name=name, storage=storage)
        except KeyError:
            pass
        except Exception as err:  # noqa: BLE001 - a bad URL surfaces here; say what failed
            raise ExportError(f"cannot open Optuna storage {storage!r}: {type(err).__name__}: {err}") from None
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "A new study created" line
    try:
        if results.multi_objective:
            study = optuna.create_study(storage=storage, study_name=name, directions=directions(results))
        else:
            study = optuna.create_study(storage=storage, study_name=name, direction=direction(results))
    except optuna.exceptions.DuplicatedStudyError:
        raise ExportError(
            f"study {name!r} already exists in {storage}; pass --overwrite (overwrite=True) to replace it "
            "or choose another --study-name"
        ) from None
    except Exception as err:  # noqa: BLE001
        raise ExportError(f"cannot open Optuna storage {storage!r}: {type(err).__name__}: {err}") from None
    finally:
        optuna.logging.set_verbosity(verbosity)
    for key, value in study_attrs(results.experiment_dir, results.metric, results.mode).items():
        study.set_user_attr(key, value)
    if results.multi_objective:
        study.set_user_attr("objectives", [list(o) for o in results.objectives])
        with warnings.catch_warnings():  # "set_metric_names is experimental": it is stored, and read back
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([m for m, _ in results.objectives])
    study.add_trials(
        frozen_trials(results, stopped_as_complete=stopped_as_complete, multi_objective=results.multi_objective)
    )
    return study


def _check_no_link(storage: str, experiment_dir: Path) -> None:
    """Refuse an SQLite file in the experiment folder that is a symlink: SQLite would write through it (a folder
    someone sent may hold one where the study goes)."""
    if not storage.startswith("sqlite:///"):
        return
    path = Path(storage[len("sqlite:///") :].partition("?")[0])
    if path.is_symlink() and files.inside(path.parent, experiment_dir):
        raise ExportError(
            f"{path} is a symbolic link, so writing the study there would overwrite what it points to: refused; "
            "remove it, or choose another --optuna storage"
        )


def _is_this_search(storage: str, name: str, experiment_dir: str) -> bool:
    """Whether ``storage`` holds study ``name`` written live by this experiment folder's ``optuna`` tracker.

    A study the export wrote is not replaced without ``overwrite``: exporting twice is refused as before.
    """
    import optuna  # lazy: optuna is heavy; results/ imports without it

    try:
        summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    except Exception:  # noqa: BLE001 - a bad URL is reported where the study is created
        return False
    for summary in summaries:
        if summary.study_name == name:
            attrs = summary.user_attrs
            return bool(attrs.get(LIVE_ATTR)) and study_owner(attrs) == experiment_dir
    return False
