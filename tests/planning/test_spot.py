"""Spot nodes: ``hpsearch plan``'s "spot nodes" lines, and ``plan --estimate --preemption-rate``'s expected extra
wall time and resource-hours. Pure: no Ray is started (the spec's trainable is ``json:dumps``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpsearch.cli import main
from hpsearch.errors import PlanError
from hpsearch.planning.cluster_shape import nodes_at, parse_node_groups
from hpsearch.planning.estimate import Timing, Workload, estimate
from hpsearch.planning.for_spec import plan_for
from hpsearch.planning.preemption import (
    Cadence,
    SpotTrials,
    beyond_retries,
    expected_cost,
    preemption_rate,
    spot_as_dict,
    spot_trials,
)
from hpsearch.spec import load_spec
from hpsearch.spec.checkpoint import CheckpointSettings

SPEC: dict[str, Any] = {
    "name": "est",
    "trainable": "json:dumps",  # a quick import: nothing runs
    "metric": "val_loss",
    "mode": "min",
    "num_samples": 12,
    "search_space": {"lr": {"type": "float", "low": 1.0e-4, "high": 1.0e-1, "log": True}, "epochs": 10},
    "scheduler": {"type": "asha", "max_t": 10, "grace_period": 2, "reduction_factor": 2},
    "scaling": {"num_workers": 2, "use_gpu": True, "resources_per_worker": {"CPU": 1, "GPU": 1}},
    "resources": {"driver_cpus": 0.1},
}
#: 4 trials at once: one on the on-demand GPU node, two on the spot nodes, one across node1 and node2
SPOT = "1x{CPU: 4} + 1x{CPU: 8, GPU: 3} + 2x{CPU: 8, GPU: 3, spot}"
FLAGS = ["--epoch-time", "5", "--startup", "10", "--teardown", "2"]


def write_spec(folder: Path, spec: dict[str, Any]) -> Path:
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump({**spec, "storage_path": str(folder / "results")}), encoding="utf-8")
    return path


@pytest.fixture
def spec_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return write_spec(tmp_path, SPEC)


def plan_text(spec: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["plan", str(spec), *args]) == 0
    return capsys.readouterr().out


# --------------------------------------------------------------------------- the plan


def test_the_plan_says_which_trials_sit_on_spot_nodes_and_what_a_preemption_costs(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = plan_text(spec_file, capsys, "--cluster", SPOT)
    block = out[out.index("  spot nodes") : out.index("  notes")].splitlines()
    pad = " " * 18
    assert block == [
        "  spot nodes      3 of the 4 trials at once put workers on spot nodes: 5 of their 6 workers, on node2, node3",
        f"{pad}one preemption costs a trial about 0.5 epoch(s) of training (half a checkpoint interval, on average) "
        "plus a restart",
        f"{pad}(its worker group started again from the latest checkpoint); plan --estimate says it in seconds, and "
        "with --preemption-rate R the expected extra wall time and resource-hours",
        f"{pad}checkpoint interval: every report (epoch), assumed: the spec sets no search_space.checkpoint_every",
        f"{pad}(the shipped loops' key; the spec's checkpoint section holds only num_to_keep), and the shipped loops "
        "and hpsearch.train.report save one with every report",
        f"{pad}with Ray Train's preemption notice (ray.train.get_preemption_info()), hpsearch.train.report saves a "
        "checkpoint at the first report after it: when that falls before the drain's deadline, the loss is only the "
        "steps after it",
        f"{pad}each preemption counts against failure.preemption_retries (Ray Train's max_preemption_failures), apart "
        "from failures: a trial preempted more often errors",
    ]


def test_a_plan_with_no_worker_on_a_spot_node_says_nothing_of_spot(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "spot" not in plan_text(spec_file, capsys, "--cluster", "1x{CPU: 4} + 3x{CPU: 8, GPU: 3}")
    # spot nodes no trial reaches (CPU-only: the workers need a GPU) say nothing either
    assert "spot nodes" not in plan_text(
        spec_file, capsys, "--cluster", "1x{CPU: 4} + 2x{CPU: 8, GPU: 3} + 1x{CPU: 8, spot}"
    )


def test_an_autoscaled_spot_group_shows_at_the_maximum_size_only(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = plan_text(spec_file, capsys, "--cluster", "1x{CPU: 4} + 1x{CPU: 8, GPU: 2} + 0..2x{CPU: 8, GPU: 2, spot}")
    assert out.splitlines()[0].endswith(
        "cluster 1x{CPU: 4} + 1x{CPU: 8, GPU: 2} + 0..2x{CPU: 8, GPU: 2, spot} (2 to 4 nodes)"
    )
    at_min, at_max = out.split("At the maximum size")
    assert "spot nodes" not in at_min
    assert "  spot nodes      2 of the 3 trials at once put workers on spot nodes: 4 of their 4 workers" in at_max


def test_the_spot_fields_and_the_spec_cadence(tmp_path: Path) -> None:
    """``spot_as_dict`` is what ``plan --format json`` carries; the spec's ``search_space.checkpoint_every`` (the
    shipped loops' key) is the cadence, else a checkpoint every report, assumed."""
    from hpsearch.planning.estimate.workload import cadence_for

    spec = load_spec({**SPEC, "storage_path": str(tmp_path)}, check_trainable=False)
    plan = plan_for(spec, nodes_at(parse_node_groups(SPOT)))
    spot = spot_trials(plan)
    assert (spot.trials, spot.workers, spot.of_workers, spot.nodes) == ((1, 2, 3), 5, 6, ("node2", "node3"))
    assert spot.nodes_per_trial == 3 / 4 and spot.nodes_per_spot_trial == 1.0
    assert cadence_for(spec) == Cadence() and Cadence().assumed
    fields = spot_as_dict(plan, cadence_for(spec))["spot"]
    assert fields["trials"] == [1, 2, 3] and fields["nodes"] == ["node2", "node3"]
    assert fields["checkpoint"]["every_epochs"] == [1] and fields["lost_per_preemption_epochs"] == 0.5
    every = {**SPEC["search_space"], "checkpoint_every": {"type": "choice", "values": [2, 4]}}
    searched = load_spec({**SPEC, "search_space": every, "storage_path": str(tmp_path)}, check_trainable=False)
    assert cadence_for(searched) == Cadence(
        (2, 4), "search_space.checkpoint_every (searched: their mean), as the shipped loops read it"
    )
    assert spot_as_dict(plan, cadence_for(searched))["spot"]["lost_per_preemption_epochs"] == 1.5
    assert spot_as_dict(plan_for(spec, nodes_at(parse_node_groups("1x{CPU: 4} + 2x{CPU: 8, GPU: 3}")))) == {}


