"""Shared behaviour of absolute encodings: add the code to the embeddings, or concatenate it.

Shape legend: ``b`` batch, ``s`` sequence, ``d`` token-embedding width, ``dim`` code width.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .. import functional as F
from ..functional._checks import check_choice
from .base import PositionalEncoding, default_positions

__all__ = ["AbsoluteEncoding", "COMBINES"]

COMBINES = ("add", "concat")


class AbsoluteEncoding(PositionalEncoding):
    """An encoding that maps each position to a vector ``[dim]`` (subclasses implement ``encode``)."""

    family = "absolute"

    @property
    def dim(self) -> int:
        return self.config.dim

    def _code(self, positions: Tensor | None, length: int, x: Tensor) -> Tensor:
        positions = default_positions(positions, length, x.device)
        if self.n_axes > 1:  # coordinates [s, n] / [b, s, n] must fit the sequence: say so in those terms
            positions = F.as_coordinates(positions, self.n_axes, length=length)
        return self.encode(positions)  # [*p, dim]

    def embed(self, x: Tensor, positions: Tensor | None = None) -> Tensor:
        """``x + PE`` (``combine="add"``) or ``[x, PE]`` (``combine="concat"``): ``[b, s, d] -> [b, s, d']``."""
        if x.dim() != 3:
            raise ValueError(f"embed expects token embeddings [b, s, d], got shape {tuple(x.shape)}")
        if not x.is_floating_point():  # token ids by mistake: the code would be truncated to integers
            raise TypeError(f"embed expects floating-point token embeddings [b, s, d], got dtype {x.dtype}")
        b, s, d = x.shape
        code = self._code(positions, s, x).to(x.dtype)  # [s, dim] or [b, s, dim]
        if code.dim() < 2:  # a single position (0-d): one code, no sequence axis
            raise ValueError(
                f"positions must have a sequence axis: [s], [1, s] or [b, s] = [{b}, {s}], got a single "
                f"position of shape {tuple(positions.shape) if isinstance(positions, Tensor) else ()}"
            )
        if code.shape[-2] != s:
            raise ValueError(f"positions give {code.shape[-2]} positions for a sequence of length {s}")
        if code.dim() > 3 or (code.dim() == 3 and code.shape[0] not in (1, b)):
            shape = tuple(positions.shape) if isinstance(positions, Tensor) else None
            raise ValueError(
                f"positions of shape {shape} do not fit embeddings of shape {tuple(x.shape)}: pass [s] "
                f"(shared by the batch), [1, s] or [b, s] = [{b}, {s}]"
                + (" (coordinates: [s, n_axes] or [b, s, n_axes])" if self.n_axes > 1 else "")
            )
        if self.config.combine == "add":
            if d != self.dim:
                raise ValueError(
                    f"combine='add' needs embeddings of width dim={self.dim}, got width {d}; "
                    "use combine='concat' to append a code of a different width"
                )
            return x + code
        return torch_cat_code(x, code)

    def output_dim(self, input_dim: int) -> int:
        return input_dim + self.dim if self.config.combine == "concat" else input_dim

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"dim": dim}

    def check_attention(self, *, dim: int, num_heads: int, head_dim: int, causal: bool) -> None:
        """:class:`posenc.Attention` adds the code to its input: ``combine="add"`` at the layer's width."""
        if getattr(self.config, "combine", "add") != "add":
            raise ValueError(
                "Attention adds absolute encodings to its input; combine='concat' changes the width: "
                "apply encoding.embed before a wider Attention instead"
            )
        if self.dim != dim:
            raise ValueError(f"absolute encoding has dim={self.dim} but Attention's width is {dim}")


def torch_cat_code(x: Tensor, code: Tensor) -> Tensor:
    code = code.expand(x.shape[0], x.shape[1], code.shape[-1])  # [b, s, dim]
    return torch.cat((x, code), dim=-1)  # [b, s, d + dim]


def check_combine(combine: str) -> None:
    check_choice("combine", combine, COMBINES)
