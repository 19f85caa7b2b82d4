"""Forgetting attention: softmax attention with a forget gate (Lin, Nikishin, He and Courville 2025,
"Forgetting Transformer: Softmax Attention with a Forget Gate", ICLR, section 2), the
"data-dependent ALiBi" of x-transformers.

Shape legend: ``b`` batch, ``h`` heads, ``s`` new tokens, ``sq``/``sk`` query/key positions,
``d`` the layer's input width.

Each head forgets at a rate read from the layer input ``x``::

    f_t = sigmoid(w_h · x_t + b_h),    c_i = Σ_{t <= i} log f_t,    logit(i, j) += Σ_{j < t <= i} log f_t = c_i - c_j

for keys ``j <= i``: the paper's form, for causal attention. Numerically identical to
x-transformers' ``DataDependentAlibi`` (``x_transformers/x_transformers.py``, ``causal=True``)
given the same weights: one ``nn.Linear(d, h)`` with its bias initialised to ``bias_init``
(5: ``f ≈ 0.993``, x-transformers' default; the authors' code, ``forgetting-transformer``'s
``ForgettingAttentionLayer``, starts the bias at 0 and the weights at N(0, 0.02): ``bias_init=0,
weight_std=0.02``), ``LogSigmoid``, times ``post_log_scale``, cumulative sum, ``c_i - c_j``.

``bidirectional=True`` (an encoder; the paper defines only the causal form) is x-transformers'
``DataDependentAlibi(causal=False)``: a second set of gates ``f'`` (the linear layer gives ``2h``
outputs, the second ``h`` of them) forgets towards later keys, ``logit(i, j) += c'_j - c'_i =
Σ_{i < t <= j} log f'_t`` for keys ``j > i``, the first set serving keys ``j <= i`` as above.

Through :class:`posenc.Attention` (``uses_input_terms``): :meth:`input_terms` gives ``log f``
``[b, h, s]`` of the new tokens, the :class:`~posenc.KVCache` keeps those of the cached ones, and
:meth:`input_bias` takes the cumulative sum over all of them, so that decoding equals the full
forward. :meth:`bias` alone has no input and raises.

:func:`forgetting_score_mod` is the bias as a FlexAttention score mod over the captured ``c``
``[b, h, L]``: O(L) memory, ``[b, h, sq, sk]`` is never built. :meth:`Forgetting.score_mod` makes it
from the input terms (``score_mod(q_offset, terms=...)``, see :func:`posenc.kernels.flex.attend`), and
:class:`posenc.Attention` takes that path wherever it takes FlexAttention for the other score-mod
schemes (inference; training materialises ``c_i - c_j``, so that the gates get their gradients),
decoding with a KV cache included: the cache's terms of every key, queries ``past`` keys after the
first. The compiled kernel specialises on ``c``'s shape, so each new length compiles anew.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as nnf
from torch import Tensor, nn

from ..functional._checks import check_bool, check_number, check_positive_int
from ..kernels.flex import ScoreMod
from .base import PositionalEncoding, register

__all__ = ["Forgetting", "ForgettingConfig", "forgetting_score_mod"]


@dataclass(frozen=True)
class ForgettingConfig:
    dim: int  # width of the layer input x the gates are read from (the model width)
    num_heads: int
    bias_init: float = 5.0  # b_h at initialisation: f = sigmoid(5) ≈ 0.993 (x-transformers' default)
    post_log_scale: float = 1.0  # log f is multiplied by it (x-transformers' post_log_scale)
    bidirectional: bool = False  # True: a second set of gates for later keys (DataDependentAlibi(causal=False))
    # gate weights drawn N(0, weight_std) (0.02 with bias_init=0: the authors' code, whose
    # ForgettingAttentionLayer._initialize_weights zeroes the bias); None: torch's nn.Linear default
    weight_std: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_positive_int("dim", self.dim))
        object.__setattr__(self, "num_heads", check_positive_int("num_heads", self.num_heads))
        object.__setattr__(self, "bias_init", check_number("bias_init", self.bias_init))
        if self.weight_std is not None:
            object.__setattr__(self, "weight_std", check_number("weight_std", self.weight_std, low=0.0))
        object.__setattr__(self, "post_log_scale", check_number("post_log_scale", self.post_log_scale, low=0.0))
        check_bool("bidirectional", self.bidirectional)

    @property
    def gates(self) -> int:
        """Gates per token: ``num_heads``, twice that when bidirectional."""
        return self.num_heads * (2 if self.bidirectional else 1)


def _check_terms(terms: object, gates: int, sq: object) -> int:
    """Raise unless ``terms`` are float log forget gates ``[b, gates, sk]`` and ``sq`` (the
    queries: the last ``sq`` keys) an int in ``0 .. sk``; returns ``sq``."""
    if not isinstance(terms, Tensor):
        raise TypeError(
            f"forgetting: terms must be the log forget gates [b, h, sk] of every key (input_terms(x)), "
            f"got {type(terms).__name__}"
        )
    if terms.dim() != 3 or terms.shape[1] != gates or not terms.is_floating_point():
        raise ValueError(
            f"forgetting: terms must be floating-point log forget gates [b, h, sk] with h = {gates} "
            f"(num_heads, twice that when bidirectional: input_terms(x)), got shape {tuple(terms.shape)} "
            f"and dtype {terms.dtype}"
        )
    sk = terms.shape[-1]
    # a torch.SymInt under torch.export with a dynamic length: an int to every check here
    if isinstance(sq, bool) or not isinstance(sq, (int, torch.SymInt)) or not 0 <= sq <= sk:
        raise ValueError(
            f"forgetting: sq (the queries, the last sq of the {sk} keys) must be an int in 0..{sk}, got {sq!r}"
        )
    return sq


def forgetting_score_mod(cumulative: Tensor, *, q_offset: int | Tensor = 0, ahead: Tensor | None = None) -> ScoreMod:
    """Forgetting attention as a FlexAttention score mod: ``score + c[b, h, i] - c[b, h, j]`` with
    ``i = q_idx + q_offset`` for the cumulative log forget gates ``cumulative`` ``[b, h, sk]`` of every
    key (queries are ``q_offset`` keys past the first); use it with a causal block mask. ``ahead``
    (``[b, h, sk]``, the cumulative second gates of the bidirectional form) gives keys ``j > i``
    ``c'[b, h, j] - c'[b, h, i]`` instead (no mask)."""
    for name, c in (("cumulative", cumulative), ("ahead", ahead)):
        if c is not None and (not isinstance(c, Tensor) or c.dim() != 3):
            shape = tuple(c.shape) if isinstance(c, Tensor) else type(c).__name__
            raise ValueError(f"{name} must be the cumulative log forget gates [b, h, sk], got {shape}")
    if ahead is not None and ahead.shape != cumulative.shape:
        raise ValueError(f"ahead {tuple(ahead.shape)} must have the shape of cumulative {tuple(cumulative.shape)}")
    offset = torch.as_tensor(q_offset, device=cumulative.device)

    def forgetting(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return score + (cumulative[b, h, q_idx + offset] - cumulative[b, h, kv_idx])

    def both_ways(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        i = q_idx + offset
        past = cumulative[b, h, i] - cumulative[b, h, kv_idx]
        future = ahead[b, h, kv_idx] - ahead[b, h, i]
        return score + torch.where(kv_idx > i, future, past)

    return forgetting if ahead is None else both_ways


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
        self.forget_gates = nn.Linear(config.dim, config.gates)  # x [b, s, d] -> [b, s, h] ([b, s, 2h] bidirectional)
        nn.init.constant_(self.forget_gates.bias, config.bias_init)
        if config.weight_std is not None:
            nn.init.normal_(self.forget_gates.weight, std=config.weight_std)

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"dim": dim, "num_heads": num_heads, "bidirectional": not causal}

    def check_attention(self, *, dim: int, num_heads: int, head_dim: int, causal: bool) -> None:
        super().check_attention(dim=dim, num_heads=num_heads, head_dim=head_dim, causal=causal)
        if self.config.dim != dim:
            raise ValueError(
                f"forgetting reads the layer input: its dim must be Attention's dim {dim}, got {self.config.dim}"
            )
        if not causal and not self.config.bidirectional:
            raise ValueError(
                "causal forgetting attention (bidirectional=False) forgets the past only and needs causal=True; "
                "use bidirectional=True for an encoder"
            )

    def input_terms(self, x: Tensor) -> Tensor:
        """``log f_t`` (times ``post_log_scale``): ``x [b, s, d]`` -> ``[b, h, s]`` (bidirectional:
        ``[b, 2h, s]``, the gates towards later keys second)."""
        if not isinstance(x, Tensor) or x.dim() != 3 or x.shape[-1] != self.config.dim:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"forgetting reads a layer input x [b, s, d] with d = {self.config.dim}, got {shape}")
        logits = self.forget_gates(x.to(self.forget_gates.weight.dtype))  # [b, s, h]
        return nnf.logsigmoid(logits).transpose(1, 2) * self.config.post_log_scale  # [b, h, s]

    def input_bias(self, terms: Tensor, sq: int) -> Tensor:
        """``c_i - c_j`` ``[b, h, sq, sk]`` for the last ``sq`` of the keys with terms ``[b, h, sk]``
        (positive above the diagonal: the causal mask removes it); bidirectional, from terms
        ``[b, 2h, sk]``, ``c'_j - c'_i`` above the diagonal."""
        sq = _check_terms(terms, self.config.gates, sq)
        c = terms.cumsum(dim=-1)  # [b, h, sk] ([b, 2h, sk] bidirectional)
        sk = c.shape[-1]
        if not self.config.bidirectional:
            return c[..., sk - sq :, None] - c[..., None, :]  # [b, h, sq, sk]
        back, ahead = c.chunk(2, dim=1)  # [b, h, sk] each
        past = back[..., sk - sq :, None] - back[..., None, :]  # [b, h, sq, sk]: c_i - c_j
        future = ahead[..., None, :] - ahead[..., sk - sq :, None]  # [b, h, sq, sk]: c'_j - c'_i
        later = torch.arange(sk, device=c.device) > torch.arange(sk - sq, sk, device=c.device)[:, None]  # [sq, sk]
        return torch.where(later, future, past)

    def score_mod(self, q_offset: int | Tensor, *, terms: Tensor | None = None) -> ScoreMod | None:
        """:func:`forgetting_score_mod` over the cumulative sum of ``terms [b, h, sk]`` (every key's
        log forget gates, captured detached, in float32 or wider), for queries ``q_offset`` keys after
        the first; None without ``terms`` (there is no bias without the layer input)."""
        if terms is None:
            return None
        _check_terms(terms, self.config.gates, 0)
        dtype = torch.promote_types(terms.dtype, torch.float32)
        c = terms.detach().to(dtype).cumsum(dim=-1)  # [b, h, sk] ([b, 2h, sk] bidirectional)
        if not self.config.bidirectional:
            return forgetting_score_mod(c, q_offset=q_offset)
        back, ahead = (half.contiguous() for half in c.chunk(2, dim=1))  # [b, h, sk] each
        return forgetting_score_mod(back, q_offset=q_offset, ahead=ahead)

    def bias(self, q_positions: Tensor, k_positions: Tensor, *, out: Tensor | None = None) -> Tensor:
        raise ValueError(
            "forgetting attention's bias depends on the layer input x, not on positions alone: use it "
            "through posenc.Attention, or call input_bias(input_terms(x), sq)"
        )
