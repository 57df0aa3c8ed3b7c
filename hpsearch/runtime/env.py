"""Every Ray environment variable hpsearch sets, with the reason and the measurement behind each.

Ray reads these settings from the environment only, so hpsearch sets them in the process
that needs them, just before Ray reads them. Each place has its own function:

- :func:`apply_driver_defaults`: in the search's process, before ``ray.init``. An embedded
  local Ray's raylet and workers are started from this process and inherit them.
- :func:`pin_state_api`: in the search's process, before an embedded local Ray starts.
- :func:`loopback_only`: around the ``ray.init`` of an embedded local Ray, and only there.
- :func:`token_authentication`: before the ``ray.init`` of an embedded local Ray: token
  authentication on, with Ray's token file made by its owner for its owner only.
- :func:`private_token_file`: after the ``ray.init`` of an embedded local Ray: Ray's token file
  readable by its owner only.
- :func:`apply_tuner_defaults`: before the ``ray.tune.Tuner`` is built.
- :func:`apply_fit_defaults`: before ``Tuner.fit`` (a new search and a resumed one).
- :func:`explicit_loggers_only`: around the ``Tuner.fit`` of a new search, whose callbacks name
  Tune's CSV and JSON loggers; then restored.
- :func:`apply_trial_defaults`: in every trial driver, before it builds its ``TorchTrainer``;
  Ray Train passes these on to the nested run's controller and workers.
- :func:`set_torch_master`: on every Train worker of a trial whose Torch set-up hpsearch mirrors
  (:func:`hpsearch.runtime.internals.lean_torch_config`), as Ray's own Torch backend does.

A setting marked ``force=False`` is a default: a value already in the user's environment
wins. ``force=True`` always overwrites, because the value comes from the spec (or from
the cluster hpsearch just started) and must be the one used.

The figures below were taken with Ray 2.60.0 on this project's 2-CPU machine; the Ray
facts behind them are in docs/architecture.md, "The facts about Ray that shaped the design".
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpsearch.runtime.internals import loopback_flag, reload_ray_config

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.spec import FailureSettings

__all__ = [
    "EnvSetting",
    "TRAIN_HEALTH_CHECK",
    "TRAIN_V2",
    "STATE_API_ADDRESS",
    "LEGACY_TUNE_OUTPUT",
    "TUNE_STATE_EVERY_S",
    "EXPLICIT_LOGGERS",
    "WORKER_GROUP_START_TIMEOUT",
    "LOOPBACK_ONLY",
    "TOKEN_AUTH",
    "DRIVER_DEFAULTS",
    "TUNER_DEFAULTS",
    "FIT_DEFAULTS",
    "NEW_SEARCH_DEFAULTS",
    "TRIAL_DEFAULTS",
    "EMBEDDED_DEFAULTS",
    "EMBEDDED_SETTINGS",
    "SETTINGS",
    "apply_driver_defaults",
    "pin_state_api",
    "apply_tuner_defaults",
    "apply_fit_defaults",
    "explicit_loggers_only",
    "apply_trial_defaults",
    "restore_environ",
    "set_torch_master",
    "loopback_only",
    "private_token_file",
    "token_authentication",
]


@dataclass(frozen=True)
class EnvSetting:
    """One environment variable hpsearch sets for Ray.

    Attributes:
        name: The variable.
        value: What hpsearch sets it to. ``None`` when the value is known only when it is
            applied, because it comes from the spec or from the cluster just started.
            ``why`` says which.
        why: What the setting does, and what goes wrong or is slow with Ray's own default.
        measured: The evidence, and how it was obtained.
        force: Overwrite a value that is already set. When false, a value the user set wins.
    """

    name: str
    value: str | None
    why: str
    measured: str
    force: bool = False

    def apply(self, value: str | None = None, environ: MutableMapping[str, str] | None = None) -> None:
        """Set the variable in ``environ``, or in ``os.environ`` when none is given.

        The value set is ``value`` when given, else :attr:`value`.
        """
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
        "Ray Train's controller polls its workers every 2 s by default. A report reaches Tune only at a poll, "
        "so a training loop reports at most every 2 s. Every step of a nested run's start and teardown also "
        "waits for a poll. hpsearch sets 0.1 s instead. A poll is one small remote call per worker, so 10 polls "
        "a second cost almost nothing. The only change to failure detection is that it gets faster."
    ),
    measured=(
        "The wall time of one nested run (1 worker, 5 short epochs) on the 2-CPU machine, with Ray 2.60.0. "
        "With Ray's default of 2 s the run took about 19 s. With 0.2 s it took 9.9 s, with 0.1 s 8.8 s, and "
        "with 0.05 s 8.5 s. So 0.1 s gets almost all of the gain. Going lower saves only 0.3 s more."
    ),
)

TRAIN_V2 = EnvSetting(
    name="RAY_TRAIN_V2_ENABLED",
    value="1",
    why=(
        "The trial driver is written for Ray Train V2. It uses V2's controller, the controller's after_report "
        "callback hook, and ray.tune.integration.ray_train.TuneReportCallback. hpsearch sets the variable "
        "before ray.init, so the processes of an embedded Ray inherit it along with the other defaults."
    ),
    measured=(
        "Not a measurement. V2 is already Ray's default from Ray 2.58 on. In the Ray 2.60.0 source, "
        "ray.train.v2._internal.constants.is_v2_enabled() reads this variable with a default of True. So on "
        "every supported Ray, this setting only states the requirement. A user's RAY_TRAIN_V2_ENABLED=0 is kept."
    ),
)

STATE_API_ADDRESS = EnvSetting(
    name="RAY_API_SERVER_ADDRESS",
    value=None,  # http://127.0.0.1:<the embedded Ray's dashboard port>
    why=(
        "Ray Train's placement-group cleaner frees the worker group of a stopped trial. To do that it asks the "
        "State API, which the dashboard serves. The State API client looks first at RAY_API_SERVER_ADDRESS, "
        "then at RAY_ADDRESS, and otherwise takes 'the latest Ray instance on this machine'. With two Ray "
        "clusters on one machine it then asks the wrong one, and the workers of every stopped trial stay "
        "reserved. So hpsearch sets the variable to the embedded Ray's own dashboard. The raylet and every "
        "worker inherit it. It is set for an embedded Ray only, because the processes of an existing cluster "
        "have their own environment."
    ),
    measured=(
        "The lookup order was read in get_address_for_submission_client, in ray/dashboard/utils.py of Ray "
        "2.60.0. The problem was seen when the test suite ran a 3-node cluster_utils cluster beside its "
        "session-wide local Ray (that test set the variable for its cluster too; hosts of their own, in "
        "tests/end_to_end/test_multihost.py, have since replaced it)."
    ),
    force=True,
)

LEGACY_TUNE_OUTPUT = EnvSetting(
    name="RAY_AIR_NEW_OUTPUT",
    value="0",
    why=(
        "At 0 this variable makes Tune use its legacy reporter instead of its new output engine. hpsearch "
        "prints its own progress lines (hpsearch.runtime.search.progress) and runs Tune with verbose=0. The new "
        "output engine, Ray's default, still prints at verbose=0. The legacy reporter prints nothing."
    ),
    measured=(
        "A Tune search of 2 trials of a plain function trainable ran with verbose=0. Its stdout and stderr were "
        "captured at the file descriptors. With Ray 2.60.0's default, Tune printed 9 lines: a 7-line "
        "'Configuration for experiment' box, 'View detailed results here: ...' and a TensorBoard hint. With "
        "RAY_AIR_NEW_OUTPUT=0 it printed none."
    ),
)

TUNE_STATE_EVERY_S = EnvSetting(
    name="TUNE_GLOBAL_CHECKPOINT_S",
    value="1",
    why=(
        "Tune saves its experiment state, which records the trials that have ended. A resumed search restores "
        "that state. So a trial that ended after the last save runs again when the search is killed and "
        "resumed. Saving every second narrows that window to about a second."
    ),
    measured=(
        "Ray's default is 'auto' (ray/tune/execution/experiment_state.py, Ray 2.60.0). The first save comes "
        "after 10 s. After that, the time between saves is max(10 s, 19 x the time one save took). So trials "
        "that ended in the last 10 s or more could run again. With 1 s, tests/end_to_end/test_faults.py checks the "
        "setting. It kills a search with SIGKILL once Tune's saved state shows an ended trial, resumes the "
        "search, and checks that no trial that had ended ran again."
    ),
)

EXPLICIT_LOGGERS = EnvSetting(
    name="TUNE_DISABLE_AUTO_CALLBACK_LOGGERS",
    value="1",
    why=(
        "At 1 this documented variable stops Tune from adding its CSV, JSON and TensorBoard loggers by itself. "
        "A new search names Tune's CSV and JSON loggers among its callbacks (hpsearch reads result.json and "
        "progress.csv), so only Tune's own TensorBoard logger goes: event files are written when the spec asks "
        "for them (tracking.tensorboard), as the spec reference says, and the search's process does not import "
        "torch for them. It is set around the fit of a new search only, and restored: a resumed search's "
        "callbacks are the ones it was started with, which may not name the loggers."
    ),
    measured=(
        "Read in _create_default_callbacks, ray/tune/utils/callback.py of Ray 2.60.0: without it, Tune adds a "
        "TBXLoggerCallback whenever tensorboardX imports, and its __init__ imports tensorboardX and with it "
        "torch. py-spy of the search process of benchmarks/trial_start.py's search (4 trials of a loop whose "
        "module does not import torch, 2026-12-06): that import took 1.26 of the 6.3 CPU-seconds the process "
        "used in hpsearch.run."
    ),
)

WORKER_GROUP_START_TIMEOUT = EnvSetting(
    name="RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S",
    value=None,  # the spec's failure.worker_start_timeout_s
    why=(
        "This variable bounds the wait for a worker group that cannot be placed. After this long, the wait "
        "counts as a controller failure. After failure.controller_retries such failures, the trial errors with "
        "a reason instead of waiting forever. The value comes from the spec's failure.worker_start_timeout_s. "
        "It overwrites the environment, because the spec is where this is configured. Ray Train passes the "
        "variable from the trial driver to the controller."
    ),
    measured=(
        "Ray's own default is 60 s (ray/train/v2/_internal/constants.py, Ray 2.60.0), the same as the spec's "
        "default. The timeout alone is not enough. Without a bound on controller failures as well, a worker "
        "group that can never be placed is retried forever, silently. The multi-node test of the time relied "
        "on the bound. There, a trial whose worker group could not be placed would wait the 60 s and then "
        "error. Its trials' first reports came within about 5-10 s."
    ),
    force=True,
)

LOOPBACK_ONLY = EnvSetting(
    name="RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
    value="0",
    why=(
        "An embedded Ray is one node that no other machine needs to reach. But on Linux, Ray gives its node "
        "the machine's address, and its gRPC servers then listen on every interface. These are the servers of "
        "the GCS, the raylet, the driver, every worker and actor, and the dashboard agent. At 0 this variable "
        "makes Ray treat the machine as it treats macOS and Windows by default. The node's address is then the "
        "loopback, and every server binds 127.0.0.1. (The GCS, the raylet and the core workers bind 127.0.0.1 "
        "exactly when their node address is 127.0.0.1.) hpsearch sets the variable only for the ray.init of an "
        "embedded Ray, whose processes inherit it. It restores the variable afterwards, for two reasons. "
        "`ray start` refuses to add a node while it is 0. And a later --address search needs the machine's "
        "address."
    ),
    measured=(
        "The listening TCP sockets of a Ray 2.60.0 session started by connect() on this machine, listed with "
        "ss -ltnp and psutil net_connections. Without the variable, these listened on *:PORT: the GCS, the "
        "raylet (2 ports), the driver, every worker and actor (the Train controller and workers, Tune's queue "
        "and placement actors) and the dashboard agent's gRPC port. The agent's metrics port, and those of both "
        "monitors, listened on 0.0.0.0. The agent's HTTP port and the runtime-env agent listened on the "
        "machine's address. Only the dashboard listened on 127.0.0.1. With the variable at 0, all of them "
        "listened on 127.0.0.1; tests/runtime/nodes/test_listening.py asserts this during a search. The rule was read in "
        "Ray's source. In ray/_private/services.py, get_node_ip_address returns the loopback when "
        "ray_constants.ENABLE_RAY_CLUSTER is false. In ray/_private/ray_constants.py, ENABLE_RAY_CLUSTER reads "
        "this variable, with a default of true except on macOS and Windows."
    ),
    force=True,
)

TOKEN_AUTH = EnvSetting(
    name="RAY_AUTH_MODE",
    value="token",
    why=(
        "At token, Ray's servers refuse a client without the cluster's token. Ray 2.60 turns it on by itself for "
        "a new local cluster; Ray 2.58 does not, and any local user could then submit a job to hpsearch's "
        "embedded Ray, which runs code as you. So hpsearch sets it before an embedded Ray starts, and has Ray's "
        "core read it again (Ray reads it once, at import: hpsearch.runtime.internals.reload_ray_config), as "
        "Ray 2.60's ray.init does. It stays set, as Ray 2.60 leaves it. A user's token value wins; any other "
        "value is refused before Ray starts (hpsearch.runtime.nodes.connect)."
    ),
    measured=(
        "The dashboard of an embedded Ray 2.58.1 started as hpsearch starts it answered "
        "{'authentication_mode': 'disabled'} and served /api/jobs/ without a token. With the variable set and "
        "ray._raylet.Config.initialize('') called after Ray's import, it answered 'token', refused /api/jobs/ "
        "and the State API without the token (401), a task saw RAY_AUTH_MODE=token, and the State API client "
        "(which Ray Train's placement-group cleaner uses) still worked; the same on 2.60.0 (2026-12-06). "
        "tests/runtime/nodes/test_listening.py checks the refusals in the Ray tier, on the lowest Ray too."
    ),
)

MLFLOW_PROBE = (
    EnvSetting(
        name="MLFLOW_HTTP_REQUEST_MAX_RETRIES",
        value="0",
        why="hpsearch checks an MLflow server before the search starts. That first contact makes one try, "
        "without MLflow's retries and backoff, so an unreachable tracking_uri is refused in seconds. The "
        "variable is restored after the check.",
        measured=(
            "Checked with mlflow-skinny 3.17.2 on this machine on 2026-12-01. With MLflow's defaults, the check of "
            "an unreachable http:// tracking URI kept retrying for minutes. With 0 retries and a 10 s timeout it is "
            "refused at once (tests/runtime/search/test_tracking.py, the unreachable MLflow test)."
        ),
        force=True,
    ),
    EnvSetting(
        name="MLFLOW_HTTP_REQUEST_TIMEOUT",
        value="10",
        why=(
            "In the same first contact with an MLflow server, a request gives up after 10 s instead of MLflow's "
            "120 s. This keeps the check before the search short. The variable is restored after the check."
        ),
        measured=(
            "Found with the same check as MLFLOW_HTTP_REQUEST_MAX_RETRIES. The default request timeout of "
            "mlflow-skinny 3.17.2 is 120 s. That is too long for a check that runs before every search that names "
            "an MLflow server."
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
#: Set around the ``Tuner.fit`` of a new search only (:func:`explicit_loggers_only`), then restored.
NEW_SEARCH_DEFAULTS: tuple[EnvSetting, ...] = (EXPLICIT_LOGGERS,)
#: Set in every trial driver (the start timeout comes from the trial's ``failure`` settings).
TRIAL_DEFAULTS: tuple[EnvSetting, ...] = (TRAIN_HEALTH_CHECK, WORKER_GROUP_START_TIMEOUT)
#: Set around the ``ray.init`` of an embedded local Ray only (:func:`loopback_only`), then restored.
EMBEDDED_DEFAULTS: tuple[EnvSetting, ...] = (LOOPBACK_ONLY,)
#: Set before the ``ray.init`` of an embedded local Ray, and kept (:func:`token_authentication`).
EMBEDDED_SETTINGS: tuple[EnvSetting, ...] = (TOKEN_AUTH,)
#: Every setting, once each, by name.
SETTINGS: Mapping[str, EnvSetting] = {
    s.name: s
    for s in (
        TRAIN_HEALTH_CHECK,
        TRAIN_V2,
        STATE_API_ADDRESS,
        LEGACY_TUNE_OUTPUT,
        TUNE_STATE_EVERY_S,
        EXPLICIT_LOGGERS,
        WORKER_GROUP_START_TIMEOUT,
        LOOPBACK_ONLY,
        TOKEN_AUTH,
        *MLFLOW_PROBE,
    )
}


def apply_driver_defaults(environ: MutableMapping[str, str] | None = None) -> None:
    """Before ``ray.init`` in the search's process: the Ray Train defaults (a value already set wins)."""
    for setting in DRIVER_DEFAULTS:
        setting.apply(environ=environ)


