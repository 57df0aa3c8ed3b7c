"""benchmarks/head_memory.py: its pure helpers (process kinds, the fit, the head sizes), no Ray."""

from __future__ import annotations

import pytest

from benchmarks import head_memory as hm

GB = hm.GB


@pytest.mark.parametrize(
    ("title", "name", "kind"),
    [
        # the titles as Ray 2.60 sets them, read from /proc/PID/cmdline during a run
        ("ray::ImplicitFunc.train", "ray::ImplicitFu", "trial actor"),
        ("ray::ImplicitFunc", "ray::ImplicitFu", "trial actor"),
        ("ray::_QueueActor.get", "ray::_QueueActo", "queue actor"),
        ("ray::TrainController.run", "ray::TrainContr", "train controller"),
        ("ray::PlacementGroupCleaner", "ray::PlacementG", "pg cleaner"),
        ("ray::SynchronizationActor", "ray::Synchroniz", "sync actor"),
        ("ray::DatasetManager", "ray::DatasetMan", "dataset manager"),
        ("ray::PreemptionWatcher", "ray::Preemption", "preemption watcher"),
        ("ray::RayTrainWorker", "ray::RayTrainWo", "train worker"),
        ("ray::RayTrainWorker.run_train_fn", "ray::RayTrainWo", "train worker"),
        ("ray::IDLE", "ray::IDLE", "idle worker"),
        ("ray::_AutoscalingCoordinatorActor", "ray::_Autoscali", "autoscaling coordinator"),
        ("ray::DashboardAgent", "ray::DashboardA", "dashboard agent"),
        ("ray::RuntimeEnvAgent", "ray::RuntimeEnv", "runtime env agent"),
        ("/x/ray/core/src/ray/gcs/gcs_server --log_dir=/tmp/ray/session_1/logs", "gcs_server", "gcs"),
        ("/x/ray/core/src/ray/raylet/raylet --raylet_socket_name=/tmp/ray/s", "raylet", "raylet"),
        ("/x/bin/python /x/ray/dashboard/dashboard.py --host=127.0.0.1", "python", "dashboard"),
        ("ray-dashboard-StateHead-0 (/x/bin/python -B -c ...)", "ray-dashboard-S", "dashboard"),
        (
            "/x/bin/python -B -c from multiprocessing.forkserver import main; main(25, 27, ['ray', 'ray.dashboard.x'])",
            "python",
            "dashboard",
        ),
        ("/x/bin/python -u /x/ray/_private/log_monitor.py --session-dir=/tmp/ray/s", "python", "log monitor"),
        ("/x/bin/python -u /x/ray/autoscaler/_private/monitor.py --logs-dir=/tmp/ray/s", "python", "monitor"),
        ("ray::SomethingNew", "ray::Something", "other ray actor"),
        ("/x/bin/python -B -c from multiprocessing.resource_tracker import main;main(25)", "python", "other"),
    ],
)
def test_classify_names_each_process_of_a_ray_session_by_its_title(title: str, name: str, kind: str) -> None:
    assert hm.classify(title, name) == kind


def test_the_search_process_is_told_apart_by_pid_not_title() -> None:
    assert hm.classify("/x/bin/python benchmarks/head_memory.py --measure", "python", is_search_process=True) == (
        hm.SEARCH_PROCESS
    )
    assert hm.classify("/x/bin/python benchmarks/head_memory.py --measure", "python") == hm.OTHER


def test_a_title_cut_short_falls_back_on_the_process_name() -> None:
    assert hm.classify("", "gcs_server") == "gcs"


def test_every_head_and_worker_kind_is_a_kind_classify_can_give() -> None:
    kinds = {kind for kind, _ in hm.KINDS}
    assert set(hm.HEAD_KINDS) <= kinds and set(hm.WORKER_KINDS) <= kinds


