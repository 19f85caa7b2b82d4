"""The reference backend: :func:`posenc.functional.apply_rope` itself, the oracle of every other.

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``r`` rotated width.

It serves whatever the fast backends cannot: inputs inside ``torch.compile`` (the outer compiler
fuses the formula) or a ``torch.func`` transform, tables that need gradients, and dtype mixes the
eager ``out=`` forms would round twice.
"""

from __future__ import annotations

from torch import Tensor

from ..functional.rope import apply_rope

__all__ = ["rotate", "rotate_into"]


def rotate(x: Tensor, cos: Tensor, sin: Tensor, layout: str, inverse: bool) -> Tensor:
    """``x`` rotated by the tables (by their negative angles when ``inverse``): a new tensor.

    The inverse rotation is the rotation with ``sin`` negated (Su et al. 2021, eq. 13: ``R(a)^T = R(-a)``).
    """
    return apply_rope(x, cos, -sin if inverse else sin, layout=layout)


def rotate_into(x: Tensor, cos: Tensor, sin: Tensor, out: Tensor, layout: str, inverse: bool) -> None:
    """:func:`rotate` written into ``out`` (which may be ``x``: the result is formed before the copy)."""
    out.copy_(rotate(x, cos, sin, layout, inverse))
