"""Every rank's log in the trial's folder: ``train/<trial_id>/logs/attempt-<N>/rank-<R>.log``.

First, no Ray: the copy of file descriptors 1 and 2 (:class:`hpsearch.runtime.rank_watch.Tee`) in a
process of its own, and ``hpsearch report``'s links to the logs of a fake experiment. Then one small
search (marked ``ray``; the embedded Ray runs with ``log_to_driver=False``, as every search does):
three 2-worker trials of tests/data/rank_loops.py with ``failure.worker_retries: 1`` and no report
timeout. One prints and reports twice on both ranks; in one, rank 1 raises at its second epoch in
every run (two attempts, then the trial errors, its line naming rank 1 and its log); in one, rank 1
returns before its last report while rank 0 waits at it, which fails the trial at once, named.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402 - after matplotlib.use("Agg")
from fake_experiment import standard_trials, write_experiment  # noqa: E402 - after matplotlib.use("Agg")
from leftovers import placement_groups_left  # noqa: E402 - after matplotlib.use("Agg")

from hpsearch.analysis import load_results  # noqa: E402 - after matplotlib.use("Agg")
from hpsearch.experiment import files  # noqa: E402 - after matplotlib.use("Agg")
from hpsearch.experiment.worker_ranks import AttemptProgress  # noqa: E402 - after matplotlib.use("Agg")
from hpsearch.results.report import trial_logs, write_report  # noqa: E402 - after matplotlib.use("Agg")

LOOPS = Path(__file__).resolve().parents[2] / "data" / "rank_loops.py"

TEE_SCRIPT = """
import os, subprocess, sys
from pathlib import Path
from hpsearch.runtime.rank_watch import Tee

