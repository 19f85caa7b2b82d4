"""Per-model-type tables read from transformers' config classes and modelling code (see
:mod:`posenc.config.rope` for what each means and how it is used)."""

from __future__ import annotations

from .generated import PAIR_LAYOUTS, READS_PARTIAL
from .mrope import _MROPE_REFUSED, _MROPE_TYPES

#: Pair layouts for the model types whose rotary path ``tools/gen_config_tables.py`` cannot run:
#: a config of their own over another type's model, so no modelling module of their own (the
#: layout is that model's).
_LAYOUT_OVERRIDES = {
    # transformers/models/auto/modeling_auto.py: MODEL_MAPPING_NAMES ``("exaone", "LlamaModel")``
    "exaone": "half",
    # transformers/models/auto/modeling_auto.py: MODEL_MAPPING_NAMES ``("internlm3", "LlamaModel")``
    "internlm3": "half",
    # transformers/models/auto/modeling_auto.py: MODEL_MAPPING_NAMES ``("iquestcoder", "LlamaModel")``
    "iquestcoder": "half",
    # transformers/models/auto/modeling_auto.py: MODEL_MAPPING_NAMES ``("sarvam_moe", "Glm4MoeModel")``
    # (Glm4MoeAttention: apply_rotary_pos_emb, rotate_half)
    "sarvam_moe": "half",
    # transformers/models/auto/modeling_auto.py: MODEL_MAPPING_NAMES ``("sarvam_mla", "DeepseekV3Model")``
    # (DeepseekV3Attention with rope_interleave: apply_rotary_pos_emb_interleave, pairs (2i, 2i+1))
    "sarvam_mla": "interleaved",
}
#: Rotary types whose layout the generator reads but that posenc does not read as one plain RoPE.
_NOT_PLAIN_ROPE = {
    "nanochat": "rotates by minus the angle (its rotate_half returns (x2, -x1))",
    "dia": "encoder-decoder config whose RoPE parts are model types of their own",
    "t5gemma": "encoder-decoder config whose RoPE parts are model types of their own",
    "moonshine": "encoder-decoder config whose sizes are encoder_* and decoder_* fields",
}
#: MRoPE types (:mod:`posenc.config.mrope`) that a config without ``mrope_section`` makes plain
#: RoPE (Qwen3.5's text models); the other MRoPE types take their layout from ``_MROPE_TYPES``.
_PLAIN_MROPE = ("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")

#: Pair layout that Hugging Face's modelling code uses with each model type's checkpoints: read
#: off each type's own rotation (:data:`posenc.config.generated.PAIR_LAYOUTS`), with
#: :data:`_LAYOUT_OVERRIDES` for the types the generator cannot run.
MODEL_LAYOUTS: dict[str, str] = dict(
    sorted(
        {
            **{
                model_type: layout
                for model_type, layout in PAIR_LAYOUTS.items()
                if model_type not in _NOT_PLAIN_ROPE
                and (model_type in _PLAIN_MROPE or model_type not in {**_MROPE_TYPES, **_MROPE_REFUSED})
            },
            **_LAYOUT_OVERRIDES,
        }.items()
    )
)

_DEFAULT_BASE = 10000.0  # HF RotaryEmbeddingConfigMixin.default_theta
_NEEDS_ORIGINAL = ("llama3", "yarn", "longrope")

#: ``partial_rotary_factor`` that transformers' config classes give a config.json's own
#: ``rope_parameters`` when it has none, where ``tools/gen_config_tables.py`` cannot see it
#: (:data:`posenc.config.generated.PARTIAL_DEFAULTS` has the rest; these win over it):
_DEFAULT_PARTIAL = {
    # transformers/models/mistral4/configuration_mistral4.py: Mistral4Config.__post_init__,
    # ``self.rope_parameters.setdefault("partial_rotary_factor", self.qk_rope_head_dim / self.head_dim)``
    # (64 / 128; the class gives its own yarn dict, so the generator records that, not a factor)
    "mistral4": 0.5,
}

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

