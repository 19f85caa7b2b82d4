"""Converting q/k weights between the ``interleaved`` and ``half`` RoPE layouts.

Reference: Hugging Face ``convert_llama_weights_to_hf.py`` (transformers' Llama conversion script,
not shipped in the wheel), whose ``permute`` is restated in :func:`hf_permute`; Meta's Llama
``apply_rotary_emb`` (complex multiplication of interleaved pairs) against transformers'
``apply_rotary_pos_emb`` (``rotate_half``) for the attention-score check.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import functional as F

transformers = pytest.importorskip("transformers")
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb  # noqa: E402


def hf_permute(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``permute`` of transformers' convert_llama_weights_to_hf.py (Meta interleaved -> HF half)."""
    dim1, dim2 = w.shape
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def meta_rotate(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Meta llama ``apply_rotary_emb``: interleaved pairs as complex numbers times ``e^{i m θ}``. x: [b, s, h, hd]."""
    hd = x.shape[-1]
    freqs = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs_cis = torch.polar(
        torch.ones(len(positions), hd // 2, dtype=torch.float64), torch.outer(positions.double(), freqs)
    )  # [s, hd/2]
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2))  # [b, s, h, hd/2]
    return torch.view_as_real(pairs * freqs_cis[None, :, None]).flatten(3)  # [b, s, h, hd]


@pytest.mark.parametrize("num_heads, head_dim", [(4, 16), (2, 128), (8, 8)])
def test_interleaved_to_half_is_hf_permute_and_back_is_its_inverse(num_heads, head_dim):
    w = torch.randn(num_heads * head_dim, 24)
    half = F.permute_qk_weight(w, num_heads, source="interleaved", target="half")
    assert torch.equal(half, hf_permute(w, num_heads))
    assert torch.equal(F.permute_qk_weight(half, num_heads, source="half", target="interleaved"), w)
    bias = torch.randn(num_heads * head_dim)
    assert torch.equal(
        F.permute_qk_weight(bias, num_heads, source="interleaved", target="half"),
        hf_permute(bias[:, None], num_heads)[:, 0],
    )
    assert torch.equal(F.permute_qk_weight(w, num_heads, source="half", target="half"), w)


def test_meta_weights_under_meta_rope_give_hf_scores_after_permute():
    """Meta's interleaved complex rotation on W == transformers' rotate_half on permute(W)."""
    b, s, h, hd, d_in = 2, 12, 4, 32, 48
    x, wq, wk = (torch.randn(*shape, dtype=torch.float64) for shape in ((b, s, d_in), (h * hd, d_in), (h * hd, d_in)))
    positions = torch.arange(s) + 5
    q_meta = meta_rotate((x @ wq.T).view(b, s, h, hd), positions)  # [b, s, h, hd]
    k_meta = meta_rotate((x @ wk.T).view(b, s, h, hd), positions)
    scores_meta = torch.einsum("bqhd,bkhd->bhqk", q_meta, k_meta)

    wq_hf, wk_hf = (F.permute_qk_weight(w, h, source="interleaved", target="half") for w in (wq, wk))
    q = (x @ wq_hf.T).view(b, s, h, hd).transpose(1, 2)  # [b, h, s, hd]
    k = (x @ wk_hf.T).view(b, s, h, hd).transpose(1, 2)
    inv_freq, _ = F.rope_inv_freq(hd)
    angles = positions.double()[:, None] * inv_freq  # [s, hd/2]
    emb = torch.cat((angles, angles), dim=-1)[None]  # [1, s, hd], as LlamaRotaryEmbedding lays it out
    q_hf, k_hf = apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())
    torch.testing.assert_close(q_hf @ k_hf.transpose(-1, -2), scores_meta, rtol=1e-10, atol=1e-9)


def _attention_pair(dim: int, heads: int, rotary_dim: int | None, bias: bool):
    hd = dim // heads
    make = lambda layout: posenc.Attention(  # noqa: E731
        dim,
        heads,
        encoding=posenc.create("rope", dim=hd, layout=layout, rotary_dim=rotary_dim),
        causal=True,
        qkv_bias=bias,
    )
    inter, half = make("interleaved"), make("half")
    state = {k: v.clone() for k, v in inter.state_dict().items()}
    for name in ["qkv.weight"] + (["qkv.bias"] if bias else []):
        q, k, v = state[name].split(dim)  # rows: [q | k | v], each [dim(, dim)]
        q, k = (
            F.permute_qk_weight(t, heads, source="interleaved", target="half", rotary_dim=rotary_dim) for t in (q, k)
        )
        state[name] = torch.cat((q, k, v))
    half.load_state_dict(state)
    return inter, half


@pytest.mark.parametrize("rotary_dim, bias", [(None, False), (None, True), (8, True)])
def test_attention_outputs_agree_after_converting_the_weights(rotary_dim, bias):
    inter, half = _attention_pair(64, 4, rotary_dim, bias)
    x = torch.randn(2, 20, 64)
    torch.testing.assert_close(half(x), inter(x), rtol=1e-5, atol=1e-5)
    positions = torch.tensor([[3, 4, 5, 9, 10], [0, 1, 2, 3, 4]])  # batched, with a gap
    torch.testing.assert_close(half(x[:, :5], positions), inter(x[:, :5], positions), rtol=1e-5, atol=1e-5)
    # decoding with a cache: the converted model continues the same way
    cache_i, cache_h = posenc.KVCache(), posenc.KVCache()
    for chunk in x.split([12, 1, 7], dim=1):
        torch.testing.assert_close(half(chunk, cache=cache_h), inter(chunk, cache=cache_i), rtol=1e-5, atol=1e-5)
    # and back: the weights return exactly
    back = {k: v.clone() for k, v in half.state_dict().items()}
    q, k, v = back["qkv.weight"].split(64)
    q, k = (F.permute_qk_weight(t, 4, source="half", target="interleaved", rotary_dim=rotary_dim) for t in (q, k))
    assert torch.equal(torch.cat((q, k, v)), inter.state_dict()["qkv.weight"])


def test_attention_outputs_differ_without_conversion():
    """The check above is not vacuous: the same weights under the other layout give other outputs."""
    inter, _ = _attention_pair(64, 4, None, False)
    half = posenc.Attention(64, 4, encoding=posenc.create("rope", dim=16, layout="half"), causal=True)
    half.load_state_dict(inter.state_dict())
    x = torch.randn(1, 20, 64)
    assert (half(x) - inter(x)).abs().max() > 1e-2


@settings(max_examples=25, deadline=None)
@given(head_dim=st.sampled_from([2, 4, 8, 16, 64]), data=st.data())
def test_rotation_commutes_with_the_permutation(head_dim, data):
    """rotate_half(x[perm]) == rotate_interleaved(x)[perm] for every width and partial rotary width."""
    rotary_dim = data.draw(st.sampled_from([r for r in range(2, head_dim + 1, 2)]))
    perm = F.rope_layout_permutation(head_dim, source="interleaved", target="half", rotary_dim=rotary_dim)
    assert sorted(perm.tolist()) == list(range(head_dim))
    x = torch.randn(1, 2, 7, head_dim, dtype=torch.float64)
    inv_freq, _ = F.rope_inv_freq(rotary_dim)
    positions = torch.arange(7) * 3
    ci, si = F.rope_cos_sin(positions, inv_freq, layout="interleaved", dtype=torch.float64)
    ch, sh = F.rope_cos_sin(positions, inv_freq, layout="half", dtype=torch.float64)
    rotated_i = F.apply_rope(x, ci, si, layout="interleaved")
    rotated_h = F.apply_rope(x[..., perm], ch, sh, layout="half")
    torch.testing.assert_close(rotated_h, rotated_i[..., perm], rtol=1e-12, atol=1e-12)
    back = F.rope_layout_permutation(head_dim, source="half", target="interleaved", rotary_dim=rotary_dim)
    assert torch.equal(perm[back], torch.arange(head_dim))


def test_bad_input():
    with pytest.raises(ValueError, match=r"weight has 30 output rows, not a multiple of num_heads=4"):
        F.permute_qk_weight(torch.zeros(30, 8), 4, source="interleaved", target="half")
    with pytest.raises(ValueError, match=r"head_dim must be a positive even number .* got 5"):
        F.permute_qk_weight(torch.zeros(20, 8), 4, source="interleaved", target="half")
    with pytest.raises(ValueError, match=r"unknown source 'meta'; choose one of: 'half', 'interleaved'"):
        F.permute_qk_weight(torch.zeros(16, 8), 2, source="meta", target="half")
    with pytest.raises(ValueError, match=r"rotary_dim must be at most head_dim=8, got 10"):
        F.permute_qk_weight(torch.zeros(16, 8), 2, source="interleaved", target="half", rotary_dim=10)
    with pytest.raises(TypeError, match=r"weight must be a 1-D \(bias\) or 2-D \(weight\) tensor, got \(2, 8, 8\)"):
        F.permute_qk_weight(torch.zeros(2, 8, 8), 2, source="interleaved", target="half")
