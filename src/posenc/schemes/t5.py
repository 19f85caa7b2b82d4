"""T5's bucketed relative-position bias (Raffel et al. 2020, section 2.1).

Shape legend: ``h`` heads, ``sq``/``sk`` query/key positions, ``b`` batch, ``w`` distances.

Each head learns one scalar per bucket of the relative distance (key minus query); near
distances have a bucket each, far ones share logarithmically wider buckets up to ``max_distance``.
The parameter is named ``relative_attention_bias`` ([num_buckets, h]) as in HF ``T5Attention``, so
its weights load directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .. import functional as F
from ..functional._checks import check_bool, check_integer_positions, check_number, check_positive_int
from ..kernels.bias import build_bias, cached_bias, cached_index
from ..kernels.flex import ScoreMod
from .base import PositionalEncoding, bias_into, check_bias_fits, register

__all__ = ["T5Bias", "T5Config", "t5_score_mod"]


@dataclass(frozen=True)
class T5Config:
    num_heads: int
    num_buckets: int = 32  # T5's default
    max_distance: int = 128  # distances beyond share the last bucket
    bidirectional: bool = True  # encoder (True) or decoder (False: every later key is bucket 0)
    init_std: float = 0.02

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_heads", check_positive_int("num_heads", self.num_heads))  # 8.0 -> 8
        object.__setattr__(self, "num_buckets", check_positive_int("num_buckets", self.num_buckets))
        object.__setattr__(self, "max_distance", check_positive_int("max_distance", self.max_distance))
        check_bool("bidirectional", self.bidirectional)
        check_number("init_std", self.init_std, low=0.0)
        F.t5_relative_bucket(
            torch.zeros(1, dtype=torch.long),
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )  # validates


def t5_score_mod(
    table: Tensor,
    *,
    q_offset: int | Tensor = 0,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> ScoreMod:
    """T5's bias as a FlexAttention score mod: ``table [num_buckets, h]`` looked up at
    ``bucket(k - q)``, the bucket computed in the score mod by
    :func:`posenc.functional.t5_relative_bucket` (capturing a bucket matrix whose size depends on
    the length would recompile for each length); ``q_offset`` = query position minus key position
    at index 0."""
    if not isinstance(table, Tensor) or table.dim() != 2 or table.shape[0] != num_buckets:
        got = f"shape {tuple(table.shape)}" if isinstance(table, Tensor) else type(table).__name__
        raise ValueError(
            f"table must be a tensor [num_buckets={num_buckets}, heads] (T5's relative_attention_bias "
            f"weight), got {got}"
        )
    offset = torch.as_tensor(q_offset, device=table.device)

    def t5(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        bucket = F.t5_relative_bucket(
            kv_idx - (q_idx + offset), bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
        )
        return score + table[bucket, h]

    return t5


@register
class T5Bias(PositionalEncoding):
    name = "t5"
    family = "bias"
    formula = "logit(m, n) += b_h[bucket(n − m)],  exact buckets near, log-spaced up to max_distance"
    citation = "Raffel et al. 2020, Exploring the Limits of Transfer Learning (T5), section 2.1"
    Config = T5Config

    def __init__(self, config: T5Config) -> None:
        super().__init__(config)
        self.relative_attention_bias = nn.Embedding(config.num_buckets, config.num_heads)
        nn.init.normal_(self.relative_attention_bias.weight, std=config.init_std)

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"num_heads": num_heads, "bidirectional": not causal}

    def buckets(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """Bucket index of every (query, key) pair: ``[..., sq, sk]``."""
        q_positions = check_integer_positions(F.as_positions(q_positions), "t5 buckets")
        k_positions = check_integer_positions(F.as_positions(k_positions), "t5 buckets")
        c = self.config
        return F.t5_relative_bucket(
            F.relative_positions(q_positions, k_positions),
            bidirectional=c.bidirectional,
            num_buckets=c.num_buckets,
            max_distance=c.max_distance,
        )

    def bias(self, q_positions: Tensor, k_positions: Tensor, *, out: Tensor | None = None) -> Tensor:
        """``[h, sq, sk]`` for positions ``[s]``; ``[b, h, sq, sk]`` for positions ``[b, s]``;
        written into ``out`` where given (see :meth:`PositionalEncoding.bias`: inference, no
        gradient; a tensor of another shape, dtype or device is a ValueError)."""
        weight = self.relative_attention_bias.weight
        device = weight.device
        check_bias_fits(q_positions, k_positions, self.config.num_heads, weight.dtype, device)
        if out is not None:
            built = build_bias(self, q_positions, k_positions, out=out)  # contiguous ranges: Toeplitz build
            if built is not None:
                return built
        else:
            fast = cached_bias(self, q_positions, k_positions)  # contiguous ranges, no grad: Toeplitz build + cache
            if fast is not None:
                return fast
        buckets = cached_index(self, q_positions, k_positions, device)  # contiguous ranges: [sq, sk], cached
        if buckets is None:
            buckets = self.buckets(
                F.as_positions(q_positions, device=device), F.as_positions(k_positions, device=device)
            )
        bias = self.relative_attention_bias(buckets).movedim(-1, -3)  # [..., sq, sk, h] -> [..., h, sq, sk]
        return bias if out is None else bias_into(out, bias)

    def relative_index(self, rel: Tensor) -> Tensor:
        """The bucket of each distance: ``[w]``."""
        c = self.config
        return F.t5_relative_bucket(
            rel, bidirectional=c.bidirectional, num_buckets=c.num_buckets, max_distance=c.max_distance
        )

    def relative_bias_values(self, rel: Tensor) -> Tensor:
        """``[h, w]``: the table at each distance's bucket."""
        return self.relative_attention_bias(self.relative_index(rel)).t()  # [w, h] -> [h, w]

    def score_mod(self, q_offset: int | Tensor) -> ScoreMod:
        c = self.config
        return t5_score_mod(
            self.relative_attention_bias.weight.detach(),
            q_offset=q_offset,
            bidirectional=c.bidirectional,
            num_buckets=c.num_buckets,
            max_distance=c.max_distance,
        )
