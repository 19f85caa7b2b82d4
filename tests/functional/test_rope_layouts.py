"""RoPE in other stacks' conventions: ``[b, s, h, hd]`` inputs, half-width tables, layout aliases,
flash-attention's ``apply_rotary_emb``, the inverse rotation and a rotated slice past feature 0.

The flash-attention reference below re-states ``apply_rotary_emb_torch`` of
Dao-AILab/flash-attention ``flash_attn/layers/rotary.py`` (flash-attention is not installed):
``x (b, s, h, hd)``, ``cos, sin (s, r/2)`` repeated to ``(s, 1, r)`` as ``(2 d)`` (GPT-NeoX halves)
or ``(d 2)`` (interleaved), ``x[..., :r] * cos + rotate_half(x[..., :r]) * sin`` concatenated with
``x[..., r:]``; ``rotate_half`` is ``cat(-x2, x1)`` of the halves, or ``stack(-x_odd, x_even)``
interleaved. Its ``apply_rotary`` (``flash_attn/ops/triton/rotary.py``) reads token ``t`` of
sequence ``i`` from table row ``t + seqlen_offsets[i]``, and with ``cu_seqlens`` the tokens of
each document from row 0 (plus its offset).
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import functional as F
from posenc import kernels
from posenc.kernels.rotary import apply_rotary_emb as fast_apply_rotary_emb


def _rotate_half_flash(x: torch.Tensor, interleaved: bool) -> torch.Tensor:
    if not interleaved:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def flash_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """flash-attention's ``apply_rotary_emb_torch`` (see the module docstring)."""
    r = cos.shape[-1] * 2
    if interleaved:
        cos, sin = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
    else:
        cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)  # "... d -> ... 1 (2 d)"
    return torch.cat((x[..., :r] * cos + _rotate_half_flash(x[..., :r], interleaved) * sin, x[..., r:]), dim=-1)


