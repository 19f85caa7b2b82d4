"""Dynamic position bias: an MLP over the relative distance (Wang et al. 2021, "CrossFormer: A
Versatile Vision Transformer Hinging on Cross-scale Attention", section 3.3's DPB, in the 1-D form
of x-transformers' ``DynamicPositionBias``, ``x_transformers/x_transformers.py``).

Shape legend: ``h`` heads, ``sq``/``sk`` query/key positions, ``w`` distances, ``m`` hidden units.

The bias of query ``i`` against key ``j`` is ``MLP(x)_h`` of ``x = i - j``, or of
``sign(x) log(|x| + 1)`` with ``log_distance``; the MLP is ``Linear(1, m)``, then ``depth - 1``
times ``Linear(m, m)``, each followed by an optional LayerNorm (``norm``) and SiLU, then
``Linear(m, h)``. Module and parameter names match x-transformers (``mlp.0.0``, ``mlp.0.1.gamma``,
..., ``mlp.<depth>``), so its weights load directly. A function of ``i - j`` alone, so the bias
comes from :meth:`DynamicPositionBias.relative_bias_values` (Toeplitz build and cache); under
FlexAttention its score mod reads a table of those values over the call's distances.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..functional._checks import check_bool, check_positive_int, has_values
from ..kernels.flex import ScoreMod
from .base import PositionalEncoding, register

__all__ = ["DynamicPositionBias", "DPBConfig"]


@dataclass(frozen=True)
class DPBConfig:
    num_heads: int
    hidden_dim: int = 32  # the MLP's width (x-transformers' dim; its attention layers use model dim // 4)
    depth: int = 2  # hidden layers (x-transformers' dynamic_pos_bias_mlp_depth default)
    log_distance: bool = False  # MLP input sign(x) log(|x| + 1) instead of x = i - j
    norm: bool = False  # LayerNorm after each hidden linear layer

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_heads", check_positive_int("num_heads", self.num_heads))  # 8.0 -> 8
        object.__setattr__(self, "hidden_dim", check_positive_int("hidden_dim", self.hidden_dim))
        object.__setattr__(self, "depth", check_positive_int("depth", self.depth))
        check_bool("log_distance", self.log_distance)
        check_bool("norm", self.norm)


class _GammaLayerNorm(nn.Module):
    """LayerNorm without bias, scaled by ``gamma`` (x-transformers' ``LayerNorm``, used after the first layer)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return nn.functional.layer_norm(x, x.shape[-1:]) * self.gamma


@register
class DynamicPositionBias(PositionalEncoding):
    name = "dpb"
    family = "bias"
    formula = "logit(i, j) += MLP_h(i − j)  (or of sign·log(|i − j| + 1)),  Linear → [LayerNorm] → SiLU, × depth"
    citation = "Wang et al. 2021, CrossFormer, section 3.3 (DPB); x-transformers DynamicPositionBias"
    Config = DPBConfig

    def __init__(self, config: DPBConfig) -> None:
        super().__init__(config)
        m = config.hidden_dim
        blocks = [nn.Sequential(nn.Linear(1, m), *([_GammaLayerNorm(m)] if config.norm else []), nn.SiLU())]
        for _ in range(config.depth - 1):
            blocks.append(nn.Sequential(nn.Linear(m, m), *([nn.LayerNorm(m)] if config.norm else []), nn.SiLU()))
        self.mlp = nn.ModuleList([*blocks, nn.Linear(m, config.num_heads)])

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"num_heads": num_heads, "hidden_dim": max(dim // 4, 1)}  # x-transformers: dim // 4

    def relative_bias_values(self, rel: Tensor) -> Tensor:
        """``[h, w]``: the MLP at each distance ``i - j = -rel``, evaluated once per distinct distance
        (the same numbers whether ``rel`` lists a range's distances or every pair's)."""
        weight = self.mlp[0][0].weight
        if has_values(rel):
            distinct, inverse = torch.unique(-rel, return_inverse=True)  # [u], [w]
        else:  # compiling, a torch.func transform or the meta device: no values to sort
            distinct, inverse = -rel, slice(None)
        x = distinct.to(weight.dtype)[:, None]  # [u, 1]
        if self.config.log_distance:
            x = torch.sign(x) * torch.log(x.abs() + 1)
        for layer in self.mlp:
            x = layer(x)
        return x[inverse].t()  # [w, h] -> [h, w]

    score_mod_takes_lengths = True

    def score_mod(self, q_offset: int | Tensor, *, sq: int, sk: int) -> ScoreMod:
        """The bias as a FlexAttention score mod for ``sq`` queries ``q_offset`` positions past
        ``sk`` keys: the MLP runs once on the call's ``sq + sk - 1`` distances
        (:meth:`relative_bias_values`, detached) and the score mod reads that table, ``[h, w]``
        (O(L) memory), at ``i - j``: index ``q_idx - kv_idx + sk - 1`` whatever the offset. The
        MLP written out per score (``depth * m^2`` scalar terms) did not compile in minutes on the
        CPU; the table has the call's shape, which FlexAttention compiles for anyway."""
        sq, sk = check_positive_int("sq", sq), check_positive_int("sk", sk)
        device = self.mlp[0][0].weight.device
        distance = torch.arange(sq + sk - 1, device=device) + torch.as_tensor(q_offset, device=device) - (sk - 1)
        with torch.no_grad():
            table = self.relative_bias_values(-distance).detach()  # [h, w]: i - j = distance

        def dpb(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return score + table[h, q_idx - kv_idx + (sk - 1)].to(score.dtype)

        return dpb
