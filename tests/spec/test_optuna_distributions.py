"""One rule for a parameter's Optuna distribution: the searcher's study and the exported/live study agree.

:func:`hpsearch.analysis._optuna.param_distribution` owns the rule; the searcher
(:func:`hpsearch.runtime.search.searchers.optuna_distribution`) and the export and live tracker
(:func:`hpsearch.analysis._optuna.space_distributions`) both call it. The one difference kept: a
choice the storage cannot hold (a list, a dict) is its text in the exported study, and itself in
the searcher's, whose suggestion is the value the trainable gets.
"""

from __future__ import annotations

from typing import Any

import optuna.distributions as d
import pytest

from hpsearch.analysis._optuna import param_distribution, space_distributions
from hpsearch.runtime.search.searchers import OptunaSpace, label, optuna_distribution
from hpsearch.spec.space import iter_params, parse_search_space

#: name -> (the spec's parameter, the distribution both studies must hold)
CASES: dict[str, tuple[dict[str, Any], Any]] = {
    "float": ({"type": "float", "low": 0.1, "high": 0.9}, d.FloatDistribution(0.1, 0.9)),
    "log float": ({"type": "float", "low": 1e-4, "high": 0.1, "log": True}, d.FloatDistribution(1e-4, 0.1, log=True)),
    "stepped float": (
        {"type": "float", "low": 0.0, "high": 1.0, "step": 0.25},
        d.FloatDistribution(0.0, 1.0, step=0.25),
    ),
    "int": ({"type": "int", "low": 1, "high": 8}, d.IntDistribution(1, 8)),
    "log int": ({"type": "int", "low": 1, "high": 64, "log": True}, d.IntDistribution(1, 64, log=True)),
    "stepped int": ({"type": "int", "low": 16, "high": 256, "step": 16}, d.IntDistribution(16, 256, step=16)),
    "choice of numbers": ({"type": "choice", "values": [16, 0.5, 64]}, d.CategoricalDistribution([16, 0.5, 64])),
    "choice of strings": ({"type": "choice", "values": ["adam", "sgd"]}, d.CategoricalDistribution(["adam", "sgd"])),
    "choice of plain values": (
        {"type": "choice", "values": [None, True, 3, "relu"]},
        d.CategoricalDistribution([None, True, 3, "relu"]),
    ),
}

#: Choices the storage cannot hold: the searcher's study has the values, the exported study their text.
NESTED = {"type": "choice", "values": [[64, 64], [128], {"depth": 2}, 8, "wide"]}


def _param(raw: dict[str, Any]) -> Any:
    tree, _ = parse_search_space({"p": raw})
    return dict(iter_params(tree))["p"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_searcher_and_the_exported_study_hold_the_same_distribution(case: str) -> None:
    raw, expected = CASES[case]
    param = _param(raw)
    searcher = optuna_distribution(param)
    exported = space_distributions({"p": param}, ["p"])["p"]
    assert searcher == exported == expected
    # the define-by-run space seeds its study with the same distributions
    assert OptunaSpace({"p": param}).distributions() == {label("p"): expected}


@pytest.mark.filterwarnings("ignore:Choices for a categorical distribution:UserWarning")  # the searcher's study: values
def test_nested_choices_are_values_in_the_searchers_study_and_text_in_the_exported_one() -> None:
    param = _param(NESTED)
    searcher = optuna_distribution(param)
    exported = space_distributions({"p": param}, ["p"])["p"]
    # the trainable gets the value Optuna suggests: the list itself
    assert searcher == d.CategoricalDistribution([[64, 64], [128], {"depth": 2}, 8, "wide"])
    # the stored study holds what its storage takes, in the same order, one choice per value
    assert exported == d.CategoricalDistribution(["[64, 64]", "[128]", "[[depth, 2]]", 8, "wide"])
    assert exported == param_distribution(param)


@pytest.mark.filterwarnings("ignore:Choices for a categorical distribution:UserWarning")  # the searcher's study: values
def test_a_searched_value_fits_the_searchers_distribution() -> None:
    """A seeded trial's value must be one of the choices the searcher's study registered."""
    param = _param(NESTED)
    searcher = optuna_distribution(param)
    for value in NESTED["values"]:
        assert searcher.to_external_repr(searcher.to_internal_repr(value)) == value


def test_a_constant_has_no_distribution() -> None:
    assert param_distribution(_param({"type": "const", "value": 3})) is None
