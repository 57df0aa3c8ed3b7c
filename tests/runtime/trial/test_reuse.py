"""A trial driver's actor reused for the next trial (runtime/trial/reuse.py).

The pure part drives :func:`hpsearch.runtime.trial.reuse.end_nested_run` with a stand-in for Tune's
function-trainable session (a thread blocked the ways a stopped trial's driver thread is),
and checks the state a trial could leave behind. The Ray part runs an Optuna + ASHA search with
reuse on, where trials are stopped mid-run and the next trials run in their actors (one search for
what were the tier's ASHA-with-reuse search and the integration tests' Optuna + ASHA search).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import queue
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
import yaml

from hpsearch.experiment import files
from hpsearch.experiment.layout import HISTORY_FILE, TRAIN_RUNS_DIR
from hpsearch.runtime.internals import DriverSession
from hpsearch.runtime.trial import reuse

LOOPS = Path(__file__).resolve().parents[2] / "loops.py"


# ----------------------------------------------------------------------------- pure


class _Session:
    """The attributes of Ray's ``_TrainSession`` that end_nested_run uses, with a runner thread."""

    def __init__(self, target) -> None:
        self.result_queue: queue.Queue = queue.Queue(1)
        self.error_queue: queue.Queue = queue.Queue(1)
        self._inter_actor_queue = None
        self.stop_event = threading.Event()
        self.continue_lock = threading.Semaphore(0)

        def run() -> None:
            try:
                target(self)
            except SystemExit:  # as Ray's RunnerThread: a clean end
                pass

        self.training_thread = threading.Thread(target=run, daemon=True)
        self.training_started = True
        self.training_thread.start()


def _report_after_full_queue(session: _Session) -> None:
    """What Tune's wrapper does when the driver function returns: put its last result, wait to go on."""
    session.result_queue.put({"stale": True})  # a result of the stopped trial nobody took
    session.result_queue.put({"__duplicate__": True})  # blocks until drained
    session.continue_lock.acquire()
    if session.stop_event.is_set():
        sys.exit(0)


def test_a_driver_thread_blocked_on_its_last_report_ends(tmp_path, monkeypatch):
    monkeypatch.setattr(reuse._STATE, "run_folder", str(tmp_path / "t1"))
    session = _Session(_report_after_full_queue)
    started = time.monotonic()
    assert reuse.end_nested_run(DriverSession(session), timeout_s=5.0)
    assert not session.training_thread.is_alive()
    assert time.monotonic() - started < 2.0


def test_a_thread_that_does_not_end_is_reported_within_the_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(reuse._STATE, "run_folder", str(tmp_path / "t1"))
    release = threading.Event()
    session = _Session(lambda s: release.wait(30))  # user code in the driver, deaf to every signal
    started = time.monotonic()
    assert not reuse.end_nested_run(DriverSession(session), timeout_s=0.5)
    assert 0.5 <= time.monotonic() - started < 2.0
    release.set()


def test_a_finished_run_is_gone_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(reuse._STATE, "run_folder", str(tmp_path / "t1"))
    session = _Session(lambda s: None)
    session.training_thread.join()
    files.write_worker_group(tmp_path / "t1", group_id="00" * 18, run_name="t1")  # never looked up
    assert reuse.end_nested_run(DriverSession(session), timeout_s=5.0)


def test_a_stale_driver_leaves_quietly():
    generation = reuse.begin_run("/nowhere")
    reuse.claim(generation)  # still the actor's trial: goes on
    reuse._STATE.generation += 1  # the actor was handed the next trial
    with pytest.raises(SystemExit) as leaving:
        reuse.claim(generation)
    assert leaving.value.code == 0  # Tune's runner thread takes SystemExit(0) as a clean end


def test_environment_and_logging_are_put_back(monkeypatch):
    monkeypatch.setattr(reuse._STATE, "environ", None)
    monkeypatch.setenv("HPSEARCH_TEST_KEPT", "before")
    logger = logging.getLogger("hpsearch.test.reuse")
    logger.setLevel(logging.INFO)
    reuse._snapshot()
    os.environ["HPSEARCH_TEST_ADDED"] = "by a trial"
    os.environ["HPSEARCH_TEST_KEPT"] = "changed by a trial"
    logger.setLevel(logging.DEBUG)
    handler = logging.StreamHandler()
    logging.root.addHandler(handler)
    try:
        reuse._restore()
        assert "HPSEARCH_TEST_ADDED" not in os.environ
        assert os.environ["HPSEARCH_TEST_KEPT"] == "before"
        assert logger.level == logging.INFO
        assert handler not in logging.root.handlers
    finally:
        logging.root.removeHandler(handler)
        reuse._STATE.environ = None


