"""Reading a config.json's fields: loading, numbers, head widths, field aliases."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .generated import FIELD_ALIASES


def _load(config: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    """The config as a dict, its names (``model_type``, ``rope_type``) checked to be strings."""
    loaded = _read(config)
    _check_names(loaded)
    return loaded


#: Config fields that name something and so must be strings (a list there is a malformed file).
_NAMES = ("model_type", "rope_type", "type")


def _check_names(config: Mapping[str, Any], where: str = "") -> None:
    for name in _NAMES:
        value = config.get(name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"config field '{where}{name}' must be a string (a name such as 'llama'), got {value!r}")
    for name in ("text_config", "rope_scaling", "rope_parameters"):
        nested = config.get(name)
        if isinstance(nested, Mapping):
            _check_names(nested, f"{where}{name}.")
            for key, inner in nested.items():
                if isinstance(inner, Mapping):
                    _check_names(inner, f"{where}{name}.{key}.")


def _read(config: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    if isinstance(config, Mapping):
        return dict(config)
    if isinstance(config, (str, os.PathLike)):
        path = Path(config)
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            raise ValueError(f"no config file at {str(path)!r}; pass a config.json path, its folder, or a dict")
        try:
            with path.open(encoding="utf-8") as handle:
                loaded = json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{str(path)!r} is not readable JSON ({err})") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"{str(path)!r} holds a JSON {type(loaded).__name__}, expected an object")
        return loaded
    to_dict = getattr(config, "to_dict", None)  # a transformers PretrainedConfig
    if callable(to_dict):
        return dict(to_dict())
    raise TypeError(
        f"config must be a dict, a path to config.json or a transformers config, got {type(config).__name__}"
    )


def _field(config: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if config.get(name) is not None:
            return config[name]
    return None


def _whole(name: str, value: object) -> int:
    """``value`` of the config field ``name`` as a positive int (JSON may spell 128 as 128.0)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value != int(value)
        or value < 1
    ):
        raise ValueError(f"config field {name!r} must be a positive whole number, got {value!r}")
    return int(value)


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"config field {name!r} must be a finite number, got {value!r}")
    return float(value)


def _head_dim(config: Mapping[str, Any]) -> tuple[int, str]:
    """The head width and the config fields it comes from (for errors)."""
    rope_width = config.get("qk_rope_head_dim")  # DeepSeek MLA: the rotated slice of each head
    if rope_width is not None and config.get("model_type") not in _TRAILING_ROPE:
        return _whole("qk_rope_head_dim", rope_width), "config field 'qk_rope_head_dim'"
    head_dim = config.get("head_dim")
    if head_dim:
        return _whole("head_dim", head_dim), "config field 'head_dim'"
    names = [n for n in ("hidden_size", "n_embd", "d_model") if config.get(n) is not None][:1]
    names += [n for n in ("num_attention_heads", "n_head") if config.get(n) is not None][:1]
    if len(names) < 2:
        raise ValueError(
            "config needs 'head_dim', or 'hidden_size' and 'num_attention_heads', to give the head width; "
            f"got keys {sorted(config)}"
        )
    width, heads = _whole(names[0], config[names[0]]), _whole(names[1], config[names[1]])
    if width < heads:
        raise ValueError(
            f"config fields {names[0]!r}={width} and {names[1]!r}={heads} give heads of width "
            f"{width} // {heads} = 0; pass 'head_dim'"
        )
    return width // heads, f"config fields {names[0]!r} // {names[1]!r} (head_dim = {width} // {heads})"


#: Config classes that set ``head_dim = hidden_size // num_attention_heads`` whatever the config.json
#: says (``DeepseekOcr2TextConfig.__post_init__``).
_HEAD_DIM_FROM_WIDTH = ("deepseek_ocr2", "deepseek_ocr2_text")


def _own_field_names(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the standard field names where its class uses others (its ``attribute_map``:
    DBRX's sizes, GPT-J's ``n_positions``, JetMoE's ``kv_channels``;
    :data:`posenc.config.generated.FIELD_ALIASES`);
    Zamba2's head width is its ``attention_head_dim``, else ``2 * hidden_size // num_attention_heads``
    (``Zamba2Config.__post_init__``: its attention reads the hidden state concatenated with the input
    embeddings); DeepSeek-OCR 2's is ``hidden_size // num_attention_heads`` (``_HEAD_DIM_FROM_WIDTH``)."""
    model_type = config.get("model_type")
    for name, standard in FIELD_ALIASES.get(model_type, {}).items():
        if config.get(standard) is None and config.get(name) is not None:
            config = {**config, standard: config[name]}
    if model_type in _HEAD_DIM_FROM_WIDTH:
        config = {k: v for k, v in config.items() if k != "head_dim"}
    if model_type == "zamba2" and config.get("head_dim") is None and config.get("num_attention_heads"):
        width = _whole("hidden_size", config["hidden_size"])
        config = {**config, "head_dim": 2 * width // _whole("num_attention_heads", config["num_attention_heads"])}
    return config


#: Model types that rotate the trailing ``qk_rope_head_dim`` features of each whole head (DeepSeek-V4:
#: HF ``apply_rotary_pos_emb`` takes ``x[..., -rope_dim:]``); the module returned acts on the head.
_TRAILING_ROPE = ("deepseek_v4",)


def _check_even_head(head_dim: int, source: str) -> int:
    if head_dim % 2:
        raise ValueError(
            f"the head width from {source} is {head_dim}, odd: RoPE rotates pairs of features and needs an "
            "even head_dim"
        )
    return head_dim


def _nested(params: object) -> bool:
    return isinstance(params, Mapping) and any(isinstance(v, Mapping) for v in params.values())
