"""Row caches for position tables: an optimisation only, equal to computing the rows directly.

A cache holds ``build(0..n-1)`` in a non-persistent buffer (so it never enters ``state_dict``),
grows to the next power of two when a larger position arrives, and is bypassed for float or
negative positions and inside ``torch.compile`` (where growing it would mutate a buffer).

It grows only while that stays proportionate: to at most ``MAX_ROWS`` rows, or to at most
``GROWTH`` times the number of rows asked for. A lone query at position 4,000,000 is built
directly instead of filling a table of 4 million rows (4 GiB of RoPE tables at head width 128),
while a full forward over 100,000 positions still caches them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..functional._checks import has_values, plain, stale_inference, version_of
from ..kernels.bias import params_key, same_params
from ..kernels.ranges import known_range

__all__ = ["cached_rows", "cached_range", "forget", "MAX_ROWS", "GROWTH"]

MAX_ROWS = 1 << 14  # a cache may always grow to this many rows
GROWTH = 2  # beyond it, to at most this many times the rows of the request that grows it


def _grown_rows(needed: int, requested: int) -> int | None:
    """Rows of a regrown cache holding positions ``0..needed-1`` (a power of two), or None if too large."""
    rows = max(64, 1 << max(needed - 1, 0).bit_length())  # next power of two >= needed
    return rows if rows <= max(MAX_ROWS, GROWTH * requested) else None


def _sources(module: nn.Module) -> list[Tensor]:
    """The float64 buffers the caches are built from (frequencies, decay rates)."""
    caches = module.__dict__.get("_cache_names", ())
    return [b for n, b in module._buffers.items() if b is not None and n not in caches and b.dtype == torch.float64]


def _source_key(module: nn.Module) -> list:
    """What identifies each source's contents (:func:`~posenc.kernels.bias.params_key`): on
    the CPU a copy of its values (an edit through ``.data``, as HF-style initialisation makes,
    leaves the version counter alone); on an accelerator its address and version counter, so that
    no device synchronises (this runs at every call)."""
    return [params_key(b) for b in _sources(module)]


def _stale_source(module: nn.Module, name: str, table: Tensor) -> bool:
    """Whether the frequencies changed since cache ``name`` was built, or the table itself was
    written to in place (through a slice handed out earlier, which shares its version counter)."""
    seen = module.__dict__.get("_cache_sources", {}).get(name)
    if seen is None or seen[1] != version_of(table):
        return True
    sources = _sources(module)
    return len(sources) != len(seen[0]) or not all(same_params(key, b) for key, b in zip(seen[0], sources))


def _store(module: nn.Module, name: str, table: Tensor) -> None:
    """Keep ``table`` as cache ``name``, with the key of the frequencies it was built from; not a
    table made under a ``torch.func`` transform (a wrapper, valid only inside it)."""
    if not plain(table):
        return
    module.register_buffer(name, table, persistent=False)
    module.__dict__.setdefault("_cache_names", set()).add(name)
    module.__dict__.setdefault("_cache_sources", {})[name] = (_source_key(module), version_of(table))


def forget(module: nn.Module) -> None:
    """Drop every cache of ``module`` (they are rebuilt on use): a cast must not leave a table
    rounded to 16 bits behind a float32 dtype (``.bfloat16().float()``)."""
    for name in module.__dict__.get("_cache_names", ()):
        if name in module._buffers:
            module._buffers[name] = None
    module.__dict__.pop("_cache_sources", None)


def cached_rows(
    module: nn.Module, name: str, positions: Tensor, build: Callable[[Tensor], Tensor], *, dtype: torch.dtype
) -> Tensor:
    """``build(positions)``, served from the cache buffer ``module.<name>`` where possible."""
    if positions.is_floating_point() or positions.numel() == 0 or not has_values(positions):
        return build(positions)
    start = known_range(positions)
    if start is not None and start >= 0:  # a range made by default_positions: a slice, nothing read back
        return cached_range(module, name, start, positions.numel(), build, dtype=dtype, device=positions.device)
    table = getattr(module, name, None)
    low, high = int(positions.min()), int(positions.max())
    if low < 0:
        return build(positions)
    if (
        table is None
        or high >= table.shape[0]
        or table.device != positions.device
        or table.dtype != dtype
        or stale_inference(table)
        or _stale_source(module, name, table)
    ):
        rows = _grown_rows(high + 1, positions.numel())
        if rows is None:
            return build(positions)
        table = build(torch.arange(rows, device=positions.device))
        _store(module, name, table)
    return table[positions.long()]  # int8/int16 cannot index, and uint8 would index as a mask


def cached_range(
    module: nn.Module,
    name: str,
    start: int,
    length: int,
    build: Callable[[Tensor], Tensor],
    *,
    dtype: torch.dtype,
    device: torch.device,
) -> Tensor:
    """Rows ``start .. start + length - 1`` as a slice of the cache (no gather, no host sync)."""
    table = getattr(module, name, None)
    end = start + length
    if torch.compiler.is_compiling():  # read the cache, never fill it (no buffer mutation in a graph)
        if table is not None and table.shape[0] >= end and table.device == device and table.dtype == dtype:
            return table[start:end]
        return build(torch.arange(start, end, device=device))
    if (
        table is None
        or end > table.shape[0]
        or table.device != device
        or table.dtype != dtype
        or stale_inference(table)
        or _stale_source(module, name, table)
    ):
        rows = _grown_rows(end, length)
        if rows is None:
            return build(torch.arange(start, end, device=device))
        table = build(torch.arange(rows, device=device))
        _store(module, name, table)
    return table[start:end]
