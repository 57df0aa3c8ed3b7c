"""What a search amounts to, derived from :func:`load_results`: ``hpsearch_summary.json`` and the closing table.

A :class:`SearchSummary` is not a second model of the results: it is built from a
:class:`~hpsearch.analysis.Results` (the experiment folder as read back), so the closing
table of ``hpsearch run``, the summary file, ``load_results`` and the report agree on every
trial's best value, by the one ranking of :mod:`hpsearch.experiment.ranking`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from hpsearch.analysis._load import load_results
from hpsearch.analysis._pareto import front_of
from hpsearch.analysis._results import HISTORY_COLUMNS, RESOURCE_HOURS_PREFIX, Results, is_config_column, python_value
from hpsearch.experiment import files
from hpsearch.experiment.layout import ENDED, ERRORED, flatten_config
from hpsearch.experiment.ranking import rank_trials
from hpsearch.experiment.tracebacks import error_excerpt
from hpsearch.experiment.tune_files import error_text, read_params
from hpsearch.formatting import cell, plural, text_table
from hpsearch.planning.versus import versus_actual
from hpsearch.spec.objectives import is_multi_objective

__all__ = [
    "TrialOutcome",
    "SearchSummary",
    "summarize",
    "summarize_experiment",
    "best_trials_table",
    "pareto_front_table",
]

#: History columns that are not the trial's own metrics (Tune's counter is kept, as reported).
_NOT_METRICS = frozenset(HISTORY_COLUMNS) - {"training_iteration"}


@dataclass
class TrialOutcome:
    """One trial at the end of a search: a row of :attr:`Results.trials`, with its last report."""

    trial_id: str
    status: str  # one of hpsearch.experiment.layout.STATUSES
    config: dict[str, Any]
    metrics: dict[str, Any]  # the last report
    best: float | None  # best value of the search metric (the one ranking)
    iterations: int  # how many reports the trial's history holds
    error: str = ""
    traceback: str = ""  # the end of the innermost traceback (the user's frames), for errored trials
    path: str = ""  # Tune's trial folder
    best_iteration: int | None = None
    last_iteration: int | None = None  # the epoch (else Tune's iteration) of the last report
    rank: int | None = None  # 1 = best; None: errored or no value
    violation: float | None = (
        None  # the constraints' total violation at its best report (0: feasible); None: no constraints
    )
    ended_by: str | None = None  # the budget that stopped it (it was running when a budget ended the search)
    driver_time_s: float | None = None  # from its driver's start to its end, over its runs
    resource_hours: dict[str, float] = field(default_factory=dict)  # its resources times its driver time
    # restarts of its worker group because a node of it was drained (a spot reclaim): Ray Train's, inside the
    # trial, never an error (its status says how it ended; experiment/preemptions.py)
    preempted: int = 0


@dataclass
class SearchSummary:
    """A search's outcome, as written to ``hpsearch_summary.json``."""

    name: str
    metric: str
    mode: str
    wall_time_s: float
    trials: list[TrialOutcome] = field(default_factory=list)
    #: True when the search stopped before every trial ended (Ctrl-C): resume it.
    interrupted: bool = False
    #: The budget that ended the search (``max_wall_time``, ...), or ``None``; ``ended_reason`` in words,
    #: and ``resume_hint`` the command that continues it with that budget raised.
    ended_by: str | None = None
    ended_reason: str = ""
    resume_hint: str = ""
    #: The search's wall time over its run and every resume (``wall_time_s`` is this run's).
    total_wall_time_s: float | None = None
    #: Every objective, ``[metric, mode]`` in the spec's order (one for a single-objective search).
    objectives: list[tuple[str, str]] = field(default_factory=list)
    #: With several objectives, the Pareto front, best first by the first objective: per trial its
    #: ``trial_id``, ``iteration`` (the report that is its point) and ``values`` (one per objective).
    pareto: list[dict[str, Any]] = field(default_factory=list)
    #: The estimate made as the search started, next to what happened (see
    #: :func:`hpsearch.planning.versus.versus_actual`); ``None`` when the spec was not checked first.
    estimate: dict[str, Any] | None = None
    #: The spec's constraints as people read them (``n_params <= 1e+06``); empty: none.
    constraints: list[str] = field(default_factory=list)

    @property
    def multi_objective(self) -> bool:
        """Whether the search has several objectives."""
        return is_multi_objective(self.objectives)

    @property
    def resource_hours(self) -> dict[str, float]:
        """Per resource, the hours held over every trial."""
        out: dict[str, float] = {}
        for trial in self.trials:
            for resource, hours in trial.resource_hours.items():
                out[resource] = out.get(resource, 0.0) + hours
        return out

    def count(self, status: str) -> int:
        return sum(1 for t in self.trials if t.status == status)

    def ranked(self) -> list[TrialOutcome]:
        """The ranked trials, best first (by the one ranking, over each trial's best value and its violation)."""
        ranking = rank_trials(
            {t.trial_id: [(t.best_iteration, t.best)] for t in self.trials},
            "min" if self.mode == "min" else "max",
            statuses={t.trial_id: t.status for t in self.trials},
            violations={t.trial_id: [t.violation or 0.0] for t in self.trials} if self.constraints else None,
        )
        by_id = {t.trial_id: t for t in self.trials}
        return [by_id[s.trial_id] for s in ranking.ranked]

    @property
    def best(self) -> TrialOutcome | None:
        """The best trial: the first ranked one, when its best value is finite and it meets the constraints."""
        ranked = self.ranked()
        if not ranked or ranked[0].best is None or not math.isfinite(ranked[0].best) or ranked[0].violation:
            return None
        return ranked[0]

    def as_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "name": self.name,
            "metric": self.metric,
            "mode": self.mode,
            "wall_time_s": round(self.wall_time_s, 2),
            "interrupted": self.interrupted,
            "ended_by": self.ended_by,
            "ended_reason": self.ended_reason,
            "resume_hint": self.resume_hint,
            "total_wall_time_s": None if self.total_wall_time_s is None else round(self.total_wall_time_s, 2),
            "resource_hours": self.resource_hours,
            "counts": {s: self.count(s) for s in ENDED},
            "best_trial_id": best.trial_id if best else None,
            **(
                {"objectives": [list(o) for o in self.objectives], "pareto": self.pareto}
                if self.multi_objective
                else {}
            ),
            **({"estimate": self.estimate} if self.estimate is not None else {}),
            **({"constraints": list(self.constraints)} if self.constraints else {}),
            "trials": [asdict(t) for t in self.trials],
        }


