"""benchmarks/overhead.py: the stage breakdown it derives from stamped events (pure, no Ray)."""

from __future__ import annotations

import pytest

from benchmarks import overhead


def _events(*pairs: tuple[str, float]) -> list[dict]:
    return [{"event": event, "t": t} for event, t in pairs]


def test_stages_split_each_trial_and_measure_turnaround_from_the_previous_end() -> None:
    events = _events(
        ("trial_start", 10.0),
        ("loop_start", 16.0),
        ("result", 17.0),
        ("result", 17.5),
        ("loop_end", 17.4),
        ("trial_end", 18.5),
        ("trial_start", 21.5),
        ("loop_start", 28.5),
        ("result", 29.0),
        ("trial_end", 30.0),
    )
    first, second = overhead.stages(list(reversed(events)))  # order on disk does not matter
    assert first == pytest.approx(
        {"turnaround": None, "start": 6.0, "to_report": 1.0, "reporting": 0.5, "teardown": 1.0}
    )
    assert second == pytest.approx(
        {"turnaround": 3.0, "start": 7.0, "to_report": 0.5, "reporting": 0.0, "teardown": 1.0}
    )


def test_events_outside_a_trial_are_ignored() -> None:
    events = _events(("loop_start", 1.0), ("trial_start", 2.0), ("result", 3.0), ("trial_end", 4.0), ("loop_end", 5.0))
    (only,) = overhead.stages(events)
    assert only["start"] == 0.0 and only["to_report"] == 1.0  # no loop stamp inside: the driver ran the loop
