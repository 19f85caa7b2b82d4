"""A config's rope dict as one of posenc's scaling rules: rotated width, keys, family quirks."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

from ..functional.rope_scaling import SCALING_KEYS
from .fields import _TRAILING_ROPE, _field, _whole
from .generated import PARTIAL_DEFAULTS
from .tables import (
    _DEFAULT_PARTIAL,
    _FIXED_PARTIAL,
    _LAYER_PARTIAL_ONLY,
    _NEOX,
    _READS_PARTIAL,
    _ROTARY_DIM_TYPES,
    _YARN_IS_LONGROPE,
    MODEL_LAYOUTS,
)

_NEEDS_ORIGINAL = ("llama3", "yarn", "longrope")


def _partial_factor(config: Mapping[str, Any], params: Mapping[str, Any]) -> float:
    factor = _field(params, "partial_rotary_factor")
    if factor is None and config.get("model_type") in _FIXED_PARTIAL:
        factor = _FIXED_PARTIAL[config["model_type"]]
    if factor is None:
        neox = config.get("model_type") in _NEOX
        factor = _field(config, *(("rotary_pct",) if neox else ("partial_rotary_factor", "rotary_pct")))
    factor = (
        _DEFAULT_PARTIAL.get(config.get("model_type"), PARTIAL_DEFAULTS.get(config.get("model_type"), 1.0))
        if factor is None
        else factor
    )
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise ValueError(f"partial_rotary_factor (rotary_pct) must be a number in (0, 1], got {factor!r}")
    return float(factor)


def _share_of(head_dim: int, factor: float) -> int:
    """``int(head_dim * partial_rotary_factor)`` as transformers computes it; at least one feature."""
    rotary_dim = int(head_dim * factor)
    if rotary_dim < 1:
        raise ValueError(
            f"config field 'partial_rotary_factor' = {factor!r} of head_dim {head_dim} rotates "
            f"int({head_dim} * {factor!r}) = {rotary_dim} features; it must leave at least one pair "
            f"(partial_rotary_factor >= {2 / head_dim:.4g})"
        )
    return rotary_dim


def _rotary_dim(config: Mapping[str, Any], params: Mapping[str, Any], head_dim: int) -> int:
    model_type = config.get("model_type")
    if model_type in _TRAILING_ROPE:  # the width of its tables, which its attention rotates
        return _share_of(head_dim, _partial_factor(config, params))
    if "qk_rope_head_dim" in config:
        return head_dim
    if params.get("rope_type", params.get("type")) == "proportional":
        return head_dim  # its frequencies span the head; the factor zeroes some (the scaling keeps it)
    if config.get("rotary_dim") is not None and (
        model_type in _ROTARY_DIM_TYPES
        or (model_type not in MODEL_LAYOUTS and params.get("partial_rotary_factor") is None)
    ):
        return _whole("rotary_dim", config["rotary_dim"])
    if model_type in MODEL_LAYOUTS and model_type not in _READS_PARTIAL:
        return head_dim  # rotates the whole head; a factor in its config is ignored there
    if model_type in _LAYER_PARTIAL_ONLY and params.get("partial_rotary_factor") is None:
        return head_dim  # reads the factor of each layer type's dict only
    # may be odd (GPT-NeoX with rotary_pct 0.3 of 64): RopeConfig reads it as transformers does
    return _share_of(head_dim, _partial_factor(config, params))


#: Model types whose rotary module reads a ``dynamic`` scaling with an ``alpha`` as static NTK-alpha
#: scaling (HF ``HunYuanDenseV1RotaryEmbedding`` / ``HunYuanMoEV1RotaryEmbedding``, rope type
#: ``ntk_alpha``): base ``rope_theta * alpha^(d / (d - 2))``, the same at every length; ``factor``
#: and the dynamic rule are unused then.
_NTK_ALPHA_TYPES = ("hunyuan_v1_dense", "hunyuan_v1_moe")


def _ntk_alpha(scaling: dict[str, Any]) -> dict[str, Any]:
    """HunYuan's ``{"type": "dynamic", "alpha": a, ...}`` as posenc's static ``ntk`` rule with factor ``a``."""
    alpha = scaling.pop("alpha")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(
            f"config rope scaling 'dynamic' 'alpha' (HunYuan's NTK-alpha: base * alpha^(d / (d - 2))) must be "
            f"a positive number, got {alpha!r}; leave it out (or null) for plain dynamic NTK scaling"
        )
    _known_keys("dynamic", scaling)  # warns about keys dynamic scaling does not take
    return {"rope_type": "ntk", "factor": float(alpha)}


def _kind(config: Mapping[str, Any], params: Mapping[str, Any]) -> str:
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "su" or (kind == "yarn" and config.get("model_type") in _YARN_IS_LONGROPE):
        return "longrope"
    return kind


def _lengths(config: Mapping[str, Any], scaling: dict[str, Any], kind: str, nested: bool) -> None:
    """The original length and the factor that ``llama3``, ``yarn``, ``longrope`` and ``dynamic`` take
    from the config's top level when their dict lacks them (HF ``standardize_rope_params``)."""
    max_len = config.get("max_position_embeddings")
    if max_len is not None:
        max_len = _whole("max_position_embeddings", max_len)
    if kind in _NEEDS_ORIGINAL:
        # a top-level original length wins in a single RoPE dict (Phi-3); per-layer-type dicts take
        # theirs, else max_position_embeddings (HF ``standardize_rope_params``, cases 1 and 2)
        top = None if nested else config.get("original_max_position_embeddings")
        original = top or scaling.get("original_max_position_embeddings")
        if original is not None:
            original = _whole("original_max_position_embeddings", original)
        scaling["original_max_position_embeddings"] = original or max_len
    if kind == "dynamic":
        scaling["original_max_position_embeddings"] = max_len
    original = scaling.get("original_max_position_embeddings")
    if kind in ("longrope", "yarn") and scaling.get("factor") is None and max_len and original:
        scaling["factor"] = max_len / original


