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
    with pytest.raises(ValueError, match=r"bidirectional=False\) forgets the past only and needs causal=True"):
        posenc.Attention(16, 2, encoding=posenc.create("forgetting", dim=16, num_heads=2), causal=False)
    assert posenc.Attention(16, 2, encoding="forgetting", causal=False).encoding.config.bidirectional
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


@pytest.mark.parametrize(("sq", "sk"), [(5, 5), (2, 9), (1, 9)])
def test_score_mod_hook_equals_the_materialised_bias(sq: int, sk: int) -> None:
    """``score_mod(q_offset, terms=...)`` evaluated eagerly on every (batch, head, query, key):
    equal to ``input_bias(terms, sq)`` where causal attention reads it, queries being the last
    ``sq`` of ``sk`` keys (``q_offset = sk - sq``, what decoding after a cache passes)."""
    enc, _ = _pair()
    terms = enc.input_terms(torch.randn(2, sk, 16)).detach()  # [2, 2, sk]
    mod = enc.score_mod(sk - sq, terms=terms)
    bb, hh = torch.arange(2)[:, None, None, None], torch.arange(2)[None, :, None, None]
    qq, kk = torch.arange(sq)[None, None, :, None], torch.arange(sk)[None, None, None, :]
    got = mod(torch.zeros(2, 2, sq, sk), bb, hh, qq, kk)
    want = enc.input_bias(terms, sq).detach()
    causal = torch.arange(sk)[None, :] <= torch.arange(sk - sq, sk)[:, None]  # [sq, sk]
    torch.testing.assert_close(got[..., causal], want[..., causal], atol=1e-6, rtol=0)
    assert want[..., causal].abs().max() > 1.0
    assert enc.score_mod(0) is None  # no bias without the layer input


def test_flex_routing_gets_the_terms_and_refuses_them_with_gradients(monkeypatch) -> None:
    """``flex.attend`` hands a scheme with input terms its terms and the number of cached keys
    (not the positions: the bias follows the stream), and keeps to the materialised path when the
    terms need gradients (a score mod captures them detached)."""
    from posenc.kernels import flex as flex_kernel

    seen = []
    monkeypatch.setattr(flex_kernel, "flex_attention", lambda q, k, v, mod, mask, *a: seen.append(mod) or q)
    monkeypatch.setattr(flex_kernel, "_mode", "always")
    enc, _ = _pair()
    enc.requires_grad_(False)  # frozen gates: the terms need gradients only through x
    q = torch.randn(1, 2, 3, 8)
    k = torch.randn(1, 2, 7, 8)
    terms = enc.input_terms(torch.randn(1, 7, 16, requires_grad=True))
    odd = torch.tensor([5, 1, 9])  # positions that are no range: FlexAttention still applies
    args = (enc, q, k, k, odd, torch.arange(7))
    assert flex_kernel.attend(*args, causal=True, past=4, terms=terms) is None  # terms need gradients
    assert flex_kernel.attend(*args, causal=True, past=4) is None  # no terms: no score mod
    assert flex_kernel.attend(*args, causal=True, past=4, terms=terms.detach()) is q
    expected = enc.score_mod(4, terms=terms.detach())
    z, b, h = torch.zeros(()), torch.tensor(0), torch.tensor(1)
    for i, j in [(0, 0), (2, 6), (1, 3)]:
        want = expected(z, b, h, torch.tensor(i), torch.tensor(j))
        assert float(seen[0](z, b, h, torch.tensor(i), torch.tensor(j))) == pytest.approx(float(want))
    assert float(seen[0](z, b, h, torch.tensor(2), torch.tensor(0))) == pytest.approx(
        float(enc.input_bias(terms.detach(), 3)[0, 1, 2, 0])
    )


def test_warmup_compiles_it_with_terms(monkeypatch) -> None:
    from posenc.kernels import flex as flex_kernel

    seen = []
    monkeypatch.setattr(flex_kernel, "flex_attention", lambda q, k, v, mod, mask, *a: seen.append((q.shape, mod)))
    flex_kernel.warmup(posenc.create("forgetting", dim=16, num_heads=2), length=8, head_dim=4)
    flex_kernel.warmup(posenc.create("forgetting", dim=16, num_heads=2, bidirectional=True), length=8, causal=False)
    assert seen[0][0] == (1, 2, 8, 4) and callable(seen[0][1])
    assert seen[1][0] == (1, 2, 8, 64) and callable(seen[1][1])


