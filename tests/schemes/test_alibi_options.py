"""ALiBi's options (posenc.schemes.alibi): slopes on a subset of heads (x-transformers'
``AlibiPositionalBias(heads=n, total_heads=H)``, its ``alibi_num_heads``), custom slopes, and the
position interpolation of Al-Khateeb et al. 2023 (slopes scaled by ``train_length / L`` past the
training length), each pinned against the formula written out in float64."""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import flex
from tests.all_schemes import through_flex_and_sdpa

xt = pytest.importorskip("x_transformers.x_transformers")


def _alibi(slopes: list[float], q: list[int], k: list[int], *, bidirectional: bool) -> torch.Tensor:
    """``-m_h · (i - j)`` or ``-m_h · |i - j|`` in float64."""
    return torch.tensor(
        [[[-m * (abs(i - j) if bidirectional else i - j) for j in k] for i in q] for m in slopes], dtype=torch.float64
    )


@pytest.mark.parametrize(("heads", "biased"), [(8, 4), (8, 8), (12, 5), (3, 1)])
@pytest.mark.parametrize(("i", "j"), [(1, 1), (5, 9), (16, 16), (1, 40)])
def test_subset_of_heads_equals_x_transformers(heads: int, biased: int, i: int, j: int) -> None:
    """x-transformers builds the slopes of ``biased`` heads and pads the last ``heads - biased``
    heads' bias with zeros; its bias is the symmetric ``-m·|j - i|`` (posenc ``bidirectional=True``)."""
    ref = xt.AlibiPositionalBias(heads=biased, total_heads=heads)(i, j)  # [heads, i, j]
    enc = posenc.create("alibi", num_heads=heads, num_biased_heads=biased, bidirectional=True)
    got = enc.bias(torch.arange(j - i, j), torch.arange(j))
    assert got.shape == ref.shape == (heads, i, j)
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-6)
    assert torch.equal(got[biased:], torch.zeros(heads - biased, i, j))
    assert torch.equal(enc.slopes[:biased].float(), xt.AlibiPositionalBias(heads=biased).slopes.flatten())


def test_subset_of_heads_pinned_numbers() -> None:
    """4 biased heads of 8: slopes 2^-2, 2^-4, 2^-6, 2^-8 (the sequence for 4 heads), then zeros."""
    enc = posenc.create("alibi", num_heads=8, num_biased_heads=4)
    assert enc.slopes.tolist() == [0.25, 0.0625, 0.015625, 0.00390625, 0.0, 0.0, 0.0, 0.0]
    q, k = list(range(3, 9)), list(range(9))
    torch.testing.assert_close(
        enc.bias(torch.tensor(q), torch.tensor(k)).double(), _alibi(enc.slopes.tolist(), q, k, bidirectional=False)
    )


@pytest.mark.parametrize("bidirectional", [False, True])
def test_custom_slopes(bidirectional: bool) -> None:
    slopes = [0.5, 0.1, 0.0, 1 / 3]
    enc = posenc.create("alibi", num_heads=4, slopes=slopes, bidirectional=bidirectional)
    assert enc.config.slopes == (0.5, 0.1, 0.0, 1 / 3) and enc.slopes.dtype == torch.float64
    q, k = list(range(10)), list(range(10))
    torch.testing.assert_close(
        enc.bias(torch.tensor(q), torch.tensor(k)).double(), _alibi(slopes, q, k, bidirectional=bidirectional)
    )
    # x-transformers' slopes= argument gives the same (symmetric) bias
    if bidirectional:
        ref = xt.AlibiPositionalBias(heads=4, slopes=slopes)(10, 10)
        torch.testing.assert_close(enc.bias(torch.arange(10), torch.arange(10)), ref, atol=1e-6, rtol=1e-6)
    subset = posenc.create("alibi", num_heads=4, num_biased_heads=2, slopes=[0.5, 0.25])
    assert subset.slopes.tolist() == [0.5, 0.25, 0.0, 0.0]


