"""What one trial costs, in seconds: the model's timing input (``Timing``), read from ``hpsearch check``'s record
and the flags (``--epoch-time``, ``--startup``, ``--teardown``) by :func:`timing_from`.

The check measures a trial's start to its first report and the time between reports; the start-up is their
difference. A trial that starts after the first wave starts as the check's restored run did (warm), and
trials that share a node share its CPUs (:meth:`Timing.slowdown`, from the CPUs the check saw busy).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpsearch.errors import PlanError

__all__ = ["EPOCH_VARIATION", "Timing", "timing_from"]

#: How much a trial's epoch time differs from the measured one, each way (``--estimate``'s default): trials'
#: configs differ (a wider model, a smaller batch), and trials that all took the same time would move in
#: lockstep, every report of theirs at the same instant, which no real search does.
EPOCH_VARIATION = 0.1


@dataclass(frozen=True)
class Timing:
    """What one trial costs, in seconds.

    Attributes:
        epoch_s: One epoch (one report).
        startup_s: A trial's start to its first epoch's start (the driver, the nested run, its workers).
        teardown_s: A trial's last report to its slot being free again.
        restore_s: A restarted run's start-up (after a pause or an exploit); ``None``: ``startup_s``.
        warm_startup_s: A new trial's start-up once the first trials have started (Ray's processes and the
            files they read are warm by then: the check's restored run measures it); ``None``: ``startup_s``.
        startup_cpus: The CPUs one trial's start-up keeps busy, alone on its machine (the check's measure);
            ``None``: not measured, and trials sharing a node are taken not to slow each other.
        epoch_cpus: Likewise while it trains.
        variation: Each trial's epoch time is drawn uniformly within this share of ``epoch_s`` either way (0: all
            the same, as the hand-computed schedules in the tests take it).
        source: Where the figures come from, for people: ``measured by hpsearch check (...)``, ``given``.
        given: The command-line flags that gave (or overrode) a figure.
        check_file: The check's measurements file read, if any.
        notes: What people should know about the figures (a failed check, a figure left at 0).
        preemption_rate: Preemptions per spot node-hour (``--preemption-rate``); ``None``: not given, and
            preemptions are not counted.
    """

    epoch_s: float
    startup_s: float
    teardown_s: float = 0.0
    restore_s: float | None = None
    warm_startup_s: float | None = None
    startup_cpus: float | None = None
    epoch_cpus: float | None = None
    variation: float = 0.0
    source: str = "given"
    given: tuple[str, ...] = ()
    check_file: str | None = None
    notes: tuple[str, ...] = ()
    preemption_rate: float | None = None

    @property
    def restart_s(self) -> float:
        """A restarted run's start-up: the check's restore figure, else a fresh start-up."""
        return self.startup_s if self.restore_s is None else self.restore_s

    @property
    def later_startup_s(self) -> float:
        """A new trial's start-up after the first ones: the warm figure, else the first start-up."""
        return self.startup_s if self.warm_startup_s is None else self.warm_startup_s

    def slowdown(self, busy_cpus: float | None, trials_on_node: int, node_cpus: float | None) -> float:
        """How much slower a trial's phase runs with ``trials_on_node`` trials on a node of ``node_cpus``
        CPUs, when one alone keeps ``busy_cpus`` of them busy for the phase's time (1: alone, or nothing
        measured). The others' CPU work is done on the same CPUs: each adds its work spread over them,
        ``busy / cpus`` of the phase's time alone, while the phase's own waits (start-up latencies, I/O)
        stay as they were."""
        if busy_cpus is None or not node_cpus or node_cpus <= 0 or trials_on_node <= 1:
            return 1.0
        return 1.0 + (trials_on_node - 1) * min(busy_cpus, node_cpus) / node_cpus

    def as_dict(self) -> dict[str, Any]:
        return {
            "epoch_s": self.epoch_s,
            "startup_s": self.startup_s,
            "later_startup_s": self.later_startup_s,
            "startup_cpus": self.startup_cpus,
            "epoch_cpus": self.epoch_cpus,
            "teardown_s": self.teardown_s,
            "restart_s": self.restart_s,
            "epoch_variation": self.variation,
            "source": self.source,
            "given": list(self.given),
            "check_file": self.check_file,
            **({"preemption_rate": self.preemption_rate} if self.preemption_rate is not None else {}),
        }


