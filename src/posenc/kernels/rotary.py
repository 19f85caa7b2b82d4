"""RoPE's one dispatch: which backend rotates an input, and the autograd Function around it.

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``r`` rotated width
(``cos.shape[-1]``), ``total`` tokens of packed documents; tables ``[s, r]``, ``[b, s, r]`` or
``[b, h, s, r]`` as :func:`posenc.functional.apply_rope` takes them (``[s, r]``, ``[b, s, r]`` or
``[total, r]`` for ``[b, s, h, hd]`` and ``[total, h, hd]`` inputs with ``seq_dim=-3``).

:func:`backend_for` is the whole choice (see the table in :mod:`posenc.kernels`). Every backend
computes the reference formula (Su et al. 2021, RoFormer, section 3.4), and
``tests/kernels/test_rope_backends.py`` holds each to it.

The backward of a rotation is the rotation by the negative angles (its transpose): the gradient
is rotated by the same dispatch, so training needs no saved activations, the backward is itself
differentiable (double backward, gradient penalties) and forward-mode AD rotates the tangent.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import torch
from torch import Tensor

from ..functional._checks import check_bool, check_choice, check_meta_mix, check_no_overlap, plain
from ..functional.packed import rotary_emb_tables
from ..functional.rope import (
    ROPE_LAYOUTS,
    _align_tables,
    apply_rope,
    prepare_tables,
    resolve_layout,
    rope_cos_sin,
    rope_inv_freq,
)
from . import compiled, eager, reference, triton

__all__ = [
    "rope",
    "rope_",
    "rope_pair",
    "backend_for",
    "warmup",
    "fast_apply_rope",
    "fast_apply_rope_",
    "apply_rotary_emb",
    "BACKENDS",
    "COMPILE_MIN_NUMEL",
]

BACKENDS = ("reference", "eager", "complex", "compiled", "triton")

#: Inputs of at least this many elements (4 MiB of float32) are compiled on the CPU; below it the
#: first compile of a new dtype or layout (about a second) outweighs what it saves.
COMPILE_MIN_NUMEL = 1 << 20


def backend_for(x: Tensor, cos: Tensor, layout: str) -> str:
    """The backend that rotates ``x`` with the (aligned) table ``cos``: one of :data:`BACKENDS`."""
    check_choice("layout", layout, ROPE_LAYOUTS)
    for name, t in (("x", x), ("cos", cos)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if cos.requires_grad or not (plain(x) and plain(cos)):  # compiling, torch.func, or tables to differentiate
        return "reference"
    if triton.serves(x, cos):
        return "triton"
    if x.numel() >= COMPILE_MIN_NUMEL:
        if layout == "interleaved" and eager.complex_serves(x, cos):
            return "complex"  # already one pass, without a compile
        if compiled.available():
            return "compiled"
    return "eager"


def _run(
    backend: str, x: Tensor, cos: Tensor, sin: Tensor, out: Tensor, layout: str, inverse: bool, start: int = 0
) -> None:
    """Rotate ``x`` into ``out`` (``x`` itself for in place) with ``backend``; a compiled, Triton or
    complex pass that cannot take this input leaves the work to the eager backend. ``start``: the
    first rotated feature (the backends rotate the leading features of the views from there)."""
    if start:
        if out is not x:
            out[..., :start].copy_(x[..., :start])  # the features before the rotated slice
        in_place = out is x
        x = x[..., start:]  # a view: the backends write through it
        out = x if in_place else out[..., start:]  # in place stays one object (the backends test `out is x`)
    if backend == "reference":
        reference.rotate_into(x, cos, sin, out, layout, inverse)
    elif not (
        backend == "compiled"
        and compiled.rotate_into(x, cos, sin, out, layout, inverse)
        or backend == "triton"
        and triton.rotate_into(x, cos, sin, out, layout, inverse)
        or backend == "complex"
        and layout == "interleaved"
        and eager.complex_into(x, cos, sin, out, inverse)
    ):
        eager.rotate_into(x, cos, sin, out, layout, inverse)


def _pairs(q: Tensor, k: Tensor, backend: str) -> bool:
    """Whether q and k can share one pass (the compiled backend) or one set of complex angles (the
    complex backend): one shape, dtype and memory layout."""
    same = q.shape == k.shape and q.dtype == k.dtype and q.stride() == k.stride()
    return backend in ("compiled", "complex") and same


def _run_pair(
    backend: str,
    q: Tensor,
    k: Tensor,
    cos: Tensor,
    sin: Tensor,
    outs: tuple[Tensor, Tensor],
    layout: str,
    inverse: bool,
    start: int = 0,
) -> None:
    """:func:`_run` for q and k rotated by the same tables: one compiled pass over both, or the
    complex angles built once for both, where :func:`_pairs` allows; else one rotation each."""
    if not _pairs(q, k, backend):
        for x, out in zip((q, k), outs):
            _run(backend, x, cos, sin, out, layout, inverse, start)
        return
    xs = (q, k)
    if start:
        for x, out in zip(xs, outs):
            out[..., :start].copy_(x[..., :start])  # the features before the rotated slice
        xs, outs = tuple(x[..., start:] for x in xs), tuple(out[..., start:] for out in outs)
    if backend == "complex" and layout == "interleaved":
        angle = eager.complex_angle(cos, sin, inverse)  # built once for both
        for x, out in zip(xs, outs):
            if not eager.complex_into(x, cos, sin, out, inverse, angle):
                eager.rotate_into(x, cos, sin, out, layout, inverse)
        return
    if backend == "complex" or not compiled.rotate_all_into(xs, cos, sin, outs, layout, inverse):
        for x, out in zip(xs, outs):
            eager.rotate_into(x, cos, sin, out, layout, inverse)


class RopeFunction(torch.autograd.Function):
    """The rotation of ``x`` by fixed tables, differentiable in ``x``: backward and forward mode
    rotate the gradient or tangent by the same tables (backward by the negative angles)."""

    @staticmethod
    def forward(
        ctx, x: Tensor, cos: Tensor, sin: Tensor, layout: str, inverse: bool, backend: str, start: int = 0
    ) -> Tensor:
        # forward(ctx, ...) rather than setup_context: apply() then binds no signature per call
        # (~50 us); torch.func transforms never reach this Function (the dispatch gives them the reference)
        ctx.save_for_backward(cos, sin)
        ctx.save_for_forward(cos, sin)
        ctx.layout, ctx.inverse, ctx.start = layout, inverse, start
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
        _run(backend, x, cos, sin, out, layout, inverse, start)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:
        cos, sin = ctx.saved_tensors  # aligned to x's rank: they align to the gradient unchanged
        grad_x = rope(grad, cos, sin, layout=ctx.layout, inverse=not ctx.inverse, rotary_start=ctx.start)
        return grad_x, None, None, None, None, None, None

    @staticmethod
    def jvp(ctx, x_t: Tensor, *_: object) -> Tensor:
        cos, sin = ctx.saved_tensors
        return rope(x_t, cos, sin, layout=ctx.layout, inverse=ctx.inverse, rotary_start=ctx.start)


class RopePairFunction(torch.autograd.Function):
    """:class:`RopeFunction` for q and k rotated by the same tables, in one pass where the backend
    allows (:func:`_run_pair`); backward and forward mode rotate both gradients or tangents."""

    @staticmethod
    def forward(
        ctx, q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, layout: str, inverse: bool, backend: str, start: int
    ):
        ctx.save_for_backward(cos, sin)
        ctx.save_for_forward(cos, sin)
        ctx.set_materialize_grads(False)  # an output that takes no part in the loss: None, not zeros to rotate
        ctx.layout, ctx.inverse, ctx.start = layout, inverse, start
        outs = tuple(torch.empty_like(x, memory_format=torch.contiguous_format) for x in (q, k))
        _run_pair(backend, q, k, cos, sin, outs, layout, inverse, start)
        return outs

    @staticmethod
    def backward(ctx, grad_q: Tensor | None, grad_k: Tensor | None) -> tuple[Tensor | None, ...]:
        cos, sin = ctx.saved_tensors
        options = {"layout": ctx.layout, "inverse": not ctx.inverse, "rotary_start": ctx.start}
        if grad_q is not None and grad_k is not None:
            grad_q, grad_k = rope_pair(grad_q, grad_k, cos, sin, **options)
        else:
            grad_q, grad_k = (None if g is None else rope(g, cos, sin, **options) for g in (grad_q, grad_k))
        return grad_q, grad_k, None, None, None, None, None, None

    @staticmethod
    def jvp(ctx, q_t: Tensor | None, k_t: Tensor | None, *_: object) -> tuple[Tensor | None, Tensor | None]:
        cos, sin = ctx.saved_tensors
        options = {"layout": ctx.layout, "inverse": ctx.inverse, "rotary_start": ctx.start}
        return tuple(None if t is None else rope(t, cos, sin, **options) for t in (q_t, k_t))


def _check(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    layout: str,
    backend: str | None,
    seq_dim: int = -2,
    tables: str = "full",
    start: int = 0,
    inverse: bool = False,
) -> tuple[Tensor, Tensor]:
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_bool("inverse", inverse)
    if backend is not None:
        check_choice("backend", backend, BACKENDS)
    if not isinstance(x, Tensor) or not x.is_floating_point():
        what = f"dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"x must be a floating-point tensor [..., s, hd], got {what}")
    if tables != "full" or start:
        cos, sin = prepare_tables(x, cos, sin, layout, tables, start)
    return _align_tables(x, cos, sin, seq_dim)


def _writable(t: Tensor, what: str) -> None:
    """Refuse a target that autograd tracks or whose elements share memory (an ``expand``ed view)."""
    if t.requires_grad and torch.is_grad_enabled():
        raise ValueError(
            f"{what} takes no part in autograd (as torch's own out= and in-place ops); call "
            "posenc.kernels.rope(x, cos, sin) without out= for a differentiable rotation"
        )
    if any(st == 0 and n > 1 for n, st in zip(t.shape, t.stride())):
        raise ValueError(
            f"{what}: the tensor written to has elements that share memory (a stride of 0, from "
            f"expand or broadcasting: shape {tuple(t.shape)}, strides {t.stride()}); write into a "
            "tensor of its own (.contiguous())"
        )


def rope(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    layout: str | None = None,
    interleaved: bool | None = None,
    is_neox_style: bool | None = None,
    inverse: bool = False,
    rotary_start: int = 0,
    seq_dim: int = -2,
    tables: str = "full",
    out: Tensor | None = None,
    backend: str | None = None,
) -> Tensor:
    """:func:`posenc.functional.apply_rope` through the fastest backend that serves ``x``.

    Same arguments and result as the reference (``r`` features from ``rotary_start`` rotate, the
    rest pass unchanged; the pair layout by any of its names; ``[b, s, h, hd]`` or packed
    ``[total, h, hd]`` inputs with ``seq_dim=-3``, rotated where they lie; half-width tables with
    ``tables="half"``); ``inverse`` rotates by the negative angles. ``out=`` writes into a
    preallocated tensor of ``x``'s shape, dtype and device (``x`` itself: in place), outside
    autograd; an ``out`` that shares some memory with ``x`` (without being ``x``), ``cos`` or ``sin`` is
    refused, as torch's own ``out=`` ops refuse it. ``backend`` forces one of :data:`BACKENDS` (tests and
    benchmarks); by default :func:`backend_for` picks.
    """
    layout = resolve_layout(layout, interleaved, is_neox_style)
    tables_given = {"cos": cos, "sin": sin}
    cos, sin = _check(x, cos, sin, layout, backend, seq_dim, tables, rotary_start, inverse)
    name = backend or backend_for(x, cos, layout)
    if out is None:
        if name == "reference":
            # the formula itself (tables aligned to x already: aligning them again changes nothing)
            return apply_rope(x, cos, sin, layout=layout, inverse=inverse, rotary_start=rotary_start)
        return RopeFunction.apply(x, cos, sin, layout, inverse, name, rotary_start)
    if not isinstance(out, Tensor) or out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
        got = f"shape {tuple(out.shape)}, {out.dtype}, {out.device}" if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(f"out must match x (shape {tuple(x.shape)}, {x.dtype}, {x.device}); got {got}")
    if out.data_ptr() == x.data_ptr() and out.stride() == x.stride():
        return rope_(x, cos, sin, layout=layout, inverse=inverse, rotary_start=rotary_start, backend=backend)
    _writable(out, "rope(..., out=)")
    check_no_overlap("out", out, {"x": x, **tables_given}, "rope(..., out=) (out may be x itself, for in place)")
    _run(name, x, cos, sin, out, layout, inverse, rotary_start)
    return out


def rope_pair(
    q: Tensor,
    k: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    layout: str | None = None,
    inverse: bool = False,
    rotary_start: int = 0,
) -> tuple[Tensor, Tensor]:
    """:func:`rope` of q and k by the same tables (self-attention without a cache), as new tensors:
    one compiled pass over both where the dispatch picks the compiled backend for q and they share
    shape, dtype and memory layout (each row of the tables then serves both), else one :func:`rope`
    each. Differentiable in q and k, as :func:`rope`."""
    layout = resolve_layout(layout, None, None)
    check_meta_mix(q=q, k=k, cos=cos, sin=sin)
    checked = {}
    for which, t in (("q", q), ("k", k)):  # each as rope checks its x, the message naming q or k
        try:
            checked[which] = _check(t, cos, sin, layout, None, start=rotary_start, inverse=inverse)
        except (TypeError, ValueError) as err:
            raise type(err)(f"rope_pair's {which} (rope's x): {err}") from None
    cos_q, sin_q = checked["q"]
    name = backend_for(q, cos_q, layout)
    if not _pairs(q, k, name) or cos_q.requires_grad:
        options = {"layout": layout, "inverse": inverse, "rotary_start": rotary_start}
        return rope(q, cos, sin, **options), rope(k, cos, sin, **options)
    return RopePairFunction.apply(q, k, cos_q, sin_q, layout, inverse, name, rotary_start)


def rope_(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    layout: str | None = None,
    interleaved: bool | None = None,
    is_neox_style: bool | None = None,
    inverse: bool = False,
    rotary_start: int = 0,
    seq_dim: int = -2,
    tables: str = "full",
    backend: str | None = None,
) -> Tensor:
    """In-place :func:`rope` (same arguments): rotates ``x`` itself and returns it (outside autograd)."""
    layout = resolve_layout(layout, interleaved, is_neox_style)
    check_no_overlap("x", x, {"cos": cos, "sin": sin}, "rope_ (in place)")
    cos, sin = _check(x, cos, sin, layout, backend, seq_dim, tables, rotary_start, inverse)
    _writable(x, "rope_ (in place)")
    _run(backend or backend_for(x, cos, layout), x, cos, sin, x, layout, inverse, rotary_start)
    return x


def apply_rotary_emb(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    interleaved: bool = False,
    inplace: bool = False,
    seqlen_offsets: int | Tensor = 0,
    cu_seqlens: Tensor | None = None,
    max_seqlen: int | None = None,
) -> Tensor:
    """flash-attention's ``apply_rotary_emb`` (``x [b, s, h, hd]`` or packed ``[total, h, hd]`` with
    ``cu_seqlens``, half-width tables ``(seqlen_ro, r/2)``) through :func:`rope`'s dispatch: the
    tables' rows gathered once for every token, then one pass over ``x`` where it lies
    (``seq_dim=-3``). Same arguments, result and errors as
    :func:`posenc.functional.apply_rotary_emb`; differentiable, in place too (as flash-attention's)."""
    check_bool("inplace", inplace)
    cos_full, sin_full, layout = rotary_emb_tables(x, cos, sin, interleaved, seqlen_offsets, cu_seqlens, max_seqlen)
    if inplace and torch.is_grad_enabled() and x.requires_grad:  # flash-attention's in-place mode is differentiable
        return x.copy_(rope(x, cos_full, sin_full, layout=layout, seq_dim=-3))
    if inplace:
        return rope_(x, cos_full, sin_full, layout=layout, seq_dim=-3)
    return rope(x, cos_full, sin_full, layout=layout, seq_dim=-3)


def warmup(
    head_dim: int = 128,
    *,
    num_heads: int = 32,
    dtypes: Iterable[torch.dtype] = (torch.float32, torch.bfloat16),
    layouts: Iterable[str] = ROPE_LAYOUTS,
    device: torch.device | str = "cpu",
) -> float:
    """Compile the compiled backend's passes ahead of time (one per layout, dtype, out= or in
    place; each serves every length); returns the seconds it took. Moves the first call's compile
    (about a second each, several more for the first in a process) out of a timed loop."""
    start = time.perf_counter()
    inv_freq = rope_inv_freq(head_dim)[0].to(device)
    for layout in layouts:
        tables = rope_cos_sin(16, inv_freq, layout=layout)  # [16, hd] each
        for dtype in dtypes:
            x = torch.zeros(1, num_heads, 16, head_dim, dtype=dtype, device=device)  # [b, h, s, hd]
            _run("compiled", x, *tables, torch.empty_like(x), layout, False)
            _run("compiled", x, *tables, x, layout, False)
    return time.perf_counter() - start


def _compile_backend(compile: bool | str) -> str | None:
    if not (isinstance(compile, bool) or compile == "auto"):
        raise ValueError(f"compile must be 'auto', True or False, got {compile!r}")
    return None if compile == "auto" else "compiled" if compile else "eager"


def fast_apply_rope(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    layout: str = "half",
    out: Tensor | None = None,
    compile: bool | str = "auto",
) -> Tensor:
    """The name of earlier releases for :func:`rope` (``compile=True``: the compiled backend,
    ``False``: the eager one, ``"auto"``: :func:`backend_for`)."""
    backend = _compile_backend(compile)
    if backend is not None and (cos.requires_grad or sin.requires_grad or not (plain(x) and plain(cos))):
        backend = None  # what only the reference can serve
    return rope(x, cos, sin, layout=layout, out=out, backend=backend)


def fast_apply_rope_(
    x: Tensor, cos: Tensor, sin: Tensor, *, layout: str = "half", compile: bool | str = "auto"
) -> Tensor:
    """The name of earlier releases for :func:`rope_` (``compile`` as in :func:`fast_apply_rope`)."""
    backend = _compile_backend(compile)
    return rope_(x, cos, sin, layout=layout, backend=None if backend and not plain(x) else backend)
