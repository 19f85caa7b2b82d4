"""The C loop for half-pair RoPE (posenc.functional._rope_native) and the in-place rotation of a
fused projection built on it (fast_apply_rope_fused_, Rope.rotate_fused_, posenc.Attention).

Every value is pinned against the reference formula F.apply_rope, bit for bit: the loop rounds
each product and sum as ATen's separate ops do."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as nnf

import posenc
from posenc import functional as F
from posenc.functional import _rope_native, fast_rope
from posenc.functional.fast_rope import FusedRopeFunction, fast_apply_rope_fused_

needs_loop = pytest.mark.skipif(not _rope_native.available(), reason="no C++ compiler for the C loop here")


def _half(positions, width, dtype, base=10000.0):
    """Half-width tables ``[..., s, width / 2]`` and the full ones the reference takes."""
    inv_freq, _ = F.rope_inv_freq(width, base=base)
    cos, sin = F.rope_cos_sin(positions, inv_freq, layout="half", dtype=dtype)
    n = width // 2
    return cos[..., :n], sin[..., :n], cos, sin


def _cases():
    """(name, x, cos_h, sin_h, cos, sin): layouts the training and the functional API produce."""
    g = torch.Generator().manual_seed(0)
    out = []
    for dtype in (torch.float32, torch.float64):
        # heads of 24: one vector of 8 float32 (or two of 4 float64) and pairs left over
        x = torch.randn(2, 3, 17, 24, generator=g, dtype=dtype)
        out.append((f"contiguous-{dtype}", x, *_half(torch.arange(17), 24, dtype)))
        # q and k of one projection [b, s, 3, h, hd] as a [2, b, h, s, hd] view (the pair path)
        qkv = torch.randn(4, 9, 3, 2, 16, generator=g, dtype=dtype)
        both = qkv[:, :, :2].permute(2, 0, 3, 1, 4)
        out.append((f"projection-{dtype}", both, *_half(torch.arange(9), 16, dtype)))
        # per-row tables [b, 1, s, n] (packed sequences) and per-head tables [b, h, s, n]
        pos = torch.randint(0, 50, (2, 1, 17), generator=g)
        out.append((f"rows-{dtype}", x, *_half(pos, 24, dtype)))
        out.append((f"heads-{dtype}", x, *_half(torch.randint(0, 50, (2, 3, 17), generator=g), 24, dtype)))
        # partial rotary: 12 of 20 features rotate, the rest are copied
        xp = torch.randn(2, 3, 5, 20, generator=g, dtype=dtype)
        out.append((f"partial-{dtype}", xp, *_half(torch.arange(5), 12, dtype)))
        # head-major [b, h, s, hd] with whole blocks of 64 rows: walked in blocks of rows for
        # groups of 4, 2 or 1 heads (_blocked), with shared, per-row and per-head tables
        for lead, tables in (((1, 8, 192), (192,)), ((1, 6, 128), (128,)), ((1, 3, 128), (128,)),
                             ((2, 4, 128), (2, 1, 128)), ((2, 4, 128), (2, 4, 128))):
            xb = torch.randn(*lead, 16, generator=g, dtype=dtype)
            pos = torch.arange(tables[-1]).expand(tables) + torch.randint(0, 9, tables[:-1] + (1,), generator=g)
            out.append((f"blocks-{'x'.join(map(str, lead))}-tables{len(tables)}-{dtype}", xb, *_half(pos, 16, dtype)))
        # bfloat16 x with float32 tables: rotated in float32, rounded once (as the reference)
        if dtype == torch.float32:
            out.append(("bf16-contiguous", x.bfloat16(), *_half(torch.arange(17), 24, dtype)))
            out.append(("bf16-projection", both.bfloat16(), *_half(torch.arange(9), 16, dtype)))
            out.append(("bf16-partial", xp.bfloat16(), *_half(torch.arange(5), 12, dtype)))
            xb = torch.randn(1, 8, 192, 16, generator=g).bfloat16()
            out.append(("bf16-blocks", xb, *_half(torch.arange(192), 16, dtype)))
        # one row, and a 1-D input
        out.append((f"one-row-{dtype}", torch.randn(1, 1, 1, 16, generator=g, dtype=dtype), *_half(torch.tensor([7]), 16, dtype)))
        c, s, cf, sf = _half(torch.tensor(3), 8, dtype)
        out.append((f"1d-{dtype}", torch.randn(8, generator=g, dtype=dtype), c, s, cf, sf))
    return out


CASES = _cases()


@needs_loop
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
@pytest.mark.parametrize("inplace", [False, True], ids=["out", "in-place"])
def test_c_loop_equals_reference_bit_for_bit(case, inverse, inplace):
    _, x, cos_h, sin_h, cos, sin = case
    want = F.apply_rope(x, cos, -sin if inverse else sin)
    if inplace:
        got = x.clone()
        assert _rope_native.rotate_half(got, cos_h, sin_h, got, inverse)
    else:
        got = torch.full_like(x, float("nan"))
        assert _rope_native.rotate_half(x, cos_h, sin_h, got, inverse)
    assert torch.equal(got, want)


def test_blocked_walk_of_head_major_layouts():
    """Which layouts are walked in blocks of rows: head-major with shared or per-row tables and
    whole blocks (heads grouped by 4, 2 or 1), not per-head tables, a short or ragged sequence,
    or heads already innermost (the projection's layout)."""
    def dims(shape, tables, n=8):
        x = torch.empty(*shape, 2 * n)
        c = torch.empty(*tables, n)
        return _rope_native._index_space(x, torch.empty_like(x), c, c)[0]

    assert dims((1, 8, 192), (192,)) == (3, 2, 64, 4)
    assert dims((2, 6, 128), (128,)) == (2, 3, 64, 4)  # batch and heads merged: 12 rows of tables shared
    assert dims((1, 6, 128), (128,)) == (2, 3, 64, 2)
    assert dims((1, 3, 128), (128,)) == (2, 3, 64)
    assert dims((2, 4, 128), (2, 1, 128)) == (2, 2, 1, 64, 4)
    assert dims((2, 4, 128), (2, 4, 128)) == (1024,)  # per-head tables: one merged run of rows
    assert dims((1, 8, 100), (100,)) == (8, 100)  # not whole blocks
    assert dims((1, 8, 64), (64,)) == (8, 64)  # one block
    both = torch.empty(4, 128, 3, 8, 16)[:, :, :2].permute(2, 0, 3, 1, 4)  # q, k of a projection
    c = torch.empty(128, 8)
    assert _rope_native._index_space(both, torch.empty_like(both), c, c)[0] == (4, 128, 16)


@needs_loop
def test_c_loop_splits_rows_over_threads_exactly(monkeypatch):
    """Rows split over two OpenMP threads at every boundary give the single-thread bits."""
    monkeypatch.setattr(_rope_native, "_PARALLEL_NUMEL", 1)
    x = torch.randn(3, 5, 7, 32)
    cos_h, sin_h, cos, sin = _half(torch.arange(7), 32, torch.float32)
    threads = torch.get_num_threads()
    try:
        for t in (2, 3):
            torch.set_num_threads(t)
            out = torch.empty_like(x)
            assert _rope_native.rotate_half(x, cos_h, sin_h, out, False)
            assert torch.equal(out, F.apply_rope(x, cos, sin))
    finally:
        torch.set_num_threads(threads)


@needs_loop
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_c_loop_nan_and_inf_follow_the_reference(dtype):
    x = torch.randn(2, 2, 6, 16).to(dtype)
    x[0, 1, 2, 3], x[1, 0, 5, 12], x[0, 0, 0, 8] = float("inf"), float("nan"), float("-inf")
    cos_h, sin_h, cos, sin = _half(torch.arange(6), 16, torch.float32)
    out = torch.empty_like(x)
    assert _rope_native.rotate_half(x, cos_h, sin_h, out, False)
    ref = F.apply_rope(x, cos, sin)
    assert ref.isnan().any() and ref.isinf().any()
    assert torch.equal(out.isnan(), ref.isnan()) and torch.equal(out.isinf(), ref.isinf())
    assert torch.equal(out[~ref.isnan()], ref[~ref.isnan()])


@needs_loop
def test_c_loop_declines_what_it_cannot_take():
    """float16, bfloat16 with bfloat16 tables, tables in another dtype, a feature dim without unit
    stride, tables that do not broadcast, out over x's memory with other strides: False and
    nothing written."""
    cos_h, sin_h, _, _ = _half(torch.arange(4), 16, torch.float32)
    x = torch.randn(2, 4, 16)
    for args in ((x.half(), cos_h, sin_h, torch.empty(2, 4, 16, dtype=torch.float16)),
                 (x.bfloat16(), cos_h.bfloat16(), sin_h.bfloat16(), torch.empty(2, 4, 16, dtype=torch.bfloat16)),
                 (x, cos_h.double(), sin_h.double(), torch.empty(2, 4, 16)),
                 (torch.randn(2, 4, 32)[..., ::2], cos_h, sin_h, torch.empty(2, 4, 16)),
                 (x, cos_h[:3], sin_h[:3], torch.empty(2, 4, 16))):
        out = args[3].fill_(float("nan")) if args[3].data_ptr() != args[0].data_ptr() else args[3]
        assert not _rope_native.rotate_half(*args[:3], out, False)
        assert out.isnan().all()
    y = x.clone()
    assert not _rope_native.rotate_half(y, cos_h, sin_h, y.as_strided(y.shape, (16, 32, 1)), False)
    assert torch.equal(y, x)
    empty = torch.empty(2, 0, 16)
    assert _rope_native.rotate_half(empty, cos_h[:0], sin_h[:0], torch.empty_like(empty), False)


def test_without_a_compiler_every_path_serves_the_reference(monkeypatch):
    """No compiler (or a failed build): the loop says so, the fused path steps aside, and
    Attention with rope gives the reference through the ATen passes."""
    monkeypatch.setattr(_rope_native, "_state", {"error": "test: no compiler"})
    monkeypatch.setattr(_rope_native, "_plans", {})
    assert not _rope_native.available()
    cos_h, sin_h, cos, sin = _half(torch.arange(4), 16, torch.float32)
    x = torch.randn(2, 4, 16)
    assert not _rope_native.rotate_half(x, cos_h, sin_h, torch.empty_like(x), False)
    proj = torch.randn(2, 4, 48, requires_grad=True) * 1
    assert fast_apply_rope_fused_(proj, cos, sin, 1, 1, 16) is None
    torch.manual_seed(0)
    attn = posenc.Attention(32, 2, encoding="rope", causal=True)
    x = torch.randn(3, 8, 32)
    q, k, v = attn.qkv(x).view(3, 8, 3, 2, 16).permute(2, 0, 3, 1, 4)
    c, s = _half(torch.arange(8), 16, torch.float32)[2:]
    q, k = F.apply_rope(q, c, s), F.apply_rope(k, c, s)
    ref = attn.proj(nnf.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(3, 8, 32))
    torch.testing.assert_close(attn(x), ref, atol=1e-6, rtol=1e-5)


def _reference_split(proj, q_heads, k_heads, hd, cos, sin):
    rows = proj.unflatten(-1, (q_heads + 2 * k_heads, hd)).transpose(1, 2)  # [b, heads, s, hd]
    q, k, v = rows.split((q_heads, k_heads, k_heads), dim=1)
    return F.apply_rope(q, cos, sin), F.apply_rope(k, cos, sin), v


@needs_loop
@pytest.mark.parametrize("q_heads, k_heads, hd, rotary", [(2, 2, 8, 8), (4, 2, 8, 8), (3, 1, 10, 6)],
                         ids=["mha", "gqa", "partial"])
def test_fused_projection_rotation_equals_reference_and_gradchecks(q_heads, k_heads, hd, rotary):
    """q, k (rotated) and v out of one projection, in float64: equal to splitting and rotating
    with the reference; gradients and second derivatives checked numerically."""
    b, s = 2, 5
    _, _, cos, sin = _half(torch.arange(s), rotary, torch.float64)
    w = torch.randn(b, s, (q_heads + 2 * k_heads) * hd, dtype=torch.float64, requires_grad=True)

    def fused(w):
        out = fast_apply_rope_fused_(w * 1, cos, sin, q_heads, k_heads, hd)  # a non-leaf, as a Linear's output
        assert out is not None
        return out

    def fused_view(w):  # the projection as a view of all of a [b s, f] tensor (Linear with a bias)
        out = fast_apply_rope_fused_((w.flatten(0, 1) * 1).view(w.shape), cos, sin, q_heads, k_heads, hd)
        assert out is not None
        return out

    for fn in (fused, fused_view):
        for got, want in zip(fn(w), _reference_split(w, q_heads, k_heads, hd, cos, sin)):
            assert torch.equal(got, want)
        assert torch.autograd.gradcheck(fn, (w,))
        assert torch.autograd.gradgradcheck(fn, (w,))
    with torch.no_grad():  # no autograd: rotated in place, q, k and v views of the projection
        proj = w.detach().clone()
        q, k, v = fast_apply_rope_fused_(proj, cos, sin, q_heads, k_heads, hd)
        assert q.untyped_storage().data_ptr() == proj.untyped_storage().data_ptr()
        for got, want in zip((q, k, v), _reference_split(w.detach(), q_heads, k_heads, hd, cos, sin)):
            assert torch.equal(got, want)


@needs_loop
def test_fused_backward_writes_each_gradient_slot_and_adds_one_given_for_the_projection():
    """Gradients of only some of q, k and v (the others zero), plus a gradient for the returned
    projection itself: the same as the reference graph."""
    b, s, hd = 2, 4, 8
    _, _, cos, sin = _half(torch.arange(s), hd, torch.float64)
    w = torch.randn(b, s, 3 * 2 * hd, dtype=torch.float64, requires_grad=True)
    proj = w * 1
    cos_h, sin_h = cos[:, : hd // 2], sin[:, : hd // 2]
    outs = FusedRopeFunction.apply(proj, cos_h, sin_h, 2, 2, hd, tuple(proj.shape))  # proj, q, k, v
    ref = w.detach().clone().requires_grad_()
    gk = torch.randn_like(outs[2])
    gp = torch.randn_like(outs[0])
    (got,) = torch.autograd.grad((outs[2], outs[0]), w, (gk, gp))
    rows = ref.unflatten(-1, (6, hd)).transpose(1, 2)  # [b, 6, s, hd]
    k_ref = F.apply_rope(rows[:, 2:4], cos, sin)
    # the projection's own output is its rotated self: its gradient flows through the rotation
    rot_all = torch.cat((F.apply_rope(rows[:, :4], cos, sin), rows[:, 4:]), dim=1).transpose(1, 2).flatten(-2)
    (expect,) = torch.autograd.grad((k_ref, rot_all), ref, (gk, gp))
    torch.testing.assert_close(got, expect, atol=1e-12, rtol=0)


@needs_loop
def test_fused_path_steps_aside_where_it_does_not_apply():
    """Under autograd a view of part of another tensor, or a leaf; bfloat16, a large input, tables
    with gradients, forward-mode AD: None, nothing written."""
    _, _, cos, sin = _half(torch.arange(4), 8, torch.float32)
    base = torch.randn(2, 4, 48)
    for proj, c, s in ((torch.randn(3, 4, 48, requires_grad=True).mul(1)[:2], cos, sin),
                       (base.clone().requires_grad_(), cos, sin),
                       (base.bfloat16(), cos.bfloat16(), sin.bfloat16()),
                       (base.clone(), cos.clone().requires_grad_(), sin)):
        before = proj.detach().clone()
        assert fast_apply_rope_fused_(proj, c, s, 2, 2, 8) is None
        assert torch.equal(proj.detach(), before)
    big_s = fast_rope.COMPILE_MIN_NUMEL // (2 * 8) + 1
    _, _, cb, sb = _half(torch.arange(big_s), 8, torch.float32)
    assert fast_apply_rope_fused_(torch.zeros(1, big_s, 48), cb, sb, 2, 2, 8) is None
    from torch.autograd import forward_ad

    with forward_ad.dual_level():
        assert fast_apply_rope_fused_(base.clone(), cos, sin, 2, 2, 8) is None


@needs_loop
@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "qkv-bias"])
@pytest.mark.parametrize("kv", [None, 2], ids=["mha", "gqa"])
def test_attention_takes_the_fused_path_and_matches_the_reference(kv, bias, monkeypatch):
    """posenc.Attention with rope (causal, default positions) rotates q and k in its projection;
    output and every gradient equal the hand-written layer; xPos, interleaved pairs, explicit
    positions and a KV cache's later steps take the views."""
    calls = []
    apply = FusedRopeFunction.apply
    monkeypatch.setattr(FusedRopeFunction, "apply", lambda *a: calls.append(1) or apply(*a))
    torch.manual_seed(0)
    h, hd, b, s = 4, 16, 3, 12
    kv_heads = kv or h
    attn = posenc.Attention(h * hd, h, encoding="rope", causal=True, num_kv_heads=kv, qkv_bias=bias)
    if bias:  # Linear with a bias returns addmm's output viewed: the rotation runs on that base
        torch.nn.init.normal_(attn.qkv.bias)
    x = torch.randn(b, s, h * hd, requires_grad=True)
    out = attn(x)
    assert calls == [1]
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (x, *attn.parameters()), g)
    _, _, cos, sin = _half(torch.arange(s), hd, torch.float32)
    q, k, v = _reference_split(attn.qkv(x), h, kv_heads, hd, cos, sin)
    ref = nnf.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv is not None)
    ref = attn.proj(ref.transpose(1, 2).reshape(b, s, h * hd))
    want = torch.autograd.grad(ref, (x, *attn.parameters()), g)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-5)
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, atol=1e-6, rtol=1e-5)
    calls.clear()
    for layer, args in ((posenc.Attention(h * hd, h, encoding="xpos", causal=True), (x,)),
                        (posenc.Attention(h * hd, h, encoding=posenc.create("rope", dim=hd, layout="interleaved")), (x,)),
                        (attn, (x, torch.arange(s) + 3))):
        layer(*args)
    assert calls == []
    cache = posenc.KVCache()
    attn(x[:, :5], cache=cache)  # the first chunk: default positions 0..4
    attn(x[:, 5:6], cache=cache)  # later steps continue from the cache: positions given, views rotated
    assert calls == [1]


