"""A quiet terminal: Ray's own log lines stay in Ray's session folder unless ``--verbose``.

The searches run as ``python -m hpsearch`` subprocesses with stdout and stderr captured
together, at the file descriptors: what Ray's processes print arrives there, not through
``sys.stdout``, so the tests see what a user sees. Only times, trial ids and paths are
normalised; every other line is asserted exactly.
"""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpsearch.experiment.files import read_ray_logs
from hpsearch.experiment.layout import OUTCOMES_FILE, SUMMARY_FILE
from hpsearch.runtime.nodes import ray_logs

LOOPS = Path(__file__).resolve().parents[1] / "loops.py"
RAYS_OWN = ("Traceback", "(raylet)", "WARNING", "ERROR tune", "View detailed results", "tensorboard", "Token auth")

# --------------------------------------------------------------------------- ray_logs, without Ray


@pytest.fixture
def terminal(monkeypatch):
    """What Ray's own handler on the ``ray`` logger writes (it keeps the stderr it found when ``ray`` was
    imported), with ray_logs as a new process has it; afterwards everything is as it was (the session's
    Ray of the other tests keeps its driver log)."""
    import ray._private.worker as ray_worker

    monkeypatch.setattr(ray_logs, "_state", {"buffer": None, "file": None, "verbose": False})
    monkeypatch.setattr(ray_worker, "_worker_logs_enabled", ray_worker._worker_logs_enabled)
    screen = io.StringIO()
    for handler in logging.getLogger("ray").handlers:
        if type(handler).__name__ == "PlainRayHandler":
            monkeypatch.setattr(handler, "stream", screen)
            monkeypatch.setattr(handler, "filters", [])
    yield screen
    ray_logs._drop_handlers()  # this test's; monkeypatch then gives the rest back


def test_without_verbose_rays_records_go_to_the_driver_log_only(terminal, tmp_path, monkeypatch):
    import ray._private.worker as ray_worker

    monkeypatch.setattr(ray_logs, "_logs_dir", lambda: str(tmp_path / "session" / "logs"))
    tune_logger = logging.getLogger("ray.tune.execution.tune_controller")

    ray_logs.before_init(verbose=False)
    logging.getLogger("ray._private.authentication.authentication_token_setup").warning("inside ray.init")
    ray_logs.after_init()
    tune_logger.error("Trial task failed for trial t1\nTraceback (most recent call last): ...")

    assert terminal.getvalue() == ""
    assert ray_worker._worker_logs_enabled is False  # the error messages Ray publishes to drivers: not printed
    logs = ray_logs.describe()
    assert logs.logs_dir == str(tmp_path / "session" / "logs")
    assert logs.driver_log is not None and Path(logs.driver_log).parent == tmp_path / "session" / "logs"
    kept = Path(logs.driver_log).read_text(encoding="utf-8").splitlines()
    assert [re.sub(r"^\S+ \S+\t| \S+\.py:\d+", "", line) for line in kept[:2]] == [
        "WARNING ray._private.authentication.authentication_token_setup -- inside ray.init",
        "ERROR ray.tune.execution.tune_controller -- Trial task failed for trial t1",
    ]  # the record held while ray.init ran comes first, and the traceback after it


def test_with_verbose_rays_records_reach_the_terminal_too(terminal, tmp_path, monkeypatch):
    import ray._private.worker as ray_worker

    monkeypatch.setattr(ray_logs, "_logs_dir", lambda: str(tmp_path))
    ray_logs.before_init(verbose=False)
    ray_logs.after_init()
    ray_logs.before_init(verbose=True)  # a later connect, after ray.shutdown: verbose this time
    ray_logs.after_init()
    logging.getLogger("ray.tune.tune").error("Trials did not complete: [t1]")

    assert terminal.getvalue().endswith(" -- Trials did not complete: [t1]\n")
    assert ray_worker._worker_logs_enabled is True
    assert "Trials did not complete: [t1]" in Path(ray_logs.describe().driver_log or "").read_text(encoding="utf-8")


