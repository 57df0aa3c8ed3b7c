"""``hpsearch check`` end to end on the shipped quick spec: one 2-worker trial cut, resumed and judged.

One Ray run (about 70 s here). The judgement of each check, and each failing line, is tested without
Ray in ``tests/experiment/test_check.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpsearch.cli import main

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

SPEC = Path(__file__).resolve().parents[3] / "search_spaces" / "digits_quick.yaml"


def test_the_quick_spec_passes_its_check_and_writes_only_in_the_check_folder(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check", str(SPEC), "--set", f"storage_path={tmp_path}", "--set", "search_space.epochs=4"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert [p.name for p in tmp_path.iterdir()] == ["digits-quick.check"]  # nothing outside its folder
    lines = [line.strip() for line in out.splitlines()]
    assert sum(line.startswith("PASS") for line in lines) == 4 and not any(line.startswith("FAIL") for line in lines)
    record = json.loads((tmp_path / "digits-quick.check" / "hpsearch_check.json").read_text())
    assert record["ok"] is True and record["workers"] == 2
    assert [c["name"] for c in record["checks"]] == ["ranks", "metric", "checkpoint", "restore"]
    assert record["startup_s"] > 0 and record["report_s"] > 0 and record["restore_startup_s"] > 0
    # the restored run's first report follows the checkpoint it restored from
    restore = record["checks"][3]["text"]
    assert restore.startswith("a new run restored from that checkpoint: its first report was epoch ")