def _measure(record: Mapping[str, Any], key: str) -> float | None:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def timing_from(
    check: Mapping[str, Any] | None,
    *,
    check_file: str,
    spec_arg: str,
    epoch_s: float | None = None,
    startup_s: float | None = None,
    teardown_s: float | None = None,
    workers: int | None = None,
    preemption_rate: float | None = None,
) -> Timing:
    """A trial's costs from ``hpsearch check``'s record (``check``, read from ``check_file``) and the flags.

    A flag overrides the check's figure. The check measures a trial's start to its *first report*
    (``startup_s``, which holds the first epoch) and the median time between reports (``report_s``):
    the start-up is their difference. Likewise the restored run's (``restore_startup_s``). ``workers``: the
    spec's workers per trial, to say when the check ran another number (it runs 2 at least).
    ``preemption_rate``: ``--preemption-rate``, preemptions per spot node-hour (kept as given).

    Raises:
        PlanError: neither gives the time per epoch and the start-up: one message saying to run the
            check (``hpsearch check SPEC``) or give ``--epoch-time`` and ``--startup``.
    """
    record: Mapping[str, Any] = check or {}
    report = _measure(record, "report_s")
    first = _measure(record, "startup_s")
    restored = _measure(record, "restore_startup_s")
    epoch = epoch_s if epoch_s is not None else report
    first_epoch = report if report is not None else epoch  # what the check's first report took to train
    startup = startup_s
    if startup is None and first is not None and first_epoch is not None:
        startup = max(0.0, first - first_epoch)
    if epoch is not None and epoch <= 0:
        epoch = None
    if epoch is None or startup is None:
        raise _no_timing(check, check_file, spec_arg, epoch, startup)
    notes: list[str] = []
    teardown = teardown_s if teardown_s is not None else _measure(record, "teardown_s")
    if teardown is None:
        teardown = 0.0
        notes.append("no teardown given or measured: counted as 0 s (--teardown SECONDS)")
    restore = max(0.0, restored - first_epoch) if restored is not None and first_epoch is not None else None
    given = tuple(
        flag
        for flag, value in (("--epoch-time", epoch_s), ("--startup", startup_s), ("--teardown", teardown_s))
        if value is not None
    )
    if check is not None:
        source = _measured_by(record, check_file, given)
        notes += _check_notes(record, workers)
    else:
        source = "given (" + ", ".join(given) + ")"
    cpus = (
        (_measure(record, "startup_cpus"), _measure(record, "report_cpus"))
        if startup_s is None and epoch_s is None
        else (None, None)  # given times are taken as they are: the user's own figure for the search's conditions
    )
    return Timing(
        epoch_s=float(epoch),
        startup_s=float(startup),
        teardown_s=float(teardown),
        restore_s=restore,
        warm_startup_s=restore if startup_s is None else None,
        startup_cpus=cpus[0],
        epoch_cpus=cpus[1],
        variation=EPOCH_VARIATION,
        source=source,
        given=given,
        check_file=check_file if check is not None else None,
        notes=tuple(notes),
        preemption_rate=preemption_rate,
    )


def _no_timing(
    check: Mapping[str, Any] | None, check_file: str, spec_arg: str, epoch: float | None, startup: float | None
) -> PlanError:
    """The refusal when neither the check nor the flags give the time per epoch and the start-up."""
    if check is None:
        where = f"there is no check record at {check_file}"
    else:
        missing = " or ".join(
            name for name, value in (("time per report", epoch), ("start-up", startup)) if value is None
        )
        where = f"the check's record at {check_file} has no {missing}"
    return PlanError(
        f"--estimate needs how long a trial takes, and {where}: run `hpsearch check {spec_arg}` (it measures "
        "a trial's start-up, time per epoch and teardown on the cluster), or give --epoch-time SECONDS and "
        "--startup SECONDS"
    )


def _measured_by(record: Mapping[str, Any], check_file: str, given: Sequence[str]) -> str:
    """Where the figures come from, for people: the check's file, when and where it ran, and any flags given."""
    about = ", ".join(
        str(part) for part in (check_file, _when(record.get("measured_at")), _on(record.get("host"))) if part
    )
    return f"measured by hpsearch check ({about})" + (f"; {', '.join(given)} given" if given else "")


def _check_notes(record: Mapping[str, Any], workers: int | None) -> list[str]:
    """What people should know about the check's figures: it failed, or it ran another number of workers."""
    notes = []
    if record.get("ok") is False:
        notes.append("the check failed; its times are used as measured")
    ran = record.get("workers")
    if isinstance(ran, int) and not isinstance(ran, bool) and workers is not None and ran != workers:
        notes.append(f"the check ran {ran} workers per trial, the search's trials run {workers}: its times may differ")
    return notes


def _when(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return ""
    return datetime.datetime.fromtimestamp(float(value)).strftime("%Y-%m-%d %H:%M")


def _on(value: Any) -> str:
    return f"on {value}" if isinstance(value, str) and value else ""
