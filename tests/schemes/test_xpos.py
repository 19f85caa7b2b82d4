"""xPos (Sun et al. 2022, section 3.1): parity with both peer implementations, the fixed centre,
cached keys at an offset, and the range guard."""

from __future__ import annotations

import math

import pytest
import torch

import posenc
from posenc.attention import KVCache

HD, B, H = 16, 2, 3


def _qk(s: int, sk: int | None = None, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(s)
    q = torch.randn(B, H, s, HD, generator=g, dtype=dtype)
    k = torch.randn(B, H, sk or s, HD, generator=g, dtype=dtype)
    return q, k


def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q @ k.transpose(-2, -1)


@pytest.mark.parametrize("s", [7, 10])
def test_matches_rotary_embedding_torch(s: int) -> None:
    """rotary-embedding-torch ``RotaryEmbedding(use_xpos=True).rotate_queries_and_keys``: interleaved
    pairs, centre ``s // 2``. With ``center = s // 2`` q and k agree; with any centre the scores do.
    Tolerance 1e-6 relative: the peer rounds its frequencies to float32."""
    from rotary_embedding_torch import RotaryEmbedding

    peer = RotaryEmbedding(dim=HD, use_xpos=True, xpos_scale_base=8, cache_if_possible=False).double()
    q, k = _qk(s)
    peer_q, peer_k = peer.rotate_queries_and_keys(q, k)
    centred = posenc.create("xpos", dim=HD, layout="interleaved", scale_base=8.0, center=float(s // 2))
    our_q, our_k = centred.rotate(q, k)
    torch.testing.assert_close(our_q, peer_q, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(our_k, peer_k, rtol=1e-6, atol=1e-6)
    for center in (0.0, 3.5, -20.0):
        ours = posenc.create("xpos", dim=HD, layout="interleaved", scale_base=8.0, center=center)
        torch.testing.assert_close(_scores(*ours.rotate(q, k)), _scores(peer_q, peer_k), rtol=1e-6, atol=1e-6)
    # q differs from the peer's by the constant factor ζ^((0 - s//2) / B) per pair
    zero = posenc.create("xpos", dim=HD, layout="interleaved", scale_base=8.0)
    factor = zero.zeta ** ((0 - s // 2) / 8.0)  # [hd/2]
    torch.testing.assert_close(zero.rotate(q, k)[0] * factor.repeat_interleave(2), peer_q, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("rotary_dim", [8, 16])
def test_matches_x_transformers_partial(rotary_dim: int) -> None:
    """x-transformers ``RotaryEmbedding(rotary_emb_dim, use_xpos=True)`` + ``apply_rotary_pos_emb``
    (``Decoder(rotary_xpos=True)`` rotates half the head by default): the first ``rotary_dim``
    features rotated and scaled with frequencies and ζ over that width, the rest unchanged;
    interleaved pairs, centre ``s // 2``. posenc's xPos had no ``rotary_dim`` (scores off by a
    relative 1.4). Tolerance 1e-5: the peer's float32 frequencies."""
    xt = pytest.importorskip("x_transformers.x_transformers")
    s = 40
    peer = xt.RotaryEmbedding(rotary_dim, use_xpos=True, scale_base=16).double()
    freqs, scale = peer(torch.arange(s))
    q, k = _qk(s)
    peer_q, peer_k = xt.apply_rotary_pos_emb(q, freqs, scale), xt.apply_rotary_pos_emb(k, freqs, scale**-1)
    ours = posenc.create(
        "xpos", dim=HD, rotary_dim=rotary_dim, layout="interleaved", scale_base=16.0, center=float(s // 2)
    )
    our_q, our_k = ours.rotate(q, k)
    torch.testing.assert_close(our_q, peer_q, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(our_k, peer_k, rtol=1e-5, atol=1e-5)
    assert torch.equal(our_q[..., rotary_dim:], q[..., rotary_dim:])
    with pytest.raises(ValueError, match="rotary_dim must be at most dim=16, got 32"):
        posenc.create("xpos", dim=HD, rotary_dim=32)


def _torchscale_xpos(x: torch.Tensor, scale_base: float, offset: int = 0, downscale: bool = False) -> torch.Tensor:
    """torchscale ``XPOS.forward`` (microsoft/torchscale, component/xpos_relative_position.py), restated:
    over the stream ``0..offset+len-1`` the exponent of position p is ``p - ceil(n/2)``, n = offset + len;
    the last ``len`` rows are used; interleaved pairs (``rotate_every_two``, ``duplicate_interleave``).
    ``x`` is [batch·heads, len, hd]."""
    length, hd = x.shape[1], x.shape[2]
    n = length + offset
    positions = torch.arange(n, dtype=torch.float64)
    zeta = (torch.arange(0, hd, 2, dtype=torch.float64) + 0.4 * hd) / (1.4 * hd)
    scale = zeta ** ((positions - math.ceil(n / 2)) / scale_base)[:, None]  # [n, hd/2]
    angles = positions[:, None] * 10000.0 ** (-torch.arange(hd // 2, dtype=torch.float64) / (hd // 2))
    scale, angles = scale[-length:], angles[-length:]
    if downscale:
        scale = 1 / scale
    cos = (angles.cos() * scale).repeat_interleave(2, dim=-1)
    sin = (angles.sin() * scale).repeat_interleave(2, dim=-1)
    turned = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * cos + turned * sin


def test_matches_torchscale_full_and_incremental() -> None:
    """torchscale re-centres at ceil(n/2) and re-scales all cached keys per step; its scores equal
    posenc's (fixed centre, keys rotated once) for the whole sequence and for each decoding step."""
    s, scale_base = 9, 6.0
    ours = posenc.create("xpos", dim=HD, layout="interleaved", scale_base=scale_base)
    q, k = _qk(s)

    def flat(t):
        return t.flatten(0, 1)  # [b, h, s, x] -> [b·h, s, x]

    ref = _scores(_torchscale_xpos(flat(q), scale_base), _torchscale_xpos(flat(k), scale_base, downscale=True))
    our_q, our_k = ours.rotate(q, k)
    torch.testing.assert_close(flat(_scores(our_q, our_k)), ref, rtol=1e-10, atol=1e-10)
    for step in range(1, s + 1):  # query `step - 1` against keys 0..step-1, as torchscale decodes
        ref_q = _torchscale_xpos(flat(q[:, :, step - 1 : step]), scale_base, offset=step - 1)
        ref_k = _torchscale_xpos(flat(k[:, :, :step]), scale_base, downscale=True)
        ours_step = _scores(our_q[:, :, step - 1 : step], our_k[:, :, :step])
        torch.testing.assert_close(flat(ours_step), _scores(ref_q, ref_k), rtol=1e-10, atol=1e-10)


def test_scores_depend_only_on_distance_and_decay() -> None:
    """Shifting every position leaves the scores unchanged (any centre); for q = k = the same vector
    at distance t, the score's pair i carries ζ_i^(t/B) (Sun et al. 2022)."""
    xpos = posenc.create("xpos", dim=HD, scale_base=16.0, center=5.0)
    q, k = _qk(6)
    p = torch.tensor([0, 3, 4, 9, 20, 21])
    base = _scores(*xpos.rotate(q, k, p, p))
    for shift in (1, 17, 300):
        torch.testing.assert_close(_scores(*xpos.rotate(q, k, p + shift, p + shift)), base, rtol=1e-9, atol=1e-9)
    e = torch.zeros(1, 1, 1, HD, dtype=torch.float64)
    e[..., 0] = 1.0  # pair 0 in the half layout is features (0, hd/2)
    for t in (0, 5, 40):
        qq, kk = xpos.rotate(e, e, torch.tensor([t]), torch.tensor([0]))
        angle = t * 1.0  # inv_freq[0] = 1
        expected = xpos.zeta[0] ** (t / 16.0) * math.cos(angle)
        assert float(_scores(qq, kk)) == pytest.approx(float(expected), rel=1e-12, abs=1e-12)


def test_layouts_agree_up_to_permutation() -> None:
    """``half`` on features permuted (evens then odds) equals ``interleaved``, permuted the same way."""
    q, k = _qk(5)
    perm = torch.cat((torch.arange(0, HD, 2), torch.arange(1, HD, 2)))
    inter = posenc.create("xpos", dim=HD, layout="interleaved", center=2.0, scale_base=4.0)
    half = posenc.create("xpos", dim=HD, layout="half", center=2.0, scale_base=4.0)
    iq, ik = inter.rotate(q, k)
    hq, hk = half.rotate(q[..., perm], k[..., perm])
    torch.testing.assert_close(hq, iq[..., perm], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(hk, ik[..., perm], rtol=1e-12, atol=1e-12)


def test_cached_keys_at_an_offset() -> None:
    """Decoding with a KVCache (prefill 5 tokens, then one at a time) gives the full causal
    forward's outputs: keys rotated once at a fixed centre stay valid at every offset."""
    torch.manual_seed(0)
    attn = posenc.Attention(32, 2, encoding=posenc.create("xpos", dim=16, scale_base=8.0), causal=True).double()
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    full = attn(x)
    cache = KVCache()
    parts = [attn(x[:, :5], cache=cache)] + [attn(x[:, t : t + 1], cache=cache) for t in range(5, 9)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=1e-10, atol=1e-10)
    # batched positions [b, s] (a left-padded row starts at -2): each row as if alone
    positions = torch.tensor([[0, 1, 2, 3], [-2, -1, 0, 1]])
    both = attn(x[:, :4], positions)
    for row in range(2):
        alone = attn(x[row : row + 1, :4], positions[row])
        torch.testing.assert_close(both[row : row + 1], alone, rtol=1e-10, atol=1e-10)


def test_decoding_matches_peer_full_sequence_scores() -> None:
    """The scores of a decoding step (2 queries, 9 keys at offset 7) equal rotary-embedding-torch's
    full-sequence scores. Its own ``rotate_queries_with_cached_keys`` centres queries on ``sq // 2``
    and keys on ``sk // 2`` and is off (checked for the pinned 0.9.1, as the module docstring says)."""
    import rotary_embedding_torch
    from rotary_embedding_torch import RotaryEmbedding

    peer = RotaryEmbedding(dim=HD, use_xpos=True, xpos_scale_base=8, cache_if_possible=False).double()
    q, k = _qk(9)
    full = _scores(*peer.rotate_queries_and_keys(q, k))[:, :, -2:]
    ours = posenc.create("xpos", dim=HD, layout="interleaved", scale_base=8.0)
    step = _scores(*ours.rotate(q[:, :, -2:], k))  # default query positions: 7, 8
    torch.testing.assert_close(step, full, rtol=1e-6, atol=1e-6)
    from importlib.metadata import version

    if version("rotary-embedding-torch") == "0.9.1":
        peer_step = _scores(*peer.rotate_queries_with_cached_keys(q[:, :, -2:], k))
        assert not torch.allclose(peer_step, full, rtol=1e-3, atol=1e-3)
    assert rotary_embedding_torch is not None


def test_low_precision_rounds_once() -> None:
    """bf16 input: the decay is folded into the float32 tables, so the result is the float64 answer
    rounded once to bf16: within half a bf16 ulp (2^-8 relative, 8 significant bits) plus float32 error."""
    xpos = posenc.create("xpos", dim=HD, scale_base=8.0, center=4.0)
    q, k = (t.bfloat16() for t in _qk(8))
    ref_q, ref_k = xpos.rotate(q.double(), k.double())
    low_q, low_k = xpos.rotate(q, k)
    assert low_q.dtype == torch.bfloat16
    for low, ref in ((low_q, ref_q), (low_k, ref_k)):
        assert ((low.double() - ref).abs() <= ref.abs() * 2**-8 + 1e-6).all()


def test_range_guard() -> None:
    """Factors ζ_0^(∓|p - c| / B) must stay inside the dtype: fp32 reaches ±35,695 positions from the
    centre at B = 512 (ln(1/tiny) = 87.34 over ln(1/ζ_0) = ln(3.5)), fp16 ±3,964."""
    xpos = posenc.create("xpos", dim=HD)
    q, k = _qk(2, dtype=torch.float32)
    ok = torch.tensor([35_000, 35_001])
    out_q, out_k = xpos.rotate(q, k, ok, ok)
    assert torch.isfinite(out_q).all() and torch.isfinite(out_k).all() and (out_q.abs() > 0).all()
    with pytest.raises(ValueError, match="center"):
        xpos.rotate(q, k, ok + 1000, ok + 1000)
    with pytest.raises(ValueError, match="float16"):
        xpos.rotate(q.half(), k.half(), torch.tensor([4000, 4001]), torch.tensor([4000, 4001]))
    recentred = posenc.create("xpos", dim=HD, center=40_000.0)
    assert torch.isfinite(recentred.rotate(q, k, ok + 5000, ok + 5000)[1]).all()
    with pytest.raises(ValueError, match="center"):
        posenc.create("xpos", dim=HD, center=float("nan"))
