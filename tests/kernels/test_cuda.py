"""posenc.kernels on CUDA: the Triton RoPE backend against the reference, the dispatch that picks
it, ``warmup``, the compiled backend (Inductor -> Triton), autograd's backward; the Toeplitz bias
builds, FlexAttention's backward (its forward: tests/kernels/test_flex.py, on both devices), the
benchmark harness, and training and decoding steps that never synchronise.

Skipped without CUDA (this project's CI has none); run on a GPU machine with
``python -m pytest tests/kernels/test_cuda.py``. The Triton backend promises the reference bit
for bit (float32 arithmetic without fused multiply-adds, one rounding to ``x``'s dtype), so it is
compared with ``torch.equal``; Triton's interpreter checks the same kernel on the CPU
(tests/kernels/test_rope_backends.py). The compiled backend on CUDA is Inductor's Triton code,
which may contract a multiply and an add into one FMA where the reference rounds twice:
float32 within 1e-5, 16-bit results within one unit in the last place of the reference.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import posenc
from posenc import flex, kernels
from posenc import functional as F
from posenc.kernels import backend_for, compiled, rope, rope_, triton
from posenc.kernels import flex as flex_kernel

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

CUDA = "cuda"
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
ULP = {torch.float32: 1e-5, torch.bfloat16: 2**-7, torch.float16: 2**-10}


@pytest.fixture(autouse=True)
def _no_tf32():
    """Full float32 matmuls and convolutions while a test runs, as the reference computes them.
    Saved and restored by hand: ``torch.backends.cuda.matmul`` answers ``allow_tf32`` through
    ``__getattr__``, which ``monkeypatch`` cannot restore."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture
