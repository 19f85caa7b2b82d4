"""Positions with several coordinates: image patches (2D), video or volumes (3D).

Shape legend: ``*p`` the leading shape of the positions, ``n`` the number of axes, ``d`` the
encoding width, ``r`` the rotated width, ``f = r / (2n)`` frequencies per axis.

Coordinates are tensors ``[*p, n]``: the last dim holds one coordinate per axis. A regular grid of
patches is :func:`grid_positions`, flattened row-major like ``x.flatten(1, n)`` of a ``[b, *sizes, d]``
tensor. Two families of encodings take them:

* :func:`sinusoidal_nd` — an absolute code: one sinusoid table per axis, concatenated
  (``positional-encodings``' ``PositionalEncoding2D`` / ``PositionalEncoding3D``, number for number);
* :func:`axial_rope_inv_freq` / :func:`axial_rope_cos_sin` — axial RoPE: the rotated features are split
  into ``n`` contiguous blocks of pairs and block ``a`` turns by coordinate ``a``, so a score depends
  only on the per-axis offsets (Heo et al. 2024, "Rotary Position Embedding for Vision Transformer",
  "RoPE-Axial", arXiv 2403.13298; rotary-embedding-torch ``RotaryEmbedding.get_axial_freqs``; torchtune
  ``VisionRotaryPositionalEmbeddings``).

Ordinary 1-D positions given to an N-D encoding are read as coordinates on axis 0, the other axes
at 0 (:func:`as_coordinates`): a sequence is a grid with one row. That keeps code that treats all
schemes alike (default positions ``0..s-1``, caches) working; pass coordinates to use the others.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ._checks import (
    as_positions,
    check_choice,
    check_float_dtype,
    check_int,
    check_meta_mix,
    check_positive_int,
    two_pi_mod,
)
from .rope import ROPE_LAYOUTS
from .sinusoidal import sinusoidal

__all__ = [
    "grid_positions",
    "as_coordinates",
    "sinusoidal_nd",
    "sinusoidal_nd_axis_width",
    "axial_rope_inv_freq",
    "axial_rope_cos_sin",
    "AXIAL_FREQUENCIES",
]

AXIAL_FREQUENCIES = ("rope", "pixel")


def grid_positions(*sizes: int, normalized: bool = False, device: torch.device | str | None = None) -> Tensor:
    """Coordinates of every cell of a ``sizes[0] × sizes[1] × ...`` grid: ``[prod(sizes), n]``.

    Row-major order (the last axis varies fastest), as ``x.flatten(1, n)`` orders the cells of a
    ``[b, *sizes, d]`` tensor. Integer coordinates ``0..size-1`` (int64) by default;
    ``normalized=True`` gives float64 coordinates spread evenly over ``[-1, 1]`` on every axis, the
    convention of rotary-embedding-torch's ``freqs_for='pixel'`` (``torch.linspace(-1, 1, size)``).
    """
    if not sizes:
        raise ValueError("grid_positions needs at least one axis size, got none")
    sizes = tuple(check_positive_int(f"sizes[{a}]", size) for a, size in enumerate(sizes))
    if normalized:
        axes = [torch.linspace(-1.0, 1.0, size, dtype=torch.float64, device=device) for size in sizes]
    else:
        axes = [torch.arange(size, device=device) for size in sizes]
    grid = torch.meshgrid(*axes, indexing="ij")  # n × [*sizes]
    return torch.stack(grid, dim=-1).reshape(-1, len(sizes))  # [*sizes, n] -> [prod(sizes), n]


def as_coordinates(
    positions: int | Tensor, n_axes: int, *, length: int | None = None, device: torch.device | None = None
) -> Tensor:
    """``positions`` as coordinates ``[*p, n_axes]``.

    A tensor whose last dim is ``n_axes`` (and, when ``length`` is given, whose dim before it is
    ``length``) is taken as coordinates already. Anything else (an int ``n``, or positions ``[s]`` /
    ``[b, s]``) is read as 1-D positions on axis 0, the other coordinates 0. Where both readings fit
    (a ``[2, 2]`` tensor for two axes and ``length=2``) the coordinate reading wins. ``device``:
    where the coordinates are needed (see :func:`~posenc.functional.as_positions`).
    """
    n_axes = check_positive_int("n_axes", n_axes)
    if length is not None:
        length = check_int("length", length)
    positions = as_positions(positions, device=device)
    is_coords = positions.dim() >= 2 and positions.shape[-1] == n_axes
    if is_coords and length is not None:
        is_coords = positions.shape[-2] == length
    if is_coords:
        return positions
    if length is not None and (positions.dim() == 0 or positions.shape[-1] != length):
        raise ValueError(
            f"expected positions [s] or [b, s], or coordinates [s, {n_axes}] or [b, s, {n_axes}], "
            f"with s={length}; got shape {tuple(positions.shape)} (s: the length given)"
        )
    zeros = positions.new_zeros(*positions.shape, n_axes - 1)  # [*p, n - 1]
    return torch.cat((positions[..., None], zeros), dim=-1)  # [*p, n]


def _check_coordinates(coords: int | Tensor, n_axes: int | None) -> Tensor:
    coords = as_positions(coords)
    if coords.dim() < 1 or coords.shape[-1] < 1:
        raise ValueError(f"coordinates must be a tensor [*p, n_axes] with n_axes >= 1, got shape {tuple(coords.shape)}")
    if n_axes is not None and coords.shape[-1] != n_axes:
        raise ValueError(f"coordinates must have {n_axes} axes in their last dim, got shape {tuple(coords.shape)}")
    return coords


def sinusoidal_nd_axis_width(dim: int, n_axes: int) -> int:
    """Width of each axis's table in :func:`sinusoidal_nd`: ``2 * ceil(dim / (2 * n_axes))``.

    positional-encodings' rule (``int(np.ceil(channels / 4) * 2)`` in 2D, ``/ 6`` in 3D): every axis
    gets the same even width, and the concatenation, ``n_axes`` times that, is cut back to ``dim``.
    """
    dim, n_axes = check_positive_int("dim", dim), check_positive_int("n_axes", n_axes)
    return 2 * math.ceil(dim / (2 * n_axes))


def sinusoidal_nd(coords: Tensor, dim: int, *, base: float = 10000.0, dtype: torch.dtype = torch.float32) -> Tensor:
    """The N-D sinusoidal code of coordinates ``[*p, n]``: ``[*p, dim]``.

    Each axis ``a`` gets the paper's interleaved sinusoid (:func:`sinusoidal`, ``frequencies="paper"``)
    of width ``w = sinusoidal_nd_axis_width(dim, n)`` at coordinate ``a``; the ``n`` tables are
    concatenated in axis order and the result is cut to its first ``dim`` features, so any ``dim``
    (odd too) is accepted and the last axis may get fewer features. This is exactly
    ``positional-encodings`` (``PositionalEncoding1D/2D/3D`` in ``torch_encodings.py``), whose
    axes are the tensor's spatial dims in order (``x`` then ``y`` then ``z``): for an input
    ``[b, X, Y, ch]`` use ``coords = grid_positions(X, Y)``. Angles are formed in float64 (that
    library forms them in float32, ~1e-6 apart at coordinates in the hundreds).
    """
    check_float_dtype(dtype)
    coords = _check_coordinates(coords, None)
    dim = check_positive_int("dim", dim)
    width = sinusoidal_nd_axis_width(dim, coords.shape[-1])
    tables = [
        sinusoidal(coords[..., a], width, base=base, layout="interleaved", frequencies="paper", dtype=torch.float64)
        for a in range(coords.shape[-1])
    ]  # n × [*p, w]
    return torch.cat(tables, dim=-1)[..., :dim].to(dtype)  # [*p, n·w] -> [*p, dim]


def axial_rope_inv_freq(
    dim: int,
    n_axes: int = 2,
    *,
    base: float = 10000.0,
    frequencies: str = "rope",
    max_freq: float = 10.0,
) -> Tensor:
    """Per-axis frequencies ``[n_axes, dim / (2 n_axes)]`` (float64) of axial RoPE over ``dim`` features.

    ``dim`` is the rotated width; each axis owns ``dim / n_axes`` features (an even number), i.e.
    ``f = dim / (2 n_axes)`` pairs. Every axis uses the same frequencies:

    * ``"rope"``: ``base^(-2i / (dim / n_axes))``, RoFormer's spacing over one axis's width
      (rotary-embedding-torch ``freqs_for='lang'`` built with the per-axis width; torchtune
      ``VisionRotaryPositionalEmbeddings``, whose ``dim`` argument is that per-axis width);
    * ``"pixel"``: ``π · linspace(1, max_freq / 2, f)``, for coordinates normalised to ``[-1, 1]``
      (rotary-embedding-torch ``freqs_for='pixel'``, after the Fourier-feature position
      encodings of Jaegle et al. 2021, "Perceiver").
    """
    dim, n_axes = check_positive_int("dim", dim), check_positive_int("n_axes", n_axes)
    if dim % (2 * n_axes):
        raise ValueError(
            f"axial RoPE splits dim into {n_axes} axes of feature pairs: dim must be a multiple of "
            f"2 * n_axes = {2 * n_axes}, got dim={dim}"
        )
    check_choice("frequencies", frequencies, AXIAL_FREQUENCIES)
    per_axis = dim // n_axes
    if isinstance(max_freq, bool) or not isinstance(max_freq, (int, float)):  # checked for "rope" too
        raise TypeError(f"max_freq must be a finite positive number, got {max_freq!r}")
    if not max_freq > 0 or not math.isfinite(max_freq):
        raise ValueError(f"max_freq must be a finite positive number, got {max_freq!r}")
    if frequencies == "rope":
        if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 1 or not math.isfinite(base):
            raise ValueError(f"base must be a finite number greater than 1, got {base!r}")
        exponent = torch.arange(0, per_axis, 2, dtype=torch.float64) / per_axis  # [f]
        inv_freq = torch.tensor(float(base), dtype=torch.float64) ** -exponent
    else:
        inv_freq = torch.linspace(1.0, max_freq / 2, per_axis // 2, dtype=torch.float64) * math.pi  # [f]
    return inv_freq.expand(n_axes, per_axis // 2).clone()  # [n, f]


def axial_rope_cos_sin(
    coords: Tensor,
    inv_freq: Tensor,
    *,
    layout: str = "interleaved",
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """cos and sin tables ``[*p, 2 n f]`` for coordinates ``[*p, n]`` and ``inv_freq [n, f]``.

    Pair ``a·f + i`` turns by ``coords[..., a] * inv_freq[a, i]``: axis 0's pairs come first, as
    rotary-embedding-torch concatenates its per-axis frequencies and torchtune its x then y angles.
    ``layout`` places the pairs as :func:`rope_cos_sin` does (``"interleaved"``: features
    ``(2j, 2j+1)``, what both peers use; ``"half"``: ``(j, j + r/2)``); feed the tables to
    :func:`apply_rope` with the same layout. Angles are float64, reduced mod 2π before the cast.
    """
    check_float_dtype(dtype)
    check_choice("layout", layout, ROPE_LAYOUTS)
    if not isinstance(inv_freq, Tensor) or inv_freq.dim() != 2:
        raise TypeError(
            "inv_freq must be a 2-D tensor [n_axes, pairs per axis] from axial_rope_inv_freq, got "
            + (f"shape {tuple(inv_freq.shape)}" if isinstance(inv_freq, Tensor) else type(inv_freq).__name__)
        )
    check_meta_mix(coords=coords, inv_freq=inv_freq)
    if isinstance(coords, Tensor) and coords.dim() and coords.shape[-1] != inv_freq.shape[0]:
        raise ValueError(
            f"coordinates must have {inv_freq.shape[0]} axes in their last dim, one per row of inv_freq of shape "
            f"{tuple(inv_freq.shape)}, got shape {tuple(coords.shape)} (for {coords.shape[-1]} axes: "
            f"axial_rope_inv_freq(dim, n_axes={coords.shape[-1]}))"
        )
    coords = _check_coordinates(coords, inv_freq.shape[0]).to(inv_freq.device)
    angles = coords.to(torch.float64)[..., None] * inv_freq.to(torch.float64)  # [*p, n, f]
    angles = two_pi_mod(angles.flatten(-2))  # [*p, n, f] -> [*p, n·f]
    if layout == "half":
        angles = torch.cat((angles, angles), dim=-1)  # [*p, r]
    else:
        angles = angles.repeat_interleave(2, dim=-1)  # [*p, r]
    return angles.cos().to(dtype), angles.sin().to(dtype)
