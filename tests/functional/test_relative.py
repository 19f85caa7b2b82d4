"""``posenc.functional`` relative positions and the bias functions built on them: ``k - q`` never
wraps in a narrow integer dtype, and bad arguments are named.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import functional as F


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16], ids=str)
def test_relative_positions_never_wrap(dtype: torch.dtype) -> None:
    """``k - q`` in int64 whatever the integer dtype: uint8 ``3 - 5`` is -2 (not 254) and int16
    ``20000 - (-20000)`` is 40000 (not -25536); the ALiBi bias follows (slope 1/16 for 2 heads).
    Was a bug (silently wrong ALiBi biases), fixed in ``F.relative_positions``."""
    if dtype == torch.uint8:
        q, k, distance = torch.tensor([5], dtype=dtype), torch.tensor([3], dtype=dtype), -2
    else:
        q, k, distance = torch.tensor([-20000], dtype=dtype), torch.tensor([20000], dtype=dtype), 40000
    assert F.relative_positions(q, k).item() == distance
    bias = F.alibi_bias(F.alibi_slopes(2), q, k, bidirectional=True)  # [h, 1, 1]
    assert bias[0, 0, 0].item() == -abs(distance) / 16


def test_bias_functions_name_bad_arguments() -> None:
    slopes, table = F.alibi_slopes(4), torch.randn(32, 4)
    assert (
        F.alibi_bias_range(slopes, 0, 0).shape
        == (4, 0, 0)
        == F.alibi_bias(slopes, torch.arange(0), torch.arange(0)).shape
    )
    assert F.t5_bias_range(table, 0, 3).shape == (4, 0, 3) and F.toeplitz(torch.zeros(4, 0), 2, 0).shape == (4, 2, 0)
    torch.testing.assert_close(F.alibi_bias(slopes, [0, 1, 2], [0, 1, 2]), F.alibi_bias_range(slopes, 3, 3))  # lists
    for call, error, message in (
        (lambda: F.alibi_bias_range(slopes, -1, 3), ValueError, "sq and sk must be non-negative integers, got sq=-1"),
        (lambda: F.toeplitz(torch.zeros(4, 3), 2, 2.0), ValueError, "sq and sk must be non-negative integers"),
        (
            lambda: F.t5_bias_range(torch.randn(8, 4), 3, 3),
            ValueError,
            r"weight must be the table \[num_buckets, h\] "
            r"with num_buckets=32 rows, got \(8, 4\)",
        ),
        (
            lambda: F.alibi_bias_range(slopes[:, None], 3, 3),
            ValueError,
            r"slopes must be a 1-D tensor \[h\], got \(4, 1\)",
        ),
        (
            lambda: F.alibi_bias(slopes[None], torch.arange(3), torch.arange(3)),
            ValueError,
            "slopes must be a 1-D tensor",
        ),
        (
            lambda: F.relative_positions(torch.tensor(3), torch.arange(3)),
            ValueError,
            r"query positions must be \[s\] or \[b, s\], got a 0-d tensor \(3\)",
        ),
        (
            lambda: posenc.create("alibi", num_heads=2).bias(torch.arange(3), torch.tensor(1)),
            ValueError,
            "key positions must be",
        ),
        (lambda: posenc.create("shaw", dim=4).index(torch.tensor(0), torch.arange(2)), ValueError, "0-d tensor"),
    ):
        with pytest.raises(error, match=message):
            call()
