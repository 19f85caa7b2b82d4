"""RoPE from a model's ``config.json``: :func:`rope_from_config`.

Reads the fields that Hugging Face transformers reads for the model's rotary embedding and returns
the :class:`~posenc.schemes.rope.Rope` module with the same numbers:

* fields a config.json leaves out take the value the model type's transformers config class gives
  them: its sizes (``hidden_size``, head count, ``max_position_embeddings``, a fixed ``head_dim``;
  :mod:`posenc.config.generated`, written by ``tools/gen_config_tables.py`` from the installed
  transformers; also the multi-head-latent ``qk_rope_head_dim``, GPT-J's ``rotary_dim``, Phi-3's
  ``original_max_position_embeddings``), its ``default_theta`` such as Mixtral's 1e6 and Cohere's
  5e5, and the ``rope_parameters`` it gives of its own (Apertus' default Llama 3 scaling, Gemma 4's
  per-layer-type RoPE) (``ROPE_DEFAULTS`` there);
  a base or share that a class keeps only in its default rope dict (Ministral 3's 1e6, Higgs Audio
  v2's and Muse Spark's 5e5, Nemotron 3.5 Transcribe's 0.5) holds only when the config.json has no
  rope dict: a ``rope_scaling`` or ``rope_parameters`` without ``rope_theta`` has base 10000 there
  (``convert_rope_params_to_dict``: the mixin's ``default_theta``) and rotates the whole head;
* head width: ``head_dim``, else ``hidden_size // num_attention_heads``; DeepSeek-V2/V3 rotate a
  separate ``qk_rope_head_dim``-wide slice of each head (multi-head latent attention), and that
  slice is what the returned module acts on;
* base: ``rope_theta`` (inside ``rope_parameters`` in transformers >= 5, top-level before; only
  ``rotary_emb_base`` for GPT-NeoX, whose class ignores a ``rope_theta``); the class default, else
  10000, when absent;
* partial rotary: ``partial_rotary_factor`` (GPT-NeoX: only ``rotary_pct``; when absent, the family's
  default as HF's config classes set it: 0.25 for GPT-NeoX, StableLM and Qwen3-Next, 0.5 for Phi,
  Persimmon, Nemotron, GLM and Bamba (whose class sets 0.5 over a top-level value), else 1; GPT-J / CodeGen ``rotary_dim``) gives
  ``rotary_dim = int(head_dim * factor)``, odd or even as HF computes it, for the model types whose
  transformers code reads it (``_READS_PARTIAL``: the generated ``READS_PARTIAL``, with cited overrides)
  and for unknown ones; the other known types
  (Llama, Mistral, Qwen2/3, Gemma, OLMoE, ...) rotate the whole head and ignore it, as there;
* which dict: ``rope_scaling`` when a config has it, else ``rope_parameters`` (HF
  ``convert_rope_params_to_dict``: ``rope_scaling or rope_parameters``); a RoPE per layer type
  (Gemma 3's, 3n's and T5Gemma 2's ``rope_local_base_freq`` beside ``rope_theta``, with
  ``rope_scaling`` on the full-attention RoPE only; transformers 5's nested ``rope_parameters``) is
  picked with ``layer_type``;
* scaling: that dict as written, completed as HF completes it
  (``RotaryEmbeddingConfigMixin.standardize_rope_params`` and the rope functions): ``llama3``,
  ``yarn`` and ``longrope`` take ``original_max_position_embeddings`` from the top level (which
  wins in a single RoPE dict, as for Phi-3, and is ignored beside per-layer-type ones), else from
  their dict, else ``max_position_embeddings``; ``dynamic`` rescales past
  ``max_position_embeddings``; ``longrope`` and ``yarn`` without ``factor`` use
  ``max_position_embeddings / original_max_position_embeddings``;
* layout: the pair layout the model's HF code applies to its checkpoint weights, from
  :data:`MODEL_LAYOUTS` (``half`` for Llama, Qwen2, Phi-3, GPT-NeoX...; ``interleaved`` for GPT-J,
  CodeGen, Cohere, DeepSeek-V2, and DeepSeek-V3 unless ``rope_interleave`` is false: HF keeps
  DeepSeek-V3's interleaved weights and its ``apply_rotary_pos_emb_interleave`` rotates the pairs
  ``(2i, 2i+1)``, writing its output in half order, which leaves scores unchanged). Meta's own
  Llama checkpoints are interleaved; HF's conversion permutes them to ``half``
  (:func:`posenc.functional.permute_qk_weight` does the same). Unknown model types need ``layout=``.

* MRoPE (rope parameters with ``mrope_section``: Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5, GLM-4V,
  Ernie 4.5 VL, ...; ``_MROPE_TYPES``): the :class:`~posenc.schemes.mrope.MRope` module, with the
  sections, the axis assignment (contiguous, interleaved or Ernie's h/w alternation) and the pair
  layout of the model type's transformers code, and the frequencies and scaling read as for RoPE.
  A legacy ``"type": "mrope"`` is the default RoPE type (HF ``Qwen2VLTextConfig``).
* Phi-3.5-MoE (``phimoe``): its ``short_mscale`` / ``long_mscale`` scale cos and sin (when equal,
  as published; posenc has one scale for every length).
* HunYuan (``hunyuan_v1_dense``, ``hunyuan_v1_moe``): a ``dynamic`` scaling with an ``alpha`` is
  static NTK-alpha scaling, base ``rope_theta * alpha^(d / (d - 2))`` at every length (HF's
  ``ntk_alpha``); posenc gives it as the ``ntk`` rule with ``factor = alpha``.
* Llama 4 (``llama4`` and its ``text_config``, ``llama4_text``): interleaved pairs (HF's complex
  ``apply_rotary_emb``), Llama 3 scaling whose ``low_freq_factor`` equals ``high_freq_factor``.
  Its ``no_rope_layers`` (every fourth layer without RoPE) is a layer schedule that
  ``rope_from_config`` does not read: the module returned is the RoPE of the layers that have one.
* Multi-head latent attention (``deepseek_v32``, ``glm4_moe_lite``, ``glm_moe_dsa``, ``mistral4``,
  ``mistral_large4``, ``longcat_flash``, ``youtu``, ``axk1``, ``axk2``, ``bailing_hybrid``):
  the ``qk_rope_head_dim`` slice, interleaved as DeepSeek-V3 (HF ``apply_rotary_pos_emb_interleave``;
  ``rope_interleave: false`` gives ``half`` where the attention reads it, ``_ROPE_INTERLEAVE_FLAG``).
  DeepSeek-V3.2's and GLM-MoE-DSA's indexers rotate their own queries and keys: not returned.
* DeepSeek-V4 (``deepseek_v4``): the trailing ``int(head_dim * partial_rotary_factor)`` features of
  each head, pairs ``(2i, 2i+1)``, per rope kind (``layer_type`` ``"main"`` or ``"compress"``): the
  module returned has ``rotary_start`` at the first of them; the de-rotation of the attention output
  (HF's ``apply_rotary_pos_emb`` with ``-sin``) is the attention's to apply. A config.json without
  the two keyed dicts is read as ``DeepseekV4Config.__post_init__`` builds them: the share is the
  top-level ``partial_rotary_factor``, else the legacy ``qk_rope_head_dim / head_dim``, else 64 / 512;
  ``main`` is unscaled with base ``rope_theta``, ``compress`` takes the flat ``rope_scaling`` with base
  ``compress_rope_theta`` (YaRN with attention factor 1).
* Step 3.5 (``step3p5``, and ``step3p7``'s text model): a RoPE per layer type, built as
  ``Step3p7TextConfig.__post_init__`` builds them when the config.json lacks one dict per type: the
  ``rope_theta`` (a number, or one per layer) and ``partial_rotary_factors`` (one per layer) of the
  type's first layer; ``rope_scaling`` scales the ``full_attention`` RoPE only.
* GPT-OSS (``gpt_oss``): YaRN with ``truncate: false`` by default; its ``_apply_rotary_emb`` rotates
  the two halves (``half``); the OpenAI privacy filter applies the same tables to pairs
  ``(2i, 2i+1)`` (``interleaved``).
* Ministral 3 and Mistral 4: ``llama_4_scaling_beta`` in their rope dict is a query temperature that
  their attention applies; posenc warns that it does not use it (issue 25 item 5).
* ModernBERT's flat form: ``global_rope_theta`` and ``local_rope_theta`` are the bases of the full-
  and sliding-window-attention RoPEs, and ``rope_scaling`` scales both (``layer_type`` picks one).
* Field names and widths of single families: DBRX's ``d_model``, ``n_heads``, ``max_seq_len``;
  Zamba2's heads ``2 * hidden_size // num_attention_heads`` wide; GPT-NeoX-Japanese reads only
  ``rotary_emb_base`` and ``rotary_pct`` as GPT-NeoX; the Gemma 4 derivatives (``diffusion_gemma``,
  ``gemma4_unified``, ``embedding_gemma2``) have Gemma 4's 512-wide full-attention heads; Mellum and
  Step 3.5 read ``partial_rotary_factor`` from each layer type's dict only (Step 3.5's dicts as
  built above).

Where transformers 5.24 builds tables that its own attention cannot apply (a RuntimeError in its
forward), posenc rotates what the attention rotates: a top-level ``partial_rotary_factor`` beside
GLM-4-MoE-Lite's and Mistral Large 4's ``qk_rope_head_dim`` slice (their rotary modules build
``int(qk_rope_head_dim * factor)``-wide tables for the whole slice) is not read; Diffusion Gemma's
sliding-window RoPE spans the whole head (its rotary module takes the top-level factor that the
proportional rule's ``standardize_rope_params`` copies into the sliding dict); Mistral 4's legacy
``rope_scaling`` keeps the ``qk_rope_head_dim`` slice (its class's ``partial_rotary_factor`` is set
on the ``rope_parameters`` that the legacy dict then replaces), as transformers reads the same dict
under ``rope_parameters``.

Where transformers 5.23 departs from its own configs, posenc follows the config: ``phimoe``'s
rotary module always uses ``short_factor`` (its ``forward`` recomputes the frequencies without the
length), where posenc switches to ``long_factor`` past the original length as LongRoPE does; and
its yarn rule reads ``truncate`` from the outer ``rope_parameters``, so a ``"truncate": false``
inside a per-layer-type dict (Gemma 3, OLMo 3) is lost there and honoured here.

Not part of RoPE and so not returned: DeepSeek's YaRN softmax-scale correction
(``mscale(factor, mscale_all_dim)^2`` on ``1/sqrt(d)``, HF ``DeepseekV3Attention.scaling``).
The config is read as data (``json``); nothing in it is executed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..functional._checks import check_choice
from ..functional.rope import ROPE_LAYOUTS
from ..schemes.mrope import MRope, MRopeConfig
from ..schemes.rope import Rope, RopeConfig
from .families import (
    _CLASS_BUILT_ROPE,
    _GLOBAL_LOCAL,
    _GLOBAL_LOCAL_FIELDS,
    _LAYER_TYPED,
    _ROPE_INTERLEAVE_FLAG,
    _layer_head_dim,
)
from .fields import _TRAILING_ROPE, _check_even_head, _field, _head_dim, _load, _nested, _number, _own_field_names
from .generated import CLASS_DEFAULTS, ROPE_DEFAULTS
from .mrope import _MROPE_TYPES, _mrope, _mrope_rotary_dim, _refuse_mrope_family
from .scaling import _rotary_dim, _scaling
from .tables import _NEOX, MODEL_LAYOUTS

__all__ = ["rope_from_config", "MODEL_LAYOUTS"]

_DEFAULT_BASE = 10000.0  # HF RotaryEmbeddingConfigMixin.default_theta


def _layout(config: Mapping[str, Any], layout: str | None) -> str:
    if layout is not None:
        return check_choice("layout", layout, ROPE_LAYOUTS)
    model_type = config.get("model_type")
    if model_type in _ROPE_INTERLEAVE_FLAG and config.get("rope_interleave") is False:
        return "half"
    if model_type not in MODEL_LAYOUTS:
        raise ValueError(
            f"unknown pair layout for model_type {model_type!r}; pass layout='half' (rotate_half, "
            f"most HF checkpoints) or layout='interleaved'. Known model types: {', '.join(sorted(MODEL_LAYOUTS))}"
        )
    return MODEL_LAYOUTS[model_type]


def _given_base(config: Mapping[str, Any], field: str, default: float) -> float:
    """The base in the top-level config field ``field``, checked there (so that a message names it,
    not the ``rope_theta`` it becomes), or the class default where it is absent; a base of 0 is
    refused, not read as absent."""
    value = _field(config, field)
    if value is None:
        return default
    if _number(field, value) <= 1:
        raise ValueError(f"config field {field!r} (the RoPE base) must be greater than 1, got {value!r}")
    return value


def _layer_typed_table(config: Mapping[str, Any], scaling: Any, parameters: Any) -> dict[str, Any]:
    """Gemma 3's and OLMo 3's flat form: ``rope_scaling`` updates the global RoPE only (``_LAYER_TYPED``)."""
    full_theta, local_field, local_theta = _LAYER_TYPED[config["model_type"]]
    nested = dict(parameters) if _nested(parameters) else {"full_attention": dict(parameters or {})}
    full = {**nested.get("full_attention", {}), **(scaling or {})}
    full.setdefault("rope_theta", _given_base(config, "rope_theta", full_theta))
    local = dict(nested.get("sliding_attention") or {"rope_type": "default"})
    local.setdefault("rope_theta", _given_base(config, local_field, local_theta) if local_field else local_theta)
    return {**nested, "full_attention": full, "sliding_attention": local}


def _global_local_table(config: Mapping[str, Any], scaling: Any, parameters: Any) -> dict[str, Any]:
    """ModernBERT's flat form: ``rope_scaling`` updates both RoPEs (``_GLOBAL_LOCAL``)."""
    nested = dict(parameters) if _nested(parameters) else {}
    table = dict(nested)
    kinds = ("full_attention", "sliding_attention")
    for kind, field, theta in zip(kinds, _GLOBAL_LOCAL_FIELDS, _GLOBAL_LOCAL[config["model_type"]], strict=True):
        rope = {**(nested.get(kind) or {"rope_type": "default"}), **(scaling or {})}
        rope.setdefault("rope_theta", _given_base(config, field, theta))
        table[kind] = rope
    return table