@pytest.mark.slow
def test_attention_runs_it_through_flex_without_the_quadratic_bias(monkeypatch) -> None:
    """O(L) memory by construction: with ``input_bias`` (the only builder of ``[b, h, sq, sk]``)
    made to fail, inference through FlexAttention (``set_mode("always")``), with grouped key/value
    heads, a batch of two and a KV cache (prefill 150, then 50 tokens), equals the full forward
    through SDPA with the materialised bias (atol 2e-5, float32)."""
    from posenc.kernels import flex as flex_kernel
    from posenc.schemes.forgetting import Forgetting

    if not posenc.flex.available("cpu", torch.float32):
        pytest.skip(f"FlexAttention unavailable: {posenc.flex.errors()}")
    torch._dynamo.reset()  # a fresh recompile budget: other tests' shapes count towards torch's limit
    posenc.flex.clear_errors()
    enc, _ = _pair(dim=16, heads=4)
    layer = posenc.Attention(16, 4, encoding=enc, causal=True, num_kv_heads=2).eval()
    x = torch.randn(2, 200, 16)
    with torch.no_grad():
        ref = layer(x)  # "auto" at this size: the materialised bias

    def refuse(*args, **kwargs):
        raise AssertionError("input_bias materialised [b, h, sq, sk]")

    calls = []
    real = flex_kernel.flex_attention
    monkeypatch.setattr(flex_kernel, "flex_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(Forgetting, "input_bias", refuse)
    monkeypatch.setattr(flex_kernel, "_mode", "always")
    with torch.no_grad():
        full = layer(x)
        cache = posenc.KVCache()
        steps = torch.cat([layer(x[:, :150], cache=cache), layer(x[:, 150:], cache=cache)], dim=1)
    assert posenc.flex.errors() == {} and len(calls) == 3
    torch.testing.assert_close(full, ref, atol=2e-5, rtol=0)
    torch.testing.assert_close(steps, ref, atol=2e-5, rtol=0)


@pytest.mark.parametrize(
    ("terms", "sq", "error", "message"),
    [
        (torch.zeros(1, 2, 5), 6, ValueError, r"sq .* must be an int in 0\.\.5, got 6"),
        (torch.zeros(1, 2, 5), -1, ValueError, r"int in 0\.\.5, got -1"),
        (torch.zeros(1, 2, 5), 2.5, ValueError, r"int in 0\.\.5, got 2\.5"),
        (torch.zeros(1, 2, 5), True, ValueError, r"int in 0\.\.5, got True"),
        (torch.zeros(2, 5), 5, ValueError, r"\[b, h, sk\] with h = 2 .* got shape \(2, 5\)"),
        (torch.zeros(1, 3, 5), 5, ValueError, r"h = 2 .* got shape \(1, 3, 5\)"),
        (torch.zeros(1, 2, 5, dtype=torch.long), 5, ValueError, r"floating-point .* dtype torch\.int64"),
        ([0.0, 1.0], 2, TypeError, r"terms must be the log forget gates .* got list"),
        (None, 2, TypeError, r"got NoneType"),
    ],
)
def test_bad_terms_are_named(terms: object, sq: object, error: type, message: str) -> None:
    enc = posenc.create("forgetting", dim=16, num_heads=2)
    with pytest.raises(error, match=message):
        enc.input_bias(terms, sq)
    if terms is not None and isinstance(sq, int) and 0 <= sq <= 5 and not isinstance(sq, bool):  # the terms' fault
        with pytest.raises(error, match=message):
            enc.score_mod(0, terms=terms)


def test_the_first_query_rows_of_an_empty_step() -> None:
    """``sq = 0`` (no new queries) gives an empty bias, not every key's rows."""
    enc = posenc.create("forgetting", dim=16, num_heads=2)
    assert enc.input_bias(torch.zeros(1, 2, 5), 0).shape == (1, 2, 0, 5)


def test_bias_without_layer_input_names_what_is_accepted() -> None:
    """Positions alone: the error names the missing input and the two ways to give it."""
    enc = posenc.create("forgetting", dim=16, num_heads=2)
    with pytest.raises(
        ValueError, match=r"depends on the layer input x.*posenc\.Attention.*input_bias\(input_terms\(x\), sq\)"
    ):
        enc.bias(torch.arange(4), torch.arange(4))
    with pytest.raises(ValueError, match=r"x \[b, s, d\] with d = 16, got \(4, 16\)"):
        enc.input_terms(torch.randn(4, 16))


def _bidirectional_pair(dim: int = 16, heads: int = 2) -> tuple[posenc.PositionalEncoding, object]:
    """The bidirectional form and x-transformers' ``DataDependentAlibi(dim, heads, causal=False)``
    (``2h`` gates: the first ``h`` for earlier keys, the others for later ones) with the same weights."""
    torch.manual_seed(0)
    ref = xt.DataDependentAlibi(dim, heads, causal=False)
    enc = posenc.create("forgetting", dim=dim, num_heads=heads, bidirectional=True)
    linear = ref.to_forget_gates[0]
    with torch.no_grad():
        linear.weight.normal_()
        linear.bias.normal_(mean=1.0)
        enc.forget_gates.weight.copy_(linear.weight)
        enc.forget_gates.bias.copy_(linear.bias)
    return enc, ref


def test_bidirectional_bias_equals_x_transformers() -> None:
    """Every pair, both triangles: ``c_i - c_j`` below the diagonal, ``c'_j - c'_i`` above it."""
    enc, ref = _bidirectional_pair()
    x = torch.randn(2, 9, 16)
    ours = enc.input_bias(enc.input_terms(x), 9)
    theirs = ref(x)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
    upper = torch.ones(9, 9, dtype=torch.bool).triu(1)
    assert ours[..., upper].abs().max() > 1.0 and ours[..., ~upper].abs().max() > 1.0
    # the last queries alone (decoding): the last rows of the full bias
    torch.testing.assert_close(enc.input_bias(enc.input_terms(x), 3), ours[..., 6:, :], atol=1e-6, rtol=0)


def test_bidirectional_attention_equals_x_transformers() -> None:
    enc, ref = _bidirectional_pair()
    torch.manual_seed(2)
    layer = posenc.Attention(16, 2, encoding=enc, causal=False)
    x = torch.randn(2, 9, 16)
    b, s, _ = x.shape
    q, k, v = layer.qkv(x).view(b, s, 3, 2, 8).permute(2, 0, 3, 1, 4)  # [b, h, s, hd] each
    sim = q @ k.transpose(-2, -1) * 8**-0.5 + ref(x)  # x-transformers' Attend without a mask
    expected = layer.proj((sim.softmax(-1) @ v).transpose(1, 2).flatten(2))
    torch.testing.assert_close(layer(x), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("sq", "sk"), [(6, 6), (2, 9)])
def test_bidirectional_score_mod_equals_the_bias(sq: int, sk: int) -> None:
    enc, _ = _bidirectional_pair()
    terms = enc.input_terms(torch.randn(2, sk, 16)).detach()  # [2, 4, sk]
    mod = enc.score_mod(sk - sq, terms=terms)
    bb, hh = torch.arange(2)[:, None, None, None], torch.arange(2)[None, :, None, None]
    qq, kk = torch.arange(sq)[None, None, :, None], torch.arange(sk)[None, None, None, :]
    got = mod(torch.zeros(2, 2, sq, sk), bb, hh, qq, kk)
    torch.testing.assert_close(got, enc.input_bias(terms, sq), atol=1e-5, rtol=0)


@pytest.mark.slow
def test_bidirectional_flex_equals_the_materialised_bias(monkeypatch) -> None:
    """An encoder through FlexAttention (no mask; ``input_bias`` made to fail) equals SDPA with the
    materialised two-sided bias (atol 2e-5, float32)."""
    from posenc.kernels import flex as flex_kernel
    from posenc.schemes.forgetting import Forgetting

    if not posenc.flex.available("cpu", torch.float32):
        pytest.skip(f"FlexAttention unavailable: {posenc.flex.errors()}")
    torch._dynamo.reset()  # a fresh recompile budget: other tests' shapes count towards torch's limit
    posenc.flex.clear_errors()
    enc, _ = _bidirectional_pair()
    layer = posenc.Attention(16, 2, encoding=enc, causal=False).eval()
    x = torch.randn(2, 150, 16)
    with torch.no_grad():
        ref = layer(x)
    monkeypatch.setattr(Forgetting, "input_bias", lambda *a, **k: pytest.fail("input_bias materialised the bias"))
    monkeypatch.setattr(flex_kernel, "_mode", "always")
    with torch.no_grad():
        got = layer(x)
    assert posenc.flex.errors() == {}
    torch.testing.assert_close(got, ref, atol=2e-5, rtol=0)
