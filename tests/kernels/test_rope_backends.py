"""Every RoPE backend of posenc.kernels against the reference ``posenc.functional.apply_rope``.

One parametrized parity test runs each backend over layouts, dtypes, partial rotary, table shapes
and memory layouts, as a new tensor, into ``out=`` and in place, forward and inverse: bit for bit
where the backend promises it (all but one), else within one rounding of the result (the complex
multiply of float32/float64 interleaved pairs: ATen's complex product may round a component's two
terms differently). The complex backend hands half pairs and 16-bit inputs to the eager one.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import posenc
from posenc import functional as F
from posenc import kernels
from posenc.kernels import backend_for, rope, rope_

LAYOUTS = ("half", "interleaved")
CPU_BACKENDS = ("reference", "eager", "complex", "compiled")  # triton: in its interpreter, below


def _tables(positions, rotary_dim, layout, dtype=torch.float32):
    inv_freq, _ = F.rope_inv_freq(rotary_dim)
    return F.rope_cos_sin(positions, inv_freq, layout=layout, dtype=dtype)


def _exact(x, cos, sin, layout, inverse=False, rotary_start=0):
    """The rotation in float64 (sin negated for the inverse): the truth every backend approximates."""
    return F.apply_rope(
        x.double(), cos.double(), (-sin if inverse else sin).double(), layout=layout, rotary_start=rotary_start
    )


def _x(view, dtype, b=2, h=3, s=40, hd=32):
    """x [b, h, s, hd] in the memory layouts the backends meet."""
    if view == "contiguous":
        return torch.randn(b, h, s, hd, dtype=torch.float64).to(dtype)
    if view == "qkv":  # q as posenc.Attention makes it: a view of the fused projection
        return torch.randn(b, s, 3, h, hd, dtype=torch.float64).to(dtype).unbind(2)[1].transpose(1, 2)
    return torch.randn(b, s, h, hd, dtype=torch.float64).to(dtype).transpose(1, 2)  # token-major (SDPA's gradients)


def _positions(tables, b=2, h=3, s=40):
    return {
        "[s, r]": torch.arange(7, 7 + s),
        "[b, s, r]": torch.stack([torch.arange(s), torch.arange(1000, 1000 + s)]),
        "[b, h, s, r]": torch.randint(0, 5000, (b, h, s), generator=torch.Generator().manual_seed(1)),
    }[tables]


def _check_promise(backend, got, ref, layout="half"):
    if backend != "complex" or layout == "half" or got.dtype in (torch.bfloat16, torch.float16):
        assert torch.equal(got, ref), (got.double() - ref.double()).abs().max()
    else:  # one rounding of the result's dtype apart at most
        eps = torch.finfo(got.dtype).eps
        torch.testing.assert_close(got, ref, atol=4 * eps, rtol=2 * eps)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize(
    ("rotary_dim", "tables", "view"),
    [
        (32, "[s, r]", "contiguous"),
        (24, "[s, r]", "qkv"),
        (32, "[b, s, r]", "token-major"),
        (16, "[b, h, s, r]", "contiguous"),
    ],
)
@pytest.mark.parametrize("inverse", [False, True])
def test_every_backend_equals_the_reference(backend, layout, dtype, rotary_dim, tables, view, inverse):
    x = _x(view, dtype)
    cos, sin = _tables(
        _positions(tables), rotary_dim, layout, torch.float64 if dtype == torch.float64 else torch.float32
    )
    ref = F.apply_rope(x, cos, -sin if inverse else sin, layout=layout)
    new = rope(x, cos, sin, layout=layout, inverse=inverse, backend=backend)
    out = torch.full_like(x, float("nan"))
    assert rope(x, cos, sin, layout=layout, inverse=inverse, out=out, backend=backend) is out
    y = x.clone()
    assert rope_(y, cos, sin, layout=layout, inverse=inverse, backend=backend) is y
    for got in (new, out, y):
        assert got.dtype == dtype and got.shape == x.shape
        _check_promise(backend, got, ref, layout)
        assert torch.equal(got[..., rotary_dim:], x[..., rotary_dim:])  # unrotated features pass unchanged


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    ("x_dtype", "table_dtype", "atol"),
    [
        (torch.float64, torch.float32, 1e-12),  # float64 activations, default float32 tables
        (torch.float32, torch.float64, 1e-6),
        (torch.bfloat16, torch.bfloat16, 2**-6),  # tables cast to the model dtype, as transformers does
        (torch.float16, torch.float32, 2e-3),
    ],
)
def test_tables_in_another_dtype_than_x(backend, layout, x_dtype, table_dtype, atol):
    """Every backend computes in the promotion of x's and the tables' dtypes, as apply_rope does,
    and returns x's dtype."""
    x = torch.randn(2, 3, 40, 32, dtype=torch.float64).to(x_dtype)
    cos, sin = _tables(torch.arange(3, 43), 24, layout, table_dtype)
    ref = F.apply_rope(x, cos, sin, layout=layout)
    strided = torch.randn(2, 3, 40, 33, dtype=torch.float64).to(x_dtype)[..., 1:]  # odd offset: no complex view
    strided.copy_(x)
    for xin in (x, strided):
        for got in (
            rope(xin, cos, sin, layout=layout, backend=backend),
            rope(xin, cos, sin, layout=layout, out=torch.empty_like(xin), backend=backend),
            rope_(xin.clone(), cos, sin, layout=layout, backend=backend),
        ):
            assert got.dtype == x_dtype
            torch.testing.assert_close(got, ref, atol=atol, rtol=0)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("start", "width"), [(0, 16), (4, 8)], ids=["full", "slice-from-4"])
