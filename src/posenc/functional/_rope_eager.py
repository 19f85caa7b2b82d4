"""The eager (uncompiled) fast RoPE of :mod:`posenc.functional.fast_rope`: no compiler needed.

Shape legend: ``s`` sequence, ``hd`` head width, ``r`` rotated width, ``n = r / 2`` pairs, ``...``
the leading (batch, head) dims.

Same formula as :func:`posenc.functional.apply_rope` (Su et al. 2021, section 3.4). For float32 or
float64 interleaved pairs, a complex multiply into the output, as Meta's Llama ``apply_rotary_emb``
(meta-llama/llama ``model.py``); otherwise cache-sized chunks of the sequence are copied into a
reused scratch in the promoted dtype of ``x`` and the tables, rotated there and stored once.
"""

from __future__ import annotations

import itertools
import threading

import torch
from torch import Tensor

#: Bytes of float32 work per chunk of the eager fallback: large enough that the per-op overhead
#: of the ATen calls per chunk stays small, small enough to stay in the last-level cache. q/k
#: ``[1, 32, 2048, 128]``, one thread, x the copy floor: bf16 interleaved 3.6x (1 MiB) -> 2.5x
#: (4 MiB), bf16 half pairs 4.6x -> 3.9x, fp32 half pairs ~2.8x either way.
_EAGER_CHUNK_BYTES = 4 << 20

_table_cache: dict[tuple, tuple[Tensor, Tensor, Tensor]] = {}
_scratch: dict[tuple, Tensor] = {}  # reused work buffers, one per kind of call


def _cached_table(kind: str, cos_h: Tensor, sin_h: Tensor, inverse: bool, dtype: torch.dtype | None = None) -> Tensor:
    """A derived table (see :func:`_build_table`: ``cos + i sin``, cos and sin rows side by side,
    ``[cos, cos]``, even/odd columns, a contiguous sin); ``sin`` negated for the inverse rotation
    where it enters; built from the tables cast to ``dtype`` (default: theirs); cached while the
    same tables are alive.

    The cache keeps a reference to the tables, so their memory cannot be reused by another tensor
    while an entry exists; the version counters catch in-place edits.
    """
    dtype = cos_h.dtype if dtype is None else dtype
    if cos_h.is_inference() or sin_h.is_inference():  # no version counter to key on: not cached
        return _build_table(kind, cos_h.to(dtype), sin_h.to(dtype), inverse)
    key = (kind, cos_h.data_ptr(), sin_h.data_ptr(), tuple(cos_h.shape), cos_h.stride(), sin_h.stride(),
           cos_h._version, sin_h._version, cos_h.device, cos_h.dtype, dtype, inverse)
    hit = _table_cache.get(key)
    if hit is not None:
        return hit[2]
    table = _build_table(kind, cos_h.to(dtype), sin_h.to(dtype), inverse)
    if len(_table_cache) >= 8:
        _table_cache.pop(next(iter(_table_cache)))
    _table_cache[key] = (cos_h, sin_h, table)
    return table


def _build_table(kind: str, cos_h: Tensor, sin_h: Tensor, inverse: bool) -> Tensor:
    if kind == "complex":
        table = torch.complex(cos_h, -sin_h if inverse else sin_h)  # [..., s, n]
    elif kind == "cc":
        table = torch.cat((cos_h, cos_h), dim=-1)  # [..., s, 2 n]
    elif kind == "evenodd":  # [..., s, 4, n / 2]: cos and sin of the even, then the odd features
        table = torch.stack((cos_h[..., 0::2], cos_h[..., 1::2], sin_h[..., 0::2], sin_h[..., 1::2]), dim=-2)
    elif kind == "sin":
        table = sin_h.contiguous()  # [..., s, n]: unit row stride (a view of the full table has 2 n)
    elif kind == "paired":
        table = torch.stack((cos_h, -sin_h if inverse else sin_h), dim=-2)  # [..., s, 2, n], contiguous
    else:
        raise ValueError(f"unknown table kind {kind!r}; expected 'complex', 'cc', 'paired', 'evenodd' or 'sin'")
    return table


