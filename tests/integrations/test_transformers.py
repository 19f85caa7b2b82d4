"""``posenc.integrations.transformers``: posenc's RoPE switched into transformers models and back.

Models: tiny random-weight models built from configs (nothing downloaded): 2 layers, hidden 128,
2 query heads of width 64 (DeepSeek-V3: a 32-wide RoPE slice), vocabulary 128. Their query and key
projections are scaled by 4 after transformers' init (std 0.02), so that attention is not flat and
the logits depend on the positions.

Checks and tolerances:

(a) float32, positions 0..15: the patched logits equal the stock model's within float32 rounding,
    ``atol = rtol = 1e-5`` (differences seen: at most 3e-7 on logits of size ~0.5).
(b) long positions: the reference is a float64 evaluation of the same weights (the bfloat16
    values, cast), with RoPE angles formed in float64: the *patched* model in float64. The stock
    model in float64 is not one, since transformers' rotary module forms ``position_ids.float() *
    inv_freq`` in float32 whatever the model's dtype (the error measured here); posenc's float64
    tables are checked against the float64 formula in ``test_float64_tables_are_exact``. In float32
    at positions from 200,000, the patched logits are at least 20x closer to it than the stock ones
    (mean |error| ~1e-7 against ~5e-5). In bfloat16 the 16-bit activations of these small models
    are off by ~1e-3, which hides the stock model's angle error at 1e5-1e6 (the two errors differ
    by under 5% there); from positions of 8,000,000 (exact in float32) on, the patched logits are
    closer than the stock ones (mean |error| 1.1-4x smaller). What the attention layers receive
    differs from 200,000 on: posenc's bfloat16 tables are the float64 ones rounded (within half a
    bfloat16 step), the stock ones off by more than a whole step.
(c) ``generate`` with its KV cache, greedy, 6 new tokens: the same tokens as the stock model (float32).
(d) ``remove()``: the stock modules and rotation functions are back (the same objects), and the
    logits equal the stock ones bit for bit.
"""

from __future__ import annotations

import copy
import gc
import json
import subprocess
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import modeling_rope_utils  # noqa: E402

import posenc.integrations.transformers as hf  # noqa: E402
from posenc.functional.rope_scaling import ROPE_SCALINGS  # noqa: E402

VOCAB = 128
_SCALED = ("q_proj", "k_proj", "qkv_proj", "query_key_value", "kv_a_proj", "kv_b_proj")


def _sizes(**overrides):
    sizes = {
        "vocab_size": VOCAB,
        "hidden_size": 128,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 256,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 0,
    }
    return {**sizes, **overrides}


_LONGROPE = {
    "rope_type": "longrope",
    "factor": 4.0,
    "rope_theta": 10000.0,
    "short_factor": [1.0 + i / 32 for i in range(32)],
    "long_factor": [1.0 + i for i in range(32)],
}
_LAYER_TYPES = ["sliding_attention", "full_attention"]

CONFIGS = {
    "llama": lambda: transformers.LlamaConfig(**_sizes()),
    "qwen2": lambda: transformers.Qwen2Config(**_sizes()),
    "qwen3": lambda: transformers.Qwen3Config(**_sizes(head_dim=64)),
    "mistral": lambda: transformers.MistralConfig(
        **_sizes(rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    ),
    "gemma3": lambda: transformers.Gemma3TextConfig(
        **_sizes(
            head_dim=64,
            sliding_window=8,
            layer_types=_LAYER_TYPES,
            rope_parameters={
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            },
        )
    ),
    "phi3": lambda: transformers.Phi3Config(
        **_sizes(
            num_key_value_heads=2,
            max_position_embeddings=512,
            original_max_position_embeddings=128,
            rope_parameters=_LONGROPE,
        )
    ),
    "gpt_neox": lambda: transformers.GPTNeoXConfig(
        **{k: v for k, v in _sizes().items() if k != "num_key_value_heads"}, rotary_pct=0.5
    ),
    "gpt_oss": lambda: transformers.GptOssConfig(
        **_sizes(max_position_embeddings=131072, num_local_experts=4, num_experts_per_tok=2, sliding_window=8)
    ),
    "olmo3": lambda: transformers.Olmo3Config(**_sizes(sliding_window=8, layer_types=_LAYER_TYPES)),
    "deepseek_v3": lambda: transformers.DeepseekV3Config(
        **_sizes(
            num_key_value_heads=2,
            max_position_embeddings=1024,
            moe_intermediate_size=32,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_shared_experts=1,
            first_k_dense_replace=1,
            n_group=1,
            topk_group=1,
            kv_lora_rank=16,
            q_lora_rank=None,
            qk_rope_head_dim=32,
            qk_nope_head_dim=32,
            v_head_dim=32,
            rope_parameters={
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 256,
                "beta_fast": 32,
                "beta_slow": 1,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
                "rope_theta": 10000.0,
            },
        )
    ),
    "qwen2_vl": lambda: transformers.Qwen2VLConfig(
        text_config=_sizes(rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [8, 12, 12]}),
        vision_config={"depth": 1, "embed_dim": 32, "num_heads": 2, "hidden_size": 128, "mlp_ratio": 2},
        image_token_id=VOCAB - 8,
        video_token_id=VOCAB - 7,
        vision_start_token_id=VOCAB - 6,
    ),
}
MODELS = sorted(CONFIGS)


