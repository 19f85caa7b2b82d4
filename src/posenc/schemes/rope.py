"""Rotary position embedding as a scheme (Su et al. 2021, RoFormer, section 3.4).

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``r`` rotated width.

The module holds the frequencies (float64, from :func:`posenc.functional.rope_inv_freq`, any
Hugging Face scaling) and a cos/sin row cache; :meth:`Rope.rotate` rotates queries and keys at
their positions. Partial rotary (GPT-NeoX ``rotary_pct``) rotates the first ``rotary_dim`` features.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .. import functional as F
from ..functional._checks import check_choice, check_even_dim
from ._cache import cached_range, cached_rows
from .base import PositionalEncoding, default_positions, register

__all__ = ["Rope", "RopeConfig"]


@dataclass(frozen=True)
class RopeConfig:
    dim: int  # head width
    base: float = 10000.0  # HF `rope_theta`
    layout: str = "half"  # "half" (HF/NeoX rotate_half) or "interleaved" (paper, Meta, GPT-J)
    scaling: Mapping[str, Any] | None = None  # HF `rope_scaling` dict as in config.json
    rotary_dim: int | None = None  # rotate only the first rotary_dim features (partial rotary)

    def __post_init__(self) -> None:
        check_even_dim("dim", self.dim)
        check_choice("layout", self.layout, F.ROPE_LAYOUTS)
        if self.rotary_dim is not None:
            check_even_dim("rotary_dim", self.rotary_dim)
            if self.rotary_dim > self.dim:
                raise ValueError(f"rotary_dim must be at most dim={self.dim}, got {self.rotary_dim}")
        F.rope_inv_freq(self.rotary_width, base=self.base, scaling=self.scaling)  # validates base and scaling

    @property
    def rotary_width(self) -> int:
        return self.rotary_dim if self.rotary_dim is not None else self.dim


@register
class Rope(PositionalEncoding):
    name = "rope"
    family = "rotary"
    formula = "q_m ← R(m·θ) q_m,  k_n ← R(n·θ) k_n,  θ_i = base^(-2i/d)  ⇒  q_m·k_n depends on m − n"
    citation = "Su et al. 2021, RoFormer, section 3.4"
    Config = RopeConfig

    def __init__(self, config: RopeConfig) -> None:
        super().__init__(config)
        inv_freq, attention_scale = F.rope_inv_freq(config.rotary_width, base=config.base, scaling=config.scaling)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # [r/2] float64
        self.attention_scale = attention_scale
        self.register_buffer("_cos_sin", None, persistent=False)  # row cache [n, 2, r], see _cache.py

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"dim": head_dim}

    def _build(self, positions: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
        cos, sin = F.rope_cos_sin(
            positions, self.inv_freq, layout=self.config.layout, attention_scale=self.attention_scale, dtype=dtype
        )
        return torch.stack((cos, sin), dim=-2)  # [*p, 2, r]

    def cos_sin(self, positions: Tensor | int, *, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
        """cos and sin tables ``[*p, r]`` at ``positions`` (cached for whole non-negative positions)."""
        positions = F.as_positions(positions, device=self.inv_freq.device)
        if dtype == torch.float32:
            table = cached_rows(self, "_cos_sin", positions, self._build, dtype=torch.float32)
        else:
            table = self._build(positions, dtype)
        return table.unbind(-2)

    def _tables(self, positions: Tensor | None, length: int, offset: int, x: Tensor) -> tuple[Tensor, Tensor]:
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        if positions is None and dtype == torch.float32:
            table = cached_range(self, "_cos_sin", offset, length, self._build, dtype=dtype, device=x.device)
            return table.unbind(-2)  # [s, r] each
        return self.cos_sin(default_positions(positions, length, x.device, offset=offset).to(x.device), dtype=dtype)

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor | None = None, k_positions: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Rotate ``q [b, h, sq, hd]`` and ``k [b, h, sk, hd]``.

        Default positions: keys ``0..sk-1``; queries the last ``sq`` of those (decoding with a cache).
        """
        sq, sk = q.shape[-2], k.shape[-2]
        cos_k, sin_k = self._tables(k_positions, sk, 0, k)
        if q_positions is None and k_positions is None and sq == sk:
            cos_q, sin_q = cos_k, sin_k
        else:
            cos_q, sin_q = self._tables(q_positions, sq, max(sk - sq, 0), q)
        layout = self.config.layout
        return F.apply_rope(q, cos_q, sin_q, layout=layout), F.apply_rope(k, cos_k, sin_k, layout=layout)