def _complexable(x: Tensor, out: Tensor, cos_h: Tensor, layout: str) -> bool:
    if layout != "interleaved" or x.dtype not in (torch.float32, torch.float64) or cos_h.dtype != x.dtype:
        return False
    r = 2 * cos_h.shape[-1]
    for t in (x, out):
        if t.stride(-1) != 1 or any(st % 2 for st in t.stride()[:-1]) or t.storage_offset() % 2:
            return False
    return r <= x.shape[-1]


def _eager(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool) -> None:
    n = cos_h.shape[-1]
    r = 2 * n
    if _complexable(x, out, cos_h, layout):
        xc = torch.view_as_complex(x[..., :r].unflatten(-1, (n, 2)))  # [..., s, hd] -> [..., s, n] complex
        oc = torch.view_as_complex(out[..., :r].unflatten(-1, (n, 2)))  # [..., s, n] complex
        if out.data_ptr() == x.data_ptr():
            xc.mul_(_cached_table("complex", cos_h, sin_h, inverse))
        else:
            torch.mul(xc, _cached_table("complex", cos_h, sin_h, inverse), out=oc)
    elif x.device.type != "cpu" or (layout == "half" and x.numel() * 4 <= _EAGER_CHUNK_BYTES):
        # accelerators; on the CPU half pairs that fit the cache whole (small heads, training sizes:
        # a head-by-head step per head would cost more in calls than it saves in traffic)
        _eager_whole(x, cos_h, sin_h, out, layout, inverse)
    elif layout != "half" or not _eager_half(x, cos_h, sin_h, out, inverse):
        _eager_chunked(x, cos_h, sin_h, out, layout, inverse)
    if r < x.shape[-1] and out.data_ptr() != x.data_ptr():
        out[..., r:].copy_(x[..., r:])


#: Rows per step of :func:`_eager_half`: about 1 MiB of float32 per head (the per-core L2 of the
#: machine this was tuned on), so the three passes over a step hit the cache. q/k
#: ``[1, 32, L, 128]`` float32 into ``out=``, one thread, x the copy floor at L = 2048 / 8192
#: (paired, one process): steps of 256 KiB 2.29 / 2.39, 512 KiB 2.28 / 2.32, 1 MiB 2.19 / 2.25,
#: 2 MiB 2.19 / 2.29, 4 MiB - / 2.52; position blocks across all heads 2.4-2.7 and
#: copy-in/copy-out chunks 2.9 (earlier sessions). With the contiguous sin table: 512 KiB
#: 2.13 / 2.16-2.39, 1 MiB 1.94-2.05 / 2.09-2.28, 2 MiB 2.0-2.1 / 2.11-2.32; groups of 2-8 heads
#: per op (one table block over several heads) 2.11-2.36, no better than one head.
_EAGER_HALF_STEP_BYTES = 1 << 20


