"""Fill the test's small file system (the ``small_disk`` fixture of conftest.py) to its last byte."""

from __future__ import annotations

from pathlib import Path


def fill(folder: Path) -> OSError:
    """Write ``folder/ballast`` until the file system refuses; the error it refused with (ENOSPC)."""
    try:
        with open(folder / "ballast", "wb") as f:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
    except OSError as err:
        return err
