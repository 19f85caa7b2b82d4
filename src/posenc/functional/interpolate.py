"""Resampling a learned absolute position table to a new length or a new grid of patches.

Shape legend: ``*b`` leading dims of the table (none for a ``learned`` scheme's ``[n, d]`` weight,
``[1]`` for a ViT's ``position_embeddings [1, n, d]``), ``n`` its rows, ``d`` its width, ``k`` the
rows kept apart (a class token: ``keep=1``), ``L`` / ``(H, W)`` the old length or grid,
``L'`` / ``(H', W')`` the new one.

A learned table holds one row per position, or per patch of an ``H × W`` grid stored row-major
after ``k`` leading rows that are no position (the class token). A model run on longer sequences
or larger images needs rows it never learned; the common remedy resamples the table, treating each
feature as a 1-D signal or an image (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words",
section 3.2, "Fine-tuning and higher resolution": "2D interpolation of the pre-trained position
embeddings"). The rows kept apart are copied unchanged.

Resampling is ``torch.nn.functional.interpolate`` with ``align_corners=False`` (sample ``j`` of the
new length sits at ``(j + 0.5) · L / L' - 0.5`` of the old one), run in float32 (float64 tables in
float64) and cast back, DINOv2's choice; for float32 tables that is ViT's own computation.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ._checks import check_bool, check_choice, check_positive_int

__all__ = ["interpolate_positions", "interpolate_grid", "INTERPOLATION_MODES", "GRID_INTERPOLATION_MODES"]

#: 1-D resampling: ``"linear"`` (SAM's ``get_rel_pos``), ``"cubic"`` (the bicubic kernel along one axis).
INTERPOLATION_MODES = ("linear", "cubic")
#: 2-D resampling: ``"bicubic"`` (ViT, DeiT, DINOv2, CLIP, SigLIP), ``"bilinear"`` (with ``antialias``: SigLIP 2).
GRID_INTERPOLATION_MODES = ("bicubic", "bilinear")


def _split_table(table: Tensor, keep: int) -> tuple[Tensor, Tensor]:
    """``table [*b, n, d]`` checked; its kept rows ``[*b, k, d]`` and the rest ``[*b, n - k, d]``."""
    if not isinstance(table, Tensor) or table.dim() < 2:
        raise ValueError(
            "table must be a tensor [n, d] or [*b, n, d] (rows of positions, each d wide), got "
            + (f"shape {tuple(table.shape)}" if isinstance(table, Tensor) else type(table).__name__)
        )
    if not table.is_floating_point():
        raise TypeError(f"table must hold floating-point values to be interpolated, got dtype {table.dtype}")
    if not table.numel():
        raise ValueError(f"table must hold values to interpolate (no axis of size 0), got shape {tuple(table.shape)}")
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise ValueError(f"keep must be a non-negative int (leading rows copied unchanged), got {keep!r}")
    if keep >= table.shape[-2]:
        raise ValueError(f"keep={keep} leaves no rows to interpolate in a table of {table.shape[-2]} rows")
    return table[..., :keep, :], table[..., keep:, :]


def _resample(rows: Tensor, size: tuple[int, int], mode: str, antialias: bool) -> Tensor:
    """``rows [*b, H, W, d]`` resampled to ``[*b, H', W', d]`` by ``torch.nn.functional.interpolate``."""
    work = torch.float64 if rows.dtype == torch.float64 else torch.float32
    lead = rows.shape[:-3]
    image = rows.reshape(-1, *rows.shape[-3:]).permute(0, 3, 1, 2).to(work)  # [B, H, W, d] -> [B, d, H, W]
    out = torch.nn.functional.interpolate(image, size=size, mode=mode, align_corners=False, antialias=antialias)
    return out.permute(0, 2, 3, 1).reshape(*lead, *size, rows.shape[-1]).to(rows.dtype)  # [*b, H', W', d]


def _resample_linear(rows: Tensor, length: int) -> Tensor:
    """``rows [*b, L, d]`` resampled to ``[*b, L', d]`` by 1-D linear ``interpolate`` (SAM's call)."""
    work = torch.float64 if rows.dtype == torch.float64 else torch.float32
    lead = rows.shape[:-2]
    line = rows.reshape(-1, *rows.shape[-2:]).permute(0, 2, 1).to(work)  # [B, L, d] -> [B, d, L]
    out = torch.nn.functional.interpolate(line, size=length, mode="linear", align_corners=False)  # [B, d, L']
    return out.permute(0, 2, 1).reshape(*lead, length, rows.shape[-1]).to(rows.dtype)  # [*b, L', d]


def interpolate_positions(table: Tensor, new_length: int, *, keep: int = 0, mode: str = "linear") -> Tensor:
    """A table of ``keep + L`` rows resampled to ``keep + new_length`` rows: ``[*b, k + L', d]``.

    ``mode="linear"`` is transformers' resizing of SAM's relative-position tables
    (``SamVisionAttention.get_rel_pos``: ``F.interpolate(..., mode="linear")``); ``"cubic"`` is the
    bicubic kernel of ViT's 2-D resampling along one axis (Keys 1981 cubic convolution, ``a = -0.75``,
    borders clamped). The first ``keep`` rows are copied unchanged.
    """
    check_choice("mode", mode, INTERPOLATION_MODES)
    new_length = check_positive_int("new_length", new_length)
    kept, rows = _split_table(table, keep)
    if mode == "linear":  # SAM's own 1-D op, so that the rows equal its bit for bit on every torch version
        out = _resample_linear(rows, new_length)  # [*b, L', d]
    else:  # a 1 × L image: the height is left as it is
        out = _resample(rows.unsqueeze(-3), (1, new_length), "bicubic", False).squeeze(-3)  # [*b, L', d]
    return torch.cat((kept, out), dim=-2)  # [*b, k + L', d]


def interpolate_grid(
    table: Tensor,
    old_hw: tuple[int, int] | None,
    new_hw: tuple[int, int],
    *,
    keep: int = 1,
    mode: str = "bicubic",
    antialias: bool = False,
) -> Tensor:
    """A table of ``keep`` rows and an ``H × W`` grid (row-major) resampled to an ``H' × W'`` grid:
    ``[*b, k + H'·W', d]``.

    With the defaults (``keep=1``, bicubic, ``align_corners=False``) this is transformers'
    ``ViTEmbeddings.interpolate_pos_encoding`` (also DeiT's, DINOv2's, CLIP's), where
    ``new_hw = (height // patch_size, width // patch_size)``; ``old_hw=None`` reads the grid as square,
    as they do (``sqrt(n - keep)``). ``mode="bilinear", antialias=True, keep=0`` is SigLIP 2's
    ``Siglip2VisionEmbeddings.resize_positional_embeddings``. Resampling to the same grid returns
    the table's values unchanged.
    """
    check_choice("mode", mode, GRID_INTERPOLATION_MODES)
    check_bool("antialias", antialias)
    kept, rows = _split_table(table, keep)
    n = rows.shape[-2]
    if old_hw is None:
        side = math.isqrt(n)
        if side * side != n:
            raise ValueError(
                f"old_hw=None reads the {n} rows after keep={keep} as a square grid, but {n} is not a square; "
                "pass old_hw=(H, W)"
            )
        old_hw = (side, side)
    hw = {}
    for name, value in (("old_hw", old_hw), ("new_hw", new_hw)):
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise ValueError(f"{name} must be a (height, width) pair of patch counts, got {value!r}")
        hw[name] = (check_positive_int(f"{name}[0]", value[0]), check_positive_int(f"{name}[1]", value[1]))
    (h, w), new_hw = hw["old_hw"], hw["new_hw"]
    if h * w != n:
        raise ValueError(
            f"the grid old_hw={(h, w)} holds {h * w} patches, but the table has {n} rows after keep={keep} "
            f"({table.shape[-2]} in all); accepted: old_hw with H·W = {n}"
        )
    grid = rows.unflatten(-2, (h, w))  # [*b, H·W, d] -> [*b, H, W, d]
    out = _resample(grid, new_hw, mode, antialias).flatten(-3, -2)  # [*b, H', W', d] -> [*b, H'·W', d]
    return torch.cat((kept, out), dim=-2)  # [*b, k + H'·W', d]
