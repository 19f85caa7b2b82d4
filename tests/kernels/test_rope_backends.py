"""The fast paths equal the reference paths: RoPE (posenc.functional.fast_rope) against
``posenc.functional.apply_rope`` and biases (posenc.functional.fast_bias) against ``alibi_bias`` and
the T5 bucket lookup, forward and backward, both layouts, partial rotary, offsets, bf16."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as nnf

import posenc
from posenc import functional as F
from posenc.functional import _rope_eager, _rope_native, fast_bias, fast_rope
from posenc.functional.fast_rope import fast_apply_rope, fast_apply_rope_

LAYOUTS = ("half", "interleaved")


def _tables(positions, rotary_dim, layout, dtype=torch.float32):
    inv_freq, _ = F.rope_inv_freq(rotary_dim)
    return F.rope_cos_sin(positions, inv_freq, layout=layout, dtype=dtype)


def _exact_rotation(x, cos, sin, layout, inverse=False):
    """The rotation in float64 (sin negated for the inverse): the truth both paths approximate."""
    sin = -sin if inverse else sin
    return F.apply_rope(x.double(), cos.double(), sin.double(), layout=layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("rotary_dim", [32, 16])
def test_eager_equals_reference(layout, dtype, rotary_dim):
    x = torch.randn(2, 3, 40, 32).to(dtype)  # [b, h, s, hd]
    cos, sin = _tables(torch.arange(7, 47), rotary_dim, layout, torch.float64 if dtype == torch.float64 else torch.float32)
    ref = F.apply_rope(x, cos, sin, layout=layout)
    # bf16: the same single rounding; addcmul's fused multiply-add can flip one result in ~60,000
    # by one unit (none in this seeded input: pinned exactly, so a second rounding would show)
    tol = {"atol": 1e-6, "rtol": 0} if dtype != torch.bfloat16 else {"atol": 0, "rtol": 0}
    torch.testing.assert_close(fast_apply_rope(x, cos, sin, layout=layout, compile=False), ref, **tol)
    out = torch.full_like(x, float("nan"))
    assert fast_apply_rope(x, cos, sin, layout=layout, out=out, compile=False) is out
    torch.testing.assert_close(out, ref, **tol)
    y = x.clone()
    assert fast_apply_rope_(y, cos, sin, layout=layout, compile=False) is y
    torch.testing.assert_close(y, ref, **tol)
    assert torch.equal(out[..., rotary_dim:], x[..., rotary_dim:])  # unrotated features pass unchanged


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("x_dtype", "table_dtype", "atol"), [
    (torch.float64, torch.float32, 1e-12),  # float64 activations, default float32 tables
    (torch.float32, torch.float64, 1e-6),
    (torch.bfloat16, torch.bfloat16, 2 ** -6),  # tables cast to the model dtype, as transformers does
    (torch.float16, torch.float32, 2e-3),
])
@pytest.mark.parametrize("steps", [False, True])
def test_eager_tables_in_another_dtype_than_x(layout, x_dtype, table_dtype, atol, steps, monkeypatch):
    """Every eager path computes in the promotion of x's and the tables' dtypes, as apply_rope does:
    float64 x with float32 tables stays float64-exact; bfloat16 tables do not break the complex
    multiply of interleaved pairs. ``steps`` forces the cache-sized steps (half pairs head by head)."""
    if steps:
        monkeypatch.setattr(_rope_eager, "_EAGER_CHUNK_BYTES", 9 * 24 * 4)  # chunks of 9 rows
        monkeypatch.setattr(_rope_eager, "_EAGER_HALF_STEP_BYTES", 7 * 24 * 4)  # steps of 7 float32 rows per thread
    x = torch.randn(2, 3, 40, 32, dtype=torch.float64).to(x_dtype)  # [b, h, s, hd]
    cos, sin = _tables(torch.arange(3, 43), 24, layout, table_dtype)
    ref = F.apply_rope(x, cos, sin, layout=layout)
    strided = torch.randn(2, 3, 40, 33, dtype=torch.float64).to(x_dtype)[..., 1:]  # odd offset: no complex view
    strided.copy_(x)
    for xin in (x, strided):
        y = xin.clone()
        results = (fast_apply_rope(xin, cos, sin, layout=layout, compile=False),
                   fast_apply_rope(xin, cos, sin, layout=layout, out=torch.empty_like(xin), compile=False),
                   fast_apply_rope_(y, cos, sin, layout=layout, compile=False))
        for got in results:
            assert got.dtype == x_dtype
            torch.testing.assert_close(got, ref, atol=atol, rtol=0)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_is_inverse_rotation(layout, dtype):
    """d(R x)/dx applied to g is R(-angle) g; the fast backward is at least as close to the exact
    float64 value as autograd through the reference formula (1 bf16 ulp of it, 1e-6 in fp32)."""
    x = torch.randn(2, 4, 24, 16).to(dtype).requires_grad_()
    cos, sin = _tables(torch.arange(100, 124), 16, layout)
    g = torch.randn(2, 4, 24, 16).to(dtype)
    fast_apply_rope(x, cos, sin, layout=layout, compile=False).backward(g)
    fast_grad, x.grad = x.grad, None
    F.apply_rope(x, cos, sin, layout=layout).backward(g)
    exact = _exact_rotation(g, cos, sin, layout, inverse=True)
    fast_err = (fast_grad.double() - exact).abs().max().item()
    ref_err = (x.grad.double() - exact).abs().max().item()
    assert fast_err <= ref_err + (1e-6 if dtype == torch.float32 else 0.0)
    assert fast_err <= (1e-6 if dtype == torch.float32 else 2 ** -8 * exact.abs().max().item())


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_of_large_eager_half_pairs_is_the_inverse_rotation(transposed, dtype):
    """Past 2^20 elements the eager fallback rotates half pairs whole-tensor (contiguous) or in
    chunks (a layout that cannot be viewed as [-1, s, hd]); both must invert in backward. The
    small-size test above never reaches them."""
    torch.manual_seed(0)
    shape = (2, 1024, 8, 160) if transposed else (1, 8, 1024, 160)
    x = torch.randn(shape).to(dtype)
    x = (x.transpose(1, 2) if transposed else x).requires_grad_()  # [b, h, s, hd]
    assert x.numel() > 2 ** 20
    cos, sin = _tables(torch.arange(1024), 160, "half")
    g = torch.randn(shape).to(dtype)
    g = g.transpose(1, 2) if transposed else g
    fast_apply_rope(x, cos, sin, layout="half", compile=False).backward(g)
    fast_grad, x.grad = x.grad, None
    F.apply_rope(x, cos, sin, layout="half").backward(g)
    exact = _exact_rotation(g, cos, sin, "half", inverse=True)
    tolerance = 1e-5 if dtype == torch.float32 else 2 ** -7 * exact.abs().max().item()
    assert (fast_grad.double() - exact).abs().max().item() <= tolerance
    assert (x.grad.double() - exact).abs().max().item() <= tolerance


@pytest.mark.parametrize("layout", LAYOUTS)
def test_in_place_chunks_finish_eagerly_when_compiling_fails_midway(layout, monkeypatch):
    """The in-place compiled pass works in chunks; if a later chunk cannot run compiled, the rest
    of x is rotated eagerly with its own rows of the tables (a wrong slice raised or misrotated)."""
    calls = []

    def first_only(chunk, cos_h, sin_h, out, layout, inverse):  # "compiled" once, then unavailable
        calls.append(chunk.shape[-2])
        if len(calls) > 1:
            return False
        _rope_eager._eager(chunk, cos_h, sin_h, out, layout, inverse)
        return True

    monkeypatch.setattr(fast_rope, "_run_compiled", first_only)
    monkeypatch.setattr(fast_rope, "_INPLACE_CHUNK_BYTES", 3 * 5 * 16 * 4)  # 5 rows of [1, 3, s, 16] a chunk
    x = torch.randn(1, 3, 23, 16)
    cos, sin = _tables(torch.arange(7, 30), 16, layout)
    want = F.apply_rope(x, cos, sin, layout=layout)
    cos_h, sin_h = fast_rope._half_tables(cos, sin, layout)
    assert fast_rope._inplace_compiled(x, cos_h, sin_h, layout, False)
    assert calls == [5, 5]
    torch.testing.assert_close(x, want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_batched_tables_and_non_contiguous_input(layout):
    """[b, s, r] tables (packed sequences) and q as Attention makes it (a permuted view)."""
    b, s, h, hd = 2, 10, 3, 8
    qkv = torch.randn(b, s, 3, h, hd)
    q = qkv.permute(2, 0, 3, 1, 4)[0]  # [b, h, s, hd], non-contiguous
    positions = torch.tensor([list(range(5, 15)), list(range(0, 10))])  # [b, s]
    cos, sin = _tables(positions, hd, layout)  # [b, s, hd]
    torch.testing.assert_close(fast_apply_rope(q, cos, sin, layout=layout, compile=False),
                               F.apply_rope(q, cos, sin, layout=layout), atol=1e-6, rtol=0)


def test_rope_scheme_uses_fast_path_and_matches_reference():
    rope = posenc.create("rope", dim=16, layout="interleaved", rotary_dim=8)
    q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 9, 16)
    rq, rk = rope.rotate(q, k)
    cos_k, sin_k = rope.cos_sin(torch.arange(9))
    cos_q, sin_q = rope.cos_sin(torch.arange(4, 9))
    torch.testing.assert_close(rq, F.apply_rope(q, cos_q, sin_q, layout="interleaved"), atol=1e-6, rtol=0)
    torch.testing.assert_close(rk, F.apply_rope(k, cos_k, sin_k, layout="interleaved"), atol=1e-6, rtol=0)


def test_bad_inputs_raise_clear_errors():
    x = torch.randn(1, 1, 4, 8)
    cos, sin = _tables(4, 8, "half")
    with pytest.raises(ValueError, match="unknown layout 'pairs'"):
        fast_apply_rope(x, cos, sin, layout="pairs")
    with pytest.raises(ValueError, match="out must match x"):
        fast_apply_rope(x, cos, sin, out=torch.empty(1, 1, 4, 6))
    with pytest.raises(ValueError, match="compile must be"):
        fast_apply_rope(x, cos, sin, compile="yes")
    with pytest.raises(RuntimeError, match="does not take part in autograd"):
        fast_apply_rope(x.requires_grad_(), cos, sin, out=torch.empty(1, 1, 4, 8))
    with pytest.raises(TypeError, match="floating-point"):
        fast_apply_rope(torch.ones(1, 1, 4, 8, dtype=torch.long), cos, sin)


@pytest.mark.slow
@pytest.mark.parametrize(("layout", "dtype", "rotary_dim"), [("half", torch.float32, 24), ("interleaved", torch.bfloat16, 32)])
def test_compiled_equals_reference(layout, dtype, rotary_dim):
    """The torch.compile'd single pass (one compile per variant, sequence dim dynamic)."""
    x = torch.randn(1, 2, 33, 32).to(dtype)
    cos, sin = _tables(torch.arange(1000, 1033), rotary_dim, layout)
    ref = F.apply_rope(x, cos, sin, layout=layout)
    tol = {"atol": 1e-6, "rtol": 0} if dtype == torch.float32 else {"atol": 0, "rtol": 0}
    out = torch.empty_like(x)
    fast_apply_rope(x, cos, sin, layout=layout, out=out, compile=True)
    assert fast_rope.compile_available(), fast_rope._compile_error
    torch.testing.assert_close(out, ref, **tol)
    if dtype == torch.float32:  # backward and in place share the compiled kernel (inverse: one more compile)
        y = x.clone()
        fast_apply_rope_(y, cos, sin, layout=layout, compile=True)
        torch.testing.assert_close(y, ref, **tol)
        xg = x.clone().requires_grad_()
        g = torch.randn_like(x)
        fast_apply_rope(xg, cos, sin, layout=layout, compile=True).backward(g)
        torch.testing.assert_close(xg.grad, _exact_rotation(g, cos, sin, layout, inverse=True).float(), atol=1e-6, rtol=0)


