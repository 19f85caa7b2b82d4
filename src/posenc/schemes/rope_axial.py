"""Axial RoPE for image patches and other grids (Heo et al. 2024, "Rotary Position Embedding for
Vision Transformer", arXiv 2403.13298, the "RoPE-Axial" variant).

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence (flattened grid cells), ``hd`` head width,
``n`` axes, ``r`` rotated width.

The rotated features are split into ``n`` contiguous blocks of pairs; block ``a`` turns by
coordinate ``a`` at the per-axis frequencies of :func:`posenc.functional.axial_rope_inv_freq`. A
score ``q_m · k_n`` then depends only on the per-axis offsets ``m_a − n_a``. Positions are
coordinates ``[s, n]`` / ``[b, s, n]`` (``F.grid_positions(h, w)``); 1-D positions are read as axis 0.

Mapping to the peers (checked in ``tests/test_multidim.py``):

* rotary-embedding-torch: ``RotaryEmbedding(dim=rotary_dim // n_axes, freqs_for=...)`` then
  ``apply_rotary_emb(rotary.get_axial_freqs(*sizes), t)`` equals ``rope_axial`` with that
  ``rotary_dim``, ``layout="interleaved"`` and coordinates ``grid_positions(*sizes)``
  (``normalized=True`` for ``freqs_for='pixel'``).
* torchtune ``VisionRotaryPositionalEmbeddings(dim=hd // 2)`` equals ``rope_axial`` with
  ``layout="interleaved"`` and coordinates ``(column + 1, row + 1)`` per patch (x first, counted
  from 1), the CLS token at ``(0, 0)``, where the rotation is the identity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .. import functional as F
from ..functional._checks import check_choice, check_even_dim, check_positive_int
from ..kernels import rope
from .base import PositionalEncoding, check_head_width, check_positions_fit, register

__all__ = ["RopeAxial", "RopeAxialConfig"]


@dataclass(frozen=True)
class RopeAxialConfig:
    dim: int  # head width
    n_axes: int = 2  # coordinates per position
    base: float = 10000.0  # for frequencies="rope"
    layout: str = "interleaved"  # pair layout; both peers use "interleaved"
    frequencies: str = "rope"  # "rope": base^(-2i/(r/n)); "pixel": π·linspace(1, max_freq/2), coords in [-1, 1]
    max_freq: float = 10.0  # for frequencies="pixel"
    rotary_dim: int | None = None  # rotate only the first rotary_dim features (a multiple of 2·n_axes)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_even_dim("dim", self.dim))  # 8.0 -> 8
        object.__setattr__(self, "n_axes", check_positive_int("n_axes", self.n_axes))
        check_choice("layout", self.layout, F.ROPE_LAYOUTS)
        if self.rotary_dim is not None:
            object.__setattr__(self, "rotary_dim", check_even_dim("rotary_dim", self.rotary_dim))
            if self.rotary_dim > self.dim:
                raise ValueError(f"rotary_dim must be at most dim={self.dim}, got {self.rotary_dim}")
        step = 2 * self.n_axes  # one block of pairs per axis
        if self.rotary_width % step:
            name = "rotary_dim" if self.rotary_dim is not None else "dim"
            raise ValueError(
                f"rope_axial splits its rotated features into n_axes={self.n_axes} blocks of pairs: {name} "
                f"must be a multiple of 2 * n_axes = {step}, got {name}={self.rotary_width}"
                + (f" (dim={self.dim} is the head width)" if self.rotary_dim is not None else "")
            )
        F.axial_rope_inv_freq(
            self.rotary_width, self.n_axes, base=self.base, frequencies=self.frequencies, max_freq=self.max_freq
        )  # validates the rest

    @property
    def rotary_width(self) -> int:
        return self.rotary_dim if self.rotary_dim is not None else self.dim


@register
class RopeAxial(PositionalEncoding):
    name = "rope_axial"
    family = "rotary"
    formula = "q_m ← R(Σ_a m_a θ_a) q_m on axis a's block of pairs  ⇒  q_m·k_n depends on m_a − n_a"
    citation = "Heo et al. 2024, Rotary Position Embedding for Vision Transformer (RoPE-Axial)"
    Config = RopeAxialConfig
    n_axes = 2

    def __init__(self, config: RopeAxialConfig) -> None:
        super().__init__(config)
        self.n_axes = config.n_axes  # type: ignore[misc]  # per instance: the config decides
        inv_freq = F.axial_rope_inv_freq(
            config.rotary_width,
            config.n_axes,
            base=config.base,
            frequencies=config.frequencies,
            max_freq=config.max_freq,
        )
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # [n, r / 2n] float64

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict[str, Any]:
        """By name, rotate the largest multiple of ``2 · n_axes = 4`` features of the head."""
        if head_dim < 4:
            raise ValueError(
                f"rope_axial turns one pair per axis and needs a head width of at least 4 (2 axes), got "
                f"head width {head_dim} (dim={dim}, num_heads={num_heads}); use fewer heads"
            )
        return {"dim": head_dim} if head_dim % 4 == 0 else {"dim": head_dim, "rotary_dim": head_dim - head_dim % 4}

    def cos_sin(self, coords: Tensor | int, *, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
        """cos and sin tables ``[*p, r]`` at coordinates ``[*p, n_axes]`` (1-D positions: axis 0)."""
        coords = F.as_coordinates(coords, self.config.n_axes)
        return F.axial_rope_cos_sin(coords, self.inv_freq, layout=self.config.layout, dtype=dtype)

    def _tables(
        self, positions: Tensor | None, length: int, offset: int, x: Tensor, what: str
    ) -> tuple[Tensor, Tensor]:
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        if positions is None:
            positions = torch.arange(offset, offset + length, device=x.device)
        coords = F.as_coordinates(positions, self.config.n_axes, length=length, device=x.device)  # [s, n] or [b, s, n]
        check_positions_fit(coords[..., 0], x, what)  # in the caller's terms, before any table is built
        return self.cos_sin(coords.to(x.device), dtype=dtype)

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor | None = None, k_positions: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Rotate ``q [b, h, sq, hd]`` and ``k [b, h, sk, hd]`` at coordinates ``[s, n]`` / ``[b, s, n]``.

        Default positions: keys ``0..sk-1`` and queries the last ``sq`` of those, on axis 0.
        """
        check_head_width(self.name, self.config.dim, q, k)
        sq, sk = q.shape[-2], k.shape[-2]
        cos_k, sin_k = self._tables(k_positions, sk, 0, k, "key")
        if q_positions is None and k_positions is None and sq == sk:
            cos_q, sin_q = cos_k, sin_k
        else:
            cos_q, sin_q = self._tables(q_positions, sq, max(sk - sq, 0), q, "query")
        layout = self.config.layout
        return rope(q, cos_q, sin_q, layout=layout), rope(k, cos_k, sin_k, layout=layout)
