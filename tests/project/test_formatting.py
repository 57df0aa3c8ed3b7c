"""One home for how numbers, durations and tables read in every view."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hpsearch.formatting import cell, duration, hours, number, plural, resource_hours, text_table


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.123456, "0.1235"),
        (1234567.0, "1.235e+06"),
        (float("nan"), "nan"),
        (float("-inf"), "-inf"),
        (np.float32(0.5), "0.5"),
        (3, "3"),
        (None, "-"),
        (True, "True"),
        ("adam", "adam"),
    ],
    ids=["float", "big", "nan", "-inf", "numpy", "int", "none", "bool", "str"],
)
def test_number(value: object, shown: str) -> None:
    assert number(value) == shown


def test_cell_shows_gaps_as_dashes_and_nan_as_a_value() -> None:
    assert [cell(pd.NA), cell(pd.NaT), cell(None), cell(float("nan"))] == ["-", "-", "-", "nan"]
    assert cell(pd.Timestamp("2026-12-01 08:39:47.5", tz="UTC")) == "2026-12-01 08:39:47"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "-"), (float("nan"), "-"), (0.2, "under 1 s"), (42.4, "42 s"), (185, "3 min 05 s"), (7620, "2 h 07 min")],
)
def test_duration(seconds: float | None, shown: str) -> None:
    assert duration(seconds) == shown


def test_plural_and_table() -> None:
    assert (plural(1, "trial"), plural(2, "trial"), plural(0, "query", "queries")) == (
        "1 trial",
        "2 trials",
        "0 queries",
    )
    assert text_table([["a", "bb"], ["ccc", "d"]], indent="  ") == "  a    bb\n  ccc  d"
    assert text_table([]) == ""


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0.041234, "0.0412"), (3.5, "3.5"), (12.34, "12.3"), (99.94, "99.9"), (1234.4, "1,234"), (float("inf"), "inf")],
)
def test_resource_hours_read_the_same_in_every_view(value: float, shown: str) -> None:
    assert hours(value) == shown
    assert resource_hours({"CPU": value, "GPU": 0.5}) == f"{shown} CPU-hours, 0.5 GPU-hours"