@pytest.mark.slow
def test_bf16_half_pair_kernel_is_chosen_by_measurement_once(monkeypatch):
    """bfloat16 half pairs: the first large enough compiled call times the int32-word kernel and
    the plain two-buffer kernel (each compiled, then timed ``_WORDS_ROUNDS`` times) and keeps the
    words unless the plain one is faster by more than ``_WORDS_MARGIN``, for out= and in place;
    both equal the reference bit for bit."""
    monkeypatch.setattr(fast_rope, "_words_choice", {})
    monkeypatch.setattr(fast_rope, "WORDS_DECIDE_NUMEL", 4 * 64 * 32)
    x = torch.randn(1, 4, 64, 32).bfloat16()  # [b, h, s, hd]: 8192 elements, head-grouped views
    cos, sin = _tables(torch.arange(100, 164), 32, "half")
    cos_h, sin_h = fast_rope._half_tables(cos, sin, "half")
    ref = F.apply_rope(x, cos, sin, layout="half")
    chosen, real = [], fast_rope._run_compiled

    def spy(*args):
        chosen.append(args[6] if len(args) > 6 else None)
        return real(*args)
    monkeypatch.setattr(fast_rope, "_run_compiled", spy)
    out = torch.full_like(x, float("nan"))
    fast_apply_rope(x, cos, sin, layout="half", out=out, compile=True)
    assert fast_rope.compile_available(), fast_rope._compile_error
    assert torch.equal(out, ref)
    key = ("cpu", torch.get_num_threads())
    assert key in fast_rope._words_choice
    rounds = fast_rope._WORDS_ROUNDS + 1  # each compiled, then timed
    assert sorted(c for c in chosen if c is not None) == [False] * rounds + [True] * rounds
    chosen.clear()
    fast_apply_rope(x, cos, sin, layout="half", out=out, compile=True)
    assert chosen.count(True) + chosen.count(False) == 0  # decided once
    # the margin: words 4% slower than the plain kernel are kept, 6% slower are not
    for slower, kept in ((1.04, True), (1.06, False)):
        monkeypatch.setattr(fast_rope, "_words_choice", {})
        # the start of each call (and its end, from the second round on), words first: the words
        # take `slower` times the plain kernel
        clock = iter([0.0, 0.0] + [t for r in range(1, rounds) for t in (0.0, slower * (r + 1), 0.0, float(r + 1))])
        monkeypatch.setattr(fast_rope, "_clock", lambda clock=clock: next(clock))
        assert fast_rope._words_win(x, cos_h, sin_h) is kept
        assert fast_rope._words_choice == {key: kept}
    for words, kinds in ((True, ("bf16_halves", "bf16_halves_")), (False, ("halves", "halves_"))):
        o = torch.full_like(x, float("nan"))
        assert fast_rope._run_compiled(x, cos_h, sin_h, o, "half", False, words) is not None
        assert torch.equal(o, ref)
        fast_rope._words_choice[key] = words
        y = x.clone()
        fast_apply_rope_(y, cos, sin, layout="half", compile=True)  # in place follows the choice
        assert torch.equal(y, ref)
        assert {k[0] for k in fast_rope._compiled if k[2][0] == torch.bfloat16} >= set(kinds)


# ---------------------------------------------------------------------------------------------- biases


def test_toeplitz_layout_and_out():
    values = torch.arange(2 * 6, dtype=torch.float32).view(2, 6)  # [h, sq + sk - 1] with sq=2, sk=5
    out = torch.empty(2, 2, 5)
    assert fast_bias.toeplitz(values, 2, 5, out=out) is out
    expected = torch.stack([torch.stack([values[h, j - i + 1] for i in range(2) for j in range(5)]).view(2, 5)
                            for h in range(2)])
    assert torch.equal(out, expected)
    with pytest.raises(ValueError, match=r"values must be \[h, sq \+ sk - 1\]"):
        fast_bias.toeplitz(values, 3, 5)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize(("sq", "sk", "q0", "k0"), [(7, 7, 0, 0), (3, 11, 8, 0), (5, 4, 2, 9)])
def test_alibi_range_equals_reference(bidirectional, sq, sk, q0, k0):
    slopes = F.alibi_slopes(6)
    q, k = torch.arange(q0, q0 + sq), torch.arange(k0, k0 + sk)
    ref = F.alibi_bias(slopes, q, k, bidirectional=bidirectional)
    got = fast_bias.alibi_bias_range(slopes, sq, sk, q_offset=q0, k_offset=k0, bidirectional=bidirectional)
    assert torch.equal(got, ref)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize(("sq", "sk", "q0", "k0"), [(300, 300, 0, 0), (4, 200, 196, 0)])
def test_t5_range_equals_bucket_lookup(bidirectional, sq, sk, q0, k0):
    """Distances past max_distance (128) and both bucket halves are covered."""
    table = torch.randn(32, 4)  # [num_buckets, h]
    q, k = torch.arange(q0, q0 + sq), torch.arange(k0, k0 + sk)
    buckets = F.t5_relative_bucket(F.relative_positions(q, k), bidirectional=bidirectional)  # [sq, sk]
    ref = table[buckets].permute(2, 0, 1)  # [h, sq, sk]
    got = fast_bias.t5_bias_range(table, sq, sk, q_offset=q0, k_offset=k0, bidirectional=bidirectional)
    assert torch.equal(got, ref)


@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_scheme_cache_equals_uncached_over_offsets_and_lengths(name):
    enc = posenc.create(name, num_heads=4, bidirectional=True)
    state_before = set(enc.state_dict())
    with torch.no_grad():
        for sq, sk, q0 in [(5, 5, 0), (5, 5, 0), (3, 9, 6), (9, 9, 2), (1, 12, 11)]:
            q, k = torch.arange(q0, q0 + sq), torch.arange(sk)
            got = enc.bias(q, k)
            assert got is fast_bias.cached_bias(enc, q, k)  # the second call is served from the cache
            if name == "alibi":
                ref = F.alibi_bias(enc.slopes.float(), q, k, bidirectional=True)
            else:
                ref = enc.relative_attention_bias(F.t5_relative_bucket(F.relative_positions(q, k))).movedim(-1, -3)
            assert torch.equal(got, ref)
    assert set(enc.state_dict()) == state_before  # the cache is not state


def test_t5_cache_follows_weight_updates_and_training_gets_gradients():
    enc = posenc.create("t5", num_heads=2)
    q = torch.arange(6)
    with torch.no_grad():
        first = enc.bias(q, q).clone()
        enc.relative_attention_bias.weight.add_(1.0)  # an optimizer step, in place
        assert torch.equal(enc.bias(q, q), first + 1.0)
    assert fast_bias.cached_bias(enc, q, q) is None  # grad wanted: the reference path
    enc.bias(q, q).sum().backward()
    counts = torch.bincount(F.t5_relative_bucket(F.relative_positions(q, q)).flatten(), minlength=32)
    assert torch.equal(enc.relative_attention_bias.weight.grad, counts[:, None].float().expand(32, 2))


def test_batched_or_scattered_positions_take_the_reference_path():
    enc = posenc.create("alibi", num_heads=2, bidirectional=True)
    assert fast_bias.cached_bias(enc, torch.tensor([0, 2, 3]), torch.arange(4)) is None
    assert fast_bias.cached_bias(enc, torch.arange(4)[None].expand(2, 4), torch.arange(4)) is None
    scattered = torch.tensor([0, 2, 3])
    assert torch.equal(enc.bias(scattered, scattered), F.alibi_bias(enc.slopes.float(), scattered, scattered, bidirectional=True))


def test_bias_build_is_cheap_relative_to_the_bias_itself():
    """A property that catches an O(h L^2) Python loop or a per-pair bucket computation: the
    Toeplitz build of T5 evaluates the bucket function on sq + sk - 1 distances only."""
    calls = []
    original = fast_bias.t5_relative_bucket

    def counting(rel, **kw):
        calls.append(rel.numel())
        return original(rel, **kw)

    fast_bias.t5_relative_bucket = counting
    try:
        fast_bias.t5_bias_range(torch.randn(32, 2), 64, 80)
    finally:
        fast_bias.t5_relative_bucket = original
    assert calls == [64 + 80 - 1]


def test_auto_dispatch_small_eager_large_eager_without_compiler(monkeypatch):
    """compile="auto": small inputs never compile; half pairs take the eager pass (RopeFunction,
    whole-tensor ops), bf16 interleaved pairs too; a large one, when compiling is
    not possible here, the eager fast pass; all equal to the reference, gradients too."""
    cos, sin = _tables(256, 64, "half")
    small = torch.randn(1, 2, 256, 64, requires_grad=True)
    monkeypatch.setattr(fast_rope, "_invoke", lambda *a: pytest.fail("small inputs must not compile"))
    y = fast_apply_rope(small, cos, sin)
    assert "RopeFunction" in type(y.grad_fn).__name__
    torch.testing.assert_close(y, F.apply_rope(small, cos, sin), atol=1e-6, rtol=0)
    g = torch.randn_like(small)
    y.backward(g)
    torch.testing.assert_close(small.grad, _exact_rotation(g, cos, sin, "half", inverse=True).float(), atol=1e-6, rtol=0)
    cos_i, sin_i = _tables(256, 64, "interleaved")
    small_bf16 = small.detach().to(torch.bfloat16).requires_grad_()
    assert "RopeFunction" in type(fast_apply_rope(small_bf16, cos_i, sin_i, layout="interleaved").grad_fn).__name__
    monkeypatch.setattr(fast_rope, "_compile_error", "no compiler (simulated)")
    large = torch.randn(1, 64, 256, 64, requires_grad=True)  # 2^20 elements
    y = fast_apply_rope(large, cos, sin)
    assert "RopeFunction" in type(y.grad_fn).__name__
    torch.testing.assert_close(y, F.apply_rope(large, cos, sin), atol=1e-6, rtol=0)


# ------------------------------------------------------------------- bfloat16 pairs as int32 words


