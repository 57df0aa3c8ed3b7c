"""The experiment folder's names: every file and folder hpsearch writes or reads, and the trial statuses.

One search is one folder, ``<storage_path>/<name>/``::

    hpsearch_format.json        the folder's format version, written first (FORMAT_FILE)
    hpsearch_spec.yaml          the spec as run, every default filled in  (SPEC_FILE)
    hpsearch_plan.json          the resource plan it ran with               (PLAN_FILE)
    hpsearch_trials.jsonl       one line per trial end, appended as trials end (OUTCOMES_FILE)
    hpsearch_summary.json       the outcome, written when the search ends   (SUMMARY_FILE)
    hpsearch_estimate.json      the wall time and resource-hours predicted at its start, from the check (ESTIMATE_FILE)
    hpsearch_usage.jsonl        when each trial's driver and each search run started and ended (USAGE_FILE)
    hpsearch_ray_logs.jsonl     where Ray kept its logs, a line per run and resume (RAY_LOGS_FILE)
    hpsearch_ray_session.json   the processes of the embedded Ray it runs in (RAY_SESSION_FILE)
    hpsearch_report.html|.md    ``hpsearch report``'s default output        (REPORT_NAME)
    experiment_state-*.json     Tune's own state (what ``resume`` restores)
    <trainable>_<id>_<n>_…/     one Tune trial folder: params.json, result.json, error.txt
    train/<trial_id>/           the trial's nested Ray Train run             (TRAIN_RUNS_DIR)
        checkpoint_*/           its checkpoints (Ray Train keeps ``num_to_keep``)
        hpsearch_history.jsonl  every report forwarded to Tune, across restarts (HISTORY_FILE)
        hpsearch_controller.json  who ran the nested run's controller          (CONTROLLER_FILE)
        hpsearch_worker_group.json  the nested run's worker placement group    (WORKER_GROUP_FILE)
        logs/                   every rank's output and the controller's, kept per attempt (LOGS_DIR)
            controller.log      the Train controller's output, each run of it appended (CONTROLLER_LOG)
            attempt-<N>/        one start of the trial's worker group, from 1 (ATTEMPT_DIR)
                hpsearch_attempt.json  its number and worker placement group (ATTEMPT_FILE)
                rank-<R>.log    rank R's stdout and stderr while its loop ran (RANK_LOG)
                rank-<R>.json   rank R's progress: started, reports, in a report, ended (RANK_PROGRESS)
                preemption.json one line per drain notice its loop read, and each drained node's reason (PREEMPTION_FILE)
        hpsearch_driver_drain.json  its driver's node is being drained: the notice, the save (DRIVER_DRAIN_FILE)
        hpsearch_missing_metric.json  the metric a run of the trial missed    (MISSING_METRIC_FILE)
        hpsearch_failures.jsonl the loop's failures, one line each, compared for repeats (FAILURES_FILE)
        hpsearch_lineage.jsonl  pbt/pb2: one line per exploit (donor, epoch, configs) (LINEAGE_FILE)
        pbt-<donor>-e<epoch>/   pbt/pb2: the run that continued from a donor's checkpoint
            hpsearch_start.json the donor checkpoint that run starts from   (START_FILE)
    <trial folder>/checkpoint_*/hpsearch_pbt.json  pbt/pb2: Tune's checkpoint, a pointer into train/ (POINTER_FILE)

Nothing here reads or writes; :mod:`hpsearch.experiment.files` does, with these names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

__all__ = [
    "is_experiment",
    "SPEC_FILE",
    "PLAN_FILE",
    "OUTCOMES_FILE",
    "SUMMARY_FILE",
    "ESTIMATE_FILE",
    "USAGE_FILE",
    "RAY_LOGS_FILE",
    "RAY_SESSION_FILE",
    "REPORT_NAME",
    "TRAIN_RUNS_DIR",
    "CHECK_SUFFIX",
    "CHECK_FILE",
    "HISTORY_FILE",
    "CONTROLLER_FILE",
    "WORKER_GROUP_FILE",
    "LOGS_DIR",
    "CONTROLLER_LOG",
    "ATTEMPT_DIR",
    "ATTEMPT_FILE",
    "RANK_LOG",
    "RANK_PROGRESS",
    "PREEMPTION_FILE",
    "DRIVER_DRAIN_FILE",
    "MISSING_METRIC_FILE",
    "FAILURES_FILE",
    "LINEAGE_FILE",
    "START_FILE",
    "POINTER_FILE",
    "PBT_RUN_PREFIX",
    "TUNE_PARAMS_FILE",
    "TUNE_RESULT_FILE",
    "TUNE_ERROR_FILE",
    "TUNE_STATE_GLOB",
    "EPOCH",
    "TrialStatus",
    "STATUSES",
    "ENDED",
    "FINISHED",
    "STOPPED",
    "ERRORED",
    "RUNNING",
    "PENDING",
    "TUNE_COLUMNS",
    "flatten_config",
    "flatten_metrics",
]

#: The folder's format (``{"format": 2, "hpsearch": "<version>"}``), written once when ``hpsearch run``
#: creates the folder, before anything else; never rewritten (a ``resume`` leaves it as it is).
FORMAT_FILE: Final = "hpsearch_format.json"
#: The format of the experiment folders this hpsearch writes. It is raised when a file changes in a
#: way that an older reader would misread. Version 1 is every folder written before the format was
#: recorded; a folder with no ``FORMAT_FILE`` is read as version 1. Version 2 added ``FORMAT_FILE``.
#: A folder of any version up to this one is read. A newer one is refused, with what to do: upgrade
#: hpsearch.
FORMAT_VERSION: Final = 2
#: The format of a folder with no ``FORMAT_FILE``: every folder written before the format was recorded.
UNRECORDED_FORMAT: Final = 1
#: The spec as run (every default filled in): what makes a folder an experiment, and what ``resume`` reads.
SPEC_FILE: Final = "hpsearch_spec.yaml"
#: The resource plan the search ran with.
PLAN_FILE: Final = "hpsearch_plan.json"
#: One JSON line per trial end (see :class:`hpsearch.experiment.files.Outcome`), appended as
#: trials end, so it survives an interrupted search. A retried trial can end more than once:
#: its last line wins.
OUTCOMES_FILE: Final = "hpsearch_trials.jsonl"
#: The search's outcome (counts, best trial, per-trial values, wall time), written when it ends.
SUMMARY_FILE: Final = "hpsearch_summary.json"
#: The search's predicted wall time and resource-hours (``plan --estimate``'s model, from ``hpsearch check``'s
#: measurements), written when ``run`` starts if the spec was checked; the summary and the report set it next
#: to what happened.
ESTIMATE_FILE: Final = "hpsearch_estimate.json"
#: What the search used, for its budget and its resource-hours (see :class:`hpsearch.experiment.files.Usage`).
#: A trial's driver gets a line when it starts and one when that run of it ends, with the resources it
#: holds. Each run of the search (``run``, then each ``resume``) also gets a line when it starts and one
#: when it ends, with the budget that ended it, if one did.
USAGE_FILE: Final = "hpsearch_usage.jsonl"
#: One JSON line per Ray session the search ran in (the run, then each resume): where that
#: session kept its logs (see :class:`hpsearch.experiment.files.RayLogs`). Ray's own log lines
#: stay off the terminal unless ``--verbose``; this file says where they are.
RAY_LOGS_FILE: Final = "hpsearch_ray_logs.jsonl"
#: The embedded Ray session the search last ran in (its name, folder and processes, each PID with
#: its start time): what the next ``run --overwrite`` or ``resume`` ends if a killed run left any of
#: them behind (see :mod:`hpsearch.runtime.nodes.session`). Not written for a search on ``--address``.
RAY_SESSION_FILE: Final = "hpsearch_ray_session.json"
#: The report's default file name, without its suffix (``.html`` or ``.md``).
REPORT_NAME: Final = "hpsearch_report"
#: ``hpsearch check`` writes only in ``<storage_path>/<name>.check``: the experiment folder's name and this.
CHECK_SUFFIX: Final = ".check"
#: In the check's folder: its verdicts and measured times (start-up, per report, teardown), read by
#: ``hpsearch plan --estimate``.
CHECK_FILE: Final = "hpsearch_check.json"
#: Folder, inside the experiment folder, that holds every trial's nested Train run (``train/<trial_id>/``).
TRAIN_RUNS_DIR: Final = "train"
#: Every report Tune was sent for a trial, one JSON line each, in ``train/<trial_id>/``.
#: Tune keeps only the rows after a restart in its result.json; this file keeps them all.
HISTORY_FILE: Final = "hpsearch_history.jsonl"
#: Written into ``train/<trial_id>/`` by the nested run's controller: which process to check on.
CONTROLLER_FILE: Final = "hpsearch_controller.json"
#: Written into ``train/<trial_id>/`` by rank 0 of the nested run when its loop starts: the workers'
#: placement group, so a reused trial actor can wait until the run's workers are gone.
WORKER_GROUP_FILE: Final = "hpsearch_worker_group.json"
#: Folder, in ``train/<trial_id>/``, of the trial's logs: the controller's, and one folder per attempt.
LOGS_DIR: Final = "logs"
#: In ``logs/``: the Train controller's stdout and stderr (Ray Train's warnings, its errors), each run
#: of the controller appended after a header line.
CONTROLLER_LOG: Final = "controller.log"
#: In ``logs/``: one folder per start of the trial's worker group (an attempt), numbered from 1
#: (``attempt-1``): a worker-group restart, a Tune retry, a resume and an elastic resize each start one.
ATTEMPT_DIR: Final = "attempt-{n}"
#: In an attempt's folder: its number, its worker placement group (how its ranks agree on the
#: number), its world size and when it started. The folder appears with it, whole.
ATTEMPT_FILE: Final = "hpsearch_attempt.json"
#: In an attempt's folder: rank R's stdout and stderr (file descriptors 1 and 2, so C-level output
#: too) while its loop ran, and the traceback of an error its loop raised.
RANK_LOG: Final = "rank-{rank}.log"
#: In an attempt's folder: rank R's progress (started, reports completed, inside a report, how its
#: loop ended), replaced whole at each change.
RANK_PROGRESS: Final = "rank-{rank}.json"
#: In an attempt's folder: one JSON line per notice that a node of the worker group is being drained (a spot
#: reclaim; written by rank 0 in :func:`hpsearch.train.report`), and one per drained node with the reason the
#: drain gave (written by the trial driver once Ray shows it); see :mod:`hpsearch.experiment.preemptions`.
PREEMPTION_FILE: Final = "preemption.json"
#: In ``train/<trial_id>/``, while the node of the trial's driver is being drained (``resources.driver_node:
#: any``): the notice, and the report rank 0 saved a checkpoint at for it; removed by the trial's next driver.
#: See :mod:`hpsearch.experiment.driver_drains`.
DRIVER_DRAIN_FILE: Final = "hpsearch_driver_drain.json"
#: Written into ``train/<trial_id>/`` by the trial driver when a run of the trial reported without the
#: search's metric: which search (a token per ``run``/``resume``) and what was missing, so that Tune's
#: retries of the trial in the same search fail at once instead of running the loop again.
MISSING_METRIC_FILE: Final = "hpsearch_missing_metric.json"
#: In ``train/<trial_id>/``: one JSON line per failure of the trial's worker group (written by the Train
#: controller; see :mod:`hpsearch.experiment.failures`), so a repeat is not retried again.
FAILURES_FILE: Final = "hpsearch_failures.jsonl"
#: Population-based training: one JSON line per exploit of a trial, in ``train/<trial_id>/``
#: (the donor trial and epoch, the config before and after), written by the scheduler.
LINEAGE_FILE: Final = "hpsearch_lineage.jsonl"
#: Population-based training: in the folder of a nested run that continues from a donor's
#: checkpoint, which checkpoint that is (read by :func:`hpsearch.train.restore` on the workers).
START_FILE: Final = "hpsearch_start.json"
#: Population-based training: the one file of each Tune checkpoint of a trial, a pointer to the
#: nested run's checkpoint it stands for (the weights are never copied into Tune's folder).
POINTER_FILE: Final = "hpsearch_pbt.json"
#: Population-based training: the nested run a trial continues in after an exploit is
#: ``train/<trial_id>/pbt-<donor trial id>-e<donor epoch>/``.
PBT_RUN_PREFIX: Final = "pbt-"

#: Tune's files in each trial folder (Tune writes them; hpsearch only reads them).
TUNE_PARAMS_FILE: Final = "params.json"
TUNE_RESULT_FILE: Final = "result.json"
TUNE_ERROR_FILE: Final = "error.txt"
#: Tune's experiment state files, in the experiment folder.
TUNE_STATE_GLOB: Final = "experiment_state-*.json"

#: The metric schedulers count by default; :func:`hpsearch.train.report` always reports it, and
#: hpsearch numbers the reports of a loop that reports none.
EPOCH: Final = "epoch"

#: How a trial stands. An ended trial is ``finished``, ``stopped`` (early, by the scheduler) or
#: ``errored``. A trial not yet ended is ``running``, or ``pending`` (created but not started).
TrialStatus = Literal["finished", "stopped", "errored", "running", "pending"]
FINISHED: Final[TrialStatus] = "finished"
STOPPED: Final[TrialStatus] = "stopped"
ERRORED: Final[TrialStatus] = "errored"
RUNNING: Final[TrialStatus] = "running"
PENDING: Final[TrialStatus] = "pending"
#: Every status, in the order tables and plots list them.
STATUSES: Final[tuple[TrialStatus, ...]] = (FINISHED, STOPPED, ERRORED, RUNNING, PENDING)
#: The statuses of a trial that ended.
ENDED: Final[tuple[TrialStatus, ...]] = (FINISHED, STOPPED, ERRORED)

#: Columns Tune adds to every result; everything else a trial reports is a user metric.
TUNE_COLUMNS: Final = frozenset(
    {
        "timestamp",
        "checkpoint_dir_name",
        "done",
        "training_iteration",
        "trial_id",
        "date",
        "time_this_iter_s",
        "time_total_s",
        "pid",
        "hostname",
        "node_ip",
        "time_since_restore",
        "iterations_since_restore",
        "checkpoint_path",
        "config",
        "experiment_tag",
        "should_checkpoint",
    }
)


def flatten_config(config: dict[str, Any], prefix: str = "", *, sep: str = ".") -> dict[str, Any]:
    """A trial's nested config as dotted keys, as every table shows it: ``{"a": {"b": 1}} -> {"a.b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_config(value, name + sep, sep=sep))
        else:
            out[name] = value
    return out


def flatten_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """A report's nested metrics as Tune names them, and the spec's ``metric`` and every table:
    ``{"val": {"loss": 1}} -> {"val/loss": 1}``."""
    return flatten_config(metrics, sep="/")


def is_experiment(folder: str | Path) -> bool:
    """Whether ``folder`` is an hpsearch experiment folder (it holds the spec as run).

    Here, with the names, so that spec/ can check ``warm_start.from`` without importing the files module.
    """
    return (Path(folder) / SPEC_FILE).is_file()