def _traceback(trial_dir: Any) -> str:
    return error_excerpt(error_text(trial_dir)) if isinstance(trial_dir, str) else ""


def summarize(
    results: Results,
    *,
    wall_time_s: float | None = None,
    interrupted: bool = False,
    ended_by: str | None = None,
    ended_reason: str = "",
    resume_hint: str = "",
) -> SearchSummary:
    """The :class:`SearchSummary` of a search read with :func:`load_results`.

    Args:
        results: The search, as read back from its folder.
        wall_time_s: The search's wall time; default the one ``results`` holds (or 0).
        interrupted: Whether the search stopped before every trial ended.
        ended_by: The budget that ended the search, if one did (default: the one ``results`` holds);
            ``ended_reason`` says it in words, ``resume_hint`` how to continue.
    """
    usage = files.read_usage(results.experiment_dir)
    summary = SearchSummary(
        name=results.name,
        metric=results.metric,
        mode=results.mode,
        wall_time_s=float(wall_time_s if wall_time_s is not None else results.wall_time_s or 0.0),
        interrupted=interrupted,
        ended_by=ended_by if ended_by is not None else results.ended_by,
        ended_reason=ended_reason or (results.ended_reason if ended_by is None else ""),
        resume_hint=resume_hint,
        total_wall_time_s=usage.wall_time_s() if usage.searches else None,
        objectives=list(results.objectives),
        constraints=[c.text for c in results.constraints],
    )
    if results.multi_objective:
        summary.pareto = [
            {"trial_id": p.trial_id, "iteration": p.iteration, "values": list(p.values)}
            for p in front_of(results).front
        ]
    summary.trials = _trial_outcomes(results)
    summary.estimate = versus_actual(
        files.read_estimate(results.experiment_dir),
        wall_time_s=summary.total_wall_time_s if summary.total_wall_time_s is not None else summary.wall_time_s,
        resource_hours=summary.resource_hours,
        interrupted=interrupted,
    )
    return summary