def _rounding_cases() -> torch.Tensor:
    """float32 values whose bfloat16 rounding is delicate: exact ties (both parities), just above and
    below a tie, overflow to inf at the bf16 maximum, infinities, signed zeros, subnormals, random bits."""
    g = torch.Generator().manual_seed(0)
    base = torch.randint(-(2**15), 2**15, (512,), generator=g, dtype=torch.int32) << 16  # bf16 values as f32 bits
    base = base[((base >> 23) & 0xFF) != 0xFF]  # drop inf/nan patterns from the random part
    ties = base | 0x8000  # exactly half an ulp above: round to even
    near = torch.cat([base | 0x7FFF, base | 0x8001, base | 0x0001])
    rand = torch.randint(-(2**31), 2**31 - 1, (2048,), generator=g, dtype=torch.int32)
    rand = rand[((rand >> 23) & 0xFF) != 0xFF]
    special = torch.tensor([0x7F7F8000, 0x7F7FFFFF, 0x7F7F7FFF, 0xFF7F8000 - 2**32, 0x7F800000, 0xFF800000 - 2**32,
                            0, 0x80000000 - 2**32, 0x00008000, 0x00018000, 0x007FFFFF, 0x3F808000, 0x3F818000],
                           dtype=torch.int64).to(torch.int32)
    return torch.cat([ties, near, rand, special]).view(torch.float32)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_bf16_pair_kernel_rounds_like_torch(compiled):
    """With x = (1, 0) per pair, cos = v and sin = 0 the rotation is exactly (v, 0): the kernel's
    bit-level round-to-nearest-even must give ``v.to(torch.bfloat16)`` for every v (ties, overflow
    to inf, subnormals, signed zeros), run eagerly or compiled."""
    v = _rounding_cases()  # [m] float32
    m = v.numel()
    x = torch.zeros(1, 1, m, 2, dtype=torch.bfloat16)  # [b, h, s = m, hd = 2]: one pair per row
    x[..., 0] = 1.0
    cos, sin = v.reshape(m, 1), torch.zeros(m, 1)  # [s, n = 1]
    out = torch.full_like(x, float("nan"))
    kernel = fast_rope._get_compiled("bf16_pairs") if compiled else fast_rope._rope_kernel_bf16_pairs
    kernel(fast_rope._int32_pairs(x), cos, sin, fast_rope._int32_pairs(out), False)
    expected = v.to(torch.bfloat16)
    assert torch.equal(out[0, 0, :, 0].view(torch.int16), expected.view(torch.int16))
    odd = (0.0 * v).to(torch.bfloat16)  # 0 * v: NaN for v = inf, -0 for negative v
    torch.testing.assert_close(out[0, 0, :, 1], odd, atol=0, rtol=0, equal_nan=True)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_bf16_half_word_kernel_rounds_like_torch(compiled):
    """The half-pair word kernel on rows x = (1, 1 | 0, 0) with cos = (v, v reversed) and sin = 0:
    the first half is exactly cos, so the even feature (low bits) must be ``v.to(torch.bfloat16)``
    and the odd one (high bits) the same for v reversed, for every rounding case; the second half is
    ``0 * cos``."""
    v = _rounding_cases()  # [m] float32
    m = v.numel()
    x = torch.zeros(1, 1, m, 4, dtype=torch.bfloat16)  # [b, h, s = m, hd = 4]: one word per half
    x[..., :2] = 1.0
    cos = torch.stack((v, v.flip(0)), dim=-1)  # [s, n = 2]: even feature, odd feature
    tables = fast_rope._evenodd_tables(cos, torch.zeros(m, 2))  # ce, co, se, so: [s, 1] each
    out = torch.full_like(x, float("nan"))
    w, wout = fast_rope._int32_pairs(x), fast_rope._int32_pairs(out)  # [1, 1, m, 2]
    kernel = fast_rope._get_compiled("bf16_halves") if compiled else fast_rope._rope_kernel_bf16_halves
    kernel(w[..., :1], w[..., 1:], *tables, wout[..., :1], wout[..., 1:], False)
    for feature, values in ((0, v), (1, v.flip(0))):
        assert torch.equal(out[0, 0, :, feature].view(torch.int16), values.to(torch.bfloat16).view(torch.int16))
        torch.testing.assert_close(out[0, 0, :, 2 + feature], (0.0 * values).to(torch.bfloat16), atol=0, rtol=0,
                                   equal_nan=True)


@pytest.mark.slow
@pytest.mark.parametrize(("rotary_dim", "heads", "kinds"), [(28, 6, {"bf16_halves", "bf16_halves_"}),
                                                           (26, 4, {"halves", "halves_"})])
def test_compiled_bf16_half_pairs_as_words(rotary_dim, heads, kinds):
    """bfloat16 half pairs go through the int32 word kernels when each half is whole words (an even
    number of pairs; else the float kernels): out=, in place and the backward bit for bit the
    reference, NaN and inf where it has them, partial rotary, two heads per group."""
    x = torch.randn(2, heads, 33, 32).to(torch.bfloat16)  # [b, h, s, hd]
    x[0, 0, 0, 0], x[1, 2, 5, 3], x[0, 1, 7, 20] = float("nan"), float("inf"), -float("inf")
    cos, sin = _tables(torch.arange(50, 83), rotary_dim, "half")
    fast_rope._compiled.clear()
    out = torch.full_like(x, 7.0)
    fast_apply_rope(x, cos, sin, out=out, compile=True)
    y = x.clone()
    fast_apply_rope_(y, cos, sin, compile=True)
    xg = x.clone().requires_grad_()
    fast_apply_rope(xg, cos, sin, compile=True).backward(x)
    assert {key[0] for key in fast_rope._compiled} == kinds
    forward, inverse = F.apply_rope(x, cos, sin), F.apply_rope(x, cos, -sin)
    for got, ref in ((out, forward), (y, forward), (xg.grad, inverse)):
        assert torch.equal(got.isnan(), ref.isnan())
        assert torch.equal(got.nan_to_num(), ref.nan_to_num())


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("rotary_dim", "per_row"), [(32, False), (24, True)])
def test_compiled_pass_in_blocks_of_rows(layout, dtype, rotary_dim, per_row):
    """Sequences of whole blocks (``SEQ_BLOCK`` rows, two or more) compile as blocks of rows
    outside the head groups (``[b, s/B, h/g, B, g, hd]``): out=, in place and the backward equal
    the reference (bfloat16 bit for bit), full and partial rotary, shared and per-row tables."""
    s = 3 * fast_rope.SEQ_BLOCK
    x = torch.randn(2, 4, s, 32).to(dtype)  # [b, h, s, hd]
    x[1, 2, 100, 3] = float("inf")
    positions = torch.stack((torch.arange(7, 7 + s), torch.arange(40, 40 + s))) if per_row else torch.arange(7, 7 + s)
    cos, sin = _tables(positions, rotary_dim, layout)  # [s, r] or [b, s, r]
    if per_row:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [b, 1, s, r]
    fast_rope._compiled.clear()
    out = torch.full_like(x, float("nan"))
    fast_apply_rope(x, cos, sin, layout=layout, out=out, compile=True)
    y = x.clone()
    fast_apply_rope_(y, cos, sin, layout=layout, compile=True)
    xg = x.clone().requires_grad_()
    fast_apply_rope(xg, cos, sin, layout=layout, compile=True).backward(x)
    if layout == "half" or dtype == torch.bfloat16:  # float32 interleaved pairs: the complex multiply
        assert any(key[2][4][0] == 6 for key in fast_rope._compiled), list(fast_rope._compiled)  # 6-dim views
    forward, inverse = F.apply_rope(x, cos, sin, layout=layout), F.apply_rope(x, cos, -sin, layout=layout)
    for got, ref in ((out, forward), (y, forward), (xg.grad, inverse)):
        assert torch.equal(got.isnan(), ref.isnan())
        if dtype == torch.bfloat16:
            assert torch.equal(got.nan_to_num(), ref.nan_to_num())
        else:
            torch.testing.assert_close(got.nan_to_num(), ref.nan_to_num(), rtol=1e-6, atol=1e-6)


def _reinterpret_a(t):
    return (t.view(torch.int32) & -65536).view(torch.float32) * 3.0  # float32 -> int32 -> float32


def _reinterpret_b(t):
    return (t.view(torch.int32) & -65536).view(torch.float32) * 3.0  # the same, its own Dynamo cache entry


def test_vector_bitcasts_write_one_vector_cast_and_restore_inductor():
    """Under ``vector_bitcasts`` Inductor writes float32 <-> int32 reinterpretations as
    ``at::vec::cast`` (no scalar ``c10::bit_cast`` loop), with the same bits; outside it, and after
    an exception inside it, Inductor's own code generator is back."""
    from torch._inductor.codegen.cpp import CppVecOverrides
    from torch._inductor.utils import run_and_get_code

    from posenc.functional._rope_pairs import vector_bitcasts

    theirs = CppVecOverrides.__dict__["to_dtype_bitcast"]
    x = torch.randn(1000)  # 62 vectors and a tail of 8
    expected = _reinterpret_a(x)
    with torch._inductor.config.patch(fx_graph_cache=False):
        with vector_bitcasts():
            got, (code,) = run_and_get_code(torch.compile(_reinterpret_a, fullgraph=True), x)
        assert CppVecOverrides.__dict__["to_dtype_bitcast"] is theirs
        plain, (code_plain,) = run_and_get_code(torch.compile(_reinterpret_b, fullgraph=True), x)
    assert "at::vec::cast<int32_t>" in code and "at::vec::cast<float>" in code and "c10::bit_cast" not in code
    assert "c10::bit_cast" in code_plain and "at::vec::cast<" not in code_plain
    assert torch.equal(got.view(torch.int32), expected.view(torch.int32))
    assert torch.equal(plain.view(torch.int32), expected.view(torch.int32))
    with pytest.raises(KeyError), vector_bitcasts(), vector_bitcasts():
        assert CppVecOverrides.__dict__["to_dtype_bitcast"] is not theirs
        raise KeyError("inside")
    assert CppVecOverrides.__dict__["to_dtype_bitcast"] is theirs


def test_bf16_pair_kernel_nan_and_inf_follow_the_reference():
    """NaN and inf inputs give NaN/inf where the reference gives them (NaN sign bits may differ)."""
    x = torch.tensor([[1.0, float("nan")], [float("inf"), 2.0], [3.0, -float("inf")], [1.0, 2.0]],
                     dtype=torch.bfloat16)[None, None]  # [1, 1, s = 4, hd = 2]
    cos, sin = _tables(torch.arange(4), 2, "interleaved")
    ref = F.apply_rope(x, cos, sin, layout="interleaved")
    out = torch.empty_like(x)
    cos_h, sin_h = fast_rope._paired_tables(*fast_rope._half_tables(cos, sin, "interleaved"))
    fast_rope._rope_kernel_bf16_pairs(fast_rope._int32_pairs(x), cos_h, sin_h, fast_rope._int32_pairs(out), False)
    torch.testing.assert_close(out, ref, atol=0, rtol=0, equal_nan=True)


def test_int32_pair_view_only_where_it_is_exact():
    x = torch.randn(2, 3, 5, 8).to(torch.bfloat16)
    assert fast_rope._int32_pairs(x).shape == (2, 3, 5, 4)
    assert fast_rope._int32_pairs(x.float()) is None  # not bf16
    assert fast_rope._int32_pairs(x[..., 1:7]) is None  # odd offset: pairs would straddle words
    assert fast_rope._int32_pairs(x.transpose(-1, -2)) is None  # feature dim not unit-stride
    assert fast_rope._int32_pairs(torch.randn(3, 5).to(torch.bfloat16)) is None  # odd width


