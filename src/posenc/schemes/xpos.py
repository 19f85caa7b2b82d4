"""xPos: RoPE with a per-pair exponential decay (Sun et al. 2022, "A Length-Extrapolatable
Transformer", section 3.1).

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``*p`` positions' shape.

On top of the rotation, the query at position ``m`` is multiplied by ``ζ_i^((m - c) / B)`` and the
key at ``n`` by ``ζ_i^(-(n - c) / B)`` on pair ``i``, with ``ζ_i = (2i/d + γ) / (1 + γ)`` and
``B = scale_base``; the score carries ``ζ_i^((m - n) / B)``, a decay with distance that does not
depend on the centre ``c``. The peers choose ``c`` differently:

* rotary-embedding-torch 0.9.1 (``RotaryEmbedding(use_xpos=True)``, ``get_scale``) centres at
  ``floor(L / 2)`` of the sequence it is given (``power = (t - len(t) // 2) / scale_base``). In
  ``rotate_queries_with_cached_keys`` the queries are centred on their own length and the keys on
  theirs, so the scores of a decoding step pick up ``ζ^((sk//2 - sq//2) / B)``; and its scale cache,
  filled at one length, serves shorter lengths rows centred on the first.
* torchscale (``XPOS`` in ``component/xpos_relative_position.py``) centres at ``ceil(L / 2)`` of the
  whole stream (``min_pos = -(length + offset) // 2``); its attention caches keys *before* xPos and
  re-applies it to all of them at every step (``xpos(k, offset=0)``, ``xpos(q, offset=src_len - 1)``),
  so scores stay relative but every cached key is rescaled per step.

posenc keeps a fixed centre (``center``, default 0), so keys cached after rotation stay valid at any
offset and scores equal both peers' (away from their caching quirks); the rotated q and k themselves
differ from a peer's by the constant factors ``ζ^(±(c_peer - c) / B)`` and equal them for
``center = c_peer``. The price of a fixed centre is range: factors grow as ``ζ_0^(-|p - c| / B)``, so
:meth:`XPos.rotate` refuses positions whose factors leave the dtype's range (float32/bf16: about
``±35,000`` positions from the centre at ``B = 512``; float16: about ``±3,900``). Set ``center`` near
the middle of the positions you use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .. import functional as F
from ..functional._checks import check_choice, check_even_dim, check_number, has_values
from ..kernels import rope
from .base import check_head_width, check_positions_fit, default_positions, register
from .rope import Rope

__all__ = ["XPos", "XPosConfig"]


@dataclass(frozen=True)
class XPosConfig:
    dim: int  # head width
    base: float = 10000.0
    layout: str = "half"  # "half" (HF rotate_half) or "interleaved" (both xPos peers)
    scale_base: float = 512.0  # B: the decay factor ζ applies once per B positions of distance
    gamma: float = 0.4  # ζ_i = (2i/d + γ) / (1 + γ)
    center: float = 0.0  # position c at which q and k are unscaled
    #: rotate and scale only the first rotary_dim features (even), the rest pass unchanged:
    #: x-transformers' ``rotary_emb_dim`` (``Decoder(rotary_xpos=True)`` defaults to half the head);
    #: the frequencies and ζ are over that width, as its ``RotaryEmbedding(rotary_emb_dim, use_xpos=True)``
    rotary_dim: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_even_dim("dim", self.dim))  # 8.0 -> 8
        check_choice("layout", self.layout, F.ROPE_LAYOUTS)
        check_number("scale_base", self.scale_base, positive=True)
        check_number("gamma", self.gamma, positive=True)
        check_number("center", self.center)
        if self.rotary_dim is not None:
            object.__setattr__(self, "rotary_dim", check_even_dim("rotary_dim", self.rotary_dim))
            if self.rotary_dim > self.dim:
                raise ValueError(f"rotary_dim must be at most dim={self.dim}, got {self.rotary_dim}")

    scaling = None  # read by Rope: xPos rotates unscaled

    @property
    def rotary_width(self) -> int:
        return self.dim if self.rotary_dim is None else self.rotary_dim

    frequency_dim = rotary_width


@register
class XPos(Rope):
    name = "xpos"
    family = "rotary"
    formula = "q_m ← ζ^((m−c)/B) R(mθ) q_m,  k_n ← ζ^(−(n−c)/B) R(nθ) k_n,  ζ_i = (2i/d + γ)/(1 + γ)"
    citation = "Sun et al. 2022, A Length-Extrapolatable Transformer, section 3.1"
    Config = XPosConfig  # type: ignore[assignment]

    def __init__(self, config: XPosConfig) -> None:
        super().__init__(config)  # type: ignore[arg-type]
        d = config.rotary_width
        zeta = (torch.arange(0, d, 2, dtype=torch.float64) + config.gamma * d) / ((1 + config.gamma) * d)
        self.register_buffer("zeta", zeta, persistent=False)  # [r/2] float64

    def decay(self, positions: Tensor, *, sign: float, dtype: torch.dtype = torch.float32) -> Tensor:
        """``ζ^(sign · (p - c) / scale_base)`` per rotated feature ``[*p, r]`` in the module's layout."""
        c = self.config
        power = (positions.to(torch.float64) - c.center) / c.scale_base * sign  # [*p]
        scale = self.zeta ** power[..., None]  # [*p, d/2]
        if c.layout == "half":
            scale = torch.cat((scale, scale), dim=-1)  # [*p, r]
        else:
            scale = scale.repeat_interleave(2, dim=-1)  # [*p, r]
        return scale.to(dtype)

    def _check_range(self, positions: Tensor, dtype: torch.dtype) -> None:
        """Refuse positions whose decay factors overflow or underflow ``dtype`` (skipped when compiling)."""
        if not has_values(positions) or positions.numel() == 0:
            return
        c = self.config
        distance = float((positions.to(torch.float64) - c.center).abs().max())
        log_rate = math.log((1 + c.gamma) / c.gamma)  # ln(1/ζ_0), ζ_0 = γ/(1+γ) the strongest decay
        log_factor = distance / c.scale_base * log_rate  # ln of the largest factor
        info = torch.finfo(dtype)
        limit = min(math.log(info.max), -math.log(info.tiny))
        if log_factor > limit:
            reach = limit / log_rate * c.scale_base
            raise ValueError(
                f"xpos: a position {distance:g} away from center={c.center:g} gives decay factors of "
                f"e^±{log_factor:.0f}, outside {dtype}'s range (positions must stay within ±{reach:.0f} of the "
                "center); set center near the middle of the positions used, or raise scale_base"
            )

    def rotate_one(self, x: Tensor, positions: Tensor | None = None, **options: Any) -> Tensor:
        """Refused: xPos scales a query by ``ζ^(m/B)`` and a key by ``ζ^(-n/B)``, so a tensor alone
        does not say which rule applies; rotate queries and keys together with :meth:`rotate`."""
        raise TypeError(
            "xpos rotates queries and keys by its own rule (a query scaled by ζ^(m/B), a key by ζ^(-n/B)): "
            "rotate them together with rotate(q, k, q_positions, k_positions); rotate_one serves rope and mrope"
        )

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor | None = None, k_positions: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Rotate and scale ``q [b, h, sq, hd]`` and ``k [b, h, sk, hd]``.

        Default positions: keys ``0..sk-1``, queries the last ``sq`` of those (decoding with a cache).
        The decay multiplies the cos/sin tables, so the input is rounded once, in its own dtype.
        """
        check_head_width(self.name, self.config.dim, q, k)
        sq, sk = q.shape[-2], k.shape[-2]
        q_positions = default_positions(q_positions, sq, q.device, offset=max(sk - sq, 0))
        k_positions = default_positions(k_positions, sk, k.device)
        check_positions_fit(q_positions, q, "query")
        check_positions_fit(k_positions, k, "key")
        self._check_range(q_positions, q.dtype)
        self._check_range(k_positions, k.dtype)
        dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        cos_q, sin_q = self.cos_sin(q_positions.to(self.inv_freq.device), dtype=dtype)  # [*p, hd]
        cos_k, sin_k = self.cos_sin(k_positions.to(self.inv_freq.device), dtype=dtype)
        q_scale = self.decay(q_positions.to(self.zeta.device), sign=1.0, dtype=dtype)  # [*p, hd]
        k_scale = self.decay(k_positions.to(self.zeta.device), sign=-1.0, dtype=dtype)
        layout = self.config.layout
        q = rope(q, cos_q * q_scale, sin_q * q_scale, layout=layout)
        k = rope(k, cos_k * k_scale, sin_k * k_scale, layout=layout)
        return q, k
