"""hpsearch on a real multi-host Ray cluster: hosts with their own IPs, names, processes and disks.

The hosts are network namespaces on one machine (tests/multihost.py), joined by a private
bridge, each running `ray start` with token authentication. They share one folder, as an NFS
mount would be shared, and each has a node-local scratch folder. Every host's own name
resolves to 127.0.1.1, as Debian's default /etc/hosts has it: the case where every DDP trial
across two hosts used to fail with gloo's "Connection refused, remote=[127.0.0.1]".

The tests share one cluster (its start costs ~25 s), in the order they are written.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from multihost import BIN, Hosts, unavailable

from hpsearch import load_results
from hpsearch.experiment.files import read_outcome_records
from hpsearch.experiment.layout import PLAN_FILE, SUMMARY_FILE

pytestmark = [pytest.mark.ray, pytest.mark.timeout(900)]

DATA = Path(__file__).resolve().parents[1] / "data" / "multihost"
_WHY_NOT = unavailable()


@pytest.fixture(scope="module")
def hosts() -> Iterator[Hosts]:
    if _WHY_NOT:
        pytest.skip(_WHY_NOT)
    with Hosts(["h1", "h2", "h3"], loopback_names=["h1", "h2", "h3"], ray_on=["h1", "h2"]) as cluster:
        yield cluster


def _spec(folder: Path, storage: Path, **changes: Any) -> Path:
    """A search whose every trial needs both hosts: each host has 1 CPU, each of 2 workers 0.9."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "name": "span",
        "trainable": f"{DATA / 'span_loop.py'}:all_reduce_hosts",
        "metric": "loss",
        "mode": "min",
        "num_samples": 2,
        "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}, "epochs": 2},
        "scaling": {"num_workers": 2, "resources_per_worker": {"CPU": 0.9}},
        "resources": {"driver_cpus": 0.1},
        "failure": {"trial_retries": 0},
        "storage_path": str(storage),
        **changes,
    }
    path = folder / "span.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _hpsearch(hosts: Hosts, host: str, *args: str, timeout: float = 600) -> Any:
    return hosts.run(host, [sys.executable, "-m", "hpsearch", *args], timeout=timeout)


def test_trials_spanning_two_hosts_all_reduce_over_the_bridge_and_write_to_the_shared_folder(hosts: Hosts) -> None:
    spec = _spec(hosts.shared / "spec", hosts.shared / "results")
    done = _hpsearch(hosts, "h1", "run", str(spec), "--address", hosts.address)
    assert done.returncode == 0, done.stderr[-4000:]
    exp = hosts.shared / "results" / "span"
    summary = json.loads((exp / SUMMARY_FILE).read_text())
    assert summary["counts"] == {"finished": 2, "stopped": 0, "errored": 0}
    history = load_results(exp).history
    assert len(history) == 4  # 2 trials x 2 epochs
    assert set(history["hosts"]) == {"h1,h2"}  # each trial's two ranks on two hosts
    assert set(history["sum"]) == {3.0}  # 1 + 2, summed over the bridge
    print(done.stdout[-3000:])
    print(done.stderr[-3000:])


def _team_spec(hosts: Hosts, name: str, **changes: Any) -> Path:
    """A search of two 1-worker trials: each host (1 CPU) holds one 0.8-CPU worker, the head also the 0.1-CPU
    drivers, so the cluster holds 2 trials at once, and so does each search's own plan."""
    return _spec(
        hosts.shared / f"{name}-spec",
        hosts.shared / "team-results",
        name=name,
        trainable=f"{DATA / 'span_loop.py'}:one_rank",
        search_space={"x": {"type": "float", "low": 0.0, "high": 1.0}, "epochs": 3, "sleep_s": 4.0},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.8}},
        # A trial whose worker group waited for room another search holds would fail: no retries, and a
        # start timeout well under the 80 s such a wait took before searches shared the cluster.
        failure={"trial_retries": 0, "controller_retries": 0, "worker_start_timeout_s": 45},
        **changes,
    )


def _status(hosts: Hosts, *args: str) -> Any:
    done = _hpsearch(hosts, "h1", "status", "--address", hosts.address, *args, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout) if "json" in args else done.stdout


