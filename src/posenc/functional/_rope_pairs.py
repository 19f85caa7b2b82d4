"""bfloat16 RoPE handled as int32 words, for :mod:`posenc.functional.fast_rope`.

Shape legend: ``s`` sequence, ``hd`` head width, ``n`` rotated pairs (``cos_h.shape[-1]``), ``...``
the leading (batch, head) dims; ``w`` is ``x.view(torch.int32)``, ``[..., s, hd / 2]``.

Same rotation as :func:`posenc.functional.apply_rope` (Su et al. 2021, RoFormer, section 3.4),
rounded once to bfloat16 as the reference does:

* interleaved pairs ``(2i, 2i+1)`` (GPT-J ``rotate_every_two``): each pair is one word. Inductor
  (torch 2.13, CPU) gathers a size-2 pair axis element by element (4-12x the copy floor); reading
  each pair as one 32-bit word removes that axis from the loop.
* half pairs ``(i, i + n)`` (HF ``rotate_half``): word ``j`` of each half holds features ``2j`` and
  ``2j + 1`` of that half, whose partners sit in word ``j`` of the other half; even and odd
  features use their own table columns. Rounding on the bits here takes fewer instructions than
  Inductor's vectorised float32 -> bfloat16 conversion, which made the pass compute-bound (q/k
  ``[1, 32, L, 128]``, one thread, x the copy floor in alternation: out= 1.24-1.59 -> 1.08-1.40 at
  L = 2048, 3.15-3.45 -> 2.69-3.15 at L = 512; in place 1.06-1.36 -> 0.88-1.04 at L = 2048; an
  earlier host).

The words are reinterpreted as float32 and back (``view(dtype)``), which Inductor writes as a
scalar loop per vector; :class:`vector_bitcasts` makes it one vector cast while these kernels
compile (:func:`with_vector_bitcasts`).
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable

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
    x0, x1 = _low(wr), _high(wr)  # [..., s, n] float32: the even and the odd members
    sin_s = -sin_h if inverse else sin_h
    wout[..., :n].copy_(_round_low(x0 * cos_h - x1 * sin_s) | _round_high(x1 * cos_h + x0 * sin_s))
    if n < w.shape[-1]:
        wout[..., n:].copy_(w[..., n:])


def _low(w: Tensor) -> Tensor:
    """The bfloat16 in each word's low 16 bits, as float32 (a bfloat16 is a float32's top half)."""
    return (w << 16).view(torch.float32)


def _high(w: Tensor) -> Tensor:
    """The bfloat16 in each word's high 16 bits, as float32."""
    return (w & -65536).view(torch.float32)


def _round_low(y: Tensor) -> Tensor:
    """float32 ``y`` rounded to nearest-even bfloat16, in the low 16 bits of an int32 word."""
    y = y.view(torch.int32)
    return ((y + (0x7FFF + ((y >> 16) & 1))) >> 16) & 0xFFFF


def _round_high(y: Tensor) -> Tensor:
    """float32 ``y`` rounded to nearest-even bfloat16, in the high 16 bits (low bits zero)."""
    y = y.view(torch.int32)
    return (y + (0x7FFF + ((y >> 16) & 1))) & -65536


def _rotate_half_words(w0: Tensor, w1: Tensor, tables: tuple[Tensor, ...], inverse: bool) -> tuple[Tensor, Tensor]:
    """The rotated words of two halves ``w0``/``w1`` ``[..., s, n / 2]``; ``tables`` = cos of the even
    features, cos of the odd, sin of the even, sin of the odd, each ``[..., s, n / 2]``."""
    ce, co, se, so = tables
    if inverse:
        se, so = -se, -so
    a0, b0, a1, b1 = _low(w0), _high(w0), _low(w1), _high(w1)  # even/odd features of each half
    y0 = _round_low(a0 * ce - a1 * se) | _round_high(b0 * co - b1 * so)  # x0 * cos - x1 * sin
    y1 = _round_low(a1 * ce + a0 * se) | _round_high(b1 * co + b0 * so)  # x1 * cos + x0 * sin
    return y0, y1


def _rope_kernel_bf16_halves(w0: Tensor, w1: Tensor, ce: Tensor, co: Tensor, se: Tensor, so: Tensor,
                             o0: Tensor, o1: Tensor, inverse: bool) -> None:
    """bfloat16 half pairs as int32 words into ``o0``/``o1``: ``w0``/``w1`` the two halves
    ``[..., s, n / 2]`` of ``x.view(torch.int32)`` (the second through a DLPack alias, so the compiler
    sees separate buffers), tables as in :func:`_rotate_half_words`; bit for bit the reference."""
    y0, y1 = _rotate_half_words(w0, w1, (ce, co, se, so), inverse)
    o0.copy_(y0)
    o1.copy_(y1)


