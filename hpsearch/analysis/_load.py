"""Read an experiment folder into pandas tables, without Ray: :func:`load_results`.

What is read, in order of trust:

- ``hpsearch_spec.yaml`` and ``hpsearch_plan.json``: the spec and the resource plan.
- Each Tune trial folder (:mod:`hpsearch.experiment.tune_files`): ``params.json`` (the config) and
  ``result.json`` (one JSON object per report). A half-written last line, as in a running search, is skipped.
- Each trial's driver time and resource-hours from ``hpsearch_usage.jsonl`` (a folder
  written before hpsearch recorded them reads NaN).
- A trial's status by the one rule of :mod:`hpsearch.experiment.trial_status`: from
  ``hpsearch_trials.jsonl`` (one line per trial end, written as trials end), else from
  ``hpsearch_summary.json`` (written when the search ends), else inferred from Tune's own files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hpsearch.analysis._feasibility import constraints_of, violations_by_trial
from hpsearch.analysis._pareto import recorded_objectives
from hpsearch.analysis._results import (
    HISTORY_COLUMNS,
    RESERVED_PREFIX,
    RESOURCE_HOURS_PREFIX,
    TRIAL_COLUMNS,
    Results,
    is_config_column,
)
from hpsearch.errors import ExperimentNotFoundError, ResultsError, did_you_mean
from hpsearch.experiment import files
from hpsearch.experiment.layout import EPOCH, ERRORED, PENDING, RUNNING, SPEC_FILE, TRAIN_RUNS_DIR, flatten_config
from hpsearch.experiment.metrics import report_step
from hpsearch.experiment.ranking import Mode, best_checkpoint, rank_trials
from hpsearch.experiment.tracebacks import short_error
from hpsearch.experiment.trial_status import running_again, summary_entries, trial_status
from hpsearch.experiment.tune_files import (
    TuneState,
    TuneTrial,
    error_text,
    has_error_file,
    started_trials,
    trial_folders,
    unstarted_trials,
    without_housekeeping,
)
from hpsearch.spec import Scaling
from hpsearch.spec._validation import validate_section
from hpsearch.spec.constraints import Constraint
from hpsearch.spec.space import Param, flat_space, parse_search_space, trial_space

__all__ = ["load_results"]

#: A column of the history while it is read: whether the report held a value of the metric
#: (in the table a report without one reads NaN, as a reported NaN does); dropped once ranked.
_HAS_METRIC = "__has_metric__"


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
    exp = _experiment_folder(experiment_dir)
    spec = files.read_spec(exp)
    summary = files.read_summary(exp)
    folders = trial_folders(exp)
    state = TuneState(exp)
    if spec is None and summary is None and not folders and not state.exists:
        inside = sorted(p.parent.name for p in exp.glob(f"*/{SPEC_FILE}"))
        hint = f"; experiments inside it: {', '.join(inside)}" if inside else ""
        raise ExperimentNotFoundError(
            f"{exp} is not an experiment folder (no {SPEC_FILE}, no Tune trial folders){hint}"
        )
    recorded = spec or summary or {}
    metric, mode = _metric_and_mode(exp, recorded, metric, mode)
    space, params = _space(spec)
    ended = summary is not None and not summary.get("interrupted", False)
    started = started_trials(folders, state)
    # trials Tune created but has not started have no folder yet
    tune_trials = started + ([] if ended else unstarted_trials(state, {t.trial_id for t in started}))
    history = _history(_reports(exp, started), exp, metric)
    _check_reported(history, metric, recorded)
    trials = _trials(tune_trials, history, exp)
    history = _in_epoch_order(history, trials)
    outcomes = files.read_outcome_records(exp)
    usage = files.read_usage(exp)
    _add_outcomes(trials, outcomes, summary, state, ended, _max_t(spec))
    _running_again(trials, outcomes, usage)
    constraints = constraints_of(spec)
    _rank(trials, history, metric, mode, exp, constraints)
    trials = _add_usage(trials, history, usage, _reserved(spec, {t.trial_id: t.config for t in tune_trials}))
    history = history.drop(columns=_HAS_METRIC)
    _absent_params(trials, space)
    if not params:  # no spec: the config columns whose values differ
        params = [c for c in trials.columns if is_config_column(c) and trials[c].astype(str).nunique() > 1]
    return Results(
        experiment_dir=exp,
        name=recorded.get("name") or exp.name,
        metric=metric,
        mode=mode,
        objectives=recorded_objectives(recorded, metric, mode),
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
        resource_hours=_resource_hours(trials),
    )


def _experiment_folder(experiment_dir: str | os.PathLike[str]) -> Path:
    """The folder, resolved, once it is a folder whose format this hpsearch reads."""
    exp = Path(experiment_dir).expanduser()
    if not exp.is_dir():
        if exp.exists():
            raise ExperimentNotFoundError(f"{exp} is a file, not an experiment folder")
        raise ExperimentNotFoundError(f"experiment folder {exp} does not exist")
    exp = exp.resolve()
    files.check_format(exp)  # a folder of a newer hpsearch: refused, saying to upgrade
    return exp


def _reports(exp: Path, started: Sequence[TuneTrial]) -> list[dict[str, Any]]:
    """Every report of every started trial, each trial's epochs lost to a restart first, each naming its trial."""
    reports: list[dict[str, Any]] = []
    for trial in started:
        trial_reports = _reports_before_a_restart(exp, trial.trial_id, trial.reports) + trial.reports
        for report in trial_reports:
            report["trial_id"] = trial.trial_id
        reports += trial_reports
    return reports


