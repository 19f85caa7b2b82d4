"""ALiBi: a fixed, per-head linear penalty on distance (Press et al. 2022, "Train Short, Test Long:
Attention with Linear Biases Enables Input Length Extrapolation", section 3).

Shape legend: ``h`` heads, ``sq``/``sk`` query/key positions, ``b`` batch, ``w`` distances.

The causal form adds ``-m_h · (i - j)`` for keys ``j <= i`` and relies on the causal mask for the
rest; the symmetric form (``bidirectional=True``) adds ``-m_h · |i - j|`` for encoders.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .. import functional as F
from ..functional._checks import check_bool, check_number, check_positive_int
from ..kernels.bias import cached_bias
from ..kernels.flex import ScoreMod
from .base import PositionalEncoding, check_bias_fits, register

__all__ = ["ALiBi", "ALiBiConfig", "alibi_score_mod"]


@dataclass(frozen=True)
class ALiBiConfig:
    num_heads: int
    bidirectional: bool = False  # False: causal form (decoder); True: symmetric -m|i - j| (encoder)
    max_bias: float = 8.0  # the paper's 8 in 2^(-8h/H); MPT's alibi_bias_max

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_heads", check_positive_int("num_heads", self.num_heads))  # 8.0 -> 8
        check_bool("bidirectional", self.bidirectional)
        object.__setattr__(self, "max_bias", check_number("max_bias", self.max_bias, positive=True))


def alibi_score_mod(slopes: Tensor, *, q_offset: int | Tensor = 0, bidirectional: bool = False) -> ScoreMod:
    """ALiBi as a FlexAttention score mod: ``score - slope[h] * (q - k)`` (or ``|q - k|``), as
    :func:`posenc.functional.alibi_bias`; ``q_offset`` = query position minus key position at
    index 0. ``slopes``: one per head, a 1-D tensor or a sequence of numbers."""
    if isinstance(slopes, Tensor):
        slopes = slopes.float()
    else:
        try:
            slopes = torch.tensor(slopes, dtype=torch.float32)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(
                f"slopes must be a 1-D tensor or a sequence of numbers, got {type(slopes).__name__}"
            ) from None
    if slopes.dim() != 1 or slopes.numel() == 0:
        raise ValueError(f"slopes must be 1-D, one per head, got shape {tuple(slopes.shape)}")
    offset = torch.as_tensor(q_offset, device=slopes.device)  # a tensor: a new offset does not recompile

    if bidirectional:

        def alibi(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return score - slopes[h] * (q_idx + offset - kv_idx).abs()
    else:

        def alibi(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return score - slopes[h] * (q_idx + offset - kv_idx)

    return alibi


@register
class ALiBi(PositionalEncoding):
    name = "alibi"
    family = "bias"
    formula = "logit(i, j) += −m_h · (i − j),  m_h = 2^(−8h/H), h = 1 … H (H a power of two; 8 = max_bias)"
    citation = "Press et al. 2022, Train Short, Test Long (ALiBi), section 3"
    Config = ALiBiConfig

    def __init__(self, config: ALiBiConfig) -> None:
        super().__init__(config)
        # float64 so that module-wide casts keep it exact (see PositionalEncoding._apply); the bias is float32
        self.register_buffer(
            "slopes", F.alibi_slopes(config.num_heads, max_bias=config.max_bias).double(), persistent=False
        )  # [h]

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"num_heads": num_heads, "bidirectional": not causal}

    def bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """``[h, sq, sk]`` for positions ``[s]``; ``[b, h, sq, sk]`` for positions ``[b, s]``."""
        q_positions = F.as_positions(q_positions, device=self.slopes.device)
        k_positions = F.as_positions(k_positions, device=self.slopes.device)
        check_bias_fits(q_positions, k_positions, self.config.num_heads, torch.float32, self.slopes.device)
        fast = cached_bias(self, q_positions, k_positions)  # contiguous ranges: Toeplitz build + cache
        if fast is not None:
            return fast
        return F.alibi_bias(self.slopes.float(), q_positions, k_positions, bidirectional=self.config.bidirectional)

    def relative_bias_values(self, rel: Tensor) -> Tensor:
        """``[h, w]``: the reference bias of a query at 0 against keys at ``rel``."""
        return F.alibi_bias(self.slopes.float(), rel.new_zeros(1), rel, bidirectional=self.config.bidirectional)[:, 0]

    def score_mod(self, q_offset: int | Tensor) -> ScoreMod:
        return alibi_score_mod(self.slopes, q_offset=q_offset, bidirectional=self.config.bidirectional)

    def check_attention(self, *, dim: int, num_heads: int, head_dim: int, causal: bool) -> None:
        super().check_attention(dim=dim, num_heads=num_heads, head_dim=head_dim, causal=causal)
        if not causal and not self.config.bidirectional:
            raise ValueError(
                "causal ALiBi (bidirectional=False) penalises only past keys and needs causal=True; "
                "use bidirectional=True for an encoder"
            )
