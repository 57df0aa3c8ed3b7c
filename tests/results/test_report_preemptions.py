"""A trial whose node was drained, read back: ``load_results``' table, the summary and the report say
``preempted``, and none of them counts it as an error.

The folder is the standard fake search (:mod:`fake_experiment`); trial ``aaaa0001`` (finished, a checkpoint
at every epoch, reports at ``T0 + 20`` to ``T0 + 22``) gets the records of a drain, written with hpsearch's own
writers: rank 0's notice in its first attempt, a second attempt (the restart) and the drain's reason, which
the trial driver adds.
"""

from __future__ import annotations

import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from fake_experiment import T0, standard_trials, write_experiment  # noqa: E402

from hpsearch.analysis import load_results, summarize, summarize_experiment  # noqa: E402
from hpsearch.experiment import files  # noqa: E402
from hpsearch.experiment.layout import ERRORED, FINISHED  # noqa: E402
from hpsearch.results.report import write_report  # noqa: E402

DRAINED = "aaaa0001"


@pytest.fixture(scope="module")
def exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exp = write_experiment(tmp_path_factory.mktemp("preempted") / "fake", standard_trials(), summary=False)
    trial = files.run_dir(exp, DRAINED)
    _, first = files.claim_attempt(trial, group_id="g1", world_size=2, run_name=DRAINED, started_at=T0 + 1)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(time, "time", lambda: T0 + 20.5)  # read at epoch 2's report, 30 s before the deadline
        files.append_notice(
            first,
            deadline=T0 + 50.5,
            nodes=[{"node_id": "n2", "host": "spot-7", "ranks": [1]}],
            epoch=2,
            report=2,
            saved_epoch=2,
            forced=True,
        )
    files.claim_attempt(trial, group_id="g2", world_size=2, run_name=DRAINED, started_at=T0 + 21.5)
    files.append_reason(first, "n2", "spot instance reclaimed")
    summarize_experiment(exp, wall_time_s=123.4, interrupted=False)  # as a search ends
    return exp


def test_load_results_lists_the_drain_and_the_restart_from_its_checkpoint(exp: Path) -> None:
    [row] = load_results(exp).preemptions.to_dict("records")
    assert (row["trial_id"], row["attempt"], row["hosts"], row["reason"]) == (
        DRAINED,
        1,
        ("spot-7",),
        "spot instance reclaimed",
    )
    assert row["warning_s"] == 30 and (row["epoch"], row["saved_epoch"], row["forced"]) == (2, 2, True)
    # epochs 1-3 were reported before the restart, each with its checkpoint: none lost
    assert (row["restarted"], row["restart_attempt"], row["restored_epoch"], row["reports_lost"]) == (True, 2, 3, 0)


def test_the_summary_counts_the_restart_and_no_error(exp: Path) -> None:
    summary = summarize(load_results(exp), wall_time_s=1.0)
    drained = next(t for t in summary.trials if t.trial_id == DRAINED)
    assert (drained.status, drained.preempted, drained.error) == (FINISHED, 1, "")
    assert summary.count(ERRORED) == 1  # the standard folder's one errored trial, as without the drain
    written = files.read_summary(exp) or {}
    assert [t["preempted"] for t in written["trials"] if t["trial_id"] == DRAINED] == [1]


def test_the_report_says_preempted_with_the_host_and_reason_apart_from_the_errors(exp: Path, tmp_path: Path) -> None:
    page = write_report(exp, tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<h2>Preempted (1)</h2>" in page and "spot-7" in page and "spot instance reclaimed" in page
    assert "1 restart of 1 trial, not errors" in page  # the cards
    errors = page[page.index("<h2>Errors (1)</h2>") : page.index("<h2>Preempted (1)</h2>")]
    assert DRAINED not in errors
    text = write_report(exp, tmp_path / "r.md", fmt="md").read_text(encoding="utf-8")
    assert "## Preempted (1)" in text and "spot\\-7" in text and "Restarts, not errors." in text
