"""Randomized positions (Ruoss et al. 2023, arXiv 2305.16843): sorted distinct draws from a larger range,
uniform over subsets, reproducible, and usable with every registered scheme through ``Attention``."""

from __future__ import annotations

import itertools

import pytest
import torch

import posenc
from posenc import functional as F


def test_sorted_distinct_in_range() -> None:
    g = torch.Generator().manual_seed(1)
    positions = F.randomized_positions(64, 40, 100, generator=g)
    assert positions.shape == (64, 40) and positions.dtype == torch.int64
    assert (positions[:, 1:] > positions[:, :-1]).all()  # strictly increasing: sorted and distinct
    assert int(positions.min()) >= 0 and int(positions.max()) < 100
    assert int(positions.max()) > 90 and int(positions.min()) < 10  # the whole range is reached
    assert torch.equal(F.randomized_positions(3, 7, 7), torch.arange(7).expand(3, 7))  # all of them
    assert F.randomized_positions(2, 0, 5).shape == (2, 0)


def test_deterministic_under_a_seeded_generator() -> None:
    first = F.randomized_positions(4, 8, 1000, generator=torch.Generator().manual_seed(123))
    again = F.randomized_positions(4, 8, 1000, generator=torch.Generator().manual_seed(123))
    other = F.randomized_positions(4, 8, 1000, generator=torch.Generator().manual_seed(124))
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    assert not torch.equal(first[0], first[1])  # rows are drawn independently
    torch.manual_seed(5)
    global_draw = F.randomized_positions(2, 3, 50)
    torch.manual_seed(5)
    assert torch.equal(F.randomized_positions(2, 3, 50), global_draw)


def test_uniform_over_subsets() -> None:
    """Every 2-subset of [0, 6) is equally likely (15 subsets, 15,000 rows: 1,000 ± 31 each; the
    bound 150 is ~5 standard deviations and the seed is fixed)."""
    positions = F.randomized_positions(15_000, 2, 6, generator=torch.Generator().manual_seed(0))
    counts = {pair: 0 for pair in itertools.combinations(range(6), 2)}
    for a, b in positions.tolist():
        counts[(a, b)] += 1
    assert len(counts) == 15
    assert all(abs(c - 1000) < 150 for c in counts.values()), counts


def test_device_and_errors() -> None:
    out = F.randomized_positions(2, 3, 10, device="cpu")
    assert out.device.type == "cpu"
    with pytest.raises(ValueError, match="max_position must be at least seq_len=11"):
        F.randomized_positions(1, 11, 10)
    with pytest.raises(TypeError, match="batch must be a non-negative integer, got 2.5"):
        F.randomized_positions(2.5, 3, 10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seq_len must be a non-negative integer, got -1"):
        F.randomized_positions(1, -1, 10)
    with pytest.raises(ValueError, match="max_position must be a positive integer"):
        F.randomized_positions(1, 0, 0)
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        F.randomized_positions(1, 2, 10, generator=0)  # type: ignore[arg-type]


def _attention(name: str, dim: int, max_position: int) -> posenc.Attention:
    if name == "learned":  # the table must cover every position that can be drawn
        return posenc.Attention(dim, 2, encoding=posenc.create("learned", dim=dim, max_len=max_position))
    try:
        return posenc.Attention(dim, 2, encoding=name)
    except ValueError:  # a causal-only scheme (FIRE, forgetting attention)
        return posenc.Attention(dim, 2, encoding=name, causal=True)


@pytest.mark.parametrize("name", posenc.available())
def test_usable_with_every_scheme(name: str) -> None:
    """Batched randomized positions ``[b, s]`` through ``Attention``: each row's output equals that
    row run alone at its own positions ``[s]``, and differs from positions ``0..s-1`` for every
    scheme that reads positions (``none`` and the contextual schemes, which count tokens instead,
    are unchanged)."""
    torch.manual_seed(0)
    dim, s, max_position = 16, 5, 64
    attn = _attention(name, dim, max_position).double()
    x = torch.randn(3, s, dim, dtype=torch.float64)
    positions = F.randomized_positions(3, s, max_position, generator=torch.Generator().manual_seed(2))
    out = attn(x, positions)
    for row in range(3):
        alone = attn(x[row : row + 1], positions[row])
        torch.testing.assert_close(out[row : row + 1], alone, rtol=1e-10, atol=1e-10)
    plain = attn(x)
    if name == "none" or attn.encoding.data_dependent:  # contextual positions (CoPE, forgetting) ignore token positions
        torch.testing.assert_close(out, plain, rtol=0, atol=0)
    else:
        assert not torch.allclose(out, plain, atol=1e-6)