def _pick_layer_type(table: Mapping[str, Any], layer_type: str | None) -> dict[str, Any]:
    if not _nested(table):
        if layer_type is not None:
            raise ValueError(
                f"layer_type={layer_type!r} picks one of a config's per-layer-type RoPEs, "
                "and this config has a single RoPE; leave layer_type out"
            )
        return dict(table)
    kinds = sorted(k for k, v in table.items() if isinstance(v, Mapping))
    if layer_type is None:
        raise ValueError(f"this config has a RoPE per layer type ({', '.join(kinds)}); pass layer_type= one of {kinds}")
    if not isinstance(layer_type, str):
        raise TypeError(f"layer_type must be a string, one of {kinds}, got {layer_type!r}")
    if layer_type not in kinds:
        raise ValueError(f"unknown layer_type {layer_type!r}; this config's RoPEs are for: {', '.join(kinds)}")
    return dict(table[layer_type])


def _rope_params(config: Mapping[str, Any], layer_type: str | None) -> dict[str, Any]:
    """The one ``rope_parameters`` dict that applies: ``rope_scaling`` wins over ``rope_parameters``
    when a config has both (HF ``convert_rope_params_to_dict``: ``rope_scaling or rope_parameters``);
    per-layer-type dicts (Gemma 3/4: ``{"full_attention": {...}, "sliding_attention": {...}}``) need
    ``layer_type``. Gemma 3's and OLMo 3's flat forms are read as HF reads them (``_LAYER_TYPED``)."""
    scaling, parameters = config.get("rope_scaling"), config.get("rope_parameters")
    for name, value in (("rope_scaling", scaling), ("rope_parameters", parameters)):
        if value is not None and not isinstance(value, Mapping):
            raise ValueError(
                f'config field {name!r} must be an object like {{"rope_type": "linear", "factor": 4.0}}, got {value!r}'
            )
    if config.get("model_type") in _LAYER_TYPED:
        table: Mapping[str, Any] = _layer_typed_table(config, scaling, parameters)
    elif config.get("model_type") in _GLOBAL_LOCAL:
        table = _global_local_table(config, scaling, parameters)
    else:
        table = scaling or parameters or {}
    return _pick_layer_type(table, layer_type)


