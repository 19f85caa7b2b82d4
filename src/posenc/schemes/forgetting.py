"""Forgetting attention: softmax attention with a forget gate (Lin, Nikishin, He and Courville 2025,
"Forgetting Transformer: Softmax Attention with a Forget Gate", ICLR, section 2), the
"data-dependent ALiBi" of x-transformers.

Shape legend: ``b`` batch, ``h`` heads, ``s`` new tokens, ``sq``/``sk`` query/key positions,
``d`` the layer's input width.

Each head forgets at a rate read from the layer input ``x``::

    f_t = sigmoid(w_h · x_t + b_h),    c_i = Σ_{t <= i} log f_t,    logit(i, j) += Σ_{j < t <= i} log f_t = c_i - c_j

for keys ``j <= i`` (causal only). Numerically identical to x-transformers' ``DataDependentAlibi``
(``x_transformers/x_transformers.py``, ``causal=True``) given the same weights: one
``nn.Linear(d, h)`` with its bias initialised to ``bias_init`` (5: ``f ≈ 0.993``), ``LogSigmoid``,
times ``post_log_scale``, cumulative sum, ``c_i - c_j``.

Through :class:`posenc.Attention` (``uses_input_terms``): :meth:`input_terms` gives ``log f``
``[b, h, s]`` of the new tokens, the :class:`~posenc.KVCache` keeps those of the cached ones, and
:meth:`input_bias` takes the cumulative sum over all of them, so that decoding equals the full
forward. :meth:`bias` alone has no input and raises.

:func:`forgetting_score_mod` is the bias as a FlexAttention score mod over the captured ``c``
``[b, h, L]``, O(L) memory; the compiled kernel specialises on ``c``'s shape, so each new length
compiles anew. :class:`posenc.Attention` does not take that path (it materialises ``c_i - c_j``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as nnf
from torch import Tensor, nn

from ..functional._checks import check_number, check_positive_int
from ..kernels.flex import ScoreMod
from .base import PositionalEncoding, register

__all__ = ["Forgetting", "ForgettingConfig", "forgetting_score_mod"]


@dataclass(frozen=True)
class ForgettingConfig:
    dim: int  # width of the layer input x the gates are read from (the model width)
    num_heads: int
    bias_init: float = 5.0  # b_h at initialisation: f = sigmoid(5) ≈ 0.993 (x-transformers' default)
    post_log_scale: float = 1.0  # log f is multiplied by it (x-transformers' post_log_scale)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_positive_int("dim", self.dim))
        object.__setattr__(self, "num_heads", check_positive_int("num_heads", self.num_heads))
        object.__setattr__(self, "bias_init", check_number("bias_init", self.bias_init))
        object.__setattr__(self, "post_log_scale", check_number("post_log_scale", self.post_log_scale, low=0.0))


def forgetting_score_mod(cumulative: Tensor, *, q_offset: int | Tensor = 0) -> ScoreMod:
    """Forgetting attention as a FlexAttention score mod: ``score + c[b, h, q + q_offset] - c[b, h, k]``
    for the cumulative log forget gates ``cumulative`` ``[b, h, sk]`` of every key (queries are
    ``q_offset`` keys past the first). Causal: use it with a causal block mask."""
    if not isinstance(cumulative, Tensor) or cumulative.dim() != 3:
        shape = tuple(cumulative.shape) if isinstance(cumulative, Tensor) else type(cumulative).__name__
        raise ValueError(f"cumulative must be the cumulative log forget gates [b, h, sk], got {shape}")
    offset = torch.as_tensor(q_offset, device=cumulative.device)

    def forgetting(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return score + (cumulative[b, h, q_idx + offset] - cumulative[b, h, kv_idx])

    return forgetting


@register
class Forgetting(PositionalEncoding):
    name = "forgetting"
    family = "bias"
    uses_input_terms = True
    data_dependent = True
    formula = "logit(i, j) += Σ_{j<t≤i} log f_t,  f_t = σ(w_h·x_t + b_h)  (per head, from the layer input)"
    citation = "Lin et al. 2025, Forgetting Transformer: Softmax Attention with a Forget Gate (ICLR), section 2"
    Config = ForgettingConfig

    def __init__(self, config: ForgettingConfig) -> None:
        super().__init__(config)
        self.forget_gates = nn.Linear(config.dim, config.num_heads)  # x [b, s, d] -> [b, s, h]
        nn.init.constant_(self.forget_gates.bias, config.bias_init)

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"dim": dim, "num_heads": num_heads}

    def check_attention(self, *, dim: int, num_heads: int, head_dim: int, causal: bool) -> None:
        super().check_attention(dim=dim, num_heads=num_heads, head_dim=head_dim, causal=causal)
        if self.config.dim != dim:
            raise ValueError(
                f"forgetting reads the layer input: its dim must be Attention's dim {dim}, got {self.config.dim}"
            )
        if not causal:
            raise ValueError("forgetting attention forgets the past only and needs causal=True")

    def input_terms(self, x: Tensor) -> Tensor:
        """``log f_t`` (times ``post_log_scale``): ``x [b, s, d]`` -> ``[b, h, s]``."""
        if not isinstance(x, Tensor) or x.dim() != 3 or x.shape[-1] != self.config.dim:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"forgetting reads a layer input x [b, s, d] with d = {self.config.dim}, got {shape}")
        logits = self.forget_gates(x.to(self.forget_gates.weight.dtype))  # [b, s, h]
        return nnf.logsigmoid(logits).transpose(1, 2) * self.config.post_log_scale  # [b, h, s]

    def input_bias(self, terms: Tensor, sq: int) -> Tensor:
        """``c_i - c_j`` ``[b, h, sq, sk]`` for the last ``sq`` of the keys with terms ``[b, h, sk]``
        (positive above the diagonal: the causal mask removes it)."""
        c = terms.cumsum(dim=-1)  # [b, h, sk]
        return c[..., -sq:, None] - c[..., None, :]  # [b, h, sq, sk]

    def bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        raise ValueError(
            "forgetting attention's bias depends on the layer input x, not on positions alone: use it "
            "through posenc.Attention, or call input_bias(input_terms(x), sq)"
        )
