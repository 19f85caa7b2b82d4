"""RoPE at the memory-bandwidth floor: one pass over ``x``, into a preallocated or the same tensor.

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``r`` rotated width
(``cos.shape[-1]``, at most ``hd``), ``n = r / 2`` pairs.

The formula is the one of :func:`posenc.functional.apply_rope` (Su et al. 2021, RoFormer, section
3.4; pairs as in HF ``rotate_half`` for ``layout="half"`` and GPT-J ``rotate_every_two`` for
``"interleaved"``), which stays the reference; every function here equals it (tests pin it). What
changes is how often memory is touched:

* **compiled**: ``torch.compile`` of a concatenation-free single pass. Each head is viewed as
  ``(2, n)`` (half) or ``(n, 2)`` (interleaved) and ``x * cos + x.flip(pair) * [-sin, +sin]`` is
  written straight into the output, reading the half-width float32 tables (``cos[..., :n]`` or
  ``cos[..., 0::2]``, views of the cached full tables: nothing is allocated per call). Inductor fuses
  it into one loop; only the sequence dimension is marked dynamic, so one compile serves every length.
  Head-major inputs go through in groups of four heads per table row and, for whole blocks of 64
  rows, one block of rows for all heads at a time (:func:`_grouped`), so the tables are read once.
  The ``rotate_half``/``cat`` form of the reference does not fuse on CPU (Inductor materialises the
  concatenation), which is why the pair-flip form is used (the same idea as gpt-fast's
  ``apply_rotary_emb``, pytorch-labs/gpt-fast ``model.py``, which views pairs instead of concatenating).
  The sign pattern ``[-sin, +sin]`` is an ``arange`` expression Inductor inlines (stacking the two
  tables would allocate an ``[s, 2, n]`` temporary per call). **Half pairs in place, and 16-bit half
  pairs into out=**, take the two halves as separate buffers (:func:`_rope_kernel_halves_`,
  :func:`_rope_kernel_halves`): one loop step loads a pair and its cos/sin once and stores both
  results, and in place it needs no temporary. **bfloat16** is read and written as int32 words
  and rounded on the bits: interleaved pairs one pair per word, so the pair axis never appears
  in the loop (:func:`_rope_kernel_bf16_pairs`; Inductor gathers a size-2 pair axis element by
  element), half pairs two features of each half per word (:func:`_rope_kernel_bf16_halves`, with
  even/odd table columns; the first large call times it against the plain two-buffer kernel and
  keeps the faster, :func:`_words_win`). Inductor writes the float32/int32 reinterpretations
  these need as scalar loops; the word kernels compile and run under
  :class:`~posenc.functional._rope_pairs.vector_bitcasts`, which writes each as one vector cast
  (bf16 interleaved pairs, q/k ``[1, 32, L, 128]``, one thread: 5.0 / 3.2 -> 1.43 / 1.23 x the
  copy floor at L = 2048 / 8192).
* **GPUs** (CUDA, where Triton imports): the compiled pass is a hand-written Triton kernel launched
  directly (:mod:`posenc.functional._rope_triton`), bit for bit the reference; ``torch.compile``'s
  per-call host cost (Dynamo's guards, Inductor's wrapper: ~150 us on an H100 machine) exceeded the
  kernel's own time up to q/k of ``[1, 32, 8192, 128]``. The Inductor pass stays the fallback.
  It takes float32 interleaved pairs as well (read as int64 words; the complex multiply below is
  several kernels), and q and k of one projection in one launch (:func:`_pair_kernel`).
* **eager** (:mod:`posenc.functional._rope_eager`; no compiler, float32/float64 interleaved
  pairs off the GPU kernel, or ``compile=False``): for float32/float64 interleaved pairs a complex multiply into the output
  (``view_as_complex``, as Meta's Llama ``apply_rotary_emb``), the complex table cached per table
  tensor, whatever ``compile`` says (it is at the floor; Inductor is not); on the CPU half pairs
  head by head in cache-sized steps, three ATen passes each, otherwise cache-sized chunks rotated in
  a reused float32 scratch and stored once; on accelerators whole-tensor kernels (a launch per
  cache-sized step would dominate).
* **small inputs** (fewer than :data:`COMPILE_MIN_NUMEL` elements, ``compile="auto"``, no ``out``):
  never compiled; without autograd, half pairs of up to :data:`LEAN_MAX_NUMEL` elements (a decoding
  step) take :func:`_lean_half`, the reference formula in three ops from the tables as given;
  CPU float32/float64 half pairs (bfloat16 with float32 tables) one C loop
  (:mod:`~posenc.functional._rope_native`: one pass,
  bit for bit the reference; built at first use by the compiler ``torch.compile`` uses, the
  eager pass where there is none); otherwise the eager pass (whole-tensor ops, fewer than the
  reference's and no autograd graph of them; its backward rounds a 16-bit gradient once, as
  torchtune's float32 rotation does); q and k of one projection go through one call forward
  (:func:`fast_apply_rope_pair`, :class:`RopePairFunction`), or rotate in place inside it
  (:func:`fast_apply_rope_fused_`, what :class:`posenc.Attention` uses at the default positions).
  On a GPU with Triton, the Triton kernel at every size (one launch against several).
* **repeated calls** (the same layout, dtype and tables as an earlier call): the compiled call or
  Triton launch is replayed from a plan made at the second such call (:class:`_Replay`,
  :class:`~posenc.functional._rope_triton.Launch`), skipping the dispatch's checks, views and
  lookups: ~75 -> ~20 us of host time per call on the CPU, and on an H100 bf16 q/k ``[1, 32,
  8192, 128]`` from 1.6-2.0x to 1.07x the copy floor (the kernel had been waiting on the host).

The backward of a rotation is its transpose, the rotation by ``-angle`` (the same pass with the
sign of ``sin`` flipped): :class:`RopeFunction` uses it, so training needs no saved activations.

``out=`` and in-place variants take no part in autograd (as torch's own ``out=`` ops); use
:func:`fast_apply_rope` without ``out`` under autograd.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import types
from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

import torch
from torch import Tensor
from torch.autograd import forward_ad

from . import _rope_native, _rope_triton
from ._checks import check_choice, forward_mode, in_transform, tracing
from ._rope_eager import _cached_table, _complexable, _eager, _remember, _scratch, _tables_key
from ._rope_pairs import (
    _int32_pairs,
    _rope_kernel_bf16_halves,
    _rope_kernel_bf16_halves_,
    _rope_kernel_bf16_pairs,
    _rope_kernel_bf16_pairs_,
    compile_options,
    with_vector_bitcasts,
)
from .rope import ROPE_LAYOUTS, _align_tables, apply_rope

__all__ = [
    "fast_apply_rope",
    "fast_apply_rope_",
    "RopeFunction",
    "compile_available",
    "warmup",
    "COMPILE_MIN_NUMEL",
    "CALL_PLANS",
]

log = logging.getLogger(__name__)

CompileMode = Literal["auto"] | bool

#: ``compile="auto"`` compiles for inputs with at least this many elements (4 MiB of float32):
#: below it, the ~1 s first compile of a new dtype/layout is not worth its saving.
COMPILE_MIN_NUMEL = 1 << 20

#: Half pairs without autograd up to this many elements (a decoding step's q and k) take
#: :func:`_lean_half`; 16-bit inputs up to a quarter of it (their mixed-dtype ops are scalar loops).
LEAN_MAX_NUMEL = 1 << 16

_compiled: dict[tuple, object] = {}  # the torch.compile'd kernel variants, built on first use
_compile_error: str | None = None  # why compiling failed, if it did
_failed: dict[tuple, str] = {}  # variants that failed where others compiled: the eager path serves them


# ---------------------------------------------------------------------------------------------
# the single pass


def _half_tables(cos: Tensor, sin: Tensor, layout: str) -> tuple[Tensor, Tensor]:
    """Views ``[..., n]`` of the full-width tables holding one value per pair (no copy)."""
    n = cos.shape[-1] // 2
    if layout == "half":
        return cos[..., :n], sin[..., :n]
    return cos[..., 0::2], sin[..., 0::2]


def _rope_kernel(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool) -> None:
    """Write the rotation of ``x``'s first ``2 n`` features into ``out`` (the rest copied).

    ``x``/``out`` ``[..., s, hd]``, ``cos_h``/``sin_h`` ``[..., s, n]`` broadcastable. Compiled by
    :func:`_get_compiled`; also correct (if slow) when run eagerly.
    """
    n = cos_h.shape[-1]
    r = 2 * n
    sign = -1.0 if inverse else 1.0
    if layout == "half":
        xr = x[..., :r].unflatten(-1, (2, n))  # [..., s, hd] -> [..., s, 2, n]
        # -sign for the first half, +sign for the second: an index expression Inductor inlines,
        # where stacking (-sin, +sin) would materialise an [s, 2, n] temporary on every call
        pair_sign = torch.arange(2, device=x.device, dtype=sin_h.dtype) * (2 * sign) - sign  # [2]: -sign, +sign
        pair_sign = pair_sign.unsqueeze(-1)  # [2] -> [2, 1]
        signed_sin = sin_h.unsqueeze(-2) * pair_sign  # [..., s, 2, n], inlined by Inductor
        rot = xr * cos_h.unsqueeze(-2) + xr.flip(-2) * signed_sin  # [..., s, 2, n]
        out[..., :r].copy_(rot.flatten(-2))  # [..., s, 2, n] -> [..., s, r]
    else:
        # pairs (2i, 2i+1): work on the transposed view [..., s, 2, n] so the innermost loop runs
        # over n (a flip of the size-2 axis in the innermost position defeats vectorisation, ~3x)
        xr = x[..., :r].unflatten(-1, (n, 2)).transpose(-1, -2)  # [..., s, hd] -> [..., s, 2, n]
        x0, x1 = xr[..., 0, :], xr[..., 1, :]  # [..., s, n] each
        rot = torch.stack((x0 * cos_h - sign * (x1 * sin_h), x1 * cos_h + sign * (x0 * sin_h)), dim=-2)  # [..., s, 2, n]
        out[..., :r].unflatten(-1, (n, 2)).transpose(-1, -2).copy_(rot)
    if r < x.shape[-1]:
        out[..., r:].copy_(x[..., r:])


def _rope_kernel_halves_(x0: Tensor, x1: Tensor, cos_h: Tensor, sin_h: Tensor, inverse: bool) -> None:
    """Rotate half pairs in place: ``x0``/``x1`` are the two halves ``[..., s, n]`` of the same
    rows, each rewritten from both (``x0 * cos - x1 * sin``, ``x1 * cos + x0 * sin``).

    Each output element depends only on the two inputs at its own index, so the pass is safe in
    place, but only if the compiler sees two buffers: a single buffer read at flipped indices makes
    Inductor compute into a full-size temporary and copy back (two passes, ~2x the floor). The
    caller hands ``x1`` over through a DLPack alias (:func:`_disjoint_alias`), so Inductor fuses
    both halves into one loop with two loads and two stores per index.
    """
    s = -sin_h if inverse else sin_h
    y0 = x0 * cos_h + (-x1) * s  # promoted dtype, as the reference (x * cos + rotate_half(x) * sin)
    y1 = x1 * cos_h + x0 * s
    x0.copy_(y0)
    x1.copy_(y1)


def _rope_kernel_halves(x0: Tensor, x1: Tensor, cos_h: Tensor, sin_h: Tensor, o0: Tensor, o1: Tensor,
                        inverse: bool) -> None:
    """:func:`_rope_kernel_halves_` into ``o0``/``o1``, the halves of a separate output: each loop
    step loads a pair's two members and its cos/sin once and stores both results, half the loads
    and arithmetic of the one-output form (:func:`_rope_kernel`, which computes every element from
    its partner and re-reads the tables per half)."""
    s = -sin_h if inverse else sin_h
    o0.copy_(x0 * cos_h + (-x1) * s)  # promoted dtype, rounded once, as the reference
    o1.copy_(x1 * cos_h + x0 * s)


def _disjoint_alias(t: Tensor) -> Tensor | None:
    """``t`` over the same memory but a separate storage object (a DLPack round trip), or None.

    Used only for views whose elements do not overlap the other arguments' (the two halves of a
    row): the compiler then treats them as separate buffers, which is exact for such views.
    """
    try:
        return _alias(t)
    except Exception:  # a dtype or device DLPack cannot carry: the caller takes the scratch path
        return None


def _alias(t: Tensor) -> Tensor:
    """``t`` over the same memory as a separate storage: a DLPack capsule round trip (~3 us,
    against ~20 us through ``torch.from_dlpack(t)``'s ``__dlpack__`` protocol)."""
    return torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(t.detach()))


