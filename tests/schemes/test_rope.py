"""The RoPE scheme at extreme but valid parameters (bases from 1.0001 to 1e30, head widths 2 to
256), and its config's own copy of the scaling.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import functional as F


@pytest.mark.parametrize("base", [1.0001, 2.0, 1e9, 1e30])
def test_tiny_and_huge_bases_follow_the_formula(base: float) -> None:
    """``inv_freq_i = base^(-2i/d)`` in float64 for bases from 1.0001 to 1e30 (rtol 1e-12), and the
    rotation stays a rotation (norms kept to 1e-5)."""
    inv_freq, _ = F.rope_inv_freq(16, base=base)
    expected = torch.tensor([base ** (-2 * i / 16) for i in range(8)], dtype=torch.float64)
    torch.testing.assert_close(inv_freq, expected, atol=0, rtol=1e-12)
    x = torch.randn(1, 2, 50, 16)
    rotated, _ = posenc.create("rope", dim=16, base=base).rotate(x, x)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("head_dim", [2, 6, 96, 256])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_head_widths_keep_norms_and_relative_scores(head_dim: int, layout: str) -> None:
    """For head widths 2, 6, 96 and 256: rotation keeps norms, and the score of a query at m with a
    key at n depends on m - n only (positions shifted by 1000 give the same scores, atol 1e-4)."""
    rope = posenc.create("rope", dim=head_dim, layout=layout)
    q, k = torch.randn(2, 1, 2, 8, head_dim).unbind(0)
    positions = torch.arange(8)
    rq, rk = rope.rotate(q, k, positions, positions)
    sq, sk = rope.rotate(q, k, positions + 1000, positions + 1000)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rq @ rk.transpose(-1, -2), sq @ sk.transpose(-1, -2), atol=1e-4, rtol=1e-4)


def test_rope_config_keeps_its_own_copy_of_the_scaling() -> None:
    """Editing the dict passed as ``scaling`` changed ``config.scaling`` (and what a meta-built
    module rebuilt from it) but not the frequencies already made."""
    scaling = {"rope_type": "linear", "factor": 2.0}
    rope = posenc.create("rope", dim=8, scaling=scaling)
    scaling["factor"] = 8.0
    assert rope.config.scaling["factor"] == 2.0
    torch.testing.assert_close(rope.inv_freq, F.rope_inv_freq(8, scaling={"rope_type": "linear", "factor": 2.0})[0])
