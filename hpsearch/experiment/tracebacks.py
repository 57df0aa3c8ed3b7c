"""The lines of an error or a traceback that say what went wrong, for one-line messages and excerpts."""

from __future__ import annotations

import re

__all__ = ["short_error", "error_excerpt"]

_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit))\b.*")


def short_error(error: BaseException | str | None, limit: int = 200) -> str:
    """The line of an error (or a traceback text) that says what went wrong."""
    if error is None:
        return ""
    text = str(error).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    at = next((i for i in range(len(lines) - 1, -1, -1) if _ERROR_LINE.match(lines[i])), None)
    chosen = lines[at] if at is not None else None
    if chosen is not None and at is not None and chosen.endswith(":") and at + 1 < len(lines):
        chosen = f"{chosen} {lines[at + 1]}"  # "ControllerError: ... failed due to controller error:" + its cause
    if chosen is None:
        chosen = (
            f"{type(error).__name__}: {lines[0]}"
            if lines and isinstance(error, BaseException)
            else (lines[0] if lines else "")
        )
    return chosen if len(chosen) <= limit else chosen[: limit - 3] + "..."


def error_excerpt(error: BaseException | str | None, max_lines: int = 12) -> str:
    """The end of the innermost traceback in an error: the user's frames and the error line.

    A failed nested run's error holds Ray's frames first and the worker's traceback last.
    """
    if error is None:
        return ""
    lines = str(error).rstrip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().startswith("Traceback (most recent call last)")]
    block = lines[starts[-1] :] if starts else lines
    if len(block) > max_lines:
        block = [block[0], "  ..."] + block[-(max_lines - 2) :]
    return "\n".join(block)
