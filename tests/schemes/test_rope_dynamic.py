"""Length-dependent RoPE (dynamic NTK, LongRoPE) in the ``Rope`` module: HF parity, no mutation, compile.

References: transformers' ``LlamaRotaryEmbedding`` with ``dynamic_rope_update`` (dynamic) and
``Phi3RotaryEmbedding`` (longrope). HF forms the angles ``position * inv_freq`` in float32, posenc in
float64 reduced mod 2π, so cos/sin are compared at ``2e-6 + 1.5e-7 * largest angle`` (two float32
roundings of the angle); frequencies and attention scales at 1e-6 relative.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc.schemes.rope import Rope

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig, Phi3Config  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding  # noqa: E402
from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding  # noqa: E402

ORIGINAL = 256
DYNAMIC = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": ORIGINAL}
SHORT = [1.0 + 0.05 * i for i in range(16)]
LONG = [1.0 + 4.0 * i for i in range(16)]
LONGROPE = {
    "rope_type": "longrope",
    "original_max_position_embeddings": ORIGINAL,
    "factor": 16.0,
    "short_factor": SHORT,
    "long_factor": LONG,
}


def hf_dynamic() -> LlamaRotaryEmbedding:
    config = LlamaConfig(
        hidden_size=64,
        num_attention_heads=2,
        num_hidden_layers=1,
        vocab_size=8,
        max_position_embeddings=ORIGINAL,
        rope_parameters={"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0},
    )
    return LlamaRotaryEmbedding(config)


def hf_longrope() -> Phi3RotaryEmbedding:
    config = Phi3Config(
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_hidden_layers=1,
        vocab_size=8,
        pad_token_id=0,
        max_position_embeddings=16 * ORIGINAL,
        original_max_position_embeddings=ORIGINAL,
        rope_scaling={"type": "longrope", "short_factor": SHORT, "long_factor": LONG},
    )
    return Phi3RotaryEmbedding(config)


def assert_tables_close(ours: tuple, ref: tuple, max_angle: float) -> None:
    tol = 2e-6 + 1.5e-7 * max_angle
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b.float(), rtol=0, atol=tol)


@pytest.mark.parametrize("length", [100, ORIGINAL, ORIGINAL + 1, 1000, 3000])
@pytest.mark.parametrize("scaling, reference", [(DYNAMIC, hf_dynamic), (LONGROPE, hf_longrope)])
def test_cos_sin_match_hf_below_and_above_the_original_length(scaling, reference, length):
    rope = posenc.create("rope", dim=32, scaling=scaling)
    hf = reference()
    positions = torch.arange(length)[None]  # [1, s]
    ref = hf(torch.zeros(1), positions)
    assert_tables_close(rope.cos_sin(positions), ref, max_angle=length)
    torch.testing.assert_close(rope.inv_freq_at(length), hf.inv_freq.double(), rtol=1e-6, atol=0)
    assert rope.attention_scale == pytest.approx(hf.attention_scaling, rel=1e-12)
    if length <= ORIGINAL:
        assert rope.inv_freq_at(length) is rope.inv_freq


def test_growing_lengths_match_one_hf_module():
    """HF keeps state across calls; for growing lengths it recomputes each time, as posenc does."""
    rope, hf = posenc.create("rope", dim=32, scaling=DYNAMIC), hf_dynamic()
    for length in (50, 400, 900, 2000):
        positions = torch.arange(length)[None]
        assert_tables_close(rope.cos_sin(positions), hf(torch.zeros(1), positions), max_angle=length)


def test_posenc_depends_on_the_current_call_only():
    """The documented difference: after a 2000-token call, HF keeps those frequencies for 400 tokens.

    posenc gives at 400 what a fresh HF module gives at 400.
    """
    rope, hf = posenc.create("rope", dim=32, scaling=DYNAMIC), hf_dynamic()
    hf(torch.zeros(1), torch.arange(2000)[None])
    stale = hf(torch.zeros(1), torch.arange(400)[None])
    fresh = hf_dynamic()(torch.zeros(1), torch.arange(400)[None])
    ours = rope.cos_sin(torch.arange(400)[None])
    assert_tables_close(ours, fresh, max_angle=400)
    assert (ours[0] - stale[0].float()).abs().max() > 1e-2


def _buffers(module: torch.nn.Module) -> dict:
    return {name: (buf.data_ptr(), buf.clone()) for name, buf in module.named_buffers()}


def assert_buffers_unchanged(module: torch.nn.Module, before: dict) -> None:
    after = dict(module.named_buffers())
    assert after.keys() == before.keys()
    for name, (ptr, value) in before.items():
        assert after[name].data_ptr() == ptr and torch.equal(after[name], value), name


@pytest.mark.parametrize("scaling", [DYNAMIC, LONGROPE])
def test_long_calls_change_no_buffer_and_the_cache_holds_short_rows(scaling):
    """Eagerly the cache may grow, but only with short rows and never past the original length."""
    rope = posenc.create("rope", dim=32, scaling=scaling)
    q, k = torch.randn(1, 2, 8, 32), torch.randn(1, 2, 8, 32)
    frequencies = {name: (buf.data_ptr(), buf.clone()) for name, buf in rope.named_buffers() if "inv_freq" in name}
    for start in (0, 100, ORIGINAL - 8, ORIGINAL - 4, 900, 5000):
        positions = torch.arange(start, start + 8)
        rope.rotate(q, k, positions, positions)
        rope.cos_sin(positions)
    for name, (ptr, value) in frequencies.items():
        buf = rope.get_buffer(name)
        assert buf.data_ptr() == ptr and torch.equal(buf, value), name
    assert rope._cos_sin.shape[0] == ORIGINAL  # grown to the short rows asked for, no further
    short = rope._build(torch.arange(ORIGINAL))  # default / short-factor rows, built directly
    torch.testing.assert_close(rope._cos_sin, short, rtol=0, atol=0)


@pytest.mark.parametrize("scaling", [DYNAMIC, LONGROPE])
@pytest.mark.parametrize("start, length", [(0, 40), (200, 56), (200, 57), (250, 30), (1000, 5)])
def test_cached_equals_uncached_across_the_switch(scaling, start, length):
    """Rotation through the cache equals tables built directly with ``inv_freq_at(1 + last position)``."""
    rope = posenc.create("rope", dim=32, scaling=scaling)
    q, k = torch.randn(2, 2, length, 32, dtype=torch.float64), torch.randn(2, 2, length, 32, dtype=torch.float64)
    positions = torch.arange(start, start + length)
    got_q, got_k = rope.rotate(q.float(), k.float(), positions, positions)
    cos, sin = posenc.functional.rope_cos_sin(
        positions, rope.inv_freq_at(start + length), attention_scale=rope.attention_scale
    )
    torch.testing.assert_close(got_q, posenc.functional.apply_rope(q.float(), cos, sin), rtol=0, atol=1e-6)
    torch.testing.assert_close(got_k, posenc.functional.apply_rope(k.float(), cos, sin), rtol=0, atol=1e-6)
    if start == 0:  # default positions give the same
        default_q, _ = rope.rotate(q.float(), k.float())
        torch.testing.assert_close(default_q, got_q, rtol=0, atol=0)


def test_queries_and_keys_share_frequencies_so_scores_stay_relative():
    """A decoding step past the original length: q at 300 and its keys 0..300 turn with one inv_freq."""
    rope = posenc.create("rope", dim=32, scaling=DYNAMIC)
    k = torch.randn(1, 1, 1, 32).expand(1, 1, 301, 32)
    q = torch.randn(1, 1, 1, 32)
    rq, rk = rope.rotate(q, k, torch.tensor([300]), torch.arange(301))
    scores = (rq @ rk.transpose(-1, -2))[0, 0, 0]  # [301], identical keys: depends on 300 - n only
    rq2, rk2 = rope.rotate(q, k, torch.tensor([300]) + 0.0, torch.arange(301) + 0.0)
    torch.testing.assert_close((rq2 @ rk2.transpose(-1, -2))[0, 0, 0], scores, rtol=1e-5, atol=1e-5)
    inv = rope.inv_freq_at(301)
    cos, sin = posenc.functional.rope_cos_sin(torch.arange(301), inv)
    rk_ref = posenc.functional.apply_rope(k, cos, sin)
    torch.testing.assert_close(rk, rk_ref, rtol=0, atol=1e-6)


def test_module_needs_the_original_length():
    with pytest.raises(ValueError, match="'dynamic' needs 'original_max_position_embeddings'"):
        posenc.create("rope", dim=32, scaling={"rope_type": "dynamic", "factor": 2.0})


def _compiled_matches_eager(rope: Rope, backend: str) -> None:
    torch._dynamo.reset()
    q, k = torch.randn(1, 2, 16, 32), torch.randn(1, 2, 16, 32)
    starts = (0, 100, ORIGINAL - 16, ORIGINAL - 15, 700)  # short, at the switch, long
    want = {
        start: rope.rotate(q, k, torch.arange(start, start + 16), torch.arange(start, start + 16)) for start in starts
    }  # eager first: it may grow the cache
    before = _buffers(rope)

    def step(q, k, positions):
        return rope.rotate(q, k, positions, positions)

    compiled = torch.compile(step, backend=backend, fullgraph=True)
    for start in starts:
        got = compiled(q, k, torch.arange(start, start + 16))
        for a, b in zip(got, want[start]):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert_buffers_unchanged(rope, before)


@pytest.mark.parametrize("scaling", [DYNAMIC, LONGROPE])
def test_compiled_rotation_is_the_eager_one_and_mutates_nothing(scaling):
    """``fullgraph=True``: no graph break, so no buffer assignment inside the compiled forward."""
    _compiled_matches_eager(posenc.create("rope", dim=32, scaling=scaling), "aot_eager")


@pytest.mark.slow
@pytest.mark.parametrize("scaling", [DYNAMIC, LONGROPE])
def test_inductor_compiled_rotation_is_the_eager_one(scaling):
    _compiled_matches_eager(posenc.create("rope", dim=32, scaling=scaling), "inductor")


@pytest.mark.slow
def test_compiled_attention_with_dynamic_rope_matches_eager():
    torch._dynamo.reset()
    attn = posenc.Attention(64, 2, encoding=posenc.create("rope", dim=32, scaling=DYNAMIC), causal=True).eval()
    compiled = torch.compile(attn, backend="aot_eager")
    xs = [torch.randn(1, length, 64) for length in (64, 400)]
    want = [attn(x) for x in xs]
    before = _buffers(attn.encoding)
    for x, expected in zip(xs, want):
        torch.testing.assert_close(compiled(x), expected, rtol=1e-5, atol=1e-5)
    assert_buffers_unchanged(attn.encoding, before)