def test_a_failed_connect_gives_rays_terminal_back(terminal):
    ray_logs.before_init(verbose=False)
    ray_logs.abandon()  # ray.init raised: the user should see what Ray says from now on
    logging.getLogger("ray").warning("after the failed connect")
    assert terminal.getvalue().endswith(" -- after the failed connect\n")
    assert ray_logs.describe().driver_log is None


# --------------------------------------------------------------------------- what a user sees


def _normalise(text: str, exp: Path) -> list[str]:
    """The output with times, trial ids, Ray's session folders and the wall time made fixed."""
    for logs in read_ray_logs(exp):
        text = text.replace(str(logs.logs_dir), "<RAY_LOGS>")
    text = text.replace(str(exp), "<EXP>")
    text = re.sub(r"^\[\d\d:\d\d\] ", "[mm:ss] ", text, flags=re.MULTILINE)
    text = re.sub(r"(?<![0-9a-z])[0-9a-f]{5}_(\d{5})(?!\d)", r"xxxxx_\1", text)  # same width: tables stay aligned
    text = re.sub(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", "<STAMP>", text)
    # the errors table's header is padded to the error's width before the paths in it are shortened here
    text = re.sub(r"^(  trial_id +x +error) +(traceback)$", r"\1  \2", text, flags=re.MULTILINE)
    text = re.sub(r"Wall time: \d+\.\d s", "Wall time: <S> s", text)
    text = re.sub(r"^Resource-hours: [0-9.e-]+ CPU-hours", "Resource-hours: <H> CPU-hours", text, flags=re.MULTILINE)
    return text.splitlines()


def _hpsearch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpsearch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, in the order the user sees it
        text=True,
        timeout=300,
        cwd=cwd,
    )


