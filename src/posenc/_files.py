"""Files written whole or not at all (results, figures, the atlas page, benchmark reports)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["replaced_whole"]


@contextlib.contextmanager
def replaced_whole(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary name beside ``path`` for the block to write; renamed onto ``path`` when the block
    ends, removed when it fails or is interrupted (a full disk, Ctrl-C, SIGTERM): ``path`` holds
    the old file or the new one, never part of one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            if tmp.is_file():
                tmp.unlink()
        raise