def test_a_changed_user_module_is_reloaded_and_its_function_used(tmp_path, monkeypatch):
    source = tmp_path / "reuse_user_loop.py"
    source.write_text("def loop(config):\n    return 'old'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(reuse._STATE, "modules", {})
    module = importlib.import_module("reuse_user_loop")
    try:
        loop = module.loop
        assert reuse.current(loop) is loop  # unchanged: the same function, now watched
        source.write_text("def loop(config):\n    return 'new'\n")
        stat = source.stat()
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a later mtime, whatever the clock
        said: list[str] = []
        reuse._reload_changed(said.append)
        assert said == []
        assert reuse.current(loop)({}) == "new"
        reuse._reload_changed(said.append)  # not changed again: not reloaded again
        assert reuse.current(loop) is sys.modules["reuse_user_loop"].loop
    finally:
        sys.modules.pop("reuse_user_loop", None)


def test_functions_outside_user_modules_are_not_watched(monkeypatch):
    monkeypatch.setattr(reuse._STATE, "modules", {})
    assert reuse.current(json.dumps) is json.dumps
    assert reuse.current(reuse.claim) is reuse.claim

    def local(config):
        return config

    assert reuse.current(local) is local  # not a module attribute
    assert not {"json", "hpsearch.runtime.trial.reuse"} & set(reuse._STATE.modules)


# ----------------------------------------------------------------------------- on Ray


def _trials_by_actor(exp_dir: Path) -> dict[int, list[dict]]:
    """Tune's result rows per trial, grouped by the trial actor's PID, in the order the trials started."""
    by_pid: dict[int, list[dict]] = {}
    for result in exp_dir.glob("*/result.json"):
        rows = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        if rows:
            by_pid.setdefault(rows[0]["pid"], []).append(
                {"trial_id": rows[0]["trial_id"], "start": rows[0]["timestamp"] - rows[0]["time_total_s"], "rows": rows}
            )
    for trials in by_pid.values():
        trials.sort(key=lambda t: t["start"])
    return by_pid


@pytest.mark.ray
@pytest.mark.tier
@pytest.mark.timeout(600)
def test_optuna_asha_with_reused_actors_stops_trials_early_runs_the_next_and_leaves_nothing(
    ray_cluster, tmp_path, capsys
):
    from leftovers import train_leftovers
    from ray.util.state import list_actors

    from hpsearch.cli import main
    from hpsearch.runtime.ray_workarounds import workarounds_enabled

    spec = tmp_path / "reuse.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "reuse",
                "trainable": f"{LOOPS}:quadratic",
                "metric": "loss",
                "mode": "min",
                "num_samples": 6,
                # 9 epochs of 0.3 s: a run ASHA stops at epoch 1 or 3 would go on for seconds
                "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}, "epochs": 9, "sleep_s": 0.3},
                "searcher": {"type": "optuna", "seed": 1, "n_startup_trials": 2},
                "scheduler": {"type": "asha", "max_t": 9, "grace_period": 1, "reduction_factor": 3},
                "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.5}},
                "resources": {"driver_cpus": 0.1, "max_concurrent_trials": 2},
                "storage_path": str(tmp_path / "results"),
            }
        )
    )
    assert main(["run", str(spec)]) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    exp_dir = tmp_path / "results" / "reuse"
    summary = json.loads((exp_dir / "hpsearch_summary.json").read_text())
    assert summary["counts"]["errored"] == 0, err
    assert summary["counts"]["stopped"] >= 1, summary["counts"]
    assert "stopped early by the scheduler" in err
    assert all(t["iterations"] < 9 for t in summary["trials"] if t["status"] == "stopped")
    status = {t["trial_id"]: t["status"] for t in summary["trials"]}

    by_actor = _trials_by_actor(exp_dir)
    assert sum(len(t) for t in by_actor.values()) == 6
    reused = [trials for trials in by_actor.values() if len(trials) > 1]
    if workarounds_enabled():
        assert reused, f"no actor ran two trials: {by_actor.keys()}"
    else:  # HPSEARCH_RAY_WORKAROUNDS=0 turns reuse off (runtime/search/tuner.py): every trial in its own actor
        assert reused == [], f"an actor ran two trials with reuse off: {reused}"
    after_stop = 0
    for trials in by_actor.values():
        for before, after in zip(trials, trials[1:]):
            # the next trial in an actor reports its own epochs from 1, in order, and ends as ASHA decided
            epochs = [row["epoch"] for row in after["rows"]]
            assert epochs == list(range(1, len(epochs) + 1)), (after["trial_id"], epochs)
            assert status[after["trial_id"]] in ("finished", "stopped")
            if status[after["trial_id"]] == "finished":
                assert epochs[-1] == 9
            after_stop += status[before["trial_id"]] == "stopped"
    if workarounds_enabled():
        assert after_stop >= 1, "no trial ran in the actor of a trial ASHA stopped"
    for trial_id, trial_status in status.items():
        if trial_status != "stopped":
            continue
        # the stopped run was ended, not left training: at most the report in flight at the stop was added
        told = len(next(t for ts in by_actor.values() for t in ts if t["trial_id"] == trial_id)["rows"])
        history = files.read_json_lines(exp_dir / TRAIN_RUNS_DIR / trial_id / HISTORY_FILE)
        assert len(history) <= told + 1, (trial_id, told, len(history))
    deadline = time.monotonic() + 20
    while True:
        controllers = [a for a in list_actors(filters=[("state", "=", "ALIVE")]) if a.class_name == "TrainController"]
        if not controllers or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    groups, actors = train_leftovers(ray_cluster)
    if workarounds_enabled():
        assert controllers == []
        assert groups == [], f"placement groups left behind: {groups}"
        assert actors == [], f"actors left behind: {actors}"
    elif controllers or groups or actors:  # HPSEARCH_RAY_WORKAROUNDS=0 leaves Ray's bug 1 (ray_workarounds.py)
        warnings.warn(
            f"HPSEARCH_RAY_WORKAROUNDS=0, Ray's bug 1: controllers still running: {controllers}, "
            f"placement groups left: {groups}, actors left: {actors}",
            stacklevel=1,
        )
    # the ray_cluster fixture also fails the test if a placement group is left behind
