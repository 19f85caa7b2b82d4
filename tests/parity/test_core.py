"""Parity of the core with the installed reference implementations (tier 1 of docs/design.md's tests).

Peers: Hugging Face transformers (Llama, GPT-J, T5, Bloom), positional-encodings, rotary-embedding-torch
and x-transformers. Each test states its tolerance and why: the peers form angles in float32
(``position * inv_freq`` rounded to float32, ~6e-8 relative), posenc in float64, so at positions
below ~100 the two differ by at most ~1e-5 in cos/sin.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import functional as F

transformers = pytest.importorskip("transformers")


# -- Hugging Face Llama: half layout ----------------------------------------------------------


def _llama_rope(head_dim: int, rope_parameters: dict):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        head_dim=head_dim,
        max_position_embeddings=256,
        rope_parameters=rope_parameters,
    )
    return LlamaRotaryEmbedding(config)


@pytest.mark.parametrize(
    "rope_parameters, scaling",
    [
        ({"rope_type": "default", "rope_theta": 10000.0}, None),
        ({"rope_type": "default", "rope_theta": 500000.0}, None),
        ({"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}, {"rope_type": "linear", "factor": 4.0}),
    ],
)
def test_llama_apply_rotary_pos_emb(rope_parameters: dict, scaling: dict | None) -> None:
    """HF ``LlamaRotaryEmbedding`` + ``apply_rotary_pos_emb`` (half layout) against ``posenc`` rope,
    positions [b, s] with different rows; atol 1e-5 (float32 angles in HF at positions < 100)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    hd = 32
    rope = _llama_rope(hd, rope_parameters)
    q, k = torch.randn(2, 2, 7, hd), torch.randn(2, 2, 7, hd)
    position_ids = torch.stack((torch.arange(7), torch.arange(40, 47)))  # [b, s]
    cos, sin = rope(q, position_ids)
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos, sin)

    ours = posenc.create("rope", dim=hd, base=rope_parameters["rope_theta"], scaling=scaling)
    q_out, k_out = ours.rotate(q, k, position_ids, position_ids)
    torch.testing.assert_close(q_out, q_ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(k_out, k_ref, atol=1e-5, rtol=0)

    # the functional path gives the same numbers and the same tables
    inv_freq, scale = F.rope_inv_freq(hd, base=rope_parameters["rope_theta"], scaling=scaling)
    torch.testing.assert_close(inv_freq.float(), rope.inv_freq, atol=0, rtol=1e-6)
    c, s = F.rope_cos_sin(position_ids, inv_freq, attention_scale=scale)
    torch.testing.assert_close(c, cos, atol=1e-5, rtol=0)
    torch.testing.assert_close(s, sin, atol=1e-5, rtol=0)


# -- GPT-J: interleaved layout with partial rotary ---------------------------------------------


@pytest.mark.parametrize("rotary_dim", [16, 64])
def test_gptj_interleaved_partial_rotary(rotary_dim: int) -> None:
    """GPT-J's ``create_sinusoidal_positions`` + ``apply_rotary_pos_emb`` (``rotate_every_two``) on the
    first ``rotary_dim`` features, the rest passed through, as ``GPTJAttention.forward`` does; atol 1e-5."""
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb, create_sinusoidal_positions

    b, s, h, hd = 2, 9, 3, 64
    key = torch.randn(b, s, h, hd)  # GPT-J's layout before its permute: [b, s, h, hd]
    position_ids = torch.stack((torch.arange(s), torch.arange(20, 20 + s)))  # [b, s]
    table = create_sinusoidal_positions(64, rotary_dim)  # [max_pos, rotary_dim]: sin | cos
    sin, cos = table[position_ids].split(rotary_dim // 2, dim=-1)  # [b, s, rotary_dim/2] each
    k_rot = apply_rotary_pos_emb(key[..., :rotary_dim], sin, cos)
    ref = torch.cat((k_rot, key[..., rotary_dim:]), dim=-1).transpose(1, 2)  # [b, h, s, hd]

    rope = posenc.create("rope", dim=hd, layout="interleaved", rotary_dim=rotary_dim)
    k = key.transpose(1, 2)  # [b, h, s, hd]
    _, got = rope.rotate(k, k, position_ids, position_ids)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
    assert torch.equal(got[..., rotary_dim:], k[..., rotary_dim:])


# -- T5 buckets and bias -------------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (64, 256), (16, 64), (8, 20), (128, 1000)])
def test_t5_relative_position_bucket(bidirectional: bool, num_buckets: int, max_distance: int) -> None:
    """HF ``T5Attention._relative_position_bucket`` over relative positions -3000..3000: exactly equal."""
    from transformers.models.t5.modeling_t5 import T5Attention

    rel = torch.arange(-3000, 3001)
    ref = T5Attention._relative_position_bucket(
        rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    got = F.t5_relative_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    assert torch.equal(got, ref)


@pytest.mark.parametrize("is_decoder", [False, True])
def test_t5_attention_layer_with_hf_weights(is_decoder: bool) -> None:
    """``posenc.Attention(..., encoding="t5", scale=1.0)`` with the weights of HF ``T5Attention``
    (its projections concatenated into ``qkv``) gives HF's output: T5 does not scale its logits by
    1/sqrt(head width), which the default ``scale`` does (2.5 apart without it)."""
    from transformers import T5Config
    from transformers.models.t5.modeling_t5 import T5Attention

    config = T5Config(d_model=32, d_kv=8, num_heads=4, is_decoder=is_decoder)
    config._attn_implementation = "eager"
    hf = T5Attention(config, has_relative_attention_bias=True).eval()
    ours = posenc.Attention(
        32, 4, encoding=posenc.create("t5", num_heads=4, bidirectional=not is_decoder), causal=is_decoder, scale=1.0
    ).eval()
    with torch.no_grad():
        ours.qkv.weight.copy_(torch.cat((hf.q.weight, hf.k.weight, hf.v.weight)))
        ours.proj.weight.copy_(hf.o.weight)
        ours.proj.bias.zero_()
        ours.encoding.relative_attention_bias.weight.copy_(hf.relative_attention_bias.weight)
        x = torch.randn(2, 20, 32)
        mask = None
        if is_decoder:  # HF takes the causal mask as an additive [b, 1, sq, sk] tensor
            mask = torch.full((20, 20), float("-inf")).triu(1)[None, None].expand(2, 1, 20, 20)
        want = hf(x, mask=mask)[0]
        torch.testing.assert_close(ours(x), want, atol=2e-6, rtol=0)
        assert (posenc.Attention(32, 4, encoding="t5", causal=is_decoder).scale, ours.scale) == (8**-0.5, 1.0)


@pytest.mark.parametrize("is_decoder", [False, True])
def test_t5_bias_with_hf_weights(is_decoder: bool) -> None:
    """The ``t5`` scheme loaded with the weights of HF ``T5Attention`` gives ``compute_bias`` exactly,
    also with a cache offset (``past_seen_tokens``)."""
    from transformers import T5Config
    from transformers.models.t5.modeling_t5 import T5Attention

    config = T5Config(
        d_model=32,
        d_kv=8,
        num_heads=4,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        is_decoder=is_decoder,
    )
    hf = T5Attention(config, has_relative_attention_bias=True)
    ours = posenc.create("t5", num_heads=4, bidirectional=not is_decoder)
    ours.load_state_dict(hf.state_dict(), strict=False)
    assert torch.equal(ours.relative_attention_bias.weight, hf.relative_attention_bias.weight)
    with torch.no_grad():
        ref = hf.compute_bias(50, 50)[0]  # [h, q, k]
        ref_decode = hf.compute_bias(3, 300, past_seen_tokens=297)[0]
    for grad in (False, True):  # without gradients a cached fast path serves ranges; with them the formula
        with torch.set_grad_enabled(grad):
            torch.testing.assert_close(ours.bias(torch.arange(50), torch.arange(50)), ref, atol=0, rtol=0)
            got = ours.bias(torch.arange(297, 300), torch.arange(300))
            torch.testing.assert_close(got, ref_decode, atol=0, rtol=0)
    # scattered (every other position) and batched positions go through the formula
    with torch.no_grad():
        every_other = torch.arange(0, 50, 2)
        torch.testing.assert_close(ours.bias(every_other, every_other), ref[:, ::2, ::2], atol=0, rtol=0)
        batched = torch.stack((torch.arange(50), torch.arange(50)))  # [b, s]
        torch.testing.assert_close(ours.bias(batched, batched), ref.expand(2, -1, -1, -1), atol=0, rtol=0)


# -- ALiBi -----------------------------------------------------------------------------------------


def test_bloom_alibi_slopes_1_to_64_heads() -> None:
    """HF Bloom ``build_alibi_tensor`` (its column at position 1 is the slopes) for 1..64 heads.

    Bloom rounds the base to float32 and then raises it to powers up to 2n - 1 in float32, which
    compounds the base's rounding (measured: 5.0e-7 relative at most); posenc computes the reference's
    Python floats (``get_slopes``) and rounds once. Tolerance rtol 1e-6, atol 0."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    for n in range(1, 65):
        alibi = build_alibi_tensor(torch.ones(1, 2), n, torch.float32)  # [n, 1, 2]
        ref = alibi.view(n, 2)[:, 1]
        assert torch.equal(alibi.view(n, 2)[:, 0], torch.zeros(n))
        torch.testing.assert_close(F.alibi_slopes(n), ref, atol=0, rtol=1e-6, msg=f"num_heads={n}")


@pytest.mark.parametrize("max_bias", [4.0, 8.0, 16.0, 5.5])
def test_mpt_alibi_with_its_alibi_bias_max(max_bias: float) -> None:
    """HF ``build_mpt_alibi_tensor(heads, L, alibi_bias_max)`` (``-slope · (L - 1 - j)`` along the
    keys) for 1..40 heads equals the ``alibi`` scheme's causal bias with ``max_bias`` (which MPT
    configs set; the paper's 8 is the default); float32 powers in HF: rtol 1e-6."""
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    for n in range(1, 41):
        ref = build_mpt_alibi_tensor(n, 9, alibi_bias_max=max_bias)[:, 0]  # [n, 9]: the last query's row
        ours = posenc.create("alibi", num_heads=n, max_bias=max_bias)
        got = ours.bias(torch.tensor([8]), torch.arange(9))[:, 0]  # [n, 9]
        torch.testing.assert_close(got, ref, atol=0, rtol=1e-6, msg=f"num_heads={n}")
    with pytest.raises(ValueError, match="max_bias must be a positive finite number, got 0"):
        posenc.create("alibi", num_heads=4, max_bias=0)


def test_x_transformers_symmetric_alibi() -> None:
    """x-transformers ``AlibiPositionalBias.forward_custom_pos`` (-slope · |i - j|) equals the symmetric
    ``alibi`` scheme, 6 heads (non-power of two), query positions offset from key positions; rtol 1e-6."""
    from x_transformers.x_transformers import AlibiPositionalBias

    ref_module = AlibiPositionalBias(heads=6)
    q_pos, k_pos = torch.arange(10, 20), torch.arange(25)
    ref = ref_module.forward_custom_pos(q_pos.float(), k_pos.float())  # [h, sq, sk]
    got = posenc.create("alibi", num_heads=6, bidirectional=True).bias(q_pos, k_pos)
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-6)


# -- positional-encodings -------------------------------------------------------------------------


@pytest.mark.parametrize("channels", [8, 64, 130])
def test_positional_encodings_1d(channels: int) -> None:
    """``positional_encodings.torch_encodings.PositionalEncoding1D`` is the paper's interleaved
    (sin, cos) table with ``paper`` frequencies; 100 positions, atol 2e-5 (its float32 angles)."""
    from positional_encodings.torch_encodings import PositionalEncoding1D

    ref = PositionalEncoding1D(channels)(torch.zeros(2, 100, channels))  # [b, s, ch]
    got = F.sinusoidal(100, channels, layout="interleaved", frequencies="paper")
    torch.testing.assert_close(got.expand(2, -1, -1), ref, atol=2e-5, rtol=0)
    scheme = posenc.create("sinusoidal", dim=channels)
    torch.testing.assert_close(scheme.embed(torch.zeros(2, 100, channels)), ref, atol=2e-5, rtol=0)


# -- rotary-embedding-torch -----------------------------------------------------------------------


@pytest.mark.parametrize("dim, head_dim, offset", [(32, 32, 0), (16, 32, 0), (32, 32, 17)])
def test_rotary_embedding_torch(dim: int, head_dim: int, offset: int) -> None:
    """lucidrains ``RotaryEmbedding(dim).rotate_queries_or_keys`` pairs features (2i, 2i+1) — posenc's
    ``interleaved`` layout — and rotates the first ``dim`` features; float32 inputs (its positions are
    built in the input's dtype), with and without an offset; atol 1e-5."""
    from rotary_embedding_torch import RotaryEmbedding

    ref_module = RotaryEmbedding(dim=dim, cache_if_possible=False)
    t = torch.randn(2, 3, 40, head_dim)
    ref = ref_module.rotate_queries_or_keys(t, offset=offset)
    rope = posenc.create("rope", dim=head_dim, layout="interleaved", rotary_dim=dim)
    positions = torch.arange(offset, offset + 40)
    got, _ = rope.rotate(t, t, positions, positions)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kv", [4, 2, 1])
def test_llama_attention_layer_with_gqa_and_wide_heads(kv: int) -> None:
    """``posenc.Attention(64, 4, encoding="rope", num_kv_heads=kv, head_dim=32)`` with the weights of
    HF ``LlamaAttention`` (``num_key_value_heads=kv``, heads x head_dim = 128 != hidden 64) gives its
    output, in one pass and decoding three tokens at a time; HF's float32 cos/sin: atol 1e-6."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=kv, head_dim=32)
    cfg._attn_implementation = "eager"
    hf = LlamaAttention(cfg, layer_idx=0).eval()
    ours = posenc.Attention(64, 4, encoding="rope", causal=True, num_kv_heads=kv, head_dim=32).eval()
    with torch.no_grad():
        ours.qkv.weight.copy_(torch.cat((hf.q_proj.weight, hf.k_proj.weight, hf.v_proj.weight)))
        ours.proj.weight.copy_(hf.o_proj.weight)
        ours.proj.bias.zero_()
        x = torch.randn(2, 12, 64)
        cos, sin = LlamaRotaryEmbedding(cfg)(x, torch.arange(12)[None])
        want = hf(
            x, position_embeddings=(cos, sin), attention_mask=torch.full((12, 12), float("-inf")).triu(1)[None, None]
        )[0]
        torch.testing.assert_close(ours(x), want, atol=1e-6, rtol=0)
        cache = posenc.KVCache()
        steps = torch.cat([ours(x[:, i : i + 3], cache=cache) for i in range(0, 12, 3)], 1)
        torch.testing.assert_close(steps, want, atol=1e-6, rtol=0)


@pytest.mark.parametrize(("left", "right"), [(64, 8), (4, 4), (3, 7)])
def test_shaw_asymmetric_clipping_equals_wav2vec2_bert_relative_key(left: int, right: int) -> None:
    """HF Wav2Vec2-BERT's ``relative_key`` (``clip(k - q, -left, right) + left`` into
    ``left + right + 1`` embeddings, SeamlessM4T's too) is Shaw with ``max_relative_position=(left,
    right)``: the query term ``q · a[k - q]`` equals it with the same table, queries and keys of
    different lengths included."""
    from types import SimpleNamespace

    from transformers.models.wav2vec2_bert.modeling_wav2vec2_bert import _apply_relative_key_position_encoding

    hd = 8
    shaw = posenc.create("shaw", dim=hd, max_relative_position=(left, right), values=False)
    assert shaw.key_embeddings.num_embeddings == left + right + 1
    peer = SimpleNamespace(
        left_max_position_embeddings=left,
        right_max_position_embeddings=right,
        distance_embedding=shaw.key_embeddings,
        scaling=1.0,
    )
    for sq, sk in ((30, 30), (12, 30)):
        q, k = torch.randn(2, 3, sq, hd), torch.randn(2, 3, sk, hd)
        _, want = _apply_relative_key_position_encoding(peer, q, k)  # HF's queries index from 0 too
        with torch.no_grad():
            got = shaw.query_scores(q, torch.arange(sq), torch.arange(sk))
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    assert posenc.create("shaw", dim=hd, max_relative_position=5).config.max_relative_position == 5
    with pytest.raises(ValueError, match=r"max_relative_position must be K or a pair \(left, right\)"):
        posenc.create("shaw", dim=hd, max_relative_position=(1, 2, 3))
