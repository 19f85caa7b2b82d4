"""Similarities and distances between the codes of different positions.

Shape legend: ``n`` positions (rows of an encoding matrix ``E [n, d]``), ``d`` code width.

Everything is computed in float64. Cosine distance is ``1 - cos(angle)`` (scipy's
``scipy.spatial.distance.cosine``, as used by Pim 2023); it is undefined for a zero vector and is
NaN there (the raw index and sine-only codes are zero at position 0, ``none`` everywhere).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..functional._checks import check_choice

__all__ = ["dot_matrix", "cosine_distance_matrix", "distance_matrix", "distance_from", "distance_vs_offset", "METRICS"]

METRICS = ("cosine", "euclidean", "dot")


def _as_matrix(E: Tensor) -> Tensor:
    if not isinstance(E, Tensor):
        raise TypeError(f"expected an encoding matrix tensor [n, d], got {type(E).__name__}")
    if E.dim() != 2:
        raise ValueError(f"expected an encoding matrix [n, d], got shape {tuple(E.shape)}")
    return E.to(torch.float64)


def dot_matrix(E: Tensor) -> Tensor:
    """``E[i] · E[j]`` for every pair of positions: ``[n, n]`` float64."""
    E = _as_matrix(E)
    return E @ E.T  # [n, n]


#: Cosine distances closer to 0 than this are the round-off of ``1 - cos`` for parallel codes (a
#: few units of float64's 2.2e-16), not a distance: they are reported as 0, so that a code of one
#: direction (``index``, ``fraction``) draws as the zeros it is, not as a pattern of noise.
COSINE_ROUNDOFF = 1e-12


def _cosine(cosines: Tensor) -> Tensor:
    """``1 - cosines`` in [0, 2], with values within :data:`COSINE_ROUNDOFF` of 0 set to 0 (NaN stays)."""
    distance = (1.0 - cosines).clamp_(0.0, 2.0)
    return distance.masked_fill_(distance < COSINE_ROUNDOFF, 0.0)


def cosine_distance_matrix(E: Tensor) -> Tensor:
    """``1 - E[i]·E[j] / (|E[i]| |E[j]|)``: ``[n, n]`` float64 in [0, 2]; NaN where either code is
    the zero vector; values within :data:`COSINE_ROUNDOFF` of 0 are 0."""
    E = _as_matrix(E)
    norms = E.norm(dim=-1)  # [n]
    unit = E / norms[:, None]  # [n, d]; rows of zeros become NaN
    distance = _cosine(unit @ unit.T)  # [n, n]
    return distance.fill_diagonal_(0.0).masked_fill_((norms == 0)[:, None] | (norms == 0)[None, :], float("nan"))


def distance_matrix(E: Tensor) -> Tensor:
    """Euclidean distance ``|E[i] - E[j]|`` for every pair: ``[n, n]`` float64 (exact, no Gram-matrix shortcut)."""
    E = _as_matrix(E)
    return torch.cdist(E, E, compute_mode="donot_use_mm_for_euclid_dist")  # [n, n]


def distance_from(E: Tensor, position: int, *, metric: str = "cosine") -> Tensor:
    """Distance from row ``position`` to every row: ``[n]`` float64 (``metric``: cosine, euclidean or dot).

    Rows are positions (an encoding matrix of ``n`` positions starting at 0 has position ``p`` in row
    ``p``), so ``distance_from(E, 1)`` is the articles' "distance from position 1".
    """
    E = _as_matrix(E)
    check_choice("metric", metric, METRICS)
    if isinstance(position, bool) or not isinstance(position, int) or not -E.shape[0] <= position < E.shape[0]:
        raise ValueError(f"position must be a row index in [0, {E.shape[0]}), got {position!r}")
    row = E[position]  # [d]
    if metric == "dot":
        return E @ row  # [n]
    if metric == "euclidean":
        return (E - row).norm(dim=-1)  # [n]
    norms = E.norm(dim=-1) * row.norm()  # [n]
    out = _cosine((E @ row) / norms)  # [n]; as cosine_distance_matrix: round-off of parallel codes is 0
    out[position] = 0.0
    return out.masked_fill(norms == 0, float("nan"))


def distance_vs_offset(E: Tensor, *, metric: str = "cosine") -> dict[str, Tensor]:
    """Distance between positions ``p`` and ``p + k`` summarised per offset ``k`` over all ``p``.

    Returns ``{"offsets": [n] long (0..n-1), "mean": [n], "min": [n], "max": [n]}`` (float64;
    NaN pairs are skipped, an offset with none left is NaN). ``metric``: cosine, euclidean or dot.
    For the sinusoid ``min == max`` at every offset: the distance depends on the offset alone.
    """
    check_choice("metric", metric, METRICS)
    D = {"cosine": cosine_distance_matrix, "euclidean": distance_matrix, "dot": dot_matrix}[metric](E)  # [n, n]
    n = D.shape[0]
    i, j = torch.triu_indices(n, n, device=D.device)  # pairs with j >= i
    offsets, values = j - i, D[i, j]  # [n(n+1)/2] each
    ok = ~values.isnan()
    offsets, values = offsets[ok], values[ok]
    out = {"offsets": torch.arange(n, device=D.device)}
    for name, reduce in (("mean", "mean"), ("min", "amin"), ("max", "amax")):
        acc = torch.full((n,), float("nan"), dtype=torch.float64, device=D.device)
        out[name] = acc.scatter_reduce(0, offsets, values, reduce=reduce, include_self=False)
    return out
