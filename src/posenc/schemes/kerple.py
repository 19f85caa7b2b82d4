"""KERPLE: a learned, conditionally positive definite kernel of the distance as a logit bias (Chi,
Fan, Ramadge and Rudnicky 2022, "KERPLE: Kernelized Relative Positional Embedding for Length
Extrapolation", NeurIPS, section 4.2, eqs. for the logarithmic and power variants).

Shape legend: ``h`` heads, ``sq``/``sk`` query/key positions, ``w`` distances.

Two variants, each with two learnable positive numbers per head:

* ``"log"``:   ``logit(i, j) += -r1_h · log(1 + r2_h · |i - j|)``
* ``"power"``: ``logit(i, j) += -r1_h · |i - j| ** r2_h``  (``0 < r2 <= 2``)

The reference implementation is the authors' GPT-NeoX fork (``chijames/KERPLE``,
``megatron/mpu/layers.py``: ``ParallelKerpleLog`` and ``ParallelKerplePower`` with its bias kernel),
whose names and initialisation are kept:

* log: ``bias_p`` is ``r1`` (the factor), ``bias_a`` is ``r2`` (inside the logarithm);
* power: ``bias_a`` is ``r1`` (the factor), ``bias_p`` is ``r2`` (the exponent);
* initialisation ``bias_p ~ 2 · U[0, 1)`` and ``bias_a ~ 1 · U[0, 1)`` (``torch.rand(h) * scale``
  with scales 2 and 1), one number per head (NeoX stores them ``[h, 1, 1]``, here ``[h]``);
* positivity by clamping at ``eps = 1e-2`` (and the exponent at 2). NeoX clamps ``.data`` in the
  forward; here the clamp is functional with a straight-through gradient (the forward sees the
  clamped value, the gradient reaches the stored one as if it were clamped), so a forward never
  writes to a parameter (safe under ``torch.compile``) and a parameter below ``eps`` still learns.

The causal form (decoder, NeoX's ``tril`` of ``i - j``) uses ``max(i - j, 0)``: keys after the
query get 0 and are removed by the causal mask. ``bidirectional=True`` uses ``|i - j|`` (the
kernel is symmetric) for encoders.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..functional._checks import check_bool, check_choice, check_positive_int
from ..kernels.flex import ScoreMod
from .base import PositionalEncoding, register

__all__ = ["KERPLE", "KERPLEConfig", "kerple_score_mod", "kerple_bias_values", "VARIANTS", "EPS", "MAX_POWER"]

VARIANTS = ("log", "power")
EPS = 1e-2  # NeoX's self.eps: r1, r2 are clamped at it from below
MAX_POWER = 2.0  # NeoX clamps the power variant's exponent at 2 (the kernel is CPD for 0 < p <= 2)


@dataclass(frozen=True)
class KERPLEConfig:
    num_heads: int
    variant: str = "log"  # "log": -r1 log(1 + r2 |i-j|) (ParallelKerpleLog); "power": -r1 |i-j|^r2
    bidirectional: bool = False  # False: causal form max(i - j, 0) (decoder); True: |i - j| (encoder)

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_heads", check_positive_int("num_heads", self.num_heads))  # 8.0 -> 8
        check_choice("KERPLE variant", self.variant, VARIANTS)
        check_bool("bidirectional", self.bidirectional)


def _positive(p: Tensor, high: float | None = None) -> Tensor:
    """``p`` clamped to ``[EPS, high]`` in the forward, with the gradient of the identity."""
    return p.detach().clamp(min=EPS, max=high) + (p - p.detach())  # exact value; the gradient of p


def kerple_bias_values(r1: Tensor, r2: Tensor, distance: Tensor, *, variant: str) -> Tensor:
    """``[h, w]``: the KERPLE bias of each head (``r1, r2 [h]``, already positive) at the
    non-negative ``distance [w]``; computed in float32 or wider."""
    dtype = torch.promote_types(torch.promote_types(r1.dtype, r2.dtype), torch.float32)
    distance = distance.to(dtype)[None, :]  # [1, w]
    r1, r2 = r1.to(dtype)[:, None], r2.to(dtype)[:, None]  # [h, 1]
    if variant == "log":
        return -r1 * torch.log1p(r2 * distance)  # [h, w]
    return -r1 * distance.pow(r2)  # [h, w]


def kerple_score_mod(
    r1: Tensor, r2: Tensor, *, variant: str = "log", q_offset: int | Tensor = 0, bidirectional: bool = False
) -> ScoreMod:
    """KERPLE as a FlexAttention score mod: ``score - r1[h] · log(1 + r2[h] · d)`` (``"log"``) or
    ``score - r1[h] · d ** r2[h]`` (``"power"``) with ``d = max(i - j, 0)`` (or ``|i - j|``);
    ``r1, r2``: one positive number per head (the clamped parameters, captured as given);
    ``q_offset`` = query position minus key position at index 0."""
    check_choice("KERPLE variant", variant, VARIANTS)
    for name, r in (("r1", r1), ("r2", r2)):
        if not isinstance(r, Tensor) or r.dim() != 1 or r.numel() == 0:
            got = f"shape {tuple(r.shape)}" if isinstance(r, Tensor) else type(r).__name__
            raise ValueError(f"{name} must be a 1-D tensor, one number per head, got {got}")
    r1, r2 = r1.float(), r2.float()
    offset = torch.as_tensor(q_offset, device=r1.device)  # a tensor: a new offset does not recompile

    def distance(q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        d = q_idx + offset - kv_idx
        return (d.abs() if bidirectional else d.clamp(min=0)).to(torch.float32)

    if variant == "log":

        def kerple(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return score - r1[h] * torch.log1p(r2[h] * distance(q_idx, kv_idx))
    else:

        def kerple(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return score - r1[h] * distance(q_idx, kv_idx).pow(r2[h])

    return kerple


@register
class KERPLE(PositionalEncoding):
    name = "kerple"
    family = "bias"
    formula = (
        "logit(i, j) += −r1_h · log(1 + r2_h · |i − j|)  (log)  or  −r1_h · |i − j|^r2_h  (power); r1, r2 > 0 learned"
    )
    citation = "Chi et al. 2022, KERPLE: Kernelized Relative Positional Embedding for Length Extrapolation, section 4.2"
    Config = KERPLEConfig

    def __init__(self, config: KERPLEConfig) -> None:
        super().__init__(config)
        h = config.num_heads
        self.bias_p = nn.Parameter(torch.rand(h) * 2.0)  # [h] NeoX get_parameter(2, 'uniform')
        self.bias_a = nn.Parameter(torch.rand(h) * 1.0)  # [h] NeoX get_parameter(1, 'uniform')

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"num_heads": num_heads, "bidirectional": not causal}

    def kernel_parameters(self) -> tuple[Tensor, Tensor]:
        """``(r1, r2)`` ``[h]`` each, clamped positive (and the power's exponent at 2) as in NeoX."""
        if self.config.variant == "log":
            return _positive(self.bias_p), _positive(self.bias_a)
        return _positive(self.bias_a), _positive(self.bias_p, MAX_POWER)

    def relative_bias_values(self, rel: Tensor) -> Tensor:
        """``[h, w]``: the bias of a query at 0 against keys at ``rel`` (key minus query)."""
        distance = rel.abs() if self.config.bidirectional else (-rel).clamp(min=0)
        r1, r2 = self.kernel_parameters()
        return kerple_bias_values(r1, r2, distance, variant=self.config.variant)

    def score_mod(self, q_offset: int | Tensor) -> ScoreMod:
        r1, r2 = (r.detach() for r in self.kernel_parameters())
        return kerple_score_mod(
            r1, r2, variant=self.config.variant, q_offset=q_offset, bidirectional=self.config.bidirectional
        )

    def check_attention(self, *, dim: int, num_heads: int, head_dim: int, causal: bool) -> None:
        super().check_attention(dim=dim, num_heads=num_heads, head_dim=head_dim, causal=causal)
        if not causal and not self.config.bidirectional:
            raise ValueError(
                "causal KERPLE (bidirectional=False) scores only past keys and needs causal=True; "
                "use bidirectional=True for an encoder"
            )
