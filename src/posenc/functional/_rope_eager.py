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

from . import _rope_native

#: Bytes of float32 work per chunk of the eager fallback: large enough that the per-op overhead
#: of the ATen calls per chunk stays small, small enough to stay in the last-level cache. q/k
#: ``[1, 32, 2048, 128]``, one thread, x the copy floor: bf16 interleaved 3.6x (1 MiB) -> 2.5x
#: (4 MiB), bf16 half pairs 4.6x -> 3.9x, fp32 half pairs ~2.8x either way.
_EAGER_CHUNK_BYTES = 4 << 20

_table_cache: dict[tuple, tuple[Tensor, Tensor, Tensor]] = {}
_scratch: dict[tuple, Tensor] = {}  # reused work buffers, one per kind of call


def _cached_table(kind: str, cos_h: Tensor, sin_h: Tensor, inverse: bool, dtype: torch.dtype | None = None) -> Tensor:
    """A derived table (see :func:`_build_table`: ``cos + i sin``, cos and sin rows side by side,
    ``[cos, cos]``, ``[-sin, sin]``, even/odd columns, a contiguous sin); ``sin`` negated for the
    inverse rotation where it enters; built from the tables cast to ``dtype`` (default: theirs); cached while the
    same tables are alive.

    The cache keeps a reference to the tables, so their memory cannot be reused by another tensor
    while an entry exists; the version counters catch in-place edits.
    """
    dtype = cos_h.dtype if dtype is None else dtype
    if cos_h.is_inference() or sin_h.is_inference():  # no version counter to key on: not cached
        return _build_table(kind, cos_h.to(dtype), sin_h.to(dtype), inverse)
    key = (kind, *_tables_key(cos_h, sin_h), dtype, inverse)
    hit = _table_cache.get(key)
    if hit is not None:
        return hit[2]
    table = _build_table(kind, cos_h.to(dtype), sin_h.to(dtype), inverse)
    _remember(_table_cache, key, (cos_h, sin_h, table))
    return table


def _tables_key(cos_h: Tensor, sin_h: Tensor) -> tuple:
    """What identifies the tables' contents in the caches here: address, layout, dtype, device and
    version counters (in-place edits). Not for inference tensors (no version counter)."""
    return (cos_h.data_ptr(), sin_h.data_ptr(), tuple(cos_h.shape), cos_h.stride(), sin_h.stride(),
            cos_h._version, sin_h._version, cos_h.device, cos_h.dtype)


def _remember(cache: dict, key: tuple, value: object, size: int = 8) -> None:
    """``cache[key] = value``, dropping the oldest entry beyond ``size``."""
    if len(cache) >= size:
        cache.pop(next(iter(cache)))
    cache[key] = value


def _build_table(kind: str, cos_h: Tensor, sin_h: Tensor, inverse: bool) -> Tensor:
    if kind == "complex":
        table = torch.complex(cos_h, -sin_h if inverse else sin_h)  # [..., s, n]
    elif kind == "cc":
        table = torch.cat((cos_h, cos_h), dim=-1)  # [..., s, 2 n]
    elif kind == "ss":
        table = torch.cat((-sin_h, sin_h), dim=-1)  # [..., s, 2 n]: the signs of [-x2, x1]
    elif kind == "evenodd":  # [..., s, 4, n / 2]: cos and sin of the even, then the odd features
        table = torch.stack((cos_h[..., 0::2], cos_h[..., 1::2], sin_h[..., 0::2], sin_h[..., 1::2]), dim=-2)
    elif kind == "sin":
        table = sin_h.contiguous()  # [..., s, n]: unit row stride (a view of the full table has 2 n)
    elif kind == "paired":
        table = torch.stack((cos_h, -sin_h if inverse else sin_h), dim=-2)  # [..., s, 2, n], contiguous
    else:
        raise ValueError(f"unknown table kind {kind!r}; expected 'complex', 'cc', 'ss', 'paired', 'evenodd' or 'sin'")
    return table


def _complexable(x: Tensor, out: Tensor, cos_h: Tensor, layout: str) -> bool:
    if layout != "interleaved" or x.dtype not in (torch.float32, torch.float64) or cos_h.dtype != x.dtype:
        return False
    r = 2 * cos_h.shape[-1]
    for t in (x, out):
        if t.stride(-1) != 1 or any(st % 2 for st in t.stride()[:-1]) or t.storage_offset() % 2:
            return False
    return r <= x.shape[-1]


