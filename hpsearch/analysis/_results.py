"""The search read from its folder, as :func:`~hpsearch.analysis.load_results` returns it: :class:`Results`.

Its tables' fixed columns are named here (:data:`TRIAL_COLUMNS`, :data:`HISTORY_COLUMNS`), and so are
the prefixes of the columns that follow them; what is computed from a :class:`Results` (the Pareto
front, the lineage, the workers over time) is in the modules of :mod:`hpsearch.analysis`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpsearch.analysis._lineage import lineage_table
from hpsearch.analysis._pareto import hypervolume, pareto_table
from hpsearch.analysis._workers import preemptions_table, workers_table
from hpsearch.experiment.layout import STATUSES
from hpsearch.formatting import number
from hpsearch.spec.constraints import Constraint
from hpsearch.spec.objectives import is_multi_objective, objectives_or_primary
from hpsearch.spec.space import Param

__all__ = [
    "Results",
    "TRIAL_COLUMNS",
    "HISTORY_COLUMNS",
    "RESOURCE_HOURS_PREFIX",
    "RESERVED_PREFIX",
    "is_config_column",
    "python_value",
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
        object.__setattr__(self, "objectives", objectives_or_primary(self.metric, self.mode, self.objectives))

    @property
    def multi_objective(self) -> bool:
        """Whether the search has several objectives (the spec's ``metric``/``mode`` lists)."""
        return is_multi_objective(self.objectives)

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
    def preemptions(self) -> pd.DataFrame:
        """Drained nodes (spot reclaims): one row per attempt whose loop read a drain notice, with the restart
        that followed (see :func:`preemptions_table`). A restart is Ray Train's, inside the trial: never an error."""
        return preemptions_table(self)

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


def is_config_column(column: str) -> bool:
    """Whether a column of :attr:`Results.trials` is a config value (not a fixed or resource-hours column)."""
    return column not in TRIAL_COLUMNS and not column.startswith((RESOURCE_HOURS_PREFIX, RESERVED_PREFIX))


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
