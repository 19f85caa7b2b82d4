"""RoPE scalings: parity with Hugging Face transformers, properties, validation.

Reference: ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS`` (transformers 5.x), called as
transformers itself calls them: with a config object whose ``rope_parameters`` hold the scaling.
HF computes the frequencies in float32 and posenc in float64, so frequencies are compared at 1e-6
relative; attention scales are Python floats on both sides and compared at 1e-12.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import functional as F
from posenc.functional.rope_scaling import ROPE_SCALINGS, SCALING_KEYS, long_inv_freq, parse_scaling

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding  # noqa: E402

REL = 1e-6


def hf_config(dim: int, base: float, scaling: dict, max_pos: int = 4096) -> LlamaConfig:
    """A LlamaConfig whose heads are ``dim`` wide, with ``scaling`` in its ``rope_parameters``."""
    return LlamaConfig(
        hidden_size=2 * dim,
        num_attention_heads=2,
        head_dim=dim,
        num_hidden_layers=1,
        vocab_size=8,
        max_position_embeddings=max_pos,
        rope_parameters={"rope_theta": float(base), **scaling},
    )


def hf_inv_freq(dim: int, base: float, scaling: dict, *, seq_len: int | None = None, max_pos: int = 4096):
    config = hf_config(dim, base, scaling, max_pos)
    kind = config.rope_parameters["rope_type"]
    if kind == "default":
        return LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    return ROPE_INIT_FUNCTIONS[kind](config, None, seq_len=seq_len)


def assert_matches_hf(dim, base, scaling, *, seq_len=None, max_pos=4096, posenc_scaling=None):
    ref, ref_scale = hf_inv_freq(dim, base, scaling, seq_len=seq_len, max_pos=max_pos)
    ours, scale = F.rope_inv_freq(dim, base=base, scaling=posenc_scaling or scaling, seq_len=seq_len)
    assert ours.dtype == torch.float64 and ours.shape == (dim // 2,)
    torch.testing.assert_close(ours, ref.double(), rtol=REL, atol=0)
    assert scale == pytest.approx(float(ref_scale), rel=1e-12)
    return ours, scale


# ---------------------------------------------------------------------------------------------
# parity, one test per type over several parameter sets
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim, base", [(64, 10000.0), (128, 500000.0), (96, 1e6)])
def test_default_matches_hf(dim, base):
    assert_matches_hf(dim, base, {"rope_type": "default"})


@pytest.mark.parametrize("factor", [2.0, 8, 0.5, 1.0])
@pytest.mark.parametrize("dim, base", [(64, 10000.0), (128, 500000.0)])
def test_linear_matches_hf(dim, base, factor):
    assert_matches_hf(dim, base, {"rope_type": "linear", "factor": factor})


@pytest.mark.parametrize("seq_len", [None, 100, 1024, 1025, 3000, 100_000])
@pytest.mark.parametrize("factor", [2.0, 4, 0.5])
def test_dynamic_matches_hf_below_and_above_the_original_length(factor, seq_len):
    """HF reads the original length from max_position_embeddings; posenc from the scaling dict."""
    ours, _ = assert_matches_hf(
        64,
        10000.0,
        {"rope_type": "dynamic", "factor": factor},
        seq_len=seq_len,
        max_pos=1024,
        posenc_scaling={"rope_type": "dynamic", "factor": factor, "original_max_position_embeddings": 1024},
    )
    default, _ = F.rope_inv_freq(64)
    assert torch.equal(ours, default) == (seq_len is None or seq_len <= 1024)


YARN_CASES = [
    {"factor": 4.0, "original_max_position_embeddings": 2048},
    {"factor": 4, "original_max_position_embeddings": 32768},  # Qwen2.5's documented 128k setting
    {
        "factor": 40,
        "original_max_position_embeddings": 4096,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
    },  # DeepSeek-V3
    {"factor": 40, "original_max_position_embeddings": 4096, "mscale": 0.707, "mscale_all_dim": 0.707},  # DeepSeek-V2
    {"factor": 16, "original_max_position_embeddings": 4096, "mscale": 1.0, "mscale_all_dim": 0.5},
    {"factor": 8.0, "original_max_position_embeddings": 4096, "mscale": 1.0},  # only one: ignored, as HF
    {"factor": 4.0, "original_max_position_embeddings": 2048, "truncate": False},
    {"factor": 4.0, "original_max_position_embeddings": 2048, "attention_factor": 1.5},
    {"factor": 4.0, "original_max_position_embeddings": 2048, "beta_fast": 64.0, "beta_slow": 2.0},
    {"factor": 1.0, "original_max_position_embeddings": 2048},
    {"factor": 0.5, "original_max_position_embeddings": 2048, "truncate": False},
    # an original length past 2π·base (Qwen-style 128K at base 1e4): the ramp's upper end is clamped
    # at dim - 1 (HF find_correction_range), a bound no other case reaches
    {"factor": 4.0, "original_max_position_embeddings": 131072},
    {"factor": 4.0, "original_max_position_embeddings": 131072, "truncate": False},
]


@pytest.mark.parametrize("params", YARN_CASES)
@pytest.mark.parametrize("dim, base", [(64, 10000.0), (128, 1e6)])
def test_yarn_matches_hf(dim, base, params):
    assert_matches_hf(dim, base, {"rope_type": "yarn", **params}, max_pos=int(4096 * params["factor"]))


LLAMA31 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


def band_edges(dim: int, base: float, original: int, i_high: int, i_low: int) -> dict:
    """llama3 parameters whose band edges fall exactly on the wavelengths of pairs ``i_high`` and ``i_low``."""
    wavelength = 2 * math.pi / F.rope_inv_freq(dim, base=base)[0]
    return {
        "factor": 8.0,
        "original_max_position_embeddings": original,
        "high_freq_factor": original / float(wavelength[i_high]),
        "low_freq_factor": original / float(wavelength[i_low]),
    }


@pytest.mark.parametrize(
    "params",
    [
        LLAMA31,
        {**LLAMA31, "factor": 32.0},  # Llama 3.2 1B/3B
        {**LLAMA31, "factor": 2},
        {**LLAMA31, "factor": 1.0},
        band_edges(128, 500000.0, 8192, 20, 40),
        band_edges(128, 500000.0, 8192, 5, 6),
    ],
)
def test_llama3_matches_hf(params):
    assert_matches_hf(128, 500000.0, {"rope_type": "llama3", **params}, max_pos=131072)


def test_llama3_band_edges_are_continuous():
    """At a pair lying exactly on an edge the kept and the smoothed value coincide (s = 1 or 0)."""
    params = {"rope_type": "llama3", **band_edges(128, 500000.0, 8192, 20, 40)}
    default, _ = F.rope_inv_freq(128, base=500000.0)
    ours, _ = F.rope_inv_freq(128, base=500000.0, scaling=params)
    torch.testing.assert_close(ours[20], default[20], rtol=1e-12, atol=0)
    torch.testing.assert_close(ours[40], default[40] / 8, rtol=1e-12, atol=0)
    assert torch.equal(ours[:20], default[:20]) and torch.equal(ours[41:], default[41:] / 8)
    ratio = ours[20:41] / default[20:41]
    assert bool((ratio[1:] < ratio[:-1]).all())  # the smooth band moves monotonically from 1 to 1/8


def _longrope(n: int, original: int = 256, **extra) -> dict:
    return {
        "rope_type": "longrope",
        "original_max_position_embeddings": original,
        "short_factor": [1.0 + 0.1 * i for i in range(n)],
        "long_factor": [2.0 + 3.0 * i for i in range(n)],
        **extra,
    }


@pytest.mark.parametrize("seq_len", [None, 10, 256, 257, 5000])
@pytest.mark.parametrize("extra, max_pos", [({}, 4096), ({"attention_factor": 1.3}, 4096), ({}, 256)])
def test_longrope_matches_hf_on_both_sides_of_the_switch(seq_len, extra, max_pos):
    """HF derives ``factor`` from max_position_embeddings / original when absent; posenc takes it explicitly."""
    hf = _longrope(16, **extra)
    ours = {**hf, "factor": max_pos / 256}
    inv_freq, scale = assert_matches_hf(32, 10000.0, hf, seq_len=seq_len, max_pos=max_pos, posenc_scaling=ours)
    which = "long_factor" if seq_len is not None and seq_len > 256 else "short_factor"
    default, _ = F.rope_inv_freq(32)
    torch.testing.assert_close(inv_freq, default / torch.tensor(hf[which], dtype=torch.float64), rtol=1e-15, atol=0)
    if not extra and max_pos == 4096:
        assert scale == pytest.approx(math.sqrt(1 + math.log(16) / math.log(256)), rel=1e-15)
    if max_pos == 256:
        assert scale == 1.0


def test_long_inv_freq_is_the_long_side():
    dyn = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 1024}
    kind, params = parse_scaling(dyn)
    expected, _ = F.rope_inv_freq(64, scaling=dyn, seq_len=3000)
    torch.testing.assert_close(
        long_inv_freq(kind, 64, 10000.0, params, torch.tensor(3000)), expected, rtol=1e-15, atol=0
    )
    kind, params = parse_scaling(_longrope(16, factor=4.0))
    expected, _ = F.rope_inv_freq(32, scaling=_longrope(16, factor=4.0), seq_len=3000)
    assert torch.equal(long_inv_freq(kind, 32, 10000.0, params, 3000), expected)
    with pytest.raises(ValueError, match="'linear' does not depend"):
        long_inv_freq("linear", 32, 10000.0, {"factor": 2.0}, 3000)


@pytest.mark.parametrize(
    "scaling",
    [
        {"rope_type": "default"},
        {"rope_type": "linear", "factor": 4},
        {"rope_type": "dynamic", "factor": 2.0},
        {
            "rope_type": "yarn",
            "factor": 8.0,
            "original_max_position_embeddings": 512,
            "mscale": 1.0,
            "mscale_all_dim": 0.5,
        },
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 512,
        },
        _longrope(32, original=1024),
    ],
)
@pytest.mark.parametrize("positions", [torch.arange(512), torch.arange(1000, 1100)])
def test_module_tables_match_llama_rotary_embedding(scaling, positions):
    """``Rope.cos_sin`` against ``LlamaRotaryEmbedding.forward`` (a fresh module per call), every type.

    Angles: HF float32 vs posenc float64, hence ``2e-6 + 1.5e-7 * largest angle``.
    """
    config = hf_config(64, 10000.0, scaling, max_pos=1024)
    hf = LlamaRotaryEmbedding(config)
    hf_cos, hf_sin = hf(torch.zeros(1), positions[None])
    ours_scaling = (
        {**scaling, "original_max_position_embeddings": 1024} if scaling["rope_type"] == "dynamic" else scaling
    )
    if scaling["rope_type"] == "longrope":
        ours_scaling = {**scaling, "factor": 1.0}  # HF: max_position_embeddings / original = 1
    rope = posenc.create("rope", dim=64, scaling=ours_scaling)
    cos, sin = rope.cos_sin(positions[None])
    tol = (2e-6 + 1.5e-7 * float(positions.max())) * max(1.0, hf.attention_scaling)
    torch.testing.assert_close(cos, hf_cos, rtol=0, atol=tol)
    torch.testing.assert_close(sin, hf_sin, rtol=0, atol=tol)
    assert rope.attention_scale == pytest.approx(hf.attention_scaling, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------

dims = st.sampled_from([8, 32, 64, 96, 128])
bases = st.sampled_from([100.0, 10000.0, 500000.0, 1e6])
factors = st.floats(min_value=1.0, max_value=64.0)


@settings(max_examples=30, deadline=None)
@given(dim=dims, base=bases, factor=st.floats(min_value=0.1, max_value=64.0))
def test_linear_is_default_over_factor(dim, base, factor):
    default, _ = F.rope_inv_freq(dim, base=base)
    ours, scale = F.rope_inv_freq(dim, base=base, scaling={"rope_type": "linear", "factor": factor})
    torch.testing.assert_close(ours, default / factor, rtol=1e-15, atol=0)
    assert scale == 1.0


@settings(max_examples=30, deadline=None)
@given(dim=dims, base=bases, factor=factors, original=st.sampled_from([512, 4096, 32768]), truncate=st.booleans())
def test_yarn_lies_between_interpolation_and_the_default(dim, base, factor, original, truncate):
    default, _ = F.rope_inv_freq(dim, base=base)
    ours, _ = F.rope_inv_freq(
        dim,
        base=base,
        scaling={
            "rope_type": "yarn",
            "factor": factor,
            "truncate": truncate,
            "original_max_position_embeddings": original,
        },
    )
    assert bool((ours <= default * (1 + 1e-12)).all()) and bool((ours >= default / factor * (1 - 1e-12)).all())
    assert bool((ours / default)[1:].le((ours / default)[:-1] * (1 + 1e-12)).all())  # slower pairs scaled more


@settings(max_examples=30, deadline=None)
@given(
    dim=dims,
    base=bases,
    factor=st.floats(min_value=0.25, max_value=64.0),
    seq_len=st.integers(min_value=1, max_value=2048),
)
def test_dynamic_is_default_up_to_the_original_length(dim, base, factor, seq_len):
    scaling = {"rope_type": "dynamic", "factor": factor, "original_max_position_embeddings": 2048}
    default, _ = F.rope_inv_freq(dim, base=base)
    ours, _ = F.rope_inv_freq(dim, base=base, scaling=scaling, seq_len=seq_len)
    assert torch.equal(ours, default)
    longer, _ = F.rope_inv_freq(dim, base=base, scaling=scaling, seq_len=2048 + seq_len)
    assert bool((longer[1:] < default[1:]).all())  # past it the base grows: every pair but the first slows


@settings(max_examples=30, deadline=None)
@given(dim=dims, base=bases, factor=factors)
def test_static_ntk_raises_the_base(dim, base, factor):
    expected, _ = F.rope_inv_freq(dim, base=base * factor ** (dim / (dim - 2)))
    ours, _ = F.rope_inv_freq(dim, base=base, scaling={"rope_type": "ntk", "factor": factor})
    torch.testing.assert_close(ours, expected, rtol=1e-15, atol=0)


def test_static_ntk_equals_hf_dynamic_at_the_matching_length():
    """HF's dynamic rule at L = 2 * original with factor 2 is static NTK with factor 2 * 2 - 1 = 3."""
    ref, _ = hf_inv_freq(64, 10000.0, {"rope_type": "dynamic", "factor": 2.0}, seq_len=2048, max_pos=1024)
    ours, _ = F.rope_inv_freq(64, scaling={"rope_type": "ntk", "factor": 3})
    torch.testing.assert_close(ours, ref.double(), rtol=REL, atol=0)