def _eager(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool,
           native: bool = False) -> None:
    """Rotate ``x`` into ``out`` without Inductor; ``native``: CPU float32/float64 half pairs (and
    bfloat16 with float32 tables) may take the C loop of :mod:`~posenc.functional._rope_native`
    (one pass; built at first use)."""
    if native and layout == "half" and _rope_native.rotate_half(x, cos_h, sin_h, out, inverse):
        return
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
        # a head-by-head step per head would cost more in calls than it saves in traffic), through
        # the swap pass where x's layout has rows of several heads
        if x.device.type != "cpu" or layout != "half" or not _eager_swap(x, cos_h, sin_h, out, inverse):
            _eager_whole(x, cos_h, sin_h, out, layout, inverse)
    elif layout != "half" or not _eager_half(x, cos_h, sin_h, out, inverse):
        _eager_chunked(x, cos_h, sin_h, out, layout, inverse)
    if r < x.shape[-1] and out.data_ptr() != x.data_ptr():
        out[..., r:].copy_(x[..., r:])


#: Bytes per step of :func:`_eager_half` per thread that runs an op (the rows of one head in the
#: compute dtype): where a step's x, out and table blocks stay in a core's L2. q/k
#: ``[1, 32, L, 128]`` float32 into ``out=``, x the copy floor at L = 2048 / 8192 (paired, one
#: process, the median of 9 / 5 rounds; 2026-11-23, a host with 2 MiB of L2 per core), bytes per
#: step per thread: one thread 128 KiB 1.94 / 1.89, 256 KiB 1.87 / 1.87, 512 KiB 2.12 / 2.08,
#: 1 MiB 2.76 / 2.41, 2 MiB 2.77 / 2.81; two threads 128 KiB 3.02 / 2.75, 256 KiB 2.04 / 1.99,
#: 512 KiB 2.28 / 2.16, 1 MiB 2.31 / 2.47. An earlier host (1 MiB of L2 per core) ran one thread's
#: 1 MiB steps best, by less (2.19 against 2.29 for 256 KiB). Position blocks across all heads
#: (2.4-2.7), copy-in/copy-out chunks (2.9) and groups of 2-8 heads per op (no better than one
#: head) lost on both. A step chosen at run time by timing the candidates on a synthetic input
#: ranked them unlike the real calls (it chose whole heads with two threads).
_EAGER_HALF_STEP_BYTES = 256 << 10


def _eager_half(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, inverse: bool, step: int | None = None) -> bool:
    """Half pairs in cache-sized steps of rows of one head (``step`` bytes of the compute dtype;
    default :data:`_EAGER_HALF_STEP_BYTES` per thread): three ATen passes per step,
    ``out = x * [cos, cos]``, ``out[:n] -= x[n:] * sin``, ``out[n:] += x[:n] * sin``, straight into
    ``out`` when it has the compute dtype (the promotion of ``x``'s and the tables'; bfloat16 is
    widened into a float32 scratch, rotated into another and rounded once on the way out; within
    one unit in the last place of the reference: see :func:`_eager_whole` on ``addcmul``). In
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
    if step is None:
        step = _EAGER_HALF_STEP_BYTES * max(1, torch.get_num_threads())
    rows = max(1, min(s, step // max(1, r * wide.itemsize)))
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


def _memory_order(t: Tensor) -> list[int]:
    """``t``'s dims from the outermost to the innermost in memory (size-1 dims first)."""
    return sorted(range(t.dim()), key=lambda d: (t.shape[d] != 1, -t.stride(d), d))


#: Most elements of a layout-expanded table (:func:`_swap_plan`): beyond this (a sequence-first
#: layout makes the tables as large as x) the per-half ops are kept.
_SWAP_TABLE_MAX = 1 << 16

#: Smaller inputs (one decoding step) keep the per-half ops: under ~10 us either way.
_SWAP_MIN_NUMEL = 1 << 12

#: Inputs of at least this many elements get their plan at the first call (it pays for itself in
#: one: ~80 us to make, ~120 us saved at 2^18); smaller ones at the second with the same tables.
_SWAP_PLAN_NOW = 1 << 16

_swap_plans: dict[tuple, tuple | None] = {}
_swap_seen: dict[tuple, bool] = {}  # keys met once, without a plan


