"""The contract between hpsearch and the installed Ray (and Optuna, HyperOpt, TensorBoardX).

Every internal hpsearch relies on (:data:`hpsearch.runtime.internals.INTERNALS`) is checked
against the libraries installed here: the names, the signatures, the attributes read and the
module constants written. No cluster starts; the whole file takes seconds. A failure names the
internal and the feature that depends on it, which is what to look at after a Ray upgrade.

The same checks run at the start of every ``hpsearch run`` and ``resume`` (``preflight``); the
second half of this file drives that with a contract broken on purpose.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest
import yaml

from hpsearch.errors import IncompatibleLibraryError
from hpsearch.runtime import internals
from hpsearch.runtime.internals import (
    INTERNALS,
    ContractBroken,
    Internal,
    contract_checks,
    ray_core,
    ray_data,
    registry,
    torch_optim,
    train_controller,
    train_torch,
    tune_schedulers,
)


@pytest.mark.parametrize("internal", INTERNALS, ids=lambda i: i.key)
def test_the_installed_libraries_keep_the_contract(internal: Internal) -> None:
    try:
        internal.check()
    except ContractBroken as err:
        pytest.fail(
            f"{internal.key}: {err}\n  relies on: {internal.relies_on}\n  feature: {internal.feature}\n"
            f"  without it: {internal.without_it}\n  at start: {internal.on_missing}"
        )


def test_every_internal_says_what_it_relies_on_and_what_breaks() -> None:
    assert len({i.key for i in INTERNALS}) == len(INTERNALS)
    for internal in INTERNALS:
        assert internal.relies_on and internal.feature and internal.without_it and internal.public, internal.key
        assert internal.on_missing in ("warn", "refuse"), internal.key
    assert internals.broken() == {}


def test_the_architecture_map_has_a_row_for_every_internal_and_says_what_it_does_at_start() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
    for internal in INTERNALS:
        rows = [line for line in text.splitlines() if line.startswith(f"| `{internal.key}` |")]
        assert len(rows) == 1, f"docs/architecture.md needs one row for {internal.key}"
        assert f"**{internal.on_missing}**" in rows[0], f"{internal.key}: the table says another decision"


# ----------------------------------------------------------------------------- each check can fail


def test_the_loopback_check_fails_when_ray_drops_its_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    constants = importlib.import_module("ray._private.ray_constants")
    monkeypatch.delattr(constants, "ENABLE_RAY_CLUSTER")
    with pytest.raises(ContractBroken, match="ENABLE_RAY_CLUSTER is no longer a bool"):
        ray_core._check_loopback()


def test_the_session_check_fails_when_a_queue_is_renamed(monkeypatch: pytest.MonkeyPatch) -> None:
    session = importlib.import_module("ray.train._internal.session")
    source = (
        "class _TrainSession:\n    def __init__(self):\n        self._inter_actor_q = None\n"
        "        self.result_queue = self.error_queue = self.stop_event = None\n"
        "        self.training_thread = self.continue_lock = self.training_started = None\n"
    )
    monkeypatch.setattr(contract_checks.inspect, "getsource", lambda obj: source)
    with pytest.raises(ContractBroken, match="no longer sets _inter_actor_queue"):
        contract_checks._assigns("ray.train._internal.session:_TrainSession", "_inter_actor_queue", "result_queue")
    assert session.get_session is not None


def test_a_renamed_private_method_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.tune.schedulers import pbt

    monkeypatch.delattr(pbt.PopulationBasedTraining, "_exploit")
    with pytest.raises(ContractBroken, match="PopulationBasedTraining has no attribute _exploit"):
        tune_schedulers._check_exploit()


def test_the_drain_checks_fail_when_ray_drops_the_draining_list_or_reads_reuse_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ray._private import state
    from ray.tune.execution import tune_controller

    with monkeypatch.context() as patch:
        patch.delattr(state.GlobalState, "get_draining_nodes")
        with pytest.raises(ContractBroken, match="get_draining_nodes"):
            ray_core._check_draining_nodes()
    source = "def _maybe_cache_trial_actor(self, trial):\n    return self._actor_cache.cache_object(trial)\n"
    real = contract_checks.inspect.getsource
    monkeypatch.setattr(
        contract_checks.inspect,
        "getsource",
        lambda obj: source if obj is tune_controller.TuneController._maybe_cache_trial_actor else real(obj),
    )
    with pytest.raises(ContractBroken, match="no longer refers to if not self._reuse_actors:"):
        tune_schedulers._check_pause_without_reuse()


def test_without_the_drain_internals_a_search_with_drivers_anywhere_says_so_and_pauses_no_trial(
    tmp_path: Path, broken_contracts, said
) -> None:
    from types import SimpleNamespace

    broken_contracts({"ray-draining-nodes": "ray._private.state.GlobalState has no get_draining_nodes"})
    internals.preflight(_spec(tmp_path, resources={"driver_node": "any"})[1])
    assert said.getvalue().splitlines() == [
        "hpsearch: off for this search: a trial whose driver's node is drained pauses, and resumes on another node "
        "(driver_node: any) (Ray internal ray-draining-nodes: ray._private.state.GlobalState has no get_draining_nodes)"
    ]
    assert internals.draining_nodes() is None  # the driver's watch sees it off
    broken_contracts({"tune-pause-no-reuse": "TuneController no longer sets _reuse_actors"})
    tune = SimpleNamespace(pause_trial=lambda *a, **k: pytest.fail("paused without the internal"))
    assert not internals.pause_without_reuse(tune, object())  # the scheduler's decision stands


def test_an_environment_variable_ray_no_longer_reads_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    constants = importlib.import_module("ray.train.v2._internal.constants")
    monkeypatch.setattr(constants, "HEALTH_CHECK_INTERVAL_S_ENV_VAR", "RAY_TRAIN_POLL_S")
    with pytest.raises(ContractBroken, match="HEALTH_CHECK_INTERVAL_S_ENV_VAR is no longer 'RAY_TRAIN_HEALTH"):
        train_controller._check_env_names()


def test_a_changed_default_ray_data_share_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.data._internal.execution.resource_manager import ResourceManager

    monkeypatch.setattr(ResourceManager, "DEFAULT_OBJECT_STORE_MEMORY_LIMIT_FRACTION", 0.25)
    with pytest.raises(ContractBroken, match="is 0.25, hpsearch assumes 0.5"):
        ray_data._check_data_fraction()


def test_the_torch_backend_check_fails_when_on_start_no_longer_sets_up_the_process_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = train_torch._torch_config_source()
    assert "_setup_torch_process_group,\n" in source  # on_start hands it to each worker
    monkeypatch.setattr(
        train_torch, "_torch_config_source", lambda: source.replace("_setup_torch_process_group,\n", "_setup,\n")
    )
    with pytest.raises(ContractBroken, match="_TorchBackend.on_start no longer sets up the process group"):
        train_torch._check_torch_backend()
    monkeypatch.setattr(
        train_torch, "_torch_config_source", lambda: source.replace("class _TorchBackend(", "class _B(")
    )
    with pytest.raises(ContractBroken, match="ray.train.torch.config has no class _TorchBackend"):
        train_torch._check_torch_backend()


def test_the_torch_checks_fail_when_load_state_dict_or_the_last_rates_change(monkeypatch: pytest.MonkeyPatch) -> None:
    read = torch_optim._torch_source
    optimizer, schedulers = read("optim", "optimizer.py"), read("optim", "lr_scheduler.py")
    load = "def load_state_dict(self, state_dict: StateDict)"
    assert load in optimizer and "return self._last_lr" in schedulers
    changed = {
        "optimizer.py": optimizer.replace(
            load, "def load_state_dict(self, state_dict: StateDict, strict: bool = True)"
        ),
        "lr_scheduler.py": schedulers.replace("return self._last_lr", "return list(self._lrs)"),
    }
    monkeypatch.setattr(torch_optim, "_torch_source", lambda *parts: changed[parts[-1]])
    with pytest.raises(ContractBroken, match=r"Optimizer.load_state_dict no longer takes \(state_dict\) alone"):
        torch_optim._check_optimizer_load()
    with pytest.raises(ContractBroken, match="LRScheduler.get_last_lr no longer returns _last_lr"):
        torch_optim._check_scheduler_load()


def test_without_the_torch_internals_a_pbt_search_says_so_in_one_line(tmp_path: Path, broken_contracts, said) -> None:
    broken_contracts({"torch-scheduler-load": "torch.optim.lr_scheduler.LRScheduler no longer sets _last_lr"})
    internals.preflight(_spec(tmp_path)[1])  # no population, no donor to load from: nothing to say
    assert said.getvalue() == ""
    mutations = {"lr": {"type": "float", "low": 1.0e-3, "high": 1.0e-1, "log": True}}
    internals.preflight(
        _spec(tmp_path, scheduler={"type": "pbt", "perturbation_interval": 1, "hyperparam_mutations": mutations})[1]
    )
    assert said.getvalue().splitlines() == [
        "hpsearch: off for this search: under pbt/pb2, an exploited trial's LR schedule goes on at the mutated base "
        "rate when the loop loads the donor's scheduler state (Ray internal torch-scheduler-load: "
        "torch.optim.lr_scheduler.LRScheduler no longer sets _last_lr)"
    ]


def test_the_torch_config_runs_the_worker_setup_on_every_worker_before_rays_process_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ray.train.torch import TorchConfig
    from ray.train.torch.config import _TorchBackend

    from hpsearch.runtime.nodes.node_check import pin_worker_interface

    config = internals.torch_config_with_worker_setup(pin_worker_interface)
    assert isinstance(config, TorchConfig)
    assert config.to_dict() == TorchConfig().to_dict()  # Ray's backend choice, init method and timeout
    calls: list[str] = []

    class Workers:
        def execute(self, fn):
            calls.append(f"every worker: {fn.__name__}")
            return [{}]

    monkeypatch.setattr(_TorchBackend, "on_start", lambda self, group, cfg: calls.append("Ray's process group"))
    backend = config.backend_cls()
    assert isinstance(backend, _TorchBackend)
    backend.on_start(Workers(), config)
    assert calls == ["every worker: pin_worker_interface", "Ray's process group"]


def test_the_torch_config_reaches_a_process_that_never_built_it() -> None:
    """Ray's cloudpickle sends the config to the Train controller, which has not made the classes."""
    import subprocess
    import sys

    from ray import cloudpickle

    from hpsearch.runtime.nodes.node_check import pin_worker_interface

    blob = cloudpickle.dumps(internals.torch_config_with_worker_setup(pin_worker_interface))
    check = (
        "import pickle, sys\n"
        "from ray.train.torch.config import TorchConfig, _TorchBackend\n"
        "config = pickle.loads(sys.stdin.buffer.read())\n"
        "assert isinstance(config, TorchConfig) and issubclass(config.backend_cls, _TorchBackend)\n"
        "print(config.worker_setup.__module__, config.worker_setup.__name__, config.backend, config.timeout_s)\n"
    )
    done = subprocess.run([sys.executable, "-c", check], input=blob, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().split() == ["hpsearch.runtime.nodes.node_check", "pin_worker_interface", "None", "1800"]


# ----------------------------------------------------------------------------- at start: warn or refuse

SPEC = {
    "name": "contract",
    "trainable": "hpsearch.examples.digits:train_loop",
    "metric": "val_loss",
    "mode": "min",
    "num_samples": 2,
    "search_space": {"lr": {"type": "float", "low": 1.0e-3, "high": 1.0e-1, "log": True}, "epochs": 2},
    "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.5}},
    "resources": {"driver_cpus": 0.1},
}


@pytest.fixture
def broken_contracts(monkeypatch: pytest.MonkeyPatch):
    """Pretend the installed Ray breaks the contracts given (``broken_contracts({"key": "why"})``)."""

    def pretend(found: dict[str, str]) -> None:
        monkeypatch.setattr(registry, "_problem", lambda key: found.get(key))

    return pretend


def _spec(tmp_path: Path, **changes):
    from hpsearch.spec import load_spec

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**SPEC, **changes}, sort_keys=False), encoding="utf-8")
    return path, load_spec(path)


