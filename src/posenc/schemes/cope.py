"""CoPE, contextual position encoding (Golovneva, Wang, Weston and Sukhbaatar 2024, "Contextual
Position Encoding: Learning to Count What's Important", section 3 and the code of appendix B).

Shape legend: ``b`` batch, ``h`` heads, ``sq``/``sk`` query/key positions, ``hd`` head width,
``P`` the number of position embeddings (``max_positions``, the paper's ``npos_max``).

Positions are counted, not indexed: each key ``t`` gets a gate ``g_it = sigmoid(z_it)`` from the
query's logit ``z_it`` (the scaled logit ``q_i · k_t / sqrt(hd)``, other biases and the mask
included, as the paper's ``SelfAttn`` passes it; masked keys get ``g = 0``), and the position of key
``j`` for query ``i`` is the number of gated keys from ``j`` to ``i``::

    p_ij = min(Σ_{t=j}^{i} g_it, P - 1),    z_ij += (1 - w) · q_i · e[⌊p_ij⌋] + w · q_i · e[⌈p_ij⌉],  w = p_ij - ⌊p_ij⌋

with ``e [P, hd]`` a learned table (zeros at initialisation, as in the paper and x-transformers).
Counts past the table clip at ``P - 1`` (the paper's ``pos.clamp(max=npos_max - 1)``): no sequence
is too long for it, keys further than ``P - 1`` gated keys all get ``e[P - 1]``.
Numerically identical to x-transformers' ``CoPE`` (``x_transformers/x_transformers.py``, default
path: ``soft_onehot=False``, ``talking_heads=False``) given the same ``pos_emb``.

Causal attention is the paper's form (a reversed cumulative sum over the keys). ``bidirectional=True``
(an encoder; the paper defines only the causal form) counts the gates between the query and the key
on either side, ``Σ_{t=i}^{j} g_it`` for keys after the query, with the same table: direction is lost.

The term needs the logits, so :class:`posenc.Attention` computes CoPE with explicit math
(``uses_query_terms``) through the :meth:`~posenc.PositionalEncoding.logit_term` hook; decoding with
a :class:`~posenc.KVCache` gets the logits of every cached key, as the full forward does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .. import functional as F
from ..functional._checks import check_bool, check_number, check_positive_int
from .base import PositionalEncoding, check_head_width, register

__all__ = ["CoPE", "CoPEConfig", "cope_positions"]


@dataclass(frozen=True)
class CoPEConfig:
    dim: int  # head width
    max_positions: int = 16  # P: counts clip at P - 1 (the paper's npos_max; x-transformers' cope_max_pos)
    bidirectional: bool = False  # False: the paper's causal count; True: count towards keys on either side
    init_std: float = 0.0  # the table starts at zeros (paper, x-transformers); > 0 draws it normal

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_positive_int("dim", self.dim))
        object.__setattr__(self, "max_positions", check_positive_int("max_positions", self.max_positions))
        check_bool("bidirectional", self.bidirectional)
        object.__setattr__(self, "init_std", check_number("init_std", self.init_std, low=0.0))


def cope_positions(gates: Tensor, max_positions: int, rel: Tensor | None = None) -> Tensor:
    """Contextual positions ``[..., sq, sk]`` from gates ``[..., sq, sk]`` (0 where masked), clipped at
    ``max_positions - 1``: the reversed cumulative sum over keys (paper, appendix B). ``rel``
    (``[(b,) sq, sk]``, key minus query position) gives the bidirectional count: keys after the
    query sum the gates from the query to them."""
    if rel is None:
        return gates.flip(-1).cumsum(dim=-1).flip(-1).clamp(max=max_positions - 1)  # [..., sq, sk]
    if rel.dim() == 3:
        rel = rel[:, None]  # [b, sq, sk] -> [b, 1, sq, sk]
    before, after = rel <= 0, rel >= 0  # the query's own key is in both
    back = (gates * before).flip(-1).cumsum(dim=-1).flip(-1)  # [..., sq, sk]: Σ_{t=j}^{i}
    ahead = (gates * after).cumsum(dim=-1)  # [..., sq, sk]: Σ_{t=i}^{j}
    return torch.where(before, back, ahead).clamp(max=max_positions - 1)


@register
class CoPE(PositionalEncoding):
    name = "cope"
    family = "relative"
    uses_query_terms = True
    data_dependent = True
    formula = "p_ij = min(Σ_{t=j}^{i} σ(z_it), P−1),  z_ij += q_i·e[p_ij] (e interpolated at ⌊p⌋, ⌈p⌉)"
    citation = "Golovneva et al. 2024, Contextual Position Encoding (CoPE), section 3 and appendix B"
    Config = CoPEConfig

    def __init__(self, config: CoPEConfig) -> None:
        super().__init__(config)
        self.pos_emb = nn.Parameter(torch.zeros(config.max_positions, config.dim))  # [P, hd]
        if config.init_std > 0:
            nn.init.normal_(self.pos_emb, std=config.init_std)

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"dim": head_dim, "bidirectional": not causal}

    def check_attention(self, *, dim: int, num_heads: int, head_dim: int, causal: bool) -> None:
        super().check_attention(dim=dim, num_heads=num_heads, head_dim=head_dim, causal=causal)
        if not causal and not self.config.bidirectional:
            raise ValueError(
                "causal CoPE (bidirectional=False) counts only past keys and needs causal=True; "
                "use bidirectional=True for an encoder"
            )

    def logit_term(self, q: Tensor, logits: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """``q_i · e[p_ij]`` interpolated: ``[b, h, sq, sk]`` from the scaled, masked logits."""
        check_head_width(self.name, self.config.dim, q)
        if not isinstance(logits, Tensor) or logits.dim() != 4 or logits.shape[:3] != q.shape[:3]:
            got = f"shape {tuple(logits.shape)}" if isinstance(logits, Tensor) else type(logits).__name__
            raise ValueError(
                f"cope: logits must be the scaled, masked logits [b, h, sq, sk] of the queries "
                f"{tuple(q.shape)} (b, h, sq = {tuple(q.shape[:3])}), got {got}"
            )
        rel = None
        if self.config.bidirectional:
            rel = F.relative_positions(F.as_positions(q_positions), F.as_positions(k_positions)).to(q.device)
            if rel.shape[-2:] != logits.shape[-2:] or (rel.dim() == 3 and rel.shape[0] not in (1, logits.shape[0])):
                raise ValueError(
                    f"cope: query and key positions giving distances {tuple(rel.shape)} do not fit the logits "
                    f"[b, h, sq, sk] = {tuple(logits.shape)}: expected [s] or [b, s] positions with "
                    f"sq = {logits.shape[-2]} query and sk = {logits.shape[-1]} key positions"
                )
        pos = cope_positions(logits.sigmoid(), self.config.max_positions, rel)  # [b, h, sq, sk]
        per_position = q @ self.pos_emb.to(q.dtype).T  # [b, h, sq, P]
        floor = pos.floor()
        w = pos - floor  # [b, h, sq, sk]
        low = per_position.gather(-1, floor.long())  # [b, h, sq, sk]
        high = per_position.gather(-1, pos.ceil().long())  # [b, h, sq, sk]
        return high * w + low * (1 - w)
