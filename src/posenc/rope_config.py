"""RoPE from a model's ``config.json``: :func:`rope_from_config`.

Reads the fields that Hugging Face transformers reads for the model's rotary embedding and returns
the :class:`~posenc.schemes.rope.Rope` module with the same numbers:

* fields a config.json leaves out take the value the model type's transformers config class gives
  them (``_HF_DEFAULTS``: its ``default_theta`` such as Mixtral's 1e6 and Cohere's 5e5, a fixed
  ``head_dim`` such as Qwen3's 128, ``max_position_embeddings``, Apertus' default Llama 3 scaling);
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
  transformers code reads it (``_READS_PARTIAL``) and for unknown ones; the other known types
  (Llama, Mistral, Qwen2/3, Gemma, OLMoE, ...) rotate the whole head and ignore it, as there;
* which dict: ``rope_scaling`` when a config has it, else ``rope_parameters`` (HF
  ``convert_rope_params_to_dict``: ``rope_scaling or rope_parameters``); a RoPE per layer type
  (Gemma 3's and 3n's ``rope_local_base_freq`` beside ``rope_theta``, transformers 5's nested
  ``rope_parameters``) is picked with ``layer_type``;
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

* Phi-3.5-MoE (``phimoe``): its ``short_mscale`` / ``long_mscale`` scale cos and sin (when equal,
  as published; posenc has one scale for every length).
* HunYuan (``hunyuan_v1_dense``, ``hunyuan_v1_moe``): a ``dynamic`` scaling with an ``alpha`` is
  static NTK-alpha scaling, base ``rope_theta * alpha^(d / (d - 2))`` at every length (HF's
  ``ntk_alpha``); posenc gives it as the ``ntk`` rule with ``factor = alpha``.
* Llama 4 (``llama4`` and its ``text_config``, ``llama4_text``): interleaved pairs (HF's complex
  ``apply_rotary_emb``), Llama 3 scaling whose ``low_freq_factor`` equals ``high_freq_factor``.
  Its ``no_rope_layers`` (every fourth layer without RoPE) is a layer schedule that
  ``rope_from_config`` does not read: the module returned is the RoPE of the layers that have one.

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

import json
import math
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .functional._checks import check_choice
from .functional.rope import ROPE_LAYOUTS
from .functional.rope_scaling import SCALING_KEYS
from .schemes.rope import Rope, RopeConfig

__all__ = ["rope_from_config", "MODEL_LAYOUTS"]

#: Pair layout that Hugging Face's modelling code uses with each model type's checkpoints.
MODEL_LAYOUTS: dict[str, str] = {
    **dict.fromkeys(
        (
            "llama",
            "mistral",
            "mixtral",
            "ministral",
            "qwen2",
            "qwen2_moe",
            "qwen3",
            "qwen3_moe",
            "qwen3_next",
            "phi",
            "phi3",
            "phimoe",
            "gpt_neox",
            "gemma",
            "gemma2",
            "gemma3",
            "gemma3_text",
            "gemma3n",
            "gemma3n_text",
            "gemma4",
            "gemma4_text",
            "starcoder2",
            "olmo",
            "olmo2",
            "olmo3",
            "granite",
            "granitemoe",
            "stablelm",
            "falcon",
            "exaone4",
            "smollm3",
            "seed_oss",
            "apertus",
            "arcee",
            "persimmon",
            "nemotron",
            "bamba",
            "qwen3_5",
            "qwen3_5_moe",
            "qwen3_5_text",
            "qwen3_5_moe_text",
            "olmoe",
            "minimax",
            "bitnet",
            "granitemoehybrid",
            "granitemoeshared",
            "hunyuan_v1_dense",
            "hunyuan_v1_moe",
            "jetmoe",
            "solar_open",
            "vaultgemma",
            "diffllama",
            "dots1",
            "exaone_moe",
            "flex_olmo",
            "lfm2",
            "lfm2_moe",
            "falcon_h1",
            "cwm",
        ),
        "half",
    ),
    **dict.fromkeys(
        (
            "gptj",
            "codegen",
            "cohere",
            "cohere2",
            "deepseek_v2",
            "deepseek_v3",
            "glm",
            "glm4",
            "ernie4_5",
            "llama4",
            "llama4_text",
        ),
        "interleaved",
    ),
}

_DEFAULT_BASE = 10000.0  # HF RotaryEmbeddingConfigMixin.default_theta
_NEEDS_ORIGINAL = ("llama3", "yarn", "longrope")

#: ``partial_rotary_factor`` that transformers' config classes assume when a config.json has none
#: (their ``setdefault("partial_rotary_factor", ...)``, GPT-NeoX's ``rotary_pct``; 1.0 elsewhere).
_DEFAULT_PARTIAL = {
    "gpt_neox": 0.25,
    "stablelm": 0.25,
    "qwen3_next": 0.25,
    "qwen3_5": 0.25,
    "qwen3_5_moe": 0.25,
    "qwen3_5_text": 0.25,
    "qwen3_5_moe_text": 0.25,
    "phi": 0.5,
    "persimmon": 0.5,
    "nemotron": 0.5,
    "glm": 0.5,
    "glm4": 0.5,
    "glm4_moe": 0.5,
    "bamba": 0.5,
}

#: Models with a RoPE per kind of layer whose config.json may have the flat (pre-transformers-5)
#: form, read as their config classes' ``convert_rope_params_to_dict`` read it: ``rope_scaling``
#: updates the full-attention RoPE only, whose base is ``rope_theta`` (the class's global default
#: when absent); the sliding-window RoPE is unscaled, with its base from the field named here (Gemma
#: 3 and 3n: ``rope_local_base_freq``; OLMo 3: none, since HF's class takes ``rope_theta`` for the
#: full-attention layers first and leaves the sliding ones its default) or else the class default.
_LAYER_TYPED: dict[str, tuple[float, str | None, float]] = {
    **dict.fromkeys(
        ("gemma3", "gemma3_text", "gemma3n", "gemma3n_text"), (1_000_000.0, "rope_local_base_freq", 10_000.0)
    ),
    "olmo3": (500_000.0, None, 500_000.0),
}

#: What transformers' config classes (5.23) give the fields that published config.json files may
#: leave out: ``default_theta``, a ``head_dim`` that does not follow from ``hidden_size`` (Qwen3's
#: 128, gemma-3-4b-it's ``text_config`` has none: 256), ``max_position_embeddings`` (the original
#: length of ``dynamic``; the factor of ``yarn`` and ``longrope`` when theirs is absent), Phi-3's
#: ``original_max_position_embeddings``, GPT-J's ``rotary_dim`` and a default ``rope_parameters``
#: (Apertus: Llama 3 scaling; Gemma 4: proportional RoPE on full attention). Read from each class
#: (``CONFIG_MAPPING[model_type](hidden_size=..., num_attention_heads=...)``; the test
#: ``test_every_model_type_reads_a_bare_config_as_transformers_does`` checks them against it).
_HF_DEFAULTS: dict[str, dict[str, Any]] = {
    "apertus": {
        "rope_theta": 12_000_000.0,
        "max_position_embeddings": 65536,
        "rope_parameters": {
            "rope_type": "llama3",
            "rope_theta": 12_000_000.0,
            "factor": 8.0,
            "original_max_position_embeddings": 8192,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    },
    "arcee": {"max_position_embeddings": 4096},
    "bamba": {"max_position_embeddings": 262144},
    "codegen": {"max_position_embeddings": 2048, "rotary_dim": 64},
    "cohere": {"rope_theta": 500_000.0, "max_position_embeddings": 8192},
    "cohere2": {"max_position_embeddings": 8192},
    "deepseek_v2": {"qk_rope_head_dim": 64, "max_position_embeddings": 2048},
    "deepseek_v3": {"qk_rope_head_dim": 64, "max_position_embeddings": 4096},
    "ernie4_5": {"rope_theta": 500_000.0, "head_dim": 128, "max_position_embeddings": 131072},
    "exaone4": {"max_position_embeddings": 2048},
    "falcon": {"max_position_embeddings": 2048},
    "gemma": {"head_dim": 256, "max_position_embeddings": 8192},
    "gemma2": {"head_dim": 256, "max_position_embeddings": 8192},
    "gemma3_text": {"head_dim": 256, "max_position_embeddings": 131072},
    "gemma3n_text": {"head_dim": 256, "max_position_embeddings": 32768},
    "gemma4_text": {
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
        },
    },
    "glm": {"head_dim": 128, "max_position_embeddings": 131072},
    "glm4": {"head_dim": 128, "max_position_embeddings": 131072},
    "gpt_neox": {"max_position_embeddings": 2048},
    "gptj": {"max_position_embeddings": 2048, "rotary_dim": 64},
    "granite": {"max_position_embeddings": 2048},
    "granitemoe": {"max_position_embeddings": 2048},
    "llama": {"max_position_embeddings": 2048},
    "llama4_text": {"rope_theta": 500_000.0, "head_dim": 128, "max_position_embeddings": 131072},
    "ministral": {"max_position_embeddings": 131072},
    "mistral": {"max_position_embeddings": 131072},
    "mixtral": {"rope_theta": 1_000_000.0, "max_position_embeddings": 131072},
    "nemotron": {"max_position_embeddings": 4096},
    "olmo": {"max_position_embeddings": 2048},
    "olmo2": {"max_position_embeddings": 2048},
    "olmo3": {"rope_theta": 500_000.0, "max_position_embeddings": 2048},
    "persimmon": {"max_position_embeddings": 16384},
    "phi": {"max_position_embeddings": 2048},
    "phi3": {"max_position_embeddings": 4096, "original_max_position_embeddings": 4096},
    "phimoe": {"rope_theta": 1_000_000.0, "max_position_embeddings": 131072},
    "qwen2": {"max_position_embeddings": 32768},
    "qwen2_moe": {"max_position_embeddings": 32768},
    "qwen3": {"head_dim": 128, "max_position_embeddings": 32768},
    "qwen3_moe": {"max_position_embeddings": 32768},
    "qwen3_next": {"head_dim": 256, "max_position_embeddings": 32768},
    "qwen3_5_text": {"head_dim": 256, "max_position_embeddings": 32768},
    "qwen3_5_moe_text": {"head_dim": 256, "max_position_embeddings": 32768},
    "seed_oss": {"head_dim": 128, "max_position_embeddings": 524288},
    "smollm3": {"rope_theta": 2_000_000.0, "max_position_embeddings": 32768},
    "stablelm": {"max_position_embeddings": 4096},
    "starcoder2": {"max_position_embeddings": 4096},
    "olmoe": {"max_position_embeddings": 4096},
    "minimax": {"rope_theta": 1_000_000.0, "max_position_embeddings": 131072},
    "bitnet": {"rope_theta": 500_000.0, "max_position_embeddings": 2048},
    "granitemoehybrid": {"max_position_embeddings": 2048},
    "granitemoeshared": {"max_position_embeddings": 2048},
    "hunyuan_v1_dense": {"max_position_embeddings": 2048},
    "hunyuan_v1_moe": {"max_position_embeddings": 2048},
    "jetmoe": {"head_dim": 128, "max_position_embeddings": 4096},
    "solar_open": {"rope_theta": 1_000_000.0, "head_dim": 128, "max_position_embeddings": 131072},
    "vaultgemma": {"head_dim": 256, "max_position_embeddings": 8192},
    "diffllama": {"max_position_embeddings": 2048},
    "dots1": {"max_position_embeddings": 2048},
    "exaone_moe": {"max_position_embeddings": 2048},
    "flex_olmo": {"rope_theta": 500_000.0, "max_position_embeddings": 4096},
    "lfm2": {"rope_theta": 1_000_000.0, "max_position_embeddings": 128000},
    "lfm2_moe": {"rope_theta": 1_000_000.0, "max_position_embeddings": 128000},
    "falcon_h1": {"max_position_embeddings": 8192},
    "cwm": {
        "rope_theta": 1_000_000.0,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "rope_type": "llama3",
            "rope_theta": 1_000_000.0,
            "factor": 16.0,
            "original_max_position_embeddings": 8192,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    },
}
#: Multimodal wrappers read without a ``text_config``: their text model's defaults.
for _wrapper in ("gemma3", "gemma3n", "gemma4", "qwen3_5", "qwen3_5_moe", "llama4"):
    _HF_DEFAULTS[_wrapper] = _HF_DEFAULTS[f"{_wrapper}_text"]
_GEMMA4 = ("gemma4", "gemma4_text")
#: GPT-NeoX's class reads its base and rotated share only from ``rotary_emb_base`` and
#: ``rotary_pct`` (a ``rope_theta`` or ``partial_rotary_factor`` beside them is ignored there).
_NEOX = ("gpt_neox",)
#: Phi-3's class reads the legacy rope type ``yarn`` as ``longrope`` (and ``su``, which is read
#: as ``longrope`` for every model type here).
_YARN_IS_LONGROPE = ("phi3", "phi4_multimodal")


def _load(config: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
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
    if rope_width is not None:
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


def _check_even_head(head_dim: int, source: str) -> int:
    if head_dim % 2:
        raise ValueError(
            f"the head width from {source} is {head_dim}, odd: RoPE rotates pairs of features and needs an "
            "even head_dim"
        )
    return head_dim


#: Model types whose transformers code reads ``partial_rotary_factor`` (their rotary module's
#: default frequencies span ``int(head_dim * factor)`` and their ``apply_rotary_pos_emb`` rotates
#: only that much; transformers 5.23). Every other type in :data:`MODEL_LAYOUTS` rotates the whole
#: head and ignores a factor in its config, as here (OLMoE, Llama, Qwen2/3, ...: honouring it
#: there gives errors of 5-8 against transformers). Unknown model
#: types, read with ``layout=``, honour it. GPT-J and CodeGen rotate ``rotary_dim`` features and
#: Gemma 4 zeroes frequencies (``proportional``) instead.
_READS_PARTIAL = frozenset(
    {
        "gpt_neox",
        "phi",
        "phi3",
        "stablelm",
        "persimmon",
        "nemotron",
        "glm",
        "glm4",
        "qwen3_next",
        "qwen3_5",
        "qwen3_5_moe",
        "qwen3_5_text",
        "qwen3_5_moe_text",
        "solar_open",
        "bamba",
    }
)
#: Bamba's config class sets its factor to 0.5 whatever the config.json says at its top level
#: (``kwargs["partial_rotary_factor"] = 0.5``); one inside ``rope_parameters`` still wins there.
_FIXED_PARTIAL = {"bamba": 0.5}
#: GPT-J and CodeGen rotate ``rotary_dim`` features (``create_sinusoidal_positions``).
_ROTARY_DIM_TYPES = ("gptj", "codegen")


def _partial_factor(config: Mapping[str, Any], params: Mapping[str, Any]) -> float:
    factor = _field(params, "partial_rotary_factor")
    if factor is None and config.get("model_type") in _FIXED_PARTIAL:
        factor = _FIXED_PARTIAL[config["model_type"]]
    if factor is None:
        neox = config.get("model_type") in _NEOX
        factor = _field(config, *(("rotary_pct",) if neox else ("partial_rotary_factor", "rotary_pct")))
    factor = _DEFAULT_PARTIAL.get(config.get("model_type"), 1.0) if factor is None else factor
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise ValueError(f"partial_rotary_factor (rotary_pct) must be a number in (0, 1], got {factor!r}")
    return float(factor)


def _rotary_dim(config: Mapping[str, Any], params: Mapping[str, Any], head_dim: int) -> int:
    model_type = config.get("model_type")
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
    # may be odd (GPT-NeoX with rotary_pct 0.3 of 64): RopeConfig reads it as transformers does
    return int(head_dim * _partial_factor(config, params))


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


def _scaling(config: Mapping[str, Any], params: dict[str, Any], nested: bool) -> dict[str, Any] | None:
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "su" or (kind == "yarn" and config.get("model_type") in _YARN_IS_LONGROPE):
        kind = "longrope"
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
    max_len = config.get("max_position_embeddings")
    if kind in _NEEDS_ORIGINAL:
        # a top-level original length wins in a single RoPE dict (Phi-3); per-layer-type dicts take
        # theirs, else max_position_embeddings (HF ``standardize_rope_params``, cases 1 and 2)
        top = None if nested else config.get("original_max_position_embeddings")
        original = top or scaling.get("original_max_position_embeddings")
        scaling["original_max_position_embeddings"] = original or max_len
    if kind == "dynamic":
        scaling["original_max_position_embeddings"] = max_len
    if (
        kind in ("longrope", "yarn")
        and scaling.get("factor") is None
        and max_len
        and scaling.get("original_max_position_embeddings")
    ):
        scaling["factor"] = max_len / scaling["original_max_position_embeddings"]
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


def _known_keys(kind: str, scaling: dict[str, Any]) -> dict[str, Any]:
    """``scaling`` without the keys its rope type does not take, with a warning that names them, as
    transformers reads a config (``_check_received_keys`` logs "Unrecognized keys" and goes on);
    an unknown rope type is left whole for the validator to refuse."""
    if kind not in SCALING_KEYS:
        return scaling
    required, optional = SCALING_KEYS[kind]
    extra = sorted(k for k in scaling if k != "rope_type" and k not in required | optional)
    if extra:
        warnings.warn(
            f"config rope scaling {kind!r} does not take {extra}: ignored, as transformers ignores them", stacklevel=4
        )
    return {k: v for k, v in scaling.items() if k not in extra}


def _layout(config: Mapping[str, Any], layout: str | None) -> str:
    if layout is not None:
        return check_choice("layout", layout, ROPE_LAYOUTS)
    model_type = config.get("model_type")
    if model_type == "deepseek_v3" and config.get("rope_interleave") is False:
        return "half"
    if model_type not in MODEL_LAYOUTS:
        raise ValueError(
            f"unknown pair layout for model_type {model_type!r}; pass layout='half' (rotate_half, "
            f"most HF checkpoints) or layout='interleaved'. Known model types: {', '.join(sorted(MODEL_LAYOUTS))}"
        )
    return MODEL_LAYOUTS[model_type]


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


def _nested(params: object) -> bool:
    return isinstance(params, Mapping) and any(isinstance(v, Mapping) for v in params.values())


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
    if config.get("model_type") in _LAYER_TYPED:  # rope_scaling updates the global RoPE only
        full_theta, local_field, local_theta = _LAYER_TYPED[config["model_type"]]
        nested = dict(parameters) if _nested(parameters) else {"full_attention": dict(parameters or {})}
        full = {**nested.get("full_attention", {}), **(scaling or {})}
        full.setdefault("rope_theta", _field(config, "rope_theta") or full_theta)
        local = dict(nested.get("sliding_attention") or {"rope_type": "default"})
        local.setdefault("rope_theta", (_field(config, local_field) if local_field else None) or local_theta)
        table: Any = {**nested, "full_attention": full, "sliding_attention": local}
    else:
        table = scaling or parameters or {}
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
    if layer_type not in kinds:
        raise ValueError(f"unknown layer_type {layer_type!r}; this config's RoPEs are for: {', '.join(kinds)}")
    return dict(table[layer_type])


def rope_from_config(
    config: Mapping[str, Any] | str | os.PathLike[str], *, layout: str | None = None, layer_type: str | None = None
) -> Rope:
    """The RoPE module for a model's ``config.json`` (a dict, a path to the file or its folder).

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
    config = _load(config)
    text_config = config.get("text_config")
    if text_config is not None and not isinstance(text_config, Mapping):
        raise ValueError(
            f"config field 'text_config' must be an object (a dict) of the text model's fields, as in a "
            f"multimodal config.json, got {text_config!r}"
        )
    if text_config is not None and "num_attention_heads" not in config:
        config = {"model_type": config.get("model_type"), **text_config}
    config = {**_HF_DEFAULTS.get(config.get("model_type"), {}), **config}
    params = _rope_params(config, layer_type)
    base = _field(params, "rope_theta")
    if base is None:
        base = _field(
            config, *(("rotary_emb_base",) if config.get("model_type") in _NEOX else ("rope_theta", "rotary_emb_base"))
        )
    if base is not None:
        base = _number("rope_theta", base)
        if not base > 1:
            raise ValueError(f"config field 'rope_theta' (the RoPE base) must be greater than 1, got {base!r}")
    head_dim = _check_even_head(*_layer_head_dim(config, layer_type, _head_dim(config)))
    rotary_dim = _rotary_dim(config, params, head_dim)
    nested = config.get("model_type") in _LAYER_TYPED or _nested(
        config.get("rope_scaling") or config.get("rope_parameters")
    )
    return Rope(
        RopeConfig(
            dim=head_dim,
            base=base if base is not None else _DEFAULT_BASE,
            layout=_layout(config, layout),
            scaling=_scaling(config, params, nested),
            rotary_dim=None if rotary_dim == head_dim else rotary_dim,
        )
    )
