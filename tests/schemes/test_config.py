"""Configuration values of the schemes (and of Attention): a value of the wrong kind or out of range
is named in the error, and sizes are read by value (``numpy.int64(5)``, ``12.0``).
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import functional as F


def re_escape(value: object) -> str:
    import re

    return re.escape(repr(value))


@pytest.mark.parametrize("base", [1.0, 0.5, -1, float("inf"), float("nan"), True, "10000"])
def test_bad_bases_name_the_value(base: object) -> None:
    """Bases must be finite and > 1: the error repeats the value received, for functions and schemes."""
    for build in (
        lambda: F.rope_inv_freq(8, base=base),
        lambda: F.sinusoidal(3, 8, base=base),
        lambda: posenc.create("rope", dim=8, base=base),
        lambda: posenc.create("xpos", dim=8, base=base),
    ):
        with pytest.raises(ValueError, match=rf"base must be a finite number greater than 1, got {re_escape(base)}"):
            build()


@pytest.mark.parametrize(
    ("dim", "error"),
    [(0, ValueError), (3, ValueError), (-2, ValueError), ("8", TypeError), (None, TypeError), (2.5, TypeError)],
)
def test_bad_head_widths_name_the_value(dim: object, error: type) -> None:
    with pytest.raises(error, match=rf"got {re_escape(dim)}"):
        posenc.create("rope", dim=dim)


def test_numpy_and_whole_float_sizes_accepted() -> None:
    """Values, not types: ``numpy.int64(5)`` heads and ``12.0`` widths are 5 and 12."""
    np = pytest.importorskip("numpy")
    assert posenc.create("alibi", num_heads=np.int64(5)).slopes.shape == (5,)
    assert posenc.Attention(12.0, 3.0).head_dim == 4  # type: ignore[arg-type]
    assert torch.equal(F.rope_inv_freq(np.int64(6))[0], F.rope_inv_freq(6)[0])


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (
            lambda: posenc.create("alibi", num_heads=2, bidirectional="false"),
            TypeError,
            "bidirectional must be True or False, got 'false'",
        ),
        (lambda: posenc.create("t5", num_heads=2, bidirectional=1), TypeError, "bidirectional must be True or False"),
        (lambda: posenc.create("shaw", dim=4, values="no"), TypeError, "values must be True or False"),
        (
            lambda: posenc.create("sinusoidal", dim=4, learned_scale=None),
            TypeError,
            "learned_scale must be True or False",
        ),
        (lambda: posenc.Attention(8, 2, causal="False"), TypeError, "causal must be True or False, got 'False'"),
        (
            lambda: posenc.Attention(8, 2, dropout=None),
            TypeError,
            r"dropout must be a probability in \[0, 1\], got None",
        ),
        (
            lambda: posenc.create("t5", num_heads=2, init_std=-1),
            ValueError,
            "init_std must be a finite number >= 0, got -1",
        ),
        (lambda: posenc.create("shaw", dim=4, init_std="0.02"), TypeError, "init_std must be a finite number"),
        (
            lambda: posenc.create("learned", dim=4, init_std=float("inf")),
            ValueError,
            "init_std must be a finite number >= 0",
        ),
        (
            lambda: posenc.create("xpos", dim=8, scale_base=None),
            TypeError,
            "scale_base must be a finite number, got None",
        ),
        (
            lambda: posenc.create("xpos", dim=8, gamma=float("inf")),
            ValueError,
            "gamma must be a positive finite number",
        ),
        (lambda: posenc.create("xpos", dim=8, center=True), TypeError, "center must be a finite number, got True"),
        (lambda: posenc.create("learned", dim=1e30), ValueError, r"dim must be at most 2\*\*31 - 1, got 1e\+30"),
        (
            lambda: posenc.create("shaw", dim=8, max_relative_position=2**40),
            ValueError,
            "max_relative_position must be at most",
        ),
        (
            lambda: posenc.Attention(30, 6, encoding="rope"),
            ValueError,
            r"encoding 'rope' cannot serve Attention\(dim=30, num_heads=6\), heads of width 5: dim must be a positive even",
        ),
    ],
)
def test_config_values_of_the_wrong_kind_are_named(make, error, message) -> None:
    """A string "false" from a config file used to be read by truthiness (the other form, silently);
    None, strings or infinities for numbers failed inside torch or later, without the name."""
    with pytest.raises(error, match=message):
        make()
