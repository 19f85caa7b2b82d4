"""Multi-dimensional positions: N-D sinusoids against positional-encodings, axial RoPE against
rotary-embedding-torch and torchtune, their properties, and ``Attention`` with coordinates."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
import torch

import posenc
from posenc import functional as F
from posenc.attention import KVCache


# -- grids and coordinates ----------------------------------------------------------------------
def test_grid_positions_row_major() -> None:
    """Cell i of ``grid_positions(*sizes)`` is cell i of ``x.flatten(1, n)`` for x [b, *sizes, d]."""
    sizes = (3, 4, 2)
    index = torch.arange(24).reshape(sizes)  # cell number at each grid point
    coords = F.grid_positions(*sizes)
    assert coords.shape == (24, 3) and coords.dtype == torch.int64
    assert torch.equal(index[coords[:, 0], coords[:, 1], coords[:, 2]], torch.arange(24))
    normed = F.grid_positions(3, 5, normalized=True)
    assert torch.equal(normed[:5, 1], torch.linspace(-1, 1, 5, dtype=torch.float64))
    assert torch.equal(normed[::5, 0], torch.linspace(-1, 1, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="at least one axis"):
        F.grid_positions()
    with pytest.raises(ValueError, match="sizes\\[1\\]"):
        F.grid_positions(2, 0)


def test_as_coordinates() -> None:
    assert torch.equal(F.as_coordinates(torch.tensor([4, 7]), 3), torch.tensor([[4, 0, 0], [7, 0, 0]]))
    coords = torch.tensor([[1, 2], [3, 4], [5, 6]])
    assert F.as_coordinates(coords, 2, length=3) is coords
    batched = torch.arange(6).reshape(2, 3)  # [b, s] positions, read on axis 0
    assert F.as_coordinates(batched, 2, length=3).shape == (2, 3, 2)
    with pytest.raises(ValueError, match="s=4"):
        F.as_coordinates(coords, 2, length=4)


# -- N-D sinusoids ------------------------------------------------------------------------------
@pytest.mark.parametrize("channels", [1, 2, 3, 5, 8, 17, 64, 127])
def test_sinusoidal_2d_matches_positional_encodings(channels: int) -> None:
    """positional-encodings ``PositionalEncoding2D`` (torch_encodings.py): per-axis width
    2·ceil(ch/4), x table then y table, cut to ch (odd ch included). It forms angles in float32:
    1e-6 at coordinates below 16."""
    from positional_encodings.torch_encodings import PositionalEncoding2D

    for sizes in [(1, 1), (3, 5), (16, 9)]:
        peer = PositionalEncoding2D(channels)(torch.zeros(2, *sizes, channels))  # [b, X, Y, ch]
        ours = F.sinusoidal_nd(F.grid_positions(*sizes), channels).reshape(*sizes, channels)  # [X·Y, ch] -> [X, Y, ch]
        torch.testing.assert_close(ours, peer[1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("channels", [1, 4, 5, 6, 7, 13, 30])
def test_sinusoidal_3d_matches_positional_encodings(channels: int) -> None:
    """positional-encodings ``PositionalEncoding3D``: per-axis width 2·ceil(ch/6), x, y, z tables."""
    from positional_encodings.torch_encodings import PositionalEncoding3D

    sizes = (3, 4, 5)
    peer = PositionalEncoding3D(channels)(torch.zeros(1, *sizes, channels))  # [b, X, Y, Z, ch]
    scheme = posenc.create("sinusoidal_nd", dim=channels, n_axes=3)
    ours = scheme.encode(F.grid_positions(*sizes)).reshape(*sizes, channels)  # [X·Y·Z, ch] -> [X, Y, Z, ch]
    torch.testing.assert_close(ours, peer[0], rtol=0, atol=1e-6)


def test_sinusoidal_1d_odd_width_matches_positional_encodings() -> None:
    """With one axis, ``sinusoidal_nd`` is ``PositionalEncoding1D`` (width 2·ceil(ch/2), cut to ch)."""
    from positional_encodings.torch_encodings import PositionalEncoding1D

    peer = PositionalEncoding1D(7)(torch.zeros(1, 12, 7))[0]  # [x, ch]
    ours = F.sinusoidal_nd(torch.arange(12)[:, None], 7)  # coordinates [x, 1]
    torch.testing.assert_close(ours, peer, rtol=0, atol=1e-6)
    assert torch.equal(ours, F.sinusoidal(12, 8)[:, :7])  # the width-8 table, cut


def test_sinusoidal_nd_scheme_in_attention() -> None:
    """``sinusoidal_nd`` adds the code of each patch's coordinates; ``[s, n]`` and ``[b, s, n]``
    coordinates agree, and 1-D positions are axis 0 (the y table at coordinate 0)."""
    scheme = posenc.create("sinusoidal_nd", dim=12)
    x = torch.randn(2, 6, 12)
    coords = F.grid_positions(2, 3)
    out = scheme.embed(x, coords)
    torch.testing.assert_close(out, x + F.sinusoidal_nd(coords, 12))
    torch.testing.assert_close(scheme.embed(x, coords.expand(2, 6, 2)), out)
    on_axis0 = torch.stack((torch.arange(6), torch.zeros(6, dtype=torch.long)), dim=-1)
    torch.testing.assert_close(scheme.embed(x), x + F.sinusoidal_nd(on_axis0, 12))
    attn = posenc.Attention(12, 2, encoding=scheme)
    torch.testing.assert_close(attn(x, coords), attn(x, coords.expand(2, 6, 2)))


# -- axial RoPE ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("freqs_for", "per_axis", "head_dim"), [("lang", 8, 16), ("lang", 8, 32), ("pixel", 8, 24)])
def test_axial_rope_matches_rotary_embedding_torch(freqs_for: str, per_axis: int, head_dim: int) -> None:
    """rotary-embedding-torch: ``apply_rotary_emb(RotaryEmbedding(dim=w, freqs_for=...).get_axial_freqs(H, W), t)``
    equals ``rope_axial(dim=hd, rotary_dim=2w, layout='interleaved')`` at ``grid_positions(H, W)``
    (``normalized=True`` for ``'pixel'``, whose positions are ``linspace(-1, 1)``). Partial rotary when
    2w < hd. The peer forms angles in float32: 1e-5."""
    from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

    sizes = (4, 6)
    peer_module = RotaryEmbedding(dim=per_axis, freqs_for=freqs_for)
    t = torch.randn(2, 3, *sizes, head_dim)  # [b, h, H, W, hd]
    peer = apply_rotary_emb(peer_module.get_axial_freqs(*sizes), t)
    scheme = posenc.create(
        "rope_axial", dim=head_dim, rotary_dim=2 * per_axis, frequencies="rope" if freqs_for == "lang" else "pixel"
    )
    coords = F.grid_positions(*sizes, normalized=freqs_for == "pixel")
    q = t.flatten(2, 3)  # [b, h, H, W, hd] -> [b, h, H·W, hd]
    ours, _ = scheme.rotate(q, q, coords, coords)
    torch.testing.assert_close(ours.reshape(t.shape), peer, rtol=0, atol=1e-5)


def _torchtune_position_embeddings():
    """torchtune 0.6.1's ``modules/position_embeddings.py``, loaded by path: it needs only torch, but
    ``import torchtune`` fails with the installed torchao 0.18 (``torchao.dtypes.nf4tensor`` moved)."""
    spec = importlib.util.find_spec("torchtune")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torchtune is not installed")
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "modules" / "position_embeddings.py"
    module_spec = importlib.util.spec_from_file_location("_torchtune_position_embeddings", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("append_cls_token", [True, False])
def test_axial_rope_matches_torchtune_vision_rope(append_cls_token: bool) -> None:
    """torchtune ``VisionRotaryPositionalEmbeddings(dim=hd // 2)`` over a g × g patch tile equals
    ``rope_axial(dim=hd, layout='interleaved')`` at coordinates ``(column + 1, row + 1)`` per patch
    and ``(0, 0)`` (no rotation) for the CLS token. float32 angles in the peer: 1e-6."""
    tt = _torchtune_position_embeddings()
    g, hd = 4, 16
    peer_module = tt.VisionRotaryPositionalEmbeddings(
        patch_size=1, tile_size=g, max_num_tiles=1, dim=hd // 2, append_cls_token=append_cls_token
    )
    x = torch.randn(2, g * g + 1, 3, hd)  # [b, s, h, hd], torchtune's layout
    peer = peer_module(x)
    patches = F.grid_positions(g, g).flip(-1) + 1  # (row, col) -> (col + 1, row + 1)
    cls = torch.zeros(1, 2, dtype=torch.long)
    coords = torch.cat((patches, cls) if append_cls_token else (cls, patches))  # [s, 2]
    scheme = posenc.create("rope_axial", dim=hd)
    q = x.transpose(1, 2)  # [b, s, h, hd] -> [b, h, s, hd]
    ours, _ = scheme.rotate(q, q, coords, coords)
    torch.testing.assert_close(ours.transpose(1, 2), peer, rtol=0, atol=1e-6)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_axial_scores_depend_only_on_per_axis_offsets(layout: str) -> None:
    """Shifting every coordinate by one vector leaves the scores unchanged; moving one axis alone
    changes them (both blocks are used); rotations keep norms."""
    scheme = posenc.create("rope_axial", dim=16, n_axes=3, rotary_dim=12, layout=layout)
    q, k = torch.randn(2, 2, 10, 16, dtype=torch.float64), torch.randn(2, 2, 10, 16, dtype=torch.float64)
    coords = torch.randint(0, 50, (10, 3))
    rq, rk = scheme.rotate(q, k, coords, coords)
    scores = rq @ rk.transpose(-2, -1)
    shifted = scheme.rotate(q, k, coords + torch.tensor([7, -3, 100]), coords + torch.tensor([7, -3, 100]))
    torch.testing.assert_close(shifted[0] @ shifted[1].transpose(-2, -1), scores, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(rq[..., 12:], q[..., 12:], rtol=0, atol=0)  # partial: the rest passes
    for axis in range(3):
        moved = coords.clone()
        moved[:, axis] += torch.arange(10)  # a different offset per query
        mq, _ = scheme.rotate(q, k, moved, coords)
        assert not torch.allclose(mq @ rk.transpose(-2, -1), scores, atol=1e-3)


def test_axial_layouts_agree_up_to_permutation() -> None:
    """``half`` on features permuted (evens then odds) equals ``interleaved`` permuted the same way."""
    inter, half = (posenc.create("rope_axial", dim=16, layout=lay) for lay in ("interleaved", "half"))
    q = torch.randn(1, 2, 6, 16, dtype=torch.float64)
    coords = F.grid_positions(2, 3)
    perm = torch.cat((torch.arange(0, 16, 2), torch.arange(1, 16, 2)))
    torch.testing.assert_close(
        half.rotate(q[..., perm], q[..., perm], coords, coords)[0],
        inter.rotate(q, q, coords, coords)[0][..., perm],
        rtol=1e-12,
        atol=1e-12,
    )


def test_one_axis_equals_rope() -> None:
    """With 1-D positions, ``rope_axial`` turns axis 0's block as plain RoPE over that block's width
    (per-axis frequencies base^(-2i/(r/n))) and leaves axis 1's block unturned (coordinate 0)."""
    axial = posenc.create("rope_axial", dim=16, layout="interleaved")
    rope = posenc.create("rope", dim=8, layout="interleaved")
    q = torch.randn(2, 2, 5, 16, dtype=torch.float64)
    ours, _ = axial.rotate(q, q)
    plain, _ = rope.rotate(q[..., :8], q[..., :8])
    torch.testing.assert_close(ours[..., :8], plain, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ours[..., 8:], q[..., 8:], rtol=0, atol=0)


def test_axial_bad_input() -> None:
    with pytest.raises(ValueError, match="multiple of 2 \\* n_axes = 4, got dim=18"):
        posenc.create("rope_axial", dim=18)
    with pytest.raises(ValueError, match="unknown frequencies 'lang'"):
        posenc.create("rope_axial", dim=16, frequencies="lang")
    with pytest.raises(ValueError, match="3 axes"):
        F.axial_rope_cos_sin(torch.zeros(4, 2), F.axial_rope_inv_freq(12, 3))
    with pytest.raises(TypeError, match="2-D tensor"):
        F.axial_rope_cos_sin(torch.zeros(4, 2), torch.ones(4))


# -- Attention with coordinates -----------------------------------------------------------------
def test_attention_takes_coordinates_and_caches_them() -> None:
    """``Attention`` with rope_axial: coordinates ``[s, 2]`` and ``[b, s, 2]`` agree; decoding the
    patches with a KVCache (coordinates given per step) equals the full causal forward; an ordinary
    scheme refuses coordinates with a message naming them."""
    torch.manual_seed(0)
    attn = posenc.Attention(32, 2, encoding="rope_axial", causal=True).double()
    assert attn.encoding.n_axes == 2
    x = torch.randn(2, 6, 32, dtype=torch.float64)
    coords = F.grid_positions(2, 3)
    full = attn(x, coords)
    torch.testing.assert_close(attn(x, coords.expand(2, 6, 2)), full, rtol=1e-12, atol=1e-12)
    cache = KVCache()
    steps = [attn(x[:, :3], coords[:3], cache=cache)] + [
        attn(x[:, t : t + 1], coords[t : t + 1], cache=cache) for t in range(3, 6)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-10, atol=1e-10)
    assert cache.positions.shape == (6, 2)
    # a batched step after unbatched ones broadcasts the cached coordinates
    cache2 = KVCache()
    attn(x[:, :3], coords[:3], cache=cache2)
    attn(x[:, 3:], coords[3:].expand(2, 3, 2), cache=cache2)
    assert cache2.positions.shape == (2, 6, 2)
    with pytest.raises(ValueError, match="coordinates"):
        posenc.Attention(32, 2, encoding="rope")(x.float(), coords.expand(2, 6, 2))
    with pytest.raises(ValueError, match="s=6"):
        attn(x, torch.zeros(5, 2, dtype=torch.long))


def test_attention_by_name_with_head_width_not_multiple_of_four() -> None:
    """By name, rope_axial rotates the largest multiple of 4 features of a head (here 4 of 6)."""
    attn = posenc.Attention(12, 2, encoding="rope_axial")
    assert attn.encoding.config.rotary_dim == 4
    assert attn(torch.randn(1, 6, 12), F.grid_positions(2, 3)).shape == (1, 6, 12)


def test_n_axes_attribute() -> None:
    """Every scheme says how many coordinates a position has: 1 for the sequence schemes, the
    configured count for the N-D ones (on the instance), 2 by default on their classes; 3 for MRoPE."""
    from posenc.schemes.base import scheme_class

    for name in posenc.available():
        expected = {"sinusoidal_nd": 2, "rope_axial": 2, "mrope": 3}.get(name, 1)  # MRoPE: (t, h, w)
        assert scheme_class(name).n_axes == expected, name
    assert posenc.create("rope_axial", dim=24, n_axes=3).n_axes == 3
    assert posenc.create("sinusoidal_nd", dim=9, n_axes=3).n_axes == 3
    assert posenc.schemes.PositionalEncoding.n_axes == 1