def _text_fields(config: dict[str, Any]) -> dict[str, Any]:
    """A multimodal config's text model fields (its ``text_config``), completed with the config
    class's defaults (:mod:`posenc.config.generated`) and read under the standard field names. Families whose
    MRoPE posenc does not express are refused here, naming the family and why."""
    text_config = config.get("text_config")
    if text_config is not None and not isinstance(text_config, Mapping):
        raise ValueError(
            f"config field 'text_config' must be an object (a dict) of the text model's fields, as in a "
            f"multimodal config.json, got {text_config!r}"
        )
    _refuse_mrope_family(config.get("model_type"))
    if text_config is not None and "num_attention_heads" not in config:
        config = {"model_type": config.get("model_type"), **text_config}
        _refuse_mrope_family(config.get("model_type"))
    model_type = config.get("model_type")
    config = {**CLASS_DEFAULTS.get(model_type, {}), **ROPE_DEFAULTS.get(model_type, {}), **config}
    config = _own_field_names(config)
    if config.get("model_type") in _CLASS_BUILT_ROPE:
        config = _CLASS_BUILT_ROPE[config["model_type"]](config)
    return config


def _base(config: Mapping[str, Any], params: Mapping[str, Any]) -> float:
    base = _field(params, "rope_theta")
    if base is None:
        neox = config.get("model_type") in _NEOX
        base = _field(config, *(("rotary_emb_base",) if neox else ("rope_theta", "rotary_emb_base")))
    if base is None:
        return _DEFAULT_BASE
    base = _number("rope_theta", base)
    if not base > 1:
        raise ValueError(f"config field 'rope_theta' (the RoPE base) must be greater than 1, got {base!r}")
    return base


