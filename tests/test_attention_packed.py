"""Packed documents in :class:`posenc.Attention`: a packed batch equals its documents run one by one,
for every registered scheme, through SDPA's float mask and through FlexAttention's block mask
(FlexAttention's document-masking example: ``document_id[q] == document_id[kv]`` with causal)."""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import flex
from posenc.kernels import flex as flex_kernel

from .all_schemes import DIM, HEADS, SCHEMES

CU = torch.tensor([0, 3, 8, 8, 12])  # lengths 3, 5, 0 (empty), 4


def _one_by_one(attn: posenc.Attention, x: torch.Tensor, cu: torch.Tensor) -> torch.Tensor:
    return torch.cat([attn(x[:, a:b]) for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()) if b > a], dim=1)


@pytest.mark.parametrize(
    ("name", "causal"),
    [(name, causal) for name in SCHEMES for causal in (True, False) if causal or name != "fire"],  # fire: causal only
)
def test_packed_batch_equals_documents_one_by_one(name, causal):
    """``cu_seqlens`` and the equivalent ``document_ids``: no attention across documents, and the
    positions of absolute codes, rotations and biases restart in each document."""
    attn = posenc.Attention(DIM, HEADS, encoding=name, causal=causal)
    x = torch.randn(1, 12, DIM)
    try:
        flex.set_mode("never")  # SDPA (or explicit math) with the document mask
        with torch.no_grad():
            want = _one_by_one(attn, x, CU)
            torch.testing.assert_close(attn(x, cu_seqlens=CU), want, atol=1e-6, rtol=0)
            ids = torch.tensor([5] * 3 + [9] * 5 + [5] * 4)  # runs of equal ids: the same three documents
            torch.testing.assert_close(attn(x, document_ids=ids), want, atol=1e-6, rtol=0)
    finally:
        flex.set_mode("auto")


@pytest.mark.parametrize("name", ["rope", "alibi", "t5"])
def test_rows_packed_differently(name):
    """``document_ids [b, s]``: each row its own packing; gradients flow as through the documents alone."""
    attn = posenc.Attention(DIM, HEADS, encoding=name, causal=True)
    x = torch.randn(2, 7, DIM, requires_grad=True)
    ids = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1]])
    got = attn(x, document_ids=ids)
    want = torch.cat(
        [
            torch.cat([attn(x[:1, :3]), attn(x[:1, 3:])], dim=1),
            torch.cat([attn(x[1:, :5]), attn(x[1:, 5:])], dim=1),
        ]
    )
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    grad = torch.randn_like(got)
    (g_packed,) = torch.autograd.grad(got, x, grad)
    (g_docs,) = torch.autograd.grad(want, x, grad)
    torch.testing.assert_close(g_packed, g_docs, atol=1e-6, rtol=0)


def test_explicit_positions_are_kept_with_documents():
    """Positions given with documents are used as given (here: continuing across documents)."""
    attn = posenc.Attention(DIM, HEADS, encoding="rope", causal=True)
    x = torch.randn(1, 8, DIM)
    positions = torch.arange(8)
    with torch.no_grad():
        got = attn(x, positions, cu_seqlens=torch.tensor([0, 3, 8]))
        want = torch.cat([attn(x[:, :3], positions[:3]), attn(x[:, 3:], positions[3:])], dim=1)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_packed_bad_input():
    attn = posenc.Attention(DIM, HEADS, encoding="alibi", causal=True)
    x = torch.randn(1, 12, DIM)
    with pytest.raises(ValueError, match="cu_seqlens must start at 0"):
        attn(x, cu_seqlens=torch.tensor([2, 12]))
    with pytest.raises(ValueError, match="cu_seqlens must be increasing"):
        attn(x, cu_seqlens=torch.tensor([0, 8, 4, 12]))
    with pytest.raises(ValueError, match="cu_seqlens must end at the token count 12 .* got 11"):
        attn(x, cu_seqlens=torch.tensor([0, 4, 11]))
    with pytest.raises(ValueError, match="not both"):
        attn(x, cu_seqlens=CU, document_ids=torch.zeros(12, dtype=torch.long))
    with pytest.raises(ValueError, match="cu_seqlens describes one packed row .* x has 2 rows"):
        attn(torch.randn(2, 12, DIM), cu_seqlens=CU)
    with pytest.raises(ValueError, match=r"document_ids must be \[s\] or \[b, s\] with b=1, s=12"):
        attn(x, document_ids=torch.zeros(11, dtype=torch.long))
    with pytest.raises(ValueError, match="take no KVCache"):
        attn(x, cache=posenc.KVCache(), cu_seqlens=CU)


@pytest.mark.parametrize("causal", [True, False])
def test_document_block_mask_lists_exactly_the_visible_blocks(causal):
    """Every (query, key) pair of one document (and causal) lies in a listed block and passes the
    mask_mod where the block is partial; blocks with no such pair are not listed; a block inside
    one document is full exactly where causality leaves it whole."""
    s, block = 300, 64
    ids = torch.repeat_interleave(torch.arange(4), torch.tensor([50, 140, 30, 80]))[None]  # [1, s]
    mask = flex.block_mask(s, s, causal=causal, block_size=block, documents=ids)
    qi, ki = torch.arange(s)[:, None], torch.arange(s)[None, :]
    dense = ids[0][:, None] == ids[0][None, :]
    if causal:
        dense &= ki <= qi
    n = -(-s // block)
    padded = torch.zeros(n * block, n * block, dtype=torch.bool)
    padded[:s, :s] = dense
    any_visible = padded.view(n, block, n, block).any(dim=(1, 3))  # [n, n]
    all_visible = torch.ones_like(padded)
    all_visible[:s, :s] = dense
    whole = all_visible.view(n, block, n, block).all(dim=(1, 3))  # [n, n]
    assert torch.equal(mask.to_dense()[0, 0].bool(), any_visible)
    full = torch.zeros(n, n, dtype=torch.bool)
    for row in range(n):
        full[row, mask.full_kv_indices[0, 0, row, : mask.full_kv_num_blocks[0, 0, row]].long()] = True
    assert torch.equal(full, whole & any_visible)
    assert torch.equal(mask.mask_mod(torch.tensor(0), 0, qi, ki), dense)
    with pytest.raises(ValueError, match="a document mask needs the queries to be the keys"):
        flex.block_mask(s, s, causal=causal, q_offset=1, documents=ids)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "causal"), [("alibi", True), ("t5", False)])
def test_packed_batch_through_flex_equals_documents_one_by_one(name, causal, monkeypatch):
    """FlexAttention with the document block mask (compiled once per case, ~15 s on the CPU), at a
    length that is not a multiple of the block size, documents crossing block boundaries."""
    calls = []
    real = flex_kernel.flex_attention

    def counting(*args, **kwargs):
        calls.append(args[4])  # the block mask
        return real(*args, **kwargs)

    monkeypatch.setattr(flex_kernel, "flex_attention", counting)
    attn = posenc.Attention(16, 2, encoding=name, causal=causal).eval()
    cu = torch.tensor([0, 100, 270, 300, 304])
    x = torch.randn(1, 304, 16)
    try:
        with torch.no_grad():
            flex.set_mode("always")
            got = attn(x, cu_seqlens=cu)
            flex.set_mode("never")
            want = _one_by_one(attn, x, cu)
    finally:
        flex.set_mode("auto")
    assert flex.available(), flex.errors()
    assert len(calls) == 1 and calls[0].mask_mod.__name__ == "document_mask"
    torch.testing.assert_close(got, want, atol=2e-5, rtol=0)
