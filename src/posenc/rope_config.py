"""RoPE from a model's ``config.json``: :func:`rope_from_config`.

Reads the fields that Hugging Face transformers reads for the model's rotary embedding and returns
the :class:`~posenc.schemes.rope.Rope` module with the same numbers:

* fields a config.json leaves out take the value the model type's transformers config class gives
  them (``_HF_DEFAULTS``: its ``default_theta`` such as Mixtral's 1e6 and Cohere's 5e5, a fixed
  ``head_dim`` such as Qwen3's 128, ``max_position_embeddings``, Apertus' default Llama 3 scaling);
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
  transformers code reads it (``_READS_PARTIAL``) and for unknown ones; the other known types
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
from .schemes.mrope import MRope, MRopeConfig
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
            "EvollaModel",
            "afmoe",
            "apertus1p5",
            "apertus1p5_text",
            "aria",
            "aria_text",
            "chameleon",
            "csm",
            "csm_depth_decoder_model",
            "deepseek_ocr2",
            "deepseek_ocr2_encoder",
            "deepseek_ocr2_text",
            "dia_decoder",
            "dia_encoder",
            "doge",
            "dory",
            "dots3_note_audio_encoder",
            "embedding_gemma2",
            "embedding_gemma2_text",
            "emu3",
            "emu3_text_model",
            "esm",
            "esmc",
            "eurobert",
            "evolla",
            "flint",
            "glm4_moe",
            "glmasr",
            "glmasr_encoder",
            "gpt_neox_japanese",
            "gpt_oss",
            "gradium_phonon_tts",
            "granite_docling",
            "granite_docling_text",
            "granite_swa",
            "granitemoe_swa",
            "gte",
            "higgs_audio_v2",
            "hrm_text",
            "hy_v3",
            "hy_v4",
            "hyperclovax",
            "idefics",
            "jais2",
            "jina_embeddings_v3",
            "kolibri1",
            "kyutai_speech_to_text",
            "laguna",
            "lara_mini",
            "lasr_encoder",
            "lfm3",
            "mellum",
            "mimi",
            "mimi_decoder",
            "mimi_encoder",
            "mimo_v2_flash",
            "minicpm3",
            "minimax_m2",
            "ministral3",
            "mllama",
            "mllama_text_model",
            "modernbert",
            "modernbert-decoder",
            "molmo2",
            "molmo2_text",
            "moshi",
            "muse_glimmer",
            "muse_glimmer_assistant",
            "muse_glimmer_text",
            "muse_spark",
            "muse_spark_text",
            "nemotron3_5_transcribe_asr_audio",
            "nemotron3_5_transcribe_word_timestamp",
            "nemotron3_diarization_audio",
            "neucodec",
            "nomic_bert",
            "olmo_hybrid",
            "phi4_multimodal",
            "pocket_tts",
            "pocket_tts_audio_tokenizer",
            "pocket_tts_audio_tokenizer_decoder",
            "pocket_tts_audio_tokenizer_encoder",
            "recurrent_gemma",
            "step3p5",
            "step3p7",
            "t5_gemma_module",
            "t5gemma2_decoder",
            "t5gemma2_encoder",
            "t5gemma2_text",
            "timesfm2_5",
            "ultrabert",
            "unlimited_ocr",
            "unlimited_ocr_text",
            "voxtral_realtime",
            "voxtral_realtime_encoder",
            "voxtral_realtime_text",
            "xcodec2",
            "zaya",
            "diffusion_gemma",
            "diffusion_gemma_text",
            "gemma4_unified",
            "gemma4_unified_text",
            "granite4_vision",
            "granite4_vision_text",
            "minimax_m3_vl",
            "minimax_m3_vl_text",
            "zamba2",
            "qwen2_5_omni_dit",
            "beam",
            "dbrx",
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
            "axk1",
            "axk2",
            "bailing_hybrid",
            "blt_global_transformer",
            "blt_local_decoder",
            "blt_local_encoder",
            "blt_patcher",
            "cohere2_moe",
            "deepseek_v32",
            "dots3_note",
            "dots3_note_text",
            "ernie4_5_moe",
            "glm4_moe_lite",
            "glm_moe_dsa",
            "helium",
            "longcat_flash",
            "mistral4",
            "mistral_large4",
            "mistral_large4_text",
            "moonshine_streaming",
            "pe_audio_encoder",
            "pe_audio_video_encoder",
            "pe_video_encoder",
            "youtu",
            "openai_privacy_filter",
            "deepseek_v4",
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
    "glmasr_encoder": 0.5,
    "mistral4": 0.5,
    "recurrent_gemma": 0.5,
}

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

#: What transformers' config classes (5.24, checked by the tests) give the fields that published config.json files may
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
    "EvollaModel": {"rope_theta": 500000.0, "max_position_embeddings": 8192},
    "afmoe": {"head_dim": 128, "max_position_embeddings": 16384},
    "apertus1p5_text": {
        "rope_theta": 12000000.0,
        "max_position_embeddings": 65536,
        "rope_parameters": {
            "rope_type": "llama3",
            "rope_theta": 12000000.0,
            "factor": 8.0,
            "original_max_position_embeddings": 8192,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    },
    "aria_text": {"max_position_embeddings": 2048},
    "axk1": {"qk_rope_head_dim": 64, "max_position_embeddings": 32768},
    "axk2": {"qk_rope_head_dim": 32, "max_position_embeddings": 131072},
    "bailing_hybrid": {"rope_theta": 6000000.0, "qk_rope_head_dim": 64, "max_position_embeddings": 262144},
    "beam": {
        "head_dim": 128,
        "max_position_embeddings": 8192,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": None,
        },
    },
    "blt_global_transformer": {"rope_theta": 500000.0, "max_position_embeddings": 4096},
    "blt_local_decoder": {"rope_theta": 500000.0, "max_position_embeddings": 24576},
    "blt_local_encoder": {"rope_theta": 500000.0, "max_position_embeddings": 24576},
    "blt_patcher": {"max_position_embeddings": 8192},
    "chameleon": {"max_position_embeddings": 4096},
    "cohere2_moe": {"head_dim": 128, "max_position_embeddings": 8192},
    "csm": {"rope_theta": 500000.0, "max_position_embeddings": 2048},
    "csm_depth_decoder_model": {"rope_theta": 500000.0, "max_position_embeddings": 33},
    "deepseek_ocr2_encoder": {"max_position_embeddings": 32768},
    "deepseek_ocr2_text": {"max_position_embeddings": 2048},
    "deepseek_v32": {"qk_rope_head_dim": 64, "max_position_embeddings": 163840},
    "dia_encoder": {"head_dim": 128, "max_position_embeddings": 1024},
    "doge": {"max_position_embeddings": 2048},
    "dory": {
        "head_dim": 256,
        "max_position_embeddings": 8192,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 10000000.0},
        },
    },
    "embedding_gemma2_text": {
        "head_dim": 256,
        "max_position_embeddings": 262144,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
        },
    },
    "emu3_text_model": {"rope_theta": 1000000.0, "max_position_embeddings": 9216},
    "ernie4_5_moe": {"rope_theta": 500000.0, "max_position_embeddings": 131072},
    "esm": {"max_position_embeddings": 1026},
    "eurobert": {"max_position_embeddings": 8192},
    "evolla": {"rope_theta": 500000.0, "max_position_embeddings": 8192},
    "flint": {"head_dim": 128, "max_position_embeddings": 262144},
    "glm4_moe": {"max_position_embeddings": 131072},
    "glm4_moe_lite": {"qk_rope_head_dim": 64, "max_position_embeddings": 202752},
    "glm_moe_dsa": {"qk_rope_head_dim": 64, "max_position_embeddings": 202752},
    "glmasr_encoder": {"max_position_embeddings": 1500},
    "gpt_neox_japanese": {"max_position_embeddings": 2048},
    "gpt_oss": {
        "rope_theta": 150000.0,
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "rope_type": "yarn",
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
            "rope_theta": 150000.0,
        },
    },
    "granite_docling_text": {"max_position_embeddings": 32768},
    "granite_swa": {"max_position_embeddings": 8192},
    "granitemoe_swa": {"max_position_embeddings": 2048},
    "gte": {"rope_theta": 160000.0, "max_position_embeddings": 8192},
    "helium": {"head_dim": 128, "rope_theta": 100000.0, "max_position_embeddings": 4096},
    "higgs_audio_v2": {
        "head_dim": 128,
        "max_position_embeddings": 2048,
        "rope_parameters": {
            "factor": 32.0,
            "rope_theta": 500000.0,
            "high_freq_factor": 0.5,
            "low_freq_factor": 0.125,
            "original_max_position_embeddings": 1024,
            "rope_type": "llama3",
        },
    },
    "hrm_text": {"head_dim": 128, "max_position_embeddings": 2048},
    "hy_v3": {"head_dim": 128, "rope_theta": 11158840.0, "max_position_embeddings": 131072},
    "hy_v4": {"head_dim": 64, "max_position_embeddings": 262144},
    "hyperclovax": {"max_position_embeddings": 2048},
    "idefics": {"max_position_embeddings": 2048},
    "jais2": {"max_position_embeddings": 8192},
    "jina_embeddings_v3": {"rope_theta": 20000.0, "max_position_embeddings": 8194},
    "kolibri1": {"head_dim": 128, "max_position_embeddings": 262144},
    "kyutai_speech_to_text": {"max_position_embeddings": 750},
    "laguna": {
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0},
        },
    },
    "lara_mini": {"head_dim": 128, "max_position_embeddings": 131072},
    "lasr_encoder": {"max_position_embeddings": 10000},
    "lfm3": {
        "head_dim": 128,
        "max_position_embeddings": 128000,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5},
        },
    },
    "longcat_flash": {"rope_theta": 10000000.0, "qk_rope_head_dim": 64, "max_position_embeddings": 131072},
    "mellum": {
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 500000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        },
    },
    "mimi": {"max_position_embeddings": 8000},
    "mimi_decoder": {"max_position_embeddings": 8000},
    "mimi_encoder": {"max_position_embeddings": 8000},
    "mimo_v2_flash": {
        "head_dim": 192,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": 0.334},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.334},
        },
    },
    "minicpm3": {"head_dim": 32, "max_position_embeddings": 32768},
    "minimax_m2": {"head_dim": 128, "rope_theta": 5000000.0, "max_position_embeddings": 196608},
    "ministral3": {
        "head_dim": 128,
        "max_position_embeddings": 262144,
        "rope_parameters": {
            "type": "yarn",
            "rope_theta": 1000000.0,
            "factor": 16.0,
            "original_max_position_embeddings": 16384,
            "max_position_embeddings": 262144,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale_all_dim": 1.0,
            "mscale": 1.0,
            "llama_4_scaling_beta": 0.1,
            "rope_type": "yarn",
        },
    },
    "mistral4": {
        "qk_rope_head_dim": 64,
        "max_position_embeddings": 1048576,
        "rope_parameters": {
            "type": "yarn",
            "rope_theta": 10000.0,
            "factor": 128.0,
            "original_max_position_embeddings": 8192,
            "max_position_embeddings": 1048576,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale_all_dim": 1.0,
            "mscale": 1.0,
            "llama_4_scaling_beta": 0.1,
            "partial_rotary_factor": 0.5,
            "rope_type": "yarn",
        },
    },
    "mistral_large4_text": {
        "qk_rope_head_dim": 64,
        "max_position_embeddings": 1048576,
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 2048.0,
            "original_max_position_embeddings": 512,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "attention_factor": 1.0,
        },
    },
    "mllama_text_model": {"rope_theta": 500000.0, "max_position_embeddings": 131072},
    "modernbert": {"max_position_embeddings": 8192},
    "modernbert-decoder": {"max_position_embeddings": 8192},
    "molmo2_text": {"head_dim": 128, "max_position_embeddings": 36864},
    "moshi": {"max_position_embeddings": 3000},
    "muse_glimmer_assistant": {"head_dim": 128, "rope_theta": 500000.0, "max_position_embeddings": 131072},
    "muse_glimmer_text": {"head_dim": 128, "max_position_embeddings": 131072},
    "muse_spark_text": {
        "head_dim": 64,
        "max_position_embeddings": 1048576,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
    },
    "nemotron3_diarization_audio": {"max_position_embeddings": 5000},
    "neucodec": {"head_dim": 64, "max_position_embeddings": 4096},
    "nomic_bert": {"rope_theta": 1000.0, "max_position_embeddings": 2048},
    "olmo_hybrid": {"max_position_embeddings": 65536},
    "openai_privacy_filter": {
        "rope_theta": 150000.0,
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "rope_type": "yarn",
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
            "rope_theta": 150000.0,
        },
    },
    "pe_audio_encoder": {"head_dim": 128, "rope_theta": 20000.0, "max_position_embeddings": 10000},
    "pe_audio_video_encoder": {"head_dim": 128, "rope_theta": 20000.0, "max_position_embeddings": 10000},
    "pe_video_encoder": {"head_dim": 128, "rope_theta": 20000.0, "max_position_embeddings": 10000},
    "phi4_multimodal": {"max_position_embeddings": 131072},
    "pocket_tts_audio_tokenizer": {"max_position_embeddings": 8000},
    "pocket_tts_audio_tokenizer_decoder": {"max_position_embeddings": 8000},
    "pocket_tts_audio_tokenizer_encoder": {"max_position_embeddings": 8000},
    "step3p5": {"head_dim": 128, "max_position_embeddings": 128000},
    "t5_gemma_module": {"head_dim": 256, "max_position_embeddings": 8192},
    "t5gemma2_decoder": {"head_dim": 256, "max_position_embeddings": 131072},
    "t5gemma2_text": {"head_dim": 256, "max_position_embeddings": 131072},
    "timesfm2_5": {"head_dim": 80, "max_position_embeddings": 16384},
    "ultrabert": {
        "max_position_embeddings": 32768,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 2560000.0},
        },
    },
    "unlimited_ocr_text": {"max_position_embeddings": 32768},
    "voxtral_realtime_encoder": {"head_dim": 64, "max_position_embeddings": 1500},
    "voxtral_realtime_text": {"max_position_embeddings": 131072},
    "xcodec2": {"head_dim": 64, "max_position_embeddings": 4096},
    "youtu": {"qk_rope_head_dim": 64, "max_position_embeddings": 131072},
    "zaya": {
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "hybrid": {"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": 0.5},
            "hybrid_sliding": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        },
    },
    "minimax_m3_vl_text": {"rope_theta": 5_000_000.0, "head_dim": 128, "max_position_embeddings": 524288},
    "dots3_note_text": {"qk_rope_head_dim": 64},
    "dbrx": {"max_position_embeddings": 2048},
    "dia_decoder": {"max_position_embeddings": 3072},
    "granite4_vision_text": {"max_position_embeddings": 2048},
    "zamba2": {"max_position_embeddings": 4096},
    "deepseek_v4": {"head_dim": 512, "max_position_embeddings": 1048576},
    "qwen2_5_omni_dit": {"head_dim": 64, "max_position_embeddings": 32768},
    "moonshine_streaming": {
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.8},
    },
    "nemotron3_5_transcribe_asr_audio": {
        "max_position_embeddings": 5000,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.5},
    },
    "nemotron3_5_transcribe_word_timestamp": {
        "max_position_embeddings": 5000,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.5},
    },
}
_HF_DEFAULTS["diffusion_gemma_text"] = _HF_DEFAULTS["gemma4_text"]
_HF_DEFAULTS["gemma4_unified_text"] = {**_HF_DEFAULTS["gemma4_text"], "max_position_embeddings": 262144}
#: Multimodal wrappers read without a ``text_config``: their text model's defaults.
for _wrapper in ("gemma3", "gemma3n", "gemma4", "qwen3_5", "qwen3_5_moe", "llama4"):
    _HF_DEFAULTS[_wrapper] = _HF_DEFAULTS[f"{_wrapper}_text"]
#: Multimodal wrappers whose text model has another name (``config.get_text_config().model_type``).
_WRAPPED_TEXT = {
    "apertus1p5": "apertus1p5_text",
    "aria": "aria_text",
    "deepseek_ocr2": "deepseek_ocr2_text",
    "dots3_note": "dots3_note_text",
    "embedding_gemma2": "embedding_gemma2_text",
    "emu3": "emu3_text_model",
    "granite_docling": "granite_docling_text",
    "mistral_large4": "mistral_large4_text",
    "mllama": "mllama_text_model",
    "molmo2": "molmo2_text",
    "muse_glimmer": "muse_glimmer_text",
    "muse_spark": "muse_spark_text",
    "step3p7": "step3p5",
    "t5gemma2_encoder": "t5gemma2_text",
    "unlimited_ocr": "unlimited_ocr_text",
    "voxtral_realtime": "voxtral_realtime_text",
}
for _wrapper, _text in _WRAPPED_TEXT.items():
    if _text in _HF_DEFAULTS:
        _HF_DEFAULTS[_wrapper] = _HF_DEFAULTS[_text]
#: Gemma 4 and the model types built on its text model: full-attention heads 512 wide by default.
_GEMMA4 = (
    "gemma4",
    "gemma4_text",
    "diffusion_gemma",
    "diffusion_gemma_text",
    "gemma4_unified",
    "gemma4_unified_text",
    "embedding_gemma2",
    "embedding_gemma2_text",
)
#: GPT-NeoX's class (and GPT-NeoX-Japanese's) reads its base and rotated share only from
#: ``rotary_emb_base`` and ``rotary_pct`` (a ``rope_theta`` or ``partial_rotary_factor`` beside them
#: is ignored there).
_NEOX = ("gpt_neox", "gpt_neox_japanese")
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


#: Config classes that name the fields under other names (their ``attribute_map``): DBRX.
_FIELD_ALIASES = {
    "dbrx": {"d_model": "hidden_size", "n_heads": "num_attention_heads", "max_seq_len": "max_position_embeddings"}
}


def _own_field_names(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the standard field names where its class uses others (``_FIELD_ALIASES``), and
    Zamba2's head width, which its class sets to ``2 * hidden_size // num_attention_heads`` whatever
    the config.json says (``Zamba2Config.__post_init__``: its attention reads the hidden state
    concatenated with the input embeddings)."""
    model_type = config.get("model_type")
    for name, standard in _FIELD_ALIASES.get(model_type, {}).items():
        if config.get(standard) is None and config.get(name) is not None:
            config = {**config, standard: config[name]}
    if model_type == "zamba2" and config.get("hidden_size") and config.get("num_attention_heads"):
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


