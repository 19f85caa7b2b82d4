"""xPos: RoPE with a per-pair exponential decay (Sun et al. 2022, "A Length-Extrapolatable
Transformer", section 3.1).

Queries are multiplied by ``ζ_i^((m - c) / scale_base)`` and keys by ``ζ_i^(-(n - c) / scale_base)``
on top of the rotation, with ``ζ_i = (2i/d + γ) / (1 + γ)``; the score then carries
``ζ_i^((m - n) / scale_base)``, a decay with distance that is independent of the centre ``c``.
The reference implementations (torchscale ``XPOS``; rotary-embedding-torch ``use_xpos``) put the
centre in the middle of the current sequence, which keeps the factors near 1 but changes them when
the sequence grows: keys cached at one length no longer match queries at the next. posenc keeps a
fixed centre (``center``, default 0), so cached keys stay valid; scores equal the peers' exactly,
the individual rotated q and k differ from theirs by the constant factor ``ζ^(±c'/scale_base)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .. import functional as F
from ..functional._checks import check_choice, check_even_dim
from .base import default_positions, register
from .rope import Rope

__all__ = ["XPos", "XPosConfig"]


@dataclass(frozen=True)
class XPosConfig:
    dim: int  # head width
    base: float = 10000.0
    layout: str = "half"
    scale_base: float = 512.0  # distance over which the decay factor ζ applies once
    gamma: float = 0.4  # ζ_i = (2i/d + γ) / (1 + γ)
    center: float = 0.0  # position at which q and k are unscaled

    def __post_init__(self) -> None:
        check_even_dim("dim", self.dim)
        check_choice("layout", self.layout, F.ROPE_LAYOUTS)
        if not self.scale_base > 0:
            raise ValueError(f"scale_base must be positive, got {self.scale_base!r}")
        if not self.gamma > 0:
            raise ValueError(f"gamma must be positive, got {self.gamma!r}")

    scaling = None
    rotary_dim = None

    @property
    def rotary_width(self) -> int:
        return self.dim


@register
class XPos(Rope):
    name = "xpos"
    family = "rotary"
    formula = "q_m ← ζ^(m/B) R(mθ) q_m,  k_n ← ζ^(-n/B) R(nθ) k_n,  ζ_i = (2i/d + γ)/(1 + γ)"
    citation = "Sun et al. 2022, A Length-Extrapolatable Transformer, section 3.1"
    Config = XPosConfig  # type: ignore[assignment]

    def __init__(self, config: XPosConfig) -> None:
        super().__init__(config)  # type: ignore[arg-type]
        d = config.dim
        zeta = (torch.arange(0, d, 2, dtype=torch.float64) + config.gamma * d) / ((1 + config.gamma) * d)
        self.register_buffer("zeta", zeta, persistent=False)  # [d/2] float64

    def decay(self, positions: Tensor, *, sign: float, dtype: torch.dtype = torch.float32) -> Tensor:
        """``ζ^(sign · (p - c) / scale_base)`` per feature ``[*p, d]`` in the module's layout."""
        c = self.config
        power = (positions.to(torch.float64) - c.center) / c.scale_base * sign  # [*p]
        scale = self.zeta ** power[..., None]  # [*p, d/2]
        if c.layout == "half":
            scale = torch.cat((scale, scale), dim=-1)  # [*p, d]
        else:
            scale = scale.repeat_interleave(2, dim=-1)  # [*p, d]
        return scale.to(dtype)

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor | None = None, k_positions: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        sq, sk = q.shape[-2], k.shape[-2]
        q_positions = default_positions(q_positions, sq, q.device, offset=max(sk - sq, 0))
        k_positions = default_positions(k_positions, sk, k.device)
        q, k = super().rotate(q, k, q_positions, k_positions)
        dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        q_scale, k_scale = self.decay(q_positions, sign=1.0, dtype=dtype), self.decay(k_positions, sign=-1.0, dtype=dtype)
        if q.dim() == 4 and q_scale.dim() == 3:
            q_scale, k_scale = q_scale[:, None], k_scale[:, None]  # [b, s, d] -> [b, 1, s, d]
        return (q * q_scale).to(q.dtype), (k * k_scale).to(k.dtype)
