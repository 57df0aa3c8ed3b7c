"""Every Ray environment variable hpsearch sets, with the reason and the measurement behind each.

Ray reads these settings from the environment only, so hpsearch sets them in the process
that needs them, at the moment before Ray reads them. Each place has one function:

- :func:`apply_driver_defaults`: in the search's process, before ``ray.init``. An embedded
  local Ray's raylet and workers are started from this process and inherit them.
- :func:`pin_state_api`: in the search's process, before an embedded local Ray starts.
- :func:`loopback_only`: around the ``ray.init`` of an embedded local Ray, and only there.
- :func:`apply_tuner_defaults`: before the ``ray.tune.Tuner`` is built.
- :func:`apply_fit_defaults`: before ``Tuner.fit`` (a new search and a resumed one).
- :func:`apply_trial_defaults`: in every trial driver, before it builds its ``TorchTrainer``;
  Ray Train passes these on to the nested run's controller and workers.

A setting marked ``force=False`` is a default: a value already in the user's environment
wins. ``force=True`` always overwrites, because the value comes from the spec (or from
the cluster hpsearch just started) and must be the one used.

The figures below were taken with Ray 2.60.0 on this project's 2-CPU machine; the Ray
facts behind them are in docs/architecture.md, "The facts about Ray that shaped the design".
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.spec import Failure

__all__ = [
    "EnvSetting",
    "TRAIN_HEALTH_CHECK",
    "TRAIN_V2",
    "STATE_API_ADDRESS",
    "LEGACY_TUNE_OUTPUT",
    "TUNE_STATE_EVERY_S",
    "WORKER_GROUP_START_TIMEOUT",
    "LOOPBACK_ONLY",
    "DRIVER_DEFAULTS",
    "TUNER_DEFAULTS",
    "FIT_DEFAULTS",
    "TRIAL_DEFAULTS",
    "EMBEDDED_DEFAULTS",
    "SETTINGS",
    "apply_driver_defaults",
    "pin_state_api",
    "apply_tuner_defaults",
    "apply_fit_defaults",
    "apply_trial_defaults",
    "restore_environ",
    "loopback_only",
]


@dataclass(frozen=True)
class EnvSetting:
    """One environment variable hpsearch sets for Ray.

    Attributes:
        name: The variable.
        value: What hpsearch sets it to; ``None`` when the value is only known when it is
            applied (from the spec, or from the cluster just started), as ``why`` says.
        why: What goes wrong, or is slow, with Ray's own default.
        measured: The evidence, and how it was obtained.
        force: Overwrite a value already set (else a value the user set wins).
    """

    name: str
    value: str | None
    why: str
    measured: str
    force: bool = False

    def apply(self, value: str | None = None, environ: MutableMapping[str, str] | None = None) -> None:
        """Set the variable in ``environ`` (``os.environ``): ``value`` if given, else :attr:`value`."""
        env = os.environ if environ is None else environ
        chosen = self.value if value is None else value
        if chosen is None:
            raise ValueError(f"{self.name} has no fixed value: pass the value to apply")
        if self.force:
            env[self.name] = chosen
        else:
            env.setdefault(self.name, chosen)


TRAIN_HEALTH_CHECK = EnvSetting(
    name="RAY_TRAIN_HEALTH_CHECK_INTERVAL_S",
    value="0.1",
    why=(
        "Ray Train's controller polls its workers every 2 s by default. Every report reaches Tune at a poll "
        "(so a loop reports at most every 2 s), and every step of a nested run's start and teardown waits for "
        "one. A poll is one small remote call per worker: at 10 a second its cost is negligible, and failure "
        "detection only gets faster."
    ),
    measured=(
        "Wall time of one nested run (1 worker, 5 short epochs) on the 2-CPU machine, per interval: "
        "2 s (Ray's default) about 19 s; 0.2 s 9.9 s; 0.1 s 8.8 s; 0.05 s 8.5 s. 0.1 s takes almost all of the "
        "gain; going lower buys 0.3 s more."
    ),
)

TRAIN_V2 = EnvSetting(
    name="RAY_TRAIN_V2_ENABLED",
    value="1",
    why=(
        "The trial driver is written against Ray Train V2: its controller, the controller-side "
        "after_report callback hook, and ray.tune.integration.ray_train.TuneReportCallback. Set before ray.init "
        "so an embedded Ray's processes inherit it along with the other defaults."
    ),
    measured=(
        "Not a measurement: V2 is already Ray's default from 2.58 on (ray.train.v2._internal.constants."
        "is_v2_enabled() reads this variable with a default of True, checked in the 2.60.0 source), so on every "
        "supported Ray this only states the requirement. A user's RAY_TRAIN_V2_ENABLED=0 is kept."
    ),
)

STATE_API_ADDRESS = EnvSetting(
    name="RAY_API_SERVER_ADDRESS",
    value=None,  # http://127.0.0.1:<the embedded Ray's dashboard port>
    why=(
        "Ray Train's placement-group cleaner, which frees a stopped trial's worker group, asks the State API "
        "(served by the dashboard). The State API client finds it through RAY_API_SERVER_ADDRESS, else "
        "RAY_ADDRESS, else 'the latest Ray instance on this machine'. With two Ray clusters on one machine it "
        "then asks the wrong one, and every stopped trial's workers stay reserved. Pinned to the embedded Ray's "
        "own dashboard; the raylet and every worker inherit it. Set for an embedded Ray only (an existing "
        "cluster's processes have their own environment)."
    ),
    measured=(
        "Resolution order read in ray/dashboard/utils.py (get_address_for_submission_client) of Ray 2.60.0. Seen "
        "when the test suite ran a 3-node cluster_utils cluster beside its session-wide local Ray "
        "(tests/test_multinode.py pins the variable for that cluster for the same reason)."
    ),
    force=True,
)

LEGACY_TUNE_OUTPUT = EnvSetting(
    name="RAY_AIR_NEW_OUTPUT",
    value="0",
    why=(
        "hpsearch prints its own progress lines (hpsearch.runtime.progress) and runs Tune with verbose=0. "
        "Tune's new output engine (Ray's default) still prints at verbose=0; its legacy reporter is silent."
    ),
    measured=(
        "A 2-trial Tune search of a plain function trainable with verbose=0, stdout and stderr captured at the "
        "file descriptors: with Ray 2.60.0's default Tune printed 9 lines (a 7-line 'Configuration for "
        "experiment' box, 'View detailed results here: ...' and a TensorBoard hint); with RAY_AIR_NEW_OUTPUT=0 "
        "it printed none."
    ),
)

TUNE_STATE_EVERY_S = EnvSetting(
    name="TUNE_GLOBAL_CHECKPOINT_S",
    value="1",
    why=(
        "Tune's experiment state (which trials have ended) is what resume restores. A trial that ended after "
        "the last save runs again after a kill. Saving every second narrows that window to about a second."
    ),
    measured=(
        "Ray's default is 'auto': the first period is 10 s, then max(10 s, 19 x the time one save took) "
        "(ray/tune/execution/experiment_state.py, Ray 2.60.0), so up to 10 s or more of ended trials could run "
        "again. With 1 s, tests/test_faults.py kills a search (SIGKILL) once Tune's saved state shows an ended "
        "trial, resumes it, and checks that no trial that had ended ran again."
    ),
)

WORKER_GROUP_START_TIMEOUT = EnvSetting(
    name="RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S",
    value=None,  # the spec's failure.worker_start_timeout_s
    why=(
        "Bounds the wait for a worker group that cannot be placed: after this long it counts as a controller "
        "failure, and after failure.controller_retries of those the trial errors with a reason instead of "
        "waiting forever. Set from the spec's failure.worker_start_timeout_s, so it overwrites the environment: "
        "the spec is where this is configured. Ray Train passes it from the trial driver to the controller."
    ),
    measured=(
        "Ray's own default is 60 s (ray/train/v2/_internal/constants.py, Ray 2.60.0), the same as the spec's "
        "default; without a bound on controller failures as well, a worker group that can never be placed is "
        "retried forever, silently. tests/test_multinode.py relies on the bound: a trial whose worker group "
        "could not be placed would wait the 60 s and then error, while its trials' first reports come within "
        "about 5-10 s."
    ),
    force=True,
)

LOOPBACK_ONLY = EnvSetting(
    name="RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
    value="0",
    why=(
        "An embedded Ray is one node that no other machine needs to reach, but on Linux Ray gives its node the "
        "machine's address and its gRPC servers then listen on every interface: the GCS, the raylet, the driver's "
        "and every worker's and actor's, the dashboard agent's. At 0 this variable makes Ray treat the machine as "
        "it treats macOS and Windows by default: the node's address is the loopback, and every server binds "
        "127.0.0.1 (the GCS, raylet and core workers bind 127.0.0.1 exactly when their node address is "
        "127.0.0.1). Set for the ray.init of an embedded Ray only, which its processes inherit, and restored "
        "after it: `ray start` refuses to add a node while it is 0, and a later --address search needs the "
        "machine's address."
    ),
    measured=(
        "Listening TCP sockets of a Ray 2.60.0 session started by connect() (ss -ltnp; psutil net_connections) "
        "on this machine: without it the GCS, the raylet (2 ports), the driver, every worker and actor (Train "
        "controller and workers, Tune's queue and placement actors) and the dashboard agent's gRPC port on "
        "*:PORT, the agent's metrics port and both monitors' on 0.0.0.0, the agent's HTTP port and the "
        "runtime-env agent on the machine's address; only the dashboard on 127.0.0.1. With it at 0: all of them "
        "on 127.0.0.1 (tests/test_listening.py asserts it during a search). The rule read in "
        "ray/_private/services.py (get_node_ip_address: the loopback when ray_constants.ENABLE_RAY_CLUSTER is "
        "false) and ray/_private/ray_constants.py (ENABLE_RAY_CLUSTER reads this variable, default true off "
        "macOS and Windows)."
    ),
    force=True,
)

MLFLOW_FILE_STORE = EnvSetting(
    name="MLFLOW_ALLOW_FILE_STORE",
    value="true",
    why=(
        "MLflow 3 refuses a `file:` tracking store unless this is set; a spec whose tracking.mlflow.tracking_uri "
        "names one (file:./mlruns, or a bare folder) has chosen it. Set in the search's process, where the "
        "trackers log, when the spec names a file store (kept set: Tune logs all search long). Not Ray's, but "
        "every variable hpsearch sets lives here."
    ),
    measured=(
        "mlflow-skinny 3.17.2 on this machine, 2026-12-01: creating an experiment in a file:./mlruns store "
        "raised MlflowException until the variable was set; tests/test_tracking.py runs the file store with it."
    ),
)

MLFLOW_PROBE = (
    EnvSetting(
        name="MLFLOW_HTTP_REQUEST_MAX_RETRIES",
        value="0",
        why="The first contact with an MLflow server (the check before the search) tries once, not with "
        "MLflow's retries and backoff, so an unreachable tracking_uri is refused in seconds; restored after.",
        measured=(
            "mlflow-skinny 3.17.2 on this machine, 2026-12-01: an unreachable http:// tracking URI kept the check "
            "retrying for minutes with MLflow's defaults; with 0 retries and 10 s it is refused at once "
            "(tests/test_tracking.py, the unreachable MLflow test)."
        ),
        force=True,
    ),
    EnvSetting(
        name="MLFLOW_HTTP_REQUEST_TIMEOUT",
        value="10",
        why=(
            "The same first contact with an MLflow server gives up after 10 s instead of MLflow's 120 s, so the "
            "check before the search stays short; restored after the check."
        ),
        measured=(
            "As for MLFLOW_HTTP_REQUEST_MAX_RETRIES: mlflow-skinny 3.17.2's default request timeout is 120 s, "
            "too long for a check that runs before every search that names an MLflow server."
        ),
        force=True,
    ),
)

#: Set in the search's process before ``ray.init`` (in this order).
DRIVER_DEFAULTS: tuple[EnvSetting, ...] = (TRAIN_HEALTH_CHECK, TRAIN_V2)
#: Set before the ``Tuner`` is built.
TUNER_DEFAULTS: tuple[EnvSetting, ...] = (LEGACY_TUNE_OUTPUT,)
#: Set before ``Tuner.fit``.
FIT_DEFAULTS: tuple[EnvSetting, ...] = (TUNE_STATE_EVERY_S,)
#: Set in every trial driver (the start timeout comes from the trial's ``failure`` settings).
TRIAL_DEFAULTS: tuple[EnvSetting, ...] = (TRAIN_HEALTH_CHECK, WORKER_GROUP_START_TIMEOUT)
#: Set around the ``ray.init`` of an embedded local Ray only (:func:`loopback_only`), then restored.
EMBEDDED_DEFAULTS: tuple[EnvSetting, ...] = (LOOPBACK_ONLY,)
#: Set in the search's process when the spec's MLflow tracker names a file store (:func:`allow_mlflow_file_store`).
TRACKING_DEFAULTS: tuple[EnvSetting, ...] = (MLFLOW_FILE_STORE,)
#: Every setting, once each, by name.
SETTINGS: Mapping[str, EnvSetting] = {
    s.name: s
    for s in (
        TRAIN_HEALTH_CHECK,
        TRAIN_V2,
        STATE_API_ADDRESS,
        LEGACY_TUNE_OUTPUT,
        TUNE_STATE_EVERY_S,
        WORKER_GROUP_START_TIMEOUT,
        LOOPBACK_ONLY,
        MLFLOW_FILE_STORE,
        *MLFLOW_PROBE,
    )
}


def apply_driver_defaults(environ: MutableMapping[str, str] | None = None) -> None:
    """Before ``ray.init`` in the search's process: the Ray Train defaults (a value already set wins)."""
    for setting in DRIVER_DEFAULTS:
        setting.apply(environ=environ)