def _eager_swap(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, inverse: bool) -> bool:
    """Half pairs of small inputs (training sizes) as ``out = x * [cos, cos] + swap(x) * [-sin, sin]``
    (the reference formula: ``rotate_half(x) = [-x2, x1]``) with every op over whole rows of
    memory; False (nothing written) where the layouts do not allow it (see :func:`_swap_plan`).

    A half is ``hd / 2`` features long (8 for the experiments' 16-wide heads), and an ATen op pays
    a fixed cost per run of contiguous elements that dwarfs the work at that length (~7 ns per
    8-feature run; q and k ``[64, 4, 32, 16]`` are 16384 of them). Here ``swap(x) = [x2, x1]`` is
    built straight in ``out`` by one copy of x shifted by ``hd / 2`` along its rows of memory
    (right in every first half) and one copy of the first halves into the second (the only op
    over half-length runs), then ``out *= [-sin, sin]`` and ``out += x * [cos, cos]`` (one
    ``addcmul_``); the tables are expanded to x's layout, so the two arithmetic ops run over whole
    rows. In place the swap goes to a scratch instead (x is read after out is written), scaled
    there, and ``out = scratch + x * [cos, cos]``. :func:`_eager_whole` computes in the same order
    for these inputs, so a call gives the same bits before and after its plan exists (training
    resumed from a checkpoint repeats a straight run bit for bit). Views and tables come from a
    plan cached per layout and tables: the per-call cost is four ops and four views. One thread, against the
    per-half ops: q and k ``[64, 4, 32, 16]`` of one projection 310 -> 189 us, the inverse
    rotation of one SDPA gradient 236 -> 80 us; the experiments' training step (paired, one
    process) +10.2% -> +7.8% over no encoding (the host of earlier sessions). Building the swap in
    ``out`` rather than a scratch (2026-11-23 host, half the memory bandwidth): the pair 311 ->
    237 us, the training step's rope overhead +14.2 / +19.6 / +13.2 / +14.2% -> +11.6 / +14.3 /
    +12.0 / +13.7% (the code before and after, run in turn, ``bench_training(('none', 'rope'),
    min_run_time=8, rounds=12)``, one thread).
    """
    if x.numel() < _SWAP_MIN_NUMEL:
        return False  # a few runs: the per-half ops cost no more than the plan's lookup
    if cos_h.is_inference() or sin_h.is_inference():  # no version counter to key on: not cached
        plan = _swap_plan(x, cos_h, sin_h, out)
    else:
        key = (tuple(x.shape), x.stride(), out.stride(), x.dtype, *_tables_key(cos_h, sin_h),
               threading.get_ident(), torch.is_inference_mode_enabled())
        plan = _swap_plans.get(key, False)
        if plan is False:
            if x.numel() < _SWAP_PLAN_NOW and _swap_seen.pop(key, None) is None:
                # first sight of these tables: decoding brings new ones at every step, where a
                # plan (~80 us) would cost more than the per-half ops it saves; plan on the second
                _remember(_swap_seen, key, True)
                return False
            plan = _swap_plan(x, cos_h, sin_h, out)
            _remember(_swap_plans, key, plan)
    if plan is None:
        return False
    (xp, x_shift, x_first, op), scr, s_head, s_second, cc, ss, ss_inv = plan[:7]
    xo, oo = x.storage_offset(), out.storage_offset()
    o = out.as_strided(op[0], op[1], oo)  # out in memory order: the scratch's layout
    if out.data_ptr() == x.data_ptr():  # in place: the swap goes to the scratch (x is read after o is written)
        buf, head, second = scr, s_head, s_second
    else:  # the swap straight into out
        buf = o
        head = out.as_strided(s_head.shape, s_head.stride(), oo)
        second = out.as_strided(s_second.shape, s_second.stride(), oo + s_second.storage_offset())
    head.copy_(x.as_strided(x_shift[0], x_shift[1], xo + x_shift[2]))  # [x2, ...]: right in every first half
    second.copy_(x.as_strided(x_first[0], x_first[1], xo))  # x1 into every second half
    buf.mul_(ss_inv if inverse else ss)
    torch.addcmul(buf, x.as_strided(xp[0], xp[1], xo), cc, out=o)  # swap * [-sin, sin] + x * [cos, cos]
    return True