def test_interpolation_scales_slopes_past_the_training_length() -> None:
    """Al-Khateeb et al. 2023: with T = 8, a bias over L = 32 keys uses the slopes times 8/32; up to
    L = 8 the slopes are as trained. The largest penalty at L = 32 is the one at L = 8."""
    enc = posenc.create("alibi", num_heads=4, train_length=8)
    plain = posenc.create("alibi", num_heads=4)
    slopes = plain.slopes.tolist()
    for length in (1, 5, 8):
        assert torch.equal(
            enc.bias(torch.arange(length), torch.arange(length)), plain.bias(torch.arange(length), torch.arange(length))
        )
    q, k = list(range(28, 32)), list(range(32))
    got = enc.bias(torch.tensor(q), torch.tensor(k))
    torch.testing.assert_close(got.double(), _alibi([m * 8 / 32 for m in slopes], q, k, bidirectional=False))
    assert got[0, -1, 0].item() == pytest.approx(-1.9375)  # -m·31·T/L = -0.25·31·8/32
    batched = enc.bias(torch.arange(32)[None], torch.arange(32)[None])[0]  # [b, s] positions: the same
    torch.testing.assert_close(batched, enc.bias(torch.arange(32), torch.arange(32)))
    assert enc.score_mod(0) is None  # the slopes depend on the number of keys: attention materialises the bias


def test_attention_with_options_and_flex_default_unchanged() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 12, 16)
    for config in ({"num_biased_heads": 2}, {"slopes": [0.3, 0.0, 0.1, 0.2]}, {"train_length": 4}):
        attn = posenc.Attention(16, 4, encoding=posenc.create("alibi", num_heads=4, **config), causal=True).eval()
        out = attn(x)
        assert out.shape == (2, 12, 16) and torch.isfinite(out).all()
    assert flex.score_mod_for(posenc.create("alibi", num_heads=4, num_biased_heads=2)) is not None


def test_kv_cache_decoding_equals_the_full_forward_with_a_subset_and_custom_slopes() -> None:
    torch.manual_seed(0)
    for config in ({"num_biased_heads": 1}, {"slopes": [0.3, 0.0, 0.7]}):
        attn = posenc.Attention(12, 3, encoding=posenc.create("alibi", num_heads=3, **config), causal=True).eval()
        x = torch.randn(2, 9, 12)
        with torch.no_grad():
            full = attn(x)
            cache = posenc.KVCache()
            steps = [attn(x[:, :4], cache=cache)] + [attn(x[:, i : i + 1], cache=cache) for i in range(4, 9)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-6, rtol=1e-6)


def test_bad_options_are_refused_with_what_is_accepted() -> None:
    with pytest.raises(ValueError, match="num_biased_heads must be at most num_heads=4 .*got 5"):
        posenc.create("alibi", num_heads=4, num_biased_heads=5)
    with pytest.raises(ValueError, match="num_biased_heads must be a positive integer, got 0"):
        posenc.create("alibi", num_heads=4, num_biased_heads=0)
    with pytest.raises(ValueError, match=r"slopes must hold one slope per biased head \(4: .*got 3"):
        posenc.create("alibi", num_heads=4, slopes=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"slopes must hold one slope per biased head \(2: .*got 4"):
        posenc.create("alibi", num_heads=4, num_biased_heads=2, slopes=[0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match="each slope must be a finite number >= 0, got -0.5"):
        posenc.create("alibi", num_heads=2, slopes=[0.1, -0.5])
    with pytest.raises(TypeError, match="slopes must be a sequence of 2 non-negative numbers"):
        posenc.create("alibi", num_heads=2, slopes=0.5)
    with pytest.raises(ValueError, match="train_length must be a positive integer, got -8"):
        posenc.create("alibi", num_heads=2, train_length=-8)


@pytest.mark.slow
def test_subset_of_heads_through_flex_equals_sdpa_with_bias() -> None:
    torch.manual_seed(0)
    enc = posenc.create("alibi", num_heads=2, num_biased_heads=1, slopes=[0.2])
    attn = posenc.Attention(32, 2, encoding=enc, causal=True).eval()
    x = torch.randn(2, 200, 32)
    got, ref = through_flex_and_sdpa(attn, x)
    assert flex.available(), flex.errors()
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
