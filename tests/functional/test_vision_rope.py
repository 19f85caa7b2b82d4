"""Vision towers' 2-D RoPE against transformers' own modules: Pixtral (``PixtralVisionRotaryEmbedding``),
Gemma 4 (``Gemma4VisionRotaryEmbedding``, ``apply_multidimensional_rope``), Llama 4
(``Llama4VisionRotaryEmbedding``, ``vision_apply_rotary_emb``) and DINOv3
(``DINOv3ViTRopePositionEmbedding``, with its train-time augmentation), built from tiny configs.

posenc forms angles in float64, transformers in float32: tables agree to
``2e-6 + 1.5e-7 · (largest angle)``, rotated vectors to that times their largest entry.
"""

from __future__ import annotations

import math

import pytest
import torch

from posenc import functional as F

pytest.importorskip("transformers")


def tol(max_angle: float) -> float:
    """Float32 angle products are off by ~6e-8 of the angle; cos/sin then by as much, plus rounding."""
    return 2e-6 + 1.5e-7 * max_angle


def close(a: torch.Tensor, b: torch.Tensor, atol: float) -> None:
    assert a.shape == b.shape, (a.shape, b.shape)
    err = float((a.double() - b.double()).abs().max())
    assert err <= atol, f"max error {err:.3g} > {atol:.3g}"


# -- Pixtral --------------------------------------------------------------------------------------
def test_pixtral_tables_and_rotation_match_transformers() -> None:
    """Packed images of 5×7, 3×2 and 64×48 patches, head width 32, base 10000 (Pixtral-12B's)."""
    from transformers.models.pixtral import modeling_pixtral as hf
    from transformers.models.pixtral.configuration_pixtral import PixtralVisionConfig

    config = PixtralVisionConfig(hidden_size=128, num_attention_heads=4)  # head_dim 32
    rotary = hf.PixtralVisionRotaryEmbedding(config)
    ids = F.patch_grid_coordinates((5, 7), (3, 2), (64, 48))  # PixtralVisionModel's position_ids
    assert ids.shape == (35 + 6 + 64 * 48, 2) and torch.equal(
        ids[35:41], torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1]])
    )
    x = torch.randn(1, ids.shape[0], 32)
    cos_hf, sin_hf = rotary(x, ids)
    cos, sin = F.vision_rope_cos_sin(ids, 32, "pixtral")
    inv_freq = F.vision_rope_inv_freq(32, "pixtral")
    # the even frequencies go to the row, the odd ones to the column
    full = 10000.0 ** -(torch.arange(0, 32, 2, dtype=torch.float64) / 32)
    assert torch.equal(inv_freq, torch.stack((full[0::2], full[1::2])))
    torch.testing.assert_close(inv_freq.flatten().float(), rotary.inv_freq, rtol=1e-6, atol=0)
    limit = tol(63.0)
    close(cos, cos_hf, limit)
    close(sin, sin_hf, limit)
    q, k = torch.randn(2, 1, 4, ids.shape[0], 32).unbind(0)  # [b, h, s, hd]
    q_hf, k_hf = hf.apply_rotary_pos_emb(q, k, cos_hf, sin_hf, unsqueeze_dim=0)  # as PixtralAttention calls it
    close(F.apply_vision_rope(q, cos, sin, "pixtral"), q_hf, limit * 8)
    close(F.apply_vision_rope(k, cos, sin, "pixtral"), k_hf, limit * 8)