def build(name: str, dtype: torch.dtype = torch.float32, config=None):
    torch.manual_seed(0)
    auto = transformers.AutoModelForImageTextToText if name == "qwen2_vl" else transformers.AutoModelForCausalLM
    model = auto.from_config(config or CONFIGS[name](), dtype=dtype).eval()
    with torch.no_grad():
        for param_name, param in model.named_parameters():
            if any(part in param_name for part in _SCALED):
                param.mul_(4.0)
    model.generation_config.eos_token_id = None  # generate exactly max_new_tokens
    return model


def _ids(length: int = 16, batch: int = 2) -> torch.Tensor:
    return torch.randint(0, VOCAB - 8, (batch, length), generator=torch.Generator().manual_seed(1))


def _positions(name: str, start: int, length: int, batch: int) -> torch.Tensor:
    """``position_ids``: ``[b, s]``; for Qwen2-VL (t, h, w) rows that differ, ``[3, b, s]``."""
    steps = torch.arange(length)
    if name != "qwen2_vl":
        return (start + steps).expand(batch, -1)
    return (start + torch.stack((steps, steps // 2, steps % 5)))[:, None].expand(3, batch, -1)


def _logits(model, ids: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
    with torch.no_grad():
        return model(ids, position_ids=positions).logits


def _rotary_modules(model) -> dict:
    """The text stack's rotary modules in the model's forward (not the stock one kept inside
    posenc's; Qwen2-VL's vision encoder keeps its own)."""
    return {
        path: m
        for path, m in model.named_modules()
        if type(m).__name__.endswith("RotaryEmbedding") and "Vision" not in type(m).__name__ and ".stock" not in path
    }


def _globals(model) -> dict:
    """Every ``apply_rotary_pos_emb`` function of the modelling module of ``model``."""
    module = sys.modules[type(model).__module__]
    return {name: getattr(module, name) for name in dir(module) if name.startswith("apply_rotary_pos_emb")}


@pytest.mark.parametrize("name", MODELS)
def test_float32_short_positions_match_stock(name):
    model = build(name)
    ids, positions = _ids(), _positions(name, 0, 16, 2)
    stock = _logits(model, ids, positions)
    with hf.use_posenc_rope(model) as handle:
        assert hf.is_patched(model)
        patched = _logits(model, ids, positions)
        assert all(isinstance(m, hf.PosencRotaryEmbedding) for m in _rotary_modules(model).values())
        forms = [m.form for m in _rotary_modules(model).values()]
    torch.testing.assert_close(patched, stock, rtol=1e-5, atol=1e-5)
    assert not hf.is_patched(model) and handle.removed
    want_types = ("full_attention", "sliding_attention") if name in ("gemma3", "olmo3") else ("all",)
    assert [tuple(sorted(t)) for t in handle.layer_types.values()] == [want_types]
    module = type(model).__module__.rsplit(".", 1)[0]
    if name == "gpt_oss":  # (cos, sin) [b, s, r/2]: its own rotation stays
        assert handle.kernel_functions == () and forms == ["cos_sin_half"]
    else:
        assert handle.kernel_functions == (f"{module}.modeling_{name}.apply_rotary_pos_emb",)
        assert forms == ["cos_sin"]


def _mean_error(model, reference: torch.Tensor, ids: torch.Tensor, positions: torch.Tensor) -> float:
    return float((_logits(model, ids, positions).double() - reference).abs().mean())


@pytest.mark.parametrize("name", MODELS)
def test_long_positions_closer_to_float64_evaluation(name):
    model = build(name, torch.bfloat16)
    reference_model = copy.deepcopy(model).to(torch.float64)
    if name in ("deepseek_v3", "gpt_oss"):
        reference_model.set_experts_implementation("eager")  # grouped_mm has no float64 kernel
    hf.use_posenc_rope(reference_model)  # released when the model is collected
    ids = _ids(32, 1)
    for dtype, start, margin in ((torch.float32, 200_000, 20.0), (torch.bfloat16, 8_000_000, 1.0)):
        positions = _positions(name, start, 32, 1)
        reference = _logits(reference_model, ids, positions)
        tested = model if dtype == torch.bfloat16 else copy.deepcopy(model).to(dtype)
        stock = _mean_error(tested, reference, ids, positions)
        with hf.use_posenc_rope(tested):
            patched = _mean_error(tested, reference, ids, positions)
        assert patched * margin < stock, (dtype, start, patched, stock)


def _tables(model, positions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Every (cos, sin) table the text stack's rotary module hands the attention layers, stacked."""
    (rotary,) = _rotary_modules(model).values()
    types = getattr(rotary, "ropes", None) or getattr(rotary, "rope_type", None)
    layer_types = sorted(types.keys()) if hasattr(types, "keys") else [None]
    x = torch.zeros(1, dtype=dtype)
    with torch.no_grad():
        out = [rotary(x, positions, *([] if t in (None, "all") else [t])) for t in layer_types]
    return torch.stack([t.double() for pair in out for t in pair])


@pytest.mark.parametrize("name", MODELS)
def test_bfloat16_tables_past_100k_are_closer_to_float64(name):
    """In bfloat16 at positions from 200,000 the tables posenc's module hands the attention layers
    are the float64 ones rounded (within half a bfloat16 step), while the stock module's are off by
    more than a whole step somewhere (its float32 angles are off by up to ~0.01 rad there)."""
    model = build(name, torch.bfloat16)
    positions = _positions(name, 200_000, 64, 1)
    stock = _tables(model, positions, torch.bfloat16)
    with hf.use_posenc_rope(model):
        exact = _tables(model, positions, torch.float64)
        patched = _tables(model, positions, torch.bfloat16)
    half_step = torch.ldexp(torch.ones_like(exact), torch.frexp(exact).exponent - 9)  # half a bf16 ulp
    stock_error, patched_error = (float(((t - exact).abs() / half_step).max()) for t in (stock, patched))
    assert patched_error <= 1.0 + 1e-4  # the float64 value, rounded (through float32)
    assert stock_error > 2.0


@pytest.mark.parametrize("name", MODELS)
def test_generate_with_kv_cache_gives_stock_tokens(name):
    model = build(name)
    prompt = _ids(8, 1)
    with torch.no_grad():
        stock = model.generate(prompt, max_new_tokens=6, do_sample=False, use_cache=True)
        with hf.use_posenc_rope(model):
            patched = model.generate(prompt, max_new_tokens=6, do_sample=False, use_cache=True)
    assert stock.shape == (1, 14)
    assert torch.equal(patched, stock)


@pytest.mark.parametrize("name", MODELS)
def test_remove_restores_stock_exactly(name):
    model = build(name)
    ids = _ids()
    stock, modules, functions = _logits(model, ids), _rotary_modules(model), _globals(model)
    handle = hf.use_posenc_rope(model)
    dispatched = _globals(model)["apply_rotary_pos_emb"] is not functions["apply_rotary_pos_emb"]
    assert dispatched == (name != "gpt_oss")
    _logits(model, ids, _positions(name, 100_000, 16, 2))  # long tables, then back
    handle.remove()
    handle.remove()  # a second remove does nothing
    assert _rotary_modules(model) == modules and all(_rotary_modules(model)[p] is m for p, m in modules.items())
    assert _globals(model) == functions
    assert torch.equal(_logits(model, ids), stock)
    hf.use_posenc_rope(model)
    assert hf.restore(model) is True and hf.restore(model) is False
    assert torch.equal(_logits(model, ids), stock)


def test_float64_tables_are_exact():
    """Llama's patched tables at positions near 8e6 equal ``cos(p * base^(-2i/d))`` formed in float64
    (to 1e-9; the float32 stock tables are off by up to 0.5 there)."""
    model = build("llama", torch.float64)
    positions = torch.arange(8_000_000, 8_000_016)[None]
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    angles = torch.cat([positions[..., None].double() * inv_freq] * 2, dim=-1)  # [1, s, 64]
    stock_cos, _ = model.model.rotary_emb(torch.zeros(1, dtype=torch.float64), positions)
    with hf.use_posenc_rope(model):
        cos, sin = model.model.rotary_emb(torch.zeros(1, dtype=torch.float64), positions)
    assert cos.dtype == torch.float64
    torch.testing.assert_close(cos, angles.cos(), rtol=0, atol=1e-9)
    torch.testing.assert_close(sin, angles.sin(), rtol=0, atol=1e-9)
    assert float((stock_cos - angles.cos()).abs().max()) > 0.1


def test_half_precision_tables_are_float64_rounded_once_to_float32_then_to_the_dtype():
    model = build("llama", torch.bfloat16)
    positions = torch.arange(300_000, 300_008)[None]
    with hf.use_posenc_rope(model):
        cos, sin = model.model.rotary_emb(torch.zeros(1, dtype=torch.bfloat16), positions)
        rope = model.model.rotary_emb.ropes["all"]
    want_cos, want_sin = rope.cos_sin(positions, dtype=torch.float32)
    assert cos.dtype == sin.dtype == torch.bfloat16
    assert torch.equal(cos, want_cos.bfloat16()) and torch.equal(sin, want_sin.bfloat16())


def test_rotation_runs_through_posenc_kernels_and_leaves_other_models_alone(monkeypatch):
    """The dispatcher rotates the patched model's tables with posenc.kernels.rope (counted), while
    a second, stock Llama in the same process runs transformers' own rotation bit for bit."""
    calls = []
    kernel = hf.rotate
    monkeypatch.setattr(hf, "rotate", lambda *args, **kwargs: calls.append(1) or kernel(*args, **kwargs))
    patched, other = build("llama"), build("llama")
    ids = _ids()
    other_before = _logits(other, ids)
    with hf.use_posenc_rope(patched):
        calls.clear()  # (the check at patch time rotates too)
        _logits(patched, ids)
        assert len(calls) == 2 * 2  # q and k in each of 2 layers
        assert torch.equal(_logits(other, ids), other_before)
        assert len(calls) == 4


def test_a_model_dropped_without_remove_gives_the_rotation_function_back():
    model = build("llama")
    original = _globals(model)["apply_rotary_pos_emb"]
    hf.use_posenc_rope(model)
    assert _globals(model)["apply_rotary_pos_emb"] is not original
    del model
    gc.collect()
    assert sys.modules[original.__module__].apply_rotary_pos_emb is original


def test_two_handles_share_the_dispatcher_until_the_last_is_removed():
    first, second = build("llama"), build("llama")
    original = _globals(first)["apply_rotary_pos_emb"]
    one, two = hf.use_posenc_rope(first), hf.use_posenc_rope(second)
    one.remove()
    assert _globals(first)["apply_rotary_pos_emb"] is not original  # still serving `second`
    two.remove()
    assert _globals(first)["apply_rotary_pos_emb"] is original


@pytest.mark.parametrize("model_type", ["gptj", "codegen"])
def test_gptj_half_width_tables_and_positions_past_its_table(model_type):
    """GPT-J's and CodeGen's rotary module returns ``(sin, cos) [b, s, r/2]`` from a table of
    ``max_position_embeddings`` rows (float32 angles); posenc's returns the same form, equal to
    float32 rounding at short positions, and serves positions past that table."""
    sizes = {"vocab_size": VOCAB, "n_embd": 128, "n_layer": 2, "n_head": 2, "rotary_dim": 32, "n_positions": 64}
    config = transformers.AutoConfig.for_model(model_type, **sizes)
    model = build(model_type, config=config)
    ids = _ids()
    stock = _logits(model, ids)
    with hf.use_posenc_rope(model) as handle:
        torch.testing.assert_close(_logits(model, ids), stock, rtol=1e-5, atol=1e-5)
        assert handle.kernel_functions == ()  # its apply_rotary_pos_emb(tensor, sin, cos) stays
        sin, cos = model.transformer.rotary_emb(torch.zeros(1), torch.arange(100, 104)[None])
        angles = torch.arange(100, 104).double()[:, None] / 10000.0 ** (torch.arange(0, 32, 2).double() / 32)
        torch.testing.assert_close(sin[0].double(), angles.sin(), rtol=0, atol=1e-6)  # [s, r/2]
        torch.testing.assert_close(cos[0].double(), angles.cos(), rtol=0, atol=1e-6)
        assert _logits(model, ids, torch.arange(100, 116).expand(2, -1)).isfinite().all()
    with pytest.raises(IndexError):  # the stock table has 64 rows
        _logits(model, ids, torch.arange(100, 116).expand(2, -1))


def test_kernel_false_keeps_transformers_rotation():
    model = build("qwen2")
    original = _globals(model)["apply_rotary_pos_emb"]
    with hf.use_posenc_rope(model, kernel=False) as handle:
        assert handle.kernel_functions == ()
        assert _globals(model)["apply_rotary_pos_emb"] is original
        assert isinstance(model.model.rotary_emb, hf.PosencRotaryEmbedding)


def _unchanged(model, check):
    ids = _ids()
    stock, modules, functions = _logits(model, ids), _rotary_modules(model), _globals(model)
    check()
    assert not hf.is_patched(model)
    assert all(_rotary_modules(model)[p] is m for p, m in modules.items()) and _globals(model) == functions
    assert torch.equal(_logits(model, ids), stock)


def _refuses(model, pattern):
    def check():
        with pytest.raises(ValueError, match=pattern):
            hf.use_posenc_rope(model)

    _unchanged(model, check)


def test_unknown_model_type_is_refused_and_model_unchanged():
    config = transformers.AutoConfig.for_model("nanochat", **_sizes())
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    _refuses(model, r"does not know the rotary embedding of model type 'nanochat' \(NanoChatRotaryEmbedding at")


def test_model_without_rotary_module_is_refused_by_type():
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    _refuses(model, r"model type 'gpt2' \(GPT2LMHeadModel\) has no rotary-embedding module")


def test_rotary_module_posenc_does_not_reproduce_is_refused_and_model_unchanged():
    """A Llama whose frequencies were edited (say, by custom code) no longer matches its config."""
    model = build("llama")
    model.model.rotary_emb.inv_freq.mul_(1.5)
    _refuses(
        model,
        r"posenc does not reproduce the rotary embedding of model type 'llama' .*differ from its "
        r"LlamaRotaryEmbedding's by up to .* The model is unchanged",
    )


def test_patching_twice_is_refused():
    model = build("llama")
    with hf.use_posenc_rope(model):
        with pytest.raises(ValueError, match=r"already uses posenc's RoPE"):
            hf.use_posenc_rope(model)
    with pytest.raises(TypeError, match=r"must be a transformers model"):
        hf.use_posenc_rope("llama")


@pytest.fixture
def registered():
    names = hf.register_rope_types()
    yield names
    hf.unregister_rope_types()


def test_registered_ntk_scaling_builds_models_that_match_posenc(registered):
    """Static NTK-aware scaling (bloc97 2023: base * factor^(d / (d - 2))), absent from
    transformers, named in a config: transformers' own rotary module computes it (through the
    registered function) and the model equals its patched form."""
    missing = sorted(set(ROPE_SCALINGS) - set(modeling_rope_utils.ROPE_INIT_FUNCTIONS) - {"default"})
    assert missing == [] and "ntk" in registered
    assert hf.register_rope_types() == registered  # idempotent
    config = transformers.LlamaConfig(**_sizes(rope_parameters={"rope_type": "ntk", "factor": 4.0, "rope_theta": 1e4}))
    model = build("llama", config=config)
    base = 1e4 * 4.0 ** (64 / 62)
    want = 1.0 / base ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    torch.testing.assert_close(model.model.rotary_emb.inv_freq, want.float(), rtol=1e-6, atol=0)
    ids = _ids()
    stock = _logits(model, ids)
    with hf.use_posenc_rope(model):
        torch.testing.assert_close(_logits(model, ids), stock, rtol=1e-5, atol=1e-5)
    # transformers wraps the ValueError of validate_rope in its own StrictDataclassClassValidationError
    with pytest.raises(Exception, match=r"rope scaling 'ntk' needs \['factor'\]"):
        transformers.LlamaConfig(**_sizes(rope_parameters={"rope_type": "ntk", "rope_theta": 1e4}))


def test_unregister_takes_out_only_posenc_rules():
    stock = dict(modeling_rope_utils.ROPE_INIT_FUNCTIONS)
    names = hf.register_rope_types()
    assert set(modeling_rope_utils.ROPE_INIT_FUNCTIONS) == set(stock) | set(names)
    assert all(modeling_rope_utils.ROPE_INIT_FUNCTIONS[n] is f for n, f in stock.items())
    assert hf.unregister_rope_types() == names
    assert modeling_rope_utils.ROPE_INIT_FUNCTIONS == stock
    assert not hasattr(modeling_rope_utils.RotaryEmbeddingConfigMixin, "_validate_ntk_rope_parameters")


def test_importing_the_integration_does_not_import_transformers():
    code = (
        "import sys, json\nimport posenc.integrations, posenc.integrations.transformers\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'transformers')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_a_bare_decoder_patched_and_dropped_is_collected_and_releases_the_dispatcher():
    """A ``LlamaModel`` holds its rotary module itself: the handle must not keep it alive (it did,
    through the module it swapped into), or the rotation function stays wrapped for good."""
    import weakref

    model = transformers.LlamaModel(CONFIGS["llama"]())
    original = _globals(model)["apply_rotary_pos_emb"]
    handle = hf.use_posenc_rope(model)
    alive = weakref.ref(model)
    del model, handle
    gc.collect()
    assert alive() is None
    assert sys.modules[original.__module__].apply_rotary_pos_emb is original


def test_kernel_false_is_kept_while_another_model_holds_the_dispatcher(monkeypatch):
    """Model A (kernel=True) wraps Llama's rotation function; model B of the same type patched with
    kernel=False still rotates with transformers' function (posenc's tables, no posenc kernel)."""
    calls = []
    kernel = hf.rotate
    monkeypatch.setattr(hf, "rotate", lambda *args, **kwargs: calls.append(1) or kernel(*args, **kwargs))
    first, second = build("llama"), build("llama")
    with hf.use_posenc_rope(first), hf.use_posenc_rope(second, kernel=False) as handle:
        assert handle.kernel_functions == ()
        calls.clear()
        _logits(second, _ids())
        assert calls == []
        _logits(first, _ids())
        assert len(calls) == 4


def test_a_copy_of_a_patched_model_is_restored():
    model = build("llama")
    ids = _ids()
    stock = _logits(model, ids)
    with hf.use_posenc_rope(model):
        twin = copy.deepcopy(model)
    assert hf.is_patched(twin) and not hf.is_patched(model)
    assert hf.restore(twin) is True and not hf.is_patched(twin)
    assert type(twin.model.rotary_emb).__name__ == "LlamaRotaryEmbedding"
    torch.testing.assert_close(_logits(twin, ids), stock, rtol=0, atol=0)
    assert hf.restore(twin) is False


def test_a_model_on_the_meta_device_is_refused_by_type():
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(CONFIGS["llama"]())
    with pytest.raises(ValueError, match="model type 'llama': its rotary buffers are on the meta device"):
        hf.use_posenc_rope(model)
    assert not hf.is_patched(model)
