"""posenc.experiments.train: how checkpoints reach the disk (training itself: test_experiments.py)."""

from __future__ import annotations

import errno
import importlib
import os

import pytest
import torch

from posenc.experiments.train import load_checkpoint, save_checkpoint

train = importlib.import_module("posenc.experiments.train")  # the module: posenc.experiments.train is the function


STATE = {"config": {}, "model": {"w": torch.arange(3.0)}, "optimizer": {}, "step": 1, "losses": [0.5]}


def test_a_checkpoint_is_on_the_disk_before_it_is_renamed_into_place(tmp_path, file_writes):
    """The file is flushed before the rename and the folder after it: a power cut leaves the old
    checkpoint or the new one, never an empty file under the name (it was renamed unflushed)."""
    path = tmp_path / "run.pt"
    save_checkpoint(path, STATE)
    file, folder = path.stat().st_ino, tmp_path.stat().st_ino
    assert file_writes == [("fsync", file), ("replace", file), ("fsync", folder)]
    assert torch.equal(load_checkpoint(path, torch.device("cpu"))["model"]["w"], torch.arange(3.0))


class _FullDisk:
    """A file opened for writing on a full disk: every write fails with ENOSPC."""

    def __init__(self, handle) -> None:
        self.handle = handle

    def write(self, data) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.handle.close()

    def __getattr__(self, name):
        return getattr(self.handle, name)


def full_disk_open(file, mode="r", *args, **kwargs):
    """``open``, with the files opened for writing on a full disk."""
    handle = open(file, mode, *args, **kwargs)
    return _FullDisk(handle) if "w" in mode else handle


def test_a_full_disk_is_reported_as_one(tmp_path, monkeypatch):
    """A full disk at a checkpoint is ENOSPC naming the checkpoint (it was "cannot save a checkpoint
    (RuntimeError: [enforce fail at inline_container.cc:672] .)": torch's zip writer turns the
    write's OSError into its own RuntimeError); the old checkpoint stays, no temporary is left."""
    path = tmp_path / "run.pt"
    save_checkpoint(path, STATE)
    monkeypatch.setattr(train, "open", full_disk_open, raising=False)
    with pytest.raises(OSError) as caught:
        save_checkpoint(path, {**STATE, "step": 2, "losses": [0.5, 0.25]})
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    assert "No space left on device" in str(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == ["run.pt"]
    assert load_checkpoint(path, torch.device("cpu"))["step"] == 1
