"""The fast paths on CUDA: the compiled RoPE passes (Inductor -> Triton), the eager passes, the
Toeplitz bias builds, FlexAttention's backward (its forward: tests/test_flex.py, on both devices)
and the benchmark harness equal the reference formulas computed on the same GPU.

Skipped without CUDA (this project's CI has none); run on a GPU machine with
``python -m pytest tests/test_cuda.py``. Tolerances: float32 1e-5 (Triton may contract a multiply
and an add into one FMA, where ATen rounds twice); 16-bit results within one unit in the last
place of the reference (both round the same float32 value once, give or take that FMA).
"""

from __future__ import annotations

import warnings

import pytest
import torch

import posenc
from posenc import flex
from posenc import functional as F
from posenc.functional import _rope_triton, fast_bias, fast_rope
from posenc.functional.fast_rope import fast_apply_rope, fast_apply_rope_

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

CUDA = "cuda"
ULP = {torch.float32: 1e-5, torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}


@pytest.fixture(autouse=True)
def _no_tf32(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)


def _tables(positions, rotary_dim, layout):
    inv_freq, _ = F.rope_inv_freq(rotary_dim)
    return F.rope_cos_sin(positions, inv_freq.to(CUDA), layout=layout)  # [s, r] float32 on the GPU


def _close(got: torch.Tensor, ref: torch.Tensor) -> None:
    """float32 to 1e-5; 16-bit to one unit in the last place of the reference."""
    assert got.dtype == ref.dtype and got.device == ref.device
    if ref.dtype == torch.float32:
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
    else:
        torch.testing.assert_close(got.float(), ref.float(), atol=ULP[ref.dtype] * 2 ** -6,
                                   rtol=ULP[ref.dtype])


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rotary_dim", [64, 48])
@pytest.mark.parametrize("compile", [True, False])
def test_fast_rope_on_cuda_equals_reference(layout, dtype, rotary_dim, compile, monkeypatch):
    """out=, in place, the autograd forward and its backward (the inverse rotation), with an
    offset and partial rotary, for 8 heads (head-grouped views in the compiled pass)."""
    launched = []
    launch = _rope_triton.launch
    monkeypatch.setattr(_rope_triton, "launch", lambda *a: launched.append(launch(*a)) or launched[-1])
    x = torch.randn(2, 8, 100, 64, device=CUDA).to(dtype)  # [b, h, s, hd]
    cos, sin = _tables(torch.arange(37, 137), rotary_dim, layout)
    ref = F.apply_rope(x, cos, sin, layout=layout)
    out = torch.full_like(x, float("nan"))
    assert fast_apply_rope(x, cos, sin, layout=layout, out=out, compile=compile) is out
    _close(out, ref)
    assert torch.equal(out[..., rotary_dim:], x[..., rotary_dim:])
    y = x.clone()
    assert fast_apply_rope_(y, cos, sin, layout=layout, compile=compile) is y
    _close(y, ref)
    xg = x.clone().requires_grad_()
    g = torch.randn_like(x)
    _close(fast_apply_rope(xg, cos, sin, layout=layout, compile=compile), ref)
    fast_apply_rope(xg, cos, sin, layout=layout, compile=compile).backward(g)
    exact = F.apply_rope(g.double(), cos.double(), -sin.double(), layout=layout)  # R(-angle) g
    _close(xg.grad, exact.to(dtype))
    if compile:  # float32 interleaved pairs too (as int64 words, or split in registers for partial rotary)
        assert launched and all(p is not None for p in launched), "the Triton kernel did not take the compiled path"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_fast_rope_on_cuda_odd_head_count_and_long_sequence(dtype, layout):
    """71 heads (Falcon-7B; 68 grouped + 3 alone) at 2048 positions, the auto path (compiled, as
    the input is large) against the reference."""
    x = torch.randn(1, 71, 2048, 64, device=CUDA).to(dtype)
    cos, sin = _tables(torch.arange(2048), 64, layout)
    ref = F.apply_rope(x, cos, sin, layout=layout)
    _close(fast_apply_rope(x, cos, sin, layout=layout, out=torch.empty_like(x)), ref)
    y = x.clone()
    _close(fast_apply_rope_(y, cos, sin, layout=layout), ref)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("tables", ["shared", "per-batch", "per-head"])
