"""RoPE on GPUs as one hand-written Triton kernel: one read and one write of ``x``, launched directly.

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``n`` pairs (the tables'
last dim), ``R`` rows per program, ``N`` pairs per program (``n`` rounded up to a power of two).

Same formula as :func:`posenc.functional.apply_rope` (Su et al. 2021, RoFormer, section 3.4; pairs
as HF ``rotate_half`` for ``"half"`` and GPT-J ``rotate_every_two`` for ``"interleaved"``):
``y0 = x0 cos - x1 sin``, ``y1 = x1 cos + x0 sin`` per pair ``(x0, x1)``, computed in float32 and
rounded once, with contraction into fused multiply-adds turned off, so the result is the
reference's bit for bit (two roundings for the products, one for the sum, one to ``x``'s dtype).
The inverse rotation (the backward) flips the sign of ``sin``.

Why not ``torch.compile`` on CUDA: the Inductor-generated kernel is as fast, but each call goes
through Dynamo's guards and Inductor's wrapper, about 150-180 us of host time on the H100 machine
this was measured on, more than the kernel itself until q/k reach ``[1, 32, 8192, 128]``. A direct
Triton launch costs a fraction of that. Each program rotates ``R`` rows (positions of one or more
heads) of ``N`` pairs; in place is safe because every element is read and written by the same
program. ``x``/``out`` may be any ``[b, h, s, hd]`` view with unit stride along ``hd`` (q, k sliced
out of a fused qkv projection included); the tables broadcast over ``b`` and ``h`` by stride 0.
Interleaved pairs are loaded and stored as one word each where the view allows (int32 for 16-bit
floats, int64 for float32), so the pair never needs splitting in registers. A *pair launch* rotates
a second tensor of the same layout (k beside q) with the same tables: the grid's second axis picks
the tensor, one launch instead of two (for training-size heads the launch is the cost).
"""

from __future__ import annotations

import functools
import os
import sys

import torch
from torch import Tensor

__all__ = ["available", "launch", "rotate", "Launch"]

