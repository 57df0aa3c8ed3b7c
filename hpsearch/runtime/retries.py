"""No blind retries, at the Ray edge: the Train controller's veto, the trial driver's refusal, Tune's count.

The rule and the records are :mod:`hpsearch.experiment.failures`'. Three places apply it:

- **The Train controller** (a worker group failed): :func:`install` makes Ray Train's failure policy ask
  :func:`judge` first (internal ``train-failure-policy``). Each failure is recorded in the trial's
  ``hpsearch_failures.jsonl``. When the loop failed the same way as the failure before it, in this search
  run, a restart Ray would make becomes a raise, and the record is marked final. A worker or node that
  died (no traceback from the loop) is an infrastructure failure: recorded, never the same; while the
  trial's driver's node is drained (:mod:`hpsearch.experiment.driver_drains`) it is the trial being paused,
  and not recorded.
- **The trial driver**: when ``fit()`` raised and the trial's last failure is final, its error is
  :class:`SameFailureError`, one line. A driver that Tune starts again after that (``trial_retries``)
  raises it at once, before any nested run.
- **Tune** (the search process): :func:`stop_trial_retries`, from the outcome recorder's
  ``on_trial_recover``, lets Tune retry such a trial no more (internal ``tune-trial-retries``), so that
  immediate failure is its last.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hpsearch import messages
from hpsearch.experiment import driver_drains, files
from hpsearch.experiment.failures import Failure, last_in_search, mask, not_retried_line, same
from hpsearch.runtime import internals

__all__ = ["SameFailureError", "install", "judge", "saw_epoch", "repeated", "stop_trial_retries"]


class SameFailureError(RuntimeError):
    """A trial whose loop failed the same way twice: not retried again."""


#: The last epoch the controller in this process forwarded (``None``: none yet); the failing epoch is the next.
_LAST_EPOCH: int | None = None
#: Kinds that are usually a rank's echo of another rank's failure (a collective that lost its peer).
_ECHOES = ("RuntimeError", "DistBackendError", "DistNetworkError")


def saw_epoch(epoch: Any) -> None:
    """In the controller: the epoch of a report it forwarded (a whole number; others are not epochs)."""
    global _LAST_EPOCH
    if isinstance(epoch, (int, float)) and not isinstance(epoch, bool) and float(epoch).is_integer():
        _LAST_EPOCH = int(epoch)


def judge(
    run_folder: str,
    search: str,
    failures: Sequence[tuple[int, str, str, bool]],
    last_epoch: int | None,
    *,
    retry: bool = True,
) -> bool:
    """Record a worker-group failure (``failures``: per rank, ``(rank, type name, message, infra)``) and say
    whether Ray's restart of it (``retry``) is vetoed: it repeats the one before it in this search. When
    Ray gives up by its own count, its error stands as it is, with the failing rank and its log."""
    epoch = 1 if last_epoch is None else last_epoch + 1
    died = [f"rank {rank}: {kind}" for rank, kind, _, infra in failures if infra]
    if (died or not failures) and driver_drains.read_notice(run_folder) is not None:
        return False  # the trial is being paused, its driver's node drained: its workers' end is no failure
    if died or not failures:  # a worker died or could not be reached: never the loop failing the same way
        current = Failure(kind="", message="; ".join(died), masked="", epoch=epoch, infra=True, search=search)
    else:  # the root cause, where one rank raised and the others' collectives lost it
        kind, message = next(((k, m) for _, k, m, _ in failures if k not in _ECHOES), failures[0][1:3])
        message = message.strip().splitlines()[0] if message.strip() else ""
        current = Failure(kind=kind, message=message, masked=mask(message), epoch=epoch, search=search)
    previous = last_in_search(files.read_failures(run_folder), search)
    repeat = retry and same(previous, current)
    try:
        files.append_failure(run_folder, Failure(**{**current.as_dict(), "final": repeat}))
    except OSError as err:  # without the record the rule cannot hold: Ray's own decision stands
        messages.say(f"warning: could not record a failure in {run_folder}: {err}")
        return False
    return repeat


def install(run_folder: str, search: str) -> bool:
    """In the Train controller's process, as it starts: judge every worker-group failure of this run."""
    global _VETO

    def veto(failures: Sequence[internals.RankFailure], retry: bool) -> bool:
        return judge(run_folder, search, failures, _LAST_EPOCH, retry=retry)

    _VETO = veto
    return internals.veto_restarts(_veto_restart)


#: The judge of this controller's run (``install``): per failed rank and Ray's decision, whether to veto it.
_VETO: Callable[[Sequence[internals.RankFailure], bool], bool] | None = None


def _veto_restart(error: BaseException, retry: bool) -> bool:
    """Ray Train decided on ``error`` (``retry``: to restart the worker group): every worker-group failure that
    is not a preemption is judged, and so recorded; only a restart judged a repeat is vetoed."""
    failures = internals.rank_failures(error)
    return failures is not None and _VETO is not None and _VETO(failures, retry)


def repeated(run_folder: str, search: str) -> SameFailureError | None:
    """The trial driver's error when the trial's last failure in this search was a repeat, else ``None``."""
    last = last_in_search(files.read_failures(run_folder), search)
    return SameFailureError(not_retried_line(last)) if last is not None and last.final else None


def stop_trial_retries(trial: Any, run_folder: str) -> bool:
    """In the search process, as Tune retries ``trial``: when its last failure was a repeat, its next
    failure (at once, in its driver) is its last. Whether it was such a trial."""
    failures = files.read_failures(run_folder)
    if not failures or not failures[-1].final:
        return False
    internals.set_trial_retries_left(trial, 0)  # its next failure is its last
    return True