# -- Gemma 4 --------------------------------------------------------------------------------------
def test_gemma4_tables_and_rotation_match_transformers() -> None:
    """Batched ``pixel_position_ids [b, s, 2]`` (two 9×12 images, one with its rows swapped in),
    head width 64 (Gemma 4's), base 100; queries ``[b, s, h, hd]`` rotated per axis block."""
    from transformers.models.gemma4 import modeling_gemma4 as hf
    from transformers.models.gemma4.configuration_gemma4 import Gemma4VisionConfig

    config = Gemma4VisionConfig(hidden_size=128, num_attention_heads=2, num_key_value_heads=2, head_dim=64)
    rotary = hf.Gemma4VisionRotaryEmbedding(config)
    grid = F.patch_grid_coordinates((9, 12))
    ids = torch.stack((grid, grid.flip(0)))  # [b, s, 2]
    x = torch.randn(2, ids.shape[1], 64)
    cos_hf, sin_hf = rotary(x, ids)
    cos, sin = F.vision_rope_cos_sin(ids, 64, "gemma4")
    torch.testing.assert_close(F.vision_rope_inv_freq(64, "gemma4")[0].float(), rotary.inv_freq, rtol=1e-6, atol=0)
    assert torch.equal(F.vision_rope_inv_freq(64, "gemma4")[0], F.vision_rope_inv_freq(64, "gemma4")[1])
    limit = tol(11.0)
    close(cos, cos_hf, limit)
    close(sin, sin_hf, limit)
    q = torch.randn(2, ids.shape[1], 2, 64)  # [b, s, h, hd], as Gemma4VisionAttention rotates it
    q_hf = hf.apply_multidimensional_rope(q, cos_hf, sin_hf, ids)
    close(F.apply_vision_rope(q, cos, sin, "gemma4", seq_dim=-3), q_hf, limit * 8)
    ours_bhsd = F.apply_vision_rope(q.transpose(1, 2), cos, sin, "gemma4")  # [b, h, s, hd] with [b, s, r] tables
    close(ours_bhsd.transpose(1, 2), q_hf, limit * 8)


def test_gemma4_layout_is_one_half_split_block_per_axis() -> None:
    """Features ``[0, d/2)`` turn by the row only, ``[d/2, d)`` by the column only, each block's
    pairs ``(i, i + d/4)``: moving a patch along its column leaves the first block as it is."""
    x = torch.randn(16)
    moved = F.vision_rope_cos_sin(torch.tensor([[3, 0], [3, 5]]), 16, "gemma4")
    out = F.apply_vision_rope(x.expand(2, 16), *moved, "gemma4")
    assert torch.equal(out[0, :8], out[1, :8]) and not torch.allclose(out[0, 8:], out[1, 8:])
    single = F.apply_rope(x[None, 8:], *F.rope_cos_sin(torch.tensor([5]), F.vision_rope_inv_freq(16, "gemma4")[1]))
    torch.testing.assert_close(out[1, 8:], single[0], rtol=0, atol=1e-6)


# -- Llama 4 --------------------------------------------------------------------------------------
def test_llama4_tables_and_rotation_match_transformers() -> None:
    """A 14×14 grid (image 112, patch 8) and the class token after it; head width 32, base 10000."""
    from transformers.models.llama4 import modeling_llama4 as hf
    from transformers.models.llama4.configuration_llama4 import Llama4VisionConfig

    config = Llama4VisionConfig(hidden_size=128, num_attention_heads=4, image_size=112, patch_size=8)
    freqs_ci = hf.Llama4VisionRotaryEmbedding(config).freqs_ci  # [197, 1, 16] complex
    coords = F.llama4_vision_coordinates(14)
    assert coords.shape == (197, 2) and coords[-1].tolist() == [-1, -1] and coords[15].tolist() == [1, 1]
    cos, sin = F.vision_rope_cos_sin(coords, 32, "llama4")
    limit = tol(15.0)
    close(cos[:, 0::2], freqs_ci.real[:, 0], limit)  # one value per interleaved pair
    close(sin[:, 0::2], freqs_ci.imag[:, 0], limit)
    assert torch.equal(cos[-1], torch.ones(32)) and torch.equal(sin[-1], torch.zeros(32))  # the class token
    q, k = torch.randn(2, 3, 197, 4, 32).unbind(0)  # [b, s, h, hd], as Llama4VisionAttention rotates them
    q_hf, k_hf = hf.vision_apply_rotary_emb(q, k, freqs_ci)
    close(F.apply_vision_rope(q, cos, sin, "llama4", seq_dim=-3), q_hf, limit * 8)
    close(F.apply_vision_rope(k, cos, sin, "llama4", seq_dim=-3), k_hf, limit * 8)
    # the class token as an unrotated row after the patch grid gives the same tables
    padded = F.pad_unrotated(*F.vision_rope_cos_sin(coords[:-1], 32, "llama4"), after=1)
    assert torch.equal(padded[0], cos) and torch.equal(padded[1], sin)


# -- DINOv3 ---------------------------------------------------------------------------------------
def _dinov3(**augment):
    from transformers.models.dinov3_vit import modeling_dinov3_vit as hf
    from transformers.models.dinov3_vit.configuration_dinov3_vit import DINOv3ViTConfig

    config = DINOv3ViTConfig(
        hidden_size=128, num_attention_heads=4, image_size=32, patch_size=8, num_register_tokens=4, **augment
    )
    return hf, hf.DINOv3ViTRopePositionEmbedding(config)


