"""Exceptions raised by hpsearch.

One root class, :class:`HpsearchError`; each subclass also inherits the matching
builtin so callers can catch either (``except ValueError`` catches a bad spec).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hpsearch.formatting import plural

__all__ = [
    "HpsearchError",
    "Problem",
    "SpecError",
    "PlanError",
    "ExperimentExistsError",
    "ExperimentLockedError",
    "ExperimentNotFoundError",
    "ClusterError",
    "ResultsError",
    "ExportError",
    "StorageFullError",
    "IncompatibleLibraryError",
]


class HpsearchError(Exception):
    """Root of every error hpsearch raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One mistake in a spec: where it is (a dotted YAML path) and what is wrong."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '<spec>'}: {self.message}"


class SpecError(HpsearchError, ValueError):
    """A spec that cannot run. Holds every problem found, each with its YAML path."""

    def __init__(self, problems: Sequence[Problem], *, source: str | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        where = f" in {self.source}" if self.source else ""
        n = len(self.problems)
        head = f"invalid spec{where} ({plural(n, 'problem')}):"
        return "\n".join([head, *(f"  - {p}" for p in self.problems)])


class PlanError(HpsearchError, ValueError):
    """The cluster can never run the requested trials (or not as many at once as asked)."""


class ExperimentExistsError(HpsearchError, FileExistsError):
    """The experiment folder already exists and the user did not say to overwrite it."""


class ExperimentLockedError(HpsearchError, RuntimeError):
    """Another search holds the experiment folder's lock (``run``, ``resume`` and ``check`` each take it)."""


class ExperimentNotFoundError(HpsearchError, FileNotFoundError):
    """The folder does not exist, or holds no experiment (no hpsearch files, no Tune trial folders)."""


class ClusterError(HpsearchError, ConnectionError):
    """The Ray cluster cannot be reached, or cannot run the search as it is set up."""


class IncompatibleLibraryError(HpsearchError, RuntimeError):
    """The installed Ray (or Optuna, HyperOpt) lacks an internal this search needs; raised before anything starts."""


class ResultsError(HpsearchError, ValueError):
    """The results cannot be read as asked (an unknown metric, a mode that is not min or max)."""


class StorageFullError(HpsearchError, OSError):
    """The storage filled up while a search ran: the search ended, the results written so far are kept.

    Not the user's mistake in a spec: ``hpsearch`` exits with 1, not 2.
    """


class ExportError(HpsearchError, ValueError):
    """The Optuna study cannot be written (the storage cannot be opened, or the study exists)."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A ``"; did you mean 'x'?"`` suffix for the closest choice, or ``""``."""
    by_lower = {str(c).lower(): str(c) for c in choices}
    match = difflib.get_close_matches(str(word).lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean '{by_lower[match[0]]}'?" if match else ""


def one_of(choices: Iterable[str]) -> str:
    """``'a', 'b' or 'c'`` for error messages."""
    quoted = [f"'{c}'" for c in choices]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


class MetricNotReportedError(HpsearchError, ValueError):
    """A trial reported without the spec's metric: a bug in the loop (or the spec), so it is never retried.

    Raised in the nested run's controller at the trial's first such report, before Tune
    sees it. Its message is one line: the metric, a did-you-mean, and the keys reported.
    """

    def __init__(self, metric: str, reported: Iterable[str], named_by: str = "metric") -> None:
        self.metric = metric
        self.reported = tuple(str(k) for k in reported)
        self.named_by = named_by  # the spec key that names the metric: metric, constraints[0], ...
        names = ", ".join(self.reported) or "nothing"
        what = f"the spec's metric {metric!r}" if named_by == "metric" else f"{metric!r}, the metric of {named_by}"
        super().__init__(f"the loop did not report {what}{did_you_mean(metric, self.reported)} (it reported: {names})")

    def __reduce__(self) -> tuple[type[MetricNotReportedError], tuple[str, tuple[str, ...], str]]:
        return (type(self), (self.metric, self.reported, self.named_by))  # rebuilt in another Ray process


__all__ += ["MetricNotReportedError"]


class CheckpointNotReportedError(HpsearchError, RuntimeError):
    """Under population-based training a trial reported without a checkpoint, or did not start
    from the donor's checkpoint it was given: PBT cannot work with that loop, so it is never retried.

    Raised in the nested run's controller; its message is one line that says what the loop must do.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)

    def __reduce__(self) -> tuple[type[CheckpointNotReportedError], tuple[str]]:
        return (type(self), (str(self),))  # rebuilt from its message in another Ray process


__all__ += ["CheckpointNotReportedError"]
