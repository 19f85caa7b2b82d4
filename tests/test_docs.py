"""The examples of ``docs/stack.md`` run as written (each ``python`` block, in its own namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "stack.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_page_has_its_four_examples():
    assert len(BLOCKS) == 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index, capsys):
    if "transformers" in BLOCKS[index]:
        pytest.importorskip("transformers")
    exec(compile(BLOCKS[index], f"{DOC.name} example {index + 1}", "exec"), {"__name__": "docs_example"})  # noqa: S102
