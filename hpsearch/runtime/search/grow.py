"""Growing a search on resume (``hpsearch resume DIR --set num_samples=N``): Tune's saved search state made to
hold the new total before ``Tuner.restore`` reads it, so that the same searcher goes on.

The checks that a search may grow are :func:`hpsearch.runtime.search.preflight.check_growth`'s; reading and
writing Tune's saved state is the door's (internal ``tune-search-state``).
"""

from __future__ import annotations

from pathlib import Path

from hpsearch.runtime import internals

__all__ = ["grow_search"]


def grow_search(experiment_dir: str | Path, *, trials: int, repeats: int, old_repeats: int) -> int:
    """Let a saved search make ``trials`` trials in all, where it made fewer. Returns the total it held before.

    A model-based searcher (Optuna, HyperOpt) counts the trials it may still suggest: raised, the same
    searcher, with its study, goes on suggesting. Random search and grids hold the iterators of their
    trials: one more iterator of ``repeats - old_repeats`` repeats of the space (whole repeats of a grid)
    continues their trial numbers and their random stream.

    Raises:
        ContractBroken: the folder holds no saved search state, or one this Ray does not write.
    """
    saved = internals.read_search_state(experiment_dir)
    before = saved.total
    if saved.variants:
        saved.extend(repeats - old_repeats, start=before)
    saved.set_total(trials)
    internals.write_search_state(saved)
    return before