def test_searches_sharing_the_cluster_take_fair_turns_and_a_higher_priority_one_gets_room_as_trials_end(
    hosts: Hosts,
) -> None:
    """Two searches start at once on the 2-trial cluster; once both are registered, a third joins at priority 2.

    Every search registers with the cluster's register: each gets a share, none starts a trial its
    share cannot place, so no trial waits out its start timeout (45 s) for room another search holds.
    The third waits, says who holds the room, and trains as soon as a trial of the others ends.
    `hpsearch status` lists the three, in text and JSON, and none once they have ended.
    """
    results = hosts.shared / "team-results"
    specs = {name: _team_spec(hosts, name) for name in ("team-a", "team-b")}
    specs["team-c"] = _team_spec(hosts, "team-c")
    runs = {name: hosts.popen("h1", [sys.executable, "-m", "hpsearch", "run", str(specs[name]), "--address",
                                     hosts.address]) for name in ("team-a", "team-b")}  # fmt: skip
    errs: dict[str, str] = {}
    try:
        deadline = time.monotonic() + 300
        # Both registered: the first to register took the room its plan asks for while alone, and the
        # other waits for it to give it back, or each has one.
        while len(_status(hosts, "--format", "json")["searches"]) < 2:
            for run in runs.values():
                assert run.poll() is None, run.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the two searches did not register within 300 s"
            time.sleep(1)
        c_joined = time.time()
        runs["team-c"] = hosts.popen(
            "h1", [sys.executable, "-m", "hpsearch", "run", str(specs["team-c"]), "--address", hosts.address,
                   "--priority", "2"],
        )  # fmt: skip
        while len(listed := _status(hosts, "--format", "json")["searches"]) < 3:
            assert runs["team-c"].poll() is None, runs["team-c"].communicate()[1][-3000:]
            assert time.monotonic() < deadline + 120, f"team-c did not register: {listed}"
            time.sleep(2)
        text = _status(hosts)
        beside = _hpsearch(hosts, "h1", "plan", str(specs["team-a"]), "--address", hosts.address, "--format", "json")
        for name, run in runs.items():
            out, errs[name] = run.communicate(timeout=600)
            assert run.returncode == 0, errs[name][-4000:]
    finally:
        for name, run in runs.items():
            if run.poll() is None:
                run.kill()
            if name not in errs:  # what each said, for a failure's report
                print(f"--- {name}\n{run.communicate()[1][-3000:]}")
    said = "\n".join(f"--- {name}\n{err[-2500:]}" for name, err in errs.items()) + f"\n--- status\n{text}"
    shares = {row["name"]: row for row in listed}
    print(said, json.dumps(listed, indent=1), sep="\n")
    assert shares["team-c"]["priority"] == 2.0 and shares["team-c"]["share"] == 1, listed
    assert sorted(shares[n]["share"] for n in ("team-a", "team-b")) == [0, 1], listed  # priority 2 counts twice
    assert {"user", "host", "folder", "trial_needs", "running", "done", "total", "best"} <= set(shares["team-c"])
    assert shares["team-c"]["folder"] == str(results / "team-c") and shares["team-c"]["total"] == 2, listed
    assert beside.returncode == 0, beside.stderr[-3000:]
    shared = json.loads(beside.stdout)["shared"]  # plan --address: what team-a's spec would get beside the three
    assert shared["alone"] == 2 and len(shared["beside"]) == 3 and 0 <= shared["share"] <= 1, shared
    assert shared["text"].startswith("Beside the 3 searches running (team-"), shared
    for name in specs:
        assert name in text, said
        summary = json.loads((results / name / SUMMARY_FILE).read_text())
        assert summary["counts"] == {"finished": 2, "stopped": 0, "errored": 0}, said
    assert "cannot start" not in said and "cannot be placed" not in said, said  # no trial waited on Ray for room
    assert re.search(
        r"hpsearch: waiting: [12] trials?, the cluster's room is held by search team-[ab] \(", errs["team-c"]
    ), said
    spans = {name: _intervals(results / name) for name in specs}
    every = [span for group in spans.values() for span in group]
    assert _most_at_once(every) <= 2, spans  # never more trials than the cluster holds: none waited for room
    first_c = min(first for first, _ in spans["team-c"])
    others_ended = sorted(last for name in ("team-a", "team-b") for _, last in spans[name])
    # team-c trained once a trial of the others had ended, before they had all ended ...
    assert others_ended[0] < first_c < others_ended[-1], spans
    print(f"team-c joined at {c_joined:.0f}, first trained at {first_c:.0f}; spans {spans}")
    assert _status(hosts, "--format", "json")["searches"] == []  # ... and every search left the register


