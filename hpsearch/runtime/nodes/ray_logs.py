"""Ray's own log lines: kept in Ray's session folder, shown on the terminal only with ``--verbose``.

hpsearch prints its own progress lines; Ray's lines (a traceback per failed trial, raylet
warnings, the token-auth notice) would bury them. Without ``--verbose`` none of them reaches
the terminal, and none is lost: each source, as Ray 2.60 produces it, and where it goes:

- **The driver's Python loggers** under ``ray``: Tune's ``Trial task failed … Traceback``
  (``ray.tune.execution.tune_controller``), ``Trials did not complete`` (``ray.tune.tune``),
  the token-auth notice (``ray._private.authentication.authentication_token_setup``, logged
  inside ``ray.init``), restore warnings (``ray.tune.analysis.experiment_analysis``). Ray
  prints them through the one stderr handler it puts on the ``ray`` logger at import
  (``ray._private.log.generate_logging_config``: a ``PlainRayHandler``, with
  ``propagate=False``). hpsearch mutes that handler with a filter and adds a file handler:
  ``<session>/logs/hpsearch_driver_<pid>.log`` (:data:`DRIVER_LOG`). Records logged before
  the session folder exists (inside ``ray.init``) are held in memory and written there as
  soon as it does.
- **The workers' and Ray's processes' output**, which Ray's log monitor streams to the driver
  (``ray.init(log_to_driver=True)``, printed by ``ray._private.worker.print_to_stdstream``):
  ``log_to_driver=False``. Ray keeps it in ``worker-*.out``/``.err`` and the other files of
  ``<session>/logs``.
- **Error messages published to drivers** (``(raylet) WARNING: 8 PYTHON worker processes have
  been started …``), which ``ray._private.worker.listen_error_messages`` prints to stdout
  whatever ``log_to_driver`` says. Ray has no option for them; ``print_worker_logs`` prints
  nothing while ``ray._private.worker._worker_logs_enabled`` is False, the switch Ray's own
  debugger uses (``ray.util.rpdb``) to keep the terminal quiet. The raylet writes the same
  lines to ``raylet.out``.

With ``verbose`` everything is printed as Ray prints it (and the driver's log file is still written).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from hpsearch.experiment.files import RayLogs
from hpsearch.runtime.internals import current_node, ray_data_console_handlers, set_driver_error_printing

__all__ = ["DRIVER_LOG", "before_init", "after_init", "abandon", "describe"]

#: The file, in Ray's session log folder, that keeps the driver's own Ray log records.
DRIVER_LOG = "hpsearch_driver_{pid}.log"
_RAY_LOGGER = "ray"
_FORMAT = "%(asctime)s\t%(levelname)s %(name)s %(filename)s:%(lineno)s -- %(message)s"


class _Mute(logging.Filter):
    """Drops every record: on Ray's terminal handler while not verbose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


_MUTE = _Mute()
_state: dict[str, Any] = {"buffer": None, "file": None, "verbose": False}


def _ray_logger() -> logging.Logger:
    return logging.getLogger(_RAY_LOGGER)


def _terminal_handlers() -> list[logging.Handler]:
    """The handlers of the ``ray`` logger that write to a terminal (Ray's own; not hpsearch's file)."""
    ours = (_state["buffer"], _state["file"])
    return [
        h
        for h in _ray_logger().handlers
        if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler) and h not in ours
    ]


def _drop_handlers() -> None:
    logger = _ray_logger()
    for key in ("buffer", "file"):
        handler = _state[key]
        if handler is not None:
            logger.removeHandler(handler)
            handler.close()
            _state[key] = None


def before_init(*, verbose: bool) -> None:
    """Before ``ray.init``: mute Ray's terminal handler (unless ``verbose``) and hold the records in memory."""
    _drop_handlers()  # a previous session's (ray.shutdown, then a new connect)
    _state["verbose"] = verbose
    for handler in _terminal_handlers():
        if verbose:
            handler.removeFilter(_MUTE)
        else:
            handler.addFilter(_MUTE)
    buffer = logging.handlers.MemoryHandler(capacity=10_000, flushLevel=logging.CRITICAL + 1, flushOnClose=False)
    _state["buffer"] = buffer
    _ray_logger().addHandler(buffer)


def after_init() -> None:
    """After ``ray.init``: write the driver's Ray records to :data:`DRIVER_LOG` in Ray's session log folder.

    Also silences (or, with ``verbose``, lets through) the error messages Ray publishes to drivers.
    """
    set_driver_error_printing(bool(_state["verbose"]))  # see the module docstring
    path = _driver_log_path(_logs_dir())
    logger = _ray_logger()
    buffer = _state["buffer"]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(path, encoding="utf-8")
    except OSError:
        return  # keep holding them in memory: a log file must never stop a search
    handler.setFormatter(logging.Formatter(_FORMAT))
    if buffer is not None:
        for record in buffer.buffer:
            handler.handle(record)
        logger.removeHandler(buffer)
        buffer.close()
        _state["buffer"] = None
    logger.addHandler(handler)
    _state["file"] = handler


def abandon() -> None:
    """``ray.init`` failed: give Ray's terminal handler back and forget what was held."""
    for handler in _terminal_handlers():
        handler.removeFilter(_MUTE)
    _drop_handlers()


def describe(address: str | None = None) -> RayLogs:
    """Where the connected Ray keeps its logs, as far as this process knows.

    For an embedded Ray, and a driver on a node of a cluster (``--address auto`` or
    ``host:port``), that is this node's session log folder (every node keeps its own,
    under the same session name); a Ray Client driver (``ray://``) has no node of its own.
    """
    handler = _state["file"]
    return RayLogs(
        logs_dir=_logs_dir(),
        driver_log=str(handler.baseFilename) if isinstance(handler, logging.FileHandler) else None,
        host=socket.gethostname(),
        address=address,
        recorded_at=time.time(),
    )


def _logs_dir() -> str | None:
    """This node's Ray session log folder, or ``None`` (not connected, or a Ray Client driver)."""
    node = current_node()
    return None if node is None else node.logs_dir


def _driver_log_path(logs_dir: str | None) -> Path:
    """``<logs_dir>/hpsearch_driver_<pid>.log``; without a session folder (Ray Client), in the system temp folder."""
    folder = Path(logs_dir) if logs_dir else Path(tempfile.gettempdir()) / "ray"
    return folder / DRIVER_LOG.format(pid=os.getpid())


def mute_ray_data_terminal() -> None:
    """Keep Ray Data's console lines off a search's terminal, unless ``--verbose``.

    Ray Data's logger does not propagate to Ray's (which this module
    mutes), and its warnings reach the terminal while trials run (``Dataset._execute`` warns
    "does not have any available CPUs" whenever trials hold every CPU, reserve or not). Its
    console handlers are silenced for the rest of the search; ``ray-data.log`` in Ray's
    session folder keeps every line.
    """
    import ray.data  # noqa: F401 - importing it configures its handlers, changed here  # lazy: it takes seconds

    if _state["verbose"]:
        return
    for handler in ray_data_console_handlers(logging.getLogger("ray.data").handlers):
        handler.setLevel(logging.CRITICAL + 1)