def _scaling(config: Mapping[str, Any], params: dict[str, Any], nested: bool) -> dict[str, Any] | None:
    kind = _kind(config, params)
    if kind == "dynamic" and config.get("model_type") in _NTK_ALPHA_TYPES and params.get("alpha") is not None:
        return _ntk_alpha({k: v for k, v in params.items() if k not in ("rope_theta", "type")})
    scaling = {k: v for k, v in params.items() if k not in ("rope_theta", "partial_rotary_factor", "type")}
    scaling["rope_type"] = kind
    if kind == "proportional":
        scaling["partial_rotary_factor"] = _partial_factor(config, params)
    if kind == "default":
        _known_keys(kind, scaling)  # warns about keys the default RoPE does not take
        return None
    if config.get("model_type") in _MSCALE_TYPES:
        _mscale(kind, scaling)
    _lengths(config, scaling, kind, nested)
    return _known_keys(kind, scaling)


#: Model types whose rotary module scales cos and sin by the config's ``short_mscale`` (sequences
#: up to the original length) or ``long_mscale`` (longer ones) in place of the rope type's own
#: attention factor (HF ``PhimoeRotaryEmbedding.forward``; ``PhimoeConfig.validate_rope``
#: requires both for any rope type but ``default``).
_MSCALE_TYPES = ("phimoe",)


def _mscale(kind: str, scaling: dict[str, Any]) -> None:
    """Phi-3.5-MoE's ``short_mscale`` / ``long_mscale`` (1.2432 in its config.json, against the
    1.1902 that LongRoPE's own rule gives) as the ``attention_factor`` of its RoPE (dropping them
    makes the logits 8.7% too small). One scale serves every length here, so the two must agree."""
    short, long = scaling.pop("short_mscale", None), scaling.pop("long_mscale", None)
    if kind == "default":
        return
    for name, value in (("short_mscale", short), ("long_mscale", long)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(
                f"config rope scaling {kind!r} of model type 'phimoe' needs {name!r}, a number "
                f"(transformers requires it too), got {value!r}"
            )
    if short != long:
        raise ValueError(
            f"config rope scaling: short_mscale {short} and long_mscale {long} differ; posenc's RoPE "
            "scales every length alike, so it reads them only when they are equal (as in Phi-3.5-MoE)"
        )
    if kind != "longrope":
        if short != 1:
            raise ValueError(
                f"config rope scaling {kind!r} with mscale {short}: posenc scales cos and sin only "
                "for 'longrope' (attention_factor); use mscale 1 or rope type 'longrope'"
            )
        return
    scaling["attention_factor"] = float(short)


#: What a rope dict's keys that posenc's rules do not take are, where transformers 5.24's code was
#: read to check it (a warning names the others without saying what transformers does with them).
_KEY_NOTES = {
    "llama_4_scaling_beta": (
        "Ministral 3's and Mistral 4's query temperature, which their attention (not their rotary "
        "embedding) applies in transformers: queries times 1 + beta * log(1 + floor(position / "
        "original_max_position_embeddings)) (get_llama_4_attn_scale); posenc's RoPE leaves queries unscaled"
    ),
    "max_position_embeddings": (
        "transformers' rope functions read the config's top-level max_position_embeddings, not a copy "
        "inside the rope dict, and so does posenc"
    ),
}


def _known_keys(kind: str, scaling: dict[str, Any]) -> dict[str, Any]:
    """``scaling`` without the keys its rope type does not take, with a warning that names them and
    says what posenc does instead (transformers' ``_check_received_keys`` also just logs
    "Unrecognized keys" and goes on); an unknown rope type is left whole for the validator to refuse."""
    if kind not in SCALING_KEYS:
        return scaling
    required, optional = SCALING_KEYS[kind]
    extra = sorted(k for k in scaling if k != "rope_type" and k not in required | optional)
    if extra:
        takes = f"it takes {sorted(required | optional)}" if required | optional else "it takes no parameters"
        notes = "".join(f"; {key}: {_KEY_NOTES[key]}" for key in extra if key in _KEY_NOTES)
        warnings.warn(
            f"config rope scaling {kind!r} does not take {extra} ({takes}); posenc rotates by the {kind!r} "
            f"rule without them{notes}",
            stacklevel=4,
        )
    return {k: v for k, v in scaling.items() if k not in extra}