def test_backward_is_the_inverse_rotation(backend, layout, dtype, start, width):
    """d(R x)/dx applied to g is R(-angle) g (on the rotated slice from ``start``; the identity
    elsewhere): the backward through the dispatch is at least as close to the exact float64 value
    as autograd through the reference formula, and rounded once for bf16 (1 ulp of the exact
    value), where the reference's autograd rounds each of its terms."""
    x = torch.randn(2, 4, 24, 16).to(dtype).requires_grad_()
    cos, sin = _tables(torch.arange(100, 124), width, layout)
    g = torch.randn(2, 4, 24, 16).to(dtype)
    rope(x, cos, sin, layout=layout, backend=backend, rotary_start=start).backward(g)
    fast_grad, x.grad = x.grad, None
    F.apply_rope(x, cos, sin, layout=layout, rotary_start=start).backward(g)
    exact = _exact(g, cos, sin, layout, inverse=True, rotary_start=start)
    fast_err = (fast_grad.double() - exact).abs().max().item()
    ref_err = (x.grad.double() - exact).abs().max().item()
    assert fast_err <= ref_err + (1e-6 if dtype == torch.float32 else 0.0)
    assert fast_err <= (1e-6 if dtype == torch.float32 else 2**-8 * exact.abs().max().item())


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("start", [0, 2])
def test_gradcheck_and_second_derivatives(backend, layout, start):
    """The backward is itself differentiable (gradient penalties): gradcheck and gradgradcheck in
    float64, for the leading 6 features and for the trailing slice from ``start``."""
    x = torch.randn(1, 2, 5, 8, dtype=torch.float64, requires_grad=True)
    cos, sin = _tables(torch.arange(3, 8), 6, layout, torch.float64)
    fn = lambda t: rope(t, cos, sin, layout=layout, backend=backend, rotary_start=start)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_forward_mode_rotates_the_tangent(layout):
    """forward_ad (dual tensors through the Function's jvp) and torch.func.jvp (the reference under
    the transform) both give the tangent rotated by the same tables."""
    x, t = torch.randn(2, 3, 10, 8, dtype=torch.float64), torch.randn(2, 3, 10, 8, dtype=torch.float64)
    cos, sin = _tables(torch.arange(10), 8, layout, torch.float64)
    want = F.apply_rope(t, cos, sin, layout=layout)
    with torch.autograd.forward_ad.dual_level():
        out = rope(torch.autograd.forward_ad.make_dual(x, t), cos, sin, layout=layout, backend="eager")
        tangent = torch.autograd.forward_ad.unpack_dual(out).tangent
    torch.testing.assert_close(tangent, want, atol=1e-12, rtol=0)
    _, tangent = torch.func.jvp(lambda a: rope(a, cos, sin, layout=layout), (x,), (t,))
    torch.testing.assert_close(tangent, want, atol=1e-12, rtol=0)


def test_torch_func_transforms_take_the_reference():
    """Under grad and vmap the inputs are wrappers without storage: the dispatch hands them to the
    reference formula, and the results equal autograd's and a loop's."""
    x = torch.randn(3, 2, 6, 8, dtype=torch.float64)
    cos, sin = _tables(torch.arange(6), 8, "half", torch.float64)
    grad = torch.func.grad(lambda a: rope(a, cos, sin).square().sum())(x)
    xr = x.clone().requires_grad_()
    F.apply_rope(xr, cos, sin).square().sum().backward()
    torch.testing.assert_close(grad, xr.grad, atol=1e-12, rtol=0)
    batched = torch.func.vmap(lambda a: rope(a, cos, sin))(x)
    torch.testing.assert_close(batched, torch.stack([F.apply_rope(a, cos, sin) for a in x]), atol=0, rtol=0)


