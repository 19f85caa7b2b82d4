"""2-D pictures of position codes: a projection of many positions, and a word plus its position code.

Shape legend: ``n`` positions, ``d`` code width, ``w`` words.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .. import functional as F
from ..functional._checks import check_choice
from .matrices import _as_matrix

__all__ = ["project_2d", "word_plus_position", "PROJECTIONS"]

PROJECTIONS = ("pca", "umap")


#: A principal axis whose singular value is below this fraction of the largest carries only
#: round-off (the codes span fewer dimensions): its coordinates are reported as 0.
PCA_RANK_RTOL = 1e-9


def _pca(E: Tensor, n_components: int) -> Tensor:
    centred = E - E.mean(dim=0, keepdim=True)  # [n, d]
    _, sv, vh = torch.linalg.svd(centred, full_matrices=False)  # sv [min(n, d)], vh [min(n, d), d]
    components = vh[:n_components]  # [c, d]
    # fix each axis's sign (SVD's is arbitrary): the largest loading is positive
    signs = components.gather(1, components.abs().argmax(dim=1, keepdim=True)).sign()  # [c, 1]
    components = components * torch.where(signs == 0, 1.0, signs)
    out = centred @ components.T  # [n, c]
    if sv.numel():  # axes of no variance (a rank-1 code such as index or fraction): zeros, not noise
        out[:, sv[:n_components] <= PCA_RANK_RTOL * sv[0]] = 0.0
    if out.shape[1] < n_components:  # fewer positions or features than axes: pad with zeros
        out = torch.cat((out, out.new_zeros(out.shape[0], n_components - out.shape[1])), dim=1)
    return out


def project_2d(E: Tensor, method: str = "pca", *, metric: str = "cosine", seed: int = 0) -> Tensor:
    """Each row of ``E [n, d]`` as a point in the plane: float64 ``[n, 2]``.

    ``pca``: the centred codes on their two principal axes (``torch.linalg.svd``; each axis oriented
    so that its largest loading is positive, so the picture is reproducible). ``umap``: UMAP with
    ``metric`` (cosine, as Pim 2023 does) and ``random_state=seed``; needs the ``umap`` extra
    (``pip install 'posenc[umap]'``).
    """
    E = _as_matrix(E)
    check_choice("method", method, PROJECTIONS)
    if method == "pca":
        return _pca(E, 2)
    try:
        import umap  # noqa: PLC0415 — optional extra
    except ImportError as err:
        raise ImportError("project_2d(method='umap') needs umap-learn: pip install 'posenc[umap]'") from err
    reducer = umap.UMAP(n_components=2, metric=metric, random_state=seed)
    points = reducer.fit_transform(E.cpu().numpy())
    return torch.as_tensor(points, dtype=torch.float64)


def word_plus_position(
    positions: int | Tensor = 8,
    *,
    words: Tensor | None = None,
    base: float = 10000.0,
) -> dict[str, Tensor]:
    """A 2-D word embedding plus the 2-D sinusoidal code of each position (Shibuya 2021's picture).

    With ``d = 2`` the sinusoid is ``(sin p, cos p)``: a unit vector turning one radian per
    position, so the same word at different positions lands on the unit circle around it.
    ``words`` is ``[w, 2]`` (default two words at (3, 1) and (-2, 2)).

    Returns ``{"words": [w, 2], "positions": [n], "codes": [n, 2], "points": [w, n, 2]}`` (float64),
    ``points[i, j] = words[i] + codes[j]``.
    """
    p = F.as_positions(positions)
    if p.dim() != 1:
        raise ValueError(f"positions must be an int or a 1-D tensor, got shape {tuple(p.shape)}")
    if words is None:
        words = torch.tensor([[3.0, 1.0], [-2.0, 2.0]], dtype=torch.float64)
    if not isinstance(words, Tensor) or words.dim() != 2 or words.shape[1] != 2:
        shape = tuple(words.shape) if isinstance(words, Tensor) else type(words).__name__
        raise ValueError(f"words must be a tensor [w, 2] of 2-D word embeddings, got {shape}")
    words = words.to(torch.float64)
    codes = F.sinusoidal(p, 2, base=base, dtype=torch.float64)  # [n, 2]
    points = words[:, None, :] + codes[None, :, :]  # [w, n, 2]
    return {"words": words, "positions": p, "codes": codes, "points": points}
