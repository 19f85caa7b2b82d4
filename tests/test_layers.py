"""Layer schedules (issue 25, item 4): ``posenc.layer_schedule`` / ``encodings_from_config`` /
``query_scales_from_config`` against what transformers 5 decides per layer.

References, all from small configs built with ``CONFIG_MAPPING[model_type](...)`` and random weights:

* whether a layer rotates: each layer's own attention module (``Llama4TextAttention``,
  ``SmolLM3Attention``, ``Cohere2Attention``, ``Exaone4Attention``) run on the same input twice,
  with its rotary module's cos/sin and with the identity rotation (cos 1, sin 0): a layer that
  applies RoPE gives different outputs, a NoPE layer the same ones (to the bit);
* which RoPE a layer of a per-layer-type model uses: the config class's ``layer_types`` (what the
  model's forward indexes ``position_embeddings`` by), and its frequencies: the rotary module's
  ``{layer_type}_inv_freq`` (``inv_freq`` for a single RoPE), equal to posenc's at 1e-6 relative
  (HF float32, posenc float64), with the same attention scaling;
* both transformers' own dict (``to_dict()``) and a bare config.json without the derived fields, so
  that posenc's defaults are checked against the config classes' ``__post_init__``.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import posenc
from posenc.functional import QueryTemperature
from posenc.schemes import NoPositionalEncoding
from posenc.schemes.rope import Rope

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402
from transformers.models.cohere2 import modeling_cohere2  # noqa: E402
from transformers.models.exaone4 import modeling_exaone4  # noqa: E402
from transformers.models.llama4 import modeling_llama4  # noqa: E402
from transformers.models.smollm3 import modeling_smollm3  # noqa: E402

SIZES = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 32}

#: model type -> (attention class, rotary class) of the families with NoPE layers
NOPE_FAMILIES = {
    "llama4_text": (modeling_llama4.Llama4TextAttention, modeling_llama4.Llama4TextRotaryEmbedding),
    "smollm3": (modeling_smollm3.SmolLM3Attention, modeling_smollm3.SmolLM3RotaryEmbedding),
    "cohere2": (modeling_cohere2.Cohere2Attention, modeling_cohere2.Cohere2RotaryEmbedding),
    "exaone4": (modeling_exaone4.Exaone4Attention, modeling_exaone4.Exaone4RotaryEmbedding),
}


def _hf_config(model_type: str, fields: dict):
    config = CONFIG_MAPPING[model_type](**fields)
    config._attn_implementation = "eager"
    return config


def _hf_rotates(model_type: str, config) -> list[bool]:
    """Per layer: does transformers' attention module of that layer apply its rotary embedding?"""
    attention_cls, rotary_cls = NOPE_FAMILIES[model_type]
    torch.manual_seed(0)
    x = torch.randn(1, 6, config.hidden_size)
    position_ids = torch.arange(6)[None]
    rotary = rotary_cls(config)(x, position_ids)
    identity = (
        torch.ones_like(rotary)
        if model_type == "llama4_text"
        else (torch.ones_like(rotary[0]), torch.zeros_like(rotary[1]))
    )
    out = []
    with torch.no_grad():
        for i in range(config.num_hidden_layers):
            attn = attention_cls(config, layer_idx=i).eval()
            out.append(not torch.equal(attn(x, rotary, None)[0], attn(x, identity, None)[0]))
    return out


#: (model type, fields of the config.json on top of SIZES): defaults, explicit lists, other patterns
NOPE_CASES = [
    ("llama4_text", {"num_hidden_layers": 8}),
    ("llama4_text", {"num_hidden_layers": 6, "no_rope_layer_interval": 3, "interleave_moe_layer_step": 2}),
    # longer than the depth: transformers reads the first ones (when layer_types gives the depth)
    (
        "llama4_text",
        {"num_hidden_layers": 5, "no_rope_layers": [0, 1, 1, 0, 1, 1], "layer_types": ["full_attention"] * 5},
    ),
    ("llama4_text", {"num_hidden_layers": 4, "no_rope_layers": []}),  # empty: the default
    ("smollm3", {"num_hidden_layers": 8}),
    ("smollm3", {"num_hidden_layers": 5, "no_rope_layers": [1, 0, 0, 1, 1]}),
    ("cohere2", {"num_hidden_layers": 8}),
    ("cohere2", {"num_hidden_layers": 7, "sliding_window_pattern": 3}),
    ("cohere2", {"num_hidden_layers": 4, "sliding_window": None}),  # no window: no layer rotates
    ("exaone4", {"num_hidden_layers": 8}),
    ("exaone4", {"num_hidden_layers": 3, "layer_types": ["full_attention", "sliding_attention", "full_attention"]}),
    ("exaone4", {"num_hidden_layers": 3, "sliding_window": None, "layer_types": ["full_attention"] * 3}),
]


