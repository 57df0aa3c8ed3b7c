"""``hpsearch plan SPEC --estimate``: the schedule model against hand-computed schedules, Tune's own scheduler
decisions, the budget, and the command's inputs, messages and exit codes. Pure: no Ray is started."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpsearch.cli import main
from hpsearch.errors import PlanError
from hpsearch.experiment.files import read_check, write_check
from hpsearch.planning.estimate import PERCENTILES, SEEDS, Timing, Workload, estimate, simulate, timing_from
from hpsearch.planning.estimate.asha import _Asha
from hpsearch.planning.estimate.median import _Median
from hpsearch.planning.estimate.policy import _Trial
from hpsearch.planning.estimate.spread import _percentile
from hpsearch.planning.render import render_estimate

#: start-up 10 s, 5 s an epoch, teardown 2 s: a trial of n epochs holds its slot 12 + 5n seconds
T = Timing(epoch_s=5, startup_s=10, teardown_s=2)
ASHA_4 = {"grace_period": 1, "max_t": 4, "reduction_factor": 2, "brackets": 1}


def asha(trials: int, slots: int, epochs: int = 4, **options: Any) -> Workload:
    return Workload(trials=trials, slots=slots, epochs=(epochs,), scheduler="asha", options={**ASHA_4, **options})


# --------------------------------------------------------------------------- FIFO, by hand


def test_fifo_runs_trials_in_waves_of_the_slots() -> None:
    """4 trials of 3 epochs on 2 slots: two waves of 10 + 3 x 5 + 2 = 27 s."""
    run = simulate(Workload(trials=4, slots=2, epochs=(3,), resources={"CPU": 1.5, "GPU": 1}), T)
    assert run.wall_s == 54
    assert run.epochs == 12
    assert run.last_epochs == (3, 3, 3, 3)
    assert run.busy_s == 4 * 27
    assert run.train_s == 4 * 15
    assert run.resource_hours == {"CPU": 1.5 * 108 / 3600, "GPU": 108 / 3600}
    assert (run.started, run.stopped_early, run.restarts, run.ended_by) == (4, 0, 0, None)
    assert run.utilisation(2) == pytest.approx(60 / (2 * 54))


def test_fifo_a_trial_starts_when_any_slot_is_free() -> None:
    """Searched epochs 1 or 5: the next trial takes the slot that frees first, not the next in turn."""
    w = Workload(trials=3, slots=2, epochs=(1, 5))
    # seed 0 draws the counts; read them back from the run and check the schedule they give
    run = simulate(w, T, seed=3)
    a, b, c = (12 + 5 * e for e in run.last_epochs)
    assert run.wall_s == max(a, b, min(a, b) + c)


def test_later_trials_start_warm_as_the_checks_restored_run_did() -> None:
    """4 trials of 3 epochs on 2 slots: the first wave starts in 10 s, the second in 6 s (warm)."""
    warm = Timing(epoch_s=5, startup_s=10, teardown_s=2, warm_startup_s=6)
    run = simulate(Workload(trials=4, slots=2, epochs=(3,)), warm)
    assert run.wall_s == 27 + (6 + 15 + 2)  # 50, not 54


def test_trials_sharing_a_node_share_its_cpus() -> None:
    """Alone, a trial keeps 2 CPUs busy starting and 1 training. 2 trials at once on a 2-CPU node: each start-up
    takes twice as long (the other's 2 CPUs of work for the whole start-up, on the same 2 CPUs), each epoch 1.5
    times (the other's 1 CPU of work over 2). The last trial, alone, is not slowed."""
    busy = Timing(epoch_s=4, startup_s=10, teardown_s=2, startup_cpus=2.0, epoch_cpus=1.0)
    w = Workload(trials=3, slots=2, epochs=(3,), node_slots=2, node_cpus=2.0)
    run = simulate(w, busy)
    assert run.wall_s == (20 + 3 * 6 + 2) + (10 + 3 * 4 + 2)  # two slowed, then the third alone: 64
    # the same trials on a 4-CPU node (the plan puts both there): each adds half its work
    wide = simulate(Workload(trials=3, slots=2, epochs=(3,), node_slots=2, node_cpus=4.0), busy)
    assert wide.wall_s == (15 + 3 * 5 + 2) + (10 + 3 * 4 + 2)
    # one trial per node: never slowed
    assert simulate(Workload(trials=3, slots=2, epochs=(3,), node_slots=1, node_cpus=2.0), busy).wall_s == 2 * 24
    # nothing measured: no slowdown
    assert simulate(w, T).wall_s == 2 * 27
    assert busy.slowdown(3.0, 2, 2.0) == 2.0  # a trial cannot keep more than the node's CPUs busy
    assert busy.slowdown(1.0, 8, 16.0) == pytest.approx(1 + 7 / 16)
    assert busy.slowdown(None, 8, 2.0) == busy.slowdown(2.0, 8, None) == 1.0


def test_the_check_s_cpu_use_reaches_the_estimate_and_its_notes(tmp_path: Path) -> None:
    record = {"startup_s": 30.0, "report_s": 5.0, "teardown_s": 1.0, "restore_startup_s": 20.0}
    timing = timing_from(
        {**record, "startup_cpus": 1.8, "report_cpus": 0.9}, check_file="c.json", spec_arg="s.yaml", workers=2
    )
    assert (timing.startup_s, timing.warm_startup_s, timing.restart_s) == (25.0, 15.0, 15.0)
    assert (timing.startup_cpus, timing.epoch_cpus) == (1.8, 0.9)
    est = estimate(Workload(trials=4, slots=2, epochs=(3,), node_slots=2, node_cpus=2.0), timing)
    assert any("2 trial(s) at once share a node of 2 CPUs: its start-up 1.9x slower" in n for n in est.notes())
    assert any("later ones in 15 s, as its restored run did" in n for n in est.notes())
    # a start-up given on the command line is taken as it is: no warm figure, no slowdown
    given = timing_from(record, check_file="c.json", spec_arg="s.yaml", startup_s=12.0)
    assert (given.warm_startup_s, given.startup_cpus, given.epoch_cpus) == (None, None, None)


# --------------------------------------------------------------------------- ASHA, by hand
# --------------------------------------------------------------------------- ASHA, by hand


def test_asha_on_one_slot_stops_at_the_rungs_tune_would() -> None:
    """rf 2, grace 1, max_t 4: rungs at epochs 1, 2 and 4. Qualities 5, 9, 1, 7 in that order:
    trial 0 is first at every rung and goes on; 9 > the median 5 at rung 1; 1 < the median of 5 and 9 (7)
    stops at epoch 1; 7 passes rung 1 (median of 5, 9, 1 is 5) and rung 2 (7 is not below the median 7)."""
    run = simulate(asha(4, 1), T, qualities=[5, 9, 1, 7])
    assert run.last_epochs == (4, 4, 1, 4)
    assert run.stopped_early == 1
    assert run.wall_s == 3 * (12 + 20) + (12 + 5)  # 113
    assert run.epochs == 13


def test_asha_on_two_slots_decides_by_what_reached_the_rung_first() -> None:
    """The same trials two at once: 0 and 1 reach each rung together (the lower trial first), both go to
    max_t (slots free at 32); 2 and 3 start at 32 and reach rung 1 at 47: 2 stops (free at 49); 3 (quality 6)
    passes rung 1 and stops at rung 2 (below the median of 5 and 9) at 52: its slot is free at 54."""
    run = simulate(asha(4, 2), T, qualities=[5, 9, 1, 6])
    assert run.last_epochs == (4, 4, 1, 2)
    assert run.stopped_early == 2
    assert run.wall_s == 54
    assert run.epochs == 11
    assert run.busy_s == 32 + 32 + 17 + 22


def test_asha_stops_every_trial_at_max_t_but_not_early() -> None:
    run = simulate(asha(3, 3, epochs=10), T, qualities=[2, 3, 1])
    assert run.last_epochs == (4, 4, 1)  # 1 falls below the median of 2 and 3 at rung 1; the others stop at max_t 4
    assert run.stopped_early == 1  # stopping at max_t is the trial's end, not early
    assert run.wall_s == 12 + 4 * 5


def test_asha_float_rungs_are_decided_at_the_first_report_past_them() -> None:
    """rf 2.5, grace 1, max_t 7: rungs at 1 and 2.5, decided at epochs 1 and 3."""
    run = simulate(asha(3, 1, epochs=7, max_t=7, reduction_factor=2.5), T, qualities=[5, 9, 6])
    # rung 1: 9 goes on over 5; 6 is below the 60th percentile of 5 and 9 (7.4)
    assert run.last_epochs == (7, 7, 1)
    run = simulate(asha(4, 1, epochs=7, max_t=7, reduction_factor=2.5), T, qualities=[5, 9, 1, 7])
    # 7 passes rung 1 (the 60th percentile of 1, 5 and 9 is 5.8) and stops at rung 2.5, at epoch 3 (7.4 again)
    assert run.last_epochs == (7, 7, 1, 3)


def test_percentile_is_numpys_default() -> None:
    numpy = pytest.importorskip("numpy")
    rng = random.Random(1)
    for n in (1, 2, 3, 7, 50):
        values = sorted(rng.random() for _ in range(n))
        for q in (0, 25, 50, 60, 66.66666666666667, 75, 100):
            assert _percentile(values, q) == numpy.percentile(values, q)


class _FakeTrial:
    """What Tune's schedulers read of a trial (hashable: the median rule keys its results by the trial)."""

    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id
        self.status = "RUNNING"


def _interleaved(trials: int, epochs: int, seed: int) -> list[tuple[int, int]]:
    """A random order of reports: each trial's epochs in order, the trials interleaved."""
    rng = random.Random(seed)
    left = {i: 1 for i in range(trials)}
    order = []
    while left:
        i = rng.choice(sorted(left))
        order.append((i, left[i]))
        left[i] += 1
        if left[i] > epochs:
            del left[i]
    return order


@pytest.mark.parametrize(
    "options",
    [
        {"grace_period": 1, "max_t": 9, "reduction_factor": 3},
        {"grace_period": 2, "max_t": 16, "reduction_factor": 2},
        {"grace_period": 1, "max_t": 10, "reduction_factor": 2.5},
        {"grace_period": 1, "max_t": 100, "reduction_factor": 4},
    ],
)
def test_asha_decides_as_tunes_asha_scheduler(options: dict[str, Any]) -> None:
    """The same reports, in the same order, to the model and to Ray Tune's ASHAScheduler: the same decisions."""
    pytest.importorskip("ray.tune")
    from ray.tune.schedulers import ASHAScheduler, TrialScheduler

    epochs = min(int(options["max_t"]), 12)
    for seed in range(3):
        rng = random.Random(seed)
        trials = [_Trial(i, rng.random(), epochs, epochs) for i in range(25)]
        w = Workload(trials=25, slots=25, epochs=(epochs,), scheduler="asha", options={**options, "brackets": 1})
        model = _Asha(w, trials, rng)
        tune = ASHAScheduler(time_attr="epoch", metric="q", mode="max", **options)
        fakes = [_FakeTrial(str(i)) for i in range(25)]
        for trial, fake in zip(trials, fakes, strict=True):
            model.on_add(trial)
            tune.on_trial_add(None, fake)
        stopped: set[int] = set()
        for i, epoch in _interleaved(25, epochs, seed):
            if i in stopped:
                continue
            theirs = tune.on_trial_result(None, fakes[i], {"epoch": epoch, "q": trials[i].quality})
            ours = model.on_report(trials[i], epoch)
            assert (ours == "stop") == (theirs == TrialScheduler.STOP), (seed, i, epoch)
            if ours == "stop":
                stopped.add(i)
        assert stopped  # the comparison saw stops


@pytest.mark.parametrize(("grace", "min_samples"), [(1, 3), (2, 2), (3, 5)])
def test_median_decides_as_tunes_median_stopping_rule(grace: int, min_samples: int) -> None:
    pytest.importorskip("ray.tune")
    from types import SimpleNamespace

    from ray.tune.schedulers import MedianStoppingRule, TrialScheduler

    controller = SimpleNamespace(get_live_trials=lambda: [])  # no trial waits: Tune never pauses for one
    for seed in range(3):
        rng = random.Random(seed)
        trials = [_Trial(i, rng.random(), 8, 8) for i in range(20)]
        w = Workload(
            trials=20,
            slots=20,
            epochs=(8,),
            scheduler="median",
            options={"grace_period": grace, "min_samples_required": min_samples},
        )
        model = _Median(w, trials, rng)
        tune = MedianStoppingRule(
            time_attr="epoch", metric="q", mode="max", grace_period=grace, min_samples_required=min_samples
        )
        fakes = [_FakeTrial(str(i)) for i in range(20)]
        stopped: set[int] = set()
        for i, epoch in _interleaved(20, 8, seed):
            if i in stopped:
                continue
            theirs = tune.on_trial_result(controller, fakes[i], {"epoch": epoch, "q": trials[i].quality})
            ours = model.on_report(trials[i], epoch)
            assert (ours == "stop") == (theirs == TrialScheduler.STOP), (seed, i, epoch)
            if ours == "stop":
                stopped.add(i)
        assert stopped


# --------------------------------------------------------------------------- median, hyperband, PBT: sanity


def test_median_stops_no_trial_before_it_has_enough_others() -> None:
    w = Workload(
        trials=3, slots=3, epochs=(6,), scheduler="median", options={"grace_period": 1, "min_samples_required": 3}
    )
    assert simulate(w, T).last_epochs == (6, 6, 6)  # each trial has 2 others: never 3 samples


def test_median_stops_the_weaker_trials_after_the_grace_period() -> None:
    w = Workload(
        trials=40, slots=4, epochs=(10,), scheduler="median", options={"grace_period": 3, "min_samples_required": 3}
    )
    fifo = simulate(Workload(trials=40, slots=4, epochs=(10,)), T)
    for seed in range(5):
        run = simulate(w, T, seed=seed)
        assert run.stopped_early > 0
        assert run.epochs < fifo.epochs and run.wall_s < fifo.wall_s
        assert min(run.last_epochs) >= 3  # nothing stops before the grace period


def test_hyperband_with_fewer_slots_than_a_bracket_runs_every_trial_to_max_t_like_fifo() -> None:
    """As the README says of hpsearch's HyperBand: with the searcher held to the trials at once, the first
    bracket takes every trial (it is never filled) and runs it to max_t."""
    w = Workload(trials=12, slots=2, epochs=(9,), scheduler="hyperband", options={"max_t": 9, "reduction_factor": 3})
    run = simulate(w, T)
    fifo = simulate(Workload(trials=12, slots=2, epochs=(9,)), T)
    assert run.last_epochs == (9,) * 12
    assert (run.wall_s, run.epochs, run.stopped_early) == (fifo.wall_s, fifo.epochs, 0)


def test_hyperband_halves_its_brackets_when_they_fit_and_pays_for_each_resume() -> None:
    w = Workload(trials=30, slots=30, epochs=(9,), scheduler="hyperband", options={"max_t": 9, "reduction_factor": 3})
    run = simulate(w, T, seed=1)
    assert run.stopped_early > 0
    assert run.restarts > 0  # a paused trial that goes on starts a nested run again
    assert run.epochs < 30 * 9
    assert run.stalled == 0
    # paused trials are resumed: a bracket's survivors reach max_t
    assert 9 in run.last_epochs and min(run.last_epochs) < 9


def test_synch_pbt_pauses_every_trial_at_every_perturbation() -> None:
    """4 trials, all at once, 8 epochs, perturbation every 2: each trial pauses at epochs 2, 4, 6 and 8 (its
    last: it is started again only to end). Every segment is in step: 22 s, three of 10 + 10 + 2, and 12."""
    w = Workload(
        trials=4,
        slots=4,
        epochs=(8,),
        scheduler="pbt",
        options={"perturbation_interval": 2, "quantile_fraction": 0.25, "synch": True},
    )
    run = simulate(w, T)
    assert run.restarts == 4 * 4
    assert run.wall_s == 22 + 3 * 22 + 12
    assert run.stalled == 0


def test_async_pbt_restarts_only_exploited_trials_when_the_population_fits() -> None:
    w = Workload(
        trials=8,
        slots=8,
        epochs=(8,),
        scheduler="pbt",
        options={"perturbation_interval": 2, "quantile_fraction": 0.25, "synch": False},
    )
    for seed in range(5):
        run = simulate(w, T, seed=seed)
        # at each of 3 perturbation points before the end at most the lower quarter (2 of 8) is exploited
        assert 0 < run.restarts
        assert run.epochs >= 8 * 8  # an exploited trial goes back to its donor's epoch, never forward past it
        assert run.stalled == 0


def test_async_pbt_takes_turns_when_the_population_does_not_fit() -> None:
    options = {"perturbation_interval": 2, "quantile_fraction": 0.25, "synch": False}
    small = simulate(Workload(trials=8, slots=2, epochs=(8,), scheduler="pbt", options=options), T)
    whole = simulate(Workload(trials=8, slots=8, epochs=(8,), scheduler="pbt", options=options), T)
    assert small.restarts > whole.restarts  # each pause for another trial's turn is a restart
    assert small.wall_s > 4 * whole.wall_s * 0.5
    assert small.stalled == 0 and all(e >= 8 for e in small.last_epochs)


# --------------------------------------------------------------------------- budget


def test_a_wall_time_budget_ends_the_search_at_its_limit() -> None:
    w = Workload(trials=4, slots=2, epochs=(3,), resources={"CPU": 1}, max_wall_time_s=30)
    run = simulate(w, T)
    assert (run.ended_by, run.wall_s) == ("max_wall_time", 30)
    assert run.started == 4  # the second wave started at 27
    assert run.epochs == 6  # the second wave's first epoch would end at 42
    assert run.busy_s == 2 * 27 + 2 * 3
    assert run.resource_hours == {"CPU": 60 / 3600}


def test_a_resource_budget_ends_the_search_when_it_is_used_up() -> None:
    """Two trials of 1 CPU at once: 0.01 CPU-hours (36 CPU-seconds) are used up at 18 s."""
    w = Workload(
        trials=4, slots=2, epochs=(3,), resources={"CPU": 1}, max_wall_time_s=40, max_resource_hours={"CPU": 0.01}
    )
    run = simulate(w, T)
    assert run.ended_by == "max_resource_hours.CPU"
    assert run.wall_s == pytest.approx(18)
    assert run.reached == {"max_resource_hours.CPU": pytest.approx(18), "max_wall_time": 40}
    assert (run.started, run.epochs) == (2, 2)
    assert run.resource_hours["CPU"] == pytest.approx(0.01)


def test_a_budget_the_search_never_reaches_changes_nothing() -> None:
    plain = simulate(Workload(trials=4, slots=2, epochs=(3,), resources={"GPU": 1}), T)
    w = Workload(
        trials=4,
        slots=2,
        epochs=(3,),
        resources={"GPU": 1},
        max_wall_time_s=3600,
        max_resource_hours={"GPU": 10, "TPU": 1},
    )
    run = simulate(w, T)
    assert run.ended_by is None and run.reached == {}
    assert (run.wall_s, run.epochs, run.resource_hours) == (plain.wall_s, plain.epochs, plain.resource_hours)
    limits = {b["key"]: b for b in estimate(w, T).budget()}
    assert limits["budget.max_resource_hours.TPU"]["held"] is False
    assert limits["budget.max_wall_time"]["ends_search_in"] == 0


def test_an_estimate_gives_the_range_over_its_runs() -> None:
    est = estimate(asha(200, 16, epochs=27, max_t=27, reduction_factor=3), T)
    assert len(est.runs) == SEEDS
    walls = sorted(r.wall_s for r in est.runs)
    assert est.wall.low == pytest.approx(_percentile(walls, PERCENTILES[0]))
    assert est.wall.high == pytest.approx(_percentile(walls, PERCENTILES[1]))
    assert walls[0] <= est.wall.low < est.wall.high <= walls[-1]  # which trials are good changes the schedule
    data = est.as_dict()
    assert data["runs"] == SEEDS and data["percentiles"] == list(PERCENTILES)
    assert data["wall_time_s"] == est.wall.as_dict()
    assert json.loads(json.dumps(data)) == data


def test_fifo_with_one_epoch_count_is_one_schedule() -> None:
    est = estimate(Workload(trials=4, slots=2, epochs=(3,)), T)
    assert est.wall.low == est.wall.high == 54
    assert "54 s" in render_estimate(est) and "54 s to" not in render_estimate(est)


# --------------------------------------------------------------------------- inputs: the check's record and the flags


CHECK = {
    "version": 1,
    "spec": "s.yaml",
    "ok": True,
    "workers": 2,
    "reports": 2,
    "startup_s": 14.0,  # the trial's start to its first report: the first epoch (4 s) included
    "report_s": 4.0,
    "teardown_s": 3.0,
    "restore_startup_s": 12.0,
    "measured_at": 1.8e9,
    "ray": "2.60.0",
    "host": "box",
    "cpus": 2,
}


def test_timing_from_the_check_takes_the_first_epoch_out_of_its_start_up() -> None:
    t = timing_from(CHECK, check_file="c.json", spec_arg="s.yaml")
    assert (t.epoch_s, t.startup_s, t.teardown_s, t.restart_s) == (4.0, 10.0, 3.0, 8.0)
    assert t.source.startswith("measured by hpsearch check (c.json, ") and "on box" in t.source
    assert t.notes == ()
    ran_other = timing_from(CHECK, check_file="c.json", spec_arg="s.yaml", workers=1)
    assert ran_other.notes == ("the check ran 2 workers per trial, the search's trials run 1: its times may differ",)


def test_timing_flags_override_the_check() -> None:
    t = timing_from(CHECK, check_file="c.json", spec_arg="s.yaml", epoch_s=30.0, teardown_s=1.0)
    assert (t.epoch_s, t.startup_s, t.teardown_s) == (30.0, 10.0, 1.0)
    assert t.given == ("--epoch-time", "--teardown")
    assert t.source.endswith("; --epoch-time, --teardown given")


def test_timing_from_flags_alone() -> None:
    t = timing_from(None, check_file="c.json", spec_arg="s.yaml", epoch_s=2.0, startup_s=11.0)
    assert (t.epoch_s, t.startup_s, t.teardown_s, t.restart_s) == (2.0, 11.0, 0.0, 11.0)
    assert t.source == "given (--epoch-time, --startup)"
    assert any("teardown" in n for n in t.notes)


@pytest.mark.parametrize(
    ("check", "flags", "why"),
    [
        (None, {}, "there is no check record at c.json"),
        (None, {"epoch_s": 2.0}, "there is no check record at c.json"),
        ({**CHECK, "report_s": None}, {}, "the check's record at c.json has no time per report or start-up"),
        ({**CHECK, "report_s": None}, {"epoch_s": 3.0}, None),  # the first epoch counted as --epoch-time
        ({**CHECK, "startup_s": None}, {}, "the check's record at c.json has no start-up"),
    ],
)
def test_timing_without_the_two_figures_says_what_to_do(check: Any, flags: dict[str, float], why: str | None) -> None:
    if why is None:
        assert timing_from(check, check_file="c.json", spec_arg="s.yaml", **flags).startup_s == 14 - 3
        return
    with pytest.raises(PlanError) as err:
        timing_from(check, check_file="c.json", spec_arg="s.yaml", **flags)
    assert str(err.value) == (
        f"--estimate needs how long a trial takes, and {why}: run `hpsearch check s.yaml` (it measures a trial's "
        "start-up, time per epoch and teardown on the cluster), or give --epoch-time SECONDS and --startup SECONDS"
    )


def test_read_check_never_raises_on_a_half_written_record(tmp_path: Path) -> None:
    assert read_check(tmp_path) is None
    write_check(tmp_path, CHECK)
    assert read_check(tmp_path) == CHECK
    (tmp_path / "hpsearch_check.json").write_text('{"version": 1, "startup_s": 1', encoding="utf-8")
    assert read_check(tmp_path) is None
    (tmp_path / "hpsearch_check.json").write_text("[1, 2]", encoding="utf-8")
    assert read_check(tmp_path) is None


# --------------------------------------------------------------------------- the command

SPEC = {
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
CLUSTER = "3x{CPU: 8, GPU: 3}"  # 4 trials at once
FLAGS = ["--epoch-time", "5", "--startup", "10", "--teardown", "2"]


@pytest.fixture
def spec_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return write_spec(tmp_path, SPEC)


def write_spec(folder: Path, spec: dict[str, Any]) -> Path:
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump({**spec, "storage_path": str(folder / "results")}), encoding="utf-8")
    return path


def test_plan_estimate_without_a_check_or_flags_exits_2_with_what_to_do(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", str(spec_file), "--cluster", CLUSTER, "--estimate"]) == 2
    out, err = capsys.readouterr()
    check_file = spec_file.parent / "results" / "est.check" / "hpsearch_check.json"
    assert out == ""
    assert err == (
        f"Error: --estimate needs how long a trial takes, and there is no check record at {check_file}: run "
        f"`hpsearch check {spec_file}` (it measures a trial's start-up, time per epoch and teardown on the cluster), "
        "or give --epoch-time SECONDS and --startup SECONDS\n"
    )


def test_plan_estimate_from_flags_prints_the_plan_then_the_estimate(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", str(spec_file), "--cluster", CLUSTER, "--estimate", *FLAGS]) == 0
    out = capsys.readouterr().out
    plan, _, est = out.partition("\n\nEstimate for est: 12 trials, 4 at once, scheduler asha\n")
    assert plan.startswith("Plan for est on the described cluster (3 nodes)")
    lines = est.splitlines()
    assert lines[0] == "  inputs          start-up 10 s, 5 s per epoch, teardown 2 s"
    assert lines[1] == "                  given (--epoch-time, --startup, --teardown)"
    assert lines[2] == (
        "  epochs          10 per trial (search_space.epochs); asha: grace_period 2, reduction_factor 2, max_t 10"
    )
    assert lines[3].startswith("  wall time       ")
    assert lines[4].startswith("  resource-hours  CPU ") and ", GPU " in lines[4]
    assert " of 120 epochs trained" in lines[5] and "stopped early" in lines[5]
    assert lines[6] == "  budget          none set (budget.max_wall_time, budget.max_resource_hours would be modelled)"


def test_plan_estimate_reads_the_check_and_the_flags_override_it(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = spec_file.parent / "results" / "est.check"
    folder.mkdir(parents=True)
    write_check(folder, CHECK)
    assert main(["plan", str(spec_file), "--cluster", CLUSTER, "--estimate", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    inputs = data["estimate"]["inputs"]
    assert (inputs["epoch_s"], inputs["startup_s"], inputs["teardown_s"], inputs["restart_s"]) == (4, 10, 3, 8)
    assert inputs["check_file"] == str(folder / "hpsearch_check.json")
    assert inputs["source"].startswith(f"measured by hpsearch check ({folder / 'hpsearch_check.json'}, ")
    assert main(["plan", str(spec_file), "--cluster", CLUSTER, "--estimate", "--epoch-time", "7"]) == 0
    out = capsys.readouterr().out
    assert (
        "  inputs          start-up 10 s (later trials 8 s), 7 s per epoch, teardown 3 s, a restarted run's start-up 8 s"
        in out
    )
    assert "; --epoch-time given" in out


def test_plan_estimate_as_json_holds_the_plan_and_the_same_figures(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", str(spec_file), "--cluster", CLUSTER, "--estimate", *FLAGS, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["max_concurrent_trials"] == 4  # the plan, as without --estimate
    est = data["estimate"]
    assert (est["trials"], est["trials_at_once"], est["runs"]) == (12, 4, SEEDS)
    assert est["scheduler"]["type"] == "asha" and est["epochs"] == {"values": [10], "from": "search_space.epochs"}
    assert est["resources_per_trial"] == {"CPU": 2.1, "GPU": 2}
    wall = est["wall_time_s"]
    assert 0 < wall["low"] <= wall["median"] <= wall["high"]
    assert est["resource_hours"]["GPU"]["low"] > 0
    assert est["budget"] == []


def test_plan_estimate_says_when_a_budget_ends_the_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, {**SPEC, "scheduler": "fifo", "budget": {"max_resource_hours": {"GPU": 0.1}}})
    assert main(["plan", str(spec), "--cluster", CLUSTER, "--estimate", *FLAGS]) == 0
    out = capsys.readouterr().out
    # 4 trials at once of 2 GPUs each hold 8 GPUs: 0.1 GPU-hours (360 GPU-seconds) are used up at 45 s
    assert "  wall time       45 s (ended by its budget in 20 of 20 runs)" in out
    assert "budget.max_resource_hours.GPU 0.1: ends the search in 20 of 20 runs, at 45 s, 4 of 12 trials" in out
    # by then each trial has trained 6 or 7 epochs of 5 s +- 10% (from 10 s on)
    assert "  work            2" in out and " of 120 epochs trained; the slots train " in out


def test_plan_estimate_needs_the_epochs_when_the_spec_does_not_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    no_epochs = {**SPEC, "scheduler": "fifo", "search_space": {"lr": SPEC["search_space"]["lr"]}}
    spec = write_spec(tmp_path, no_epochs)
    assert main(["plan", str(spec), "--cluster", CLUSTER, "--estimate", *FLAGS]) == 2
    assert capsys.readouterr().err == (
        "Error: --estimate needs each trial's number of epochs: the spec's search_space has no whole-number 'epochs' "
        "(the config key the shipped loops read); give --epochs N\n"
    )
    assert main(["plan", str(spec), "--cluster", CLUSTER, "--estimate", *FLAGS, "--epochs", "3"]) == 0
    assert "  epochs          3 per trial (--epochs)" in capsys.readouterr().out
    args = ["plan", str(spec), "--cluster", CLUSTER, "--estimate", *FLAGS, "--epochs", "3", "--format", "json"]
    assert main(args) == 0
    wall = json.loads(capsys.readouterr().out)["estimate"]["wall_time_s"]
    # 3 waves of 4 trials, 10 + 3 x 5 + 2 = 27 s each, each epoch within 10% of 5 s
    assert 3 * (12 + 3 * 4.5) <= wall["low"] <= wall["high"] <= 3 * (12 + 3 * 5.5)
    assert wall["low"] < wall["high"]


_OPTIONS_OF_ESTIMATE = (
    "Error: --epoch-time, --startup, --teardown, --epochs and --preemption-rate are options of --estimate\n"
)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--epoch-time", "5"], _OPTIONS_OF_ESTIMATE),
        (["--preemption-rate", "0.1"], _OPTIONS_OF_ESTIMATE),
        (["--epochs", "3"], _OPTIONS_OF_ESTIMATE),
        (
            ["--estimate", *FLAGS, "--emit", "rayjob", "--image", "x"],
            "Error: --estimate adds to the plan and --emit rayjob writes a RayJob instead of it: give one of them\n",
        ),
    ],
)
def test_plan_estimate_options_out_of_place_exit_2(
    spec_file: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["plan", str(spec_file), "--cluster", CLUSTER, *args]) == 2
    assert capsys.readouterr().err == message


@pytest.mark.parametrize(("flag", "value"), [("--epoch-time", "0"), ("--startup", "-1"), ("--teardown", "nan")])
def test_plan_estimate_refuses_a_bad_number_of_seconds(
    spec_file: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["plan", str(spec_file), "--cluster", CLUSTER, "--estimate", *FLAGS, flag, value])
    assert exit_.value.code == 2
    assert f"argument {flag}: must be a number of seconds" in capsys.readouterr().err


def test_plan_estimate_on_an_autoscaling_cluster_is_made_at_its_maximum_size(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", str(spec_file), "--cluster", "1x{CPU: 8} + 0..2x{CPU: 8, GPU: 4}", "--estimate", *FLAGS]) == 0
    out = capsys.readouterr().out
    assert (
        "Estimate for est at the maximum size (3 nodes; the nodes' own start-up not counted): 12 trials, 4 at once"
    ) in out


def test_a_thousand_trial_asha_search_on_a_large_described_cluster(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's scale: 1,000 ASHA trials on 1x{CPU: 16} + 64x{CPU: 32, GPU: 8} (the plan holds 160 at once:
    the head's 16 CPUs hold 160 drivers of 0.1). Measured here: the estimate itself, 20 runs, about 0.2 s."""
    args = ["--set", "num_samples=1000", "--set", "search_space.epochs=100", "--set", "scheduler.max_t=100"]
    cluster = "1x{CPU: 16} + 64x{CPU: 32, GPU: 8}"
    assert main(["plan", str(spec_file), "--cluster", cluster, *args, "--estimate", *FLAGS, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    est = data["estimate"]
    assert est["trials"] == 1000 and est["trials_at_once"] == data["max_concurrent_trials"] == 160
    assert est["stopped_early"]["low"] > 800  # rf 2 from epoch 2: most trials stop at the first rungs
    # at least one trial runs to max_t: the search lasts at least its start-up, 100 epochs and its teardown
    assert est["wall_time_s"]["low"] >= 10 + 100 * 5 + 2
    assert est["epochs_run"]["high"] < est["epochs_if_none_stopped"] == 100_000
    assert math.isclose(est["resource_hours"]["GPU"]["median"] / est["resource_hours"]["CPU"]["median"], 2 / 2.1)


# --------------------------------------------------------------------------- benchmarks/estimate_scale.py (its pure parts)


def test_the_scale_benchmark_compares_per_trial_costs_with_none() -> None:
    from benchmarks import estimate_scale as bench

    timings = {
        name: Timing(60, s, d) for name, s, d in (("low", 10, 1), ("mid", 13, 4), ("high", 16, 7), ("none", 0, 0))
    }
    row = bench.row_for(8, 32, timings, seeds=3)
    assert row["none"]["utilisation"] > row["mid"]["utilisation"] > 0  # the per-trial cost takes its share
    assert row["low"]["utilisation"] >= row["mid"]["utilisation"] >= row["high"]["utilisation"]
    assert bench.util_range(row).endswith("%")
    assert bench.cost_share(timings["mid"], 60) == pytest.approx(17 / 77)
