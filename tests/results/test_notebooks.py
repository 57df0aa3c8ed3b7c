"""The notebooks: stored without outputs, and they run top to bottom against a real small search.

The execution test runs ``quickstart.ipynb`` (which runs its own search, shrunk to 2 trials
of 2 epochs through its parameters, with its storage in a temporary folder) and then
``analysis.ipynb`` on the folder that search wrote: one search in all. Each notebook runs in its own kernel, which starts
its own embedded Ray; it does not use the test session's cluster.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ["quickstart.ipynb", "analysis.ipynb"]


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_stored_without_outputs(name: str) -> None:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code, name
    assert [c.outputs for c in code] == [[] for _ in code]
    assert [c.execution_count for c in code] == [None for _ in code]
    assert set(notebook.metadata) <= {"kernelspec", "language_info"}  # no widget state, no papermill leftovers


@pytest.mark.parametrize("name", NAMES)
def test_notebook_reads_its_parameters_from_the_environment(name: str) -> None:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    parameters = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(parameters) == 1
    assert "os.environ.get(" in parameters[0].source


def _execute(name: str, timeout: int) -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    try:
        client.execute()  # raises CellExecutionError, with the cell and its traceback, if a cell fails
    except Exception as err:  # noqa: BLE001 - a timeout says nothing of what the cell printed: add it
        printed = "".join(
            out.get("text", "")
            for cell in notebook.cells
            if cell.cell_type == "code"
            for out in cell.get("outputs", [])
        )
        raise AssertionError(f"{name} failed: {err}\n--- what its cells printed ---\n{printed[-6000:]}") from err
    return notebook


@pytest.mark.ray
@pytest.mark.timeout(900)
@pytest.mark.full
def test_quickstart_then_analysis_execute_top_to_bottom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPSEARCH_STORAGE", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("HPSEARCH_TRIALS", "2")  # one round of two trials at once: the notebook's path, half the time
    monkeypatch.setenv("HPSEARCH_EPOCHS", "2")
    _execute("quickstart.ipynb", timeout=600)
    experiment = tmp_path / "digits-notebook"
    assert (experiment / "hpsearch_spec.yaml").is_file()
    assert (experiment / "hpsearch_report.html").is_file()

    (experiment / "hpsearch_report.html").unlink()
    monkeypatch.setenv("HPSEARCH_EXPERIMENT", str(experiment))
    notebook = _execute("analysis.ipynb", timeout=300)
    assert (experiment / "hpsearch_report.html").is_file()
    images = sum("image/png" in out.get("data", {}) for cell in notebook.cells for out in cell.get("outputs", []))
    assert images >= 7  # the six plots of hpsearch.plots and Optuna's intermediate values
