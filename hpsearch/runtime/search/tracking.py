"""Every trial as one run in each experiment tracker of the spec's ``tracking`` section.

The trackers are Tune callbacks at the Tuner level (Ray Train V2's ``train.RunConfig``
refuses Tune's logger callbacks), so each logs once per trial from the search process, with
the report Tune sees: every rank's report already combined by ``aggregate``. Each trial is
one run per tracker, holding:

- the trial's config as parameters (nested keys dotted, as every hpsearch table shows them);
- every report's metrics at the report's ``epoch`` step (not Tune's ``training_iteration``,
  which restarts at 1 when a trial is retried or resumed), Tune's bookkeeping left out, a nested
  metric named as Tune and the spec's ``metric`` name it (``{"val": {"loss": x}}`` is ``val/loss``);
- tags: ``hpsearch.experiment``, ``hpsearch.trial_id`` and, when it ends, ``hpsearch.status``
  (``finished``, ``stopped``, ``errored``: the :class:`~hpsearch.runtime.search.outcomes.OutcomeRecorder`'s
  decision, which runs first) and ``hpsearch.best_checkpoint`` with ``hpsearch.best_<metric>``
  (found as :func:`hpsearch.load_results` finds them: the ranking over the trial's history,
  among the checkpoints still on disk).

A resumed search continues each trial's run instead of starting a second one: MLflow runs
are found by their ``hpsearch.trial_id`` tag, W&B runs by id (the trial id, ``resume="allow"``),
TensorBoard appends to the trial folder's event files, the Optuna study maps its trials by
their ``trial_id`` user attribute.

MLflow's store, when the spec names none, is ``MLFLOW_TRACKING_URI`` or else
``sqlite:///<experiment folder>/mlflow.db`` (:func:`hpsearch.spec.tracking.mlflow_tracking_uri`).

Failures: :func:`~hpsearch.runtime.search.tracking_check.check_tracking` opens every tracker before the search starts and refuses
one that cannot be set up, and an MLflow ``file:`` store without ``MLFLOW_ALLOW_FILE_STORE=true``
(a :class:`~hpsearch.errors.SpecError` naming the spec's key, so exit 2). Once the search
runs, a tracker that fails warns once (per tracker), through :mod:`hpsearch.messages`, and
the search goes on: losing a tracker's records must not lose the search.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray.tune import Callback
from ray.tune.logger import LoggerCallback, TBXLoggerCallback

from hpsearch import messages
from hpsearch.analysis._optuna import (
    LIVE_ATTR,
    intermediate_value,
    optuna_constraints,
    space_distributions,
    study_attrs,
    study_direction,
    study_owner,
    trial_outcome,
    trial_params,
)
from hpsearch.experiment import ranking
from hpsearch.experiment.files import read_history
from hpsearch.experiment.layout import ERRORED, TUNE_COLUMNS, TUNE_STATE_GLOB, flatten_config, flatten_metrics
from hpsearch.experiment.metrics import report_step, report_value, report_violation
from hpsearch.experiment.ranking import Mode, metric_value, rank_trials
from hpsearch.runtime.internals import TBXWriters
from hpsearch.spec.credentials import redact_url, resolve_url
from hpsearch.spec.space import flat_space
from hpsearch.spec.tracking import MLFLOW_ARTIFACTS, mlflow_tracking_uri

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.runtime.search.outcomes import OutcomeRecorder
    from hpsearch.spec import Spec
    from hpsearch.spec.constraints import Constraint
    from hpsearch.spec.tracking import MlflowSettings, WandbSettings

__all__ = [
    "TrialFacts",
    "MlflowTracker",
    "WandbTracker",
    "TensorboardTracker",
    "OptunaTracker",
    "tracking_callbacks",
    "best_checkpoint",
]

#: Result keys that are not the trial's own metrics (Tune's bookkeeping; hpsearch's config copy).
_NOT_METRICS = TUNE_COLUMNS | {"config", "iterations_since_restore"}


#: The spec fields of the two tracker URLs, as their problems and credentials name them.
MLFLOW_URI_FIELD = "tracking.mlflow.tracking_uri"
OPTUNA_FIELD = "tracking.optuna"


def tracking_callbacks(spec: Spec, recorder: OutcomeRecorder | None) -> list[Callback]:
    """The tracker callbacks for ``spec.tracking``, in the spec reference's order (none when all are off).

    Place them after the recorder: at a trial's end they read the status it decided.
    """
    tracking = spec.tracking
    mode: Mode = "min" if spec.mode == "min" else "max"
    facts = TrialFacts(spec.name, spec.experiment_dir, spec.metric, mode, recorder, spec.constraints)
    out: list[Callback] = []
    if tracking.mlflow is not None:
        out.append(MlflowTracker(tracking.mlflow, facts))
    if tracking.wandb is not None:
        out.append(WandbTracker(tracking.wandb, facts))
    if tracking.tensorboard:
        out.append(TensorboardTracker(facts))
    if tracking.optuna is not None:
        out.append(OptunaTracker(tracking.optuna, facts, space=flat_space(spec.trial_space())))
    return out


# ----------------------------------------------------------------------------- what every tracker records


class TrialFacts:
    """What every tracker needs to know about a trial: its metrics, step, config, final status, best checkpoint.

    Also warns once per tracker when logging fails (the search goes on).
    """

    def __init__(
        self,
        experiment: str,
        experiment_dir: str | Path,
        metric: str,
        mode: Mode,
        recorder: OutcomeRecorder | None,
        constraints: Sequence[Constraint] = (),
    ) -> None:
        self.experiment = experiment
        self.experiment_dir = str(experiment_dir)
        self.metric = metric
        self.mode: Mode = mode
        self.recorder = recorder
        self.constraints = tuple(constraints)
        self._warned: set[str] = set()

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its callbacks into the experiment state; a restored search warns afresh.
        return {**self.__dict__, "_warned": set()}

    @staticmethod
    def metrics(result: Mapping[str, Any]) -> dict[str, float]:
        """The trial's own metrics of a result: the numbers it reported (flattened), Tune's bookkeeping left out."""
        out: dict[str, float] = {}
        for key, value in flatten_metrics({k: v for k, v in result.items() if k not in _NOT_METRICS}).items():
            number = metric_value(value)
            if number is not None:
                out[key] = number
        return out

    @staticmethod
    def step(result: Mapping[str, Any]) -> int:
        """The report's step: its whole ``epoch`` (hpsearch reports one always), else Tune's iteration."""
        return report_step(result) or 0

    @staticmethod
    def params(trial: Any) -> dict[str, Any]:
        """The trial's config as parameters, nested keys dotted."""
        return flatten_config(dict(getattr(trial, "config", None) or {}))

    def experiment_dir_of(self, trial: Any) -> str:
        """The experiment folder, as the trial's folder in storage says (a resumed search may have moved).

        ``trial.path``, not ``trial.local_path``: that is Tune's staging copy in Ray's session folder.
        """
        path = getattr(trial, "path", None)
        return str(Path(path).parent) if isinstance(path, str) and path else self.experiment_dir

    def status(self, trial: Any, failed: bool) -> str:
        """How the trial ended, as the recorder decided (it runs first); ``errored``/``finished`` without one."""
        decided = None if self.recorder is None else self.recorder.outcomes.get(trial.trial_id)
        return str(decided or (ERRORED if failed else "finished"))

    def best(self, trial: Any) -> tuple[float | None, int | None, str | None, list[dict[str, Any]]]:
        """``(best value, its epoch, best checkpoint, the history)`` of a trial.

        The best value is chosen by :func:`~hpsearch.experiment.ranking.rank_trials`, the same rule
        every other view of the search uses.
        """
        history = read_history(self.experiment_dir_of(trial), trial.trial_id)
        over = [report_violation(r, self.constraints) for r in history] if self.constraints else None
        score = rank_trials(
            {trial.trial_id: [(report_step(r), report_value(r, self.metric)) for r in history]},
            self.mode,
            violations=None if over is None else {trial.trial_id: over},
        )
        top = score[trial.trial_id]
        return top.best, top.best_iteration, best_checkpoint(history, self.metric, self.mode, over), history

    def end_tags(self, trial: Any, failed: bool) -> dict[str, str]:
        """The tags a run gets when its trial ends: status, best value and best checkpoint."""
        best, _, checkpoint, _ = self.best(trial)
        tags = {"hpsearch.status": self.status(trial, failed)}
        if best is not None:
            tags[f"hpsearch.best_{self.metric}"] = repr(best)
        if checkpoint is not None:
            tags["hpsearch.best_checkpoint"] = checkpoint
        return tags

    def start_tags(self, trial: Any) -> dict[str, str]:
        return {"hpsearch.experiment": self.experiment, "hpsearch.trial_id": trial.trial_id}

    def warn_once(self, tracker: str, what: str, err: BaseException) -> None:
        """Say once per tracker that it failed; the search goes on without that record."""
        if tracker in self._warned:
            return
        self._warned.add(tracker)
        messages.say(
            f"warning: tracking with {tracker} failed ({what}: {type(err).__name__}: {err}); "
            "the search goes on, this tracker may miss records (warned once)"
        )

    @contextlib.contextmanager
    def guarded(self, tracker: str, what: str) -> Iterator[None]:
        """Run a tracker's logging call; a failure warns once instead of ending the search."""
        try:
            yield
        except Exception as err:  # noqa: BLE001 - a tracker must never end the search
            self.warn_once(tracker, what, err)