def test_a_missing_internal_hpsearch_can_do_without_is_one_line_and_its_feature_goes_off(
    tmp_path: Path, broken_contracts, said
) -> None:
    broken_contracts({"tune-session-queues": "ray.train._internal.session has no attribute get_session"})
    internals.preflight(_spec(tmp_path)[1])
    assert said.getvalue().splitlines() == [
        "hpsearch: off for this search: the trial-driver hang work-around (Ray bug 3) and reused trial actors "
        "(Ray internal tune-session-queues: ray.train._internal.session has no attribute get_session)"
    ]
    assert not internals.available("tune-session-queues") and internals.available("trainable-mixins")
    assert internals.DriverSession.current() is None  # the work-around and reuse see it off


def test_a_missing_internal_of_a_feature_the_spec_does_not_use_says_nothing(
    tmp_path: Path, broken_contracts, said
) -> None:
    broken_contracts({"tensorboard-writers": "ray.tune.logger.TBXLoggerCallback no longer sets _trial_writer"})
    internals.preflight(_spec(tmp_path)[1])
    assert said.getvalue() == ""


def test_a_missing_internal_the_search_needs_refuses_it_with_the_versions_and_what_to_do(
    tmp_path: Path, broken_contracts
) -> None:
    import ray

    broken_contracts({"loopback-switch": "ray._private.ray_constants.ENABLE_RAY_CLUSTER is no longer a bool"})
    with pytest.raises(IncompatibleLibraryError) as refused:
        internals.preflight(_spec(tmp_path)[1])
    message = str(refused.value)
    expected = f"this search needs Ray internals that the installed libraries (ray {ray.__version__}, optuna "
    assert message.startswith(expected), message
    assert (
        "  loopback-switch (an embedded Ray that listens on 127.0.0.1 only): "
        "ray._private.ray_constants.ENABLE_RAY_CLUSTER is no longer a bool\n"
    ) in message
    assert message.endswith(
        f"hpsearch was checked on {internals.CHECKED_ON}: install one of those (pip install "
        "'ray[default,train,tune]==2.60.0'), or an hpsearch release that supports your Ray"
    )


