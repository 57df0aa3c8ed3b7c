"""Each rank's progress through a trial's attempts, and the two hangs it shows: unequal reports and stalls.

Every Train worker of a trial keeps a small record of its own (``rank-<R>.json`` in the attempt's
folder, see :mod:`hpsearch.experiment.layout`): when its loop started, how many reports it completed,
whether it waits inside one, and how its loop ended. :func:`hpsearch.experiment.files.read_rank_progress`
reads them as :class:`AttemptProgress` objects; this module decides from them, without Ray and without
a clock of its own (``now`` is given), so that every decision is a plain function of the records:

- :func:`unequal_reports`: a rank ended its loop after fewer reports than another rank waits at.
  Ray Train V2's ``report`` is a barrier every rank must reach equally often, so the waiting rank
  would wait forever;
- :func:`stall_line`: what the ranks were doing when a trial sent no report for too long;
- :class:`ReportWatch`: the two together over time, as the trial driver polls the records;
- :func:`failing_ranks` and :func:`rank_note`: which rank a failed trial's error came from, and the
  path of its log, for the trial's one-line error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpsearch.experiment.layout import RANK_LOG
from hpsearch.formatting import number, plural

__all__ = [
    "RETURNED",
    "RAISED",
    "RankProgress",
    "AttemptProgress",
    "ranks_text",
    "unequal_reports",
    "stall_line",
    "ReportWatch",
    "failing_ranks",
    "rank_note",
    "UNEQUAL_PREFIX",
    "STALLED_PREFIX",
]

#: How a rank's loop ended: it returned, or it raised (its traceback is at the end of its log).
RETURNED = "returned"
RAISED = "raised"
#: How the one-line errors of the two hangs start.
UNEQUAL_PREFIX = "unequal reports: "
STALLED_PREFIX = "stalled: "


@dataclass(frozen=True)
class RankProgress:
    """One rank of one attempt, as its own record says.

    Attributes:
        rank: The world rank.
        started_at: When its loop started (seconds since the epoch, on the rank's host).
        reports: How many ``ray.train.report`` calls it completed.
        in_report: Whether it is inside a report now (report ``reports + 1``), waiting at its barrier
            or saving its checkpoint; for a rank whose process died, whether it died inside one
            (a report cut short is written only with the rank's next step).
        last_report_at: When it last completed a report, or ``None``.
        ended: ``"returned"``, ``"raised"``, or ``None`` while its loop runs (or when its process died).
        ended_at: When its loop ended, or ``None``.
        error: The line of the error its loop raised, or ``""``.
        log: Its log file (``rank-<R>.log``: the process's stdout and stderr while its loop ran).
        host: The host it ran on.
        pid: Its process id.
        counted: Whether its reports are counted (hpsearch could watch its ``ray.train.report``): a rank
            whose reports are not counted shows 0 of them, and no hang is judged from it.
    """

    rank: int
    started_at: float | None = None
    reports: int = 0
    in_report: bool = False
    last_report_at: float | None = None
    ended: str | None = None
    ended_at: float | None = None
    error: str = ""
    log: Path | None = None
    host: str = ""
    pid: int | None = None
    counted: bool = True

    @property
    def waits_at(self) -> int | None:
        """The report this rank is inside, or ``None``."""
        return self.reports + 1 if self.in_report and self.ended is None else None


@dataclass(frozen=True)
class AttemptProgress:
    """One start of a trial's worker group (``logs/attempt-<N>/``) and its ranks' records.

    An attempt is each start of the trial's workers: the first, a worker-group restart
    (``failure.worker_retries``), a Tune retry (``failure.trial_retries``), a resume, an elastic resize.

    Attributes:
        attempt: Its number, from 1.
        folder: Its folder, which holds ``rank-<R>.log`` and ``rank-<R>.json`` for each rank.
        group_id: The worker placement group its ranks shared (how they agreed on the number).
        world_size: How many ranks it started with, or ``None`` when its record is missing.
        started_at: When its first rank claimed it.
        ranks: Each rank that recorded a start, by rank.
    """

    attempt: int
    folder: Path
    group_id: str = ""
    world_size: int | None = None
    started_at: float | None = None
    ranks: tuple[RankProgress, ...] = ()

    def rank(self, rank: int) -> RankProgress | None:
        """The record of ``rank``, or ``None`` when it never started."""
        return next((r for r in self.ranks if r.rank == rank), None)

    @property
    def missing(self) -> tuple[int, ...]:
        """The ranks of the attempt's world that never recorded a start."""
        if self.world_size is None:
            return ()
        seen = {r.rank for r in self.ranks}
        return tuple(r for r in range(self.world_size) if r not in seen)

    @property
    def raised(self) -> tuple[int, ...]:
        """The ranks whose loop raised."""
        return tuple(r.rank for r in self.ranks if r.ended == RAISED)

    @property
    def ended(self) -> bool:
        """Whether every rank of its world ended its loop (returned or raised)."""
        return not self.missing and bool(self.ranks) and all(r.ended is not None for r in self.ranks)


def ranks_text(ranks: Iterable[int]) -> str:
    """``rank 1``, ``ranks 0 and 2``, ``ranks 0, 2 and 3``."""
    names = [str(r) for r in sorted(ranks)]
    if len(names) == 1:
        return f"rank {names[0]}"
    return f"ranks {', '.join(names[:-1])} and {names[-1]}"


def _verb(ranks: Sequence[int], one: str, many: str) -> str:
    return one if len(ranks) == 1 else many


def unequal_reports(attempt: AttemptProgress) -> str | None:
    """Why the attempt can never finish because its ranks reported unequally, or ``None``.

    That is: a rank returned from its loop after ``n`` reports while another rank waits inside
    report ``n + 1`` or later. The waiting rank waits for the returned one at the report's
    barrier, forever. Ranks still running are not judged: they may yet return, or report.
    """
    returned: dict[int, list[int]] = {}
    for r in attempt.ranks:
        if r.ended == RETURNED:
            returned.setdefault(r.reports, []).append(r.rank)
    if not returned:
        return None
    fewest = min(returned)
    waiting: dict[int, list[int]] = {}
    for r in attempt.ranks:
        at = r.waits_at
        if at is not None and at > fewest:
            waiting.setdefault(at, []).append(r.rank)
    if not waiting:
        return None
    ended = ", ".join(
        f"{ranks_text(ranks)} ended {_verb(ranks, 'its loop', 'their loops')} after {plural(n, 'report')}"
        for n, ranks in sorted(returned.items())
        if n < max(waiting)
    )
    waits = ", ".join(
        f"{ranks_text(ranks)} {_verb(ranks, 'waits', 'wait')} at report {at}" for at, ranks in sorted(waiting.items())
    )
    return (
        f"{UNEQUAL_PREFIX}{ended} while {waits}; every rank must call ray.train.report the same number of "
        "times (it is a barrier)"
    )


def stall_line(attempt: AttemptProgress, timeout_s: float) -> str:
    """The one-line error of an attempt that sent no report for ``timeout_s``: which ranks reached
    the report in progress (and wait at its barrier) and which did not, and where those are."""
    head = f"{STALLED_PREFIX}no report for {number(float(timeout_s))} s (failure.report_timeout_s)"
    live = [r for r in attempt.ranks if r.ended is None]
    waits = [r.waits_at for r in live if r.waits_at is not None]
    target = max(waits) if waits else max((r.reports for r in attempt.ranks), default=0) + 1
    reached = sorted(r.rank for r in live if r.waits_at == target)
    parts: list[str] = []
    behind: dict[int, list[int]] = {}
    for r in live:
        if r.rank not in reached:
            behind.setdefault(r.reports, []).append(r.rank)
    if reached and not behind and not attempt.missing:
        parts.append(f"every rank reached report {target}, which has not completed (a checkpoint still saving?)")
    elif reached:
        parts.append(
            f"{ranks_text(reached)} reached report {target} and {_verb(reached, 'waits', 'wait')} at its barrier"
        )
    else:
        parts.append(f"no rank reached report {target}")
    for n, ranks in sorted(behind.items()):
        if reached:
            last = f"{_verb(ranks, 'its', 'their')} last: report {n}" if n else "no report yet"
            parts.append(f"{ranks_text(ranks)} did not ({last})")
        elif n:
            parts.append(f"{ranks_text(ranks)} {_verb(ranks, 'is', 'are')} past report {n}")
        else:
            parts.append(f"{ranks_text(ranks)} {_verb(ranks, 'has', 'have')} not reported yet")
    ended = [r for r in attempt.ranks if r.ended == RETURNED]
    for n in sorted({r.reports for r in ended}):
        ranks = [r.rank for r in ended if r.reports == n]
        parts.append(f"{ranks_text(ranks)} ended {_verb(ranks, 'its loop', 'their loops')} after {plural(n, 'report')}")
    if attempt.missing:
        parts.append(f"{ranks_text(attempt.missing)} never started {_verb(attempt.missing, 'its', 'their')} loop")
    return f"{head}: {'; '.join(parts)}"


class ReportWatch:
    """The trial driver's view of its ranks over time: unequal reports at once, a stall after ``timeout_s``.

    ``look`` is given every attempt's records (those after ``after_attempt``: the attempts before
    this run of the trial started are not its own) and the driver's clock, at each poll. A trial has
    sent no report since the latest attempt's highest completed report count last changed, or since
    the attempt was first seen; the driver's clock alone measures it, so the hosts' clocks may differ.
    An attempt with a rank that raised is left to Ray Train (it restarts the workers or fails the run).
    """

    def __init__(self, timeout_s: float | None, *, after_attempt: int = 0) -> None:
        self.timeout_s = timeout_s
        self.after_attempt = after_attempt
        self._marker: tuple[int, int] | None = None
        self._since = 0.0

    def quiet_s(self, now: float) -> float:
        """Seconds since the last report (or the attempt's start) seen."""
        return now - self._since if self._marker is not None else 0.0

    def look(self, attempts: Sequence[AttemptProgress], now: float) -> str | None:
        """The one-line error that ends the trial now, or ``None``."""
        own = [a for a in attempts if a.attempt > self.after_attempt]
        if not own:
            return None
        current = max(own, key=lambda a: a.attempt)
        marker = (current.attempt, max((r.reports for r in current.ranks), default=0))
        if marker != self._marker:
            self._marker, self._since = marker, now
        if current.raised or not all(r.counted for r in current.ranks):
            return None
        verdict = unequal_reports(current)
        if verdict is not None:
            return verdict
        if self.timeout_s is None or current.ended or now - self._since < self.timeout_s:
            return None
        return stall_line(current, self.timeout_s)


#: How Ray Train 2.60 names the ranks of a worker group's error: ``[Rank 0,2 Error Snippet]:``.
_RAY_RANKS = re.compile(r"\[Rank ([\d,\s]+) Error Snippet\]")
#: How Ray Train 2.60's worker group error starts (``WorkerGroupError``).
_WORKER_ERRORS = "Training failed due to worker errors"


def failing_ranks(attempt: AttemptProgress | None, error_text: str = "") -> list[int]:
    """The ranks a trial's error came from: those Ray's worker-group error names (a rank that raised, or
    died: killed, out of memory); when its text names none but says the workers failed, the ranks whose
    record says their loop raised. Another error (a metric never reported, a worker group that could not
    start) came from no rank, though a rank may have raised as its run was ended: ``[]``."""
    found: set[int] = set()
    for match in _RAY_RANKS.finditer(error_text or ""):
        found.update(int(r) for r in re.findall(r"\d+", match.group(1)))
    if found:
        return sorted(found)
    if attempt is not None and _WORKER_ERRORS in (error_text or ""):
        return sorted(attempt.raised)
    return []


def rank_note(attempts: Sequence[AttemptProgress], error_text: str = "", *, hang: bool = False) -> str:
    """What a failed trial's one-line error adds about its ranks: `` (rank 1; its log: <path>)``.

    The latest attempt's failing ranks (:func:`failing_ranks`) and their logs; for a hang (``hang``:
    the line already names the ranks, and a rank that raised as the run was ended is no cause), the
    attempt's logs folder. ``""`` when no rank is known.
    """
    if not attempts:
        return ""
    latest = max(attempts, key=lambda a: a.attempt)
    if hang:  # a rank waiting at the barrier may raise as its run is ended: a consequence, not the cause
        return f" (logs: {latest.folder}/)"
    ranks = failing_ranks(latest, error_text)
    if len(ranks) == 1:
        found = latest.rank(ranks[0])
        log = (
            found.log if found is not None and found.log is not None else latest.folder / RANK_LOG.format(rank=ranks[0])
        )
        return f" ({ranks_text(ranks)}; its log: {log})"
    if ranks:
        return f" ({ranks_text(ranks)}; their logs: {latest.folder}/)"
    return f" (logs: {latest.folder}/)" if hang else ""