def _rope_kernel_bf16_halves_(w0: Tensor, w1: Tensor, ce: Tensor, co: Tensor, se: Tensor, so: Tensor,
                              inverse: bool) -> None:
    """In-place :func:`_rope_kernel_bf16_halves`: each output word depends only on the two input
    words at its own index, so one fused loop reads both before it writes either."""
    y0, y1 = _rotate_half_words(w0, w1, (ce, co, se, so), inverse)
    w0.copy_(y0)
    w1.copy_(y1)


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


# ---------------------------------------------------------------------------------------------
# vectorised reinterpretations in Inductor's C++ code

_bitcast_lock = threading.Lock()
_bitcast_depth = 0  # callers inside vector_bitcasts(), across threads
_bitcast_broken: list[str] = []  # why the override could not be installed, if it could not

#: The reinterpretations the word kernels use, written as one register reinterpretation.
_VEC_BITCASTS = {(torch.float32, torch.int32), (torch.int32, torch.float32)}


def _vec_to_dtype_bitcast(x: object, dtype: torch.dtype, src_dtype: torch.dtype) -> object:
    """Inductor's ``CppVecOverrides.to_dtype_bitcast`` for float32 <-> int32 in one vector:
    ``at::vec::cast``, ATen's bit-preserving vector cast (``vec_base.h``: "cast a given vector to
    another type without changing the bits representation"; int32 -> float32 is one
    ``_mm512_castsi512_ps`` on AVX512, the other direction a store and reload of one register that
    gcc removes). Every other case goes to Inductor's own code."""
    from torch._inductor.codegen.cpp_utils import DTYPE_TO_CPP
    from torch._inductor.virtualized import V

    kernel = V.kernel
    one = getattr(kernel, "_get_num_vectors", None)
    if (dtype, src_dtype) in _VEC_BITCASTS and one is not None and one(dtype) == one(src_dtype) == 1:
        return f"at::vec::cast<{DTYPE_TO_CPP[dtype]}>({x})"
    return _overrides[1].__func__(x, dtype, src_dtype)


@functools.cache
def compile_options() -> dict:
    """``torch.compile`` options for the kernels compiled under :class:`vector_bitcasts`: a no-op
    post-grad pass whose ``uuid`` enters Inductor's FX graph cache key, so that a kernel cached
    from a compile without the override (an earlier posenc) is not loaded in place of this one.
    Empty where Inductor has no such hook. Made once (callers copy it into their options)."""
    try:
        from torch._inductor.custom_graph_pass import CustomGraphPass
    except ImportError:
        return {}

    class _BitcastKey(CustomGraphPass):
        def __call__(self, graph: object) -> None:
            return None  # changes nothing: it only names the code generator's override

        def uuid(self) -> str:
            return "posenc.vector_bitcasts/1"

    return {"post_grad_custom_post_pass": _BitcastKey()}


_overrides: list = []  # [Inductor's CppVecOverrides, its to_dtype_bitcast, ours], found once


def _install() -> None:
    if not _overrides:
        from torch._inductor.codegen.cpp import CppVecOverrides

        _overrides.extend((CppVecOverrides, CppVecOverrides.__dict__["to_dtype_bitcast"],
                           staticmethod(_vec_to_dtype_bitcast)))
    cls, _, ours = _overrides
    cls.to_dtype_bitcast = ours


def _uninstall() -> None:
    cls, theirs, _ = _overrides
    cls.to_dtype_bitcast = theirs


class vector_bitcasts:
    """Within this context, Inductor's CPU code generator writes float32 <-> int32 reinterpretations
    (``t.view(torch.int32)`` of a float32 value and back) as one vector instruction.

    Inductor (torch 2.13) has no vector form of ``to_dtype_bitcast`` and writes each as a store of
    the vector, a scalar ``c10::bit_cast`` loop and a reload: the word kernels here, four such per
    word, ran compute-bound at 3-5x the copy floor. The override changes how the C++ reads, not
    what it computes (the same bits), and only while a posenc kernel compiles or runs (a call that
    passes Dynamo's guards generates nothing). Entered by several threads at once, it stays
    installed until the last leaves. Where Inductor's internals differ (another torch), nothing
    is installed and the kernels compile as before."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _bitcast_depth
        with _bitcast_lock:
            if _bitcast_depth == 0 and not _bitcast_broken:
                try:
                    _install()
                except Exception as err:  # noqa: BLE001 - Inductor's layout changed: compile as it is
                    _bitcast_broken.append(f"{type(err).__name__}: {err}")
            _bitcast_depth += 1

    def __exit__(self, *exc: object) -> None:
        global _bitcast_depth
        with _bitcast_lock:
            _bitcast_depth -= 1
            if _bitcast_depth == 0 and _overrides and not _bitcast_broken:
                _uninstall()


def with_vector_bitcasts(fn: Callable[..., None]) -> Callable[..., None]:
    """``fn`` (a ``torch.compile``'d word kernel) called under :class:`vector_bitcasts`, so that
    every compile of it, the first or one after Dynamo's guards fail, writes vector reinterpretations
    (~1 us per call for the context)."""

    def run(*args: object) -> None:
        with vector_bitcasts():
            fn(*args)

    return run
