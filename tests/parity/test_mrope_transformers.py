"""MRoPE from ``posenc.rope_from_config`` against the installed transformers' own rotary modules for
every MRoPE model type posenc reads (issue 25, item 3).

Reference: the model type's text rotary module (``Qwen2VLRotaryEmbedding``,
``Qwen3VLTextRotaryEmbedding``, ``Glm4vTextRotaryEmbedding``, ...) built from the same config dict
with no weights, called with position ids ``[3, b, s]``, and the model file's own
``apply_rotary_pos_emb``. Three checks per model type and scaling:

* which coordinate each table column reads: the module's ``recomposition_frequencies`` applied to
  a tensor holding the axis index (0, 1, 2) in place of cos, against :func:`F.mrope_axes` laid
  out as posenc lays out its table, exactly;
* the frequency of every table column (the module's ``inv_freq`` through its
  ``recomposition_frequencies``) at 1e-6 relative (HF's are float32, posenc's float64), the
  attention scale at 1e-6;
* rotated queries and keys at coordinates up to 32k at ``8 * (2e-6 + 1.5e-7 * largest angle)``
  absolute, since HF forms the angles in float32 (as ``tests/test_rope_config_models.py``); and
  posenc's tables against a float64 evaluation of the same formula at 1e-11 (float64 rounding of angles up to 3.3e4 rad).
"""

from __future__ import annotations

import importlib
import json
import warnings

import pytest
import torch

import posenc
from posenc import functional as F
from posenc.schemes.mrope import MRope

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402

# model type: (text model type, head_dim, sections, extra text-config fields). Sizes are the
# published checkpoints' head widths and sections (Qwen2-VL-7B: 128, [16, 24, 24]; Qwen3-VL:
# 128, [24, 20, 20]; Qwen3.5: 256 with partial_rotary_factor 0.25, [11, 11, 10]; GLM-4.1V: 128 with
# 0.5, [8, 12, 12]); the other sizes do not enter the rotation.
CASES = {
    "qwen2_vl": ("qwen2_vl_text", 128, [16, 24, 24], {}),
    "qwen2_5_vl": ("qwen2_5_vl_text", 128, [16, 24, 24], {}),
    "paddleocr_vl": ("paddleocr_vl_text", 128, [16, 24, 24], {}),
    "qwen3_vl": ("qwen3_vl_text", 128, [24, 20, 20], {}),
    "qwen3_vl_moe": ("qwen3_vl_moe_text", 128, [24, 20, 20], {}),
    "cosmos3_edge": ("cosmos3_edge_text", 128, [24, 20, 20], {}),
    "qwen3_5": ("qwen3_5_text", 256, [11, 11, 10], {"partial_rotary_factor": 0.25}),
    "qwen3_5_moe": ("qwen3_5_moe_text", 256, [11, 11, 10], {"partial_rotary_factor": 0.25}),
    "qwen4_exp": ("qwen4_exp_text", 256, [11, 11, 10], {"partial_rotary_factor": 0.25}),
    "glm4v": ("glm4v_text", 128, [8, 12, 12], {"partial_rotary_factor": 0.5}),
    "glm4v_moe": ("glm4v_moe_text", 128, [8, 12, 12], {"partial_rotary_factor": 0.5}),
    "glm_ocr": ("glm_ocr_text", 128, [8, 12, 12], {"partial_rotary_factor": 0.5}),
    "glm_image": ("glm_image_text", 128, [8, 12, 12], {"partial_rotary_factor": 0.5}),
    "ernie4_5_vl_moe": ("ernie4_5_vl_moe_text", 128, [22, 22, 20], {}),  # its sections list [h, w, t]
}
SCALINGS = {
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 2.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},  # past max_position_embeddings = 16384
}
INTERLEAVED = {"qwen3_vl", "qwen3_vl_moe", "cosmos3_edge", "qwen3_5", "qwen3_5_moe", "qwen4_exp"}


def _config(model_type: str, scaling: str) -> dict:
    text_type, head_dim, sections, extra = CASES[model_type]
    params = {**SCALINGS[scaling], "rope_theta": 1_000_000.0, "mrope_section": sections, **extra}
    if model_type in INTERLEAVED:
        params["mrope_interleaved"] = True
    return {
        "model_type": text_type,
        "hidden_size": 4 * head_dim,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": head_dim,
        "max_position_embeddings": 16384,
        "rope_parameters": params,
    }


def _hf(model_type: str, config: dict):
    """The text rotary module of ``model_type`` and its module's ``apply_rotary_pos_emb``."""
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    names = [n for n in vars(module) if n.endswith("RotaryEmbedding") and "Vision" not in n and "DiT" not in n]
    (name,) = names
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf_config = CONFIG_MAPPING[config["model_type"]](**json.loads(json.dumps(config)))
        return getattr(module, name)(hf_config), module.apply_rotary_pos_emb


