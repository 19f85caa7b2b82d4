"""``posenc.rope_from_config`` for HunYuan (NTK-alpha) and Llama 4 (Llama 3 scaling with equal
band factors, interleaved pairs), against the installed transformers (issue 25).

Reference: transformers' own rotary modules built from the same dict with no weights
(``HunYuanDenseV1RotaryEmbedding``, ``HunYuanMoEV1RotaryEmbedding``, ``Llama4TextRotaryEmbedding``)
and Llama 4's ``apply_rotary_emb`` (complex form). Frequencies are compared at 1e-6 relative
(HF's are float32, posenc's float64); tables and rotated vectors at ``2e-6 + 1.5e-7 * largest
angle`` absolute, since HF forms the angles ``position * inv_freq`` in float32.
"""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch

import posenc

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402
from transformers.models.hunyuan_v1_dense import modeling_hunyuan_v1_dense as hunyuan_dense  # noqa: E402
from transformers.models.hunyuan_v1_moe import modeling_hunyuan_v1_moe as hunyuan_moe  # noqa: E402
from transformers.models.llama4 import modeling_llama4 as llama4  # noqa: E402

# HunYuan's RoPE fields as quoted in issue 25 (tencent Hunyuan dense config.json: NTK-alpha 1000
# labelled "dynamic"); the MoE model type reads the same fields.
HUNYUAN = {
    "model_type": "hunyuan_v1_dense",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "head_dim": 128,
    "rope_theta": 10000.0,
    "max_position_embeddings": 32768,
    "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0},
}
_HUNYUAN_ROTARY = {
    "hunyuan_v1_dense": hunyuan_dense.HunYuanDenseV1RotaryEmbedding,
    "hunyuan_v1_moe": hunyuan_moe.HunYuanMoEV1RotaryEmbedding,
}

# meta-llama/Llama-4-Scout-17B-16E config.json: the RoPE fields of its text_config as quoted in
# issue 25 (rope_scaling, rope_theta, head_dim). The other sizes were not checked against the
# published file (nothing is downloaded here) and do not enter the rotation: only head_dim does.
LLAMA4_SCOUT_TEXT = {
    "model_type": "llama4_text",
    "hidden_size": 5120,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "num_hidden_layers": 48,
    "max_position_embeddings": 10485760,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
    },
}
LLAMA4_SCOUT = {"model_type": "llama4", "text_config": LLAMA4_SCOUT_TEXT}


