"""The ``mrope`` scheme: text equals RoPE, scores depend on per-axis offsets only, length-dependent
scalings follow the largest coordinate, bad configs and positions are named (issue 25, item 3).

References: RoPE's relative property (Su et al. 2021, section 3.4) per axis (Qwen2-VL, arXiv
2409.12191, section 2.1); HF ``dynamic_rope_update`` (``seq_len = max(position_ids) + 1`` over the
three rows) for the length of a call.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc.config import rope_from_config
from posenc.schemes.mrope import MRope, MRopeConfig


def _qk(s: int = 12, dim: int = 32, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, s, dim, generator=g, dtype=torch.float64), torch.randn(
        2, 3, s, dim, generator=g, dtype=torch.float64
    )


@pytest.mark.parametrize(
    "scaling",
    [None, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}],
)
@pytest.mark.parametrize("interleaved", [False, True])
def test_text_positions_rotate_as_plain_rope(interleaved, scaling):
    """``[b, s]`` positions mean t = h = w: the rotation equals ``Rope`` with the same frequencies."""
    mrope = posenc.create("mrope", dim=32, sections=[4, 6, 6], interleaved=interleaved, scaling=scaling, base=1e6)
    rope = mrope.text_rope()
    q, k = _qk()
    positions = torch.stack((torch.arange(12), torch.arange(30000, 30012)))  # [b, s]
    got = mrope.rotate(q, k, positions, positions)
    want = rope.rotate(q, k, positions, positions)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-12)
    assert torch.equal(mrope.coordinates(positions), positions[..., None].expand(2, 12, 3))


@pytest.mark.parametrize("interleaved", [False, True])
def test_scores_depend_only_on_per_axis_offsets(interleaved):
    """Shifting every coordinate of queries and keys by one vector (dt, dh, dw) keeps q·k."""
    mrope = posenc.create("mrope", dim=32, sections=[4, 6, 6], interleaved=interleaved)
    q, k = _qk()
    g = torch.Generator().manual_seed(1)
    coords = torch.randint(0, 500, (2, 12, 3), generator=g)
    shift = torch.tensor([7, 1000, 33])
    rq, rk = mrope.rotate(q, k, coords, coords)
    sq, sk = mrope.rotate(q, k, coords + shift, coords + shift)
    torch.testing.assert_close(sq @ sk.transpose(-1, -2), rq @ rk.transpose(-1, -2), rtol=0, atol=1e-10)
    # but moving only the keys' h changes the scores (h pairs exist: sections[1] = 6)
    moved = coords.clone()
    moved[..., 1] += 5
    _, mk = mrope.rotate(q, k, coords, moved)
    assert (mk - rk).abs().max() > 0.1


def test_dynamic_scaling_uses_the_largest_coordinate():
    """HF's ``dynamic_rope_update`` takes ``max(position_ids) + 1`` over t, h and w."""
    scaling = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 256}
    mrope = posenc.create("mrope", dim=16, sections=[2, 3, 3], scaling=scaling)
    coords = torch.tensor([[[3, 4, 5], [6, 700, 8]]])  # largest 700 on h
    cos, _ = mrope.cos_sin(coords, dtype=torch.float64)
    want, _ = mrope.cos_sin(coords, dtype=torch.float64, seq_len=701)
    other, _ = mrope.cos_sin(coords, dtype=torch.float64, seq_len=1)
    torch.testing.assert_close(cos, want, rtol=0, atol=0)
    assert (cos - other).abs().max() > 1e-3
    q, k = _qk(2, 16)
    rq, _ = mrope.rotate(q[:1], k[:1], coords, coords)  # rotate picks the same long frequencies
    cos, sin = mrope.cos_sin(coords, dtype=torch.float64)
    torch.testing.assert_close(rq, posenc.functional.apply_rope(q[:1], cos, sin), rtol=0, atol=1e-12)


def test_attention_takes_coordinates():
    """``posenc.Attention`` with MRoPE and coordinates ``[b, s, 3]``: equal to rotating by hand."""
    torch.manual_seed(0)
    attn = posenc.Attention(32, 2, encoding=posenc.create("mrope", dim=16, sections=[2, 3, 3]), causal=True).double()
    x = torch.randn(1, 6, 32, dtype=torch.float64)
    coords = torch.tensor([[[0, 0, 0], [1, 1, 1], [2, 2, 2], [2, 2, 3], [2, 3, 2], [4, 4, 4]]])
    out = attn(x, coords)
    q, k, v = attn._project(x)
    q, k = attn.encoding.rotate(q, k, coords, coords)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, attn.proj(want.transpose(1, 2).flatten(2)), rtol=0, atol=1e-12)


def test_rope_from_config_gives_mrope_for_qwen2_5_vl_and_qwen3_5():
    """Published fields: Qwen2.5-VL-7B ``rope_scaling {"type": "mrope", "mrope_section": [16, 24, 24]}``,
    head 3584 / 28; Qwen3.5 ``rope_parameters`` with ``mrope_interleaved`` and partial 0.25 of 256."""
    qwen25 = rope_from_config(
        {
            "model_type": "qwen2_5_vl",
            "hidden_size": 3584,
            "num_attention_heads": 28,
            "rope_theta": 1e6,
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        }
    )
    assert isinstance(qwen25, MRope)
    assert (qwen25.config.sections, qwen25.config.interleaved, qwen25.config.rotary_dim) == ((16, 24, 24), False, None)
    qwen35 = rope_from_config(
        {
            "model_type": "qwen3_5_text",
            "hidden_size": 2048,
            "num_attention_heads": 8,
            "head_dim": 256,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1e7,
                "mrope_section": [11, 11, 10],
                "mrope_interleaved": True,
                "partial_rotary_factor": 0.25,
            },
        }
    )
    assert (qwen35.config.sections, qwen35.config.interleaved, qwen35.config.rotary_dim) == ((11, 11, 10), True, 64)


