"""What hpsearch tells the user while it works: one channel, one prefix.

Every line hpsearch prints on its own goes through this module, from whichever process
object prints it (the progress printer, the orphan reaper, the budget stopper, a tracker, a
reused trial actor):

- :func:`say` prints one message as ``hpsearch: <text>``;
- :func:`line` prints a line as it is (progress lines, the PBT exploit lines, tables).

Both go to standard error, looked up at each print, so a redirected ``sys.stderr`` (a
notebook, pytest's ``capsys``) sees them. :func:`to` sends them to another stream for the
span of a ``with`` block: ``hpsearch.run(spec, stream=...)`` uses it. Nothing here keeps a
stream in an object, so Tune can pickle and restore every callback as it is.

Example:
    >>> import io
    >>> from hpsearch import messages
    >>> buffer = io.StringIO()
    >>> with messages.to(buffer):
    ...     messages.say("resumed 3 trials")
    >>> buffer.getvalue()
    'hpsearch: resumed 3 trials\\n'
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import TextIO

__all__ = ["PREFIX", "say", "line", "to", "current"]

#: What every message of hpsearch's starts with.
PREFIX = "hpsearch: "

_lock = threading.Lock()
_targets: list[TextIO] = []  # the innermost `to(...)` last; empty: standard error


def current() -> TextIO:
    """Where messages go now: the stream of the innermost :func:`to`, else ``sys.stderr``."""
    with _lock:
        return _targets[-1] if _targets else sys.stderr


def say(text: str) -> None:
    """Print one message, ``hpsearch: <text>``."""
    line(PREFIX + text)


def line(text: str) -> None:
    """Print ``text`` as it is, as one line."""
    print(text, file=current(), flush=True)


@contextlib.contextmanager
def to(stream: TextIO | None) -> Iterator[None]:
    """Send every message to ``stream`` for the span of the block (``None``: leave them where they go)."""
    if stream is None:
        yield
        return
    with _lock:
        _targets.append(stream)
    try:
        yield
    finally:
        with _lock:
            _targets.remove(stream)
