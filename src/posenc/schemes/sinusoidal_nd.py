"""N-D sinusoidal encoding: one sinusoid table per axis, concatenated (image patches, volumes).

Shape legend: ``b`` batch, ``s`` sequence (flattened grid cells), ``n`` axes, ``d`` code width.

The code of coordinates ``(c_0, ..., c_{n-1})`` is ``[PE_w(c_0), ..., PE_w(c_{n-1})][:d]`` with
``PE_w`` the paper's interleaved sinusoid of width ``w = 2 ceil(d / 2n)`` (Vaswani et al. 2017,
section 3.5, applied per axis as in Parmar et al. 2018, "Image Transformer" (half the features per axis), and
numerically as ``positional-encodings``' ``PositionalEncoding2D`` / ``PositionalEncoding3D``); see
:func:`posenc.functional.sinusoidal_nd`. Positions are coordinates ``[s, n]`` / ``[b, s, n]``
(``F.grid_positions(h, w)`` for an ``h × w`` patch grid); 1-D positions are read as axis 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .. import functional as F
from ..functional._checks import check_positive_int
from .absolute import AbsoluteEncoding, check_combine
from .base import default_positions, register

__all__ = ["SinusoidalND", "SinusoidalNDConfig"]


@dataclass(frozen=True)
class SinusoidalNDConfig:
    dim: int  # width of the code (the embedding width when added); any width, odd too
    n_axes: int = 2  # coordinates per position: 2 for image patches, 3 for video or volumes
    base: float = 10000.0  # longest wavelength is 2π·base on every axis
    combine: str = "add"  # "add" to the token embedding, or "concat" after it

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_positive_int("dim", self.dim))  # 8.0 -> 8
        object.__setattr__(self, "n_axes", check_positive_int("n_axes", self.n_axes))
        check_combine(self.combine)
        F.sinusoidal_inv_freq(2, base=self.base)  # validates base


@register
class SinusoidalND(AbsoluteEncoding):
    name = "sinusoidal_nd"
    formula = "PE(c) = [PE_w(c_0), ..., PE_w(c_{n-1})][:d],  w = 2⌈d / 2n⌉,  PE_w the sinusoid of width w"
    citation = "Vaswani et al. 2017, section 3.5, per axis (Parmar et al. 2018, Image Transformer)"
    Config = SinusoidalNDConfig
    n_axes = 2

    def __init__(self, config: SinusoidalNDConfig) -> None:
        super().__init__(config)
        self.n_axes = config.n_axes  # type: ignore[misc]  # per instance: the config decides

    def encode(self, positions: Tensor | int, *, dtype: torch.dtype = torch.float32) -> Tensor:
        """The code ``[*p, dim]`` in ``dtype`` of coordinates ``[*p, n_axes]`` (1-D positions: axis 0)."""
        coords = F.as_coordinates(positions, self.config.n_axes)
        return F.sinusoidal_nd(coords, self.config.dim, base=self.config.base, dtype=dtype)

    def _code(self, positions: Tensor | None, length: int, x: Tensor) -> Tensor:
        coords = F.as_coordinates(default_positions(positions, length, x.device), self.n_axes, length=length)
        return self.encode(coords, dtype=torch.float64 if x.dtype == torch.float64 else torch.float32)  # [*p, dim]