@pytest.mark.slow
@pytest.mark.parametrize("rotary_dim", [32, 24])
def test_compiled_bf16_interleaved_every_variant_bit_exact(rotary_dim):
    """compile="auto" sends large bf16 interleaved inputs to the compiled int32-pair kernel: out=,
    in place, offsets, partial rotary and a misaligned view (generic kernel) all equal the reference
    bit for bit; the backward is the inverse rotation to one bf16 rounding."""
    x = torch.randn(1, 2, 40, 32).to(torch.bfloat16)
    cos, sin = _tables(torch.arange(5000, 5040), rotary_dim, "interleaved")
    ref = F.apply_rope(x, cos, sin, layout="interleaved")
    out = torch.full_like(x, float("nan"))
    fast_apply_rope(x, cos, sin, layout="interleaved", out=out, compile=True)
    assert fast_rope.compile_available(), fast_rope._compile_error
    assert {key[0] for key in fast_rope._compiled} >= {"bf16_pairs"}  # the int32-pair kernel ran
    torch.testing.assert_close(out, ref, atol=0, rtol=0)
    y = x.clone()
    fast_apply_rope_(y, cos, sin, layout="interleaved", compile=True)
    assert {key[0] for key in fast_rope._compiled} >= {"bf16_pairs_"}  # in place, no scratch
    torch.testing.assert_close(y, ref, atol=0, rtol=0)
    wide = torch.randn(1, 2, 40, 33).to(torch.bfloat16)  # x = wide[..., 1:]: odd offset, no int32 view
    xs = wide[..., 1:]
    out_s = torch.empty_like(xs)
    fast_apply_rope(xs, cos, sin, layout="interleaved", out=out_s, compile=True)
    torch.testing.assert_close(out_s, F.apply_rope(xs, cos, sin, layout="interleaved"), atol=0, rtol=0)
    xg = x.clone().requires_grad_()
    g = torch.randn_like(x)
    fast_apply_rope(xg, cos, sin, layout="interleaved", compile=True).backward(g)
    exact = _exact_rotation(g, cos, sin, "interleaved", inverse=True)
    assert (xg.grad.double() - exact).abs().max().item() <= 2 ** -8 * exact.abs().max().item()


def test_paired_tables_cache_equals_uncached_and_follows_edits():
    """The cached [s, 2, n] pairing of the tables: equal to its inputs over lengths and offsets,
    one buffer per table (a hit reuses it), rebuilt after an in-place edit of a table."""
    for start, length in ((0, 16), (7, 33), (1000, 5)):
        cos, sin = _tables(torch.arange(start, start + length), 24, "interleaved")
        cos_h, sin_h = fast_rope._half_tables(cos, sin, "interleaved")  # stride-2 views
        c2, s2 = fast_rope._paired_tables(cos_h, sin_h)
        assert torch.equal(c2, cos_h) and torch.equal(s2, sin_h)
        assert c2.stride(-1) == s2.stride(-1) == 1 and s2.data_ptr() == c2.data_ptr() + 12 * c2.element_size()
        assert fast_rope._paired_tables(cos_h, sin_h)[0].data_ptr() == c2.data_ptr()  # cache hit
        cos.mul_(0.5)  # bumps the version: the pairing is rebuilt
        c3, _ = fast_rope._paired_tables(cos_h, sin_h)
        assert torch.equal(c3, cos_h) and not torch.equal(c3, c2)


def test_head_group_choice():
    """Heads are grouped (4, else 2) only for head-major tensors with tables shared by all heads."""
    x, tab = torch.empty(1, 32, 16, 8), torch.empty(16, 4)
    assert fast_rope._head_group(x, x, tab) == 4
    assert fast_rope._head_group(x[:, :6], x[:, :6], tab) == 2
    assert fast_rope._head_group(x[:, :3], x[:, :3], tab) == 1
    assert fast_rope._head_group(x, x, torch.empty(1, 32, 16, 4)) == 1  # per-head tables
    assert fast_rope._head_group(x, x, torch.empty(1, 1, 16, 4)) == 4
    seq_major = torch.empty(1, 16, 32, 8).transpose(1, 2)  # [b, h, s, hd] view of [b, s, h, hd]
    assert fast_rope._head_group(seq_major, x, tab) == 1
    assert fast_rope._group_views(x, 4).shape == (1, 8, 16, 4, 8)


@pytest.mark.slow
@pytest.mark.parametrize("heads", [3, 6, 7, 8])
@pytest.mark.parametrize(("layout", "dtype"), [("half", torch.float32), ("interleaved", torch.bfloat16),
                                               ("half", torch.bfloat16)])
def test_compiled_grouped_heads_equal_reference(heads, layout, dtype):
    """The head-grouped compiled pass (g = 1, 2, 4; 7 heads split 4 + 3) equals the reference,
    out=, in place and inverse."""
    x = torch.randn(2, heads, 19, 16).to(dtype)
    cos, sin = _tables(torch.arange(300, 319), 16, layout)
    out = torch.empty_like(x)
    fast_apply_rope(x, cos, sin, layout=layout, out=out, compile=True)
    atol = 1e-6 if dtype == torch.float32 else 0  # bf16: the same single rounding as the reference
    ref = F.apply_rope(x, cos, sin, layout=layout)
    torch.testing.assert_close(out, ref, atol=atol, rtol=0)
    y = x.clone()
    fast_apply_rope_(y, cos, sin, layout=layout, compile=True)
    torch.testing.assert_close(y, ref, atol=atol, rtol=0)
    back = torch.empty_like(x)
    fast_rope._rotate_into(out, *fast_rope._half_tables(cos, sin, layout), back, layout, True, True)
    tol = 1e-6 if dtype == torch.float32 else 2 ** -7 * x.abs().max().item()
    assert (back.double() - x.double()).abs().max().item() <= tol


# ---------------------------------------------------------------------------------------------- half pairs: two-buffer kernels


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rotary_dim", [32, 24])
def test_compiled_half_pairs_in_place_and_out_bit_exact(dtype, rotary_dim):
    """Half pairs in place run one compiled pass over the two halves as separate buffers
    (``halves_``; bfloat16 as int32 words, ``bf16_halves_``); out= takes the two-output kernel for
    16-bit dtypes (``halves``, ``bf16_halves``) and the one-output kernel for float32 (``rope``).
    All equal the reference (16-bit: bit for bit), with partial rotary, an offset and head-grouped
    views; the inverse undoes the rotation."""
    x = torch.randn(2, 4, 40, 32).to(dtype)  # [b, h, s, hd]; 4 heads: grouped views
    cos, sin = _tables(torch.arange(300, 340), rotary_dim, "half")
    ref = F.apply_rope(x, cos, sin, layout="half")
    tol = {"atol": 1e-6, "rtol": 0} if dtype == torch.float32 else {"atol": 0, "rtol": 0}
    fast_rope._compiled.clear()
    y = x.clone()
    assert fast_apply_rope_(y, cos, sin, layout="half", compile=True) is y
    assert fast_rope.compile_available(), fast_rope._compile_error
    torch.testing.assert_close(y, ref, **tol)
    out = torch.full_like(x, float("nan"))
    fast_apply_rope(x, cos, sin, layout="half", out=out, compile=True)
    torch.testing.assert_close(out, ref, **tol)
    kinds = {key[0] for key in fast_rope._compiled}
    assert kinds == {torch.float32: {"halves_", "rope"}, torch.float16: {"halves_", "halves"},
                     torch.bfloat16: {"bf16_halves_", "bf16_halves"}}[dtype]
    back = y.clone()
    fast_rope._rotate_into(back, *fast_rope._half_tables(cos, sin, "half"), back, "half", True, True)
    bound = 1e-6 if dtype == torch.float32 else 2 ** -6 * x.abs().max().item()
    assert (back.double() - x.double()).abs().max().item() <= bound


@pytest.mark.slow
def test_halves_without_a_disjoint_alias_fall_back_exactly(monkeypatch):
    """Where the halves cannot be handed over as separate buffers (no DLPack for a dtype or
    device), in place goes through the scratch path and out= through the one-output kernel."""
    monkeypatch.setattr(fast_rope, "_disjoint_alias", lambda t: None)
    x = torch.randn(1, 4, 24, 16).to(torch.bfloat16)
    cos, sin = _tables(torch.arange(24), 16, "half")
    ref = F.apply_rope(x, cos, sin, layout="half")
    y = x.clone()
    fast_apply_rope_(y, cos, sin, layout="half", compile=True)
    out = fast_apply_rope(x, cos, sin, layout="half", out=torch.empty_like(x), compile=True)
    torch.testing.assert_close(y, ref, atol=0, rtol=0)
    torch.testing.assert_close(out, ref, atol=0, rtol=0)


def test_disjoint_alias_shares_memory_not_storage():
    x = torch.randn(2, 8)
    alias = fast_rope._disjoint_alias(x[:, 4:])
    assert alias.data_ptr() == x[:, 4:].data_ptr() and alias.stride() == (8, 1)
    assert alias.untyped_storage()._cdata != x.untyped_storage()._cdata  # the compiler sees two buffers
    alias.fill_(7.0)
    assert torch.equal(x[:, 4:], torch.full((2, 4), 7.0))


@pytest.mark.slow
def test_one_compile_per_variant_serves_every_length():
    """Each (kernel, dtype, layout, direction, static shape) variant compiles once with the
    sequence dim symbolic: new lengths reuse it, and compiling a bfloat16 variant afterwards does
    not make the float32 one recompile."""
    from torch._dynamo.utils import counters

    def run(L, dtype):
        x = torch.randn(1, 4, L, 16).to(dtype)
        cos, sin = _tables(torch.arange(L), 16, "half")
        out = fast_apply_rope(x, cos, sin, layout="half", out=torch.empty_like(x), compile=True)
        torch.testing.assert_close(out, F.apply_rope(x, cos, sin, layout="half"), atol=1e-6, rtol=0)

    fast_rope._compiled.clear()
    run(64, torch.float32)
    graphs = counters["stats"]["unique_graphs"]
    for L in (96, 130, 257):
        run(L, torch.float32)
    assert counters["stats"]["unique_graphs"] == graphs
    run(50, torch.bfloat16)
    assert counters["stats"]["unique_graphs"] == graphs + 1
    run(77, torch.float32)
    run(81, torch.bfloat16)
    assert counters["stats"]["unique_graphs"] == graphs + 1
    assert len(fast_rope._compiled) == 2


@pytest.mark.slow
def test_warmup_compiles_what_later_calls_use():
    """After ``warmup`` a call at another length, into out=, in place or backward, compiles nothing
    new: every variant it needs (the bf16 half-pair word kernels here) was built ahead of time."""
    fast_rope._compiled.clear()
    assert fast_rope.warmup(32, num_heads=4, dtypes=(torch.bfloat16,), layouts=("half",)) > 0
    built = set(fast_rope._compiled)
    assert {key[0] for key in built} == {"bf16_halves", "bf16_halves_"}
    x = torch.randn(1, 4, 300, 32).to(torch.bfloat16)  # [b, h, s, hd]
    cos, sin = _tables(torch.arange(300), 32, "half")
    fast_apply_rope(x, cos, sin, out=torch.empty_like(x), compile=True)
    fast_apply_rope_(x.clone(), cos, sin, compile=True)
    xg = x.clone().requires_grad_()
    fast_apply_rope(xg, cos, sin, compile=True).backward(torch.randn_like(x))  # a dense gradient
    assert set(fast_rope._compiled) == built


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_eager_half_step_changes_no_bits(dtype):
    """Every step of the eager half-pair pass (rows per op, which its cache tuning and the thread
    count set) gives the same bits, out= and in place, with ragged last steps."""
    x = torch.randn(3, 700, 128).to(dtype)  # [heads, s, hd]: 700 rows are ragged for each step
    cos, sin = _tables(torch.arange(700), 128, "half")
    cos_h, sin_h = fast_rope._half_tables(cos, sin, "half")
    ref = F.apply_rope(x, cos, sin, layout="half")
    steps = [c << 10 for c in (128, 256, 512, 1024, 2048)]
    results = []
    for step in [64 * 128 * 4, *steps]:  # 64 rows, then 256-4096 (one head or more per step)
        out = torch.full_like(x, float("nan"))
        assert _rope_eager._eager_half(x, cos_h, sin_h, out, False, step)
        y = x.clone()
        assert _rope_eager._eager_half(y, cos_h, sin_h, y, False, step)
        results += [out, y]
    for got in results:
        assert torch.equal(got, results[0])
    # bfloat16: within one unit in the last place (the fused multiply-add; see _eager_whole)
    torch.testing.assert_close(results[0], ref, **({"atol": 0, "rtol": 2 ** -7} if dtype == torch.bfloat16 else {"atol": 1e-6, "rtol": 0}))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("tables", ["shared", "per-batch", "per-head"])
