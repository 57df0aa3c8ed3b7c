"""The Ray cluster and its processes, seen from the search process: connecting, checking, watching, ending.

- :mod:`~hpsearch.runtime.nodes.connect`: connects to Ray (an embedded local Ray or ``--address``) and reads the nodes.
- :mod:`~hpsearch.runtime.nodes.listening`: which processes of an embedded Ray listen beyond the loopback.
- :mod:`~hpsearch.runtime.nodes.node_check`: every node probed once, before the first trial.
- :mod:`~hpsearch.runtime.nodes.node_facts`: what the node check learns on a node, and the one loopback rule (no Ray).
- :mod:`~hpsearch.runtime.nodes.node_watch`: nodes that leave or join during a search, said as they happen.
- :mod:`~hpsearch.runtime.nodes.register`: the cluster's register of searches, a detached actor every search beats to.
- :mod:`~hpsearch.runtime.nodes.session`: the embedded Ray session's processes, recorded, and what a killed run left.
- :mod:`~hpsearch.runtime.nodes.ray_logs`: Ray's own log lines, kept in its session folder unless ``--verbose``.
"""