def _half_tables(n: int, r: int, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = F.rope_inv_freq(r)[0]
    angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq  # [n, r/2]
    return angles.cos().to(dtype), angles.sin().to(dtype)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("r", [8, 4])
def test_apply_rotary_emb_equals_flash_attention_reference(interleaved, r):
    x = torch.randn(2, 5, 3, 8)  # [b, s, h, hd]
    cos, sin = _half_tables(9, r)
    want = flash_reference(x, cos[:5], sin[:5], interleaved)
    for impl in (F.apply_rotary_emb, fast_apply_rotary_emb):
        torch.testing.assert_close(impl(x, cos, sin, interleaved), want, atol=1e-6, rtol=0)
    # seqlen_offsets: an int for all, a tensor per sequence (rows t + offset)
    torch.testing.assert_close(
        F.apply_rotary_emb(x, cos, sin, interleaved, seqlen_offsets=3),
        flash_reference(x, cos[3:8], sin[3:8], interleaved),
    )
    offsets = torch.tensor([1, 4])
    per_row = torch.cat(
        [flash_reference(x[i : i + 1], cos[o : o + 5], sin[o : o + 5], interleaved) for i, o in enumerate([1, 4])]
    )
    for impl in (F.apply_rotary_emb, fast_apply_rotary_emb):
        torch.testing.assert_close(impl(x, cos, sin, interleaved, seqlen_offsets=offsets), per_row, atol=1e-6, rtol=0)


@pytest.mark.parametrize("interleaved", [False, True])
def test_apply_rotary_emb_varlen_restarts_each_document(interleaved):
    """Packed ``[total, h, hd]`` with ``cu_seqlens``: each document from its table row 0 (plus its
    offset), an empty document in the middle; ``inplace`` writes into x."""
    lengths = [3, 0, 5, 2]
    cu = torch.tensor([0, 3, 3, 8, 10])
    x = torch.randn(10, 2, 8)
    cos, sin = _half_tables(12, 6)
    offsets = torch.tensor([0, 7, 2, 5])
    pieces, start = [], 0
    for n, o in zip(lengths, offsets.tolist()):
        pieces.append(flash_reference(x[None, start : start + n], cos[o : o + n], sin[o : o + n], interleaved)[0])
        start += n
    want = torch.cat(pieces)
    got = F.apply_rotary_emb(x, cos, sin, interleaved, seqlen_offsets=offsets, cu_seqlens=cu, max_seqlen=5)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    y = x.clone()
    out = fast_apply_rotary_emb(
        y, cos, sin, interleaved, inplace=True, seqlen_offsets=offsets, cu_seqlens=cu, max_seqlen=5
    )
    assert out is y
    torch.testing.assert_close(y, want, atol=1e-6, rtol=0)
    # the gradient of the fast form is the inverse rotation (R^T g): <R x, g> = <x, R^T g>, norms kept
    xg = x.clone().requires_grad_()
    g = torch.randn_like(x)
    rotated = fast_apply_rotary_emb(xg, cos, sin, interleaved, seqlen_offsets=offsets, cu_seqlens=cu)
    (grad,) = torch.autograd.grad(rotated, xg, g)
    torch.testing.assert_close((want * g).sum(), (x * grad).sum(), atol=1e-5, rtol=0)
    torch.testing.assert_close(grad.norm(), g.norm(), atol=1e-5, rtol=0)


def test_apply_rotary_emb_bad_input():
    x = torch.randn(10, 2, 8)
    cos, sin = _half_tables(6, 8)
    cu = torch.tensor([0, 4, 10])
    with pytest.raises(ValueError, match="max_seqlen=5 is shorter than the longest document"):
        F.apply_rotary_emb(x, cos, sin, cu_seqlens=cu, max_seqlen=5)
    with pytest.raises(ValueError, match=r"tables hold rows 0\.\.5 but these tokens need rows 0\.\.7"):
        F.apply_rotary_emb(x, cos, sin, cu_seqlens=cu, seqlen_offsets=torch.tensor([0, 2]))
    with pytest.raises(ValueError, match="seqlen_offsets must be"):
        F.apply_rotary_emb(x, cos, sin, cu_seqlens=cu, seqlen_offsets=torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="must end at the token count 10"):
        F.apply_rotary_emb(x, cos, sin, cu_seqlens=torch.tensor([0, 4, 9]))
    with pytest.raises(ValueError, match=r"with cu_seqlens, x must be packed \[total, h, hd\]"):
        F.apply_rotary_emb(x[None], cos, sin, cu_seqlens=cu)
    with pytest.raises(ValueError, match="half-width tables of width 8 rotate 16 features, but x has 8"):
        F.apply_rotary_emb(torch.randn(1, 3, 2, 8), *_half_tables(4, 16))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("backend", [None, "eager", "reference"])
def test_bshd_rotates_as_bhsd_without_a_transpose(layout, backend):
    """``[b, s, h, hd]`` with ``seq_dim=-3`` (tables ``[s, r]`` or ``[b, s, r]``) equals the
    ``[b, h, s, hd]`` rotation transposed, bit for bit, and the result keeps the ``[b, s, h, hd]`` layout."""
    x = torch.randn(2, 5, 3, 8)  # [b, s, h, hd]
    inv_freq = F.rope_inv_freq(8)[0]
    for positions in (torch.arange(5), torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])):
        cos, sin = F.rope_cos_sin(positions, inv_freq, layout=layout)  # [s, r] or [b, s, r]
        want = F.apply_rope(x.transpose(1, 2), cos, sin, layout=layout).transpose(1, 2)
        assert torch.equal(F.apply_rope(x, cos, sin, layout=layout, seq_dim=1), want)
        got = kernels.rope(x, cos, sin, layout=layout, seq_dim=-3, backend=backend)
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
        assert got.is_contiguous()  # [b, s, h, hd] as given
        y = x.clone()
        kernels.rope_(y, cos, sin, layout=layout, seq_dim=-3, backend=backend)
        torch.testing.assert_close(y, want, atol=1e-6, rtol=0)


def test_seq_dim_bad_input():
    x = torch.randn(2, 5, 3, 8)
    cos, sin = F.rope_cos_sin(5, F.rope_inv_freq(8)[0])
    with pytest.raises(ValueError, match="seq_dim=3 is not a sequence axis"):
        F.apply_rope(x, cos, sin, seq_dim=3)
    with pytest.raises(ValueError, match=r"do not broadcast against x of shape \(2, 5, 3, 8\) with seq_dim=-2"):
        F.apply_rope(x, cos, sin)  # [b, s, h, hd] without seq_dim: s = 5 lines up with h = 3
    with pytest.raises(TypeError, match="seq_dim must be an int"):
        F.apply_rope(x, cos, sin, seq_dim=1.0)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("r", [8, 4])