@pytest.mark.parametrize(("model_type", "fields"), NOPE_CASES)
def test_nope_layers_are_those_transformers_does_not_rotate(model_type: str, fields: dict) -> None:
    """The schedule of the bare config.json and of transformers' own dict both equal, layer by layer,
    whether transformers' attention module rotates; RoPE layers' frequencies and scaling equal the
    model's rotary module's; NoPE layers get the ``none`` scheme."""
    fields = {"model_type": model_type, **SIZES, **fields}
    config = _hf_config(model_type, {k: v for k, v in fields.items() if k != "model_type"})
    want = ["rope" if r else "none" for r in _hf_rotates(model_type, config)]
    assert "rope" in want or model_type == "cohere2"
    assert posenc.layer_schedule(fields) == want
    assert posenc.layer_schedule(config.to_dict()) == want
    encodings = posenc.encodings_from_config(fields)
    inv_freq = NOPE_FAMILIES[model_type][1](config).inv_freq.double()
    for entry, encoding in zip(want, encodings, strict=True):
        if entry == "none":
            assert isinstance(encoding, NoPositionalEncoding)
        else:
            assert isinstance(encoding, Rope)
            torch.testing.assert_close(encoding.inv_freq, inv_freq, rtol=1e-6, atol=0)


#: (model type, fields): the per-layer-type RoPE families, with their default patterns and others
LAYER_TYPE_CASES = [
    ("gemma3_text", {"num_hidden_layers": 13}),
    ("gemma3_text", {"num_hidden_layers": 7, "sliding_window_pattern": 3, "rope_local_base_freq": 20000.0}),
    ("gemma3n_text", {"num_hidden_layers": 11}),
    ("gemma4_text", {"num_hidden_layers": 8, "global_head_dim": 16}),
    ("gemma4_text", {"num_hidden_layers": 3, "global_head_dim": 16, "layer_types": ["sliding_attention"] * 3}),
    ("olmo3", {"num_hidden_layers": 9}),
    ("modernbert", {"num_hidden_layers": 7}),
    ("modernbert", {"num_hidden_layers": 6, "global_attn_every_n_layers": 2}),
]


ROTARY_CLASSES = {
    "gemma3": "Gemma3RotaryEmbedding",
    "gemma3n": "Gemma3nRotaryEmbedding",
    "gemma4": "Gemma4TextRotaryEmbedding",
    "olmo3": "Olmo3RotaryEmbedding",
    "modernbert": "ModernBertRotaryEmbedding",
}


def _rotary_module(model_type: str, config):
    """The model's rotary embedding, built as its ``Model.__init__`` builds it."""
    import importlib

    family = model_type.removesuffix("_text")
    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    return getattr(module, ROTARY_CLASSES[family])(config)


@pytest.mark.parametrize(("model_type", "fields"), LAYER_TYPE_CASES)
def test_per_layer_type_rope_follows_the_config_classes(model_type: str, fields: dict) -> None:
    """The schedule is the config class's ``layer_types`` (default patterns included: Gemma 4 makes
    its last layer global even where ``layer_types`` says otherwise), for the bare config.json and
    for transformers' dict; each layer's RoPE has the frequencies and scaling of the rotary
    module's buffers for its layer type (1e-6 relative). ModernBERT needs ``layout=`` (not a known
    model type of ``rope_from_config``); its pairs are HF's rotate_half ones."""
    fields = {"model_type": model_type, **SIZES, **fields}
    config = _hf_config(model_type, {k: v for k, v in fields.items() if k != "model_type"})
    want = list(config.layer_types)
    assert {"sliding_attention", "full_attention"} <= set(want) or "layer_types" in fields
    hf_dict = config.to_dict()
    assert posenc.layer_schedule(hf_dict) == want
    if model_type != "modernbert":  # the flat global/local_rope_theta of a bare ModernBERT is not read
        assert posenc.layer_schedule(fields) == want
    rotary = _rotary_module(model_type, config)
    layout = "half" if model_type == "modernbert" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # keys transformers' dict carries that the RoPE does not take
        encodings = posenc.encodings_from_config(hf_dict, layout=layout)
    for layer_type, encoding in zip(want, encodings, strict=True):
        hf_freq = getattr(rotary, f"{layer_type}_inv_freq").double()
        torch.testing.assert_close(encoding.inv_freq[: len(hf_freq)], hf_freq, rtol=1e-6, atol=0)
        assert encoding.attention_scale == pytest.approx(getattr(rotary, f"{layer_type}_attention_scaling"))
    assert len({id(e) for e in encodings}) == len(set(want))  # one module per layer type, shared


