"""The trial driver: the body of each Tune trial, which builds and fits one nested ``TorchTrainer`` run.

This module runs in the Tune trial's actor: a function trainable's thread, ``ray::ImplicitFunc``.
There is one per running trial. It is on the head node by default, where
:func:`hpsearch.runtime.trial.trainable.make_trainable` places it. Tune pickles the trainable built
in the search process into it. So what :func:`run_nested` is given must pickle:
:class:`TrialData`, :class:`Feed` and the spec's sections. This module is imported there by
reference, because hpsearch is installed on every node.

For each trial, the driver sets:

- the Ray Train environment defaults;
- the nested run's name. It is the trial id, which is deterministic, so a retried or restored
  trial finds its own checkpoints. Under pbt/pb2 it is the run that
  :mod:`hpsearch.runtime.trial.pbt_driver` resolves;
- the run's storage, under the experiment folder's ``train/``;
- the trial's config, as ``train_loop_config``;
- the datasets;
- the Train callback that forwards every report to Tune (:mod:`hpsearch.runtime.train.controller`).

With the work-arounds on (``HPSEARCH_RAY_WORKAROUNDS``, read in the search process and passed in as
``record_controller``), the nested run starts fewer helper processes beside the driver, each cut
measured by ``benchmarks/trial_start.py``: no Ray Data ``DatasetManager`` when the trial has no
datasets (:func:`hpsearch.runtime.internals.lean_trainer_class`; Ray's placement-group cleaner stays,
see :class:`hpsearch.runtime.ray_workarounds.OrphanReaper`); and no queue actor for the reports, which
reach this driver through a socket of its own while ``fit()`` runs in another thread
(:class:`hpsearch.runtime.train.controller.ReportChannel`), and which it hands to Tune with
``ray.tune.report``.

Each worker runs the loop wrapped by :mod:`hpsearch.runtime.train.worker`. A trial whose report lacks
a required metric ends with :class:`~hpsearch.errors.MetricNotReportedError`, in one line. The
error is remembered, so Tune's retries of that trial in this search fail at once.

While ``fit()`` runs, a :class:`~hpsearch.runtime.rank_watch.Watchdog` thread reads the ranks'
progress records every second. Ranks that reported unequally (one returned while another waits at
a later report's barrier) end the trial at once, and with ``failure.report_timeout_s`` a trial that
sent no report for that long: its controller is ended, with its workers, and the trial fails with
one line (:class:`~hpsearch.runtime.rank_watch.RankHangError`) naming the ranks.

A drained node (``ray drain-node``, a spot reclaim) restarts the worker group from its latest checkpoint,
counted apart from the failures, up to ``failure.preemption_retries`` times (Ray Train's
``max_preemption_failures``); after its nested run the driver adds to each drain notice its loop recorded
the reason the drain gave, which Ray shows only once the node is gone (:mod:`hpsearch.experiment.preemptions`).
With drivers on any node (``resources.driver_node: any``) the driver watches its own node too
(:class:`~hpsearch.runtime.trial.drain_watch.DrainWatch`): drained, the trial saves a checkpoint and is
paused, and its next driver, elsewhere, carries the nested run on (:mod:`hpsearch.experiment.driver_drains`).

An elastic trial (``scaling.num_workers: {min, max}``) gets Ray's ``ScalingConfig(num_workers=(min,
max))``. Ray sizes its worker group from what its autoscaling coordinator reserves for it: each
node's total resources less the requests made before the trial's. Tune's trial drivers are not
among them, so before the first elastic trial's own request the driver tells the coordinator what
the search's drivers hold on the head node (:class:`DriverRoom`), and keeps telling it while the
driver's actor lives.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray import train, tune

from hpsearch import messages
from hpsearch.errors import CheckpointNotReportedError, MetricNotReportedError
from hpsearch.experiment import files
from hpsearch.experiment.layout import TRAIN_RUNS_DIR
from hpsearch.planning.planner import HEAD_RESOURCE, HEAD_SLIVER
from hpsearch.runtime import ray_workarounds, retries
from hpsearch.runtime.datasets import build_for_trial, data_config
from hpsearch.runtime.env import apply_trial_defaults, set_torch_master
from hpsearch.runtime.internals import (
    available,
    controller_failure,
    hold_in_coordinator,
    lean_torch_config,
    lean_trainer_class,
    torch_config_with_worker_setup,
)
from hpsearch.runtime.nodes.node_check import pin_worker_interface
from hpsearch.runtime.rank_watch import Watchdog
from hpsearch.runtime.train.controller import CheckpointRules, ReportChannel, aggregating_callback, fit_serving
from hpsearch.runtime.train.loopback_store import SCHEME, prepare_worker
from hpsearch.runtime.train.worker import worker_loop
from hpsearch.runtime.trial import pbt_driver, reuse
from hpsearch.runtime.trial.drain_watch import DrainWatch
from hpsearch.spec import Aggregate, FailureSettings, Scaling

__all__ = ["Feed", "TrialData", "run_nested", "scaling_config_kwargs", "driver_room", "DriverRoom"]


@dataclass(frozen=True)
class Feed:
    """How a trial's datasets are fed: which names are split across workers, and each executor's caps."""

    split: tuple[str, ...]
    cpu_limit: float | None
    concurrency: int


@dataclass(frozen=True)
class TrialData:
    """One trial's datasets: those shared by every trial, and the factories it calls itself."""

    shared: dict[str, Any]
    factories: dict[str, Callable[..., Any]]
    feed: Feed