def test_llama3_is_between_interpolation_and_the_default():
    default, _ = F.rope_inv_freq(128, base=500000.0)
    ours, _ = F.rope_inv_freq(128, base=500000.0, scaling={"rope_type": "llama3", **LLAMA31})
    assert bool((ours <= default).all()) and bool((ours >= default / 8 * (1 - 1e-15)).all())
    assert torch.equal(ours[:10], default[:10]) and torch.equal(ours[-10:], default[-10:] / 8)


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


def test_every_rule_has_its_keys_listed():
    assert (
        set(SCALING_KEYS) == set(ROPE_SCALINGS) >= {"default", "linear", "dynamic", "yarn", "llama3", "longrope", "ntk"}
    )


def test_legacy_type_key_and_su_alias_are_accepted():
    a, _ = F.rope_inv_freq(32, scaling={"type": "linear", "factor": 2})
    b, _ = F.rope_inv_freq(32, scaling={"rope_type": "linear", "factor": 2.0})
    assert torch.equal(a, b)
    assert parse_scaling({**_longrope(16, factor=2.0), "rope_type": "su"})[0] == "longrope"


def test_passthrough_and_null_optional_keys():
    """transformers-5 ``rope_parameters`` carry rope_theta and partial_rotary_factor; null means unset."""
    kind, params = parse_scaling(
        {
            "rope_type": "yarn",
            "factor": 4,
            "original_max_position_embeddings": 2048,
            "rope_theta": 1e6,
            "partial_rotary_factor": 1.0,
            "attention_factor": None,
        }
    )
    assert kind == "yarn" and params == {"factor": 4, "original_max_position_embeddings": 2048}


