"""The README's examples stay true: its spec reference example is a valid spec."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from hpsearch.spec import load_spec

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_spec_reference_example_is_valid():
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "the README has no yaml example"
    spec = load_spec(yaml.safe_load(blocks[0]))
    assert spec.name == "digits-quick" and spec.scaling.num_workers == 2