def _mrope_module(
    config: Mapping[str, Any], params: dict[str, Any], mrope: tuple, head_dim: int, base: float, layout: str | None
) -> MRope:
    model_type = config.get("model_type")
    rotary_dim = _mrope_rotary_dim(config, params, head_dim)
    if layout is None and model_type in _MROPE_TYPES:
        layout = _MROPE_TYPES[model_type][1]
    return MRope(
        MRopeConfig(
            dim=head_dim,
            base=base,
            sections=mrope[0],
            interleaved=mrope[1],
            layout=_layout(config, layout),
            scaling=_scaling(config, {k: v for k, v in params.items() if k != "partial_rotary_factor"}, False),
            rotary_dim=None if rotary_dim == head_dim else rotary_dim,
        )
    )


def rope_from_config(
    config: Mapping[str, Any] | str | os.PathLike[str], *, layout: str | None = None, layer_type: str | None = None
) -> Rope:
    """The RoPE module for a model's ``config.json`` (a dict, a path to the file or its folder).

    Configs whose rope parameters have ``mrope_section`` (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5,
    GLM-4V, ...: :data:`_MROPE_TYPES`) give the :class:`~posenc.schemes.mrope.MRope` module (a
    subclass of ``Rope``) with those sections, contiguous or interleaved as the model's transformers
    code assigns them, and the same frequencies and scaling; its positions are ``(t, h, w)``
    coordinates ``[b, s, 3]`` (:func:`posenc.config.mrope_positions`).

    ``layout`` overrides the model type's pair layout (required for model types not in
    :data:`MODEL_LAYOUTS`). Multimodal configs are read from their ``text_config``. Models with a
    RoPE per kind of layer (Gemma 3: ``rope_theta`` for full attention, ``rope_local_base_freq`` for
    sliding-window attention; Gemma 4's nested ``rope_parameters``) need ``layer_type`` (such as
    ``"full_attention"`` or ``"sliding_attention"``); the head width of Gemma 4's full-attention
    layers is ``global_head_dim``. See the module docstring for which fields are read and how they
    are completed.

    >>> rope = rope_from_config({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    ...                          "rope_theta": 500000.0})
    >>> rope.config.dim, rope.config.base, rope.config.layout
    (128, 500000.0, 'half')
    """
    config = _text_fields(_load(config))
    params = _rope_params(config, layer_type)
    base = _base(config, params)
    head_dim = _check_even_head(*_layer_head_dim(config, layer_type, _head_dim(config)))
    mrope = _mrope(config, params, head_dim)  # takes the MRoPE keys out of params
    if mrope is not None:
        return _mrope_module(config, params, mrope, head_dim, base, layout)
    rotary_dim = _rotary_dim(config, params, head_dim)
    if layout is None and config.get("model_type") in _MROPE_TYPES:  # MRoPE code at text positions
        layout = _MROPE_TYPES[config["model_type"]][1]
    nested = config.get("model_type") in {**_LAYER_TYPED, **_GLOBAL_LOCAL} or _nested(
        config.get("rope_scaling") or config.get("rope_parameters")
    )
    return Rope(
        RopeConfig(
            dim=head_dim,
            base=base,
            layout=_layout(config, layout),
            scaling=_scaling(config, params, nested),
            rotary_dim=None if rotary_dim == head_dim else rotary_dim,
            rotary_start=head_dim - rotary_dim if config.get("model_type") in _TRAILING_ROPE else 0,
        )
    )
