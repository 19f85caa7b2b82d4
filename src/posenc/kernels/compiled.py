"""RoPE as one ``torch.compile``d pass: one read of ``x`` and one write of the result.

Shape legend: ``s`` sequence, ``hd`` head width, ``r`` rotated width, ``n = r / 2`` pairs.

The formula is the reference's (:func:`posenc.functional.apply_rope`; Su et al. 2021, RoFormer,
section 3.4), written so that Inductor fuses it into one loop: for half pairs each head is viewed
as ``(2, n)`` and ``x * cos + x.flip(pair) * [-sin, +sin]`` is written straight into the output
from half-width tables (one value per pair); interleaved pairs flip each pair
(:func:`_rotated_interleaved`). The
``rotate_half``/``cat`` form of the reference does not fuse on the CPU (Inductor materialises the
concatenation); viewing pairs instead of concatenating them is what gpt-fast's
``apply_rotary_emb`` does (pytorch-labs/gpt-fast, ``model.py``). The sign pattern is an ``arange``
expression that Inductor inlines, so no ``[s, 2, n]`` table is built per call.

Tensors rotated by the same tables go through one loop (:func:`rotate_all_into`): a single ``x``
as :data:`GROUP` groups of heads, q and k together as half as many groups each, so that each row
of the tables is loaded once per group instead of once per head.

One compiled function per layout (in place: into a temporary, then copied back); each specialises
on dtype, rank, head width and the number of tensors like any compiled function, while every other
dimension is marked dynamic
(``torch._dynamo.maybe_mark_dynamic``, from PyTorch's dynamic-shapes guide) on views made for the
call: the caller's tensors carry no mark, and one compile serves every length, batch and head
count. Past torch's recompile limit a variant runs uncompiled (torch logs it), still exact.
The inverse rotation passes ``-sin``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["rotate_into", "rotate_all_into", "available", "error", "GROUP"]

log = logging.getLogger(__name__)


def _rotated_half(x: Tensor, cos_h: Tensor, sin_h: Tensor) -> Tensor:
    """Half pairs ``(i, i + n)``: ``[..., s, 2, n]`` holding ``x0 cos - x1 sin`` and ``x1 cos + x0 sin``,
    from half-width tables ``[..., s, n]``, in the promoted dtype (float32 for 16-bit ``x``)."""
    n = cos_h.shape[-1]
    xr = x[..., : 2 * n].unflatten(-1, (2, n))  # [..., s, 2, n]
    sign = (torch.arange(2, device=x.device, dtype=sin_h.dtype) * 2 - 1).unsqueeze(-1)  # [2, 1]: -1, +1
    return xr * cos_h.unsqueeze(-2) + xr.flip(-2) * (sin_h.unsqueeze(-2) * sign)


def _rotated_interleaved(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Interleaved pairs ``(2i, 2i + 1)``: ``[..., s, r]`` from full-width tables. Each feature's
    partner is its pair flipped with the first member negated (``rotate_every_two``: ``-x1, x0``),
    the sign an ``arange`` expression that Inductor inlines. Of the forms tried this vectorises
    best (shifted views of a zero-padded row come with masks computed per element; see
    docs/performance.md)."""
    r = cos.shape[-1]
    xr = x[..., :r]
    sign = torch.arange(2, device=x.device, dtype=sin.dtype) * 2 - 1  # [2]: -1, +1
    partner = (xr.unflatten(-1, (r // 2, 2)).flip(-1) * sign).flatten(-2)  # rotate_every_two(x)
    return xr * cos + partner * sin


def _into(x: Tensor, cos: Tensor, sin: Tensor, out: Tensor, layout: str) -> None:
    if layout == "half":
        n = cos.shape[-1]
        out[..., : 2 * n].unflatten(-1, (2, n)).copy_(_rotated_half(x, cos, sin))
        r = 2 * n
    else:
        r = cos.shape[-1]
        out[..., :r].copy_(_rotated_interleaved(x, cos, sin))
    if r < x.shape[-1]:
        out[..., r:].copy_(x[..., r:])


def _same_shapes(ts: tuple[Tensor, ...]) -> None:
    """Refuse tensors of different shapes. Traced, the comparison also tells the compiler that the
    sizes are equal (each dynamic dim is otherwise a symbol of its own), so that it writes every
    tensor in one loop."""
    if any(t.shape != ts[0].shape for t in ts):
        raise ValueError(f"the tensors rotated together must have one shape, got {[tuple(t.shape) for t in ts]}")


# One top-level function per layout: Dynamo keeps its compiled graphs (and its recompile limit)
# per code object, so the layouts never re-specialise one another. Each takes a tuple of tensors
# of one shape rotated by the same tables: Inductor writes them all in one loop, where each row of
# the tables is loaded once for every tensor of the group (a new tuple length is a new specialisation).
def _into_half(xs: tuple[Tensor, ...], cos: Tensor, sin: Tensor, outs: tuple[Tensor, ...]) -> None:
    _same_shapes(xs + outs)
    for x, out in zip(xs, outs):
        _into(x, cos, sin, out, "half")


def _into_interleaved(xs: tuple[Tensor, ...], cos: Tensor, sin: Tensor, outs: tuple[Tensor, ...]) -> None:
    _same_shapes(xs + outs)
    for x, out in zip(xs, outs):
        _into(x, cos, sin, out, "interleaved")


_VARIANTS = {"half": _into_half, "interleaved": _into_interleaved}

#: How many tensors one compiled loop rotates together when the tables are shared by every leading
#: dim: a single ``x`` is split into this many groups of heads, q and k into half as many each.
#: Rows of the tables are then loaded once per group rather than once per head row: with 128-wide
#: heads a float32 half-width table row is as many bytes as the float32 row of ``x`` it rotates,
#: twice the bfloat16 one.
GROUP = 8


@functools.cache
def _compiled(layout: str):
    """The compiled pass for one layout, built on first use. ``dynamic=False``: only the dimensions
    marked dynamic are symbolic (the feature dimension stays static, so the loop over it vectorises)."""
    return torch.compile(_VARIANTS[layout], dynamic=False)


_error: list[str] = []  # why compiling failed in this process, if it did


def available() -> bool:
    """False once compiling has failed in this process (no C++ compiler, say)."""
    return not _error


def error() -> str | None:
    """Why compiling failed in this process, or None."""
    return _error[0] if _error else None


def _dynamic(t: Tensor, dims: range) -> Tensor:
    """A view of ``t`` (a new object: the caller's tensor carries no mark) with ``dims`` marked
    dynamic, so that new sizes there reuse the compiled kernel."""
    v = t.view(t.shape)
    for d in dims:
        torch._dynamo.maybe_mark_dynamic(v, d)
    return v


def _views(x: Tensor, cos: Tensor, sin: Tensor, out: Tensor) -> tuple[Tensor, ...]:
    """``x``, the tables and ``out`` as the compiled pass takes them: with tables shared by every
    leading dim, ``x``/``out`` ``[L, s, hd]`` (leading dims merged where their strides allow) and
    tables ``[s, n]``. Views only: ``out`` is written through."""
    if all(n == 1 for n in cos.shape[:-2]):
        cos, sin = cos.reshape(cos.shape[-2:]), sin.reshape(sin.shape[-2:])  # [s, n], views
        try:
            x, out = x.view(-1, *x.shape[-2:]), out.view(-1, *out.shape[-2:])  # [L, s, hd]
        except RuntimeError:  # leading dims whose strides do not merge (q sliced out of a qkv projection)
            pass
    return x, cos, sin, out


def _groups(ts: list[Tensor], shared: bool) -> list[Tensor]:
    """``ts`` (one or two tensors of one shape) split along their first dim into :data:`GROUP`
    tensors in all, where the tables are ``shared`` by that dim and it divides evenly; else as given."""
    parts = GROUP // len(ts)
    if not shared or ts[0].dim() < 3 or ts[0].shape[0] % parts:
        return ts
    return [g for t in ts for g in t.chunk(parts)]


def rotate_all_into(
    xs: Sequence[Tensor], cos: Tensor, sin: Tensor, outs: Sequence[Tensor], layout: str, inverse: bool
) -> bool:
    """Write the rotation of each of ``xs`` (one or two tensors of one shape, dtype and strides,
    such as q and k) into ``outs`` (``x`` itself for in place) in one compiled pass; False, with
    nothing written, where compiling fails (logged once; the caller then takes the eager backend)."""
    if _error:
        return False
    n = cos.shape[-1] // 2
    if layout == "half":  # one value per pair: the tables' first half
        cos, sin = cos[..., :n], sin[..., :n]
    if inverse:
        sin = -sin
    # In place, the pass reads partners another element of the loop has already written: compiled,
    # that is a temporary and a copy inside the kernel anyway, slower than these two passes.
    targets = [torch.empty_like(x) if out is x else out for x, out in zip(xs, outs)]
    views = [_views(x, cos, sin, t) for x, t in zip(xs, targets)]
    cos, sin = views[0][1], views[0][2]
    shared = cos.dim() == 2  # [s, n]: one table for every leading dim
    xv, tv = _groups([v[0] for v in views], shared), _groups([v[3] for v in views], shared)
    lead, tables = range(xv[0].dim() - 1), range(cos.dim() - 1)  # every dim but the features: dynamic
    try:
        with torch.no_grad():  # one grad mode for every call: autograd's forward runs without grad
            _compiled(layout)(
                tuple(_dynamic(x, lead) for x in xv),
                _dynamic(cos, tables),
                _dynamic(sin, tables),
                tuple(_dynamic(t, lead) for t in tv),
            )
    except Exception as err:  # compiling needs a C++ compiler (CPU) or Triton (CUDA); any failure turns it off
        _error.append(f"{type(err).__name__}: {err}")
        log.warning("posenc: torch.compile failed, RoPE uses the eager backend from now on (%s)", _error[0])
        return False
    for out, target in zip(outs, targets):
        if target is not out:
            out.copy_(target)
    return True


def rotate_into(x: Tensor, cos: Tensor, sin: Tensor, out: Tensor, layout: str, inverse: bool) -> bool:
    """:func:`rotate_all_into` for one tensor."""
    return rotate_all_into((x,), cos, sin, (out,), layout, inverse)
