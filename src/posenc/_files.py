"""Files written whole or not at all (results, checkpoints, figures, the atlas page, benchmark reports).

A file is written to a temporary name beside it (``.NAME.tmp<pid>``), flushed to the disk, renamed
over the old one, and the rename flushed too: a kill leaves the old file or the new one, and a power
cut after the rename leaves the new one, never an empty file. A kill can leave the temporary itself;
:func:`remove_stale_temporaries` clears those of processes that are gone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterator
from pathlib import Path

from . import _interrupts

__all__ = ["replaced_whole", "fsync_path", "remove_stale_temporaries", "file_in_the_way"]

#: fsync errors that mean "this file system does not flush" (some FUSE and network mounts), not a failed write
_NOT_SUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP}


@contextlib.contextmanager
def replaced_whole(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary name beside ``path`` for the block to write; flushed to the disk and renamed onto
    ``path`` when the block ends, removed when it fails or is interrupted (a full disk, Ctrl-C,
    SIGTERM): ``path`` holds the old file or the new one, never part of one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        with _interrupts.shielded(), contextlib.suppress(OSError):  # a signal sent again waits for this
            if tmp.is_file():
                tmp.unlink()
        if isinstance(err, OSError) and err.filename is None and err.errno is not None:
            # a write that the disk refused (ENOSPC, EIO) names no file: this one
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    fsync_path(path.parent, folder=True)  # the rename itself


def fsync_path(path: str | os.PathLike, *, folder: bool = False) -> None:
    """``fsync`` the file (or, with ``folder``, the folder: the names in it) at ``path``. A write
    the disk refuses is an OSError (ENOSPC, EIO); a file system that cannot flush, or a system
    that cannot open folders (Windows), is passed over."""
    if folder and os.name == "nt":
        return
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if folder else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if folder:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in _NOT_SUPPORTED:
            raise
    finally:
        os.close(fd)


def remove_stale_temporaries(folder: str | os.PathLike, name: str = r"\..+") -> list[Path]:
    """Delete the files in ``folder`` named ``<name>.tmp<pid>`` (``name`` a regular expression; by
    default :func:`replaced_whole`'s ``.NAME``) of a process that no longer runs, or of this one
    (which has none open when it calls this); returns them. Folders are left alone."""
    pattern = re.compile(rf"{name}\.tmp(\d+)")
    try:
        entries = list(os.scandir(folder))
    except OSError:  # no folder: nothing left in it
        return []
    removed = []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        pid = int(match.group(1))
        if pid == os.getpid() or not _alive(pid):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def file_in_the_way(path: str | os.PathLike) -> Path | None:
    """The first of ``path``'s parent folders, from the top, that exists as a file (or anything but a
    folder): what makes creating ``path`` fail with "File exists" or "Not a directory"; None when
    there is none."""
    for parent in reversed(Path(path).parents):
        if not parent.exists():
            return None
        if not parent.is_dir():
            return parent
    return None


def _alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill there ends the process: no way to ask, so take it as running
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process: alive
        return True
    return True
