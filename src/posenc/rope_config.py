"""RoPE from a model's ``config.json``: :func:`rope_from_config`.

Reads the fields that Hugging Face transformers reads for the model's rotary embedding and returns
the :class:`~posenc.schemes.rope.Rope` module with the same numbers:

* head width: ``head_dim``, else ``hidden_size // num_attention_heads``; DeepSeek-V2/V3 rotate a
  separate ``qk_rope_head_dim``-wide slice of each head (multi-head latent attention), and that
  slice is what the returned module acts on;
* base: ``rope_theta`` (inside ``rope_parameters`` in transformers >= 5, top-level before),
  GPT-NeoX's ``rotary_emb_base``; 10000 when absent (HF ``default_theta``);
* partial rotary: ``partial_rotary_factor`` (GPT-NeoX ``rotary_pct``, default 0.25 there as in HF;
  GPT-J / CodeGen ``rotary_dim``) gives ``rotary_dim = int(head_dim * factor)``, except for the
  model types whose transformers code rotates the whole head and never reads it (Llama, Mistral,
  Qwen2/3, Gemma, ...: ``_WHOLE_HEAD_TYPES``), where it is ignored as there;
* scaling: ``rope_scaling`` / ``rope_parameters`` as written, completed as HF completes it
  (``RotaryEmbeddingConfigMixin.standardize_rope_params`` and the rope functions): ``llama3``,
  ``yarn`` and ``longrope`` take ``original_max_position_embeddings`` from the top level (which
  wins, as for Phi-3) or ``max_position_embeddings``; ``dynamic`` rescales past
  ``max_position_embeddings``; ``longrope`` and ``yarn`` without ``factor`` use
  ``max_position_embeddings / original_max_position_embeddings``;
* layout: the pair layout the model's HF code applies to its checkpoint weights, from
  :data:`MODEL_LAYOUTS` (``half`` for Llama, Qwen2, Phi-3, GPT-NeoX...; ``interleaved`` for GPT-J,
  CodeGen, Cohere, DeepSeek-V2, and DeepSeek-V3 unless ``rope_interleave`` is false: HF keeps
  DeepSeek-V3's interleaved weights and its ``apply_rotary_pos_emb_interleave`` rotates the pairs
  ``(2i, 2i+1)``, writing its output in half order, which leaves scores unchanged). Meta's own
  Llama checkpoints are interleaved; HF's conversion permutes them to ``half``
  (:func:`posenc.functional.permute_qk_weight` does the same). Unknown model types need ``layout=``.

Not part of RoPE and so not returned: DeepSeek's YaRN softmax-scale correction
(``mscale(factor, mscale_all_dim)^2`` on ``1/sqrt(d)``, HF ``DeepseekV3Attention.scaling``).
The config is read as data (``json``); nothing in it is executed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .functional._checks import check_choice
from .functional.rope import ROPE_LAYOUTS
from .schemes.rope import Rope, RopeConfig

__all__ = ["rope_from_config", "MODEL_LAYOUTS"]

#: Pair layout that Hugging Face's modelling code uses with each model type's checkpoints.
MODEL_LAYOUTS: dict[str, str] = {
    **dict.fromkeys(
        ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi", "phi3", "gpt_neox",
         "gemma", "gemma2", "starcoder2", "olmo", "olmo2", "granite", "stablelm", "falcon"),
        "half"),
    **dict.fromkeys(("gptj", "codegen", "cohere", "cohere2", "deepseek_v2", "deepseek_v3"), "interleaved"),
}

_DEFAULT_BASE = 10000.0  # HF RotaryEmbeddingConfigMixin.default_theta
_NEEDS_ORIGINAL = ("llama3", "yarn", "longrope")


def _load(config: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    if isinstance(config, Mapping):
        return dict(config)
    if isinstance(config, (str, os.PathLike)):
        path = Path(config)
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            raise ValueError(f"no config file at {str(path)!r}; pass a config.json path, its folder, or a dict")
        with path.open(encoding="utf-8") as handle:
            loaded = json.load(handle)
        if not isinstance(loaded, dict):
            raise ValueError(f"{str(path)!r} holds a JSON {type(loaded).__name__}, expected an object")
        return loaded
    to_dict = getattr(config, "to_dict", None)  # a transformers PretrainedConfig
    if callable(to_dict):
        return dict(to_dict())
    raise TypeError(f"config must be a dict, a path to config.json or a transformers config, got {type(config).__name__}")


def _field(config: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if config.get(name) is not None:
            return config[name]
    return None


def _head_dim(config: Mapping[str, Any]) -> int:
    rope_width = config.get("qk_rope_head_dim")  # DeepSeek MLA: the rotated slice of each head
    if rope_width is not None:
        return int(rope_width)
    head_dim = config.get("head_dim")
    if head_dim:
        return int(head_dim)
    hidden, heads = _field(config, "hidden_size", "n_embd", "d_model"), _field(config, "num_attention_heads", "n_head")
    if not hidden or not heads:
        raise ValueError("config needs 'head_dim', or 'hidden_size' and 'num_attention_heads', to give the head width; "
                         f"got keys {sorted(config)}")
    return int(hidden) // int(heads)


#: Model types whose transformers code rotates the whole head and never reads
#: ``partial_rotary_factor`` (their modeling and configuration files do not name it; transformers
#: 5.23): a factor in such a config is ignored here too, as there. Families that read it (GPT-NeoX,
#: Phi, Phi-3, StableLM, Persimmon, GLM, Nemotron, ...) and unknown types honour it.
_WHOLE_HEAD_TYPES = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3",
    "gemma3_text", "olmo", "olmo2", "starcoder2", "cohere", "cohere2", "falcon", "granite", "granitemoe", "phimoe",
    "exaone4", "smollm3",
})


def _rotary_dim(config: Mapping[str, Any], params: Mapping[str, Any], head_dim: int) -> int:
    if "qk_rope_head_dim" in config or config.get("model_type") in _WHOLE_HEAD_TYPES:
        return head_dim
    if config.get("rotary_dim") is not None and params.get("partial_rotary_factor") is None:  # GPT-J, CodeGen
        return int(config["rotary_dim"])
    default = 0.25 if config.get("model_type") == "gpt_neox" else 1.0  # HF GPTNeoXConfig's rotary_pct default
    factor = _field(params, "partial_rotary_factor")
    if factor is None:
        factor = _field(config, "partial_rotary_factor", "rotary_pct")
    factor = default if factor is None else float(factor)
    if not 0 < factor <= 1:
        raise ValueError(f"partial_rotary_factor must be in (0, 1], got {factor!r}")
    return int(head_dim * factor)


def _scaling(config: Mapping[str, Any], params: dict[str, Any]) -> dict[str, Any] | None:
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "su":
        kind = "longrope"
    scaling = {k: v for k, v in params.items() if k not in ("rope_theta", "partial_rotary_factor", "type")}
    scaling["rope_type"] = kind
    if kind == "default":
        return None if len(scaling) == 1 else scaling  # stray keys are left for the validator to name
    max_len = config.get("max_position_embeddings")
    if kind in _NEEDS_ORIGINAL:
        original = config.get("original_max_position_embeddings") or scaling.get("original_max_position_embeddings")
        scaling["original_max_position_embeddings"] = original or max_len
    if kind == "dynamic":
        scaling["original_max_position_embeddings"] = max_len
    if kind in ("longrope", "yarn") and scaling.get("factor") is None and max_len and scaling.get("original_max_position_embeddings"):
        scaling["factor"] = max_len / scaling["original_max_position_embeddings"]
    return scaling


def _layout(config: Mapping[str, Any], layout: str | None) -> str:
    if layout is not None:
        return check_choice("layout", layout, ROPE_LAYOUTS)
    model_type = config.get("model_type")
    if model_type == "deepseek_v3" and config.get("rope_interleave") is False:
        return "half"
    if model_type not in MODEL_LAYOUTS:
        raise ValueError(f"unknown pair layout for model_type {model_type!r}; pass layout='half' (rotate_half, "
                         f"most HF checkpoints) or layout='interleaved'. Known model types: {', '.join(sorted(MODEL_LAYOUTS))}")
    return MODEL_LAYOUTS[model_type]


def rope_from_config(config: Mapping[str, Any] | str | os.PathLike[str], *, layout: str | None = None) -> Rope:
    """The RoPE module for a model's ``config.json`` (a dict, a path to the file or its folder).

    ``layout`` overrides the model type's pair layout (required for model types not in
    :data:`MODEL_LAYOUTS`). Multimodal configs are read from their ``text_config``. See the module
    docstring for which fields are read and how they are completed.

    >>> rope = rope_from_config({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    ...                          "rope_theta": 500000.0})
    >>> rope.config.dim, rope.config.base, rope.config.layout
    (128, 500000.0, 'half')
    """
    config = _load(config)
    if isinstance(config.get("text_config"), Mapping) and "num_attention_heads" not in config:
        config = {"model_type": config.get("model_type"), **config["text_config"]}
    params = dict(_field(config, "rope_parameters", "rope_scaling") or {})
    if any(isinstance(v, Mapping) for v in params.values()):
        raise ValueError("per-layer-type rope_parameters (a dict of dicts) are not supported; "
                         f"pass one of them with the model's fields, got keys {sorted(params)}")
    base = _field(params, "rope_theta")
    if base is None:
        base = _field(config, "rope_theta", "rotary_emb_base")
    head_dim = _head_dim(config)
    rotary_dim = _rotary_dim(config, params, head_dim)
    return Rope(RopeConfig(
        dim=head_dim,
        base=float(base) if base is not None else _DEFAULT_BASE,
        layout=_layout(config, layout),
        scaling=_scaling(config, params),
        rotary_dim=None if rotary_dim == head_dim else rotary_dim,
    ))
