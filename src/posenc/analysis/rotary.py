"""The data behind the atlas's rotary pictures: the logit of the same content, context-extension
scalings side by side, and q and k rotated in one feature plane.

Shape legend: ``hd`` head width, ``r`` rotated width, ``D`` distances or key positions, ``n`` axes
of a position (1 for RoPE, 2 or 3 for multi-axis RoPE), ``m`` query positions.

The *same-content logit* of a query position ``m`` and a key position ``n`` is the expected score
``E[(R_m v) · (R_n v)] / hd`` over contents ``v ~ N(0, I)``: ``trace(R_m^T R_n) / hd``. For RoPE it is
``a² · mean_i cos((m - n) θ_i)`` (``a`` the scaling's attention factor on cos and sin), the curve of
RoFormer's long-term decay (Su et al. 2021, section 3.4.3, figure 2, there as an upper bound); for
xPos each pair also carries ``ζ_i^((m - n)/B)`` (Sun et al. 2022, section 3.1). It is computed here
by rotating the basis vectors with the scheme's own ``rotate``, so every rotary scheme (multi-axis
ones included) is measured by the code that runs.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from ..schemes import PositionalEncoding
from .encodings import build_scheme

__all__ = [
    "same_content_logits",
    "scaling_gallery",
    "scaling_wavelengths",
    "scaling_logits",
    "rotation_in_a_plane",
]


def same_content_logits(module: PositionalEncoding, q_position: Tensor, k_positions: Tensor) -> Tensor:
    """``trace(R_q^T R_k) / hd`` for one query position and keys at ``k_positions``: ``[D]`` float64.

    ``q_position`` is ``[1]`` (``[1, n]`` for a multi-axis scheme), ``k_positions`` ``[D]`` (``[D, n]``).
    Equals the mean score of the same random content placed at both positions (see the module
    docstring); 1 at equal positions for RoPE without a scaling.
    """
    hd = module.config.dim
    basis = torch.eye(hd, dtype=torch.float64)[:, None, None, :]  # [hd, 1, 1, hd]: one content per row
    rows = []
    with torch.no_grad():
        for keys in k_positions.split(1024):  # bounded memory: [hd, 1, 1024, hd] at a time
            q, k = basis, basis.expand(hd, 1, keys.shape[0], hd)
            q_rot, k_rot = module.rotate(q, k, q_position, keys)  # [hd, 1, 1, hd], [hd, 1, D', hd]
            rows.append((q_rot * k_rot).sum((0, -1))[0] / hd)  # [D']
    return torch.cat(rows)  # [D]


def scaling_gallery(dim: int = 128, original: int = 4096, factor: float = 4.0) -> dict[str, dict[str, Any] | None]:
    """One Hugging Face ``rope_scaling`` dict per context-extension rule, each stretching a model
    trained on ``original`` positions by ``factor``: the settings of the atlas's scaling figures.

    Llama 3's bands are Meta's published ones (``low_freq_factor`` 1, ``high_freq_factor`` 4). LongRoPE
    ships searched per-pair factors with each checkpoint; here its long factors rise smoothly from 1
    (the fast half of the pairs kept, as in Phi-3's sets) to ``factor`` (the slowest pair), an
    illustration of their shape, not a published set. Proportional RoPE (Gemma 4) is not an extension rule: it rotates the first quarter
    of the pairs and leaves the rest still (``partial_rotary_factor`` 0.25), drawn for comparison.
    """
    pairs = dim // 2
    ramp = [min(max(2 * i / (pairs - 1) - 1, 0.0), 1.0) for i in range(pairs)]  # 0 for the fast half, then to 1
    rising = [1 + (factor - 1) * (3 * x * x - 2 * x * x * x) for x in ramp]  # smoothstep from 1 to factor
    common = {"factor": factor, "original_max_position_embeddings": original}
    return {
        "default": None,
        "linear": {"rope_type": "linear", "factor": factor},
        "ntk": {"rope_type": "ntk", "factor": factor},
        "dynamic": {"rope_type": "dynamic", **common},
        "yarn": {"rope_type": "yarn", **common},
        "llama3": {"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0, **common},
        "longrope": {"rope_type": "longrope", "short_factor": [1.0] * pairs, "long_factor": rising, **common},
        "proportional": {"rope_type": "proportional", "partial_rotary_factor": 0.25},
    }


def _gallery_modules(dim: int, base: float, original: int, factor: float) -> dict[str, Any]:
    return {
        label: build_scheme("rope", dim=dim, base=base, scaling=scaling)
        for label, scaling in scaling_gallery(dim, original, factor).items()
    }


def scaling_wavelengths(
    *, dim: int = 128, base: float = 10000.0, original: int = 4096, factor: float = 4.0
) -> dict[str, Any]:
    """Per-pair wavelength ``2π / θ_i`` (positions per turn) of each rule in :func:`scaling_gallery`,
    at the extended length ``original * factor`` (where ``dynamic`` and ``longrope`` switch to their
    long frequencies). ``inf`` marks a pair that does not rotate (proportional RoPE's still pairs).

    Returns ``pairs [r/2]``, ``wavelengths {rule: [r/2]}``, ``attention_scale {rule: a}`` (the factor
    on cos and sin), ``original`` and ``extended``.
    """
    extended = int(original * factor)
    wavelengths, scales = {}, {}
    for label, module in _gallery_modules(dim, base, original, factor).items():
        inv_freq = module.inv_freq_at(extended).to(torch.float64)  # [r/2]
        wavelengths[label] = torch.where(inv_freq > 0, 2 * math.pi / inv_freq, torch.inf)
        scales[label] = module.attention_scale
    return {
        "pairs": torch.arange(dim // 2),
        "wavelengths": wavelengths,
        "attention_scale": scales,
        "original": original,
        "extended": extended,
    }


def scaling_logits(
    *, dim: int = 128, base: float = 10000.0, original: int = 4096, factor: float = 4.0, bins: int = 160
) -> dict[str, Any]:
    """The same-content logit against distance for each rule in :func:`scaling_gallery`, up to the
    extended length ``original * factor``, averaged over log-spaced bins of distance.

    Closed form ``a² · mean_i cos(t θ_i)`` with the frequencies in force at the extended length (what
    :func:`same_content_logits` gives for RoPE) at every distance ``t = 1 .. extended - 1``; each of
    the ``bins`` points is the mean over the distances in its bin (the fast pairs make the curve
    oscillate from one distance to the next; the trend is what differs between rules). Returns
    ``distances [D]`` (each bin's geometric centre), ``logits {rule: [D]}``, ``attention_scale``,
    ``original`` and ``extended``.
    """
    extended = int(original * factor)
    every = torch.arange(1, extended, dtype=torch.float64)  # [T]
    edges = torch.logspace(0, math.log10(extended), bins + 1, dtype=torch.float64)  # [bins + 1]
    which = torch.bucketize(every, edges, right=True) - 1  # [T]: bin of each distance
    used = which.unique()  # bins that hold a distance (the first ones are narrower than 1)
    counts = torch.zeros(bins, dtype=torch.float64).index_add_(0, which, torch.ones_like(every))
    centres = (edges[:-1] * edges[1:]).sqrt()[used]  # [D]
    logits, scales = {}, {}
    for label, module in _gallery_modules(dim, base, original, factor).items():
        inv_freq = module.inv_freq_at(extended).to(torch.float64)  # [r/2]
        a = module.attention_scale
        values = torch.cat([torch.cos(t[:, None] * inv_freq).mean(-1) for t in every.split(4096)])  # [T]
        sums = torch.zeros(bins, dtype=torch.float64).index_add_(0, which, values)
        logits[label] = a * a * (sums[used] / counts[used])  # [D]
        scales[label] = a
    return {
        "distances": centres,
        "logits": logits,
        "attention_scale": scales,
        "original": original,
        "extended": extended,
    }


def rotation_in_a_plane(
    *, dim: int = 64, base: float = 10000.0, pair: int = 3, positions: int = 32, seed: int = 0
) -> dict[str, Any]:
    """q and k in the plane of one feature pair, and the scores of all position pairs.

    One content each for q and k (``N(0, I)``, seeded), rotated by RoPE (half layout) at every
    position ``0..positions-1``. Returns ``angle`` (θ of the pair drawn), ``q_plane [m, 2]`` and
    ``k_plane [m, 2]`` (the pair's two features at each position) and ``scores [m, m]`` (``q_m · k_n``
    over all features): a function of ``m - n`` alone, so constant along each diagonal (RoFormer,
    section 3.4.2, eq. 16).
    """
    module = build_scheme("rope", dim=dim, base=base)
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, 1, 1, dim, generator=gen, dtype=torch.float64)  # [1, 1, 1, hd] each
    index = torch.arange(positions)
    with torch.no_grad():
        q_rot, k_rot = module.rotate(q.expand(1, 1, positions, dim), k.expand(1, 1, positions, dim), index, index)
    q_rot, k_rot = q_rot[0, 0], k_rot[0, 0]  # [m, hd] each
    features = [pair, pair + dim // 2]  # the half layout pairs (i, i + hd/2)
    return {
        "angle": float(module.inv_freq[pair]),
        "pair": pair,
        "q_plane": q_rot[:, features],
        "k_plane": k_rot[:, features],
        "scores": q_rot @ k_rot.T,  # [m, m]
    }


def mrope_assignments(*, dim: int = 128, base: float = 1000000.0) -> dict[str, Any]:
    """Which coordinate (0 = t, 1 = h, 2 = w) each rotary pair of MRoPE reads, for the shipped
    assignments at Qwen2-VL's sections ``[16, 24, 24]`` (scaled to ``dim``): contiguous blocks
    (Qwen2-VL, Qwen2.5-VL), ``t h w`` interleaved (Qwen3-VL, Qwen3.5) and Ernie 4.5 VL's ``h w ... t``;
    with each pair's wavelength ``2π / θ_i`` (``posenc.functional.mrope_axes``, transformers'
    ``apply_multimodal_rotary_pos_emb`` and ``Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope``).

    Returns ``sections``, ``wavelengths [r/2]`` and ``axes {assignment: [r/2]}``.
    """
    from ..functional import rope_inv_freq
    from ..functional.mrope import mrope_axes
    from ..schemes.mrope import default_sections

    sections = default_sections(dim // 2)
    inv_freq = rope_inv_freq(dim, base=base)[0]  # [r/2]
    return {
        "sections": sections,
        "wavelengths": 2 * math.pi / inv_freq,
        "axes": {
            "contiguous (Qwen2-VL, Qwen2.5-VL)": mrope_axes(sections, interleaved=False),
            "interleaved t h w (Qwen3-VL, Qwen3.5)": mrope_axes(sections, interleaved=True),
            "h w interleaved, t last (Ernie 4.5 VL)": mrope_axes(sections, interleaved="hw"),
        },
    }
