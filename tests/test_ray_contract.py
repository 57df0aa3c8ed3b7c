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
from pathlib import Path

import pytest
import yaml

from hpsearch.errors import IncompatibleLibraryError
from hpsearch.runtime import internals
from hpsearch.runtime.internals import INTERNALS, ContractBroken, Internal


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
    text = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    for internal in INTERNALS:
        rows = [line for line in text.splitlines() if line.startswith(f"| `{internal.key}` |")]
        assert len(rows) == 1, f"docs/architecture.md needs one row for {internal.key}"
        assert f"**{internal.on_missing}**" in rows[0], f"{internal.key}: the table says another decision"


# ----------------------------------------------------------------------------- each check can fail


def test_the_loopback_check_fails_when_ray_drops_its_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    constants = importlib.import_module("ray._private.ray_constants")
    monkeypatch.delattr(constants, "ENABLE_RAY_CLUSTER")
    with pytest.raises(ContractBroken, match="ENABLE_RAY_CLUSTER is no longer a bool"):
        internals._check_loopback()


def test_the_session_check_fails_when_a_queue_is_renamed(monkeypatch: pytest.MonkeyPatch) -> None:
    session = importlib.import_module("ray.train._internal.session")
    source = (
        "class _TrainSession:\n    def __init__(self):\n        self._inter_actor_q = None\n"
        "        self.result_queue = self.error_queue = self.stop_event = None\n"
        "        self.training_thread = self.continue_lock = self.training_started = None\n"
    )
    monkeypatch.setattr(internals.inspect, "getsource", lambda obj: source)
    with pytest.raises(ContractBroken, match="no longer sets _inter_actor_queue"):
        internals._assigns("ray.train._internal.session:_TrainSession", "_inter_actor_queue", "result_queue")
    assert session.get_session is not None


def test_a_renamed_private_method_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.tune.schedulers import pbt

    monkeypatch.delattr(pbt.PopulationBasedTraining, "_exploit")
    with pytest.raises(ContractBroken, match="PopulationBasedTraining has no attribute _exploit"):
        internals._check_exploit()


def test_an_environment_variable_ray_no_longer_reads_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    constants = importlib.import_module("ray.train.v2._internal.constants")
    monkeypatch.setattr(constants, "HEALTH_CHECK_INTERVAL_S_ENV_VAR", "RAY_TRAIN_POLL_S")
    with pytest.raises(ContractBroken, match="HEALTH_CHECK_INTERVAL_S_ENV_VAR is no longer 'RAY_TRAIN_HEALTH"):
        internals._check_env_names()


def test_a_changed_default_ray_data_share_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.data._internal.execution.resource_manager import ResourceManager

    monkeypatch.setattr(ResourceManager, "DEFAULT_OBJECT_STORE_MEMORY_LIMIT_FRACTION", 0.25)
    with pytest.raises(ContractBroken, match="is 0.25, hpsearch assumes 0.5"):
        internals._check_data_fraction()


def test_the_torch_backend_check_fails_when_on_start_no_longer_sets_up_the_process_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = internals._torch_config_source()
    assert "_setup_torch_process_group,\n" in source  # on_start hands it to each worker
    monkeypatch.setattr(
        internals, "_torch_config_source", lambda: source.replace("_setup_torch_process_group,\n", "_setup,\n")
    )
    with pytest.raises(ContractBroken, match="_TorchBackend.on_start no longer sets up the process group"):
        internals._check_torch_backend()
    monkeypatch.setattr(internals, "_torch_config_source", lambda: source.replace("class _TorchBackend(", "class _B("))
    with pytest.raises(ContractBroken, match="ray.train.torch.config has no class _TorchBackend"):
        internals._check_torch_backend()


def test_the_torch_config_runs_the_worker_setup_on_every_worker_before_rays_process_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ray.train.torch import TorchConfig
    from ray.train.torch.config import _TorchBackend

    from hpsearch.runtime.node_check import pin_worker_interface

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

    from hpsearch.runtime.node_check import pin_worker_interface

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
    assert done.stdout.decode().split() == ["hpsearch.runtime.node_check", "pin_worker_interface", "None", "1800"]


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
        monkeypatch.setattr(internals, "_problem", lambda key: found.get(key))

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
    from hpsearch.runtime.tuner import build_tuner

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

    real = internals.inspect.getsource
    method = ElasticScalingPolicy.make_decision_for_non_running_worker_group
    monkeypatch.setattr(
        internals.inspect, "getsource", lambda obj: "def sized_elsewhere(self): ..." if obj is method else real(obj)
    )
    with pytest.raises(ContractBroken, match=r"no longer refers to self._get_reserved_resources\(\)"):
        internals._check_coordinator()


def test_the_coordinator_check_fails_when_its_entry_point_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    coordinator = importlib.import_module("ray.data._internal.cluster_autoscaler.default_autoscaling_coordinator")
    monkeypatch.delattr(coordinator, "get_or_create_autoscaling_coordinator")
    with pytest.raises(ContractBroken, match="has no attribute get_or_create_autoscaling_coordinator"):
        internals._check_coordinator()


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