def test_inside_torch_compile_the_formula_is_traced():
    """Inside a compiled function the dispatch returns the reference formula for the outer compiler."""
    x = torch.randn(1, 2, 9, 16)
    cos, sin = _tables(torch.arange(9), 16, "half")
    compiled = torch.compile(lambda a: rope(a, cos, sin) * 2, dynamic=False)
    torch.testing.assert_close(compiled(x), F.apply_rope(x, cos, sin) * 2, atol=1e-6, rtol=0)


def test_dispatch_table():
    """backend_for is the table of the package docstring."""
    small = torch.randn(2, 4, 16, 16)
    large = torch.randn(1, 8, 1024, 128)  # 2^20 elements
    cos_s, _ = _tables(16, 16, "half")
    cos_l, _ = _tables(1024, 128, "half")
    assert large.numel() == kernels.COMPILE_MIN_NUMEL
    assert backend_for(small, cos_s, "half") == "eager"
    assert backend_for(large, cos_l, "half") == "compiled"
    assert backend_for(large, cos_l, "interleaved") == "complex"  # float32 interleaved: the complex multiply
    assert backend_for(small, cos_s, "interleaved") == "eager"
    assert backend_for(large.bfloat16(), cos_l, "interleaved") == "compiled"
    assert backend_for(small, cos_s.clone().requires_grad_(), "half") == "reference"
    assert set(kernels.BACKENDS) == {"reference", "eager", "complex", "compiled", "triton"}


def test_tables_that_need_gradients_get_them():
    """A learnable table takes the reference path, so autograd reaches it."""
    x = torch.randn(1, 2, 6, 8, dtype=torch.float64)
    cos, sin = (t.requires_grad_() for t in _tables(torch.arange(6), 8, "half", torch.float64))
    rope(x, cos, sin).sum().backward()
    assert cos.grad is not None and sin.grad is not None and cos.grad.abs().sum() > 0


@pytest.mark.parametrize("length", [17, 300, 1025])
def test_one_compiled_pass_serves_every_length_and_batch(length):
    """Lengths, batch and head counts are dynamic in the compiled pass: every one equals the reference."""
    for b, h in ((1, 2), (3, 1)):
        x = torch.randn(b, h, length, 32)
        cos, sin = _tables(torch.arange(length), 32, "half")
        torch.testing.assert_close(rope(x, cos, sin, backend="compiled"), F.apply_rope(x, cos, sin), atol=0, rtol=0)


def test_warmup_compiles_and_returns_seconds():
    seconds = kernels.warmup(32, num_heads=2, dtypes=(torch.float32,), layouts=("half",))
    assert seconds >= 0
    x = torch.randn(1, 2, 50, 32)
    cos, sin = _tables(50, 32, "half")
    assert torch.equal(rope(x, cos, sin, backend="compiled"), F.apply_rope(x, cos, sin))


def test_bad_inputs_raise_clear_errors():
    x = torch.randn(1, 1, 4, 8)
    cos, sin = _tables(4, 8, "half")
    with pytest.raises(ValueError, match="unknown layout 'pairs'"):
        rope(x, cos, sin, layout="pairs")
    with pytest.raises(ValueError, match="unknown backend 'fast'"):
        rope(x, cos, sin, backend="fast")
    with pytest.raises(ValueError, match="out must match x"):
        rope(x, cos, sin, out=torch.empty(1, 1, 4, 6))
    with pytest.raises(ValueError, match="takes no part in autograd"):
        rope(x.clone().requires_grad_(), cos, sin, out=torch.empty(1, 1, 4, 8, requires_grad=True))
    with pytest.raises(ValueError, match="takes no part in autograd"):
        rope_(x.clone().requires_grad_(), cos, sin)
    with pytest.raises(TypeError, match="floating-point"):
        rope(torch.ones(1, 1, 4, 8, dtype=torch.long), cos, sin)
    with pytest.raises(ValueError, match="share memory"):
        rope_(torch.randn(1, 1, 1, 8).expand(1, 3, 4, 8), cos, sin)
    with pytest.raises(ValueError, match="compile must be"):
        kernels.fast_apply_rope(x, cos, sin, compile="yes")


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_out_partly_overlapping_x_is_refused(backend):
    """An out= that shares memory with x without being x would read inputs already overwritten
    (wrong numbers, up to 4.8 off, before this was refused): refused as torch's out= ops refuse it.
    x itself (same memory and strides) is in place."""
    buf = torch.randn(1, 2, 9, 8)
    x, out = buf[:, :, :8], buf[:, :, 1:]  # the same memory shifted by one position
    cos, sin = _tables(8, 8, "half")
    with pytest.raises(ValueError, match="out shares memory with x"):
        rope(x, cos, sin, out=out, backend=backend)
    want = F.apply_rope(x, cos, sin)
    assert rope(x, cos, sin, out=buf[:, :, :8], backend=backend).data_ptr() == x.data_ptr()
    _check_promise(backend, x, want)