@needs_loop
def test_a_forward_hook_on_the_projection_keeps_what_it_saw(monkeypatch):
    """A forward hook that keeps the qkv output (activation caching) sees it unrotated after the
    layer ran: the layer then rotates q and k as new tensors, with the same output."""
    calls = []
    apply = FusedRopeFunction.apply
    monkeypatch.setattr(FusedRopeFunction, "apply", lambda *a: calls.append(1) or apply(*a))
    torch.manual_seed(0)
    attn = posenc.Attention(32, 2, encoding="rope", causal=True)
    x = torch.randn(2, 6, 32, requires_grad=True)
    plain = attn(x)
    assert calls == [1]
    kept = []
    handle = attn.qkv.register_forward_hook(lambda mod, inp, out: kept.append(out))
    try:
        hooked = attn(x)
    finally:
        handle.remove()
    assert calls == [1] and torch.equal(hooked, plain)
    assert torch.equal(kept[0], attn.qkv(x))


@needs_loop
def test_auto_without_inductor_takes_the_c_loop_for_large_half_pairs(monkeypatch):
    """compile="auto" on a large input where Inductor cannot compile: the C loop rotates it
    (forward and backward), bit for bit the reference; compile=False keeps to ATen ops."""
    monkeypatch.setattr(fast_rope, "_compile_error", "test: Inductor unavailable")
    calls = []
    rotate = _rope_native.rotate_half
    monkeypatch.setattr(_rope_native, "rotate_half", lambda *a: calls.append(1) or rotate(*a))
    q = torch.randn(1, 8, 1024, 128)  # 2^20 elements: past COMPILE_MIN_NUMEL
    _, _, cos, sin = _half(torch.arange(1024), 128, torch.float32)
    out = torch.empty_like(q)
    fast_rope.fast_apply_rope(q, cos, sin, out=out)
    assert calls == [1] and torch.equal(out, F.apply_rope(q, cos, sin))
    x = q.clone().requires_grad_()
    g = torch.randn_like(q)
    (got,) = torch.autograd.grad(fast_rope.fast_apply_rope(x, cos, sin), x, g)
    assert len(calls) == 3 and torch.equal(got, F.apply_rope(g, cos, -sin))
    fast_rope.fast_apply_rope(q, cos, sin, out=out, compile=False)
    assert len(calls) == 3


