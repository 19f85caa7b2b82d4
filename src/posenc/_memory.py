"""Whether a tensor can be allocated, asked before a quadratic one (a bias, a mask, scores) is built.

Shape legend: ``b`` batch, ``h`` heads, ``sq``/``sk`` query/key lengths.

A bias ``[h, sq, sk]`` grows with the square of the length: 8 heads at L = 65536 take 128 GiB in
float32. Without a check the allocator's own message reaches the user (``[enforce fail at
alloc_cpu.cpp:127] ... you tried to allocate 137438953472 bytes``), naming neither the tensor nor
a way around it. :func:`check_fits` raises :class:`TooLargeError` instead, before the allocation,
when the tensor is larger than the memory available on its device:

* CPU: ``MemAvailable`` in ``/proc/meminfo`` on Linux, else the physical memory
  (``os.sysconf``), else :data:`FALLBACK_BYTES`;
* CUDA (and other accelerators whose torch module has ``mem_get_info``): the free device memory
  plus what torch's caching allocator holds unused;
* ``meta``: nothing is allocated, nothing is checked.

The check reads the operating system's figure at each call (no state is kept) and only for
tensors of at least :data:`CHECK_FROM_BYTES`, so small tensors cost a multiplication. It answers
"certainly too large", not "certainly fits": a tensor near the limit may still fail in the
allocator, and the intermediates a computation makes beside its result are not counted.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import torch

__all__ = ["TooLargeError", "check_fits", "available_bytes", "BIAS_HINT", "CHECK_FROM_BYTES", "FALLBACK_BYTES"]

#: Tensors smaller than this are not checked (the check reads ``/proc/meminfo``, ~20 us).
CHECK_FROM_BYTES = 64 << 20
#: The available memory assumed where the system does not say: generous, so that only sizes no
#: machine has are refused there.
FALLBACK_BYTES = 1 << 40

#: The ways around a bias too large to materialise.
BIAS_HINT = (
    "posenc.Attention computes a bias per score through FlexAttention, never materialised, for inference "
    "without a key_mask or dropout (posenc.flex.set_mode('always') makes it the path whenever it applies); "
    "otherwise use a shorter sequence, or chunk the queries (bias(q_positions[i:j], k_positions) "
    "one block of rows at a time)"
)


class TooLargeError(MemoryError, ValueError):
    """A tensor larger than the memory available on its device, refused before it is allocated.

    A ``MemoryError`` (what it is) and a ``ValueError`` (the input's size is what is wrong), so that
    either ``except`` catches it."""


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):  # no sysconf (Windows) or no such name
        return None


def available_bytes(device: torch.device | str | None = None) -> int:
    """The memory a new tensor on ``device`` (default: the CPU) can take now, in bytes (see the
    module docstring for where the figure comes from)."""
    device = torch.device("cpu" if device is None else device)
    if device.type == "cpu":
        return _meminfo_available() or _physical_memory() or FALLBACK_BYTES
    backend = getattr(torch, device.type, None)
    mem_get_info = getattr(backend, "mem_get_info", None)
    if callable(mem_get_info):
        try:
            free, _ = mem_get_info(device)
        except (RuntimeError, AssertionError, TypeError):  # not compiled in, no such device
            return FALLBACK_BYTES
        unused = 0
        if device.type == "cuda":  # blocks torch's caching allocator holds, free for reuse
            unused = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free) + max(int(unused), 0)
    return FALLBACK_BYTES


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def check_fits(
    what: str,
    shape: Sequence[int],
    dtype: torch.dtype,
    device: torch.device | str | None = None,
    *,
    hint: str = BIAS_HINT,
) -> None:
    """Raise :class:`TooLargeError` if a tensor ``shape`` of ``dtype`` cannot fit in the memory
    available on ``device``, naming ``what`` it is, its shape and size, and ``hint`` (the ways
    around it). Nothing is checked while compiling (sizes may be symbolic) or on ``meta``."""
    if torch.compiler.is_compiling():
        return
    device = torch.device("cpu" if device is None else device)
    if device.type == "meta":
        return
    size = math.prod(int(n) for n in shape) * dtype.itemsize
    if size < CHECK_FROM_BYTES:
        return
    available = available_bytes(device)
    if size > available:
        raise TooLargeError(
            f"{what} of shape {list(shape)} ({dtype}) would take {_gib(size)}, more than the "
            f"{_gib(available)} of memory available on {device}; {hint}"
        )