def test_patch_centre_coordinates() -> None:
    """``(2i + 1) / n - 1`` per axis, as transformers' ``get_patches_center_coordinates``."""
    from transformers.models.dinov3_vit.modeling_dinov3_vit import get_patches_center_coordinates

    coords = F.patch_centre_coordinates(3, 4)
    assert coords[:4, 1].tolist() == [-0.75, -0.25, 0.25, 0.75]
    assert torch.allclose(coords[::4, 0], torch.tensor([-2 / 3, 0.0, 2 / 3], dtype=torch.float64))
    ref = get_patches_center_coordinates(5, 11, torch.float32, torch.device("cpu"))
    close(F.patch_centre_coordinates(5, 11), ref, 1e-7)


def test_dinov3_eval_matches_transformers_with_prefix_tokens() -> None:
    """Eval mode at a 5×7 patch image (not the config's 4×4): tables, and queries with the class
    and 4 register tokens left unrotated (``pad_unrotated(before=5)``)."""
    hf, rotary = _dinov3()
    rotary.eval()
    cos_hf, sin_hf = rotary(torch.zeros(1, 3, 40, 56))
    cos, sin = F.vision_rope_cos_sin(F.patch_centre_coordinates(5, 7), 32, "dinov3")
    torch.testing.assert_close(F.vision_rope_inv_freq(32, "dinov3")[0].float(), 2 * math.pi * rotary.inv_freq)
    limit = tol(2 * math.pi)
    close(cos, cos_hf, limit)
    close(sin, sin_hf, limit)
    q, k = torch.randn(2, 2, 4, 5 + 35, 32).unbind(0)  # [b, h, 1 + registers + patches, hd]
    q_hf, k_hf = hf.apply_rotary_pos_emb(q, k, cos_hf, sin_hf)
    cos_all, sin_all = F.pad_unrotated(cos, sin, before=5)
    close(F.apply_vision_rope(q, cos_all, sin_all, "dinov3"), q_hf, limit * 8)
    close(F.apply_vision_rope(k, cos_all, sin_all, "dinov3"), k_hf, limit * 8)
    assert torch.equal(F.apply_vision_rope(q, cos_all, sin_all, "dinov3")[..., :5, :], q[..., :5, :])


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_dinov3_training_augmentation_matches_transformers(seed: int) -> None:
    """Train mode with shift 0.1, jitter 1.5, rescale 2: transformers draws from the global
    generator; ``augment_patch_coordinates`` given a generator seeded alike draws the same."""
    hf, rotary = _dinov3(pos_embed_shift=0.1, pos_embed_jitter=1.5, pos_embed_rescale=2.0)
    rotary.train()
    torch.manual_seed(seed)
    cos_hf, sin_hf = rotary(torch.zeros(1, 3, 32, 48))
    coords = F.augment_patch_coordinates(
        F.patch_centre_coordinates(4, 6),
        shift=0.1,
        jitter=1.5,
        rescale=2.0,
        generator=torch.Generator().manual_seed(seed),
    )
    cos, sin = F.vision_rope_cos_sin(coords, 32, "dinov3")
    limit = tol(2 * math.pi * 1.1 * 1.5 * 2)
    close(cos, cos_hf, limit)
    close(sin, sin_hf, limit)
    # the same draws through transformers' own augmentation function
    base = hf.get_patches_center_coordinates(4, 6, torch.float32, torch.device("cpu"))
    torch.manual_seed(seed)
    ref = hf.augment_patches_center_coordinates(base, shift=0.1, jitter=1.5, rescale=2.0)
    close(coords, ref, 1e-6)


