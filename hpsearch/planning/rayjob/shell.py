"""The RayJob's entrypoint as text: each argument quoted for the two shells it passes.

The entrypoint passes two shells: KubeRay's submitter splits it into words, ``ray job submit`` joins
them (``subprocess.list2cmdline``) and Ray's job supervisor runs the line with ``/bin/sh``. Each
argument is quoted for both (:func:`entrypoint_text`), so a ``--set`` value reaches ``hpsearch run``
as written.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

__all__ = ["entrypoint_text"]

#: A word the second shell reads as it is (the characters ``shlex.quote`` leaves bare).
_SHELL_SAFE = re.compile(r"[\w@%+=:,./-]+", re.ASCII)


def entrypoint_text(args: Sequence[str]) -> str:
    """The RayJob's ``entrypoint`` for ``args``: each quoted for the two shells it passes, so each arrives as written.

    KubeRay's submitter splits the entrypoint into words as a shell does (Go's shlex in KubeRay 1.1 and 1.2, the
    bash script of ``ray job status || ray job submit`` from 1.3). ``ray job submit -- WORDS`` joins the words
    with ``subprocess.list2cmdline``, and Ray's job supervisor runs that line with ``/bin/sh``. So each argument
    is quoted for ``/bin/sh`` after ``list2cmdline`` (:func:`_for_the_job_shell`), and that word is quoted for
    the first shell. A word ``/bin/sh`` reads as it is stays bare.

    Example:
        >>> entrypoint_text(["hpsearch", "run", "--set", "name=$HOME", "--set", "x={a: 1}"])
        "hpsearch run --set 'name=\\\\$HOME' --set 'x={a: 1}'"
    """
    return " ".join(shlex.quote(_for_the_job_shell(arg)) for arg in args)


def _for_the_job_shell(arg: str) -> str:
    """The word ``ray job submit`` must be given for ``/bin/sh`` to read ``arg`` back after ``list2cmdline``.

    ``list2cmdline`` leaves a word without blanks as it is, but for a ``"``, which it writes ``\\"`` (doubling the
    backslashes just before it): ``/bin/sh`` reads that unquoted, so each other character it would take as
    syntax is escaped, a backslash or a line break single-quoted. A word with a blank (or none at all) it wraps
    in double quotes, with the same escapes: inside them ``/bin/sh`` unescapes ``\\ $ ` "``, so those are escaped,
    and what ``list2cmdline`` will add is taken off first.
    """
    if _SHELL_SAFE.fullmatch(arg):
        return arg
    if not arg or " " in arg or "\t" in arg:
        inside = re.sub(r'([\\$`"])', r"\\\1", arg)  # what /bin/sh must read between the double quotes
        # list2cmdline writes 2n+1 backslashes before a " for n, and 2n at the end for n: take them off
        return re.sub(r'(\\*)("|\Z)', lambda m: m.group(1)[: len(m.group(1)) // 2] + m.group(2), inside)
    return "".join(_unquoted(ch) for ch in arg)


def _unquoted(ch: str) -> str:
    """One character of a word without blanks, as ``/bin/sh`` must read it after ``list2cmdline``."""
    if ch == '"':
        return ch  # list2cmdline writes \" (no backslash comes before it here), which /bin/sh reads as "
    if ch in "\\\n":
        return f"'{ch}'"  # a backslash-newline would join lines, and \\ before a " would be doubled
    return ch if _SHELL_SAFE.fullmatch(ch) else "\\" + ch
