"""What ``hpsearch.run`` and ``hpsearch.resume`` return, the deprecated ``*_with_summary`` twins, and the
pre-flight both share (issue 23, point 9). No Ray cluster: the ResultGrid is a stand-in, and the
pre-flight's steps are recorded instead of run."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_experiment import standard_trials, write_experiment

from hpsearch.analysis import SearchSummary, load_results
from hpsearch.errors import ExperimentExistsError
from hpsearch.spec import load_spec

SPEC: dict[str, Any] = {
    "name": "pre",
    "trainable": "json:dumps",  # imports in no time: these tests are about the order of the checks
    "metric": "val_loss",
    "mode": "min",
}


class FakeGrid:
    """Ray's ResultGrid as code written against ``hpsearch.run``'s old return value uses it."""

    experiment_path = "/somewhere/exp"

    def __init__(self, results: list[str]) -> None:
        self._results = results
        self.best_asked: tuple = ()

    def __len__(self) -> int:
        return len(self._results)

    def __getitem__(self, i: int) -> str:
        return self._results[i]

    def get_best_result(self, metric: str | None = None, mode: str | None = None) -> str:
        self.best_asked = (metric, mode)
        return self._results[0]

    def get_dataframe(self, filter_metric: str | None = None) -> str:
        return f"table by {filter_metric}"

    @property
    def errors(self) -> list[Exception]:
        return [ValueError("trial 2")]

    @property
    def num_errors(self) -> int:
        return 1

    @property
    def num_terminated(self) -> int:
        return len(self._results) - 1


def _result(exp: Path) -> Any:
    from hpsearch.runtime.search.search_result import SearchResult

    summary = SearchSummary(name="fake", metric="val_loss", mode="min", wall_time_s=1.0)
    return SearchResult(FakeGrid(["r0", "r1", "r2"]), summary, exp)


def test_the_search_result_answers_as_the_result_grid_did(tmp_path: Path) -> None:
    result = _result(tmp_path)
    assert len(result) == 3 and list(result) == ["r0", "r1", "r2"] and result[1] == "r1"
    assert [r for r in result] == [result[i] for i in range(len(result))]  # the loops of benchmarks/ and notebooks
    assert result.get_best_result(metric="val_acc", mode="max") == "r0"
    assert result.result_grid.best_asked == ("val_acc", "max")  # the arguments reach Ray's method
    assert result.get_dataframe(filter_metric="val_loss") == "table by val_loss"
    assert [str(e) for e in result.errors] == ["trial 2"]
    assert (result.num_errors, result.num_terminated) == (1, 2)
    assert result.experiment_path == "/somewhere/exp"  # any other attribute is the grid's
    with pytest.raises(AttributeError):
        result.no_such_attribute  # noqa: B018  # the grid has none either: the error a user expects


def test_the_search_result_carries_the_summary_and_reads_the_folder_back(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "fake", standard_trials())
    result = _result(exp)
    assert result.experiment_dir == exp and result.summary.name == "fake"
    assert result.results().trials.equals(load_results(exp).trials)
    by_acc = result.results(metric="val_acc", mode="max")
    assert (by_acc.metric, by_acc.mode) == ("val_acc", "max")
    assert repr(result) == f"SearchResult({exp}: 0 trial(s))"


def test_a_search_result_copies_and_pickles_without_recursing(tmp_path: Path) -> None:
    """__getattr__ forwards to the grid, never for the object's own fields while they are unset."""
    result = _result(tmp_path)
    assert copy.copy(result).result_grid is result.result_grid
    again = pickle.loads(pickle.dumps(result))
    assert len(again) == 3 and again.experiment_dir == tmp_path


def test_hpsearch_search_result_is_public_and_loads_no_ray() -> None:
    code = (
        "import sys, hpsearch\n"
        "from hpsearch.runtime.search.search_result import SearchResult\n"
        "assert hpsearch.SearchResult is SearchResult and 'SearchResult' in hpsearch.__all__\n"
        "assert 'ray' not in sys.modules, 'ray loaded'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", ["run", "resume"])
def test_the_with_summary_twins_warn_and_still_return_the_grid_and_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    from hpsearch.runtime.search import tuner

    result = _result(tmp_path)
    seen: dict[str, Any] = {}

    def fake(first: Any, **kwargs: Any) -> Any:
        seen.update(kwargs, first=first)
        return result

    monkeypatch.setattr(tuner, name, fake)
    twin = getattr(tuner, f"{name}_with_summary")
    with pytest.warns(DeprecationWarning, match=rf"{name}_with_summary is deprecated.*hpsearch\.{name}\(") as caught:
        grid, summary = twin("the-spec", verbose=True, stream=None)
    assert grid is result.result_grid and summary is result.summary
    assert seen["first"] == "the-spec" and seen["verbose"] is True
    assert caught[0].filename == __file__  # the warning names the caller's line, not hpsearch's


# ----------------------------------------------------------------------------- the one pre-flight


def _record_steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every step of the pre-flight, recorded in the order it runs, none of them doing anything."""
    from hpsearch.runtime.search import preflight

    steps: list[str] = []

    def step(name: str, returns: Any = None) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            steps.append(name)
            return returns

        return record

    monkeypatch.setattr(preflight, "check_storage", step("storage"))
    monkeypatch.setattr(preflight, "check_not_spent", step("budget"))
    monkeypatch.setattr(preflight, "_check_tracking", step("tracking"))
    monkeypatch.setattr(preflight.internals, "preflight", step("internals"))
    monkeypatch.setattr(preflight, "autoscaling_for", step("cluster"))
    monkeypatch.setattr(preflight.session, "end_leftovers", step("leftovers", []))
    return steps


def test_run_checks_in_order_and_ends_leftovers_only_of_a_folder_it_overwrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpsearch.runtime.search.preflight import preflight

    steps = _record_steps(monkeypatch)
    spec = load_spec({**SPEC, "storage_path": str(tmp_path)})
    preflight(spec, resuming=False)
    assert steps == ["storage", "tracking", "internals", "cluster"]  # a new folder: nothing was left running
    steps.clear()
    write_experiment(spec.experiment_dir, standard_trials())
    preflight(spec, resuming=False, overwrite=True)
    assert steps == ["storage", "tracking", "internals", "cluster", "leftovers"]
    steps.clear()
    with pytest.raises(ExperimentExistsError, match="already exists; continue it with `hpsearch resume"):
        preflight(spec, resuming=False)
    assert steps == []  # the folder is checked first


def test_resume_checks_the_budget_after_the_storage_and_always_ends_leftovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpsearch.runtime.search.preflight import preflight

    steps = _record_steps(monkeypatch)
    spec = load_spec({**SPEC, "storage_path": str(tmp_path)})
    assert preflight(spec, resuming=True, cluster="ignored on resume") is None
    assert steps == ["storage", "budget", "tracking", "internals", "leftovers"]


def test_run_refuses_a_folder_that_is_not_an_experiment_even_with_overwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpsearch.runtime.search.preflight import preflight

    steps = _record_steps(monkeypatch)
    spec = load_spec({**SPEC, "storage_path": str(tmp_path)})
    spec.experiment_dir.mkdir(parents=True)
    (spec.experiment_dir / "mine.txt").write_text("not hpsearch's")
    with pytest.raises(ExperimentExistsError, match="is not an hpsearch experiment folder"):
        preflight(spec, resuming=False, overwrite=True)
    assert steps == [] and (spec.experiment_dir / "mine.txt").exists()
