"""The parsed search space translated to Ray Tune's domains (``param_space``).

This is the only module that knows how hpsearch's bounds map onto Tune's:
hpsearch ``int`` bounds are inclusive at both ends (a sample can equal ``high``),
while ``tune.randint``'s upper bound is exclusive; with a ``step``, values are the
multiples of the step between the bounds, as in ``tune.qrandint``/``tune.quniform``.

The space itself (parsing, validation, conditions, flattening) is :mod:`hpsearch.spec.space`,
which imports no Ray; each searcher's translation of a conditional space is in
:mod:`hpsearch.runtime.search.searchers`.
"""

from __future__ import annotations

from typing import Any

from ray import tune

from hpsearch.spec.space import (
    ChoiceParam,
    ConstParam,
    FloatParam,
    GridParam,
    IntParam,
    Param,
    SearchSpace,
    grid_points,
    int_multiples,
    is_conditional,
    iter_params,
)

__all__ = ["JOINT_GRID_KEY", "to_tune", "tune_domain"]

#: The key of the one Tune grid that holds every valid combination of a conditional space's
#: grid parameters (see :func:`to_tune`); :mod:`hpsearch.runtime.search.searchers` spreads it back.
JOINT_GRID_KEY = "__hpsearch_grid__"


def to_tune(tree: SearchSpace, *, searcher: str = "random") -> dict[str, Any]:
    """Translate a parsed tree into a Ray Tune ``param_space`` dict.

    ``searcher`` names the searcher that will read the space: Ray converts the same
    Tune domain differently per searcher, and the bounds must come out inclusive for each.

    A conditional tree (:func:`~hpsearch.spec.space.is_conditional`) is sampled by the searcher.
    For ``optuna`` and ``hyperopt`` the ``param_space`` is empty, because their searchers carry the
    whole space (:mod:`hpsearch.runtime.search.searchers`). For ``random`` every parameter is here. If a grid
    parameter has a condition, every grid is replaced by one grid over
    :func:`~hpsearch.spec.space.grid_points`, at :data:`JOINT_GRID_KEY`. The random searcher spreads
    that grid back into its parameters, and then drops the inactive ones.
    """
    if is_conditional(tree):
        if searcher != "random":
            return {}
        if any(p.when for _, p in iter_params(tree) if isinstance(p, GridParam)):
            return _joint_grid(tree)
    return _to_tune(tree, searcher)


def _joint_grid(tree: SearchSpace) -> dict[str, Any]:
    def drop_grids(node: SearchSpace) -> SearchSpace:
        return {k: drop_grids(v) if isinstance(v, dict) else v for k, v in node.items() if not isinstance(v, GridParam)}

    return {**_to_tune(drop_grids(tree), "random"), JOINT_GRID_KEY: tune.grid_search(grid_points(tree))}


def tune_domain(param: Param, searcher: str = "random") -> Any:
    """One parameter as Tune's domain (a constant as its value), bounds as :func:`to_tune` translates them."""
    return _to_tune({"p": param}, searcher)["p"]


def _to_tune(tree: SearchSpace, searcher: str) -> dict[str, Any]:
    # Ray documents qrandint's upper bound as inclusive, and the random searcher and
    # Optuna treat it so, but its HyperOpt conversion uses hp.quniform(low, upper - 1, q).
    step_upper_pad = 1 if searcher == "hyperopt" else 0

    def one(p: Param) -> Any:
        if isinstance(p, ConstParam):
            return p.value
        if isinstance(p, ChoiceParam):
            return tune.choice(list(p.values))
        if isinstance(p, GridParam):
            return tune.grid_search(list(p.values))
        if isinstance(p, FloatParam):
            low, high = float(p.low), float(p.high)
            if p.step is not None:
                return tune.quniform(low, high, float(p.step))
            return tune.loguniform(low, high) if p.log else tune.uniform(low, high)
        if isinstance(p, IntParam):
            if p.step is not None and p.step > 1 and searcher == "random":
                # Drawn as Tune draws a choice: each multiple equally often. Ray before 2.60 drew
                # qrandint's values unevenly and never its upper bound (fixed by ray-project/ray#65864).
                return tune.choice(int_multiples(p))
            if p.step is not None and p.step > 1:
                return tune.qrandint(p.low, p.high + step_upper_pad, p.step)  # upper inclusive when q > 1
            # Tune's randint/lograndint exclude the upper bound; ours includes it.
            return tune.lograndint(p.low, p.high + 1) if p.log else tune.randint(p.low, p.high + 1)
        raise TypeError(f"not a search-space parameter: {p!r}")  # pragma: no cover

    return {k: _to_tune(v, searcher) if isinstance(v, dict) else one(v) for k, v in tree.items()}
