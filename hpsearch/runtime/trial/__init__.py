"""The trial driver: Tune's trial actor, one per running trial, which builds and fits one nested Train run.

The trainable is built in the search process (:mod:`~hpsearch.runtime.trial.trainable`), but what it
holds runs here, in the actor Tune starts for each trial on the head node's driver sliver.

- :mod:`~hpsearch.runtime.trial.trainable`: the trainable Tune is given, and the driver's resources.
- :mod:`~hpsearch.runtime.trial.driver`: the body of each trial: builds and fits the nested ``TorchTrainer``.
- :mod:`~hpsearch.runtime.trial.pbt_driver`: under pbt/pb2, which nested run to start, and pointer reports.
- :mod:`~hpsearch.runtime.trial.drain_watch`: with drivers on any node, the driver watching its own node for a drain.
- :mod:`~hpsearch.runtime.trial.reuse`: a finished trial's actor reused for the next, after ending its nested run.
"""
