"""``posenc.functional`` MRoPE: the axis of each pair, the tables, and bad input (issue 25, item 3).

References: transformers 5.24 ``Qwen2VLRotaryEmbedding.recomposition_frequencies`` (contiguous
sections) and ``Qwen3VLTextRotaryEmbedding.recomposition_frequencies`` (interleaved), whose
assignments are pinned here for the published sections; the parity with the modules themselves
is in ``tests/parity/test_mrope_transformers.py``.
"""

from __future__ import annotations

import pytest
import torch

from posenc import functional as F


def test_contiguous_sections_are_blocks_in_t_h_w_order():
    """Qwen2-VL's ``[16, 24, 24]``: pairs 0-15 read t, 16-39 h, 40-63 w."""
    axes = F.mrope_axes([16, 24, 24])
    assert axes.tolist() == [0] * 16 + [1] * 24 + [2] * 24


def test_interleaved_sections_cycle_t_h_w_as_qwen3_vl():
    """Qwen3-VL's ``[24, 20, 20]``: t h w repeated over pairs 0-59, pairs 60-63 read t (24 in all);
    Qwen3.5's ``[11, 11, 10]`` over 32 pairs: h on 1, 4, ..., 31, w on 2, 5, ..., 29."""
    axes = F.mrope_axes([24, 20, 20], interleaved=True)
    assert axes.tolist() == [0, 1, 2] * 20 + [0] * 4
    assert torch.bincount(axes).tolist() == [24, 20, 20]
    small = F.mrope_axes([11, 11, 10], interleaved=True)
    assert small.tolist() == [0, 1, 2] * 10 + [0, 1]
    assert torch.bincount(small).tolist() == [11, 11, 10]


def test_hw_assignment_alternates_h_and_w_then_t_as_ernie():
    """Ernie 4.5 VL's ``mrope_section [22, 22, 20]`` ([h, w, t]): pairs 0-43 alternate h, w; 44-63 read t."""
    axes = F.mrope_axes([20, 22, 22], interleaved="hw")
    assert axes.tolist() == [1, 2] * 22 + [0] * 20


@pytest.mark.parametrize("interleaved", [False, True, "hw"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_text_coordinates_give_plain_rope(interleaved, layout):
    """t = h = w: MRoPE's tables equal RoPE's at that position, whatever the assignment."""
    inv_freq, _ = F.rope_inv_freq(32, base=1e6)
    positions = torch.tensor([[0, 1, 7, 4095, 32767, 4_000_000]])  # [b, s]
    coords = F.mrope_coordinates(positions)  # [b, s, 3]
    assert coords.shape == (1, 6, 3) and torch.equal(coords[..., 1], positions)
    got = F.mrope_cos_sin(coords, inv_freq, [4, 6, 6], interleaved=interleaved, layout=layout, dtype=torch.float64)
    want = F.rope_cos_sin(positions, inv_freq, layout=layout, dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_each_pair_turns_by_its_own_coordinate():
    """Moving only h by d turns exactly the h pairs, by d * inv_freq; t and w pairs stay."""
    inv_freq, _ = F.rope_inv_freq(16)
    sections = [2, 3, 3]
    base_coords = torch.tensor([[5, 9, 2]])
    moved = base_coords + torch.tensor([[0, 3, 0]])
    cos0, sin0 = F.mrope_cos_sin(base_coords, inv_freq, sections, layout="half", dtype=torch.float64)
    cos1, sin1 = F.mrope_cos_sin(moved, inv_freq, sections, layout="half", dtype=torch.float64)
    angle0, angle1 = torch.atan2(sin0, cos0)[0, :8], torch.atan2(sin1, cos1)[0, :8]
    turn = torch.remainder(angle1 - angle0, 2 * torch.pi)
    want = torch.where(F.mrope_axes(sections) == 1, torch.remainder(3 * inv_freq, 2 * torch.pi), 0.0)
    torch.testing.assert_close(turn, want, rtol=0, atol=1e-12)


def test_angles_are_reduced_in_float64_before_the_cast():
    """At coordinate 4e6 float32 angles would be ~0.05 rad off; posenc's float32 table is within 1e-6
    of the float64 one (the precision policy of ``rope_cos_sin``)."""
    inv_freq, _ = F.rope_inv_freq(16)
    coords = torch.tensor([[4_000_000, 3_999_999, 17]])
    c32, s32 = F.mrope_cos_sin(coords, inv_freq, [2, 3, 3])
    c64, s64 = F.mrope_cos_sin(coords, inv_freq, [2, 3, 3], dtype=torch.float64)
    torch.testing.assert_close(c32.double(), c64, rtol=0, atol=1e-6)
    torch.testing.assert_close(s32.double(), s64, rtol=0, atol=1e-6)


def test_attention_scale_multiplies_both_tables():
    inv_freq, _ = F.rope_inv_freq(8)
    coords = torch.tensor([[3, 1, 2]])
    cos, sin = F.mrope_cos_sin(coords, inv_freq, [2, 1, 1], dtype=torch.float64)
    cos2, sin2 = F.mrope_cos_sin(coords, inv_freq, [2, 1, 1], attention_scale=1.25, dtype=torch.float64)
    torch.testing.assert_close(cos2, 1.25 * cos, rtol=1e-15, atol=0)
    torch.testing.assert_close(sin2, 1.25 * sin, rtol=1e-15, atol=0)


def test_bad_input_is_named():
    inv_freq, _ = F.rope_inv_freq(16)
    with pytest.raises(ValueError, match=r"add up to 7 rotary pairs, but the rotated width has 8 pairs"):
        F.mrope_cos_sin(torch.zeros(4, 3), inv_freq, [2, 2, 3])
    with pytest.raises(ValueError, match=r"MRoPE positions must be coordinates \(t, h, w\) \[\*p, 3\].*got \(4, 2\)"):
        F.mrope_cos_sin(torch.zeros(4, 2), inv_freq, [2, 3, 3])
    with pytest.raises(ValueError, match=r"three numbers of rotary pairs .* got \[4, 4\]"):
        F.mrope_axes([4, 4])
    with pytest.raises(ValueError, match=r"non-negative whole numbers of rotary pairs, got \[4, -1, 5\]"):
        F.mrope_axes([4, -1, 5])
    with pytest.raises(ValueError, match=r"interleaved must be False .*, True .* or 'hw' .*, got 'yes'"):
        F.mrope_axes([4, 2, 2], interleaved="yes")
    with pytest.raises(
        ValueError, match=r"sections\[1\] \(h\) and sections\[2\] \(w\) must be equal, got sections \[4, 2, 3\]"
    ):
        F.mrope_axes([4, 2, 3], interleaved="hw")
    with pytest.raises(ValueError, match=r"expected text positions \[s\] or \[b, s\], or MRoPE coordinates"):
        F.mrope_coordinates(torch.zeros(2, 5, 2), length=5)
    with pytest.raises(ValueError, match="unknown layout"):
        F.mrope_cos_sin(torch.zeros(4, 3), inv_freq, [2, 3, 3], layout="neox")
