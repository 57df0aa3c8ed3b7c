"""The Ray edges: everything that talks to a live Ray cluster.

- :mod:`~hpsearch.runtime.env`: every Ray environment default hpsearch sets, with why.
- :mod:`~hpsearch.runtime.cluster`: connect (embedded local Ray or ``--address``) and read the nodes.
- :mod:`~hpsearch.runtime.trainable`: the trial driver; one nested ``TorchTrainer`` run per trial.
- :mod:`~hpsearch.runtime.reuse`: a finished trial's actor reused for the next trial, its nested run ended first.
- :mod:`~hpsearch.runtime.autoscaling`: ``run --cluster`` on a cluster whose autoscaler adds nodes.
- :mod:`~hpsearch.runtime.aggregate`: every rank's report combined into the one Tune sees.
- :mod:`~hpsearch.runtime.tuner`: spec + plan -> ``ray.tune.Tuner``; run and resume a search.
- :mod:`~hpsearch.runtime.outcomes`: the Tune callback that records how each trial ended.
- :mod:`~hpsearch.runtime.progress`: the Tune callback that prints progress lines.
- :mod:`~hpsearch.runtime.ray_workarounds`: work-arounds for Ray bugs, each with a switch.
"""
