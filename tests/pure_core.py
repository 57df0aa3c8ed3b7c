"""The pure core, defined once for the two tests that check it: which packages it holds, and what each may import.

The pure core is the layers below the Ray edges and the results side (docs/architecture.md, "The layers and
the dependency rule"): it validates a spec, plans for a cluster and reads an experiment folder without Ray.
Two tests check it from two sides, both from these names:

- ``tests/project/test_layers.py`` reads every import with :mod:`ast`: no pure package imports what
  :data:`NEVER_ANYWHERE` names, at any depth (inside a function too), and its layers put exactly
  :data:`PURE_PACKAGES` and :data:`PURE_MODULES` (with ``experiment.layout``) below the results side.
- ``tests/project/test_import.py`` imports each module alone in a fresh interpreter: none of :data:`NOT_AT_IMPORT`
  is loaded, in the pure core and in :data:`LIGHT_PACKAGES`.

``results/`` is not pure: it sits beside ``runtime/``, above the line. What in it imports torch is only
``results/checkpoints.py`` (``load_model``: a trial's checkpoint back in its model), inside the functions that
load one; matplotlib and Optuna too are imported where a plot is drawn or a study written. So importing it
loads neither Ray nor torch, which is what "light" means here.
"""

from __future__ import annotations

__all__ = ["PURE_PACKAGES", "PURE_MODULES", "LIGHT_PACKAGES", "NEVER_ANYWHERE", "NOT_AT_IMPORT"]

#: The packages of the pure core; every module in them is found by walking their folders.
PURE_PACKAGES: tuple[str, ...] = ("hpsearch.spec", "hpsearch.planning", "hpsearch.experiment", "hpsearch.analysis")
#: The single modules of the pure core: the leaves every layer may import.
PURE_MODULES: tuple[str, ...] = (
    "hpsearch._renamed",
    "hpsearch._version",
    "hpsearch.errors",
    "hpsearch.formatting",
    "hpsearch.messages",
)
#: Packages above the pure core that still import without Ray and torch (their heavy imports are lazy).
LIGHT_PACKAGES: tuple[str, ...] = ("hpsearch.results",)

#: Per pure package, the third-party packages it never imports, not even lazily inside a function. Ray is the
#: runtime's alone; the spec is read and checked before anything heavy loads (its translation to Tune is
#: hpsearch.runtime.search.tune_space), so it takes neither Ray nor torch.
NEVER_ANYWHERE: dict[str, tuple[str, ...]] = {
    "hpsearch.spec": ("ray", "torch"),
    "hpsearch.planning": ("ray",),
    "hpsearch.experiment": ("ray",),
    "hpsearch.analysis": ("ray",),
    **{module: ("ray", "torch") for module in PURE_MODULES},
}
#: What importing a module of the pure core or of :data:`LIGHT_PACKAGES` must not load.
NOT_AT_IMPORT: tuple[str, ...] = ("ray", "torch")
