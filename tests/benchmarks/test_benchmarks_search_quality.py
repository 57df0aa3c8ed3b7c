"""benchmarks/search_quality.py: the figures it derives from reports (pure, no Ray)."""

from __future__ import annotations

import pytest

from benchmarks import search_quality as sq

REPORTS = [(1.0, 0.80), (1.5, 0.95), (2.0, 0.90), (4.0, 0.975), (5.0, 0.96)]


def test_anytime_counts_epochs_in_report_order_and_keeps_the_best_so_far() -> None:
    assert sq.anytime(REPORTS) == ([1, 2, 3, 4, 5], [1.0, 1.5, 2.0, 4.0, 5.0], [0.80, 0.95, 0.95, 0.975, 0.975])


@pytest.mark.parametrize(
    ("target", "expected"),
    [(0.95, (2, 1.5)), (0.97, (4, 4.0)), (0.99, (None, None))],
    ids=["second", "fourth", "never"],
)
def test_to_target_is_the_first_report_reaching_it(target: float, expected: tuple) -> None:
    assert sq.to_target(REPORTS, target) == expected


def test_median_counts_an_unreached_target_as_infinite() -> None:
    assert sq.median([10, None, 30]) == 30
    assert sq.median([10, None, None]) is None
    assert sq.ratio(10, 30) == pytest.approx(1 / 3)
    assert sq.ratio(10, None) is None and sq.ratio(None, 30) is None


def test_per_trial_overhead_and_the_trial_size_where_parallel_trials_overtake() -> None:
    run = {"parallel": 2, "wall_s": 110.0, "ray_start_s": 10.0, "trials": 20, "epochs_run": 100}
    assert sq.per_trial_overhead(run, plain_epoch_s=0.2) == pytest.approx((2 * 100 - 100 * 0.2) / 20)  # 9 s
    assert sq.overtake_s(9.0, 2) == 9.0 and sq.overtake_s(9.0, 4) == 3.0


def test_spec_overrides_size_random_fifo_to_the_budget_and_leave_plain_optuna_only_the_space() -> None:
    random = dict(o.split("=", 1) for o in sq.spec_overrides("random_fifo", 1, 150, 10, heavy=False))
    assert random["num_samples"] == "15" and random["scheduler"] == '{"type": "fifo"}'
    assert random["searcher"] == '{"type": "random", "seed": 1}' and random["search_space.seed"] == "1"
    plain = dict(o.split("=", 1) for o in sq.spec_overrides("optuna_plain", 0, 150, 30, heavy=True))
    assert "searcher" not in plain and plain["search_space.hidden"] == "3072"


def test_the_whole_machine_way_gives_one_trial_every_cpu_and_as_many_torch_threads() -> None:
    cpus = sq.os.cpu_count() or 1
    whole = dict(o.split("=", 1) for o in sq.spec_overrides("tpe_asha_whole", 0, 80, 12, heavy=True))
    assert sq.json.loads(whole["scaling"])["resources_per_worker"]["CPU"] == pytest.approx(cpus - 0.1)
    assert whole["resources.driver_cpus"] == "0.1" and whole["search_space.threads"] == str(cpus)
    assert sq.json.loads(whole["scheduler"])["type"] == "asha" and whole["num_samples"] == "80"
    shared = dict(o.split("=", 1) for o in sq.spec_overrides("tpe_asha", 0, 80, 12, heavy=True))
    assert (
        sq.json.loads(shared["scaling"])["resources_per_worker"]["CPU"] == 0.9 and "search_space.threads" not in shared
    )
    assert "tpe_asha_whole" not in sq.PARTS["shipped"].methods  # a 1-thread model: the shipped part compares 4 ways
