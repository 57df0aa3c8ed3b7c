"""``python -m hpsearch`` with the loopback switch forced off, for tests/runtime/nodes/test_listening.py.

Runs the CLI with :func:`hpsearch.runtime.env.loopback_only` made a no-op, so the embedded
Ray starts as Ray starts it on Linux (its servers on every interface), which the check after
``ray.init`` must refuse. Every process of the session the check saw is appended, as JSON
lines of ``pid`` and ``create_time``, to the file named by the first argument, so that the
test can see they are gone afterwards. Usage: ``python loopback_off.py RECORD hpsearch-args...``.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from hpsearch.cli import main
from hpsearch.runtime import env
from hpsearch.runtime.nodes import connect as cluster
from hpsearch.runtime.nodes import session


@contextlib.contextmanager
def _switch_off(environ: object = None) -> Iterator[None]:
    yield


def _recording(record: Path):
    current = session.current_session

    def current_session():
        found = current()
        if found is not None:
            with record.open("a") as out:
                for proc in found.processes:
                    out.write(json.dumps({"pid": proc.pid, "create_time": proc.create_time, "name": proc.name}) + "\n")
        return found

    return current_session


if __name__ == "__main__":
    env.loopback_only = _switch_off
    if hasattr(cluster, "loopback_only"):  # bound at import by `from hpsearch.runtime.env import loopback_only`
        cluster.loopback_only = _switch_off
    session.current_session = _recording(Path(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
