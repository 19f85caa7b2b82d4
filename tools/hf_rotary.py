"""Transformers' own rotary path of each model type, run on given queries and keys: the rotary
module built from the type's config class (:func:`build`) and the function its attention applies
(:func:`rotate`). Shared by ``tests/test_rope_config_sweep.py`` (parity with posenc) and
``tools/gen_config_tables.py`` (each type's pair layout, read off the rotation it applies).

Shapes: q, k ``[b, h, s, hd]``; HF's cos, sin ``[b, s, r]`` (r the rotated width; ``r / 2`` for
GPT-OSS's ``_apply_rotary_emb`` and the complex ``freqs_cis``).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

import torch
from transformers import CONFIG_MAPPING
from transformers.models.auto.configuration_auto import model_type_to_module_name

#: Model types whose attention applies ``apply_rotary_pos_emb_interleave`` (HF's DeepSeek-V3 copy:
#: rotates pairs ``(2i, 2i+1)`` and writes the output in half order): their config default
#: ``rope_interleave`` is true, or they have no other path.
_INTERLEAVE_APPLY = frozenset(
    {
        "axk1",
        "axk2",
        "bailing_hybrid",
        "deepseek_v3",
        "deepseek_v32",
        "dots3_note",
        "dots3_note_text",
        "glm4_moe_lite",
        "glm_moe_dsa",
        "longcat_flash",
        "mistral4",
        "mistral_large4",
        "mistral_large4_text",
        "youtu",
    }
)
#: Tables of width ``r / 2`` applied by ``_apply_rotary_emb`` to the two halves (GPT-OSS).
_HALF_TABLES = frozenset({"gpt_oss", "openai_privacy_filter"})
#: Complex ``freqs_cis`` ``[b, s, r / 2]`` applied by ``apply_rotary_emb`` to ``[b, s, h, hd]``.
_COMPLEX = frozenset({"llama4", "llama4_text", "deepseek_v2"})
#: ``sin, cos`` tables precomputed up to ``max_position_embeddings`` (2048), applied to ``rotary_dim``.
_SIN_COS = frozenset({"gptj", "codegen"})


def build(model_type: str, prepare: Callable[[Any], None] | None = None):
    """``(config, text config, modelling module, rotary module)`` of ``model_type``'s defaults, the
    text config first changed in place by ``prepare`` when given (the sweep's random draw)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = CONFIG_MAPPING[model_type]()
        try:
            text = config.get_text_config(decoder=True)
        except (AttributeError, ValueError):
            text = config
        if prepare is not None:
            prepare(text)
    name = model_type_to_module_name(model_type)
    module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    classes = [n for n, c in vars(module).items() if n.endswith("RotaryEmbedding") and isinstance(c, type)]
    prefix = type(text).__name__.removesuffix("Config")
    own = [n for n in classes if n in (f"{prefix}RotaryEmbedding", f"{prefix.removesuffix('Text')}RotaryEmbedding")]
    for cls in own + [n for n in classes if "Vision" not in n and n not in own]:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return config, text, module, getattr(module, cls)(text)
        except (AttributeError, KeyError, TypeError, ValueError):
            continue
    raise AssertionError(f"{model_type}: no rotary module of {classes} builds from its config")


def rotate(model_type, module, rotary, q, k, positions, layer_type):
    """q and k rotated by transformers: the type's own tables and apply function, in half order."""
    extra = [layer_type] if layer_type else []
    with torch.no_grad():
        if model_type in _SIN_COS:
            sin, cos = rotary(q, positions[None])  # [1, s, r / 2]
            r = 2 * sin.shape[-1]
            rotated = [
                module.apply_rotary_pos_emb(x[..., :r].transpose(1, 2), sin, cos).transpose(1, 2) for x in (q, k)
            ]
            return [torch.cat((y, x[..., r:]), dim=-1) for y, x in zip(rotated, (q, k), strict=True)]
        if model_type in _COMPLEX:
            freqs_cis = rotary(q, positions[None])  # complex [1, s, hd / 2]
            if model_type == "deepseek_v2":  # heads first, as posenc's
                return module.apply_rotary_emb(q, k, freqs_cis)
            got = module.apply_rotary_emb(q.transpose(1, 2), k.transpose(1, 2), freqs_cis)  # [b, s, h, hd]
            return [x.transpose(1, 2) for x in got]
        cos, sin = rotary(q.new_zeros(1), positions[None], *extra)  # tables in q's dtype
        if model_type == "deepseek_v4":  # half-width tables, the trailing slice of the whole head
            return module.apply_rotary_pos_emb(q, cos, sin), module.apply_rotary_pos_emb(k, cos, sin)
        if model_type in _HALF_TABLES:
            return module.apply_rotary_pos_emb(q, k, cos, sin)
        r = cos.shape[-1]
        apply = (
            module.apply_rotary_pos_emb_interleave if model_type in _INTERLEAVE_APPLY else module.apply_rotary_pos_emb
        )
        try:
            out = apply(q[..., :r], k[..., :r], cos, sin)
        except (TypeError, RuntimeError):  # Gemma 3n / 4 rotate one tensor at a time
            out = apply(q[..., :r], cos, sin), apply(k[..., :r], cos, sin)
        return [torch.cat((y, x[..., r:]), dim=-1) for y, x in zip(out, (q, k), strict=True)]
