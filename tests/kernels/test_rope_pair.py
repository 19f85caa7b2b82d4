"""q and k rotated together (``kernels.rope_pair``, what ``Rope.rotate`` calls for self-attention)
and the compiled backend's grouped pass: bit for bit (float32 interleaved pairs through the complex
multiply: within one rounding) the reference ``posenc.functional.apply_rope``
on each tensor, in both layouts, float32 and bfloat16, with partial rotary, head counts that do
not split into the pass's groups, in place, and through autograd (the gradient of a rotation is
the inverse rotation of the gradient)."""

from __future__ import annotations

import pytest
import torch

from posenc import functional as F
from posenc import kernels
from posenc.kernels import compiled, rope_pair


def _same(got, want, layout):
    """Bit for bit, but for float32 interleaved pairs (the complex multiply: within one rounding)."""
    if layout == "interleaved" and got.dtype == torch.float32:
        torch.testing.assert_close(got, want, atol=4 * torch.finfo(got.dtype).eps, rtol=2 * torch.finfo(got.dtype).eps)
    else:
        assert torch.equal(got, want), (got.double() - want.double()).abs().max()


def _tables(s, rotary_dim, layout):
    inv_freq, _ = F.rope_inv_freq(rotary_dim)
    return F.rope_cos_sin(s, inv_freq, layout=layout)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("heads", [8, 3])  # 8: split into the pass's groups; 3: passed whole
@pytest.mark.parametrize("start", [0, 8])  # partial rotary from feature 8
def test_pair_equals_the_reference_on_each(layout, dtype, heads, start):
    s, hd = 40, 32
    q = torch.randn(2, heads, s, hd).to(dtype)
    k = torch.randn(2, heads, s, hd).to(dtype)
    cos, sin = _tables(s, hd - start, layout)
    for inverse in (False, True):
        sin_ref = -sin if inverse else sin
        want = [F.apply_rope(x, cos, sin_ref, layout=layout, rotary_start=start) for x in (q, k)]
        got = rope_pair(q, k, cos, sin, layout=layout, inverse=inverse, rotary_start=start)
        for g, w in zip(got, want):
            assert torch.equal(g, w), (g.double() - w.double()).abs().max()


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_compiled_pass_out_and_in_place(layout, dtype):
    """A single ``x`` split into :data:`compiled.GROUP` groups of heads, into ``out=`` and in place."""
    x = torch.randn(1, 4 * compiled.GROUP, 24, 64).to(dtype)
    cos, sin = _tables(24, 64, layout)
    want = F.apply_rope(x, cos, sin, layout=layout)
    out = kernels.rope(x, cos, sin, layout=layout, out=torch.empty_like(x), backend="compiled")
    assert torch.equal(out, want)
    y = x.clone()
    kernels.rope_(y, cos, sin, layout=layout, backend="compiled")
    assert torch.equal(y, want)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pair_gradients_are_the_inverse_rotation(layout, dtype):
    s, hd = 2048, 64  # 2^20 elements... with 8 heads: the compiled pass, not the eager one
    q = torch.randn(1, 8, s, hd).to(dtype).requires_grad_()
    k = torch.randn(1, 8, s, hd).to(dtype).requires_grad_()
    cos, sin = _tables(s, hd, layout)
    assert kernels.backend_for(q.detach(), cos, layout) in ("compiled", "complex")
    gq, gk = torch.randn_like(q), torch.randn_like(k)
    rq, rk = rope_pair(q, k, cos, sin, layout=layout)
    torch.autograd.backward((rq, rk), (gq, gk))
    _same(q.grad, F.apply_rope(gq, cos, -sin, layout=layout), layout)
    _same(k.grad, F.apply_rope(gk, cos, -sin, layout=layout), layout)
    q.grad = k.grad = None
    rope_pair(q, k, cos, sin, layout=layout)[1].backward(gk)  # only k's output used: q gets none
    assert q.grad is None
    _same(k.grad, F.apply_rope(gk, cos, -sin, layout=layout), layout)


def test_pair_of_different_shapes_rotates_each():
    q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 7, 16)
    cos, sin = _tables(7, 16, "half")
    with pytest.raises((ValueError, RuntimeError)):
        rope_pair(q, k, cos, sin)  # tables of 7 rows do not fit q's 5: refused as rope refuses it
    cq, sq = cos[:5], sin[:5]
    got = rope_pair(q, q.clone(), cq, sq)
    assert all(torch.equal(g, F.apply_rope(q, cq, sq)) for g in got)


def test_rope_scheme_rotates_q_and_k_as_the_reference():
    from posenc.schemes import create

    for layout in ("half", "interleaved"):
        scheme = create("rope", dim=64, layout=layout)
        q, k = torch.randn(1, 8, 2048, 64), torch.randn(1, 8, 2048, 64)
        cos, sin = _tables(2048, 64, layout)
        rq, rk = scheme.rotate(q, k)
        _same(rq, F.apply_rope(q, cos, sin, layout=layout), layout)
        _same(rk, F.apply_rope(k, cos, sin, layout=layout), layout)