@pytest.mark.parametrize(
    "scaling, match",
    [
        (
            {"rope_type": "linear", "factor": 2.0, "beta_fast": 32},
            r"rope scaling 'linear' does not take \['beta_fast'\]; it accepts: factor \(a positive number, required\)",
        ),
        (
            {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 2048, "low_freq_factor": 1.0},
            r"'yarn' does not take \['low_freq_factor'\].*attention_factor.*beta_fast.*beta_slow.*mscale.*mscale_all_dim.*truncate",
        ),
        ({"rope_type": "default", "factor": 2.0}, r"'default' does not take \['factor'\]; it accepts: no keys"),
        (
            {"rope_type": "llama3", "factor": 8.0},
            r"'llama3' needs \['high_freq_factor', 'low_freq_factor', "
            r"'original_max_position_embeddings'\]",
        ),
        (
            {"rope_type": "longrope", "short_factor": [1.0]},
            r"'longrope' needs \['long_factor', 'original_max_position_embeddings'\]",
        ),
        ({"rope_type": "warp", "factor": 2.0}, r"unknown rope scaling type 'warp'; choose one of: 'default', 'linear'"),
        ({"rope_type": "linear", "factor": -2.0}, r"'factor' must be a positive number, got -2.0"),
        ({"rope_type": "linear", "factor": True}, r"'factor' must be a positive number, got True"),
        ({"rope_type": "linear", "factor": float("nan")}, r"'factor' must be a positive number, got nan"),
        ({"rope_type": "linear", "factor": "2"}, r"'factor' must be a positive number, got '2'"),
        (
            {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048.5},
            r"'original_max_position_embeddings' must be a positive whole number, got 2048.5",
        ),
        (
            {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 2048,
                "beta_fast": 1,
                "beta_slow": 32,
            },
            r"'beta_fast' must be greater than 'beta_slow', got beta_fast=1, beta_slow=32",
        ),
        (
            {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048, "truncate": "no"},
            r"'truncate' must be true or false, got 'no'",
        ),
        (
            {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048, "attention_factor": 0},
            r"'attention_factor' must be a positive number, got 0",
        ),
        (
            {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048, "mscale": -1},
            r"'mscale' must be a number >= 0",
        ),
        (
            {"rope_type": "llama3", **LLAMA31, "low_freq_factor": 4.0, "high_freq_factor": 1.0},
            r"'high_freq_factor' must be greater than 'low_freq_factor' or equal to it",
        ),
        (
            {**_longrope(16, factor=2.0), "long_factor": [1.0] * 15},
            r"'short_factor' and 'long_factor' must have the same length, got 16 and 15",
        ),
        (
            {**_longrope(16, factor=2.0), "short_factor": [1.0] * 15 + [0.0]},
            r"'short_factor' must be a non-empty list of positive numbers",
        ),
        ({"rope_type": "dynamic", "factor": 0}, r"'dynamic': 'factor' must be a positive number, got 0"),
    ],
)
def test_bad_scalings_are_rejected_with_what_is_accepted(scaling, match):
    with pytest.raises(ValueError, match=match):
        F.rope_inv_freq(32, scaling=scaling)