def test_eager_half_pairs_head_by_head(dtype, tables, monkeypatch):
    """The eager half-pair pass (head by head, cache-sized row steps, straight into out or through
    a float32 scratch) with tables shared, per batch ``[b, 1, s, r]`` or per head, out= and in
    place, more rows than one step, against the reference."""
    b, h, s, hd, r = 2, 3, 40, 16, 12
    x = torch.randn(b, h, s, hd).to(dtype)
    shape = {"shared": (s,), "per-batch": (b, 1, s), "per-head": (b, h, s)}[tables]
    positions = torch.arange(int(torch.tensor(shape).prod())).reshape(shape) * 3
    cos, sin = _tables(positions, r, "half", torch.float64 if dtype == torch.float64 else torch.float32)
    ref = F.apply_rope(x, cos, sin, layout="half")
    tol = {"atol": 0, "rtol": 0} if dtype == torch.bfloat16 else {"atol": 1e-6 if dtype == torch.float32 else 1e-12, "rtol": 0}
    monkeypatch.setattr(_rope_eager, "_EAGER_HALF_STEP_BYTES", 7 * r * 4)  # steps of 7 float32 rows per thread: ragged
    monkeypatch.setattr(_rope_eager, "_EAGER_CHUNK_BYTES", 64)  # too large for the whole-tensor pass
    real, calls = _rope_eager._eager_half, []

    def spy(*args):
        calls.append(args[0].shape)
        return real(*args)
    monkeypatch.setattr(_rope_eager, "_eager_half", spy)

    def not_this_path(*args):
        raise AssertionError("half pairs should take the head-by-head pass")
    monkeypatch.setattr(_rope_eager, "_eager_chunked", not_this_path)
    monkeypatch.setattr(_rope_eager, "_eager_whole", not_this_path)
    out = torch.full_like(x, float("nan"))
    fast_apply_rope(x, cos, sin, layout="half", out=out, compile=False)
    y = x.clone()
    fast_apply_rope_(y, cos, sin, layout="half", compile=False)
    torch.testing.assert_close(out, ref, **tol)
    torch.testing.assert_close(y, ref, **tol)
    assert torch.equal(out[..., r:], x[..., r:])
    assert len(calls) == 2  # out= and in place both went this way


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("tables", ["shared", "per-batch"])
def test_eager_whole_tensor_pass_for_accelerators(layout, dtype, inplace, tables):
    """The accelerators' eager pass (:func:`_eager_whole`: whole-tensor kernels, no cache-sized
    steps), run here on the CPU: forward and inverse, partial rotary, shared and per-batch tables,
    against the reference (16-bit: within one unit in the last place; the fused multiply-add of
    ``addcmul`` may round the float32 value differently once in a while)."""

    x = torch.randn(2, 3, 40, 32).to(dtype)
    positions = torch.arange(5, 45) if tables == "shared" else torch.stack([torch.arange(5, 45), torch.arange(40)])[:, None]
    for rotary_dim, inverse in ((32, False), (24, True)):
        cos, sin = _tables(positions, rotary_dim, layout, torch.float64 if dtype == torch.float64 else torch.float32)
        ref = F.apply_rope(x, cos, -sin if inverse else sin, layout=layout)
        out = x.clone() if inplace else x.clone().fill_(float("nan"))
        if not inplace:
            out[..., rotary_dim:] = x[..., rotary_dim:]
        _rope_eager._eager_whole(out if inplace else x, *fast_rope._half_tables(cos, sin, layout), out, layout, inverse)
        if dtype in (torch.float32, torch.float64):
            torch.testing.assert_close(out, ref, atol=1e-6, rtol=0)
        else:
            ulp = 2 ** -7 if dtype == torch.bfloat16 else 2 ** -10
            torch.testing.assert_close(out.float(), ref.float(), atol=1e-6, rtol=ulp)


_TRITON_SCRIPT = r"""
import itertools, torch
from posenc import functional as F
from posenc.functional import _rope_triton, fast_rope
assert _rope_triton.available()
for layout, dtype, (rd, inverse), inplace, tables, view in itertools.product(
        ("half", "interleaved"), (torch.float32, torch.float16, torch.bfloat16), ((32, False), (24, True)),
        (False, True), ("shared", "per-batch", "per-head"), ("contiguous", "qkv")):
    b, h, s, hd = 2, 3, 40, 32
    if view == "qkv":  # q as posenc.Attention makes it: a permuted view of the fused projection
        x = torch.randn(b, s, 3, h, hd).to(dtype).permute(2, 0, 3, 1, 4)[0]
    else:
        x = torch.randn(b, h, s, hd).to(dtype)
    shape = {"shared": (s,), "per-batch": (b, 1, s), "per-head": (b, h, s)}[tables]
    positions = torch.arange(int(torch.tensor(shape).prod())).reshape(shape) * 3
    inv_freq, _ = F.rope_inv_freq(rd)
    cos, sin = F.rope_cos_sin(positions, inv_freq, layout=layout)
    ref = F.apply_rope(x, cos, -sin if inverse else sin, layout=layout)
    out = x.clone() if inplace else torch.full_like(x, float("nan"))
    assert _rope_triton.rotate(out if inplace else x, *fast_rope._half_tables(cos, sin, layout), out, layout, inverse)
    if dtype == torch.bfloat16:  # the interpreter truncates float32 -> bfloat16 (GPUs round to nearest)
        torch.testing.assert_close(out.float(), ref.float(), atol=1e-6, rtol=2 ** -7)
    else:
        assert torch.equal(out, ref), (layout, dtype, rd, inverse, inplace, tables, view)
    if tables == "per-head" and dtype != torch.bfloat16:  # a Launch made once serves a new x and out
        launch = _rope_triton.launch(out if inplace else x, *fast_rope._half_tables(cos, sin, layout), out, layout, inverse)
        x2 = torch.randn(b, s, 3, h, hd).to(dtype).permute(2, 0, 3, 1, 4)[0] if view == "qkv" else torch.randn(b, h, s, hd).to(dtype)
        x2 = x2.clone() if inplace else x2  # the layout of out above
        out2 = x2 if inplace else torch.full_like(x, float("nan"))
        ref2 = F.apply_rope(x2, cos, -sin if inverse else sin, layout=layout)
        assert launch(x2, out2) and torch.equal(out2, ref2), ("launch", layout, dtype, rd, inverse, inplace, view)
    if tables == "shared" and view == "qkv" and not inplace:  # q and k of one projection in one pair launch
        k = x.new_empty(0).set_(x.untyped_storage(), x.storage_offset() + h * hd, x.shape, x.stride())  # the k slice
        ref_k = F.apply_rope(k, cos, -sin if inverse else sin, layout=layout)
        oq, ok = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
        launch = _rope_triton.launch(x, *fast_rope._half_tables(cos, sin, layout), oq, layout, inverse, k, ok)
        assert launch.pair and launch(x, oq, k, ok)
        for got, want in ((oq, ref), (ok, ref_k)):
            if dtype == torch.bfloat16:
                torch.testing.assert_close(got.float(), want.float(), atol=1e-6, rtol=2 ** -7)
            else:
                assert torch.equal(got, want), ("pair", layout, dtype, rd, inverse)
empty = torch.empty(2, 3, 0, 32)  # no rows: nothing launched, nothing to fail on
cos, sin = F.rope_cos_sin(torch.arange(0), F.rope_inv_freq(32)[0])
assert _rope_triton.rotate(empty, *fast_rope._half_tables(cos, sin, "half"), torch.empty_like(empty), "half", False)
print("ok")
"""


@pytest.mark.slow
def test_triton_kernel_in_the_interpreter():
    """The GPU kernel (:mod:`posenc.functional._rope_triton`) run by Triton's interpreter on the
    CPU: both layouts, three dtypes, forward and inverse, partial rotary, out= and in place, shared,
    per-batch and per-head tables, q as a strided view, q and k of one projection in one pair
    launch; equal to the reference bit for bit (float32, float16) or within the interpreter's
    truncation (bfloat16); a prepared launch made for one input serves another of the same layout
    (the call plans). Skipped without Triton."""
    import os
    import subprocess
    import sys

    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", _TRITON_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_triton_path_declines_what_it_cannot_take():
    """Without a GPU (and outside the interpreter) the Triton kernel declines, writing nothing, and
    fast_apply_rope on the CPU never calls it with a result that matters."""
    from posenc.functional import _rope_triton

    x = torch.randn(1, 2, 8, 16)
    cos, sin = _tables(8, 16, "half")
    out = torch.full_like(x, float("nan"))
    if not _rope_triton._INTERPRET:
        assert not _rope_triton.rotate(x, *fast_rope._half_tables(cos, sin, "half"), out, "half", False)
        assert out.isnan().all()
    assert _rope_triton.rotate(x.double(), *fast_rope._half_tables(cos, sin, "half"), out.double(), "half", False) is False


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rope_pair_function_gradcheck(layout):
    """RopePairFunction's backward (the inverse rotation of each gradient) against numerical
    derivatives in float64, q and k slices of one projection, partial rotary (12 of 16 features)."""
    from posenc.schemes.rope import _siblings

    cos, sin = _tables(torch.arange(3, 8), 12, layout, torch.float64)
    cos_h, sin_h = fast_rope._half_tables(cos, sin, layout)
    lin = torch.randn(2, 5, 3 * 2 * 16, dtype=torch.float64, requires_grad=True)  # [b, s, 3 * h * hd]

    def f(lin):
        q, k, _ = lin.view(2, 5, 3, 2, 16).permute(2, 0, 3, 1, 4)  # 3 x [b, h, s, hd]
        both = _siblings(q, k)
        assert both is not None
        return fast_rope.RopePairFunction.apply(q, k, both, cos_h, sin_h, layout)
    assert torch.autograd.gradcheck(f, (lin,))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rope_rotates_qkv_siblings_in_one_call(layout, monkeypatch):
    """q and k sliced from one qkv projection (as posenc.Attention makes them) are rotated by one
    call on a [2, b, h, s, hd] view; outputs and the gradient reaching the projection equal the
    reference per tensor. Unrelated tensors and decoding (other query positions) take one call each."""
    import posenc.schemes.rope as rope_module

    rope = posenc.create("rope", dim=16, layout=layout)
    calls = []
    fast, pair = rope_module.fast_apply_rope, rope_module.fast_apply_rope_pair
    monkeypatch.setattr(rope_module, "fast_apply_rope", lambda x, *a, **kw: calls.append(x.dim()) or fast(x, *a, **kw))
    monkeypatch.setattr(rope_module, "fast_apply_rope_pair",
                        lambda q, k, both, *a, **kw: calls.append(both.dim()) or pair(q, k, both, *a, **kw))
    lin = torch.randn(2, 9, 3 * 3 * 16, requires_grad=True)  # [b, s, 3 * h * hd]
    q, k, v = (lin * 1.0).view(2, 9, 3, 3, 16).permute(2, 0, 3, 1, 4)  # 3 x [b, h, s, hd]
    rq, rk = rope.rotate(q, k)
    assert calls == [5]
    assert type(rq.grad_fn).__name__ == "RopePairFunctionBackward"
    assert not rq._is_view() and rq.data_ptr() != rk.data_ptr()
    rq.mul_(1.0)  # results of their own: editable in place (autograd forbids that on views it returned)
    cos, sin = rope.cos_sin(torch.arange(9))
    g = torch.randn(2, 2, 3, 9, 16)
    torch.autograd.backward((rq, rk), (g[0].transpose(1, 2).contiguous().transpose(1, 2), g[1]))  # SDPA's grad order, contiguous
    grad, lin.grad = lin.grad, None
    q, k, v = (lin * 1.0).view(2, 9, 3, 3, 16).permute(2, 0, 3, 1, 4)
    eq, ek = F.apply_rope(q, cos, sin, layout=layout), F.apply_rope(k, cos, sin, layout=layout)
    torch.testing.assert_close(rq, eq, atol=1e-6, rtol=0)
    torch.testing.assert_close(rk, ek, atol=1e-6, rtol=0)
    torch.autograd.backward((eq, ek), (g[0], g[1]))
    torch.testing.assert_close(grad, lin.grad, atol=1e-6, rtol=0)
    with torch.no_grad():  # without autograd: one call too, same values
        calls.clear()
        nq, nk = rope.rotate(q, k)
        assert calls == [5]
        torch.testing.assert_close(nq, eq, atol=1e-6, rtol=0)
        torch.testing.assert_close(nk, ek, atol=1e-6, rtol=0)
    leaf_q, leaf_k = (t.detach().requires_grad_() for t in torch.randn(2, 9, 3, 3, 16).permute(2, 0, 3, 1, 4)[:2])
    lq, lk = rope.rotate(leaf_q, leaf_k)  # leaves (no shared base in autograd): gradients still reach both
    (lq.sum() + 2 * lk.sum()).backward()
    torch.testing.assert_close(leaf_k.grad, 2 * leaf_q.grad)
    calls.clear()
    rope.rotate(torch.randn(1, 3, 9, 16), torch.randn(1, 3, 9, 16))  # separate tensors
    rope.rotate(q[:, :, -1:], k)  # decoding: the query at the last position only
    assert calls == [4, 4, 4, 4]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("tables", ["[s, r]", "[b, s, r]", "[b, h, s, r]"])