def best_checkpoint(
    history: list[dict[str, Any]], metric: str, mode: Mode, violations: Sequence[float] | None = None
) -> str | None:
    """The checkpoint still on disk with the best value of ``metric``, as :func:`hpsearch.load_results` picks it
    (``violations``: each report's, under the spec's constraints).

    Ray Train keeps the last ``num_to_keep`` checkpoints: the best report's own may be gone.
    """
    reports = [(r.get("checkpoint_path"), report_value(r, metric)) for r in history]
    return ranking.best_checkpoint(reports, mode, os.path.isdir, violations)


#: What SQLAlchemy says when another process creates Optuna's schema at the same moment.
_SCHEMA_RACES = ("already exists", "UNIQUE constraint failed: alembic_version", "database is locked")


def open_optuna_storage(url: str, *, attempts: int = 5) -> Any:
    """Optuna's storage at ``url``, retried while another process creates its tables.

    Opening an empty RDB storage creates Optuna's schema; two processes doing it at once (an
    ``optuna-dashboard`` started on the same file before the search, the search's own check
    and tracker) make one of them fail: "table ... already exists" while the tables are made,
    "UNIQUE constraint failed: alembic_version..." while the schema version is stamped (both
    seen in CI), "database is locked" while the other writes. The schema is then there (or
    about to be), so a later try succeeds.
    """
    import optuna  # lazy: optuna is heavy; only the optuna tracker needs it

    for attempt in range(attempts):
        try:
            return optuna.storages.get_storage(url)
        except Exception as err:  # noqa: BLE001 - SQLAlchemy's OperationalError/IntegrityError, by message
            if not any(race in str(err) for race in _SCHEMA_RACES) or attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")  # the loop returns or raises


