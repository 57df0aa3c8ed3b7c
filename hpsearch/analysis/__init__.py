"""Results on disk -> pandas tables -> the data each plot is drawn from.

:func:`load_results` reads an experiment folder (no Ray needed) into a :class:`Results`;
the functions below compute, from it, the plain data objects that :mod:`hpsearch.plots`
draws (each plot function calls the one of the same name). Tests assert on these
objects, not on pixels.

- :mod:`~hpsearch.analysis._load`: :func:`load_results`, the folder read into the trials and history tables.
- :mod:`~hpsearch.analysis._results`: :class:`Results` and its tables' fixed columns.
- :mod:`~hpsearch.analysis._workers`: ``Results.workers``, each trial's worker-group starts over time, and
  ``Results.preemptions``, the restarts drained nodes caused.
- :mod:`~hpsearch.analysis._view`: the protocol the modules that ``Results`` calls read it through (no import cycle).
- :mod:`~hpsearch.analysis._summary`: :class:`SearchSummary`, the summary file and the closing tables.
- :mod:`~hpsearch.analysis._tables`: :func:`best_trials`, the metrics at each trial's best epoch.
- :mod:`~hpsearch.analysis._curves`: plot data over time: learning curves, the optimisation history.
- :mod:`~hpsearch.analysis._params`: plot data over parameters: parameter vs metric, parallel coordinates.
- :mod:`~hpsearch.analysis._scheduler`: plot data for the scheduler's effect.
- :mod:`~hpsearch.analysis._optuna`: the trials as Optuna trials, and parameter importances.
- :mod:`~hpsearch.analysis._pareto`: several objectives: each trial's point, the front, its hypervolume.
- :mod:`~hpsearch.analysis._lineage`: population-based training's exploits.
- :mod:`~hpsearch.analysis._feasibility`: the spec's constraints and each report's violation.
- :mod:`~hpsearch.analysis._cost`: :func:`cost_table`, what each trial's result cost in resource-hours.
- :mod:`~hpsearch.analysis._missing_metric`: the one message when no trial reported the metric.
"""

from hpsearch.analysis._cost import cost_table
from hpsearch.analysis._curves import (
    Curve,
    LearningCurves,
    OptimizationHistory,
    learning_curves,
    optimization_history,
)
from hpsearch.analysis._lineage import LINEAGE_COLUMNS, LineageData, lineage_table, pbt_lineage
from hpsearch.analysis._load import load_results
from hpsearch.analysis._optuna import ParamImportances, param_importances
from hpsearch.analysis._params import (
    ParallelCoordinates,
    ParamAxis,
    ParamPanel,
    ParamVsMetric,
    parallel_coordinates,
    param_axis,
    param_vs_metric,
)
from hpsearch.analysis._pareto import ParetoPlot, pareto_front
from hpsearch.analysis._results import HISTORY_COLUMNS, TRIAL_COLUMNS, Results
from hpsearch.analysis._scheduler import SchedulerEffect, scheduler_effect
from hpsearch.analysis._summary import (
    SearchSummary,
    TrialOutcome,
    best_trials_table,
    feasible_line,
    pareto_front_table,
    summarize,
    summarize_experiment,
)
from hpsearch.analysis._tables import best_trials
from hpsearch.analysis._workers import PREEMPTION_COLUMNS, WORKER_COLUMNS, preemptions_table, workers_table
from hpsearch.errors import ExperimentNotFoundError, ResultsError
from hpsearch.experiment.layout import STATUSES

__all__ = [
    "load_results",
    "Results",
    "ExperimentNotFoundError",
    "ResultsError",
    "STATUSES",
    "TRIAL_COLUMNS",
    "HISTORY_COLUMNS",
    "WORKER_COLUMNS",
    "workers_table",
    "PREEMPTION_COLUMNS",
    "preemptions_table",
    "best_trials",
    "cost_table",
    "SearchSummary",
    "TrialOutcome",
    "summarize",
    "summarize_experiment",
    "best_trials_table",
    "feasible_line",
    "pareto_front_table",
    "pareto_front",
    "ParetoPlot",
    "lineage_table",
    "LINEAGE_COLUMNS",
    "pbt_lineage",
    "LineageData",
    "learning_curves",
    "LearningCurves",
    "Curve",
    "optimization_history",
    "OptimizationHistory",
    "param_vs_metric",
    "ParamVsMetric",
    "ParamPanel",
    "param_axis",
    "ParamAxis",
    "parallel_coordinates",
    "ParallelCoordinates",
    "param_importances",
    "ParamImportances",
    "scheduler_effect",
    "SchedulerEffect",
]
