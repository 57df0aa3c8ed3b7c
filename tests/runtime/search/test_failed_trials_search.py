"""One small real Optuna search with a constraint: an errored trial reaches the study as infeasible through
Tune's own error path, a finished one with its constraint value, and the search, resumed with a larger
``num_samples``, goes on in the same study."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import yaml

import hpsearch
from hpsearch.cli import main
from hpsearch.experiment.files import read_outcomes
from hpsearch.runtime.search.plugins import SearcherContext, build_searcher
from hpsearch.runtime.search.searchers import FAILED_ATTR, FAILED_CONSTRAINT

pytestmark = pytest.mark.ray

LOOPS = Path(__file__).resolve().parents[2] / "loops.py"


@pytest.mark.full
def test_an_errored_trial_is_infeasible_in_the_study_and_the_search_grows_in_it(
    ray_cluster, tmp_path: Path, capsys
) -> None:
    raw = {
        "name": "failing",
        "trainable": f"{LOOPS}:fails_after_a_good_epoch",
        "metric": "loss",
        "mode": "min",
        "num_samples": 3,
        # seed 6 proposes x = 0.893 (fails), 0.332, 0.821 (fails); one trial at a time, so the order is fixed
        "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "searcher": {"type": "optuna", "seed": 6, "n_startup_trials": 4},
        "constraints": [{"metric": "size", "max": 30}],  # the loop reports size = 100 x: x = 0.332 breaks it
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 0.4}},
        "resources": {"driver_cpus": 0.1, "max_concurrent_trials": 1},
        "storage_path": str(tmp_path / "results"),
    }
    path = tmp_path / "failing.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    assert main(["run", str(path)]) == 0
    exp = tmp_path / "results" / "failing"
    assert sorted(read_outcomes(exp).values()) == ["errored", "errored", "finished"]
    out = capsys.readouterr().out
    assert "no (violated by 3.198)" in out  # the finished trial's row: size 33.198 > 30
    assert "Constraints (size <= 30): no trial met them, so there is no best trial" in out
    results = hpsearch.load_results(exp)
    assert results.best is None and list(results.ranked()["violation"]) == [pytest.approx(3.198, abs=1e-3)]

    # the searcher as Tune saved it, restored through Tune's own Searcher API
    spec = hpsearch.load_spec(raw)
    searcher = build_searcher(spec.searcher, SearcherContext(spec.metric, spec.mode, 1))
    searcher.restore_from_dir(str(exp))
    study: optuna.Study = searcher.searcher._ot_study
    first, ok, failed = study.get_trials(deepcopy=False)
    assert [round(t.params["x"], 3) for t in (first, ok, failed)] == [0.893, 0.332, 0.821]
    # the first failed before any other trial reported: nothing to rank it by, so it is told as failed
    assert first.state == optuna.trial.TrialState.FAIL and first.value is None
    assert ok.state == optuna.trial.TrialState.COMPLETE
    assert ok.constraints == {"size": pytest.approx(3.2, abs=0.1), FAILED_CONSTRAINT: 0.0}
    assert ok.value == pytest.approx((0.332 - 0.3) ** 2 + 0.25, abs=1e-3)
    # the third reported 0.0082 at epoch 1, then failed: infeasible, with the worst value the others reported
    assert failed.state == optuna.trial.TrialState.COMPLETE
    # its size at its last report (82.1 > 30), then the failed-trial constraint: every trial has the same two
    assert failed.constraints == {"size": pytest.approx(52.1, abs=0.1), FAILED_CONSTRAINT: 1.0}
    assert failed.user_attrs[FAILED_ATTR] is True
    assert failed.value == pytest.approx((0.332 - 0.3) ** 2 + 0.5, abs=1e-3)  # trial 2's epoch-1 loss
    with pytest.raises(ValueError, match="No feasible trials"):  # Optuna agrees: no trial met the constraint
        _ = study.best_trial

    # grown on resume: one more trial, asked of the same study, which holds the first three as they were
    assert main(["resume", str(exp), "--set", "num_samples=4"]) == 0
    assert len(read_outcomes(exp)) == 4
    assert yaml.safe_load((exp / "hpsearch_spec.yaml").read_text())["num_samples"] == 4
    searcher = build_searcher(spec.searcher, SearcherContext(spec.metric, spec.mode, 1))
    searcher.restore_from_dir(str(exp))
    grown = searcher.searcher._ot_study.get_trials(deepcopy=False)
    assert len(grown) == 4
    assert [(t.params, t.state, t.value) for t in grown[:3]] == [
        (t.params, t.state, t.value) for t in (first, ok, failed)
    ]
    assert grown[3].state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)
