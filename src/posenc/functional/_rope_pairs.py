"""bfloat16 interleaved RoPE pairs handled as int32 words, for :mod:`posenc.functional.fast_rope`.

Shape legend: ``s`` sequence, ``hd`` head width, ``n`` rotated pairs (``cos_h.shape[-1]``), ``...``
the leading (batch, head) dims; ``w`` is ``x.view(torch.int32)``, ``[..., s, hd / 2]``.

Same rotation as :func:`posenc.functional.apply_rope` with ``layout="interleaved"`` (Su et al. 2021,
RoFormer, section 3.4; pairs ``(2i, 2i+1)`` as GPT-J ``rotate_every_two``), rounded once to bfloat16
as the reference does. Inductor (torch 2.13, CPU) gathers a size-2 pair axis element by element
(4-12x the copy floor); reading each pair as one 32-bit word removes that axis from the loop.
"""

from __future__ import annotations

import sys

import torch
from torch import Tensor


def _rope_kernel_bf16_pairs(w: Tensor, cos_h: Tensor, sin_h: Tensor, wout: Tensor, inverse: bool) -> None:
    """Interleaved bfloat16 pairs, each read and written as one int32 word (``w``/``wout``
    ``[..., s, hd / 2]``, ``x.view(torch.int32)``; ``cos_h``/``sin_h`` ``[..., s, n]``, unit stride
    along ``n``).

    On a little-endian machine word ``i`` holds ``x[2i]`` in its low and ``x[2i+1]`` in its high 16
    bits, and a bfloat16 is the top half of a float32, so shifts and masks give both members as
    float32 with unit-stride loads over ``i`` (Inductor vectorises this; the size-2 pair axis itself
    it gathers element by element, 4-12x slower). The rotation is computed in float32 from the
    float32 tables and rounded once to bfloat16, round-to-nearest-even on the bits
    (``(y + 0x7FFF + lsb) >> 16``, as ``round_to_nearest_even`` in pytorch/pytorch
    ``c10/util/BFloat16.h``; NaNs the arithmetic produces are quiet and stay NaN), so the result
    equals the reference bit for bit.
    """
    n = cos_h.shape[-1]
    wr = w[..., :n]  # [..., s, n] int32: the rotated pairs
    x0 = (wr << 16).view(torch.float32)  # [..., s, n] the even members
    x1 = (wr & -65536).view(torch.float32)  # [..., s, n] the odd members
    sin_s = -sin_h if inverse else sin_h
    y0 = (x0 * cos_h - x1 * sin_s).view(torch.int32)
    y1 = (x1 * cos_h + x0 * sin_s).view(torch.int32)
    lo = ((y0 + (0x7FFF + ((y0 >> 16) & 1))) >> 16) & 0xFFFF
    hi = (y1 + (0x7FFF + ((y1 >> 16) & 1))) & -65536
    wout[..., :n].copy_(lo | hi)
    if n < w.shape[-1]:
        wout[..., n:].copy_(w[..., n:])


def _int32_pairs(t: Tensor) -> Tensor | None:
    """``t.view(torch.int32)`` when ``t`` is bfloat16 and the view is possible (unit last stride,
    even other strides and offset, little-endian), else None."""
    if t.dtype != torch.bfloat16 or sys.byteorder != "little" or t.dim() == 0 or t.shape[-1] % 2:
        return None
    if t.stride(-1) != 1 or t.storage_offset() % 2 or any(st % 2 for st in t.stride()[:-1]):
        return None
    return t.view(torch.int32)  # [..., hd] -> [..., hd / 2]


def _rope_kernel_bf16_pairs_(w: Tensor, cos_h: Tensor, sin_h: Tensor, inverse: bool) -> None:
    """In-place :func:`_rope_kernel_bf16_pairs` (each word is read, then written at the same index)."""
    _rope_kernel_bf16_pairs(w, cos_h, sin_h, w, inverse)