#: Model types whose transformers code reads ``partial_rotary_factor`` (their rotary module's
#: default frequencies span ``int(head_dim * factor)`` and their ``apply_rotary_pos_emb`` rotates
#: only that much; transformers 5.24). Every other type in :data:`MODEL_LAYOUTS` rotates the whole
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
        "apertus1p5",
        "apertus1p5_text",
        "glm4_moe",
        "glm4_moe_lite",
        "glmasr_encoder",
        "gpt_oss",
        "higgs_audio_v2",
        "minimax_m2",
        "ministral3",
        "mistral4",
        "mistral_large4",
        "mistral_large4_text",
        "nemotron3_5_transcribe_asr_audio",
        "nemotron3_5_transcribe_word_timestamp",
        "nemotron3_diarization_audio",
        "openai_privacy_filter",
        "phi4_multimodal",
        "recurrent_gemma",
        "laguna",
        "mimo_v2_flash",
        "zaya",
        "dots3_note",
        "dots3_note_audio_encoder",
        "dots3_note_text",
        "gpt_neox_japanese",
        "mellum",
        "moonshine_streaming",
        "step3p5",
        "step3p7",
        "minimax_m3_vl",
        "minimax_m3_vl_text",
    }
)
#: Model types with a RoPE per layer type whose rotary module reads ``partial_rotary_factor`` from
#: each layer type's dict only (1 when absent there), never from the config's top level (HF
#: ``MellumRotaryEmbedding`` and ``Step3p7RotaryEmbedding``: ``rope_parameters[layer_type]``).
_LAYER_PARTIAL_ONLY = ("mellum", "step3p5", "step3p7")
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
    if model_type in _TRAILING_ROPE:  # the width of its tables, which its attention rotates
        return int(head_dim * _partial_factor(config, params))
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


