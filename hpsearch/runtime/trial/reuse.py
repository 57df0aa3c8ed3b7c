"""Reusing a trial driver's actor for the next trial (``TuneConfig(reuse_actors=True)``), safely.

Why: Tune starts a fresh actor process for every trial, which imports torch and Ray Train
before the driver can start its nested run: about 3 s per trial on a 2-CPU machine
(``benchmarks/overhead.py``, "turnaround"). A reused actor skips that.

Why Tune's reuse alone is unsafe for a nested trial. When Tune stops a trial (ASHA, a
median stop), it caches the trial's actor without calling it. The driver's thread is still
blocked in ``ray.get(controller.run.remote())``, so the nested run keeps its workers. When
the actor is handed the next trial, Tune's ``FunctionTrainable.reset_config`` waits
``TUNE_FUNCTION_THREAD_TIMEOUT_S`` (2 s) for that thread. If the thread still runs, Tune
fails the *next* trial ("Trainable runner reuse requires reset_config() to be implemented
and return True"). This was read in ``ray/tune/trainable/function_trainable.py`` and in
``_maybe_cache_trial_actor`` and ``_on_trial_reset`` of ``ray/tune/execution/tune_controller.py``.

:class:`ReusableDriver` is mixed into Tune's function trainable through its ``__mixins__``
hook. When the actor is handed the next trial, it does the following before Tune's own reset:

1. :func:`end_nested_run` ends the previous trial's nested run. It does so the way Ray does
   when a driver's actor is killed: the controller goes first. The controller was recorded
   when it first reported, and Ray Train pins it to the driver's node. It gets SIGKILL. That
   ends its workers, because Ray ends the actors that a dead process owned. The driver's
   thread then leaves ``fit()``; the session's queues are drained so that no put blocks it.
   Last, it waits until the run's worker placement group is removed. Ray Train's cleaner
   does that within about a second. If it does not, the function removes the group itself,
   which ends any worker still in it. All this happens within ``timeout_s``
   (:data:`END_TIMEOUT_S`).
2. State that a trial could leave behind is put back: ``os.environ`` as it was when the
   actor started, the levels of the loggers that existed then, and the root logger's
   handlers. A user module (the loop's, or a dataset factory's) whose source file changed
   since it was loaded is reloaded. The trial then uses the reloaded function, as a fresh
   actor would.
3. Tune's own reset follows: the session, the trial folder and the working directory.

The fallback. The old thread may still not have left after ``timeout_s``, for example
because it runs user code in the driver, such as a dataset factory. The reset then goes on
anyway, and the old thread is made harmless. Every driver checks, before it starts its
nested run and after it, that no newer trial has taken its actor (:func:`claim`). If one
has, it leaves quietly. If it ever starts a run,
:class:`~hpsearch.runtime.ray_workarounds.OrphanReaper` ends it. One line says so.

Reuse stays off in two cases (``runtime/search/tuner.py``). One is ``pbt``/``pb2``: there a paused
trial's actor would be handed a trial restored from a checkpoint, a path not measured yet.
The other is when the spec sets ``resources.reuse_actors: false``.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import ray
from ray import train
from ray.util.placement_group import PlacementGroup, placement_group_table, remove_placement_group

from hpsearch import messages
from hpsearch.experiment import files
from hpsearch.runtime.env import restore_environ
from hpsearch.runtime.internals import DriverSession
from hpsearch.runtime.nodes.session import CONTROLLER_PROCESS, kill_if_still
from hpsearch.spec._imports import is_file_module

__all__ = [
    "END_TIMEOUT_S",
    "ReusableDriver",
    "begin_run",
    "claim",
    "current",
    "end_nested_run",
    "record_worker_group",
]

#: How long a reused actor waits for the previous trial's nested run to be gone.
END_TIMEOUT_S = 30.0
_POLL_S = 0.05

_Fn = TypeVar("_Fn", bound=Callable[..., Any])


class _ProcessState:
    """What this driver process knows across the trials it runs (one per actor process)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.generation = 0  # +1 at every reset: a driver thread of an older generation is stale
        self.run_folder: str | None = None  # train/<trial_id>/ of the run the live driver thread started
        self.environ: dict[str, str] | None = None
        self.logger_levels: dict[str, int] = {}
        self.root_handlers: list[logging.Handler] = []
        self.modules: dict[str, int] = {}  # user module -> its source file's mtime when loaded


