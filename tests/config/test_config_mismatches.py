"""The config readings that used to differ from transformers 5.24 silently, each checked against
transformers' own config and rotary classes, and the bad config values that used to escape as
internal errors."""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch

import posenc
from posenc.config import NO_ATTENTION, decode_positions, layer_schedule, mrope_positions, token_types

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402


def _hf_rotated_width(model_type: str, module: str, cls: str, **fields) -> tuple[dict, int]:
    """The config dict transformers writes for ``fields`` and its rotary module's table width."""
    import importlib

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = CONFIG_MAPPING[model_type](**fields)
        rotary = getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), cls)(config)
    return config.to_dict(), 2 * rotary.inv_freq.numel()


def test_jetmoe_reads_kv_channels_as_its_head_width():
    config, width = _hf_rotated_width(
        "jetmoe", "jetmoe", "JetMoeRotaryEmbedding", kv_channels=64, hidden_size=512, num_attention_heads=4
    )
    assert width == 64 and posenc.rope_from_config(config).config.dim == 64


def test_exaone_is_llamas_rotary_with_its_own_default_base():
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = CONFIG_MAPPING["exaone"](hidden_size=256, num_attention_heads=4)
        stock = LlamaRotaryEmbedding(config)  # AutoModel builds Llama's model for EXAONE
    rope = posenc.rope_from_config({"model_type": "exaone", "hidden_size": 256, "num_attention_heads": 4})
    assert rope.config.layout == "half" and rope.config.base == 500_000.0
    torch.testing.assert_close(rope.inv_freq.float(), stock.inv_freq.float(), rtol=1e-6, atol=0)


@pytest.mark.parametrize("attention_head_dim", [8, None])
def test_zamba2_reads_attention_head_dim(attention_head_dim):
    fields = {"hidden_size": 64, "num_attention_heads": 4}
    if attention_head_dim:
        fields["attention_head_dim"] = attention_head_dim
    config, width = _hf_rotated_width("zamba2", "zamba2", "Zamba2RotaryEmbedding", **fields)
    assert width == (attention_head_dim or 32)
    assert posenc.rope_from_config(config).config.dim == width
    bare = {k: v for k, v in config.items() if k != "attention_head_dim"}  # a config.json without it
    assert posenc.rope_from_config(bare).config.dim == 32


def test_deepseek_ocr2_ignores_a_head_dim_in_the_file():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = CONFIG_MAPPING["deepseek_ocr2_text"].from_dict(
            {"hidden_size": 256, "num_attention_heads": 4, "head_dim": 100}
        )
    assert hf.head_dim == 64
    read = posenc.rope_from_config(
        {"model_type": "deepseek_ocr2_text", "hidden_size": 256, "num_attention_heads": 4, "head_dim": 100}
    )
    assert read.config.dim == 64


@pytest.mark.parametrize("model_type", ["falcon", "granite_docling", "llama"])
def test_a_config_without_sizes_takes_the_class_defaults(model_type):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = CONFIG_MAPPING[model_type]().get_text_config(decoder=True)
    want = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    assert posenc.rope_from_config({"model_type": model_type}).config.dim == want


def test_qwen3_next_linear_attention_layers_have_no_rope():
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextDecoderLayer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = CONFIG_MAPPING["qwen3_next"](
            num_hidden_layers=8,
            hidden_size=64,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=32,
            linear_num_value_heads=2,
            linear_num_key_heads=2,
            num_experts=2,
            moe_intermediate_size=16,
            shared_expert_intermediate_size=16,
            intermediate_size=32,
        )
        layers = [Qwen3NextDecoderLayer(config, i) for i in range(8)]
    want = ["rope" if hasattr(layer, "self_attn") else NO_ATTENTION for layer in layers]
    assert NO_ATTENTION in want and "rope" in want
    assert layer_schedule(config.to_dict()) == want
    encodings = posenc.encodings_from_config(config.to_dict())
    assert [type(e).__name__ for e in encodings].count("Rope") == want.count("rope")


@pytest.mark.parametrize("use_mem_rope", [True, False])
def test_zamba2_hybrid_layers_are_attention_and_mamba_layers_say_no_attention(use_mem_rope):
    from transformers.models.zamba2.modeling_zamba2 import Zamba2Attention

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = CONFIG_MAPPING["zamba2"](hidden_size=64, num_attention_heads=4, use_mem_rope=use_mem_rope)
    kinds = config.to_dict()["layers_block_type"]
    assert "hybrid" in kinds and "linear_attention" in kinds
    assert "if self.config.use_mem_rope:" in inspect.getsource(Zamba2Attention.forward)  # rotates only then
    attention_entry = "rope" if use_mem_rope else "none"
    assert layer_schedule(config.to_dict()) == [attention_entry if k == "hybrid" else NO_ATTENTION for k in kinds]


@pytest.mark.parametrize(
    "model_type", ["hunyuan_vl", "hy_v4_vl", "neomme", "cohere_compass", "qwen2_5_omni", "qwen3_omni_moe"]
)
def test_mrope_families_outside_the_supported_ones_are_refused_by_name(model_type):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = CONFIG_MAPPING[model_type]().to_dict()
    with pytest.raises(ValueError, match=rf"model_type '{model_type}[a-z_]*': .* does not express; supported MRoPE"):
        posenc.rope_from_config(config)


