"""Per-model-type tables read from transformers' config classes and modelling code (see
:mod:`posenc.config.rope` for what each means and how it is used)."""

from __future__ import annotations

from typing import Any

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
            "exaone",
            "exaone4",
            "internlm3",
            "iquestcoder",
            "sarvam_moe",
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
            "sarvam_mla",
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

#: What transformers' config classes (5.24, checked by the tests) give the fields that published
#: config.json files may leave out, beyond the sizes that :data:`posenc.config.generated.CLASS_DEFAULTS`
#: (``tools/gen_config_tables.py``) reads from the installed classes (``hidden_size``, head counts,
#: ``max_position_embeddings``, a fixed ``head_dim``): ``default_theta``, Phi-3's
#: ``original_max_position_embeddings``, GPT-J's ``rotary_dim``, the multi-head-latent
#: ``qk_rope_head_dim``, a ``head_dim`` that the generator does not see as fixed (Gemma 4's 256),
#: and a default ``rope_parameters`` (Apertus: Llama 3 scaling; Gemma 4: proportional RoPE on full
#: attention). Read from each class (``CONFIG_MAPPING[model_type](hidden_size=..., num_attention_heads=...)``;
#: ``test_every_model_type_reads_a_bare_config_as_transformers_does`` checks them against it, and
#: ``tests/config/test_generated_tables.py`` that no entry repeats or shadows a generated one).
_HF_DEFAULTS: dict[str, dict[str, Any]] = {
    "apertus": {
        "rope_theta": 12_000_000.0,
        "rope_parameters": {
            "rope_type": "llama3",
            "rope_theta": 12_000_000.0,
            "factor": 8.0,
            "original_max_position_embeddings": 8192,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    },
    "codegen": {"max_position_embeddings": 2048, "rotary_dim": 64},
    "cohere": {"rope_theta": 500_000.0},
    "deepseek_v2": {"qk_rope_head_dim": 64},
    "deepseek_v3": {"qk_rope_head_dim": 64},
    "ernie4_5": {"rope_theta": 500_000.0},
    "exaone": {"rope_theta": 500_000.0},  # ExaoneConfig.default_theta
    "gemma4_text": {
        "head_dim": 256,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
        },
    },
    "gptj": {"max_position_embeddings": 2048, "rotary_dim": 64},
    "llama4_text": {"rope_theta": 500_000.0},
    "mixtral": {"rope_theta": 1_000_000.0},
    "olmo3": {"rope_theta": 500_000.0},
    "phi3": {"original_max_position_embeddings": 4096},
    "phimoe": {"rope_theta": 1_000_000.0},
    "smollm3": {"rope_theta": 2_000_000.0},
    "minimax": {"rope_theta": 1_000_000.0},
    "bitnet": {"rope_theta": 500_000.0},
    "solar_open": {"rope_theta": 1_000_000.0},
    "flex_olmo": {"rope_theta": 500_000.0},
    "lfm2": {"rope_theta": 1_000_000.0},
    "lfm2_moe": {"rope_theta": 1_000_000.0},
    "cwm": {
        "rope_theta": 1_000_000.0,
        "rope_parameters": {
            "rope_type": "llama3",
            "rope_theta": 1_000_000.0,
            "factor": 16.0,
            "original_max_position_embeddings": 8192,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    },
    "EvollaModel": {"rope_theta": 500000.0},
    "apertus1p5_text": {
        "rope_theta": 12000000.0,
        "rope_parameters": {
            "rope_type": "llama3",
            "rope_theta": 12000000.0,
            "factor": 8.0,
            "original_max_position_embeddings": 8192,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    },
    "axk1": {"qk_rope_head_dim": 64},
    "axk2": {"qk_rope_head_dim": 32},
    "bailing_hybrid": {"rope_theta": 6000000.0, "qk_rope_head_dim": 64, "max_position_embeddings": 262144},
    "beam": {
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": None,
        }
    },
    "blt_global_transformer": {"rope_theta": 500000.0},
    "blt_local_decoder": {"rope_theta": 500000.0},
    "blt_local_encoder": {"rope_theta": 500000.0},
    "csm": {"rope_theta": 500000.0},
    "csm_depth_decoder_model": {"rope_theta": 500000.0},
    "deepseek_v32": {"qk_rope_head_dim": 64},
    "dory": {
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 10000000.0},
        }
    },
    "embedding_gemma2_text": {
        "head_dim": 256,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
        },
    },
    "emu3_text_model": {"rope_theta": 1000000.0},
    "ernie4_5_moe": {"rope_theta": 500000.0},
    "evolla": {"rope_theta": 500000.0},
    "glm_moe_dsa": {"qk_rope_head_dim": 64},
    "gpt_oss": {
        "rope_theta": 150000.0,
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
    "gte": {"rope_theta": 160000.0},
    "helium": {"rope_theta": 100000.0},
    "higgs_audio_v2": {
        "rope_parameters": {
            "factor": 32.0,
            "rope_theta": 500000.0,
            "high_freq_factor": 0.5,
            "low_freq_factor": 0.125,
            "original_max_position_embeddings": 1024,
            "rope_type": "llama3",
        }
    },
    "hy_v3": {"rope_theta": 11158840.0},
    "jina_embeddings_v3": {"rope_theta": 20000.0},
    "laguna": {
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0},
        }
    },
    "lfm3": {
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5},
        }
    },
    "longcat_flash": {"rope_theta": 10000000.0, "qk_rope_head_dim": 64},
    "mellum": {
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 500000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        }
    },
    "mimo_v2_flash": {
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": 0.334},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.334},
        }
    },
    "minimax_m2": {"rope_theta": 5000000.0},
    "ministral3": {
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
        }
    },
    "mistral4": {
        "qk_rope_head_dim": 64,
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
    "mllama_text_model": {"rope_theta": 500000.0},
    "muse_glimmer_assistant": {"rope_theta": 500000.0},
    "muse_spark_text": {"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}},
    "nomic_bert": {"rope_theta": 1000.0},
    "openai_privacy_filter": {
        "rope_theta": 150000.0,
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
    "pe_audio_encoder": {"rope_theta": 20000.0},
    "pe_audio_video_encoder": {"rope_theta": 20000.0},
    "pe_video_encoder": {"rope_theta": 20000.0},
    "ultrabert": {
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 2560000.0},
        }
    },
    "youtu": {"qk_rope_head_dim": 64},
    "zaya": {
        "rope_parameters": {
            "hybrid": {"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": 0.5},
            "hybrid_sliding": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        }
    },
    "minimax_m3_vl_text": {"rope_theta": 5_000_000.0},
    "dots3_note_text": {"qk_rope_head_dim": 64},
    "dbrx": {"max_position_embeddings": 2048},
    "moonshine_streaming": {
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.8}
    },
    "nemotron3_5_transcribe_asr_audio": {
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.5}
    },
    "nemotron3_5_transcribe_word_timestamp": {
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.5}
    },
}
_HF_DEFAULTS["diffusion_gemma_text"] = _HF_DEFAULTS["gemma4_text"]
_HF_DEFAULTS["gemma4_unified_text"] = _HF_DEFAULTS["gemma4_text"]
#: Multimodal wrappers read without a ``text_config``: their text model's defaults.
for _wrapper in ("gemma3", "gemma3n", "gemma4", "qwen3_5", "qwen3_5_moe", "llama4"):
    if f"{_wrapper}_text" in _HF_DEFAULTS:
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
        "sarvam_moe",
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
