"""Fixtures of the experiments' tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def file_writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """``("fsync", inode)`` and ``("replace", inode of the target)`` as they happen."""
    events: list[tuple[str, int]] = []
    fsync, replace = os.fsync, os.replace

    def fsync_(fd: int) -> None:
        events.append(("fsync", os.fstat(fd).st_ino))
        fsync(fd)

    def replace_(src, dst, **kwargs) -> None:
        replace(src, dst, **kwargs)
        events.append(("replace", os.stat(dst).st_ino))

    monkeypatch.setattr(os, "fsync", fsync_)
    monkeypatch.setattr(os, "replace", replace_)
    return events