def test_single_rope_models_rotate_every_layer_and_multimodal_configs_read_text_config() -> None:
    """A plain RoPE model: its RoPE on every layer; Llama 4's multimodal config reads its
    ``text_config`` (NoPE every 4th layer, temperature on those)."""
    llama = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 3}
    assert posenc.layer_schedule(llama) == ["rope"] * 3
    wrapped = {"model_type": "llama4", "text_config": {"model_type": "llama4_text", **SIZES, "num_hidden_layers": 4}}
    assert posenc.layer_schedule(wrapped) == ["rope", "rope", "rope", "none"]
    scales = posenc.query_scales_from_config(wrapped)
    assert scales[:3] == [None] * 3 and scales[3] == QueryTemperature(beta=0.1, floor_scale=8192, offset=1)


def test_query_scales_follow_transformers_configs() -> None:
    """Llama 4: the NoPE layers get ``QueryTemperature.llama4`` with the config's ``floor_scale`` and
    ``attn_scale`` (the values ``Llama4TextAttention`` stores), none with ``attn_temperature_tuning``
    false; Ministral 3: every layer, the ``llama_4_scaling_beta`` and original length its
    ``rope_parameters`` has in transformers' dict (class defaults 0.1 and 16384 when absent)."""
    fields = {**SIZES, "num_hidden_layers": 4, "floor_scale": 16, "attn_scale": 0.5}
    config = _hf_config("llama4_text", fields)
    attn = modeling_llama4.Llama4TextAttention(config, layer_idx=3)
    scales = posenc.query_scales_from_config(config.to_dict())
    assert scales == [None, None, None, QueryTemperature(beta=attn.attn_scale, floor_scale=attn.floor_scale, offset=1)]
    off = _hf_config("llama4_text", {**fields, "attn_temperature_tuning": False}).to_dict()
    assert posenc.query_scales_from_config(off) == [None] * 4
    bare = {"model_type": "ministral3", **SIZES, "num_hidden_layers": 2}
    ministral = _hf_config("ministral3", {k: v for k, v in bare.items() if k != "model_type"})
    want = QueryTemperature(beta=0.1, floor_scale=ministral.rope_parameters["original_max_position_embeddings"])
    assert posenc.query_scales_from_config(bare) == [want, want]
    assert posenc.query_scales_from_config(ministral.to_dict()) == [want, want]
    mistral4 = _hf_config("mistral4", {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2})
    want4 = QueryTemperature(beta=0.1, floor_scale=mistral4.rope_parameters["original_max_position_embeddings"])
    assert want4.floor_scale == 8192
    for config in ({"model_type": "mistral4", "num_hidden_layers": 2}, mistral4.to_dict()):
        assert posenc.query_scales_from_config(config) == [want4, want4]
    # Mistral 3 wrapping Ministral 3 applies it; wrapping Mistral (its default text model) does not
    wrapped = {"model_type": "mistral3", "text_config": bare}
    assert posenc.query_scales_from_config(wrapped) == [want, want]
    assert posenc.query_scales_from_config({**wrapped, "text_config": {**bare, "model_type": "mistral"}}) == [None] * 2
    plain = {**bare, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}
    assert posenc.query_scales_from_config(plain) == [None, None]
    assert posenc.query_scales_from_config({**bare, "model_type": "llama"}) == [None, None]


def test_schedule_errors_name_the_field_and_what_is_accepted() -> None:
    base = {"model_type": "smollm3", **SIZES, "num_hidden_layers": 4}
    with pytest.raises(ValueError, match=r"'no_rope_layers' has 3 entries; the model has num_hidden_layers=4"):
        posenc.layer_schedule({**base, "no_rope_layers": [1, 1, 0]})
    with pytest.raises(ValueError, match=r"'no_rope_layers' must be a list of 0 \(NoPE layer\) or 1"):
        posenc.layer_schedule({**base, "no_rope_layers": [1, 2, 1, 1]})
    with pytest.raises(ValueError, match=r"'layer_types' names 5 layers; the model has num_hidden_layers=4"):
        posenc.layer_schedule({**base, "model_type": "gemma3_text", "layer_types": ["full_attention"] * 5})
    with pytest.raises(ValueError, match="'num_hidden_layers' is missing"):
        posenc.layer_schedule({"model_type": "llama"})
    with pytest.raises(ValueError, match="'text_config' must be an object"):
        posenc.layer_schedule({"model_type": "llama4", "text_config": [1]})
    nested = {"full_attention": {"rope_theta": 1e6}, "sliding_attention": {"rope_theta": 1e4}}
    with pytest.raises(ValueError, match="a RoPE per layer type but no 'layer_types'"):
        posenc.layer_schedule({"model_type": "mystery", "num_hidden_layers": 2, "rope_parameters": nested})