#: Model types whose attention applies ``apply_rotary_pos_emb_interleave`` unless the config's
#: ``rope_interleave`` is false (HF ``DeepseekV3Attention.forward`` and its copies).
_ROPE_INTERLEAVE_FLAG = ("deepseek_v3", "axk1", "glm4_moe_lite", "mistral4", "youtu")


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


def _nested(params: object) -> bool:
    return isinstance(params, Mapping) and any(isinstance(v, Mapping) for v in params.values())


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
        table = {}
        for kind in ("main", "compress"):
            params = {"rope_theta": 10_000.0 if theta is None else theta, **rope[kind]}
            if factor is not None:
                params.setdefault("partial_rotary_factor", factor)
            table[kind] = params
        return {**config, "rope_parameters": table}
    if factor is None:
        legacy = config.get("qk_rope_head_dim")
        head_dim = _whole("head_dim", config["head_dim"])
        factor = _whole("qk_rope_head_dim", legacy) / head_dim if legacy is not None else 64 / 512
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


def _step3p5_rope(config: dict[str, Any]) -> dict[str, Any]:
    """Step 3.5's RoPE per layer type as ``Step3p7TextConfig.__post_init__`` builds them from a
    config.json without one dict for each of its ``layer_types`` (all ``full_attention`` when
    absent): for each type, the default RoPE with the ``rope_theta`` (one number, or a list with
    one per layer) and ``partial_rotary_factors`` (a list) of its first layer; a ``rope_scaling``
    updates the ``full_attention`` dict only, and a flat ``rope_parameters`` is dropped. Dicts for
    every layer type are kept as written (the class gives them its default base, 10000, and the
    top-level ``partial_rotary_factor`` where they have none); a ``rope_scaling`` beside them is
    dropped there."""
    layer_types = config.get("layer_types") or ["full_attention"]
    extra, layers = config.get("num_nextn_predict_layers"), config.get("num_hidden_layers")
    if not isinstance(layer_types, (list, tuple)) or not all(isinstance(t, str) for t in layer_types):
        raise ValueError(f"config field 'layer_types' must be a list of layer type names, got {layer_types!r}")
    if extra and layers and len(layer_types) == layers + extra:  # the multi-token-prediction layers' pad
        layer_types = layer_types[:layers]
    kinds = sorted(set(layer_types))
    rope = config.get("rope_parameters")
    scaling = config.get("rope_scaling")
    config = {k: v for k, v in config.items() if k != "rope_scaling"}
    if isinstance(rope, Mapping) and all(isinstance(rope.get(kind), Mapping) for kind in kinds):
        table = {}
        for kind in kinds:
            params = {"rope_theta": 10_000.0, **rope[kind]}
            if config.get("partial_rotary_factor") is not None:
                params.setdefault("partial_rotary_factor", config["partial_rotary_factor"])
            table[kind] = params
        return {**config, "rope_parameters": table}
    if scaling is not None and not isinstance(scaling, Mapping):
        raise ValueError(
            f'config field \'rope_scaling\' must be an object like {{"rope_type": "linear", "factor": 4.0}}, got {scaling!r}'
        )
    theta, factors = config.get("rope_theta", 10_000.0), config.get("partial_rotary_factors")
    table = {}
    for kind in kinds:
        index = layer_types.index(kind)
        try:
            params = {"rope_type": "default", "rope_theta": theta[index] if isinstance(theta, list) else theta}
            if factors:
                params["partial_rotary_factor"] = factors[index]
        except (IndexError, KeyError, TypeError):
            raise ValueError(
                f"config fields 'rope_theta' ({theta!r}) and 'partial_rotary_factors' ({factors!r}) must be a "
                f"number or a list with one entry per layer (layer {index} is the first {kind!r} layer)"
            ) from None
        table[kind] = params
    if scaling and "full_attention" in table:
        table["full_attention"].update(scaling)
    return {**config, "rope_parameters": table}


