"""A node that leaves or joins mid-search is said at once, and names itself in the errors of the trials it hit.

The watch and the outcome recorder are driven by hand, as Tune calls them, with the cluster's
nodes faked and each trial's worker record written by the project's own writer; no Ray starts.
"""

from __future__ import annotations

import pickle
from pathlib import Path

from fake_tune import FakeTrial, TuneEvents

from hpsearch.experiment import files
from hpsearch.experiment.files import read_outcome_records
from hpsearch.runtime.nodes.node_watch import NodeState, NodeWatch
from hpsearch.runtime.search.outcomes import OutcomeRecorder

HEAD = NodeState("n1", "10.213.0.11", "h1", alive=True)
H2 = NodeState("n2", "10.213.0.12", "h2", alive=True)
H3 = NodeState("n3", "10.213.0.13", "h3", alive=True)
HINT = "Ray Train starts them again where there is room"


class Cluster:
    """The nodes Ray lists, changed by the test; a dead node stays listed, as in ``ray.nodes()``."""

    def __init__(self, *nodes: NodeState) -> None:
        self.nodes = list(nodes)

    def __call__(self) -> list[NodeState]:
        return list(self.nodes)

    def kill(self, node: NodeState) -> None:
        self.nodes = [NodeState(n.node_id, n.ip, n.hostname, alive=False) if n == node else n for n in self.nodes]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Search(TuneEvents):
    def __init__(self, exp_dir: Path, cluster: Cluster) -> None:
        self.clock = Clock()
        self.watch = NodeWatch(exp_dir / "train", HINT, nodes=cluster, every_s=2.0, clock=self.clock)
        self.recorder = OutcomeRecorder(exp_dir, error_note=self.watch.note_for)
        self.callbacks = [self.recorder, self.watch]
        self.watch.setup()

    def step(self, trials: list[FakeTrial], at: float) -> None:
        self.clock.now = at
        self.watch.on_step_begin(0, trials)


def _workers_on(exp_dir: Path, trial_id: str, *nodes: NodeState) -> None:
    files.write_worker_group(exp_dir / "train" / trial_id, group_id="ab" * 9, run_name=trial_id,
                             node_ids=[n.node_id for n in nodes])  # fmt: skip


def test_a_node_that_leaves_is_said_with_the_trials_whose_workers_it_held(tmp_path: Path, said) -> None:
    cluster = Cluster(HEAD, H2, H3)
    search = Search(tmp_path, cluster)
    a, b, c = FakeTrial("t_a"), FakeTrial("t_b"), FakeTrial("t_c")
    _workers_on(tmp_path, "t_a", H2)
    _workers_on(tmp_path, "t_b", H2, H3)  # a trial spanning two hosts
    _workers_on(tmp_path, "t_c", H3)
    c.status = "TERMINATED"  # ended before: not hit
    search.step([a, b, c], at=1.0)
    cluster.kill(H3)
    search.step([a, b, c], at=1.5)  # within every_s of the last look (at 0): not looked yet
    assert "left" not in said.getvalue()
    search.step([a, b, c], at=37.5)
    lines = said.getvalue().splitlines()
    assert lines == [f"[00:37] node     h3 (10.213.0.13) left the cluster; trial t_b had workers there: {HINT}"]
    assert set(search.watch.lost) == {"t_b"}


def test_a_trial_that_errors_after_losing_its_host_names_it_in_its_error_line(tmp_path: Path, said) -> None:
    cluster = Cluster(HEAD, H2, H3)
    search = Search(tmp_path, cluster)
    hit, spared = FakeTrial("t_hit", local_path=str(tmp_path / "t_hit")), FakeTrial("t_ok", local_path=str(tmp_path))
    _workers_on(tmp_path, "t_hit", H3)
    _workers_on(tmp_path, "t_ok", H2)
    cluster.kill(H3)
    search.step([hit, spared], at=37.0)
    hit.error = "ray.train.ControllerError: The worker group startup timed out after 10.0 seconds"
    spared.error = "ValueError: x is bad"
    search.clock.now = 65.0
    search.error(hit)
    search.error(spared)
    errors = {trial_id: r["error"] for trial_id, r in read_outcome_records(tmp_path).items()}
    assert errors["t_hit"] == (
        "its workers' host h3 (10.213.0.13) left the cluster at [00:37] and it did not come back; "
        "ray.train.ControllerError: The worker group startup timed out after 10.0 seconds"
    )
    assert errors["t_ok"] == "ValueError: x is bad"  # a host lost elsewhere is not its reason


