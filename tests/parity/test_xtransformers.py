"""Parity with x-transformers 2.31 (lucidrains/x-transformers, ``x_transformers/x_transformers.py``).

Every positional module of x-transformers that has a registered posenc counterpart is compared
number for number: ``AlibiPositionalBias`` (alibi), ``RelativePositionBias`` (t5),
``ScaledSinusoidalEmbedding`` (sinusoidal, ``learned_scale=True``), ``AbsolutePositionalEmbedding``
(learned), ``RotaryEmbedding`` + ``apply_rotary_pos_emb`` (rope, partial rotary, ``linear`` and ``ntk``
scalings, and its ``use_xpos`` against xpos). Its other position modules (``CoPE``,
``DynamicPositionBias``, ``DataDependentAlibi``, ``RelativeProjPositionalBias``, ``PolarEmbedding``)
have no posenc scheme and are not compared.

Conventions pinned where they differ:

* ALiBi: x-transformers always builds the symmetric ``-m·|j - i|``, for decoders too (the causal
  mask hides the future half). posenc's causal form is Press et al.'s ``-m·(i - j)`` (section 3),
  equal on the keys a causal query sees and of opposite sign on the masked ones.
* T5: x-transformers multiplies the bias by ``scale = dim_head ** 0.5`` (it adds the bias to logits
  before its own scaling); posenc's bias is the bare table value, as in T5 and HF ``T5Attention``.
* RoPE: x-transformers rotates interleaved pairs (its ``rotate_half`` pairs features 2i, 2i+1), so
  it is compared with ``layout="interleaved"``.

Tolerances: x-transformers forms angles in float32 (positions times float32 frequencies), posenc in
float64 reduced mod 2π; for the short positions used here the two agree to ~1e-6.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import functional as F

xt = pytest.importorskip("x_transformers.x_transformers")

ATOL = 5e-6  # float32 angles of the peer (ulp 3.8e-6 at 40 rad) against float64 angles, positions < 64


# -- ALiBi -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("heads", [1, 2, 3, 5, 6, 7, 8, 12, 16, 24, 33, 64])
def test_alibi_slopes_equal_x_transformers_get_slopes(heads: int) -> None:
    """``AlibiPositionalBias._get_slopes`` is Press et al.'s ``get_slopes`` (the closest power of two,
    then every other slope of twice as many heads); posenc's float32 slopes equal its float32
    buffer exactly, powers of two or not."""
    ref = xt.AlibiPositionalBias(heads=heads).slopes.flatten()  # [h]
    assert torch.equal(F.alibi_slopes(heads), ref)


@pytest.mark.parametrize("heads", [3, 8, 12])
@pytest.mark.parametrize(("i", "j"), [(1, 1), (5, 9), (16, 16), (1, 40)])
def test_alibi_symmetric_forward_equals_x_transformers(heads: int, i: int, j: int) -> None:
    """``AlibiPositionalBias.forward(i, j)``: queries at ``j-i .. j-1`` (the last ``i`` keys), keys
    ``0 .. j-1``, bias ``-m·|j - i|``; equals posenc ``alibi`` with ``bidirectional=True``, atol 1e-6."""
    ref = xt.AlibiPositionalBias(heads=heads)(i, j)  # [h, i, j]
    got = posenc.create("alibi", num_heads=heads, bidirectional=True).bias(torch.arange(j - i, j), torch.arange(j))
    assert got.shape == ref.shape == (heads, i, j)
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-6)


def test_alibi_causal_matches_x_transformers_where_visible_and_flips_sign_where_masked() -> None:
    """posenc's causal ALiBi (Press et al. section 3: ``-m·(i - j)``) equals x-transformers' symmetric
    bias on every key a causal query can see (j <= i) and is its negation on the masked keys (j > i),
    where posenc gives ``+m·(j - i)`` and x-transformers ``-m·(j - i)``. 7 heads, 6 queries over 11
    keys; attention outputs with a causal mask are therefore identical (checked with SDPA)."""
    heads, i, j = 7, 6, 11
    ref = xt.AlibiPositionalBias(heads=heads)(i, j)  # [h, i, j]
    q_pos, k_pos = torch.arange(j - i, j), torch.arange(j)
    got = posenc.create("alibi", num_heads=heads).bias(q_pos, k_pos)
    visible = k_pos[None, :] <= q_pos[:, None]  # [i, j]
    torch.testing.assert_close(got[:, visible], ref[:, visible], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(got[:, ~visible], -ref[:, ~visible], atol=1e-6, rtol=1e-6)
    assert bool((got[:, ~visible] > 0).all())  # the masked half is positive in posenc's form

    q = torch.randn(2, heads, i, 8)
    k, v = torch.randn(2, 2, heads, j, 8).unbind(0)
    minus_inf = torch.zeros(i, j).masked_fill(~visible, float("-inf"))
    out_ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=ref + minus_inf)
    out_got = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=got + minus_inf)
    torch.testing.assert_close(out_got, out_ref, atol=1e-6, rtol=1e-5)


def test_alibi_custom_positions_batched_and_partial_heads() -> None:
    """``forward_custom_pos`` with batched positions ``[b, s]`` gives ``[b, h, i, j]`` as posenc does for
    ``[b, s]`` positions; with ``total_heads`` > ``heads`` x-transformers pads the extra heads with a
    zero bias, whose first ``heads`` heads equal posenc with ``num_heads=heads``. atol 1e-6."""
    pos = torch.tensor([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]])
    ref = xt.AlibiPositionalBias(heads=4, total_heads=6).forward_custom_pos(pos.float())  # [b, 6, s, s]
    got = posenc.create("alibi", num_heads=4, bidirectional=True).bias(pos, pos)  # [b, 4, s, s]
    assert ref.shape == (2, 6, 5, 5) and got.shape == (2, 4, 5, 5)
    torch.testing.assert_close(got, ref[:, :4], atol=1e-6, rtol=1e-6)
    assert torch.equal(ref[:, 4:], torch.zeros(2, 2, 5, 5))


# -- T5 relative position bias ---------------------------------------------------------------------

BUCKET_CONFIGS = [(32, 128), (8, 20), (16, 64), (64, 256), (4, 10), (32, 33)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("num_buckets", "max_distance"), BUCKET_CONFIGS)
def test_t5_buckets_equal_x_transformers(causal: bool, num_buckets: int, max_distance: int) -> None:
    """``RelativePositionBias._relative_position_bucket(k - q, causal=...)`` equals
    ``F.t5_relative_bucket(k - q, bidirectional=not causal)`` bucket for bucket over -600..600 (exact)."""
    rel = torch.arange(-600, 601)
    ref = xt.RelativePositionBias._relative_position_bucket(
        rel, causal=causal, num_buckets=num_buckets, max_distance=max_distance
    )
    got = F.t5_relative_bucket(rel, bidirectional=not causal, num_buckets=num_buckets, max_distance=max_distance)
    assert torch.equal(got, ref)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("i", "j"), [(7, 7), (1, 30), (4, 150)])
def test_t5_bias_loads_x_transformers_weights_and_matches(causal: bool, i: int, j: int) -> None:
    """Both modules name their table ``relative_attention_bias`` ([num_buckets, heads]), so the
    x-transformers ``state_dict`` loads into posenc ``t5`` strictly. x-transformers' bias is posenc's
    times its ``scale`` (``dim_head ** 0.5`` inside x-transformers' Attention; 8.0 here), for queries
    at the last ``i`` of ``j`` positions; atol 1e-6."""
    heads, scale = 5, 8.0
    ref_module = xt.RelativePositionBias(scale=scale, causal=causal, num_buckets=16, max_distance=64, heads=heads)
    ours = posenc.create("t5", num_heads=heads, num_buckets=16, max_distance=64, bidirectional=not causal)
    ours.load_state_dict(ref_module.state_dict(), strict=True)
    ref = ref_module(i, j)  # [h, i, j]
    got = ours.bias(torch.arange(j - i, j), torch.arange(j)) * scale
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-6)


# -- absolute embeddings ---------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [2, 8, 64, 130])
def test_scaled_sinusoidal_equals_x_transformers(dim: int) -> None:
    """``ScaledSinusoidalEmbedding(dim)``: ``base^(-2i/d)`` (the paper's frequencies), sines then
    cosines (``half`` layout), times a learned scalar initialised to ``dim ** -0.5``: posenc
    ``sinusoidal`` with ``layout="half", learned_scale=True``; 300 positions, atol 1e-5 (float32 angles
    up to 300 rad in the peer)."""
    ref_module = xt.ScaledSinusoidalEmbedding(dim)
    x = torch.zeros(2, 300, dim)
    ref = ref_module(x)  # [s, dim]
    ours = posenc.create("sinusoidal", dim=dim, layout="half", learned_scale=True)
    torch.testing.assert_close(ours.scale.detach(), ref_module.scale.detach().view(()), atol=0, rtol=0)
    torch.testing.assert_close(ours.encode(300), ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(ours.embed(x), x + ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(ref_module.inv_freq.double(), F.sinusoidal_inv_freq(dim), atol=1e-7, rtol=1e-6)


def test_scaled_sinusoidal_offset_and_left_padding_equal_x_transformers() -> None:
    """x-transformers' ``offset`` (positions ``offset + 0..s-1``) and per-row positions ``p - start[b]``
    (negative on left pads) are posenc positions ``[s]`` and ``[b, s]``; atol 1e-5. The peer's own
    ``seq_start_pos`` path crashes in its ``einsum('i, j -> i j', ...)`` on the 2-D positions it builds
    (pinned below), so the rows are compared one sequence at a time through its ``pos`` argument."""
    dim, s = 32, 12
    ref_module = xt.ScaledSinusoidalEmbedding(dim)
    ours = posenc.create("sinusoidal", dim=dim, layout="half", learned_scale=True)
    x = torch.zeros(2, s, dim)
    torch.testing.assert_close(ours.encode(torch.arange(5, 5 + s)), ref_module(x, offset=5), atol=1e-5, rtol=0)
    start = torch.tensor([0, 4])
    positions = torch.arange(s)[None, :] - start[:, None]  # [b, s], negative on the pads
    ref = torch.stack([ref_module(x[b : b + 1], pos=positions[b]) for b in range(2)])  # [b, s, dim]
    torch.testing.assert_close(ours.embed(x, positions), ref, atol=1e-5, rtol=0)
    with pytest.raises(RuntimeError, match="einsum"):
        ref_module(x, seq_start_pos=start)


def test_absolute_positional_embedding_equals_learned_table_times_its_scale() -> None:
    """``AbsolutePositionalEmbedding(dim, max_seq_len)`` looks up row ``p`` and multiplies by
    ``dim ** -0.5``; posenc ``learned`` holds the bare rows (GPT-2 ``wpe``). With the peer's weights
    copied, posenc's rows times ``dim ** -0.5`` equal it for offsets and left padding (x-transformers
    clamps ``p - start`` at 0), exactly."""
    dim, max_len, s = 16, 32, 10
    ref_module = xt.AbsolutePositionalEmbedding(dim, max_len)
    ours = posenc.create("learned", dim=dim, max_len=max_len)
    with torch.no_grad():
        ours.table.weight.copy_(ref_module.emb.weight)
    x = torch.zeros(2, s, dim)
    scale = dim**-0.5
    assert torch.equal(ours.encode(s) * scale, ref_module(x))
    assert torch.equal(ours.encode(torch.arange(7, 7 + s)) * scale, ref_module(x, offset=7))
    start = torch.tensor([0, 3])
    positions = (torch.arange(s)[None, :] - start[:, None]).clamp(min=0)  # [b, s]
    assert torch.equal(ours.encode(positions) * scale, ref_module(x, seq_start_pos=start))


# -- rotary ----------------------------------------------------------------------------------------


def _xt_rotate(ref: torch.nn.Module, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor):
    """x-transformers' Attention path: ``freqs, scale = rotary(pos)``; q gets ``scale``, k ``scale ** -1``."""
    freqs, scale = ref(positions)
    k_scale = scale**-1.0 if torch.is_tensor(scale) else scale
    return xt.apply_rotary_pos_emb(q, freqs, scale), xt.apply_rotary_pos_emb(k, freqs, k_scale)


@pytest.mark.parametrize(("head_dim", "rotary_dim"), [(4, 4), (6, 6), (64, 64), (64, 32), (96, 48), (128, 16)])
@pytest.mark.parametrize("factor", [1.0, 4.0])
def test_rotary_partial_and_interpolation_equal_x_transformers(head_dim: int, rotary_dim: int, factor: float) -> None:
    """``RotaryEmbedding(rotary_dim, interpolation_factor=f)`` + ``apply_rotary_pos_emb`` (interleaved
    pairs, the first ``rotary_dim`` features rotated, the rest passed through, angles ``p·θ_i / f``)
    equals posenc ``rope`` with ``layout="interleaved"``, ``rotary_dim`` and ``linear`` scaling of
    factor ``f`` (Chen et al. 2023); 40 positions, atol 5e-6."""
    torch.manual_seed(1)
    q, k = torch.randn(2, 2, 3, 40, head_dim).unbind(0)
    ref_q, ref_k = _xt_rotate(xt.RotaryEmbedding(rotary_dim, interpolation_factor=factor), q, k, torch.arange(40))
    scaling = None if factor == 1.0 else {"rope_type": "linear", "factor": factor}
    rope = posenc.create("rope", dim=head_dim, rotary_dim=rotary_dim, layout="interleaved", scaling=scaling)
    got_q, got_k = rope.rotate(q, k)
    torch.testing.assert_close(got_q, ref_q, atol=ATOL, rtol=0)
    torch.testing.assert_close(got_k, ref_k, atol=ATOL, rtol=0)
    assert torch.equal(got_q[..., rotary_dim:], q[..., rotary_dim:])


def test_rotary_decoding_slice_and_batched_positions_equal_x_transformers() -> None:
    """``apply_rotary_pos_emb`` rotates a shorter q with the *last* ``sq`` rows of the table, as
    posenc's default query positions (the last ``sq`` of ``sk``); batched positions ``[b, s]`` give
    per-row angles in both. Head width 32, all rotated; atol 5e-6."""
    ref = xt.RotaryEmbedding(32)
    rope = posenc.create("rope", dim=32, layout="interleaved")
    q, k = torch.randn(1, 4, 3, 32), torch.randn(1, 4, 20, 32)
    freqs, _ = ref(torch.arange(20))
    got_q, got_k = rope.rotate(q, k)
    torch.testing.assert_close(got_q, xt.apply_rotary_pos_emb(q, freqs), atol=ATOL, rtol=0)
    torch.testing.assert_close(got_k, xt.apply_rotary_pos_emb(k, freqs), atol=ATOL, rtol=0)

    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [10, 11, 12, 13, 14, 15]])  # [b, s]
    x = torch.randn(2, 4, 6, 32)
    freqs, _ = ref(positions)  # [b, s, 32]
    got, _ = rope.rotate(x, x, positions, positions)
    torch.testing.assert_close(got, xt.apply_rotary_pos_emb(x, freqs), atol=ATOL, rtol=0)


