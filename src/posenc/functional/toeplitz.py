"""Biases that depend only on ``k - q``, expanded from one value per distance: the Toeplitz layout.

Shape legend: ``h`` heads, ``sq``/``sk`` query/key lengths, ``w = sq + sk - 1`` distinct relative
positions.

For queries and keys on contiguous ranges of positions, such a bias is a Toeplitz matrix per head:
``bias[h, i, j] = values[h, (j - i) + sq - 1]``, fixed by ``w`` numbers per head.
:func:`toeplitz` expands them with one ``index_select`` per head over an overlapping (Hankel) view
of ``values``: row ``i`` of the result is the contiguous slice starting at ``sq - 1 - i``, so each
output element is written once and ``values`` stays in cache. The per-distance function (T5's
buckets, ALiBi's distance) then runs on ``w`` distances instead of ``sq * sk`` (Hugging Face's
``T5Attention.compute_bias`` buckets every pair).
"""

from __future__ import annotations

import operator

import torch
from torch import Tensor

from ._checks import check_fits

__all__ = ["relative_range", "toeplitz"]


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
    low = k_offset - (q_offset + sq - 1)
    return torch.arange(low, low + _width(sq, sk), device=device)


def toeplitz(values: Tensor, sq: int, sk: int, *, out: Tensor | None = None) -> Tensor:
    """``out[h, i, j] = values[h, j - i + sq - 1]``: ``values [h, sq + sk - 1]`` -> ``[h, sq, sk]``.

    Per head, one ``index_select`` of whole rows from the overlapping Hankel view
    ``values[h, i' + j]`` with rows reversed (``i' = sq - 1 - i``); on accelerators one
    ``index_select`` over all heads. ``out`` may be preallocated.
    """
    sq, sk = _lengths(sq, sk)
    if not isinstance(values, Tensor) or values.dim() != 2 or values.shape[-1] != _width(sq, sk):
        raise ValueError(
            f"values must be [h, sq + sk - 1] = [h, {_width(sq, sk)}], a tensor (no columns when sq or sk is 0), "
            f"got {tuple(values.shape) if isinstance(values, Tensor) else type(values).__name__}"
        )
    values = values.contiguous()
    h = values.shape[0]
    if out is None:
        check_fits("a relative-position bias", (h, sq, sk), values.dtype, values.device)
        out = values.new_empty(h, sq, sk)
    elif (
        not isinstance(out, Tensor)
        or out.shape != (h, sq, sk)
        or out.dtype != values.dtype
        or out.device != values.device
    ):
        got = f"{tuple(out.shape)} {out.dtype} {out.device}" if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(f"out must be [{h}, {sq}, {sk}] of dtype {values.dtype} on {values.device}, got {got}")
    if out.numel() == 0:
        return out
    rows = torch.arange(sq - 1, -1, -1, device=values.device)  # [sq] reversed
    if values.device.type != "cpu":
        # one kernel for all heads: on an accelerator a launch per head costs more than the copy
        hankel = values.as_strided((h, sq, sk), (values.shape[-1], 1, 1))  # [h, sq, sk]
        return torch.index_select(hankel, 1, rows, out=out)
    for head in range(h):  # per head, index_select copies whole rows (memcpy); over [h, sq, sk] it is ~10x slower
        hankel = values[head].as_strided((sq, sk), (1, 1))  # [sq, sk], hankel[i', j] = values[head, i' + j]
        torch.index_select(hankel, 0, rows, out=out[head])
    return out
