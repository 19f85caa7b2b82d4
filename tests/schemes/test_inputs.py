"""Queries, keys and embeddings given to the schemes' hooks: views rotate as their contiguous copies,
and heads of another width, integer tensors and other bad inputs are refused with errors that
name them.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import functional as F
from tests.all_schemes import ROTARY


@pytest.mark.parametrize("name", ROTARY + ["shaw"])
@pytest.mark.parametrize("width", [4, 12])
def test_heads_of_another_width_than_the_scheme_rejected(name: str, width: int) -> None:
    """A scheme built for head width 8 given heads of width 4 or 12 raises a ValueError naming both.
    Was a bug: wider heads were silently rotated on their first 8 features only (a partial rotary the
    user never asked for), narrower ones failed inside the table code, and Shaw raised a matmul
    RuntimeError; fixed by ``check_head_width`` in ``Rope``/``XPos``/``RopeAxial.rotate`` and
    ``Shaw.query_scores``."""
    enc = posenc.create(name, dim=8)
    q = torch.randn(1, 2, 5, width)
    with pytest.raises(
        ValueError, match=rf"{name} was built for heads of width dim=8, got queries/keys of shape \(1, 2, 5, {width}\)"
    ):
        if name == "shaw":
            enc.query_scores(q, torch.arange(5), torch.arange(5))
        else:
            enc.rotate(q, q)


def test_integer_inputs_to_rotations_and_embeddings_rejected() -> None:
    """Integer tensors (token ids passed by mistake) raise TypeErrors naming the dtype. Was a bug:
    ``F.apply_rope`` and ``embed`` returned the rotated / encoded values truncated to integers (e.g. a
    sinusoid added to ones gave ``[1, 2, 1, 2, ...]``); fixed in ``F.apply_rope`` and
    ``AbsoluteEncoding.embed``."""
    cos, sin = F.rope_cos_sin(3, F.rope_inv_freq(4)[0])
    with pytest.raises(TypeError, match="floating-point tensor, got dtype torch.int64"):
        F.apply_rope(torch.ones(1, 1, 3, 4, dtype=torch.long), cos, sin)
    for name in ("sinusoidal", "learned"):
        with pytest.raises(TypeError, match="floating-point token embeddings.*torch.int64"):
            posenc.create(name, dim=8).embed(torch.ones(1, 3, 8, dtype=torch.long))


@pytest.mark.parametrize("name", ROTARY)
def test_non_contiguous_q_k_equal_contiguous(name: str) -> None:
    """Transposed views (``[b, s, h, hd].transpose(1, 2)``, the usual projection output) and sliced
    views rotate exactly as their contiguous copies."""
    enc = posenc.create(name, dim=8)
    q = torch.randn(2, 9, 3, 8).transpose(1, 2)  # [b, h, s, hd] view
    k = torch.randn(2, 3, 9, 16)[..., ::2]  # strided last dim
    got = enc.rotate(q, k)
    expected = enc.rotate(q.contiguous(), k.contiguous())
    for g, e in zip(got, expected):
        assert torch.equal(g, e)
    cos, sin = F.rope_cos_sin(9, F.rope_inv_freq(8)[0])
    assert torch.equal(F.apply_rope(q, cos, sin), F.apply_rope(q.contiguous(), cos, sin))


def test_more_bad_inputs_get_clear_errors() -> None:
    """Each of these ended in an internal error (IndexError, torch.finfo, a meta copy, tables the
    caller never made, torch's overlap check)."""
    x = torch.zeros(1, 5, 8)
    for name in ("sinusoidal", "learned"):
        with pytest.raises(ValueError, match="must have a sequence axis"):
            posenc.create(name, dim=8).embed(x, torch.tensor(2))
    ints = torch.ones(1, 1, 3, 8, dtype=torch.long)
    with pytest.raises(TypeError, match="xpos: queries and keys must be floating-point tensors"):
        posenc.create("xpos", dim=8).rotate(ints, ints)
    axial, q = posenc.create("rope_axial", dim=16), torch.randn(2, 2, 5, 16)
    meta = torch.zeros(5, 2, device="meta")
    with pytest.raises(ValueError, match="on the meta device"):
        axial.rotate(q, q, meta, meta)
    with pytest.raises(ValueError, match=r"key positions of shape \(3, 5\) do not fit keys"):
        axial.rotate(q, q, torch.zeros(3, 5, 2), torch.zeros(3, 5, 2))
    cos, sin = F.rope_cos_sin(5, F.rope_inv_freq(16)[0])
    with pytest.raises(ValueError, match="share memory"):
        F.fast_apply_rope_(torch.randn(1, 1, 1, 16).expand(2, 2, 5, 16), cos, sin)
    with pytest.raises(ValueError, match="share memory"):
        F.fast_apply_rope(q, cos, sin, out=torch.empty(1, 1, 1, 16).expand(2, 2, 5, 16))
