"""Layer schedules: the positional encoding of every layer of a model, from its ``config.json``.

Models no longer use one RoPE everywhere. :func:`layer_schedule` says, layer by layer, what
transformers 5 applies, as a list of short strings; :func:`encodings_from_config` turns it into
modules; :func:`query_scales_from_config` gives the position-dependent query temperature of each
layer (:mod:`posenc.functional.temperature`). A schedule entry is:

* ``"none"``: a NoPE layer (no positional encoding; causal masking alone carries order);
* ``"no_attention"``: a layer that is not attention (a Mamba or linear-attention layer of a
  hybrid model), where no positional encoding applies;
* ``"rope"``: the config's single RoPE (:func:`~posenc.rope_from_config` without ``layer_type``);
* any other string: a layer type whose own RoPE :func:`~posenc.rope_from_config` reads with
  ``layer_type=`` (``"sliding_attention"``, ``"full_attention"``).

What each family does, with the transformers 5.24 code that decides it:

* Llama 4 (``llama4``, ``llama4_text``): ``no_rope_layers[i]`` is 1 for a RoPE layer and 0 for a
  NoPE layer (``Llama4TextAttention.use_rope``); absent or empty, every ``no_rope_layer_interval``-th
  layer (default 4) is NoPE (``Llama4TextConfig.__post_init__``: ``int((i + 1) % interval != 0)``;
  ``interleave_moe_layer_step`` picks MoE layers, not RoPE). With ``attn_temperature_tuning``
  (default true) the NoPE layers scale their queries by position (``floor_scale`` 8192,
  ``attn_scale`` 0.1). Meta, "The Llama 4 herd" (2025): interleaved attention without RoPE (iRoPE).
  (Its L2 norm of q and k on the RoPE layers, ``use_qk_norm``, is not positional and not read here.)
* SmolLM3 (``smollm3``): the same ``no_rope_layers`` / ``no_rope_layer_interval`` (default 4) rule
  (``SmolLM3Config.__post_init__``, ``SmolLM3Attention.use_rope``); no temperature.
* Cohere2 (Command R7B, ``cohere2``): RoPE on the sliding-window layers only, NoPE on the global
  ones (``Cohere2Attention.forward`` rotates when ``sliding_window`` is set, which it is for
  ``layer_types[i] == "sliding_attention"`` and a non-null ``sliding_window``); ``layer_types``
  default: every ``sliding_window_pattern``-th layer (4) global.
* EXAONE 4 (``exaone4``): RoPE on sliding layers, NoPE on global ones, and RoPE everywhere when
  ``sliding_window`` is null (``Exaone4Attention.forward``); default pattern 4.
* A RoPE per layer type (Gemma 3 / 3n / 4, OLMo 3, ModernBERT, and any config whose
  ``rope_parameters`` is keyed by layer type): ``layer_types[i]``, or when absent the class's
  default pattern (Gemma 3: every ``sliding_window_pattern``-th layer global, 6; Gemma 3n: every
  5th; Gemma 4: every 6th, and its last layer always global; OLMo 3: every 4th; ModernBERT: every
  ``global_attn_every_n_layers``-th from layer 0, 3).
* Mistral's ``llama_4_scaling_beta`` (``ministral3``, ``mistral4``, and ``mistral3`` wrapping
  them): RoPE on every layer and the query temperature on every layer, ``floor_scale`` the
  ``original_max_position_embeddings`` of its RoPE (``get_llama_4_attn_scale``).
* Hybrid models with layers that are not attention (Qwen3-Next's and Qwen3.5's Gated DeltaNet
  ``linear_attention`` layers, OLMo-Hybrid's, Zamba2's and Nemotron-H's Mamba layers, ``mlp`` and
  ``moe`` blocks; ``layer_types`` or ``layers_block_type``, where transformers 5.24 names them so):
  ``"no_attention"`` on those layers, which apply no RoPE (their decoder layers have no
  ``self_attn``); Zamba2's ``hybrid`` layers run its shared attention block, with RoPE only when
  ``use_mem_rope`` is true (default false: NoPE; ``Zamba2Attention.forward``). Bamba, Jamba and
  RecurrentGemma compute their layer kinds from other fields (``attn_layer_indices``;
  ``attn_layer_period`` and ``attn_layer_offset``; ``block_types``); Jamba's and Nemotron-H's
  attention layers are NoPE (their attention applies no rotary embedding).
* Any other model type: its single RoPE on every layer.

The config is read as data, as :func:`~posenc.rope_from_config` reads it (a dict, a path to the
file or its folder; a multimodal config through its ``text_config``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..functional.temperature import QueryTemperature
from ..schemes.base import PositionalEncoding, create
from .fields import _load
from .rope import rope_from_config

__all__ = ["NOPE", "NO_ATTENTION", "ROPE", "layer_schedule", "encodings_from_config", "query_scales_from_config"]

NOPE = "none"  #: schedule entry of a layer without positional encoding
NO_ATTENTION = "no_attention"  #: schedule entry of a layer that is not attention (Mamba, linear attention)
ROPE = "rope"  #: schedule entry of a layer with the config's single RoPE

_NO_ROPE_LAYERS = ("llama4", "llama4_text", "smollm3")
_LLAMA4 = ("llama4", "llama4_text")
_ROPE_ON_SLIDING = ("cohere2", "exaone4")
_LLAMA_4_SCALING = ("ministral3", "mistral4")
#: Default ``layer_types`` of the families that have them when a config.json has none: every
#: ``p``-th layer is global (``full_attention``), the others ``sliding_attention``, as their config
#: classes' ``__post_init__`` build them: ``(config field of p or None, default p, shift)``, layer
#: ``i`` global when ``(i + shift) % p == 0``.
_PATTERNS: dict[str, tuple[str | None, int, int]] = {
    **dict.fromkeys(("gemma3", "gemma3_text"), ("sliding_window_pattern", 6, 1)),
    **dict.fromkeys(("gemma3n", "gemma3n_text"), (None, 5, 1)),
    **dict.fromkeys(("gemma4", "gemma4_text"), (None, 6, 1)),
    "olmo3": (None, 4, 1),
    "modernbert": ("global_attn_every_n_layers", 3, 0),
    "cohere2": ("sliding_window_pattern", 4, 1),
    "exaone4": ("sliding_window_pattern", 4, 1),
}
_GEMMA4 = ("gemma4", "gemma4_text")
#: Hybrids whose attention layers apply no positional encoding: their modelling files define
#: ``apply_rotary_pos_emb`` but no rotary module, and ``JambaAttention.forward`` /
#: ``NemotronHAttention.forward`` never call it (transformers 5.24).
_NOPE_ATTENTION = ("jamba", "nemotron_h")
#: Layer kinds of hybrid models that are not attention (transformers 5.24 remaps Mamba layers to
#: ``linear_attention``: ``remap_legacy_layer_types``).
_NOT_ATTENTION = frozenset({"linear_attention", "mamba", "mamba2", "mlp", "moe", "conv", "recurrent"})


def _text_config(config: Mapping[str, Any] | str | os.PathLike[str]) -> tuple[dict[str, Any], set[str]]:
    """The text model's fields (a multimodal config's ``text_config``) and the model types that name
    it (the outer one and the text config's own)."""
    config = _load(config)
    text = config.get("text_config")
    if text is not None and not isinstance(text, Mapping):
        raise ValueError(
            f"config field 'text_config' must be an object (a dict) of the text model's fields, as in a "
            f"multimodal config.json, got {text!r}"
        )
    types = {config.get("model_type")}
    if text is not None and "num_attention_heads" not in config:
        types.add(text.get("model_type"))
        config = {**text, "model_type": config.get("model_type")}
    return config, {t for t in types if isinstance(t, str)}


def _whole(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"config field {name!r} must be a positive integer, got {value!r}")
    return value


#: The most layers a schedule is built for: a list of one name per layer is made, and no model has
#: more than a few hundred (a number beyond this is a misread field, not a model).
MAX_LAYERS = 1 << 20


def _depth(config: Mapping[str, Any]) -> int:
    if config.get("num_hidden_layers") is not None:
        depth = _whole("num_hidden_layers", config["num_hidden_layers"])
        if depth > MAX_LAYERS:
            raise ValueError(
                f"config field 'num_hidden_layers' must be at most {MAX_LAYERS} (a schedule lists every layer), "
                f"got {depth}"
            )
        return depth
    for name in ("layer_types", "layers_block_type"):  # Nemotron-H: num_hidden_layers = len(layers_block_type)
        if isinstance(config.get(name), Sequence) and not isinstance(config[name], str):
            return len(config[name])
    raise ValueError("config field 'num_hidden_layers' is missing: the schedule needs the number of layers")


def _given_layer_types(given: object, depth: int, name: str = "layer_types") -> list[str]:
    if isinstance(given, str) or not isinstance(given, Sequence) or not all(isinstance(t, str) for t in given):
        raise ValueError(
            f"config field {name!r} must be a list of layer-type names such as "
            f'["sliding_attention", "full_attention"], got {given!r}'
        )
    if len(given) != depth:
        raise ValueError(f"config field {name!r} names {len(given)} layers; the model has num_hidden_layers={depth}")
    return list(given)


def _layer_types(config: Mapping[str, Any], types: set[str], depth: int) -> list[str] | None:
    """``layer_types`` as given (checked against the depth), else the family's default pattern."""
    given = config.get("layer_types")
    if given is not None:
        layer_types = _given_layer_types(given, depth)
    else:
        family = next((t for t in sorted(types) if t in _PATTERNS), None)
        if family is None:
            return None
        field, period, shift = _PATTERNS[family]
        if field is not None and config.get(field) is not None:
            period = _whole(field, config[field])
        layer_types = ["full_attention" if (i + shift) % period == 0 else "sliding_attention" for i in range(depth)]
    if types & set(_GEMMA4) and layer_types:
        layer_types[-1] = "full_attention"  # Gemma4TextConfig forces its last layer global
    return layer_types


def _bamba_kinds(config: Mapping[str, Any], depth: int) -> list[str]:
    """``BambaConfig.layers_block_type``: attention at ``attn_layer_indices``, Mamba elsewhere."""
    indices = config.get("attn_layer_indices") or ()
    if isinstance(indices, str) or not isinstance(indices, Sequence):
        raise ValueError(f"config field 'attn_layer_indices' must be a list of layer indices, got {indices!r}")
    return ["full_attention" if i in indices else "mamba" for i in range(depth)]


def _jamba_kinds(config: Mapping[str, Any], depth: int) -> list[str]:
    """``JambaConfig.layers_block_type``: attention where ``i % attn_layer_period == attn_layer_offset``
    (defaults 8 and 4), Mamba elsewhere."""
    period = _whole("attn_layer_period", config.get("attn_layer_period", 8))
    offset = config.get("attn_layer_offset", 4)
    return ["attention" if i % period == offset else "mamba" for i in range(depth)]


def _recurrent_gemma_kinds(config: Mapping[str, Any], depth: int) -> list[str]:
    """``RecurrentGemmaConfig.layers_block_type``: ``block_types`` repeated (default recurrent,
    recurrent, attention); a recurrent block is not attention."""
    blocks = config.get("block_types") or ("recurrent", "recurrent", "attention")
    if isinstance(blocks, str) or not isinstance(blocks, Sequence) or not all(isinstance(b, str) for b in blocks):
        raise ValueError(
            f"config field 'block_types' must be a list such as ['recurrent', 'attention'], got {blocks!r}"
        )
    return ["mamba" if blocks[i % len(blocks)] == "recurrent" else "attention" for i in range(depth)]


#: Hybrids whose config classes compute ``layers_block_type`` (a property, not written to
#: config.json) from other fields.
_BLOCK_KINDS = {"bamba": _bamba_kinds, "jamba": _jamba_kinds, "recurrent_gemma": _recurrent_gemma_kinds}


def _attention_layers(config: Mapping[str, Any], types: set[str], depth: int) -> list[bool] | None:
    """Which layers are attention, where ``layer_types`` or ``layers_block_type`` names other kinds
    (or the config class computes them: :data:`_BLOCK_KINDS`)."""
    for name in ("layer_types", "layers_block_type"):
        given = config.get(name)
        if given is not None:
            kinds = _given_layer_types(given, depth, name)
            if _NOT_ATTENTION & set(kinds):
                return [kind not in _NOT_ATTENTION for kind in kinds]
    family = next((t for t in sorted(types) if t in _BLOCK_KINDS), None)
    if family is None:
        return None
    return [kind not in _NOT_ATTENTION for kind in _BLOCK_KINDS[family](config, depth)]


def _uses_rope(config: Mapping[str, Any], types: set[str], depth: int) -> list[bool]:
    """Llama 4 / SmolLM3's ``no_rope_layers`` (1 = RoPE), or its default every-``interval``-th NoPE."""
    flags = config.get("no_rope_layers")
    llama4 = bool(types & set(_LLAMA4))
    if flags is None or (llama4 and isinstance(flags, Sequence) and len(flags) == 0):
        interval = _whole("no_rope_layer_interval", config.get("no_rope_layer_interval", 4))
        return [(i + 1) % interval != 0 for i in range(depth)]
    if isinstance(flags, str) or not isinstance(flags, Sequence) or any(f not in (0, 1) for f in flags):
        raise ValueError(
            f"config field 'no_rope_layers' must be a list of 0 (NoPE layer) or 1 (RoPE layer), one per "
            f"layer, got {flags!r}"
        )
    if len(flags) < depth:
        raise ValueError(
            f"config field 'no_rope_layers' has {len(flags)} entries; the model has num_hidden_layers={depth} "
            "and transformers reads one per layer"
        )
    return [bool(f) for f in flags[:depth]]


def _per_layer_type(config: Mapping[str, Any], types: set[str]) -> bool:
    params = config.get("rope_scaling") or config.get("rope_parameters")
    nested = isinstance(params, Mapping) and any(isinstance(v, Mapping) for v in params.values())
    return nested or bool(types & (set(_PATTERNS) - set(_ROPE_ON_SLIDING)))


def _rope_on_sliding(config: Mapping[str, Any], types: set[str], layer_types: list[str]) -> list[str]:
    """Cohere2 and EXAONE 4: RoPE on the sliding-window layers, NoPE on the global ones."""
    window = config.get("sliding_window", 4096)  # both classes' default
    if window is None and types & {"exaone4"}:
        return [ROPE] * len(layer_types)  # Exaone4Attention: RoPE everywhere without a window
    return [ROPE if kind == "sliding_attention" and window is not None else NOPE for kind in layer_types]


def _attention_schedule(config: Mapping[str, Any], types: set[str], depth: int) -> list[str]:
    if types & {"zamba2"} and not config.get("use_mem_rope", False):
        return [NOPE] * depth  # Zamba2Attention rotates only with use_mem_rope (default false)
    if types & set(_NOPE_ATTENTION):
        return [NOPE] * depth
    if types & set(_NO_ROPE_LAYERS):
        return [ROPE if rope else NOPE for rope in _uses_rope(config, types, depth)]
    if _attention_layers(config, types, depth) is not None and not _per_layer_type(config, types):
        return [ROPE] * depth  # single RoPE; the layers that are not attention are marked after
    layer_types = _layer_types(config, types, depth)
    if types & set(_ROPE_ON_SLIDING):
        return _rope_on_sliding(config, types, layer_types)
    if _per_layer_type(config, types):
        if layer_types is None:
            raise ValueError(
                "this config has a RoPE per layer type but no 'layer_types' saying which layer has which; "
                "add layer_types (one name per layer)"
            )
        return layer_types
    return [ROPE] * depth


def layer_schedule(config: Mapping[str, Any] | str | os.PathLike[str]) -> list[str]:
    """One entry per layer: ``"none"`` (NoPE), ``"rope"`` (the config's RoPE), the layer type whose
    RoPE the layer uses, or ``"no_attention"`` (a layer that is not attention). See the module
    docstring for the rules of each family and their sources.

    >>> layer_schedule({"model_type": "smollm3", "num_hidden_layers": 8})
    ['rope', 'rope', 'rope', 'none', 'rope', 'rope', 'rope', 'none']
    """
    config, types = _text_config(config)
    depth = _depth(config)
    schedule = _attention_schedule(config, types, depth)
    attention = _attention_layers(config, types, depth)
    if attention is None:
        return schedule
    return [entry if is_attention else NO_ATTENTION for entry, is_attention in zip(schedule, attention)]


def encodings_from_config(
    config: Mapping[str, Any] | str | os.PathLike[str], *, layout: str | None = None
) -> list[PositionalEncoding]:
    """One positional encoding per layer, following :func:`layer_schedule`: the ``none`` scheme for
    NoPE layers, :func:`~posenc.rope_from_config` (with the layer's type where the config has a
    RoPE per layer type) for the others. Layers with the same entry share one module (the modules
    hold no weights). ``layout`` is passed to :func:`~posenc.rope_from_config`."""
    config = _load(config)
    built: dict[str, PositionalEncoding] = {}
    out = []
    for entry in layer_schedule(config):
        if entry not in built:
            if entry in (NOPE, NO_ATTENTION):
                built[entry] = create("none")
            else:
                built[entry] = rope_from_config(config, layout=layout, layer_type=None if entry == ROPE else entry)
        out.append(built[entry])
    return out


def _rope_dict(config: Mapping[str, Any], types: set[str]) -> Mapping[str, Any]:
    params = config.get("rope_scaling") or config.get("rope_parameters")
    if params is None and types & set(_LLAMA_4_SCALING):
        # Ministral3Config / Mistral4Config defaults when config.json has no rope_parameters
        original = 8192 if "mistral4" in types else 16384
        return {"llama_4_scaling_beta": 0.1, "original_max_position_embeddings": original}
    if params is not None and not isinstance(params, Mapping):
        raise ValueError(
            f'config field rope_parameters must be an object like {{"rope_type": "yarn", ...}}, got {params!r}'
        )
    return params or {}


def query_scales_from_config(config: Mapping[str, Any] | str | os.PathLike[str]) -> list[QueryTemperature | None]:
    """The query temperature of each layer (for ``posenc.Attention(query_scale=...)``), None where
    the layer has none: Llama 4's NoPE layers when ``attn_temperature_tuning`` (default true), every
    layer of Ministral 3 / Mistral 4 with a ``llama_4_scaling_beta``; see the module docstring."""
    config, types = _text_config(config)
    depth = _depth(config)
    if types & set(_LLAMA4) and config.get("attn_temperature_tuning", True):
        scale = QueryTemperature.llama4(
            floor_scale=config.get("floor_scale", 8192), attn_scale=config.get("attn_scale", 0.1)
        )
        return [scale if entry == NOPE else None for entry in layer_schedule(config)]
    if types & set(_LLAMA_4_SCALING):
        params = _rope_dict(config, types)
        beta = params.get("llama_4_scaling_beta")
        if beta is None:
            return [None] * depth
        original = params.get("original_max_position_embeddings") or config.get("original_max_position_embeddings")
        if original is None:
            raise ValueError(
                "config rope_parameters has 'llama_4_scaling_beta' but no 'original_max_position_embeddings', "
                "the length its query temperature steps by"
            )
        return [QueryTemperature.llama_4_scaling(beta=beta, original_max_position_embeddings=original)] * depth
    return [None] * depth
