"""Shared fixtures: one local Ray cluster for every test marked ``ray``."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    """An embedded local Ray (dashboard on loopback, as ``hpsearch run`` starts it), shut down at the end."""
    import ray

    from hpsearch.cluster import connect

    started = connect()
    yield ray
    if started:
        ray.shutdown()
