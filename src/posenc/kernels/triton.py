"""RoPE on CUDA as one Triton kernel: one read and one write of ``x``, launched directly.

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``n`` pairs, ``R`` rows
per program, ``N`` pairs per program (``n`` rounded up to a power of two).

Same formula as :func:`posenc.functional.apply_rope` (Su et al. 2021, RoFormer, section 3.4; pairs
as HF ``rotate_half`` for ``"half"`` and GPT-J ``rotate_every_two`` for ``"interleaved"``):
``y0 = x0 cos - x1 sin``, ``y1 = x1 cos + x0 sin`` per pair, in float32, rounded once, with
fused multiply-adds turned off (``enable_fp_fusion=False``), so the result is the reference's bit
for bit. The structure follows flash-attention's rotary kernel (Dao-AILab/flash-attention,
``flash_attn/ops/triton/rotary.py``): the layout is a compile-time flag and the inverse rotation is
the same kernel with the sign of ``sin`` flipped. Each program rotates ``R`` rows (positions of
one or more heads); in place is safe because each element is read and written by one program.
A direct launch costs less host time than a ``torch.compile``d call (Dynamo's guards), which at
decoding sizes is most of the cost on a GPU.

``TRITON_INTERPRET=1`` runs the kernel on CPU tensors: how the tests check it without a GPU.
"""

from __future__ import annotations

import functools
import os

import torch
from torch import Tensor

__all__ = ["serves", "rotate_into"]

_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@functools.cache
def _kernel():
    """The jitted kernel, built on first use (importing Triton takes about half a second)."""
    import triton
    import triton.language as tl

    # rows and length change with every input: not specialised on (a new length would otherwise
    # compile anew whenever its divisibility by 16 changes)
    @triton.jit(do_not_specialize=["rows", "seq"])
    def rope_kernel(
        X,
        OUT,
        C,
        S,
        rows,
        seq,
        heads,
        sxb,
        sxh,
        sxs,
        sob,
        soh,
        sos,
        scb,
        sch,
        scs,
        scn,
        n: tl.constexpr,
        HALF: tl.constexpr,
        SIGN: tl.constexpr,
        R: tl.constexpr,
        N: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64) * R + tl.arange(0, R)  # [R] row index over (b, h, s)
        bi, hi, si = row // (heads * seq), (row // seq) % heads, row % seq
        j = tl.arange(0, N)  # [N] pair index
        mask = (row < rows)[:, None] & (j < n)[None, :]  # [R, N]
        x_row = (bi * sxb + hi * sxh + si * sxs)[:, None]  # [R, 1]
        o_row = (bi * sob + hi * soh + si * sos)[:, None]
        t_row = (bi * scb + hi * sch + si * scs)[:, None]
        c = tl.load(C + t_row + j[None, :] * scn, mask=mask)
        s = tl.load(S + t_row + j[None, :] * scn, mask=mask) * SIGN
        if HALF:  # x[..., j] pairs with x[..., j + n]
            x0 = tl.load(X + x_row + j[None, :], mask=mask).to(tl.float32)
            x1 = tl.load(X + x_row + j[None, :] + n, mask=mask).to(tl.float32)
            tl.store(OUT + o_row + j[None, :], (x0 * c - x1 * s).to(OUT.dtype.element_ty), mask=mask)
            tl.store(OUT + o_row + j[None, :] + n, (x1 * c + x0 * s).to(OUT.dtype.element_ty), mask=mask)
        else:  # x[..., 2j] pairs with x[..., 2j + 1]: whole rows loaded, split in registers
            k = tl.arange(0, 2 * N)  # [2N] feature index
            mask2 = (row < rows)[:, None] & (k < 2 * n)[None, :]  # [R, 2N]
            xx = tl.load(X + x_row + k[None, :], mask=mask2).to(tl.float32)
            x0, x1 = tl.split(tl.reshape(xx, (R, N, 2)))  # [R, N] each
            y = tl.join(x0 * c - x1 * s, x1 * c + x0 * s)  # [R, N, 2]
            tl.store(OUT + o_row + k[None, :], tl.reshape(y, (R, 2 * N)).to(OUT.dtype.element_ty), mask=mask2)

    return rope_kernel


@functools.cache
def _triton_imports() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def _as_4d(t: Tensor) -> Tensor | None:
    """``t`` as a ``[b, h, s, last]`` view (leading dims merged where their strides allow), or None."""
    if t.dim() < 2:
        return None
    if t.dim() <= 4:
        return t.reshape(*([1] * (4 - t.dim())), *t.shape)
    try:
        return t.view(-1, *t.shape[-3:])
    except RuntimeError:  # leading dims whose strides do not merge
        return None


def serves(x: Tensor, cos: Tensor) -> bool:
    """Whether this kernel takes ``x``: CUDA (or the interpreter), Triton importable, a 16- or
    32-bit float ``x`` with unit feature stride, float32 tables."""
    return (
        (x.is_cuda or _INTERPRET)
        and x.dtype in _DTYPES
        and cos.dtype == torch.float32
        and x.stride(-1) == 1
        and _triton_imports()
    )


def rotate_into(x: Tensor, cos: Tensor, sin: Tensor, out: Tensor, layout: str, inverse: bool) -> bool:
    """Rotate ``x`` into ``out`` (``x`` itself for in place); the features past ``r`` are copied.
    False, with nothing written, where the kernel does not take this input."""
    if not serves(x, cos) or out.stride(-1) != 1:
        return False
    n = cos.shape[-1] // 2
    cos_h, sin_h = (cos[..., :n], sin[..., :n]) if layout == "half" else (cos[..., 0::2], sin[..., 0::2])
    x4, o4 = _as_4d(x), _as_4d(out)
    try:  # the tables as [b, h, s, n] views, stride 0 over the dims they share with x
        c4, s4 = _as_4d(cos_h.expand(*x.shape[:-1], n)), _as_4d(sin_h.expand(*x.shape[:-1], n))
    except RuntimeError:
        return False
    if x4 is None or o4 is None or c4 is None or s4 is None or c4.stride() != s4.stride():
        return False
    b, h, s, hd = x4.shape
    rows = b * h * s
    if rows:
        N = max(16, 1 << (n - 1).bit_length())
        R = max(1, 2048 // N)  # about 2048 pairs per program
        _kernel()[(-(-rows // R),)](
            x4,
            o4,
            c4,
            s4,
            rows,
            s,
            h,
            *x4.stride()[:3],
            *o4.stride()[:3],
            *c4.stride(),
            n=n,
            HALF=layout == "half",
            SIGN=-1.0 if inverse else 1.0,
            R=R,
            N=N,
            num_warps=4,
            enable_fp_fusion=False,
        )
    if 2 * n < hd and out is not x:
        out[..., 2 * n :].copy_(x[..., 2 * n :])  # partial rotary: the rest passes unchanged
    return True
