"""Model-family rules: per-layer-type RoPEs, rope dicts that config classes build, MLA flags."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .fields import _field, _whole
from .tables import _GEMMA4

#: Models with a RoPE per kind of layer whose config.json may have the flat (pre-transformers-5)
#: form, read as their config classes' ``convert_rope_params_to_dict`` read it: ``rope_scaling``
#: updates the full-attention RoPE only, whose base is ``rope_theta`` (the class's global default
#: when absent); the sliding-window RoPE is unscaled, with its base from the field named here (Gemma
#: 3 and 3n, T5Gemma 2 (``T5Gemma2TextConfig`` and ``T5Gemma2DecoderConfig`` copy Gemma 3's
#: ``convert_rope_params_to_dict``): ``rope_local_base_freq``; OLMo 3: none, since HF's class takes
#: ``rope_theta`` for the full-attention layers first and leaves the sliding ones its default) or
#: else the class default.
_LAYER_TYPED: dict[str, tuple[float, str | None, float]] = {
    **dict.fromkeys(
        ("gemma3", "gemma3_text", "gemma3n", "gemma3n_text", "t5gemma2_text", "t5gemma2_decoder", "t5gemma2_encoder"),
        (1_000_000.0, "rope_local_base_freq", 10_000.0),
    ),
    "olmo3": (500_000.0, None, 500_000.0),
}

#: Model types whose attention applies ``apply_rotary_pos_emb_interleave`` unless the config's
#: ``rope_interleave`` is false (HF ``DeepseekV3Attention.forward`` and its copies).
_ROPE_INTERLEAVE_FLAG = ("deepseek_v3", "axk1", "glm4_moe_lite", "mistral4", "youtu", "sarvam_mla")


def _layer_head_dim(config: Mapping[str, Any], layer_type: str | None, head: tuple[int, str]) -> tuple[int, str]:
    """Gemma 4's full-attention layers have heads of their own width: ``global_head_dim`` in its
    config.json (512 when absent, HF ``Gemma4TextConfig``), which transformers' own dicts keep as a
    ``per_layer_config`` override of those layers' ``head_dim``."""
    if layer_type is None:
        return head
    per_layer = config.get("per_layer_config")
    if isinstance(per_layer, Mapping):  # transformers' own dict: overrides keyed by layer index ("05" in JSON)
        for index, kind in enumerate(config.get("layer_types") or ()):
            if kind == layer_type:
                override = next((v for k, v in per_layer.items() if str(k).isdigit() and int(k) == index), None)
                if isinstance(override, Mapping) and override.get("head_dim"):
                    name = f"per_layer_config[{index}].head_dim"
                    return _whole(name, override["head_dim"]), f"config field {name!r}"
                return head  # no override (transformers drops one equal to head_dim)
        return head
    if layer_type == "full_attention":
        if config.get("global_head_dim"):
            return _whole("global_head_dim", config["global_head_dim"]), "config field 'global_head_dim'"
        if config.get("model_type") in _GEMMA4:
            return 512, "Gemma 4's default global_head_dim"
    return head


#: ModernBERT's flat (pre-transformers-5) form: ``global_rope_theta`` and ``local_rope_theta`` are the
#: bases of the full- and sliding-window-attention RoPEs (class defaults here), and a
#: ``rope_scaling`` updates both (HF ``ModernBertConfig.convert_rope_params_to_dict``).
_GLOBAL_LOCAL = {"modernbert": (160_000.0, 10_000.0), "modernbert-decoder": (160_000.0, 10_000.0)}
_GLOBAL_LOCAL_FIELDS = ("global_rope_theta", "local_rope_theta")


def _keyed(rope: Mapping[str, Any], kinds: Any, theta: Any, factor: Any) -> dict[str, Any]:
    """Dicts written per kind, given the class's base and top-level share where they have none."""
    table = {}
    for kind in kinds:
        params = {"rope_theta": theta, **rope[kind]}
        if factor is not None:
            params.setdefault("partial_rotary_factor", factor)
        table[kind] = params
    return table


def _deepseek_v4_share(config: Mapping[str, Any]) -> float:
    legacy = config.get("qk_rope_head_dim")
    if legacy is None:
        return 64 / 512
    return _whole("qk_rope_head_dim", legacy) / _whole("head_dim", config["head_dim"])