#: Model types whose config classes build their rope dicts from other fields (DeepSeek-V4, Step 3.5).
_CLASS_BUILT_ROPE = {"deepseek_v4": _deepseek_v4_rope, "step3p5": _step3p5_rope, "step3p7": _step3p5_rope}


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
    elif config.get("model_type") in _GLOBAL_LOCAL:  # rope_scaling updates both RoPEs
        nested = dict(parameters) if _nested(parameters) else {}
        table = dict(nested)
        kinds = ("full_attention", "sliding_attention")
        for kind, field, theta in zip(kinds, _GLOBAL_LOCAL_FIELDS, _GLOBAL_LOCAL[config["model_type"]], strict=True):
            rope = {**(nested.get(kind) or {"rope_type": "default"}), **(scaling or {})}
            rope.setdefault("rope_theta", _field(config, field) or theta)
            table[kind] = rope
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


#: MRoPE model types (transformers 5.24 rotary modules that read ``mrope_section``): whether their
#: ``recomposition_frequencies`` interleaves the axes (Qwen3-VL's ``t h w t h w ...``) or takes
#: contiguous sections (Qwen2-VL's ``freq.split(mrope_section)``), the pair layout of their
#: ``apply_rotary_pos_emb`` (GLM-4V and GLM-OCR: ``rotate_half_llm`` on ``repeat_interleave(2)``
#: tables), and the ``partial_rotary_factor`` their rotary module falls back to, None where it
#: rotates the whole head whatever the config says (Qwen2-VL's ``compute_default_rope_parameters``).
_MROPE_TYPES: dict[str, tuple[bool | str, str, float | None]] = {
    **dict.fromkeys(
        ("qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text", "paddleocr_vl", "paddleocr_vl_text"),
        (False, "half", None),
    ),
    **dict.fromkeys(
        ("qwen3_vl", "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "cosmos3_edge", "cosmos3_edge_text"),
        (True, "half", None),
    ),
    **dict.fromkeys(("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"), (True, "half", 0.25)),
    **dict.fromkeys(("qwen4_exp", "qwen4_exp_text"), (True, "half", 1.0)),
    **dict.fromkeys(("glm4v", "glm4v_text", "glm_ocr", "glm_ocr_text"), (False, "interleaved", 1.0)),
    **dict.fromkeys(("glm_image", "glm_image_text"), (False, "half", 1.0)),
    **dict.fromkeys(("glm4v_moe", "glm4v_moe_text"), (False, "half", 0.5)),
    **dict.fromkeys(("ernie4_5_vl_moe", "ernie4_5_vl_moe_text"), ("hw", "interleaved", None)),
}
#: MRoPE model types whose ``mrope_section`` lists ``[h, w, t]`` (Ernie 4.5 VL), not ``[t, h, w]``.
_MROPE_HWT_ORDER = ("ernie4_5_vl_moe", "ernie4_5_vl_moe_text")
#: MRoPE model types whose frequencies posenc's sections cannot express, with what they do instead.
_MROPE_REFUSED = {
    "hunyuan_vl": "HunYuan-VL reads a variable number of MRoPE axes (len(mrope_section))",
    "hy_v4_vl": "HY-V4-VL rotates a multi-head-latent slice with its own table layout",
    "cohere_compass": "Cohere Compass keeps one MRoPE per layer type",
    "neomme": "NeoMME has two axes with per-layer-type spectra",
    "qwen2_5_omni": "Qwen2.5-Omni's thinker is nested under thinker_config",
    "qwen3_omni_moe": "Qwen3-Omni's thinker is nested under thinker_config",
}
_MROPE_KEYS = ("mrope_section", "mrope_interleaved", "interleaved")


def _mrope(config: Mapping[str, Any], params: dict[str, Any]) -> tuple[tuple[int, ...], bool | str] | None:
    """``(sections, interleaved)`` of a config whose RoPE reads ``mrope_section``, else None. The
    MRoPE keys are taken out of ``params`` (they are not scaling keys); a legacy ``"type": "mrope"``
    is the default RoPE (HF ``Qwen2VLTextConfig.convert_rope_params_to_dict``)."""
    if params.get("rope_type", params.get("type")) == "mrope":
        params.pop("type", None)
        params["rope_type"] = "default"
    model_type = config.get("model_type")
    found = {k: params.pop(k) for k in _MROPE_KEYS if k in params}
    sections = found.get("mrope_section")
    if sections is None:
        return None
    if model_type in _MROPE_REFUSED:
        raise ValueError(
            f"model_type {model_type!r}: {_MROPE_REFUSED[model_type]}, which posenc's MRoPE (three sections, "
            f"contiguous or interleaved) does not express; supported MRoPE model types: {', '.join(sorted(_MROPE_TYPES))}"
        )
    flag = found.get("mrope_interleaved", found.get("interleaved"))
    if model_type in _MROPE_TYPES:
        interleaved = _MROPE_TYPES[model_type][0]
        if flag is not None and bool(flag) != bool(interleaved):
            warnings.warn(
                f"config rope parameters say mrope_interleaved={flag!r}, but transformers' {model_type!r} rotary "
                f"module is {'interleaved' if interleaved else 'contiguous'} whatever the config says; "
                f"posenc follows the model code (interleaved={interleaved})",
                stacklevel=3,
            )
    else:
        if flag is not None and not isinstance(flag, bool):
            raise ValueError(f"config field 'mrope_interleaved' must be true or false, got {flag!r}")
        interleaved = bool(flag)
    if isinstance(sections, (str, bytes)) or not isinstance(sections, (list, tuple)):
        raise ValueError(
            f"config field 'mrope_section' must be a list of three numbers of rotary pairs (t, h, w), "
            f"such as [16, 24, 24], got {sections!r}"
        )
    if model_type in _MROPE_HWT_ORDER and len(sections) == 3:
        sections = (sections[2], sections[0], sections[1])  # [h, w, t] -> (t, h, w)
    return tuple(sections), interleaved


def _mrope_rotary_dim(config: Mapping[str, Any], params: Mapping[str, Any], head_dim: int) -> int:
    """The rotated width of an MRoPE model: ``int(head_dim * partial_rotary_factor)`` where its rotary
    module reads the factor (Qwen3.5: 0.25 by default, GLM-4V-MoE 0.5), the whole head elsewhere."""
    model_type = config.get("model_type")
    fallback = _MROPE_TYPES[model_type][2] if model_type in _MROPE_TYPES else 1.0
    if fallback is None:
        return head_dim
    factor = _field(params, "partial_rotary_factor")
    if factor is None:
        factor = _field(config, "partial_rotary_factor")
    factor = fallback if factor is None else factor
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise ValueError(f"partial_rotary_factor must be a number in (0, 1], got {factor!r}")
    return int(head_dim * factor)


def rope_from_config(
    config: Mapping[str, Any] | str | os.PathLike[str], *, layout: str | None = None, layer_type: str | None = None
) -> Rope:
    """The RoPE module for a model's ``config.json`` (a dict, a path to the file or its folder).

    Configs whose rope parameters have ``mrope_section`` (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5,
    GLM-4V, ...: :data:`_MROPE_TYPES`) give the :class:`~posenc.schemes.mrope.MRope` module (a
    subclass of ``Rope``) with those sections, contiguous or interleaved as the model's transformers
    code assigns them, and the same frequencies and scaling; its positions are ``(t, h, w)``
    coordinates ``[b, s, 3]`` (:func:`posenc.mrope_positions.mrope_positions`).

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
    config = _own_field_names(config)
    if config.get("model_type") in _CLASS_BUILT_ROPE:
        config = _CLASS_BUILT_ROPE[config["model_type"]](config)
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
    mrope = _mrope(config, params)  # takes the MRoPE keys out of params
    if mrope is not None:
        model_type = config.get("model_type")
        rotary_dim = _mrope_rotary_dim(config, params, head_dim)
        if layout is None and model_type in _MROPE_TYPES:
            layout = _MROPE_TYPES[model_type][1]
        return MRope(
            MRopeConfig(
                dim=head_dim,
                base=base if base is not None else _DEFAULT_BASE,
                sections=mrope[0],
                interleaved=mrope[1],
                layout=_layout(config, layout),
                scaling=_scaling(config, {k: v for k, v in params.items() if k != "partial_rotary_factor"}, False),
                rotary_dim=None if rotary_dim == head_dim else rotary_dim,
            )
        )
    rotary_dim = _rotary_dim(config, params, head_dim)
    nested = config.get("model_type") in {**_LAYER_TYPED, **_GLOBAL_LOCAL} or _nested(
        config.get("rope_scaling") or config.get("rope_parameters")
    )
    return Rope(
        RopeConfig(
            dim=head_dim,
            base=base if base is not None else _DEFAULT_BASE,
            layout=_layout(config, layout),
            scaling=_scaling(config, params, nested),
            rotary_dim=None if rotary_dim == head_dim else rotary_dim,
            rotary_start=head_dim - rotary_dim if config.get("model_type") in _TRAILING_ROPE else 0,
        )
    )
