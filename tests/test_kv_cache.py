"""Decoding through ``posenc.KVCache`` equals the full forward: positions of every accepted shape in
turn, odd head counts, left-padded batches with default positions, narrow integer positions past
their dtype; and the cache keeps copies of what it is given.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from tests.all_schemes import DIM, attention


@pytest.mark.parametrize("name", ["rope", "alibi", "t5", "shaw"])
def test_kv_cache_takes_positions_of_any_accepted_shape_in_turn(name: str) -> None:
    """Positions [s], [1, s] and [b, s] may follow each other while decoding, as Attention accepts
    each; the result equals one forward over the whole sequence. Mixing [1, s] with [b, s] was a
    bug (a bare cat error); so was reusing a cache for another batch size (now a clear error)."""
    torch.manual_seed(0)
    a = attention(name).eval()
    x = torch.randn(2, 6, DIM)
    with torch.no_grad():
        full = a(x)
        cache = posenc.KVCache()
        parts = [
            a(x[:, :3], torch.arange(3).expand(2, 3), cache=cache),  # [b, s]
            a(x[:, 3:4], torch.tensor([[3]]), cache=cache),  # [1, s]
            a(x[:, 4:5], torch.tensor([4]), cache=cache),  # [s]
            a(x[:, 5:], torch.tensor([[5], [5]]), cache=cache),
        ]  # [b, s]
        torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=0)
        assert cache.positions.shape == (2, 6)
        other = posenc.KVCache()
        a(x[:, :2], torch.tensor([[0, 1]]), cache=other)  # [1, s] then [1, s]: stays unbatched
        # the first keys and values are stored as tensors of their own, not views that would keep
        # the whole qkv projection alive (and give compiled decoding a second layout)
        assert other.k._base is None and other.v._base is None and other.k.is_contiguous()
        a(x[:, 2:3], torch.tensor([[2]]), cache=other)
        assert other.positions.shape == (2, 3)
        with pytest.raises(
            ValueError, match=r"this KVCache holds keys \[b, h, sk, hd\] = \[2, 3, 6, 4\].*use a new KVCache"
        ):
            a(x[:1, :1], cache=cache)  # another batch size
        with pytest.raises(TypeError, match="cache must be a posenc.KVCache or None, got int"):
            a(x, cache=3)


@pytest.mark.parametrize("name", ["t5", "alibi", "rope", "xpos", "shaw"])
@pytest.mark.parametrize(("dim", "heads"), [(15, 5), (21, 7), (6, 1)])
def test_odd_head_counts_decode_token_by_token_like_the_full_forward(name: str, dim: int, heads: int) -> None:
    """Odd head counts (5 and 7 heads of odd width 3, or one head of 6; rope/xpos need even widths,
    so they get width 6 heads), batch size 1: decoding one token at a time through a KVCache gives the
    causal full-sequence output (atol 1e-5)."""
    if name in ("rope", "xpos", "shaw") and (dim // heads) % 2:
        dim = heads * 6
    a = attention(name, dim=dim, heads=heads)
    x = torch.randn(1, 7, dim)
    full = a(x)
    cache = posenc.KVCache()
    steps = torch.cat([a(x[:, i : i + 1], cache=cache) for i in range(7)], dim=1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["none", "shaw", "t5", "alibi", "rope", "xpos"])
def test_left_padded_batch_decodes_with_default_positions(name: str) -> None:
    """Prefill a left-padded batch with explicit positions ``[b, s]`` (row 1: two pads, then 0, 1, ...),
    then decode with default positions: each row continues after its own last position, so the
    output equals the full forward at the explicit positions (atol 1e-5). Was a bug (silently wrong):
    every row continued at the stream index 3, so the padded row's new tokens sat 2 positions too far
    from its prompt; fixed in ``Attention.forward``."""
    a = attention(name)
    x = torch.randn(2, 6, DIM)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3]])
    key_mask = torch.tensor([[True] * 6, [False, False, True, True, True, True]])
    full = a(x, positions, key_mask=key_mask)
    cache = posenc.KVCache()
    steps = [a(x[:, :3], positions[:, :3], cache=cache, key_mask=key_mask[:, :3])]
    steps += [a(x[:, i : i + 1], cache=cache, key_mask=key_mask[:, : i + 1]) for i in range(3, 6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert torch.equal(cache.positions, positions)


def test_a_kv_cache_keeps_copies_of_what_it_is_given() -> None:
    """The first append kept the caller's positions tensor (and contiguous k / v) itself: a
    positions buffer stepped with ``+=`` between decoding calls, or edited prefill positions,
    changed the cache (outputs off by 0.006-0.07)."""
    torch.manual_seed(0)
    x = torch.randn(1, 6, 32)
    for name in ("alibi", "rope", "learned"):
        attn = posenc.Attention(32, 4, encoding=name, causal=True).eval()
        with torch.no_grad():
            full = attn(x)
            cache, pos, outs = posenc.KVCache(), torch.tensor([0]), []
            for i in range(6):
                outs.append(attn(x[:, i : i + 1], pos, cache=cache))
                pos += 1
            torch.testing.assert_close(torch.cat(outs, 1), full, rtol=0, atol=1e-6)
            cache, prefill = posenc.KVCache(), torch.arange(3)
            first = attn(x[:, :3], prefill, cache=cache)
            prefill.zero_()
            torch.testing.assert_close(torch.cat((first, attn(x[:, 3:], cache=cache)), 1), full, rtol=0, atol=1e-6)
    cache, k = posenc.KVCache(), torch.randn(1, 2, 3, 8)
    cache.append(k, k.clone(), torch.arange(3))
    k.zero_()
    assert cache.k.abs().sum() > 0


def test_narrow_integer_positions_continue_past_their_dtype() -> None:
    """A cache of uint8 positions 252..255 continued at 0..3 (int8 wraps at 127)."""
    torch.manual_seed(0)
    attn = posenc.Attention(32, 4, encoding="rope", causal=True).eval()
    x = torch.randn(1, 8, 32)
    with torch.no_grad():
        cache = posenc.KVCache()
        first = attn(x[:, :4], torch.arange(252, 256, dtype=torch.uint8), cache=cache)
        rest = attn(x[:, 4:], cache=cache)
        want = attn(x, torch.arange(252, 260))
    assert cache.positions.tolist() == list(range(252, 260))
    torch.testing.assert_close(torch.cat((first, rest), 1), want, rtol=0, atol=1e-6)


def test_append_refuses_positions_that_do_not_match_the_keys() -> None:
    """Was a bug: ``append(k, v, arange(5))`` with 3 keys was taken, and the next attention call
    failed inside torch (``The size of tensor a (4) must match the size of tensor b (6)``). The
    cache is left as it was."""
    cache, k = posenc.KVCache(), torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match=r"positions of shape \[5\] give 5 positions for 3 new keys"):
        cache.append(k, k, torch.arange(5))
    assert cache.k is None and cache.length == 0
    cache.append(k, k, torch.arange(3))
    with pytest.raises(ValueError, match=r"give 2 positions for 1 new keys.*\[s\], \[1, s\] or \[b, s\]"):
        cache.append(k[:, :, :1], k[:, :, :1], torch.arange(3, 5))
    with pytest.raises(ValueError, match=r"k and v must be \[b, h, s, hd\] with the same b, h and s"):
        cache.append(k, k[:, :, :2], torch.arange(3, 6))
    assert cache.length == 3 and cache.k.shape == (1, 2, 3, 8)


def test_one_cache_serves_one_layer() -> None:
    """Was a bug: one KVCache passed to two layers was accepted, and the second layer attended to
    the first one's keys (outputs off by 0.4). The second layer now refuses it; one cache per layer
    decodes as the full forward."""
    torch.manual_seed(0)
    layers = [posenc.Attention(32, 4, encoding="rope", causal=True).eval() for _ in range(2)]
    x = torch.randn(1, 5, 32)
    with torch.no_grad():
        shared = posenc.KVCache()
        layers[0](x[:, :3], cache=shared)
        with pytest.raises(ValueError, match=r"another attention layer.*one KVCache per layer.*for _ in layers"):
            layers[1](x[:, :3], cache=shared)
        assert shared.length == 3
        caches = [posenc.KVCache() for _ in layers]
        for a, b in [(0, 3), (3, 4), (4, 5)]:
            h = x[:, a:b]
            for layer, cache in zip(layers, caches):
                h = layer(h, cache=cache)
            if a == 0:
                steps = [h]
            else:
                steps.append(h)
        full = layers[1](layers[0](x))
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0, atol=1e-6)


def test_a_cache_copies_and_pickles_without_its_layer() -> None:
    """The layer is held by a weak reference: a pickled cache (a checkpoint of a decoding state)
    drops it and serves any layer, a deep copy keeps it."""
    import copy
    import pickle

    attn = posenc.Attention(32, 4, encoding="rope", causal=True).eval()
    x = torch.randn(1, 3, 32)
    with torch.no_grad():
        cache = posenc.KVCache()
        attn(x, cache=cache)
        restored = pickle.loads(pickle.dumps(cache))
        assert restored.length == 3 and torch.equal(restored.k, cache.k)
        posenc.Attention(32, 4, encoding="rope", causal=True)(x[:, :1], cache=restored)  # no owner: taken
        twin = copy.deepcopy(cache)
        attn(x[:, :1], cache=twin)
        with pytest.raises(ValueError, match="one KVCache per layer"):
            posenc.Attention(32, 4, encoding="rope", causal=True)(x[:, :1], cache=twin)