def test_augmentation_ranges_and_determinism() -> None:
    """Over 400 draws: the shift lies in [-s, s] per axis, the jitter ratio in [1/j, j] per axis and
    the rescale factor in [1/r, r], the same for both axes; the log-factors are uniform (mean ~0,
    variance ~log(r)²/3); equal seeds give equal coordinates, no augmentation the input."""
    coords = F.patch_centre_coordinates(2, 4)  # no coordinate at 0: the factors are read as ratios
    assert torch.equal(F.augment_patch_coordinates(coords), coords)
    shifts, jitters, rescales = [], [], []
    for seed in range(400):
        g = lambda: torch.Generator().manual_seed(seed)  # noqa: E731
        shifts.append(F.augment_patch_coordinates(coords, shift=0.3, generator=g()) - coords)
        jitters.append(F.augment_patch_coordinates(coords, jitter=3.0, generator=g()) / coords)
        rescales.append(F.augment_patch_coordinates(coords, rescale=2.0, generator=g()) / coords)
    shift, jitter, rescale = (torch.stack(t) for t in (shifts, jitters, rescales))  # [400, 8, 2]
    assert torch.allclose(shift, shift[:, :1]) and shift.abs().max() <= 0.3 and shift.abs().max() > 0.29
    assert torch.allclose(jitter, jitter[:, :1]) and not torch.allclose(jitter[..., 0], jitter[..., 1])
    assert jitter.min() >= 1 / 3 - 1e-6 and jitter.max() <= 3 + 1e-6
    assert (
        torch.allclose(rescale[..., 0], rescale[..., 1]) and rescale.min() >= 0.5 - 1e-6 and rescale.max() <= 2 + 1e-6
    )
    log_r = rescale[:, 0, 0].log()
    assert abs(float(log_r.mean())) < 0.06 and abs(float(log_r.var()) - math.log(2) ** 2 / 3) < 0.03
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(
        F.augment_patch_coordinates(coords, shift=0.1, jitter=1.2, rescale=1.5, generator=g1),
        F.augment_patch_coordinates(coords, shift=0.1, jitter=1.2, rescale=1.5, generator=g2),
    )


# -- properties -----------------------------------------------------------------------------------
@pytest.mark.parametrize("family", F.VISION_ROPES)
def test_scores_depend_only_on_patch_offsets(family: str) -> None:
    """Every family's q·k depends only on (Δrow, Δcolumn): shifting both patches changes nothing."""
    q, k = torch.randn(2, 32, dtype=torch.float64)
    a, b = torch.tensor([[2.0, 5.0], [7.0, 1.0]]), torch.tensor([[-4.0, 3.5], [10.0, 2.0]])

    def score(coords: torch.Tensor) -> torch.Tensor:
        cos, sin = F.vision_rope_cos_sin(coords, 32, family, dtype=torch.float64)
        rq = F.apply_vision_rope(q.expand(2, 32), cos, sin, family)
        rk = F.apply_vision_rope(k.expand(2, 32), cos, sin, family)
        return rq[0] @ rk[1]

    torch.testing.assert_close(score(a), score(a + b[0]), rtol=0, atol=1e-12)
    torch.testing.assert_close(score(a), score(a + b[1]), rtol=0, atol=1e-12)
    assert not torch.isclose(score(a), score(torch.tensor([[2.0, 5.0], [7.0, 2.0]])))


# -- bad input ------------------------------------------------------------------------------------
def test_bad_input() -> None:
    with pytest.raises(ValueError, match=r"\[\*p, 2\].*got shape \(4, 3\)"):
        F.vision_rope_cos_sin(torch.zeros(4, 3), 16, "pixtral")
    with pytest.raises(TypeError, match="tensor"):
        F.vision_rope_cos_sin([[0, 1]], 16, "pixtral")
    with pytest.raises(ValueError, match="multiple of 4, got dim=18"):
        F.vision_rope_cos_sin(torch.zeros(4, 2), 18, "gemma4")
    with pytest.raises(ValueError, match="unknown vision RoPE family 'qwen'.*'pixtral'"):
        F.vision_rope_inv_freq(16, "qwen")
    with pytest.raises(ValueError, match="base"):
        F.vision_rope_inv_freq(16, "pixtral", base=1.0)
    with pytest.raises(ValueError, match="jitter must be a number >= 1"):
        F.augment_patch_coordinates(torch.zeros(3, 2), jitter=0.5)
    with pytest.raises(ValueError, match="shift"):
        F.augment_patch_coordinates(torch.zeros(3, 2), shift=-0.1)
    with pytest.raises(ValueError, match="before must be a non-negative int"):
        F.pad_unrotated(torch.ones(3, 8), torch.zeros(3, 8), before=-1)
    with pytest.raises(ValueError, match="rotate 16 features but x has only 8"):
        F.apply_vision_rope(torch.zeros(3, 8), *F.vision_rope_cos_sin(torch.zeros(3, 2), 16, "gemma4"), "gemma4")
    with pytest.raises(ValueError, match=r"\(height, width\)"):
        F.patch_grid_coordinates((3, 4), (5,))
    with pytest.raises(ValueError, match="height"):
        F.patch_centre_coordinates(0, 4)
