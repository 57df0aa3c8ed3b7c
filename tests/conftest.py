"""Shared fixtures: one local Ray cluster for every test marked ``ray``."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import trial_starts
from leftovers import LEFTOVER_GRACE_S, placement_groups_left

#: How long a test's placement groups may take to go once it ends. Ray Train's cleaner
#: frees a stopped trial's worker group within a second or two on an idle machine.


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test without Ray first, then the Ray tests that start their own, then those on the session's Ray.

    The session's Ray stays up from the first test that uses it to the end, so a test that
    asserts that nothing started Ray (a spec refused before Ray starts) must run before any
    Ray test, wherever its file sorts; the fast tests report first; and a test that starts its
    own Ray (``python -m hpsearch`` subprocesses, notebooks, ``ray start`` clusters) never
    shares this 2-CPU machine with a second, idle cluster. Within each group the tests keep
    their collected order, so module-scoped fixtures are set up once.
    """

    def group(item: pytest.Item) -> int:
        if item.get_closest_marker("ray") is None:
            return 0
        return 2 if "_ray_session" in getattr(item, "fixturenames", ()) else 1

    items[:] = sorted(items, key=group)  # sorted() is stable: the collected order within a group


_BASETEMP = pytest.StashKey[Path]()


@pytest.fixture(autouse=True, scope="session")
def _basetemp(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> None:
    """Where this run's tmp_path folders are, for the count of nested trial starts."""
    pytestconfig.stash[_BASETEMP] = tmp_path_factory.getbasetemp()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--trial-starts-file",
        metavar="PATH",
        help="append this run's count of nested trial starts to PATH (.ci/run sums them against the ceiling)",
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Say how many nested trials the run's Ray tests started, restarts included (tests/trial_starts.py).

    Counted only when a Ray test ran: the unit tests write fake worker-group records of their own.
    """
    ran = terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", [])
    if not any("ray" in getattr(report, "keywords", {}) for report in ran):
        return
    basetemp = config.stash.get(_BASETEMP, None)
    starts = (trial_starts.count(basetemp) if basetemp else 0) + trial_starts.counted_before_removing()
    terminalreporter.write_line(f"nested trial starts in this run: {starts} (restarts included)")
    out = config.getoption("--trial-starts-file")
    if out:
        with Path(out).open("a", encoding="utf-8") as f:
            f.write(f"{starts}\n")


@pytest.fixture(scope="session")
def _ray_session():
    """An embedded local Ray (dashboard on loopback, as ``hpsearch run`` starts it), shut down at the end."""
    import ray

    from hpsearch.runtime.nodes.connect import connect

    started = connect()
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture
def ray_cluster(_ray_session):
    """The session's Ray; the test errors if it leaves a placement group behind.

    Checked per test, so a leak is blamed on the test that caused it rather than on
    whichever later test happens to look. With ``HPSEARCH_RAY_WORKAROUNDS=0`` a leak is what
    Ray's bugs that the switch leaves unhandled do (hpsearch/runtime/ray_workarounds.py): it
    is a warning that says the bug is still there, and the group is removed for the next test.
    """
    before = set(_ray_session.util.placement_group_table())
    yield _ray_session
    left = placement_groups_left(_ray_session, before)
    if not left:
        return
    message = f"placement groups left behind {LEFTOVER_GRACE_S:.0f} s after this test: {left}"
    from hpsearch.runtime.ray_workarounds import workarounds_enabled

    if workarounds_enabled():
        pytest.fail(message)
    from ray.util.placement_group import PlacementGroup, remove_placement_group

    for pg_id in left:
        remove_placement_group(PlacementGroup(_ray_session.PlacementGroupID(bytes.fromhex(pg_id))))
    warnings.warn(f"HPSEARCH_RAY_WORKAROUNDS=0, Ray's bug 1 or 2 of ray_workarounds.py: {message}", stacklevel=1)


@pytest.fixture
def said():
    """Every line hpsearch prints during the test (its one output channel, :mod:`hpsearch.messages`)."""
    import io

    from hpsearch import messages

    buffer = io.StringIO()
    with messages.to(buffer):
        yield buffer


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 12 MiB tmpfs mounted for the test: a storage that fills up. Needs root (CI runs as root); elsewhere skipped."""
    import os
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
