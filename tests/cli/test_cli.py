"""The ``hpsearch`` command, run in process: exact messages, exit codes, nothing written on error.

None of these start Ray: every command here stops before connecting.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpsearch.cli import main
from hpsearch.errors import SpecError

GOOD = {
    "name": "good",
    "trainable": "hpsearch.examples.digits:train_loop",
    "metric": "val_loss",
    "mode": "min",
    "num_samples": 2,
    "search_space": {
        "lr": {"type": "float", "low": 1.0e-4, "high": 1.0e-1, "log": True},
        "batch_size": {"type": "grid", "values": [32, 64]},
        "epochs": 2,
    },
    "scaling": {"num_workers": 2, "resources_per_worker": {"CPU": 0.45}},
    "resources": {"driver_cpus": 0.1},
}
ALLOWED_TOP = (
    "name, trainable, metric, mode, num_samples, search_space, searcher, scheduler, scaling, "
    "resources, failure, checkpoint, aggregate, datasets, data, tracking, budget, warm_start, constraints, storage_path"
)
TYPO_LINE = f"  - serch_space: unknown key; did you mean 'search_space'? (allowed: {ALLOWED_TOP})"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(folder: Path, name: str, spec: dict) -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def bad_spec(folder: Path, **changes) -> Path:
    raw = {k: v for k, v in GOOD.items() if k != "search_space"}
    return write(folder, "bad.yaml", {**raw, "serch_space": GOOD["search_space"], **changes})


def test_validate_good_spec(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(workdir, "good.yaml", GOOD)
    assert main(["validate", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out == (
        f"{path}: valid. 4 trials of 2 worker(s) each; searcher random, scheduler fifo; "
        f"results in {workdir.resolve() / 'hpsearch-results' / 'good'}\n"
    )
    assert err == ""
    assert sorted(p.name for p in workdir.iterdir()) == ["good.yaml"]


def test_validate_applies_set(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(workdir, "good.yaml", GOOD)
    code = main(["validate", str(path), "--set", "num_samples=5", "--set", "scheduler=asha", "--set", "name=other"])
    assert code == 0
    out = capsys.readouterr().out
    assert "valid. 10 trials of 2 worker(s) each; searcher random, scheduler asha;" in out
    assert out.rstrip().endswith(str(Path("hpsearch-results", "other")))


def test_validate_misspelled_key_is_one_error_block(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = bad_spec(workdir)
    assert main(["validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"Error: invalid spec in {path} (1 problem):\n{TYPO_LINE}\n"
    assert "Traceback" not in err


def test_run_bad_spec_exits_2_and_writes_nothing(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = bad_spec(workdir)
    assert main(["run", str(path)]) == 2
    out, err = capsys.readouterr()
    assert err == f"Error: invalid spec in {path} (1 problem):\n{TYPO_LINE}\n"
    assert not (workdir / "hpsearch-results").exists()
    assert sorted(p.name for p in workdir.iterdir()) == ["bad.yaml"]


def test_run_bad_override_exits_2(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(workdir, "good.yaml", GOOD)
    assert main(["run", str(path), "--set", "foo"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"Error: invalid spec in {path} (1 problem):\n"
        "  - --set foo: must be KEY=VALUE with a dotted KEY, e.g. --set scaling.num_workers=2\n"
    )
    assert not (workdir / "hpsearch-results").exists()


@pytest.mark.parametrize(
    ("args", "error"),
    [
        pytest.param(
            ["--cluster", "1x{CPU: 2} + 0..2x{CPU: 2}"],
            "Error: --cluster on run describes what the autoscaler of the cluster at --address may add to it; "
            "hpsearch's embedded Ray has no autoscaler: give --address (or run it as a Ray job), or leave --cluster "
            "out\n",
            id="no-address",
        ),
        pytest.param(
            ["--address", "127.0.0.1:1", "--cluster", "1x{CPU: 2} + 0..0x{CPU: 2}"],
            "Error: --cluster term 2: count must be a whole number >= 1, or min..max "
            "with 0 <= min <= max and max >= 1, got '0..0'\n",
            id="bad-count",
        ),
    ],
)
def test_run_refuses_a_cluster_no_autoscaler_can_grow_before_starting_ray(
    args: list[str], error: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import ray

    path = write(workdir, "good.yaml", GOOD)
    assert main(["run", str(path), *args]) == 2
    assert capsys.readouterr().err == error
    assert not ray.is_initialized()
    assert not (workdir / "hpsearch-results" / "good").exists()


def test_run_refuses_an_existing_experiment_folder_before_starting_ray(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import ray

    assert not ray.is_initialized()
    path = write(workdir, "good.yaml", GOOD)
    existing = workdir / "hpsearch-results" / "good"
    existing.mkdir(parents=True)
    (existing / "keep.txt").write_text("old results", encoding="utf-8")

    assert main(["run", str(path)]) == 2

    err = capsys.readouterr().err
    assert err == (
        f"Error: experiment folder {existing.resolve()} already exists; continue it with "
        f"`hpsearch resume {existing.resolve()}`, pass --overwrite (overwrite=True) "
        "to delete it and start again, or choose another name (--set name=...)\n"
    )
    assert not ray.is_initialized()
    assert [p.name for p in existing.iterdir()] == ["keep.txt"]


def test_overwrite_deletes_only_experiment_folders(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import ray

    path = write(workdir, "good.yaml", GOOD)
    existing = workdir / "hpsearch-results" / "good"
    existing.mkdir(parents=True)
    (existing / "thesis.tex").write_text("not an experiment", encoding="utf-8")

    assert main(["run", str(path), "--overwrite"]) == 2

    assert capsys.readouterr().err == (
        f"Error: {existing.resolve()} exists and is not an hpsearch experiment folder (no hpsearch_spec.yaml); "
        "--overwrite only ever deletes experiment folders: choose another name or storage_path\n"
    )
    assert not ray.is_initialized()
    assert (existing / "thesis.tex").read_text(encoding="utf-8") == "not an experiment"


def test_resume_of_a_folder_that_is_not_an_experiment(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resume", str(workdir)]) == 2
    assert capsys.readouterr().err == (
        f"Error: {workdir.resolve()} is not an hpsearch experiment folder (no hpsearch_spec.yaml in it)\n"
    )


def test_debug_after_the_command_reraises(workdir: Path) -> None:
    path = bad_spec(workdir)
    with pytest.raises(SpecError) as info:
        main(["validate", str(path), "--debug"])
    assert [str(p) for p in info.value.problems] == [TYPO_LINE.removeprefix("  - ")]


def test_debug_before_the_command_reraises(workdir: Path) -> None:
    path = bad_spec(workdir)
    with pytest.raises(SpecError):
        main(["--debug", "validate", str(path)])


def test_missing_spec_argument_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["validate"])
    assert info.value.code == 2
    assert "the following arguments are required: SPEC.yaml" in capsys.readouterr().err


def test_missing_spec_file(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "nope.yaml"]) == 2
    assert capsys.readouterr().err == (
        "Error: invalid spec in nope.yaml (1 problem):\n  - <spec>: cannot read the spec file: No such file or directory\n"
    )


def test_python_dash_m_validate_bad_spec(workdir: Path) -> None:
    path = bad_spec(workdir, trainable="json:dumps")  # a quick import: this test is about the process
    proc = subprocess.run(
        [sys.executable, "-m", "hpsearch", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=workdir,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == f"Error: invalid spec in {path} (1 problem):\n{TYPO_LINE}\n"


# --------------------------------------------------------------------------- plan

QUICK = Path(__file__).resolve().parents[2] / "search_spaces" / "digits_quick.yaml"
GPU_PAIRS = ["--set", "scaling.use_gpu=true", "--set", "scaling.resources_per_worker={CPU: 1, GPU: 1}"]


@pytest.mark.parametrize(("strategy", "expected"), [("PACK", 4), ("STRICT_PACK", 3)])
def test_plan_on_a_described_cluster_as_json(strategy: str, expected: int, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    code = main(
        [
            "plan",
            str(QUICK),
            "--cluster",
            "3x{CPU: 8, GPU: 3}",
            *GPU_PAIRS,
            "--set",
            f"scaling.placement_strategy={strategy}",
            "--format",
            "json",
        ]
    )
    assert code == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["max_concurrent_trials"] == expected
    assert plan["total_trials"] == 12
    assert len(plan["trials"]) == expected
    assert all(t["driver"] == "head" for t in plan["trials"])


def test_plan_text_explains_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(QUICK), "--cluster", "3x{CPU: 8, GPU: 3}", *GPU_PAIRS]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "Plan for digits-quick on the described cluster (3 nodes)"
    assert "  trials at once  4 (of 12 in total)" in out
    assert "    - one more GPU per node would allow 2 more trial(s) at once" in out


def test_plan_refuses_a_trial_that_never_fits(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "plan",
            str(QUICK),
            "--cluster",
            "2x{CPU: 8, GPU: 1}",
            *GPU_PAIRS,
            "--set",
            "scaling.placement_strategy=STRICT_PACK",
        ]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        "Error: STRICT_PACK puts all 2 workers of {CPU: 1, GPU: 1, memory: 0.7 GiB} on one node, "
        "but the node with the most room holds 1\n"
    )


def test_plan_with_a_bad_cluster_description_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(QUICK), "--cluster", "3x{GPU: lots}"]) == 2
    assert (
        "--cluster term 1.GPU: must be a finite number >= 0 and <= 1,000,000,000, got 'lots'" in capsys.readouterr().err
    )


AUTOSCALING_GPUS = "1x{CPU: 8} + 0..4x{CPU: 8, GPU: 8}"


def test_plan_on_an_autoscaling_cluster_gives_both_sizes_and_each_extra_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", str(QUICK), "--cluster", "1x{CPU: 2} + 0..2x{CPU: 2}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "Plan for digits-quick on the described autoscaling cluster 1x{CPU: 2} + 0..2x{CPU: 2} (1 to 3 nodes)"
    )
    assert lines[2] == "At the minimum size (1 node)"
    assert "  trials at once  2 (of 12 in total)" in lines
    assert "At the maximum size (3 nodes)" in lines
    assert "  trials at once  5 (of 12 in total)" in lines
    assert lines[-2:] == [
        "As the autoscaler adds nodes (the other groups at their minimum)",
        "  each extra {CPU: 2} node (0..2): +1: 3, +2: 5 trials at once (from 2)",
    ]


def test_plan_where_no_trial_fits_before_the_autoscaler_adds_a_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(QUICK), "--cluster", AUTOSCALING_GPUS, *GPU_PAIRS]) == 0
    out = capsys.readouterr().out
    assert (
        "At the minimum size (1 node)\n"
        "  trials at once  0: a worker needs GPU: 1 but the largest node has GPU: 0\n"
        "                  trials wait for the autoscaler to start a node (see what each extra node adds below)\n"
    ) in out
    assert "  trials at once  16 (of 12 in total)" in out
    assert out.endswith("  each extra {CPU: 8, GPU: 8} node (0..4): +4 trial(s) at once, up to 16 with all 4\n")


def test_plan_on_an_autoscaling_cluster_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["plan", str(QUICK), "--cluster", AUTOSCALING_GPUS, *GPU_PAIRS, "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["name"], plan["total_trials"], plan["cluster"]) == ("digits-quick", 12, AUTOSCALING_GPUS)
    scaling = plan["autoscaling"]
    assert scaling["min"] == {
        "max_concurrent_trials": 0,
        "waits_for_autoscaler": True,
        "reason": "a worker needs GPU: 1 but the largest node has GPU: 0",
    }
    assert scaling["max"]["max_concurrent_trials"] == 16
    assert [(g["extra_nodes"], g["trials_at_once"]) for g in scaling["per_node"]] == [
        ([0, 1, 2, 3, 4], [0, 4, 8, 12, 16])
    ]


def test_plan_refuses_a_trial_that_fits_at_no_size_of_an_autoscaling_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster = "1x{CPU: 8} + 0..2x{CPU: 8, GPU: 1}"
    code = main(
        ["plan", str(QUICK), "--cluster", cluster, *GPU_PAIRS, "--set", "scaling.placement_strategy=STRICT_PACK"]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        "Error: even at the cluster's maximum size (3 nodes): STRICT_PACK puts all 2 workers of "
        "{CPU: 1, GPU: 1, memory: 0.7 GiB} on one node, but the node with the most room holds 1\n"
    )


def test_plan_with_a_bad_node_count_names_the_term(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(QUICK), "--cluster", "1x{CPU: 2} + 4..2x{CPU: 2}"]) == 2
    assert (
        "--cluster term 2: count must be a whole number >= 1, or min..max with 0 <= min <= max and max >= 1, got '4..2'"
    ) in capsys.readouterr().err


@pytest.mark.parametrize(
    ("driver_gb", "line"),
    [
        (
            "2",
            "    - memory limits this plan: 4 trials at once need 8 GiB of the head's 8 GiB (4 trial drivers at 2 GiB "
            "each: resources.driver_memory_gb); CPUs and GPUs alone would allow 35 at once; change the estimate "
            "with --set resources.driver_memory_gb=...",
        ),
        (
            "1.5",
            "    - memory limits this plan: 5 trials at once need 7.5 GiB of the head's 8 GiB (5 trial drivers at 1.5 GiB "
            "each: resources.driver_memory_gb); CPUs and GPUs alone would allow 35 at once; change the estimate "
            "with --set resources.driver_memory_gb=...",
        ),
    ],
)
def test_plan_says_when_the_heads_memory_limits_it(
    driver_gb: str, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = "1x{CPU: 4, memory: 8} + 2x{CPU: 16}"
    code = main(["plan", str(QUICK), "--cluster", cluster, "--set", f"resources.driver_memory_gb={driver_gb}"])
    assert code == 0
    assert line in capsys.readouterr().out.splitlines()


# --------------------------------------------------------------------------- how a search ends


def test_the_closing_lines_give_each_errored_trial_one_line_and_say_where_rays_logs_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fake_experiment import FakeTrial, standard_trials, trial_dir_name, write_experiment

    from hpsearch.analysis import summarize_experiment
    from hpsearch.cli import _report_search
    from hpsearch.experiment import files

    trials = [
        *standard_trials(),
        FakeTrial(
            "aaaa0006",
            {"lr": 0.1, "hidden": 32, "layers": 3, "dropout": 0.0, "epochs": 4, "opt": {"momentum": 0.9}},
            [],
            status="errored",
            error="ValueError: x='bad' is not a usable value",
            start=60,
        ),
    ]
    exp = write_experiment(tmp_path / "fake", trials)
    logs = "/tmp/ray/session_2026-12-01_10-00-00_000000_1/logs"
    files.append_ray_logs(exp, files.RayLogs(logs_dir="/tmp/ray/an-earlier-session/logs", driver_log=None))
    files.append_ray_logs(exp, files.RayLogs(logs_dir=logs, driver_log=f"{logs}/hpsearch_driver_1.log"))
    spec = files.experiment_spec(exp)
    summary = summarize_experiment(exp, wall_time_s=61.0, interrupted=False)

    assert _report_search(spec, summary) == 0

    out = capsys.readouterr().out
    errors = out[out.index("\nErrors") : out.index("\nExperiment folder")]
    assert errors.splitlines() == [
        "",
        "Errors (2): one line each, the full tracebacks are in the files named",
        "  trial_id  lr     hidden  layers  dropout  error                                      traceback",
        f"  aaaa0004  0.001  64      1       0.2      RuntimeError: CUDA out of memory           "
        f"{exp}/{trial_dir_name(4, trials[3])}/error.txt",
        f"  aaaa0006  0.1    32      3       0        ValueError: x='bad' is not a usable value  "
        f"{exp}/{trial_dir_name(6, trials[5])}/error.txt",
    ]
    assert "Traceback" not in out and "|" not in out  # the tracebacks stay in their files
    assert out.splitlines()[-3:] == [
        f"Experiment folder: {exp}",
        f"Ray's logs: {logs}",  # the latest session's (the run, or the last resume)
        "Wall time: 61.0 s (6 trials: 2 finished, 2 stopped, 2 errored)",
    ]
