"""Resampling learned position tables against transformers: ViT's and DINOv2's
``interpolate_pos_encoding`` (bicubic, class token kept apart), SigLIP 2's
``resize_positional_embeddings`` (bilinear with antialiasing) and SAM's ``get_rel_pos`` (1-D linear)."""

from __future__ import annotations

import pytest
import torch

from posenc import functional as F

pytest.importorskip("transformers")


@pytest.mark.parametrize("image_hw", [(48, 40), (32, 32), (16, 72), (8, 8), (40, 40)])
def test_grid_matches_vit_interpolate_pos_encoding(image_hw: tuple[int, int]) -> None:
    """A ViT trained at 32×32 pixels (4×4 patches of 8) run at other sizes, square or not, larger
    or smaller; ``new_hw = (height // 8, width // 8)``: equal to the last bit (same float32 call)."""
    from transformers import ViTConfig
    from transformers.models.vit.modeling_vit import ViTEmbeddings

    torch.manual_seed(0)
    embeddings = ViTEmbeddings(ViTConfig(image_size=32, patch_size=8, hidden_size=16, num_attention_heads=2))
    torch.nn.init.normal_(embeddings.position_embeddings)
    table = embeddings.position_embeddings.detach()  # [1, 1 + 16, 16]
    height, width = image_hw
    new_hw = (height // 8, width // 8)
    with torch.no_grad():
        ref = embeddings.interpolate_pos_encoding(torch.zeros(1, 1 + new_hw[0] * new_hw[1], 16), height, width)
    ours = F.interpolate_grid(table, None, new_hw)
    assert ours.shape == (1, 1 + new_hw[0] * new_hw[1], 16)
    assert torch.equal(ours, ref)
    assert torch.equal(ours[:, 0], table[:, 0])  # the class token is copied
    assert torch.equal(F.interpolate_grid(table[0], (4, 4), new_hw), ours[0])  # a learned scheme's [n, d] weight


def test_same_grid_is_identity_and_constant_stays_constant() -> None:
    """``align_corners=False`` bicubic at the same size samples the grid points themselves (ViT returns
    its table there without interpolating); a constant table stays constant at any size."""
    table = torch.randn(1 + 6 * 5, 8, dtype=torch.float64)
    assert torch.equal(F.interpolate_grid(table, (6, 5), (6, 5)), table)
    assert torch.equal(F.interpolate_positions(table, 30, keep=1, mode="cubic"), table)
    const = torch.full((3 * 7, 4), 0.25)
    torch.testing.assert_close(F.interpolate_grid(const, (3, 7), (11, 2), keep=0), torch.full((22, 4), 0.25))


def test_bfloat16_table_is_resampled_in_float32_as_dinov2() -> None:
    """DINOv2's ``interpolate_pos_encoding`` resamples a half-precision table in float32 and casts back."""
    from transformers.models.dinov2 import Dinov2Config
    from transformers.models.dinov2.modeling_dinov2 import Dinov2Embeddings

    torch.manual_seed(1)
    embeddings = Dinov2Embeddings(Dinov2Config(image_size=32, patch_size=8, hidden_size=16, num_attention_heads=2))
    embeddings = embeddings.to(torch.bfloat16)
    torch.nn.init.normal_(embeddings.position_embeddings)
    with torch.no_grad():
        ref = embeddings.interpolate_pos_encoding(torch.zeros(1, 1 + 30, 16, dtype=torch.bfloat16), 48, 40)
    ours = F.interpolate_grid(embeddings.position_embeddings.detach(), (4, 4), (6, 5))
    assert ours.dtype == torch.bfloat16 and torch.equal(ours, ref)


def test_bilinear_antialias_matches_siglip2() -> None:
    """SigLIP 2 resizes its 8×8 table (no class token) to each image's patch grid with bilinear,
    antialiased weights (written out as a matrix product there: agreement to float32 rounding)."""
    from transformers.models.siglip2.modeling_siglip2 import Siglip2VisionEmbeddings

    torch.manual_seed(2)
    grid = torch.randn(8, 8, 16)
    shapes = torch.tensor([[5, 11], [8, 8], [12, 3], [2, 2]])
    ref = Siglip2VisionEmbeddings.resize_positional_embeddings(grid, shapes, 64)  # [b, 64, 16], padded
    for i, (h, w) in enumerate(shapes.tolist()):
        ours = F.interpolate_grid(grid.reshape(64, 16), (8, 8), (h, w), keep=0, mode="bilinear", antialias=True)
        torch.testing.assert_close(ours, ref[i, : h * w], rtol=0, atol=1e-6)


def test_linear_length_matches_sam_get_rel_pos() -> None:
    """SAM resizes its relative-position table of 9 rows to ``2 · max(q, k) - 1`` rows, linearly:
    the same 1-D op, so bit-equal on every torch version (torch 2.15 moved 1-D linear interpolation
    on the CPU by ~1e-6 against the 2-D bilinear one)."""
    from transformers import SamVisionConfig
    from transformers.models.sam.modeling_sam import SamVisionAttention

    torch.manual_seed(3)
    config = SamVisionConfig(hidden_size=32, num_attention_heads=2, use_rel_pos=True, image_size=64, patch_size=8)
    attention = SamVisionAttention(config, window_size=4)
    table = torch.randn(9, 16)
    for size in (7, 3, 5):
        ref = attention.get_rel_pos(size, size, table)  # [q, k, 16]
        resized = F.interpolate_positions(table, 2 * size - 1)
        index = torch.arange(size)[:, None] - torch.arange(size)[None, :] + size - 1  # q - k, shifted to >= 0
        torch.testing.assert_close(resized[index], ref, rtol=0, atol=0)


def keys(x: float, a: float = -0.75) -> float:
    """Keys' cubic convolution kernel (Keys 1981, eq. 15), with PyTorch's and OpenCV's ``a = -0.75``."""
    x = abs(x)
    if x <= 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return 0.0


def test_cubic_length_is_the_bicubic_kernel_along_one_axis() -> None:
    """A separable grid table ``a[r] · b[c]`` resampled in 2-D (ViT's call, checked above) is the
    product of its axes resampled in 1-D with ``mode="cubic"``. Pinned against the formula: sample
    ``j`` of ``L'`` sits at ``x = (j + 0.5) · L / L' - 0.5`` and is ``Σ_m keys(x - i) · row[clamp(i)]``
    over the 4 rows ``i`` around ``x``; the kept row is copied."""
    a, b = torch.randn(5, 1, dtype=torch.float64), torch.randn(7, 1, dtype=torch.float64)
    grid = (a[:, None] * b[None, :]).reshape(35, 1)  # [5·7, 1]
    two_d = F.interpolate_grid(grid, (5, 7), (9, 4), keep=0).reshape(9, 4)
    one_d = F.interpolate_positions(a, 9, mode="cubic") * F.interpolate_positions(b, 4, mode="cubic").T  # [9, 4]
    torch.testing.assert_close(two_d, one_d, rtol=0, atol=1e-12)
    rows = [0.0, 1.0, 4.0, 2.0, -3.0]
    table = torch.tensor([[9.0]] + [[r] for r in rows], dtype=torch.float64)  # a class row, then 5 positions
    for new_length in (8, 3, 12):
        out = F.interpolate_positions(table, new_length, keep=1, mode="cubic")
        assert out[0, 0] == 9.0
        for j in range(new_length):
            x = (j + 0.5) * len(rows) / new_length - 0.5
            i0 = int(torch.tensor(x).floor())
            want = sum(keys(x - i) * rows[min(max(i, 0), len(rows) - 1)] for i in range(i0 - 1, i0 + 3))
            assert abs(float(out[1 + j, 0]) - want) < 1e-12, (new_length, j)
    ramp = torch.tensor([[0.0], [1.0], [2.0], [3.0]], dtype=torch.float64)
    torch.testing.assert_close(  # linear: x clamped at 0 below, the last row repeated above
        F.interpolate_positions(ramp, 8)[:, 0],
        torch.tensor([0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3], dtype=torch.float64),
    )


def test_bad_input() -> None:
    table = torch.randn(1 + 16, 8)
    with pytest.raises(ValueError, match=r"old_hw=\(3, 5\) holds 15 patches, but the table has 16 rows after keep=1"):
        F.interpolate_grid(table, (3, 5), (4, 4))
    with pytest.raises(ValueError, match="the 15 rows after keep=1 as a square grid, but 15 is not a square"):
        F.interpolate_grid(table[:16], None, (4, 4))
    with pytest.raises(ValueError, match="new_hw must be a \\(height, width\\) pair"):
        F.interpolate_grid(table, (4, 4), 5)
    with pytest.raises(ValueError, match=r"new_hw\[1\] must be a positive integer"):
        F.interpolate_grid(table, (4, 4), (4, 0))
    with pytest.raises(ValueError, match="table must be a tensor"):
        F.interpolate_positions(torch.randn(8), 4)
    with pytest.raises(TypeError, match="floating-point"):
        F.interpolate_positions(torch.arange(8).reshape(4, 2), 4)
    with pytest.raises(ValueError, match="keep=4 leaves no rows"):
        F.interpolate_positions(torch.randn(4, 2), 6, keep=4)
    with pytest.raises(ValueError, match="unknown mode 'nearest'"):
        F.interpolate_positions(torch.randn(4, 2), 6, mode="nearest")
    with pytest.raises(ValueError, match="unknown mode 'bicubic'"):
        F.interpolate_positions(torch.randn(4, 2), 6, mode="bicubic")
    with pytest.raises(TypeError, match="antialias must be True or False"):
        F.interpolate_grid(table, (4, 4), (5, 5), antialias="yes")


def test_learned_table_resized_to_a_new_length():
    """``Learned.resized``: a new module of ``max_len`` rows holding the linearly resampled table
    (``align_corners=False``: row i' samples old row (i' + 0.5)·L/L' − 0.5); the original is untouched."""
    import posenc

    pe = posenc.create("learned", dim=4, max_len=8)
    with torch.no_grad():
        pe.table.weight.copy_(torch.arange(8.0)[:, None].expand(8, 4))  # row p holds p
    longer = pe.resized(16)
    assert longer.config.max_len == 16 and pe.config.max_len == 8
    expected = ((torch.arange(16.0) + 0.5) * 8 / 16 - 0.5).clamp(0, 7)  # [16]
    torch.testing.assert_close(longer.encode(torch.arange(16))[:, 0], expected)
    with pytest.raises(ValueError, match="max_len must be a positive integer"):
        pe.resized(0)