def test_ernie_merges_video_frames_in_pairs_as_transformers():
    from transformers.models.ernie4_5_vl_moe.modeling_ernie4_5_vl_moe import Ernie4_5_VLMoeModel

    video = torch.tensor([[4, 4, 6]])
    types = torch.tensor([0, 0] + [2] * (2 * 2 * 3) + [0, 0])
    got, deltas = mrope_positions(types, video_grid_thw=video, temporal_merge_size=2)
    want = Ernie4_5_VLMoeModel.get_vision_position_ids(None, 2, video[0], 2, 2)  # [3, n]
    assert torch.equal(got[2:14], want.T)
    assert int(deltas) == int(got.max()) + 1 - types.numel()


@pytest.mark.parametrize(
    ("config", "error", "match"),
    [
        ({"model_type": ["llama"]}, TypeError, r"'model_type' must be a string"),
        (
            {"model_type": "llama", "rope_scaling": {"rope_type": ["yarn"], "factor": 2}},
            TypeError,
            r"rope_scaling.rope_type",
        ),
        (
            {
                "model_type": "llama",
                "rope_scaling": {"rope_type": "yarn", "factor": 4.0},
                "max_position_embeddings": "1024",
            },
            ValueError,
            r"'max_position_embeddings' must be a positive whole number, got '1024'",
        ),
        (
            {
                "model_type": "llama",
                "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": "64"},
            },
            ValueError,
            r"'original_max_position_embeddings' must be a positive whole number",
        ),
        (
            {"model_type": "phi", "partial_rotary_factor": 0.01},
            ValueError,
            r"'partial_rotary_factor' = 0.01 of head_dim",
        ),
    ],
)
def test_bad_config_values_are_named(config, error, match):
    with pytest.raises(error, match=match):
        posenc.rope_from_config(config)


def test_layer_schedule_refuses_an_unhashable_model_type():
    with pytest.raises(TypeError, match=r"'model_type' must be a string"):
        layer_schedule({"model_type": ["smollm3"], "num_hidden_layers": 4})


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"tokens_per_second": float("nan")}, ValueError, r"tokens_per_second must be a finite positive"),
        ({"tokens_per_second": "2"}, TypeError, r"tokens_per_second must be a number"),
        ({"tokens_per_second": 2, "second_per_grid_ts": "1"}, TypeError, r"second_per_grid_ts must be numbers"),
        ({"tokens_per_second": 2, "second_per_grid_ts": [float("inf")]}, ValueError, r"finite positive seconds"),
    ],
)
def test_mrope_rates_are_checked(kwargs, error, match):
    types = torch.tensor([0] + [2] * 4)
    with pytest.raises(error, match=match):
        mrope_positions(types, video_grid_thw=torch.tensor([[1, 4, 4]]), **kwargs)


def test_a_huge_grid_is_compared_with_the_token_count_before_allocating():
    types = torch.tensor([1] * 4)
    with pytest.raises(ValueError, match=r"a run of 4 image tokens, but its grid \[1, 2097152, 2097152\]"):
        mrope_positions(types, torch.tensor([[1, 2**21, 2**21]]))


def test_token_ids_and_cache_index_must_be_integers():
    with pytest.raises(TypeError, match=r"image_token_id must be an integer token id"):
        token_types(torch.tensor([[1, 5]]), image_token_id="5")
    with pytest.raises(TypeError, match=r"start must be a cache index"):
        decode_positions(torch.zeros(1, 1, dtype=torch.long), "3")


@pytest.mark.parametrize(
    ("model_type", "module", "cls"),
    [
        ("glm4v", "glm4v", "Glm4vTextRotaryEmbedding"),
        ("glm4v_moe", "glm4v_moe", "Glm4vMoeTextRotaryEmbedding"),
        ("glm_image", "glm_image", "GlmImageTextRotaryEmbedding"),
    ],
)
def test_contiguous_mrope_whose_fallback_sections_do_not_span_is_refused_as_transformers_fails(model_type, module, cls):
    """GLM-4V's default config has no ``mrope_section``; its rotary module falls back to [8, 12, 12]
    (32 pairs) over a wider table and ``freq.split`` raises. posenc used to read it as plain RoPE."""
    import importlib

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = CONFIG_MAPPING[model_type]()
        text = config.get_text_config(decoder=True)
        rotary = getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), cls)(text)
    with pytest.raises(RuntimeError, match="split_with_sizes"):
        rotary(torch.zeros(1), torch.arange(4)[None])
    with pytest.raises(
        ValueError, match=rf"model_type '{model_type}_text': the config has no 'mrope_section'.*\[8, 12, 12\]"
    ):
        posenc.rope_from_config(config.to_dict())
    # the same config with heads of 128 rotated by half (64 = 2 * (8 + 12 + 12)) is MRoPE in both
    spanning = {**text.to_dict(), "hidden_size": 512, "num_attention_heads": 4, "head_dim": 128}
    spanning["rope_parameters"] = {**text.rope_parameters, "partial_rotary_factor": 0.5}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rotary = type(rotary)(type(text).from_dict(spanning))
    rotary(torch.zeros(1), torch.arange(4)[None])
    assert type(posenc.rope_from_config(spanning)).__name__ == "MRope"