#: Model types whose rotary path ``tools/gen_config_tables.py`` cannot judge but whose
#: transformers rotary module builds its tables over ``int(head_dim * partial_rotary_factor)``
#: (its own ``compute_default_rope_parameters``, or the class default scaling's rule in
#: ``modeling_rope_utils.py``) while its attention applies them to the whole head, which raises in
#: transformers 5.24: posenc rotates the share the tables span. Apertus and CWM (a class default
#: ``llama3`` the same way) are left out: posenc rotates their whole head. A type whose model is
#: another type's takes that model's reading.
_PARTIAL_OVERRIDES = {
    # transformers/modeling_rope_utils.py: _compute_llama3_parameters (Apertus 1.5's class default
    # llama3), ``dim = int(head_dim * partial_rotary_factor)``
    "apertus1p5": True,
    # transformers/modeling_rope_utils.py: _compute_llama3_parameters, ``dim = int(head_dim * partial_rotary_factor)``
    "apertus1p5_text": True,
    # transformers/models/dots3_note/modeling_dots3_note.py: Dots3NoteTextRotaryEmbedding,
    # ``partial_rotary_factor = config.rope_parameters[layer_type].get("partial_rotary_factor", 1.0)``
    "dots3_note": True,
    # transformers/models/dots3_note/modeling_dots3_note.py: Dots3NoteTextRotaryEmbedding,
    # ``partial_rotary_factor = config.rope_parameters[layer_type].get("partial_rotary_factor", 1.0)``
    "dots3_note_text": True,
    # transformers/models/glm4_moe_lite/modeling_glm4_moe_lite.py: Glm4MoeLiteRotaryEmbedding,
    # ``partial_rotary_factor = config.rope_parameters.get("partial_rotary_factor", 1.0)``
    "glm4_moe_lite": True,
    # transformers/modeling_rope_utils.py: _compute_yarn_parameters (GPT-OSS's class default yarn),
    # ``partial_rotary_factor = rope_parameters_dict.get("partial_rotary_factor", 1.0)``
    "gpt_oss": True,
    # transformers/modeling_rope_utils.py: _compute_llama3_parameters (Higgs Audio v2's class default
    # llama3), ``dim = int(head_dim * partial_rotary_factor)``
    "higgs_audio_v2": True,
    # transformers/models/mellum/modeling_mellum.py: MellumRotaryEmbedding,
    # ``partial_rotary_factor = config.rope_parameters[layer_type].get("partial_rotary_factor", 1.0)``
    "mellum": True,
    # transformers/modeling_rope_utils.py: _compute_yarn_parameters (Ministral 3's class default yarn),
    # ``partial_rotary_factor = rope_parameters_dict.get("partial_rotary_factor", 1.0)``
    "ministral3": True,
    # transformers/modeling_rope_utils.py: _compute_yarn_parameters (Mistral Large 4's class default yarn),
    # ``partial_rotary_factor = rope_parameters_dict.get("partial_rotary_factor", 1.0)``
    "mistral_large4": True,
    # transformers/modeling_rope_utils.py: _compute_yarn_parameters (its text model's class default yarn),
    # ``partial_rotary_factor = rope_parameters_dict.get("partial_rotary_factor", 1.0)``
    "mistral_large4_text": True,
    # transformers/modeling_rope_utils.py: _compute_yarn_parameters (OpenAI Privacy Filter's class
    # default yarn), ``partial_rotary_factor = rope_parameters_dict.get("partial_rotary_factor", 1.0)``
    "openai_privacy_filter": True,
    # transformers/models/glm4_moe/modeling_glm4_moe.py: Glm4MoeRotaryEmbedding (AutoModel builds
    # Glm4MoeModel for sarvam_moe), ``partial_rotary_factor = config.rope_parameters.get("partial_rotary_factor", 1.0)``
    "sarvam_moe": True,
    # transformers/models/solar_open/modeling_solar_open.py: SolarOpenRotaryEmbedding,
    # ``partial_rotary_factor = config.rope_parameters.get("partial_rotary_factor", 1.0)``
    "solar_open": True,
}

#: Model types whose transformers code reads ``partial_rotary_factor`` (their rotary module's
#: default frequencies span ``int(head_dim * factor)`` and their attention rotates only that much):
#: :data:`posenc.config.generated.READS_PARTIAL`, read off each type's own rotary path, with
#: :data:`_PARTIAL_OVERRIDES` for the types it cannot judge. Every other type in
#: :data:`MODEL_LAYOUTS` rotates the whole head and ignores a factor in its config, as here (OLMoE,
#: Llama, Qwen2/3, GLM-ASR's Llama text model, ...: honouring it there gives errors of 5-8 against
#: transformers). Unknown model types, read with ``layout=``, honour it. GPT-J and CodeGen rotate
#: ``rotary_dim`` features and Gemma 4 zeroes frequencies (``proportional``) instead.
#: Only types of :data:`MODEL_LAYOUTS` are kept: the set is consulted for them alone (MRoPE types
#: and the encoder-decoder Moonshine read their share their own way).
_READS_PARTIAL = frozenset(
    model_type
    for model_type, reads in {**READS_PARTIAL, **_PARTIAL_OVERRIDES}.items()
    if reads and model_type in MODEL_LAYOUTS
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