def run_nested(
    train_loop: Callable[..., Any],
    config: dict[str, Any],
    scaling: Scaling,
    failure: FailureSettings,
    checkpoint_config: dict[str, Any],
    aggregate: Aggregate,
    runs_dir: str | None,
    record_controller: bool = True,
    *,
    metric: str | None = None,
    required: Mapping[str, str] | Sequence[str] = (),
    search_token: str = "",
    data: TrialData | None = None,
    population: bool = False,
    watch_drains: bool = False,
) -> None:
    """Body of the trial driver (runs in the Tune trial's actor); ``watch_drains`` (drivers on any node): it
    watches its own node for a drain while the run is fitted (:class:`~hpsearch.runtime.trial.drain_watch.DrainWatch`)."""
    apply_trial_defaults(failure)  # Ray Train passes them on to the controller and the workers

    from ray.train.torch import TorchTrainer  # lazy: torch takes seconds; the search process never builds one

    context = tune.get_context()
    trial_id = context.get_trial_id()
    if runs_dir is None:
        runs_dir = str(Path(context.get_trial_dir()).parent / TRAIN_RUNS_DIR)
    trial_folder = os.path.join(runs_dir, trial_id)  # the trial's history, lineage and controller record
    _refuse_a_known_failure(trial_folder, search_token, required)
    generation = reuse.begin_run(trial_folder)  # a reused actor ends this run before its next trial
    storage_path, run_name, donor_epoch = (
        _population_start(trial_id, runs_dir) if population else (runs_dir, trial_id, None)
    )
    fed = _fed_datasets(data, config) if data is not None else {}

    # With searched scaling, this trial's own values come from its config. The config keeps them under
    # `scaling`, so the loop can read its scale, and the config it sees is the one Tune and load_results show.
    own = scaling.for_trial(config)
    if own.elastic is not None:  # before the trial's own request to the coordinator (made in fit())
        _keep_driver_room(context, trial_id, search_token)
    # With the work-arounds on (record_controller: the switch as the search process read it), the nested run
    # starts fewer helper processes beside the driver: no DatasetManager without datasets
    # (internals.lean_trainer_class; Ray's placement-group cleaner stays: see ray_workarounds.OrphanReaper).
    trainer_class = lean_trainer_class(TorchTrainer) if record_controller else TorchTrainer
    # The same switch: reports reach this driver through a socket of its own, not Ray's queue actor (controller.py).
    channel = ReportChannel() if record_controller and available("train-controller-on-driver-node") else None
    watch = DrainWatch(trial_folder, trial_id) if watch_drains else contextlib.nullcontext()
    per_worker = worker_loop(
        reuse.current(train_loop), trial_folder, workarounds=record_controller, driver_drains=watch_drains
    )
    try:
        callback = aggregating_callback(
            aggregate,
            trial_folder,
            record_controller,
            required=required,
            checkpoints=CheckpointRules(population, donor_epoch) if population else None,
            search=search_token,
            channel=channel.address if channel is not None else None,
        )
        with watch:
            _build_and_fit(
                trainer_class(
                    per_worker,
                    train_loop_config=config,
                    torch_config=_torch_config(own.workers, record_controller),
                    scaling_config=train.ScalingConfig(**scaling_config_kwargs(own)),
                    run_config=_run_config(run_name, storage_path, callback, failure, checkpoint_config),
                    **fed,
                ),
                channel,
                generation,
                trial_folder,
                failure,
                search_token,
                wait_for_queues=record_controller and channel is None,
            )
    finally:
        if channel is not None:
            channel.close()
        _record_drain_reasons(trial_folder)


