"""2-D RoPE of image patches as shipped vision towers build it: Pixtral, Gemma 4, Llama 4, DINOv3.

Shape legend: ``*p`` the leading shape of the coordinates (``[s]``, ``[b, s]``), ``d`` the rotated
width (the head width in all four towers), ``f = d / 4`` frequencies per axis; ``x`` is
``[b, h, s, hd]`` (or any layout :func:`~posenc.functional.apply_rope` takes through ``seq_dim``).

Coordinates are ``[*p, 2]``: (row, column) of each patch, in every family (a tower that puts its
column first, Llama 4, is reordered inside). All four are axial RoPE (Heo et al. 2024, "Rotary
Position Embedding for Vision Transformer", arXiv 2403.13298, "RoPE-Axial"): half the pairs turn
by the row, half by the column. They differ in which frequencies each axis gets, how the
coordinates are formed, and where the pairs lie:

* ``pixtral``: the row takes the even, the column the odd frequencies of ``base^(-2j/d)``; angle
  ``c · f``; ``half`` pairs over all ``d`` features, the row's first (Agrawal et al. 2024,
  "Pixtral 12B", arXiv 2410.07073, "RoPE-2D");
* ``gemma4``: both axes take ``base^(-2j/(d/2))``; angle ``c · f``; one block of ``d/2`` features
  per axis, ``half`` pairs inside each block;
* ``llama4``: both take ``base^(-2j/(d/2))``; angle ``(c + 1) · f``; ``interleaved`` pairs, the
  column's first;
* ``dinov3``: both take ``2π · base^(-2j/(d/2))``; angle ``c · f`` with ``c`` the patch centre in
  ``[-1, 1]``; ``half`` pairs over ``d``, the row's first (Siméoni et al. 2025, "DINOv3",
  arXiv 2508.10104).

The reference for each is transformers' own module, named in :func:`vision_rope_cos_sin`.
Frequencies are float64 and angles are formed in float64 and reduced mod 2π before the cast
(transformers forms them in float32: ~1.5e-7 of the largest angle apart).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ._checks import (
    as_positions,
    check_choice,
    check_device,
    check_fits,
    check_float_dtype,
    check_number,
    check_positive_int,
    two_pi_mod,
)
from .multidim import axial_rope_inv_freq, grid_positions
from .rope import apply_rope

__all__ = [
    "VISION_ROPES",
    "vision_rope_inv_freq",
    "vision_rope_cos_sin",
    "apply_vision_rope",
    "patch_grid_coordinates",
    "llama4_vision_coordinates",
    "patch_centre_coordinates",
    "augment_patch_coordinates",
    "pad_unrotated",
]


@dataclass(frozen=True)
class _Family:
    base: float  # the default base: rope_theta of the reference config
    split: bool  # True: row/column take the even/odd frequencies of one d-wide RoPE; False: d/2-wide each
    scale: float  # multiplies the frequencies (DINOv3's 2π)
    offset: float  # added to both coordinates before the angles are formed
    column_first: bool  # the column's pairs come before the row's
    layout: str  # "half", "interleaved", or "axis_half" (one half-split block per axis)


_FAMILIES = {
    # transformers PixtralVisionRotaryEmbedding.compute_axial_rope_parameters / recomposition_frequencies
    "pixtral": _Family(base=10000.0, split=True, scale=1.0, offset=0.0, column_first=False, layout="half"),
    # transformers Gemma4VisionRotaryEmbedding + apply_multidimensional_rope
    "gemma4": _Family(base=100.0, split=False, scale=1.0, offset=0.0, column_first=False, layout="axis_half"),
    # transformers Llama4VisionRotaryEmbedding._compute_freqs_ci + vision_apply_rotary_emb
    "llama4": _Family(base=10000.0, split=False, scale=1.0, offset=1.0, column_first=True, layout="interleaved"),
    # transformers DINOv3ViTRopePositionEmbedding
    "dinov3": _Family(base=100.0, split=False, scale=2 * math.pi, offset=0.0, column_first=False, layout="half"),
}
#: The vision towers whose 2-D RoPE :func:`vision_rope_cos_sin` reproduces.
VISION_ROPES = tuple(_FAMILIES)


def _family(family: str) -> _Family:
    return _FAMILIES[check_choice("vision RoPE family", family, VISION_ROPES)]


def _check_dim(dim: int, family: str) -> int:
    dim = check_positive_int("dim", dim)
    if dim % 4:
        raise ValueError(
            f"{family} vision RoPE turns dim / 2 features by the row and dim / 2 by the column, in pairs: "
            f"dim must be a multiple of 4, got dim={dim}"
        )
    return dim


def _check_patch_coordinates(coords: Tensor) -> Tensor:
    if not isinstance(coords, Tensor):
        raise TypeError(f"coordinates must be a tensor [*p, 2] of (row, column), got {type(coords).__name__}")
    coords = as_positions(coords)  # refuses half precision, bool, complex, NaN
    if coords.dim() < 1 or coords.shape[-1] != 2:
        raise ValueError(
            f"vision RoPE coordinates must be [*p, 2], one (row, column) per patch (grid_positions(h, w) "
            f"for an h × w grid), got shape {tuple(coords.shape)}"
        )
    return coords


def vision_rope_inv_freq(dim: int, family: str, *, base: float | None = None) -> Tensor:
    """Frequencies ``[2, dim / 4]`` (float64) of a vision tower's 2-D RoPE: row 0 turns the pairs of
    the row coordinate, row 1 those of the column. ``base`` defaults to the family's (its reference
    config's ``rope_theta``: 10000 for Pixtral and Llama 4, 100 for Gemma 4 and DINOv3).

    * ``pixtral``: the ``dim / 2`` frequencies ``base^(-2j/dim)`` of 1-D RoPE over the whole width,
      the even ones to the row and the odd ones to the column (Mistral's Pixtral ``freqs[::2]`` /
      ``freqs[1::2]``; transformers ``PixtralVisionRotaryEmbedding.compute_axial_rope_parameters``);
    * ``gemma4``, ``llama4``: ``base^(-2j/(dim/2))``, RoPE over one axis's ``dim / 2`` features, for
      both axes (transformers ``Gemma4VisionRotaryEmbedding.compute_axial_rope_parameters``,
      ``Llama4VisionRotaryEmbedding._compute_freqs_ci``'s ``rope_freq``);
    * ``dinov3``: those times ``2π``, for coordinates in ``[-1, 1]`` (Siméoni et al. 2025, "DINOv3",
      arXiv 2508.10104; transformers ``DINOv3ViTRopePositionEmbedding``, ``2π · base^(-4j/dim)``).
    """
    spec = _family(family)
    dim = _check_dim(dim, family)
    base = spec.base if base is None else check_number("base", base)
    if spec.split:
        if not base > 1:
            raise ValueError(f"base must be a finite number greater than 1, got {base!r}")
        full = torch.tensor(base, dtype=torch.float64) ** -(torch.arange(0, dim, 2, dtype=torch.float64) / dim)
        return torch.stack((full[0::2], full[1::2]))  # [d/2] -> [2, d/4]
    return axial_rope_inv_freq(dim, 2, base=base) * spec.scale  # [2, d/4]


def vision_rope_cos_sin(
    coords: Tensor,
    dim: int,
    family: str,
    *,
    base: float | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """cos and sin tables ``[*p, dim]`` of a vision tower's 2-D RoPE at patch coordinates ``[*p, 2]``
    (row, column), laid out as the tower lays its features out; rotate with :func:`apply_vision_rope`.

    Pair ``i`` of an axis turns by ``(coordinate + offset) · inv_freq[axis, i]``
    (:func:`vision_rope_inv_freq`); the tables match, value for value:

    * ``pixtral``: transformers ``PixtralVisionRotaryEmbedding.forward`` (``[row pairs, column
      pairs]`` repeated, the ``half`` layout over ``dim``), at the ``(row, column)`` ids that
      ``PixtralVisionModel.forward`` builds per image (:func:`patch_grid_coordinates`);
    * ``gemma4``: ``Gemma4VisionRotaryEmbedding.forward`` (``[row, row, column, column]``: one
      half-split block per axis), at its ``pixel_position_ids``;
    * ``llama4``: ``Llama4VisionRotaryEmbedding``'s ``freqs_ci`` as cos/sin, interleaved pairs, the
      column's first, at ``coordinate + 1``; its class token is the patch at ``(-1, -1)``, whose
      angles are 0 (:func:`llama4_vision_coordinates`; transformers masks them to 0);
    * ``dinov3``: ``DINOv3ViTRopePositionEmbedding.forward`` at patch centres in ``[-1, 1]``
      (:func:`patch_centre_coordinates`, :func:`augment_patch_coordinates` in training).
    """
    check_float_dtype(dtype)
    spec = _family(family)
    coords = _check_patch_coordinates(coords)
    inv_freq = vision_rope_inv_freq(dim, family, base=base).to(coords.device)  # [2, f]
    coords = coords.to(torch.float64) + spec.offset  # [*p, 2]
    angles = coords[..., None] * inv_freq  # [*p, 2, f]
    if spec.column_first:
        angles = angles.flip(-2)  # [*p, (column, row), f]
    angles = two_pi_mod(angles)
    if spec.layout == "axis_half":
        angles = torch.cat((angles, angles), dim=-1).flatten(-2)  # [*p, 2, 2f] -> [*p, d]
    elif spec.layout == "half":
        angles = angles.flatten(-2)  # [*p, d/2]
        angles = torch.cat((angles, angles), dim=-1)  # [*p, d]
    else:
        angles = angles.flatten(-2).repeat_interleave(2, dim=-1)  # [*p, d/2] -> [*p, d]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_vision_rope(x: Tensor, cos: Tensor, sin: Tensor, family: str, *, seq_dim: int = -2) -> Tensor:
    """Rotate the first ``cos.shape[-1]`` features of ``x`` by the tables of :func:`vision_rope_cos_sin`.

    ``pixtral`` and ``dinov3`` pair features ``(i, i + d/2)`` (transformers' ``rotate_half``),
    ``llama4`` pairs ``(2i, 2i+1)`` (``vision_apply_rotary_emb``'s complex view): both are
    :func:`~posenc.functional.apply_rope`. ``gemma4`` splits the features into one block per axis
    and pairs ``(i, i + d/4)`` inside each block (transformers ``apply_multidimensional_rope``).
    ``seq_dim`` and the table shapes are those of :func:`~posenc.functional.apply_rope`.
    """
    spec = _family(family)
    if spec.layout != "axis_half":
        return apply_rope(x, cos, sin, layout=spec.layout, seq_dim=seq_dim)
    if not isinstance(x, Tensor) or not isinstance(cos, Tensor) or not isinstance(sin, Tensor):
        raise TypeError("x, cos and sin must be tensors (cos and sin [*p, d] from vision_rope_cos_sin)")
    if cos.dim() == 0 or cos.shape[-1] % 4:
        raise ValueError(
            f"gemma4 tables hold two half-split blocks: their width must be a multiple of 4, got {tuple(cos.shape)}"
        )
    if cos.shape[-1] > x.shape[-1]:
        raise ValueError(
            f"cos/sin rotate {cos.shape[-1]} features but x has only {x.shape[-1]} (x shape {tuple(x.shape)})"
        )
    w = cos.shape[-1] // 2
    blocks = [
        apply_rope(
            x[..., a * w : (a + 1) * w], cos[..., a * w : (a + 1) * w], sin[..., a * w : (a + 1) * w], seq_dim=seq_dim
        )
        for a in range(2)
    ]  # 2 × [..., d/2]
    return torch.cat((*blocks, x[..., 2 * w :]), dim=-1)


def patch_grid_coordinates(*grids: tuple[int, int]) -> Tensor:
    """(row, column) of every patch of one or more images packed into one sequence: ``[Σ h·w, 2]``
    (int64), each ``h × w`` grid row-major from ``(0, 0)``.

    What ``PixtralVisionModel.forward`` (transformers) builds for the images of a batch, which it
    concatenates into one sequence; also Gemma 4's ``pixel_position_ids`` of unpadded patches.
    """
    if not grids:
        raise ValueError("patch_grid_coordinates needs at least one (height, width) grid, got none")
    parts = []
    for i, grid in enumerate(grids):
        if not isinstance(grid, (tuple, list)) or len(grid) != 2:
            raise ValueError(f"each grid must be a (height, width) pair of patch counts, got grids[{i}]={grid!r}")
        parts.append(grid_positions(*grid))  # [h·w, 2]
    return torch.cat(parts)  # [Σ h·w, 2]


def llama4_vision_coordinates(side: int) -> Tensor:
    """Llama 4's vision sequence: a ``side × side`` patch grid, row-major, then the class token:
    ``[side² + 1, 2]`` (int64), the class token at ``(-1, -1)``.

    ``Llama4VisionModel`` appends its class embedding after the patches, and
    ``Llama4VisionRotaryEmbedding`` leaves it unrotated; ``llama4`` tables turn by ``coordinate + 1``,
    so ``(-1, -1)`` is the identity there.
    """
    side = check_positive_int("side", side)
    grid = grid_positions(side, side)  # [side², 2]
    return torch.cat((grid, grid.new_full((1, 2), -1)))  # [side² + 1, 2]


def patch_centre_coordinates(
    height: int, width: int, *, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
) -> Tensor:
    """Centres of the patches of a ``height × width`` grid normalised to ``[-1, 1]``: ``[h·w, 2]``
    (row, column), row-major; on an axis of ``n`` patches, patch ``i`` is at ``(2i + 1) / n - 1``.

    DINOv3's patch coordinates (transformers ``get_patches_center_coordinates``), independent of the
    image size: a model trained at one resolution sees the same range at any other.
    """
    check_float_dtype(dtype)
    height, width = check_positive_int("height", height), check_positive_int("width", width)
    rows = (2 * torch.arange(height, dtype=torch.float64) + 1) / height - 1  # [h]
    cols = (2 * torch.arange(width, dtype=torch.float64) + 1) / width - 1  # [w]
    grid = torch.stack(torch.meshgrid(rows, cols, indexing="ij"), dim=-1)  # [h, w, 2]
    return grid.reshape(-1, 2).to(device=check_device(device), dtype=dtype)  # [h·w, 2]


def _log_uniform(low_high: float, size: tuple[int, ...], generator: torch.Generator | None) -> Tensor:
    log = math.log(low_high)
    draw = torch.empty(size, dtype=torch.float32).uniform_(-log, log, generator=generator)
    return draw.to(torch.float64).exp()


def augment_patch_coordinates(
    coords: Tensor,
    *,
    shift: float | None = None,
    jitter: float | None = None,
    rescale: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """DINOv3's train-time augmentation of patch coordinates ``[*p, 2]`` (float64 out).

    In this order, each drawn once for the whole set of coordinates: ``shift`` adds one uniform
    offset in ``[-shift, shift]`` per axis; ``jitter`` multiplies each axis by its own log-uniform
    factor in ``[1/jitter, jitter]``; ``rescale`` multiplies both by one log-uniform factor in
    ``[1/rescale, rescale]``. None leaves a step out (DINOv3's defaults: only ``rescale=2``).
    Siméoni et al. 2025, "DINOv3", arXiv 2508.10104; transformers ``augment_patches_center_coordinates``
    with ``DINOv3ViTConfig.pos_embed_shift``, ``pos_embed_jitter``, ``pos_embed_rescale``.

    The draws are made in float32 in transformers' order, on the CPU (``generator`` is a CPU
    generator), so a generator seeded as transformers' global one (``torch.manual_seed``) gives the
    same augmentation as transformers on the CPU.
    """
    coords = _check_patch_coordinates(coords).to(torch.float64)
    if shift is not None:
        shift = check_number("shift", shift, low=0.0)
        if shift > torch.finfo(torch.float32).max:  # the offset is drawn in float32, as transformers draws it
            raise ValueError(
                f"shift must be at most the largest float32 (3.4e38): the offset is drawn in float32, got {shift!r}"
            )
        offset = torch.empty((1, 2), dtype=torch.float32).uniform_(-shift, shift, generator=generator)
        coords = coords + offset.to(torch.float64).to(coords.device)  # [*p, 2] + [1, 2]
    for name, value, size in (("jitter", jitter, (1, 2)), ("rescale", rescale, (1,))):
        if value is None:
            continue
        if check_number(name, value) < 1:
            raise ValueError(f"{name} must be a number >= 1 (factors are drawn in [1/{name}, {name}]), got {value!r}")
        coords = coords * _log_uniform(value, size, generator).to(coords.device)  # [*p, 2] · [1, 2] or [1]
    return coords


def pad_unrotated(cos: Tensor, sin: Tensor, *, before: int = 0, after: int = 0) -> tuple[Tensor, Tensor]:
    """Tables ``[*b, s, d]`` grown to ``[*b, before + s + after, d]`` with rows that leave a token as
    it is (cos 1, sin 0): for tokens that carry no patch position, DINOv3's class and register
    tokens before the patches (transformers' ``apply_rotary_pos_emb`` there skips them), Llama 4's
    class token after them."""
    if not isinstance(cos, Tensor) or not isinstance(sin, Tensor) or cos.dim() < 2 or cos.shape != sin.shape:
        raise ValueError(
            "cos and sin must be tables [*b, s, d] of the same shape, got "
            + ", ".join(f"{tuple(t.shape)}" if isinstance(t, Tensor) else type(t).__name__ for t in (cos, sin))
        )
    counts = {}
    for name, value in (("before", before), ("after", after)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative int (a number of unrotated tokens), got {value!r}")
        counts[name] = value
    rows = counts["before"] + cos.shape[-2] + counts["after"]
    check_fits(
        "padded cos/sin tables",
        (2, *cos.shape[:-2], rows, cos.shape[-1]),
        cos.dtype,
        cos.device,
        hint="before and after count unrotated tokens (a class token and a few registers): pass those counts",
    )
    shape = (*cos.shape[:-2], 1, cos.shape[-1])

    def pad(t: Tensor, fill: float) -> Tensor:
        rows = [t.new_full(shape, fill).expand(*shape[:-2], n, shape[-1]) for n in (counts["before"], counts["after"])]
        return torch.cat((rows[0], t, rows[1]), dim=-2)  # [*b, before + s + after, d]

    return pad(cos, 1.0), pad(sin, 0.0)