def _coordinates(seed: int, b: int = 2, s: int = 48, top: int = 32768) -> torch.Tensor:
    """Coordinates ``[b, s, 3]``: a text run (t = h = w), then an image grid and random ones up to ``top``."""
    g = torch.Generator().manual_seed(seed)
    text = torch.arange(s // 3)[:, None].expand(-1, 3)  # [s/3, 3]
    rows, cols = torch.meshgrid(torch.arange(4), torch.arange(4), indexing="ij")
    grid = torch.stack((torch.zeros(16, dtype=torch.long), rows.flatten(), cols.flatten()), -1) + s // 3  # [16, 3]
    rest = torch.randint(0, top, (s - s // 3 - 16, 3), generator=g)  # [s', 3]
    rest[-1] = top - 1
    one = torch.cat((text, grid, rest))  # [s, 3]
    return torch.stack([one.roll(i, 0) for i in range(b)])  # [b, s, 3]


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_each_pair_reads_the_axis_transformers_gives_it(model_type):
    rope = posenc.rope_from_config(_config(model_type, "default"))
    hf, _ = _hf(model_type, _config(model_type, "default"))
    want_assignment = "hw" if model_type == "ernie4_5_vl_moe" else model_type in INTERLEAVED
    assert isinstance(rope, MRope) and rope.config.interleaved == want_assignment
    n = rope.inv_freq.shape[0]
    ids = torch.arange(3.0)[:, None, None, None].expand(3, 1, 1, n).clone()  # [3, b, s, n]: the axis index
    want = hf.recomposition_frequencies(ids)[0, 0]  # [r]
    axes = F.mrope_axes(rope.config.sections, interleaved=rope.config.interleaved).double()  # [n]
    got = torch.cat((axes, axes)) if rope.config.layout == "half" else axes.repeat_interleave(2)
    assert torch.equal(got, want.double())


#: Model types whose transformers code refuses any rope type but ``default`` (Cosmos3 Edge's
#: ``validate_architecture``, Ernie 4.5 VL's rotary module).
_DEFAULT_ONLY = {"cosmos3_edge", "ernie4_5_vl_moe"}


@pytest.mark.parametrize(
    ("model_type", "scaling"),
    [(m, s) for m in sorted(CASES) for s in sorted(SCALINGS) if s == "default" or m not in _DEFAULT_ONLY],
)
def test_rotated_queries_and_keys_match_transformers(model_type, scaling):
    config = _config(model_type, scaling)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # mrope keys are read, not reported as ignored
        rope = posenc.rope_from_config(config)
    hf, apply = _hf(model_type, config)
    # the frequency of every table column (Ernie pre-permutes its inv_freq; its recomposition undoes it)
    n = rope.inv_freq.shape[0]
    want_freq = hf.recomposition_frequencies(hf.inv_freq.expand(3, 1, 1, n).clone())[0, 0]  # [r]
    inv = rope.inv_freq.float()
    got_freq = torch.cat((inv, inv)) if rope.config.layout == "half" else inv.repeat_interleave(2)
    torch.testing.assert_close(got_freq, want_freq, rtol=1e-6, atol=0)
    assert rope.attention_scale == pytest.approx(hf.attention_scaling, rel=1e-6)
    coords = _coordinates(seed=len(model_type))  # [b, s, 3]
    head_dim = CASES[model_type][1]
    q, k = torch.randn(2, 4, coords.shape[1], head_dim), torch.randn(2, 4, coords.shape[1], head_dim)
    with torch.no_grad():
        hf_cos, hf_sin = hf(q, coords.permute(2, 0, 1))  # position ids [3, b, s]
        want_q, want_k = apply(q, k, hf_cos, hf_sin)
    got_q, got_k = rope.rotate(q, k, coords, coords)
    tol = 2e-6 + 1.5e-7 * float(coords.max()) * float(rope.inv_freq.max())
    torch.testing.assert_close(got_q, want_q, rtol=0, atol=8 * tol)
    torch.testing.assert_close(got_k, want_k, rtol=0, atol=8 * tol)
    # posenc's own tables against the formula in float64: pair i turns by coords[axis_i] * inv_freq_i
    cos, sin = rope.cos_sin(coords, dtype=torch.float64)
    axes = F.mrope_axes(rope.config.sections, interleaved=rope.config.interleaved)
    angles = coords.double()[..., axes] * rope.inv_freq_at(int(coords.max()) + 1)  # [b, s, n]
    angles = torch.cat((angles, angles), -1) if rope.config.layout == "half" else angles.repeat_interleave(2, -1)
    torch.testing.assert_close(cos, angles.cos() * rope.attention_scale, rtol=0, atol=1e-11)
    torch.testing.assert_close(sin, angles.sin() * rope.attention_scale, rtol=0, atol=1e-11)


@pytest.mark.parametrize("model_type", ["qwen2_vl", "qwen3_vl", "glm4v"])
def test_text_positions_match_transformers_text_position_ids(model_type):
    """1-D text positions ``[b, s]`` mean t = h = w, as HF's ``position_ids.expand(3, -1, -1)``."""
    config = _config(model_type, "default")
    rope = posenc.rope_from_config(config)
    hf, apply = _hf(model_type, config)
    positions = torch.stack((torch.arange(32000, 32064), torch.arange(64)))  # [b, s]
    head_dim = CASES[model_type][1]
    q, k = torch.randn(2, 4, 64, head_dim), torch.randn(2, 4, 64, head_dim)
    with torch.no_grad():
        want_q, want_k = apply(q, k, *hf(q, positions[None]))  # [1, b, s] broadcast to three rows
    got_q, got_k = rope.rotate(q, k, positions, positions)
    tol = 2e-6 + 1.5e-7 * 32064 * float(rope.inv_freq.max())
    torch.testing.assert_close(got_q, want_q, rtol=0, atol=8 * tol)
    torch.testing.assert_close(got_k, want_k, rtol=0, atol=8 * tol)


def test_legacy_mrope_type_is_default_rope_as_in_qwen2_vl_config():
    """Qwen2-VL-7B-Instruct's config.json: ``"rope_scaling": {"type": "mrope", "mrope_section": [16,
    24, 24]}``, read by HF's ``Qwen2VLTextConfig`` as the default rope type."""
    config = {
        "model_type": "qwen2_vl",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 32768,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rope = posenc.rope_from_config(config)
    assert rope.config.sections == (16, 24, 24) and rope.config.scaling is None and not rope.config.interleaved
    assert (rope.config.dim, rope.config.base, rope.config.layout) == (128, 1e6, "half")