def _swap_plan(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor) -> tuple | None:
    """Views and tables of :func:`_eager_swap` for x's and out's layouts, or None when it cannot
    run: partial rotary, 16-bit dtypes (the reference rounds once from float32), tables in another
    dtype, ``out`` not dense in x's memory order (``torch.empty_like(x)`` is), rows of memory of one
    head (nothing to gain), or tables that would grow past :data:`_SWAP_TABLE_MAX`.

    Held: ``((size, stride) of x in memory order, (size, stride, offset) of x shifted by hd / 2
    along its rows, (size, stride) of x's first halves, of out in memory order), scratch, its
    first width - hd / 2 elements of each row, its second halves, [cos, cos], [-sin, sin] and
    [sin, -sin] expanded``, and the tables it was made from (so that their addresses, in the key,
    are not reused while it lives)."""
    n, hd = cos_h.shape[-1], x.shape[-1]
    if 2 * n != hd or x.dim() < 2 or x.numel() == 0 or not x.dtype.is_floating_point or x.element_size() < 4 \
            or cos_h.dtype != x.dtype or sin_h.dtype != x.dtype or out.dtype != x.dtype:
        return None
    order = _memory_order(x)
    xp, op = x.permute(order), out.permute(order)
    if order[-1] != x.dim() - 1 or x.stride(-1) != 1 or not op.is_contiguous():
        return None
    start, width = xp.dim() - 1, hd  # the trailing dims in memory order that x holds without gaps: rows
    while start > 0 and xp.stride(start - 1) == width:
        start -= 1
        width *= xp.shape[start]
    if width == hd:
        return None
    tables = []
    for kind, sign in (("cc", 1), ("ss", 1), ("ss", -1)):  # [cos, cos], [-sin, sin], [sin, -sin]
        t = _build_table(kind, cos_h, sin_h if sign > 0 else -sin_h, False).expand(x.shape).permute(order)  # [memory order]
        # materialised from dim `first` on (broadcast before it): from the start of x's rows, where
        # that is small enough, so that the ops run over whole rows; else from the first dim along
        # which the table varies (runs from there on)
        varies = next((d for d in range(t.dim()) if t.stride(d) != 0 and t.shape[d] != 1), t.dim() - 1)
        first = next((d for d in sorted({min(varies, start), varies}) if t[(0,) * d].numel() <= _SWAP_TABLE_MAX), None)
        if first is None:
            return None
        tables.append(t[(0,) * first].contiguous().expand(t.shape))
    lead, lead_x, lead_s = xp.shape[:start], xp.stride()[:start], op.stride()[:start]  # out: dense = scratch's
    scr = torch.empty(xp.shape, dtype=x.dtype, device=x.device)  # [memory order]
    heads = width // hd
    s_head = scr.as_strided((*lead, width - n), (*lead_s, 1))
    s_second = scr.as_strided((*lead, heads, n), (*lead_s, hd, 1), n)
    views = ((tuple(xp.shape), xp.stride()), ((*lead, width - n), (*lead_x, 1), n),
             ((*lead, heads, n), (*lead_x, hd, 1)), (tuple(op.shape), op.stride()))
    return views, scr, s_head, s_second, *tables, cos_h, sin_h


def _eager_whole(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, layout: str, inverse: bool) -> None:
    """The whole tensor in three or four ops, ``dst = x * cos`` then one ``addcmul`` per half of
    the pairs (float32/float64 half pairs on the CPU: each half times its signed sin, then one
    ``addcmul`` of ``x * [cos, cos]``, the order of :func:`_eager_swap`): on accelerators (a GPU
    gains nothing from cache-sized steps and pays a launch per kernel: the CPU's head-by-head steps cost 200-300x the copy floor on an H100), and on the CPU
    for half pairs that fit the cache whole. The rotation is computed in the promoted dtype (float32 for 16-bit ``x``) in a
    temporary from the caching allocator and rounded once into ``out``, as the reference does;
    in place, the input is copied first (the pairs read each other). ``addcmul`` is a fused
    multiply-add, so the float32 value can differ from the reference's (a product and a sum, each
    rounded) by one unit in the last place, and a 16-bit result by one unit about once in 60,000."""
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
    if layout == "half" and direct and x.device.type == "cpu":
        # float32/float64 on the CPU: the order of the swap pass (_eager_swap), which takes these
        # calls over once it has a plan, so that a call gives the same bits with or without one:
        # dst = swap(x) * [-sin, sin], then dst += x * [cos, cos] (one addcmul_ over whole rows)
        ss = _cached_table("ss", cos_h, sin_h, False)  # [..., s, 2 n]: [-sin, sin]
        neg, pos = ss[..., :n], ss[..., n:]
        torch.mul(src[..., n:], pos if inverse else neg, out=dst[..., :n])  # -x2 sin (inverse: +x2 sin)
        torch.mul(src[..., :n], neg if inverse else pos, out=dst[..., n:])  # +x1 sin (inverse: -x1 sin)
        dst.addcmul_(src, _cached_table("cc", cos_h, sin_h, False))
        return
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
    does (within one unit in the last place: see :func:`_eager_whole` on ``addcmul``)."""
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
