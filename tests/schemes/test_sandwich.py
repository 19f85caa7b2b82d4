"""Sandwich (posenc.schemes.sandwich): numbers from the paper's inner product of sinusoids written
out in float64 (Chi et al. 2023, section 5: ``sum_{k=1}^{d'/2} cos((m - n) / 10000^(2k/d'))``) with
NeMo ``sandwich_pos_bias``'s shift by ``d'/2`` and head scaling ``H / (8h)``; the cache,
FlexAttention and KV-cache decoding."""

from __future__ import annotations

import math

import pytest
import torch

import posenc
from posenc import flex
from tests.all_schemes import through_flex_and_sdpa


def _sandwich(distance: int, head: int, heads: int, dim: int = 128, base: float = 10000.0) -> float:
    """The bias of head ``head`` (1-based) in Python floats."""
    inner = sum(math.cos(distance / base ** (2 * k / dim)) for k in range(1, dim // 2 + 1))
    return (inner - dim / 2) * heads / (8 * head)


@pytest.mark.parametrize(("heads", "dim", "base"), [(4, 128, 10000.0), (3, 16, 500.0)])
def test_bias_equals_the_formula_written_out(heads: int, dim: int, base: float) -> None:
    enc = posenc.create("sandwich", num_heads=heads, dim=dim, base=base)
    q, k = torch.arange(90, 100), torch.arange(300)
    got = enc.bias(q, k)
    want = torch.tensor(
        [
            [[_sandwich(i - j, h, heads, dim, base) for j in k.tolist()] for i in q.tolist()]
            for h in range(1, heads + 1)
        ],
        dtype=torch.float64,
    )
    assert got.dtype == torch.float32 and got.shape == (heads, 10, 300) and not got.requires_grad
    torch.testing.assert_close(got.double(), want, atol=1e-6, rtol=1e-6)


def test_pinned_numbers_and_shape_of_the_bias() -> None:
    """0 at distance 0, symmetric, negative elsewhere; head 1 of 8 at distance 1 (d' = 128):
    (sum_k cos(10000^(-k/64)) - 64) · 8 / 8, and head h is head 1 divided by h."""
    enc = posenc.create("sandwich", num_heads=8)
    values = enc.relative_bias_values(torch.arange(-50, 51))  # [8, 101]
    assert torch.equal(values[:, 50], torch.zeros(8))
    torch.testing.assert_close(values, values.flip(-1), atol=0, rtol=0)
    assert (values[:, :50] < 0).all()
    assert values[0, 51].item() == pytest.approx(_sandwich(1, 1, 8), abs=1e-7)
    assert values[0, 51].item() == pytest.approx(62.5533815 - 64, abs=1e-6)  # scale H / 8h = 1
    torch.testing.assert_close(values[3], values[0] / 4)


def test_parameter_free_and_float64_frequencies() -> None:
    enc = posenc.create("sandwich", num_heads=2).to(torch.bfloat16)
    assert list(enc.parameters()) == [] and enc.state_dict() == {}
    assert enc.inv_freq.dtype == torch.float64 and enc.inv_freq.shape == (64,)
    assert enc.inv_freq[-1].item() == pytest.approx(1e-4)  # k = d'/2: 1 / base
    far = enc.bias(torch.tensor([4_000_000]), torch.tensor([0]))[1, 0, 0].item()
    assert far == pytest.approx(_sandwich(4_000_000, 2, 2), abs=1e-6)


def test_cached_bias_equals_uncached_over_offsets_and_lengths() -> None:
    enc = posenc.create("sandwich", num_heads=3, dim=32)
    for q0, sq, k0, sk in [(0, 5, 0, 5), (7, 1, 0, 8), (3, 4, 1, 9), (0, 17, 0, 17), (0, 5, 0, 5), (40, 3, 2, 41)]:
        q, k = torch.arange(q0, q0 + sq), torch.arange(k0, k0 + sk)
        cached, again = enc.bias(q, k), enc.bias(q, k)
        uncached = enc.bias(q[None], k[None])[0]  # batched positions: every pair evaluated
        assert torch.equal(cached, again) and torch.equal(cached, uncached)


@pytest.mark.parametrize("causal", [True, False])
def test_kv_cache_decoding_equals_the_full_forward(causal: bool) -> None:
    """The same formula serves decoders and encoders (it is symmetric); decoding appends keys."""
    torch.manual_seed(0)
    attn = posenc.Attention(12, 3, encoding="sandwich", causal=causal).eval()
    x = torch.randn(2, 9, 12)
    with torch.no_grad():
        full = attn(x)
        cache = posenc.KVCache()
        steps = [attn(x[:, :4], cache=cache)] + [attn(x[:, i : i + 1], cache=cache) for i in range(4, 9)]
    if causal:
        torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-6, rtol=1e-6)
    else:  # an encoder's early tokens see later ones in the full forward: only the last step agrees
        torch.testing.assert_close(steps[-1], full[:, -1:], atol=1e-6, rtol=1e-6)


def test_score_mod_equals_bias() -> None:
    enc = posenc.create("sandwich", num_heads=3, dim=16)
    sq, sk, q0 = 6, 20, 14
    mod = flex.score_mod_for(enc, q_offset=q0)
    hh, qq, kk = torch.arange(3)[:, None, None], torch.arange(sq)[None, :, None], torch.arange(sk)[None, None, :]
    got = mod(torch.zeros(3, sq, sk), torch.zeros((), dtype=torch.long), hh, qq, kk)
    torch.testing.assert_close(got, enc.bias(torch.arange(q0, q0 + sq), torch.arange(sk)), atol=1e-6, rtol=1e-6)


def test_attention_defaults_and_requirements() -> None:
    assert posenc.Attention(12, 3, encoding="sandwich").encoding.config.num_heads == 3
    with pytest.raises(ValueError, match="sandwich has num_heads=2 but Attention has 3"):
        posenc.Attention(12, 3, encoding=posenc.create("sandwich", num_heads=2))


def test_bad_config_is_refused_with_what_is_accepted() -> None:
    with pytest.raises(ValueError, match="num_heads must be a positive integer, got 0"):
        posenc.create("sandwich", num_heads=0)
    with pytest.raises(ValueError, match=r"dim must be a positive even number \(features come in pairs\), got 7"):
        posenc.create("sandwich", num_heads=2, dim=7)
    with pytest.raises(ValueError, match="base must be a finite number greater than 1, got 0.5"):
        posenc.create("sandwich", num_heads=2, base=0.5)


@pytest.mark.slow
def test_attention_through_flex_equals_sdpa_with_bias() -> None:
    torch.manual_seed(0)
    attn = posenc.Attention(32, 2, encoding=posenc.create("sandwich", num_heads=2, dim=32), causal=True).eval()
    x = torch.randn(2, 200, 32)
    got, ref = through_flex_and_sdpa(attn, x)
    assert flex.available(), flex.errors()
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