def test_group_counts_and_sums_each_measure_per_kind() -> None:
    table = hm.group(
        [
            ("train worker", {"rss": 3.0, "pss": 2.0, "uss": 1.0}),
            ("train worker", {"rss": 5.0, "pss": 4.0, "uss": 3.0}),
            ("gcs", {"rss": 1.0, "pss": 1.0, "uss": 1.0}),
        ]
    )
    assert table == {
        "train worker": {"count": 2, "rss": 8.0, "pss": 6.0, "uss": 4.0},
        "gcs": {"count": 1, "rss": 1.0, "pss": 1.0, "uss": 1.0},
    }


def test_mean_of_snapshots_counts_a_kind_missing_from_one_as_zero() -> None:
    row = {"count": 1, "rss": 4.0, "pss": 2.0, "uss": 2.0}
    mean = hm.mean_of([{"idle worker": row}, {}])
    assert mean == {"idle worker": {"count": 0.5, "rss": 2.0, "pss": 1.0, "uss": 1.0}}


def test_part_sums_the_kinds_asked_for_and_none_means_everything_else() -> None:
    by_kind = {
        "trial actor": {"pss": 3.0},
        "train controller": {"pss": 2.0},
        "train worker": {"pss": 5.0},
        "gcs": {"pss": 1.0},
        "search process": {"pss": 4.0},
    }
    assert hm.part(by_kind, hm.HEAD_KINDS, "pss") == 5.0
    assert hm.part(by_kind, hm.WORKER_KINDS, "pss") == 5.0
    assert hm.part(by_kind, None, "pss") == 5.0  # the fixed processes: gcs + the search process


def test_fit_line_is_least_squares() -> None:
    assert hm.fit_line([1, 2, 4, 8], [3, 5, 9, 17]) == pytest.approx((2.0, 1.0))
    slope, intercept = hm.fit_line([1, 2, 3], [1, 3, 2])  # not on a line: the least-squares one
    assert slope == pytest.approx(0.5) and intercept == pytest.approx(1.0)


def test_fit_line_through_one_point_is_flat() -> None:
    assert hm.fit_line([4], [7.0]) == (0.0, 7.0)


@pytest.mark.parametrize(("xs", "ys"), [([], []), ([1, 2], [1.0])])
def test_fit_line_refuses_no_points_or_unequal_lengths(xs, ys) -> None:
    with pytest.raises(ValueError):
        hm.fit_line(xs, ys)


def test_trials_held_is_the_floor_of_what_is_left_over_per_trial() -> None:
    assert hm.trials_held(16, 1.2, 1.0) == 14
    assert hm.trials_held(64, 1.0, 1.5) == 42
    assert hm.trials_held(16, 1.0, 1.0, usable=0.95) == 14  # 15.2 - 1 = 14.2
    assert hm.trials_held(1, 2.0, 1.0) == 0  # the base alone does not fit: none, not a negative count


@pytest.mark.parametrize(("per_trial", "usable"), [(0.0, 1.0), (-1.0, 1.0), (1.0, 0.0), (1.0, 1.5)])
def test_trials_held_refuses_a_per_trial_or_usable_fraction_out_of_range(per_trial: float, usable: float) -> None:
    with pytest.raises(ValueError):
        hm.trials_held(16, 1.0, per_trial, usable)


def test_predicted_follows_the_line_or_scales_one_point() -> None:
    assert hm.predicted({1: 3.0, 2: 5.0}, 8) == pytest.approx(17.0)
    assert hm.predicted({2: 4.0}, 8) == pytest.approx(16.0)  # in proportion: an overestimate
    with pytest.raises(ValueError):
        hm.predicted({}, 8)


def test_torch_loaded_says_per_kind_whether_all_none_or_some_processes_have_it() -> None:
    processes = [
        {"kind": "train worker", "torch": True},
        {"kind": "train worker", "torch": True},
        {"kind": "gcs", "torch": False},
        {"kind": "trial actor", "torch": True},
        {"kind": "trial actor", "torch": False},
        {"kind": "raylet", "torch": None},
    ]
    assert hm.torch_loaded(processes) == {"train worker": "yes", "gcs": "no", "trial actor": "some", "raylet": "?"}


