"""The pure parts of the search-feature benchmarks (multi_objective, warm_start, conditional) and the
_common helpers they share: hypervolume and its median, epochs to target, the tables, the
specs each way runs. No Ray."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks import _common as common
from benchmarks import conditional, warm_start
from benchmarks import multi_objective as mo
from benchmarks import search_quality as sq

# ----------------------------------------------------------------------------- _common: reports from a folder


def write_history(folder, trial_id, rows):
    run = folder / "train" / trial_id
    run.mkdir(parents=True)
    (run / "hpsearch_history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_experiment_reports_interleave_every_trial_by_the_time_each_was_forwarded(tmp_path):
    write_history(
        tmp_path, "a", [{"time": 100.0, "epoch": 1, "val_acc": 0.5}, {"time": 102.0, "epoch": 2, "val_acc": 0.9}]
    )
    write_history(
        tmp_path, "b", [{"time": 101.0, "epoch": 1, "val_acc": 0.96}, {"time": 103.0, "epoch": 2, "val_acc": 0.98}]
    )
    reports = common.experiment_reports(tmp_path, start=99.0)
    assert [(r["trial_id"], r["epoch"], r["seconds"]) for r in reports] == [
        ("a", 1, 1.0),
        ("b", 1, 2.0),
        ("a", 2, 3.0),
        ("b", 2, 4.0),
    ]
    # epochs to target as search_quality counts them: every epoch of every trial up to the first hit
    assert sq.to_target(common.metric_reports(reports, "val_acc"), 0.97) == (4, 4.0)
    assert sq.to_target(common.metric_reports(reports, "val_acc"), 0.95) == (2, 2.0)


def test_experiment_reports_skip_a_line_cut_short_and_metric_reports_skip_reports_without_the_metric(tmp_path):
    write_history(tmp_path, "a", [{"time": 5.0, "val_acc": 0.5}, {"time": 6.0, "train_loss": 1.0}])
    with (tmp_path / "train" / "a" / "hpsearch_history.jsonl").open("a") as f:
        f.write('{"time": 7.0, "val_')  # a kill mid-write
    reports = common.experiment_reports(tmp_path)
    assert len(reports) == 2
    assert common.metric_reports(reports, "val_acc") == [(5.0, 0.5)]
    assert common.experiment_reports(tmp_path / "nothing-here") == []


def test_to_target_rows_show_each_seed_the_median_and_an_unreached_target_as_a_dash():
    runs = [
        {"method": "warm", "seed": 0, "reports": [(1.0, 0.9), (2.0, 0.975)], "trials": 2},
        {"method": "warm", "seed": 1, "reports": [(1.0, 0.98)], "trials": 2},
        {"method": "warm", "seed": 2, "reports": [(1.0, 0.5)], "trials": 2},
        {"method": "cold", "seed": 0, "reports": [(1.0, 0.5)], "trials": 2},
    ]
    summary = sq.summarize(runs, ("warm", "cold"), 0.97)
    header, rows = common.to_target_rows(summary, {"warm": "warm-started"}, budget={"warm": 40, "cold": 40})
    assert header[-1] == "epoch budget" and len(rows[0]) == len(header)
    assert rows[0] == ["warm-started", "2/3", "2, 1, -", "2", "0.975", "2", "40"]
    assert rows[1][:4] == ["cold", "0/1", "-", "-"]


# ----------------------------------------------------------------------------- multi_objective


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([(0.5, 100.0)], 0.5 * 900.0),
        ([(0.5, 100.0), (0.2, 500.0)], 0.5 * 900.0 + 0.3 * 500.0),  # two steps of the staircase
        ([(0.5, 100.0), (0.6, 200.0)], 0.5 * 900.0),  # a dominated point adds nothing
        ([(0.5, 100.0), (float("nan"), 1.0), (0.1, float("inf"))], 0.5 * 900.0),  # NaN/inf never count
        ([(1.5, 100.0), (0.5, 1000.0), (0.5, 2000.0)], 0.0),  # not better than the reference in both
        ([], 0.0),
    ],
    ids=["one", "staircase", "dominated", "nan", "outside", "none"],
)
def test_hypervolume_2d_is_the_area_the_front_dominates_up_to_the_reference(points, expected):
    assert mo.hypervolume_2d(points, (1.0, 1000.0)) == pytest.approx(expected)


def test_pareto_2d_keeps_the_non_dominated_points_by_the_first_objective():
    points = [(0.3, 50.0), (0.1, 900.0), (0.2, 60.0), (0.2, 900.0), (0.3, 40.0), (float("nan"), 1.0)]
    assert mo.pareto_2d(points) == [(0.1, 900.0), (0.2, 60.0), (0.3, 40.0)]


def test_the_parameter_count_spans_the_space_and_the_reference_lies_beyond_it():
    assert mo.mlp_params(8, 1) == 65 * 8 + 9 * 10 == 610
    assert mo.mlp_params(256, 3) == 65 * 256 + 2 * 257 * 256 + 257 * 10 == 150_794
    assert mo.REFERENCE[1] > mo.mlp_params(256, 3) and mo.REFERENCE[0] < math.log(10)  # chance's loss is ln 10
    assert mo.box_fraction(mo.REFERENCE[0] * mo.REFERENCE[1] / 2, mo.REFERENCE) == pytest.approx(0.5)


def mo_run(method, seed, hv):
    return {"method": method, "seed": seed, "hypervolume": hv, "front": [[0.1, 1.0]], "epochs_run": 160, "trials": 8}


def test_the_median_hypervolume_decides_whether_a_sampler_beats_random_and_the_seeds_are_paired():
    runs = [
        *(mo_run("random", s, hv) for s, hv in enumerate([100.0, 200.0, 300.0])),
        *(mo_run("nsga2", s, hv) for s, hv in enumerate([150.0, 250.0, 50.0])),  # median 150 < 200
        *(mo_run("tpe", s, hv) for s, hv in enumerate([90.0, 210.0, 400.0])),  # median 210 > 200
    ]
    summary = mo.summarize(runs, ("nsga2", "tpe", "random"))
    assert summary["random"]["median_hypervolume"] == 200.0
    assert summary["tpe"]["median_box_fraction"] == pytest.approx(210.0 / (mo.REFERENCE[0] * mo.REFERENCE[1]))
    found = mo.verdicts(summary)
    assert found["nsga2"]["beats_random_on_median"] is False and found["nsga2"]["seeds_won"] == 2
    assert found["tpe"]["beats_random_on_median"] is True and found["tpe"]["seeds_won"] == 2
    assert found["tpe"]["median_ratio_to_random"] == pytest.approx(1.05)
    lines = mo.verdict_lines(found)
    assert lines[0].startswith("Optuna NSGA-II does NOT beat random") and "2 of 3 seeds" in lines[0]
    assert "beats random" in lines[1] and "1.050x" in lines[1]
    header, rows = mo.table(summary)
    assert len(rows) == 3 and all(len(r) == len(header) for r in rows) and rows[2][0] == "random"


def test_verdicts_need_random_in_the_comparison():
    assert mo.verdicts(mo.summarize([mo_run("tpe", 0, 1.0)], ("tpe",))) == {}


def test_every_multi_objective_way_has_the_same_objectives_scheduler_and_epoch_budget():
    specs = {m: mo.spec_for(m, 2, 8, 20, "/tmp/x") for m in mo.LABELS}
    for spec in specs.values():
        assert spec["metric"] == ["val_loss", "n_params"] and spec["mode"] == ["min", "min"]
        assert spec["scheduler"] == {"type": "fifo"} and spec["num_samples"] == 8
        assert spec["search_space"]["epochs"] == 20 and spec["search_space"]["seed"] == 2
        assert spec["searcher"]["seed"] == 2
    assert specs["nsga2"]["searcher"] == {"type": "optuna", "sampler": "nsga2", "seed": 2, "population_size": 4}
    assert specs["tpe"]["searcher"]["sampler"] == "tpe" and specs["random"]["searcher"]["type"] == "random"
    assert specs["tpe"]["search_space"]["hidden"] == {"type": "int", "low": 8, "high": 256, "log": True}
    with pytest.raises(ValueError, match="unknown method"):
        mo.searcher_for("hyperopt", 0, 8)


# ----------------------------------------------------------------------------- warm_start


def test_warm_and_cold_differ_only_in_the_warm_start_and_the_first_search_in_its_seed(tmp_path):
    first, warm, cold = (warm_start.spec_for(r, 1, 6, 20, str(tmp_path)) for r in warm_start.ROLES)
    assert warm["warm_start"] == {"from": str(tmp_path / "ws-first-seed1")} and "warm_start" not in cold
    same = {k: v for k, v in warm.items() if k not in ("name", "warm_start")}
    assert same == {k: v for k, v in cold.items() if k != "name"}  # same seed, searcher, space and budget
    assert warm["searcher"]["seed"] == 1 and first["searcher"]["seed"] == 1001
    assert first["name"] == "ws-first-seed1" and warm["scheduler"] == {"type": "fifo"}


def test_warm_against_cold_counts_who_reached_the_target_sooner_per_seed():
    runs = [
        {"method": "warm", "seed": 0, "reports": [(1.0, 0.98)], "trials": 1},
        {"method": "warm", "seed": 1, "reports": [(1.0, 0.5), (2.0, 0.98)], "trials": 1},
        {"method": "warm", "seed": 2, "reports": [(1.0, 0.5)], "trials": 1},
        {"method": "cold", "seed": 0, "reports": [(1.0, 0.5), (2.0, 0.5), (3.0, 0.99)], "trials": 1},
        {"method": "cold", "seed": 1, "reports": [(1.0, 0.5), (2.0, 0.98)], "trials": 1},
        {"method": "cold", "seed": 2, "reports": [(1.0, 0.99)], "trials": 1},
    ]
    out = warm_start.compare(sq.summarize(runs, ("warm", "cold"), 0.97))
    assert out["sooner_per_seed"] == ["warm", "tie", "cold"] and out["warm_sooner_in"] == 1
    assert out["warm_vs_cold_median_epochs"] == pytest.approx(2 / 2)


# ----------------------------------------------------------------------------- conditional


def test_conditional_ways_share_the_space_and_budget_and_the_space_has_the_contracts_conditions():
    tpe, rnd = (conditional.spec_for(m, 0, 9, 20, "/tmp/x") for m in ("tpe", "random"))
    assert tpe["search_space"] == rnd["search_space"] and tpe["num_samples"] == rnd["num_samples"] == 9
    space = tpe["search_space"]
    assert space["momentum"]["when"] == {"optimizer": "sgd"} and space["beta1"]["when"] == {"optimizer": "adam"}
    assert space["optimizer"] == {"type": "choice", "values": ["sgd", "adam"]} and space["epochs"] == 20
    assert tpe["searcher"] == {"type": "optuna", "sampler": "tpe", "seed": 0, "n_startup_trials": 3}  # 9 // 3
    assert rnd["searcher"] == {"type": "random", "seed": 0} and tpe["scheduler"] == rnd["scheduler"] == {"type": "fifo"}
    space["momentum"]["when"]["optimizer"] = "adam"  # each spec gets its own copy of the space
    assert conditional.SPACE["momentum"]["when"] == {"optimizer": "sgd"}


def test_condition_violations_name_a_parameter_present_without_its_condition_or_missing_with_it():
    good = [{"optimizer": "sgd", "momentum": 0.9}, {"optimizer": "adam", "beta1": 0.9}]
    assert conditional.condition_violations(good) == []
    bad = [{"optimizer": "sgd", "momentum": 0.9, "beta1": 0.9}, {"optimizer": "adam", "beta1": float("nan")}]
    assert conditional.condition_violations(bad) == [
        "trial 0: beta1 present with optimizer='sgd'",
        "trial 1: beta1 absent with optimizer='adam'",
    ]


def test_optimizer_counts_add_up_every_seed_per_way():
    runs = [
        {"method": "tpe", "configs": [{"optimizer": "sgd"}, {"optimizer": "adam"}]},
        {"method": "tpe", "configs": [{"optimizer": "adam"}]},
        {"method": "random", "configs": [{"optimizer": "sgd"}]},
    ]
    assert conditional.optimizer_counts(runs) == {"tpe": {"sgd": 1, "adam": 2}, "random": {"sgd": 1}}


def test_a_search_is_stalled_once_no_history_file_has_grown_for_stall_s(tmp_path):
    check = common.history_stall_check(tmp_path, stall_s=60)
    assert check() is None  # nothing reported yet, but the search only just started
    write_history(tmp_path, "a", [{"time": 1.0, "val_acc": 0.5}])
    assert check() is None
    old = common.time.time() - 90
    common.os.utime(tmp_path / "train" / "a" / "hpsearch_history.jsonl", (old, old))
    assert check() == "no trial reported for 90 s"
    assert common.stopped_note({"stopped": "no trial reported for 90 s"}).startswith("; STOPPED (no trial")
    assert common.stopped_note({"stopped": None}) == ""


def test_the_sizes_and_ways_come_from_the_defaults_quick_and_the_flags() -> None:
    import argparse

    from benchmarks._common import methods_from, sizes_from

    defaults, quick = {"seeds": 3, "trials": 6, "epochs": 20}, {"seeds": 1, "trials": 2, "epochs": 3}
    flags = argparse.Namespace(quick=False, seeds=None, trials=4, epochs=None, methods=None)
    assert sizes_from(flags, defaults, quick) == {"seeds": 3, "trials": 4, "epochs": 20}
    flags.quick = True
    assert sizes_from(flags, defaults, quick) == {"seeds": 1, "trials": 4, "epochs": 3}  # a flag beats --quick

    parser = argparse.ArgumentParser()
    assert methods_from(parser, flags, ["tpe", "random"]) == ("tpe", "random")
    flags.methods = "random"
    assert methods_from(parser, flags, ["tpe", "random"]) == ("random",)
    flags.methods = "tpe,grid"
    with pytest.raises(SystemExit):
        methods_from(parser, flags, ["tpe", "random"])


# ----------------------------------------------------------------------------- pbt


def test_pbt_benchmark_ways_differ_only_in_their_scheduler():
    from benchmarks import pbt
    from hpsearch.spec import load_spec

    specs = {way: pbt.spec_for(way, 2, 4, 12, "/tmp/x") for way in pbt.WAYS}
    assert specs["pbt"]["scheduler"]["type"] == "pbt" and specs["pbt"]["scheduler"]["perturbation_interval"] == 3
    assert specs["asha"]["scheduler"] == {"type": "asha", "max_t": 12, "grace_period": 3, "reduction_factor": 2}
    assert specs["random"]["scheduler"] == {"type": "fifo"}
    for way, spec in specs.items():
        assert spec["num_samples"] == 4 and spec["search_space"]["epochs"] == 12 and spec["search_space"]["seed"] == 2
        assert spec["searcher"] == {"type": "random", "seed": 2}
        assert load_spec(spec, check_trainable=False).name == f"pbt-bench-{way}-seed2"  # each one runs as written
    assert pbt.spec_for("pbt", 0, 2, 4, "/tmp/x")["scheduler"]["perturbation_interval"] == 2  # --quick: 2 perturbations
    with pytest.raises(ValueError, match="unknown way 'pb3'"):
        pbt.spec_for("pb3", 0, 4, 12, "/tmp/x")
