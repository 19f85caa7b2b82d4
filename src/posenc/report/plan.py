"""Which figures the atlas draws for each scheme, with which settings and captions.

Schemes named here get the seed articles' figures; a scheme registered later gets a generic set
for its family, so every name in :func:`posenc.available` has a section.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..viz.kinds import PlotOptions

__all__ = ["FigureSpec", "figures_for", "REFERENCE_SOURCES"]


@dataclass(frozen=True)
class FigureSpec:
    kind: str
    options: PlotOptions
    caption: str


def _spec(kind: str, caption: str, **options: object) -> FigureSpec:
    return FigureSpec(kind, PlotOptions(**options), caption)  # type: ignore[arg-type]


_PLAN: dict[str, list[FigureSpec]] = {
    "sinusoidal": [
        _spec("heatmap", "The classic picture: 128 dims × 50 positions (Vaswani et al. 2017, §3.5).", dim=128, positions=50),
        _spec("heatmap", "512 dims × 128 positions: the slow half of the features barely moves.", dim=512, positions=128),
        _spec("clock", "Each (sin, cos) pair is a clock hand turning at its own speed (“Transformer’s Positional Encoding”).", dim=128, positions=31),
        _spec("bits", "Binary digits of p beside the sinusoid's bands: the continuous counter (Kazemnejad 2019).", positions=64),
        _spec("dot", "PE(i)·PE(j): constant along each diagonal, i.e. a function of j − i alone (Kazemnejad 2019).", dim=128, positions=100),
        _spec("cosine", "Cosine distance from position 1, d = 1024, positions up to 250 (“Understanding positional embeddings”, 2023).", dim=1024, positions=251),
        _spec("distance", "Cosine distance between all pairs of the first 250 positions, d = 1024 (“Understanding positional embeddings”, 2023).", dim=1024, positions=250),
        _spec("projection", "1000 positions projected to 2D (PCA): a smooth curve ordered by position.", dim=128, positions=1000),
        _spec("word", "Adding a 2-wide code puts a word's copies on a circle around it (“Transformer’s Positional Encoding”).", positions=8),
    ],
    "learned": [
        _spec("heatmap", "A learned table at initialisation (GPT-2's N(0, 0.02)): no structure until trained.", positions=50),
        _spec("dot", "Dot products of random rows: noise, nothing tied to the offset.", positions=100),
        _spec("cosine", "Cosine distance from position 1: every other row about equally far.", dim=1024, positions=251),
        _spec("projection", "1000 rows projected to 2D (PCA): a cloud, not a curve.", positions=1000),
    ],
    "rope": [
        _spec("clock", "RoPE turns each pair of query/key features by m·θ_i: the same clock as the sinusoid.", positions=31),
        _spec("logits", "The logit of the same content at distance t falls with t on average (for unrelated content it averages 0): RoFormer's long-term decay (§3.4.3).", positions=256),
        _spec("heatmap", "The rotated unit query at each position: (cos, sin) of every pair's angle.", positions=50),
    ],
    "xpos": [
        _spec("logits", "xPos multiplies RoPE's logit by a per-pair decay ζ_i^(t/B), B = 512: visible over "
              "distances of the order of B (Sun et al. 2022, §3.1).", positions=1024),
        _spec("heatmap", "The rotated and decayed unit query: RoPE's waves scaled by ζ^(m/B).", positions=50),
    ],
    "alibi": [
        _spec("bias", "The bias is a straight line −m_h·(i − j) per head, for the query at i = 255 and every key "
              "behind it: no learned parameters, any length (Press et al. 2022, §3).", heads=8, positions=256),
        _spec("slopes", "One slope per head: for 8 heads the geometric sequence 2^(−h), h = 1 … 8; other head "
              "counts interleave two such sequences (Press et al. 2022, §3 and footnote).", heads=8),
        _spec("heatmap", "Bias from a query at position p to the key at 0, per head: −m_h·p.", positions=50),
    ],
    "t5": [
        _spec("bias", "The bias per head for the query at i = 255 and every key behind it: constant within a bucket "
              "(values at initialisation, N(0, 0.02)).", positions=256),
        _spec("buckets", "Exact buckets near, log-spaced buckets up to max_distance, one shared bucket beyond (Raffel et al. 2020, §2.1).", positions=64),
        _spec("heatmap", "Bias from a query at position p to the key at 0, per head (random init): one value per bucket.", positions=50),
    ],
    "shaw": [
        _spec("logits", "The query term q·a^K against distance: flat past the clipping distance K (Shaw et al. 2018, §3.2).", positions=64),
        _spec("heatmap", "a^K for a query at p and the key at 0: constant past the clipping distance K = 16.", positions=50),
    ],
    "index": [
        _spec("heatmap", "The raw index: grows without bound.", positions=50),
        _spec("cosine", "Every code points the same way: cosine distance 0 everywhere.", dim=1024, positions=251),
    ],
    "fraction": [
        _spec("heatmap", "p / L for L = 50: bounded, but the code of p depends on L.", positions=50),
        _spec("cosine", "Every code points the same way: cosine distance 0 everywhere.", dim=1024, positions=251),
    ],
    "binary": [
        _spec("heatmap", "Binary digits of p (16 bits): discrete jumps, collides past 2^16.", positions=64),
        _spec("cosine", "Cosine distance from position 1 jumps around: bits are not a metric of position.", positions=251),
    ],
    "sine_only": [
        _spec("heatmap", "Sines without cosines: PE(0) is the zero vector.", positions=50),
        _spec("dot", "PE(i)·PE(j) without the cosine partner: not constant along the diagonals.", positions=100),
        _spec("cosine", "Cosine distance from position 1 (position 0 has no direction).", dim=1024, positions=251),
    ],
}

_PLAN["sinusoidal_nd"] = [
    _spec("grid", "On a grid of image patches the code is nearest to itself around each cell, "
          "separately along rows and columns (one sinusoid per axis).", positions=16),
    _spec("heatmap", "The code of positions along axis 0 (the other coordinates 0).", positions=50),
]

_PLAN["kerple"] = [
    _spec("bias", "−r1_h·log(1 + r2_h·(i − j)) per head at initialisation (r1 ~ 2·U[0, 1), r2 ~ U[0, 1), GPT-NeoX "
          "ParallelKerpleLog), for the query at i = 255 and every key behind it: a logarithmic penalty, steep near "
          "and flat far (Chi et al. 2022, §4.2).", positions=256),
    _spec("heatmap", "Bias from a query at position p to the key at 0, per head: −r1_h·log(1 + r2_h·p).", positions=50),
]

_PLAN["sandwich"] = [
    _spec("bias", "(Σ_k cos((i − j)·ω_k) − d'/2)·H/(8h) per head, d' = 128, for the query at i = 255 and every key "
          "behind it: falls, wiggling, towards −d'/2·H/8h; no parameters (Chi et al. 2023, §5).", positions=256),
    _spec("heatmap", "Bias from a query at position p to the key at 0, per head: no parameters, any length.", positions=50),
]

_PLAN["fire"] = [
    _spec("bias", "f_h(ψ(i − j)/ψ(max(L, i))) per head at initialisation (a random MLP; c = 0.1, L = 512), for the "
          "query at i = 255, 1023 and 4095 and every key behind it: below L the curve depends on i − j alone; past "
          "it the normaliser follows the query, so the same curve is stretched over [0, i] (Li et al. 2024, §3.2).",
          positions=256),
]

_PLAN["dpb"] = [
    _spec("bias", "MLP_h(i − j) per head at initialisation (Linear → SiLU, depth 2, width 32), for the query at "
          "i = 255 and every key behind it: a random smooth function of the distance until trained (Wang et al. "
          "2021, §3.3).", positions=256),
]

_PLAN["cope"] = [
    _spec("bias", "CoPE's term q_i·e[p_ij] against i − j for queries and keys ~ N(0, I) (16 sequences of 256, seed 0; "
          "causal logits q·k/√hd): mean over sequences and queries, band 10–90 %. At initialisation the table e is "
          "zeros (paper, x-transformers), so the term is 0 for any input; one table serves every head "
          "(Golovneva et al. 2024, §3).", positions=256),
]

_PLAN["forgetting"] = [
    _spec("bias", "Σ_{j<t≤i} log f_t per head, f_t = σ(w_h·x_t + b_h), for a layer input x ~ N(0, 1) (16 sequences "
          "of 256, d = 64, seed 0): mean over sequences and queries, band 10–90 %. At initialisation b_h = 5, so "
          "f ≈ 0.993: about −0.008 per token on these inputs, nearly linear like ALiBi (Lin et al. 2025, §2).", positions=256),
]

_GENERIC = {
    "absolute": [
        _spec("heatmap", "The position code along axis 0.", positions=50),
        _spec("cosine", "Cosine distance from position 1.", positions=251),
    ],
    "reference": [_spec("heatmap", "The reference code.", positions=50)],
    "rotary": [
        _spec("logits", "The logit of the same content at distance t (queries along axis 0).", positions=256),
        _spec("heatmap", "The rotated unit query at each position.", positions=50),
    ],
    "bias": [_spec("bias", "The bias against distance i − j, per head, for the query at i = 255 and every key behind it.",
                   positions=256)],
    "relative": [_spec("logits", "The position term of the logit against distance.", positions=64)],
    "none": [],
}

#: Where the naive reference codes come from (they are not schemes, so have no class attributes).
REFERENCE_SOURCES = {
    "index": "\"Understanding positional embeddings in transformer models\" (2023), its naive ideas; Kazemnejad 2019",
    "fraction": "\"Understanding positional embeddings in transformer models\" (2023), its naive ideas",
    "binary": "Kazemnejad 2019, \"Transformer Architecture: The Positional Encoding\", the binary-counter intuition",
    "sine_only": "Kazemnejad 2019 and “Transformer’s Positional Encoding”: why both sine and cosine",
}


def figures_for(scheme: str, family: str) -> list[FigureSpec]:
    """The figures the atlas draws for ``scheme`` (of ``family``)."""
    from ..analysis import is_data_dependent

    if family != "reference" and is_data_dependent(scheme) and scheme not in _PLAN:
        # its position term needs queries, keys or the layer input: drawn for random inputs only
        return [_spec("bias", "The position term against distance i − j for random N(0, 1) inputs: mean over "
                      "sequences and queries, band 10–90 %.", positions=256)]
    return list(_PLAN.get(scheme, _GENERIC.get(family, [])))