def test_the_loopback_switch_is_needed_only_by_an_embedded_ray(tmp_path: Path, broken_contracts, said) -> None:
    broken_contracts({"loopback-switch": "ray._private.ray_constants.ENABLE_RAY_CLUSTER is no longer a bool"})
    internals.preflight(_spec(tmp_path)[1], embedded=False)  # --address: a cluster of the user's
    assert said.getvalue() == ""
    with pytest.raises(IncompatibleLibraryError):
        internals.preflight(_spec(tmp_path)[1], embedded=True)


def test_run_refuses_before_ray_starts_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken_contracts, capsys: pytest.CaptureFixture[str]
) -> None:
    import ray

    from hpsearch.cli import main

    monkeypatch.chdir(tmp_path)
    mutations = {"lr": {"type": "float", "low": 1.0e-3, "high": 1.0e-1, "log": True}}
    path, _ = _spec(tmp_path, scheduler={"type": "pbt", "perturbation_interval": 1, "hyperparam_mutations": mutations})
    broken_contracts({"tune-session-report": "ray.train._internal.session._TrainSession has no attribute report"})
    assert not ray.is_initialized()
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"Error: this search needs Ray internals that the installed libraries (ray {ray.__version__}, "
    ), err
    assert "  tune-session-report (pbt/pb2: each report reaches Tune with a pointer checkpoint): " in err
    assert not ray.is_initialized()
    assert not (tmp_path / "hpsearch-results" / "contract").exists()


