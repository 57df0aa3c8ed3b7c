"""Everything in hpsearch that talks to a live Ray cluster, grouped by the process its code runs in.

A nested search runs in four kinds of process: the search process (Tune), a trial driver per
running trial (Tune's trial actor), and each nested run's Train controller and workers. The path
of a module says which: ``search/``, ``trial/``, ``train/``; ``nodes/`` is the cluster seen from
the search process. The modules at this level are each used by several of them, and say which
function runs where.

- :mod:`~hpsearch.runtime.search`: the search process: the tuner, its checks, plug-ins, callbacks and result.
- :mod:`~hpsearch.runtime.trial`: the trial driver: the trainable and the nested run it builds and fits.
- :mod:`~hpsearch.runtime.train`: inside a nested run: the Train controller's callback and the workers' side.
- :mod:`~hpsearch.runtime.nodes`: the cluster: connecting, the node check, the session's processes, Ray's logs.
- :mod:`~hpsearch.runtime.internals`: the one door to other libraries' internals, each named and checked.
- :mod:`~hpsearch.runtime.env`: every Ray environment default hpsearch sets, in the process that needs it, with why.
- :mod:`~hpsearch.runtime.ray_workarounds`: work-arounds for Ray bugs (search process, controller, driver), one switch.
- :mod:`~hpsearch.runtime.retries`: no blind retries: the controller's veto, the driver's refusal, Tune's count.
- :mod:`~hpsearch.runtime.rank_watch`: each rank's log and progress (workers) and the driver's watch over them.
- :mod:`~hpsearch.runtime.datasets`: Ray Data datasets, built once in the search process or by each trial driver.
- :mod:`~hpsearch.runtime.moved`: the modules' names before this grouping, still importable (old folders' pickles).
"""

from hpsearch.runtime import moved

moved.install()
