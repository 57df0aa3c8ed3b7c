"""The closing lines of ``.ci/run``: each stage's wall time, the 30 slowest tests, the nested trial starts.

Run by ``.ci/run`` at its end, whatever happened, with the folder it wrote its records to:
``stages.tsv`` (a stage's name, its seconds and its exit status, a line each), one JUnit XML per
pytest stage (``<stage>.xml``) and ``trial_starts.txt`` (a count per Ray stage, written by
``tests/conftest.py``). In the gate (``--gate``) the starts are held to pyproject.toml's
``[tool.hpsearch.gate] max_trial_starts``: past it, one line says so and the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SLOWEST = 30


def _stages(records: Path) -> list[tuple[str, int, int]]:
    path = records / "stages.tsv"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    out = []
    for line in lines:
        name, seconds, status = line.split("\t")
        out.append((name, int(seconds), int(status)))
    return out


def _tests(records: Path) -> list[tuple[float, str, str]]:
    """(seconds, stage, test id) of every test case in the stages' JUnit files."""
    out = []
    for xml in sorted(records.glob("*.xml")):
        for case in ET.parse(xml).getroot().iter("testcase"):
            test = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            out.append((float(case.get("time") or 0.0), xml.stem, test))
    return sorted(out, reverse=True)


def _ceiling() -> int:
    sys.path.insert(0, str(REPO / "tests"))
    import trial_starts  # needs only the standard library: this runs outside the project's environment

    return trial_starts.ceiling()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("records", type=Path)
    parser.add_argument("--gate", action="store_true", help="hold the nested trial starts to the ceiling")
    args = parser.parse_args(argv)

    stages = _stages(args.records)
    print("\n== CI: the 30 slowest tests (every stage)")
    for seconds, stage, test in _tests(args.records)[:SLOWEST]:
        print(f"{seconds:8.1f} s  {stage:<10} {test}")
    print("\n== CI: each stage's wall time")
    for name, seconds, status in stages:
        print(f"{seconds:6d} s  {name}{'' if status == 0 else f'  (failed, exit {status})'}")
    total = sum(seconds for _, seconds, _ in stages)
    print(f"{total:6d} s  in all ({total / 60:.1f} min)")

    counts = args.records / "trial_starts.txt"
    per_stage = [int(line) for line in counts.read_text().split()] if counts.is_file() else []
    starts = sum(per_stage)
    if len(per_stage) > 1:
        print(f"\nNested trial starts per Ray stage, in order: {', '.join(map(str, per_stage))}")
    if not args.gate:
        print(f"\nNested trial starts: {starts} (the full suite: no ceiling)")
        return 0
    ceiling = _ceiling()
    print(f"\nNested trial starts: {starts} of the gate's ceiling of {ceiling} (pyproject.toml)")
    if starts > ceiling:
        print(
            f"CI: the gate started {starts} nested trials, past its ceiling of {ceiling} "
            "([tool.hpsearch.gate] max_trial_starts in pyproject.toml): fold the new search into one that "
            "exists, mark it `full`, or raise the ceiling in a change that says why"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