def _check_reported(history: pd.DataFrame, metric: str, recorded: Mapping[str, Any]) -> None:
    """Refuse a ``metric`` asked for (not the spec's) that no trial reported, naming what they did report."""
    if metric not in history and len(history) and metric != _primary(recorded.get("metric")):
        reported = [c for c in history.columns if c not in HISTORY_COLUMNS and c != _HAS_METRIC]
        raise ResultsError(
            f"no trial reported metric {metric!r}{did_you_mean(metric, reported)} (reported: {', '.join(reported) or 'none'})"
        )


def _in_epoch_order(history: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """Each trial's rows in epoch order, trials in creation order: a report that reached the history file but not
    Tune before a cut, and the reports of the run that resumed it, were written in that order, not the epochs'."""
    order = {t: i for i, t in enumerate(trials["trial_id"])}
    history["_order"] = history["trial_id"].map(order)
    history = history.sort_values(["_order", "iteration"], kind="stable", na_position="last", ignore_index=True)
    return history.drop(columns="_order")


def _resource_hours(trials: pd.DataFrame) -> dict[str, float]:
    """Per resource, the hours held over every trial (a resource with nothing recorded is left out)."""
    return {
        c[len(RESOURCE_HOURS_PREFIX) :]: float(trials[c].sum())
        for c in trials.columns
        if c.startswith(RESOURCE_HOURS_PREFIX) and trials[c].notna().any()
    }


# ----------------------------------------------------------------------------- the tables


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


def _trials(rows: Sequence[TuneTrial], history: pd.DataFrame, exp: Path) -> pd.DataFrame:
    base = pd.DataFrame(
        {
            "trial_id": pd.Series([r.trial_id for r in rows], dtype="str"),
            "number": pd.Series([r.number for r in rows], dtype="Int64"),
            "trial_dir": pd.Series([str(r.folder) if r.folder is not None else None for r in rows], dtype="object"),
        }
    )
    configs = pd.DataFrame.from_records([flatten_config(r.config) for r in rows], index=base.index)
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


def _absent_params(trials: pd.DataFrame, space: Mapping[str, Param]) -> None:
    """A conditional parameter is an empty cell where its condition was false (the trial's config lacks it);
    one that no trial had is still a column, all empty, beside the other config columns."""
    at = list(trials.columns).index("error")
    for name, param in space.items():
        if param.when and name not in trials:
            trials.insert(at, name, None)
            at += 1


def _space(spec: dict[str, Any] | None) -> tuple[dict[str, Param], list[str]]:
    if not spec or not isinstance(spec.get("search_space"), dict):
        return {}, []

    tree, _ = parse_search_space(spec["search_space"])  # the spec as run was valid; skip what is not
    scaling = _scaling(spec)  # searched like any parameter, under scaling.* in the config
    return flat_space(trial_space(tree, scaling.searched() if scaling is not None else {}))


def _reports_before_a_restart(exp: Path, trial_id: str, reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Epochs Tune's result.json lost when the trial restarted, from hpsearch's own history file.

    After a restart (a retry, ``hpsearch resume``) Tune keeps only the new rows in result.json;
    the nested run's ``hpsearch_history.jsonl`` holds every report ever forwarded to Tune.
    """
    if files.count_history(exp, trial_id) <= len(reports):
        return []  # no more reports than Tune kept: nothing lost (the common case, without parsing)
    kept = without_housekeeping(files.read_history(exp, trial_id))
    seen = {r.get(EPOCH) for r in reports}
    earlier = []
    for record in kept:
        if record.get(EPOCH) in seen:
            continue
        record["timestamp"] = record.pop("time", None)
        earlier.append(record)
    return earlier


# ----------------------------------------------------------------------------- statuses


def _add_outcomes(
    trials: pd.DataFrame,
    outcomes: dict[str, dict[str, Any]],
    summary: dict[str, Any] | None,
    state: TuneState,
    ended: bool,
    max_t: Any,
) -> None:
    """Fill in each trial's status (the one rule of :mod:`hpsearch.experiment.trial_status`), error and end time."""
    summarised = summary_entries(summary, ended=ended)

    def status(trial_id: str, folder: Any, iterations: int) -> str:
        return trial_status(
            outcome=outcomes.get(trial_id),
            summarised=summarised.get(trial_id),
            error_file=lambda: isinstance(folder, str) and has_error_file(folder),
            tune_name=lambda: state.status(trial_id),
            iterations=iterations,
            max_t=max_t,
            ended=ended,
        )

    rows = zip(trials["trial_id"].tolist(), trials["trial_dir"].tolist(), trials["iterations"].tolist())
    trials["status"] = [status(str(trial_id), folder, int(n)) for trial_id, folder, n in rows]
    trials["error"] = [
        _error(t, outcomes, summarised) for t in trials[["trial_id", "status", "trial_dir"]].itertuples(index=False)
    ]
    recorded = pd.Series([outcomes.get(t, {}).get("ended_at") for t in trials["trial_id"]], dtype="float64")
    ended_at = pd.to_datetime(recorded, unit="s", utc=True)
    trials["ended_at"] = ended_at.where(ended_at.notna(), trials["ended_at"])
    trials.loc[trials["status"].isin((RUNNING, PENDING)), "ended_at"] = pd.NaT


def _error(trial: Any, outcomes: Mapping[str, dict[str, Any]], summarised: Mapping[str, dict[str, Any]]) -> str:
    """The line that says what went wrong: hpsearch's own line where it recorded one (the error's line with
    what the search saw: a host that left, the rank it came from and its log, a hang), else from
    ``error.txt`` (the whole traceback)."""
    if trial.status != ERRORED:
        return ""
    recorded = (outcomes.get(trial.trial_id) or {}).get("error")
    if recorded:
        return short_error(str(recorded), limit=1000)  # one line (a multi-line record written by hand)
    text = error_text(trial.trial_dir) if isinstance(trial.trial_dir, str) else ""
    if text.strip():
        return short_error(text, limit=300)
    message = (outcomes.get(trial.trial_id) or {}).get("error") or (summarised.get(trial.trial_id) or {}).get("error")
    return str(message or "")


def _running_again(trials: pd.DataFrame, outcomes: Mapping[str, dict[str, Any]], usage: files.Usage) -> None:
    """A trial a budget stopped runs again on ``resume``: running while a run of it started since has no end."""
    for i, trial_id in trials["trial_id"].items():
        if running_again(outcomes.get(trial_id), usage.trials.get(trial_id, [])):
            trials.loc[i, "status"] = RUNNING
            trials.loc[i, "ended_at"] = pd.NaT


# ----------------------------------------------------------------------------- what the trials held


def _scaling(spec: Mapping[str, Any] | None) -> Any:
    """The spec's ``scaling`` section as a :class:`~hpsearch.spec.Scaling` (``None`` without a valid one)."""
    return validate_section(Scaling, (spec or {}).get("scaling"), "scaling")[0] if spec else None


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


# ----------------------------------------------------------------------------- the spec and summary


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


def _max_t(spec: dict[str, Any] | None) -> Any:
    """The scheduler's ``max_t`` (``None`` without early stopping)."""
    scheduler = (spec or {}).get("scheduler") or {}
    return scheduler.get("max_t") if scheduler.get("type", "fifo") != "fifo" else None


def _wall_time(summary: dict[str, Any] | None, trials: pd.DataFrame) -> float | None:
    """The summary's wall time; without one, from the first trial's start to the last end (or now)."""
    if summary and summary.get("wall_time_s") is not None:
        return float(summary["wall_time_s"])
    if not len(trials) or not trials["started_at"].notna().any():
        return None
    end = trials["ended_at"].max() if trials["ended_at"].notna().any() else pd.Timestamp.now(tz="UTC")
    return float((end - trials["started_at"].min()).total_seconds())
