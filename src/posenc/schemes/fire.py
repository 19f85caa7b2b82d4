"""FIRE: functional interpolation for relative positions (Li et al. 2024, "Functional Interpolation
for Relative Positions Improves Long Context Transformers", ICLR, section 3.2 and appendix A's code).

Shape legend: ``h`` heads, ``sq``/``sk`` query/key positions, ``b`` batch, ``n`` pairs, ``u``
distinct normalised distances, ``w`` hidden units of the MLP.

The bias of query ``i`` against key ``j <= i`` (causal attention) is

    b_h(i, j) = f_h( psi(i - j) / psi(max(L, i)) ),   psi(x) = log(|c x| + 1),

``f`` a two-layer MLP ``1 -> hidden_dim -> num_heads`` with a ReLU (the paper: width 32), ``c``
learned (initialised at 0.1) and the threshold ``L = |L_multiplier * init_L|`` with ``init_L = 512``
fixed and ``L_multiplier`` learned (initialised at 1): the "progressive interpolation" with a
learnable threshold of section 3.2, kept positive by the absolute value as in the appendix code;
``eps = 1e-6`` is added to the normaliser as there. Parameter names follow that code (``mlp.0``,
``mlp.2``, ``c``, ``L_multiplier``); its frozen ``init_L`` is a config value here.

The normaliser depends on the query position ``i`` itself, so the bias is not a function of
``i - j`` alone: :meth:`FIRE.bias` evaluates the MLP once per distinct normalised distance, and the
FlexAttention score mod computes the MLP per score from the captured weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .. import functional as F
from ..functional._checks import check_number, check_positive_int, has_values
from ..kernels.flex import ScoreMod
from .base import PositionalEncoding, check_bias_fits, register

__all__ = ["FIRE", "FIREConfig", "fire_score_mod"]


@dataclass(frozen=True)
class FIREConfig:
    num_heads: int
    hidden_dim: int = 32  # the MLP's width (the paper's mlp_width)
    init_c: float = 0.1  # psi's scale c at initialisation (appendix code)
    init_L: float = 512.0  # the threshold L at initialisation; L = |L_multiplier * init_L|
    eps: float = 1e-6  # added to the normaliser psi(max(L, i)) (appendix code)

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_heads", check_positive_int("num_heads", self.num_heads))  # 8.0 -> 8
        object.__setattr__(self, "hidden_dim", check_positive_int("hidden_dim", self.hidden_dim))
        object.__setattr__(self, "init_c", check_number("init_c", self.init_c, positive=True))
        object.__setattr__(self, "init_L", check_number("init_L", self.init_L, positive=True))
        object.__setattr__(self, "eps", check_number("eps", self.eps, positive=True))


def fire_normalised_distance(query: Tensor, distance: Tensor, c: Tensor, threshold: Tensor, eps: float) -> Tensor:
    """``psi(i - j) / (psi(max(L, i)) + eps)`` with ``psi(x) = log(|c x| + 1)``, for query positions
    ``query`` and distances ``distance = i - j`` (broadcast together, float)."""
    normaliser = torch.log(torch.abs(c * torch.maximum(query, threshold)) + 1) + eps
    return torch.log(torch.abs(c * distance) + 1) / normaliser


def fire_score_mod(
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
    c: Tensor,
    threshold: Tensor,
    *,
    eps: float = 1e-6,
    q_offset: int | Tensor = 0,
    k_start: int | Tensor = 0,
) -> ScoreMod:
    """FIRE as a FlexAttention score mod: the MLP ``relu(x w1 + b1) @ w2.T + b2`` written out as a
    sum over its ``w`` hidden units, evaluated at each score's normalised distance ``x``.

    ``w1, b1 [w]`` (the first layer's weight column and bias), ``w2 [h, w]``, ``b2 [h]``, ``c`` and
    ``threshold`` 0-d; query ``q_idx`` sits at position ``k_start + q_offset + q_idx`` and key
    ``kv_idx`` at ``k_start + kv_idx``. The offsets are captured as tensors (a new one does not
    recompile)."""
    offset = torch.as_tensor(q_offset, device=w1.device)
    start = torch.as_tensor(k_start, device=w1.device)
    hidden = w1.shape[0]

    def fire(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        query = (q_idx + offset + start).to(w1.dtype)
        x = fire_normalised_distance(query, (q_idx + offset - kv_idx).to(w1.dtype), c, threshold, eps)
        out = b2[h]
        for k in range(hidden):  # unrolled when traced: one fused expression per score
            out = out + torch.relu(x * w1[k] + b1[k]) * w2[h, k]
        return score + out

    return fire


@register
class FIRE(PositionalEncoding):
    name = "fire"
    family = "bias"
    formula = "logit(i, j) += f_h(ψ(i − j) / ψ(max(L, i))),  ψ(x) = log(c·x + 1),  f an MLP, c and L learned (causal)"
    citation = "Li et al. 2024, Functional Interpolation for Relative Positions (FIRE), ICLR, section 3 and appendix"
    Config = FIREConfig
    score_mod_takes_k_start = True

    def __init__(self, config: FIREConfig) -> None:
        super().__init__(config)
        self.mlp = nn.Sequential(
            nn.Linear(1, config.hidden_dim), nn.ReLU(), nn.Linear(config.hidden_dim, config.num_heads)
        )
        self.c = nn.Parameter(torch.tensor(config.init_c))
        self.L_multiplier = nn.Parameter(torch.tensor(1.0))

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"num_heads": num_heads}

    def threshold(self) -> Tensor:
        """The learned threshold ``L = |L_multiplier * init_L|`` (0-d)."""
        return torch.abs(self.L_multiplier * self.config.init_L)

    def bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """``[h, sq, sk]`` for positions ``[s]``; ``[b, h, sq, sk]`` for positions ``[b, s]``. Keys
        after the query get the bias of ``|i - j|`` (the causal mask hides them)."""
        weight = self.mlp[0].weight
        check_bias_fits(q_positions, k_positions, self.config.num_heads, weight.dtype, weight.device)
        q = F.as_positions(q_positions, device=weight.device)
        k = F.as_positions(k_positions, device=weight.device)
        rel = F.relative_positions(q, k)  # [..., sq, sk]: j - i
        dtype = torch.promote_types(weight.dtype, torch.float32)  # positions never in 16 bits
        query = q.to(dtype)[..., :, None]  # [..., sq, 1]
        x = fire_normalised_distance(
            query, -rel.to(dtype), self.c.to(dtype), self.threshold().to(dtype), self.config.eps
        )
        flat = x.flatten()  # [n]
        if not has_values(flat):  # compiling, a torch.func transform or the meta device: every pair
            return self.mlp(flat[:, None].to(weight.dtype)).unflatten(0, x.shape).movedim(-1, -3)
        # f on the distinct values only (a function of i - j alone for queries below L): their
        # first occurrences are gathered from x itself, so gradients still reach c and L
        distinct, inverse = torch.unique(flat.detach(), return_inverse=True)  # [u], [n]
        n = flat.shape[0]
        first = torch.full((distinct.shape[0],), n, device=flat.device).scatter_reduce(
            0, inverse, torch.arange(n, device=flat.device), reduce="amin"
        )  # [u]
        values = self.mlp(flat[first, None].to(weight.dtype))  # [u, h]
        return values[inverse].unflatten(0, x.shape).movedim(-1, -3)  # [..., sq, sk, h] -> [..., h, sq, sk]

    def score_mod(self, q_offset: int | Tensor, k_start: int | Tensor = 0) -> ScoreMod:
        first, second = self.mlp[0], self.mlp[2]
        return fire_score_mod(
            first.weight.detach()[:, 0].float(),
            first.bias.detach().float(),
            second.weight.detach().float(),
            second.bias.detach().float(),
            self.c.detach().float(),
            self.threshold().detach().float(),
            eps=self.config.eps,
            q_offset=q_offset,
            k_start=k_start,
        )

    def check_attention(self, *, dim: int, num_heads: int, head_dim: int, causal: bool) -> None:
        super().check_attention(dim=dim, num_heads=num_heads, head_dim=head_dim, causal=causal)
        if not causal:
            raise ValueError(
                "fire is defined for causal attention (keys j <= i; its normaliser psi(max(L, i)) follows the "
                "query), got causal=False; use it with causal=True"
            )
