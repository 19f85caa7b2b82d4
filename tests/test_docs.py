"""Every code block of ``README.md`` and ``docs/*.md`` runs as written, after the README's setup
(posenc installed, ``posenc`` on the PATH).

``python`` blocks run in a Python process of their own (this interpreter), ``bash`` blocks in bash
(``-e``, ``-o pipefail``), both with the ``posenc`` of this interpreter's environment first on the
PATH, in a fresh folder holding a copy of ``docs/experiments``, so that a command that writes
(``--out report``, plots beside the shipped records) leaves the repository as it was; ``json``
blocks must parse. A block preceded by a line ``<!-- not run: REASON -->`` is skipped with that reason; a
block without a language, or in another one, fails: the test could not run it. Blocks with the
same language and text run once.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>\S.*?) -->$")
LANGUAGES = ("python", "bash", "json")


@dataclass(frozen=True)
class Block:
    where: str  # "docs/usage.md:93"
    lang: str
    body: str
    not_run: str | None  # the reason given, or None


def _blocks() -> list[Block]:
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            before = text[: match.start()].rstrip("\n").splitlines()
            marker = NOT_RUN.match(before[-1].strip()) if before else None
            line = text.count("\n", 0, match.start()) + 1
            where = f"{doc.relative_to(ROOT).as_posix()}:{line}"
            found.append(Block(where, match["lang"].strip(), match["body"], marker and marker["reason"]))
    return found


BLOCKS = _blocks()
UNIQUE: dict[tuple[str, str], list[Block]] = {}
for _block in BLOCKS:
    UNIQUE.setdefault((_block.lang, _block.body), []).append(_block)
CASES = [
    pytest.param(same, id=" ".join(b.where for b in same), marks=[pytest.mark.slow] if same[0].lang != "json" else [])
    for same in UNIQUE.values()
]


def test_the_docs_have_their_blocks():
    """The parser sees the blocks: the README's example and commands, usage.md's, stack.md's four."""
    where = [b.where.split(":")[0] for b in BLOCKS]
    assert where.count("README.md") >= 3 and where.count("docs/stack.md") == 4 and "docs/usage.md" in where
    unrunnable = [(b.where, b.lang) for b in BLOCKS if b.lang not in LANGUAGES and not b.not_run]
    assert not unrunnable, f"blocks in no language the test runs, not marked not run: {unrunnable}"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A fresh working folder with a copy of the shipped experiment records."""
    shutil.copytree(ROOT / "docs" / "experiments", tmp_path / "docs" / "experiments")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("same", CASES)
def test_block_runs_as_written(same: list[Block], folder: Path) -> None:
    block = same[0]
    skipped = [b for b in same if b.not_run]
    if skipped:
        assert len(skipped) == len(same), f"{[b.where for b in skipped]} is marked not run, its copies are not"
        pytest.skip(f"not run: {block.not_run}")
    if block.lang in ("python", "bash"):
        if block.lang == "python" and "transformers" in block.body:
            pytest.importorskip("transformers")
        script = folder / ("block.py" if block.lang == "python" else "block.sh")
        script.write_text(block.body, encoding="utf-8")
        command = (
            [sys.executable, script.name] if block.lang == "python" else ["bash", "-e", "-o", "pipefail", script.name]
        )
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert result.returncode == 0, f"{block.where} exited {result.returncode}:\n{result.stderr[-3000:]}"
    elif block.lang == "json":
        json.loads(block.body)
    else:
        pytest.fail(f"{block.where}: a ```{block.lang or '(no language)'} block; tag it with one of {LANGUAGES}")
