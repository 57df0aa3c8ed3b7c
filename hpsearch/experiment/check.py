"""``hpsearch check``: one trial of a spec, cut after a few reports and restored, judged from its folder. Pure.

Before a team spends GPU-hours on a search, the check answers "does my loop work on this cluster?":
it runs one trial at the spec's own scale (2 workers at least, so that DDP is exercised) in a folder
of its own, ``<experiment_dir>.check`` (:func:`check_folder`). The runtime
(:mod:`hpsearch.runtime.search.check`) runs it twice there:

1. ``run``: the trial, cut after ``reports`` reports as Ctrl-C would cut it (resumable);
2. ``resume``: the same trial again, whose nested run restores from its latest checkpoint, ended by
   Tune at its first report, as a scheduler ends a trial.

This module builds the one-trial spec (:func:`check_setup`), judges what the two runs wrote
(:func:`judge`: one :class:`Verdict` per check) and measures the times that ``hpsearch plan
--estimate`` reads back (:class:`Measured`, written as ``hpsearch_check.json``).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpsearch.experiment import files
from hpsearch.experiment.layout import CHECK_SUFFIX
from hpsearch.experiment.metrics import flat_metrics, has_metric, report_epoch, report_value
from hpsearch.formatting import duration, number, plural
from hpsearch.spec import Spec, space
from hpsearch.spec.budget import Budget
from hpsearch.spec.plugins import SCHEDULERS, SEARCHERS
from hpsearch.spec.tracking import Tracking
from hpsearch.spec.warm_start import WarmStart

__all__ = [
    "CHECK_RUN_NAME",
    "DEFAULT_CHECK_REPORT_TIMEOUT_S",
    "MIN_CHECK_WORKERS",
    "CheckSetup",
    "Verdict",
    "Measured",
    "CheckReport",
    "check_folder",
    "first_point",
    "check_setup",
    "judge",
]

#: A check whose spec sets no ``failure.report_timeout_s`` ends its trial after this long without a report,
#: so that a loop that hangs fails the check instead of hanging it.
DEFAULT_CHECK_REPORT_TIMEOUT_S = 300.0
#: The check's experiment inside its folder: ``<experiment_dir>.check/run``.
CHECK_RUN_NAME = "run"
#: A check runs at least this many workers, so that the loop's distributed part (DDP, every rank's
#: report) is exercised even when the spec runs one.
MIN_CHECK_WORKERS = 2


def check_folder(experiment_dir: Path) -> Path:
    """``<storage_path>/<name>.check``: everything a check of this spec writes, and nothing outside it."""
    return experiment_dir.with_name(experiment_dir.name + CHECK_SUFFIX)


def _first_value(param: space.Param) -> Any:
    if isinstance(param, (space.ChoiceParam, space.GridParam)):
        return param.values[0]
    if isinstance(param, space.ConstParam):
        return param.value
    return param.low  # a range's first point is its low end, as a grid over it starts


def first_point(tree: space.SearchSpace) -> dict[str, Any]:
    """The space's first point (dotted name -> value): each choice or grid's first value, each range's low
    end, each constant itself; a parameter whose ``when`` is false there is left out."""
    flat = {name: _first_value(param) for name, param in space.ordered_params(tree)}
    return space.active_config(tree, flat)


@dataclass(frozen=True)
class CheckSetup:
    """The one trial a check runs: its spec, its parameters (dotted name -> value) and how many reports."""

    spec: Spec
    point: dict[str, Any]
    reports: int
    folder: Path

    @property
    def run_dir(self) -> Path:
        """The check's experiment folder: ``<experiment_dir>.check/run``."""
        return self.spec.experiment_dir

    @property
    def workers(self) -> int:
        return self.spec.scaling.workers


def _constants(point: Mapping[str, Any]) -> space.SearchSpace:
    tree: space.SearchSpace = {}
    for name, value in point.items():
        node = tree
        *groups, leaf = name.split(".")
        for group in groups:
            node = node.setdefault(group, {})  # type: ignore[assignment]  # a group is a nested SearchSpace
        node[leaf] = space.ConstParam(value=value)
    return tree


