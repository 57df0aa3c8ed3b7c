"""The notice of a drained trial driver, without Ray: written whole, read back, damaged, and when to pause at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpsearch.experiment import driver_drains
from hpsearch.experiment.driver_drains import DriverNotice
from hpsearch.experiment.layout import DRIVER_DRAIN_FILE

NOTICE = DriverNotice("n2", "h2", noticed_at=1000.0, deadline=1020.0)


def test_a_notice_is_read_back_as_written_and_marked_saved_by_rank_0(tmp_path: Path) -> None:
    assert driver_drains.read_notice(tmp_path) is None
    driver_drains.write_notice(tmp_path, NOTICE)
    assert driver_drains.read_notice(tmp_path) == NOTICE
    saved = driver_drains.mark_saved(tmp_path, NOTICE, report=7, epoch=2)
    assert driver_drains.read_notice(tmp_path) == saved
    assert (saved.saved_report, saved.saved_epoch, saved.node_id, saved.deadline) == (7, 2, "n2", 1020.0)
    assert [p.name for p in tmp_path.iterdir()] == [DRIVER_DRAIN_FILE]  # replaced whole: no temporary file left
    assert driver_drains.clear_notice(tmp_path) and not driver_drains.clear_notice(tmp_path)
    assert driver_drains.read_notice(tmp_path) is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{not json",
        "[]",
        '{"node_id": 3, "noticed_at": 1}',
        '{"node_id": "n2", "noticed_at": "soon"}',
        '{"node_id": "n2", "noticed_at": NaN}',
    ],  # fmt: skip
)
def test_a_damaged_notice_is_no_notice(tmp_path: Path, text: str) -> None:
    (tmp_path / DRIVER_DRAIN_FILE).write_text(text)
    assert driver_drains.read_notice(tmp_path) is None


def test_a_notice_with_a_bad_saved_report_or_deadline_reads_as_not_saved_and_without_one(tmp_path: Path) -> None:
    (tmp_path / DRIVER_DRAIN_FILE).write_text(
        '{"node_id": "n2", "host": null, "noticed_at": 5, "deadline": "x", "saved_report": true}'
    )
    assert driver_drains.read_notice(tmp_path) == DriverNotice("n2", "", 5.0, None)


def test_the_trial_pauses_at_the_first_result_with_the_notices_checkpoint() -> None:
    saved = DriverNotice("n2", "h2", 1000.0, 1020.0, saved_report=4, saved_epoch=1)
    assert saved.pause_now(result_has_checkpoint=True, now=1003.0)
    assert not saved.pause_now(result_has_checkpoint=False, now=1003.0)  # a report made before the save
    assert not NOTICE.pause_now(result_has_checkpoint=True, now=1003.0)  # a checkpoint from before the notice


def test_a_loop_that_saves_nothing_is_paused_once_the_deadline_is_near() -> None:
    # 20 s of notice: a margin of 7 s (35 %); 100 s: 35 s; 4 s: at least 5 s, so at once
    assert not NOTICE.pause_now(False, now=1012.9) and NOTICE.pause_now(False, now=1013.0)
    long = DriverNotice("n2", "h2", 1000.0, 1100.0)
    assert not long.pause_now(False, now=1064.0) and long.pause_now(False, now=1065.0)
    assert DriverNotice("n2", "h2", 1000.0, 1004.0).pause_now(False, now=1000.0)
    assert NOTICE.time_left(1005.0) == 15.0


def test_a_drain_with_no_deadline_pauses_a_loop_that_saves_nothing_a_minute_after_the_notice() -> None:
    none = DriverNotice("n2", "h2", 1000.0, None)
    assert none.time_left(1050.0) is None
    assert not none.pause_now(False, now=1059.0) and none.pause_now(False, now=1060.0)


def test_a_worker_reads_the_notice_only_while_its_driver_watches(tmp_path: Path) -> None:
    assert driver_drains.watched_folder() is None
    driver_drains.watch_folder(tmp_path)
    try:
        assert driver_drains.watched_folder() == tmp_path
    finally:
        driver_drains.watch_folder(None)
    assert driver_drains.watched_folder() is None
