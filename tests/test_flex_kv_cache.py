"""FlexAttention (``posenc.flex``) after cached keys: the block mask lists every block the dense
causal mask reaches at a query offset, and decoding through FlexAttention with a KVCache (also
with grouped key/value heads) equals the full forward through SDPA.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import flex


@pytest.mark.parametrize(("sq", "sk", "past"), [(128, 129, 1)])
def test_block_mask_lists_a_kv_block_starting_on_the_last_query(sq, sk, past):
    """After one cached key, query block 0 covers key positions 1..128 and key block 1 holds only
    key 128: the last query sees it, so the block must be listed (partial), exactly as the dense
    causal mask says. A strict comparison of the block's first key with the last query drops it."""
    mask = flex.block_mask(sq, sk, causal=True, q_offset=past, block_size=128)
    dense = torch.arange(sk)[None, :] <= torch.arange(past, past + sq)[:, None]  # [sq, sk]
    nq, nk = -(-sq // 128), -(-sk // 128)
    padded = torch.zeros(nq * 128, nk * 128, dtype=torch.bool)
    padded[:sq, :sk] = dense
    any_visible = padded.view(nq, 128, nk, 128).any(dim=(1, 3))  # [nq, nk]
    assert torch.equal(mask.to_dense()[0, 0].bool(), any_visible)
    assert mask.kv_num_blocks[0, 0].tolist() == [2]  # both partial: query 1 does not see keys 2..127, nor key 128
    assert mask.full_kv_num_blocks[0, 0].tolist() == [0]


def _cached_against_full(attn: posenc.Attention, x: torch.Tensor, prefill: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The full forward through SDPA with the bias (flex off), and the same sequence through
    FlexAttention as a prefill of ``prefill`` tokens then the rest with a KVCache."""
    mode = flex.get_mode()
    try:
        with torch.no_grad():
            flex.set_mode("never")
            ref = attn(x)
            flex.set_mode("always")
            cache = posenc.KVCache()
            first = attn(x[:, :prefill], cache=cache)
            second = attn(x[:, prefill:], cache=cache)
    finally:
        flex.set_mode(mode)
    return torch.cat([first, second], dim=1), ref


@pytest.mark.slow
@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_flex_with_a_kv_cache_equals_the_full_forward(name, monkeypatch):
    """Decoding 50 tokens after a 150-token prefill through FlexAttention equals the full forward
    through SDPA with the materialised bias: the score mod gets the query's offset past the keys'
    start (positions 150.. against keys 0..), and the block mask the number of cached keys. T5's
    bias table is redrawn with std 1 so that a wrong distance shows. atol 2e-5 (float32)."""
    if not flex.available("cpu", torch.float32):
        pytest.skip(f"FlexAttention is not available here: {flex.errors()}")
    flex.clear_errors()
    torch.manual_seed(0)
    attn = posenc.Attention(32, 4, encoding=name, causal=True).eval()
    if name == "t5":
        with torch.no_grad():
            attn.encoding.relative_attention_bias.weight.copy_(
                torch.randn_like(attn.encoding.relative_attention_bias.weight)
            )
    x = torch.randn(1, 200, 32)
    got, ref = _cached_against_full(attn, x, 150)
    if flex.errors():
        pytest.skip(f"FlexAttention could not compile here: {flex.errors()}")
    torch.testing.assert_close(got, ref, atol=2e-5, rtol=0)


@pytest.mark.slow
def test_flex_with_grouped_kv_heads_runs_without_falling_back(monkeypatch):
    """With 4 query heads sharing 2 key/value heads, FlexAttention is called with enable_gqa and
    runs: it records no error (a failed call falls back to SDPA silently, so only the error record
    shows it), and the cached result still equals the full forward; atol 2e-5."""
    if not flex.available("cpu", torch.float32):
        pytest.skip(f"FlexAttention is not available here: {flex.errors()}")
    # the shapes compiled by earlier tests count against Dynamo's recompile limit, past which torch
    # runs flex uncompiled (and warns, which posenc records as an error): start this test afresh
    torch.compiler.reset()
    flex.clear_errors()
    torch.manual_seed(0)
    attn = posenc.Attention(32, 4, encoding="alibi", causal=True, num_kv_heads=2).eval()
    x = torch.randn(1, 200, 32)
    got, ref = _cached_against_full(attn, x, 150)
    assert flex.errors() == {}
    torch.testing.assert_close(got, ref, atol=2e-5, rtol=0)