@pytest.mark.parametrize("factor", [2.0, 8.0])
def test_rotary_base_rescale_equals_static_ntk(factor: float) -> None:
    """``RotaryEmbedding(dim, base_rescale_factor=f)`` raises the base to ``base·f^(d/(d-2))`` (bloc97's
    NTK-aware rule): posenc's ``{"rope_type": "ntk", "factor": f}``. Frequencies rtol 1e-6 (the peer's
    are float32), rotations atol 5e-6."""
    dim = 32
    ref = xt.RotaryEmbedding(dim, base_rescale_factor=factor)
    inv_freq, scale = F.rope_inv_freq(dim, scaling={"rope_type": "ntk", "factor": factor})
    assert scale == 1.0
    torch.testing.assert_close(inv_freq, ref.inv_freq.double(), atol=0, rtol=1e-6)
    x = torch.randn(1, 2, 50, dim)
    got, _ = posenc.create(
        "rope", dim=dim, layout="interleaved", scaling={"rope_type": "ntk", "factor": factor}
    ).rotate(x, x)
    ref_x, _ = _xt_rotate(ref, x, x, torch.arange(50))
    torch.testing.assert_close(got, ref_x, atol=ATOL, rtol=0)


@pytest.mark.parametrize(("length", "scale_base"), [(1, 512.0), (10, 512.0), (33, 64.0), (200, 16.0)])
def test_rotary_use_xpos_equals_xpos_centred_at_half_length(length: int, scale_base: float) -> None:
    """``RotaryEmbedding(dim, use_xpos=True)``: ``ζ_i = (2i + 0.4d) / (1.4d)`` (Sun et al. 2022 with
    γ = 0.4), q times ``ζ^((p - c)/B)`` and k times ``ζ^(-(p - c)/B)`` with the centre
    ``c = (max position + 1) // 2``. That is posenc ``xpos`` with ``layout="interleaved"``,
    ``gamma=0.4`` and ``center=length // 2``; rotated q and k to 2e-6 of their largest magnitude (the
    peer's float32 angles, multiplied by factors up to ~2500 at length 200, B 16),
    and the scores (to 1e-5 of their largest) do not depend on the centre."""
    dim = 16
    q, k = torch.randn(2, 1, 2, length, dim).unbind(0)
    ref_q, ref_k = _xt_rotate(xt.RotaryEmbedding(dim, use_xpos=True, scale_base=scale_base), q, k, torch.arange(length))
    xpos = posenc.create("xpos", dim=dim, layout="interleaved", scale_base=scale_base, center=float(length // 2))
    got_q, got_k = xpos.rotate(q, k)
    for got, ref in ((got_q, ref_q), (got_k, ref_k)):  # float32 angle errors grow with the factors
        torch.testing.assert_close(got, ref, atol=2e-6 * float(ref.abs().max()), rtol=1e-5)
    centred_at_zero = posenc.create("xpos", dim=dim, layout="interleaved", scale_base=scale_base)
    q0, k0 = centred_at_zero.rotate(q, k)
    ref_scores = ref_q @ ref_k.transpose(-1, -2)  # [b, h, s, s]
    torch.testing.assert_close(
        q0 @ k0.transpose(-1, -2), ref_scores, atol=1e-5 * float(ref_scores.abs().max()), rtol=1e-4
    )


def test_rotary_bfloat16_input_rotated_in_float32_like_x_transformers() -> None:
    """Both rotate a bf16 input with float32 tables and round once to bf16: the results agree to
    one bf16 rounding (atol 2**-7 on unit-scale inputs), and posenc's float32 rotation of the same
    bf16 values agrees with its bf16 result to one rounding too."""
    x = torch.randn(1, 2, 300, 64).to(torch.bfloat16)
    freqs, _ = xt.RotaryEmbedding(64)(torch.arange(300))
    ref = xt.apply_rotary_pos_emb(x, freqs)
    rope = posenc.create("rope", dim=64, layout="interleaved")
    got, _ = rope.rotate(x, x)
    assert got.dtype == ref.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), ref.float(), atol=2**-7, rtol=0)
    exact, _ = rope.rotate(x.float(), x.float())
    torch.testing.assert_close(got.float(), exact, atol=2**-7, rtol=2**-7)


