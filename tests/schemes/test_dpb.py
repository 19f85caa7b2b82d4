"""Dynamic position bias: parity with x-transformers' ``DynamicPositionBias`` given the same weights,
the MLP written out in float64, the cache against the uncached bias, FlexAttention stepping aside,
KV-cache decoding, gradients and config errors."""

from __future__ import annotations

import math

import pytest
import torch

import posenc
from posenc import flex
from tests.all_schemes import through_flex_and_sdpa


def _dpb(seed: int = 0, **config) -> posenc.PositionalEncoding:
    torch.manual_seed(seed)
    enc = posenc.create("dpb", **{"num_heads": 3, "hidden_dim": 8, **config})
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(torch.randn_like(p) * 0.3)  # LayerNorm weights and biases off their 1 and 0 too
    return enc


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("log_distance", [False, True])
@pytest.mark.parametrize("norm", [False, True])
def test_equals_x_transformers_given_its_weights(depth: int, log_distance: bool, norm: bool) -> None:
    """x_transformers.x_transformers.DynamicPositionBias(dim, heads, depth, log_distance, norm): its
    state_dict loads as it is, and its bias for i queries (the last i of j keys) equals ours for
    query positions j - i .. j - 1 against keys 0 .. j - 1, to 1e-6."""
    xt = pytest.importorskip("x_transformers.x_transformers")
    torch.manual_seed(depth)
    ref = xt.DynamicPositionBias(16, heads=4, depth=depth, log_distance=log_distance, norm=norm)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    ours = posenc.create("dpb", num_heads=4, hidden_dim=16, depth=depth, log_distance=log_distance, norm=norm)
    ours.load_state_dict(ref.state_dict())
    for i, j in [(10, 10), (3, 17)]:
        with torch.no_grad():
            want = ref(i, j)
            got = ours.bias(torch.arange(j - i, j), torch.arange(j))
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def _mlp_float64(enc, x: float) -> list[float]:
    """The MLP of x-transformers' DynamicPositionBias written out on Python floats: per hidden layer
    ``silu(LayerNorm(W u + b))`` (LayerNorm only with ``norm``: eps 1e-5, biased variance), then
    ``W_out u + b_out``."""
    u = [x]
    for block in list(enc.mlp)[:-1]:
        w, b = block[0].weight.detach().double().tolist(), block[0].bias.detach().double().tolist()
        pre = [bk + sum(wkm * um for wkm, um in zip(wk, u)) for wk, bk in zip(w, b)]
        if len(block) == 3:
            norm = block[1]
            gamma = (norm.gamma if hasattr(norm, "gamma") else norm.weight).detach().double().tolist()
            beta = norm.bias.detach().double().tolist() if hasattr(norm, "bias") else [0.0] * len(pre)
            mean = sum(pre) / len(pre)
            var = sum((p - mean) ** 2 for p in pre) / len(pre)
            pre = [(p - mean) / math.sqrt(var + 1e-5) * g + bb for p, g, bb in zip(pre, gamma, beta)]
        u = [p / (1 + math.exp(-p)) for p in pre]
    last = enc.mlp[-1]
    w, b = last.weight.detach().double().tolist(), last.bias.detach().double().tolist()
    return [bk + sum(wkm * um for wkm, um in zip(wk, u)) for wk, bk in zip(w, b)]


@pytest.mark.parametrize(("log_distance", "norm"), [(False, False), (True, True)])
def test_bias_equals_the_mlp_written_out_in_float64(log_distance: bool, norm: bool) -> None:
    """Query i against key j gets MLP(i - j), or MLP(sign(i - j) log(|i - j| + 1)) with log_distance;
    keys after the query included (negative distances)."""
    enc = _dpb(log_distance=log_distance, norm=norm).double()
    q, k = torch.arange(4, 9), torch.arange(11)
    got = enc.bias(q, k)
    for a, i in enumerate(q.tolist()):
        for b, j in enumerate(k.tolist()):
            x = float(i - j)
            if log_distance:
                x = math.copysign(math.log(abs(x) + 1), x) if x else 0.0
            want = torch.tensor(_mlp_float64(enc, x), dtype=torch.float64)
            torch.testing.assert_close(got[:, a, b], want, atol=1e-12, rtol=0)


def test_pinned_number_of_a_one_unit_mlp() -> None:
    """depth 1, hidden width 1, w = 1, b = 0, w_out = 2, b_out = 0.5: query 5 against key 2 gets
    2 silu(3) + 0.5 = 2 * 3 / (1 + e^-3) + 0.5."""
    enc = posenc.create("dpb", num_heads=1, hidden_dim=1, depth=1).double()
    with torch.no_grad():
        enc.mlp[0][0].weight.fill_(1.0)
        enc.mlp[0][0].bias.fill_(0.0)
        enc.mlp[1].weight.fill_(2.0)
        enc.mlp[1].bias.fill_(0.5)
    got = enc.bias(torch.tensor([5]), torch.tensor([2]))
    assert got.item() == pytest.approx(6 / (1 + math.exp(-3)) + 0.5, abs=1e-12)


@pytest.mark.parametrize(("sq", "sk", "q0", "k0"), [(5, 5, 0, 0), (1, 9, 8, 0), (4, 12, 8, 0), (3, 6, 20, 17)])
def test_cached_bias_equals_the_uncached_over_offsets_and_lengths(sq: int, sk: int, q0: int, k0: int) -> None:
    """Contiguous ranges go through the Toeplitz build and the per-module cache; batched positions
    ``[1, s]`` skip every cache and evaluate the MLP at each pair's distance. Called twice: the cache
    hit is the same."""
    enc = _dpb(norm=True)
    q, k = torch.arange(q0, q0 + sq), torch.arange(k0, k0 + sk)
    with torch.no_grad():
        uncached = enc.bias(q[None], k[None])[0]
        first = enc.bias(q, k)
        again = enc.bias(q, k)
    assert again is first
    torch.testing.assert_close(first, uncached, atol=1e-6, rtol=0)


