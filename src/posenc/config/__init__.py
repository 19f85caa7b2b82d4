"""What a model's ``config.json`` says about positions, read as transformers reads it.

* :mod:`~posenc.config.fields`: loading a config and reading its fields (numbers, head widths);
* :mod:`~posenc.config.tables`: per-model-type tables (config-class defaults, pair layouts, which
  types read ``partial_rotary_factor``);
* :mod:`~posenc.config.scaling`: a rope dict as one of posenc's scaling rules;
* :mod:`~posenc.config.families`: model-family rules (per-layer-type RoPEs, rope dicts built by
  config classes, multi-head latent attention);
* :mod:`~posenc.config.mrope` and :mod:`~posenc.config.positions`: MRoPE and its position builder;
* :mod:`~posenc.config.rope`: :func:`rope_from_config`;
* :mod:`~posenc.config.schedules`: the encoding of every layer (:func:`layer_schedule`).
"""

from __future__ import annotations

from .positions import IMAGE, TEXT, VIDEO, decode_positions, mrope_positions, token_types
from .rope import MODEL_LAYOUTS, rope_from_config
from .schedules import NO_ATTENTION, NOPE, ROPE, encodings_from_config, layer_schedule, query_scales_from_config

__all__ = [
    "MODEL_LAYOUTS",
    "NOPE",
    "NO_ATTENTION",
    "ROPE",
    "TEXT",
    "IMAGE",
    "VIDEO",
    "rope_from_config",
    "layer_schedule",
    "encodings_from_config",
    "query_scales_from_config",
    "mrope_positions",
    "token_types",
    "decode_positions",
]
