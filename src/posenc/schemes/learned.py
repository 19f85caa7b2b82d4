"""Learned absolute position embeddings: one trainable row per position up to ``max_len``.

Gehring et al. 2017, "Convolutional Sequence to Sequence Learning"; GPT-2's ``wpe`` (initialised
N(0, 0.02) as there). The table has nothing to say past its last row: asking for a position beyond
it is an error, not a silent wrap-around.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from .. import functional as F
from ..functional._checks import check_integer_positions, check_number, check_positive_int, has_values
from ..kernels.ranges import known_range
from .absolute import AbsoluteEncoding, check_combine
from .base import register

__all__ = ["Learned", "LearnedConfig"]


@dataclass(frozen=True)
class LearnedConfig:
    dim: int  # width of each row (the embedding width when added)
    max_len: int = 512  # number of rows: positions 0 .. max_len - 1
    combine: str = "add"  # "add" or "concat"
    init_std: float = 0.02  # GPT-2's initialisation

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_positive_int("dim", self.dim))  # 8.0 -> 8
        object.__setattr__(self, "max_len", check_positive_int("max_len", self.max_len))
        check_combine(self.combine)
        check_number("init_std", self.init_std, low=0.0)


@register
class Learned(AbsoluteEncoding):
    name = "learned"
    formula = "PE(p) = W[p],  W a trainable max_len × d table"
    citation = "Gehring et al. 2017 (ConvS2S); Radford et al. 2019 (GPT-2 wpe)"
    Config = LearnedConfig

    def __init__(self, config: LearnedConfig) -> None:
        super().__init__(config)
        self.table = nn.Embedding(config.max_len, config.dim)
        nn.init.normal_(self.table.weight, std=config.init_std)

    def encode(self, positions: Tensor | int) -> Tensor:
        positions = F.as_positions(positions, device=self.table.weight.device)
        positions = check_integer_positions(positions, "a learned position table")
        max_len = self.config.max_len
        if has_values(positions) and positions.numel():
            start = known_range(positions)  # a range made by default_positions: its ends without a read-back
            low, high = (
                (int(positions.min()), int(positions.max()))
                if start is None
                else (start, start + positions.numel() - 1)
            )
            if low < 0 or high >= max_len:
                bad = high if high >= max_len else low
                raise ValueError(
                    f"position {bad} is outside the learned table (max_len={max_len}: positions "
                    f"0..{max_len - 1}); build it with a larger max_len"
                )
        elif torch.compiler.is_compiling() and positions.numel():  # no host read in a graph: an op that checks
            positions = _positions_in_table(positions, max_len)
        return self.table(positions)  # [*p, dim]

    def resized(self, max_len: int, *, mode: str = "linear") -> Learned:
        """A copy whose table is resampled to ``max_len`` rows (``mode`` "linear" or "cubic", as
        :func:`posenc.functional.interpolate_positions`; transformers' ``interpolate_pos_encoding``
        for a 2-D grid of patches is :func:`posenc.functional.interpolate_grid`)."""
        new = type(self)(replace(self.config, max_len=check_positive_int("max_len", max_len)))
        with torch.no_grad():
            new.table.weight.copy_(F.interpolate_positions(self.table.weight, max_len, mode=mode))
        return new.to(self.table.weight.device)


@torch.library.custom_op("posenc::positions_in_table", mutates_args=())
def _positions_in_table(positions: Tensor, max_len: int) -> Tensor:
    """A copy of ``positions`` once checked to index a table of ``max_len`` rows, else RuntimeError.

    A custom operator, so that a compiled graph runs the check (a read of the values, when the
    graph runs) without a graph break; eagerly :meth:`Learned.encode` checks on the host itself.
    Without it, the compiled lookup would fail with Inductor's "index out of bounds", naming no table.
    """
    if not bool(((positions >= 0) & (positions < max_len)).all()):
        raise RuntimeError(
            f"a position is outside the learned table (max_len={max_len}: positions 0..{max_len - 1}); "
            "build it with a larger max_len"
        )
    return positions.clone()


@_positions_in_table.register_fake
def _(positions: Tensor, max_len: int) -> Tensor:
    return torch.empty_like(positions)