@contextlib.contextmanager
def quiet_mlflow_db() -> Iterator[None]:
    """MLflow's INFO lines on opening a new SQLite store ("Creating initial MLflow database tables...") kept off
    the terminal: hpsearch's progress lines only. Its warnings and errors still show."""
    logger = logging.getLogger("mlflow.store.db.utils")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def is_default_mlflow_store(uri: str, experiment_dir: str | Path) -> bool:
    """Whether ``uri`` is hpsearch's default MLflow store, the one in the experiment folder."""
    return uri == mlflow_tracking_uri(None, experiment_dir, environ={})


# ----------------------------------------------------------------------------- MLflow


def _mlflow_base() -> type:
    # lazy: it imports mlflow (the mlflow extra, 1 s): only the mlflow tracker needs it
    from ray.air.integrations.mlflow import MLflowLoggerCallback

    return MLflowLoggerCallback


class MlflowTracker(_mlflow_base()):  # type: ignore[misc]  # Ray's class, resolved at import (mlflow is optional)
    """Ray's ``MLflowLoggerCallback`` (its experiment set-up and run bookkeeping), corrected.

    This class overrides what Ray's callback gets wrong for hpsearch:

    - It logs at ``training_iteration``, which restarts at 1 on a retry, so the curves would
      fold back.
    - It logs every number in Tune's result as a metric (pid, timestamps, ``config/*``,
      ``done``), with one request per metric.
    - It names runs ``str(trial)`` and sets no other tags.
    - A resumed search starts a second run for a trial.
    - The run ends without saying how the trial ended, or where its best checkpoint is.
    """

    def __init__(self, settings: MlflowSettings, facts: TrialFacts) -> None:
        uri = mlflow_tracking_uri(settings.tracking_uri, facts.experiment_dir)
        # Ray's attribute holds the URI without its password; the one opened is resolved at set-up, in this
        # process, from the spec's URL (or MLFLOW_TRACKING_URI, read then): nothing secret goes into tuner.pkl
        super().__init__(tracking_uri=redact_url(uri), experiment_name=settings.experiment_name or facts.experiment)
        self._hp_uri = settings.tracking_uri
        self.facts = facts
        self._client: Any = None
        # the default store's experiment keeps its artifacts in the folder too (MLflow's: <cwd>/mlruns/<id>)
        folder = Path(facts.experiment_dir)
        self._artifacts = (folder / MLFLOW_ARTIFACTS).as_uri() if is_default_mlflow_store(uri, folder) else None

    def __getstate__(self) -> dict[str, Any]:
        uri = self.__dict__.get("_hp_uri")
        return {
            **self.__dict__,
            "_client": None,
            "tracking_uri": redact_url(str(self.tracking_uri)),
            "_hp_uri": None if uri is None else redact_url(uri),
        }

    def resolved_uri(self) -> str:
        """The URI to open, resolved in this process: the spec's (its ``${VAR}`` expanded, a redacted
        password read from ``HPSEARCH_MLFLOW_PASSWORD``), else ``MLFLOW_TRACKING_URI`` as set now."""
        # a tracker an older hpsearch pickled has no _hp_uri: its tracking_uri is the whole URI
        spec_uri: str | None = self.__dict__.get("_hp_uri", self.__dict__["tracking_uri"])
        return resolve_url(MLFLOW_URI_FIELD, mlflow_tracking_uri(spec_uri, self.facts.experiment_dir), os.environ)

    def setup(self, *args: Any, **kwargs: Any) -> None:
        # Ray's setup sets both as well, after opening the URI: set here so a failed open leaves them usable
        self._hp_trial_runs: dict[str, str] = {}  # trial id -> run id (Ray's keys its own by trial object)
        self.tags: dict[str, str] = dict(getattr(self, "tags", None) or {})
        with quiet_mlflow_db(), self.facts.guarded("mlflow", "opening the tracking URI"):
            self.tracking_uri: str = self.resolved_uri()
            artifacts = getattr(self, "_artifacts", None)  # None in a tracker an older hpsearch pickled
            if artifacts is not None:  # before Ray's set-up, which creates the experiment without a location
                open_mlflow_experiment(self.tracking_uri, self.experiment_name, artifacts)
            super().setup(*args, **kwargs)
            from mlflow.tracking import MlflowClient  # lazy: mlflow is an optional extra

            self._client = MlflowClient(tracking_uri=self.tracking_uri)

    def _run_for(self, trial: Any) -> str:
        run_id = self._hp_trial_runs.get(trial.trial_id)
        if run_id is not None:
            return str(run_id)
        found = self._client.search_runs(
            [self.mlflow_util.experiment_id], filter_string=f"tags.`hpsearch.trial_id` = '{trial.trial_id}'"
        )
        if found:  # a resumed search (or a retried trial): continue the trial's run
            run_id = found[0].info.run_id
            self._client.update_run(run_id, status="RUNNING")
        else:
            tags = {**self.tags, **self.facts.start_tags(trial), "hpsearch.status": "running"}
            run_id = self._client.create_run(
                self.mlflow_util.experiment_id, run_name=trial.trial_id, tags=tags
            ).info.run_id
            from mlflow.entities import Param  # lazy: mlflow is the optional mlflow extra

            params = [Param(k, _param_text(v)) for k, v in self.facts.params(trial).items()]
            for at in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
                self._client.log_batch(run_id, params=params[at : at + 100])
        self._hp_trial_runs[trial.trial_id] = run_id
        return str(run_id)

    def log_trial_start(self, trial: Any) -> None:
        with self.facts.guarded("mlflow", "starting a run"):
            self._run_for(trial)

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        from mlflow.entities import Metric  # lazy: mlflow is the optional mlflow extra

        with self.facts.guarded("mlflow", "logging a report"):
            run_id = self._run_for(trial)
            now, step = int(time.time() * 1000), self.facts.step(result)
            metrics = [Metric(k, v, now, step) for k, v in self.facts.metrics(result).items()]
            for at in range(0, len(metrics), 1000):  # MLflow takes at most 1000 metrics per batch
                self._client.log_batch(run_id, metrics=metrics[at : at + 1000])

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        from mlflow.entities import RunTag  # lazy: mlflow is the optional mlflow extra

        with self.facts.guarded("mlflow", "ending a run"):
            run_id = self._run_for(trial)
            tags = self.facts.end_tags(trial, failed)
            self._client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
            self._client.set_terminated(run_id, status="FAILED" if tags["hpsearch.status"] == ERRORED else "FINISHED")


