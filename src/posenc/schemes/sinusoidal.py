"""Fixed sinusoidal encoding (Vaswani et al. 2017, section 3.5), added or concatenated.

``learned_scale=True`` multiplies the table by one learned scalar initialised to ``dim ** -0.5``
(x-transformers ``ScaledSinusoidalEmbedding``; Hua et al. 2022, "Transformer Quality in Linear
Time", appendix).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .. import functional as F
from ..functional._checks import check_bool, check_choice, check_even_dim
from ..functional.sinusoidal import sinusoidal_table
from ._cache import cached_rows
from .absolute import AbsoluteEncoding, check_combine
from .base import default_positions, register

__all__ = ["Sinusoidal", "SinusoidalConfig"]


@dataclass(frozen=True)
class SinusoidalConfig:
    dim: int  # width of the code (the embedding width when added)
    base: float = 10000.0  # longest wavelength is 2π·base
    layout: str = "interleaved"  # "interleaved": (sin, cos) pairs as in the paper; "half": sines then cosines
    frequencies: str = "paper"  # "paper": base^(-2i/d); "tensor2tensor": base^(-i/(d/2-1))
    combine: str = "add"  # "add" to the token embedding, or "concat" after it
    learned_scale: bool = False  # one learned scalar multiplying the table

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_even_dim("dim", self.dim))  # 8.0 -> 8
        check_choice("layout", self.layout, F.LAYOUTS)
        check_choice("frequencies", self.frequencies, F.SINUSOID_FREQUENCIES)
        check_combine(self.combine)
        check_bool("learned_scale", self.learned_scale)
        F.sinusoidal_inv_freq(self.dim, base=self.base, frequencies=self.frequencies)  # validates base


@register
class Sinusoidal(AbsoluteEncoding):
    name = "sinusoidal"
    formula = "PE(p, 2i) = sin(p / base^(2i/d)),  PE(p, 2i+1) = cos(p / base^(2i/d))"
    citation = "Vaswani et al. 2017, Attention Is All You Need, section 3.5"
    Config = SinusoidalConfig

    def __init__(self, config: SinusoidalConfig) -> None:
        super().__init__(config)
        self.scale = nn.Parameter(torch.tensor(config.dim**-0.5)) if config.learned_scale else None
        inv_freq = F.sinusoidal_inv_freq(config.dim, base=config.base, frequencies=config.frequencies)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # [dim/2] float64, kept so by casts
        self.register_buffer("_table", None, persistent=False)  # row cache, see _cache.py

    def _build(self, positions: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
        return sinusoidal_table(positions, self.inv_freq, layout=self.config.layout, dtype=dtype)  # [*p, dim]

    def encode(self, positions: Tensor | int, *, dtype: torch.dtype = torch.float32) -> Tensor:
        """The table rows ``[*p, dim]`` in ``dtype``, times the learned scale when there is one.

        float32 rows come from the row cache; other dtypes (float64) are built directly.
        """
        positions = F.as_positions(positions, device=self.inv_freq.device)
        if dtype == torch.float32:
            code = cached_rows(self, "_table", positions, self._build, dtype=torch.float32)
        else:
            code = self._build(positions, dtype)
        return code * self.scale if self.scale is not None else code

    def _code(self, positions: Tensor | None, length: int, x: Tensor) -> Tensor:
        positions = default_positions(positions, length, x.device)
        return self.encode(positions, dtype=torch.float64 if x.dtype == torch.float64 else torch.float32)  # [*p, dim]