def _eager_half(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, inverse: bool) -> bool:
    """Half pairs in cache-sized steps of rows of one head: three ATen passes per step,
    ``out = x * [cos, cos]``, ``out[:n] -= x[n:] * sin``, ``out[n:] += x[:n] * sin``, straight into
    ``out`` when it has the compute dtype (the promotion of ``x``'s and the tables'; bfloat16 is
    widened into a float32 scratch, rotated into another and rounded once on the way out). In
    place, each step's input is copied to a scratch first. False (nothing written) when the views
    this needs do not exist.

    Blocks of rows are the outer loop and heads the inner one, so one block of the tables stays
    in the cache for every head; each block's per-head views come from one ``unbind`` per operand
    (slicing views one by one cost as much as the ops at these sizes: ~1.5 us each)."""
    n, s, hd = cos_h.shape[-1], x.shape[-2], x.shape[-1]
    if s == 0 or x.numel() == 0:
        return True
    r = 2 * n
    wide = torch.promote_types(x.dtype, cos_h.dtype)
    lead = x.shape[:-2]
    if cos_h.dim() > 2 and (cos_h.dim() > x.dim() or any(
            t not in (1, d) for t, d in zip(reversed(cos_h.shape[:-2]), reversed(lead)))):
        return False
    try:
        x3, o3 = x.view(-1, s, hd)[..., :r], out.view(-1, s, hd)[..., :r]  # [heads, s, r]; no copies
    except RuntimeError:
        return False
    inplace = out.data_ptr() == x.data_ptr()
    direct = out.dtype == wide  # write into out; else compute in a float32 scratch, round once
    rows = max(1, min(s, _EAGER_HALF_STEP_BYTES // max(1, r * 4)))
    if inplace or not direct:
        key = ("half", threading.get_ident(), rows, r, wide, x.device, torch.is_inference_mode_enabled())
        bufs = _scratch.get(key)
        if bufs is None:
            _scratch.clear()
            bufs = _scratch[key] = torch.empty(2, rows, r, dtype=wide, device=x.device)  # [2, rows, r]
    cc = _cached_table("cc", cos_h, sin_h, False)  # [..., s, r]: cos beside itself
    sin_h = _cached_table("sin", cos_h, sin_h, False)  # [..., s, n]: half-width ops over it run ~15% faster
    sign = -1.0 if inverse else 1.0
    heads = x3.shape[0]
    per_head = None
    if cos_h.dim() > 2:  # each head's tables: the table's leading dims broadcast against x's (1: shared)
        cc, sn = cc.expand(*lead, *cc.shape[-2:]), sin_h.expand(*lead, *sin_h.shape[-2:])  # views, no copies
        per_head = [(cc[i], sn[i]) for i in itertools.product(*map(range, lead))]  # x.view(-1, s, hd)'s order
    full_s = cos_h.shape[-2] == s
    for a in range(0, s, rows):
        b = min(s, a + rows)
        if per_head is None:
            tables = [(cc[a:b], sin_h[a:b]) if full_s else (cc, sin_h)] * heads
        else:
            tables = [(c[a:b], t[a:b]) if full_s else (c, t) for c, t in per_head]
        xb, ob = x3[:, a:b], o3[:, a:b]  # [heads, rows, r]
        xs, os_ = xb.unbind(0), ob.unbind(0)
        if inplace or not direct:  # the pairs read each other / mixed-dtype ATen ops are scalar loops
            src = bufs[0, : b - a]  # [rows, r]
            x1s, x2s = [src[:, :n]] * heads, [src[:, n:]] * heads
        else:
            x1s, x2s = xb[..., :n].unbind(0), xb[..., n:].unbind(0)
        if direct:
            o1s, o2s = ob[..., :n].unbind(0), ob[..., n:].unbind(0)
        else:
            dst = bufs[1, : b - a]
            o1s, o2s = [dst[:, :n]] * heads, [dst[:, n:]] * heads
        for i, (ct, st) in enumerate(tables):
            xi = xs[i] if direct and not inplace else src.copy_(xs[i])
            torch.mul(xi, ct, out=os_[i] if direct else dst)
            o1s[i].addcmul_(x2s[i], st, value=-sign)
            o2s[i].addcmul_(x1s[i], st, value=sign)
            if not direct:
                os_[i].copy_(dst)
    return True


def _eager_whole(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool) -> None:
    """The whole tensor in three or four ops, ``dst = x * cos`` then one ``addcmul`` per half of
    the pairs: on accelerators (a GPU gains nothing from cache-sized steps and pays a launch per
    kernel: the CPU's head-by-head steps cost 200-300x the copy floor on an H100), and on the CPU
    for half pairs that fit the cache whole. The rotation is computed in the promoted dtype (float32 for 16-bit ``x``) in a
    temporary from the caching allocator and rounded once into ``out``, as the reference does;
    in place, the input is copied first (the pairs read each other)."""
    n = cos_h.shape[-1]
    r = 2 * n
    wide = torch.promote_types(x.dtype, cos_h.dtype)
    inplace = out.data_ptr() == x.data_ptr()
    src = x[..., :r]
    if inplace or src.dtype != wide:
        src = src.to(wide, copy=True)
    direct = out.dtype == wide
    dst = out[..., :r] if direct else torch.empty(src.shape, dtype=wide, device=x.device)
    sign = -1.0 if inverse else 1.0
    if layout == "half":
        x1, x2, o1, o2 = src[..., :n], src[..., n:], dst[..., :n], dst[..., n:]
        torch.mul(src, _cached_table("cc", cos_h, sin_h, False), out=dst)  # both halves times cos
    else:
        x1, x2, o1, o2 = src[..., 0::2], src[..., 1::2], dst[..., 0::2], dst[..., 1::2]
        torch.mul(x1, cos_h, out=o1)
        torch.mul(x2, cos_h, out=o2)
    o1.addcmul_(x2, sin_h, value=-sign)
    o2.addcmul_(x1, sin_h, value=sign)
    if not direct:
        out[..., :r].copy_(dst)


def _eager_chunked(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool) -> None:
    """Cache-sized chunks of the sequence: each is copied into a reused scratch in the promoted
    dtype of ``x`` and the tables (the reference's), rotated there (complex multiply for
    interleaved pairs, ``mul``/``addcmul`` for half pairs) and stored once, so main memory sees one
    read and one write, and a bf16 input is rotated in float32 and rounded once, as the reference
    does."""
    n, s = cos_h.shape[-1], x.shape[-2]
    if s == 0 or x.numel() == 0:
        return  # an empty sequence or batch: nothing to rotate
    r = 2 * n
    wide = torch.promote_types(x.dtype, cos_h.dtype)
    rows = max(1, min(s, _EAGER_CHUNK_BYTES // max(1, x[..., 0, :r].numel() * 4)))
    # a scratch made under inference_mode cannot be written outside it: keyed by the mode too
    key = ("eager", threading.get_ident(), tuple(x.shape[:-2]), rows, r, wide, x.device, torch.is_inference_mode_enabled())
    buf = _scratch.get(key)
    if buf is None:
        _scratch.clear()
        buf = _scratch[key] = torch.empty(*x.shape[:-2], 2, rows, r, dtype=wide, device=x.device)  # [..., 2, rows, r]
    complex_ok = layout == "interleaved" and wide in (torch.float32, torch.float64)  # torch.complex: no bf16
    table = _cached_table("complex", cos_h, sin_h, inverse, wide) if complex_ok else None
    sign = -1.0 if inverse else 1.0
    for start in range(0, s, rows):
        stop = min(s, start + rows)
        tab = slice(start, stop) if cos_h.shape[-2] == s else slice(None)
        xin, dst = buf[..., 0, : stop - start, :], buf[..., 1, : stop - start, :]  # [..., rows, r]
        xin.copy_(x[..., start:stop, :r])
        if table is not None:
            xc = torch.view_as_complex(xin.unflatten(-1, (n, 2)))  # [..., rows, r] -> [..., rows, n] complex
            xc.mul_(table[..., tab, :])
            out[..., start:stop, :r].copy_(xin)
            continue
        c, sn = cos_h[..., tab, :], sin_h[..., tab, :]
        if layout == "half":
            x1, x2, o1, o2 = xin[..., :n], xin[..., n:], dst[..., :n], dst[..., n:]
        else:
            x1, x2, o1, o2 = xin[..., 0::2], xin[..., 1::2], dst[..., 0::2], dst[..., 1::2]
        torch.mul(x1, c, out=o1)
        o1.addcmul_(x2, sn, value=-sign)
        torch.mul(x2, c, out=o2)
        o2.addcmul_(x1, sn, value=sign)
        out[..., start:stop, :r].copy_(dst)