_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
#: Triton's interpreter (``TRITON_INTERPRET=1``) runs the kernel on CPU tensors: how the tests
#: check it on a machine without a GPU
_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@functools.cache
def _kernel():
    """The jitted kernel, built on first use (importing Triton costs ~0.5 s)."""
    import triton
    import triton.language as tl

    # the row count and length change with every input: not specialised on (a new length would
    # otherwise compile anew whenever its divisibility by 16 changes); the strides are, so that
    # loads vectorise (multiples of 16 for head widths that are)
    @triton.jit(do_not_specialize=["rows", "seq"])
    def rope_kernel(X, O, X2, O2, C, S, rows, seq, heads,
                    sxb, sxh, sxs, sob, soh, sos, scb, sch, scs, scn,
                    n: tl.constexpr, HALF: tl.constexpr, SIGN: tl.constexpr,
                    R: tl.constexpr, N: tl.constexpr, WORDS: tl.constexpr, DT: tl.constexpr, PAIR: tl.constexpr):
        # WORDS: 0, or the bits of a word holding one pair (32 for 16-bit floats, 64 for float32)
        if PAIR:  # a second tensor of the same layout and tables (k beside q): the grid's second axis
            if tl.program_id(1) == 1:
                X = X2
                O = O2
        row = tl.program_id(0).to(tl.int64) * R + tl.arange(0, R)  # [R] global row (b, h, s) index
        bi = row // (heads * seq)
        hi = (row // seq) % heads
        si = row % seq
        j = tl.arange(0, N)  # [N] pair index
        mask = (row < rows)[:, None] & (j < n)[None, :]  # [R, N]
        x_row = (bi * sxb + hi * sxh + si * sxs)[:, None]  # [R, 1]
        o_row = (bi * sob + hi * soh + si * sos)[:, None]
        t_row = (bi * scb + hi * sch + si * scs)[:, None]
        c = tl.load(C + t_row + j[None, :] * scn, mask=mask)
        s = tl.load(S + t_row + j[None, :] * scn, mask=mask) * SIGN
        if HALF:  # x[..., j] pairs with x[..., j + n]: two contiguous half rows
            x0 = tl.load(X + x_row + j[None, :], mask=mask).to(tl.float32)
            x1 = tl.load(X + x_row + j[None, :] + n, mask=mask).to(tl.float32)
            tl.store(O + o_row + j[None, :], (x0 * c - x1 * s).to(O.dtype.element_ty), mask=mask)
            tl.store(O + o_row + j[None, :] + n, (x1 * c + x0 * s).to(O.dtype.element_ty), mask=mask)
        elif WORDS:  # pairs read as one word each, x[2j] in the low half (little-endian)
            w = tl.load(X + x_row + j[None, :], mask=mask)
            if WORDS == 64:  # float32 pairs as int64 words
                x0 = w.to(tl.int32).to(tl.float32, bitcast=True)  # the narrowing cast keeps the low bits
                x1 = (w >> 32).to(tl.int32).to(tl.float32, bitcast=True)
                lo = (x0 * c - x1 * s).to(tl.int32, bitcast=True).to(tl.uint32, bitcast=True).to(tl.int64)
                hi = (x1 * c + x0 * s).to(tl.int32, bitcast=True).to(tl.int64) << 32
            else:  # 16-bit pairs as int32 words
                x0 = w.to(tl.int16).to(DT, bitcast=True).to(tl.float32)
                x1 = (w >> 16).to(tl.int16).to(DT, bitcast=True).to(tl.float32)
                lo = (x0 * c - x1 * s).to(DT).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
                hi = (x1 * c + x0 * s).to(DT).to(tl.int16, bitcast=True).to(tl.int32) << 16
            tl.store(O + o_row + j[None, :], hi | lo, mask=mask)
        else:  # x[..., 2j] pairs with x[..., 2j + 1]: whole rows loaded and stored, split in registers
            k = tl.arange(0, 2 * N)  # [2N] feature index
            mask2 = (row < rows)[:, None] & (k < 2 * n)[None, :]  # [R, 2N]
            xx = tl.load(X + x_row + k[None, :], mask=mask2).to(tl.float32)
            x0, x1 = tl.split(tl.reshape(xx, (R, N, 2)))  # [R, N] each
            y = tl.join(x0 * c - x1 * s, x1 * c + x0 * s)  # [R, N, 2]
            tl.store(O + o_row + k[None, :], tl.reshape(y, (R, 2 * N)).to(O.dtype.element_ty), mask=mask2)

    return rope_kernel


@functools.cache
def available() -> bool:
    """True when Triton imports and CUDA is present (the kernel itself compiles on first call)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available() or _INTERPRET


def _as_4d(t: Tensor) -> Tensor | None:
    """``t`` as a ``[b, h, s, last]`` view (leading dims merged where their strides allow), or None."""
    if t.dim() < 2:
        return None
    lead = t.shape[:-2]
    if len(lead) <= 2:
        return t.reshape(*([1] * (2 - len(lead))), *t.shape) if t.dim() < 4 else t
    try:
        return t.view(-1, lead[-1], *t.shape[-2:])  # merge all but the last leading dim
    except RuntimeError:
        return None


def _words(t: Tensor) -> Tensor | None:
    """A ``[b, h, s, hd]`` tensor of 16-bit (32-bit) floats as int32 (int64) words ``[b, h, s, hd / 2]``,
    one pair per word, where the view exists (unit feature stride, even strides and offset, little-endian)."""
    if t.element_size() not in (2, 4) or sys.byteorder != "little" or t.stride(-1) != 1 or t.shape[-1] % 2:
        return None
    if t.storage_offset() % 2 or any(st % 2 for st in t.stride()[:-1]) or t.data_ptr() % (2 * t.element_size()):
        return None  # the address too: memory shared through DLPack may begin mid-word at offset 0
    return t.view(_WORD[t.element_size()])


_WORD = {2: torch.int32, 4: torch.int64}  # the word holding a pair of 2- or 4-byte floats


def _tl_dtype(dtype: torch.dtype):
    import triton.language as tl

    return {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}[dtype]


#: Whether a compiled kernel launched through its own runner (skipping Triton's argument binding
#: and cache lookup) gives what Triton's launch gives: None until checked once in this process.
_direct_ok: bool | None = None


class Launch:
    """One prepared launch of the kernel for a layout: the grid, the strides and constants, and the
    tables' broadcast views; calling it with ``x`` and ``out`` of that layout (same shapes, strides
    and dtypes, any addresses) launches the kernel. A pair launch (made with ``x2``, ``out2``)
    takes a second input and output of the same layout, rotated by the same tables in the same
    launch: q and k of one attention layer. The call plans of :mod:`posenc.functional.fast_rope`
    keep one per layout and tables, so that a repeated call costs little beyond the launch.

    After the first launch the compiled kernel is launched through its runner
    (``CompiledKernel[grid](*args)``), which skips ``JITFunction.run``'s binding of the arguments,
    their specialisation and the cache lookup: about two thirds of Triton's ~30 us per launch on
    an H100 machine. That runner takes the specialisation of the first launch as given, so it
    serves only inputs whose addresses have the same 16-byte alignment, on the same current
    device (the rest of the specialisation, the strides, is fixed by the layout); anything else
    goes through ``JITFunction.run``. It is checked once per process against Triton's own launch
    (an out-of-place call computed both ways) before it is trusted."""

    __slots__ = ("grid", "tables", "scalars", "constants", "words", "tail", "runner", "align", "device", "pair")

    def __init__(self, grid, tables, scalars, constants, words, tail, pair=False):
        self.grid, self.tables, self.scalars, self.constants = grid, tables, scalars, constants
        self.words, self.tail = words, tail  # word views of x and out; where the unrotated features start
        self.pair = pair
        self.runner = self.align = self.device = None

    def __call__(self, x: Tensor, out: Tensor, x2: Tensor | None = None, out2: Tensor | None = None) -> bool:
        if self.scalars[0] == 0:  # no rows: nothing to launch (an empty tensor may have no address)
            return True
        if self.pair != (x2 is not None) or (x2 is None) != (out2 is None):
            raise ValueError("a pair launch takes x, out, x2 and out2; a single one x and out")
        if x2 is None:
            x2, out2 = x, out  # unread by the kernel (PAIR is off): any tensor of x's alignment
        pointers = (x, out, x2, out2)
        if self.words:
            pointers = tuple(t.view(_WORD[t.element_size()]) for t in pointers)
        align = tuple(t.data_ptr() % 16 == 0 for t in pointers)
        if self.runner is not None and align == self.align and _direct_ok and torch.cuda.current_device() == self.device:
            self.runner(*pointers, *self.tables, *self.scalars, *self.constants.values())
        else:
            kernel = _kernel()[self.grid](*pointers, *self.tables, *self.scalars, **self.constants, **_OPTIONS)
            if self.runner is None and kernel is not None and x.is_cuda and _direct_ok is not False:
                self._take_runner(kernel, pointers, align)
        if self.tail is not None:
            for a, b in ((x, out), (x2, out2)) if self.pair else ((x, out),):
                if b.data_ptr() != a.data_ptr():
                    b[..., self.tail:].copy_(a[..., self.tail:])  # partial rotary: the rest passes unchanged
        return True

    def _take_runner(self, kernel, pointers: tuple, align: tuple) -> None:
        """Keep ``kernel``'s runner for later launches, once it has been checked in this process."""
        global _direct_ok
        try:
            runner = kernel[(*self.grid, 1, 1)[:3]]
            if _direct_ok is None:
                xt, ot, xt2, ot2 = pointers
                if xt.data_ptr() == ot.data_ptr() or xt2.data_ptr() == ot2.data_ptr() or not (align[1] and align[3]):
                    return  # in place, or no aligned twin of out: a later launch checks
                outs = (ot, ot2) if self.pair else (ot,)
                mine = [torch.empty_strided(o.shape, o.stride(), dtype=o.dtype, device=o.device) for o in outs]  # out's layout
                runner(xt, mine[0], xt2, mine[-1], *self.tables, *self.scalars, *self.constants.values())
                width = ot.shape[-1] if self.tail is None else self.tail  # the rotated features
                got, want = [m[..., :width] for m in mine], [o[..., :width] for o in outs]
                same = all(torch.equal(g, w) for g, w in zip(got, want))
                if not same and any(bool(w.isnan().any()) for w in want):
                    return  # NaN compares unequal to itself: a later launch checks
                _direct_ok = same
                if not same:
                    return
        except Exception:  # another Triton's runner: keep to JITFunction.run
            _direct_ok = False
            return
        self.runner, self.align, self.device = runner, align, torch.cuda.current_device()