def test_fast_apply_rope_names_of_earlier_releases_still_work():
    x = torch.randn(1, 2, 8, 16)
    cos, sin = _tables(8, 16, "interleaved")
    want = F.apply_rope(x, cos, sin, layout="interleaved")
    for compile in ("auto", True, False):
        torch.testing.assert_close(
            F.fast_apply_rope(x, cos, sin, layout="interleaved", compile=compile), want, atol=1e-6, rtol=0
        )
        y = x.clone()
        F.fast_apply_rope_(y, cos, sin, layout="interleaved", compile=compile)
        torch.testing.assert_close(y, want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rope_scheme_goes_through_the_kernels_and_matches_the_reference(layout):
    rope_scheme = posenc.create("rope", dim=16, layout=layout, rotary_dim=8)
    q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 9, 16)
    rq, rk = rope_scheme.rotate(q, k)
    cos_k, sin_k = rope_scheme.cos_sin(torch.arange(9))
    cos_q, sin_q = rope_scheme.cos_sin(torch.arange(4, 9))
    torch.testing.assert_close(rq, F.apply_rope(q, cos_q, sin_q, layout=layout), atol=1e-6, rtol=0)
    torch.testing.assert_close(rk, F.apply_rope(k, cos_k, sin_k, layout=layout), atol=1e-6, rtol=0)


def test_rope_rotate_takes_positions_as_lists():
    """Lists of positions, as Attention and XPos.rotate take them (a list once raised AttributeError)."""
    rope_scheme = posenc.create("rope", dim=8)
    q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)
    got = rope_scheme.rotate(q, k, [4, 5, 6], [4, 5, 6])
    want = rope_scheme.rotate(q, k, torch.tensor([4, 5, 6]), torch.tensor([4, 5, 6]))
    for a, b in zip(got, want):
        assert torch.equal(a, b)


_TRITON_SCRIPT = r"""
import itertools, torch
from posenc import functional as F
from posenc.kernels import rope, triton
for layout, dtype, (rd, inverse), tables, view in itertools.product(
        ("half", "interleaved"), (torch.float32, torch.float16, torch.bfloat16), ((32, False), (24, True)),
        ("shared", "per-batch", "per-head"), ("contiguous", "qkv")):
    b, h, s, hd = 2, 3, 40, 32
    x = (torch.randn(b, h, s, hd) if view == "contiguous" else torch.randn(b, s, 3, h, hd).unbind(2)[0].transpose(1, 2)).to(dtype)
    pos = {"shared": torch.arange(s), "per-batch": torch.stack([torch.arange(s), torch.arange(9, 9 + s)]),
           "per-head": torch.randint(0, 999, (b, h, s))}[tables]
    cos, sin = F.rope_cos_sin(pos, F.rope_inv_freq(rd)[0], layout=layout)
    assert triton.serves(x, cos)
    ref = F.apply_rope(x, cos, -sin if inverse else sin, layout=layout)
    for mode in ("new", "out", "inplace"):
        if mode == "new":
            got = rope(x, cos, sin, layout=layout, inverse=inverse, backend="triton")
        elif mode == "out":
            got = rope(x, cos, sin, layout=layout, inverse=inverse, out=torch.empty_like(x), backend="triton")
        else:
            got = x.clone()
            rope(got, cos, sin, layout=layout, inverse=inverse, out=got, backend="triton")
        if dtype == torch.bfloat16:  # the interpreter truncates float32 -> bfloat16 (GPUs round to nearest)
            torch.testing.assert_close(got.float(), ref.float(), atol=1e-6, rtol=2 ** -7)
        else:
            assert torch.equal(got, ref), (layout, dtype, rd, inverse, tables, view, mode)
print("ok")
"""


@pytest.mark.slow
def test_triton_kernel_in_the_interpreter():
    """The CUDA kernel, run by Triton's interpreter on the CPU: bit for bit the reference for every
    layout, dtype, partial rotary, inverse, table shape and view, new tensor, out= and in place
    (bfloat16 within one unit: the interpreter truncates where GPUs round; tests/kernels/test_cuda.py
    pins it bit for bit on a GPU)."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run(
        [sys.executable, "-c", _TRITON_SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]
