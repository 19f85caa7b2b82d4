"""The data behind the atlas's rotary figures (``posenc.analysis.rotary``), pinned to closed forms:
RoFormer's same-content logit ``mean_i cos(t θ_i)`` (Su et al. 2021, §3.4.3), xPos's per-pair
``ζ_i^(t/B)`` on it (Sun et al. 2022, §3.1), and each scaling's frequencies as
``posenc.functional.rope_scaling`` defines them (HF ``modeling_rope_utils``)."""

from __future__ import annotations

import math

import pytest
import torch

from posenc.analysis import build_scheme
from posenc.analysis.rotary import (
    rotation_in_a_plane,
    same_content_logits,
    scaling_gallery,
    scaling_logits,
    scaling_wavelengths,
)
from posenc.viz import plot
from posenc.viz.kinds import PlotOptions


def test_same_content_logit_of_rope_is_the_mean_cosine():
    rope = build_scheme("rope", dim=64, base=10000.0)
    distances = torch.arange(0, 3000, 7)
    got = same_content_logits(rope, torch.tensor([5000]), 5000 - distances)
    expected = torch.cos(distances[:, None].double() * rope.inv_freq).mean(-1)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_same_content_logit_of_xpos_carries_zeta_to_the_distance_over_b():
    xpos = build_scheme("xpos", dim=64)
    distances = torch.arange(0, 2048, 31)
    got = same_content_logits(xpos, torch.tensor([2047]), 2047 - distances)
    d, gamma, b = 64, xpos.config.gamma, xpos.config.scale_base
    zeta = (torch.arange(0, d, 2, dtype=torch.float64) + gamma * d) / ((1 + gamma) * d)  # [d/2]
    t = distances[:, None].double()
    expected = (zeta ** (t / b) * torch.cos(t * xpos.inv_freq)).mean(-1)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-9)  # xPos rotates with float32 tables
    assert got[-1] < 0.1 < got[0] == pytest.approx(1.0, abs=1e-6)


def test_same_content_logit_of_axial_rope_splits_the_pairs_between_axes():
    axial = build_scheme("rope_axial", dim=64)
    query = torch.tensor([[3, 3]])
    keys = torch.tensor([[3, 3], [3, 10], [10, 3]])
    got = same_content_logits(axial, query, keys)
    assert got[0] == pytest.approx(1.0, abs=1e-6)
    # moving along either axis turns half the pairs: the two offsets of 7 give the same logit
    assert got[1] == pytest.approx(float(got[2]), abs=1e-6) and got[1] < 0.95


def test_scaling_wavelengths_follow_each_rule():
    data = scaling_wavelengths(dim=128, base=10000.0, original=4096, factor=4.0)
    w = data["wavelengths"]
    default = 2 * math.pi / 10000.0 ** (-torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    torch.testing.assert_close(w["default"], default, rtol=1e-12, atol=0)
    torch.testing.assert_close(w["linear"], 4 * default, rtol=1e-12, atol=0)  # every pair stretched
    assert w["ntk"][0] == pytest.approx(float(default[0])) and w["ntk"][-1] == pytest.approx(4 * float(default[-1]))
    for rule in ("yarn", "llama3"):  # fast pairs kept, slowest stretched by the factor
        assert w[rule][0] == pytest.approx(float(default[0]))
        assert w[rule][-1] == pytest.approx(4 * float(default[-1]))
    assert torch.isinf(w["proportional"][16:]).all() and torch.isfinite(w["proportional"][:16]).all()
    assert data["attention_scale"]["yarn"] == pytest.approx(0.1 * math.log(4) + 1)
    assert data["attention_scale"]["longrope"] == pytest.approx(math.sqrt(1 + math.log(4) / math.log(4096)))
    # dynamic at the extended length: base · (f · L'/L − (f − 1))^(d/(d−2)) with L'/L = 4 (HF dynamic_rope_update)
    dynamic_base = 10000.0 * (4 * 4 - 3) ** (128 / 126)
    assert w["dynamic"][-1] == pytest.approx(2 * math.pi / dynamic_base ** (-126 / 128), rel=1e-9)
    assert set(w) == set(scaling_gallery())


def test_scaling_logits_are_bin_means_of_the_closed_form():
    data = scaling_logits(dim=64, base=10000.0, original=256, factor=4.0, bins=40)
    inv_freq = 10000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    every = torch.arange(1, 1024, dtype=torch.float64)
    values = torch.cos(every[:, None] * inv_freq).mean(-1)
    edges = torch.logspace(0, math.log10(1024), 41, dtype=torch.float64)
    last = (every >= edges[-2]) & (every < edges[-1])  # the last bin's distances
    assert data["logits"]["default"][-1] == pytest.approx(float(values[last].mean()), abs=1e-12)
    assert data["logits"]["default"][0] == pytest.approx(float(values[0]), abs=1e-12)  # t = 1 alone
    yarn = build_scheme("rope", dim=64, scaling=scaling_gallery(64, 256, 4.0)["yarn"])
    a = data["attention_scale"]["yarn"]  # on cos and sin of q and of k: a² on the score
    assert data["logits"]["yarn"][0] == pytest.approx(a * a * float(torch.cos(yarn.inv_freq).mean()), abs=1e-12)
    assert (data["distances"].diff() > 0).all()


def test_rotation_scores_depend_on_the_offset_alone():
    data = rotation_in_a_plane(dim=64, positions=20)
    scores = data["scores"]
    for offset in range(-19, 20):
        diagonal = scores.diagonal(offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal), rtol=0, atol=1e-12)
    radii = data["q_plane"].norm(dim=-1)
    torch.testing.assert_close(radii, radii[:1].expand_as(radii), rtol=0, atol=1e-12)  # a rotation keeps length
    angles = torch.atan2(data["q_plane"][:, 1], data["q_plane"][:, 0]).diff()
    torch.testing.assert_close(torch.remainder(angles, 2 * math.pi), torch.full_like(angles, data["angle"]))


@pytest.mark.parametrize(
    ("scheme", "kind"),
    [("rope", "rotation"), ("rope", "wavelengths"), ("rope", "scalings"), ("xpos", "decay"), ("rope_axial", "grid")],
)
def test_the_rotary_figures_draw(scheme, kind):
    figure = plot(scheme, kind, PlotOptions(positions=16 if kind in ("grid", "rotation") else 512))
    assert figure.axes and figure.get_suptitle()


def test_the_scaling_figures_refuse_a_scaling():
    with pytest.raises(ValueError, match="draws every RoPE scaling side by side; leave --scaling out"):
        plot("rope", "wavelengths", PlotOptions(scaling={"rope_type": "linear", "factor": 2.0}))
