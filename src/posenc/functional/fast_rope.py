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
  The ``rotate_half``/``cat`` form of the reference does not fuse on CPU (Inductor materialises the
  concatenation), which is why the pair-flip form is used (the same idea as gpt-fast's
  ``apply_rotary_emb``, pytorch-labs/gpt-fast ``model.py``, which views pairs instead of concatenating).
* **eager** (:mod:`posenc.functional._rope_eager`; no compiler, interleaved pairs, or
  ``compile=False``): for float32/float64 interleaved pairs a complex multiply into the output
  (``view_as_complex``, as Meta's Llama ``apply_rotary_emb``), the complex table cached per table
  tensor; otherwise cache-sized chunks rotated in a reused float32 scratch and stored once.
* **small inputs** (fewer than :data:`COMPILE_MIN_NUMEL` elements, ``compile="auto"``, no ``out``):
  the reference formula itself, as fast as any pass at that size.

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
from collections.abc import Iterable
from typing import Literal

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ._checks import check_choice
from ._rope_eager import _eager, _scratch
from .rope import ROPE_LAYOUTS, _align_tables, apply_rope

__all__ = [
    "fast_apply_rope",
    "fast_apply_rope_",
    "RopeFunction",
    "compile_available",
    "warmup",
    "COMPILE_MIN_NUMEL",
]

log = logging.getLogger(__name__)

CompileMode = Literal["auto"] | bool

#: ``compile="auto"`` compiles for inputs with at least this many elements (4 MiB of float32):
#: below it, the ~1 s first compile of a new dtype/layout is not worth its saving.
COMPILE_MIN_NUMEL = 1 << 20

_compiled = None  # the torch.compile'd kernel, built on first use
_compile_error: str | None = None  # why compiling failed, if it did


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
        c = cos_h.unsqueeze(-2)  # [..., s, 1, n]
        s = torch.stack((-sign * sin_h, sign * sin_h), dim=-2)  # [..., s, 2, n]
        rot = (xr * c + xr.flip(-2) * s).flatten(-2)  # [..., s, 2, n] -> [..., s, r]
        out[..., :r].copy_(rot)
    else:
        # pairs (2i, 2i+1): work on the transposed view [..., s, 2, n] so the innermost loop runs
        # over n (a flip of the size-2 axis in the innermost position defeats vectorisation, ~3x)
        xr = x[..., :r].unflatten(-1, (n, 2)).transpose(-1, -2)  # [..., s, hd] -> [..., s, 2, n]
        x0, x1 = xr[..., 0, :], xr[..., 1, :]  # [..., s, n] each
        rot = torch.stack((x0 * cos_h - sign * (x1 * sin_h), x1 * cos_h + sign * (x0 * sin_h)), dim=-2)  # [..., s, 2, n]
        out[..., :r].unflatten(-1, (n, 2)).transpose(-1, -2).copy_(rot)
    if r < x.shape[-1]:
        out[..., r:].copy_(x[..., r:])


def _get_compiled():
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_rope_kernel, fullgraph=True)
    return _compiled


def compile_available() -> bool:
    """False once compiling the kernel has failed in this process (no C++ compiler, no Triton)."""
    return _compile_error is None


def _run_compiled(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool) -> bool:
    """Run the compiled kernel; False (and remember why) if compilation is not possible here."""
    global _compile_error
    if _compile_error is not None:
        return False
    for t in (x, out, cos_h, sin_h):
        if t.dim() >= 2 and t.shape[-2] > 1:
            torch._dynamo.maybe_mark_dynamic(t, t.dim() - 2)  # the sequence dim only
    # Static everything else (a symbolic head width defeats vectorisation, ~30x slower), and room
    # for the few variants (layout x direction x dtype x table rank) that one process meets.
    patch = torch._dynamo.config.patch(automatic_dynamic_shapes=False, recompile_limit=64)
    try:
        with patch:
            _get_compiled()(x, cos_h, sin_h, out, layout, inverse)
    except Exception as err:  # compilers missing or broken: the eager path is exact, use it
        _compile_error = f"{type(err).__name__}: {err}"
        log.info("posenc: compiled RoPE unavailable, using the eager path (%s)", _compile_error)
        return False
    return True


# ---------------------------------------------------------------------------------------------
# dispatch


def _check(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> tuple[Tensor, Tensor]:
    check_choice("layout", layout, ROPE_LAYOUTS)
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got {type(x).__name__}"
                        + (f" of dtype {x.dtype}" if isinstance(x, Tensor) else ""))
    cos, sin = _align_tables(x, cos, sin)
    if torch.broadcast_shapes(x.shape[:-1], cos.shape[:-1]) != x.shape[:-1]:
        raise ValueError(f"cos/sin of shape {tuple(cos.shape)} would broadcast x of shape {tuple(x.shape)} "
                         "to a larger shape; the tables must not add batch or head dims")
    return cos, sin


def _wants_compile(compile: CompileMode, x: Tensor) -> bool:
    if compile not in ("auto", True, False):
        raise ValueError(f"compile must be 'auto', True or False, got {compile!r}")
    if compile == "auto":
        return x.numel() >= COMPILE_MIN_NUMEL and compile_available()
    return bool(compile)