tee = Tee(Path(sys.argv[1]), "header\\n")
print("from python's print")
os.write(1, b":actor_name:RayTrainWorker\\n")  # Ray's marker line, for its log monitor: not the loop's
os.write(2, b"from fd 2, as C code writes\\n")
print("twice, as Ray Train's print writes it"); print("twice, as Ray Train's print writes it", file=sys.stderr)
subprocess.run(["sh", "-c", "echo from a child process"], check=True)
sys.stdout.write("a last line without its newline")
tee.close("tail\\n")
print("after the close")
"""


def test_the_tee_keeps_fds_1_and_2_in_the_file_and_passes_all_of_it_on(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    done = subprocess.run(
        [sys.executable, "-c", TEE_SCRIPT, str(log)], capture_output=True, text=True, timeout=60, check=True
    )
    kept = log.read_text(encoding="utf-8").splitlines()
    assert kept[0] == "header" and kept[-1] == "tail"
    # fds 1 and 2 are each read by a thread of their own: lines of the two may come in either order
    assert sorted(kept[1:-1]) == sorted(
        [
            "from python's print",
            "from fd 2, as C code writes",
            "twice, as Ray Train's print writes it",  # once: the same line on both descriptors at once
            "from a child process",
            "a last line without its newline",
        ]
    )
    # where the descriptors went before (Ray's worker-*.out/.err, its log streaming, --verbose) gets everything
    assert done.stdout == (
        "from python's print\n:actor_name:RayTrainWorker\ntwice, as Ray Train's print writes it\n"
        "from a child process\na last line without its newlineafter the close\n"
    )
    assert done.stderr == "from fd 2, as C code writes\ntwice, as Ray Train's print writes it\n"


def test_the_report_links_each_trials_latest_attempt_relative_to_where_it_is_written(tmp_path: Path) -> None:
    trials = standard_trials()
    errored = "aaaa0004"  # standard_trials' errored trial
    [bad] = [t for t in trials if t.trial_id == errored]
    bad.error = "ValueError: boom (rank 1; its log: <its path>)"  # the line hpsearch writes for it
    exp = write_experiment(tmp_path / "fake", trials)
    trial = files.run_dir(exp, errored)
    for group in ("g1", "g2"):  # two starts of its workers: the report shows the latest
        _, folder = files.claim_attempt(trial, group_id=group, world_size=2)
        for rank in (0, 1):
            files.write_rank_progress(folder, rank, {"reports": 1, "ended": "raised" if rank == 1 else None})
            files.rank_log(folder, rank).write_text(f"rank {rank}\n", encoding="utf-8")
    files.controller_log(trial).write_text("controller\n", encoding="utf-8")
    logs = trial_logs(load_results(exp))
    assert list(logs) == [errored]
    assert logs[errored].attempt == 2 and logs[errored].attempts == 2
    page = write_report(exp).read_text(encoding="utf-8")
    assert f"<a href='train/{errored}/logs/attempt-2/rank-1.log'>the log of rank 1</a>" in page  # in the errors
    assert f"<a href='train/{errored}/logs/attempt-2/rank-0.log'>rank 0</a>" in page  # in the logs table
    assert f"<a href='train/{errored}/logs/controller.log'>controller</a>" in page
    elsewhere = write_report(exp, tmp_path / "out" / "report.md", fmt="md").read_text(encoding="utf-8")
    assert f"[the log of rank 1](<../fake/train/{errored}/logs/attempt-2/rank-1.log>)" in elsewhere
    assert f"- `{errored}` (attempt 2 of 2): [attempt-2/](<../fake/train/{errored}/logs/attempt-2/>):" in elsewhere


# ----------------------------------------------------------------------------- one search, with Ray


@pytest.fixture(scope="module")
def search(_ray_session, tmp_path_factory) -> Any:
    """Three 2-worker trials, two at once; what hpsearch printed. Run once for the module."""
    import hpsearch
    from hpsearch import messages

    before = set(_ray_session.util.placement_group_table())
    tmp_path = tmp_path_factory.mktemp("rank-logs")
    spec = {
        "name": "rank-logs",
        "trainable": f"{LOOPS}:train_loop",
        "metric": "loss",
        "mode": "min",
        "search_space": {"case": {"type": "grid", "values": ["prints", "fails", "skips_last"]}, "reports": 2},
        "scaling": {"num_workers": 2, "resources_per_worker": {"CPU": 0.45}},
        "resources": {"driver_cpus": 0.1},
        "failure": {"worker_retries": 1},
        "storage_path": str(tmp_path),
    }
    said = io.StringIO()
    started = time.monotonic()
    with messages.to(said):
        hpsearch.run(spec)
    print(f"rank-logs search: {time.monotonic() - started:.1f} s")
    exp = tmp_path / "rank-logs"
    trials = hpsearch.load_results(exp).trials.set_index("case")
    yield {"exp": exp, "trials": trials, "said": said.getvalue()}
    left = placement_groups_left(_ray_session, before)
    assert not left, f"placement groups left behind by the rank-logs search: {left}"


def _attempts(search: dict[str, Any], case: str) -> list[AttemptProgress]:
    trial_id = str(search["trials"].loc[case, "trial_id"])
    return files.read_rank_progress(files.run_dir(search["exp"], trial_id))


@pytest.mark.ray
@pytest.mark.timeout(300)  # the first Ray test runs the search (the fixture)
def test_both_ranks_of_a_trial_keep_their_own_output(search) -> None:
    assert search["trials"].loc["prints", "status"] == "finished", search["trials"].loc["prints", "error"]
    [attempt] = _attempts(search, "prints")
    assert attempt.attempt == 1 and attempt.world_size == 2
    for rank in (0, 1):
        log = (attempt.folder / f"rank-{rank}.log").read_text(encoding="utf-8")
        for epoch in (1, 2):
            # Python's print: once, though Ray Train writes it to stdout and, through its logger, to stderr
            assert log.count(f"loop says: rank {rank} epoch {epoch}\n") == 1
            assert f"fd 2 says: rank {rank} epoch {epoch}\n" in log  # straight to the file descriptor
        assert f"rank {1 - rank} epoch" not in log
        assert f"rank {rank}'s loop returned after 2 reports" in log
        record = json.loads((attempt.folder / f"rank-{rank}.json").read_text(encoding="utf-8"))
        assert (record["reports"], record["ended"], record["in_report"]) == (2, "returned", False)
    controller = files.controller_log(attempt.folder.parent.parent).read_text(encoding="utf-8")
    assert controller.startswith("===== hpsearch: the Train controller of trial ")


@pytest.mark.ray
def test_a_retried_trial_keeps_each_attempt_and_its_error_names_the_rank_and_its_log(search) -> None:
    trials = search["trials"]
    assert trials.loc["fails", "status"] == "errored"
    first, second = _attempts(search, "fails")  # the first run and Ray Train's restart of its workers
    assert (first.attempt, second.attempt) == (1, 2) and first.group_id != second.group_id
    failed = (first.folder / "rank-1.log").read_text(encoding="utf-8")
    assert "loop says: rank 1 epoch 2" in failed
    assert "Traceback (most recent call last):" in failed and "ValueError: rank 1 fails at epoch 2" in failed
    assert first.rank(1).ended == "raised" and first.rank(1).error == "ValueError: rank 1 fails at epoch 2"
    log = second.folder / "rank-1.log"
    recorded = files.read_outcome_records(search["exp"])[str(trials.loc["fails", "trial_id"])]
    assert recorded["error"] == f"ValueError: rank 1 fails at epoch 2 (rank 1; its log: {log})"
    assert (
        f"ERROR    {trials.loc['fails', 'trial_id']}  ValueError: rank 1 fails at epoch 2 (rank 1; its log: {log})"
        in (search["said"])
    )


@pytest.mark.ray
def test_a_rank_that_skips_its_last_report_fails_the_trial_at_once_named(search) -> None:
    trials = search["trials"]
    [attempt] = _attempts(search, "skips_last")
    recorded = files.read_outcome_records(search["exp"])[str(trials.loc["skips_last", "trial_id"])]
    assert recorded["error"] == (
        "unequal reports: rank 1 ended its loop after 1 report while rank 0 waits at report 2; every rank must "
        f"call ray.train.report the same number of times (it is a barrier) (logs: {attempt.folder}/)"
    )
    assert trials.loc["skips_last", "status"] == "errored"
    ended = recorded["ended_at"]
    returned = attempt.rank(1).ended_at
    print(f"the unequal-reports trial ended {ended - returned:.1f} s after rank 1 returned")
    assert ended - returned < 15  # no timeout is set: without the check it would hang for ever
    assert "removed placement group" not in search["said"]  # its workers' group went with it, not by the sweep


@pytest.mark.ray
def test_the_report_links_the_searchs_logs(search) -> None:
    page = write_report(search["exp"]).read_text(encoding="utf-8")
    trial_id = search["trials"].loc["fails", "trial_id"]
    assert f"<a href='train/{trial_id}/logs/attempt-2/rank-1.log'>rank 1</a>" in page  # its latest attempt's logs
    assert f"<a href='train/{trial_id}/logs/controller.log'>controller</a>" in page