def test_a_host_that_comes_back_joins_and_an_error_after_says_it_came_back(tmp_path: Path, said) -> None:
    cluster = Cluster(HEAD, H2)
    search = Search(tmp_path, cluster)
    trial = FakeTrial("t_a", local_path=str(tmp_path / "t_a"))
    _workers_on(tmp_path, "t_a", H2)
    cluster.kill(H2)
    search.step([trial], at=10.0)
    cluster.nodes.append(NodeState("n2-again", H2.ip, "h2", alive=True))  # `ray start` again: a new node id
    search.step([trial], at=20.0)
    assert said.getvalue().splitlines()[-1] == "[00:20] node     h2 (10.213.0.12) joined the cluster"
    trial.error = "RuntimeError: boom"
    search.error(trial)
    [record] = read_outcome_records(tmp_path).values()
    assert record["error"].startswith("its workers' host h2 (10.213.0.12) left the cluster at [00:10] and it came back")


def test_no_running_trial_on_the_lost_node_says_so_and_an_unreadable_cluster_is_no_error(tmp_path: Path, said) -> None:
    cluster = Cluster(HEAD, H2)
    search = Search(tmp_path, cluster)
    cluster.kill(H2)
    search.step([FakeTrial("t_a")], at=5.0)  # its loop never started: no worker record
    assert said.getvalue().splitlines() == [
        "[00:05] node     h2 (10.213.0.12) left the cluster; no running trial had workers there"
    ]

    def unreachable() -> list[NodeState]:
        raise ConnectionError("GCS unreachable")

    search.watch._nodes = unreachable
    search.step([], at=10.0)  # nothing said, nothing raised


def test_a_resumed_watch_looks_at_the_new_cluster_afresh(tmp_path: Path, said) -> None:
    cluster = Cluster(HEAD, H2)
    search = Search(tmp_path, cluster)
    restored = pickle.loads(pickle.dumps(search.watch))
    restored._nodes = Cluster(HEAD)  # the resume runs on a cluster without h2
    restored.on_step_begin(0, [])
    assert said.getvalue() == ""  # h2's absence is not a loss seen during this run


def test_a_drained_node_that_leaves_says_its_trial_restarts_as_a_preemption(tmp_path: Path, said) -> None:
    """The loop of t_a read that h2 was being drained (its attempt's notice): its loss is a preemption, not a
    failure; t_b, on h2 too, read nothing (its loop never reported since) and gets the failure's words."""
    cluster = Cluster(HEAD, H2)
    exp = tmp_path
    clock = Clock()
    search = NodeWatch(exp / "train", HINT, drained_hint="a preemption", nodes=cluster, every_s=2.0, clock=clock)
    search.setup()
    a, b = FakeTrial("t_a"), FakeTrial("t_b")
    _workers_on(exp, "t_a", HEAD, H2)
    _workers_on(exp, "t_b", H2)
    attempt = exp / "train" / "t_a" / "logs" / "attempt-1"
    attempt.mkdir(parents=True)
    node = {"node_id": H2.node_id, "host": "h2", "ranks": [1]}
    files.append_notice(attempt, deadline=None, nodes=[node], epoch=1, report=3, saved_epoch=1, forced=True)
    search.on_step_begin(0, [a, b])
    cluster.kill(H2)
    clock.now = 30.0
    search.on_step_begin(0, [a, b])
    assert said.getvalue().splitlines() == [
        f"[00:30] node     h2 (10.213.0.12) left the cluster; trial t_a had workers there: a preemption; "
        f"trial t_b had workers there: {HINT}"
    ]
