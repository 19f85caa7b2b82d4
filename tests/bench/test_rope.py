"""posenc.bench.rope: the cases the RoPE benchmark times."""

from __future__ import annotations

import torch

from posenc.bench import rope as bench_rope


def test_rope_floor_cases_return_q_and_k() -> None:
    """Every floor case moves both q and k, as every posenc case does: a floor of q alone would
    halve the denominator of every ratio in the table."""
    q, k = torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)
    cos, sin = torch.ones(8, 16), torch.zeros(8, 16)  # the identity rotation
    cases, _ = bench_rope._posenc_cases(q, k, cos, sin, "half")
    for name in ("floor", "floor, new tensors"):
        got = cases[name]()
        assert len(got) == 2, name
        assert torch.equal(got[0], q) and torch.equal(got[1], k), name
    got = cases["floor, in place"]()
    assert len(got) == 2
    assert torch.equal(got[0], -q) and torch.equal(got[1], -k)