TRAIN_ERROR = "<EXP>/hpsearch_maybe_raise_xxxxx_00001_1_x=bad_<STAMP>/error.txt"
#: The log of the rank the error came from, in the trial's last attempt (failure.worker_retries: 1 started a second).
RANK_LOG = "<EXP>/train/xxxxx_00001/logs/attempt-2/rank-0.log"
#: The errored trial's line: its error, the rank it came from and that rank's log.
BAD_ERROR = f"ValueError: x='bad' is not a usable value (rank 0; its log: {RANK_LOG})"
CLOSING = [
    "",
    "Best trials by loss (min):",
    "trial_id     status    reports  last epoch  loss (best)  x",
    "xxxxx_00000  finished  2        2           0.5          good",
    "",
    "Errors (1): one line each, the full tracebacks are in the files named",
    "  trial_id     x    error  traceback",
    f"  xxxxx_00001  bad  {BAD_ERROR}  {TRAIN_ERROR}",
    "",
    "Experiment folder: <EXP>",
    "Ray's logs: <RAY_LOGS>",
    "Wall time: <S> s (2 trials: 1 finished, 0 stopped, 1 errored)",
    "Resource-hours: <H> CPU-hours (every trial, from its driver's start to its end)",
]
STATUS = re.compile(
    r"\[mm:ss\] status   [0-2]/2 done \(0 stopped early, [01] errored\), [0-2] running, [0-2] pending"
    r"( \| best loss=0\.5 \(xxxxx_00000\))?"
)


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_a_search_with_a_failing_trial_prints_one_line_for_it_and_none_of_rays(tmp_path):
    """Also: ``trainable: my_train.py:maybe_raise`` resolves against the spec's folder, not the current one,
    and runs on Ray's workers; a relative ``storage_path`` is the current folder's; the errored trial's
    error and traceback are recorded. (One search for what were this test's and the integration tests'
    good-and-bad search.)"""
    project = tmp_path / "project"
    project.mkdir()
    (project / "my_train.py").write_text(LOOPS.read_text())
    spec = {
        "name": "quiet",
        "trainable": "my_train.py:maybe_raise",
        "metric": "loss",
        "mode": "min",
        "search_space": {"x": {"type": "grid", "values": ["good", "bad"]}},
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.45}},
        "resources": {"driver_cpus": 0.1, "max_concurrent_trials": 2},
        "storage_path": "results",
    }
    path = project / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    exp = tmp_path / "results" / "quiet"

    run = _hpsearch("run", str(path), cwd=tmp_path)  # not the spec's folder: the file is found relative to the spec

    assert run.returncode == 0, run.stdout[-3000:]
    lines = _normalise(run.stdout, exp)
    print("\n".join(lines))
    assert lines[:3] == [
        "hpsearch: quiet: 2 trials (random searcher, fifo scheduler), 2 at once; each trial = 1 worker(s) of "
        "{CPU: 0.45} + a driver of {CPU: 0.1}",
        "hpsearch: experiment folder <EXP>",
        "hpsearch: Ray's logs: <RAY_LOGS> (--verbose shows them here)",
    ]
    rest = lines[3:]
    notes = [line for line in rest if line.startswith("hpsearch: note: ")]  # the plan's, for this machine's CPUs
    events = rest[len(notes) : len(rest) - len(CLOSING)]
    assert rest[len(notes) :] == events + CLOSING
    assert sorted(line for line in events if not STATUS.fullmatch(line)) == [  # two trials at once: any order
        f"[mm:ss] ERROR    xxxxx_00001  {BAD_ERROR}  (traceback: {TRAIN_ERROR})",
        "[mm:ss] finished xxxxx_00000  loss=0.5 at epoch 2 (2 reports)",
        "[mm:ss] start    xxxxx_00000  x=good",
        "[mm:ss] start    xxxxx_00001  x=bad",
    ]
    assert not [word for word in RAYS_OWN if word in run.stdout]

    # Nothing is lost: Ray's session folder holds it all, and the experiment folder says where.
    [session] = read_ray_logs(exp)
    logs_dir = Path(session.logs_dir or "")
    assert (logs_dir / "raylet.out").is_file()
    driver_log = Path(session.driver_log or "").read_text(encoding="utf-8")
    assert "Trial task failed for trial hpsearch_maybe_raise_" in driver_log and "Traceback" in driver_log
    [error_txt] = exp.glob("hpsearch_maybe_raise_*_1_x=bad_*/error.txt")
    assert "ValueError: x='bad' is not a usable value" in error_txt.read_text(encoding="utf-8")
    if "worker processes have been started" in (logs_dir / "raylet.out").read_text(encoding="utf-8"):
        print("the raylet warned about its worker processes: kept in raylet.out, not on the terminal")

    # The summary and the outcomes record each trial's end, the errored one with its error and the user's frame.
    summary = json.loads((exp / SUMMARY_FILE).read_text(encoding="utf-8"))
    by_x = {t["config"]["x"]: t for t in summary["trials"]}
    assert by_x["good"]["status"] == "finished"
    assert by_x["bad"]["status"] == "errored"
    assert "ValueError: x='bad' is not a usable value" in by_x["bad"]["error"]
    assert "raise ValueError" in by_x["bad"]["traceback"]  # the user's own frame
    ended = [json.loads(line) for line in (exp / OUTCOMES_FILE).read_text(encoding="utf-8").splitlines()]
    [bad] = [r for r in ended if r["status"] == "errored"]
    assert "ValueError: x='bad' is not a usable value" in bad["error"]

    # A resume (here of a search with nothing left to run) is as quiet, and counts the whole search.
    resumed = _hpsearch("resume", str(exp), cwd=tmp_path)

    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert _normalise(resumed.stdout, exp) == [
        "hpsearch: resuming quiet in <EXP>: 2 trial(s) already ended, 2 at once",
        "hpsearch: Ray's logs: <RAY_LOGS> (--verbose shows them here)",
        "[mm:ss] status   2/2 done (0 stopped early, 1 errored; 2 ended before the resume), 0 running, 0 pending"
        " | best loss=0.5 (xxxxx_00000)",
        *CLOSING,
    ]
    assert not [word for word in RAYS_OWN if word in resumed.stdout]
    first, latest = read_ray_logs(exp)
    assert first == session and latest.logs_dir != session.logs_dir  # a new Ray session, also recorded
