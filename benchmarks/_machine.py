"""What every benchmark prints and records with its figures: the command and the machine."""

from __future__ import annotations

import datetime as dt
import os
import platform
import sys
from importlib import metadata
from pathlib import Path


def command_line() -> str:
    """The command as typed (``python benchmarks/x.py --flag``)."""
    return " ".join([Path(sys.executable).name, *sys.argv])


#: The packages whose versions a figure depends on.
PACKAGES = ("hpsearch", "ray", "torch", "optuna", "hyperopt")


def versions() -> dict[str, str]:
    """Installed versions of PACKAGES (read from the package metadata: nothing is imported)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def machine_info() -> dict:
    """CPU count, platform, Python and package versions, date and the 1-minute load (other work skews the figures)."""
    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "versions": versions(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def print_header() -> tuple[str, dict]:
    """Print the command and the machine, as every benchmark opens; return both for the JSON record."""
    command, machine = command_line(), machine_info()
    print(f"command: {command}")
    print(
        f"machine: {machine['cpu_count']} CPUs, {machine['platform']}, Python {machine['python']}, "
        f"{machine['date']}, load average {machine['load_average_1min']}"
    )
    print("versions: " + ", ".join(f"{name} {version}" for name, version in machine["versions"].items()))
    return command, machine
