"""Inside each nested Ray Train run: its controller and its workers, which Ray Train starts for the driver.

- :mod:`~hpsearch.runtime.train.controller`: the Train controller's callback: every report on its way to Tune.
- :mod:`~hpsearch.runtime.train.aggregate`: every rank's report combined into the one report Tune sees.
- :mod:`~hpsearch.runtime.train.worker`: what runs in each Train worker around the user's loop.
- :mod:`~hpsearch.runtime.train.transplant`: a run that starts from another trial's checkpoint (pbt/pb2).
- :mod:`~hpsearch.runtime.train.loopback_store`: rank 0's rendezvous store on the loopback, every rank on this machine.
"""
