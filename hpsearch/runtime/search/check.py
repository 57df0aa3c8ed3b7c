"""``hpsearch check`` at the Ray edge: one trial of the spec, cut, restored and judged.

The check runs the search machinery itself, not a model of it: :func:`hpsearch.runtime.search.tuner`'s run
and resume, with the spec :func:`hpsearch.experiment.check.check_setup` derives, into the check's own
folder (``<experiment_dir>.check``). :class:`CutAfterReports` is the one addition: a Tune stopper that
interrupts the first run after the trial's ``reports``-th report, as Ctrl-C does (Tune saves its state,
so the search can resume), and, restored with Tune's state by the resume, stops the trial at its first
report. The verdicts and the measurements are read from the folder afterwards
(:func:`hpsearch.experiment.check.judge`) and written to ``hpsearch_check.json``, which ``hpsearch plan
--estimate`` reads.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import psutil
import ray
from ray.tune.stopper import Stopper

from hpsearch import messages
from hpsearch.errors import ExperimentExistsError
from hpsearch.experiment import files
from hpsearch.experiment.check import DEFAULT_CHECK_REPORT_TIMEOUT_S, CheckReport, CheckSetup, check_setup, judge
from hpsearch.experiment.layout import CHECK_FILE, TRAIN_RUNS_DIR, is_experiment
from hpsearch.formatting import plural
from hpsearch.runtime.search import budget, tuner
from hpsearch.spec import Spec, load_spec

__all__ = ["CpuSampler", "CutAfterReports", "check", "failed_lines"]


class CutAfterReports(Stopper):
    """The check's cut: the first run is interrupted after ``reports`` reports, the restored run's trial
    is stopped at its first report."""

    def __init__(self, reports: int) -> None:
        self.reports = reports
        self.seen = 0
        self.restored = False
        self.cut = False

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Tuner.restore brings the stopper back with Tune's state: this is the restored run.
        self.__dict__.update(state)
        self.restored, self.seen = True, 0

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self.seen += 1
        if self.restored:
            return True  # Tune ends the trial, as a scheduler does: its end measures the teardown
        if self.seen >= self.reports and not self.cut:
            self.cut = True
            if not budget.interrupt_tune():  # not in the main thread: the search cannot be cut and resumed
                raise RuntimeError("hpsearch check runs in a process's main thread (it cuts the search as Ctrl-C does)")
        return False

    def stop_all(self) -> bool:
        return False


class CpuSampler:
    """This machine's busy CPU-seconds, sampled every ``every_s`` in a thread while in use (``with``): what
    the check's trial keeps busy, for the estimate of several trials sharing a machine."""

    def __init__(self, every_s: float = 0.25) -> None:
        self.every_s = every_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hpsearch-cpu-sampler", daemon=True)

    @staticmethod
    def busy_s() -> float:
        times = psutil.cpu_times()
        idle = times.idle + getattr(times, "iowait", 0.0) + getattr(times, "steal", 0.0)  # lazy: Linux-only fields
        return float(sum(times) - idle - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0))

    def _sample(self) -> None:
        self.samples.append((time.time(), self.busy_s()))

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._sample()

    def __enter__(self) -> CpuSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def _fresh(folder: Path) -> None:
    """Empty the check's folder from an earlier check; refuse a folder that is something else."""
    if not folder.exists():
        return
    ours = (folder / CHECK_FILE).is_file() or is_experiment(folder / "run") or not any(folder.iterdir())
    if not folder.is_dir() or not ours:
        raise ExperimentExistsError(
            f"{folder} exists and is not an hpsearch check folder; move it away (hpsearch check writes only there)"
        )
    shutil.rmtree(folder)


def check(
    spec: Spec | str | Path,
    *,
    reports: int = 2,
    address: str | None = None,
    verbose: bool = False,
    stream: TextIO | None = None,
    overrides: tuple[str, ...] | list[str] = (),
    report_timeout_s: float = DEFAULT_CHECK_REPORT_TIMEOUT_S,
) -> tuple[CheckSetup, CheckReport]:
    """Run the check of a spec: one trial for ``reports`` reports, cut, restored, judged; return the verdicts.

    Everything it writes is in ``<experiment_dir>.check``, emptied first: the two runs' experiment
    (``run/``) and ``hpsearch_check.json`` (the verdicts and the measured times).

    Raises:
        SpecError, PlanError, ClusterError, ExperimentExistsError: before anything is written.
    """
    if not isinstance(spec, Spec):
        spec = load_spec(spec, overrides=overrides)
    setup = check_setup(spec, reports, report_timeout_s=report_timeout_s)
    with messages.to(stream):
        _fresh(setup.folder)
        point = ", ".join(f"{k}={v}" for k, v in setup.point.items()) or "no parameters"
        messages.say(
            f"checking {spec.name}: one trial of {plural(setup.workers, 'worker')} at {point}, cut after "
            f"{plural(reports, 'report')} and restored; everything in {setup.folder}"
        )
        # The machine's busy CPUs are this trial's only when its Ray is this machine's own (embedded).
        with CpuSampler() as sampler:
            tuner._run(
                setup.spec,
                address=address,
                overwrite=False,
                verbose=verbose,
                cluster=None,
                stop=CutAfterReports(reports),
            )
        samples = sampler.samples if address is None else []
        ended = files.read_outcome_records(setup.run_dir)  # a trial that ended (or failed) by itself is not restored
        restored = not ended
        if restored:
            messages.say("restoring the trial from its latest checkpoint, for one report")
            tuner._resume(setup.run_dir, address=address, retry_errored=False, verbose=verbose, overrides=())
        report = judge(setup, progress=_progress(setup), restored_started=restored, cpu_samples=samples)
        files.write_check(
            setup.folder,
            report.as_dict(
                setup,
                spec=str(spec.source) if spec.source else spec.name,
                measured_at=time.time(),
                ray=ray.__version__,
                host=socket.gethostname(),
                cpus=os.cpu_count(),
                address=address,
            ),
        )
    return setup, report


def _progress(setup: CheckSetup) -> list[Any]:
    trials = sorted(files.read_usage(setup.run_dir).trials)
    if not trials:
        return []
    return list(files.read_rank_progress(setup.run_dir / TRAIN_RUNS_DIR / trials[0]))


def failed_lines(report: CheckReport) -> list[str]:
    """The lines under the verdicts: the trial's error, when it had one."""
    return [f"  the trial's error: {report.error}"] if report.error else []