def check_setup(spec: Spec, reports: int = 2, *, report_timeout_s: float | None = None) -> CheckSetup:
    """The spec a check runs: one trial at the space's first point (``--set`` values already applied).

    It keeps the loop, the metrics, the datasets, the aggregation and the checkpoint settings, and runs the
    spec's scale with at least :data:`MIN_CHECK_WORKERS` workers (an elastic trial at its minimum, a
    searched scale at its first values). It drops what would write outside the check's folder or end the
    trial for another reason: trackers, budget, warm start, the scheduler (FIFO) and the searcher (random
    over constants). Retries are off, so a failure shows at once. ``report_timeout_s`` is the stall limit
    when the spec sets none.
    """
    if reports < 1:
        raise ValueError(f"--reports must be at least 1, got {reports}")
    point = first_point(spec.search_space)
    scaling = spec.scaling
    searched = {name: _first_value(p) for name, p in space.iter_params(scaling.searched())}
    if searched:
        scaling = scaling.with_values(searched)
    workers = scaling.elastic.min if scaling.elastic else scaling.workers
    scaling = scaling.model_copy(update={"num_workers": max(MIN_CHECK_WORKERS, workers)})
    failure_update: dict[str, Any] = {"worker_retries": 0, "trial_retries": 0}
    if report_timeout_s is not None and getattr(spec.failure, "report_timeout_s", None) is None:
        failure_update["report_timeout_s"] = report_timeout_s
    folder = check_folder(spec.experiment_dir)
    checked = dataclasses.replace(
        spec,
        name=CHECK_RUN_NAME,
        storage_path=folder,
        num_samples=1,
        search_space=_constants(point),
        searcher=SEARCHERS.parse({"type": "random"}, "searcher")[0],  # type: ignore[arg-type]  # valid by construction
        scheduler=SCHEDULERS.parse({"type": "fifo"}, "scheduler")[0],  # type: ignore[arg-type]  # valid by construction
        scaling=scaling,
        failure=spec.failure.model_copy(update=failure_update),
        tracking=Tracking(),
        budget=Budget(),
        warm_start=WarmStart(),
    )
    return CheckSetup(checked, point | {f"scaling.{k}": v for k, v in searched.items()}, reports, folder)


@dataclass(frozen=True)
class Verdict:
    """One check's outcome: passed or not, and the line that says what was seen."""

    name: str
    ok: bool
    text: str

    def line(self) -> str:
        return f"  {'PASS' if self.ok else 'FAIL'}  {self.text}"


@dataclass(frozen=True)
class Measured:
    """What the check measured, in seconds (``None`` where the run never got that far).

    ``startup_s``: the trial's start to its first report (Tune's actor, the nested run, the worker group,
    the first epoch). ``report_s``: the median time between two reports. ``teardown_s``: the last report to
    the trial's end (its slot free again). ``restore_startup_s``: the restored run's start to its first report.
    ``startup_cpus`` and ``report_cpus``: how many of the machine's CPUs were busy, on average, during the
    start-up and between the first run's reports (measured when the check's Ray runs on this machine; a
    trial that keeps the machine busy alone runs slower when the plan puts several on it).
    """

    startup_s: float | None = None
    report_s: float | None = None
    teardown_s: float | None = None
    restore_startup_s: float | None = None
    startup_cpus: float | None = None
    report_cpus: float | None = None

    def line(self) -> str:
        parts = [
            f"start-up {duration(self.startup_s)} (to the first report)" if self.startup_s is not None else "",
            f"{duration(self.report_s)} per report" if self.report_s is not None else "",
            f"teardown {duration(self.teardown_s)}" if self.teardown_s is not None else "",
            f"the restored run's start-up {duration(self.restore_startup_s)}"
            if self.restore_startup_s is not None
            else "",
        ]
        busy = [
            f"{value:.1f} CPUs busy during the {phase}"
            for phase, value in (("start-up", self.startup_cpus), ("reports", self.report_cpus))
            if value is not None
        ]
        shown = [p for p in parts if p] + ([", ".join(busy)] if busy else [])
        return "measured: " + ("; ".join(shown) if shown else "nothing: the trial never reported")


@dataclass(frozen=True)
class CheckReport:
    """The verdicts, the measurements and the check's trial, as ``hpsearch check`` prints and writes them."""

    verdicts: list[Verdict]
    measured: Measured
    trial_id: str | None = None
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.verdicts) and all(v.ok for v in self.verdicts)

    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]

    def as_dict(self, setup: CheckSetup, **about: Any) -> dict[str, Any]:
        """The record ``hpsearch_check.json`` holds (read back by ``plan --estimate``)."""
        return {
            "version": 1,
            "ok": self.ok,
            "workers": setup.workers,
            "reports": setup.reports,
            "point": setup.point,
            "trial_id": self.trial_id,
            **dataclasses.asdict(self.measured),
            "checks": [{"name": v.name, "ok": v.ok, "text": v.text} for v in self.verdicts],
            "error": self.error,
            **about,
        }


def _split_runs(rows: Sequence[Mapping[str, Any]], restored_at: float | None) -> tuple[list[Any], list[Any]]:
    """The history's reports of the first run and of the restored run (forwarded after it started)."""
    if restored_at is None:
        return list(rows), []
    first = [r for r in rows if _time(r) is not None and _time(r) < restored_at]  # type: ignore[operator]  # not None
    return first, [r for r in rows if r not in first]