def test_build_tuner_checks_the_internals_too(tmp_path: Path, broken_contracts) -> None:
    """The programmatic path refuses as run does, before any Tuner is built or Ray started."""
    import ray

    from hpsearch.planning.planner import Node
    from hpsearch.runtime.search.tuner import build_tuner

    mutations = {"lr": {"type": "float", "low": 1.0e-3, "high": 1.0e-1, "log": True}}
    _, spec = _spec(tmp_path, scheduler={"type": "pbt", "perturbation_interval": 1, "hyperparam_mutations": mutations})
    broken_contracts({"tune-session-report": "ray.train._internal.session._TrainSession has no attribute report"})
    was_up = ray.is_initialized()
    with pytest.raises(IncompatibleLibraryError, match="tune-session-report"):
        build_tuner(spec, nodes=[Node({"CPU": 2.0, "memory": 8e9}, "head", is_head=True)])
    assert ray.is_initialized() is was_up


def test_without_the_torch_backend_internal_trials_get_rays_own_torch_config(
    tmp_path: Path, broken_contracts, said
) -> None:
    broken_contracts({"torch-backend-start": "ray.train.torch.config has no class _TorchBackend"})
    assert internals.torch_config_with_worker_setup(print) is None
    internals.preflight(_spec(tmp_path)[1])  # one worker per trial: nothing to say
    assert said.getvalue() == ""
    internals.preflight(_spec(tmp_path, scaling={"num_workers": 2, "resources_per_worker": {"CPU": 0.5}})[1])
    assert said.getvalue().splitlines() == [
        "hpsearch: off for this search: trials that span hosts whose name resolves to a loopback address (each "
        "worker's GLOO_SOCKET_IFNAME set to the interface of its node's IP) (Ray internal torch-backend-start: "
        "ray.train.torch.config has no class _TorchBackend)"
    ]


