"""Errored trials teach the searcher: ``searcher.failed_trials: infeasible | ignore`` under Optuna.

The searcher is built from a spec as ``hpsearch run`` builds it and driven as Tune's controller drives it
(``on_trial_complete(trial_id, error=True)`` with no result, after the trial's reports). Pure: no Ray is
started."""

from __future__ import annotations

import optuna
import pytest

import hpsearch
from benchmarks import failed_trials as ft
from benchmarks.searchers_on_tables import hpsearch_searcher
from hpsearch.errors import SpecError
from hpsearch.runtime.search.searchers import FAILED_ATTR, FAILED_CONSTRAINT


def _searcher(way: str, trials: int = 10, **searcher: object):
    spec = hpsearch.load_spec({**ft.spec_dict(way, 0, trials), **({"searcher": searcher} if searcher else {})})
    built, param_space, metric, mode = hpsearch_searcher(spec)
    built.set_search_properties(metric, mode, param_space, num_samples=trials)
    return built


def _study(searcher) -> optuna.Study:
    return searcher.searcher._ot_study  # Ray's OptunaSearch behind hpsearch's ConcurrencyLimiter


def _run(searcher, trial_id: str, value: float, *, error: bool) -> None:
    config = searcher.suggest(trial_id)
    assert isinstance(config, dict)
    searcher.on_trial_result(trial_id, {"loss": value, "epoch": 1, "training_iteration": 1})
    if error:
        searcher.on_trial_complete(trial_id, error=True)  # as TuneController._process_trial_failure tells it
    else:
        searcher.on_trial_complete(trial_id, {"loss": value, "epoch": 1, "training_iteration": 1})


def test_an_errored_trial_is_told_as_infeasible_with_the_worst_value_never_its_partial_one() -> None:
    searcher = _searcher("infeasible")
    _run(searcher, "a", 3.0, error=False)
    _run(searcher, "b", 5.0, error=False)
    _run(searcher, "c", 0.1, error=True)  # it reported the best loss of all at epoch 1, then ran out of memory
    a, b, c = _study(searcher).get_trials(deepcopy=False)
    assert (a.state, b.state, c.state) == (optuna.trial.TrialState.COMPLETE,) * 3
    assert (
        a.constraints == b.constraints == {FAILED_CONSTRAINT: 0.0}
    )  # feasible; every trial has the constraint (GP needs one count)
    assert c.constraints == {FAILED_CONSTRAINT: 1.0} and c.user_attrs[FAILED_ATTR] is True
    assert c.value == 5.0  # the worst so far, not the 0.1 it reached before it failed
    assert _study(searcher).best_trial.number == a.number  # an infeasible trial is never the study's best


def test_failed_trials_ignore_tells_an_errored_trial_as_failed() -> None:
    searcher = _searcher("ignore")
    _run(searcher, "a", 3.0, error=False)
    _run(searcher, "c", 0.1, error=True)
    a, c = _study(searcher).get_trials(deepcopy=False)
    assert a.state == optuna.trial.TrialState.COMPLETE
    assert c.state == optuna.trial.TrialState.FAIL and c.value is None


def test_a_trial_that_fails_before_any_other_reported_is_told_as_failed() -> None:
    # nothing but its own partial value to rank it by, which must never reach the study as a completed value
    searcher = _searcher("infeasible")
    _run(searcher, "c", 0.1, error=True)
    _run(searcher, "a", 3.0, error=False)
    _run(searcher, "d", 0.2, error=True)  # by now trial a reported: infeasible, with a's value
    c, a, d = _study(searcher).get_trials(deepcopy=False)
    assert c.state == optuna.trial.TrialState.FAIL and c.value is None
    assert d.state == optuna.trial.TrialState.COMPLETE and d.value == 3.0 and d.constraints == {FAILED_CONSTRAINT: 1.0}


def test_tpe_proposes_the_failing_region_less_when_failures_count_as_infeasible() -> None:
    # benchmarks/failed_trials.py, smaller: batch sizes 512 and 1,024 (2 of 6) always fail after one good epoch
    runs = {way: [ft.run_way(way, seed, 35) for seed in range(3)] for way in ft.WAYS}
    summary = ft.summarize(runs)
    infeasible = summary["infeasible"]["failing_share_after_startup"]["mean"]
    ignore = summary["ignore"]["failing_share_after_startup"]["mean"]
    assert infeasible < 0.5 * ignore, summary
    assert infeasible < 1 / 3  # below the prior's share: it learned


def test_failed_trials_is_an_optuna_option_with_two_values() -> None:
    spec = hpsearch.load_spec({**ft.spec_dict("infeasible", 0, 4), "searcher": {"type": "optuna"}})
    assert spec.searcher.options.failed_trials == "infeasible"  # the default
    with pytest.raises(SpecError, match=r"searcher\.failed_trials.*'infeasible' or 'ignore'|infeasible.*ignore"):
        hpsearch.load_spec({**ft.spec_dict("infeasible", 0, 4), "searcher": {"type": "optuna", "failed_trials": "x"}})
    with pytest.raises(SpecError, match="failed_trials"):
        hpsearch.load_spec(
            {**ft.spec_dict("infeasible", 0, 4), "searcher": {"type": "hyperopt", "failed_trials": "ignore"}}
        )