_STATE = _ProcessState()


def _snapshot() -> None:
    """Remember the process's environment and logging as the actor started (once per process)."""
    if _STATE.environ is not None:
        return
    _STATE.environ = dict(os.environ)
    manager = logging.root.manager
    _STATE.logger_levels = {
        name: logger.level for name, logger in manager.loggerDict.items() if isinstance(logger, logging.Logger)
    }
    _STATE.logger_levels[""] = logging.root.level
    _STATE.root_handlers = list(logging.root.handlers)


def _restore() -> None:
    """Put back the environment and logging the actor started with."""
    if _STATE.environ is None:
        return
    restore_environ(_STATE.environ)
    for name, level in _STATE.logger_levels.items():
        (logging.root if name == "" else logging.getLogger(name)).setLevel(level)
    for handler in [h for h in logging.root.handlers if h not in _STATE.root_handlers]:
        logging.root.removeHandler(handler)


def _source_mtime(module: Any) -> int | None:
    path = getattr(module, "__file__", None)
    try:
        return Path(path).stat().st_mtime_ns if path else None
    except OSError:
        return None


def _watchable(fn: Any) -> str | None:
    """The importable user module ``fn`` comes from, or ``None`` (a file module, hpsearch's, Ray's...)."""
    name = getattr(fn, "__module__", None)
    module = sys.modules.get(name or "")
    if not name or module is None or is_file_module(name) or name == "__main__":
        return None  # a file module travels by value, so a fresh actor would run its old code too
    path = getattr(module, "__file__", None)
    if name.split(".")[0] == "hpsearch" or not path:
        return None
    if any(str(Path(path).resolve()).startswith(root) for root in _installed_roots()):
        return None  # the standard library and installed packages: not the user's to edit mid-search
    return str(name)


@functools.cache  # the same for the life of the process; asked for every watched function of every trial
def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({str(Path(paths[key]).resolve()) for key in ("stdlib", "platstdlib", "purelib", "platlib")})


def _reload_changed(say: Callable[[str], None]) -> None:
    """Reload each watched user module whose source file changed since it was loaded."""
    for name, mtime in list(_STATE.modules.items()):
        module = sys.modules.get(name)
        now = _source_mtime(module)
        if module is None or now is None or now == mtime:
            continue
        try:
            importlib.reload(module)
        except Exception as err:  # noqa: BLE001 - the next trial then fails on the same code, with its own error
            say(f"{name} changed since this trial actor loaded it, and reloading it failed: {err}")
            continue
        _STATE.modules[name] = now


def current(fn: _Fn) -> _Fn:
    """``fn`` as its module now defines it: the reloaded function after :func:`_reload_changed`.

    Also starts watching ``fn``'s module. A function that is not a module attribute (a closure,
    a lambda) is returned as it is.
    """
    name = _watchable(fn)
    if name is None:
        return fn
    module = sys.modules[name]
    if name not in _STATE.modules:
        mtime = _source_mtime(module)
        if mtime is not None:
            _STATE.modules[name] = mtime
    found: Any = module
    for part in getattr(fn, "__qualname__", "").split("."):
        found = getattr(found, part, None)
        if found is None:
            return fn
    return found if callable(found) else fn


def begin_run(run_folder: str) -> int:
    """Called by the trial driver as it starts: its generation, and the folder its run records itself in."""
    with _STATE.lock:
        _STATE.run_folder = run_folder
        return _STATE.generation


def claim(generation: int) -> None:
    """Leave the driver thread quietly (``SystemExit(0)``, which Tune's runner thread takes as
    a clean end) if a newer trial has been handed this actor since it began."""
    if generation != _STATE.generation:
        raise SystemExit(0)


