"""No blind retries: a trial's failures, compared attempt by attempt.

Ray Train's pitfalls list says it: retries mask data and code bugs that fail the same way each time.
hpsearch records each failure of a trial's worker group (``train/<trial_id>/hpsearch_failures.jsonl``,
one line each, written by the Train controller) and compares it with the one before it, across Ray
Train's restarts of the worker group and Tune's retries of the trial. A failure is *the same* as the
one before when both are the loop's own errors (not a worker or node that died, an out-of-memory
kill, a placement timeout: those keep their whole retry budget) with the same exception type and the
same message once its numbers are masked, at the same epoch. The second such failure is not retried
again, at either level; the trial's line says so:

    failed the same way twice (ValueError: loss is nan at step <n> at epoch 2); not retried again

Pure: the records, the masking and the comparison. The controller's side is
:mod:`hpsearch.runtime.retries`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Failure", "mask", "same", "not_retried_line", "last_in_search"]

_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Failure:
    """One failure of a trial's worker group, as recorded.

    ``kind``: the loop's exception type (its last name), or ``""`` for an infrastructure failure.
    ``message``: its message as raised; ``masked``: with every number replaced. ``epoch``: the epoch it
    failed in (the one after the last reported; 1 before any). ``infra``: a worker or node died, or the
    worker group could not start: never counted as the same. ``final``: the failure that ended the
    trial's retries. ``search``: the search run (``run`` or each ``resume``) it happened in.
    """

    kind: str
    message: str
    masked: str
    epoch: int | None
    infra: bool = False
    final: bool = False
    search: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Failure | None:
        try:
            epoch = data.get("epoch")
            return cls(
                kind=str(data["kind"]),
                message=str(data.get("message", "")),
                masked=str(data.get("masked", "")),
                epoch=int(epoch) if isinstance(epoch, (int, float)) and not isinstance(epoch, bool) else None,
                infra=bool(data.get("infra", False)),
                final=bool(data.get("final", False)),
                search=str(data.get("search", "")),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self, limit: int = 120) -> str:
        """``ValueError: the message at epoch 2`` (the message cut at ``limit`` characters)."""
        message = self.message if len(self.message) <= limit else self.message[: limit - 1] + "…"
        at = f" at epoch {self.epoch}" if self.epoch is not None else ""
        return f"{self.kind}: {message}{at}" if message else f"{self.kind}{at}"


def mask(message: str) -> str:
    """The message with its numbers masked (``<n>``): a step count, a value, an address differ between
    attempts that fail the same way."""
    return _NUMBER.sub("<n>", message.strip())


def same(a: Failure | None, b: Failure | None) -> bool:
    """Whether two failures are the loop failing the same way: the same type, masked message and epoch,
    and neither an infrastructure failure."""
    if a is None or b is None or a.infra or b.infra:
        return False
    return (a.kind, a.masked, a.epoch) == (b.kind, b.masked, b.epoch)


def last_in_search(failures: Sequence[Failure], search: str) -> Failure | None:
    """The latest failure recorded in this search run (a resume starts afresh: the user may have fixed it)."""
    mine = [f for f in failures if f.search == search]
    return mine[-1] if mine else None


def not_retried_line(failure: Failure) -> str:
    """The trial's one-line error when its failure repeated."""
    return f"failed the same way twice ({failure.describe()}); not retried again"