def test_triton_kernel_bit_exact_on_cuda(layout, dtype, tables):
    """The direct Triton kernel (no FMA contraction, one rounding to x's dtype) equals the
    reference bit for bit: out= and in place, forward and inverse, partial rotary, q as a view of a
    fused qkv projection, tables shared, per batch and per head."""
    b, h, s, hd = 2, 5, 70, 64
    qkv = torch.randn(b, s, 3, h, hd, device=CUDA).to(dtype)
    x = qkv.permute(2, 0, 3, 1, 4)[0]  # [b, h, s, hd], non-contiguous
    shape = {"shared": (s,), "per-batch": (b, 1, s), "per-head": (b, h, s)}[tables]
    positions = torch.arange(int(torch.tensor(shape).prod()), device=CUDA).reshape(shape) * 7
    for rotary_dim, inverse in ((64, False), (40, True)):
        cos, sin = _tables(positions, rotary_dim, layout)
        ref = F.apply_rope(x, cos, -sin if inverse else sin, layout=layout)
        cos_h, sin_h = fast_rope._half_tables(cos, sin, layout)
        out = torch.full_like(x, float("nan"))
        assert _rope_triton.rotate(x, cos_h, sin_h, out, layout, inverse)
        assert torch.equal(out, ref)
        y = x.clone()
        assert _rope_triton.rotate(y, cos_h, sin_h, y, layout, inverse)
        assert torch.equal(y, ref)
        # q and k of the projection in one pair launch, twice (the second through the kernel's runner)
        k = qkv.permute(2, 0, 3, 1, 4)[1]
        ref_k = F.apply_rope(k, cos, -sin if inverse else sin, layout=layout)
        plan = None
        for _ in range(2):
            oq, ok = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
            plan = plan or _rope_triton.launch(x, cos_h, sin_h, oq, layout, inverse, k, ok)
            assert plan is not None and plan.pair and plan(x, oq, k, ok)
            assert torch.equal(oq, ref) and torch.equal(ok, ref_k)
        y, z = x.clone(), k.clone()  # in place, and the words of float32/16-bit interleaved pairs
        assert _rope_triton.launch(y, cos_h, sin_h, y, layout, inverse, z, z)(y, y, z, z)
        assert torch.equal(y, ref) and torch.equal(z, ref_k)


def test_rope_warmup_compiles_for_cuda():
    """After warmup the first call at a new length is quick (the kernel is compiled once)."""
    import time

    seconds = fast_rope.warmup(64, num_heads=8, dtypes=(torch.bfloat16,), layouts=("half",), device=CUDA)
    assert seconds > 0
    x = torch.randn(1, 8, 3000, 64, device=CUDA).to(torch.bfloat16)
    cos, sin = _tables(torch.arange(3000), 64, "half")
    start = time.perf_counter()
    out = fast_apply_rope(x, cos, sin, out=torch.empty_like(x), compile=True)
    torch.cuda.synchronize()
    assert time.perf_counter() - start < 0.5
    assert torch.equal(out, F.apply_rope(x, cos, sin))


