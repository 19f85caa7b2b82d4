"""Which figures the atlas draws for each scheme, with which settings and captions.

Schemes named here get the figures of the articles and papers that introduced or explained them
(docs/design.md lists the articles posenc was founded on); a scheme registered later gets a
generic set for its family, so every name in :func:`posenc.available` has a section.
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
        _spec(
            "heatmap",
            "The classic picture: 128 dims × 50 positions (Vaswani et al. 2017, §3.5).",
            dim=128,
            positions=50,
        ),
        _spec(
            "heatmap", "512 dims × 128 positions: the slow half of the features barely moves.", dim=512, positions=128
        ),
        _spec(
            "clock",
            "Each (sin, cos) pair is a clock hand turning at its own speed (Shibuya 2021, “Transformer’s Positional Encoding”).",
            dim=128,
            positions=31,
        ),
        _spec(
            "bits",
            "Binary digits of p beside the sinusoid's bands: the continuous counter (Kazemnejad 2019, “Transformer Architecture: The Positional Encoding”).",
            positions=64,
        ),
        _spec(
            "dot",
            "PE(i)·PE(j): constant along each diagonal, i.e. a function of j − i alone (Kazemnejad 2019, “Transformer Architecture: The Positional Encoding”).",
            dim=128,
            positions=100,
        ),
        _spec(
            "cosine",
            "Cosine distance from position 1, d = 1024, positions up to 250 (Pim 2023, “Understanding positional embeddings in transformer models”).",
            dim=1024,
            positions=251,
        ),
        _spec(
            "distance",
            "Cosine distance between all pairs of the first 250 positions, d = 1024 (Pim 2023, “Understanding positional embeddings in transformer models”).",
            dim=1024,
            positions=250,
        ),
        _spec(
            "projection",
            "1000 positions projected to 2D (PCA): a smooth curve ordered by position.",
            dim=128,
            positions=1000,
        ),
        _spec(
            "word",
            "Adding a 2-wide code puts a word's copies on a circle around it (Shibuya 2021, “Transformer’s Positional Encoding”).",
            positions=8,
        ),
        _spec(
            "waves",
            "Why the waves work, step by step: a slow wave gives nearby positions (10, 12) nearly the same "
            "value, a fast one tells them apart, and together they put a distant position (50) far from both; "
            "more waves of more frequencies make a space where the distance between codes follows the distance "
            "between positions (Pim 2023, “Understanding positional embeddings in transformer models”).",
            positions=64,
        ),
        _spec(
            "concat",
            "The paper adds the code to the word embedding (same width d); concatenating keeps the two "
            "apart but doubles the width the layers see (Shibuya 2021, “Transformer’s Positional Encoding”).",
            dim=8,
        ),
    ],
    "learned": [
        _spec(
            "heatmap",
            "A learned table at initialisation (GPT-2's N(0, 0.02)): no structure until trained.",
            positions=50,
        ),
        _spec("dot", "Dot products of random rows: noise, nothing tied to the offset.", positions=100),
        _spec("cosine", "Cosine distance from position 1: every other row about equally far.", dim=1024, positions=251),
        _spec("projection", "1000 rows projected to 2D (PCA): a cloud, not a curve.", positions=1000),
    ],
    "rope": [
        _spec(
            "rotation",
            "RoPE rotates each pair of query and key features by its position times the pair's "
            "frequency θ_i; the angle between q at m and k at n is (m − n)·θ_i, so every score depends on the "
            "offset alone (Su et al. 2021, §3.4.2, eq. 16; the picture of “A Brief Summary on Positional Encoding Methods”).",
            positions=32,
        ),
        _spec(
            "clock",
            "RoPE turns each pair of query/key features by m·θ_i: the same clock as the sinusoid.",
            positions=31,
        ),
        _spec(
            "wavelengths",
            "Context extension, the standard picture: each pair's wavelength 2π/θ_i against the "
            "trained length (4096) and the extended one (×4). Linear interpolation stretches every pair; NTK "
            "and dynamic raise the base, stretching slow pairs most; YaRN, Llama 3 and LongRoPE keep the fast "
            "pairs and stretch only those that never turned a full circle in training. LongRoPE's factors "
            "here are an illustration; proportional RoPE (Gemma 4) stops three quarters of the pairs instead.",
            dim=128,
            positions=4096,
        ),
        _spec(
            "scalings",
            "The logit of the same content at distance t for each scaling, with its attention factor a "
            "(YaRN's 0.1·ln(s) + 1, LongRoPE's √(1 + ln s / ln L)) squared in the score: past the trained length "
            "the unscaled curve dips below zero, the scaled ones stay positive.",
            dim=128,
            positions=4096,
        ),
        _spec(
            "logits",
            "The logit of the same content at distance t falls with t on average (for unrelated content it averages 0): RoFormer's long-term decay (§3.4.3).",
            positions=256,
        ),
        _spec(
            "dot",
            "The rotated unit query's dot products: constant along each diagonal, a function of m − n alone.",
            positions=100,
        ),
        _spec(
            "heatmap",
            "The rotated unit query at each position, (cos, sin) of every pair's angle m·θ_i: fast pairs "
            "on the left, slow ones on the right (half layout: cos block, then sin block).",
            positions=50,
        ),
    ],
    "xpos": [
        _spec(
            "decay",
            "xPos beside RoPE over 4096 positions: each pair's logit carries ζ_i^(t/B), B = 512, so the "
            "same-content logit decays smoothly where RoPE's keeps oscillating (Sun et al. 2022, §3.1).",
            positions=4096,
        ),
        _spec(
            "logits",
            "xPos multiplies RoPE's logit by a per-pair decay ζ_i^(t/B), B = 512: visible over "
            "distances of the order of B (Sun et al. 2022, §3.1).",
            positions=1024,
        ),
        _spec(
            "heatmap",
            "The rotated and scaled unit query over 1024 positions: q carries ζ^(m/B), so its slow "
            "pairs fade along the positions.",
            positions=1024,
        ),
    ],
    "rope_axial": [
        _spec(
            "grid",
            "2-D RoPE on a 24 × 24 grid of patches: half the pairs turn with the row, half with the column, "
            "so the logit of the same content peaks at the query's cell and falls along rows and columns "
            "separately (rotary-embedding-torch's axial RoPE; Heo et al. 2024, RoPE-Mixed's axial baseline).",
            positions=24,
        ),
        _spec("logits", "The logit of the same content at distance t along one axis.", positions=256),
        _spec("heatmap", "The rotated unit query at each position along axis 0 (the other at 0).", positions=50),
    ],
    "alibi": [
        _spec(
            "bias",
            "The bias is a straight line −m_h·(i − j) per head, for the query at i = 255 and every key "
            "behind it: no learned parameters, any length (Press et al. 2022, §3).",
            heads=8,
            positions=256,
        ),
        _spec(
            "slopes",
            "One slope per head: for 8 heads the geometric sequence 2^(−h), h = 1 … 8; other head "
            "counts interleave two such sequences (Press et al. 2022, §3 and footnote).",
            heads=8,
        ),
        _spec("heatmap", "Bias from a query at position p to the key at 0, per head: −m_h·p.", positions=50),
    ],
    "t5": [
        _spec(
            "bias",
            "The bias per head for the query at i = 255 and every key behind it: constant within a bucket "
            "(values at initialisation, N(0, 0.02)).",
            positions=256,
        ),
        _spec(
            "buckets",
            "Exact buckets near, log-spaced buckets up to max_distance, one shared bucket beyond (Raffel et al. 2020, §2.1).",
            positions=64,
        ),
        _spec(
            "heatmap",
            "Bias from a query at position p to the key at 0, per head (random init): one value per bucket.",
            positions=50,
        ),
    ],
    "shaw": [
        _spec(
            "clipped",
            "Shaw et al. give the key at n an embedding indexed by its offset from the query at m, "
            "clipped to ±K: only 2K + 1 embeddings, and every distance past K shares the edge one (Shaw et al. "
            "2018, §3.2; “A Brief Summary on Positional Encoding Methods”, eq. 5).",
            positions=9,
        ),
        _spec(
            "logits",
            "The query term q·a^K against distance: flat past the clipping distance K (Shaw et al. 2018, §3.2).",
            positions=64,
        ),
        _spec(
            "heatmap",
            "a^K for a query at p and the key at 0: constant past the clipping distance K = 16.",
            positions=50,
        ),
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
        _spec(
            "cosine", "Cosine distance from position 1 jumps around: bits are not a metric of position.", positions=251
        ),
    ],
    "sine_only": [
        _spec("heatmap", "Sines without cosines: PE(0) is the zero vector.", positions=50),
        _spec("dot", "PE(i)·PE(j) without the cosine partner: not constant along the diagonals.", positions=100),
        _spec("cosine", "Cosine distance from position 1 (position 0 has no direction).", dim=1024, positions=251),
    ],
}

_PLAN["sinusoidal_nd"] = [
    _spec(
        "grid",
        "On a grid of image patches the code is nearest to itself around each cell, "
        "separately along rows and columns (one sinusoid per axis).",
        positions=16,
    ),
    _spec("heatmap", "The code of positions along axis 0 (the other coordinates 0).", positions=50),
]

_PLAN["mrope"] = [
    _spec(
        "axes",
        "MRoPE splits the rotary pairs between a token's time, row and column (t, h, w): Qwen2-VL gives "
        "each a contiguous block, so time gets only the fast pairs and the column only the slowest; Qwen3-VL "
        "interleaves them so every coordinate gets fast and slow pairs (Wang et al. 2024, Qwen2-VL §2.1; "
        "transformers' apply_multimodal_rotary_pos_emb and apply_interleaved_mrope).",
        dim=128,
    ),
    _spec(
        "grid",
        "The logit of the same content between image patches at time 0 (h = row, w = column) on a "
        "24 × 24 grid: with contiguous sections the rows (h) read slower pairs than time and the columns (w) the "
        "slowest, so the logit falls along a column and barely changes along a row.",
        positions=24,
    ),
    _spec(
        "logits",
        "For text tokens t = h = w: the logit of the same content at distance t equals 1-D RoPE's.",
        positions=256,
    ),
]

_PLAN["kerple"] = [
    _spec(
        "bias",
        "−r1_h·log(1 + r2_h·(i − j)) per head at initialisation (r1 ~ 2·U[0, 1), r2 ~ U[0, 1), GPT-NeoX "
        "ParallelKerpleLog), for the query at i = 255 and every key behind it: a logarithmic penalty, steep near "
        "and flat far (Chi et al. 2022, §4.2).",
        positions=256,
    ),
    _spec("heatmap", "Bias from a query at position p to the key at 0, per head: −r1_h·log(1 + r2_h·p).", positions=50),
]

_PLAN["sandwich"] = [
    _spec(
        "bias",
        "(Σ_k cos((i − j)·ω_k) − d'/2)·H/(8h) per head, d' = 128, for the query at i = 255 and every key "
        "behind it: falls, wiggling, towards −d'/2·H/8h; no parameters (Chi et al. 2023, §5).",
        positions=256,
    ),
    _spec(
        "heatmap", "Bias from a query at position p to the key at 0, per head: no parameters, any length.", positions=50
    ),
]

_PLAN["fire"] = [
    _spec(
        "bias",
        "f_h(ψ(i − j)/ψ(max(L, i))) per head at initialisation (a random MLP; c = 0.1, L = 512), for the "
        "query at i = 255, 1023 and 4095 and every key behind it: below L the curve depends on i − j alone; past "
        "it the normaliser follows the query, so the same curve is stretched over [0, i] (Li et al. 2024, §3.2).",
        positions=256,
    ),
]

_PLAN["dpb"] = [
    _spec(
        "bias",
        "MLP_h(i − j) per head at initialisation (Linear → SiLU, depth 2, width 32), for the query at "
        "i = 255 and every key behind it: a random smooth function of the distance until trained (Wang et al. "
        "2021, §3.3).",
        positions=256,
    ),
]

_PLAN["cope"] = [
    _spec(
        "bias",
        "CoPE's term q_i·e[p_ij] against i − j for queries and keys ~ N(0, I) (16 sequences of 256, seed 0; "
        "causal logits q·k/√hd): mean over sequences and queries, band 10–90 %. At initialisation the table e is "
        "zeros (paper, x-transformers), so the term is 0 for any input; one table serves every head "
        "(Golovneva et al. 2024, §3).",
        positions=256,
    ),
]

_PLAN["forgetting"] = [
    _spec(
        "bias",
        "Σ_{j<t≤i} log f_t per head, f_t = σ(w_h·x_t + b_h), for a layer input x ~ N(0, 1) (16 sequences "
        "of 256, d = 64, seed 0): mean over sequences and queries, band 10–90 %. At initialisation b_h = 5, so "
        "f ≈ 0.993: about −0.008 per token on these inputs, nearly linear like ALiBi (Lin et al. 2025, §2).",
        positions=256,
    ),
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
    "bias": [
        _spec(
            "bias",
            "The bias against distance i − j, per head, for the query at i = 255 and every key behind it.",
            positions=256,
        )
    ],
    "relative": [_spec("logits", "The position term of the logit against distance.", positions=64)],
    "none": [],
}

#: Where the naive reference codes come from (they are not schemes, so have no class attributes).
REFERENCE_SOURCES = {
    "index": 'Pim 2023, "Understanding positional embeddings in transformer models", its naive ideas; Kazemnejad 2019',
    "fraction": 'Pim 2023, "Understanding positional embeddings in transformer models", its naive ideas',
    "binary": 'Kazemnejad 2019, "Transformer Architecture: The Positional Encoding", the binary-counter intuition',
    "sine_only": "Kazemnejad 2019 and Shibuya 2021, “Transformer’s Positional Encoding”: why both sine and cosine",
}


def figures_for(scheme: str, family: str) -> list[FigureSpec]:
    """The figures the atlas draws for ``scheme`` (of ``family``)."""
    from ..analysis import is_data_dependent

    if family != "reference" and is_data_dependent(scheme) and scheme not in _PLAN:
        # its position term needs queries, keys or the layer input: drawn for random inputs only
        return [
            _spec(
                "bias",
                "The position term against distance i − j for random N(0, 1) inputs: mean over "
                "sequences and queries, band 10–90 %.",
                positions=256,
            )
        ]
    return list(_PLAN.get(scheme, _GENERIC.get(family, [])))


#: Configs whose layer schedule the atlas draws as a strip of layers: the schedule fields are the
#: ones each family's transformers config class reads (named in each caption), at a model's depth.
LAYER_SCHEDULES: dict[str, tuple[dict, str]] = {
    "Llama 4 Scout": (
        {"model_type": "llama4_text", "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8,
         "head_dim": 128, "num_hidden_layers": 48, "rope_theta": 500000.0, "attn_temperature_tuning": True,
         "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0,
                          "original_max_position_embeddings": 8192}},
        "Llama 4: every fourth layer has no RoPE (no_rope_layers, transformers' default rule) and scales its "
        "queries by log(1 + ⌊(p + 1)/8192⌋)·0.1 + 1 instead (attn_temperature_tuning); the others rotate with "
        "Llama 3 scaling.",
    ),
    "SmolLM3": (
        {"model_type": "smollm3", "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 4,
         "num_hidden_layers": 36, "rope_theta": 5000000.0, "no_rope_layer_interval": 4},
        "SmolLM3: RoPE in three layers of four, none in every fourth (no_rope_layer_interval = 4).",
    ),
    "Gemma 3": (
        {"model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8, "num_key_value_heads": 4,
         "head_dim": 256, "num_hidden_layers": 34, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
         "sliding_window_pattern": 6, "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
        "Gemma 3: five sliding-window layers (local RoPE, base 10⁴) for each full-attention one (global RoPE, "
        "base 10⁶, linear ×8).",
    ),
    "Cohere2": (
        {"model_type": "cohere2", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
         "num_hidden_layers": 32, "sliding_window_pattern": 4, "rope_theta": 50000.0},
        "Cohere2 (Command R7B): RoPE only in its sliding-window layers; every fourth layer attends globally "
        "without a position encoding.",
    ),
}  # fmt: skip
