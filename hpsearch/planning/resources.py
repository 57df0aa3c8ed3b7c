"""Resource dicts as the planner counts and writes them: names, units, and the text hpsearch prints.

A resource dict maps Ray's resource names to amounts (``{"CPU": 1, "GPU": 0.5, "memory": 2 * GB}``);
``memory`` is in bytes, as Ray reports it, and a person reads and writes it in GiB (:data:`GB`). Amounts are compared in Ray's fixed-point units
(:data:`UNIT`, 1/10000 of a resource), so ``0.1 + 0.2`` CPUs fit in ``0.3``. Per-device resources
(:data:`UNIT_INSTANCE`) are shared out device by device. :func:`fmt_resources` is the one writer of a
resource dict, for people or exact, as ``--cluster`` reads it back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import yaml

__all__ = ["MEMORY", "GB", "UNIT", "UNIT_INSTANCE", "to_units", "positive", "fmt_amount", "fmt_resources"]

#: The resource name of a node's memory (bytes).
MEMORY = "memory"
#: Bytes in one GiB (1024**3): hpsearch's unit of memory wherever a person reads or writes it (``--cluster``'s
#: ``memory: 32``, the spec's ``*_memory_gb`` keys, every plan). The constant keeps its first name, ``GB``.
GB = 1024**3
#: Ray's fixed-point scale: amounts are whole multiples of 1/UNIT of a resource.
UNIT = 10_000
#: Resources Ray allocates per device: a fraction below 1 must fit on one device, so four
#: workers of GPU 0.3 fit three to a GPU, not 3.33; amounts above 1 must be whole.
UNIT_INSTANCE = frozenset({"GPU", "TPU", "neuron_cores", "NPU", "HPU", "RBLN", "FURIOSA", "TTNPU", "MBLT"})
#: A resource name written bare in an exact resource dict (anything else is a quoted YAML string).
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")


def to_units(resources: Mapping[str, float]) -> dict[str, int]:
    """The resources asked for (amounts above 0) in Ray's fixed-point units."""
    return {k: round(float(v) * UNIT) for k, v in resources.items() if float(v) > 0}


def fmt_amount(key: str, value: float) -> str:
    """One amount for people: memory (bytes) in GiB with 3 significant digits, anything else as it is."""
    return f"{value / GB:.3g} GiB" if key == MEMORY else f"{value:g}"


def positive(resources: Mapping[str, float]) -> dict[str, float]:
    """The resources asked for (amounts above 0), as floats."""
    return {k: float(v) for k, v in resources.items() if float(v) > 0}


def fmt_resources(resources: Mapping[str, float], *, exact: bool = False) -> str:
    """A resource dict as hpsearch writes it everywhere: CPU and GPU first, ``memory`` (bytes) in GiB.

    By default the text is for people: ``{CPU: 1, GPU: 0.5, memory: 2 GiB}``, with 3 significant
    digits. With ``exact``, the text is what ``--cluster`` reads back: ``{CPU: 1, GPU: 0.5,
    memory: 2}``. Then every amount is exact, and memory is a plain number of GiB. A name that
    YAML would read as something else is quoted.
    """
    order = sorted(resources, key=lambda k: (k != "CPU", k != "GPU", k == MEMORY, k))
    if not exact:
        return "{" + ", ".join(f"{k}: {fmt_amount(k, resources[k])}" for k in order) + "}"
    parts = []
    for key in order:
        amount = float(resources[key]) / GB if key == MEMORY else float(resources[key])
        parts.append(f"{_yaml_key(key)}: {int(amount) if amount.is_integer() else repr(amount)}")
    return "{" + ", ".join(parts) + "}"


def _yaml_key(key: str) -> str:
    """A resource name as a YAML flow mapping reads it back: bare when it can be, else quoted."""
    return key if _BARE_KEY.fullmatch(key) and yaml.safe_load(key) == key else json.dumps(key)
