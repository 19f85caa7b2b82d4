"""Tests that pin details of the analysis checks, FlexAttention and the scheme caches which the
rest of the suite leaves free: each one fails when the detail it names is changed.

Every expected value comes from a formula written out here (the sinusoid's dot product, an
average-rank Spearman correlation, a PCA from the covariance matrix), not from the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import posenc
from posenc import flex
from posenc import functional as F
from posenc.analysis import (
    check_bounded,
    check_decays_with_distance,
    check_distance_monotone,
    check_offset_similarity,
    check_unique,
    default_schemes,
    encoding_matrix,
    project_2d,
    t5_bucket_map,
)
from posenc.analysis.checks import _rank_correlation


def _average_ranks(values: list[float]) -> list[float]:
    """Ranks from 0, tied values sharing the mean of the ranks they occupy (Spearman's convention)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for m in range(i, j + 1):
            ranks[order[m]] = (i + j) / 2
        i = j + 1
    return ranks


def _spearman_with_index(values: list[float]) -> float:
    """Pearson correlation of the average ranks of ``values`` with their index 0..m-1."""
    ranks = np.array(_average_ranks(values), dtype=np.float64)
    index = np.arange(len(values), dtype=np.float64)
    ranks, index = ranks - ranks.mean(), index - index.mean()
    return float((ranks * index).sum() / (np.linalg.norm(ranks) * np.linalg.norm(index)))


def _sinusoid_frequencies(dim: int, base: float = 10000.0) -> np.ndarray:
    """The paper's frequencies ω_i = base^(-2i/dim), i = 0..dim/2-1 (Vaswani et al. 2017, section 3.5)."""
    return base ** (-2.0 * np.arange(dim // 2) / dim)


# ---------------------------------------------------------------------------------------------
# analysis checks


def test_unique_value_is_the_smaller_of_the_float64_and_float32_distances():
    """check_unique's value is the closest pair in either precision. For a one-feature sine over
    6000 positions the float32 rounding brings two codes closer than float64 does, so a value
    taken from float64 alone would overstate how distinct the codes are. Exact comparison."""
    r = check_unique("sine_only", n=6000, dim=1, atol=0.0)
    d64, d32 = r.data["min_distance_float64"], r.data["min_distance_float32"]
    assert d32 < d64  # the case this test needs: float32 is the tighter one
    assert r.value == min(d64, d32) == d32


@pytest.mark.parametrize("scheme", ["fraction", "sine_only"])
def test_bounded_does_not_call_a_value_creeping_towards_one_growth(scheme):
    """Doubling the length moves the fraction's largest value from (n/2-1)/(n/2) to (n-1)/n and the
    sine's a hair nearer 1: both stay below 1, so check_bounded must not report them as growing
    (its 1% margin). Without the margin either would read as growth."""
    r = check_bounded(scheme)
    assert r.data["largest"] > r.data["largest_half"]  # it does creep up
    assert r.data["grows"] is False


def test_offset_similarity_dots_are_the_sum_of_cosines():
    """For the sinusoid, PE(p + k)·PE(p) = Σ_i cos(k·ω_i) at every p (Kazemnejad 2019, seed 000).
    dots[5] holds that product for p = 0..n-6 and each entry must equal the sum over the 32
    frequencies of d = 64; atol 1e-10."""
    r = check_offset_similarity("sinusoidal", dim=64, n=64, offsets=(5,))
    dots = r.data["dots"][5]
    assert dots.shape == (64 - 5,)
    expected = float(np.cos(5 * _sinusoid_frequencies(64)).sum())
    torch.testing.assert_close(dots, torch.full_like(dots, expected), atol=1e-10, rtol=0)


def test_rank_correlation_gives_ties_their_average_rank():
    """_rank_correlation is Spearman's correlation with the index, tied values taking the average
    of their ranks (the docstring's convention). For [3, 1, 1, 2, 5, 1] the ranks are
    [4, 1, 1, 3, 5, 1] (the three 1s share rank 1), which gives -0.5 / sqrt(15.5 · 17.5) =
    -0.030358...; min-rank ties would give another number. atol 1e-12."""
    v = [3.0, 1.0, 1.0, 2.0, 5.0, 1.0]
    expected = _spearman_with_index(v)
    assert expected == pytest.approx(-0.5 / math.sqrt(15.5 * 17.5), abs=1e-12)
    assert _rank_correlation(torch.tensor(v, dtype=torch.float64)) == pytest.approx(expected, abs=1e-12)


def test_distance_monotone_leaves_out_offset_zero():
    """check_distance_monotone ranks the distances at offsets 1.. only: offset 0 is the position
    itself (distance 0) and would add a free point to the trend. data["distances"][k] is the
    distance to start + k, so value is the average-rank Spearman correlation of distances[1:]
    with their index; atol 1e-12."""
    r = check_distance_monotone("sinusoidal", dim=128)
    d = r.data["distances"]
    assert float(d[0]) == pytest.approx(0.0, abs=1e-12)
    expected = _spearman_with_index(d[1:].tolist())
    assert r.value == pytest.approx(expected, abs=1e-12)


def test_decays_scores_are_pe1_dot_pe1_plus_t():
    """For added codes the score at distance t is PE(1)·PE(1 + t) (the docstring; seed 000), which
    for the sinusoid is Σ_i cos(t·ω_i): 32 at t = 0, falling. Against PE(0) it would be another
    sum. t = 0..7 at d = 64; atol 1e-10."""
    scores = check_decays_with_distance("sinusoidal", dim=64, n=8).data["scores"]
    t = np.arange(8)[:, None]
    expected = torch.tensor(np.cos(t * _sinusoid_frequencies(64)[None, :]).sum(1), dtype=torch.float64)
    torch.testing.assert_close(scores, expected, atol=1e-10, rtol=0)


def test_default_schemes_leave_out_grid_schemes():
    """default_schemes lists the schemes for positions on a line: the grid ones (n_axes > 1,
    sinusoidal_nd and rope_axial) are left out, while the line schemes are kept."""
    names = default_schemes()
    assert "sinusoidal_nd" not in names and "rope_axial" not in names
    assert "sinusoidal" in names and "rope" in names


def test_pca_projection_matches_the_covariance_eigenvectors():
    """project_2d(E, "pca") is E centred, on the two leading eigenvectors of its covariance, each
    oriented so that its largest-magnitude loading is positive (the documented convention). The
    reference here uses numpy's eigh of the covariance rather than an SVD; the projected columns
    have mean 0. atol 1e-10."""
    E = encoding_matrix("sinusoidal", 64, dim=16)  # [64, 16] float64
    got = project_2d(E)
    X = E.numpy()
    C = X - X.mean(axis=0, keepdims=True)
    evals, evecs = np.linalg.eigh(C.T @ C)
    order = np.argsort(evals)[::-1][:2]
    assert evals[order[0]] - evals[order[1]] > 1e-6 * evals[order[0]]  # distinct axes: the reference is unique
    assert evals[order[1]] - evals[np.argsort(evals)[::-1][2]] > 1e-6 * evals[order[0]]
    axes = evecs[:, order]  # [16, 2]
    axes = axes * np.sign(axes[np.abs(axes).argmax(axis=0), [0, 1]])
    expected = torch.tensor(C @ axes)
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=0)
    torch.testing.assert_close(got.mean(0), torch.zeros(2, dtype=torch.float64), atol=1e-10, rtol=0)


def test_t5_bucket_map_defaults_to_twice_max_distance():
    """t5_bucket_map's relative positions run over [-2·max_distance, 2·max_distance] by default (its
    docstring), so the picture shows the log buckets saturating: -32..32 for max_distance 16."""
    rel = t5_bucket_map(max_distance=16)["relative_positions"]
    assert torch.equal(rel, torch.arange(-32, 33))


# ---------------------------------------------------------------------------------------------
# FlexAttention


@pytest.mark.parametrize(("sq", "sk", "past"), [(128, 129, 1)])
def test_block_mask_lists_a_kv_block_starting_on_the_last_query(sq, sk, past):
    """After one cached key, query block 0 covers key positions 1..128 and key block 1 holds only
    key 128: the last query sees it, so the block must be listed (partial), exactly as the dense
    causal mask says. A strict comparison of the block's first key with the last query drops it."""
    mask = flex.block_mask(sq, sk, causal=True, q_offset=past, block_size=128)
    dense = torch.arange(sk)[None, :] <= torch.arange(past, past + sq)[:, None]  # [sq, sk]
    nq, nk = -(-sq // 128), -(-sk // 128)
    padded = torch.zeros(nq * 128, nk * 128, dtype=torch.bool)
    padded[:sq, :sk] = dense
    any_visible = padded.view(nq, 128, nk, 128).any(dim=(1, 3))  # [nq, nk]
    assert torch.equal(mask.to_dense()[0, 0].bool(), any_visible)
    assert mask.kv_num_blocks[0, 0].tolist() == [2]  # both partial: query 1 does not see keys 2..127, nor key 128
    assert mask.full_kv_num_blocks[0, 0].tolist() == [0]


def _cached_against_full(attn: posenc.Attention, x: torch.Tensor, prefill: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The full forward through SDPA with the bias (flex off), and the same sequence through
    FlexAttention as a prefill of ``prefill`` tokens then the rest with a KVCache."""
    mode = flex.get_mode()
    try:
        with torch.no_grad():
            flex.set_mode("never")
            ref = attn(x)
            flex.set_mode("always")
            cache = posenc.KVCache()
            first = attn(x[:, :prefill], cache=cache)
            second = attn(x[:, prefill:], cache=cache)
    finally:
        flex.set_mode(mode)
    return torch.cat([first, second], dim=1), ref


@pytest.mark.slow
@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_flex_with_a_kv_cache_equals_the_full_forward(name, monkeypatch):
    """Decoding 50 tokens after a 150-token prefill through FlexAttention equals the full forward
    through SDPA with the materialised bias: the score mod gets the query's offset past the keys'
    start (positions 150.. against keys 0..), and the block mask the number of cached keys. T5's
    bias table is redrawn with std 1 so that a wrong distance shows. atol 2e-5 (float32)."""
    if not flex.available("cpu", torch.float32):
        pytest.skip(f"FlexAttention is not available here: {flex.errors()}")
    monkeypatch.setattr(flex, "_errors", {})
    torch.manual_seed(0)
    attn = posenc.Attention(32, 4, encoding=name, causal=True).eval()
    if name == "t5":
        with torch.no_grad():
            attn.encoding.relative_attention_bias.weight.copy_(torch.randn_like(attn.encoding.relative_attention_bias.weight))
    x = torch.randn(1, 200, 32)
    got, ref = _cached_against_full(attn, x, 150)
    if flex.errors():
        pytest.skip(f"FlexAttention could not compile here: {flex.errors()}")
    torch.testing.assert_close(got, ref, atol=2e-5, rtol=0)


@pytest.mark.slow
def test_flex_with_grouped_kv_heads_runs_without_falling_back(monkeypatch):
    """With 4 query heads sharing 2 key/value heads, FlexAttention is called with enable_gqa and
    runs: it records no error (a failed call falls back to SDPA silently, so only the error record
    shows it), and the cached result still equals the full forward; atol 2e-5."""
    if not flex.available("cpu", torch.float32):
        pytest.skip(f"FlexAttention is not available here: {flex.errors()}")
    monkeypatch.setattr(flex, "_errors", {})
    torch.manual_seed(0)
    attn = posenc.Attention(32, 4, encoding="alibi", causal=True, num_kv_heads=2).eval()
    x = torch.randn(1, 200, 32)
    got, ref = _cached_against_full(attn, x, 150)
    assert flex.errors() == {}
    torch.testing.assert_close(got, ref, atol=2e-5, rtol=0)


# ---------------------------------------------------------------------------------------------
# schemes


def test_sinusoidal_embed_in_float64_uses_float64_codes():
    """A float64 input gets the code computed in float64: at positions up to 4095 the float32
    code differs by up to ~1e-4, so embedding zeros must return exactly F.sinusoidal(..., float64)."""
    enc = posenc.create("sinusoidal", dim=64)
    out = enc.embed(torch.zeros(1, 4096, 64, dtype=torch.float64))
    expected = F.sinusoidal(torch.arange(4096), 64, dtype=torch.float64)
    assert out.dtype == torch.float64
    assert torch.equal(out[0], expected)


def test_rope_axial_default_query_positions_are_the_last_keys():
    """With default positions, rope_axial places sq queries at the last sq of the sk key positions
    (its docstring), as a decoder's new queries after the cached keys: rotating the last 3 queries
    alone equals the last 3 rows of rotating all 10. Exact comparison."""
    enc = posenc.create("rope_axial", dim=16)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 10, 16, generator=g)
    k = torch.randn(1, 2, 10, 16, generator=g)
    q_all, k_all = enc.rotate(q, k)
    q_last, k_last = enc.rotate(q[:, :, -3:], k)
    assert torch.equal(q_last, q_all[:, :, -3:])
    assert torch.equal(k_last, k_all)


@pytest.mark.parametrize("name", ["t5", "alibi"])
def test_bias_schemes_are_one_directional_in_causal_attention(name):
    """Attention's default bias config follows causal: a causal model sees only past keys, so its
    T5 buckets / ALiBi slopes are one-directional (bidirectional=False), and a non-causal one
    bidirectional."""
    assert posenc.Attention(32, 2, encoding=name, causal=True).encoding.config.bidirectional is False
    assert posenc.Attention(32, 2, encoding=name, causal=False).encoding.config.bidirectional is True


def test_row_cache_grows_for_a_position_equal_to_its_size():
    """The sinusoid's row cache starts at 64 rows (positions 0..63). Position 64 is one past it, so
    the cache must grow: the code equals the uncached build exactly (an off-by-one reads past the
    table)."""
    enc = posenc.create("sinusoidal", dim=8)
    enc.encode(torch.tensor([3, 5]))
    assert enc._table.shape[0] == 64
    got = enc.encode(torch.tensor([64]))
    assert torch.equal(got, enc._build(torch.tensor([64])))
    assert torch.equal(got, F.sinusoidal(torch.tensor([64]), 8))