def test_the_spec_still_has_no_checkpoint_cadence_key() -> None:
    """The plan says the spec's checkpoint section sets no cadence: a new key there must change that text."""
    assert set(CheckpointSettings.model_fields) == {"num_to_keep"}


# --------------------------------------------------------------------------- the estimate


def estimate_json(spec: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["plan", str(spec), "--cluster", SPOT, "--estimate", *FLAGS, "--format", "json", *args]) == 0
    est: dict[str, Any] = json.loads(capsys.readouterr().out)["estimate"]
    return est


def test_the_expected_extra_time_and_resource_hours_rise_with_the_rate(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = [estimate_json(spec_file, capsys, "--preemption-rate", r)["preemption"] for r in ("0", "0.5", "5")]
    assert [f["rate_per_spot_node_hour"] for f in figures] == [0.0, 0.5, 5.0]
    for key in ("expected_preemptions", "extra_wall_time_s"):
        low, mid, high = (f[key]["median"] for f in figures)
        assert low == 0 < mid < high and high == pytest.approx(10 * mid)
    for resource in ("CPU", "GPU"):
        assert 0 == figures[0]["extra_resource_hours"][resource]["median"]
        assert (
            figures[1]["extra_resource_hours"][resource]["median"]
            < figures[2]["extra_resource_hours"][resource]["median"]
        )
    # half an epoch of 5 s lost, plus a restart: the start-up (no restored run measured)
    assert (figures[1]["lost_per_preemption_s"], figures[1]["restart_per_preemption_s"]) == (2.5, 10.0)
    assert figures[1]["per_preemption_s"] == 12.5
    assert figures[1]["model"] == "an analytic expectation added to each simulated run, not simulated"
    # the simulated figures themselves do not move
    assert (
        len({json.dumps(estimate_json(spec_file, capsys, *r)["wall_time_s"]) for r in ([], ["--preemption-rate", "5"])})
        == 1
    )


def test_the_estimate_prints_the_preemption_lines(spec_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    every = ["--set", "search_space.checkpoint_every=4"]
    out = plan_text(spec_file, capsys, "--cluster", SPOT, "--estimate", *FLAGS, "--preemption-rate", "0.5", *every)
    lines = out[out.index("  preemptions") : out.index("  budget")].splitlines()
    pad = " " * 18
    assert lines[0].startswith("  preemptions     0.5 per spot node-hour (--preemption-rate) x ")
    assert " spot node-hours under the trials' workers: " in lines[0] and lines[0].endswith(" expected")
    assert lines[1] == (
        f"{pad}each costs its trial 10 s of training (half a checkpoint interval of 4 epoch(s) at 5 s each) + 10 s to "
        "restart (a restarted run's start-up) = 20 s"
    )
    assert (
        lines[2]
        == f"{pad}checkpoint interval: every 4 epochs (search_space.checkpoint_every, as the shipped loops read it)"
    )
    assert lines[3].startswith(f"{pad}expected extra: wall time +") and ", resource-hours CPU +" in lines[3]
    assert lines[4].startswith(f"{pad}a trial on spot nodes expects ")
    assert lines[4].endswith("failure.preemption_retries 10: under 0.1% of them are preempted more often and error")
    assert lines[5].startswith(
        f"{pad}an expectation added to each run, not simulated: the extra slot-time spread over the 4"
    )


def test_a_trial_likely_to_run_out_of_preemption_retries_is_said(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """600 s epochs at 2 preemptions per spot node-hour: a trial on spot nodes expects more than one."""
    flags = ["--epoch-time", "600", "--startup", "30", "--preemption-rate", "2"]
    out = plan_text(spec_file, capsys, "--cluster", SPOT, "--estimate", *flags, "--set", "failure.preemption_retries=1")
    line = next(x for x in out.splitlines() if "a trial on spot nodes expects" in x)
    assert "failure.preemption_retries 1: about " in line and "% of them are preempted more often and error" in line
    mean = float(line.split("expects ")[1].split(" ")[0])
    assert mean > 1
    shown = float(line.split("about ")[1].split("%")[0])
    assert shown == pytest.approx(100 * beyond_retries(mean, 1), rel=0.05)


def test_a_rate_without_spot_nodes_and_spot_nodes_without_a_rate_say_so(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    on_demand = ["--cluster", "1x{CPU: 4} + 3x{CPU: 8, GPU: 3}", "--estimate", *FLAGS]
    out = plan_text(spec_file, capsys, *on_demand, "--preemption-rate", "0.1")
    assert "  preemptions" not in out
    assert (
        "    - --preemption-rate adds nothing: no trial's workers sit on a spot node (mark a --cluster group spot: "
        "0..4x{CPU: 8, GPU: 1, spot})"
    ) in out
    out = plan_text(spec_file, capsys, "--cluster", SPOT, "--estimate", *FLAGS)
    assert "  preemptions" not in out
    assert (
        "    - 3 of the 4 trials at once put workers on spot nodes; preemptions not counted: --preemption-rate R "
        "(preemptions per spot node-hour) adds them"
    ) in out


@pytest.mark.parametrize("value", ["-0.1", "nan", "inf", "often", ""])
def test_a_bad_preemption_rate_exits_2_naming_the_flag_the_value_and_what_is_allowed(
    spec_file: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    assert main(["plan", str(spec_file), "--cluster", SPOT, "--estimate", *FLAGS, f"--preemption-rate={value}"]) == 2
    assert capsys.readouterr().err == (
        "Error: --preemption-rate must be a number of preemptions per spot node-hour, at least 0 (e.g. 0.05), "
        f"got {value!r}\n"
    )


def test_the_expectation_by_hand() -> None:
    """4 trials of 3 epochs on 2 slots, each holding its slot 10 + 3 x 5 + 2 = 27 s: 108 slot-seconds; every trial's
    workers on one spot node, 0.03 spot node-hours; at 10 an hour, 0.3 preemptions, each 2.5 s + 10 s."""
    spot = SpotTrials(trials=(0, 1), trials_at_once=2, workers=4, of_workers=4, nodes=("a", "b"), nodes_per_trial=1.0)
    w = Workload(trials=4, slots=2, epochs=(3,), resources={"CPU": 2.0, "GPU": 2.0}, spot=spot, preemption_retries=1)
    est = estimate(w, Timing(epoch_s=5, startup_s=10, teardown_s=2, preemption_rate=10.0))
    (cost, *_) = est.preemptions()
    assert cost.spot_node_hours == pytest.approx(0.03) and cost.preemptions == pytest.approx(0.3)
    assert cost.extra_slot_s == pytest.approx(0.3 * 12.5) and cost.extra_wall_s == pytest.approx(0.3 * 12.5 / 2)
    assert cost.extra_resource_hours == pytest.approx({"CPU": 2 * 0.3 * 12.5 / 3600, "GPU": 2 * 0.3 * 12.5 / 3600})
    assert est.per_trial_preemptions() == pytest.approx(10 * 27 / 3600)
    assert est.as_dict()["preemption"]["beyond_retries"] == pytest.approx(beyond_retries(10 * 27 / 3600, 1))
    assert estimate(w, Timing(epoch_s=5, startup_s=10, teardown_s=2)).preemptions() == []


def test_the_small_helpers() -> None:
    assert expected_cost(rate=0, spot_nodes_per_trial=2, busy_s=3600, each_s=60, slots=1, resources={}).preemptions == 0
    assert beyond_retries(0.0, 0) == 0.0
    assert beyond_retries(1.0, 0) == pytest.approx(1 - math.exp(-1))
    assert beyond_retries(2.0, 2) == pytest.approx(1 - math.exp(-2) * (1 + 2 + 2))
    assert preemption_rate(" 0.25 ") == 0.25 and preemption_rate("0") == 0.0
    with pytest.raises(PlanError, match=r"got '1e999'$"):
        preemption_rate("1e999")
