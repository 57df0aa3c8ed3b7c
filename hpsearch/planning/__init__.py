"""Planning, without Ray: a cluster shape and one trial's demand in, a plan (or a refusal) out.

- :mod:`~hpsearch.planning.planner`: how many trials fit at once, bundle by bundle, node by node.
- :mod:`~hpsearch.planning.resources`: resource dicts: Ray's fixed-point units, memory's unit, the text hpsearch writes.
- :mod:`~hpsearch.planning.helper_cpu`: what no bundle reserves: a trial's helper processes' CPU, measured.
- :mod:`~hpsearch.planning.cluster_shape`: clusters described as text (``--cluster '4x{CPU: 8}'``) or YAML.
- :mod:`~hpsearch.planning.render`: a plan as the table ``hpsearch plan`` prints.
- :mod:`~hpsearch.planning.for_spec`: a spec's trial as the planner counts it.
- :mod:`~hpsearch.planning.autoscale`: an autoscaling cluster (``0..4x{...}``) planned at its minimum and
  maximum size, and what each extra node adds.
- :mod:`~hpsearch.planning.rayjob`: the plan as a KubeRay ``RayJob`` (``hpsearch plan --emit rayjob``).
- :mod:`~hpsearch.planning.estimate`: how long a search will take and what it will use (``hpsearch plan --estimate``).
- :mod:`~hpsearch.planning.shares`: fair shares of one cluster between the searches on it (the register's rules).
- :mod:`~hpsearch.planning.preemption`: spot nodes in a plan, and what a preemption costs a trial (``--preemption-rate``).
- :mod:`~hpsearch.planning.versus`: the estimate made as a search started, set next to what happened.
"""