def test_rope_scheme_on_cuda_equals_cpu():
    """The scheme moved to the GPU rotates q, k [1, 32, 512, 128] (the compiled path) as on the CPU."""
    rope = posenc.create("rope", dim=128)
    q, k = torch.randn(1, 32, 512, 128), torch.randn(1, 32, 512, 128)
    cpu = rope.rotate(q, k)
    gpu = rope.to(CUDA).rotate(q.to(CUDA), k.to(CUDA))
    for a, b in zip(gpu, cpu):
        torch.testing.assert_close(a.cpu(), b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize(("sq", "sk", "q0", "k0"), [(300, 300, 0, 0), (4, 200, 196, 0)])
def test_bias_builds_on_cuda_equal_the_cpu(bidirectional, sq, sk, q0, k0):
    slopes, table = F.alibi_slopes(6), torch.randn(32, 6)
    for build, weights in ((fast_bias.alibi_bias_range, slopes), (fast_bias.t5_bias_range, table)):
        cpu = build(weights, sq, sk, q_offset=q0, k_offset=k0, bidirectional=bidirectional)
        out = torch.empty(6, sq, sk, device=CUDA)
        got = build(weights.to(CUDA), sq, sk, q_offset=q0, k_offset=k0, bidirectional=bidirectional, out=out)
        assert got is out
        torch.testing.assert_close(got.cpu(), cpu, atol=1e-6, rtol=0)


def test_flex_backward_on_cuda_equals_sdpa():
    """On CUDA FlexAttention has a backward, so training with ALiBi goes through it: the gradients
    of the input and of the projections equal those through SDPA with the materialised bias."""
    torch.manual_seed(0)
    attn = posenc.Attention(64, 4, encoding="alibi", causal=True).to(CUDA)
    x = torch.randn(2, 260, 64, device=CUDA, requires_grad=True)
    g = torch.randn(2, 260, 64, device=CUDA)
    grads = {}
    for mode in ("never", "always"):
        flex.set_mode(mode)
        try:
            x.grad = None
            attn.zero_grad()
            attn(x).backward(g)
        finally:
            flex.set_mode("auto")
        grads[mode] = [x.grad.clone(), *(p.grad.clone() for p in attn.parameters())]
    assert flex.available(), flex.errors()
    for a, b in zip(grads["always"], grads["never"]):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_flex_used_for_training_on_cuda_only_without_trainable_tables(monkeypatch):
    """ALiBi (no parameters) trains through FlexAttention on CUDA; T5's trainable table does not
    (the score mod captures it detached), so T5 keeps SDPA with the bias, which gives it gradients."""
    calls = []
    monkeypatch.setattr(flex, "_errors", {})  # whatever an earlier test's compile did
    monkeypatch.setattr(flex, "flex_attention", lambda *a: calls.append(1) or torch.zeros_like(a[0]))
    flex.set_mode("always")
    try:
        for name, used in (("alibi", True), ("t5", False)):
            calls.clear()
            attn = posenc.Attention(32, 2, encoding=name, causal=True).to(CUDA)
            attn(torch.randn(1, 16, 32, device=CUDA, requires_grad=True))
            assert bool(calls) == used, name
    finally:
        flex.set_mode("auto")


def test_bench_harness_on_cuda():
    """``posenc bench --device cuda --quick``: every RoPE case and bias build times on the GPU,
    with positive times and the accelerator named in the metadata."""
    from posenc.bench import report

    result = report.run(quick=True, sections=["rope", "bias"], dtypes=(torch.bfloat16,), peers=False, device=CUDA)
    assert result["meta"]["device"].startswith("cuda: ")
    steady = [r for r in result["rope"] + result["bias"] if r.get("kind") == "steady"]
    assert len(steady) >= 10
    assert all(r["median_ms"] > 0 and r["x_floor"] > 0 for r in steady)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_small_inputs_take_the_triton_kernel_on_cuda(layout, dtype, monkeypatch):
    """Training-size heads under compile="auto" take the Triton kernel on a GPU (not several eager
    kernels), q and k of one projection in one launch forward and backward; out=; repeated calls
    replay their plan; all equal the reference (float32 to 1e-5, 16-bit to one
    unit in the last place) and so do the gradients."""
    launched = []
    launch = _rope_triton.launch
    monkeypatch.setattr(_rope_triton, "launch", lambda *a: launched.append(launch(*a)) or launched[-1])
    b, s, h, hd = 8, 32, 4, 16
    cos, sin = _tables(torch.arange(s), hd, layout)
    fast_rope._call_plans.clear()
    for step in range(3):  # the second call plans, the third replays
        qkv = torch.randn(b, s, 3, h, hd, device=CUDA).to(dtype).requires_grad_()
        q, k, _ = (t.transpose(1, 2) for t in qkv.unbind(2))  # [b, h, s, hd] views
        both = qkv[:, :, :2].permute(2, 0, 3, 1, 4)  # [2, b, h, s, hd]
        rq, rk = fast_rope.fast_apply_rope_pair(q, k, both, cos, sin, layout=layout)
        ref_q, ref_k = (F.apply_rope(t.detach(), cos, sin, layout=layout) for t in (q, k))
        _close(rq, ref_q)
        _close(rk, ref_k)
        g = torch.randn_like(rq)
        (rq * g + rk * g.flip(0)).sum().backward()  # gradients for q and k: one launch back
        exact = F.apply_rope(g.double(), cos.double(), -sin.double(), layout=layout).to(dtype)
        _close(qkv.grad[:, :, 0].transpose(1, 2), exact)
        out = torch.full_like(ref_q, float("nan"))
        _close(fast_apply_rope(q.detach(), cos, sin, layout=layout, out=out), ref_q)
    assert launched and all(p is not None for p in launched)
    assert any(p.pair for p in launched)  # q and k in one launch, forward and backward
    assert any(v is not None for v in fast_rope._call_plans.values())


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_triton_launch_runner_serves_new_inputs_of_its_layout(layout, dtype):
    """A prepared launch (the call plans' :class:`~posenc.functional._rope_triton.Launch`) goes
    through the compiled kernel's own runner after its first launch, once that runner has been
    checked against Triton's launch; new inputs of the layout, in place too, equal the reference;
    an input at another 16-byte alignment goes through Triton's launch and is right as well."""
    x0 = torch.randn(2, 8, 100, 64, device=CUDA).to(dtype)
    cos, sin = _tables(torch.arange(100), 64, layout)
    ch, sh = fast_rope._half_tables(cos, sin, layout)
    tables = (ch, sh) if ch.stride(-1) == 1 else fast_rope._paired_tables(ch, sh)
    plan = _rope_triton.launch(x0, *tables, torch.empty_like(x0), layout, False)
    for _ in range(3):
        x = torch.randn_like(x0)
        out = torch.full_like(x, float("nan"))
        assert plan(x, out)
        _close(out, F.apply_rope(x, cos, sin, layout=layout))
    assert _rope_triton._direct_ok is True and plan.runner is not None and plan.align == (True,) * 4
    y = torch.randn_like(x0)
    ref = F.apply_rope(y, cos, sin, layout=layout)
    assert plan(y, y)
    _close(y, ref)
    buf = torch.randn(x0.numel() + 2, device=CUDA).to(dtype)
    x = buf[2:].view_as(x0)  # 4 or 8 bytes past a 16-byte boundary
    out = torch.full_like(x, float("nan"))
    assert plan(x, out)
    _close(out, F.apply_rope(x, cos, sin, layout=layout))


@pytest.mark.parametrize("scheme", ["rope", "t5", "alibi", "sinusoidal", "none"])
def test_attention_training_step_never_synchronises(scheme):
    """A training forward and backward of posenc.Attention queues its kernels without waiting for
    the GPU (a launch-bound step stalls at every sync): the default positions are known ranges
    (no read-back to check them), T5's buckets are cached, RoPE is one launch each way.
    ``torch.cuda.set_sync_debug_mode("error")`` raises at any synchronising call."""
    attn = posenc.Attention(64, 4, encoding=scheme, causal=True).to(CUDA)
    x = torch.randn(8, 32, 64, device=CUDA, requires_grad=True)
    for _ in range(2):  # the first call builds caches and compiles
        attn(x).sum().backward()
    torch.cuda.synchronize()
    try:
        with warnings.catch_warnings():  # "a prototype feature": it may miss syncs, it does not invent them
            warnings.simplefilter("ignore", UserWarning)
            torch.cuda.set_sync_debug_mode("error")
        for _ in range(2):
            attn(x).sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("scheme", ["rope", "t5", "alibi", "learned"])
def test_decoding_with_a_kv_cache_never_synchronises(scheme):
    """Decoding steps with default positions continue the cache's known range: no read-back of the
    last position, no check of the bias positions (see test_attention_training_step_never_synchronises)."""
    attn = posenc.Attention(64, 4, encoding=scheme, causal=True).to(CUDA).eval()
    x = torch.randn(2, 12, 64, device=CUDA)
    with torch.no_grad():
        cache = posenc.KVCache()
        attn(x[:, :4], cache=cache)
        attn(x[:, 4:5], cache=cache)  # the first step builds what later steps reuse
        torch.cuda.synchronize()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                torch.cuda.set_sync_debug_mode("error")
            for t in range(5, 8):
                attn(x[:, t:t + 1], cache=cache)
        finally:
            torch.cuda.set_sync_debug_mode("default")