def test_rotary_two_features_where_x_transformers_cannot() -> None:
    """x-transformers' ``RotaryEmbedding(2)`` divides by ``dim - 2`` (its NTK rescale) and raises
    ZeroDivisionError even with no rescale; posenc rotates a 2-feature head by the angle ``p`` itself
    (θ_0 = base^0 = 1): the 2x2 rotation matrix, atol 1e-6."""
    with pytest.raises(ZeroDivisionError):
        xt.RotaryEmbedding(2)
    x = torch.randn(1, 1, 30, 2)
    got, _ = posenc.create("rope", dim=2, layout="interleaved").rotate(x, x)
    angle = torch.arange(30, dtype=torch.float64)
    cos, sin = angle.cos(), angle.sin()
    a, b = x[0, 0, :, 0].double(), x[0, 0, :, 1].double()
    expected = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)  # [s, 2]
    torch.testing.assert_close(got[0, 0].double(), expected, atol=1e-6, rtol=0)


# -- whole attention layers ------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["alibi", "t5", "rope", "xpos"])
def test_attention_layer_equals_x_transformers_attention(scheme: str) -> None:
    """x-transformers ``Attention(dim, heads, dim_head, causal=True)`` with its positional module, and
    ``posenc.Attention`` with the same weights (q, k, v projections stacked into ``qkv``, the output
    projection's bias zero, as x-transformers has none) give the same output, atol 1e-6.
    x-transformers adds ``scale · table`` to the already scaled logits with ``scale = dim_head ** 0.5``,
    so its T5 table equals posenc's table divided by ``sqrt(dim_head)``; its rotary is interleaved and
    its xPos centre is ``length // 2``."""
    dim, heads, length = 24, 3, 7
    head_dim = dim // heads
    ref = xt.Attention(dim, heads=heads, dim_head=head_dim, causal=True)
    encodings = {
        "alibi": "alibi",
        "t5": "t5",
        "rope": posenc.create("rope", dim=head_dim, layout="interleaved"),
        "xpos": posenc.create("xpos", dim=head_dim, layout="interleaved", center=float(length // 2)),
    }
    ours = posenc.Attention(dim, heads, encoding=encodings[scheme], causal=True)
    with torch.no_grad():
        ours.qkv.weight.copy_(torch.cat((ref.to_q.weight, ref.to_k.weight, ref.to_v.weight), dim=0))  # [3d, d]
        ours.proj.weight.copy_(ref.to_out.weight)
        ours.proj.bias.zero_()
    kwargs: dict = {}
    if scheme == "alibi":
        kwargs["rel_pos"] = xt.AlibiPositionalBias(heads=heads)
    elif scheme == "t5":
        kwargs["rel_pos"] = xt.RelativePositionBias(scale=head_dim**0.5, causal=True, heads=heads)
        with torch.no_grad():
            ours.encoding.relative_attention_bias.weight.copy_(
                kwargs["rel_pos"].relative_attention_bias.weight * head_dim**0.5
            )
    else:
        kwargs["rotary_pos_emb"] = xt.RotaryEmbedding(head_dim, use_xpos=scheme == "xpos")(torch.arange(length))
    x = torch.randn(2, length, dim)
    expected = ref(x, **kwargs)
    expected = expected[0] if isinstance(expected, tuple) else expected
    torch.testing.assert_close(ours(x), expected, atol=1e-6, rtol=1e-5)