def _paired_tables(cos_h: Tensor, sin_h: Tensor) -> tuple[Tensor, Tensor]:
    """``cos_h``, ``sin_h`` as views of one cached ``[..., s, 2, n]`` tensor holding each position's
    cos row and sin row side by side, with unit stride along ``n``.

    The tables are re-read once per head (Inductor keeps the head loop outermost), so their layout
    counts: one stream of adjacent rows beats two half-used full-width tables (q/k
    ``[1, 32, L, 128]``, one thread: 1.53-1.62x -> 1.21-1.43x the floor in bf16, ~0.05x less in
    fp32), and the interleaved tables (stride-2 views) become unit-stride for the bf16 pair kernel.
    Cached while the same tables are alive (:func:`~posenc.functional._rope_eager._cached_table`).
    """
    both = _cached_table("paired", cos_h, sin_h, False)  # [..., s, 2, n]
    return both[..., 0, :], both[..., 1, :]


def _evenodd_tables(cos_h: Tensor, sin_h: Tensor) -> tuple[Tensor, ...]:
    """cos of the even features, cos of the odd, sin of the even, sin of the odd: views ``[..., s,
    n / 2]`` of one cached ``[..., s, 4, n / 2]`` tensor, for the bfloat16 half-pair word kernel
    (:func:`~posenc.functional._rope_pairs._rope_kernel_bf16_halves`)."""
    return _cached_table("evenodd", cos_h, sin_h, False).unbind(-2)


_KERNELS = {"rope": _rope_kernel, "halves": _rope_kernel_halves, "halves_": _rope_kernel_halves_, "bf16_pairs": _rope_kernel_bf16_pairs,
            "bf16_pairs_": _rope_kernel_bf16_pairs_, "bf16_halves": _rope_kernel_bf16_halves,
            "bf16_halves_": _rope_kernel_bf16_halves_}


def _get_compiled(kind: str = "rope", grouped: bool = False, signature: tuple = ()):
    """The torch.compile'd kernel of ``kind`` (a key of ``_KERNELS``) for one call signature, built
    on first use; the ``grouped`` variant keeps the loop order of its (head-grouped) views, see
    :func:`_head_group`.

    Each signature (dtype, layout, direction, ranks, static sizes) gets its own copy of the kernel's
    code object under its own name, so Dynamo compiles it exactly once (sequence length symbolic)
    and never re-specialises one variant from another's shapes: the steady-state call is then a
    dictionary lookup plus Dynamo's guard check, with no config patching or marking per call.
    """
    key = (kind, grouped, signature)
    fn = _compiled.get(key)
    if fn is None:
        base = _KERNELS[kind]
        name = f"{base.__name__}__v{len(_compiled)}"
        code = base.__code__.replace(co_name=name, co_qualname=name)
        variant = types.FunctionType(code, base.__globals__, name, base.__defaults__, base.__closure__)
        options = {"pick_loop_orders": False} if grouped else {}
        if kind.startswith("bf16_"):  # the word kernels: always run (so compiled) under vector_bitcasts
            options.update(compile_options())
            fn = _compiled[key] = with_vector_bitcasts(torch.compile(variant, fullgraph=True, options=options))
        else:
            fn = _compiled[key] = torch.compile(variant, fullgraph=True, options=options)
    return fn


def _head_group(x: Tensor, out: Tensor, cos_h: Tensor) -> int:
    """Heads that share each load of a table row in the compiled pass: 4 (or 2) when ``x`` and
    ``out`` are head-major ``[..., h, s, hd]`` and the tables do not vary over heads, else 1.

    Inductor orders loops by stride, so the head loop runs outermost and the tables are re-read
    from cache once per head, as many bytes as a bf16 head itself. Viewing ``[..., h, s, hd]`` as
    ``[..., h/g, s, g, hd]`` and keeping that order (``pick_loop_orders=False``) reads each table
    row once per ``g`` heads while every head still streams through contiguous rows: q/k
    ``[1, 32, L, 128]``, one thread, x the copy floor: g = 1: 1.1-1.5, g = 2: 0.9-1.1, g = 4:
    0.8-1.0, g = 8: 1.9 (too many concurrent streams), L = 2048/8192, fp32 and bf16.
    """
    if x.dim() < 3 or (cos_h.dim() >= 3 and cos_h.shape[-3] != 1):
        return 1
    h, s = x.shape[-3], x.shape[-2]
    if s < 2 or any(t.stride(-3) < t.stride(-2) * s for t in (x, out)):
        return 1
    return next((g for g in (4, 2) if h % g == 0), 1)


