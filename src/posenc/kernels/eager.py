"""Eager ``out=`` and in-place RoPE: a few ATen calls, no compiler, no temporaries of ``x``'s size.

Shape legend: ``s`` sequence, ``hd`` head width, ``r`` rotated width, ``n = r / 2`` pairs; tables
``[..., s, r]`` broadcast against ``x [..., s, hd]``.

Same formula as :func:`posenc.functional.apply_rope` (Su et al. 2021, RoFormer, section 3.4):
``y0 = x0 cos - x1 sin``, ``y1 = x1 cos + x0 sin`` for each pair ``(x0, x1)``.

* :func:`rotate_into` (``x`` and the tables of one dtype, float32 or float64, either layout; or
  16-bit ``x`` with float32 tables, widened once): ``x`` as contiguous rows, each feature's pair
  partner by two strided copies (HF's ``rotate_half`` without its negation), then
  ``x * cos + partners * [-sin, +sin]`` in whole-width ops that round exactly as the reference
  (product, product, sum): bit for bit equal to it whatever the memory layout (a fused
  ``addcmul`` rounds once less, and differently in its vector and scalar loops); other dtype
  mixes go to the reference.
* :func:`complex_into` (the ``complex`` backend; interleaved pairs, float32/float64): one complex
  multiply of ``x`` viewed as complex numbers by ``cos + i sin`` (Meta's Llama
  ``apply_rotary_emb``), straight into ``out``: one pass. ATen's complex product may round a
  component's two terms differently from the reference: within a unit in the last place.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import reference

__all__ = ["rotate_into", "complex_into", "complex_angle", "serves", "complex_serves"]


def _complex_ok(t: Tensor) -> bool:
    """Whether ``t [..., r]`` can be viewed as ``r / 2`` complex numbers: unit feature stride and even
    other strides and offset (``torch.view_as_complex``'s conditions)."""
    return t.stride(-1) == 1 and t.storage_offset() % 2 == 0 and all(st % 2 == 0 for st in t.stride()[:-1])


def _as_complex(t: Tensor, r: int) -> Tensor:
    """The first ``r`` features of ``t [..., s, hd]`` as ``r / 2`` complex numbers ``[..., s, r / 2]`` (a view)."""
    return torch.view_as_complex(t[..., :r].unflatten(-1, (r // 2, 2)))


def serves(x: Tensor, cos: Tensor) -> bool:
    """Whether the four-op form rotates ``x`` itself (True) or hands it to the reference (False):
    tables of ``x``'s dtype (float32 or float64), or 16-bit ``x`` with float32 tables."""
    if x.dtype in (torch.float32, torch.float64):
        return cos.dtype == x.dtype
    return x.dtype in (torch.bfloat16, torch.float16) and cos.dtype == torch.float32


def complex_serves(x: Tensor, cos: Tensor) -> bool:
    """Whether the complex multiply takes interleaved pairs of ``x``."""
    return x.dtype in (torch.float32, torch.float64) and cos.dtype == x.dtype and _complex_ok(x)


def _copy_rest(x: Tensor, out: Tensor, r: int) -> None:
    if out is not x and r < x.shape[-1]:
        out[..., r:].copy_(x[..., r:])  # partial rotary: the rest passes unchanged


def _partners(x: Tensor, layout: str) -> Tensor:
    """A new ``[..., r]`` holding each feature's pair partner, ``(x1, x0)`` for each pair ``(x0, x1)``:
    two strided copies (``flip`` and ``roll`` index element by element, several times slower)."""
    r = x.shape[-1]
    first, second = (slice(0, r // 2), slice(r // 2, r)) if layout == "half" else (slice(0, r, 2), slice(1, r, 2))
    partners = torch.empty_like(x)
    partners[..., first].copy_(x[..., second])
    partners[..., second].copy_(x[..., first])
    return partners


def _signed(sin: Tensor, layout: str, inverse: bool) -> Tensor:
    """``sin`` with the first member of each pair negated (the second for the inverse rotation):
    ``x * cos + partners(x) * signed`` is the rotation. Tables are ``[..., s, r]``, small beside ``x``."""
    r = sin.shape[-1]
    negated = (
        slice(r // 2, r)
        if layout == "half" and inverse
        else slice(0, r // 2)
        if layout == "half"
        else slice(1, r, 2)
        if inverse
        else slice(0, r, 2)
    )
    signed = sin.clone()
    signed[..., negated].neg_()
    return signed


def rotate_into(x: Tensor, cos: Tensor, sin: Tensor, out: Tensor, layout: str, inverse: bool) -> None:
    """Write the rotation of ``x`` into ``out`` (``x`` itself for in place) in four whole-width ops,
    bit for bit the reference; features past ``r`` copied. Other dtype mixes go to the reference."""
    if not serves(x, cos):
        reference.rotate_into(x, cos, sin, out, layout, inverse)
        return
    r = cos.shape[-1]
    # contiguous float rows first (16-bit x widened once, rounded once at the end as the
    # reference rounds): elementwise ops over a strided view (q sliced out of a qkv projection)
    # cost several times a copy of it
    src = x[..., :r].to(cos.dtype).contiguous()  # [..., s, r]
    partners = _partners(src, layout)  # [..., s, r]
    direct = src.dtype == out.dtype and out[..., :r].is_contiguous()
    o = out[..., :r] if direct else torch.empty_like(src)
    torch.mul(src, cos, out=o)  # x0 cos, x1 cos
    o.add_(partners.mul_(_signed(sin, layout, inverse)))  # + (-x1 sin), + x0 sin: rounded as the reference
    if not direct:
        out[..., :r].copy_(o)
    _copy_rest(x, out, r)


def complex_angle(cos: Tensor, sin: Tensor, inverse: bool) -> Tensor:
    """``cos + i sin`` per pair ``[..., s, r / 2]`` from full-width interleaved tables (``-sin`` for the inverse)."""
    return torch.complex(cos[..., 0::2], -sin[..., 0::2] if inverse else sin[..., 0::2])


def complex_into(x: Tensor, cos: Tensor, sin: Tensor, out: Tensor, inverse: bool, angle: Tensor | None = None) -> bool:
    """Interleaved pairs as one complex multiply into ``out`` (``x`` itself for in place); False,
    with nothing written, where ``x`` or ``out`` cannot be viewed as complex numbers. ``angle``:
    :func:`complex_angle` of the tables, when the caller rotates several tensors by them."""
    if not (complex_serves(x, cos) and _complex_ok(out)):
        return False
    r = cos.shape[-1]
    if angle is None:
        angle = complex_angle(cos, sin, inverse)
    torch.mul(_as_complex(x, r), angle, out=_as_complex(out, r))
    _copy_rest(x, out, r)
    return True