@pytest.mark.parametrize("grad", [False, True])
def test_rope_pair_takes_the_tables_of_q(layout, tables, grad):
    """fast_apply_rope_pair(q, k, both, cos, sin) equals fast_apply_rope on q and on k for every
    table shape q takes. [b, s, r] tables used to be aligned against the 5-D ``both`` instead of q:
    with b = 2 and h = 2 they broadcast silently over the wrong dims (wrong values), else raised."""
    b, h, s, hd = 2, 2, 5, 8
    proj = torch.randn(b, s, 3, h, hd, dtype=torch.float64, requires_grad=grad)
    q, k = (proj[:, :, i].transpose(1, 2) for i in (0, 1))  # [b, h, s, hd]
    both = proj[:, :, :2].permute(2, 0, 3, 1, 4)  # [2, b, h, s, hd]
    inv_freq, _ = F.rope_inv_freq(hd)
    pos = {"[s, r]": torch.arange(s) + 3, "[b, s, r]": torch.tensor([[0, 4, 9, 11, 30], [2, 3, 5, 7, 8]]),
           "[b, h, s, r]": torch.randint(0, 100, (b, h, s), generator=torch.Generator().manual_seed(0))}[tables]
    cos, sin = F.rope_cos_sin(pos, inv_freq.double(), layout=layout, dtype=torch.float64)
    rq, rk = fast_rope.fast_apply_rope_pair(q, k, both, cos, sin, layout=layout)
    eq, ek = F.apply_rope(q, cos, sin, layout=layout), F.apply_rope(k, cos, sin, layout=layout)
    torch.testing.assert_close(rq, eq, atol=1e-12, rtol=0)
    torch.testing.assert_close(rk, ek, atol=1e-12, rtol=0)
    if grad:
        g = torch.randn(2, *q.shape, dtype=torch.float64)
        (got,) = torch.autograd.grad((rq, rk), proj, (g[0], g[1]))
        (want,) = torch.autograd.grad((eq, ek), proj, (g[0], g[1]))
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


def test_rope_pair_refuses_a_both_that_is_not_q_and_k():
    proj = torch.randn(1, 4, 3, 2, 8)
    q, k, v = (proj[:, :, i].transpose(1, 2) for i in range(3))
    cos, sin = F.rope_cos_sin(4, F.rope_inv_freq(8)[0])
    for both in (proj[:, :, 1:].permute(2, 0, 3, 1, 4),  # [k, v]
                 torch.stack((q, k)),  # a copy: results would not be q's and k's
                 proj[:, :, :2].permute(2, 0, 3, 1, 4)[:, :, :1]):  # wrong shape
        with pytest.raises(ValueError, match=r"both must be the \[2, \*q.shape\] view whose \[0\] is q and \[1\] is k"):
            fast_rope.fast_apply_rope_pair(q, k, both, cos, sin)
    with pytest.raises(TypeError, match="both must be a tensor, got list"):
        fast_rope.fast_apply_rope_pair(q, k, [q, k], cos, sin)


def _small_x(view, dtype, b=4, h=3, s=24, hd=16):
    """x [b, h, s, hd] in one of the memory layouts the eager swap pass meets (see the test below)."""
    if view == "contiguous":
        return torch.randn(b, h, s, hd, dtype=dtype)
    if view == "qkv":  # q as posenc.Attention makes it: a view of the fused projection, gaps between tokens
        return torch.randn(b, s, 3, h, hd, dtype=dtype).unbind(2)[1].transpose(1, 2)
    if view == "qkv-pair":  # q and k of that projection as one [2, b, h, s, hd] view (RopePairFunction)
        return torch.randn(b, s, 3, h, hd, dtype=dtype)[:, :, :2].permute(2, 0, 3, 1, 4)
    if view == "token-major":  # SDPA's gradients
        return torch.randn(b, s, h, hd, dtype=dtype).transpose(1, 2)
    if view == "seq-first":
        return torch.randn(s, b, h, hd, dtype=dtype).permute(1, 2, 0, 3)
    if view == "head-slices":  # heads that are slices of wider rows: rows of memory of one head
        return torch.randn(b, h, s, 2 * hd, dtype=dtype)[..., :hd]
    raise ValueError(view)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("view", ["contiguous", "qkv", "qkv-pair", "token-major", "seq-first", "head-slices"])
@pytest.mark.parametrize("tables", ["shared", "per-batch", "one-position"])
def test_eager_swap_pass_for_small_half_pairs(dtype, view, tables, monkeypatch):
    """Small half pairs (training sizes) on the CPU: ``x * [cos, cos] + swap(x) * [-sin, sin]`` over
    rows of memory (:func:`_eager_swap`) wherever x's layout has rows of several heads, the
    per-half ops elsewhere; forward and inverse, into a fresh result (``torch.empty_like``) and in
    place, equal to the reference for every layout and table shape."""
    taken = []
    swap = _rope_eager._eager_swap
    monkeypatch.setattr(_rope_eager, "_eager_swap", lambda *a: taken.append(swap(*a)) or taken[-1])
    x = _small_x(view, dtype)
    b, h, s, hd = x.shape[-4:]
    positions = {"shared": torch.arange(3, 3 + s), "per-batch": torch.arange(b * s).view(b, 1, s),
                 "one-position": torch.tensor([7])}[tables]
    cos, sin = _tables(positions, hd, "half", dtype)
    cos_h, sin_h = fast_rope._half_tables(cos, sin, "half")
    atol, fresh = 1e-6 if dtype == torch.float32 else 1e-12, []
    for inverse, call in itertools.product((False, True), range(2)):  # inputs this small plan at the 2nd call
        ref = F.apply_rope(x, cos, -sin if inverse else sin, layout="half")
        out = torch.empty_like(x)
        _rope_eager._eager(x, cos_h, sin_h, out, "half", inverse)
        fresh.append(taken[-1])
        torch.testing.assert_close(out, ref, atol=atol, rtol=0)
        assert out.stride() == torch.empty_like(x).stride()
        if view != "qkv-pair":  # the pair view overlaps nothing but v's gaps; in place needs a dense x
            y = x.clone() if view in ("contiguous", "token-major") else x.contiguous()
            _rope_eager._eager(y, cos_h, sin_h, y, "half", inverse)
            torch.testing.assert_close(y, ref, atol=atol, rtol=0)
    assert fresh[-1] == fresh[-2] == (view != "head-slices")  # the in-place calls above run on dense copies
    small = x[..., :1, :1, :4, :]  # a decoding step: under _SWAP_MIN_NUMEL, the per-half ops
    taken.clear()
    out = torch.empty_like(small)
    _rope_eager._eager(small, *fast_rope._half_tables(*_tables(torch.arange(4), hd, "half", dtype), "half"), out, "half", False)
    assert not any(taken)
    torch.testing.assert_close(out, F.apply_rope(small, *_tables(torch.arange(4), hd, "half", dtype)), atol=atol, rtol=0)


def test_eager_swap_declines_what_it_cannot_take(monkeypatch):
    """Partial rotary, 16-bit x, tables in another dtype and a result in another memory order keep
    the per-half ops (:func:`_eager_swap` returns False and writes nothing); the result still equals
    the reference. Inf and NaN stay where the reference puts them (the swap copies, never multiplies
    a neighbour by zero)."""
    x = torch.randn(2, 3, 1024, 16)
    cos, sin = _tables(torch.arange(1024), 16, "half")
    cos_h, sin_h = fast_rope._half_tables(cos, sin, "half")
    for args in ((x, *fast_rope._half_tables(*_tables(torch.arange(1024), 12, "half"), "half")),
                 (x.bfloat16(), cos_h.bfloat16(), sin_h.bfloat16()), (x, cos_h.double(), sin_h.double())):
        out = torch.full_like(args[0], float("nan"))
        assert not _rope_eager._eager_swap(args[0], *args[1:], out, False) and out.isnan().all()
    other_order = torch.full((2, 1024, 3, 16), float("nan")).transpose(1, 2)  # token-major: not x's order
    assert not _rope_eager._eager_swap(x, cos_h, sin_h, other_order, False) and other_order.isnan().all()
    _rope_eager._eager(x, cos_h, sin_h, other_order, "half", False)
    torch.testing.assert_close(other_order, F.apply_rope(x, cos, sin), atol=1e-6, rtol=0)
    x[0, 1, 4, 2], x[1, 2, 1023, 13], x[0, 0, 0, 8] = float("inf"), float("nan"), float("-inf")
    out = torch.empty_like(x)
    assert _rope_eager._eager_swap(x, cos_h, sin_h, out, False)
    ref = F.apply_rope(x, cos, sin)
    assert torch.equal(out.isnan(), ref.isnan()) and torch.equal(out.isinf(), ref.isinf())
    finite = ref.isfinite()
    torch.testing.assert_close(out[finite], ref[finite], atol=1e-6, rtol=0)


