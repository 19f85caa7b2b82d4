"""The data behind three pictures of the founding articles that explain an idea step by step.

Shape legend: ``p`` positions, ``w`` wave samples, ``d`` widths.

* Reading two cosine waves at nearby and distant positions (Pim 2023, "Understanding positional
  embeddings in transformer models", 2023): a slow wave gives nearby positions nearly the same value,
  a fast one tells them apart, and together they place a distant position far from both.
* Shaw et al.'s clipped relative index ``clip(n - m, -K, K)`` ("A Brief Summary on
  Positional Encoding Methods", eq. 5; Shaw et al. 2018, section 3.2).
* Adding a position code to a word embedding versus concatenating it (Shibuya 2021, "Transformer's
  Positional Encoding"), with the sinusoid of Vaswani et al. 2017, section 3.5.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import functional as F

__all__ = ["two_waves", "clipped_relative_index", "add_or_concatenate"]


def two_waves(
    *, slow: float = 0.05, fast: float = 0.4, positions: tuple[int, ...] = (10, 12, 50), length: int = 64
) -> dict[str, Any]:
    """``cos(slow · p)`` and ``cos(fast · p)`` for ``p`` in ``[0, length)`` (sampled finely), the two
    readings at each of ``positions``, and the Euclidean distance between the 2-D codes of every
    pair of those positions: ``{"grid": [w], "waves": {"slow": [w], "fast": [w]}, "positions": [p],
    "codes": [p, 2], "distances": [p, p], "frequencies": (slow, fast)}``."""
    grid = torch.linspace(0, length, 20 * length + 1, dtype=torch.float64)  # [w]
    marked = torch.tensor(positions, dtype=torch.float64)  # [p]
    codes = torch.stack((torch.cos(slow * marked), torch.cos(fast * marked)), dim=-1)  # [p, 2]
    return {
        "grid": grid,
        "waves": {"slow": torch.cos(slow * grid), "fast": torch.cos(fast * grid)},
        "positions": marked.long(),
        "codes": codes,
        "distances": torch.cdist(codes, codes),  # [p, p]
        "frequencies": (slow, fast),
    }


def clipped_relative_index(length: int = 9, max_relative_position: int = 3) -> torch.Tensor:
    """``[m, n]`` matrix of ``clip(n - m, -K, K)``: the embedding Shaw et al. use between the query
    at ``m`` and the key at ``n`` (``posenc.functional.relative_clip`` gives the same bounds)."""
    left, right = F.relative_clip(max_relative_position)
    index = torch.arange(length)
    return (index[None, :] - index[:, None]).clamp(-left, right)  # [m, n]


def add_or_concatenate(*, width: int = 8, position: int = 3, seed: int = 0) -> dict[str, Any]:
    """A word embedding ``[d]`` (N(0, 0.5), seeded), the sinusoid's code of ``position`` ``[d]``
    (Vaswani et al. 2017, §3.5: sin at even features, cos at odd), their sum ``[d]`` and their
    concatenation ``[2d]``."""
    gen = torch.Generator().manual_seed(seed)
    word = 0.5 * torch.randn(width, generator=gen, dtype=torch.float64)  # [d]
    code = F.sinusoidal(torch.tensor([position]), width, dtype=torch.float64)[0]  # [d]
    return {"word": word, "code": code, "sum": word + code, "concat": torch.cat((word, code)), "position": position}
