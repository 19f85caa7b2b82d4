"""Position-dependent query temperature (issue 25, item 5) against transformers 5.

References: Llama 4's ``attn_temperature_tuning`` as ``Llama4TextAttention.forward`` applies it on a
NoPE layer (run with random weights, full sequence and token-by-token through a ``DynamicCache``),
and Mistral's ``get_llama_4_attn_scale`` (``modeling_ministral3``, ``modeling_mistral4``) called
directly. Factors are compared exactly (float32, whole-number positions); attention outputs at
atol 2e-6.
"""

from __future__ import annotations

import math

import pytest
import torch

import posenc
from posenc.functional import QueryTemperature, query_temperature
from posenc.functional.temperature import scale_queries

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402
from transformers.cache_utils import DynamicCache  # noqa: E402
from transformers.models.llama4 import modeling_llama4 as llama4  # noqa: E402
from transformers.models.ministral3 import modeling_ministral3 as ministral3  # noqa: E402
from transformers.models.mistral4 import modeling_mistral4 as mistral4  # noqa: E402


def test_llama4_factor_steps_at_multiples_of_floor_scale() -> None:
    """Values pinned from Llama 4's formula ``log1p(floor((p + 1) / 8192)) * 0.1 + 1``: factor 1 up
    to position 8190, ``1 + 0.1 log 2`` from 8191 (the ``+ 1``), ``1 + 0.1 log 3`` from 16383."""
    positions = torch.tensor([0, 8190, 8191, 16382, 16383, 10**6])
    got = QueryTemperature.llama4().factor(positions)
    want = [1.0, 1.0, 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(3)]
    want.append(1 + 0.1 * math.log(1 + (10**6 + 1) // 8192))
    torch.testing.assert_close(got, torch.tensor(want), atol=0, rtol=0)
    assert got.dtype == torch.float32 and got.shape == positions.shape


@pytest.mark.parametrize("module", [ministral3, mistral4], ids=["ministral3", "mistral4"])
def test_llama_4_scaling_beta_equals_transformers(module) -> None:
    """Mistral's factor, ``[b, s]`` positions up to 2**20 around each step of 16384 (Ministral 3's
    default original length), equals ``get_llama_4_attn_scale`` to one float32 rounding (1.2e-7:
    transformers takes the log in float32) and the float64 evaluation of its formula, rounded once,
    exactly; its ``[b, 1, s, 1]`` broadcast is what :func:`scale_queries` multiplies by."""
    steps = torch.arange(0, 2**20, 16384)
    positions = torch.stack([steps, steps - 1, steps + 1]).clamp_min(0)  # [b=3, s]
    want = module.get_llama_4_attn_scale(positions, 0.1, 16384)  # [b, 1, s, 1]
    exact = module.get_llama_4_attn_scale(positions.double(), 0.1, 16384).float()
    scale = QueryTemperature.llama_4_scaling(beta=0.1, original_max_position_embeddings=16384)
    torch.testing.assert_close(scale.factor(positions), want[:, 0, :, 0], atol=1.2e-7, rtol=0)
    torch.testing.assert_close(scale.factor(positions), exact[:, 0, :, 0], atol=0, rtol=0)
    q = torch.randn(3, 2, positions.shape[1], 4)
    torch.testing.assert_close(scale_queries(q, positions, scale), q * exact, atol=0, rtol=0)


def test_float_positions_and_padding_slots() -> None:
    """Float positions take the same floor (2.5 / 2 -> 1); positions below ``-offset`` (left padding)
    get factor 1 where the log would be of 0 or less; positions given as a length count from 0."""
    got = query_temperature(torch.tensor([-7.0, -1.0, 1.9, 2.5]), beta=0.5, floor_scale=2.0)
    torch.testing.assert_close(got, torch.tensor([1.0, 1.0, 1.0, 1 + 0.5 * math.log(2)]))
    torch.testing.assert_close(
        query_temperature(5, beta=1.0, floor_scale=2.0, offset=1.0)[-1], torch.tensor(1 + math.log(3))
    )


def test_bad_inputs_name_what_is_accepted() -> None:
    with pytest.raises(ValueError, match="floor_scale must be a positive finite number, got 0"):
        QueryTemperature(beta=0.1, floor_scale=0)
    with pytest.raises(TypeError, match="beta must be a finite number, got '0.1'"):
        QueryTemperature(beta="0.1", floor_scale=8)
    with pytest.raises(TypeError, match="query_scale must be None, a posenc.functional.QueryTemperature"):
        posenc.Attention(8, 2, query_scale=0.5)
    attn = posenc.Attention(8, 2, query_scale=lambda p: torch.ones(3))
    with pytest.raises(ValueError, match=r"one factor per query position, shape \[s\] or \[b, s\] with b=1, s=4"):
        attn(torch.randn(1, 4, 8))
    with pytest.raises(ValueError, match="a query scale is a function of 1-D positions"):
        posenc.Attention(8, 2, encoding="rope_axial", query_scale=QueryTemperature.llama4())(torch.randn(1, 4, 8))


def _llama4_nope_pair(floor_scale: int) -> tuple[torch.nn.Module, posenc.Attention]:
    """Transformers' Llama 4 attention of a NoPE layer (``no_rope_layers[0] = 0``) with random
    weights, and ``posenc.Attention`` with the same weights and the Llama 4 temperature."""
    config = CONFIG_MAPPING["llama4_text"](
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        num_hidden_layers=2,
        no_rope_layers=[0, 1],
        floor_scale=floor_scale,
        attn_scale=0.25,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    hf = llama4.Llama4TextAttention(config, layer_idx=0).eval()
    assert not hf.use_rope and hf.attn_temperature_tuning
    ours = posenc.Attention(
        32,
        4,
        num_kv_heads=2,
        head_dim=8,
        causal=True,
        query_scale=QueryTemperature.llama4(floor_scale=floor_scale, attn_scale=0.25),
    ).eval()
    with torch.no_grad():
        ours.qkv.weight.copy_(torch.cat([hf.q_proj.weight, hf.k_proj.weight, hf.v_proj.weight]))
        ours.proj.weight.copy_(hf.o_proj.weight)
        ours.proj.bias.zero_()
    return hf, ours


def _causal(sq: int, sk: int) -> torch.Tensor:
    """Additive mask ``[1, 1, sq, sk]`` of the last ``sq`` queries over ``sk`` keys."""
    allowed = torch.arange(sk)[None, :] <= torch.arange(sk - sq, sk)[:, None]
    return torch.zeros(1, 1, sq, sk).masked_fill(~allowed, float("-inf"))


def test_llama4_nope_layer_equals_transformers_full_and_decoding() -> None:
    """A Llama 4 NoPE layer with ``floor_scale=3`` (steps at positions 2, 5, 8, ...): the full
    forward of 7 tokens and then 5 tokens decoded one at a time through each side's KV cache equal
    transformers' (atol 2e-6). The factors differ from 1 on all but the first two positions, so a
    temperature from cache-relative positions (restarting at 0) would fail the decoding half."""
    hf, ours = _llama4_nope_pair(floor_scale=3)
    x = torch.randn(2, 12, 32)
    with torch.no_grad():
        want = hf(x, None, _causal(12, 12))[0]
        torch.testing.assert_close(ours(x), want, atol=2e-6, rtol=0)
        cache, ours_cache = DynamicCache(), posenc.KVCache()
        hf_steps = [hf(x[:, :7], None, _causal(7, 7), cache=cache)[0]]
        our_steps = [ours(x[:, :7], cache=ours_cache)]
        for t in range(7, 12):
            hf_steps.append(hf(x[:, t : t + 1], None, _causal(1, t + 1), cache=cache)[0])
            our_steps.append(ours(x[:, t : t + 1], cache=ours_cache))
    torch.testing.assert_close(torch.cat(hf_steps, 1), want, atol=2e-6, rtol=0)
    torch.testing.assert_close(torch.cat(our_steps, 1), want, atol=2e-6, rtol=0)
    without = posenc.Attention(32, 4, num_kv_heads=2, head_dim=8, causal=True).eval()
    without.load_state_dict(ours.state_dict())
    with torch.no_grad():
        assert (without(x) - want).abs().max() > 1e-3  # the temperature is what makes them equal


def test_query_scale_follows_the_dtype_of_the_queries() -> None:
    """bf16 queries are multiplied in float32 and rounded once (Llama 4's order): equal to
    ``(q.float() * factor).bfloat16()`` exactly."""
    q = torch.randn(1, 2, 5, 4, dtype=torch.bfloat16)
    scale = QueryTemperature(beta=0.3, floor_scale=2)
    want = (q.float() * scale.factor(torch.arange(5))[:, None]).bfloat16()
    got = scale.scale(q, torch.arange(5))
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, atol=0, rtol=0)
