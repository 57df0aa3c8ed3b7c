"""Read an experiment folder into pandas tables, without Ray.

What is read, in order of trust:

- ``hpsearch_spec.yaml`` and ``hpsearch_plan.json``: the spec and the resource plan.
- Each Tune trial folder: ``params.json`` (the config) and ``result.json`` (one JSON
  object per report). A half-written last line, as in a running search, is skipped.
- Each trial's driver time and resource-hours from ``hpsearch_usage.jsonl`` (a folder
  written before hpsearch recorded them reads NaN).
- A trial's status from ``hpsearch_trials.jsonl`` (one line per trial end, written
  as trials end), else from ``hpsearch_summary.json`` (written when the search
  ends), else inferred from Tune's own files: ``error.txt`` means errored; Tune's
  ``experiment_state-*.json`` says terminated, running or pending. Tune cannot tell a
  trial the scheduler stopped from one that finished: from Tune's files alone, a
  terminated trial that ran fewer iterations than the scheduler's ``max_t`` counts
  as stopped.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpsearch.analysis._feasibility import constraints_of, violations_by_trial
from hpsearch.analysis._lineage import lineage_table
from hpsearch.analysis._pareto import hypervolume, pareto_table, recorded_objectives
from hpsearch.errors import ExperimentNotFoundError, ResultsError, did_you_mean
from hpsearch.experiment import files
from hpsearch.experiment.layout import (
    EPOCH,
    ERRORED,
    FINISHED,
    PENDING,
    RUNNING,
    SPEC_FILE,
    STATUSES,
    STOPPED,
    TRAIN_RUNS_DIR,
    TUNE_COLUMNS,
    TUNE_ERROR_FILE,
    TUNE_PARAMS_FILE,
    TUNE_RESULT_FILE,
    TUNE_STATE_GLOB,
    flatten_config,
)
from hpsearch.experiment.metrics import flat_metrics, report_step
from hpsearch.experiment.ranking import Mode, best_checkpoint, rank_trials
from hpsearch.experiment.tracebacks import short_error
from hpsearch.formatting import number
from hpsearch.spec import SCALING_GROUP, Scaling
from hpsearch.spec._validation import validate_section
from hpsearch.spec.constraints import Constraint
from hpsearch.spec.space import ConstParam, Param, iter_params, parse_search_space

__all__ = [
    "Results",
    "load_results",
    "ExperimentNotFoundError",
    "ResultsError",
    "STATUSES",
    "TRIAL_COLUMNS",
    "HISTORY_COLUMNS",
    "WORKER_COLUMNS",
    "workers_table",
    "RESOURCE_HOURS_PREFIX",
    "RESERVED_PREFIX",
    "is_config_column",
]

#: The fixed columns of :attr:`Results.trials`; the config columns (one per flattened
#: config key) come after ``wall_time_s``.
TRIAL_COLUMNS = (
    "trial_id",
    "number",
    "status",
    "iterations",
    "best",
    "last",
    "best_iteration",
    "last_iteration",
    "rank",
    "violation",
    "wall_time_s",
    "error",
    "started_at",
    "ended_at",
    "trial_dir",
    "run_dir",
    "best_checkpoint",
    "driver_time_s",
)
#: The prefix of the trials table's resource-hours columns, one per resource (``resource_hours.CPU``); they
#: come last, after :data:`TRIAL_COLUMNS`.
RESOURCE_HOURS_PREFIX = "resource_hours."
#: The prefix of the columns saying what each trial reserved, after :data:`TRIAL_COLUMNS`, before the
#: resource-hours: ``reserved.workers`` (its Train workers) and ``reserved.worker.<resource>`` (each worker's).
RESERVED_PREFIX = "reserved."
#: The fixed columns of :attr:`Results.history`; every reported metric follows ``reported_at``.
HISTORY_COLUMNS = ("trial_id", "iteration", "training_iteration", "wall_time_s", "reported_at", "checkpoint")

#: The columns of :attr:`Results.workers`: one row per start of a trial's Train workers.
WORKER_COLUMNS = ("trial_id", "started_at", "workers", "nodes", "node_ids", "run_name")

_TUNE_STATES = {
    "TERMINATED": FINISHED,
    "ERROR": ERRORED,
    "RUNNING": RUNNING,
    "PENDING": PENDING,
    "PAUSED": PENDING,
}
# <trainable>_<trial id>_<number>_<params>_<date>; Tune's ids are 8 hex digits (5 + _00000 for grids).
_TRIAL_DIR = re.compile(r"^.+?_(?P<id>[0-9a-f]{5,8}(?:_\d{5})?)_(?P<number>\d+)(?:_|$)")
#: A column of the history while it is read: whether the report held a value of the metric
#: (in the table a report without one reads NaN, as a reported NaN does); dropped once ranked.
_HAS_METRIC = "__has_metric__"
_DROPPED = (TUNE_COLUMNS - {"training_iteration", "time_total_s", "checkpoint_path", "trial_id", "timestamp"}) | {
    "config"
}


@dataclass(frozen=True)
class Results:
    """A search read from its experiment folder: what :func:`load_results` returns.

    Attributes:
        experiment_dir: The folder read.
        name: The search's name (the spec's ``name``, else the folder's).
        metric: The metric ``best``/``last`` refer to; ``mode`` says whether lower
            (``"min"``) or higher (``"max"``) is better.
        trials: One row per trial, in the order the trials were created (``number``,
            as in Tune's folder names): ``trial_id``, ``status`` (one of
            :data:`STATUSES`), ``iterations`` (how many reports its history holds),
            ``best`` / ``last`` (best and last value of ``metric``, by the one ranking of
            :mod:`hpsearch.experiment.ranking`: NaN and ±inf never beat a finite value),
            ``best_iteration`` (the iteration of the best report), ``last_iteration`` (the
            iteration of its last report: with epochs numbered from 0, one less than
            ``iterations``), ``rank`` (1 = best; ``None`` for errored and unscored trials),
            ``wall_time_s``, one
            column per config value (nested keys joined with dots: ``model.width``),
            ``error``, ``started_at`` / ``ended_at`` (UTC), ``trial_dir`` (Tune's trial
            folder), ``run_dir`` (the nested Train run), ``best_checkpoint`` (the
            checkpoint still on disk with the best value of ``metric``; Ray Train keeps
            the most recent ``checkpoint.num_to_keep``, so it is not always the best
            report's own), ``driver_time_s`` (seconds from its driver's start to its end,
            summed over its runs: retries and resumes; start-up and teardown included), when the
            spec searches its scaling, what each trial reserved (``reserved.workers``, its Train
            workers, and ``reserved.worker.<resource>``, each worker's bundle) and,
            last, one ``resource_hours.<resource>`` column per resource the trials held
            (``resource_hours.CPU``, ``resource_hours.GPU``, custom ones): the trial's
            resources (driver and worker bundles) times its driver time, in hours. A running
            trial counts until its last report; a folder written before hpsearch recorded
            them reads NaN.
        history: One row per report: ``trial_id``, ``iteration``, ``training_iteration``
            (Tune's counter), ``wall_time_s`` (the trial's time so far), every reported
            metric, and ``checkpoint`` (the path, where the report carried one).
            ``iteration`` is the report's ``epoch`` metric when it has one, else Tune's
            ``training_iteration``, which restarts at 1 when a trial is retried; reports of
            an epoch delivered twice (at-least-once delivery across a restart) are kept once,
            the last one.
        spec: The spec as run (a dict, every default filled in), or ``None``.
        plan: The resource plan the search ran with (a dict), or ``None``.
        space: The search space: dotted parameter name -> its distribution
            (:mod:`hpsearch.spec.space` types; ``.log`` says whether it was searched on a log scale).
        params: The config columns that were searched (not constants), in spec order.
        wall_time_s: The search's wall time, from the summary (else estimated from the trials).
        ended: Whether the search ended (its summary was written, and not on an interruption).
        ended_by: The budget that ended the search (``max_wall_time``, ``max_failed_trials``,
            ``target``, ``max_resource_hours``), or ``None``; ``ended_reason`` says it in words.
        resource_hours: Per resource, the hours held over every trial (the sum of the
            ``resource_hours.*`` columns).
    """

    experiment_dir: Path
    name: str
    metric: str
    mode: str
    trials: pd.DataFrame
    history: pd.DataFrame
    spec: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    space: Mapping[str, Param] = field(default_factory=dict)
    params: list[str] = field(default_factory=list)
    wall_time_s: float | None = None
    ended: bool = False
    ended_by: str | None = None
    ended_reason: str = ""
    resource_hours: dict[str, float] = field(default_factory=dict)
    #: Every objective, ``(metric, mode)`` in the spec's order; ``metric``/``mode`` are the first.
    objectives: tuple[tuple[str, str], ...] = ()
    #: The spec's ``constraints`` (``()``: none); ``trials["violation"]`` is each trial's at its best report.
    constraints: tuple[Constraint, ...] = ()

    def __post_init__(self) -> None:
        if not self.objectives:
            object.__setattr__(self, "objectives", ((self.metric, self.mode),))

    @property
    def multi_objective(self) -> bool:
        """Whether the search has several objectives (the spec's ``metric``/``mode`` lists)."""
        return len(self.objectives) > 1

    @property
    def pareto(self) -> pd.DataFrame:
        """The Pareto front's trials, best first by the first objective: ``trial_id``, ``number``,
        ``status``, ``iteration`` (the report that is the trial's point: its best by the first
        objective), one column per objective, the searched parameters. NaN is never on it
        (:mod:`hpsearch.experiment.ranking`'s rules)."""
        return pareto_table(self)

    def hypervolume(self, reference: Sequence[float]) -> float:
        """The exact hypervolume of :attr:`pareto` up to ``reference`` (one value per objective, in the
        spec's order, worse than the front in each)."""
        return hypervolume(self, reference)

    @property
    def lineage(self) -> pd.DataFrame:
        """Population-based training's exploits, one row each, oldest first: the trial and its epoch
        when it was replaced, the donor and the epoch it continued from, what changed, and the seconds
        the exploit cost (empty for other schedulers; see :func:`hpsearch.analysis.lineage_table`)."""
        return lineage_table(self)

    @property
    def workers(self) -> pd.DataFrame:
        """The Train workers each trial had over time: one row per start of its worker group (see
        :func:`workers_table`); an elastic trial's resizes show as starts with another ``workers``."""
        return workers_table(self)

    @property
    def best(self) -> pd.Series | None:
        """The best trial's row of :attr:`trials`: rank 1, when its best value is finite and it meets
        the constraints (a search where no trial met them has no best trial)."""
        top = self.trials[self.trials["rank"] == 1]
        if top.empty or not math.isfinite(float(top["best"].iloc[0])):
            return None
        if not self.feasible[top.index[0]]:
            return None
        return top.iloc[0]

    @property
    def feasible(self) -> pd.Series:
        """Per row of :attr:`trials`: whether its best report met every constraint (all true without any)."""
        violation = self.trials["violation"].astype("float64")
        return violation.isna() | (violation == 0)

    @property
    def has_value(self) -> pd.Series:
        """Per row of :attr:`trials`: whether the trial reported a number for ``metric``.

        ``best`` reads NaN both for a trial whose best is NaN and for one that reported no
        number; only the first has a ``best_iteration``.
        """
        return self.trials["best_iteration"].notna()

    def ranked(self, *, finite: bool = False) -> pd.DataFrame:
        """The ranked trials of :attr:`trials`, best first (``finite``: only those with a finite best)."""
        ranked = self.trials[self.trials["rank"].notna()]
        if finite:
            ranked = ranked[np.isfinite(ranked["best"].astype("float64"))]
        return ranked.sort_values("rank", kind="stable")

    @property
    def counts(self) -> dict[str, int]:
        """Trials per status, every status of :data:`STATUSES` included."""
        found = self.trials["status"].value_counts()
        return {s: int(found.get(s, 0)) for s in STATUSES}

    @property
    def scheduler(self) -> dict[str, Any]:
        """The spec's ``scheduler`` section (``{}`` without a spec)."""
        return dict((self.spec or {}).get("scheduler") or {})

    def select(self, trial_ids: Iterable[str]) -> Results:
        """The same results restricted to some trials (e.g. to plot a subset)."""
        keep = set(trial_ids)
        trials = self.trials[self.trials["trial_id"].isin(keep)].reset_index(drop=True)
        trials["rank"] = trials["rank"].rank(method="first").astype("Int64")  # the same order, from 1
        return replace(
            self,
            trials=trials,
            history=self.history[self.history["trial_id"].isin(keep)].reset_index(drop=True),
        )

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in self.counts.items() if n)
        best = self.best
        shown = f"; best {self.metric}={number(best['best'])} ({best['trial_id']})" if best is not None else ""
        return f"<Results {self.name!r}: {len(self.trials)} trials ({counts or 'none'}){shown}>"


def load_results(
    experiment_dir: str | os.PathLike[str], *, metric: str | None = None, mode: str | None = None
) -> Results:
    """Read an experiment folder (finished, interrupted or still running) into tables.

    Needs no Ray cluster and does not import Ray.

    Args:
        experiment_dir: ``<storage_path>/<name>``, as ``hpsearch run`` prints it.
        metric: Rank trials by this reported metric instead of the spec's.
        mode: ``"min"`` or ``"max"`` for ``metric``; by default the spec's (required when
            the folder has no hpsearch spec or summary).

    Returns:
        A :class:`Results` with ``trials``, ``history``, ``best``, ``spec`` and ``plan``.

    Raises:
        ExperimentNotFoundError: The folder does not exist or holds no experiment.
        ResultsError: ``metric`` was never reported, or ``mode`` is not ``"min"``/``"max"``
            (or cannot be known: a folder without hpsearch's files needs both).
            Or the folder was written by a newer hpsearch, in a format this one does not know.

    Example:
        >>> results = load_results("hpsearch-results/digits-quick")
        >>> results.trials[["trial_id", "status", "best", "lr"]].head()
    """
    exp = Path(experiment_dir).expanduser()
    if not exp.is_dir():
        if exp.exists():
            raise ExperimentNotFoundError(f"{exp} is a file, not an experiment folder")
        raise ExperimentNotFoundError(f"experiment folder {exp} does not exist")
    exp = exp.resolve()
    files.check_format(exp)  # a folder of a newer hpsearch: refused, saying to upgrade
    spec = files.read_spec(exp)
    summary = files.read_summary(exp)
    trial_dirs = _trial_dirs(exp)
    state = _LazyState(sorted(exp.glob(TUNE_STATE_GLOB)))
    if spec is None and summary is None and not trial_dirs and not state.exists:
        inside = sorted(p.parent.name for p in exp.glob(f"*/{SPEC_FILE}"))
        hint = f"; experiments inside it: {', '.join(inside)}" if inside else ""
        raise ExperimentNotFoundError(
            f"{exp} is not an experiment folder (no {SPEC_FILE}, no Tune trial folders){hint}"
        )
    metric, mode = _metric_and_mode(exp, spec or summary or {}, metric, mode)
    objectives = recorded_objectives(spec or summary or {}, metric, mode)
    space, params = _space(spec)
    ended = summary is not None and not summary.get("interrupted", False)

    rows: list[dict[str, Any]] = []
    reports: list[dict[str, Any]] = []
    for path in trial_dirs:
        trial_reports = _read_reports(path / TUNE_RESULT_FILE)
        trial_id, number = _identify(path, trial_reports, state)
        _check_trial_id(trial_id, path / TUNE_RESULT_FILE)
        trial_reports = _reports_before_a_restart(exp, trial_id, trial_reports) + trial_reports
        for report in trial_reports:
            report["trial_id"] = trial_id
        reports += trial_reports
        config = files.read_json(path / TUNE_PARAMS_FILE) or {}
        rows.append({"trial_id": trial_id, "number": number, "trial_dir": str(path), "config": config})
    if not ended:  # trials Tune created but has not started have no folder yet
        seen = {r["trial_id"] for r in rows}
        for trial_id, info in state.trials().items():
            if trial_id not in seen and info["status"] in ("PENDING", "PAUSED"):
                _check_trial_id(trial_id, state.path)
                rows.append(
                    {"trial_id": trial_id, "number": info["number"], "trial_dir": None, "config": info["config"]}
                )

    history = _history(reports, exp, metric)
    if metric not in history and len(history) and metric != _primary((spec or summary or {}).get("metric")):
        reported = [c for c in history.columns if c not in HISTORY_COLUMNS and c != _HAS_METRIC]
        raise ResultsError(
            f"no trial reported metric {metric!r}{did_you_mean(metric, reported)} (reported: {', '.join(reported) or 'none'})"
        )
    trials = _trials(rows, history, exp)
    order = {t: i for i, t in enumerate(trials["trial_id"])}
    # each trial's rows in epoch order: a report that reached the history file but not Tune before a cut, and
    # the reports of the run that resumed it, were written in that order, not the epochs'
    history["_order"] = history["trial_id"].map(order)
    history = history.sort_values(["_order", "iteration"], kind="stable", na_position="last", ignore_index=True)
    history = history.drop(columns="_order")
    outcomes = files.read_outcome_records(exp)
    usage = files.read_usage(exp)
    _add_outcomes(trials, outcomes, summary, state, ended, _budget(spec))
    _running_again(trials, outcomes, usage)
    constraints = constraints_of(spec)
    _rank(trials, history, metric, mode, exp, constraints)
    trials = _add_usage(trials, history, usage, _reserved(spec, {r["trial_id"]: r["config"] for r in rows}))
    history = history.drop(columns=_HAS_METRIC)
    _absent_params(trials, space)
    if not params:  # no spec: the config columns whose values differ
        params = [c for c in trials.columns if is_config_column(c) and trials[c].astype(str).nunique() > 1]
    return Results(
        experiment_dir=exp,
        name=(spec or summary or {}).get("name") or exp.name,
        metric=metric,
        mode=mode,
        objectives=objectives,
        constraints=constraints,
        trials=trials,
        history=history,
        spec=spec,
        plan=files.read_plan(exp),
        space=space,
        params=params,
        wall_time_s=_wall_time(summary, trials),
        ended=ended,
        ended_by=(summary or {}).get("ended_by") or None,
        ended_reason=str((summary or {}).get("ended_reason") or ""),
        resource_hours={
            c[len(RESOURCE_HOURS_PREFIX) :]: float(trials[c].sum())
            for c in trials.columns
            if c.startswith(RESOURCE_HOURS_PREFIX) and trials[c].notna().any()  # nothing recorded: left out
        },
    )


def workers_table(results: Results) -> pd.DataFrame:
    """One row per start of a trial's Train workers, each trial's in time order, trials in creation order.

    Rank 0 records every start of the trial's worker group: the first, each restart after a failure
    or a lost node, each resize of an elastic trial (``scaling.num_workers: {min, max}``), across its
    runs (retries, ``resume``). Columns: ``trial_id``, ``started_at`` (UTC), ``workers`` (the group's
    size), ``nodes`` (how many nodes its workers ran on), ``node_ids`` (Ray's ids of those nodes, a
    tuple) and ``run_name`` (the nested run: the trial id, or under pbt/pb2 the run after an exploit).
    A group is the trial's until the next start or the trial's end. Empty for a folder written before
    hpsearch recorded the starts.
    """
    rows = []
    for trial_id in results.trials["trial_id"]:
        folder = files.trial_folder(results.experiment_dir, str(trial_id))
        for start in files.read_worker_starts(folder) if folder is not None else []:
            at = start["started_at"]
            rows.append(
                {
                    "trial_id": trial_id,
                    "started_at": pd.Timestamp(at, unit="s", tz="UTC") if at is not None else pd.NaT,
                    "workers": start["workers"],
                    "nodes": len(start["node_ids"]),
                    "node_ids": tuple(start["node_ids"]),
                    "run_name": start["run_name"],
                }
            )
    table = pd.DataFrame(rows, columns=list(WORKER_COLUMNS))
    table["started_at"] = pd.to_datetime(table["started_at"], utc=True)
    for column in ("workers", "nodes"):
        table[column] = table[column].astype("Int64")
    return table


def _absent_params(trials: pd.DataFrame, space: Mapping[str, Param]) -> None:
    """A conditional parameter is an empty cell where its condition was false (the trial's config lacks it);
    one that no trial had is still a column, all empty, beside the other config columns."""
    at = list(trials.columns).index("error")
    for name, param in space.items():
        if param.when and name not in trials:
            trials.insert(at, name, None)
            at += 1


def is_config_column(column: str) -> bool:
    """Whether a column of :attr:`Results.trials` is a config value (not a fixed or resource-hours column)."""
    return column not in TRIAL_COLUMNS and not column.startswith((RESOURCE_HOURS_PREFIX, RESERVED_PREFIX))


def _running_again(trials: pd.DataFrame, outcomes: Mapping[str, dict[str, Any]], usage: files.Usage) -> None:
    """A trial a budget stopped runs again on ``resume``: running while a run of it started since has no end."""
    for i, trial_id in trials["trial_id"].items():
        record = outcomes.get(trial_id) or {}
        stopped_at = record.get("ended_at")
        if not record.get("ended_by") or not isinstance(stopped_at, (int, float)):
            continue
        runs = usage.trials.get(trial_id, [])
        if runs and runs[-1].ended_at is None and runs[-1].started_at > stopped_at:
            trials.loc[i, "status"] = RUNNING
            trials.loc[i, "ended_at"] = pd.NaT


def _scaling(spec: Mapping[str, Any] | None) -> Any:
    """The spec's ``scaling`` section as a :class:`~hpsearch.spec.Scaling` (``None`` without a valid one)."""
    return validate_section(Scaling, (spec or {}).get("scaling"), "scaling")[0] if spec else None


def _searched_scaling(spec: Mapping[str, Any]) -> dict[str, Param]:
    """The searched scaling values as parameters, by their config names (``scaling.num_workers``)."""
    scaling = _scaling(spec)
    return dict(iter_params(scaling.searched(), SCALING_GROUP)) if scaling is not None else {}


def _reserved(spec: Mapping[str, Any] | None, configs: Mapping[str, Any]) -> dict[str, tuple[int, dict[str, float]]]:
    """Per trial, what it reserved: its workers and each worker's resources, from the spec as run and its
    config (searched scaling values are in ``config["scaling"]``); ``{}`` when the scaling is not searched
    (every trial reserved the same: the spec's ``scaling``). A trial that cannot be sized is left out."""
    scaling = _scaling(spec)
    if scaling is None or not scaling.searched():
        return {}
    out = {}
    for trial_id, config in configs.items():
        try:
            own = scaling.for_trial(config if isinstance(config, Mapping) else None)
        except ValueError:  # a config without its searched scaling values
            continue
        # an elastic trial counts at its minimum, as its resource-hours do (its sizes over time: Results.workers)
        out[trial_id] = (own.planned_workers, {k: float(v) for k, v in own.worker_bundle().items() if float(v) > 0})
    return out


def _add_usage(
    trials: pd.DataFrame,
    history: pd.DataFrame,
    usage: files.Usage,
    reserved: Mapping[str, tuple[int, dict[str, float]]] | None = None,
) -> pd.DataFrame:
    """Each trial's reserved workers and resources, driver time and resource-hours (NaN where nothing was
    recorded); CPU always has a column.

    A run with no end recorded (a running trial, or a killed search's) counts until the trial's last report.
    """
    last_report = history.groupby("trial_id")["reported_at"].max() if len(history) else pd.Series(dtype="object")
    ends = [None if pd.isna(last_report.get(t)) else last_report[t].timestamp() for t in trials["trial_id"]]
    seconds, hours = [], []
    for trial_id, last in zip(trials["trial_id"], ends):
        seconds.append(usage.trial_seconds(trial_id, open_until=last))
        hours.append(usage.trial_resource_hours(trial_id, open_until=last))
    trials["driver_time_s"] = pd.Series(seconds, index=trials.index, dtype="float64")
    resources = sorted({r for h in hours for r in h} | {"CPU"}, key=lambda r: (r != "CPU", r != "GPU", r))
    held = [(reserved or {}).get(t) for t in trials["trial_id"]]
    per_worker = sorted({r for h in held if h for r in h[1]} | {"CPU"}, key=lambda r: (r != "CPU", r != "GPU", r))
    columns: dict[str, pd.Series] = {}
    if reserved:  # searched scaling: trials differ in what they reserve
        columns[f"{RESERVED_PREFIX}workers"] = pd.Series([h[0] if h else None for h in held], dtype="Int64")
        for r in per_worker:
            values = [h[1].get(r, 0.0) if h else None for h in held]
            columns[f"{RESERVED_PREFIX}worker.{r}"] = pd.Series(values, dtype="float64")
    columns.update(
        {
            f"{RESOURCE_HOURS_PREFIX}{r}": pd.Series([h.get(r, 0.0) if h else None for h in hours], dtype="float64")
            for r in resources
        }
    )
    for column in columns.values():
        column.index = trials.index
    return pd.concat([trials, pd.DataFrame(columns, index=trials.index)], axis=1)


def python_value(value: Any) -> Any:
    """A cell of :attr:`Results.trials` or :attr:`Results.history` as a plain Python value, for
    JSON and tables: NumPy and pandas scalars unwrapped, pandas' NA and NaT as ``None``. A NaN
    stays NaN: it is a reported value, not a gap."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return None
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict, str)):
        try:
            return value.item()
        except (ValueError, TypeError):  # an array of several values: keep it as it is
            pass
    return value


def _primary(value: Any) -> Any:
    """A recorded ``metric`` or ``mode``: the first of a multi-objective search's list."""
    return value[0] if isinstance(value, list) and value else value


def _metric_and_mode(exp: Path, recorded: Mapping[str, Any], metric: str | None, mode: str | None) -> tuple[str, Mode]:
    """The metric to rank by and its mode: as asked, else as the spec (or summary) recorded them."""
    if metric is None or metric == _primary(recorded.get("metric")):
        metric, mode = _primary(recorded.get("metric")), mode or _primary(recorded.get("mode"))
    if not metric:
        raise ResultsError(f"{exp} has no {SPEC_FILE}: pass metric= and mode= to say how to rank the trials")
    if mode not in ("min", "max"):
        raise ResultsError(f"mode must be 'min' or 'max' (for metric {metric!r}), got {mode!r}")
    return str(metric), "min" if mode == "min" else "max"


def _budget(spec: dict[str, Any] | None) -> Any:
    """The scheduler's ``max_t`` (``None`` without early stopping)."""
    scheduler = (spec or {}).get("scheduler") or {}
    return scheduler.get("max_t") if scheduler.get("type", "fifo") != "fifo" else None


def _add_outcomes(
    trials: pd.DataFrame,
    outcomes: dict[str, dict[str, Any]],
    summary: dict[str, Any] | None,
    state: _LazyState,
    ended: bool,
    max_t: Any,
) -> None:
    """Fill in each trial's status, error and end time."""
    summarised = {t["trial_id"]: t for t in (summary or {}).get("trials", []) if "trial_id" in t}
    if not ended:  # an interrupted search's summary says "finished" of trials that had not ended
        summarised = {k: v for k, v in summarised.items() if v.get("status") == ERRORED}
    trials["status"] = [_status(t, outcomes, summarised, state, ended, max_t) for t in trials.itertuples(index=False)]
    trials["error"] = [
        _error(t, outcomes, summarised) for t in trials[["trial_id", "status", "trial_dir"]].itertuples(index=False)
    ]
    recorded = pd.Series([outcomes.get(t, {}).get("ended_at") for t in trials["trial_id"]], dtype="float64")
    ended_at = pd.to_datetime(recorded, unit="s", utc=True)
    trials["ended_at"] = ended_at.where(ended_at.notna(), trials["ended_at"])
    trials.loc[trials["status"].isin((RUNNING, PENDING)), "ended_at"] = pd.NaT


def _wall_time(summary: dict[str, Any] | None, trials: pd.DataFrame) -> float | None:
    """The summary's wall time; without one, from the first trial's start to the last end (or now)."""
    if summary and summary.get("wall_time_s") is not None:
        return float(summary["wall_time_s"])
    if not len(trials) or not trials["started_at"].notna().any():
        return None
    end = trials["ended_at"].max() if trials["ended_at"].notna().any() else pd.Timestamp.now(tz="UTC")
    return float((end - trials["started_at"].min()).total_seconds())


# ----------------------------------------------------------------------------- files


def _read_reports(path: Path) -> list[dict[str, Any]]:
    """Tune's result.json (a half-written last line skipped), without Tune's housekeeping keys, flattened."""
    return _without_housekeeping(files.read_json_lines(path))


def _without_housekeeping(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reports without Tune's housekeeping keys, nested metrics flattened as Tune flattens them (``val/loss``)."""
    for row in rows:
        for key in _DROPPED.intersection(row):
            del row[key]
    return [flat_metrics(row) for row in rows]


def _reports_before_a_restart(exp: Path, trial_id: str, reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Epochs Tune's result.json lost when the trial restarted, from hpsearch's own history file.

    After a restart (a retry, ``hpsearch resume``) Tune keeps only the new rows in result.json;
    the nested run's ``hpsearch_history.jsonl`` holds every report ever forwarded to Tune.
    """
    if files.count_history(exp, trial_id) <= len(reports):
        return []  # no more reports than Tune kept: nothing lost (the common case, without parsing)
    kept = _without_housekeeping(files.read_history(exp, trial_id))
    seen = {r.get(EPOCH) for r in reports}
    earlier = []
    for record in kept:
        if record.get(EPOCH) in seen:
            continue
        record["timestamp"] = record.pop("time", None)
        earlier.append(record)
    return earlier


def _trial_dirs(exp: Path) -> list[Path]:
    out = []
    with os.scandir(exp) as entries:
        for entry in entries:
            # a link is not followed: a trial folder that leads out of the experiment folder is not read
            if entry.is_dir(follow_symlinks=False) and entry.name != TRAIN_RUNS_DIR and not entry.name.startswith("."):
                path = Path(entry.path)
                if (path / TUNE_PARAMS_FILE).exists() or (path / TUNE_RESULT_FILE).exists():
                    out.append(path)
    return out


def _space(spec: dict[str, Any] | None) -> tuple[dict[str, Param], list[str]]:
    if not spec or not isinstance(spec.get("search_space"), dict):
        return {}, []

    tree, _ = parse_search_space(spec["search_space"])  # the spec as run was valid; skip what is not
    space = dict(iter_params(tree))
    space.update(_searched_scaling(spec))  # searched like any parameter, under scaling.* in the config
    return space, [name for name, p in space.items() if not isinstance(p, ConstParam)]


class _LazyState:
    """Tune's latest ``experiment_state-*.json``, read only when needed (it is large)."""

    def __init__(self, files: list[Path]) -> None:
        self._files = files
        self._trials: dict[str, dict[str, Any]] | None = None

    @property
    def exists(self) -> bool:
        return bool(self._files)

    @property
    def path(self) -> Path | None:
        """The file the trials are read from."""
        return self._files[-1] if self._files else None

    def trials(self) -> dict[str, dict[str, Any]]:
        if self._trials is None:
            self._trials = {}
            data = files.read_json(self._files[-1]) if self._files else None
            for entry in (data or {}).get("trial_data", []):
                try:
                    info = json.loads(entry[0]) if isinstance(entry[0], str) else entry[0]
                except (ValueError, TypeError, IndexError):
                    continue
                tag = str(info.get("experiment_tag", ""))
                number = re.match(r"\d+", tag)
                self._trials[str(info.get("trial_id"))] = {
                    "status": info.get("status"),
                    "config": info.get("config") or {},
                    "number": int(number.group()) if number else None,
                    "dir": info.get("relative_logdir"),
                }
        return self._trials

    def by_dir(self, name: str) -> tuple[str, dict[str, Any]] | None:
        return next(((tid, i) for tid, i in self.trials().items() if i["dir"] == name), None)


def _check_trial_id(trial_id: str, source: Path | None) -> None:
    """Refuse a trial id that is not a plain name: it names the trial's folder (``train/<trial_id>/``), and one
    like ``../../x`` would read records outside the experiment folder."""
    if not files.is_trial_id(trial_id):
        raise ResultsError(
            f"{source}: trial id {trial_id!r} is not a plain name (Tune's ids are letters, digits and _), so it "
            "cannot name a folder: this folder's records are damaged or crafted; refused"
        )


def _identify(path: Path, reports: list[dict[str, Any]], state: _LazyState) -> tuple[str, int | None]:
    match = _TRIAL_DIR.match(path.name)
    number = int(match.group("number")) if match else None
    if reports and reports[0].get("trial_id"):
        return str(reports[0]["trial_id"]), number
    if match:
        return match.group("id"), number
    found = state.by_dir(path.name)
    return (found[0], found[1]["number"]) if found else (path.name, number)


# ----------------------------------------------------------------------------- tables


def _rebase(paths: Iterable[Any], exp: Path) -> list[str | None]:
    """Checkpoint paths recorded before the folder moved, as they are now (``…/train/<id>/…``)."""
    marker, root = f"/{TRAIN_RUNS_DIR}/", str(exp)
    out: list[str | None] = []
    for path in paths:
        if not isinstance(path, str):
            out.append(None)
            continue
        at = path.rfind(marker)
        out.append(root + path[at:] if at >= 0 else path)
    return out


def _history(reports: list[dict[str, Any]], exp: Path, metric: str) -> pd.DataFrame:
    df = pd.DataFrame.from_records(reports) if reports else pd.DataFrame({"trial_id": pd.Series(dtype="str")})
    df[_HAS_METRIC] = pd.Series([r.get(metric) is not None for r in reports], index=df.index, dtype="bool")
    for col in ("training_iteration", "time_total_s", "checkpoint_path", "timestamp"):
        if col not in df:
            df[col] = None
    taken = set(HISTORY_COLUMNS)
    df = df.rename(
        columns={c: f"metric.{c}" for c in ("iteration", "wall_time_s", "reported_at", "checkpoint") if c in df}
    )
    df = df.rename(columns={"time_total_s": "wall_time_s", "checkpoint_path": "checkpoint", "timestamp": "reported_at"})
    df["training_iteration"] = pd.to_numeric(df["training_iteration"], errors="coerce").astype("Int64")
    df["iteration"] = pd.Series([report_step(r) for r in reports], index=df.index, dtype="Int64")
    if EPOCH in df:
        epoch = pd.to_numeric(df[EPOCH], errors="coerce")
        has = epoch.notna() & (epoch == epoch.round())
        key = pd.Series(range(len(df)), index=df.index, dtype="Int64").where(~has, df["iteration"])
        df = df[~pd.DataFrame({"t": df["trial_id"], "k": key, "e": has}).duplicated(keep="last")]
    df["checkpoint"] = pd.Series(_rebase(df["checkpoint"].tolist(), exp), index=df.index, dtype="object")
    df["wall_time_s"] = pd.to_numeric(df["wall_time_s"], errors="coerce")
    df["reported_at"] = pd.to_datetime(pd.to_numeric(df["reported_at"], errors="coerce"), unit="s", utc=True)
    metrics = [c for c in df.columns if c not in taken and c != _HAS_METRIC]
    return df[[*HISTORY_COLUMNS[:-1], *metrics, "checkpoint", _HAS_METRIC]].reset_index(drop=True)


def _trials(rows: list[dict[str, Any]], history: pd.DataFrame, exp: Path) -> pd.DataFrame:
    base = pd.DataFrame(
        {
            "trial_id": pd.Series([r["trial_id"] for r in rows], dtype="str"),
            "number": pd.Series([r["number"] for r in rows], dtype="Int64"),
            "trial_dir": pd.Series([r["trial_dir"] for r in rows], dtype="object"),
        }
    )
    configs = pd.DataFrame.from_records([flatten_config(r["config"]) for r in rows], index=base.index)
    configs = configs.rename(columns={c: f"config.{c}" for c in configs.columns if c in TRIAL_COLUMNS})
    groups = history.groupby("trial_id", sort=False)
    stats = pd.DataFrame(index=pd.Index(base["trial_id"].unique(), name="trial_id"))
    stats["iterations"] = groups.size().reindex(stats.index).fillna(0).astype("int64")
    stats["wall_time_s"] = groups["wall_time_s"].last()
    # a trial starts its last report's wall_time_s before that report; it ends (here) at its last report
    stats["ended_at"] = groups["reported_at"].last()
    stats["started_at"] = stats["ended_at"] - pd.to_timedelta(stats["wall_time_s"], unit="s")
    stats["last_iteration"] = groups["iteration"].last().astype("Int64")
    for col in ("best", "last", "best_iteration", "rank", "violation", "best_checkpoint"):
        stats[col] = None  # filled by _rank, once the statuses are known
    out = base.join(stats, on="trial_id")
    out["status"] = ""
    out["error"] = ""
    runs = [files.trial_folder(exp, t) for t in out["trial_id"]]
    out["run_dir"] = pd.Series(
        [str(r) if r is not None and r.is_dir() else None for r in runs], index=out.index, dtype="object"
    )
    out["best_checkpoint"] = out["best_checkpoint"].astype("object").where(out["best_checkpoint"].notna(), None)
    out["driver_time_s"] = float("nan")  # filled by _add_usage
    out = pd.concat([out[list(TRIAL_COLUMNS)], configs], axis=1)
    fixed = list(TRIAL_COLUMNS)
    ordered = fixed[: fixed.index("wall_time_s") + 1] + list(configs.columns) + fixed[fixed.index("wall_time_s") + 1 :]
    out = out[ordered]
    return out.sort_values("number", kind="stable", na_position="last").reset_index(drop=True)


def _rank(
    trials: pd.DataFrame,
    history: pd.DataFrame,
    metric: str,
    mode: Mode,
    exp: Path,
    constraints: Sequence[Constraint] = (),
) -> None:
    """Fill in each trial's best, last, best_iteration, rank, violation and best_checkpoint: the one ranking."""
    reports: dict[str, list[tuple[Any, Any]]] = {t: [] for t in trials["trial_id"]}  # creation order
    checkpoints: dict[str, list[tuple[Any, Any]]] = {}  # per trial: (checkpoint path, value)
    violations = violations_by_trial(history, list(trials["trial_id"]), constraints)  # None: no constraints
    saved: set[str] = set()
    if metric in history:
        saved = _checkpoints_on_disk(history, exp)
        values = history[metric].astype("object").where(history[_HAS_METRIC], None).tolist()  # no metric: no value
        iterations = history["iteration"].astype("float64").tolist()
        rows = zip(history["trial_id"].tolist(), iterations, values, history["checkpoint"].tolist())
        for trial_id, iteration, value, checkpoint in rows:
            reports.setdefault(trial_id, []).append((None if iteration != iteration else int(iteration), value))
            checkpoints.setdefault(trial_id, []).append((checkpoint, value))
    ranking = rank_trials(
        reports,
        mode,
        statuses=dict(zip(trials["trial_id"], trials["status"])),
        violations=violations,
    )
    scores = ranking.by_id()
    ids = trials["trial_id"]
    trials["violation"] = pd.Series([scores[t].violation for t in ids], index=trials.index, dtype="float64")
    trials["best"] = pd.Series([scores[t].best for t in ids], index=trials.index, dtype="float64")
    trials["last"] = pd.Series([scores[t].last for t in ids], index=trials.index, dtype="float64")
    trials["best_iteration"] = pd.Series([scores[t].best_iteration for t in ids], index=trials.index, dtype="Int64")
    trials["rank"] = pd.Series([scores[t].rank for t in ids], index=trials.index, dtype="Int64")
    # the checkpoint still on disk with the best value, by the same rule
    best = [
        best_checkpoint(checkpoints.get(t, []), mode, saved.__contains__, None if violations is None else violations[t])
        for t in ids
    ]
    trials["best_checkpoint"] = pd.Series(best, index=trials.index, dtype="object")


def _checkpoints_on_disk(history: pd.DataFrame, exp: Path) -> set[str]:
    """Every reported checkpoint path that is still on disk (Ray Train keeps the last ``num_to_keep``), in the
    experiment folder: a path the records place elsewhere (``…/train/../../x``, a link out) is never read."""
    paths = [p for p in history["checkpoint"].tolist() if isinstance(p, str)]
    kept: set[str] = set()
    for folder in {p.rpartition("/")[0] for p in paths}:  # one listing per run folder, not one stat per checkpoint
        if not files.inside(folder, exp):
            continue
        try:
            kept.update(f"{folder}/{name}" for name in os.listdir(folder))
        except OSError:
            continue
    return kept


# ----------------------------------------------------------------------------- statuses


def _status(
    trial: Any,
    outcomes: Mapping[str, dict[str, Any]],
    summarised: Mapping[str, dict[str, Any]],
    state: _LazyState,
    ended: bool,
    max_t: Any,
) -> str:
    trial_id = trial.trial_id
    if trial_id in outcomes and outcomes[trial_id].get("status") in STATUSES:
        return str(outcomes[trial_id]["status"])
    if trial_id in summarised and summarised[trial_id].get("status") in STATUSES:
        return str(summarised[trial_id]["status"])
    if isinstance(trial.trial_dir, str) and (Path(trial.trial_dir) / TUNE_ERROR_FILE).exists():
        return ERRORED
    tune_state = state.trials().get(trial_id, {}).get("status")
    status = _TUNE_STATES.get(str(tune_state))
    if status == FINISHED and isinstance(max_t, (int, float)) and trial.iterations < max_t:
        return STOPPED
    if status is not None:
        return status
    return FINISHED if ended else RUNNING


def _error(trial: Any, outcomes: Mapping[str, dict[str, Any]], summarised: Mapping[str, dict[str, Any]]) -> str:
    """The line that says what went wrong: hpsearch's own line where it recorded one (the error's line with
    what the search saw: a host that left, the rank it came from and its log, a hang), else from
    ``error.txt`` (the whole traceback)."""
    if trial.status != ERRORED:
        return ""
    recorded = (outcomes.get(trial.trial_id) or {}).get("error")
    if recorded:
        return short_error(str(recorded), limit=1000)  # one line (a multi-line record written by hand)
    if isinstance(trial.trial_dir, str):
        try:
            text = (Path(trial.trial_dir) / TUNE_ERROR_FILE).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        if text.strip():
            return short_error(text, limit=300)
    message = (outcomes.get(trial.trial_id) or {}).get("error") or (summarised.get(trial.trial_id) or {}).get("error")
    return str(message or "")