def triton_runs(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What each call of the Triton backend answered (True: the kernel rotated the input; False:
    it declined and the eager backend ran instead)."""
    answers: list[bool] = []
    real = triton.rotate_into

    def recorded(*args):
        answers.append(real(*args))
        return answers[-1]

    monkeypatch.setattr(triton, "rotate_into", recorded)
    return answers


def _tables(positions, rotary_dim, layout):
    inv_freq, _ = F.rope_inv_freq(rotary_dim)
    return F.rope_cos_sin(positions, inv_freq.to(CUDA), layout=layout)  # [*p, r] float32 on the GPU


def _close(got: torch.Tensor, ref: torch.Tensor) -> None:
    """float32 to 1e-5; 16-bit to one unit in the last place of the reference."""
    assert got.dtype == ref.dtype and got.device == ref.device
    if ref.dtype == torch.float32:
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
    else:
        torch.testing.assert_close(got.float(), ref.float(), atol=ULP[ref.dtype] * 2**-6, rtol=ULP[ref.dtype])


def _x(view: str, dtype: torch.dtype, b: int = 2, h: int = 5, s: int = 70, hd: int = 64) -> torch.Tensor:
    """x ``[b, h, s, hd]``: contiguous, or q as a view of a fused qkv projection ``[b, s, 3, h, hd]``."""
    if view == "contiguous":
        return torch.randn(b, h, s, hd, device=CUDA).to(dtype)
    return torch.randn(b, s, 3, h, hd, device=CUDA).to(dtype).permute(2, 0, 3, 1, 4)[0]


def _positions(tables: str, b: int = 2, h: int = 5, s: int = 70) -> torch.Tensor:
    """Positions for tables shared by every head (``[s, r]``), per batch (``[b, s, r]``), per head (``[b, h, s, r]``)."""
    shape = {"shared": (s,), "per-batch": (b, s), "per-head": (b, h, s)}[tables]
    return torch.arange(int(torch.tensor(shape).prod()), device=CUDA).reshape(shape) * 7


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tables", ["shared", "per-batch", "per-head"])
@pytest.mark.parametrize("view", ["contiguous", "qkv"])
def test_triton_backend_bit_exact_on_cuda(layout, dtype, tables, view, triton_runs):
    """The Triton backend equals the reference bit for bit as a new tensor, into out= and in
    place, forward and inverse, whole and partial rotary (the features past r unchanged), for
    tables shared, per batch and per head, on contiguous x and on q viewed in a qkv projection."""
    x = _x(view, dtype)
    assert triton.serves(x, _tables(_positions(tables), 64, layout)[0])
    for rotary_dim, inverse in ((64, False), (40, True)):
        cos, sin = _tables(_positions(tables), rotary_dim, layout)
        ref = F.apply_rope(x, cos, -sin if inverse else sin, layout=layout)
        new = rope(x, cos, sin, layout=layout, inverse=inverse, backend="triton")
        out = torch.full_like(x, float("nan"))
        assert rope(x, cos, sin, layout=layout, inverse=inverse, out=out, backend="triton") is out
        y = x.clone()
        assert rope_(y, cos, sin, layout=layout, inverse=inverse, backend="triton") is y
        for got in (new, out, y):
            assert got.dtype == dtype and got.shape == x.shape
            assert torch.equal(got, ref), (got.double() - ref.double()).abs().max()
            assert torch.equal(got[..., rotary_dim:], x[..., rotary_dim:])
    assert triton_runs and all(triton_runs), "the Triton kernel declined an input it serves"


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_triton_backend_takes_unaligned_inputs_and_outputs(layout, dtype, triton_runs):
    """x and out at an offset of 4 or 8 bytes past a 16-byte boundary: still the reference, bit for bit."""
    shape = (2, 8, 100, 64)
    x = torch.randn(torch.Size(shape).numel() + 2, device=CUDA).to(dtype)[2:].view(shape)
    out = torch.full((x.numel() + 1,), float("nan"), device=CUDA, dtype=dtype)[1:].view(shape)
    cos, sin = _tables(torch.arange(100), 64, layout)
    ref = F.apply_rope(x, cos, sin, layout=layout)
    assert torch.equal(rope(x, cos, sin, layout=layout, out=out, backend="triton"), ref)
    assert torch.equal(rope_(x, cos, sin, layout=layout, backend="triton"), ref)
    assert triton_runs and all(triton_runs)


def test_backend_for_picks_triton_on_cuda():
    """The dispatch table on CUDA: the Triton kernel for 16- and 32-bit x with float32 tables, small
    or large, either layout; the reference for tables that need gradients; float64 is not Triton's."""
    cos, _ = _tables(torch.arange(1024), 128, "half")
    for dtype in DTYPES:
        for shape in ((2, 4, 16, 128), (1, 8, 1024, 128)):  # below and at COMPILE_MIN_NUMEL
            x = torch.zeros(shape, device=CUDA, dtype=dtype)
            c = cos[: shape[2]]
            assert backend_for(x, c, "half") == backend_for(x, c, "interleaved") == "triton", (dtype, shape)
    x = torch.zeros(1, 8, 1024, 128, device=CUDA)
    assert backend_for(x, cos.clone().requires_grad_(), "half") == "reference"
    assert backend_for(x.double(), cos.double(), "half") != "triton"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_default_dispatch_on_cuda_odd_head_count_and_long_sequence(dtype, layout, triton_runs):
    """71 heads (Falcon-7B) at 2048 positions through the default dispatch (the Triton kernel):
    new tensor, out= and in place equal the reference bit for bit."""
    x = torch.randn(1, 71, 2048, 64, device=CUDA).to(dtype)
    cos, sin = _tables(torch.arange(2048), 64, layout)
    ref = F.apply_rope(x, cos, sin, layout=layout)
    assert torch.equal(rope(x, cos, sin, layout=layout), ref)
    assert torch.equal(rope(x, cos, sin, layout=layout, out=torch.empty_like(x)), ref)
    assert torch.equal(rope_(x.clone(), cos, sin, layout=layout), ref)
    assert triton_runs and all(triton_runs)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rotary_dim", [64, 48])
def test_compiled_backend_on_cuda_equals_reference(layout, dtype, rotary_dim):
    """The compiled backend forced on CUDA (torch.compile -> Inductor's Triton code): new tensor,
    out= and in place, forward and inverse, with an offset and partial rotary, for 8 heads."""
    x = torch.randn(2, 8, 100, 64, device=CUDA).to(dtype)  # [b, h, s, hd]
    cos, sin = _tables(torch.arange(37, 137), rotary_dim, layout)
    for inverse in (False, True):
        ref = F.apply_rope(x, cos, -sin if inverse else sin, layout=layout)
        out = torch.full_like(x, float("nan"))
        assert rope(x, cos, sin, layout=layout, inverse=inverse, out=out, backend="compiled") is out
        y = x.clone()
        assert rope_(y, cos, sin, layout=layout, inverse=inverse, backend="compiled") is y
        for got in (rope(x, cos, sin, layout=layout, inverse=inverse, backend="compiled"), out, y):
            _close(got, ref)
            assert torch.equal(got[..., rotary_dim:], x[..., rotary_dim:])
    assert compiled.available(), compiled.error()  # it compiled, rather than handing the work to eager


@pytest.mark.parametrize("backend", [None, "triton", "compiled"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_on_cuda_is_the_inverse_rotation(backend, layout, dtype):
    """autograd through the dispatch (the default: Triton; and each GPU backend forced): the
    gradient is R(-angle) g, within one rounding of the float64 value, and the forward still
    equals the reference."""
    x = torch.randn(2, 8, 100, 64, device=CUDA).to(dtype).requires_grad_()
    cos, sin = _tables(torch.arange(37, 137), 48, layout)
    g = torch.randn(2, 8, 100, 64, device=CUDA).to(dtype)
    y = rope(x, cos, sin, layout=layout, backend=backend)
    _close(y.detach(), F.apply_rope(x.detach(), cos, sin, layout=layout))
    y.backward(g)
    exact = F.apply_rope(g.double(), cos.double(), -sin.double(), layout=layout)  # R(-angle) g
    _close(x.grad, exact.to(dtype))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_training_size_views_take_the_triton_kernel_forward_and_backward(layout, dtype, triton_runs):
    """q and k of one qkv projection at the experiments' training size, through Rope.rotate as
    posenc.Attention calls it: the Triton kernel rotates them forward and their gradients
    backward (no eager fallback), and results and gradients equal the reference."""
    b, s, h, hd = 8, 32, 4, 16
    scheme = posenc.create("rope", dim=hd, layout=layout).to(CUDA)
    cos, sin = scheme.cos_sin(torch.arange(s, device=CUDA))  # [s, hd]: the tables rotate() reads
    qkv = torch.randn(b, s, 3, h, hd, device=CUDA).to(dtype).requires_grad_()
    q, k, _ = (t.transpose(1, 2) for t in qkv.unbind(2))  # [b, h, s, hd] views
    rq, rk = scheme.rotate(q, k)
    assert torch.equal(rq, F.apply_rope(q.detach(), cos, sin, layout=layout))
    assert torch.equal(rk, F.apply_rope(k.detach(), cos, sin, layout=layout))
    g = torch.randn_like(rq)
    (rq * g + rk * g.flip(0)).sum().backward()
    exact = F.apply_rope(g.double(), cos.double(), -sin.double(), layout=layout).to(dtype)
    _close(qkv.grad[:, :, 0].transpose(1, 2), exact)
    assert len(triton_runs) == 4 and all(triton_runs)  # q and k, forward and backward


def test_rope_warmup_compiles_for_cuda():
    """kernels.warmup(device="cuda") compiles the compiled backend's passes: afterwards a call at a
    new length reuses them (no compile: well under a second) and equals the reference."""
    import time

    seconds = kernels.warmup(64, num_heads=8, dtypes=(torch.bfloat16,), layouts=("half",), device=CUDA)
    assert seconds > 0 and compiled.available(), compiled.error()
    x = torch.randn(1, 8, 3000, 64, device=CUDA).to(torch.bfloat16)
    cos, sin = _tables(torch.arange(3000), 64, "half")
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = rope(x, cos, sin, out=torch.empty_like(x), backend="compiled")
    torch.cuda.synchronize()
    assert time.perf_counter() - start < 1.0
    _close(out, F.apply_rope(x, cos, sin))


def test_rope_scheme_on_cuda_equals_cpu():
    """The scheme moved to the GPU rotates q, k [1, 32, 512, 128] as on the CPU."""
    rope_scheme = posenc.create("rope", dim=128)
    q, k = torch.randn(1, 32, 512, 128), torch.randn(1, 32, 512, 128)
    cpu = rope_scheme.rotate(q, k)
    gpu = rope_scheme.to(CUDA).rotate(q.to(CUDA), k.to(CUDA))
    for a, b in zip(gpu, cpu):
        torch.testing.assert_close(a.cpu(), b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize(("sq", "sk", "q0", "k0"), [(300, 300, 0, 0), (4, 200, 196, 0)])
def test_bias_builds_on_cuda_equal_the_cpu(bidirectional, sq, sk, q0, k0):
    slopes, table = F.alibi_slopes(6), torch.randn(32, 6)
    for build, weights in ((F.alibi_bias_range, slopes), (F.t5_bias_range, table)):
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
    monkeypatch.setattr(flex_kernel, "available", lambda *a, **k: True)  # whatever an earlier test's compile did
    monkeypatch.setattr(flex_kernel, "flex_attention", lambda *a, **k: calls.append(1) or torch.zeros_like(a[0]))
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
    """``posenc bench --device cuda --quick``: every RoPE case (the Triton backend among them, and
    picked by the default dispatch) and bias build times on the GPU, with positive times and the
    accelerator named in the metadata."""
    from posenc.bench import report

    result = report.run(quick=True, sections=["rope", "bias"], dtypes=(torch.bfloat16,), peers=False, device=CUDA)
    assert result["meta"]["device"].startswith("cuda: ")
    steady = [r for r in result["rope"] + result["bias"] if r.get("kind") == "steady"]
    assert len(steady) >= 10
    assert all(r["median_ms"] > 0 and r["x_floor"] > 0 for r in steady)
    rope_rows = [r for r in result["rope"] if r.get("kind") == "steady"]
    assert {"posenc out= (triton)", "posenc in-place (triton)"} <= {r["case"] for r in rope_rows}
    assert all(r["auto_backend"] == "triton" for r in rope_rows)


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
                attn(x[:, t : t + 1], cache=cache)
        finally:
            torch.cuda.set_sync_debug_mode("default")