def pin_state_api(port: int, environ: MutableMapping[str, str] | None = None) -> str:
    """Before an embedded local Ray starts with its dashboard on ``port``: point the State API at it.

    Returns the address set (always overwritten: it names the cluster about to start).
    """
    address = f"http://127.0.0.1:{port}"
    STATE_API_ADDRESS.apply(address, environ=environ)
    return address


def apply_tuner_defaults(environ: MutableMapping[str, str] | None = None) -> None:
    """Before the ``ray.tune.Tuner`` is built: Tune's quiet legacy output (a value already set wins)."""
    for setting in TUNER_DEFAULTS:
        setting.apply(environ=environ)


def apply_fit_defaults(environ: MutableMapping[str, str] | None = None) -> None:
    """Before ``Tuner.fit``: save Tune's experiment state every second (a value already set wins)."""
    for setting in FIT_DEFAULTS:
        setting.apply(environ=environ)


def apply_trial_defaults(failure: Failure, environ: MutableMapping[str, str] | None = None) -> None:
    """In the trial driver, before its ``TorchTrainer`` is built.

    The health-check interval is a default (a value already set wins); the worker-group
    start timeout is the spec's ``failure.worker_start_timeout_s`` and always overwrites.
    """
    TRAIN_HEALTH_CHECK.apply(environ=environ)
    WORKER_GROUP_START_TIMEOUT.apply(str(failure.worker_start_timeout_s), environ=environ)