def _node_ids(hosts: Hosts) -> dict[str, str]:
    """Each alive host's Ray node id, by host name."""
    script = (
        "import json, ray; ray.init(address='auto', logging_level='ERROR'); "
        "print(json.dumps({n['NodeManagerHostname']: n['NodeID'] for n in ray.nodes() if n['Alive']}))"
    )
    done = hosts.run("h1", [sys.executable, "-c", script], timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _wait_mid_epoch(run: Any, progress: Path) -> None:
    """Until the `drained` loop reported step 2 of epoch 1: mid-epoch, no checkpoint yet."""
    deadline = time.monotonic() + 300
    while not (progress / "epoch-1-step-2").exists():
        assert run.poll() is None, run.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no step 2 within 300 s"
        time.sleep(0.2)


def _drain(hosts: Hosts, node_id: str) -> tuple[float, float]:
    """Drain a node as a spot reclaim does, with a 20 s deadline: when it was asked, and when the command returned
    (Ray may act on it, and a loop or a driver read it, before the command returns)."""
    asked_at = time.time()
    drained = hosts.run("h1", [str(BIN / "ray"), "drain-node", "--address", hosts.address, "--node-id", node_id,
                               "--reason", "DRAIN_NODE_REASON_PREEMPTION", "--reason-message", "spot reclaim (test)",
                               "--deadline-remaining-seconds", "20"], timeout=60)  # fmt: skip
    assert drained.returncode == 0, drained.stderr[-2000:]
    return asked_at, time.time()


def test_a_node_drained_with_a_20_s_deadline_loses_only_the_steps_after_the_notice_and_no_retry(
    hosts: Hosts,
) -> None:
    """A DDP trial on h1 and h2 checkpoints only at epoch ends. Mid-epoch, h2 is drained as a spot node is
    (`ray drain-node --reason DRAIN_NODE_REASON_PREEMPTION --deadline-remaining-seconds 20`), h3 joins, and h2
    is killed at the deadline. The trial saves at its first report after the notice, restarts on h1 and h3
    from that checkpoint, with `failure.worker_retries: 0` and `trial_retries: 0`: a preemption spends neither.
    """
    progress = hosts.shared / "drain-progress"
    progress.mkdir()
    steps = 8  # 2 epochs of 8 reports, 2 s apart: 28 s of training left at the drain, 20 s of notice
    spec = _spec(
        hosts.shared / "drain-spec",
        hosts.shared / "drain-results",
        trainable=f"{DATA / 'span_loop.py'}:drained",
        num_samples=1,
        search_space={"epochs": 2, "steps": steps, "step_s": 2.0, "progress_dir": str(progress)},
        failure={"worker_retries": 0, "trial_retries": 0, "worker_start_timeout_s": 120},
    )
    run = hosts.popen("h1", [sys.executable, "-m", "hpsearch", "run", str(spec), "--address", hosts.address])
    try:
        _wait_mid_epoch(run, progress)
        h2 = _node_ids(hosts)["h2"]
        asked_at, drained_at = _drain(hosts, h2)
        hosts.start_ray("h3")  # where the workers go on
        time.sleep(max(0.0, drained_at + 20 - time.time()))
        hosts.kill_host("h2")  # at the deadline, as the cloud takes it
        out, err = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    said = err[-4000:]
    print(said)
    assert run.returncode == 0, said
    assert "register of searches did not answer" not in err, said  # the register lives on the head, not on h2
    exp = hosts.shared / "drain-results" / "span"
    summary = json.loads((exp / SUMMARY_FILE).read_text())
    assert summary["counts"] == {"finished": 1, "stopped": 0, "errored": 0}, said
    results = load_results(exp)
    [row] = results.preemptions.to_dict("records")
    print(row)
    assert row["hosts"] == ("h2",) and row["restarted"], row
    assert row["saved_epoch"] == 1 and row["restored_epoch"] == 1, row  # the notice's checkpoint, mid-epoch 1
    noticed = row["noticed_at"].timestamp()
    assert asked_at <= noticed < drained_at + 20, (asked_at, drained_at, row)  # read, and saved, within the deadline
    # lost: only steps made after the notice, which come every 2 s until the kill at the deadline
    since_notice = math.ceil((drained_at + 20 - noticed) / 2.0) + 1
    assert row["reports_lost"] <= since_notice, (row, since_notice)
    done = sorted(p.name for p in progress.glob("epoch-*"))
    assert done == sorted(f"epoch-{e}-step-{s}" for e in (1, 2) for s in range(1, steps + 1)), done
    assert (progress / "host-h3").exists(), sorted(p.name for p in progress.iterdir())  # it went on on h3
    assert not (exp / "train").glob("*/hpsearch_failures.jsonl") or all(
        not p.read_text().strip() for p in (exp / "train").glob("*/hpsearch_failures.jsonl")
    )  # no failure counted
    # The hosts as the tests after this one expect them: h1 and h2 up, h3 not yet.
    hosts.kill_host("h3")
    hosts.start_ray("h2")
    hosts.wait_for_nodes(2)


_HOLD = """
import json, sys
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address="auto", logging_level="ERROR", namespace="hpsearch-test-holds")

@ray.remote(num_cpus=0)
class Hold:
    def ready(self):
        return True

wanted = json.loads(sys.argv[1])
if sys.argv[2] == "hold":
    held = [
        Hold.options(name=name, lifetime="detached", num_cpus=cpus,
                     scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
        for name, (node, cpus) in wanted.items()
    ]
    ray.get([h.ready.remote() for h in held], timeout=120)
else:
    for name in wanted:
        try:
            ray.kill(ray.get_actor(name))
        except ValueError:
            pass  # gone with its host
"""


def _hold_cpus(hosts: Hosts, wanted: dict[str, tuple[str, float]], action: str = "hold") -> None:
    """Hold (or let go of) CPUs on nodes with detached actors: ``{name: (node id, cpus)}``."""
    done = hosts.run("h1", [sys.executable, "-c", _HOLD, json.dumps(wanted), action], timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_trial_whose_drivers_node_is_drained_pauses_at_its_checkpoint_and_resumes_on_another_host(
    hosts: Hosts,
) -> None:
    """`resources.driver_node: any`: the trial's driver (0.6 CPU) can sit only on h2 and its one worker (0.3 CPU)
    only on h1, as CPUs held on both leave it (h1: 0.4 free, h2: 0.8). Mid-epoch, h2 is drained with a 20 s
    deadline. It holds no rank, so Ray Train tells the loop nothing: the driver reads the drain itself, rank 0
    saves at its next report, and the scheduler pauses the trial at it. h3 joins; Tune starts the trial's next
    driver there, and the nested run carries on from that checkpoint. h2 is killed at the deadline. With
    `failure.worker_retries: 0` and `trial_retries: 0`, a failure anywhere would end the trial errored.
    """
    progress = hosts.shared / "driver-drain-progress"
    progress.mkdir()
    nodes = _node_ids(hosts)
    holds = {"hold-h1": (nodes["h1"], 0.6), "hold-h2": (nodes["h2"], 0.2)}
    _hold_cpus(hosts, holds)
    steps = 4  # 2 epochs of 4 reports, 2 s apart; checkpoints at epoch ends only
    spec = _spec(
        hosts.shared / "driver-drain-spec",
        hosts.shared / "driver-drain-results",
        trainable=f"{DATA / 'span_loop.py'}:drained",
        num_samples=1,
        search_space={"epochs": 2, "steps": steps, "step_s": 2.0, "progress_dir": str(progress)},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.3}},
        resources={"driver_cpus": 0.6, "driver_node": "any"},
        failure={"worker_retries": 0, "trial_retries": 0, "worker_start_timeout_s": 120},
    )
    run = hosts.popen("h1", [sys.executable, "-m", "hpsearch", "run", str(spec), "--address", hosts.address])
    moved = []  # the hosts this test changed, put back at its end whatever happens
    try:
        _wait_mid_epoch(run, progress)
        assert sorted(p.name for p in progress.glob("host-*")) == ["host-h1"]  # the worker: h1, not the driver's h2
        asked_at, drained_at = _drain(hosts, nodes["h2"])
        moved.append("h3")
        hosts.start_ray("h3")  # where the driver goes on
        time.sleep(max(0.0, drained_at + 20 - time.time()))
        moved.append("h2")
        hosts.kill_host("h2")  # at the deadline, as the cloud takes it
        out, err = run.communicate(timeout=600)
        _check_the_drained_driver(hosts, run.returncode, err, progress, steps, asked_at)
    finally:
        if run.poll() is None:
            run.kill()
        _hold_cpus(hosts, holds, "release")
        # The hosts as the tests after this one expect them: h1 and h2 up, h3 not yet.
        if "h3" in moved:
            hosts.kill_host("h3")
        if "h2" in moved:
            hosts.start_ray("h2")
        hosts.wait_for_nodes(2)


