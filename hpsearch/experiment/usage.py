"""Usage: every stint of each trial's driver and of the search, as ``hpsearch_usage.jsonl`` records them.

A *stint* is one stretch of work between a start and its end: the search's ``run``, then each
``resume``; a trial's driver from the start Tune gives it to its end (a retry or a resume starts a
new one). It is not a nested run, which is Ray Train's (``train.RunConfig``) inside a trial.

What the budgets (``max_resource_hours``, ``max_wall_time`` over resumes) and each trial's
resource-hours are computed from: a line when a stint starts, and the same line again, with its
end, when it ends (the later line replaces the first).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hpsearch._renamed import renamed
from hpsearch.experiment.folder_io import PathLike, append_line, finite_seconds, read_json_lines
from hpsearch.experiment.layout import USAGE_FILE

__all__ = ["Stint", "Usage", "record_trial_stint", "record_search_stint", "read_usage"]


@dataclass(frozen=True)
class Stint:
    """One stint of a trial's driver, or of the search (``run``, a ``resume``): a line of ``hpsearch_usage.jsonl``.

    Attributes:
        started_at: When it started, in UNIX seconds (a trial: when Tune started its driver).
        ended_at: When it ended, or ``None`` (still running, or killed).
        resources: A trial's resources while it ran (its driver and worker bundles); ``{}`` for the search.
        end: How a trial's stint ended (``finished``, ``stopped``, ``errored``, ``retried``: Tune runs it again;
            ``budget``: a budget ended the search; ``interrupted``); for the search, the budget that ended it.
    """

    started_at: float
    ended_at: float | None = None
    resources: Mapping[str, float] = field(default_factory=dict)
    end: str | None = None

    def seconds(self, open_until: float | None = None) -> float:
        """How long it ran; a stint with no end counts until ``open_until`` (0 without)."""
        end = self.ended_at if self.ended_at is not None else open_until
        return max(0.0, end - self.started_at) if end is not None else 0.0


@dataclass(frozen=True)
class Usage:
    """What ``hpsearch_usage.jsonl`` says: every stint of each trial's driver and of the search.

    A trial's resource-hours are, per resource, the sum over its stints of the resources it held
    times the time from its driver's start to that run's end (start-up and teardown inside the
    driver included). A stint with no end recorded (the search is running, or was killed) counts
    until the later of the end of the search stint it started in (a killed one: the last thing it
    recorded) and ``open_until`` (``load_results`` passes the trial's last report).
    """

    trials: Mapping[str, list[Stint]] = field(default_factory=dict)
    searches: list[Stint] = field(default_factory=list)

    def _search_end(self, i: int) -> float:
        """When search stint ``i`` ended; one with no end (killed): the last thing recorded while it ran."""
        search = self.searches[i]
        if search.ended_at is not None:
            return search.ended_at
        stop = self.searches[i + 1].started_at if i + 1 < len(self.searches) else math.inf
        seen = [
            t
            for runs in self.trials.values()
            for r in runs
            for t in (r.started_at, r.ended_at)
            if t is not None and search.started_at <= t < stop
        ]
        return max(seen, default=search.started_at)

    def stint_end(self, stint: Stint, open_until: float | None = None) -> float | None:
        """When a trial's stint stopped counting: its end; with none, the later of ``open_until`` and
        the end of the search stint it started in."""
        if stint.ended_at is not None:
            return stint.ended_at
        within = [i for i, s in enumerate(self.searches) if s.started_at <= stint.started_at]
        candidates = [t for t in (self._search_end(within[-1]) if within else None, open_until) if t is not None]
        return max(candidates) if candidates else None

    def trial_seconds(self, trial_id: str, open_until: float | None = None) -> float | None:
        """Seconds the trial's driver ran, over every stint of it; ``None`` when nothing was recorded."""
        runs = self.trials.get(trial_id)
        if not runs:
            return None
        return sum(r.seconds(self.stint_end(r, open_until)) for r in runs)

    @staticmethod
    def _hours(runs: Iterable[Stint], end_of: Callable[[Stint], float | None]) -> dict[str, float]:
        """Per resource, the hours ``runs`` held it, each stint counted until ``end_of(run)``."""
        out: dict[str, float] = {}
        for run in runs:
            hours = run.seconds(end_of(run)) / 3600.0
            for resource, amount in run.resources.items():
                out[resource] = out.get(resource, 0.0) + float(amount) * hours
        return out

    def trial_resource_hours(self, trial_id: str, open_until: float | None = None) -> dict[str, float]:
        """Per resource, the hours the trial held it (``{}`` when nothing was recorded)."""
        return self._hours(self.trials.get(trial_id, []), lambda run: self.stint_end(run, open_until))

    def resource_hours_now(self, now: float, *, live_since: float) -> dict[str, float]:
        """Per resource, the hours held over every trial while a search runs: a stint with no end that
        started at or after ``live_since`` (in the search stint now going) counts until ``now``."""
        runs = (run for trial_runs in self.trials.values() for run in trial_runs)
        return self._hours(
            runs, lambda run: now if run.ended_at is None and run.started_at >= live_since else self.stint_end(run)
        )

    def resource_hours(self) -> dict[str, float]:
        """Per resource, the hours held over every trial."""
        out: dict[str, float] = {}
        for trial_id in self.trials:
            for resource, hours in self.trial_resource_hours(trial_id).items():
                out[resource] = out.get(resource, 0.0) + hours
        return out

    def wall_time_s(self) -> float:
        """The search's wall time over its stints (a stint with no end counts until the last thing it recorded)."""
        return sum(self._search_end(i) - s.started_at for i, s in enumerate(self.searches))


def record_trial_stint(
    experiment_dir: PathLike,
    trial_id: str,
    *,
    started_at: float,
    resources: Mapping[str, float],
    ended_at: float | None = None,
    end: str | None = None,
) -> None:
    """Record a stint of a trial's driver: at its start (no ``ended_at``), then at its end (the same
    ``started_at``: the line replaces the first). Raises ``OSError`` if it cannot be written."""
    record = {
        "kind": "trial",
        "trial_id": trial_id,
        "started_at": started_at,
        "ended_at": ended_at,
        "resources": {k: float(v) for k, v in resources.items()},
        "end": end,
    }
    append_line(Path(experiment_dir) / USAGE_FILE, record)


def record_search_stint(
    experiment_dir: PathLike, *, started_at: float, ended_at: float | None = None, ended_by: str | None = None
) -> None:
    """Record a stint of the search (``run``, a ``resume``): at its start, then at its end (the same ``started_at``)."""
    record = {"kind": "search", "started_at": started_at, "ended_at": ended_at, "end": ended_by}
    append_line(Path(experiment_dir) / USAGE_FILE, record)


def read_usage(experiment_dir: PathLike) -> Usage:
    """Every stint recorded in ``hpsearch_usage.jsonl`` (an empty :class:`Usage` for a folder without it)."""
    trials: dict[str, dict[float, Stint]] = {}
    searches: dict[float, Stint] = {}
    for record in read_json_lines(Path(experiment_dir) / USAGE_FILE):
        started = finite_seconds(record.get("started_at"))
        if started is None:
            continue
        resources = record.get("resources")
        run = Stint(
            started_at=started,
            ended_at=finite_seconds(record.get("ended_at")),
            resources={str(k): float(v) for k, v in resources.items() if finite_seconds(v) is not None}
            if isinstance(resources, dict)
            else {},
            end=str(record["end"]) if record.get("end") else None,
        )
        if record.get("kind") == "search":
            searches[started] = run
        elif record.get("trial_id"):
            trials.setdefault(str(record["trial_id"]), {})[started] = run
    return Usage(
        trials={t: sorted(runs.values(), key=lambda r: r.started_at) for t, runs in trials.items()},
        searches=sorted(searches.values(), key=lambda r: r.started_at),
    )


# "run" means the `run` command and Ray Train's nested run; these were its third and fourth meanings
__getattr__ = renamed(
    __name__,
    {
        "Run": ("Stint", Stint),
        "record_trial_run": ("record_trial_stint", record_trial_stint),
        "record_search_run": ("record_search_stint", record_search_stint),
    },
)