def restore_environ(saved: Mapping[str, str], environ: MutableMapping[str, str] | None = None) -> None:
    """Put the environment back exactly as ``saved``: what was added goes, what was changed returns.

    A reused trial actor (:mod:`hpsearch.runtime.reuse`) does this before its next trial, so a
    variable one trial set (its own code, a dataset factory) never reaches the next.
    """
    target = os.environ if environ is None else environ
    for key in [k for k in target if k not in saved]:
        del target[key]
    target.update(saved)


@contextlib.contextmanager
def loopback_only(environ: MutableMapping[str, str] | None = None) -> Iterator[None]:
    """Around the ``ray.init`` of an embedded local Ray: every server it starts listens on 127.0.0.1 only.

    Sets :data:`LOOPBACK_ONLY` for the processes ``ray.init`` starts (they inherit it, and the
    workers the raylet starts later inherit it from the raylet), then restores the variable as
    it was. Ray reads the variable only once, when ``ray._private.ray_constants`` is first
    imported, which is usually long before (the trainable's module imports ``ray.train``): for
    the same span the value it read then is set to match, and restored too.
    """
    from ray._private import ray_constants

    env = os.environ if environ is None else environ
    saved_value = env.get(LOOPBACK_ONLY.name)
    saved_flag = ray_constants.ENABLE_RAY_CLUSTER
    LOOPBACK_ONLY.apply(environ=env)
    ray_constants.ENABLE_RAY_CLUSTER = False  # what Ray would have read with the variable set at its import
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        if saved_value is None:
            env.pop(LOOPBACK_ONLY.name, None)
        else:
            env[LOOPBACK_ONLY.name] = saved_value


def allow_mlflow_file_store(environ: MutableMapping[str, str] | None = None) -> None:
    """In the search's process, when the spec's MLflow tracker names a ``file:`` store (a value already set wins)."""
    MLFLOW_FILE_STORE.apply(environ=environ)


@contextlib.contextmanager
def mlflow_probe(environ: MutableMapping[str, str] | None = None) -> Iterator[None]:
    """Around the first contact with an MLflow server: one try of at most 10 s; the variables restored after."""
    env = os.environ if environ is None else environ
    saved = {s.name: env.get(s.name) for s in MLFLOW_PROBE}
    for setting in MLFLOW_PROBE:
        setting.apply(environ=env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
