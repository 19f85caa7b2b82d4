"""Positions known to be the range ``p0, p0 + 1, ...`` without reading them.

Default positions are made by ``torch.arange`` (:func:`posenc.schemes.base.default_positions`),
and :func:`mark_range` records that on the tensor: the row caches slice their tables, the bias
cache and FlexAttention take their offset from the record, and none of them reads the positions
back, which on an accelerator synchronises the host with the device. Positions without a record
are read (:func:`range_start`).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["mark_range", "known_range", "range_start"]


def mark_range(positions: Tensor, start: int) -> Tensor:
    """Record on ``positions`` (just made by ``torch.arange(start, ...)``) that it is that range.
    An in-place edit later bumps the version counter and the record no longer applies (an edit
    through ``.data`` or a NumPy view does not: make new positions instead). Nothing is recorded
    while compiling or on inference tensors (which have no version counter). Returns ``positions``."""
    if not torch.compiler.is_compiling() and not positions.is_inference():
        positions._posenc_range = (start, positions._version)
    return positions


def known_range(positions: Tensor) -> int | None:
    """The start of the range :func:`mark_range` recorded on ``positions``, while unedited; None
    otherwise (nothing is read from the tensor's values)."""
    known = None if torch.compiler.is_compiling() else getattr(positions, "_posenc_range", None)
    if known is not None and known[1] == positions._version:
        return known[0]
    return None


def range_start(positions: Tensor) -> int | None:
    """``p0`` if ``positions`` is the 1-D integer range ``p0, p0 + 1, ...``, else None (read from
    the values unless :func:`mark_range` recorded it)."""
    if (
        positions.dim() != 1
        or positions.is_floating_point()
        or positions.dtype == torch.bool
        or positions.numel() == 0
        or positions.device.type == "meta"
    ):
        return None
    known = known_range(positions)
    if known is not None:
        return known
    start = int(positions[0])
    expected = torch.arange(start, start + positions.numel(), device=positions.device)
    return start if torch.equal(positions.long(), expected) else None