def test_errors_that_need_the_dim_or_the_length():
    with pytest.raises(ValueError, match=r"short_factor must have dim // 2 = 16 entries, got 8"):
        F.rope_inv_freq(32, scaling=_longrope(8, factor=2.0))
    with pytest.raises(ValueError, match=r"'longrope' needs 'factor' or 'attention_factor'"):
        F.rope_inv_freq(16, scaling=_longrope(8))
    with pytest.raises(ValueError, match=r"'dynamic' at a given seq_len needs 'original_max_position_embeddings'"):
        F.rope_inv_freq(32, scaling={"rope_type": "dynamic", "factor": 2.0}, seq_len=5000)
    with pytest.raises(ValueError, match=r"'ntk' raises the base .* at least 4, got 2"):
        F.rope_inv_freq(2, scaling={"rope_type": "ntk", "factor": 2.0})
    with pytest.raises(TypeError, match=r"scaling must be None, a rope_type name or a rope_scaling dict, got int"):
        F.rope_inv_freq(32, scaling=3)


def test_integer_factor_is_fine():
    a, _ = F.rope_inv_freq(64, scaling={"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 2048})
    b, _ = F.rope_inv_freq(64, scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048})
    assert torch.equal(a, b)


@pytest.mark.parametrize(
    "dim, base, params",
    [
        (128, 1e6, {"partial_rotary_factor": 0.25}),
        (256, 1e6, {"partial_rotary_factor": 0.3, "factor": 2.0}),
        (64, 1e4, {}),
    ],
)
def test_proportional_matches_hf(dim, base, params):
    """Gemma 4's proportional RoPE: the first int(p * dim // 2) frequencies of the whole head, the
    rest 0, all divided by ``factor``."""
    ours, _ = assert_matches_hf(dim, base, {"rope_type": "proportional", **params})
    angles = int(params.get("partial_rotary_factor", 1.0) * dim // 2)
    assert bool((ours[:angles] > 0).all()) and bool((ours[angles:] == 0).all())