def _trial_outcomes(results: Results) -> list[TrialOutcome]:
    """Each trial as the summary records it, in the order of :attr:`Results.trials`."""
    history = results.history
    metric_columns = [c for c in history.columns if c not in _NOT_METRICS]
    last_reports = history.groupby("trial_id", sort=False).tail(1).set_index("trial_id")
    config_columns = [c for c in results.trials.columns if is_config_column(c)]
    resource_columns = [c for c in results.trials.columns if c.startswith(RESOURCE_HOURS_PREFIX)]
    outcomes = files.read_outcome_records(results.experiment_dir)
    out: list[TrialOutcome] = []
    records: list[dict[str, Any]] = results.trials.to_dict("records")  # type: ignore[assignment]  # keys are column names
    for row, has_value in zip(records, results.has_value):
        trial_id = str(row["trial_id"])
        last: dict[str, Any] = {}
        if trial_id in last_reports.index:
            report = last_reports.loc[trial_id]
            values = {k: python_value(report[k]) for k in metric_columns}
            last = {k: v for k, v in values.items() if v is not None}
        out.append(
            TrialOutcome(
                trial_id=trial_id,
                status=str(row["status"]),
                config=_config(row, config_columns),
                metrics=last,
                best=python_value(row["best"]) if has_value else None,  # "best" reads NaN for a trial without one
                iterations=int(row["iterations"]),
                error=str(row["error"] or ""),
                traceback=_traceback(row["trial_dir"]) if row["status"] == ERRORED else "",
                path=str(row["trial_dir"] or ""),
                best_iteration=python_value(row["best_iteration"]),
                last_iteration=python_value(row["last_iteration"]),
                rank=python_value(row["rank"]),
                violation=_number(row["violation"]) if results.constraints else None,
                ended_by=(outcomes.get(trial_id) or {}).get("ended_by") or None,
                driver_time_s=_number(row["driver_time_s"]),
                resource_hours={
                    c[len(RESOURCE_HOURS_PREFIX) :]: float(row[c])
                    for c in resource_columns
                    if _number(row[c]) is not None
                },
                preempted=_preempted(results, trial_id),
            )
        )
    return out


def _preempted(results: Results, trial_id: str) -> int:
    """How many times a trial's worker group started again because a node of it was drained."""
    folder = files.trial_folder(results.experiment_dir, trial_id)
    return sum(p.restarted for p in files.read_preemptions(folder)) if folder is not None else 0


def _number(value: Any) -> float | None:
    """A float cell, ``None`` where it is NaN (nothing was recorded)."""
    value = python_value(value)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def summarize_experiment(
    experiment_dir: str | os.PathLike[str],
    *,
    wall_time_s: float,
    interrupted: bool,
    ended_by: str | None = None,
    ended_reason: str = "",
    resume_hint: str = "",
) -> SearchSummary:
    """Read a search's folder back, summarise it, and write ``hpsearch_summary.json``: what a run ends with.

    ``ended_by``: the budget that ended this run of the search (``None``: none did, also after a resume).
    """
    summary = summarize(load_results(experiment_dir), wall_time_s=wall_time_s, interrupted=interrupted)
    summary.ended_by, summary.ended_reason, summary.resume_hint = ended_by, ended_reason, resume_hint
    files.write_summary(experiment_dir, summary.as_dict())
    return summary


def _config(row: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    """The trial's config as passed to its loop: Tune's params.json, else rebuilt from the table's columns."""
    if isinstance(row["trial_dir"], str):
        config = read_params(row["trial_dir"])
        if config is not None:
            return config
    return _nested({c: python_value(row[c]) for c in columns})


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1} -> {"a": {"b": 1}}``: a trial's config as it was passed to its loop."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue  # a key this trial's config does not have (the table's column is another trial's)
        name = key[len("config.") :] if key.startswith("config.") else key
        node = out
        *groups, leaf = name.split(".")
        for group in groups:
            node = node.setdefault(group, {})
        node[leaf] = value
    return out