@pytest.mark.parametrize("native", [True, False], ids=["c-loop", "no-compiler"])
@pytest.mark.parametrize("rotary_dim", [None, 12])
def test_attention_training_step_equals_hand_written_rope_attention(rotary_dim, native, monkeypatch):
    """posenc.Attention with rope at the experiments' head width (16), float32, two training steps:
    output and the gradients of x and of every parameter equal attention written out with
    ``F.apply_rope`` and SDPA. With the C loop, q and k rotate in place in the projection
    (FusedRopeFunction, whose backward writes each gradient slot); without a compiler, through
    RopePairFunction and the swap pass (its second step runs the cached swap plan; partial rotary
    keeps the per-half ops), so the qkv split and both backwards deliver each gradient where it
    belongs."""
    if native and not _rope_native.available():
        pytest.skip("no C++ compiler for the C loop here")
    if not native:
        monkeypatch.setattr(_rope_native, "_state", {"error": "test: no compiler"})
        monkeypatch.setattr(_rope_native, "_plans", {})
    taken, fused = [], []
    swap = _rope_eager._eager_swap
    monkeypatch.setattr(_rope_eager, "_eager_swap", lambda *a: taken.append(swap(*a)) or taken[-1])
    apply = fast_rope.FusedRopeFunction.apply
    monkeypatch.setattr(fast_rope.FusedRopeFunction, "apply", lambda *a: fused.append(1) or apply(*a))
    b, s, h, hd = 8, 32, 4, 16
    kwargs = {} if rotary_dim is None else {"rotary_dim": rotary_dim}
    attn = posenc.Attention(h * hd, h, encoding=posenc.create("rope", dim=hd, **kwargs), causal=True)
    cos, sin = _tables(torch.arange(s), rotary_dim or hd, "half")
    for step in range(2):
        x = torch.randn(b, s, h * hd, requires_grad=True)
        out = attn(x)
        g = torch.randn_like(out)
        got = torch.autograd.grad(out, (x, *attn.parameters()), g)
        q, k, v = attn.qkv(x).view(b, s, 3, h, hd).permute(2, 0, 3, 1, 4)
        q, k = F.apply_rope(q, cos, sin), F.apply_rope(k, cos, sin)
        ref = attn.proj(nnf.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h * hd))
        want = torch.autograd.grad(ref, (x, *attn.parameters()), g)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        for a, e in zip(got, want):
            torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)
    assert len(fused) == (2 if native else 0)
    assert native or taken[-1] == (rotary_dim is None)


# ---------------------------------------------------------------------------------------------- call plans

def _plan_x(view, dtype, s=20):
    """A fresh input of one layout (new memory, new values) for each call."""
    if view == "qkv":  # q as posenc.Attention makes it: [b, s, 3, h, hd] split, then transposed
        return torch.randn(2, s, 3, 4, 32).to(dtype).unbind(2)[0].transpose(1, 2)
    if view == "offset":  # an odd storage offset: no int32-word view
        return torch.randn(2 * 4 * s * 32 + 1).to(dtype)[1:].view(2, 4, s, 32)
    return torch.randn(2, 4, s, 32).to(dtype)  # [b, h, s, hd]; 4 heads: grouped views


@pytest.mark.slow
@pytest.mark.parametrize(("layout", "dtype", "rotary_dim", "view", "mode"), [
    ("half", torch.bfloat16, 32, "contiguous", "out"),  # bf16_halves: int32 words and an alias of out
    ("half", torch.bfloat16, 32, "contiguous", "inplace"),  # bf16_halves_
    ("half", torch.bfloat16, 24, "qkv", "out"),  # partial rotary (the tail copied), a strided view
    ("half", torch.float16, 32, "offset", "inplace"),  # halves_: an alias of x itself
    ("half", torch.float16, 32, "contiguous", "out"),  # halves
    ("half", torch.float32, 32, "qkv", "out"),  # the one-output kernel
    ("half", torch.float32, 32, "contiguous", "backward"),  # RopeFunction: a new out, the inverse
    ("interleaved", torch.bfloat16, 32, "contiguous", "out"),  # bf16_pairs
    ("interleaved", torch.bfloat16, 32, "qkv", "inplace"),  # bf16_pairs_
])
def test_repeated_calls_replay_their_plan_exactly(layout, dtype, rotary_dim, view, mode, monkeypatch):
    """From the second call with the same layout and tables on, the compiled pass is replayed
    from a plan (argument views remade on the new x and out, the same compiled variant): every
    call, with new memory and values each time, equals the reference bit for bit (float32 to
    1e-6), and once the plan exists the dispatch is not consulted again."""
    cos, sin = _tables(torch.arange(100, 120), rotary_dim, layout)
    tol = {"atol": 1e-6, "rtol": 0} if dtype == torch.float32 else {"atol": 0, "rtol": 0}
    fast_rope._call_plans.clear()
    fast_rope._call_seen.clear()
    for call in range(4):
        if call == 2:
            assert any(v is not None for v in fast_rope._call_plans.values()), "no plan after two calls"
            monkeypatch.setattr(fast_rope, "_rotate", lambda *a: pytest.fail("a repeated call left its plan"))
        x = _plan_x(view, dtype)
        if mode == "backward":
            xg = x.clone().requires_grad_()
            g = torch.randn_like(x)
            fast_apply_rope(xg, cos, sin, layout=layout, compile=True).backward(g)
            got, ref = xg.grad, F.apply_rope(g, cos, -sin, layout=layout)
        elif mode == "inplace":
            ref = F.apply_rope(x, cos, sin, layout=layout)
            got = fast_apply_rope_(x, cos, sin, layout=layout, compile=True)
        else:
            ref = F.apply_rope(x, cos, sin, layout=layout)
            got = fast_apply_rope(x, cos, sin, layout=layout, out=torch.full_like(x, float("nan")), compile=True)
        assert fast_rope.compile_available(), fast_rope._compile_error
        torch.testing.assert_close(got, ref, **tol)


@pytest.mark.slow
def test_call_plans_follow_tables_layouts_and_shared_storage(monkeypatch):
    """A plan serves only its key: edited tables (version), other tables, another layout of x or
    another length take the dispatch again (and are right); x and out in one storage get no plan;
    a replay that cannot make its alias falls back to the dispatch."""
    cos, sin = _tables(torch.arange(20), 32, "half")
    fast_rope._call_plans.clear()
    fast_rope._call_seen.clear()
    x = torch.randn(1, 4, 20, 32).to(torch.bfloat16)
    out = torch.empty_like(x)
    for _ in range(2):
        fast_apply_rope(x, cos, sin, out=out, compile=True)
    plans = list(fast_rope._call_plans.values())  # filed under the dispatch's key and the call's lane
    assert len(plans) == 2 and plans[0] is plans[1] and type(plans[0][0]) is fast_rope._Replay
    dispatched = []
    rotate = fast_rope._rotate
    monkeypatch.setattr(fast_rope, "_rotate", lambda *a: dispatched.append(1) or rotate(*a))
    cos.mul_(0.5)  # edited in place: a new version
    torch.testing.assert_close(fast_apply_rope(x, cos, sin, out=out, compile=True), F.apply_rope(x, cos, sin), atol=0, rtol=0)
    cos2, sin2 = _tables(torch.arange(7, 27), 32, "half")
    torch.testing.assert_close(fast_apply_rope(x, cos2, sin2, out=out, compile=True), F.apply_rope(x, cos2, sin2), atol=0, rtol=0)
    longer = torch.randn(1, 4, 21, 32).to(torch.bfloat16)
    cos3, sin3 = _tables(torch.arange(21), 32, "half")
    fast_apply_rope(longer, cos3, sin3, out=torch.empty_like(longer), compile=True)
    assert len(dispatched) == 3
    buf = torch.randn(2, 1, 4, 20, 32).to(torch.bfloat16)  # x and out: two halves of one buffer
    for _ in range(3):
        fast_apply_rope(buf[0], cos2, sin2, out=buf[1], compile=True)
    assert fast_rope._call_plans[fast_rope._plan_key(buf[0], *fast_rope._half_tables(cos2, sin2, "half"), buf[1], "half",
                                                     False, True)] is None
    x2 = torch.randn_like(x)
    fast_apply_rope(x2, cos2, sin2, out=out, compile=True)  # the second sight: a plan
    monkeypatch.setattr(fast_rope, "_alias", lambda t: 1 / 0)
    before = len(dispatched)
    torch.testing.assert_close(fast_apply_rope(x2, cos2, sin2, out=out, compile=True), F.apply_rope(x2, cos2, sin2),
                               atol=0, rtol=0)
    assert len(dispatched) == before + 1 and fast_rope.compile_available()
    # a planned call's checks still hold for a call that differs in what they read
    with pytest.raises(ValueError, match="out must match x"):
        fast_apply_rope(x2, cos2, sin2, out=out.float(), compile=True)
    with pytest.raises(RuntimeError, match="does not take part in autograd"):
        fast_apply_rope(x2.float().requires_grad_(), cos2, sin2, out=out.float(), compile=True)
    with pytest.raises(ValueError, match="layout"):
        fast_apply_rope(x2, cos2, sin2, out=out, compile=True, layout="rotate_half")


@pytest.mark.slow
def test_call_plans_switch_off_sends_every_call_through_the_dispatch(monkeypatch):
    """With CALL_PLANS off no plan is made or replayed (and the results are the same)."""
    monkeypatch.setattr(fast_rope, "CALL_PLANS", False)
    fast_rope._call_plans.clear()
    fast_rope._call_seen.clear()
    cos, sin = _tables(torch.arange(16), 32, "half")
    x = torch.randn(1, 4, 16, 32).to(torch.bfloat16)
    for _ in range(3):
        torch.testing.assert_close(fast_apply_rope(x, cos, sin, out=torch.empty_like(x), compile=True),
                                   F.apply_rope(x, cos, sin), atol=0, rtol=0)
    assert not fast_rope._call_plans and not fast_rope._call_seen


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
def test_bf16_with_float64_tables_compiles_and_keeps_the_compiler(layout, monkeypatch):
    """bfloat16 x with float64 tables: the int32-word kernels (float32 tables only) are not used;
    the result equals the reference, and compiling stays available for later calls. It used to
    fail inside the word kernel and turn compiling off for the whole process."""
    monkeypatch.setattr(fast_rope, "_compile_error", None)
    x = torch.randn(1, 4, 512, 64).bfloat16()
    cos, sin = _tables(torch.arange(512), 64, layout, torch.float64)
    got = fast_apply_rope(x, cos, sin, layout=layout, compile=True)
    assert torch.equal(got, F.apply_rope(x, cos, sin, layout=layout))
    assert fast_rope.compile_available() and not fast_rope._failed


