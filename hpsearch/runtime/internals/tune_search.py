"""Ray Tune's search algorithms: the variant generator's trials, and the search state Tune saves.

Internals ``variant-generator`` (:class:`VariantHook`) and ``tune-search-state``
(:func:`read_search_state`, :class:`SavedSearch`, :func:`write_search_state`). How a search grows
on resume is :mod:`hpsearch.runtime.search.grow`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpsearch.runtime.internals.contract_checks import ContractBroken, _assigns, _parameters, _resolve, _source
from hpsearch.runtime.internals.registry import available

__all__ = ["SavedSearch", "VariantHook", "read_search_state", "write_search_state"]


def _check_variants() -> None:
    _resolve("ray.tune.search.basic_variant:BasicVariantGenerator.next_trial")
    _assigns("ray.tune.experiment.trial:Trial", "evaluated_params", "experiment_tag", "config")


def _check_search_state() -> None:
    generator = "ray.tune.search.search_generator:SearchGenerator"
    variants = "ray.tune.search.basic_variant:BasicVariantGenerator"
    for cls in (generator, variants):
        if "{}" not in str(_resolve(f"{cls}.CKPT_FILE_TMPL")):
            raise ContractBroken(f"{cls.replace(':', '.')}.CKPT_FILE_TMPL names no session")
    if not re.search(r'"total_samples"\s*:.*"finished"\s*:', _source(_resolve(f"{generator}.get_state")), re.S):
        raise ContractBroken("SearchGenerator.get_state holds no total_samples and finished")
    _assigns(
        variants, "_total_samples", "_finished", "_iterators", "_uuid_prefix", "_constant_grid_search", "_random_state"
    )
    _parameters(
        "ray.tune.search.basic_variant:_TrialIterator",
        "uuid_prefix",
        "num_samples",
        "unresolved_spec",
        "constant_grid_search",
        "points_to_evaluate",
        "lazy_eval",
        "start",
        "random_state",
    )
    _assigns("ray.tune.search.basic_variant:_TrialIterator", "unresolved_spec", "lazy_eval")
    _parameters("ray.tune.utils.util:_atomic_save", "state", "checkpoint_dir", "file_name", "tmp_file_name")
    _parameters("ray.tune.utils.util:_load_newest_checkpoint", "dirpath", "ckpt_pattern")


class VariantHook:
    """Mixed before Tune's ``BasicVariantGenerator``: :meth:`on_new_trial` before Tune records a trial (internal ``variant-generator``)."""

    def next_trial(self) -> Any:
        trial = super().next_trial()  # type: ignore[misc]  # Ray's, next in the MRO
        if trial is not None and available("variant-generator"):  # a spec that needs it was refused at start
            self.on_new_trial(trial)
        return trial

    def on_new_trial(self, trial: Any) -> None:
        """Called with each trial the generator makes, before Tune adds it."""


# ----------------------------------------------------------------------------- Tune's saved search state


@dataclass
class SavedSearch:
    """Tune's saved search state in an experiment folder, as ``Tuner.restore`` reads it (internal
    ``tune-search-state``).

    A model-based searcher (Optuna, HyperOpt) sits in Tune's ``SearchGenerator``, whose state counts
    the trials it may still suggest. Random search and grids are Tune's ``BasicVariantGenerator``
    (``variants``), whose state holds the iterators of its trials.
    """

    folder: str
    file_name: str
    state: dict[str, Any]
    variants: bool

    @property
    def total(self) -> int:
        """The trials the search makes in all."""
        return int(self.state["_total_samples" if self.variants else "total_samples"])

    def set_total(self, trials: int) -> None:
        """Let the search make ``trials`` trials in all (it is no longer finished)."""
        prefix = "_" if self.variants else ""
        self.state[f"{prefix}total_samples"], self.state[f"{prefix}finished"] = trials, False

    def extend(self, repeats: int, *, start: int) -> None:
        """Random search and grids: one more iterator of ``repeats`` repeats of the space (whole repeats of a
        grid), its trials numbered from ``start``, drawn from the generator's own random stream.

        Raises:
            ContractBroken: the state holds no iterator that can be extended.
        """
        from ray.tune.search.basic_variant import _TrialIterator  # lazy: only a resume that grows its search

        iterators = self.state["_iterators"]
        if not iterators or any(it.lazy_eval for it in iterators):
            raise ContractBroken("the random search's saved state holds no iterator it can extend")
        more = _TrialIterator(
            uuid_prefix=self.state["_uuid_prefix"],
            num_samples=repeats,
            unresolved_spec=iterators[0].unresolved_spec,
            constant_grid_search=self.state["_constant_grid_search"],
            points_to_evaluate=[],
            lazy_eval=False,
            start=start,
            random_state=self.state["_random_state"],  # the generator's own: its stream goes on
        )
        self.state["_iterators"] = [*iterators, more]


def read_search_state(experiment_dir: str | Path) -> SavedSearch:
    """The newest search state Tune saved in ``experiment_dir`` (internal ``tune-search-state``).

    Raises:
        ContractBroken: the folder holds neither Tune's searcher state nor its variant generator's.
    """
    # lazy: Tune's search modules, only for a resume that grows its search (this module is imported by workers)
    from ray.tune.search.basic_variant import BasicVariantGenerator
    from ray.tune.search.search_generator import SearchGenerator  # lazy: as above
    from ray.tune.utils.util import _load_newest_checkpoint  # lazy: as above

    folder = str(experiment_dir)
    for cls in (SearchGenerator, BasicVariantGenerator):
        pattern = cls.CKPT_FILE_TMPL.format("*")
        newest = max(Path(folder).glob(pattern), default=None)
        state = _load_newest_checkpoint(folder, pattern) if newest is not None else None
        if newest is not None and isinstance(state, dict):
            return SavedSearch(folder, newest.name, state, variants=cls is BasicVariantGenerator)
    raise ContractBroken(f"{folder} holds no saved search state of Tune's (search_gen_state-*, basic-variant-state-*)")


def write_search_state(saved: SavedSearch) -> None:
    """Write ``saved`` back where Tune saved it, atomically, as Tune writes it (internal ``tune-search-state``)."""
    from ray.tune.utils.util import _atomic_save  # lazy: only a resume that grows its search

    _atomic_save(
        state=saved.state,
        checkpoint_dir=saved.folder,
        file_name=saved.file_name,
        tmp_file_name=f"tmp-{saved.file_name}",
    )
