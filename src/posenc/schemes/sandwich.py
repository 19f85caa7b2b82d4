"""Sandwich: the inner product of two sinusoidal position embeddings as a parameter-free logit bias
(Chi, Fan, Rudnicky and Ramadge 2023, "Dissecting Transformer Length Extrapolation via the Lens of
Receptive Field Analysis", ACL, section 5, "Sandwich").

Shape legend: ``h`` heads, ``sq``/``sk`` query/key positions, ``w`` distances, ``f`` frequencies.

The sinusoids ``p_m`` of width ``d'`` (``dim``) have the inner product

    p_m · p_n = sum_{k=1}^{d'/2} cos((m - n) / base^(2k/d')),

a function of ``m - n`` alone that falls, wiggling, from ``d'/2`` at distance 0: a log-like
decaying temporal bias. Sandwich shifts it by ``-d'/2`` (0 at distance 0, negative beyond) and,
as ALiBi's head-wise slopes do, compresses it per head ``h = 1 … H`` by ``8h / H``:

    logit(i, j) += (p_i · p_j - d'/2) · H / (8h).

The head scaling and the constant are those of NeMo's reference, ``sandwich_pos_bias``
(``nemo/collections/nlp/modules/common/megatron/position_embedding/sandwich_relative_position_embedding.py``:
``(bias - hidden_size / 2) / (h * 8 / H)``). NeMo's inner product differs from the paper's: it
sums ``(m - n) · inv_freq`` without the cosine, over the ``d'/2 - 1`` frequencies ``k = 1 … d'/2 - 1``;
posenc follows the paper's equation (the cosine, ``k = 1 … d'/2``).

The bias is symmetric in ``i - j``: the same formula serves decoders (causal) and encoders. The
frequencies are float64 and the cosines are taken in float64 (exact at any distance a sequence
reaches), then cast to float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..functional._checks import check_base, check_even_dim, check_positive_int
from ..kernels.flex import ScoreMod
from .base import PositionalEncoding, register

__all__ = ["Sandwich", "SandwichConfig", "sandwich_score_mod", "sandwich_inv_freq", "sandwich_head_scales"]


@dataclass(frozen=True)
class SandwichConfig:
    num_heads: int
    dim: int = 128  # d', the width of the sinusoids (the paper's d' = 128)
    base: float = 10000.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_heads", check_positive_int("num_heads", self.num_heads))  # 8.0 -> 8
        object.__setattr__(self, "dim", check_even_dim("dim", self.dim))
        object.__setattr__(self, "base", check_base(self.base))


def sandwich_inv_freq(dim: int, base: float = 10000.0) -> Tensor:
    """``[dim/2]`` float64: ``base^(-2k/dim)`` for ``k = 1 … dim/2`` (the paper's sum)."""
    dim, base = check_even_dim("dim", dim), check_base(base)
    k = torch.arange(1, dim // 2 + 1, dtype=torch.float64)  # [f]
    return base ** (-2.0 * k / dim)


def sandwich_head_scales(num_heads: int) -> Tensor:
    """``[h]`` float64: ``H / (8h)`` for ``h = 1 … H`` (NeMo's ``1 / (h * 8 / H)``)."""
    num_heads = check_positive_int("num_heads", num_heads)
    return num_heads / (8.0 * torch.arange(1, num_heads + 1, dtype=torch.float64))


def sandwich_score_mod(inv_freq: Tensor, scales: Tensor, *, q_offset: int | Tensor = 0) -> ScoreMod:
    """Sandwich as a FlexAttention score mod: ``score + (sum_k cos(d · inv_freq[k]) - f) · scales[h]``
    with ``d = i - j``, the sum written out term by term (FlexAttention's score mods cannot reduce
    over a tensor) and taken in float64; ``q_offset`` = query position minus key position at index 0."""
    if not isinstance(inv_freq, Tensor) or inv_freq.dim() != 1 or inv_freq.numel() == 0:
        raise ValueError("inv_freq must be a 1-D tensor of frequencies [dim/2] (sandwich_inv_freq)")
    if not isinstance(scales, Tensor) or scales.dim() != 1 or scales.numel() == 0:
        raise ValueError("scales must be a 1-D tensor, one per head (sandwich_head_scales)")
    freqs = [float(f) for f in inv_freq.tolist()]  # constants of the compiled kernel
    half = float(len(freqs))
    scales = scales.double()
    offset = torch.as_tensor(q_offset, device=scales.device)

    def sandwich(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        d = (q_idx + offset - kv_idx).to(torch.float64)
        total = torch.cos(d * freqs[0])
        for f in freqs[1:]:
            total = total + torch.cos(d * f)
        return score + ((total - half) * scales[h]).to(score.dtype)

    return sandwich


@register
class Sandwich(PositionalEncoding):
    name = "sandwich"
    family = "bias"
    formula = "logit(i, j) += (Σ_{k=1}^{d'/2} cos((i − j) / base^(2k/d')) − d'/2) · H / (8h)"
    citation = "Chi et al. 2023, Dissecting Transformer Length Extrapolation via the Lens of Receptive Field Analysis, section 5"
    Config = SandwichConfig

    def __init__(self, config: SandwichConfig) -> None:
        super().__init__(config)
        # float64 so that module-wide casts keep them exact (see PositionalEncoding._apply)
        self.register_buffer("inv_freq", sandwich_inv_freq(config.dim, config.base), persistent=False)  # [f]
        self.register_buffer("scales", sandwich_head_scales(config.num_heads), persistent=False)  # [h]

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"num_heads": num_heads}

    def relative_bias_values(self, rel: Tensor) -> Tensor:
        """``[h, w]``: the bias at each distance (key minus query; symmetric), float32."""
        rel = rel.to(torch.float64)  # [w]
        inner = torch.zeros_like(rel)  # [w]; one frequency at a time: never [w, f] (w may be b·sq·sk)
        for f in self.inv_freq:
            inner += torch.cos(rel * f)
        inner -= self.inv_freq.numel()  # p_i · p_j - d'/2
        return (self.scales[:, None] * inner[None, :]).float()  # [h, w]

    def score_mod(self, q_offset: int | Tensor) -> ScoreMod:
        return sandwich_score_mod(self.inv_freq, self.scales, q_offset=q_offset)
