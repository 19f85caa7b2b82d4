"""Shaw et al.'s relative position representations (Shaw, Uszkoreit and Vaswani 2018,
"Self-Attention with Relative Position Representations", section 3).

Shape legend: ``b`` batch, ``h`` heads, ``sq``/``sk`` query/key positions, ``hd`` head width,
``K`` the clipping distance (``2K + 1`` embeddings).

    e_ij = q_i · (k_j + a^K_ij) / sqrt(hd),    z_i = Σ_j α_ij (v_j + a^V_ij)

with ``a_ij = w[clip(j - i, -K, K)]``, shared across heads. The query-dependent term is computed
as ``q @ w^K.T`` (``[b, h, sq, 2K+1]``) gathered at the pair's index, and the value term by summing
the weights per relative index before multiplying with ``w^V``: memory ``O(s · K)``, not ``O(s² · hd)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from .. import functional as F
from ..functional._checks import check_bool, check_number, check_positive_int
from .base import PositionalEncoding, check_head_width, register

__all__ = ["Shaw", "ShawConfig"]


@dataclass(frozen=True)
class ShawConfig:
    dim: int  # head width
    #: K: distances beyond share the edge embeddings; or (left, right): keys before the query clip at
    #: left, after it at right (HF Wav2Vec2-BERT / SeamlessM4T ``relative_key``: 64 and 8)
    max_relative_position: int | tuple[int, int] = 16
    values: bool = True  # also add a^V to the values (the paper's full form)
    init_std: float = 0.02

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_positive_int("dim", self.dim))  # 8.0 -> 8
        left, right = F.relative_clip(self.max_relative_position)
        object.__setattr__(
            self,
            "max_relative_position",
            left if left == right and not isinstance(self.max_relative_position, (tuple, list)) else (left, right),
        )
        check_bool("values", self.values)
        check_number("init_std", self.init_std, low=0.0)


@register
class Shaw(PositionalEncoding):
    name = "shaw"
    family = "relative"
    uses_query_terms = True
    formula = "e_ij = q_i·(k_j + a^K[clip(j−i, −K, K)]) / √d,  z_i = Σ_j α_ij (v_j + a^V[clip(j−i, −K, K)])"
    citation = "Shaw, Uszkoreit and Vaswani 2018, Self-Attention with Relative Position Representations, section 3"
    Config = ShawConfig

    def __init__(self, config: ShawConfig) -> None:
        super().__init__(config)
        left, right = F.relative_clip(config.max_relative_position)
        n = left + right + 1
        self.key_embeddings = nn.Embedding(n, config.dim)
        nn.init.normal_(self.key_embeddings.weight, std=config.init_std)
        self.value_embeddings: nn.Embedding | None = None
        if config.values:
            self.value_embeddings = nn.Embedding(n, config.dim)
            nn.init.normal_(self.value_embeddings.weight, std=config.init_std)

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"dim": head_dim}

    def index(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """Embedding index of every pair ``[..., sq, sk]`` in ``[0, 2K]`` (``[0, left + right]``)."""
        return F.clipped_relative_index(
            F.as_positions(q_positions), F.as_positions(k_positions), self.config.max_relative_position
        )

    @staticmethod
    def _expand(index: Tensor, b: int, h: int) -> Tensor:
        if index.dim() == 2:
            return index.expand(b, h, *index.shape)  # [sq, sk] -> [b, h, sq, sk]
        return index[:, None].expand(b, h, *index.shape[1:])  # [b, sq, sk] -> [b, h, sq, sk]

    def query_scores(self, q: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """``q_i · a^K_ij``: ``[b, h, sq, sk]`` (unscaled; attention scales it with ``q · k``)."""
        check_head_width(self.name, self.config.dim, q)
        b, h = q.shape[:2]
        index = self._expand(self.index(q_positions, k_positions).to(q.device), b, h)  # [b, h, sq, sk]
        per_distance = q @ self.key_embeddings.weight.to(q.dtype).T  # [b, h, sq, 2K+1]
        return per_distance.gather(-1, index)  # [b, h, sq, sk]

    def value_term(self, probs: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor | None:
        """``Σ_j α_ij a^V_ij``: ``[b, h, sq, hd]``."""
        if self.value_embeddings is None:
            return None
        b, h, sq, _ = probs.shape
        index = self._expand(self.index(q_positions, k_positions).to(probs.device), b, h)  # [b, h, sq, sk]
        n = self.value_embeddings.num_embeddings
        per_distance = probs.new_zeros(b, h, sq, n).scatter_add_(-1, index, probs)  # [b, h, sq, 2K+1]
        return per_distance @ self.value_embeddings.weight.to(probs.dtype)  # [b, h, sq, hd]