def _check_the_drained_driver(
    hosts: Hosts, returncode: int, err: str, progress: Path, steps: int, asked_at: float
) -> None:
    """What the drained-driver test asserts once its search ended."""
    said = err[-4000:]
    print(said)
    assert returncode == 0, said
    exp = hosts.shared / "driver-drain-results" / "span"
    summary = json.loads((exp / SUMMARY_FILE).read_text())
    assert summary["counts"] == {"finished": 1, "stopped": 0, "errored": 0}, said
    paused = [line for line in err.splitlines() if "paused   trial" in line]
    assert paused and "(h2) is being drained" in paused[0] and "epoch 1" in paused[0], said
    [row] = load_results(exp).preemptions.to_dict("records")
    print(row)
    records = {  # what the trial's folder says, should an assertion below fail
        str(p.relative_to(exp)): p.read_text()[-1500:]
        for p in sorted((exp / "train").rglob("*.json*"))
        if p.name.startswith(("rank-", "hpsearch_failures", "preemption", "hpsearch_attempt"))
    }
    assert row["hosts"] == ("h2",) and row["driver"] and row["ranks"] == () and row["restarted"], (row, records)
    assert row["saved_epoch"] == 1 and row["restored_epoch"] == 1, row  # in epoch 1, saved for the notice
    noticed, deadline = row["noticed_at"].timestamp(), row["deadline"].timestamp()
    assert asked_at <= noticed < deadline and row["warning_s"] > 10, (asked_at, row)  # read within the deadline
    assert row["reports_lost"] <= math.ceil((deadline - noticed) / 2.0) + 1, row
    done = sorted(p.name for p in progress.glob("epoch-*"))
    assert done == sorted(f"epoch-{e}-step-{s}" for e in (1, 2) for s in range(1, steps + 1)), done
    [result] = list(exp.glob("*/result.json"))
    drivers = [json.loads(line)["hostname"] for line in result.read_text().splitlines() if line.strip()]
    assert drivers[0] == "h2" and drivers[-1] == "h3", drivers  # the driver went on on h3, not the drained h2
    assert not any(p.read_text().strip() for p in (exp / "train").glob("*/hpsearch_failures.jsonl"))