# ----------------------------------------------------------------------------- elastic trials


def test_the_coordinator_check_fails_when_ray_no_longer_sizes_elastic_groups_from_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ray.train.v2._internal.execution.scaling_policy.elastic import ElasticScalingPolicy

    real = contract_checks.inspect.getsource
    method = ElasticScalingPolicy.make_decision_for_non_running_worker_group
    monkeypatch.setattr(
        contract_checks.inspect,
        "getsource",
        lambda obj: "def sized_elsewhere(self): ..." if obj is method else real(obj),
    )
    with pytest.raises(ContractBroken, match=r"no longer refers to self._get_reserved_resources\(\)"):
        ray_data._check_coordinator()


def test_the_coordinator_check_fails_when_its_entry_point_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    coordinator = importlib.import_module("ray.data._internal.cluster_autoscaler.default_autoscaling_coordinator")
    monkeypatch.delattr(coordinator, "get_or_create_autoscaling_coordinator")
    with pytest.raises(ContractBroken, match="has no attribute get_or_create_autoscaling_coordinator"):
        ray_data._check_coordinator()


def test_an_elastic_search_is_refused_without_the_coordinator_and_a_fixed_one_is_not(
    tmp_path: Path, broken_contracts, said
) -> None:
    broken_contracts({"train-autoscaling-coordinator": "...ResourceRequestPriority has no HIGH"})
    internals.preflight(_spec(tmp_path)[1])  # a fixed number of workers never asks the coordinator
    assert said.getvalue() == ""
    elastic = {"num_workers": {"min": 1, "max": 2}, "resources_per_worker": {"CPU": 0.5}}
    with pytest.raises(IncompatibleLibraryError, match=r"train-autoscaling-coordinator \(elastic trials"):
        internals.preflight(_spec(tmp_path, scaling=elastic)[1])
    assert not internals.hold_in_coordinator("hpsearch-drivers-x", [{"CPU": 1.0}], expire_after_s=1, timeout_s=1)


# ----------------------------------------------------------------------------- a nested run's helper processes


def _callbacks(trainer_class, **kwargs) -> list[str]:
    import ray.train

    trainer = trainer_class(lambda: None, scaling_config=ray.train.ScalingConfig(num_workers=2), **kwargs)
    return [type(cb).__name__ for cb in trainer._create_default_callbacks()]


def test_without_datasets_a_nested_run_starts_no_dataset_manager_and_keeps_rays_other_callbacks() -> None:
    from ray.train.torch import TorchTrainer

    ray_own = _callbacks(TorchTrainer)
    assert "DatasetsCallback" in ray_own and "PlacementGroupCleanerCallback" in ray_own
    lean = internals.lean_trainer_class(TorchTrainer)
    assert issubclass(lean, TorchTrainer) and lean.__name__ == "TorchTrainer"  # Ray's messages name it so
    assert _callbacks(lean) == [name.replace("DatasetsCallback", "NoDatasetManager") for name in ray_own]
    assert _callbacks(lean, datasets={"train": lambda: None}) == ray_own  # a run with datasets keeps Ray's
    # the search process frees the worker groups (OrphanReaper): Ray's cleaner, and only it, is left out
    assert _callbacks(internals.lean_trainer_class(TorchTrainer, cleaner=False)) == [
        name.replace("DatasetsCallback", "NoDatasetManager")
        for name in ray_own
        if name != "PlacementGroupCleanerCallback"
    ]


