"""Passwords in tracker URLs: ``${VAR}`` references expanded where a store opens, every written copy redacted.

Pure: the rules of :mod:`hpsearch.spec.credentials`, then the one writer of the spec as run and the
two reports on folders built with the project's writers. The trackers and the start-up check are in
tests/runtime/search/test_tracking.py, the RayJob in tests/planning/test_rayjob.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_experiment import standard_trials, write_experiment

from hpsearch.analysis import load_results
from hpsearch.experiment import files
from hpsearch.experiment.layout import SPEC_FILE
from hpsearch.results.report import write_report
from hpsearch.spec.credentials import has_password, redact_text, redact_tree, redact_url, resolve_url, url_problems

SECRET = "s3cr%3At"  # percent-encoded, as a URL carries a password with a colon
PG = f"postgresql+psycopg2://alice:{SECRET}@db.internal:5432/optuna"


@pytest.mark.parametrize(
    ("url", "written"),
    [
        (PG, "postgresql+psycopg2://alice:***@db.internal:5432/optuna"),
        (f"https://alice:{SECRET}@mlflow.internal", "https://alice:***@mlflow.internal"),
        ("https://mlflow.internal/?token=abc&x=1", "https://mlflow.internal/?token=***&x=1"),
        ("postgresql://alice:${DB_PASSWORD}@db/optuna", "postgresql://alice:${DB_PASSWORD}@db/optuna"),  # a reference
        ("postgresql://alice@db/optuna", "postgresql://alice@db/optuna"),  # no password
        ("postgresql://alice:***@db/optuna", "postgresql://alice:***@db/optuna"),  # already redacted
        ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
    ],
)
def test_a_url_is_written_without_its_password(url: str, written: str) -> None:
    assert redact_url(url) == written
    assert has_password(url) == (url != written)


def test_a_message_or_a_tree_loses_every_password_in_it() -> None:
    assert redact_text(f"cannot open {PG!r}: refused") == f"cannot open {redact_url(PG)!r}: refused"
    tree = {"tracking": {"optuna": PG, "mlflow": {"tracking_uri": f"http://bob:{SECRET}@h"}}, "n": [1, PG]}
    assert SECRET not in repr(redact_tree(tree))
    assert redact_tree(tree)["n"] == [1, redact_url(PG)]


def test_a_url_is_resolved_in_the_process_that_opens_it() -> None:
    field = "tracking.optuna"
    env = {"DB_PASSWORD": "pw", "HPSEARCH_OPTUNA_PASSWORD": "from-env"}
    assert resolve_url(field, "postgresql://alice:${DB_PASSWORD}@db/o", env) == "postgresql://alice:pw@db/o"
    assert resolve_url(field, "postgresql://alice:***@db/o", env) == "postgresql://alice:from-env@db/o"
    assert resolve_url(field, PG, {}) == PG  # the search that was given it: used as given
    with pytest.raises(KeyError, match=r"names \$\{DB_PASSWORD\}, which is not set in this environment"):
        resolve_url(field, "postgresql://alice:${DB_PASSWORD}@db/o", {})


def test_a_resume_without_the_password_is_told_which_variable_to_export() -> None:
    [problem] = url_problems("tracking.optuna", "postgresql://alice:***@db/optuna", {})
    assert str(problem) == (
        "tracking.optuna: is 'postgresql://alice:***@db/optuna': its password was not written to the experiment "
        "folder, so this process needs it: export HPSEARCH_OPTUNA_PASSWORD=<the password> and run again (or name "
        "a variable in the URL, user:${MY_VAR}@, in the spec)"
    )
    [problem] = url_problems("tracking.mlflow.tracking_uri", "https://alice:***@m", {})
    assert "export HPSEARCH_MLFLOW_PASSWORD=" in str(problem)
    assert url_problems("tracking.optuna", "postgresql://alice:***@db/o", {"HPSEARCH_OPTUNA_PASSWORD": "x"}) == []


def _folder(tmp_path: Path) -> Path:
    trials = standard_trials()
    exp = write_experiment(tmp_path / "exp", trials)
    return exp


def test_the_spec_as_run_never_holds_the_password(tmp_path: Path) -> None:
    exp = _folder(tmp_path)
    spec = files.read_spec(exp) or {}
    spec["tracking"] = {"optuna": PG, "mlflow": {"tracking_uri": f"https://alice:{SECRET}@mlflow.internal"}}
    files.write_spec(exp, spec)
    text = (exp / SPEC_FILE).read_text()
    assert SECRET not in text
    assert "postgresql+psycopg2://alice:***@db.internal:5432/optuna" in text
    assert "https://alice:***@mlflow.internal" in text


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_a_report_of_an_older_folder_that_kept_a_password_does_not_show_it(tmp_path: Path, fmt: str) -> None:
    exp = _folder(tmp_path)
    text = (exp / SPEC_FILE).read_text()  # as a folder written before redaction holds it
    (exp / SPEC_FILE).write_text(text + f"tracking:\n  optuna: {PG}\n")
    out = write_report(load_results(exp), tmp_path / f"report.{fmt}", fmt=fmt)
    shown = out.read_text()
    assert SECRET not in shown and "alice:***@db.internal" in shown