@pytest.mark.full
def test_storage_on_node_local_scratch_is_refused_before_any_trial_naming_the_host(hosts: Hosts) -> None:
    spec = _spec(hosts.shared / "scratch-spec", hosts.scratch / "results")
    done = _hpsearch(hosts, "h1", "run", str(spec), "--address", hosts.address, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    error = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert error, done.stderr[-3000:]
    assert "h2" in done.stderr and "10.213.0.12" in done.stderr, done.stderr[-3000:]
    assert "h1 " not in error[0]
    print(done.stderr[-3000:])


@pytest.mark.full
def test_a_trial_no_host_can_ever_hold_is_refused_by_plan_and_run_before_anything_starts(hosts: Hosts) -> None:
    """STRICT_PACK puts both 0.9-CPU workers on one host, and no host has more than 1 CPU."""
    scaling = {"num_workers": 2, "resources_per_worker": {"CPU": 0.9}, "placement_strategy": "STRICT_PACK"}
    spec = _spec(hosts.shared / "never-spec", hosts.shared / "never-results", scaling=scaling)
    expected = "Error: STRICT_PACK puts all 2 workers of {CPU: 0.9, memory: 0.7 GiB} on one node, but the node with the most room holds 1"
    for command in ("plan", "run"):
        done = _hpsearch(hosts, "h1", command, str(spec), "--address", hosts.address, timeout=300)
        assert done.returncode == 2, done.stderr[-3000:]
        assert expected in done.stderr, done.stderr[-3000:]
    assert not (hosts.shared / "never-results").exists()  # nothing written


@pytest.mark.full
def test_a_host_with_another_hpsearch_is_refused_before_any_trial_naming_it_and_its_version(hosts: Hosts) -> None:
    """h3 joins with hpsearch 9.9.0 installed (a distribution's metadata first on its path)."""
    other = hosts.shared / "other-env"
    dist_info = other / "hpsearch-9.9.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: hpsearch\nVersion: 9.9.0\n")
    hosts.start_ray("h3", env=hosts.environ(PYTHONPATH=str(other)))
    try:
        hosts.wait_for_nodes(3)
        spec = _spec(hosts.shared / "skew-spec", hosts.shared / "skew-results")
        done = _hpsearch(hosts, "h1", "run", str(spec), "--address", hosts.address, timeout=300)
        assert done.returncode == 2, done.stderr[-3000:]
        assert "h3" in done.stderr and "9.9.0" in done.stderr, done.stderr[-3000:]
        assert not (hosts.shared / "skew-results" / "span").exists()  # nothing written
        print(done.stderr[-3000:])
    finally:
        hosts.kill_host("h3")  # it leaves the cluster as a dead node; h3 stays up, without Ray, as a laptop
        hosts.wait_for_nodes(2)