def test_t5_training_bias_uses_cached_buckets_equal_to_bucketing_each_pair():
    """With a table that needs gradients (training), T5's bias gathers the table at buckets cached
    per lengths and offsets (built from the distinct distances): the same values and the same
    table gradient as bucketing every pair; positions that are no range, or a range edited in
    place after it was made, take the reference buckets."""
    from posenc.functional import fast_bias
    from posenc.schemes.base import default_positions

    for bidirectional in (True, False):
        t5 = posenc.create("t5", num_heads=3, bidirectional=bidirectional, num_buckets=12, max_distance=30)
        for sq, sk, q0 in ((40, 40, 0), (5, 60, 55), (1, 1, 0)):
            qp, kp = default_positions(None, sq, "cpu", offset=q0), default_positions(None, sk, "cpu")
            got = t5.bias(qp, kp)
            assert got.requires_grad
            ref = t5.relative_attention_bias(t5.buckets(qp, kp)).movedim(-1, -3)  # bucket of every pair
            assert torch.equal(got, ref)
            g = torch.randn_like(got)
            (grad_got,) = torch.autograd.grad(got, t5.relative_attention_bias.weight, g)
            (grad_ref,) = torch.autograd.grad(ref, t5.relative_attention_bias.weight, g)
            assert torch.equal(grad_got, grad_ref)
            assert fast_bias.cached_t5_buckets(t5, qp, kp, torch.device("cpu")) is \
                fast_bias.cached_t5_buckets(t5, qp, kp, torch.device("cpu"))  # cached
    qp = default_positions(None, 6, "cpu")
    assert fast_bias._range_start(qp) == 0
    qp[3] = 40  # no longer a range: read again, not trusted from its record
    assert fast_bias._range_start(qp) is None
    assert fast_bias.cached_t5_buckets(t5, qp, qp, torch.device("cpu")) is None
    assert torch.equal(t5.bias(qp, qp), t5.relative_attention_bias(t5.buckets(qp, qp)).movedim(-1, -3))


def test_t5_buckets_made_in_inference_mode_do_not_reach_training():
    """Buckets cached under inference mode (with grad on) are not served to a later training step,
    which would have to save them for backward."""
    attn = posenc.Attention(32, 4, encoding="t5")
    x = torch.randn(2, 6, 32)
    with torch.inference_mode(), torch.enable_grad():
        attn(x)
    attn(x).sum().backward()
    assert attn.encoding.relative_attention_bias.weight.grad is not None


def test_word_views_need_aligned_addresses():
    """The Triton kernel's word views (int32 for 16-bit pairs, int64 for float32) need the address
    aligned to a pair, not only an even storage offset: memory shared through DLPack from a slice
    begins mid-word at offset 0. Such a tensor takes the unit-by-unit path."""
    from posenc.functional import _rope_triton

    flat = torch.randn(65)
    shared = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(flat[1:].view(1, 2, 4, 8)))
    assert shared.storage_offset() == 0 and shared.data_ptr() % 8 == 4
    assert _rope_triton._words(shared) is None
    assert _rope_triton._words(torch.randn(1, 2, 4, 8)) is not None
    a, b = fast_rope._layout_key(shared, shared), fast_rope._layout_key(flat[:64].view(1, 2, 4, 8), shared)
    assert a != b  # the call plans tell the two apart


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_small_16bit_gradient_rounded_once(layout, dtype):
    """Small 16-bit inputs under autograd, alone and as q/k slices of one projection: the gradient
    is the exact inverse rotation rounded once to 16 bits (as torchtune's float32 rotation gives),
    not the reference formula's autograd, which rounds each of its two terms and then their sum
    (1 unit off in ~15% of elements for this seed)."""
    torch.manual_seed(0)
    b, s, h, hd = 2, 16, 4, 64
    cos, sin = _tables(torch.arange(s), hd, layout)
    g = torch.randn(b, h, s, hd).to(dtype)
    exact = _exact_rotation(g, cos, sin, layout, inverse=True).to(dtype)  # one rounding
    ulp = exact.float().abs().clamp_min(2.0**-14) * torch.finfo(dtype).eps  # one unit in the last place (at most)

    def off(grad, one_unit=True):  # elements not equal to the once-rounded exact value
        if one_unit:  # and none off by more than 1 unit
            assert ((grad.float() - exact.float()).abs() <= ulp).all()
        return int((grad != exact).sum())

    x = torch.randn(b, h, s, hd).to(dtype).requires_grad_()
    fast_apply_rope(x, cos, sin, layout=layout).backward(g)
    # float32 arithmetic then one rounding: equal to the exact value's rounding but where the float32
    # result sits on the other side of a 16-bit rounding boundary (1 in 8192 here)
    assert off(x.grad) <= x.numel() // 2000
    x2 = x.detach().clone().requires_grad_()
    F.apply_rope(x2, cos, sin, layout=layout).backward(g)
    assert off(x2.grad, one_unit=False) > x.numel() // 50  # the double rounding this test would catch
    enc = posenc.create("rope", dim=hd, layout=layout)
    qkv = torch.randn(b, s, 3, h, hd).to(dtype).requires_grad_()
    q, k, _ = (t.transpose(1, 2) for t in qkv.unbind(2))
    rq, rk = enc.rotate(q, k)
    (rq * g).sum().backward()
    assert off(qkv.grad[:, :, 0].transpose(1, 2)) <= x.numel() // 2000


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_small_inputs_without_autograd_take_the_lean_pass_equal_to_the_reference(dtype, monkeypatch):
    """A decoding step (q [1, 32, 1, 128], k [1, 8, 1, 128]) without autograd: the lean pass, no
    derived tables or plans (the eager pass's lookups cost more than the rotation there), equal to
    the reference: whole and partial rotary, [b, s, h, hd] with 4-D tables, and tables whose two
    halves differ, which the reference reads as given (the half-table passes assume [c, c])."""
    monkeypatch.setattr(_rope_eager, "_eager", lambda *a: pytest.fail("small no-grad inputs take the lean pass"))
    tol = {"atol": 0, "rtol": 0} if dtype == torch.bfloat16 else {"atol": 1e-6 if dtype == torch.float32 else 1e-12, "rtol": 0}
    table_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    for shape, rotary in (((1, 32, 1, 128), 128), ((1, 8, 3, 64), 32), ((2, 4, 5, 16), 16)):
        x = torch.randn(shape).to(dtype)
        cos, sin = _tables(torch.arange(100, 100 + shape[2]), rotary, "half", table_dtype)
        y = fast_apply_rope(x, cos, sin)
        assert y.dtype == dtype and y.shape == x.shape
        torch.testing.assert_close(y, F.apply_rope(x, cos, sin), **tol)
        if rotary < shape[-1]:
            assert torch.equal(y[..., rotary:], x[..., rotary:])
    xs = torch.randn(1, 5, 4, 32).to(dtype)  # [b, s, h, hd]
    cos, sin = _tables(torch.arange(5), 32, "half", table_dtype)
    torch.testing.assert_close(fast_apply_rope(xs, cos[None, :, None], sin[None, :, None]),
                               F.apply_rope(xs, cos[None, :, None], sin[None, :, None]), **tol)
    odd_cos, odd_sin = torch.rand(4, 32, dtype=table_dtype), torch.rand(4, 32, dtype=table_dtype)  # halves differ
    x = torch.randn(1, 2, 4, 32).to(dtype)
    torch.testing.assert_close(fast_apply_rope(x, odd_cos, odd_sin), F.apply_rope(x, odd_cos, odd_sin), **tol)
    with torch.inference_mode():
        torch.testing.assert_close(fast_apply_rope(x, odd_cos, odd_sin), F.apply_rope(x, odd_cos, odd_sin), **tol)


def test_two_views_of_the_same_positions_are_looked_up_once(monkeypatch):
    """``rotate(q, k, pos[0], pos[0])`` passes two tensor objects over one memory: one table lookup,
    as for one object; positions that only look alike (other memory) are looked up apart."""
    enc = posenc.create("rope", dim=32)
    calls = []
    original = type(enc).cos_sin

    def counting(self, positions, **kw):
        calls.append(positions)
        return original(self, positions, **kw)

    monkeypatch.setattr(type(enc), "cos_sin", counting)
    q, k = torch.randn(1, 4, 3, 32), torch.randn(1, 2, 3, 32)
    pos = torch.arange(7, 10)[None]
    rq, rk = enc.rotate(q, k, pos[0], pos[0])
    assert len(calls) == 1
    other = pos[0].clone()
    rq2, rk2 = enc.rotate(q, k, pos[0], other)
    assert len(calls) == 3
    torch.testing.assert_close((rq, rk), (rq2, rk2), atol=0, rtol=0)
    cos, sin = _tables(torch.arange(7, 10), 32, "half")
    torch.testing.assert_close(rk, F.apply_rope(k, cos, sin), atol=1e-6, rtol=0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_forward_mode_rotates_the_tangent(layout):
    """torch.autograd.forward_ad through the fast passes (RopeFunction, and RopePairFunction for q
    and k of one projection, a tangent for only one of them included) and torch.func.jvp through
    posenc.Attention: the tangent is the rotated tangent, as finite differences say; a dual input
    into out= is refused like one that requires grad, and tables with a tangent take the
    reference formula (the fast passes ignore the tables' derivative)."""
    import torch.autograd.forward_ad as fwad

    torch.manual_seed(0)
    x, t = torch.randn(2, 3, 8, 16, dtype=torch.float64), torch.randn(2, 3, 8, 16, dtype=torch.float64)
    cos, sin = _tables(torch.arange(8), 16, layout, torch.float64)
    with fwad.dual_level():
        y = fast_apply_rope(fwad.make_dual(x.clone().requires_grad_(), t), cos, sin, layout=layout)
        assert "RopeFunction" in type(y.grad_fn).__name__
        torch.testing.assert_close(fwad.unpack_dual(y).tangent, F.apply_rope(t, cos, sin, layout=layout), atol=1e-12, rtol=0)
        with pytest.raises(RuntimeError, match="forward-mode tangent"):
            fast_apply_rope(fwad.make_dual(x, t), cos, sin, layout=layout, out=torch.empty_like(x))
        cos_t = torch.randn_like(cos)
        y = fast_apply_rope(x, fwad.make_dual(cos, cos_t), sin, layout=layout)
        expected = F.apply_rope(x, cos_t, torch.zeros_like(sin), layout=layout)  # d/dcos of x cos + rot(x) sin
        torch.testing.assert_close(fwad.unpack_dual(y).tangent, expected, atol=1e-12, rtol=0)
    enc = posenc.create("rope", dim=16, layout=layout)
    qkv = torch.randn(2, 8, 3, 3, 16, dtype=torch.float64)
    tq = torch.randn(2, 8, 3, 16, dtype=torch.float64)
    with fwad.dual_level():
        tangent = torch.zeros_like(qkv)
        tangent[:, :, 0] = tq  # q's slice only: k's tangent is zero
        q, k, _ = (u.transpose(1, 2) for u in fwad.make_dual(qkv, tangent).unbind(2))
        rq, rk = enc.rotate(q, k)
        torch.testing.assert_close(fwad.unpack_dual(rq).tangent, F.apply_rope(tq.transpose(1, 2), cos, sin, layout=layout),
                                   atol=1e-12, rtol=0)
        assert not fwad.unpack_dual(rk).tangent.any()
    attn = posenc.Attention(32, 4, encoding=posenc.create("rope", dim=8, layout=layout)).double()
    inp, direction = torch.randn(2, 6, 32, dtype=torch.float64), torch.randn(2, 6, 32, dtype=torch.float64)
    _, jvp_out = torch.func.jvp(attn, (inp,), (direction,))  # SDPA's fused CPU kernel has no forward mode
    with fwad.dual_level():
        dual_out = fwad.unpack_dual(attn(fwad.make_dual(inp, direction))).tangent  # RopePairFunction.jvp
    fd = (attn(inp + 1e-6 * direction) - attn(inp - 1e-6 * direction)) / 2e-6
    torch.testing.assert_close(jvp_out, fd, atol=1e-7, rtol=0)
    torch.testing.assert_close(dual_out, fd, atol=1e-7, rtol=0)