#: Compiler options of the launches (keywords of ``JITFunction.run``, not kernel arguments).
_OPTIONS = {"num_warps": 4, "enable_fp_fusion": False}


def launch(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool,
           x2: Tensor | None = None, out2: Tensor | None = None) -> Launch | None:
    """The :class:`Launch` that rotates ``x`` into ``out`` (which may be ``x``) with half-width
    tables ``[..., s, n]``, the features past ``2 n`` copied, and with ``x2`` and ``out2`` the
    pair launch that rotates ``x2`` into ``out2`` as well (same shape, strides and dtype as ``x``
    and ``out``; the same tables). None when this kernel does not apply: no Triton or CUDA, a
    dtype other than float32/bfloat16/float16, tables not float32, a feature stride other than 1,
    leading dims that do not fold into ``[b, h]``, or a pair of other layouts."""
    if not ((x.is_cuda or _INTERPRET) and available() and x.dtype in _DTYPES and cos_h.dtype == sin_h.dtype == torch.float32):
        return None
    if x.stride(-1) != 1 or out.stride(-1) != 1:
        return None
    pair = x2 is not None
    if pair and (out2 is None or any(a.shape != b.shape or a.stride() != b.stride() or a.dtype != b.dtype
                                     or a.device != b.device for a, b in ((x2, x), (out2, out)))):
        return None
    x4, o4 = _as_4d(x), _as_4d(out)
    if x4 is None or o4 is None or x4.shape != o4.shape:
        return None
    b, h, s, hd = x4.shape
    n = cos_h.shape[-1]
    lead = x.shape[:-1]
    try:  # the tables as [b, h, s, n] views, stride 0 over the dims they share
        c4, s4 = _as_4d(cos_h.expand(*lead, n)), _as_4d(sin_h.expand(*lead, n))
    except RuntimeError:
        return None
    if c4 is None or s4 is None or c4.stride() != s4.stride():
        return None
    rows = b * h * s
    N = max(16, 1 << (n - 1).bit_length())
    R = max(1, 2048 // N)  # ~2048 pairs per program
    grid = (max(1, -(-rows // R)), 2) if pair else (max(1, -(-rows // R)),)
    words = False
    if layout == "interleaved" and 2 * n == hd:  # interleaved pairs as int32/int64 words: unit-stride loads, no shuffles
        views = [_words(t) for t in ((x4, o4, _as_4d(x2), _as_4d(out2)) if pair else (x4, o4))]
        words = all(v is not None for v in views)
        if words:
            x4, o4 = views[:2]
    constants = {"n": n, "HALF": layout == "half", "SIGN": -1.0 if inverse else 1.0, "R": R, "N": N, "WORDS": 16 * x.element_size() if words else 0,
                 "DT": _tl_dtype(x.dtype), "PAIR": pair}  # the kernel's constexpr arguments, in its order
    return Launch(grid, (c4, s4), (rows, s, h, *x4.stride()[:3], *o4.stride()[:3], *c4.stride()), constants, words,
                  2 * n if 2 * n < hd else None, pair)


def rotate(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool) -> bool:
    """Rotate ``x`` into ``out`` (which may be ``x``) with half-width tables ``[..., s, n]``; the
    features past ``2 n`` are copied. False (nothing written) where :func:`launch` says the kernel
    does not apply."""
    plan = launch(x, cos_h, sin_h, out, layout, inverse)
    return plan is not None and plan(x, out)
