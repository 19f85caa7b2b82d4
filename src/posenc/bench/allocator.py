"""The memory allocator of a benchmark process: freed memory reused, so that no floor page-faults.

With glibc's default settings a tensor of 32 MiB or more is a fresh ``mmap`` each time it is
allocated and its pages fault in on first touch, so ``x.clone()`` costs 2-3x the copy into a
preallocated tensor, and the ratio swings between processes. With ``mmap_max=0`` (no separate
mappings) and a trim threshold larger than the benchmark's memory (freed memory kept), a new
tensor reuses pages already faulted in: the clone costs the copy, and every case allocates alike.
glibc reads these settings once, at start-up (``GLIBC_TUNABLES``, see the glibc manual's
"Memory Allocation Tunables"), so ``posenc bench`` runs itself again with them.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["TUNABLES", "reuses_memory", "rerun_command", "page_faults"]

#: the settings ``posenc bench`` runs under (16 GiB of freed memory kept)
TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184"


def reuses_memory(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process's allocator was started with freed memory reused (``mmap_max=0``)."""
    return "glibc.malloc.mmap_max=0" in environ.get("GLIBC_TUNABLES", "")


def rerun_command(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]] | None:
    """The command and environment that run the ``posenc`` command line ``argv`` (``sys.argv``)
    again under :data:`TUNABLES`; None where that is already so, where glibc is not the C library,
    or where ``argv`` is not the ``posenc`` command (``posenc bench`` called from Python, a test)."""
    if reuses_memory(environ) or platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    program = Path(argv[0]) if argv else Path()
    package = Path(__file__).resolve().parent.parent  # src/posenc
    started_as_posenc = program.name == "posenc" or (
        program.name == "__main__.py" and package in program.resolve().parents
    )
    if not started_as_posenc:
        return None
    env = dict(environ)
    env["GLIBC_TUNABLES"] = ":".join(filter(None, (environ.get("GLIBC_TUNABLES"), TUNABLES)))
    return [sys.executable, "-m", "posenc", *argv[1:]], env


def page_faults(fn: Callable[[], object], calls: int = 3) -> float:
    """Minor page faults per call of ``fn`` in this process (``getrusage``), after two calls to warm
    up (the heap grows to hold two calls' results, the one kept and the next)."""
    import resource  # Unix only

    fn()
    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls
