"""``posenc.rope_from_config`` on the public configs of five model families, against transformers.

The dicts are the published ``config.json`` values that matter to RoPE (no download). Reference:
each family's rotary embedding class in transformers (``LlamaRotaryEmbedding``,
``Qwen2RotaryEmbedding``, ``Phi3RotaryEmbedding``, ``DeepseekV3RotaryEmbedding``,
``GPTNeoXRotaryEmbedding``) built from the same dict, and the family's own ``apply_rotary_pos_emb``
(``apply_rotary_pos_emb_interleave`` for DeepSeek-V3). HF forms angles in float32, posenc in float64,
so tables are compared at ``2e-6 + 1.5e-7 * largest angle``.
"""

from __future__ import annotations

import json
import sys
import warnings

import pytest
import torch

import posenc

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as deepseek_v3  # noqa: E402
from transformers.models.gemma3 import modeling_gemma3 as gemma3  # noqa: E402
from transformers.models.gemma4 import modeling_gemma4 as gemma4  # noqa: E402
from transformers.models.gpt_neox import modeling_gpt_neox as gpt_neox  # noqa: E402
from transformers.models.llama import modeling_llama as llama  # noqa: E402
from transformers.models.phi import modeling_phi as phi  # noqa: E402
from transformers.models.phi3 import modeling_phi3 as phi3  # noqa: E402
from transformers.models.qwen2 import modeling_qwen2 as qwen2  # noqa: E402

# meta-llama/Llama-3.1-8B config.json
LLAMA_31_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rms_norm_eps": 1e-05,
    "vocab_size": 128256,
}

# Qwen/Qwen2.5-7B-Instruct config.json (its README adds the YaRN block below for 128k contexts)
QWEN25_7B = {
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "num_hidden_layers": 28,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rope_scaling": None,
    "sliding_window": 131072,
    "use_sliding_window": False,
    "vocab_size": 152064,
}
QWEN25_7B_YARN = {
    **QWEN25_7B,
    "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"},
}

# microsoft/Phi-3-mini-128k-instruct config.json as first published (April 2024, type "su";
# transformers maps "su" to "longrope"); the same text-model values ship in Phi-3-vision-128k-instruct.
PHI3_LONG_FACTOR = [
    1.0299999713897705,
    1.0499999523162842,
    1.0499999523162842,
    1.0799999237060547,
    1.2299998998641968,
    1.2299998998641968,
    1.2999999523162842,
    1.4499999284744263,
    1.5999999046325684,
    1.6499998569488525,
    1.8999998569488525,
    2.859999895095825,
    3.68999981880188,
    5.419999599456787,
    5.489999771118164,
    5.489999771118164,
    9.09000015258789,
    11.579999923706055,
    15.65999984741211,
    15.769999504089355,
    15.789999961853027,
    18.360000610351562,
    21.989999771118164,
    23.079999923706055,
    30.009998321533203,
    32.35000228881836,
    32.590003967285156,
    35.56000518798828,
    39.95000457763672,
    53.840003967285156,
    56.20000457763672,
    57.95000457763672,
    59.29000473022461,
    59.77000427246094,
    59.920005798339844,
    61.190006256103516,
    61.96000671386719,
    62.50000762939453,
    63.3700065612793,
    63.48000717163086,
    63.48000717163086,
    63.66000747680664,
    63.850006103515625,
    64.08000946044922,
    64.760009765625,
    64.80001068115234,
    64.81001281738281,
    64.81001281738281,
]
PHI3_SHORT_FACTOR = [
    1.05,
    1.05,
    1.05,
    1.1,
    1.1,
    1.1,
    1.2500000000000002,
    1.2500000000000002,
    1.4000000000000004,
    1.4500000000000004,
    1.5500000000000005,
    1.8500000000000008,
    1.9000000000000008,
    2.000000000000001,
    *[2.000000000000001] * 18,
    2.1000000000000005,
    2.1000000000000005,
    2.2,
    2.3499999999999996,
    2.3499999999999996,
    2.3499999999999996,
    2.3499999999999996,
    2.3999999999999995,
    2.3999999999999995,
    2.6499999999999986,
    2.6999999999999984,
    2.8999999999999977,
    2.9499999999999975,
    3.049999999999997,
    3.049999999999997,
    3.049999999999997,
]
PHI3_MINI_128K = {
    "model_type": "phi3",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "num_hidden_layers": 32,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "sliding_window": 262144,
    "vocab_size": 32064,
    "rope_scaling": {"long_factor": PHI3_LONG_FACTOR, "short_factor": PHI3_SHORT_FACTOR, "type": "su"},
    "pad_token_id": 32000,
    "bos_token_id": 1,
    "eos_token_id": 32000,
}

# deepseek-ai/DeepSeek-V3 config.json (MLA: RoPE acts on a 64-wide slice of each head)
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "num_hidden_layers": 61,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "max_position_embeddings": 163840,
    "rope_theta": 10000,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "vocab_size": 129280,
}

# EleutherAI/pythia-70m config.json (GPT-NeoX: a quarter of each head rotates)
PYTHIA_70M = {
    "model_type": "gpt_neox",
    "hidden_size": 512,
    "intermediate_size": 2048,
    "num_attention_heads": 8,
    "num_hidden_layers": 6,
    "max_position_embeddings": 2048,
    "rotary_pct": 0.25,
    "rotary_emb_base": 10000,
    "use_parallel_residual": True,
    "vocab_size": 50304,
}

# name: (config, HF rotary class, HF apply function, expected (dim, rotary width, base, layout, scaling type))
FAMILIES = {
    "llama-3.1-8b": (
        LLAMA_31_8B,
        llama.LlamaRotaryEmbedding,
        llama.apply_rotary_pos_emb,
        (128, 128, 500000.0, "half", "llama3"),
    ),
    "qwen2.5-7b": (
        QWEN25_7B,
        qwen2.Qwen2RotaryEmbedding,
        qwen2.apply_rotary_pos_emb,
        (128, 128, 1e6, "half", "default"),
    ),
    "qwen2.5-7b-yarn": (
        QWEN25_7B_YARN,
        qwen2.Qwen2RotaryEmbedding,
        qwen2.apply_rotary_pos_emb,
        (128, 128, 1e6, "half", "yarn"),
    ),
    "phi-3-mini-128k": (
        PHI3_MINI_128K,
        phi3.Phi3RotaryEmbedding,
        phi3.apply_rotary_pos_emb,
        (96, 96, 10000.0, "half", "longrope"),
    ),
    "deepseek-v3": (
        DEEPSEEK_V3,
        deepseek_v3.DeepseekV3RotaryEmbedding,
        deepseek_v3.apply_rotary_pos_emb_interleave,
        (64, 64, 10000.0, "interleaved", "yarn"),
    ),
    "pythia-70m": (
        PYTHIA_70M,
        gpt_neox.GPTNeoXRotaryEmbedding,
        gpt_neox.apply_rotary_pos_emb,
        (64, 16, 10000.0, "half", "default"),
    ),
}


def hf_rotary(config: dict, cls):
    scaling = config.get("rope_scaling") or {}
    if scaling.get("type") == "su":
        # transformers 5.x's Phi3Config validates before it maps "su" to "longrope" and then misses
        # original_max_position_embeddings (KeyError); the later config revision spells it "longrope"
        config = {**config, "rope_scaling": {**scaling, "type": "longrope"}}
    return cls(CONFIG_MAPPING[config["model_type"]](**config))


@pytest.mark.parametrize("name", FAMILIES)
def test_fields_are_read_as_transformers_reads_them(name):
    config, _, _, (dim, width, base, layout, kind) = FAMILIES[name]
    rope = posenc.rope_from_config(config)
    assert (rope.config.dim, rope.config.rotary_width, rope.config.base, rope.config.layout) == (
        dim,
        width,
        base,
        layout,
    )
    assert (rope.config.scaling or {"rope_type": "default"})["rope_type"] == kind
    assert rope.inv_freq.shape == (width // 2,)


def _positions(name: str) -> list[torch.Tensor]:
    if name == "phi-3-mini-128k":  # both sides of LongRoPE's switch at 4096
        short = torch.arange(0, 4096, 5)  # last position 4095: short factors
        return [short[None], torch.cat((short, torch.tensor([4096])))[None], torch.arange(4000, 6000)[None]]
    return [torch.arange(300)[None], torch.arange(2048, 2048 + 300)[None]]


#: float32's unit roundoff: one rounding moves a value by at most this much of itself.
U32 = 2.0**-24


def hf_table_bound(positions: torch.Tensor, hf_inv_freq: torch.Tensor, inv_freq: torch.Tensor, scale: float):
    """How far transformers' float32 tables ``[1, s, r]`` (half layout) may lie from posenc's, entry
    by entry, from the arithmetic each does (no measured slack). transformers rounds its frequencies
    to float32 (``hf_inv_freq``, off the exact ``inv_freq`` by what it is off), forms each angle
    ``p * f`` in float32 (one rounding: at most ``U32 * p * f``), and takes cos/sin in float32 (within
    one unit in the last place: ``2 * U32`` for values up to 1); posenc forms the angle in float64
    and rounds once (``U32``). |cos a - cos b| <= |a - b|, so the angle errors pass through as they
    are; both sides then multiply by ``scale`` (one more rounding each). At position 2347 the angle
    rounding alone is 1.4e-4 (float32 has 2.4e-4 between neighbours at 2048-4096), which is what
    Llama 3.1's tables differ by there (1.5e-4; the bound there is 1.9e-4)."""
    p = positions.double()[..., None]  # [1, s, 1]
    exact = inv_freq.double()
    angle = (p * (hf_inv_freq.double() - exact).abs()) + U32 * p * hf_inv_freq.double()  # [1, s, r/2]
    bound = (angle + 3 * U32) * max(scale, 1.0) * (1 + 2 * U32) + 2 * U32 * max(scale, 1.0)
    return torch.cat((bound, bound), dim=-1)  # [1, s, r]


@pytest.mark.parametrize("name", FAMILIES)
def test_tables_and_rotation_match_transformers(name):
    """posenc's tables and rotation against transformers' rotary module and apply function, each
    entry within :func:`hf_table_bound` (transformers' float32 rounding, derived, not measured), and
    the rotation within what those table errors and float32 products can move it."""
    config, rotary_cls, apply, _ = FAMILIES[name]
    rope, hf = posenc.rope_from_config(config), hf_rotary(config, rotary_cls)
    width, layout = rope.config.rotary_width, rope.config.layout
    for positions in _positions(name):
        hf_cos, hf_sin = hf(torch.zeros(1), positions)  # [1, s, r], HF's half layout
        seq_len = int(positions.max()) + 1
        # after the call: LongRoPE's module switches its inv_freq buffer to the long factors there
        bound = hf_table_bound(positions, hf.inv_freq, rope.inv_freq_at(seq_len), rope.attention_scale)
        cos, sin = rope.cos_sin(positions)
        if layout == "interleaved":  # same angles, pairs (2i, 2i+1) instead of (i, i + r/2)
            cos, sin = (torch.cat((t[..., 0::2], t[..., 0::2]), dim=-1) for t in (cos, sin))
            assert torch.equal(rope.cos_sin(positions)[0][..., 0::2], rope.cos_sin(positions)[0][..., 1::2])
        for what, got, want in (("cos", cos, hf_cos), ("sin", sin, hf_sin)):
            error = (got.double() - want.double()).abs()
            worst = int((error - bound).argmax())
            assert bool((error <= bound).all()), (
                f"{name} {what}: {error.flatten()[worst]:.3g} off transformers at entry {worst} "
                f"(bound {bound.flatten()[worst]:.3g}; largest error {error.max():.3g})"
            )
        assert rope.attention_scale == pytest.approx(hf.attention_scaling, rel=1e-12)
        tol = float(bound.max())

        head_dim = rope.config.dim
        q, k = torch.randn(1, 2, positions.shape[-1], head_dim), torch.randn(1, 2, positions.shape[-1], head_dim)
        want_q, want_k = apply(q, k, hf_cos, hf_sin)
        got_q, got_k = rope.rotate(q, k, positions, positions)
        if layout == "interleaved":  # HF's interleave function writes its output in half order
            perm = posenc.functional.rope_layout_permutation(head_dim, source="interleaved", target="half")
            got_q, got_k = got_q[..., perm], got_k[..., perm]
        # q·cos + rot(q)·sin: two table errors of at most tol each, and three float32 roundings of
        # values up to 2|q| on each side
        for got, want, x in ((got_q, want_q, q), (got_k, want_k, k)):
            top = float(x.abs().max())
            torch.testing.assert_close(got, want, rtol=0, atol=2 * top * tol + 12 * U32 * top)
        if width < head_dim:
            assert torch.equal(got_q[..., width:], q[..., width:])


def test_deepseek_v3_yarn_attention_factor_is_one_and_frequencies_are_yarn():
    """mscale == mscale_all_dim: the cos/sin factor cancels to 1 (the softmax scale, not RoPE's, carries it)."""
    rope = posenc.rope_from_config(DEEPSEEK_V3)
    assert rope.attention_scale == 1.0
    ref, _ = posenc.functional.rope_inv_freq(
        64,
        scaling={
            "rope_type": "yarn",
            "factor": 40,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
        },
    )
    assert torch.equal(rope.inv_freq, ref)
    half = posenc.rope_from_config({**DEEPSEEK_V3, "rope_interleave": False})
    assert half.config.layout == "half"


def test_phi3_switches_at_the_original_length():
    rope = posenc.rope_from_config(PHI3_MINI_128K)
    default, _ = posenc.functional.rope_inv_freq(96)
    short = default / torch.tensor(PHI3_SHORT_FACTOR, dtype=torch.float64)
    long = default / torch.tensor(PHI3_LONG_FACTOR, dtype=torch.float64)
    assert torch.equal(rope.inv_freq_at(4096), short) and torch.equal(rope.inv_freq_at(4097), long)
    assert rope.attention_scale == pytest.approx(
        (1 + torch.log(torch.tensor(32.0)).item() / torch.log(torch.tensor(4096.0)).item()) ** 0.5
    )
    spelled = posenc.rope_from_config(
        {**PHI3_MINI_128K, "rope_scaling": {**PHI3_MINI_128K["rope_scaling"], "type": "longrope"}}
    )
    assert torch.equal(spelled.inv_freq, rope.inv_freq)


def test_transformers5_rope_parameters_and_a_config_object_are_read():
    """In transformers >= 5 the base and the scaling live together in ``rope_parameters``."""
    v5 = {k: v for k, v in LLAMA_31_8B.items() if k not in ("rope_theta", "rope_scaling")}
    v5["rope_parameters"] = {**LLAMA_31_8B["rope_scaling"], "rope_theta": 500000.0}
    a, b = posenc.rope_from_config(v5), posenc.rope_from_config(LLAMA_31_8B)
    assert torch.equal(a.inv_freq, b.inv_freq) and a.config.base == 500000.0
    c = posenc.rope_from_config(CONFIG_MAPPING["llama"](**LLAMA_31_8B))
    assert torch.equal(c.inv_freq, b.inv_freq)


def test_dynamic_takes_max_position_embeddings_as_its_original_length():
    config = {**QWEN25_7B, "rope_scaling": {"type": "dynamic", "factor": 2.0}}
    rope = posenc.rope_from_config(config)
    assert rope.original_length == 32768
    hf = hf_rotary(config, qwen2.Qwen2RotaryEmbedding)
    hf(torch.zeros(1), torch.arange(40000)[None])
    torch.testing.assert_close(rope.inv_freq_at(40000), hf.inv_freq.double(), rtol=1e-6, atol=0)


def test_path_and_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(PYTHIA_70M), encoding="utf-8")
    for source in (tmp_path, tmp_path / "config.json", str(tmp_path / "config.json")):
        rope = posenc.rope_from_config(source)
        assert (rope.config.dim, rope.config.rotary_width) == (64, 16)


def test_gptj_rotary_dim_and_interleaved_layout():
    """EleutherAI/gpt-j-6b: n_embd 4096, n_head 16, rotary_dim 64, rotate_every_two (interleaved)."""
    rope = posenc.rope_from_config(
        {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64, "n_positions": 2048}
    )
    assert (rope.config.dim, rope.config.rotary_width, rope.config.layout) == (256, 64, "interleaved")


def test_bad_configs(tmp_path):
    with pytest.raises(ValueError, match=r"unknown pair layout for model_type 'mystery'; pass layout="):
        posenc.rope_from_config({"model_type": "mystery", "hidden_size": 64, "num_attention_heads": 2})
    rope = posenc.rope_from_config(
        {"model_type": "mystery", "hidden_size": 64, "num_attention_heads": 2}, layout="interleaved"
    )
    assert rope.config.layout == "interleaved"
    with pytest.raises(ValueError, match=r"config needs 'head_dim', or 'hidden_size' and 'num_attention_heads'"):
        posenc.rope_from_config({"model_type": "mystery"}, layout="half")
    # a key the rope type does not take: transformers logs it and goes on, and posenc warns and goes on
    with pytest.warns(
        UserWarning, match=r"config rope scaling 'llama3' does not take \['beta_fast'\] \(it takes .*\); posenc rotates"
    ):
        stray = posenc.rope_from_config(
            {**LLAMA_31_8B, "rope_scaling": {**LLAMA_31_8B["rope_scaling"], "beta_fast": 32}}
        )
    assert stray.config == posenc.rope_from_config(LLAMA_31_8B).config
    with pytest.raises(ValueError, match=r"no config file at"):
        posenc.rope_from_config(tmp_path / "missing.json")
    with pytest.raises(
        TypeError, match=r"config must be a dict, a path to config.json or a transformers config, got int"
    ):
        posenc.rope_from_config(3)
    with pytest.raises(ValueError, match=r"partial_rotary_factor \(rotary_pct\) must be a number in \(0, 1\], got 1.5"):
        posenc.rope_from_config({**PYTHIA_70M, "rotary_pct": 1.5})
    with pytest.raises(ValueError, match=r"unknown layout 'diagonal'"):
        posenc.rope_from_config(PYTHIA_70M, layout="diagonal")


def test_partial_rotary_factor_only_where_the_family_reads_it():
    """transformers' Llama rotates the whole head whatever ``partial_rotary_factor`` says (its code
    never reads it); Phi and GPT-NeoX rotate the given fraction. posenc follows each family: scores
    of q and k equal transformers' for a Llama dict carrying the factor (it used to rotate half)."""
    cfg = {
        "model_type": "llama",
        "hidden_size": 128,
        "num_attention_heads": 2,
        "partial_rotary_factor": 0.5,
        "max_position_embeddings": 64,
        "rope_theta": 10000.0,
    }
    rope = posenc.rope_from_config(cfg)
    assert rope.config.rotary_width == 64
    hf = llama.LlamaRotaryEmbedding(CONFIG_MAPPING["llama"](**cfg))
    q, k = torch.randn(2, 1, 2, 7, 64).unbind(0)
    positions = torch.arange(7)[None] + 5
    cos, sin = hf(q, positions)
    eq, ek = llama.apply_rotary_pos_emb(q, k, cos, sin)
    gq, gk = rope.rotate(q, k, positions[0], positions[0])
    torch.testing.assert_close(gq, eq, atol=2e-5, rtol=0)
    torch.testing.assert_close(gk, ek, atol=2e-5, rtol=0)
    phi = posenc.rope_from_config(
        {"model_type": "phi", "hidden_size": 128, "num_attention_heads": 2, "partial_rotary_factor": 0.5}
    )
    assert phi.config.rotary_width == 32


def _rotated_like_transformers(rope, cos, sin, apply, positions, head_dim, tol):
    """q and k rotated by ``rope`` equal ``apply`` with transformers' tables (``apply(x, cos, sin)``
    for one tensor, or ``apply(q, k, cos, sin)``)."""
    q, k = torch.randn(2, 1, 2, positions.shape[-1], head_dim).unbind(0)
    try:
        want_q, want_k = apply(q, k, cos, sin)
    except TypeError:  # Gemma 4 rotates one tensor at a time
        want_q, want_k = apply(q, cos, sin), apply(k, cos, sin)
    got_q, got_k = rope.rotate(q, k, positions[0], positions[0])
    torch.testing.assert_close(got_q, want_q, rtol=0, atol=tol)
    torch.testing.assert_close(got_k, want_k, rtol=0, atol=tol)


def test_rope_scaling_wins_over_rope_parameters_as_in_transformers():
    """HF ``convert_rope_params_to_dict``: ``rope_scaling or rope_parameters``; posenc used to take
    ``rope_parameters`` (a max error of 6.9 against transformers for this config)."""
    cfg = {
        "model_type": "llama",
        "hidden_size": 256,
        "num_attention_heads": 4,
        "max_position_embeddings": 2048,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "rope_scaling": {"rope_type": "linear", "factor": 4.0},
    }
    rope = posenc.rope_from_config(cfg)
    assert rope.config.scaling == {"rope_type": "linear", "factor": 4.0}
    hf = llama.LlamaRotaryEmbedding(CONFIG_MAPPING["llama"](**cfg))
    positions = torch.arange(100, 116)[None]
    cos, sin = hf(torch.zeros(1), positions)
    _rotated_like_transformers(rope, cos, sin, llama.apply_rotary_pos_emb, positions, 64, 2e-5)


@pytest.mark.parametrize(
    "scaling",
    [
        None,
        {"rope_type": "linear", "factor": 3.0},
        {"rope_type": "dynamic", "factor": 2.0},
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
    ],
)
def test_gpt_neox_odd_rotary_width_as_transformers_reads_it(scaling):
    """rotary_pct 0.3 of 64 is 19 in transformers' GPT-NeoX: ten frequencies base^(-2i/19), rotating
    20 features (its ``rotate_half`` splits ``cos.shape[-1]``). posenc refused it."""
    cfg = {
        "model_type": "gpt_neox",
        "hidden_size": 256,
        "num_attention_heads": 4,
        "rotary_pct": 0.3,
        "rotary_emb_base": 10000,
        "max_position_embeddings": 2048,
        "rope_scaling": scaling,
    }
    rope = posenc.rope_from_config(cfg)
    assert (rope.config.rotary_dim, rope.config.frequency_dim, rope.config.rotary_width) == (19, 19, 20)
    assert rope.inv_freq.shape == (10,)
    if scaling is None or scaling["rope_type"] == "linear":
        torch.testing.assert_close(
            rope.inv_freq[1], torch.tensor(10000.0 ** (-2 / 19), dtype=torch.float64) / (3.0 if scaling else 1.0)
        )
    hf = gpt_neox.GPTNeoXRotaryEmbedding(CONFIG_MAPPING["gpt_neox"](**cfg))
    positions = torch.arange(3000, 3016)[None]  # past max_position_embeddings: dynamic rescales
    cos, sin = hf(torch.zeros(1), positions)
    assert cos.shape[-1] == 20
    _rotated_like_transformers(rope, cos, sin, gpt_neox.apply_rotary_pos_emb, positions, 64, 8 * (2e-6 + 1.5e-7 * 3016))


def test_odd_widths_only_where_transformers_runs_them():
    with pytest.raises(
        ValueError,
        match=r"rope scaling 'yarn' needs an even rotated width, got 19 .*an odd width "
        r"works with: default, linear, ntk, dynamic, llama3",
    ):
        posenc.create(
            "rope",
            dim=64,
            rotary_dim=19,
            scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
        )
    with pytest.raises(ValueError, match=r"rotary_dim must be at most dim=64 \(rounded up to even when odd"):
        posenc.create("rope", dim=64, rotary_dim=65)


GEMMA3_FLAT = {  # google/gemma-3 text config.json in its flat (pre-transformers-5) form, small sizes
    "model_type": "gemma3_text",
    "hidden_size": 256,
    "num_attention_heads": 4,
    "head_dim": 64,
    "num_hidden_layers": 6,
    "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    "max_position_embeddings": 4096,
}


def test_gemma3_has_a_rope_per_layer_type():
    """Sliding-window layers use ``rope_local_base_freq`` unscaled, full-attention layers
    ``rope_theta`` with ``rope_scaling`` (HF ``Gemma3TextConfig``); posenc used to return only the
    latter, silently."""
    hf = gemma3.Gemma3RotaryEmbedding(CONFIG_MAPPING["gemma3_text"](**GEMMA3_FLAT))
    positions = torch.arange(500, 532)[None]
    expected = {"full_attention": (1e6, {"rope_type": "linear", "factor": 8.0}), "sliding_attention": (1e4, None)}
    for layer_type, (base, scaling) in expected.items():
        rope = posenc.rope_from_config(GEMMA3_FLAT, layer_type=layer_type)
        assert (rope.config.base, rope.config.scaling, rope.config.layout) == (base, scaling, "half")
        cos, sin = hf(torch.zeros(1), positions, layer_type)
        _rotated_like_transformers(
            rope, cos, sin, gemma3.apply_rotary_pos_emb, positions, 64, 8 * (2e-6 + 1.5e-7 * 532)
        )
    with pytest.raises(
        ValueError,
        match=r"this config has a RoPE per layer type \(full_attention, sliding_attention\); "
        r"pass layer_type= one of",
    ):
        posenc.rope_from_config(GEMMA3_FLAT)
    with pytest.raises(
        ValueError,
        match=r"unknown layer_type 'global'; this config's RoPEs are for: full_attention, "
        r"sliding_attention",
    ):
        posenc.rope_from_config(GEMMA3_FLAT, layer_type="global")
    with pytest.raises(
        ValueError,
        match=r"layer_type='full_attention' picks one of a config's per-layer-type RoPEs, "
        r"and this config has a single RoPE",
    ):
        posenc.rope_from_config(LLAMA_31_8B, layer_type="full_attention")


@pytest.mark.parametrize("form", ["flat", "transformers"])
def test_gemma3n_reads_its_local_base_as_gemma3_does(form):
    """Gemma 3n's config class reads ``rope_local_base_freq`` for its sliding layers like Gemma 3's
    (HF ``Gemma3nTextConfig.convert_rope_params_to_dict``); posenc used to refuse the model type."""
    from transformers.models.gemma3n import modeling_gemma3n as gemma3n

    flat = {
        **GEMMA3_FLAT,
        "model_type": "gemma3n_text",
        "rope_local_base_freq": 20000.0,
        "layer_types": ["sliding_attention"] * 4 + ["full_attention"] * 2,
    }
    hf_config = CONFIG_MAPPING["gemma3n_text"](**{k: v for k, v in flat.items() if k != "model_type"})
    cfg = flat if form == "flat" else hf_config.to_dict()
    hf = gemma3n.Gemma3nRotaryEmbedding(hf_config)
    positions = torch.arange(700, 716)[None]
    for layer_type, base in (("full_attention", 1e6), ("sliding_attention", 2e4)):
        rope = posenc.rope_from_config(cfg, layer_type=layer_type)
        assert (rope.config.base, rope.config.dim, rope.config.layout) == (base, 64, "half")
        cos, sin = hf(torch.zeros(1), positions, layer_type)
        _rotated_like_transformers(
            rope, cos, sin, gemma3n.apply_rotary_pos_emb, positions, 64, 8 * (2e-6 + 1.5e-7 * 716)
        )


@pytest.mark.parametrize("form", ["transformers", "hub"])
def test_gemma4_proportional_rope_on_wider_full_attention_heads(form):
    """Gemma 4: sliding layers plain RoPE (base 1e4, head 64 here), full-attention layers
    ``proportional`` RoPE (a quarter of the frequencies non-zero over the whole head) on heads of
    ``global_head_dim``; transformers' own dict keeps that width as a ``per_layer_config`` override."""
    hf_config = CONFIG_MAPPING["gemma4_text"](
        hidden_size=256, num_attention_heads=4, head_dim=64, global_head_dim=128, num_hidden_layers=6
    )
    cfg = hf_config.to_dict()
    if form == "hub":
        cfg = {k: v for k, v in cfg.items() if k != "per_layer_config"} | {"global_head_dim": 128}
    hf = gemma4.Gemma4TextRotaryEmbedding(hf_config)
    positions = torch.arange(1000, 1016)[None]
    for layer_type, head_dim, kind in (("full_attention", 128, "proportional"), ("sliding_attention", 64, "default")):
        rope = posenc.rope_from_config(cfg, layer_type=layer_type)
        assert (rope.config.dim, rope.config.rotary_width) == (head_dim, head_dim)
        assert (rope.config.scaling or {"rope_type": "default"})["rope_type"] == kind
        cos, sin = hf(torch.zeros(1), positions, layer_type)
        _rotated_like_transformers(
            rope, cos, sin, gemma4.apply_rotary_pos_emb, positions, head_dim, 8 * (2e-6 + 1.5e-7 * 1016)
        )  # HF's float32 angles
    full = posenc.rope_from_config(cfg, layer_type="full_attention")
    assert int((full.inv_freq > 0).sum()) == 16 and full.inv_freq.shape == (64,)  # 0.25 * 128 / 2 rotate


def test_partial_rotary_defaults_of_each_family():
    """A config.json without ``partial_rotary_factor`` gets the family's default, as transformers'
    config classes set it (Phi 0.5, GPT-NeoX/StableLM 0.25), not 1."""
    cfg = {"model_type": "phi", "hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 512}
    rope = posenc.rope_from_config(cfg)
    assert rope.config.rotary_width == 32
    hf = phi.PhiRotaryEmbedding(CONFIG_MAPPING["phi"](**cfg))
    positions = torch.arange(40)[None]
    cos, sin = hf(torch.zeros(1), positions)
    assert cos.shape[-1] == 32
    assert posenc.rope_from_config({**cfg, "model_type": "stablelm"}).config.rotary_width == 16


def test_gemma_configs_as_transformers_writes_them():
    """transformers' JSON keys per-layer overrides by zero-padded layer index ("05") and drops an
    override equal to head_dim; gemma-3-4b-it's text_config has no head_dim (the class default 256)."""
    import json

    saved = json.loads(CONFIG_MAPPING["gemma4_text"](num_hidden_layers=30, global_head_dim=128).to_json_string())
    assert any(k.startswith("0") for k in saved["per_layer_config"])  # "05", ...
    assert posenc.rope_from_config(saved, layer_type="full_attention").config.dim == 128
    same = json.loads(
        CONFIG_MAPPING["gemma4_text"](num_hidden_layers=6, head_dim=256, global_head_dim=256).to_json_string()
    )
    assert posenc.rope_from_config(same, layer_type="full_attention").config.dim == 256
    multimodal = {
        "model_type": "gemma3",
        "text_config": {
            "hidden_size": 2560,
            "intermediate_size": 10240,
            "model_type": "gemma3_text",
            "num_hidden_layers": 34,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
        },
    }
    local = posenc.rope_from_config(multimodal, layer_type="sliding_attention")
    full = posenc.rope_from_config(multimodal, layer_type="full_attention")
    assert (local.config.dim, local.config.base, local.config.scaling) == (256, 10000.0, None)
    assert (full.config.base, full.config.scaling) == (1e6, {"rope_type": "linear", "factor": 8.0})
    with pytest.raises(ValueError, match="rope scaling 'proportional' spans the whole head"):
        posenc.create(
            "rope", dim=64, rotary_dim=32, scaling={"rope_type": "proportional", "partial_rotary_factor": 0.5}
        )


def _hf_rotary_module(model_type: str, hf_config):
    """The model type's own rotary embedding module, built from ``hf_config``."""
    import importlib

    from transformers.models.auto.configuration_auto import model_type_to_module_name

    name = model_type_to_module_name(model_type)
    name = {
        "gemma3_text": "gemma3",
        "gemma3n_text": "gemma3n",
        "gemma4_text": "gemma4",
        "qwen3_5_text": "qwen3_5",
        "qwen3_5_moe_text": "qwen3_5_moe",
    }.get(name, name)
    module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    prefix = type(hf_config).__name__.removesuffix("Config")
    for candidate in (prefix, prefix.removesuffix("Text")):
        cls = getattr(module, f"{candidate}RotaryEmbedding", None)
        if cls is not None:
            return cls(hf_config)
    # sub-configs of a family (BLT's blt_local_encoder, Mimi's mimi_encoder...): the family's text module
    for name, cls in vars(module).items():
        if name.endswith("RotaryEmbedding") and isinstance(cls, type) and "Vision" not in name:
            try:
                return cls(hf_config)
            except (AttributeError, KeyError, TypeError, ValueError):
                continue
    raise AssertionError(f"no rotary embedding class for {model_type} in {module.__name__}")


#: Model types whose transformers code builds its tables without a rotary module (GPT-J, CodeGen:
#: ``create_sinusoidal_positions`` over ``rotary_dim``, 64 by default).
_NO_ROTARY_MODULE = ("gptj", "codegen")

#: Model types whose module-level ``apply_rotary_pos_emb`` is not what their attention applies to
#: these tables as a whole (DeepSeek-V2's complex ``freqs_cis``, DeepSeek-V3's interleaved variant;
#: Phi, Persimmon and StableLM slice the rotated part off q before calling it): covered by their
#: own tests above.
_OWN_APPLY = (
    "deepseek_v2",
    "deepseek_v3",
    "phi",
    "persimmon",
    "stablelm",
    # apply_rotary_pos_emb_interleave, GPT-OSS's half-width tables: tests/test_rope_config_sweep.py
    "axk1",
    "axk2",
    "bailing_hybrid",
    "deepseek_v32",
    "glm4_moe_lite",
    "glm_moe_dsa",
    "longcat_flash",
    "mistral4",
    "youtu",
    "gpt_oss",
    "openai_privacy_filter",
)

#: Config classes whose validators refuse the bare sizes below (ESMC and Dots3-Note: no grouped-query
#: attention; PocketTTS, Gradium and Dots3-Note's audio encoder tie other sizes to ``hidden_size``):
#: their default configs are read in tests/test_rope_config_sweep.py.
_STRICT_SIZES = ("dots3_note_text", "dots3_note_audio_encoder", "esmc", "gradium_phonon_tts", "pocket_tts")
#: Types without a modelling module of their own (EXAONE, InternLM3 and IQuest-Coder run Llama's, Sarvam
#: DeepSeek-V3's and GLM-4-MoE's): tests/integrations/test_transformers_every_type.py patches them.
_BORROWED_MODEL = ("exaone", "internlm3", "iquestcoder", "sarvam_mla", "sarvam_moe")


#: Model types whose rotary module transformers 5.24 cannot build with a flat dynamic
#: ``rope_scaling`` beside the bare sizes: head_dim None (Ministral, Mixtral, MiniMax), mscales
#: required (PhiMoE), HunYuan; a KeyError for the per-layer-type ones (their modules look up
#: ``rope_parameters[layer_type]``, which a flat dict lacks); Phi-4-multimodal's validator takes
#: only ``longrope``; RecurrentGemma's module takes only ``default``.
_NO_BARE_DYNAMIC = (
    "ministral",
    "mixtral",
    "phimoe",
    "minimax",
    "hunyuan_v1_dense",
    "hunyuan_v1_moe",
    "beam",
    "diffusion_gemma_text",
    "dory",
    "embedding_gemma2_text",
    "gemma4_unified_text",
    "laguna",
    "lfm3",
    "mellum",
    "mimo_v2_flash",
    "ultrabert",
    "zaya",
    "phi4_multimodal",
    "recurrent_gemma",
)
#: What transformers 5.24 does with a partial factor beside a multi-head-latent slice: the rope
#: dict takes the top-level ``partial_rotary_factor`` (``standardize_rope_params``), the rotary
#: module builds tables ``int(64 * 0.75) = 48`` wide from it, and the attention rotates the whole
#: ``qk_rope_head_dim`` = 64 slice with them (``apply_rotary_pos_emb_interleave``: RuntimeError, 32
#: features against 24). posenc rotates the whole slice with 32 frequencies, as the attention would:
#: ``test_bare_variants_transformers_cannot_apply_partial_mla``.
_MLA_PARTIAL = (
    "transformers 5.24 builds {module}'s tables over int(qk_rope_head_dim * partial_rotary_factor) = 48 "
    "features ({rule}) and {attention}.forward rotates the whole 64-wide qk_rope slice with them "
    "(apply_rotary_pos_emb_interleave raises: 32 features against 24); posenc rotates the whole slice "
    "(test_bare_variants_transformers_cannot_apply_*)"
)
#: Bare-config variants (sizes only, plus a partial factor or a dynamic scaling) where posenc and
#: transformers differ; the default configs of these types agree (test_rope_config_sweep.py).
_BARE_GAPS = {
    ("partial", "glm4_moe_lite"): _MLA_PARTIAL.format(
        module="Glm4MoeLiteRotaryEmbedding",
        rule="its compute_default_rope_parameters",
        attention="Glm4MoeLiteAttention",
    ),
    ("partial", "mistral_large4_text"): _MLA_PARTIAL.format(
        module="MistralLarge4TextRotaryEmbedding",
        rule="its class default yarn, _compute_yarn_parameters",
        attention="MistralLarge4TextAttention",
    ),
    ("partial", "diffusion_gemma_text"): (
        "transformers 5.24: the full-attention proportional rule (_compute_proportional_rope_parameters, "
        "built first) calls config.standardize_rope_params(), which copies the top-level "
        "partial_rotary_factor into the sliding_attention dict; DiffusionGemmaTextRotaryEmbedding."
        "compute_default_rope_parameters (unlike Gemma 4's) reads it there and builds 192-wide sliding "
        "tables, which the attention's apply_rotary_pos_emb cannot apply to its 256-wide heads "
        "(RuntimeError); posenc rotates the whole sliding head, as Gemma 4 "
        "(test_bare_variants_transformers_cannot_apply_*)"
    ),
    ("dynamic", "mistral4"): (
        "transformers 5.24: Mistral4Config.__post_init__ sets partial_rotary_factor = qk_rope_head_dim / "
        "head_dim on its rope_parameters, which convert_rope_params_to_dict then replaces with the legacy "
        "rope_scaling, so Mistral4RotaryEmbedding builds 128-wide tables that Mistral4Attention applies to "
        "the 64-wide qk_rope slice (RuntimeError); posenc reads the slice, as transformers does for the same "
        "scaling under rope_parameters (test_bare_variants_transformers_cannot_apply_*)"
    ),
    ("dynamic", "cohere2_moe"): (
        "Cohere2MoeConfig drops a top-level rope_scaling (its rope_parameters stay default) where posenc reads it"
    ),
    ("dynamic", "esm"): (
        "EsmRotaryEmbedding computes only the default frequencies (its rope_type is empty, so "
        "dynamic_rope_update never rescales) where posenc reads the scaling"
    ),
}


def _bare_model_types() -> list[str]:
    """The known model types whose config class takes the text model's sizes at its top level
    (multimodal wrappers, read through their ``text_config``, are covered by the sweep)."""
    types = []
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # default token ids outside tiny vocabularies: logged
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type in sorted(posenc.config.MODEL_LAYOUTS):
            if model_type in _STRICT_SIZES or model_type in _BORROWED_MODEL:
                continue
            config = CONFIG_MAPPING[model_type]()
            text = config.get_text_config(decoder=True)
            if text is config or text.model_type == model_type:
                types.append(model_type)
    transformers.logging.set_verbosity(verbosity)
    return types


@pytest.mark.parametrize("model_type", _bare_model_types())
@pytest.mark.parametrize("scaling", [None, "partial", {"rope_type": "dynamic", "factor": 2.0}])
def test_every_model_type_reads_a_bare_config_as_transformers_does(model_type, scaling):
    """A config.json that names only the sizes gets what transformers' config class gives the rest
    (``default_theta``, a fixed ``head_dim``, ``max_position_embeddings`` for the dynamic rule, the
    family's rotated share, Apertus' default Llama 3 scaling, Gemma 4's proportional RoPE):
    frequencies, rotated width and attention scale equal the model's own rotary module's. posenc
    used to give every model type base 10000 and ``hidden_size / num_attention_heads``.

    ``partial``: a top-level ``partial_rotary_factor`` of 0.75, which only some families read (the
    others rotate the whole head; Bamba's class sets 0.5 over it); posenc used to honour it for ~20
    types that ignore it (errors of 5-8 against their ``apply_rotary_pos_emb``)."""
    bare = {"hidden_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2}
    variant = "partial" if scaling == "partial" else "dynamic" if scaling else None
    if (variant, model_type) in _BARE_GAPS:
        pytest.skip(_BARE_GAPS[variant, model_type])
    if scaling == "partial":
        if model_type in ("apertus", "cwm", "solar_open", "apertus1p5_text", "ministral3", "higgs_audio_v2"):
            pytest.skip(
                "transformers 5.24 builds these frequencies over the partial width (a class default "
                "llama3 or yarn scaling; Solar Open's rotary module) and then cannot apply them to the whole head"
            )
        scaling, bare["partial_rotary_factor"] = None, 0.75
    if scaling is not None:
        if model_type in ("apertus", "gemma4_text", "phi3", "deepseek_v2"):
            pytest.skip("a class default scaling, longrope-only, or complex-valued tables: covered elsewhere")
        if model_type in _NO_BARE_DYNAMIC:
            pytest.skip("transformers 5.24 cannot build this model type's dynamic RoPE from a bare config")
        bare["rope_scaling"] = scaling
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf_config = CONFIG_MAPPING[model_type](**json.loads(json.dumps(bare)))  # a copy: HF fills its dicts in
    params = getattr(hf_config, "rope_parameters", None) or {}
    if model_type in _NO_ROTARY_MODULE:
        rope = posenc.rope_from_config({"model_type": model_type, **bare})
        assert (rope.config.dim, rope.config.rotary_width) == (128, hf_config.rotary_dim) == (128, 64)
        return
    hf = _hf_rotary_module(model_type, hf_config)
    layer_types = sorted(set(getattr(hf, "layer_types", None) or [None]), key=str)
    for layer_type in [t for t in layer_types if t is None or params.get(t) is not None]:  # Beam: NoPE layers
        with warnings.catch_warnings():  # Ministral 3's and Mistral 4's query temperature: pinned above
            warnings.filterwarnings("ignore", message=r".*does not take \['llama_4_scaling_beta'")
            rope = posenc.rope_from_config({"model_type": model_type, **bare}, layer_type=layer_type)
        prefix = f"{layer_type}_" if layer_type else ""
        inv_freq = getattr(hf, f"{prefix}inv_freq")
        scale = getattr(hf, f"{prefix}attention_scaling")
        assert rope.inv_freq.shape == inv_freq.shape, (layer_type, rope.config)
        # a few float32 ulps: HF's llama3 smoothing (Higgs Audio v2) rounds 2.2e-6 off posenc's float64
        torch.testing.assert_close(rope.inv_freq.float(), inv_freq.float(), rtol=4e-6, atol=0)
        assert rope.attention_scale == pytest.approx(float(scale), rel=1e-6)
        apply = getattr(sys.modules[type(hf).__module__], "apply_rotary_pos_emb", None)
        if scaling is None and apply is not None and model_type not in _OWN_APPLY:  # the layout too
            positions = torch.arange(40, 56)[None]
            cos, sin = hf(torch.zeros(1), positions, *([layer_type] if layer_type else []))
            _rotated_like_transformers(rope, cos, sin, apply, positions, rope.config.dim, 8 * (2e-6 + 1.5e-7 * 56))
        if scaling is not None and layer_type in (None, "full_attention"):  # past the original length
            long = hf_config.max_position_embeddings * 3
            with torch.no_grad():  # HF's dynamic update reads the length from the largest position
                hf(torch.zeros(1), torch.tensor([[long - 1]]), *([layer_type] if layer_type else []))
            torch.testing.assert_close(
                rope.inv_freq_at(long).float(), getattr(hf, f"{prefix}inv_freq").float(), rtol=1e-5, atol=0
            )


def _hf_config(model_type, fields):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CONFIG_MAPPING[model_type](**json.loads(json.dumps(fields)))  # a copy: HF fills its dicts in


@pytest.mark.parametrize("model_type", ["glm4_moe_lite", "mistral_large4_text"])
def test_bare_variants_transformers_cannot_apply_partial_mla(model_type):
    """A top-level ``partial_rotary_factor`` beside a multi-head-latent slice (``_BARE_GAPS``):
    transformers 5.24 builds 24 frequencies (``int(64 * 0.75)`` features) and its attention then
    fails to rotate the 64-wide ``qk_rope_head_dim`` slice with them; posenc rotates the whole slice,
    with the frequencies transformers builds for the same config without the factor."""
    bare = {"hidden_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2}
    hf = _hf_rotary_module(model_type, _hf_config(model_type, {**bare, "partial_rotary_factor": 0.75}))
    assert hf.inv_freq.shape == (24,)
    cos, sin = hf(torch.zeros(1), torch.arange(4)[None])
    apply = sys.modules[type(hf).__module__].apply_rotary_pos_emb_interleave
    q = torch.randn(1, 2, 4, 64)
    with pytest.raises(RuntimeError, match="must match the size"):
        apply(q, q, cos, sin)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rope = posenc.rope_from_config({"model_type": model_type, **bare, "partial_rotary_factor": 0.75})
    assert (rope.config.dim, rope.config.rotary_dim, rope.config.layout) == (64, None, "interleaved")
    _same_frequencies(rope, _hf_rotary_module(model_type, _hf_config(model_type, bare)))


def test_bare_variants_transformers_cannot_apply_diffusion_gemma_partial():
    """Diffusion Gemma with a top-level ``partial_rotary_factor`` (``_BARE_GAPS``): transformers
    5.24's proportional rule copies it into the sliding-window dict, whose tables then span
    ``int(256 * 0.75)`` = 192 features that its attention cannot apply to the 256-wide heads; posenc
    rotates the whole sliding head with Gemma 4's frequencies (whose rotary module ignores the
    factor there). The full-attention RoPE, proportional with its own factor 0.25, agrees."""
    from transformers.models.diffusion_gemma import modeling_diffusion_gemma as diffusion_gemma

    bare = {"hidden_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2, "partial_rotary_factor": 0.75}
    hf = diffusion_gemma.DiffusionGemmaTextRotaryEmbedding(_hf_config("diffusion_gemma_text", bare))
    assert hf.sliding_attention_inv_freq.shape == (96,)
    cos, sin = hf(torch.zeros(1), torch.arange(4)[None], "sliding_attention")
    with pytest.raises(RuntimeError, match="must match the size"):
        diffusion_gemma.apply_rotary_pos_emb(torch.randn(1, 4, 2, 256), cos, sin, unsqueeze_dim=2)
    cfg = {"model_type": "diffusion_gemma_text", **bare}
    sliding = posenc.rope_from_config(cfg, layer_type="sliding_attention")
    assert (sliding.config.dim, sliding.config.rotary_dim, sliding.config.base) == (256, None, 10000.0)
    gemma = gemma4.Gemma4TextRotaryEmbedding(_hf_config("gemma4_text", bare))
    _same_frequencies(sliding, gemma, "sliding_attention")
    _same_frequencies(posenc.rope_from_config(cfg, layer_type="full_attention"), hf, "full_attention")


def test_bare_variants_transformers_cannot_apply_mistral4_legacy_scaling():
    """Mistral 4 with a legacy top-level ``rope_scaling`` (``_BARE_GAPS``): transformers 5.24 loses
    the class's ``partial_rotary_factor`` (``qk_rope_head_dim / head_dim``) and builds 64
    frequencies for a 64-wide slice, which its attention cannot apply; posenc reads the scaling as
    transformers reads the same dict under ``rope_parameters``: 32 frequencies, rescaled past
    ``max_position_embeddings`` alike."""
    from transformers.models.mistral4 import modeling_mistral4 as mistral4

    bare = {"hidden_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2}
    scaling = {"rope_type": "dynamic", "factor": 2.0}
    hf = mistral4.Mistral4RotaryEmbedding(_hf_config("mistral4", {**bare, "rope_scaling": scaling}))
    assert hf.inv_freq.shape == (64,)
    cos, sin = hf(torch.zeros(1), torch.arange(4)[None])
    q = torch.randn(1, 2, 4, 64)
    with pytest.raises(RuntimeError, match="must match the size"):
        mistral4.apply_rotary_pos_emb_interleave(q, q, cos, sin)
    rope = posenc.rope_from_config({"model_type": "mistral4", **bare, "rope_scaling": scaling})
    assert (rope.config.dim, rope.config.scaling["rope_type"]) == (64, "dynamic")
    same_dict = _hf_config("mistral4", {**bare, "rope_parameters": scaling})
    _same_frequencies(rope, mistral4.Mistral4RotaryEmbedding(same_dict))
    long, hf = same_dict.max_position_embeddings * 3, mistral4.Mistral4RotaryEmbedding(same_dict)
    with torch.no_grad():  # HF's dynamic update reads the length from the largest position
        hf(torch.zeros(1), torch.tensor([[long - 1]]))
    torch.testing.assert_close(rope.inv_freq_at(long).float(), hf.inv_freq.float(), rtol=1e-5, atol=0)
    assert not torch.allclose(hf.inv_freq, hf.original_inv_freq)  # rescaled


def test_step3p5_builds_a_rope_per_layer_type_from_its_per_layer_lists():
    """Step 3.5's class builds its rope dicts from per-layer ``rope_theta`` and
    ``partial_rotary_factors`` lists (the first layer of each type), with ``rope_scaling`` on the
    full-attention dict only (HF ``Step3p7TextConfig.__post_init__``); posenc used to read its class
    default dicts and refuse the list."""
    from transformers.models.step3p7 import modeling_step3p7 as step3p7

    cfg = {
        "model_type": "step3p5",
        "hidden_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 4,
        "layer_types": ["full_attention", "sliding_attention", "full_attention", "sliding_attention"],
        "rope_theta": [500000.0, 10000.0, 500000.0, 10000.0],
        "partial_rotary_factors": [0.5, 1.0, 0.5, 1.0],
        "rope_scaling": {"rope_type": "linear", "factor": 4.0},
    }
    hf = step3p7.Step3p7RotaryEmbedding(_hf_config("step3p5", {k: v for k, v in cfg.items() if k != "model_type"}))
    full = posenc.rope_from_config(cfg, layer_type="full_attention")
    sliding = posenc.rope_from_config(cfg, layer_type="sliding_attention")
    assert (full.config.base, full.config.rotary_dim, full.config.scaling["factor"]) == (500000.0, 64, 4.0)
    assert (sliding.config.base, sliding.config.rotary_dim, sliding.config.scaling) == (10000.0, None, None)
    _same_frequencies(full, hf, "full_attention")
    _same_frequencies(sliding, hf, "sliding_attention")


def test_step3p5_per_layer_lists_must_cover_the_layers():
    """A per-layer list shorter than ``layer_types``, or ``layer_types`` that is not a list of names,
    is refused with the fields named (transformers would fail on an index)."""
    cfg = {"model_type": "step3p5", "hidden_size": 512, "num_attention_heads": 4}
    cfg["layer_types"] = ["full_attention", "sliding_attention"]
    with pytest.raises(ValueError, match=r"'rope_theta' \(\[500000.0\]\).*layer 1 is the first 'sliding_attention'"):
        posenc.rope_from_config({**cfg, "rope_theta": [500000.0]}, layer_type="sliding_attention")
    with pytest.raises(ValueError, match="'partial_rotary_factors'"):
        posenc.rope_from_config({**cfg, "partial_rotary_factors": [0.5]}, layer_type="full_attention")
    with pytest.raises(ValueError, match="'layer_types' must be a list of layer type names"):
        posenc.rope_from_config({**cfg, "layer_types": "full_attention"})


def test_deepseek_v4_builds_its_two_ropes_from_the_top_level_fields():
    """DeepSeek-V4's class gives the ``main`` RoPE ``rope_theta`` and the ``compress`` RoPE
    ``compress_rope_theta`` and the flat ``rope_scaling`` (YaRN with attention factor 1), both over
    ``partial_rotary_factor`` (else the legacy ``qk_rope_head_dim / head_dim``) of the head (HF
    ``DeepseekV4Config.__post_init__``); posenc used to read its class default dicts (64 of 512
    features, bases 1e4 and 1.6e5) whatever the config said."""
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as deepseek_v4

    base = {"hidden_size": 512, "num_attention_heads": 4, "head_dim": 128, "num_key_value_heads": 1}
    base |= {"rope_theta": 20000.0, "compress_rope_theta": 40000.0, "max_position_embeddings": 8192}
    base["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
    for extra, width in (({"qk_rope_head_dim": 32}, 32), ({"partial_rotary_factor": 0.75}, 96)):
        cfg = {**base, **extra}
        hf = deepseek_v4.DeepseekV4RotaryEmbedding(_hf_config("deepseek_v4", cfg))
        main = posenc.rope_from_config({"model_type": "deepseek_v4", **cfg}, layer_type="main")
        compress = posenc.rope_from_config({"model_type": "deepseek_v4", **cfg}, layer_type="compress")
        assert (main.config.base, main.config.scaling, main.config.rotary_dim) == (20000.0, None, width)
        assert (compress.config.base, compress.config.scaling["rope_type"]) == (40000.0, "yarn")
        assert (compress.config.rotary_dim, compress.config.rotary_start, compress.attention_scale) == (
            width,
            128 - width,
            1.0,
        )
        _same_frequencies(main, hf, "main")
        _same_frequencies(compress, hf, "compress")


def _same_frequencies(rope, hf, layer_type=None, seq_len=None):
    """posenc's frequencies and scale in force at ``seq_len`` equal HF's module's (which updates
    them in its forward for length-dependent rules)."""
    prefix = f"{layer_type}_" if layer_type else ""
    if seq_len is not None:
        with torch.no_grad():
            hf(torch.zeros(1), torch.arange(seq_len)[None], *([layer_type] if layer_type else []))
    torch.testing.assert_close(
        rope.inv_freq_at(seq_len).float(), getattr(hf, f"{prefix}inv_freq").float(), rtol=2e-6, atol=0
    )
    assert rope.attention_scale == pytest.approx(float(getattr(hf, f"{prefix}attention_scaling")), rel=1e-6)


def test_gpt_neox_reads_only_its_own_field_names():
    """``GPTNeoXConfig`` takes the base from ``rotary_emb_base`` and the share from ``rotary_pct``;
    a ``rope_theta`` or ``partial_rotary_factor`` beside them is ignored there (posenc used to let
    them win: errors of 3.5-6.7 against transformers)."""
    cfg = {
        "model_type": "gpt_neox",
        "hidden_size": 256,
        "num_attention_heads": 4,
        "rope_theta": 20000.0,
        "partial_rotary_factor": 0.5,
    }
    rope = posenc.rope_from_config(cfg)
    assert (rope.config.base, rope.config.rotary_width) == (10000.0, 16)
    _same_frequencies(rope, gpt_neox.GPTNeoXRotaryEmbedding(CONFIG_MAPPING["gpt_neox"](**json.loads(json.dumps(cfg)))))
    both = posenc.rope_from_config({**cfg, "rotary_emb_base": 30000.0, "rotary_pct": 0.75})
    assert (both.config.base, both.config.rotary_width) == (30000.0, 48)


def test_phi3_longrope_switch_from_its_class_default_original_length():
    """Phi-3's class keeps ``original_max_position_embeddings`` at the top level (4096 by default),
    over the one in ``rope_scaling``; posenc used to take the inner 1024 and switch to the long
    factors (and their attention scale) four times too early. Its legacy rope type ``yarn`` is
    LongRoPE."""
    short, long = [1 + 0.05 * i for i in range(32)], [1 + 2.0 * i for i in range(32)]
    for kind in ("longrope", "yarn"):
        cfg = {
            "model_type": "phi3",
            "hidden_size": 256,
            "num_attention_heads": 4,
            "max_position_embeddings": 8192,
            "rope_scaling": {
                "rope_type": kind,
                "short_factor": short,
                "long_factor": long,
                "original_max_position_embeddings": 1024,
            },
        }
        rope = posenc.rope_from_config(cfg)
        assert rope.config.scaling["original_max_position_embeddings"] == 4096
        assert rope.config.scaling["rope_type"] == "longrope"
        for seq_len in (1025, 5000):
            hf = phi3.Phi3RotaryEmbedding(CONFIG_MAPPING["phi3"](**json.loads(json.dumps(cfg))))
            _same_frequencies(rope, hf, seq_len=seq_len)


def test_olmo3_scales_full_attention_only():
    """OLMo 3 (flat config.json): ``rope_scaling`` and ``rope_theta`` go to the full-attention
    layers; the sliding-window layers keep the class default base, 5e5 (HF ``Olmo3Config``). posenc
    used to apply both to every layer."""
    from transformers.models.olmo3 import modeling_olmo3 as olmo3

    cfg = {
        "model_type": "olmo3",
        "hidden_size": 256,
        "num_attention_heads": 4,
        "max_position_embeddings": 8192,
        "rope_theta": 12345.0,
        "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 1024},
    }
    hf = olmo3.Olmo3RotaryEmbedding(CONFIG_MAPPING["olmo3"](**json.loads(json.dumps(cfg))))
    full = posenc.rope_from_config(cfg, layer_type="full_attention")
    sliding = posenc.rope_from_config(cfg, layer_type="sliding_attention")
    assert (full.config.base, full.config.scaling["rope_type"]) == (12345.0, "yarn")
    assert (sliding.config.base, sliding.config.scaling) == (500000.0, None)
    _same_frequencies(full, hf, "full_attention")
    _same_frequencies(sliding, hf, "sliding_attention")


def test_phimoe_scales_cos_and_sin_by_its_mscale():
    """Phi-3.5-MoE's LongRoPE scales cos and sin by ``short_mscale`` / ``long_mscale`` (1.2432 in
    its config.json), not by LongRoPE's own ``sqrt(1 + ln(factor) / ln(original))`` = 1.1902
    (HF ``PhimoeRotaryEmbedding.forward``); posenc used to drop them with a warning that transformers
    ignores them (an error of 0.22 on q). Checked inside the original length, where HF 5.23's
    frequencies are right (past it, its forward keeps ``short_factor``: see the module docstring)."""
    n = 16
    cfg = {
        "model_type": "phimoe",
        "hidden_size": 256,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {
            "type": "longrope",
            "short_factor": [1 + 0.05 * i for i in range(n)],
            "long_factor": [1 + 2.0 * i for i in range(n)],
            "short_mscale": 1.243163121016122,
            "long_mscale": 1.243163121016122,
        },
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the mscales are read, not dropped with a warning
        rope = posenc.rope_from_config(cfg)
    assert rope.attention_scale == pytest.approx(1.243163121016122, rel=1e-12)
    from transformers.models.phimoe import modeling_phimoe

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = modeling_phimoe.PhimoeRotaryEmbedding(CONFIG_MAPPING["phimoe"](**json.loads(json.dumps(cfg))))
    positions = torch.arange(100, 132)[None]
    cos, sin = hf(torch.zeros(1), positions)
    _rotated_like_transformers(rope, cos, sin, modeling_phimoe.apply_rotary_pos_emb, positions, 32, 5e-5)
    unequal = json.loads(json.dumps(cfg))
    unequal["rope_scaling"]["long_mscale"] = 1.5
    with pytest.raises(ValueError, match="short_mscale 1.243163121016122 and long_mscale 1.5 differ"):
        posenc.rope_from_config(unequal)
    missing = json.loads(json.dumps(cfg))
    del missing["rope_scaling"]["short_mscale"]
    with pytest.raises(ValueError, match="needs 'short_mscale', a number"):
        posenc.rope_from_config(missing)


@pytest.mark.parametrize("model_type", ["olmo3", "gemma3_text"])
def test_per_layer_type_ropes_ignore_a_top_level_original_length(model_type):
    """With a RoPE per layer type, HF's ``standardize_rope_params`` (case 2) takes the original
    length from each dict, else ``max_position_embeddings``; a top-level
    ``original_max_position_embeddings`` counts only for a single RoPE dict (Phi-3). posenc used to
    take it for these too (cos off by 2.28 at position 2000)."""
    cfg = {
        "model_type": model_type,
        "hidden_size": 512,
        "num_attention_heads": 4,
        "head_dim": 128,
        "max_position_embeddings": 4096,
        "original_max_position_embeddings": 1024,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0},
    }
    rope = posenc.rope_from_config(cfg, layer_type="full_attention")
    assert rope.config.scaling["original_max_position_embeddings"] == 4096
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = _hf_rotary_module(model_type, CONFIG_MAPPING[model_type](**json.loads(json.dumps(cfg))))
    _same_frequencies(rope, hf, "full_attention")
    flat = posenc.rope_from_config({**cfg, "model_type": "llama"})  # one RoPE dict: the top level wins
    assert flat.config.scaling["original_max_position_embeddings"] == 1024


def test_an_odd_head_width_names_the_fields_it_comes_from() -> None:
    """Was a bug: reported as RopeConfig's "dim must be a positive even number", naming neither
    ``head_dim`` nor the fields it was derived from."""
    with pytest.raises(ValueError, match=r"head width from config field 'head_dim' is 65, odd.*even head_dim"):
        posenc.rope_from_config({"model_type": "llama", "head_dim": 65, "hidden_size": 4096, "num_attention_heads": 32})
    with pytest.raises(ValueError, match=r"'hidden_size' // 'num_attention_heads' \(head_dim = 130 // 2\) is 65, odd"):
        posenc.rope_from_config({"model_type": "llama", "hidden_size": 130, "num_attention_heads": 2})


def test_a_text_config_that_is_not_an_object_is_refused() -> None:
    """Was a bug: ``{"model_type": "gemma3", "text_config": 5}`` silently read Gemma 3's defaults."""
    for text_config in (5, "gemma3_text", [1, 2]):
        with pytest.raises(ValueError, match=r"config field 'text_config' must be an object \(a dict\).*got"):
            posenc.rope_from_config({"model_type": "gemma3", "text_config": text_config}, layer_type="full_attention")


def test_a_warning_names_the_unused_keys_and_what_posenc_does_instead():
    """Item 8 of issue 25: the warning names the keys posenc does not use, the keys the rope type
    takes, and what posenc does; it says what transformers does only where its code was checked
    (Ministral 3's ``llama_4_scaling_beta`` is applied to the queries by
    ``Ministral3Attention.forward`` through ``get_llama_4_attn_scale``; the yarn rule of
    ``modeling_rope_utils._compute_yarn_parameters`` reads the top-level ``max_position_embeddings``)."""
    linear = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4}
    linear["rope_scaling"] = {"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1.0}
    with pytest.warns(UserWarning) as caught:
        rope = posenc.rope_from_config(linear)
    assert [str(w.message) for w in caught] == [
        "config rope scaling 'linear' does not take ['low_freq_factor'] (it takes ['factor']); posenc rotates "
        "by the 'linear' rule without them"
    ]
    assert rope.config.scaling == {"rope_type": "linear", "factor": 2.0}
    # Ministral3Config's default rope_parameters in transformers 5.24 (what its save_pretrained writes):
    # yarn with the query temperature beside it; the sizes are arbitrary
    ministral3 = {"model_type": "ministral3", "hidden_size": 3072, "num_attention_heads": 32, "head_dim": 128}
    ministral3["rope_parameters"] = {
        "rope_type": "yarn",
        "rope_theta": 1000000.0,
        "factor": 16.0,
        "original_max_position_embeddings": 16384,
        "max_position_embeddings": 262144,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "llama_4_scaling_beta": 0.1,
    }
    with pytest.warns(UserWarning) as caught:
        posenc.rope_from_config(ministral3)
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(
        "config rope scaling 'yarn' does not take ['llama_4_scaling_beta', 'max_position_embeddings'] (it takes "
        "['attention_factor', 'beta_fast', 'beta_slow', 'factor', 'mscale', 'mscale_all_dim', "
        "'original_max_position_embeddings', 'truncate']); posenc rotates by the 'yarn' rule without them; "
        "llama_4_scaling_beta: Ministral 3's and Mistral 4's query temperature"
    )
    assert "posenc's RoPE leaves queries unscaled" in message
    assert "ignored, as transformers ignores them" not in message
    # the temperature is outside the rotary embedding there: HF's tables equal posenc's
    hf_config = CONFIG_MAPPING["ministral3"](**json.loads(json.dumps(ministral3)))
    from transformers.models.ministral3 import modeling_ministral3

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rope = posenc.rope_from_config(ministral3)
    _same_frequencies(rope, modeling_ministral3.Ministral3RotaryEmbedding(hf_config))


@pytest.mark.parametrize("model_type", ["modernbert", "modernbert-decoder"])
def test_modernbert_flat_global_and_local_bases(model_type):
    """ModernBERT's flat form (``global_rope_theta`` for full attention, ``local_rope_theta`` for
    sliding-window attention, a ``rope_scaling`` on both: HF ``ModernBertConfig.convert_rope_params_to_dict``)
    gives transformers' frequencies for both layer types. Values chosen off the class defaults
    (160000 and 10000) so that reading the wrong field shows."""
    cfg = {
        "model_type": model_type,
        "hidden_size": 256,
        "num_attention_heads": 4,
        "global_rope_theta": 80_000.0,
        "local_rope_theta": 20_000.0,
        "max_position_embeddings": 1024,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = _hf_rotary_module(model_type, CONFIG_MAPPING[model_type](**json.loads(json.dumps(cfg))))
    for layer_type, base in (("full_attention", 80_000.0), ("sliding_attention", 20_000.0)):
        rope = posenc.rope_from_config(cfg, layer_type=layer_type)
        assert rope.config.base == base
        _same_frequencies(rope, hf, layer_type)
    scaled = {**cfg, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = _hf_rotary_module(model_type, CONFIG_MAPPING[model_type](**json.loads(json.dumps(scaled))))
    for layer_type in ("full_attention", "sliding_attention"):
        rope = posenc.rope_from_config(scaled, layer_type=layer_type)
        assert rope.config.scaling == {"rope_type": "linear", "factor": 4.0}
        _same_frequencies(rope, hf, layer_type)