def _population_start(trial_id: str, runs_dir: str) -> tuple[str, str, int | None]:
    """Under pbt/pb2: the nested run's storage and name, and the donor's epoch after an exploit; pointer reports on."""
    start = pbt_driver.resolve_start(trial_id, runs_dir, tune.get_checkpoint())
    pbt_driver.install_pointer_reports(trial_id, runs_dir, start)
    return start.storage_path(runs_dir), start.name, start.donor.epoch if start.donor is not None else None


def _record_drain_reasons(trial_folder: str) -> None:
    """Add to the trial's drain notices the reason each drained node's drain gave, where Ray now shows it.

    Ray shows a drain's reason message (``ray drain-node --reason-message``) only once the node is gone
    (``ray.nodes()``' ``DeathReasonMessage``), after the worker group's restart; the loop's notice could not
    hold it. A record, so it never fails the trial; a node still there is looked up again after the next run.
    """
    try:
        wanted = files.missing_reasons(trial_folder)
        if not wanted:
            return
        gone = ray.nodes()  # type: ignore[no-untyped-call]  # Ray's API is unannotated
        said = {str(node.get("NodeID")): str(node.get("DeathReasonMessage") or "") for node in gone}
        for folder, node_ids in wanted.items():
            for node_id in node_ids:
                if said.get(node_id):
                    files.append_reason(folder, node_id, said[node_id])
    except Exception:  # noqa: BLE001 - the reason is a courtesy: the notice and the restart are recorded without it
        pass


def _refuse_a_known_failure(trial_folder: str, search_token: str, required: Mapping[str, str] | Sequence[str]) -> None:
    """Raise, before any nested run, the error a retry by Tune (``trial_retries``) would only meet again."""
    earlier = _missing_metric_before(trial_folder, search_token) if required else None
    if earlier is not None:
        raise earlier
    repeat = retries.repeated(trial_folder, search_token) if search_token else None
    if repeat is not None:  # it failed the same way twice: Tune's retry ends here
        raise repeat


def _fed_datasets(data: TrialData, config: dict[str, Any]) -> dict[str, Any]:
    """The trainer's ``datasets`` and ``dataset_config``: the shared ones and this trial's own."""
    built = build_for_trial({k: reuse.current(f) for k, f in data.factories.items()}, config)
    return {
        "datasets": {**data.shared, **built},
        "dataset_config": data_config(data.feed.split, data.feed.cpu_limit, data.feed.concurrency),
    }


def _keep_driver_room(context: Any, trial_id: str, search_token: str) -> None:
    """An elastic trial: ask Ray's autoscaling coordinator to hold the trial drivers' room first."""
    exp_dir = Path(context.get_trial_dir()).parent
    told = DRIVER_ROOM.keep(
        f"hpsearch-drivers-{search_token or exp_dir.name}",
        driver_room(files.read_plan(exp_dir), context.get_trial_resources().bundles),
    )
    if not told:  # in the trial's log: why its worker group may be sized for room the drivers hold
        messages.say(
            f"trial {trial_id}: Ray's autoscaling coordinator did not take the trial drivers' room within "
            f"{DriverRoom.FIRST_TIMEOUT_S:g} s; it may size this elastic trial for room they hold"
        )