def _time(row: Mapping[str, Any]) -> float | None:
    value = row.get("time")
    return float(value) if isinstance(value, (int, float)) else None


def _gaps(rows: Sequence[Mapping[str, Any]]) -> list[float]:
    times = [t for t in (_time(r) for r in rows) if t is not None]
    return [b - a for a, b in zip(times, times[1:])]


def _after(start: float | None, rows: Sequence[Mapping[str, Any]]) -> float | None:
    first = _time(rows[0]) if rows else None
    return first - start if first is not None and start is not None else None


def busy_cpus(samples: Sequence[tuple[float, float]], start: float | None, end: float | None) -> float | None:
    """The CPUs busy on average from ``start`` to ``end``, from ``samples`` of ``(time, busy CPU-seconds so
    far)`` in time order (linear between samples); ``None`` when the samples do not cover the interval."""
    if start is None or end is None or end <= start or len(samples) < 2:
        return None
    times = [t for t, _ in samples]
    if start < times[0] or end > times[-1]:
        return None

    def at(when: float) -> float:
        i = max(1, bisect.bisect_left(times, when))
        (t0, b0), (t1, b1) = samples[i - 1], samples[i]
        return b0 if t1 <= t0 else b0 + (b1 - b0) * (when - t0) / (t1 - t0)

    return max(0.0, (at(end) - at(start)) / (end - start))


def measure(
    first: Sequence[Mapping[str, Any]],
    restored: Sequence[Mapping[str, Any]],
    runs: Sequence[files.Stint],
    cpu_samples: Sequence[tuple[float, float]] = (),
) -> Measured:
    """The check's times from its two runs' reports and the usage file's runs of its trial; with
    ``cpu_samples`` (see :func:`busy_cpus`), the CPUs busy during its first run's start-up and reports."""
    first_run = runs[0] if runs else None
    second_run = runs[1] if len(runs) > 1 else None
    gaps = _gaps(first) or _gaps(restored)
    last = _time(restored[-1]) if restored else None
    teardown = (
        second_run.ended_at - last
        if second_run is not None and second_run.ended_at is not None and last is not None
        else None
    )
    first_report = _time(first[0]) if first else None
    last_report = _time(first[-1]) if first else None
    return Measured(
        startup_s=_after(first_run.started_at if first_run else None, first),
        report_s=statistics.median(gaps) if gaps else None,
        teardown_s=max(0.0, teardown) if teardown is not None else None,
        restore_startup_s=_after(second_run.started_at if second_run else None, restored),
        startup_cpus=busy_cpus(cpu_samples, first_run.started_at if first_run else None, first_report),
        report_cpus=busy_cpus(cpu_samples, first_report, last_report),
    )


def _ranks_verdict(progress: Sequence[Any], workers: int) -> Verdict:
    """Every rank of every attempt started and completed the same number of reports."""
    if not progress:
        return Verdict("ranks", False, f"no rank of the trial's {plural(workers, 'worker')} recorded a start")
    problems, counts = [], []
    for attempt in progress:
        ranks = {int(r.rank): r for r in attempt.ranks}
        missing = [r for r in range(workers) if r not in ranks]
        if missing:
            problems.append(
                f"attempt {attempt.attempt}: rank(s) {', '.join(map(str, missing))} never started "
                f"(of {plural(workers, 'worker')})"
            )
        done = {r: int(p.reports) for r, p in sorted(ranks.items())}
        if len(set(done.values())) > 1:
            problems.append(
                f"attempt {attempt.attempt}: the ranks reported a different number of times ("
                + ", ".join(f"rank {r}: {n}" for r, n in done.items())
                + ")"
            )
        elif done and next(iter(done.values())) == 0:
            problems.append(f"attempt {attempt.attempt}: no rank completed a report")
        counts.append(f"{next(iter(done.values()), 0)}" if done else "0")
    if problems:
        return Verdict("ranks", False, "; ".join(problems))
    return Verdict(
        "ranks",
        True,
        f"every rank started and reported the same number of times ({plural(workers, 'rank')}; "
        f"reports per run: {', '.join(counts)})",
    )