def _kinds(n: int, head: float, worker: float, fixed: float) -> dict[str, dict[str, float]]:
    """A per-kind table of N trials: a trial actor and a controller (head), a worker each, a fixed GCS; in GB."""
    row = lambda count, gb: {"count": count, **dict.fromkeys(hm.MEASURES, gb * GB)}  # noqa: E731
    return {
        "trial actor": row(n, n * head / 2),
        "train controller": row(n, n * head / 2),
        "train worker": row(n, n * worker),
        "gcs": row(1, fixed),
    }


def test_summarize_gives_the_slopes_the_base_and_the_head_sizes() -> None:
    points = {n: _kinds(n, head=1.0, worker=0.25, fixed=1.5) for n in (1, 2, 4, 8)}
    summary = hm.summarize(points, workers=1)
    assert summary["per_trial_head_gb"] == pytest.approx(1.0)
    assert summary["per_worker_gb"] == pytest.approx(0.25)
    assert summary["base_gb"] == pytest.approx(1.5)
    assert summary["head_holds"] == {"16": 14, "64": 62, "256": 254}
    assert summary["head_holds_below_ray_threshold"]["16"] == 13  # 15.2 - 1.5 = 13.7
    per_kind = summary["per_kind"]
    assert per_kind["train worker"]["count_by_n"] == {1: 1, 2: 2, 4: 4, 8: 8}
    assert per_kind["train worker"]["pss_mb_per_process"] == pytest.approx(256.0)
    assert per_kind["trial actor"]["pss_slope_mb_per_trial"] == pytest.approx(512.0)
    assert per_kind["gcs"]["pss_slope_mb_per_trial"] == pytest.approx(0.0)


def test_summarize_divides_the_workers_slope_by_the_workers_per_trial() -> None:
    points = {n: _kinds(n, head=1.0, worker=0.5, fixed=1.0) for n in (1, 2)}
    assert hm.summarize(points, workers=2)["per_worker_gb"] == pytest.approx(0.25)


def test_summarize_from_one_n_has_no_slope_and_says_no_head_size() -> None:
    summary = hm.summarize({1: _kinds(1, head=1.0, worker=0.25, fixed=1.0)}, workers=1)
    assert summary["per_trial_head_gb"] == 0.0
    assert summary["head_holds"] == {"16": None, "64": None, "256": None}


def test_composition_counts_kinds_but_leaves_idle_pool_workers_out() -> None:
    assert hm.composition(["train worker", "idle worker", "train worker", "gcs"]) == {"train worker": 2, "gcs": 1}


def test_complete_waits_for_every_trial_to_have_each_kind_it_has() -> None:
    full = {"trial actor": 8, "train controller": 8, "preemption watcher": 8, "train worker": 8, "gcs": 1}
    assert hm.complete(full, trials=8, workers=1)
    assert not hm.complete({**full, "preemption watcher": 6}, trials=8, workers=1)  # two still starting
    assert hm.complete({**full, "preemption watcher": 0}, trials=8, workers=1)  # a Ray that starts none
    assert not hm.complete({**full, "train worker": 7}, trials=8, workers=1)
    assert hm.complete({**full, "train worker": 16}, trials=8, workers=2)


def test_slim_keeps_each_snapshots_table_and_the_last_snapshots_processes() -> None:
    proc = {"pid": 1, "name": "gcs_server", "title": "x" * 300, "kind": "gcs", "rss": 2.0, "pss": 1.0, "uss": 1.0}
    run = {"trials": 1, "snapshots": [[proc], [proc, {**proc, "pid": 2}]], "idle": [proc]}
    out = hm.slim(run)
    assert out["trials"] == 1 and "snapshots" not in out and "idle" not in out
    assert [table["gcs"]["count"] for table in out["snapshots_by_kind"]] == [1, 2]
    assert [p["pid"] for p in out["processes"]] == [1, 2] and len(out["processes"][0]["title"]) == 80
    assert out["before_search_by_kind"] == {"gcs": {"count": 1, "rss": 2.0, "pss": 1.0, "uss": 1.0}}
