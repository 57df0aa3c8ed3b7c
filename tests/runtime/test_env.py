"""hpsearch.runtime.env: every Ray environment variable hpsearch sets, where, and whether it overrides."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hpsearch.runtime import env
from hpsearch.spec import FailureSettings

PACKAGE = Path(env.__file__).resolve().parents[1]


def test_driver_defaults_are_defaults_and_a_users_value_wins() -> None:
    environ = {"RAY_TRAIN_V2_ENABLED": "0"}
    env.apply_driver_defaults(environ)
    assert environ == {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1", "RAY_TRAIN_V2_ENABLED": "0"}
    env.apply_driver_defaults(environ := {})
    assert environ == {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1", "RAY_TRAIN_V2_ENABLED": "1"}


def test_the_state_api_is_pinned_to_the_cluster_just_started_whatever_was_set() -> None:
    environ = {"RAY_API_SERVER_ADDRESS": "http://10.0.0.1:8265"}
    assert env.pin_state_api(50123, environ) == "http://127.0.0.1:50123"
    assert environ == {"RAY_API_SERVER_ADDRESS": "http://127.0.0.1:50123"}


def test_tuner_and_fit_defaults_keep_a_users_value() -> None:
    environ = {"TUNE_GLOBAL_CHECKPOINT_S": "30"}
    env.apply_tuner_defaults(environ)
    env.apply_fit_defaults(environ)
    assert environ == {"TUNE_GLOBAL_CHECKPOINT_S": "30", "RAY_AIR_NEW_OUTPUT": "0"}
    env.apply_fit_defaults(environ := {})
    assert environ == {"TUNE_GLOBAL_CHECKPOINT_S": "1"}


def test_the_trial_driver_gets_the_specs_start_timeout_over_the_environment() -> None:
    environ = {"RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "5", "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "1"}
    env.apply_trial_defaults(FailureSettings(worker_start_timeout_s=12.5), environ)
    assert environ == {"RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "12.5", "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "1"}
    env.apply_trial_defaults(FailureSettings(), environ := {})
    assert environ == {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1", "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "60.0"}


def test_a_new_search_names_its_loggers_and_the_variable_is_put_back_after() -> None:
    environ: dict[str, str] = {}
    with env.explicit_loggers_only(environ):
        assert environ == {"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1"}
    assert environ == {}
    environ = {"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "0"}  # the user's value wins, and stays
    with env.explicit_loggers_only(environ):
        assert environ == {"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "0"}
    assert environ == {"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "0"}


def test_a_setting_whose_value_comes_when_applied_needs_one() -> None:
    with pytest.raises(ValueError, match="RAY_API_SERVER_ADDRESS has no fixed value"):
        env.STATE_API_ADDRESS.apply(environ={})


def test_every_setting_says_why_and_how_it_was_measured_and_is_applied_somewhere() -> None:
    applied = {
        s.name
        for group in (
            env.DRIVER_DEFAULTS,
            env.TUNER_DEFAULTS,
            env.FIT_DEFAULTS,
            env.NEW_SEARCH_DEFAULTS,
            env.TRIAL_DEFAULTS,
            env.EMBEDDED_DEFAULTS,
            env.EMBEDDED_SETTINGS,
            env.MLFLOW_PROBE,
        )
        for s in group
    } | {env.STATE_API_ADDRESS.name}
    assert applied == set(env.SETTINGS)
    for setting in env.SETTINGS.values():
        assert len(setting.why) > 80 and len(setting.measured) > 80, setting.name


def _environ_writes(path: Path) -> list[str]:
    """``os.environ[...] = ...`` and ``os.environ.setdefault(...)`` / ``.update(...)`` in a source file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target in targets:
            if isinstance(target, ast.Subscript) and ast.unparse(target.value) == "os.environ":
                found.append(f"{path.name}:{node.lineno}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if ast.unparse(node.func.value) == "os.environ" and node.func.attr in ("setdefault", "update", "pop"):
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_module_but_env_sets_an_environment_variable(tmp_path) -> None:
    writes = [w for path in sorted(PACKAGE.rglob("*.py")) if path.name != "env.py" for w in _environ_writes(path)]
    assert writes == []
    probe = tmp_path / "probe.py"  # the check sees what it looks for
    probe.write_text('import os\nos.environ["A"] = "1"\nos.environ.setdefault("B", "2")\nos.environ.get("C")\n')
    assert _environ_writes(probe) == ["probe.py:2", "probe.py:3"]


def test_cluster_does_not_import_the_trainable() -> None:
    tree = ast.parse((PACKAGE / "runtime" / "nodes" / "connect.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "hpsearch.runtime.trial.trainable" not in imported


def test_a_workers_torch_master_is_the_trials_whatever_was_set() -> None:
    environ = {"MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "1"}
    env.set_torch_master("127.0.0.1", 29500, environ)
    assert environ == {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