def test_a_worker_of_a_run_without_datasets_that_asks_for_one_gets_rays_own_key_error() -> None:
    import pickle

    import ray.train
    from ray import cloudpickle
    from ray.train.torch import TorchTrainer
    from ray.train.v2._internal.data_integration.interfaces import DatasetShardMetadata

    trainer = internals.lean_trainer_class(TorchTrainer)(
        lambda: None, scaling_config=ray.train.ScalingConfig(num_workers=2)
    )
    (callback,) = [cb for cb in trainer._create_default_callbacks() if type(cb).__name__ == "NoDatasetManager"]
    callback = pickle.loads(cloudpickle.dumps(callback))  # as the controller gets it
    providers = callback.before_init_train_context(["rank 0", "rank 1"])["dataset_shard_provider"]
    assert len(providers) == 2
    with pytest.raises(KeyError) as missing:
        pickle.loads(cloudpickle.dumps(providers[1])).get_dataset_shard(DatasetShardMetadata("train", 1))
    assert missing.value.args[0] == (
        "Dataset shard for 'train' not found. Please ensure that the dataset is passed through the Trainer "
        "`datasets` argument."
    )


def test_the_callbacks_check_fails_when_ray_no_longer_builds_them_there(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    real = contract_checks.inspect.getsource
    method = DataParallelTrainer._create_default_callbacks
    monkeypatch.setattr(
        contract_checks.inspect,
        "getsource",
        lambda obj: (
            "def _create_default_callbacks(self): return [DatasetsCallback(datasets=self.datasets)]"
            if obj is method
            else real(obj)
        ),
    )
    with pytest.raises(ContractBroken, match=r"no longer refers to PlacementGroupCleanerCallback\(\)"):
        train_controller._check_trainer_callbacks()


def test_the_callbacks_check_fails_when_a_run_ending_by_itself_no_longer_removes_its_worker_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ray.train.v2._internal.execution.worker_group.state import WorkerGroupState

    real = contract_checks.inspect.getsource
    monkeypatch.setattr(
        contract_checks.inspect,
        "getsource",
        lambda obj: "def shutdown(self): pass" if obj is WorkerGroupState.shutdown else real(obj),
    )
    with pytest.raises(ContractBroken, match=r"no longer refers to placement_group_handle.shutdown\(\)"):
        train_controller._check_trainer_callbacks()


def test_without_the_callbacks_internal_trials_get_rays_own_trainer(tmp_path: Path, broken_contracts, said) -> None:
    from ray.train.torch import TorchTrainer

    broken_contracts({"train-default-callbacks": "DataParallelTrainer has no attribute _create_default_callbacks"})
    assert internals.lean_trainer_class(TorchTrainer) is TorchTrainer
    internals.preflight(_spec(tmp_path)[1])
    assert said.getvalue().splitlines() == [
        "hpsearch: off for this search: nested runs that start no Ray Data DatasetManager without datasets "
        "(Ray internal train-default-callbacks: DataParallelTrainer has no attribute _create_default_callbacks)"
    ]


def test_reports_reach_the_driver_through_its_channel_in_order_and_fits_error_is_raised_there() -> None:
    """No queue actor: the controller sends each report to the driver's socket and waits until it is taken."""
    import threading

    from hpsearch.runtime.train.controller import ReportChannel, fit_serving, send_report

    channel = ReportChannel()
    delivered: list[dict] = []
    taken = threading.Event()

    def fit() -> None:  # the controller's side, as Ray Train's run calls after_report
        for epoch in (1, 2, 3):
            send_report(channel.address, {"epoch": epoch, "loss": 1.0 / epoch})
        taken.wait(5)
        raise RuntimeError("the nested run failed")

    def deliver(metrics: dict) -> None:  # ray.tune.report
        delivered.append(metrics)
        if len(delivered) == 3:
            taken.set()

    with pytest.raises(RuntimeError, match="the nested run failed"):
        fit_serving(fit, channel, deliver)
    assert [m["epoch"] for m in delivered] == [1, 2, 3]
    assert not Path(channel.address).exists()  # closed, its folder gone
    with pytest.raises(OSError):
        send_report(channel.address, {"epoch": 4})  # a controller that outlived its trial fails its next report


def test_the_channel_callback_sends_what_rays_callback_queues(tmp_path: Path) -> None:
    from hpsearch.runtime.train.controller import ReportChannel, aggregating_callback, fit_serving
    from hpsearch.spec import Aggregate

    channel = ReportChannel()
    callback = aggregating_callback(Aggregate(), str(tmp_path), record_controller=False, channel=channel.address)
    from ray.train import UserCallback

    assert isinstance(callback, UserCallback)  # no TuneReportCallback: no queue actor made in the driver
    delivered: list[dict] = []

    class Checkpoint:
        path = "/runs/t1/checkpoint_000000"

    def fit() -> None:
        callback.after_report(None, [{"loss": 1.0}, {"loss": 3.0}], Checkpoint())
        callback.after_report(None, [{"loss": 0.5}, {"loss": 0.5}], None)

    fit_serving(fit, channel, delivered.append)
    assert delivered == [
        {"loss": 2.0, "epoch": 1, "checkpoint_path": "/runs/t1/checkpoint_000000"},
        {"loss": 0.5, "epoch": 2},
    ]


def test_the_channel_callback_sets_itself_up_as_the_controller_unpickles_it(monkeypatch, tmp_path) -> None:
    from ray import cloudpickle

    from hpsearch.runtime import retries
    from hpsearch.runtime.train import controller
    from hpsearch.spec import Aggregate

    installed: list[tuple[str, str]] = []
    monkeypatch.setattr(retries, "install", lambda folder, search: installed.append((folder, search)))
    monkeypatch.setattr(controller, "keep_controller_output", lambda folder: False)  # not a controller here
    callback = controller.aggregating_callback(Aggregate(), str(tmp_path), search="s1", channel="/run/reports")
    copy = cloudpickle.loads(cloudpickle.dumps(callback))
    # Ray's UserCallback leaves no state of its own, and pickle skips __setstate__ for an empty state: the
    # retry judge, the controller's record and its log would then never be set up
    assert installed == [(str(tmp_path), "s1")] and copy.reports == 0


class _Workers:
    """A worker group that records what the backend has each worker run."""

    def __init__(self, size: int) -> None:
        self.size, self.calls = size, []

    def __len__(self) -> int:
        return self.size

    def execute(self, fn, *args, **kwargs):
        self.calls.append(("every worker", fn.__name__, kwargs))
        return [None] * self.size

    def execute_single(self, rank, fn, *args, **kwargs):
        self.calls.append((f"rank {rank}", fn.__name__, kwargs))
        return ("10.0.0.1", 29500)

    def execute_single_async(self, rank, fn, *args, **kwargs):
        self.calls.append((f"rank {rank}", fn.__name__, kwargs))
        return None

    def execute_async(self, fn, *args, **kwargs):
        self.calls.append(("every worker", fn.__name__, kwargs))
        return []


def test_the_lean_torch_config_sets_up_the_process_groups_as_rays_backend_does(monkeypatch) -> None:
    from ray.train.torch import TorchTrainer

    from hpsearch.runtime.env import set_torch_master
    from hpsearch.runtime.nodes.node_check import pin_worker_interface

    config = internals.lean_torch_config(set_torch_master, pin_worker_interface)
    monkeypatch.setattr("ray.get", lambda refs, timeout=None: refs)
    trainer = TorchTrainer(lambda: None, torch_config=config)  # names the backend, as for Ray's own config
    assert config.backend == "gloo" and config.to_dict() == {"backend": "gloo", "init_method": "env", "timeout_s": 1800}
    workers = _Workers(2)
    backend = trainer.backend_config.backend_cls()
    assert backend.share_cuda_visible_devices  # as Ray's _TorchBackend: each GPU worker sees its node's GPUs
    backend.on_start(workers, config)
    group = {"backend": "gloo", "world_size": 2, "init_method": "env://", "timeout_s": 1800}
    assert workers.calls == [
        ("every worker", "pin_worker_interface", {}),
        ("rank 0", "get_address_and_port", {}),
        ("every worker", "set_torch_master", {"addr": "10.0.0.1", "port": 29500}),
        ("every worker", "_on_worker_torch_env", {}),
        ("rank 0", "_on_worker_process_group", {**group, "world_rank": 0}),
        ("rank 1", "_on_worker_process_group", {**group, "world_rank": 1}),
    ]
    workers.calls.clear()
    backend.on_shutdown(workers, config)
    assert workers.calls == [("every worker", "_on_worker_shutdown", {"destroy_process_group": True})]


def test_the_mirror_check_fails_when_rays_torch_backend_gains_a_step(monkeypatch: pytest.MonkeyPatch) -> None:
    source = train_torch._torch_config_source()
    step = "            if not isinstance(worker_group, V1WorkerGroup):\n"
    assert step in source and 'url = "env://"' in source
    monkeypatch.setattr(
        train_torch, "_torch_config_source", lambda: source.replace(step, "            warm_up(worker_group)\n" + step)
    )
    with pytest.raises(ContractBroken, match="_TorchBackend.on_start has another step"):
        train_torch._check_torch_mirror()
    monkeypatch.setattr(
        train_torch, "_torch_config_source", lambda: source.replace('url = "env://"', 'url = "file://"')
    )
    with pytest.raises(ContractBroken, match="no longer does url = 'env://'"):
        train_torch._check_torch_mirror()


def test_a_controller_unpickles_the_lean_run_without_importing_torch() -> None:
    import subprocess
    import sys

    import ray.train
    from ray import cloudpickle
    from ray.train.torch import TorchTrainer

    from hpsearch.runtime.env import set_torch_master
    from hpsearch.runtime.nodes.node_check import pin_worker_interface

    trainer = internals.lean_trainer_class(TorchTrainer, cleaner=False)(
        lambda: None,
        torch_config=internals.lean_torch_config(set_torch_master, pin_worker_interface),
        scaling_config=ray.train.ScalingConfig(num_workers=2),
    )
    blob = cloudpickle.dumps((trainer._create_default_callbacks(), trainer.train_run_context))
    check = (
        "import pickle, sys\n"
        "import ray.train.v2._internal.execution.controller.controller\n"
        "callbacks, context = pickle.loads(sys.stdin.buffer.read())\n"
        "print('torch' in sys.modules, context.backend_config.backend_cls.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", check], input=blob, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().split() == ["False", "LeanTorchBackend"]


def test_the_usage_tag_counted_by_name_is_rays_own_count() -> None:
    """Ray's ``_count_callbacks`` and hpsearch's by-name count agree on a search's callbacks of every kind."""
    from ray.air._internal import usage
    from ray.air.integrations.mlflow import MLflowLoggerCallback
    from ray.tune import Callback
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback, LoggerCallback

    from hpsearch.runtime.internals import tune_session

    class Custom(Callback):
        pass

    class CustomLogger(LoggerCallback):
        pass

    callbacks = [Custom(), Custom(), CustomLogger(), CSVLoggerCallback(), JsonLoggerCallback(), object()]
    callbacks.append(MLflowLoggerCallback(tracking_uri="file:///nowhere"))
    original = tune_session._USAGE  # the module the cut patches
    assert original == usage.__name__
    assert tune_session.count_callbacks_by_name(callbacks) == dict(usage._count_callbacks(callbacks))
    assert tune_session.count_callbacks_by_name(None) == dict(usage._count_callbacks(None)) == {}


def test_the_usage_check_fails_when_ray_counts_the_callbacks_another_way(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.air._internal import usage

    from hpsearch.runtime.internals import tune_session

    source = inspect.getsource(usage).replace("_count_callbacks(callbacks)", "count_by_type(callbacks)")
    monkeypatch.setattr(inspect, "getsource", lambda obj: source if obj is usage else _getsource(obj))
    with pytest.raises(ContractBroken, match="usage no longer refers to callback_counts = _count_callbacks"):
        tune_session._check_callback_usage()


_getsource = inspect.getsource


def test_with_the_cut_rays_usage_tag_imports_neither_mlflow_nor_wandb_and_the_check_still_holds() -> None:
    """In a process of its own, as a search's: Tune's tag of the callbacks, with and without the cut."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from ray.air._internal import usage\n"
        "from ray.tune.logger import CSVLoggerCallback\n"
        "from hpsearch.runtime.internals import tune_session\n"
        "cut = sys.argv[1] == 'cut'\n"
        "if cut:\n"
        "    assert tune_session.count_callbacks_without_imports()\n"
        "usage._count_callbacks([CSVLoggerCallback()])\n"
        "tune_session._check_callback_usage()\n"
        "print(sorted(m for m in ('mlflow', 'wandb') if m in sys.modules))\n"
    )
    imported = {
        way: subprocess.run(
            [sys.executable, "-c", script, way], capture_output=True, text=True, check=True, timeout=120
        ).stdout.strip()
        for way in ("cut", "ray")
    }
    assert imported["cut"] == "[]"
    assert imported["ray"] == str(sorted(m for m in ("mlflow", "wandb") if importlib.util.find_spec(m)))