@needs_loop
def test_bfloat16_attention_rotates_inside_the_projection_as_the_views_do(monkeypatch):
    """A bfloat16 layer (float32 tables, rotated in float32 and rounded once): the fused path's
    output and gradients equal those of the views through RopePairFunction."""
    calls = []
    apply = FusedRopeFunction.apply
    monkeypatch.setattr(FusedRopeFunction, "apply", lambda *a: calls.append(1) or apply(*a))
    torch.manual_seed(0)
    attn = posenc.Attention(64, 4, encoding="rope", causal=True).bfloat16()
    x = torch.randn(4, 16, 64, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(4, 16, 64, dtype=torch.bfloat16)
    out = attn(x)
    got = torch.autograd.grad(out, (x, *attn.parameters()), g)
    assert calls == [1]
    monkeypatch.setattr(posenc.schemes.rope.Rope, "rotate_fused_", lambda self, *a: None)
    ref = attn(x)
    want = torch.autograd.grad(ref, (x, *attn.parameters()), g)
    assert calls == [1]
    torch.testing.assert_close(out, ref, atol=0, rtol=0)
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, atol=1e-2, rtol=1e-2)


@needs_loop
def test_warmup_builds_the_c_loop(monkeypatch):
    """fast_rope.warmup on the CPU builds (or loads from the on-disk cache) the C loop, so the
    first small rotation does not pay for it."""
    monkeypatch.setattr(_rope_native, "_state", {})
    monkeypatch.setattr(_rope_native, "_plans", {})
    fast_rope.warmup(16, num_heads=2, dtypes=(torch.float32,), layouts=("half",), backward=False)
    assert "lib" in _rope_native._state