def _hf_config(config: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CONFIG_MAPPING[config["model_type"]](**json.loads(json.dumps(config)))  # a copy: HF fills dicts in


def _tol(positions: torch.Tensor, inv_freq: torch.Tensor) -> float:
    return 2e-6 + 1.5e-7 * float(positions.max()) * float(inv_freq.max())


_POSITIONS = [torch.arange(4096)[None], torch.arange(32768, 32768 + 1024)[None]]


@pytest.mark.parametrize("model_type", sorted(_HUNYUAN_ROTARY))
def test_hunyuan_alpha_is_static_ntk_alpha_as_in_transformers(model_type):
    """HunYuan's ``dynamic`` scaling with ``alpha`` is a fixed base ``10000 * 1000^(128/126)``
    (HF ``compute_ntk_alpha_rope_parameters``; ``factor`` and the dynamic rule unused), not base
    10000 with a warning that the keys are ignored (posenc before issue 25)."""
    config = {**HUNYUAN, "model_type": model_type}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "ignored" warning any more
        rope = posenc.rope_from_config(config)
    hf = _HUNYUAN_ROTARY[model_type](_hf_config(config))
    assert hf.rope_type == "ntk_alpha"
    assert rope.config.scaling == {"rope_type": "ntk", "factor": 1000.0}
    want_base = 10000.0 * 1000.0 ** (128 / 126)
    torch.testing.assert_close(rope.inv_freq, 1.0 / want_base ** (torch.arange(0, 128, 2).double() / 128))
    torch.testing.assert_close(rope.inv_freq.float(), hf.inv_freq, rtol=1e-6, atol=0)
    assert rope.attention_scale == hf.attention_scaling == 1.0
    for positions in _POSITIONS:  # the same frequencies past max_position_embeddings: no dynamic update
        hf_cos, hf_sin = hf(torch.zeros(1), positions)
        torch.testing.assert_close(rope.inv_freq_at(int(positions.max()) + 1).float(), hf.inv_freq, rtol=1e-6, atol=0)
        tol = _tol(positions, rope.inv_freq)
        cos, sin = rope.cos_sin(positions)
        torch.testing.assert_close(cos, hf_cos, rtol=0, atol=tol)
        torch.testing.assert_close(sin, hf_sin, rtol=0, atol=tol)
        q, k = torch.randn(1, 2, positions.shape[-1], 128), torch.randn(1, 2, positions.shape[-1], 128)
        want_q, want_k = hunyuan_dense.apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
        got_q, got_k = rope.rotate(q, k, positions, positions)
        torch.testing.assert_close(got_q, want_q, rtol=0, atol=8 * tol)
        torch.testing.assert_close(got_k, want_k, rtol=0, atol=8 * tol)


def test_hunyuan_without_alpha_stays_dynamic():
    config = {**HUNYUAN, "rope_scaling": {"type": "dynamic", "factor": 2.0}}
    rope, hf = posenc.rope_from_config(config), _HUNYUAN_ROTARY["hunyuan_v1_dense"](_hf_config(config))
    assert rope.config.scaling["rope_type"] == "dynamic"
    long = 3 * 32768
    with torch.no_grad():
        hf(torch.zeros(1), torch.arange(long)[None])
    torch.testing.assert_close(rope.inv_freq_at(long).float(), hf.inv_freq, rtol=1e-5, atol=0)


def test_hunyuan_alpha_beside_linear_is_ignored_as_transformers_ignores_it():
    config = {**HUNYUAN, "rope_scaling": {"type": "linear", "alpha": 1000.0, "factor": 2.0}}
    with pytest.warns(
        UserWarning, match=r"'linear' does not take \['alpha'\] \(it takes \['factor'\]\); posenc rotates"
    ):
        rope = posenc.rope_from_config(config)
    hf = _HUNYUAN_ROTARY["hunyuan_v1_dense"](_hf_config(config))
    torch.testing.assert_close(rope.inv_freq.float(), hf.inv_freq, rtol=1e-6, atol=0)


@pytest.mark.parametrize("alpha", [0, -1.0, 0.0, "1000", True, float("nan"), float("inf"), [1000.0]])
def test_hunyuan_bad_alpha_is_refused(alpha):
    config = {**HUNYUAN, "rope_scaling": {"type": "dynamic", "alpha": alpha, "factor": 1.0}}
    with pytest.raises(ValueError, match=r"'alpha' .* must be a positive number, got"):
        posenc.rope_from_config(config)


def _llama4_rotate(hf, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor):
    """HF Llama 4's rotation of ``[b, h, s, d]`` q and k (its function takes ``[b, s, h, d]``)."""
    freqs_cis = hf(torch.zeros(1), positions)  # [1, s, d/2] complex
    want_q, want_k = llama4.apply_rotary_emb(q.transpose(1, 2), k.transpose(1, 2), freqs_cis)
    return want_q.transpose(1, 2), want_k.transpose(1, 2)


@pytest.mark.parametrize("form", ["llama4", "llama4_text", "text_config_without_model_type"])
def test_llama4_scout_rope_matches_transformers(form):
    """Llama 4's Llama 3 scaling with ``low_freq_factor == high_freq_factor`` (posenc used to refuse
    it) gives HF's frequencies, and its rotation is the interleaved (complex) one."""
    config = {
        "llama4": LLAMA4_SCOUT,
        "llama4_text": LLAMA4_SCOUT_TEXT,
        "text_config_without_model_type": {
            "model_type": "llama4",
            "text_config": {k: v for k, v in LLAMA4_SCOUT_TEXT.items() if k != "model_type"},
        },
    }[form]
    rope = posenc.rope_from_config(config)
    hf = llama4.Llama4TextRotaryEmbedding(_hf_config(LLAMA4_SCOUT_TEXT))
    assert (rope.config.dim, rope.config.base, rope.config.layout) == (128, 500000.0, "interleaved")
    assert rope.config.scaling["rope_type"] == "llama3"
    assert not torch.isnan(hf.inv_freq).any()
    torch.testing.assert_close(rope.inv_freq.float(), hf.inv_freq, rtol=1e-6, atol=0)
    assert rope.attention_scale == hf.attention_scaling == 1.0
    # no smooth band: wavelengths over 8192 divided by 8, the others kept
    plain = 1.0 / 500000.0 ** (torch.arange(0, 128, 2).double() / 128)
    long = 2 * math.pi / plain > 8192
    assert 0 < int(long.sum()) < 64
    torch.testing.assert_close(rope.inv_freq, torch.where(long, plain / 8, plain), rtol=1e-15, atol=0)
    for positions in (torch.arange(4096)[None], torch.arange(8192, 8192 + 1024)[None]):
        tol = _tol(positions, rope.inv_freq)
        q, k = torch.randn(1, 2, positions.shape[-1], 128), torch.randn(1, 2, positions.shape[-1], 128)
        want_q, want_k = _llama4_rotate(hf, q, k, positions)
        got_q, got_k = rope.rotate(q, k, positions, positions)
        torch.testing.assert_close(got_q, want_q, rtol=0, atol=8 * tol)
        torch.testing.assert_close(got_k, want_k, rtol=0, atol=8 * tol)


def test_llama4_wrapper_config_object_is_read_from_its_text_config():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf_config = transformers.Llama4Config(text_config=json.loads(json.dumps(LLAMA4_SCOUT_TEXT)))
    rope = posenc.rope_from_config(hf_config)
    hf = llama4.Llama4TextRotaryEmbedding(hf_config.text_config)
    assert rope.config.layout == "interleaved"
    torch.testing.assert_close(rope.inv_freq.float(), hf.inv_freq, rtol=1e-6, atol=0)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            {"low_freq_factor": 4.0, "high_freq_factor": 1.0},
            r"'high_freq_factor' must be greater than 'low_freq_factor' or equal to it .*got high_freq_factor=1.0, "
            r"low_freq_factor=4.0; 'llama3' accepts: .*high_freq_factor \(a positive number, at least low_freq_factor",
        ),
        ({"low_freq_factor": "1"}, r"'low_freq_factor' must be a positive number, got '1'; 'llama3' accepts"),
        ({"high_freq_factor": None}, r"'llama3' needs \['high_freq_factor'\]"),
    ],
)
def test_llama3_bad_band_factors_are_refused(change, match):
    config = {**LLAMA4_SCOUT_TEXT, "rope_scaling": {**LLAMA4_SCOUT_TEXT["rope_scaling"], **change}}
    with pytest.raises(ValueError, match=match):
        posenc.rope_from_config(config)