def record_worker_group(run_folder: str) -> None:
    """In a Train worker: rank 0 records the run's worker placement group (for :func:`end_nested_run`),
    the nodes of its bundles (for :class:`hpsearch.runtime.nodes.node_watch.NodeWatch`), and this start of the
    trial's workers: when, how many, where (``load_results``' ``workers`` table: an elastic trial's size
    over time)."""
    try:
        context = train.get_context()
        if context.get_world_rank() != 0:
            return
        group = ray.util.get_current_placement_group()
        if group is not None:
            bundles = placement_group_table(group).get("bundles_to_node_id") or {}
            files.write_worker_group(
                run_folder,
                group_id=group.id.hex(),
                run_name=context.get_experiment_name(),
                node_ids=sorted({str(node) for node in bundles.values() if node}),
                workers=context.get_world_size(),
                started_at=time.time(),
            )
    except Exception:  # noqa: BLE001 - without the record a reused actor only waits less precisely
        pass


def _kill_controller(run_folder: str | None) -> None:
    """SIGKILL the nested run's controller, if it runs on this node (Ray Train pins it to the driver's)
    and its recorded PID is still that controller (never a process that took the PID since)."""
    record = files.read_controller(run_folder) if run_folder else None
    if not record:
        return
    if record.get("node_id") != ray.get_runtime_context().get_node_id():
        return
    try:
        kill_if_still(int(record["pid"]), record.get("create_time"), named=CONTROLLER_PROCESS)
    except (ValueError, TypeError):  # a damaged record: nothing provably ours to end
        pass


def _group_gone(group_id: str, deadline: float) -> bool:
    """Wait until the placement group is removed (Ray Train's cleaner); remove it at the deadline."""
    group = PlacementGroup(ray.PlacementGroupID(bytes.fromhex(group_id)))

    def removed() -> bool:
        try:
            return placement_group_table(group).get("state") in (None, "REMOVED")
        except Exception:  # noqa: BLE001 - an unknown group is no group
            return True

    while time.monotonic() < deadline:
        if removed():
            return True
        time.sleep(_POLL_S * 4)
    try:
        remove_placement_group(group)  # ends every worker still in it
    except Exception:  # noqa: BLE001 - removed meanwhile
        pass
    return removed()


def end_nested_run(session: DriverSession, *, timeout_s: float = END_TIMEOUT_S) -> bool:
    """End the nested run this actor's previous trial left running; ``True`` once it is gone.

    ``session``: the actor's Tune session. Gone means: the driver thread has returned, the
    controller was ended, and the run's worker placement group is removed (so its workers
    are too). Returns ``False`` if the thread still runs after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    thread = session.training_thread
    folder = _STATE.run_folder
    alive = thread is not None and thread.is_alive()
    if alive and thread is not None:
        _kill_controller(folder)
        while thread.is_alive() and time.monotonic() < deadline:
            session.stop_and_release()  # a thread reporting its last result leaves quietly
            threading.Thread.join(thread, _POLL_S)  # Thread's own join: Tune's raises nothing, but returns a value
    # A run that ended by itself shut its worker group down before fit() returned.
    record = files.read_worker_group(folder) if alive and folder else None
    group_gone = True
    if record and record.get("group_id"):
        group_gone = _group_gone(str(record["group_id"]), max(deadline, time.monotonic() + 1.0))
    return not (thread is not None and thread.is_alive()) and group_gone


class ReusableDriver:
    """Mixed into Tune's function trainable (``__mixins__``): ends the previous trial's nested
    run and puts the actor back as it started before the next trial runs in it."""

    def setup(self, config: dict[str, Any]) -> None:
        _snapshot()
        super().setup(config)  # type: ignore[misc]  # FunctionTrainable.setup, after this mixin in the MRO

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        session = DriverSession.current()
        previous = Path(_STATE.run_folder).name if _STATE.run_folder else "?"
        with _STATE.lock:
            _STATE.generation += 1  # from here on the old driver thread leaves at its next claim()
        gone = end_nested_run(session) if session is not None else True
        if not gone:
            messages.say(
                f"the nested run of trial {previous} did not end within {END_TIMEOUT_S:g} s of its "
                "actor being reused; the next trial starts anyway and the old run is ended once it is seen"
            )
        _restore()
        _reload_changed(messages.say)
        _STATE.run_folder = None
        return bool(super().reset_config(new_config))  # type: ignore[misc]  # FunctionTrainable.reset_config
