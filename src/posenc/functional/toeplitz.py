"""Biases that depend only on ``k - q``, expanded from one value per distance: the Toeplitz layout.

Shape legend: ``h`` heads, ``sq``/``sk`` query/key lengths, ``w = sq + sk - 1`` distinct relative
positions.

For queries and keys on contiguous ranges of positions, such a bias is a Toeplitz matrix per head:
``bias[h, i, j] = values[h, (j - i) + sq - 1]``, fixed by ``w`` numbers per head.
:func:`toeplitz` expands them with one ``index_select`` of whole rows over an overlapping (Hankel)
view of ``values``: row ``i`` of head ``h`` is the contiguous slice starting at ``sq - 1 - i`` of
that head's values, so each output element is written once and ``values`` stays in cache. The per-distance function (T5's
buckets, ALiBi's distance) then runs on ``w`` distances instead of ``sq * sk`` (Hugging Face's
``T5Attention.compute_bias`` buckets every pair).
"""

from __future__ import annotations

import operator

import torch
from torch import Tensor

from ._checks import check_device, check_fits, check_int, check_no_overlap, check_out

__all__ = ["relative_range", "toeplitz", "toeplitz_gather"]


def _lengths(sq: object, sk: object) -> tuple[int, int]:
    """``sq, sk`` as non-negative ints (numpy and 0-d tensor integers too), else a ValueError naming them."""
    try:
        if isinstance(sq, bool) or isinstance(sk, bool):
            raise TypeError
        lengths = operator.index(sq), operator.index(sk)
    except TypeError:
        lengths = (-1, -1)
    if min(lengths) < 0:
        raise ValueError(f"sq and sk must be non-negative integers, got sq={sq!r}, sk={sk!r}")
    return lengths


def _width(sq: int, sk: int) -> int:
    """``w``: how many distinct ``k - q`` there are (none when either side is empty)."""
    return sq + sk - 1 if sq and sk else 0


def relative_range(
    sq: int, sk: int, *, q_offset: int = 0, k_offset: int = 0, device: torch.device | str | None = None
) -> Tensor:
    """Every ``k - q`` for queries ``q_offset + [0, sq)`` and keys ``k_offset + [0, sk)``, ascending: ``[w]``."""
    sq, sk = _lengths(sq, sk)
    q_offset, k_offset = check_int("q_offset", q_offset, low=-(2**62)), check_int("k_offset", k_offset, low=-(2**62))
    device = check_device(device)
    check_fits("relative distances", (_width(sq, sk),), torch.int64, device)
    low = k_offset - (q_offset + sq - 1)
    return torch.arange(low, low + _width(sq, sk), device=device)


def toeplitz(values: Tensor, sq: int, sk: int, *, out: Tensor | None = None) -> Tensor:
    """``out[h, i, j] = values[h, j - i + sq - 1]``: ``values [h, sq + sk - 1]`` -> ``[h, sq, sk]``.

    Every head in one ``index_select`` of whole rows (:func:`toeplitz_gather`). ``out`` may be
    preallocated (``[h, sq, sk]``, the dtype and device of ``values``; a non-contiguous view is
    filled through a contiguous copy).
    """
    sq, sk = _lengths(sq, sk)
    if not isinstance(values, Tensor) or values.dim() != 2 or values.shape[-1] != _width(sq, sk):
        raise ValueError(
            f"values must be [h, sq + sk - 1] = [h, {_width(sq, sk)}], a tensor (no columns when sq or sk is 0), "
            f"got {tuple(values.shape) if isinstance(values, Tensor) else type(values).__name__}"
        )
    h = values.shape[0]
    if out is None:
        check_fits("a relative-position bias", (h, sq, sk), values.dtype, values.device)
        out = values.new_empty(h, sq, sk)
    else:
        check_out(out, (h, sq, sk), values.dtype, values.device)
        check_no_overlap("out", out, {"values": values}, "toeplitz(..., out=)")
    if out.numel() == 0:
        return out
    if out.is_contiguous():
        return toeplitz_gather(values, sq, sk, out)
    return out.copy_(toeplitz_gather(values, sq, sk, torch.empty_like(out, memory_format=torch.contiguous_format)))


def toeplitz_gather(values: Tensor, sq: int, sk: int, out: Tensor) -> Tensor:
    """:func:`toeplitz` without its checks: ``out [h, sq, sk]`` contiguous and non-empty,
    ``values [h, sq + sk - 1]`` of its dtype and device.

    One ``index_select`` of whole rows for every head: ``values`` (made contiguous) read as one
    overlapping (Hankel) view ``[h w - sk + 1, sk]`` whose row ``m`` starts at element ``m``; row
    ``i`` of head ``h`` is its row ``h w + sq - 1 - i``. One call, one parallel region (an
    ``index_select`` per head opens one per head, which on a busy two-core host read 8x a fill;
    this: ~2x)."""
    values = values.contiguous()
    h, w = values.shape
    hankel = values.flatten().as_strided((h * w - sk + 1, sk), (1, 1))  # [h w - sk + 1, sk]
    rows = torch.arange(sq - 1, -1, -1, device=values.device)  # [sq]: rows of a head, reversed
    index = (torch.arange(h, device=values.device)[:, None] * w + rows).flatten()  # [h sq]
    torch.index_select(hankel, 0, index, out=out.view(h * sq, sk))
    return out