#: Bytes per chunk of an in-place compiled rotation (computed into a reused scratch, copied back).
_INPLACE_CHUNK_BYTES = 8 << 20


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
                 compile: CompileMode) -> Tensor:
    use_compiled = _wants_compile(compile, x)
    if compile == "auto" and layout == "interleaved":
        # Inductor (torch 2.13, CPU) vectorises the size-2 pair axis poorly (2-20x the floor, see
        # docs/performance.md); the chunked complex multiply serves interleaved pairs better
        use_compiled = False
    inplace = out.data_ptr() == x.data_ptr()
    if use_compiled:
        done = (_inplace_compiled(x, cos_h, sin_h, layout, inverse) if inplace
                else _run_compiled(x, cos_h, sin_h, out, layout, inverse))
        if done:
            return out
    _eager(x, cos_h, sin_h, out, layout, inverse)
    return out


class RopeFunction(torch.autograd.Function):
    """RoPE as an autograd function whose backward is the inverse rotation (no saved activations).

    ``RopeFunction.apply(x, cos_h, sin_h, layout, compile)`` with half-width tables ``[..., s, n]``.
    """

    @staticmethod
    def forward(ctx, x: Tensor, cos_h: Tensor, sin_h: Tensor, layout: str, compile: CompileMode) -> Tensor:
        ctx.save_for_backward(cos_h, sin_h)
        ctx.layout, ctx.compile = layout, compile
        out = torch.empty_like(x)
        return _rotate_into(x, cos_h, sin_h, out, layout, False, compile)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:
        cos_h, sin_h = ctx.saved_tensors
        grad_x = torch.empty_like(grad)
        _rotate_into(grad, cos_h, sin_h, grad_x, ctx.layout, True, ctx.compile)
        return grad_x, None, None, None, None


def _no_autograd(x: Tensor, what: str) -> None:
    if torch.is_grad_enabled() and x.requires_grad:
        raise RuntimeError(f"{what} does not take part in autograd (x requires grad); "
                           "call fast_apply_rope(x, cos, sin) without out= under autograd")


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
    the rest pass unchanged). ``compile``: ``"auto"`` sends inputs of fewer than
    :data:`COMPILE_MIN_NUMEL` elements to the reference formula when no ``out`` is given (a few ops
    on a small tensor: as fast as any pass) and larger ones to the compiled pass where a compiler
    works (half pairs) or the eager pass; ``True`` always tries to compile, ``False`` stays eager. Differentiable in ``x`` (backward = inverse rotation) when ``out`` is None; tables
    that require grad take the reference path. Inside ``torch.compile`` the reference formula is
    returned for the outer compiler to fuse.
    """
    cos, sin = _check(x, cos, sin, layout)
    if torch.compiler.is_compiling() or (torch.is_grad_enabled() and (cos.requires_grad or sin.requires_grad)):
        if out is not None:
            return out.copy_(apply_rope(x, cos, sin, layout=layout))
        return apply_rope(x, cos, sin, layout=layout)
    if out is None and compile == "auto" and x.numel() < COMPILE_MIN_NUMEL:
        # small inputs (training-size heads): the few-op reference formula is as fast as any
        # eager pass and avoids the autograd.Function's overhead; the fast paths serve large ones
        return apply_rope(x, cos, sin, layout=layout)
    cos_h, sin_h = _half_tables(cos, sin, layout)
    if out is None:
        if torch.is_grad_enabled() and x.requires_grad:
            return RopeFunction.apply(x, cos_h, sin_h, layout, compile)
        return _rotate_into(x, cos_h, sin_h, torch.empty_like(x), layout, False, compile)
    _no_autograd(x, "fast_apply_rope(..., out=)")
    if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
        raise ValueError(f"out must match x (shape {tuple(x.shape)}, {x.dtype}, {x.device}); "
                         f"got shape {tuple(out.shape)}, {out.dtype}, {out.device}")
    if out.data_ptr() == x.data_ptr() and out.stride() == x.stride():
        return fast_apply_rope_(x, cos, sin, layout=layout, compile=compile)
    return _rotate_into(x, cos_h, sin_h, out, layout, False, compile)


def fast_apply_rope_(x: Tensor, cos: Tensor, sin: Tensor, *, layout: str = "half",
                     compile: CompileMode = "auto") -> Tensor:
    """In-place :func:`fast_apply_rope`: rotates ``x`` itself and returns it (no autograd)."""
    cos, sin = _check(x, cos, sin, layout)
    _no_autograd(x, "fast_apply_rope_")
    cos_h, sin_h = _half_tables(cos, sin, layout)
    if torch.compiler.is_compiling():
        return x.copy_(apply_rope(x, cos, sin, layout=layout))
    return _rotate_into(x, cos_h, sin_h, x, layout, False, compile)


def warmup(
    head_dim: int = 128,
    *,
    dtypes: Iterable[torch.dtype] = (torch.float32, torch.bfloat16),
    layouts: Iterable[str] = ROPE_LAYOUTS,
    backward: bool = True,
    device: torch.device | str = "cpu",
) -> float:
    """Compile the fast RoPE kernels ahead of time; returns the seconds it took.

    One compile per (dtype, layout, direction) serves every sequence length, so calling this once
    at start-up moves the first-call compile cost (~1 s each, ~10 s for the first in a cold process)
    out of the first training step.
    """
    from .rope import rope_cos_sin, rope_inv_freq

    start = time.perf_counter()
    inv_freq, _ = rope_inv_freq(head_dim)
    for layout in layouts:
        cos, sin = (t.to(device) for t in rope_cos_sin(16, inv_freq.to(device), layout=layout))
        cos_h, sin_h = _half_tables(cos, sin, layout)
        for dtype in dtypes:
            x = torch.zeros(1, 2, 16, head_dim, dtype=dtype, device=device)
            for inverse in (False, True) if backward else (False,):
                with contextlib.suppress(Exception):
                    _run_compiled(x, cos_h, sin_h, torch.empty_like(x), layout, inverse)
    return time.perf_counter() - start