@pytest.mark.full
def test_ray_job_submit_from_a_laptop_with_the_token_runs_and_without_it_is_refused(hosts: Hosts) -> None:
    """h3, with no Ray running, submits `hpsearch run` to the head's Jobs API, as the README shows."""
    folder = hosts.shared / "job"
    _spec(folder, hosts.shared / "job-results", num_samples=1, trainable="span_loop.py:all_reduce_hosts")
    for name in ("span_loop.py", "span_helpers.py"):
        (folder / name).write_bytes((DATA / name).read_bytes())
    dashboard = f"http://{hosts.head.ip}:8265"
    submit = [
        str(BIN / "ray"), "job", "submit", "--address", dashboard, "--working-dir", ".", "--",
        "hpsearch", "run", "span.yaml", "--address", "auto",
    ]  # fmt: skip
    without = {k: v for k, v in hosts.environ().items() if not k.startswith("RAY_AUTH")}
    refused = hosts.run("h3", submit, env=without, cwd=folder, timeout=120)
    assert refused.returncode != 0
    assert "401" in refused.stdout + refused.stderr or "auth" in (refused.stdout + refused.stderr).lower()
    done = hosts.run("h3", submit, cwd=folder, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    summary = json.loads((hosts.shared / "job-results" / "span" / SUMMARY_FILE).read_text())
    assert summary["counts"] == {"finished": 1, "stopped": 0, "errored": 0}


@pytest.mark.full
def test_a_host_that_dies_and_comes_back_its_trial_continues_from_its_checkpoint(hosts: Hosts) -> None:
    """Every process of h2 is killed after epoch 2 of a DDP trial across h1 and h2, then `ray start` again."""
    progress = hosts.shared / "progress"
    progress.mkdir()
    spec = _spec(
        hosts.shared / "dies-spec",
        hosts.shared / "dies-results",
        trainable=f"{DATA / 'span_loop.py'}:checkpointed",
        num_samples=1,
        search_space={"epochs": 5, "sleep_s": 1.5, "progress_dir": str(progress)},
        failure={"worker_retries": 3, "trial_retries": 2, "worker_start_timeout_s": 120},
    )
    run = hosts.popen("h1", [sys.executable, "-m", "hpsearch", "run", str(spec), "--address", hosts.address])
    try:
        deadline = time.monotonic() + 300
        while not (progress / "epoch-2").exists():
            assert run.poll() is None, run.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no epoch 2 within 300 s"
            time.sleep(0.2)
        killed_at = time.monotonic()
        hosts.kill_host("h2")
        time.sleep(5)
        hosts.start_ray("h2")
        out, err = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    wall = time.monotonic() - killed_at
    assert run.returncode == 0, err[-4000:]
    history = load_results(hosts.shared / "dies-results" / "span").history
    epochs = list(history["epoch"])
    print(f"epochs reported: {epochs}; from the kill to the end: {wall:.0f} s")
    assert sorted(set(epochs)) == [1, 2, 3, 4, 5]  # no epoch lost
    assert max(history["started_at"]) >= 2  # the run after the kill continued from a checkpoint


def _intervals(exp_dir: Path) -> list[tuple[float, float]]:
    """Each trial's first and last report, in wall-clock seconds (Tune's result rows)."""
    spans = []
    for result in exp_dir.glob("*/result.json"):
        rows = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        stamps = [float(r["timestamp"]) for r in rows]
        spans.append((min(stamps), max(stamps)))
    return spans


def _most_at_once(spans: list[tuple[float, float]], after: float = float("-inf")) -> int:
    """The most trials reporting at one moment (at or after ``after``)."""
    moments = [t for span in spans for t in span if t >= after]
    return max((sum(1 for a, b in spans if a <= t <= b) for t in moments), default=0)


@pytest.mark.full
def test_a_host_that_joins_mid_search_raises_the_concurrency(hosts: Hosts) -> None:
    """`--cluster` says a third 1-CPU host may come. The head's CPU holds the trial drivers (0.1 each), so
    the two hosts up train one 0.9-CPU worker at a time: the other trial waits for h3, and trains once it
    joins. Both are held running (``until_released``) until both have trained, whatever the machine's speed."""
    shape = "2x{CPU: 1} + 0..1x{CPU: 1}"
    release = hosts.shared / "joins-release"
    spec = _spec(
        hosts.shared / "joins-spec",
        hosts.shared / "joins-results",
        trainable=f"{DATA / 'span_loop.py'}:until_released",
        search_space={"x": {"type": "float", "low": 0.0, "high": 1.0}, "sleep_s": 1.0, "release": str(release)},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.9}},
        failure={"node_start_timeout_s": 180},
    )
    command = [sys.executable, "-m", "hpsearch", "run", str(spec), "--address", hosts.address, "--cluster", shape]
    run = hosts.popen("h1", command)
    exp = hosts.shared / "joins-results" / "span"
    try:
        deadline = time.monotonic() + 240
        while not _last_hosts(exp):
            assert run.poll() is None, run.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no trial reported within 240 s"
            time.sleep(0.5)
        joined_at = time.time()
        hosts.start_ray("h3")
        while len(_last_hosts(exp)) < 2:
            assert run.poll() is None, run.communicate()[1][-3000:]
            assert time.monotonic() < deadline + 180, "the second trial did not train within 180 s of h3's start"
            time.sleep(0.5)
        time.sleep(2)  # both report at once for a moment
        release.touch()
        out, err = run.communicate(timeout=400)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err[-4000:]
    summary = json.loads((exp / SUMMARY_FILE).read_text())
    assert summary["counts"] == {"finished": 2, "stopped": 0, "errored": 0}
    spans = _intervals(exp)
    said = f"{err[-3000:]}\nspans {spans}, h3 joined at {joined_at}"
    assert "1 trial(s) at once fit on the 2 nodes up now, 2 with every node the autoscaler can add" in err, said
    assert "waiting for a node to start: their workers fit on nodes the autoscaler can add" in err, said
    assert "node     h3 (10.213.0.13) joined the cluster" in err, said
    assert "cannot be placed" not in err, said
    assert sum(1 for first, _ in spans if first < joined_at) == 1, said  # before h3: one trial trained
    assert _most_at_once(spans, after=joined_at) == 2, said  # with h3: two train at once
    assert sorted(_last_hosts(exp).values()) == ["h2", "h3"], said
    print(err)  # what the search printed, for `pytest -s`


