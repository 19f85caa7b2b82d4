"""``use_posenc_rope`` on every rotary decoder type of the installed transformers that builds tiny.

Which types: every model type of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` whose modelling source
defines a rotary embedding (``tools/gen_config_tables.py``'s rule, also following a type that
borrows another's model, as EXAONE Llama's). Each is built from its config class with tiny sizes
(:data:`TINY`, then :data:`TINY_EXTRA` for its family's own size fields), random weights, seed 0;
a type whose stock model does not build or run one forward at these sizes is *not buildable* and
skipped with the reason. For every other type, one forward of 12 tokens: the patched logits equal
stock within ``1e-5`` (float32 rounding of the tables), and after ``remove()`` the logits equal
stock bit for bit. A type whose patch is refused must be listed in :data:`REFUSED` with the reason
that docs/stack.md names. One forward per type keeps this near a minute: marked slow.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING, AutoModelForCausalLM  # noqa: E402
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # noqa: E402

from posenc.integrations import transformers as hf  # noqa: E402

TOOL = Path(__file__).resolve().parents[2] / "tools" / "gen_config_tables.py"
TINY = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "head_dim": 32,
    "pad_token_id": 0,
    "bos_token_id": 0,
    "eos_token_id": 1,
}
#: Size fields of families whose defaults do not shrink with the ones above.
TINY_EXTRA = {
    "mla": {
        "qk_rope_head_dim": 16,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "kv_lora_rank": 16,
        "q_lora_rank": None,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "first_k_dense_replace": 1,
        "n_group": 1,
        "topk_group": 1,
    },
}
#: Larger than this at the sizes above is not tiny (a family whose own size fields stay large).
MAX_PARAMETERS = 3_000_000
#: Types whose patch is refused, and why (as docs/stack.md says).
REFUSED: dict[str, str] = {
    "nanochat": "rotates by minus the angle (its rotate_half returns (x2, -x1)): unknown pair layout",
    "nemotron_h": "no rotary module (its apply_rotary_pos_emb is never called): nothing to switch",
}


def _tool():
    spec = importlib.util.spec_from_file_location("gen_config_tables", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_config_tables", module)
    spec.loader.exec_module(module)
    return module


def decoder_types() -> list[str]:
    rotary = set(_tool().rotary_model_types())
    return sorted(t for t in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES if t in rotary and t in CONFIG_MAPPING)


def _tiny_fields(model_type: str) -> dict:
    """:data:`TINY`, the family fields of :data:`TINY_EXTRA` that the class has, and two layers of
    its own ``layer_types`` (its first kind and its first attention kind)."""
    default = CONFIG_MAPPING[model_type]().to_dict()
    fields = dict(TINY)
    for extra in TINY_EXTRA.values():
        fields.update({k: v for k, v in extra.items() if k in default})
    for name in ("layer_types", "layers_block_type"):
        kinds = default.get(name)
        if isinstance(kinds, list) and kinds:
            attention = [k for k in kinds if "attention" in k and k != "linear_attention"] or kinds
            fields[name] = [kinds[0], attention[0]] if kinds[0] != attention[0] else [kinds[0]] * 2
    return fields


def build(model_type: str):
    """The tiny stock model and its logits on 12 tokens; pytest.skip when it does not build or run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transformers.logging.set_verbosity_error()
        try:
            config = CONFIG_MAPPING[model_type](**_tiny_fields(model_type))
            with torch.device("meta"):  # sized before anything is allocated
                size = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
        except Exception as err:  # noqa: BLE001 - the stock model itself does not build tiny
            pytest.skip(f"not buildable tiny: {type(err).__name__}: {str(err)[:160]}")
        if size > MAX_PARAMETERS:
            pytest.skip(f"not buildable tiny: {size} parameters at these sizes (family fields not shrunk)")
        try:
            torch.manual_seed(0)
            model = AutoModelForCausalLM.from_config(config).eval()
            ids = torch.randint(2, 120, (1, 12), generator=torch.Generator().manual_seed(1))
            with torch.no_grad():
                stock = model(ids).logits
        except Exception as err:  # noqa: BLE001 - the stock model itself does not build tiny
            pytest.skip(f"not buildable tiny: {type(err).__name__}: {str(err)[:160]}")
    return model, ids, stock


@pytest.mark.slow
@pytest.mark.filterwarnings(
    "ignore:config rope scaling:UserWarning"
)  # Ministral 3's query temperature: pinned elsewhere
@pytest.mark.parametrize("model_type", decoder_types())
def test_every_rotary_decoder_type_patches_and_restores(model_type):
    if model_type in REFUSED:
        model, _, _ = build(model_type)
        with pytest.raises(ValueError, match=rf"model type '{model_type}"):
            hf.use_posenc_rope(model)
        return
    _patch_and_restore(model_type)


@pytest.mark.parametrize("model_type", ["lfm3", "qwen3_5_text", "llama4_text", "deepseek_v2", "exaone"])
def test_the_types_that_used_to_fail_patch_and_restore(model_type):
    """lfm3 (its model reads ``rotary_emb.layer_types``), qwen3_5_text's default config (MRoPE
    without ``mrope_section``), Llama 4's and DeepSeek-V2's complex ``freqs_cis``, EXAONE (Llama's
    model under its own type)."""
    _patch_and_restore(model_type)


def _patch_and_restore(model_type: str) -> None:
    model, ids, stock = build(model_type)
    with torch.no_grad():
        with hf.use_posenc_rope(model) as handle:
            patched = model(ids).logits
            assert handle.modules
        back = model(ids).logits
    torch.testing.assert_close(patched, stock, rtol=1e-5, atol=1e-5)
    assert torch.equal(back, stock)


def test_a_part_or_a_copy_of_a_patched_model_cannot_be_patched_again():
    import copy

    model, ids, stock = build("llama")
    with hf.use_posenc_rope(model):
        with pytest.raises(ValueError, match=r"model type 'llama': it already holds posenc's RoPE at \['rotary_emb'\]"):
            hf.use_posenc_rope(model.model)
        twin = copy.deepcopy(model)
    with pytest.raises(ValueError, match=r"already holds posenc's RoPE at \['model.rotary_emb'\]"):
        hf.use_posenc_rope(twin)
    assert hf.restore(twin) is True and not hf.is_patched(twin)
    with torch.no_grad():
        assert torch.equal(twin(ids).logits, stock) and torch.equal(model(ids).logits, stock)
    with hf.use_posenc_rope(twin):  # restored: patchable again
        pass