def _metric_verdict(
    rows: Sequence[Mapping[str, Any]], objectives: Sequence[tuple[str, str]], constrained: Sequence[str] = ()
) -> Verdict:
    names = [m for m, _ in objectives]
    shown = " and ".join(names)
    if not rows:
        return Verdict("metric", False, f"{shown}: no report reached Tune")
    for i, name in enumerate(constrained):  # a constraint reads its metric in every report (any value: a
        for row in rows:  # NaN there only makes the report infeasible)
            if not has_metric(row, name):
                reported = ", ".join(k for k in flat_metrics(row) if k not in ("time", "checkpoint_path"))
                return Verdict(
                    "metric",
                    False,
                    f"{name}, the metric of constraints[{i}], is missing from the report of epoch "
                    f"{report_epoch(row)} (it had: {reported})",
                )
    for name in names:
        for row in rows:
            value = report_value(row, name)
            epoch = report_epoch(row)
            if not has_metric(row, name):
                reported = ", ".join(k for k in flat_metrics(row) if k not in ("time", "checkpoint_path"))
                return Verdict(
                    "metric", False, f"{name} is missing from the report of epoch {epoch} (it had: {reported})"
                )
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                return Verdict("metric", False, f"{name} was {value!r} at epoch {epoch}, not a finite number")
    last = rows[-1]
    values = ", ".join(f"{n}={number(report_value(last, n))}" for n in names)
    also = f"; so did the constrained {', '.join(constrained)}" if constrained else ""
    return Verdict(
        "metric",
        True,
        f"{shown} arrived with every report ({plural(len(rows), 'report')}), finite (last: {values}){also}",
    )


def _checkpoint(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((r for r in reversed(rows) if r.get("checkpoint_path")), None)


def _checkpoint_verdict(rows: Sequence[Mapping[str, Any]]) -> Verdict:
    row = _checkpoint(rows)
    if row is None:
        return Verdict(
            "checkpoint",
            False,
            f"no report carried a checkpoint ({plural(len(rows), 'report')}): report with "
            "hpsearch.train.report(..., model=...) or ray.train.report(..., checkpoint=Checkpoint.from_directory(...))",
        )
    path = Path(str(row["checkpoint_path"]))
    if not path.exists():
        return Verdict("checkpoint", False, f"the checkpoint of epoch {report_epoch(row)} is not on disk: {path}")
    return Verdict("checkpoint", True, f"a checkpoint was written (epoch {report_epoch(row)}: {path})")


def _restore_verdict(
    first: Sequence[Mapping[str, Any]],
    restored: Sequence[Mapping[str, Any]],
    restored_started: bool,
    reports: int,
    failed: bool = False,
) -> Verdict:
    if failed and not restored_started:
        return Verdict("restore", False, "not tried: the trial failed before the cut (its error is below)")
    row = _checkpoint(first)
    if row is None:
        return Verdict("restore", False, "not tried: the first run wrote no checkpoint to restore from")
    if not restored_started:
        return Verdict(
            "restore",
            False,
            f"not tried: the trial ended by itself after {plural(len(first), 'report')}, so there was nothing left "
            f"to restore into; check with fewer reports (--reports {max(1, len(first) - 1)}) or more epochs (--set)",
        )
    if not restored:
        return Verdict("restore", False, "the restored run never reported (its error is below)")
    saved, next_epoch = report_epoch(row), report_epoch(restored[0])
    if saved is None or next_epoch is None or next_epoch != saved + 1:
        return Verdict(
            "restore",
            False,
            f"the restored run's first report was epoch {next_epoch}, but the latest checkpoint was of epoch {saved}: "
            "restore at the loop's start from ray.train.get_checkpoint() (or hpsearch.train.restore(model=...)) "
            "and report the epoch",
        )
    return Verdict("restore", True, f"a new run restored from that checkpoint: its first report was epoch {next_epoch}")


def judge(
    setup: CheckSetup,
    *,
    progress: Sequence[Any] = (),
    restored_started: bool = True,
    cpu_samples: Sequence[tuple[float, float]] = (),
) -> CheckReport:
    """The verdicts on the check's two runs, read from its experiment folder.

    ``progress`` is every attempt's per-rank record (:func:`hpsearch.experiment.files.read_rank_progress`);
    ``restored_started`` says whether the second run was started (the first may have ended by itself);
    ``cpu_samples`` are the machine's busy CPU-seconds over the first run (see :func:`busy_cpus`).
    """
    run_dir = setup.run_dir
    records = files.read_outcome_records(run_dir)
    usage = files.read_usage(run_dir)
    trial_ids = sorted(usage.trials) or sorted(records)
    trial_id = trial_ids[0] if trial_ids else None
    if trial_id is None:
        return CheckReport([Verdict("start", False, "the trial never started")], Measured())
    runs = list(usage.trials.get(trial_id, []))
    rows = files.read_history(run_dir, trial_id)
    restored_at = runs[1].started_at if len(runs) > 1 and restored_started else None
    first, restored = _split_runs(rows, restored_at)
    error = str(records.get(trial_id, {}).get("error") or "")
    verdicts = [
        _ranks_verdict(progress, setup.workers),
        _metric_verdict(first + restored, setup.spec.objectives, [c.metric for c in setup.spec.constraints]),
        _checkpoint_verdict(first),
        _restore_verdict(first, restored, restored_started, setup.reports, failed=bool(error)),
    ]
    return CheckReport(verdicts, measure(first, restored, runs, cpu_samples), trial_id, error)
