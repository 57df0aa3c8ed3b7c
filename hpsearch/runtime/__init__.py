"""Everything in hpsearch that talks to a live Ray cluster.

- :mod:`~hpsearch.runtime.env`: every Ray environment default hpsearch sets, with why.
- :mod:`~hpsearch.runtime.cluster`: connects to Ray (an embedded local Ray or ``--address``) and reads the nodes.
- :mod:`~hpsearch.runtime.trainable`: the trainable Tune is given, built in the search process.
  It makes one nested ``TorchTrainer`` run per trial.
- :mod:`~hpsearch.runtime.driver`: the trial driver, in Tune's trial actor. It builds and fits the nested run.
- :mod:`~hpsearch.runtime.controller`: what runs in each nested run's Train controller. It sends the reports to Tune.
- :mod:`~hpsearch.runtime.worker`: what runs in each Train worker around the user's loop.
- :mod:`~hpsearch.runtime.reuse`: reuses a finished trial's actor for the next trial, after ending its nested run.
- :mod:`~hpsearch.runtime.autoscaling`: ``run --cluster`` on a cluster whose autoscaler adds nodes.
- :mod:`~hpsearch.runtime.aggregate`: combines every rank's report into the single report Tune sees.
- :mod:`~hpsearch.runtime.tuner`: builds a ``ray.tune.Tuner`` from a spec and a plan, and runs and resumes a search.
- :mod:`~hpsearch.runtime.tune_space`: the parsed search space as Tune's domains (``to_tune``).
- :mod:`~hpsearch.runtime.preflight`: what ``run`` and ``resume`` check before anything is written or Ray starts.
- :mod:`~hpsearch.runtime.search_result`: ``SearchResult``, what ``run`` and ``resume`` return.
- :mod:`~hpsearch.runtime.outcomes`: the Tune callback that records how each trial ended.
- :mod:`~hpsearch.runtime.progress`: the Tune callback that prints progress lines.
- :mod:`~hpsearch.runtime.ray_workarounds`: work-arounds for Ray bugs, each with a switch.
- :mod:`~hpsearch.runtime.internals`: the one door to other libraries' internals, each named and checked.
- :mod:`~hpsearch.runtime.grow`: a search grown on resume (``--set num_samples=N``) through Tune's saved state.
- :mod:`~hpsearch.runtime.resume_state`: a resumed PBT population given back each trial's scheduler state.
"""