def _group_views(t: Tensor, g: int) -> Tensor:
    return t.unflatten(-3, (t.shape[-3] // g, g)).transpose(-3, -2)  # [..., h, s, hd] -> [..., h/g, s, g, hd]


#: Rows per block of the head-grouped pass (see :func:`_grouped`).
SEQ_BLOCK = 64


def _grouped(tensors: tuple[Tensor, ...], tables: tuple[Tensor, ...], g: int) -> tuple[tuple, tuple, int]:
    """``tensors`` (``[..., h, s, hd]``, head-major) and ``tables`` (``[..., s, n]``) viewed for the
    head-grouped pass (:func:`_head_group`), and the position of the sequence dim from the end (the
    dim compiled as symbolic).

    ``[..., h/g, s, g, hd]`` with tables ``[..., s, 1, n]`` (3); when the tables have a row per
    position and ``s`` is a multiple of :data:`SEQ_BLOCK` (from two blocks on), blocks of rows
    outermost: ``[..., s/B, h/g, B, g, hd]`` with tables ``[..., s/B, 1, B, 1, n]`` (5). The loop
    then rotates one block of rows for all heads before the next, so each block of the tables is
    read from memory once, not once per head group (the tables are as many bytes per row as
    ``2 n`` float32, against ``g`` heads' rows of x). q/k ``[1, 32, L, 128]``, one thread, x the
    copy floor, q alone, L = 2048 / 8192 (2026-11-23 host): bf16 interleaved 1.54 / 1.17 ->
    1.22 / 1.06, 16- to 256-row blocks alike.
    """
    s = tensors[0].shape[-2]
    tensors = tuple(_group_views(t, g) for t in tensors)  # [..., h/g, s, g, hd]
    tables = tuple(t.unsqueeze(-2) for t in tables)  # [..., s, 1, n]
    if s % SEQ_BLOCK or s < 2 * SEQ_BLOCK or any(t.shape[-3] != s for t in tables):
        return tensors, tables, 3
    blocks = (s // SEQ_BLOCK, SEQ_BLOCK)
    tensors = tuple(t.unflatten(-3, blocks).transpose(-5, -4) for t in tensors)  # [..., s/B, h/g, B, g, hd]
    # [..., s/B, B, 1, n] -> [..., s/B, 1, B, 1, n]: the table's size-1 head dim (if it has one)
    # moves inside the blocks, as x's head groups did
    tables = tuple(u.transpose(-5, -4) if u.dim() >= 5 else u.unsqueeze(-4)
                   for u in (t.unflatten(-3, blocks) for t in tables))
    return tensors, tables, 5


def _static_shape(t: Tensor, seq: int) -> tuple[int, ...]:
    """``t``'s shape with the sequence dim (``seq`` from the end) as -1: the sizes a variant fixes."""
    shape = list(t.shape)
    if t.dim() >= seq:
        shape[t.dim() - seq] = -1 if shape[t.dim() - seq] > 1 else 1
    return tuple(shape)


def compile_available() -> bool:
    """False once compiling the kernel has failed in this process (no C++ compiler, no Triton)."""
    return _compile_error is None


def _run_compiled(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool,
                  use_words: bool | None = None) -> _Call | None:
    """Run the compiled kernel and return what was called (see :class:`_Call`); None (and
    remember why) if compilation is not possible here. ``use_words``: for bfloat16 half pairs, the
    int32-word kernel (True) or the plain two-buffer one (False); None: :func:`_words_win`."""
    if _compile_error is not None:
        return None
    x0, cos0, sin0 = x, cos_h, sin_h
    g = _head_group(x, out, cos_h)
    seq = 2  # the sequence dim, counted from the end
    if g > 1:  # [..., h, s, hd] -> [..., h/g, s, g, hd] or blocks of rows [..., s/B, h/g, B, g, hd]
        (x, out), (cos_h, sin_h), seq = _grouped((x, out), (cos_h, sin_h), g)
    n = cos_h.shape[-1]
    w, wout = _int32_pairs(x), _int32_pairs(out)
    # the word kernels read float32 tables (a float64 product would not round to 16-bit words)
    words = w is not None and wout is not None and cos_h.dtype == sin_h.dtype == torch.float32
    if words and layout == "interleaved":
        cos_c, sin_c = (cos_h, sin_h) if cos_h.stride(-1) == sin_h.stride(-1) == 1 else _paired_tables(cos_h, sin_h)
        if out.data_ptr() == x.data_ptr():
            kind, args = "bf16_pairs_", (w, cos_c, sin_c, inverse)
        else:
            kind, args = "bf16_pairs", (w, cos_c, sin_c, wout, inverse)
    else:
        kind, args = "rope", (x, cos_h, sin_h, out, layout, inverse)
        # 16-bit half pairs: the two-output form (the conversions make the one-output form
        # compute-bound: q/k [1, 32, L, 128] bf16, one thread, x the floor in alternation,
        # L = 2048/8192: 1.25-1.37 -> 1.06-1.26), for bfloat16 as int32 words (fewer instructions
        # again, see posenc.functional._rope_pairs). float32 keeps the one-output form, which
        # streams one output row at a time (0.93-1.19 against 1.07-1.28 for two outputs).
        # Only for head-grouped views: with one head per group Inductor flattens the output's
        # (head, row) dims but not the loop's and computes into a temporary (3.5x the floor).
        two = layout == "half" and x.element_size() < 4 and g > 1
        if two and words and n % 2 == 0 and (alias := _disjoint_alias(wout)) is not None \
                and (_words_win(x0, cos0, sin0) if use_words is None else use_words):
            m = n // 2  # words per half
            kind, args = "bf16_halves", (w[..., :m], w[..., m:n], *_evenodd_tables(cos_h, sin_h), wout[..., :m],
                                         alias[..., m:n], inverse)
        elif two and (alias := _disjoint_alias(out)) is not None:
            kind, args = "halves", (x[..., :n], x[..., n:2 * n], cos_h, sin_h, out[..., :n], alias[..., n:2 * n], inverse)
    tail = 2 * n if kind != "rope" and 2 * n < x.shape[-1] else None
    if tail is not None:
        out[..., tail:].copy_(x[..., tail:])  # partial rotary: the rest passes unchanged
    tensors = args[:-1] if kind in ("bf16_pairs_", "halves", "bf16_halves") else args[:4]
    fn = _invoke(kind, seq, x.dtype, layout, inverse, args, tensors)
    return None if fn is None else _Call(fn, args, tail)


def _invoke(kind: str, seq: int, dtype: torch.dtype, layout: str, inverse: bool, args: tuple, tensors: tuple):
    """Call the compiled variant of ``kind`` for these arguments (compiling it on first use, with
    the sequence dim of ``tensors``, ``seq`` from the end, symbolic: 2 plain, 3 head-grouped, 5 in
    blocks of rows, see :func:`_grouped`) and return it; None (and remember why) if compiling
    fails."""
    signature = (dtype, tensors[0].device.type, layout, inverse,
                 *((t.dim(), _static_shape(t, seq), t.stride(-1) == 1) for t in tensors))
    key = (kind, seq > 2, signature)
    if key in _failed:
        return None
    fn = _compiled.get(key)
    try:
        if fn is not None:
            fn(*args)  # steady state: Dynamo's guards only
            return fn
        for t in tensors:
            if t.dim() >= seq and t.shape[-seq] > 1:
                torch._dynamo.maybe_mark_dynamic(t, t.dim() - seq)  # the sequence dim only
        # Static everything else (a symbolic head width defeats vectorisation, ~30x slower); set
        # only for this variant's first (compiling) call.
        cfg = torch._dynamo.config
        saved = cfg.automatic_dynamic_shapes
        cfg.automatic_dynamic_shapes = False
        try:
            fn = _get_compiled(kind, seq > 2, signature)
            fn(*args)
        finally:
            cfg.automatic_dynamic_shapes = saved
    except Exception as err:  # compilers missing or broken: the eager path is exact, use it
        _compiled.pop(key, None)
        if _compiled:  # other variants compiled here: this input's variant failed, not the compiler
            _failed[key] = f"{type(err).__name__}: {err}"
            log.info("posenc: this compiled RoPE variant failed, using the eager path for it (%s)", _failed[key])
        else:
            _compile_failed(err)
        return None
    return fn


def _compile_failed(err: Exception) -> None:
    global _compile_error
    _compile_error = f"{type(err).__name__}: {err}"
    log.info("posenc: compiled RoPE unavailable, using the eager path (%s)", _compile_error)


#: Whether bfloat16 half pairs take the int32-word kernel (True) or the plain two-buffer one,
#: per (device type, thread count): measured once by :func:`_words_win`.
_words_choice: dict[tuple, bool] = {}

#: Inputs at least this large decide :data:`_words_choice` (smaller ones are host-bound: their
#: timings say nothing about the kernels); below it, before a decision, the word kernel runs.
WORDS_DECIDE_NUMEL = 1 << 22


#: Timed rounds of each kernel in :func:`_words_win` (the fastest counts), and how much slower
#: than the plain kernel the words may be and still be kept (they have been the faster in paired
#: runs wherever their reinterpretations are vector casts, but the fastest of two rounds of
#: each chose the plain kernel at L = 2048 where paired runs of q and k then read 1.28x the
#: floor for the words against 1.35).
_WORDS_ROUNDS = 6
_WORDS_MARGIN = 1.05
_clock = time.perf_counter  # what _words_win times with


def _words_win(x: Tensor, cos_h: Tensor, sin_h: Tensor) -> bool:
    """Whether the int32-word kernel (:func:`~posenc.functional._rope_pairs._rope_kernel_bf16_halves`)
    serves bfloat16 half pairs here rather than the plain two-buffer kernel
    (:func:`_rope_kernel_halves`); both round once from float32, bit for bit the reference.

    Which one is faster has depended on the host and on how Inductor writes the words' float32/int32
    reinterpretations. Written as Inductor does by itself (a store, a scalar loop and a reload each),
    the words won on the host of earlier sessions (x the copy floor, q/k ``[1, 32, L, 128]``, one
    thread, L = 2048 / 8192: 1.14 / 1.03 against 1.45 / 1.12) and ran compute-bound on the
    2026-11-23 host (a newer Xeon with AVX512-BF16 and AMX: 4.66 / 3.47 against 1.59 / 1.41).
    Written as vector casts (:class:`~posenc.functional._rope_pairs.vector_bitcasts`), on that host
    1.46 / 1.23 against 1.56 / 1.54. So the first call with at least :data:`WORDS_DECIDE_NUMEL`
    elements runs both into a temporary output (each compiled, then timed :data:`_WORDS_ROUNDS`
    times in alternation; ~1 s for the second compile) and the words are kept unless the plain
    kernel is faster by more than :data:`_WORDS_MARGIN`, for the device and thread count, for
    ``out=`` and in place alike. Off the CPU: the words."""
    key = (x.device.type, torch.get_num_threads())
    hit = _words_choice.get(key)
    if hit is not None:
        return hit
    if x.device.type != "cpu" or x.numel() < WORDS_DECIDE_NUMEL:
        return True
    tmp = torch.empty_like(x)
    best = {True: float("inf"), False: float("inf")}
    for rnd in range(_WORDS_ROUNDS + 1):  # the first round compiles
        for words in (True, False):
            start = _clock()
            if _run_compiled(x, cos_h, sin_h, tmp, "half", False, words) is None:
                return True  # no compiler (remembered there): the caller finds out the same way
            if rnd:
                best[words] = min(best[words], _clock() - start)
    hit = _words_choice[key] = best[True] <= best[False] * _WORDS_MARGIN
    log.info("posenc: bfloat16 half-pair RoPE takes the %s kernel here (%.2f ms words, %.2f ms plain)",
             "int32-word" if hit else "two-buffer", best[True] * 1e3, best[False] * 1e3)
    return hit


# ---------------------------------------------------------------------------------------------
# call plans: the steady state of a repeated call


class _Call(NamedTuple):
    """One call of a compiled variant: ``fn(*args)``, then ``out[..., tail:]`` copied from ``x``
    (partial rotary) when ``tail`` is set."""

    fn: object
    args: tuple
    tail: int | None


class _View(NamedTuple):
    """An argument view of :class:`_Replay`: ``bases[base].as_strided(size, stride, offset + delta)``."""

    base: int
    size: tuple
    stride: tuple
    delta: int


#: Plans of repeated calls (:func:`_rotate_into`), keyed by :func:`_plan_key`: ``(runner, cos_h,
#: sin_h)`` (a :class:`_Replay` or a Triton :class:`~posenc.functional._rope_triton.Launch`; the
#: tables held so that their addresses, in the key, are not reused while it lives), or None where
#: the call takes no single pass (eager, scratch chunks).
_call_plans: dict[tuple, tuple | None] = {}
_call_seen: dict[tuple, bool] = {}  # keys met once, without a plan
_PLANS = 16  # entries kept in each (the oldest dropped first)

#: Set to False to send every call through the dispatch (no plans made or replayed): for
#: measuring what the plans save (``benchmarks/rope_host.py``) and for debugging.
CALL_PLANS = True


def _plan_key(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool,
              compile: CompileMode) -> tuple | None:
    """What decides the path and the views of a call: x's and out's layout (:func:`_layout_key`),
    layout, direction and the tables' identity. None for inference tables (no version counter to
    key on)."""
    if not CALL_PLANS or cos_h.is_inference() or sin_h.is_inference():
        return None
    return (*_layout_key(x, out), layout, inverse, compile, *_tables_key(cos_h, sin_h))


def _layout_key(x: Tensor, out: Tensor) -> tuple:
    """x's and out's layout as the dispatch reads it: shapes, strides, the parity of the offsets
    and whether the addresses are aligned to a pair of elements (the word views), in place or not,
    dtype and device."""
    return (tuple(x.shape), x.stride(), out.stride(), x.storage_offset() & 1, out.storage_offset() & 1,
            (x.data_ptr() // x.element_size()) & 1, (out.data_ptr() // out.element_size()) & 1,
            x.data_ptr() == out.data_ptr(), x.dtype, x.device)


def _lane_key(x: Tensor, cos: Tensor, sin: Tensor, out: Tensor, layout: str, compile: CompileMode) -> tuple | None:
    """The key of :func:`fast_apply_rope` ``out=`` and :func:`fast_apply_rope_` calls that may
    replay a plan before any check or table view (a plan is filed under it only after a call with
    the same key passed them): everything the checks read (shapes, dtypes, devices, layout,
    autograd state) and :func:`_plan_key`'s fields, for the full tables. None where no plan can
    serve: small inputs under ``compile="auto"``, autograd, inference tables, inside a compile."""
    if not (CALL_PLANS and isinstance(x, Tensor) and isinstance(out, Tensor) and isinstance(cos, Tensor)
            and isinstance(sin, Tensor)):
        return None
    if (compile is not True and compile != "auto") or layout not in ROPE_LAYOUTS or not _compiles(compile, x):
        return None
    if cos.is_inference() or sin.is_inference() or torch.compiler.is_compiling() or (
            torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad)) \
            or forward_mode():  # the checks refuse dual inputs
        return None
    return ("lane", *_layout_key(x, out), tuple(out.shape), out.dtype, out.device, layout, compile,
            tuple(sin.shape), sin.dtype, *_tables_key(cos, sin))


def _replayed(lane: tuple | None, x: Tensor, out: Tensor) -> bool:
    plan = _call_plans.get(lane) if lane is not None else None
    return bool(plan) and plan[0](x, out)


def _inside(st: torch.UntypedStorage, base: torch.UntypedStorage) -> bool:
    """Whether storage ``st`` begins within ``base``'s memory (an alias made of it by DLPack
    begins at the aliased tensor's first element, not at the storage's)."""
    return base.data_ptr() <= st.data_ptr() < base.data_ptr() + max(1, base.nbytes())


class _Replay:
    """A compiled call (:class:`_Call`) remade for new ``x`` and ``out`` of the same layout.

    The dispatch of a compiled call (checks, head-group and int32-word views, the DLPack alias,
    table lookups, the variant's signature) cost ~75 us of host time per call against ~55 us for
    the variant itself (Dynamo's guards and Inductor's wrapper): bfloat16 q of ``[1, 32, 8, 128]``,
    one thread. A replay makes each argument view in one ``as_strided`` from ``x``, ``out`` or
    their aliases (the int32-word view, a separate storage), keeps the tables, and calls the same
    variant, whose guards still check every argument."""

    __slots__ = ("fn", "bases", "items", "tail")

    def __init__(self, fn: object, bases: list, items: list, tail: int | None):
        self.fn, self.bases, self.items, self.tail = fn, bases, items, tail

    @staticmethod
    def _base(src: int, dtype: torch.dtype, x: Tensor, out: Tensor) -> Tensor:
        t = x if src == 0 else out
        if t.dtype != dtype:
            t = t.view(dtype)
        return _alias(t) if src == 2 else t

    @classmethod
    def of(cls, call: _Call | None, x: Tensor, out: Tensor) -> _Replay | None:
        """The replay of ``call``, made on ``x`` and ``out``; None where its arguments are not all
        views of ``x``, ``out`` and their aliases, or the tables (x and out in one storage)."""
        if not isinstance(call, _Call):
            return None
        xs, os_ = x.untyped_storage(), out.untyped_storage()
        if xs._cdata == os_._cdata and x.data_ptr() != out.data_ptr():
            return None
        bases: list[tuple[int, torch.dtype]] = []
        made: list[Tensor] = []
        items: list = []
        for a in call.args:
            if not isinstance(a, Tensor):
                items.append(a)
                continue
            st = a.untyped_storage()
            src = 0 if st._cdata == xs._cdata else 1 if st._cdata == os_._cdata else 2 if _inside(st, os_) else None
            if src is None:
                if _inside(st, xs):  # an alias of x apart from out: not a form the dispatch makes
                    return None
                items.append(a)  # a table
                continue
            if (src, a.dtype) not in bases:
                bases.append((src, a.dtype))
                try:
                    made.append(cls._base(src, a.dtype, x, out))
                except Exception:  # no alias to be had: no plan
                    return None
            i = bases.index((src, a.dtype))
            delta, rem = divmod(a.data_ptr() - made[i].data_ptr(), a.element_size())
            if rem:
                return None
            items.append(_View(i, tuple(a.shape), a.stride(), delta))
        return cls(call.fn, bases, items, call.tail)

    def __call__(self, x: Tensor, out: Tensor) -> bool:
        """Run the call on ``x`` and ``out``; False (nothing to trust in ``out``) if it fails."""
        if _compile_error is not None:
            return False
        try:
            made = [self._base(src, dtype, x, out) for src, dtype in self.bases]
        except Exception:  # no alias this time: the dispatch finds another way
            return False
        args = [a if type(a) is not _View else
                made[a.base].as_strided(a.size, a.stride, made[a.base].storage_offset() + a.delta) for a in self.items]
        try:
            self.fn(*args)
        except Exception as err:  # as _invoke: a compiler that fails now fails for good
            _compile_failed(err)
            return False
        if self.tail is not None:
            out[..., self.tail:].copy_(x[..., self.tail:])
        return True


# ---------------------------------------------------------------------------------------------
# dispatch


def _check(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> tuple[Tensor, Tensor]:
    check_choice("layout", layout, ROPE_LAYOUTS)
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got {type(x).__name__}"
                        + (f" of dtype {x.dtype}" if isinstance(x, Tensor) else ""))
    cos, sin = _align_tables(x, cos, sin)  # checks that the tables broadcast against x
    lead_x, lead_t = x.shape[:-1], cos.shape[:-1]
    if len(lead_t) > len(lead_x) or any(t not in (1, d) for t, d in zip(reversed(lead_t), reversed(lead_x))):
        raise ValueError(f"cos/sin of shape {tuple(cos.shape)} would broadcast x of shape {tuple(x.shape)} "
                         "to a larger shape; the tables must not add batch or head dims")
    return cos, sin


def _on_triton(x: Tensor) -> bool:
    """Whether ``x`` is on a GPU where the direct Triton kernel runs: there ``compile="auto"``
    takes it at every size (one launch, ~30 us of host time on an H100 machine, against several
    eager kernels for a small input, ~130 us; its one compile per variant serves every length)."""
    return x.is_cuda and _rope_triton.available()


def _compiles(compile: CompileMode, x: Tensor) -> bool:
    """Whether ``compile`` sends ``x`` to a compiled pass (Inductor or Triton) at all."""
    return compile is True or (compile == "auto" and (x.numel() >= COMPILE_MIN_NUMEL or _on_triton(x)))


def _wants_compile(compile: CompileMode, x: Tensor) -> bool:
    if compile not in ("auto", True, False):
        raise ValueError(f"compile must be 'auto', True or False, got {compile!r}")
    if compile == "auto":
        return (x.numel() >= COMPILE_MIN_NUMEL and compile_available()) or _on_triton(x)
    return bool(compile)


#: Bytes per chunk of an in-place compiled rotation (computed into a reused scratch, copied back).
_INPLACE_CHUNK_BYTES = 8 << 20


def _inplace_halves(x: Tensor, cos_h: Tensor, sin_h: Tensor, inverse: bool) -> _Call | bool | None:
    """Half pairs rotated in place in one compiled pass (:func:`_rope_kernel_halves_`): what was
    called; None when the halves cannot be given to the compiler as separate buffers (the caller
    uses a scratch), False when compiling is not possible here."""
    if _compile_error is not None:
        return False
    n = cos_h.shape[-1]
    g = _head_group(x, x, cos_h)
    if g == 1:
        return None  # ungrouped, Inductor computes into a temporary anyway (see _run_compiled)
    x0, cos0, sin0 = x, cos_h, sin_h
    (x,), (cos_h, sin_h), seq = _grouped((x,), (cos_h, sin_h), g)  # [..., (s/B,) h/g, s or B, g, hd]
    w = _int32_pairs(x)
    if w is not None and n % 2 == 0 and cos_h.dtype == sin_h.dtype == torch.float32 \
            and _words_win(x0, cos0, sin0) and (alias := _disjoint_alias(w)) is not None:  # bfloat16 as int32 words
        m = n // 2
        args = (w[..., :m], alias[..., m:n], *_evenodd_tables(cos_h, sin_h), inverse)
        fn = _invoke("bf16_halves_", seq, x.dtype, "half", inverse, args, args[:-1])
    else:
        alias = _disjoint_alias(x)
        if alias is None:
            return None
        args = (x[..., :n], alias[..., n:2 * n], cos_h, sin_h, inverse)
        fn = _invoke("halves_", seq, x.dtype, "half", inverse, args, args[:4])
    return False if fn is None else _Call(fn, args, None)


def _inplace_compiled(x: Tensor, cos_h: Tensor, sin_h: Tensor, layout: str, inverse: bool) -> bool:
    """In place through a reused scratch chunk: a compiled in-place pass would make Inductor
    allocate (and page-fault) a full-size temporary on every call, since the pair flip reads
    elements that the same pass overwrites."""
    s = x.shape[-2]
    rows = max(1, min(s, _INPLACE_CHUNK_BYTES // max(1, x[..., 0, :].numel() * x.element_size())))
    key = ("inplace", threading.get_ident(), tuple(x.shape[:-2]), rows, x.shape[-1], x.dtype, x.device)
    scratch = _scratch.get(key)
    if scratch is None:
        _scratch.clear()
        scratch = _scratch[key] = x.new_empty(*x.shape[:-2], rows, x.shape[-1])  # [..., rows, hd]
    for start in range(0, s, rows):
        stop = min(s, start + rows)
        tab = slice(start, stop) if cos_h.shape[-2] == s else slice(None)
        chunk, buf = x[..., start:stop, :], scratch[..., : stop - start, :]
        if not _run_compiled(chunk, cos_h[..., tab, :], sin_h[..., tab, :], buf, layout, inverse):
            if start == 0:
                return False  # nothing done yet: the caller runs the eager path on all of x
            tab = slice(start, None) if cos_h.shape[-2] == s else slice(None)
            rest = x[..., start:, :]
            _eager(rest, cos_h[..., tab, :], sin_h[..., tab, :], rest, layout, inverse)
            return True
        chunk.copy_(buf)
    return True


def _rotate_into(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool,
                 compile: CompileMode, lane: tuple | None = None) -> Tensor:
    """Rotate ``x`` into ``out`` (which may be ``x``); returns ``out``. A call that repeats the
    layout and tables of an earlier one replays that call's plan (see :class:`_Replay`), which is
    also filed under ``lane`` (see :func:`_lane_key`) when given."""
    key = None
    if _compiles(compile, x):
        key = _plan_key(x, cos_h, sin_h, out, layout, inverse, compile)
    if key is not None:
        plan = _call_plans.get(key, False)
        if plan and plan[0](x, out):
            if lane is not None:
                _remember(_call_plans, lane, plan, _PLANS)
            return out
        if plan is False and _call_seen.pop(key, None) is None:
            # first sight of this layout and these tables: new tables at every call (decoding)
            # would make a plan per call; plan on the second
            _remember(_call_seen, key, True, _PLANS)
            key = None
    done = _rotate(x, cos_h, sin_h, out, layout, inverse, compile)
    if key is not None:
        runner = done if isinstance(done, _rope_triton.Launch) else _Replay.of(done, x, out)
        plan = None if runner is None else (runner, cos_h, sin_h)
        for k in (key, lane) if plan is not None and lane is not None else (key,):
            _remember(_call_plans, k, plan, _PLANS)
    return out


def _rotate(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool,
            compile: CompileMode) -> _Call | _rope_triton.Launch | None:
    """The dispatch of :func:`_rotate_into`; returns the single compiled call or Triton launch it
    made, None when it took another path (eager, chunks through a scratch, split heads)."""
    use_compiled = _wants_compile(compile, x)
    pairs32 = layout == "interleaved" and _int32_pairs(x) is not None and _int32_pairs(out) is not None
    complex_first = layout == "interleaved" and not pairs32 and (compile == "auto" or _complexable(x, out, cos_h, layout))
    if complex_first and not (_on_triton(x) and x.dtype == torch.float32):
        # Inductor (torch 2.13, CPU) vectorises the size-2 pair axis poorly (2-20x the floor, see
        # docs/performance.md); the complex multiply serves float32/float64 interleaved pairs
        # better (at the floor), even when compile=True asks for the compiler.
        # bfloat16 pairs read as int32 words (_rope_kernel_bf16_pairs) do vectorise: compiled.
        # On a GPU the Triton kernel reads float32 pairs as int64 words: one launch against the
        # complex multiply's several kernels (host-bound up to q/k [1, 32, 2048, 128] on an H100)
        use_compiled = False
    if use_compiled and x.device.type != "cpu":
        # GPUs: one direct Triton launch (torch.compile's per-call cost exceeds the kernel's); the
        # interleaved tables (stride-2 views) are read through a cached unit-stride copy
        tables = (cos_h, sin_h) if cos_h.stride(-1) == 1 else _paired_tables(cos_h, sin_h)
        launch = _rope_triton.launch(x, *tables, out, layout, inverse)
        if launch is not None and launch(x, out):
            return launch
        if complex_first or (compile == "auto" and x.numel() < COMPILE_MIN_NUMEL):
            # declined by Triton: float32 interleaved pairs back to the complex multiply; small
            # inputs (float64) are not worth an Inductor compile
            use_compiled = False
    inplace = out.data_ptr() == x.data_ptr()
    if (use_compiled and x.dim() >= 3 and x.shape[-3] % 4 and x.shape[-3] > 4
            and _head_group(x[..., :4, :, :], out[..., :4, :, :], cos_h) == 4):
        # a head count that is not a multiple of 4 (Falcon-7B's 71): the largest multiple goes
        # through the head-grouped pass, the one to three heads left over on their own
        h4 = x.shape[-3] - x.shape[-3] % 4
        for part in (slice(0, h4), slice(h4, None)):
            _rotate_into(x[..., part, :, :], cos_h, sin_h, out[..., part, :, :], layout, inverse, compile)
        return None
    if use_compiled:
        cos_h, sin_h = _paired_tables(cos_h, sin_h)
        # the bf16 pair kernel is elementwise per word: it runs in place without a scratch
        if inplace and layout == "half":
            done = _inplace_halves(x, cos_h, sin_h, inverse)
            if done is None:
                done = _inplace_compiled(x, cos_h, sin_h, layout, inverse)
        elif inplace and not pairs32:
            done = _inplace_compiled(x, cos_h, sin_h, layout, inverse)
        else:
            done = _run_compiled(x, cos_h, sin_h, out, layout, inverse)
        if done:
            return done if isinstance(done, _Call) else None
    _eager(x, cos_h, sin_h, out, layout, inverse, native=compile is not False)
    return None


class RopeFunction(torch.autograd.Function):
    """RoPE as an autograd function whose backward is the inverse rotation (no saved activations).

    ``RopeFunction.apply(x, cos_h, sin_h, layout, compile)`` with half-width tables ``[..., s, n]``.
    """

    @staticmethod
    def forward(ctx, x: Tensor, cos_h: Tensor, sin_h: Tensor, layout: str, compile: CompileMode) -> Tensor:
        ctx.save_for_backward(cos_h, sin_h)
        ctx.save_for_forward(cos_h, sin_h)
        ctx.layout, ctx.compile = layout, compile
        return _rotate_into(x, cos_h, sin_h, torch.empty_like(x), layout, False, compile)

    @staticmethod
    def jvp(ctx, x_t: Tensor, *_: Any) -> Tensor:
        """Forward mode (``torch.autograd.forward_ad``): the rotation is linear in x, so the output's
        tangent is the rotated tangent (tables with tangents take the reference path instead)."""
        cos_h, sin_h = ctx.saved_tensors
        return _tangent(x_t, cos_h, sin_h, ctx.layout, ctx.compile)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:
        cos_h, sin_h = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph (gradient penalties): the inverse rotation, itself differentiable
            return RopeFunction.apply(grad, cos_h, -sin_h, ctx.layout, ctx.compile), None, None, None, None
        grad_x = torch.empty_like(grad)
        _rotate_into(grad, cos_h, sin_h, grad_x, ctx.layout, True, ctx.compile)
        return grad_x, None, None, None, None


def _tangent(t: Tensor, cos_h: Tensor, sin_h: Tensor, layout: str, compile: CompileMode) -> Tensor:
    """A forward-mode tangent rotated; through :class:`RopeFunction` where it requires grad (the
    tangent of a projection whose weights train does), so that it differentiates in turn."""
    if torch.is_grad_enabled() and t.requires_grad:
        return RopeFunction.apply(t, cos_h, sin_h, layout, compile)
    return _rotate_into(t, cos_h, sin_h, torch.empty_like(t), layout, False, compile)


def _aliases(out: Tensor) -> tuple[Tensor, ...]:
    """``out[0], out[1], ...`` as tensors of their own (no view of ``out``): a custom Function
    may not return several views of one tensor (autograd then forbids editing them in place)."""
    return tuple(torch.empty(0, dtype=out.dtype, device=out.device).set_(
        out.untyped_storage(), out.storage_offset() + i * out.stride(0), out.shape[1:], out.stride()[1:])
        for i in range(out.shape[0]))


class RopePairFunction(torch.autograd.Function):
    """q and k, slices of one projection, rotated as one: ``RopePairFunction.apply(q, k, both, cos_h,
    sin_h, layout)`` with ``both`` the ``[2, *q.shape]`` view of the two (see
    :func:`posenc.schemes.rope._siblings`). One pass forward over ``both``, whose results return
    as two tensors; backward, the inverse rotation of each gradient. Unlike rotating ``both`` under
    autograd, no gradient is scattered back through the view (zero-filled copies of the whole
    projection and of both results per step)."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, both: Tensor, cos_h: Tensor, sin_h: Tensor, layout: str) -> tuple[Tensor, Tensor]:
        ctx.save_for_backward(cos_h, sin_h)
        ctx.save_for_forward(cos_h, sin_h)
        ctx.layout, ctx.like = layout, (q.shape, k.shape, q.dtype, q.device)  # zero tangents' (no tensor kept alive)
        outs = _pair_launched(q, k, cos_h, sin_h, layout)
        return outs if outs is not None else _aliases(_eager_both(both, cos_h, sin_h, layout))

    @staticmethod
    def jvp(ctx, q_t: Tensor | None, k_t: Tensor | None, *_: Any) -> tuple[Tensor, Tensor]:
        """Forward mode: each tangent rotated as its tensor (zero where an input has none)."""
        cos_h, sin_h = ctx.saved_tensors
        q_shape, k_shape, dtype, device = ctx.like
        return tuple(torch.zeros(shape, dtype=dtype, device=device) if t is None else _tangent(t, cos_h, sin_h, ctx.layout, False)
                     for t, shape in ((q_t, q_shape), (k_t, k_shape)))  # type: ignore[return-value]

    @staticmethod
    def backward(ctx, grad_q: Tensor, grad_k: Tensor) -> tuple[Tensor | None, ...]:
        cos_h, sin_h = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: the inverse rotations, themselves differentiable
            minus = -sin_h
            return (*(RopeFunction.apply(g, cos_h, minus, ctx.layout, False) for g in (grad_q, grad_k)),
                    None, None, None, None)
        grads = tuple(torch.empty_like(g) for g in (grad_q, grad_k))
        if not _pair_kernel(grad_q, grad_k, *grads, cos_h, sin_h, ctx.layout, True):
            compile = "auto"  # a GPU: a Triton launch each; the CPU: the eager pass (small inputs)
            for g, out in zip((grad_q, grad_k), grads):
                _rotate_into(g, cos_h, sin_h, out, ctx.layout, True, compile)
        return *grads, None, None, None, None


def _pair_launched(q: Tensor, k: Tensor, cos_h: Tensor, sin_h: Tensor, layout: str) -> tuple[Tensor, Tensor] | None:
    """q and k rotated into two new tensors by one Triton launch (:func:`_pair_kernel`); None where
    that does not apply (no GPU with Triton, float64, ...)."""
    if not _on_triton(q):
        return None
    outs = tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k))
    return outs if _pair_kernel(q, k, *outs, cos_h, sin_h, layout, False) else None


def _eager_both(both: Tensor, cos_h: Tensor, sin_h: Tensor, layout: str) -> Tensor:
    """``both``, the ``[2, *q.shape]`` view of q and k, rotated into a new tensor by the eager pass
    (what :func:`_rotate_into` does with ``compile=False``)."""
    out = torch.empty_like(both)
    _eager(both, cos_h, sin_h, out, layout, False, native=True)
    return out


def _pair_kernel(q: Tensor, k: Tensor, out_q: Tensor, out_k: Tensor, cos_h: Tensor, sin_h: Tensor, layout: str,
                 inverse: bool) -> bool:
    """Rotate ``q`` into ``out_q`` and ``k`` into ``out_k`` (same layouts, the same tables) in one
    Triton launch, replayed from its plan when the layout and tables repeat; False (nothing written)
    where the kernel does not apply: no GPU with Triton, float64, or q and k of other layouts.

    For training-size heads on a GPU the launch, not the bytes, is the cost: ~15-30 us of host time
    each, against a kernel of a few microseconds."""
    if not _on_triton(q):
        return False
    key = _plan_key(q, cos_h, sin_h, out_q, layout, inverse, "pair")  # "pair" in compile's place: apart from single calls
    if key is not None:
        key = (*key, *_layout_key(k, out_k))
        plan = _call_plans.get(key)
        if plan:
            return plan[0](q, out_q, k, out_k)
    tables = (cos_h, sin_h) if cos_h.stride(-1) == 1 else _paired_tables(cos_h, sin_h)
    launch = _rope_triton.launch(q, *tables, out_q, layout, inverse, k, out_k)
    if launch is None or not launch(q, out_q, k, out_k):
        return False
    if key is not None:
        _remember(_call_plans, key, (launch, cos_h, sin_h), _PLANS)
    return True


def _has_tangent(t: Tensor) -> bool:
    """Whether ``t`` is a forward-mode dual tensor (``torch.autograd.forward_ad``)."""
    return forward_mode() and forward_ad.unpack_dual(t).tangent is not None


def _differentiable_tables(cos: Tensor, sin: Tensor) -> bool:
    """Tables that take part in autograd, backward or forward mode: the reference formula then
    (the fast passes differentiate in x only)."""
    return (torch.is_grad_enabled() and (cos.requires_grad or sin.requires_grad)) or _has_tangent(cos) or _has_tangent(sin)


def _no_autograd(x: Tensor, what: str) -> None:
    if (torch.is_grad_enabled() and x.requires_grad) or _has_tangent(x):
        raise RuntimeError(f"{what} does not take part in autograd (x requires grad or carries a forward-mode "
                           "tangent); call fast_apply_rope(x, cos, sin) without out= under autograd")


def fast_apply_rope(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    layout: str = "half",
    out: Tensor | None = None,
    compile: CompileMode = "auto",
) -> Tensor:
    """:func:`~posenc.functional.apply_rope` in one pass; ``out=`` writes into a preallocated tensor.

    Same arguments and result as the reference (``cos``/``sin`` ``[s, r]``, ``[b, s, r]`` or
    ``[b, h, s, r]`` from :func:`~posenc.functional.rope_cos_sin`; the first ``r`` features rotate,
    the rest pass unchanged; 16-bit results are rounded once from float32 as there, and may differ
    from it by one unit in the last place where the float32 sums round differently). ``compile``:
    ``"auto"`` keeps inputs of fewer than :data:`COMPILE_MIN_NUMEL` elements uncompiled when no
    ``out`` is given (the eager pass) and sends larger ones to the compiled pass where a compiler works (half pairs, bfloat16
    interleaved pairs) or the eager pass; ``True`` always tries to compile, ``False`` stays eager. Differentiable in ``x`` (backward = inverse rotation) when
    ``out`` is None; tables that require grad take the reference path. Inside ``torch.compile`` the reference formula is
    returned for the outer compiler to fuse.
    """
    wrapped = in_transform()  # torch.func: no storage to key a plan on
    lane = None if out is None or wrapped else _lane_key(x, cos, sin, out, layout, compile)
    if _replayed(lane, x, out):  # a repeated call: its plan, without the checks it passed before
        return out
    cos, sin = _check(x, cos, sin, layout)
    if torch.compiler.is_compiling() or wrapped or _differentiable_tables(cos, sin):
        if out is not None:
            return out.copy_(apply_rope(x, cos, sin, layout=layout))
        return apply_rope(x, cos, sin, layout=layout)
    if out is None and compile == "auto" and x.numel() < COMPILE_MIN_NUMEL and not _on_triton(x):
        if layout == "half" and x.numel() <= LEAN_MAX_NUMEL >> (2 * (x.element_size() < 4)) \
                and not (torch.is_grad_enabled() and x.requires_grad):
            return _lean_half(x, cos, sin)
        # small inputs (training-size heads): no Inductor compile ("auto" compiles none below
        # COMPILE_MIN_NUMEL). CPU float32/float64 half pairs (bfloat16 with float32 tables) take
        # the C loop (one pass, _rope_native); other half pairs and 32/64-bit interleaved pairs the eager pass (three
        # whole-tensor ops, or one complex multiply, and the inverse rotation as backward:
        # [64, 4, 32, 16] fp32 forward + backward of q and k ~1.2-1.6 ms -> ~0.65 ms against the
        # reference formula's cat, negation and autograd graph; bf16 interleaved [64, 4, 32, 16]
        # 0.93 -> 0.46 ms, and its gradient rounded once where the reference's autograd rounds
        # each of its two terms to bf16 and then their sum)
    cos_h, sin_h = _half_tables(cos, sin, layout)
    if out is None:
        if (torch.is_grad_enabled() and x.requires_grad) or _has_tangent(x):
            return RopeFunction.apply(x, cos_h, sin_h, layout, compile)
        return _rotate_into(x, cos_h, sin_h, torch.empty_like(x), layout, False, compile)
    _no_autograd(x, "fast_apply_rope(..., out=)")
    if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
        raise ValueError(f"out must match x (shape {tuple(x.shape)}, {x.dtype}, {x.device}); "
                         f"got shape {tuple(out.shape)}, {out.dtype}, {out.device}")
    _no_overlap(out, "out", "fast_apply_rope(..., out=)")
    if out.data_ptr() == x.data_ptr() and out.stride() == x.stride():
        return fast_apply_rope_(x, cos, sin, layout=layout, compile=compile)
    return _rotate_into(x, cos_h, sin_h, out, layout, False, compile, lane)


def _lean_half(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Small half-pair inputs without autograd (a decoding step): the reference formula
    (:func:`~posenc.functional.apply_rope`, HF ``rotate_half``) as one multiply and one ``addcmul_``
    per half, straight from the full-width tables as given (aligned by :func:`_check`): no derived
    tables, plans or caches, whose lookups cost more than the rotation at this size (a new table
    each step would also churn the table cache). Computed in the promoted dtype and rounded once,
    like the eager pass. One thread, q ``[1, 32, 1, 128]`` float32: ~29 -> ~22 us; ``[1, 32, 16,
    128]`` ~64 -> ~35 us."""
    r = cos.shape[-1]
    n = r // 2
    xr = x[..., :r]
    o = xr * cos  # [..., s, r] in the promoted dtype: both halves times their cos
    o[..., :n].addcmul_(xr[..., n:], sin[..., :n], value=-1.0)  # x1 cos - x2 sin
    o[..., n:].addcmul_(xr[..., :n], sin[..., n:])  # x2 cos + x1 sin
    o = o.to(x.dtype)
    return o if r == x.shape[-1] else torch.cat((o, x[..., r:]), dim=-1)


def fast_apply_rope_pair(q: Tensor, k: Tensor, both: Tensor, cos: Tensor, sin: Tensor, *,
                         layout: str = "half") -> tuple[Tensor, Tensor]:
    """``fast_apply_rope(q, cos, sin), fast_apply_rope(k, cos, sin)`` in one pass over ``both``,
    the ``[2, *q.shape]`` view of the two (slices of one qkv projection; see
    :class:`RopePairFunction`). For small inputs: per operation, not per byte, is what costs there.
    The tables are those of ``q`` (``[s, r]``, ``[b, s, r]`` or ``[b, h, s, r]`` for ``q``
    ``[b, h, s, hd]``); ``both[0]`` must be ``q`` and ``both[1]`` ``k`` (a ``ValueError`` otherwise).
    """
    _check_pair(q, k, both)
    cos, sin = _check(q, cos, sin, layout)  # aligned to q's dims: [b, s, r] -> [b, 1, s, r]
    # on a GPU with Triton one launch rotates both, at any size and dtype it takes (_pair_kernel); on
    # the CPU large inputs go through fast_apply_rope one by one
    separate = not _on_triton(both) and both.numel() >= COMPILE_MIN_NUMEL
    if torch.compiler.is_compiling() or _differentiable_tables(cos, sin) or separate:
        return fast_apply_rope(q, cos, sin, layout=layout), fast_apply_rope(k, cos, sin, layout=layout)
    grad = (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad)) or _has_tangent(q) or _has_tangent(k)
    cos_h, sin_h = _half_tables(cos, sin, layout)  # aligned to q above: they broadcast against [2, *q.shape]
    if grad:
        return RopePairFunction.apply(q, k, both, cos_h, sin_h, layout)
    outs = _pair_launched(q, k, cos_h, sin_h, layout)
    if outs is None:
        out = _eager_both(both, cos_h, sin_h, layout)
        outs = (out[0], out[1])
    return outs


def _fused_split(proj: Tensor, q_heads: int, k_heads: int, head_dim: int, alias: bool) -> tuple[Tensor, ...]:
    """q ``[b, q_heads, s, hd]``, k and v ``[b, k_heads, s, hd]`` of a fused projection
    ``proj [b, s, (q_heads + 2 k_heads) hd]``: views, or with ``alias`` tensors of their own over
    the same memory (outputs of an autograd Function, which may not be views of one another)."""
    rows = proj.view(*proj.shape[:-1], q_heads + 2 * k_heads, head_dim)  # [b, s, q_heads + 2 k_heads, hd]
    bounds = (0, q_heads, q_heads + k_heads, q_heads + 2 * k_heads)
    parts = [rows[..., lo:hi, :].transpose(-3, -2) for lo, hi in zip(bounds, bounds[1:])]  # [b, heads, s, hd]
    if not alias:
        return tuple(parts)
    st = proj.untyped_storage()
    return tuple(torch.empty(0, dtype=proj.dtype, device=proj.device).set_(st, t.storage_offset(), t.shape, t.stride())
                 for t in parts)


class FusedRopeFunction(torch.autograd.Function):
    """q, k and v of a fused projection, q and k rotated in place in it (see
    :func:`fast_apply_rope_fused_`): ``FusedRopeFunction.apply(base, cos_h, sin_h, q_heads,
    k_heads, head_dim, shape)`` with half-width tables ``[s, n]``, ``base`` the projection or the
    tensor it views as ``shape`` ``[b, s, f]`` (``Linear`` with a bias returns ``addmm``'s
    ``[b s, f]`` output viewed), returns ``base`` (marked as modified in place) and q, k and v.
    Backward: one new gradient for ``base``, made as its q, k and v slots from the gradients of q,
    k (rotated back) and v, as stacking them would make it (the incoming gradients are never
    written)."""

    @staticmethod
    def forward(ctx, base: Tensor, cos_h: Tensor, sin_h: Tensor, q_heads: int, k_heads: int,
                head_dim: int, shape: tuple[int, ...]) -> tuple[Tensor, ...]:
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(cos_h, sin_h)
        ctx.heads, ctx.head_dim, ctx.shapes = (q_heads, k_heads), head_dim, (shape, base.shape)
        proj = base.view(shape)  # [b, s, f]
        _rotate_heads_(proj, cos_h, sin_h, q_heads + k_heads, head_dim)
        ctx.mark_dirty(base)
        return base, *_fused_split(proj, q_heads, k_heads, head_dim, alias=True)

    @staticmethod
    def backward(ctx, grad_base: Tensor | None, *grads: Tensor | None) -> tuple[Tensor | None, ...]:
        cos_h, sin_h = ctx.saved_tensors
        (q_heads, k_heads), hd, (shape, base_shape) = ctx.heads, ctx.head_dim, ctx.shapes
        if grad_base is not None:  # the returned projection is q, k (rotated) and v too: one more gradient of each
            parts = _fused_split(grad_base.reshape(shape), q_heads, k_heads, hd, alias=False)
            grads = tuple(p if g is None else g + p for g, p in zip(grads, parts))
        like = next((g for g in grads if g is not None), None)
        if like is None:
            return None, None, None, None, None, None, None
        b, s = like.shape[0], like.shape[-2]
        if torch.is_grad_enabled():  # create_graph: the inverse rotations, themselves differentiable
            parts = [torch.zeros(b, heads, s, hd, dtype=like.dtype, device=like.device) if g is None else
                     RopeFunction.apply(g, cos_h, -sin_h, "half", False) if i < 2 else g
                     for i, (g, heads) in enumerate(zip(grads, (q_heads, k_heads, k_heads)))]
            grad = torch.cat([t.transpose(-3, -2) for t in parts], dim=-2).flatten(-2)  # [b, s, f]
            return grad.reshape(base_shape), None, None, None, None, None, None
        grad = torch.empty(b, s, (q_heads + 2 * k_heads) * hd, dtype=like.dtype, device=like.device)
        for i, (g, slot) in enumerate(zip(grads, _fused_split(grad, q_heads, k_heads, hd, alias=False))):
            if g is None:
                slot.zero_()
            elif i == 2:
                slot.copy_(g)
            else:  # the C loop, or the ATen passes without it
                _eager(g, cos_h, sin_h, slot, "half", True, native=True)
        return grad.view(base_shape), None, None, None, None, None, None


def _rotate_heads_(proj: Tensor, cos_h: Tensor, sin_h: Tensor, heads: int, head_dim: int) -> None:
    """Rotate the first ``heads`` heads of every row of ``proj [b, s, f]`` in place (tables ``[s, n]``)."""
    qk = proj.view(*proj.shape[:-1], proj.shape[-1] // head_dim, head_dim)[..., :heads, :]  # [b, s, heads, hd]
    tables = cos_h.unsqueeze(-2), sin_h.unsqueeze(-2)  # [s, 1, n]: shared by the heads
    _eager(qk, *tables, qk, "half", False, native=True)  # the C loop, or the ATen passes without it


def fast_apply_rope_fused_(proj: Tensor, cos: Tensor, sin: Tensor, q_heads: int, k_heads: int,
                           head_dim: int) -> tuple[Tensor, Tensor, Tensor] | None:
    """q, k and v ``[b, heads, s, hd]`` of a fused projection ``proj [b, s, (q_heads + 2 k_heads)
    hd]`` (q heads, then k heads, then v heads along the features, as :class:`posenc.Attention`'s
    ``qkv`` makes them), with q and k rotated in place in ``proj`` by the half-pair tables
    ``cos``/``sin`` ``[s, r]`` (positions ``0..s-1``; float32 for a bfloat16 projection); None
    (nothing done) where this path does not apply: not a small CPU float32/float64/bfloat16 input,
    no C loop here (:mod:`~posenc.functional._rope_native`), under autograd a leaf or a view of
    only part of another tensor (``Linear``'s output with a bias views all of ``addmm``'s: served),
    forward-mode AD, tables that need gradients, ``torch.compile`` or a ``torch.func`` transform.

    The values of :func:`fast_apply_rope` on q and k (the reference formula, bit for bit), with
    no new tensors for them: q, k and v stay in the projection, as they are without a positional
    encoding. Under autograd (:class:`FusedRopeFunction`) the backward writes the projection's
    gradient once, the q and k parts rotated back, where rotating views of q and k makes two
    gradients that autograd then stacks with v's. For training-size inputs, where each
    allocation and pass over memory costs as much as the rotation itself."""
    if tracing() or forward_mode() or proj.device.type != "cpu" or proj.dim() != 3:
        return None
    n, heads = cos.shape[-1] // 2, q_heads + 2 * k_heads
    table = torch.float32 if proj.dtype == torch.bfloat16 else proj.dtype  # bfloat16 rotates in float32
    if proj.dtype not in (torch.float32, torch.float64, torch.bfloat16) or cos.dtype != table or sin.dtype != table \
            or cos.shape != sin.shape or cos.dim() != 2 or cos.shape[0] != proj.shape[-2] or 2 * n > head_dim \
            or proj.shape[-1] != heads * head_dim:
        return None
    if proj.numel() // heads * (q_heads + k_heads) >= COMPILE_MIN_NUMEL or not proj.is_contiguous():
        return None
    grad = torch.is_grad_enabled() and proj.requires_grad
    base = proj if proj._base is None else proj._base
    if grad and (base.is_leaf or base._base is not None or base.data_ptr() != proj.data_ptr()
                 or base.numel() != proj.numel() or not base.is_contiguous()):
        return None  # a leaf, or a view of only part of its base (autograd would copy the base to rotate it)
    if _differentiable_tables(cos, sin) or not _rope_native.available():
        return None
    cos_h, sin_h = cos[:, :n], sin[:, :n]  # [s, n]
    if grad:  # on the base that proj views whole (Linear with a bias: addmm's [b s, f], viewed)
        return FusedRopeFunction.apply(base, cos_h, sin_h, q_heads, k_heads, head_dim, tuple(proj.shape))[1:]
    _rotate_heads_(proj, cos_h, sin_h, q_heads + k_heads, head_dim)
    return _fused_split(proj, q_heads, k_heads, head_dim, alias=False)


def _no_overlap(t: Tensor, name: str, what: str) -> None:
    """Refuse to write into a tensor whose elements share memory (an ``expand``-ed, stride-0 view):
    several results would land on one element."""
    if not in_transform() and torch._debug_has_internal_overlap(t) == 1:
        raise ValueError(f"{what}: {name} of shape {tuple(t.shape)} and strides {t.stride()} has elements that share "
                         f"memory (an expand()-ed view?), so it cannot be written into; pass {name}.contiguous() "
                         "or a fresh tensor")


def _check_pair(q: Tensor, k: Tensor, both: Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("both", both)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if both.shape != (2, *q.shape) or k.shape != q.shape or both.dtype != q.dtype or both.device != q.device or both.numel() and any(
            t.data_ptr() != both.data_ptr() + i * both.stride(0) * both.element_size() or t.stride() != both.stride()[1:]
            for i, t in enumerate((q, k))):
        raise ValueError(f"both must be the [2, *q.shape] view whose [0] is q and [1] is k (q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, both {tuple(both.shape)}); call fast_apply_rope on q and k otherwise")


def fast_apply_rope_(x: Tensor, cos: Tensor, sin: Tensor, *, layout: str = "half",
                     compile: CompileMode = "auto") -> Tensor:
    """In-place :func:`fast_apply_rope`: rotates ``x`` itself and returns it (no autograd)."""
    wrapped = in_transform()
    lane = None if wrapped else _lane_key(x, cos, sin, x, layout, compile)
    if _replayed(lane, x, x):
        return x
    cos, sin = _check(x, cos, sin, layout)
    _no_autograd(x, "fast_apply_rope_")
    _no_overlap(x, "x", "fast_apply_rope_ (in place)")
    cos_h, sin_h = _half_tables(cos, sin, layout)
    if torch.compiler.is_compiling() or wrapped:
        return x.copy_(apply_rope(x, cos, sin, layout=layout))
    return _rotate_into(x, cos_h, sin_h, x, layout, False, compile, lane)


def warmup(
    head_dim: int = 128,
    *,
    num_heads: int = 32,
    dtypes: Iterable[torch.dtype] = (torch.float32, torch.bfloat16),
    layouts: Iterable[str] = ROPE_LAYOUTS,
    backward: bool = True,
    device: torch.device | str = "cpu",
) -> float:
    """Compile the fast RoPE kernels ahead of time; returns the seconds it took.

    One compile per (dtype, layout, direction, out= or in place, head count) serves every sequence
    length, so calling this once at start-up moves the first-call compile cost (~1 s each, ~10 s
    for the first in a cold process) out of the first training step. On the CPU it also builds
    (or loads) the C loop that small half-pair inputs take (:mod:`~posenc.functional._rope_native`).
    """
    from .rope import rope_cos_sin, rope_inv_freq

    start = time.perf_counter()
    if torch.device(device).type == "cpu":
        _rope_native.available()
    inv_freq, _ = rope_inv_freq(head_dim)
    for layout in layouts:
        cos, sin = (t.to(device) for t in rope_cos_sin(16, inv_freq.to(device), layout=layout))
        cos_h, sin_h = _half_tables(cos, sin, layout)
        for dtype in dtypes:
            x = torch.zeros(1, num_heads, 16, head_dim, dtype=dtype, device=device)  # [b, h, s, hd]
            for inverse in (False, True) if backward else (False,):
                with contextlib.suppress(Exception):
                    _rotate_into(x, cos_h, sin_h, torch.empty_like(x), layout, inverse, True)
            with contextlib.suppress(Exception):
                _rotate_into(x, cos_h, sin_h, x, layout, False, True)  # in place (fast_apply_rope_)
    return time.perf_counter() - start