@pytest.mark.full
def test_a_host_that_never_comes_back_fails_the_trial_it_held_naming_it_and_the_search_goes_on(hosts: Hosts) -> None:
    """h3 is killed while two 1-worker trials train, one on h2 and one on h3, and never comes back.

    The trial on h3 waits for room for its worker (none: h2 is busy, the head holds the drivers) up to
    ``failure.worker_start_timeout_s``, then fails, naming h3. The trial on h2 goes on, and is held
    running (``until_released``) until the other has failed, so the test does not depend on timing.
    """
    hosts.wait_for_nodes(3)  # h3 joined in the test before
    release = hosts.shared / "lost-release"
    spec = _spec(
        hosts.shared / "lost-spec",
        hosts.shared / "lost-results",
        trainable=f"{DATA / 'span_loop.py'}:until_released",
        search_space={"x": {"type": "float", "low": 0.0, "high": 1.0}, "sleep_s": 1.0, "release": str(release)},
        scaling={"num_workers": 1, "resources_per_worker": {"CPU": 0.9}},
        failure={"worker_retries": 1, "trial_retries": 0, "worker_start_timeout_s": 10},
    )
    run = hosts.popen("h1", [sys.executable, "-m", "hpsearch", "run", str(spec), "--address", hosts.address])
    exp = hosts.shared / "lost-results" / "span"
    try:
        deadline = time.monotonic() + 240
        while len(hosts_of := _last_hosts(exp)) < 2:
            assert run.poll() is None, run.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "two trials did not both report within 240 s"
            time.sleep(0.5)
        assert sorted(hosts_of.values()) == ["h2", "h3"], hosts_of  # the head holds the two drivers, no worker
        [on_h3] = [trial for trial, host in hosts_of.items() if host == "h3"]
        hosts.kill_host("h3")
        killed_at = time.monotonic()
        while not (ended := read_outcome_records(exp)):
            assert run.poll() is None, run.communicate()[1][-3000:]
            assert time.monotonic() < killed_at + 300, "the trial on the lost host did not end within 300 s"
            time.sleep(0.5)
        failed_after = time.monotonic() - killed_at
        release.touch()
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    said = err[-4000:]
    print(f"{err[-3000:]}\nthe trial on h3 ended {failed_after:.0f} s after the kill")
    assert list(ended) == [on_h3] and ended[on_h3]["status"] == "errored", (ended, said)
    assert ended[on_h3]["error"].startswith("its workers' host h3 (10.213.0.13) left the cluster at ["), ended[on_h3][
        "error"
    ]
    assert "and it did not come back; " in ended[on_h3]["error"]
    assert f"node     h3 (10.213.0.13) left the cluster; trial {on_h3} had workers there" in err, said
    summary = json.loads((exp / SUMMARY_FILE).read_text())
    assert summary["counts"] == {"finished": 1, "stopped": 0, "errored": 1}, said  # the other trial went on
    plan = json.loads((exp / PLAN_FILE).read_text())
    assert plan["max_concurrent_trials"] == 2, plan  # one 0.9-CPU worker on each of h2 and h3
    head = next(n for n in plan["nodes"] if n["is_head"])
    assert head["drivers"] == 2 and head["workers"] == 0, plan  # the drivers on the head, apart from the workers
    assert run.returncode == 0, said  # one trial finished: the search did its work


