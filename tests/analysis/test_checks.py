"""posenc.analysis.checks: the details of each check's value and data.

Every expected value comes from a formula written out here (the sinusoid's dot product, an
average-rank Spearman correlation), not from the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from posenc.analysis import (
    check_bounded,
    check_decays_with_distance,
    check_distance_monotone,
    check_offset_similarity,
    check_unique,
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
    """For the sinusoid, PE(p + k)·PE(p) = Σ_i cos(k·ω_i) at every p (Kazemnejad 2019).
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
    """For added codes the score at distance t is PE(1)·PE(1 + t) (the docstring; Kazemnejad 2019), which
    for the sinusoid is Σ_i cos(t·ω_i): 32 at t = 0, falling. Against PE(0) it would be another
    sum. t = 0..7 at d = 64; atol 1e-10."""
    scores = check_decays_with_distance("sinusoidal", dim=64, n=8).data["scores"]
    t = np.arange(8)[:, None]
    expected = torch.tensor(np.cos(t * _sinusoid_frequencies(64)[None, :]).sum(1), dtype=torch.float64)
    torch.testing.assert_close(scores, expected, atol=1e-10, rtol=0)
