"""T5's bucketed relative-position bias (Raffel et al. 2020, section 2.1).

Shape legend: ``h`` heads, ``sq``/``sk`` query/key positions, ``b`` batch.

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
from ..functional.fast_bias import cached_bias, cached_t5_buckets
from .base import PositionalEncoding, register

__all__ = ["T5Bias", "T5Config"]


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
        F.t5_relative_bucket(torch.zeros(1, dtype=torch.long), bidirectional=self.bidirectional,
                             num_buckets=self.num_buckets, max_distance=self.max_distance)  # validates


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
            bidirectional=c.bidirectional, num_buckets=c.num_buckets, max_distance=c.max_distance,
        )

    def bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """``[h, sq, sk]`` for positions ``[s]``; ``[b, h, sq, sk]`` for positions ``[b, s]``."""
        device = self.relative_attention_bias.weight.device
        fast = cached_bias(self, q_positions, k_positions)  # contiguous ranges, no grad: Toeplitz build + cache
        if fast is not None:
            return fast
        buckets = cached_t5_buckets(self, q_positions, k_positions, device)  # contiguous ranges: [sq, sk], cached
        if buckets is None:
            buckets = self.buckets(F.as_positions(q_positions, device=device), F.as_positions(k_positions, device=device))
        values = self.relative_attention_bias(buckets)  # [..., sq, sk, h]
        return values.movedim(-1, -3)  # [..., h, sq, sk]
