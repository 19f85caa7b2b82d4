"""Positions the schemes take: every integer dtype gives the int64 result, half-precision and bool
positions are refused, positions with leading dims ``[..., s]`` keep the head axis in place, and
batched query and key positions of different batch sizes are refused.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from tests.all_schemes import DIM, SCHEMES, attention


@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8, torch.uint8], ids=str)
def test_small_integer_position_dtypes_equal_int64(name: str, dtype: torch.dtype) -> None:
    """Positions ``[s]`` and ``[b, s]`` as int32/int16/int8/uint8 give the int64 result exactly.

    Was a bug: the row caches of sinusoidal/rope/xpos indexed with the positions themselves
    (IndexError for int8/int16; uint8 was read as a boolean mask), fixed in ``schemes/_cache.py``;
    ALiBi subtracted uint8 positions in uint8 (``3 - 5`` = 254: a silently wrong bias for batched
    positions), fixed in ``F.relative_positions``.
    """
    a = attention(name)
    x = torch.randn(2, 5, DIM)
    for positions in (torch.arange(5), torch.tensor([[0, 1, 2, 3, 4], [9, 7, 5, 3, 1]])):
        expected = a(x, positions)
        assert torch.equal(a(x, positions.to(dtype)), expected)


@pytest.mark.parametrize("name", SCHEMES)
def test_half_precision_and_bool_positions_refused(name: str) -> None:
    """float16/bfloat16 positions (bf16 cannot hold 257) and bool positions are TypeErrors naming the dtype."""
    a = attention(name)
    x = torch.randn(1, 3, DIM)
    for dtype in (torch.float16, torch.bfloat16, torch.bool):
        with pytest.raises(TypeError, match=str(dtype)):
            a(x, torch.arange(3).to(dtype))


def test_alibi_bias_puts_heads_where_t5_does_for_more_leading_dims() -> None:
    """Positions [..., s] give [..., h, sq, sk] for ALiBi as for T5 (ALiBi used to drop the head
    axis for 3-D positions, mixing heads with a batch dim)."""
    alibi, t5 = posenc.create("alibi", num_heads=3), posenc.create("t5", num_heads=3)
    p = torch.randint(0, 50, (4, 2, 5))
    got = alibi.bias(p, p)
    assert got.shape == t5.bias(p, p).shape == (4, 2, 3, 5, 5)
    for i, j in ((0, 0), (3, 1)):
        torch.testing.assert_close(got[i, j], alibi.bias(p[i, j], p[i, j]), atol=0, rtol=0)


def test_bias_with_mismatched_batched_positions_rejected() -> None:
    """``bias(q [2, s], k [3, s])`` raises a ValueError naming both shapes (was a broadcasting
    RuntimeError); fixed in ``F.relative_positions``."""
    q, k = torch.zeros(2, 3, dtype=torch.long), torch.zeros(3, 3, dtype=torch.long)
    for enc in (posenc.create("alibi", num_heads=2), posenc.create("t5", num_heads=2)):
        with pytest.raises(ValueError, match=r"query positions \(2, 3\) and key positions \(3, 3\)"):
            enc.bias(q, k)
