"""Growing a search on resume (``resume --set num_samples=N``): the checks, and Tune's saved search state
raised so that the same searcher goes on. Tune's searchers are driven in this process as Tune drives them
(``next_trial``, ``save_to_dir``, ``restore_from_dir``); no Ray is started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from ray.tune.experiment import Experiment
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.basic_variant import BasicVariantGenerator
from ray.tune.search.optuna import OptunaSearch
from ray.tune.search.search_generator import SearchGenerator

import hpsearch
from hpsearch.errors import SpecError
from hpsearch.runtime.search.grow import grow_search
from hpsearch.runtime.search.preflight import check_growth
from hpsearch.spec import total_trials


def _loop(config: dict) -> None:  # never run: Tune only needs a trainable to make trials
    pass


def _spec(num_samples: int, **changes: Any) -> hpsearch.Spec:
    raw = {
        "name": "grow",
        "trainable": "hpsearch.examples.digits:train_loop",
        "metric": "val_loss",
        "mode": "min",
        "num_samples": num_samples,
        "search_space": {"lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True}},
        **changes,
    }
    return hpsearch.load_spec(raw)


def _experiment(tmp_path: Path, config: dict, num_samples: int) -> Experiment:
    return Experiment("grow", run=_loop, config=config, num_samples=num_samples, storage_path=str(tmp_path / "s"))


def _drain(generator: Any) -> list[Any]:
    trials = []
    while (trial := generator.next_trial()) is not None:
        trials.append(trial)
    return trials


def test_a_search_grows_by_the_new_total_and_never_shrinks() -> None:
    assert check_growth(_spec(4), _spec(4), started=4) == 0
    assert check_growth(_spec(4), _spec(10), started=4) == 6
    grid = {"search_space": {"batch_size": {"type": "grid", "values": [32, 64, 128]}}}
    assert check_growth(_spec(2, **grid), _spec(5, **grid), started=6) == 9  # whole repeats of the 3-point grid
    assert total_trials(_spec(5, **grid)) == 15
    with pytest.raises(SpecError) as err:
        check_growth(_spec(12), _spec(8), started=11)
    assert str(err.value).endswith(
        "--set num_samples=8: is below the 12 this search was started with (11 trials already run): "
        "a search only grows on resume; give num_samples of 12 or more"
    )
    pbt = {"scheduler": {"type": "pbt", "hyperparam_mutations": {"lr": {"type": "float", "low": 1e-4, "high": 0.1}}}}
    with pytest.raises(SpecError, match="cannot grow a pbt search: its population is fixed"):
        check_growth(_spec(4, **pbt), _spec(8, **pbt), started=4)


def test_a_grown_grid_runs_whole_repeats_and_random_search_continues_its_stream(tmp_path: Path) -> None:
    from ray import tune

    config = {"batch_size": tune.grid_search([32, 64, 128]), "lr": tune.loguniform(1e-4, 1e-1)}
    first = BasicVariantGenerator(random_state=7)
    first.add_configurations([_experiment(tmp_path, config, 2)])
    made = _drain(first)
    assert len(made) == 6 and first.is_finished()
    first.save_to_dir(str(tmp_path), "2026-12-03_09-00-00")

    assert grow_search(tmp_path, trials=12, repeats=4, old_repeats=2) == 6
    resumed = BasicVariantGenerator(random_state=7)  # as Tune makes it again, then restores its state
    resumed.restore_from_dir(str(tmp_path))
    assert not resumed.is_finished()
    more = _drain(resumed)
    assert len(more) == 6  # 2 more repeats of the 3-point grid
    assert sorted(t.config["batch_size"] for t in more) == [32, 32, 64, 64, 128, 128]
    numbers = [int(t.trial_id.rsplit("_", 1)[1]) for t in made + more]
    assert numbers == list(range(12))  # the trial numbers go on
    lrs = [t.config["lr"] for t in made + more]
    assert len(set(lrs)) == 12  # the random stream goes on: no earlier value drawn again


def test_a_grown_optuna_search_is_the_same_study_going_on(tmp_path: Path) -> None:
    space = {"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True)}

    def generator() -> SearchGenerator:
        searcher = OptunaSearch(space=space, metric="val_loss", mode="min", sampler=optuna.samplers.TPESampler(seed=0))
        return SearchGenerator(ConcurrencyLimiter(searcher, max_concurrent=1))

    first = generator()
    first.add_configurations([_experiment(tmp_path, {}, 3)])
    made = []
    while (trial := first.next_trial()) is not None:
        made.append(trial)
        first.on_trial_complete(trial.trial_id, {"val_loss": trial.config["lr"], "training_iteration": 1})
    assert len(made) == 3 and first.is_finished()
    first.save_to_dir(str(tmp_path), "2026-12-03_09-00-00")

    assert grow_search(tmp_path, trials=5, repeats=5, old_repeats=3) == 3
    resumed = generator()
    resumed.restore_from_dir(str(tmp_path))
    assert resumed.total_samples == 5 and not resumed.is_finished()
    more = []
    while (trial := resumed.next_trial()) is not None:
        more.append(trial)
        resumed.on_trial_complete(trial.trial_id, {"val_loss": trial.config["lr"], "training_iteration": 1})
    assert len(more) == 2
    study = resumed.searcher.searcher._ot_study  # Ray's OptunaSearch behind the limiter
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 5  # the new trials were asked of the study that holds the first three
    assert [t.params["lr"] for t in trials[:3]] == [t.config["lr"] for t in made]


def test_a_folder_without_tunes_search_state_cannot_grow(tmp_path: Path) -> None:
    from hpsearch.runtime.internals import ContractBroken

    with pytest.raises(ContractBroken, match="holds no saved search state"):
        grow_search(tmp_path, trials=5, repeats=5, old_repeats=3)
