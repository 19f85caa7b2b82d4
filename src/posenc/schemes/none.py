"""No positional encoding ("NoPE").

Without any encoding, self-attention is permutation-equivariant: it sees a bag of words. In a
causal decoder the mask alone still leaks order (Haviv et al. 2022, "Transformer Language Models
without Positional Encodings Still Learn Positional Information"; Kazemnejad et al. 2023).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..functional._checks import check_positive_int
from .base import PositionalEncoding, register

__all__ = ["NoPositionalEncoding", "NoneConfig"]


@dataclass(frozen=True)
class NoneConfig:
    """No options; ``dim`` is accepted (and ignored) so that every scheme takes the common keys."""

    dim: int | None = None

    def __post_init__(self) -> None:
        if self.dim is not None:
            object.__setattr__(self, "dim", check_positive_int("dim", self.dim))


@register
class NoPositionalEncoding(PositionalEncoding):
    name = "none"
    family = "none"
    formula = "x_p = e(w_p)   (no position information)"
    citation = "Haviv et al. 2022; Kazemnejad et al. 2023 (NoPE)"
    Config = NoneConfig

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {}