def open_mlflow_experiment(uri: str, name: str, artifact_location: str | None = None) -> None:
    """Open the MLflow tracking URI and find or create the experiment, as Ray's MLflow callback does at set-up."""
    from mlflow.tracking import MlflowClient  # lazy: mlflow is an optional extra

    client = MlflowClient(tracking_uri=uri)
    if client.get_experiment_by_name(name) is None:
        client.create_experiment(name, artifact_location=artifact_location)


def _param_text(value: Any) -> str:
    return str(value)[:6000]  # MLflow's longest param value


# ----------------------------------------------------------------------------- W&B


class WandbTracker(LoggerCallback):
    """One W&B run per trial, written from the search process (``mode`` as the spec says).

    Not Ray's ``WandbLoggerCallback``, which starts two Ray actors per trial (a logging actor
    and a queue: two more processes beside the nested run's eight, on the driver's node), logs
    at ``training_iteration`` with Tune's bookkeeping, and whose queue protocol cannot tag a
    run with how its trial ended. W&B holds several runs in one process
    (``reinit="create_new"``) and logs from its own service process, so this costs one
    ``wandb.init`` per trial (~1 s offline, seconds online) and no process per trial. Every W&B
    call runs, in order, on one thread of its own: Tune's event loop only queues it, and waits
    for what is queued when the search ends. Offline runs are written under
    ``<experiment>/wandb/`` (``wandb sync <experiment>/wandb/offline-run-*`` uploads them).
    """

    def __init__(self, settings: WandbSettings, facts: TrialFacts) -> None:
        self.settings = settings
        self.facts = facts
        self._runs: dict[str, Any] = {}
        self._steps: dict[str, int] = {}
        self._started: set[str] = set()
        self._worker: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_runs": {}, "_steps": {}, "_started": set(), "_worker": None}

    def _later(self, call: Any, *args: Any) -> None:
        """Run ``call(*args)`` on the W&B thread (calls run in the order queued)."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpsearch-wandb")
        self._worker.submit(call, *args)

    def log_trial_start(self, trial: Any) -> None:
        if trial.trial_id in self._started:
            return
        self._started.add(trial.trial_id)
        self._later(self._start, trial.trial_id, self.facts.experiment_dir_of(trial), self.facts.params(trial))

    def _start(self, trial_id: str, folder: str, config: dict[str, Any]) -> None:
        with self.facts.guarded("wandb", "starting a run"):
            import wandb  # lazy: wandb is the optional wandb extra

            Path(folder).mkdir(parents=True, exist_ok=True)
            self._runs[trial_id] = wandb.init(
                project=self.settings.project or self.facts.experiment,
                entity=self.settings.entity,
                group=self.settings.group or self.facts.experiment,
                mode=self.settings.mode,
                dir=folder,
                id=trial_id,
                name=trial_id,
                config=config,
                tags=[self.facts.experiment],
                reinit="create_new",
                resume="allow",  # a resumed search continues the trial's run
                settings=wandb.Settings(silent=True, console="off", x_disable_stats=True),
            )
            self._runs[trial_id].summary.update(
                {"hpsearch.experiment": self.facts.experiment, "hpsearch.trial_id": trial_id}
            )

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        self.log_trial_start(trial)
        step = self.facts.step(result)
        if step <= self._steps.get(trial.trial_id, -1):
            return  # an epoch delivered again (at-least-once across a restart): W&B keeps steps increasing
        self._steps[trial.trial_id] = step
        self._later(self._log, trial.trial_id, self.facts.metrics(result), step)

    def _log(self, trial_id: str, metrics: dict[str, float], step: int) -> None:
        run = self._runs.get(trial_id)
        if run is not None:
            with self.facts.guarded("wandb", "logging a report"):
                run.log(metrics, step=step)

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        if trial.trial_id not in self._started:
            return
        self._started.discard(trial.trial_id)
        self._steps.pop(trial.trial_id, None)
        with self.facts.guarded("wandb", "ending a run"):
            self._later(self._end, trial.trial_id, self.facts.end_tags(trial, failed))

    def _end(self, trial_id: str, tags: dict[str, str]) -> None:
        run = self._runs.pop(trial_id, None)
        if run is not None:
            with self.facts.guarded("wandb", "ending a run"):
                run.tags = (*run.tags, tags["hpsearch.status"])
                run.summary.update(tags)
                run.finish(exit_code=1 if tags["hpsearch.status"] == ERRORED else 0)

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        """Wait for what is queued, then end the runs of trials still running (Ctrl-C, a budget)."""
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None
        for trial_id in list(self._runs):
            with self.facts.guarded("wandb", "ending a run"):
                self._runs.pop(trial_id).finish(exit_code=1)


# ----------------------------------------------------------------------------- TensorBoard


def _tbx_base() -> type:
    return TBXLoggerCallback


class TensorboardTracker(TBXWriters, _tbx_base()):  # type: ignore[misc]  # Ray's class
    """Ray's ``TBXLoggerCallback`` (event files in each Tune trial folder: ``tensorboard --logdir <experiment>``).

    Being one, it also replaces the TBX logger Tune adds by itself. What Ray's gets wrong,
    overridden here: scalars at ``training_iteration`` instead of ``epoch``, Tune's bookkeeping
    logged as scalars under ``ray/tune/``; nothing says how the trial ended. Here each of the
    trial's metrics is a scalar under its own name at its epoch, and the trial's end adds text
    summaries ``hpsearch/status``, ``hpsearch/trial_id``, ``hpsearch/experiment`` and
    ``hpsearch/best_checkpoint`` before Ray's hparams entry.
    """

    def __init__(self, facts: TrialFacts) -> None:
        super().__init__()
        self.facts = facts

    def log_trial_start(self, trial: Any) -> None:
        with self.facts.guarded("tensorboard", "opening the event file"):
            super().log_trial_start(trial)

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        if trial not in self.trial_writers:
            self.log_trial_start(trial)
        with self.facts.guarded("tensorboard", "logging a report"):
            writer, step = self.trial_writers[trial], self.facts.step(result)
            metrics = self.facts.metrics(result)
            for key, value in metrics.items():
                writer.add_scalar(key, value, global_step=step)
            self.trial_results[trial] = {k: v for k, v in metrics.items() if math.isfinite(v)}
            writer.flush()

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        if trial not in self.trial_writers:
            return
        with self.facts.guarded("tensorboard", "ending a run"):
            writer = self.trial_writers[trial]
            texts = {**self.facts.start_tags(trial), **self.facts.end_tags(trial, failed)}
            for key, value in texts.items():
                writer.add_text(key.replace("hpsearch.", "hpsearch/"), value)
        with self.facts.guarded("tensorboard", "ending a run"):
            super().log_trial_end(trial, failed)  # Ray's hparams entry, and the writer closed


# ----------------------------------------------------------------------------- Optuna


class OptunaTracker(Callback):
    """The Optuna study, written as the search runs: what ``optuna-dashboard <storage>`` shows live.

    The same study ``hpsearch export`` writes afterwards (same name, the search's; same
    conversion, :mod:`hpsearch.analysis._optuna`): a trial is created ``RUNNING`` when it
    starts (its params by the spec's distributions), gets an intermediate value at each
    report's epoch, and ends ``COMPLETE`` with its best value, ``PRUNED`` (stopped early) or
    ``FAIL``. Exporting to the same storage afterwards replaces this study with the export
    (:func:`hpsearch.to_optuna_study`). Optuna numbers trials as they start; the export numbers
    them as Tune created them (the same order unless trials start out of order).

    At the start of the search, a study of the same name already in the storage is: continued
    when it is this experiment's and the search is resumed (trials mapped by ``trial_id``);
    replaced when it is this experiment's and the search starts afresh (``run --overwrite``);
    refused (:func:`~hpsearch.runtime.search.tracking_check.check_tracking`) when it belongs to another experiment folder.
    """

    def __init__(self, storage: str, facts: TrialFacts, *, space: tuple[dict[str, Any], list[str]]) -> None:
        self.storage_url = storage
        self.facts = facts
        self.space, self.params = space
        self._storage: Any = None
        self._study_id: int | None = None
        self._trials: dict[str, int] = {}  # Tune trial id -> Optuna's storage trial id
        self._ended: set[str] = set()  # trials whose Optuna trial is finished (Optuna refuses changes to those)
        self._distributions: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {
            **self.__dict__,
            "storage_url": redact_url(self.storage_url),  # resolved when opened (spec/credentials.py)
            "_storage": None,
            "_study_id": None,
            "_trials": {},
            "_ended": set(),
        }

    def setup(self, *args: Any, **info: Any) -> None:
        with self.facts.guarded("optuna", "opening the study"):
            self._open(resumed=any(Path(self.facts.experiment_dir).glob(TUNE_STATE_GLOB)))

    def _open(self, *, resumed: bool) -> None:
        import optuna  # lazy: optuna is heavy; only the optuna tracker needs it

        self._distributions = space_distributions(self.space, self.params)
        storage = open_optuna_storage(resolve_url(OPTUNA_FIELD, self.storage_url, os.environ))
        name = self.facts.experiment
        owner = optuna_study_owner(storage, name)
        if owner is not None and owner != self.facts.experiment_dir:  # check_tracking refuses this before a run
            raise ValueError(f"study {name!r} holds another search ({owner or 'not an hpsearch study'}); not touched")
        if owner is not None and not resumed:  # this folder's study from its last run (`run --overwrite`): stale
            storage.delete_study(storage.get_study_id_from_name(name))
        try:
            study_id = storage.get_study_id_from_name(name)
        except KeyError:
            verbosity = optuna.logging.get_verbosity()
            optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "A new study created" line in the progress
            try:
                study_id = storage.create_new_study(
                    [optuna.study.StudyDirection[study_direction(self.facts.mode).upper()]], name
                )
            finally:
                optuna.logging.set_verbosity(verbosity)
            attrs = {**study_attrs(self.facts.experiment_dir, self.facts.metric, self.facts.mode), LIVE_ATTR: True}
            for key, value in attrs.items():
                storage.set_study_user_attr(study_id, key, value)
        self._storage, self._study_id = storage, study_id
        for frozen in storage.get_all_trials(study_id, deepcopy=False):
            trial_id = frozen.user_attrs.get("trial_id")
            if isinstance(trial_id, str):
                self._trials[trial_id] = storage.get_trial_id_from_study_id_trial_number(study_id, frozen.number)
                if frozen.state.is_finished():  # e.g. an errored trial run again (resume --retry-errored):
                    self._ended.add(trial_id)  # left as it ended; `hpsearch export` writes its new end

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        if self._storage is None or trial.trial_id in self._trials:
            return  # a trial retried or resumed: its Optuna trial is still RUNNING
        from optuna.trial import FrozenTrial, TrialState  # lazy: optuna is heavy; only the optuna tracker needs it

        with self.facts.guarded("optuna", "creating a trial"):
            params, dists = trial_params(self._distributions, self.facts.params(trial))
            template = FrozenTrial(
                number=0,  # Optuna numbers it
                state=TrialState.RUNNING,
                value=None,
                datetime_start=dt.datetime.now(),
                datetime_complete=None,
                params=params,
                distributions=dists,
                user_attrs={"trial_id": trial.trial_id, "status": "running"},
                system_attrs={},
                intermediate_values={},
                trial_id=0,
            )
            self._trials[trial.trial_id] = self._storage.create_new_trial(self._study_id, template_trial=template)

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:

        if self._storage is None or trial.trial_id not in self._trials or trial.trial_id in self._ended:
            return
        value = intermediate_value(report_value(result, self.facts.metric))
        if value is None:
            return
        with self.facts.guarded("optuna", "reporting an intermediate value"):
            self._storage.set_trial_intermediate_value(self._trials[trial.trial_id], self.facts.step(result), value)

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._end(trial, failed=False)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._end(trial, failed=True)

    def _end(self, trial: Any, *, failed: bool) -> None:
        from optuna.trial import TrialState  # lazy: optuna is heavy; only the optuna tracker needs it

        if self._storage is None or trial.trial_id not in self._trials or trial.trial_id in self._ended:
            return
        self._ended.add(trial.trial_id)
        with self.facts.guarded("optuna", "ending a trial"):
            storage_id = self._trials[trial.trial_id]
            status = self.facts.status(trial, failed)
            best, best_epoch, checkpoint, history = self.facts.best(trial)
            for report in history:  # every report, also those Tune did not deliver after a stop (as the export)
                value, epoch = intermediate_value(report_value(report, self.facts.metric)), report_step(report)
                if value is not None and epoch is not None:
                    self._storage.set_trial_intermediate_value(storage_id, epoch, value)
            state, value, reason = trial_outcome(status, best, self.facts.metric)
            attrs: dict[str, Any] = {"status": status, "best_iteration": best_epoch, "best_checkpoint": checkpoint}
            if reason is not None:
                attrs["fail_reason"] = reason
            at_best = (
                next((r for r in history if report_step(r) == best_epoch), None) if best_epoch is not None else None
            )
            if self.facts.constraints and at_best is not None:  # as `hpsearch export` writes them: the dashboard's list
                told = list(optuna_constraints(at_best, self.facts.constraints).values())
                self._storage.set_trial_system_attr(storage_id, "constraints", told)
                attrs["constraints"] = dict(zip((c.text for c in self.facts.constraints), told))
            for key, attr in attrs.items():
                self._storage.set_trial_user_attr(storage_id, key, attr)
            self._storage.set_trial_state_values(storage_id, TrialState[state], None if value is None else [value])


def optuna_study_owner(storage: Any, name: str) -> str | None:
    """The experiment folder a study of ``storage`` was written by, ``""`` for another tool's, ``None`` if none."""
    for study in storage.get_all_studies():
        if study.study_name == name:
            return study_owner(study.user_attrs)
    return None