def _torch_config(workers: int, record_controller: bool) -> Any:
    """Ray's TorchConfig for the run, or ``None`` for Ray's default.

    On a host whose name resolves to a loopback address each worker first pins gloo's interface to
    its node's IP, or the other hosts' workers cannot reach it (node_check). With the work-arounds
    on, a config the controller unpickles without importing torch (internals.lean_torch_config),
    whose workers, when every rank is on this machine, keep gloo and rank 0's rendezvous store on
    the loopback (runtime/train/loopback_store).
    """
    if record_controller:  # every rank on this machine (an embedded Ray): gloo and rank 0's store on the loopback
        lean = lean_torch_config(set_torch_master, prepare_worker, SCHEME)
        if lean is not None:
            return lean
    setup = pin_worker_interface if workers > 1 and available("torch-backend-start") else None
    return torch_config_with_worker_setup(setup) if setup is not None else None


def _run_config(
    run_name: str, storage_path: str, callback: Any, failure: FailureSettings, checkpoint_config: dict[str, Any]
) -> Any:
    """The nested run's ``train.RunConfig``: its unique name, its folder, the report callback, its limits."""
    # ray.train's names resolve to Train V2's classes at run time; type checkers see V1's.
    return train.RunConfig(  # type: ignore[call-arg]  # V2's RunConfig takes logging_config
        name=run_name,
        storage_path=storage_path,
        callbacks=[callback],
        failure_config=train.FailureConfig(  # type: ignore[call-arg]  # V2's FailureConfig has these limits
            max_failures=failure.worker_retries,
            controller_failure_limit=failure.controller_retries,
            # counted apart: a drained node's restart never spends worker_retries (in every supported Ray's
            # FailureConfig, Ray 2.58.1's included); its own bound, as Ray's default has none
            max_preemption_failures=failure.preemption_retries,
            **failure.preemption_options(),  # type: ignore[arg-type]  # V2's names; only those set (preflight)
        ),
        checkpoint_config=train.CheckpointConfig(**checkpoint_config),
        logging_config=train.LoggingConfig(log_level="WARNING"),
    )


def _build_and_fit(
    trainer: Any,
    channel: ReportChannel | None,
    generation: int,
    trial_folder: str,
    failure: FailureSettings,
    search_token: str,
    *,
    wait_for_queues: bool,
) -> None:
    """Fit the nested run; its error, if it fails, as the trial's one line where hpsearch has one."""
    reuse.claim(generation)  # leave if a later trial took this actor while this one was setting up
    watchdog = Watchdog(trial_folder, failure.report_timeout_s)  # ranks that report unequally, or stall
    try:
        with watchdog:
            # raises the nested run's error, so Tune marks the trial errored
            if channel is None:
                trainer.fit()
            else:  # each report handed to Tune in this thread, as the controller sends it
                fit_serving(trainer.fit, channel, tune.report)
        reuse.claim(generation)
        if wait_for_queues:  # the work-arounds are on, so Tune must take the last report off the queue first (bug 3)
            ray_workarounds.wait_for_forwarded_reports()
    except Exception as err:
        watchdog.raise_verdict()  # the watchdog ended the run: its one line is the trial's error
        repeat = retries.repeated(trial_folder, search_token) if search_token else None
        if repeat is not None:  # the controller stopped restarting it: one line, not Ray's wrapper
            raise repeat from None
        cause = controller_failure(err)  # the error the callback raised, from inside a ControllerError
        if isinstance(cause, CheckpointNotReportedError):
            raise cause from None  # one line, not Ray's wrapper around it
        if not isinstance(cause, MetricNotReportedError):
            raise
        _remember_missing_metric(trial_folder, search_token, cause)
        raise cause from None  # the trial's error is the one line, not Ray's wrapper around it