def test_default_sections_follow_qwen2_vl_proportions():
    assert MRopeConfig(dim=128).sections == (16, 24, 24)
    assert MRopeConfig(dim=4).sections == (2, 0, 0)


def test_bad_configs_and_positions_are_named():
    with pytest.raises(ValueError, match=r"add up to 15 rotary pairs, but the rotated width has 16 pairs"):
        posenc.create("mrope", dim=32, sections=[4, 5, 6])
    with pytest.raises(ValueError, match=r"add up to 16 rotary pairs, but the rotated width has 8 pairs"):
        posenc.create("mrope", dim=32, rotary_dim=16, sections=[4, 6, 6])
    with pytest.raises(ValueError, match=r"scaling holds \['mrope_section'\]: give them as sections="):
        posenc.create("mrope", dim=32, scaling={"rope_type": "default", "mrope_section": [4, 6, 6]})
    mrope = posenc.create("mrope", dim=16)
    q, k = _qk(5, 16)
    with pytest.raises(ValueError, match=r"expected text positions \[s\] or \[b, s\], or MRoPE coordinates"):
        mrope.rotate(q, k, torch.zeros(2, 5, 2, dtype=torch.long), torch.zeros(2, 5, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"with s = length = 5; got shape \(4, 3\)"):
        mrope.rotate(q, k, torch.zeros(4, 3, dtype=torch.long), torch.zeros(4, 3, dtype=torch.long))
    base = {"hidden_size": 512, "num_attention_heads": 4, "rope_theta": 1e6}
    with pytest.raises(ValueError, match=r"'mrope_section' must be a list of three numbers .* got 16"):
        rope_from_config({**base, "model_type": "qwen2_vl", "rope_scaling": {"type": "mrope", "mrope_section": 16}})
    with pytest.raises(ValueError, match=r"add up to 60 rotary pairs, but the rotated width has 64 pairs"):
        rope_from_config({**base, "model_type": "qwen2_vl", "rope_scaling": {"mrope_section": [20, 20, 20]}})
    with pytest.raises(ValueError, match=r"'hunyuan_vl': HunYuan-VL reads a variable number of MRoPE axes"):
        rope_from_config({**base, "model_type": "hunyuan_vl", "rope_parameters": {"mrope_section": [16, 16, 16, 16]}})
    with pytest.warns(
        UserWarning, match=r"mrope_interleaved=False, but transformers' 'qwen3_vl' rotary module is interleaved"
    ):
        rope_from_config(
            {
                **base,
                "model_type": "qwen3_vl",
                "rope_parameters": {"mrope_section": [24, 20, 20], "mrope_interleaved": False},
            }
        )


def test_prompt_with_an_image_then_decoding_with_a_cache_equals_the_full_forward():
    """Positions from :func:`mrope_positions` for the prompt, then ``decode_positions`` (cache index
    plus ``rope_deltas``) for generated tokens: token by token through a ``KVCache`` equals one
    forward over all coordinates."""
    from posenc.config import decode_positions, mrope_positions

    torch.manual_seed(0)
    attn = posenc.Attention(32, 2, encoding=posenc.create("mrope", dim=16, sections=[2, 3, 3]), causal=True).double()
    types = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 0]])  # text, an image of 2 x 3 merged patches, text
    prompt, deltas = mrope_positions(types, torch.tensor([[1, 4, 6]]), spatial_merge_size=2)
    assert deltas.tolist() == [[-3]]  # largest position 5 + 1 - 9 tokens
    positions = torch.cat((prompt, decode_positions(deltas, 9, 3)), dim=1)  # [1, 12, 3]
    assert positions[0, 9:, 0].tolist() == [6, 7, 8]
    x = torch.randn(1, 12, 32, dtype=torch.float64)
    full = attn(x, positions)
    cache = posenc.KVCache()
    steps = [attn(x[:, :9], prompt, cache=cache)]
    steps += [attn(x[:, i : i + 1], decode_positions(deltas, i), cache=cache) for i in range(9, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-12)


def test_rotate_one_equals_rotate_and_its_inverse_undoes_it():
    """``rotate_one`` rotates a single tensor at coordinates (or text positions) as ``rotate`` rotates
    queries there; ``inverse=True`` turns it back; ``seq_dim=-3`` takes ``[b, s, h, hd]``."""
    mrope = posenc.create("mrope", dim=16, sections=(2, 3, 3), interleaved=True)
    q = torch.randn(2, 3, 5, 16, dtype=torch.float64)
    coords = torch.randint(0, 50, (2, 5, 3))
    expected, _ = mrope.rotate(q, q, coords, coords)
    torch.testing.assert_close(mrope.rotate_one(q, coords), expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(mrope.rotate_one(expected, coords, inverse=True), q, rtol=0, atol=1e-12)
    lying = mrope.rotate_one(q.transpose(1, 2), coords, seq_dim=-3)  # [b, s, h, hd]
    torch.testing.assert_close(lying.transpose(1, 2), expected, rtol=0, atol=1e-12)
    text = torch.arange(5)
    torch.testing.assert_close(mrope.rotate_one(q, text), mrope.text_rope().rotate_one(q, text), rtol=0, atol=1e-12)
