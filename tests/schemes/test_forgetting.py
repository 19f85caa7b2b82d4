"""Forgetting attention (Lin et al. 2025): parity with x-transformers' ``DataDependentAlibi`` given
the same weights, through :class:`posenc.Attention` with and without a KV cache, gradients, errors,
and the FlexAttention score mod (slow)."""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc.schemes.forgetting import forgetting_score_mod

xt = pytest.importorskip("x_transformers.x_transformers")


def _pair(dim: int = 16, heads: int = 2) -> tuple[posenc.PositionalEncoding, object]:
    """Our scheme and x-transformers' ``DataDependentAlibi(dim, heads)`` holding the same weights
    (random, so that the gates differ per token and head)."""
    torch.manual_seed(0)
    ref = xt.DataDependentAlibi(dim, heads)
    enc = posenc.create("forgetting", dim=dim, num_heads=heads)
    linear = ref.to_forget_gates[0]
    with torch.no_grad():
        linear.weight.normal_()
        linear.bias.normal_(mean=1.0)
        enc.forget_gates.weight.copy_(linear.weight)
        enc.forget_gates.bias.copy_(linear.bias)
    return enc, ref


def test_initialisation_matches_x_transformers() -> None:
    enc = posenc.create("forgetting", dim=16, num_heads=4)
    assert tuple(enc.forget_gates.weight.shape) == (4, 16)
    assert torch.equal(enc.forget_gates.bias, torch.full((4,), 5.0))


def test_bias_equals_x_transformers() -> None:
    enc, ref = _pair()
    x = torch.randn(2, 9, 16)
    ours = enc.input_bias(enc.input_terms(x), 9)
    theirs = ref(x)
    causal = torch.ones(9, 9, dtype=torch.bool).tril()
    torch.testing.assert_close(ours[..., causal], theirs[..., causal], atol=1e-6, rtol=0)
    assert ours[..., causal].abs().max() > 1.0


def test_bias_is_the_sum_of_log_gates_between() -> None:
    """logit(i, j) += Σ_{j < t <= i} log σ(w·x_t + b), pinned from the paper's formula."""
    enc, _ = _pair(dim=4, heads=1)
    x = torch.randn(1, 5, 4)
    with torch.no_grad():
        log_f = torch.nn.functional.logsigmoid(x @ enc.forget_gates.weight.T + enc.forget_gates.bias)[0, :, 0]  # [5]
        bias = enc.input_bias(enc.input_terms(x), 5)[0, 0]
    assert float(bias[4, 1]) == pytest.approx(float(log_f[2:5].sum()), abs=1e-6)
    assert float(bias[3, 3]) == 0.0


def test_attention_equals_x_transformers() -> None:
    enc, ref = _pair()
    torch.manual_seed(2)
    layer = posenc.Attention(16, 2, encoding=enc, causal=True)
    x = torch.randn(2, 9, 16)
    b, s, _ = x.shape
    q, k, v = layer.qkv(x).view(b, s, 3, 2, 8).permute(2, 0, 3, 1, 4)  # [b, h, s, hd] each
    sim = q @ k.transpose(-2, -1) * 8**-0.5 + ref(x)  # x-transformers' Attend: scaled sim + attn_bias
    sim = sim.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), -torch.finfo(sim.dtype).max)
    expected = layer.proj((sim.softmax(-1) @ v).transpose(1, 2).flatten(2))
    torch.testing.assert_close(layer(x), expected, atol=1e-6, rtol=0)


def test_decoding_equals_full_forward() -> None:
    """The cache keeps each token's log forget gate: steps of 3, 1, 2, 1 tokens equal the full forward."""
    enc, _ = _pair()
    layer = posenc.Attention(16, 2, encoding=enc, causal=True).eval()
    x = torch.randn(2, 7, 16)
    full = layer(x)
    cache = posenc.KVCache()
    outs, t = [], 0
    for n in (3, 1, 2, 1):
        outs.append(layer(x[:, t : t + n], cache=cache))
        t += n
    torch.testing.assert_close(torch.cat(outs, dim=1), full, atol=1e-6, rtol=0)
    assert tuple(cache.terms.shape) == (2, 2, 7)


def test_gradients_reach_the_gates() -> None:
    enc, _ = _pair()
    layer = posenc.Attention(16, 2, encoding=enc, causal=True)
    x = torch.randn(2, 6, 16, requires_grad=True)
    layer(x).square().sum().backward()
    for name, p in enc.named_parameters():
        assert p.grad is not None and float(p.grad.abs().sum()) > 0, name
    assert float(x.grad.abs().sum()) > 0


def test_bias_without_input_is_refused() -> None:
    enc = posenc.create("forgetting", dim=16, num_heads=2)
    with pytest.raises(ValueError, match="layer input x"):
        enc.bias(torch.arange(4), torch.arange(4))
    with pytest.raises(ValueError, match="d = 16"):
        enc.input_terms(torch.randn(1, 4, 8))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"dim": 0, "num_heads": 2}, "dim"),
        ({"dim": 16, "num_heads": 0}, "num_heads"),
        ({"dim": 16, "num_heads": 2, "post_log_scale": -1.0}, "post_log_scale"),
        ({"dim": 16, "num_heads": 2, "bias_init": float("nan")}, "bias_init"),
    ],
)
def test_bad_config(config: dict, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        posenc.create("forgetting", **config)


def test_attention_requirements() -> None:
    with pytest.raises(ValueError, match="causal=True"):
        posenc.Attention(16, 2, encoding="forgetting", causal=False)
    with pytest.raises(ValueError, match="dim 16"):
        posenc.Attention(16, 2, encoding=posenc.create("forgetting", dim=8, num_heads=2), causal=True)
    with pytest.raises(ValueError, match="num_heads"):
        posenc.Attention(16, 2, encoding=posenc.create("forgetting", dim=16, num_heads=4), causal=True)


def test_cache_refuses_mixed_terms() -> None:
    cache = posenc.KVCache()
    k = torch.randn(1, 2, 3, 4)
    cache.append(k, k, torch.arange(3), terms=torch.zeros(1, 2, 3))
    with pytest.raises(ValueError, match="terms"):
        cache.append(k, k, torch.arange(3, 6))


def test_tiny_transformer_trains() -> None:
    from posenc.experiments.model import ModelConfig, TinyTransformer

    torch.manual_seed(0)
    model = TinyTransformer(ModelConfig(vocab_size=11, dim=16, num_heads=2, num_layers=2, scheme="forgetting"))
    model(torch.randint(0, 11, (2, 8))).logsumexp(-1).sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.slow
def test_flex_score_mod_equals_the_bias() -> None:
    """FlexAttention with :func:`forgetting_score_mod` (O(L) memory: ``c`` is captured) equals SDPA
    with the materialised bias; each length compiles anew (``c``'s shape is static)."""
    if not posenc.flex.available("cpu", torch.float32):
        pytest.skip("FlexAttention unavailable")
    enc, _ = _pair()
    torch.manual_seed(3)
    x = torch.randn(1, 200, 16)
    q, k, v = torch.randn(3, 1, 2, 200, 8).unbind(0)
    with torch.no_grad():
        terms = enc.input_terms(x)
        bias = enc.input_bias(terms, 200)
        mask = bias.masked_fill(torch.ones(200, 200, dtype=torch.bool).triu(1), float("-inf"))
        expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        block = posenc.flex.block_mask(200, 200, causal=True)
        out = posenc.flex.flex_attention(q, k, v, forgetting_score_mod(terms.cumsum(-1)), block)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)
