"""The attention logit as a function of relative distance, for rotary, bias and relative schemes.

Shape legend: ``S`` random draws, ``D`` distances, ``h`` heads, ``hd`` head width, ``R`` relative
positions, ``K`` Shaw's clipping distance.

Distances count how far the key lies *behind* the query: distance ``t`` is a query at position
``t`` and a key at position 0 (the direction a causal mask keeps).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .. import functional as F
from ..functional._checks import check_positive_int
from ..schemes import PositionalEncoding
from ..schemes.shaw import Shaw
from .encodings import build_scheme, encoding_matrix

__all__ = ["rope_decay_bound", "logits_vs_distance", "t5_bucket_map", "shaw_embeddings"]


def rope_decay_bound(inv_freq: Tensor, distances: Tensor, *, pair_scale: Tensor | None = None) -> Tensor:
    """RoPE's long-term decay: ``(1 / (r/2)) Σ_{j=1}^{r/2} |S_j|`` with ``S_j = Σ_{i<j} w_i e^{i·t·θ_i}``: ``[D]`` float64.

    Su et al. 2021 (RoFormer), section 3.4.3: by Abel summation ``|q·R(t)k| <= max_i |h_{i+1} - h_i| ·
    Σ_j |S_j|``, so this "relative upper bound" (their figure 2) falls as the distance ``t`` grows.
    ``inv_freq [r/2]`` are the ``θ_i``; ``pair_scale [D, r/2]`` optional per-pair weights ``w_i`` (xPos's
    ``ζ_i^(t/B)``), 1 by default.
    """
    angles = distances.to(torch.float64)[:, None] * inv_freq.to(torch.float64)  # [D, r/2]
    terms = torch.polar(torch.ones_like(angles), F._checks.two_pi_mod(angles))  # [D, r/2] complex
    if pair_scale is not None:
        terms = terms * pair_scale.to(torch.float64)
    return terms.cumsum(dim=-1).abs().mean(dim=-1)  # [D]


def _rotary_curves(module: PositionalEncoding, distances: Tensor, num_samples: int, seed: int) -> dict[str, Any]:
    hd = module.config.dim
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(num_samples, 1, 1, hd, generator=gen, dtype=torch.float64).to(distances.device)  # [S, 1, 1, hd]
    key_position = torch.zeros(1, dtype=torch.long, device=distances.device)
    rows = []
    for chunk in v.split(16):  # bounded memory: [16, 1, D, hd] at a time
        q = chunk.expand(-1, 1, distances.shape[0], hd)  # [s, 1, D, hd]: the same content at every distance
        q_rot, k_rot = module.rotate(q, chunk, distances, key_position)
        rows.append((q_rot * k_rot).sum(-1)[:, 0] / hd)  # [s, D]
    logits = torch.cat(rows)  # [S, D]
    # the frequencies the rotation used: a length-dependent scaling (dynamic, longrope) switches past
    # its original length, and the bound must follow it
    inv_freq = (
        module.inv_freq_at(int(distances.max()) + 1)
        if hasattr(module, "inv_freq_at") and distances.numel()
        else module.inv_freq
    ).to(torch.float64)
    scale = None
    if hasattr(module, "zeta"):  # xPos: pair i carries ζ_i^(t / scale_base)
        scale = module.zeta[None, :] ** (distances.to(torch.float64)[:, None] / module.config.scale_base)  # [D, r/2]
    bound = rope_decay_bound(inv_freq.reshape(-1), distances, pair_scale=scale) if inv_freq.dim() == 1 else None
    return {
        "logits": logits.mean(0, keepdim=True),
        "labels": ["mean over draws"],
        "mean": logits.mean(0),
        "std": logits.std(0),
        "bound": bound,
    }


def logits_vs_distance(
    scheme: str | PositionalEncoding,
    *,
    max_distance: int = 256,
    num_samples: int = 256,
    seed: int = 0,
    **config: Any,
) -> dict[str, Any]:
    """The logit between a query and a key ``t = 0..max_distance-1`` positions behind it.

    Returns ``{"family", "distances": [D] long, "logits": [lines, D] float64, "labels": [lines] str}``
    and, per family:

    * rotary (RoPE, xPos): one line, the logit ``R(t)v · v / hd`` of the same random content
      ``v ~ N(0, I)`` as query and key, averaged over ``num_samples`` draws (seeded); ``mean``/``std``
      ``[D]`` over the draws, and ``bound [D]``: RoFormer's relative upper bound (section 3.4.3,
      :func:`rope_decay_bound`; for xPos weighted by its decay). Both fall with distance.
    * bias (ALiBi, T5): one line per head, the bias itself; ALiBi adds ``slopes [h]`` (Press et al.
      2022, section 3: straight lines ``-m_h · t``); T5's lines step at its buckets.
    * relative (Shaw): the logit term ``q · a^K[clip(-t)]`` for four random queries: flat past ``K``.
    """
    D = check_positive_int("max_distance", max_distance)
    num_samples = check_positive_int("num_samples", num_samples)
    module = build_scheme(scheme, seed=seed, **config)
    device = next(iter([*module.parameters(), *module.buffers()]), torch.empty(0)).device
    distances = torch.arange(D, device=device)
    out: dict[str, Any] = {"family": module.family, "distances": distances}
    with torch.no_grad():
        if module.family == "rotary":
            out.update(_rotary_curves(module, distances, num_samples, seed))
        elif module.family == "bias":
            bias = encoding_matrix(module, distances).T  # [h, D]
            out.update(logits=bias, labels=[f"head {i}" for i in range(bias.shape[0])])
            if hasattr(module, "slopes"):
                out["slopes"] = module.slopes.to(torch.float64)
        elif isinstance(module, Shaw):
            a = encoding_matrix(module, distances)  # [D, hd]: a^K for the key t behind
            gen = torch.Generator().manual_seed(seed)
            q = torch.randn(4, a.shape[1], generator=gen, dtype=torch.float64).to(a.device)  # [4, hd]
            out.update(logits=q @ a.T, labels=[f"query {i}" for i in range(4)])  # [4, D]
        else:
            raise ValueError(
                f"logits_vs_distance needs a rotary, bias or relative scheme, got {module.name!r} "
                f"(family {module.family!r}); for absolute codes use distance_vs_offset(E, metric='dot')"
            )
    return out


def t5_bucket_map(
    *, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True, max_relative: int | None = None
) -> dict[str, Any]:
    """T5's bucket for every relative position (key minus query) in ``[-max_relative, max_relative]``.

    Returns ``{"relative_positions": [R] long, "buckets": [R] long, "num_buckets", "max_exact",
    "max_distance", "bidirectional"}``; ``max_relative`` defaults to ``2 * max_distance``. Raffel et
    al. 2020, section 2.1 (via :func:`posenc.functional.t5_relative_bucket`).
    """
    max_relative = 2 * max_distance if max_relative is None else check_positive_int("max_relative", max_relative)
    relative = torch.arange(-max_relative, max_relative + 1)  # [R]
    buckets = F.t5_relative_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    half = num_buckets // 2 if bidirectional else num_buckets
    return {
        "relative_positions": relative,
        "buckets": buckets,
        "num_buckets": num_buckets,
        "max_exact": half // 2,
        "max_distance": max_distance,
        "bidirectional": bidirectional,
    }


def shaw_embeddings(scheme: str | PositionalEncoding = "shaw", *, seed: int = 0, **config: Any) -> dict[str, Any]:
    """Shaw et al.'s per-distance embeddings (section 3.2): ``{"relative_positions": [2K+1] long
    (-K..K, key minus query), "key": [2K+1, hd], "value": [2K+1, hd] or None, "max_relative_position": K}``.
    """
    module = build_scheme(scheme, seed=seed, **config)
    if not isinstance(module, Shaw):
        raise ValueError(f"shaw_embeddings needs the 'shaw' scheme, got {module.name!r}")
    left, right = F.relative_clip(module.config.max_relative_position)
    value = module.value_embeddings
    return {
        "relative_positions": torch.arange(-left, right + 1),
        "key": module.key_embeddings.weight.detach().to(torch.float64),
        "value": value.weight.detach().to(torch.float64) if value is not None else None,
        "max_relative_position": module.config.max_relative_position,
    }