def best_trials_table(summary: SearchSummary, *, n: int = 5, varying: Sequence[str] | None = None) -> str:
    """The closing table of ``hpsearch run``: the ``n`` best trials, best first.

    Columns: id, status, how many reports the trial made, the epoch of its last report,
    the best value of the metric, with constraints whether that report met them
    (``feasible``: ``yes``, or ``no`` and the total violation), up to three other metrics of
    its last report (``(last)`` after one named as a parameter), then the parameters
    (``varying``; default every config key).
    """
    ranked = summary.ranked()[:n]
    if not ranked:
        reported = [t for t in summary.trials if t.best is not None]  # only errored ones, as none ranks
        if reported:
            return f"(no trial ranks: the {plural(len(reported), 'trial')} that reported {summary.metric} errored)"
        return "(no trial reported the metric)"
    constrained = bool(summary.constraints)
    extra = [k for k in ranked[0].metrics if k not in (summary.metric, "training_iteration", "epoch")][:3]
    flat_configs = [flatten_config(t.config) for t in ranked]
    params = list(varying) if varying is not None else list(flat_configs[0])
    header = ["trial_id", "status", "reports", "last epoch", f"{summary.metric} (best)"]
    # a metric named as a parameter (the HF Trainer reports the scheduled learning_rate) is told apart
    header += ["feasible"] * constrained + [f"{k} (last)" if k in params else k for k in extra]
    rows = [header + params]
    for trial, flat in zip(ranked, flat_configs):
        rows.append(
            [trial.trial_id, trial.status, str(trial.iterations), cell(trial.last_iteration), cell(trial.best)]
            + [feasible_cell(trial.violation)] * constrained
            + [cell(trial.metrics.get(k)) for k in extra]
            + [cell(flat.get(p)) for p in params]
        )
    return text_table(rows)


def feasible_cell(violation: float | None) -> str:
    """``yes`` for a report that met every constraint, else ``no (violated by <total>)``."""
    return "yes" if not violation else f"no (violated by {cell(violation)})"


def feasible_line(summary: SearchSummary) -> str | None:
    """The closing line about the constraints, or ``None`` without any: how many trials met them."""
    if not summary.constraints:
        return None
    ranked = summary.ranked()
    met = sum(1 for t in ranked if not t.violation)
    rule = "; ".join(summary.constraints)
    if ranked and not met:
        return f"Constraints ({rule}): no trial met them, so there is no best trial; the table ranks by violation"
    return f"Constraints ({rule}): {met} of {len(ranked)} ranked trials met them; the others rank after, by violation"


def pareto_front_table(summary: SearchSummary, *, varying: Sequence[str] | None = None) -> str:
    """The closing table of a multi-objective ``hpsearch run``: every trial of the Pareto front,
    best first by the first objective.

    Columns: id, status, how many reports the trial made, the epoch of the report that is its
    point (its best by the first objective), each objective's value there, then the parameters
    (``varying``; default every config key).
    """
    by_id = {t.trial_id: t for t in summary.trials}
    front = [(entry, by_id[entry["trial_id"]]) for entry in summary.pareto if entry["trial_id"] in by_id]
    if not front:
        return "(no trial reported a number for every objective)"
    names = [metric for metric, _ in summary.objectives]
    header = ["trial_id", "status", "reports", "epoch", *names]
    flat_configs = [flatten_config(trial.config) for _, trial in front]
    params = list(varying) if varying is not None else list(flat_configs[0])
    rows = [header + params]
    for (entry, trial), flat in zip(front, flat_configs):
        rows.append(
            [trial.trial_id, trial.status, str(trial.iterations), cell(entry["iteration"])]
            + [cell(v) for v in entry["values"]]
            + [cell(flat.get(p)) for p in params]
        )
    return text_table(rows)
