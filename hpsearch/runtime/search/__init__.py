"""The search process: ``hpsearch run``, ``resume`` and ``check``, or the user's Python calling :func:`hpsearch.run`.

Code here runs in the one process that drives Tune: it checks, plans, builds the ``Tuner``, and
hears every trial's events (Tune's callbacks, schedulers and searchers run here).

- :mod:`~hpsearch.runtime.search.tuner`: builds a ``ray.tune.Tuner`` from a spec and a plan, runs and resumes a search.
- :mod:`~hpsearch.runtime.search.banner`: what a search says when it starts: the search, its folder, Ray's logs.
- :mod:`~hpsearch.runtime.search.preflight`: what ``run`` and ``resume`` check before anything is written or Ray starts.
- :mod:`~hpsearch.runtime.search.check`: ``hpsearch check``: one trial of the spec, cut, restored and judged.
- :mod:`~hpsearch.runtime.search.plugins`: the searchers and schedulers built from the spec's options.
- :mod:`~hpsearch.runtime.search.searchers`: Tune's searchers for conditional spaces, warm starts, failed trials.
- :mod:`~hpsearch.runtime.search.hyperopt_searchers`: HyperOpt's, imported only by a search that uses it.
- :mod:`~hpsearch.runtime.search.tune_space`: the parsed search space as Tune's domains (``to_tune``).
- :mod:`~hpsearch.runtime.search.warm_start`: the searcher seeded with points and an earlier search's trials.
- :mod:`~hpsearch.runtime.search.pbt`: population-based training's schedulers: exploits that copy the donor.
- :mod:`~hpsearch.runtime.search.drained_drivers`: the other schedulers, pausing a trial whose driver's node is drained.
- :mod:`~hpsearch.runtime.search.resume_state`: a resumed population given back each trial's scheduler state.
- :mod:`~hpsearch.runtime.search.grow`: a search grown on resume (``--set num_samples=N``) through Tune's saved state.
- :mod:`~hpsearch.runtime.search.outcomes`: the Tune callback that records how each trial ended.
- :mod:`~hpsearch.runtime.search.progress`: the Tune callback that prints progress lines.
- :mod:`~hpsearch.runtime.search.room`: the search's share of a cluster other searches use, and trials held until room is free.
- :mod:`~hpsearch.runtime.search.budget`: what a search uses, and its end when a budget is reached.
- :mod:`~hpsearch.runtime.search.tracking`: every trial as a run in each experiment tracker (MLflow, W&B, ...).
- :mod:`~hpsearch.runtime.search.tracking_check`: each tracker's store opened once at start, before a write.
- :mod:`~hpsearch.runtime.search.autoscaling`: ``run --cluster`` on a cluster whose autoscaler adds nodes.
- :mod:`~hpsearch.runtime.search.search_result`: ``SearchResult``, what ``run`` and ``resume`` return.
"""