def _hybrid_kinds() -> dict[str, list[str]]:
    """Every rotary config class (default fields) whose own ``layers_block_type`` or ``layer_types``
    (a property in some classes, never written to config.json) names layers that are not attention."""
    import importlib.util
    from pathlib import Path

    from posenc.config.schedules import _NOT_ATTENTION

    tool = Path(__file__).resolve().parents[2] / "tools" / "gen_config_tables.py"
    spec = importlib.util.spec_from_file_location("gen_config_tables", tool)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type in module.rotary_model_types():
            try:
                config = CONFIG_MAPPING[model_type]().get_text_config(decoder=True)
            except Exception:  # noqa: BLE001 - classes that need arguments
                continue
            for name in ("layers_block_type", "layer_types"):
                kinds = getattr(config, name, None)
                if isinstance(kinds, (list, tuple)) and _NOT_ATTENTION & set(kinds):
                    found[model_type] = (config, list(kinds))
                    break
    return found


_HYBRIDS = _hybrid_kinds()


def test_the_hybrid_sweep_finds_the_families_whose_kinds_are_computed():
    assert {"bamba", "jamba", "recurrent_gemma", "nemotron_h", "qwen3_next", "zamba2"} <= set(_HYBRIDS)


@pytest.mark.parametrize("model_type", sorted(_HYBRIDS))
def test_every_hybrid_config_class_says_no_attention_where_transformers_has_none(model_type):
    """Bamba, Jamba and RecurrentGemma compute ``layers_block_type`` from other fields, so it is not
    in ``to_dict()``; posenc gave their Mamba / recurrent layers RoPE."""
    from posenc.config.schedules import _NOT_ATTENTION

    config, kinds = _HYBRIDS[model_type]
    want = [kind not in _NOT_ATTENTION for kind in kinds]
    got = [entry != NO_ATTENTION for entry in layer_schedule(config.to_dict())]
    assert got == want


@pytest.mark.parametrize(
    ("model_type", "module", "cls"),
    [("jamba", "jamba", "JambaAttention"), ("nemotron_h", "nemotron_h", "NemotronHAttention")],
)
def test_hybrids_whose_attention_rotates_nothing_have_nope_attention_layers(model_type, module, cls):
    import importlib

    attention = getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), cls)
    assert "apply_rotary_pos_emb(" not in inspect.getsource(attention.forward)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = CONFIG_MAPPING[model_type]()
    schedule = layer_schedule(config.to_dict())
    assert "none" in schedule and set(schedule) == {"none", NO_ATTENTION}


def test_bamba_attention_layers_are_read_from_attn_layer_indices():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = CONFIG_MAPPING["bamba"](num_hidden_layers=6, attn_layer_indices=[2, 5])
    assert config.layers_block_type == ["linear_attention"] * 2 + ["full_attention"] + ["linear_attention"] * 2 + [
        "full_attention"
    ]
    assert layer_schedule(config.to_dict()) == [NO_ATTENTION, NO_ATTENTION, "rope", NO_ATTENTION, NO_ATTENTION, "rope"]


@pytest.mark.parametrize("drop_text_type", [False, True])
def test_glmasr_text_model_is_llama_and_ignores_a_partial_factor(drop_text_type):
    """GLM-ASR's ``GlmAsrRotaryEmbedding`` (GLM's, which reads ``partial_rotary_factor``) serves its
    audio encoder only; its language model is ``AutoModel.from_config(config.text_config)``, a Llama,
    which rotates the whole head whatever factor the text config carries. posenc reads a GLM-ASR
    config.json as that Llama, also where its ``text_config`` does not name ``llama``."""
    from transformers import GlmAsrModel
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    text = {
        "hidden_size": 128,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "vocab_size": 64,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    }
    audio = {"hidden_size": 32, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = CONFIG_MAPPING["glmasr"](text_config=text, audio_config=audio)
        model = GlmAsrModel(config)
    rotary = model.language_model.rotary_emb  # GlmAsrModel.language_model: AutoModel of text_config
    assert type(rotary).__name__ == "LlamaRotaryEmbedding"
    positions = torch.arange(40, 56)[None]
    with torch.no_grad():
        cos, sin = rotary(torch.zeros(1), positions)
    assert cos.shape[-1] == 64  # the whole head: the factor 0.5 is not read
    written = config.to_dict()
    if drop_text_type:
        written["text_config"].pop("model_type")
    rope = posenc.rope_from_config(written)
    assert (rope.config.dim, rope.config.rotary_width) == (64, 64)
    q, k = torch.randn(2, 1, 2, 16, 64, dtype=torch.float32).unbind(0)
    want = apply_rotary_pos_emb(q, k, cos, sin)
    got = rope.rotate(q, k, positions[0], positions[0])
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-5)