def _last_hosts(exp: Path) -> dict[str, str]:
    """Trial id -> the host of its latest report, for the trials that reported."""
    out = {}
    for result in exp.glob("*/result.json"):
        rows = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        if rows:
            out[str(rows[-1]["trial_id"])] = str(rows[-1]["host"])
    return out


def _reports(exp: Path) -> list[dict[str, Any]]:
    """Every report Tune received, of every trial, in the order received."""
    rows = []
    for result in exp.glob("*/result.json"):
        rows += [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
    return sorted(rows, key=lambda r: float(r["timestamp"]))


@pytest.mark.full
def test_an_elastic_trial_started_with_one_worker_grows_to_two_when_a_host_joins(hosts: Hosts) -> None:
    """``num_workers: {min: 1, max: 2}`` of 0.95-CPU workers. The head's CPU holds the trial's 0.1-CPU driver,
    and hpsearch tells Ray's autoscaling coordinator so: only h2 has room, and the trial starts with one
    worker. h3 then joins: Ray's coordinator sees it at its next tick (every 20 s), the trial checks every
    2 s (``scaling.resize_interval_s``), and its worker group restarts with two workers, one on each host,
    from its latest checkpoint. Held running (``release``) until it has reported with two."""
    hosts.wait_for_nodes(2)  # h3 is down: never started alone, or killed in the test before
    release = hosts.shared / "elastic-release"
    spec = _spec(
        hosts.shared / "elastic-spec",
        hosts.shared / "elastic-results",
        trainable=f"{DATA / 'elastic_loop.py'}:grows",
        num_samples=1,
        search_space={"sleep_s": 0.5, "release": str(release), "max_epochs": 400},
        scaling={"num_workers": {"min": 1, "max": 2}, "resources_per_worker": {"CPU": 0.95}, "resize_interval_s": 2},
        failure={"worker_retries": 1, "trial_retries": 0, "worker_start_timeout_s": 60},
    )
    started = time.monotonic()
    run = hosts.popen("h1", [sys.executable, "-m", "hpsearch", "run", str(spec), "--address", hosts.address])
    exp = hosts.shared / "elastic-results" / "span"
    try:
        deadline = time.monotonic() + 240
        while not _reports(exp):
            assert run.poll() is None, run.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no report within 240 s"
            time.sleep(0.5)
        first_report = time.monotonic() - started
        hosts.start_ray("h3")
        joined = time.monotonic()
        while not any(r["world"] == 2 for r in _reports(exp)):
            assert run.poll() is None, run.communicate()[1][-3000:]
            assert time.monotonic() < joined + 180, "the trial did not grow within 180 s of h3's start"
            time.sleep(0.5)
        grew_after = time.monotonic() - joined
        time.sleep(2)  # a report or two with both
        release.touch()
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    wall = time.monotonic() - started
    said = err[-4000:]
    print(
        f"first report {first_report:.0f} s after the start; two workers {grew_after:.0f} s after h3's start; {wall:.0f} s in all"
    )
    assert run.returncode == 0, said
    results = load_results(exp)
    assert results.counts["finished"] == 1, said
    history = results.history
    worlds = list(history["world"])
    assert worlds[0] == 1 and worlds[-1] == 2 and worlds == sorted(worlds), worlds  # one worker, then two
    assert set(history.loc[history["world"] == 2, "hosts"]) == {"h2,h3"}, history[["iteration", "world", "hosts"]]
    assert set(history.loc[history["world"] == 1, "hosts"]) == {"h2"}  # the head's room is the driver's
    epochs = list(history["iteration"])
    assert epochs == list(range(1, len(epochs) + 1)), epochs  # every epoch once: the resize continued from a checkpoint
    assert history.loc[history["world"] == 2, "started_at"].min() > 1  # ...the checkpoint of an epoch before it
    starts = results.workers
    assert list(starts["workers"]) == [1, 2] and list(starts["nodes"]) == [1, 2], starts
    assert starts["started_at"].is_monotonic_increasing
    plan = json.loads((exp / PLAN_FILE).read_text())
    assert plan["elastic"]["start_workers"] == [1], plan["elastic"]  # the planner said what Ray would do
    assert "node     h3 (10.213.0.13) joined the cluster" in err, said
    print(err)  # what the search printed, for `pytest -s`