def scaling_config_kwargs(own: Scaling) -> dict[str, Any]:
    """Ray Train's ``ScalingConfig`` arguments for a trial's own (constant or elastic) scaling."""
    out: dict[str, Any] = {
        "num_workers": own.workers,
        "use_gpu": own.use_gpu,
        "resources_per_worker": own.worker_bundle(),
        "placement_strategy": own.placement_strategy,
    }
    if own.elastic is not None:
        out["num_workers"] = (own.elastic.min, own.elastic.max)  # a tuple: Ray refuses a list
        if own.resize_interval_s is not None:
            out["elastic_resize_monitor_interval_s"] = own.resize_interval_s
    return out


def driver_room(
    plan: Mapping[str, Any] | None, driver_bundles: Sequence[Mapping[str, float]]
) -> list[dict[str, float]]:
    """What the search's trial drivers hold, as bundles for Ray's autoscaling coordinator.

    One driver's bundles (Tune's, pinned to the head node) for each of the plan's trials at once,
    and the CPUs the plan keeps free on the head node for Ray Data (``data.cpus``): the room the
    planner left out of the trials' workers. Without a plan (a trainable run outside ``hpsearch
    run``), this driver's own bundles.
    """
    trials = int((plan or {}).get("max_concurrent_trials") or 1)
    own = [{k: float(v) for k, v in bundle.items() if float(v) > 0} for bundle in driver_bundles]
    # a sliver of the head's one unit each (a pbt driver slot holds more: the sum would not fit, and go uncounted)
    own = [{**bundle, HEAD_RESOURCE: HEAD_SLIVER} if HEAD_RESOURCE in bundle else bundle for bundle in own]
    out = own * trials
    reserved = {k: float(v) for k, v in ((plan or {}).get("reserved") or {}).items() if float(v) > 0}
    if reserved:
        out.append({**reserved, HEAD_RESOURCE: HEAD_SLIVER})
    return [bundle for bundle in out if bundle]


class DriverRoom:
    """The room the search's trial drivers hold, told to Ray's autoscaling coordinator and kept told.

    The coordinator forgets a request not repeated within ``EXPIRE_S``; a thread of the driver's
    actor repeats it every ``REPEAT_S`` (as Ray Train repeats its own), so it lapses once no driver
    of the search is left. One per process.
    """

    #: Ray Train repeats its own requests every 20 s and lets them lapse after 180 s (AUTOSCALING_REQUESTS_*).
    REPEAT_S = 20.0
    EXPIRE_S = 180.0
    #: The first request waits this long for the coordinator (an actor Ray starts on first use).
    FIRST_TIMEOUT_S = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._request: tuple[str, list[dict[str, float]]] | None = None
        self._thread: threading.Thread | None = None

    def keep(self, requester_id: str, bundles: list[dict[str, float]]) -> bool:
        """Tell the coordinator now (waiting for its answer), then keep telling it; whether it answered."""
        with self._lock:
            self._request = (requester_id, bundles)
            if self._thread is None:
                self._thread = threading.Thread(target=self._repeat, name="hpsearch-driver-room", daemon=True)
                self._thread.start()
        return hold_in_coordinator(requester_id, bundles, expire_after_s=self.EXPIRE_S, timeout_s=self.FIRST_TIMEOUT_S)

    def _repeat(self) -> None:
        while True:
            threading.Event().wait(self.REPEAT_S)
            with self._lock:
                request = self._request
            if request is not None:
                hold_in_coordinator(*request, expire_after_s=self.EXPIRE_S, timeout_s=self.REPEAT_S / 2)


DRIVER_ROOM = DriverRoom()


def _remember_missing_metric(trial_folder: str, search_token: str, error: MetricNotReportedError) -> None:
    """Keep a trial's missing metric for Tune's retries of it in this search.

    This is a courtesy, so it never fails the trial further.
    """
    try:
        files.write_missing_metric(
            trial_folder, search_token, metric=error.metric, reported=list(error.reported), named_by=error.named_by
        )
    except OSError:  # without it a retry runs the loop once more and fails the same way
        pass


def _missing_metric_before(trial_folder: str, search_token: str) -> MetricNotReportedError | None:
    """The missing metric an earlier run of this trial, in this search (not a resumed one), failed on."""
    found = files.read_missing_metric(trial_folder, search_token)
    return None if found is None else MetricNotReportedError(found["metric"], found["reported"], found["named_by"])
