"""Packed sequences: positions and document indices from ``cu_seqlens`` (flash-attention's varlen
description) and from per-token document ids, their errors, and RoPE over a packed batch through
the ``rope`` scheme and :func:`posenc.kernels.rope` equal to each document rotated alone."""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import functional as F
from posenc import kernels


def test_positions_and_documents_from_cu_seqlens():
    cu = torch.tensor([0, 3, 3, 7, 8], dtype=torch.int32)  # lengths 3, 0 (empty), 4, 1
    assert F.positions_from_cu_seqlens(cu).tolist() == [0, 1, 2, 0, 1, 2, 3, 0]
    assert F.document_ids_from_cu_seqlens(cu).tolist() == [0, 0, 0, 2, 2, 2, 2, 3]
    assert F.positions_from_cu_seqlens(torch.tensor([0, 5]), total=5).tolist() == [0, 1, 2, 3, 4]
    assert F.check_cu_seqlens(cu, 8).dtype == torch.int64


def test_positions_and_segments_from_document_ids():
    ids = torch.tensor([[7, 7, 2, 2, 2, 7], [0, 0, 0, 0, 0, 0]])
    assert F.positions_from_document_ids(ids).tolist() == [[0, 1, 0, 1, 2, 0], [0, 1, 2, 3, 4, 5]]
    # a run of equal ids is a document: the second run of 7s is a third document
    assert F.segments_from_document_ids(ids).tolist() == [[0, 0, 1, 1, 1, 2], [0, 0, 0, 0, 0, 0]]
    with pytest.raises(TypeError, match="document_ids must be an integer tensor"):
        F.positions_from_document_ids(ids.float())
    with pytest.raises(ValueError, match=r"document_ids must be \[s\] or \[b, s\]"):
        F.segments_from_document_ids(ids[None])


@pytest.mark.parametrize(
    ("cu", "total", "message"),
    [
        (torch.tensor([1, 3, 8]), 8, "cu_seqlens must start at 0 .* got 1"),
        (torch.tensor([0, 5, 3, 8]), 8, r"cu_seqlens must be increasing .* entry 2 \(3\) is below entry 1 \(5\)"),
        (torch.tensor([0, 3, 7]), 8, "cu_seqlens must end at the token count 8 .* got 7"),
        (torch.tensor([0]), None, r"n \+ 1 >= 2 entries"),
        (torch.tensor([[0, 3]]), None, "cu_seqlens must be 1-D"),
    ],
)
def test_bad_cu_seqlens(cu, total, message):
    with pytest.raises(ValueError, match=message):
        F.positions_from_cu_seqlens(cu, total)


def test_cu_seqlens_of_the_wrong_type():
    with pytest.raises(TypeError, match="cu_seqlens must be an integer tensor .* got dtype torch.float32"):
        F.check_cu_seqlens(torch.tensor([0.0, 3.0]))
    with pytest.raises(TypeError, match="cu_seqlens must be an integer tensor .* got list"):
        F.check_cu_seqlens([0, 3])


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_packed_rotation_equals_documents_one_by_one(layout):
    """``[1, h, total, hd]`` through the ``rope`` scheme at positions from ``cu_seqlens``, and
    ``[total, h, hd]`` through ``kernels.rope`` with ``seq_dim=-3`` and gathered tables, equal each
    document rotated from position 0."""
    cu = torch.tensor([0, 4, 9, 11])
    q, k = torch.randn(1, 2, 11, 8), torch.randn(1, 2, 11, 8)
    rope = posenc.create("rope", dim=8, layout=layout)
    positions = F.positions_from_cu_seqlens(cu)
    q_packed, k_packed = rope.rotate(q, k, positions, positions)
    bounds = list(zip(cu[:-1].tolist(), cu[1:].tolist()))
    for a, b in bounds:
        q_doc, k_doc = rope.rotate(q[:, :, a:b], k[:, :, a:b])
        torch.testing.assert_close(q_packed[:, :, a:b], q_doc, atol=0, rtol=0)
        torch.testing.assert_close(k_packed[:, :, a:b], k_doc, atol=0, rtol=0)
    x = q[0].transpose(0, 1).contiguous()  # [total, h, hd]
    cos, sin = F.rope_cos_sin(positions, rope.inv_freq, layout=layout)  # [total, r]
    got = kernels.rope(x, cos, sin, layout=layout, seq_dim=-3)
    torch.testing.assert_close(got, q_packed[0].transpose(0, 1), atol=1e-6, rtol=0)


def test_rope_scheme_rotates_packed_tokens_where_they_lie():
    """``Rope.rotate_one(x [total, h, hd], positions, seq_dim=-3)`` equals the ``[1, h, total, hd]``
    rotation transposed, and keeps the packed layout."""
    cu = torch.tensor([0, 2, 7])
    x = torch.randn(7, 3, 8)  # [total, h, hd]
    rope = posenc.create("rope", dim=8)
    positions = F.positions_from_cu_seqlens(cu)
    got = rope.rotate_one(x, positions, seq_dim=-3)
    want = rope.rotate_one(x.transpose(0, 1)[None], positions)[0].transpose(0, 1)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    assert got.shape == (7, 3, 8) and got.is_contiguous()
    with pytest.raises(ValueError, match=r"positions of shape \(6,\) do not fit"):
        rope.rotate_one(x, positions[:6], seq_dim=-3)
