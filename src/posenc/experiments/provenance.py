"""What produced a record: the command, the versions (Python, torch, posenc and its git commit) and
the corpus, written by the runner into every record so that a committed result can be traced."""

from __future__ import annotations

import functools
import hashlib
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

__all__ = ["provenance", "corpus_info", "git_commit", "command_line"]


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The posenc source's git commit, with ``+dirty`` when its files differ from it; None outside git."""
    source = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no", "--", str(source)],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "") if head else None


def command_line() -> str:
    """The command this process runs, as a shell would take it (``posenc experiment ...``)."""
    argv = list(sys.argv)
    if argv and Path(argv[0]).name == "posenc":
        argv[0] = "posenc"
    return shlex.join(argv)


@functools.lru_cache(maxsize=8)
def corpus_info(task_name: str) -> dict[str, Any] | None:
    """``{"name", "source", "bytes", "sha256"}`` of a byte-LM task's text; None for generated tasks."""
    from .tasks import _corpus, get_task

    task = get_task(task_name)
    corpus = getattr(task, "corpus", None)
    if corpus is None:
        return None
    data = _corpus(corpus).numpy().tobytes()
    source = (
        f"pydoc_data.topics of Python {platform.python_version()}"
        if corpus == "text"
        else "Debian's fortunes package, the plain-text files of /usr/share/games/fortunes (or $POSENC_FORTUNES), sorted"
    )
    return {"name": corpus, "source": source, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def provenance(task_name: str, command: str | None) -> dict[str, Any]:
    """The provenance block of a record."""
    from .. import __version__

    return {
        "command": command if command is not None else command_line(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "posenc": __version__,
        "posenc_commit": git_commit(),
        "corpus": corpus_info(task_name),
    }