def test_half_width_tables_equal_full_width(layout, r):
    x = torch.randn(2, 3, 5, 8)
    cos, sin = F.rope_cos_sin(5, F.rope_inv_freq(r)[0], layout=layout)  # [s, r]
    cos_h, sin_h = (cos[:, : r // 2], sin[:, : r // 2]) if layout == "half" else (cos[:, ::2], sin[:, ::2])
    want = F.apply_rope(x, cos, sin, layout=layout)
    assert torch.equal(F.apply_rope(x, cos_h, sin_h, layout=layout, tables="half"), want)
    assert torch.equal(kernels.rope(x, cos_h, sin_h, layout=layout, tables="half"), want)


def test_tables_that_fit_neither_width():
    x = torch.randn(1, 2, 5, 8)
    wide = torch.zeros(5, 10)
    with pytest.raises(ValueError, match="cos/sin rotate 10 features but x has only 8.*tables='half'"):
        F.apply_rope(x, wide, wide)
    with pytest.raises(
        ValueError, match="half-width tables of width 10 rotate 20 features, but x has 8.*tables='full'"
    ):
        F.apply_rope(x, wide, wide, tables="half")
    with pytest.raises(
        ValueError, match="half-width tables of width 3 rotate 6 features, but x has 8 from rotary_start=4"
    ):
        kernels.rope(x, torch.zeros(5, 3), torch.zeros(5, 3), tables="half", rotary_start=4)
    with pytest.raises(ValueError, match="rotated width cos.shape\\[-1\\] must be a positive even number, got 3"):
        F.apply_rope(x, torch.zeros(5, 3), torch.zeros(5, 3))
    with pytest.raises(ValueError, match="unknown tables 'quarter'; choose one of: 'full', 'half'"):
        F.apply_rope(x, wide, wide, tables="quarter")


def test_layout_aliases():
    x = torch.randn(1, 2, 5, 8)
    for layout in ("half", "interleaved"):
        cos, sin = F.rope_cos_sin(5, F.rope_inv_freq(8)[0], layout=layout)
        want = F.apply_rope(x, cos, sin, layout=layout)
        flag = layout == "interleaved"
        for kwargs in ({"interleaved": flag}, {"is_neox_style": not flag}, {"layout": layout, "interleaved": flag}):
            assert torch.equal(F.apply_rope(x, cos, sin, **kwargs), want)
            assert torch.equal(kernels.rope(x, cos, sin, **kwargs), want)
    assert F.resolve_layout() == "half"
    with pytest.raises(ValueError, match="contradictory pair layouts: interleaved=True, is_neox_style=True"):
        F.apply_rope(x, cos, sin, interleaved=True, is_neox_style=True)
    with pytest.raises(ValueError, match="contradictory pair layouts: layout='half', interleaved=True"):
        kernels.rope(x, cos, sin, layout="half", interleaved=True)
    with pytest.raises(TypeError, match="interleaved must be True, False or None, got 'yes'"):
        F.apply_rope(x, cos, sin, interleaved="yes")


@pytest.mark.parametrize(
    ("layout", "backend"),
    [(layout, backend) for layout in ("half", "interleaved") for backend in (None, "eager", "reference")]
    + [("interleaved", "complex")],  # the complex backend takes interleaved pairs
)
def test_inverse_undoes_the_rotation_and_is_the_negative_angle(layout, backend):
    x = torch.randn(2, 3, 6, 8, dtype=torch.float64)
    positions = torch.arange(100, 106)
    inv_freq = F.rope_inv_freq(8)[0]
    cos, sin = F.rope_cos_sin(positions, inv_freq, layout=layout, dtype=torch.float64)
    turned = kernels.rope(x, cos, sin, layout=layout, backend=backend)
    back = kernels.rope(turned, cos, sin, layout=layout, inverse=True, backend=backend)
    torch.testing.assert_close(back, x, atol=1e-12, rtol=0)
    # R(a)^T = R(-a): the inverse is the rotation at the negated positions
    neg = F.rope_cos_sin(-positions, inv_freq, layout=layout, dtype=torch.float64)
    torch.testing.assert_close(
        F.apply_rope(x, cos, sin, layout=layout, inverse=True), F.apply_rope(x, *neg, layout=layout)
    )
    torch.testing.assert_close(F.apply_rope(turned, cos, sin, layout=layout, inverse=True), x, atol=1e-12, rtol=0)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("backend", [None, "eager", "reference"])
def test_rotary_start_rotates_a_slice_and_leaves_the_rest(layout, backend):
    """DeepSeek-V4's trailing slice: features [start, start + r) rotate as the sliced tensor would,
    the others are returned bit for bit; the gradient is the inverse rotation on the slice."""
    x = torch.randn(2, 3, 5, 12)
    cos, sin = F.rope_cos_sin(5, F.rope_inv_freq(4)[0], layout=layout)  # r = 4
    for start in (0, 3, 8):
        want = F.apply_rope(x[..., start : start + 4], cos, sin, layout=layout)
        for got in (
            F.apply_rope(x, cos, sin, layout=layout, rotary_start=start),
            kernels.rope(x, cos, sin, layout=layout, rotary_start=start, backend=backend),
            kernels.rope_(x.clone(), cos, sin, layout=layout, rotary_start=start, backend=backend),
        ):
            torch.testing.assert_close(got[..., start : start + 4], want, atol=1e-6, rtol=0)
            assert torch.equal(got[..., :start], x[..., :start])
            assert torch.equal(got[..., start + 4 :], x[..., start + 4 :])
    xg = x.clone().requires_grad_()
    grad = torch.randn_like(x)
    kernels.rope(xg, cos, sin, layout=layout, rotary_start=8, backend=backend).backward(grad)
    want_grad = F.apply_rope(grad, cos, sin, layout=layout, rotary_start=8, inverse=True)
    torch.testing.assert_close(xg.grad, want_grad, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_rotary_start_in_place_through_the_compiled_backend():
    """In place with a slice past feature 0, the compiled pass (which rotates in place through a
    temporary) equals the reference (one compile, ~10 s on the CPU)."""
    x = torch.randn(2, 3, 5, 12)
    cos, sin = F.rope_cos_sin(5, F.rope_inv_freq(4)[0])
    want = F.apply_rope(x, cos, sin, rotary_start=8)
    got = kernels.rope_(x.clone(), cos, sin, rotary_start=8, backend="compiled")
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_rotary_start_bad_input():
    x = torch.randn(1, 2, 5, 12)
    cos, sin = F.rope_cos_sin(5, F.rope_inv_freq(4)[0])
    with pytest.raises(ValueError, match="rotary_start=9 with 4 rotated features needs 13 features, but x has 12"):
        F.apply_rope(x, cos, sin, rotary_start=9)
    with pytest.raises(ValueError, match="rotary_start must be a non-negative int"):
        kernels.rope(x, cos, sin, rotary_start=-4)


def test_rope_scheme_inverse_and_trailing_slice():
    """The scheme with ``rotary_start`` (DeepSeek-V4: the last ``rotary_dim`` features of a head)
    equals the functional rotation of that slice; ``inverse=True`` and ``rotate_one`` undo it."""
    rope = posenc.create("rope", dim=16, rotary_dim=6, rotary_start=10)
    q, k = torch.randn(2, 3, 7, 16), torch.randn(2, 3, 7, 16)
    positions = torch.arange(20, 27)
    q2, k2 = rope.rotate(q, k, positions, positions)
    cos, sin = F.rope_cos_sin(positions, F.rope_inv_freq(6)[0])
    torch.testing.assert_close(q2, F.apply_rope(q, cos, sin, rotary_start=10), atol=1e-6, rtol=0)
    assert torch.equal(k2[..., :10], k[..., :10])
    q3, k3 = rope.rotate(q2, k2, positions, positions, inverse=True)
    torch.testing.assert_close(q3, q, atol=1e-6, rtol=0)
    torch.testing.assert_close(k3, k, atol=1e-6, rtol=0)
    torch.testing.assert_close(rope.rotate_one(q, positions), q2, atol=0, rtol=0)
    torch.testing.assert_close(rope.rotate_one(q2, positions, inverse=True), q, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="rotary_start=12 with 6 rotated features needs 18 features, but dim=16"):
        posenc.create("rope", dim=16, rotary_dim=6, rotary_start=12)
    with pytest.raises(TypeError, match="xpos rotates queries and keys by its own rule"):
        posenc.create("xpos", dim=8).rotate_one(q[..., :8])


_TRITON_SCRIPT = r"""
import torch
from posenc import functional as F
from posenc.kernels import rope, rope_
from posenc.kernels.triton import serves
torch.manual_seed(0)
cu = torch.tensor([0, 7, 7, 30, 41])
positions = F.positions_from_cu_seqlens(cu)  # [total]
for layout in ("half", "interleaved"):
    for shape, seq_dim, pos in (((41, 3, 32), -3, positions), ((2, 41, 3, 32), 1, positions), ((2, 3, 41, 32), -2, positions)):
        x = torch.randn(shape)
        cos, sin = F.rope_cos_sin(pos, F.rope_inv_freq(16)[0], layout=layout)  # [total, 16]
        half = (cos[:, :8], sin[:, :8]) if layout == "half" else (cos[:, ::2], sin[:, ::2])
        assert serves(x, cos)
        for start, inverse in ((0, False), (16, True), (5, False)):
            ref = F.apply_rope(x, cos, sin, layout=layout, seq_dim=seq_dim, rotary_start=start, inverse=inverse)
            kw = dict(layout=layout, seq_dim=seq_dim, rotary_start=start, inverse=inverse, backend="triton")
            assert torch.equal(rope(x, cos, sin, **kw), ref), (layout, shape, start)
            assert torch.equal(rope(x, *half, tables="half", **kw), ref), (layout, shape, start)
            assert torch.equal(rope_(x.clone(), cos, sin, **kw), ref), (layout, shape, start)
print("ok")
"""


@pytest.mark.slow
def test_triton_kernel_takes_packed_and_bshd_inputs_in_the_interpreter():
    """The CUDA kernel, run by Triton's interpreter on the CPU, on packed ``[total, h, hd]`` and
    ``[b, s, h, hd]`` inputs (``seq_dim``), half-width tables, a slice from ``rotary_start`` and the
    inverse: bit for bit the reference, new tensor and in place."""
    import os
    import subprocess
    import sys

    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run(
        [sys.executable, "-c", _TRITON_SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_apply_rotary_emb_computes_half_precision_in_float32_as_flash_attention(dtype):
    """flash-attention's kernel loads x, cos and sin as float32 and rounds once: with half-precision
    tables too, both entry points give that result exactly (bf16 arithmetic is 1-2 ulp off)."""
    from posenc.kernels.rotary import apply_rotary_emb as fast

    x = torch.randn(2, 32, 4, 64, generator=torch.Generator().manual_seed(0)).to(dtype)
    angles = torch.arange(32, dtype=torch.float64)[:, None] * F.rope_inv_freq(64)[0]  # [s, r/2]
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    c, s = cos.float()[:, None], sin.float()[:, None]  # [s, 1, r/2]
    x1, x2 = x.float().chunk(2, dim=-1)
    expected = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(dtype)
    assert torch.equal(F.apply_rotary_emb(x, cos, sin), expected)
    assert torch.equal(fast(x, cos, sin), expected)


def test_fast_apply_rotary_emb_in_place_is_differentiable_as_flash_attentions():
    """A projection's output rotated in place (flash-attention's RotaryEmbedding does) still carries
    the gradient: the rotation's transpose, as without inplace."""
    from posenc.kernels.rotary import apply_rotary_emb as fast

    angles = torch.arange(8, dtype=torch.float64)[:, None] * F.rope_inv_freq(16)[0]
    cos, sin = angles.cos().float(), angles.sin().float()
    w = torch.randn(1, 8, 2, 16, requires_grad=True)
    fast(w * 1.0, cos, sin, inplace=True).pow(2).sum().backward()
    expected = torch.autograd.grad(fast(w * 1.0, cos, sin).pow(2).sum(), w)[0]
    torch.testing.assert_close(w.grad, expected)