def test_decoding_with_a_kv_cache_equals_the_full_forward() -> None:
    torch.manual_seed(0)
    attn = posenc.Attention(12, 3, encoding="dpb", causal=True).double().eval()
    x = torch.randn(2, 9, 12, dtype=torch.float64)
    with torch.no_grad():
        full = attn(x)
        cache = posenc.KVCache()
        steps = [attn(x[:, a:b], cache=cache) for a, b in [(0, 4), (4, 5), (5, 6), (6, 9)]]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-10, rtol=0)


@pytest.mark.parametrize("norm", [False, True])
def test_gradients_reach_every_parameter_in_training(norm: bool) -> None:
    torch.manual_seed(0)
    attn = posenc.Attention(16, 2, encoding=posenc.create("dpb", num_heads=2, hidden_dim=4, norm=norm), causal=False)
    attn(torch.randn(2, 7, 16)).square().sum().backward()
    for name, p in attn.encoding.named_parameters():
        assert p.grad is not None and bool(torch.isfinite(p.grad).all()) and float(p.grad.abs().sum()) > 0, name


def test_attention_fills_the_x_transformers_width() -> None:
    """Built by name, the MLP is model dim // 4 wide, as x-transformers' attention layers build it."""
    assert posenc.Attention(64, 4, encoding="dpb").encoding.config.hidden_dim == 16


@pytest.mark.parametrize(
    ("config", "error", "message"),
    [
        ({"num_heads": 0}, ValueError, "num_heads must be a positive integer, got 0"),
        ({"num_heads": 2, "hidden_dim": 0}, ValueError, "hidden_dim must be a positive integer, got 0"),
        ({"num_heads": 2, "depth": 0}, ValueError, "depth must be a positive integer, got 0"),
        ({"num_heads": 2, "depth": 1.5}, TypeError, "depth must be a positive integer, got 1.5"),
        ({"num_heads": 2, "log_distance": "yes"}, TypeError, "log_distance"),
        ({"num_heads": 2, "norm": 1}, TypeError, "norm"),
    ],
)
def test_bad_config_values_are_named(config: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        posenc.create("dpb", **config)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize(("sq", "sk", "q_offset"), [(6, 6, 0), (3, 10, 7), (1, 9, 8), (4, 4, -2)])
def test_score_mod_reads_the_bias_at_each_distance(bidirectional, sq, sk, q_offset) -> None:
    """The score mod's table over the call's distances gives the materialised bias at every (head,
    query, key), queries ``q_offset`` positions past the first key (decoding: 1 query past 8 keys)."""
    torch.manual_seed(0)
    enc = posenc.create("dpb", num_heads=3, hidden_dim=6, log_distance=bidirectional, norm=True)
    mod = flex.score_mod_for(enc, q_offset=q_offset, sq=sq, sk=sk)
    hh, qq, kk = torch.arange(3)[:, None, None], torch.arange(sq)[None, :, None], torch.arange(sk)[None, None, :]
    got = mod(torch.zeros(3, sq, sk), torch.zeros((), dtype=torch.long), hh, qq, kk)
    with torch.no_grad():
        ref = enc.bias(torch.arange(q_offset, q_offset + sq), torch.arange(sk))
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=0)
    assert flex.score_mod_for(enc, q_offset=0) is None  # no lengths, no table: SDPA serves it


@pytest.mark.slow
def test_flex_attention_serves_it_with_a_cache() -> None:
    """Through FlexAttention (``set_mode("always")``) attention equals SDPA with the materialised
    bias, for a whole sequence and decoding through a KV cache (12 tokens, then 8)."""
    if not flex.available("cpu", torch.float32):
        pytest.skip(f"FlexAttention is not available here: {flex.errors()}")
    torch._dynamo.reset()  # a fresh recompile budget
    torch.manual_seed(0)
    enc = posenc.create("dpb", num_heads=2, hidden_dim=6, log_distance=True, norm=True)
    attn = posenc.Attention(32, 2, encoding=enc, causal=True).eval()
    x = torch.randn(2, 20, 32)
    got, ref = through_flex_and_sdpa(attn, x)
    torch.testing.assert_close(got, ref, atol=2e-5, rtol=0)
    flex.clear_errors()
    try:
        flex.set_mode("always")
        with torch.no_grad():
            cache = posenc.KVCache()
            steps = torch.cat([attn(x[:, :12], cache=cache), attn(x[:, 12:], cache=cache)], dim=1)
    finally:
        flex.set_mode("auto")
    assert flex.errors() == {}
    torch.testing.assert_close(steps, ref, atol=2e-5, rtol=0)


def test_distances_far_past_training_are_served_by_the_mlp() -> None:
    """DPB has no table to run past: any distance (10^6 here, or a fractional one) is an input of
    the MLP, and the bias there equals the MLP evaluated at it."""
    torch.manual_seed(0)
    enc = posenc.create("dpb", num_heads=2, hidden_dim=8)
    q, k = torch.tensor([10**6 + 0.5]), torch.tensor([0.0, 3.0])
    with torch.no_grad():
        got = enc.bias(q, k)  # [2, 1, 2]
        x = (q[:, None] - k[None, :]).reshape(-1, 1)  # [2, 1]: i - j
        for layer in enc.mlp:
            x = layer(x)
    assert bool(torch.isfinite(got).all())
    torch.testing.assert_close(got[:, 0, :], x.t())