def _deepseek_v4_rope(config: dict[str, Any]) -> dict[str, Any]:
    """DeepSeek-V4's two RoPEs as ``DeepseekV4Config.__post_init__`` builds them from a config.json
    whose rope dict is not already keyed ``main`` / ``compress``: the rotated share is the top-level
    ``partial_rotary_factor``, else the legacy ``qk_rope_head_dim / head_dim``, else 64 / 512, and
    goes into both dicts; ``main`` is the default RoPE with base ``rope_theta`` (10000); ``compress``
    takes the flat ``rope_scaling`` (or ``rope_parameters``) with base ``compress_rope_theta``
    (160000), and ``attention_factor`` 1 when it is ``yarn``. Keyed dicts are kept as written (the
    class's ``convert_rope_params_to_dict`` gives them the top-level ``rope_theta`` and
    ``partial_rotary_factor`` where they have none)."""
    rope = config.get("rope_scaling") or config.get("rope_parameters") or {}
    if not isinstance(rope, Mapping):
        return config  # _rope_params refuses it
    config = {k: v for k, v in config.items() if k != "rope_scaling"}
    theta = _field(config, "rope_theta")
    factor = _field(config, "partial_rotary_factor")
    if isinstance(rope.get("main"), Mapping) and isinstance(rope.get("compress"), Mapping):
        kinds = ("main", "compress")
        return {**config, "rope_parameters": _keyed(rope, kinds, 10_000.0 if theta is None else theta, factor)}
    if factor is None:
        factor = _deepseek_v4_share(config)
    kind = rope.get("rope_type", rope.get("type", "default"))
    compress = {
        **{k: v for k, v in rope.items() if k not in ("main", "compress")},
        "rope_type": kind,
        "rope_theta": _field(config, "compress_rope_theta") or 160_000.0,
        "partial_rotary_factor": factor,
    }
    if kind == "yarn":
        compress.setdefault("attention_factor", 1.0)
    main = {"rope_type": "default", "rope_theta": 10_000.0 if theta is None else theta, "partial_rotary_factor": factor}
    return {**config, "rope_parameters": {"main": main, "compress": compress}}


def _step3p5_layer(config: Mapping[str, Any], kind: str, index: int) -> dict[str, Any]:
    """The default RoPE of layer ``index`` (the first of its type): its base and share."""
    theta, factors = config.get("rope_theta", 10_000.0), config.get("partial_rotary_factors")
    try:
        params = {"rope_type": "default", "rope_theta": theta[index] if isinstance(theta, list) else theta}
        if factors:
            params["partial_rotary_factor"] = factors[index]
    except (IndexError, KeyError, TypeError):
        raise ValueError(
            f"config fields 'rope_theta' ({theta!r}) and 'partial_rotary_factors' ({factors!r}) must be a "
            f"number or a list with one entry per layer (layer {index} is the first {kind!r} layer)"
        ) from None
    return params


def _step3p5_layer_types(config: Mapping[str, Any]) -> list[str]:
    """Step 3.5's ``layer_types`` (all ``full_attention`` when absent), without the pad of its
    multi-token-prediction layers."""
    layer_types = config.get("layer_types") or ["full_attention"]
    extra, layers = config.get("num_nextn_predict_layers"), config.get("num_hidden_layers")
    if not isinstance(layer_types, (list, tuple)) or not all(isinstance(t, str) for t in layer_types):
        raise ValueError(f"config field 'layer_types' must be a list of layer type names, got {layer_types!r}")
    if extra and layers and len(layer_types) == layers + extra:
        return list(layer_types[:layers])
    return list(layer_types)


def _step3p5_rope(config: dict[str, Any]) -> dict[str, Any]:
    """Step 3.5's RoPE per layer type as ``Step3p7TextConfig.__post_init__`` builds them from a
    config.json without one dict for each of its ``layer_types`` (all ``full_attention`` when
    absent): for each type, the default RoPE with the ``rope_theta`` (one number, or a list with
    one per layer) and ``partial_rotary_factors`` (a list) of its first layer; a ``rope_scaling``
    updates the ``full_attention`` dict only, and a flat ``rope_parameters`` is dropped. Dicts for
    every layer type are kept as written (the class gives them its default base, 10000, and the
    top-level ``partial_rotary_factor`` where they have none); a ``rope_scaling`` beside them is
    dropped there."""
    layer_types = _step3p5_layer_types(config)
    kinds = sorted(set(layer_types))
    rope = config.get("rope_parameters")
    scaling = config.get("rope_scaling")
    config = {k: v for k, v in config.items() if k != "rope_scaling"}
    if isinstance(rope, Mapping) and all(isinstance(rope.get(kind), Mapping) for kind in kinds):
        return {**config, "rope_parameters": _keyed(rope, kinds, 10_000.0, config.get("partial_rotary_factor"))}
    if scaling is not None and not isinstance(scaling, Mapping):
        raise ValueError(
            f'config field \'rope_scaling\' must be an object like {{"rope_type": "linear", "factor": 4.0}}, got {scaling!r}'
        )
    table = {kind: _step3p5_layer(config, kind, layer_types.index(kind)) for kind in kinds}
    if scaling and "full_attention" in table:
        table["full_attention"].update(scaling)
    return {**config, "rope_parameters": table}


#: Model types whose config classes build their rope dicts from other fields (DeepSeek-V4, Step 3.5).
_CLASS_BUILT_ROPE = {"deepseek_v4": _deepseek_v4_rope, "step3p5": _step3p5_rope, "step3p7": _step3p5_rope}