def pin_state_api(port: int, environ: MutableMapping[str, str] | None = None) -> str:
    """Before an embedded local Ray starts with its dashboard on ``port``: point the State API at it.

    Returns the address set. It always overwrites the variable, because it names the cluster about to start.
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


def apply_trial_defaults(failure: FailureSettings, environ: MutableMapping[str, str] | None = None) -> None:
    """In the trial driver, before its ``TorchTrainer`` is built.

    The health-check interval is a default (a value already set wins); the worker-group
    start timeout is the spec's ``failure.worker_start_timeout_s`` and always overwrites.
    """
    TRAIN_HEALTH_CHECK.apply(environ=environ)
    WORKER_GROUP_START_TIMEOUT.apply(str(failure.worker_start_timeout_s), environ=environ)


def restore_environ(saved: Mapping[str, str], environ: MutableMapping[str, str] | None = None) -> None:
    """Put the environment back exactly as ``saved``: what was added goes, what was changed returns.

    A reused trial actor (:mod:`hpsearch.runtime.trial.reuse`) does this before its next trial, so a
    variable one trial set (its own code, a dataset factory) never reaches the next.
    """
    target = os.environ if environ is None else environ
    for key in [k for k in target if k not in saved]:
        del target[key]
    target.update(saved)


def set_torch_master(addr: str, port: int, environ: MutableMapping[str, str] | None = None) -> None:
    """On a Train worker: the address every rank's Torch process group meets at.

    What Ray's ``_TorchBackend.on_start`` sets with ``init_method="env"``: ``MASTER_ADDR`` and
    ``MASTER_PORT``, taken from rank 0, always overwritten (they are the trial's, not the user's).
    """
    target = os.environ if environ is None else environ
    target["MASTER_ADDR"] = addr
    target["MASTER_PORT"] = str(port)


@contextlib.contextmanager
def loopback_only(environ: MutableMapping[str, str] | None = None) -> Iterator[None]:
    """Around the ``ray.init`` of an embedded local Ray: every server it starts listens on 127.0.0.1 only.

    Sets :data:`LOOPBACK_ONLY` for the processes that ``ray.init`` starts. They inherit it, and
    the workers that the raylet starts later inherit it from the raylet. Afterwards the variable
    is restored as it was. Ray reads the variable only once, when Ray is first imported. That is
    usually long before this point, because the trainable's module imports ``ray.train``. So for
    the same span, the value Ray read at import is also set to match, and then restored
    (:func:`hpsearch.runtime.internals.loopback_flag`).
    """
    env = os.environ if environ is None else environ
    saved_value = env.get(LOOPBACK_ONLY.name)
    LOOPBACK_ONLY.apply(environ=env)
    try:
        with loopback_flag():  # what Ray would have read with the variable set at its import
            yield
    finally:
        if saved_value is None:
            env.pop(LOOPBACK_ONLY.name, None)
        else:
            env[LOOPBACK_ONLY.name] = saved_value


@contextlib.contextmanager
def explicit_loggers_only(environ: MutableMapping[str, str] | None = None) -> Iterator[None]:
    """Around the ``Tuner.fit`` of a new search: Tune adds no logger of its own (a value already set wins).

    The search's callbacks name Tune's CSV and JSON loggers (``callbacks_for``); its TensorBoard
    logger comes only with ``tracking.tensorboard``. Afterwards the variable is restored as it was.
    """
    with _applied(NEW_SEARCH_DEFAULTS, environ):
        yield


@contextlib.contextmanager
def mlflow_probe(environ: MutableMapping[str, str] | None = None) -> Iterator[None]:
    """Around the first contact with an MLflow server: one try of at most 10 s; the variables restored after."""
    with _applied(MLFLOW_PROBE, environ):
        yield


@contextlib.contextmanager
def _applied(settings: tuple[EnvSetting, ...], environ: MutableMapping[str, str] | None) -> Iterator[None]:
    """``settings`` applied for the span of the ``with``; each variable then restored as it was, or removed."""
    env = os.environ if environ is None else environ
    saved = {s.name: env.get(s.name) for s in settings}
    for setting in settings:
        setting.apply(environ=env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value


#: Ray's token file, which Ray reads when neither RAY_AUTH_TOKEN nor RAY_AUTH_TOKEN_PATH is set.
TOKEN_FILE = "~/.ray/auth_token"


def token_authentication(environ: MutableMapping[str, str] | None = None, token_file: str | None = None) -> bool:
    """Before the ``ray.init`` of an embedded local Ray: token authentication on, on every supported Ray.

    Sets :data:`TOKEN_AUTH` (a user's value wins: ``token``; connect refused any other) and, when it
    changed the environment, has Ray's core read it again. Where Ray would make its token file
    (``~/.ray/auth_token``, none yet, and no token in the environment), it is made here first, with
    Ray's own format (64 hex digits) and mode 0600: Ray writes it with the umask's mode. Returns
    whether the setting was applied here.
    """
    env = os.environ if environ is None else environ
    if env.get(TOKEN_AUTH.name) is not None:
        return False
    if not env.get("RAY_AUTH_TOKEN") and not env.get("RAY_AUTH_TOKEN_PATH"):
        _make_private_token(os.path.expanduser(TOKEN_FILE if token_file is None else token_file))
    TOKEN_AUTH.apply(environ=env)
    if environ is None:
        reload_ray_config()
    return True


def _make_private_token(path: str) -> None:
    """A new token at ``path``, readable by its owner only; nothing when a file (or a link) is there."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return  # Ray reads the one there; private_token_file makes it private after Ray starts
    except OSError:
        return  # a home that cannot be written: Ray makes it, or says why it cannot
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(secrets.token_hex(32))  # Ray's generate_new_authentication_token: 256 bits, as hex


def private_token_file(path: str | os.PathLike[str] | None = None) -> bool:
    """Make Ray's token file readable by its owner only (Ray writes it with the umask's mode, often 0644).

    Only a regular file of this user's, not through a link. Returns whether its mode was changed.
    """
    token = os.path.expanduser(TOKEN_FILE) if path is None else os.fspath(path)
    try:
        info = os.lstat(token)
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or not info.st_mode & 0o077:
        return False
    try:
        os.chmod(token, 0o600, follow_symlinks=False)
    except (OSError, NotImplementedError):
        return False
    return True
