"""The relative and bias family since 2022 (KERPLE, Sandwich, FIRE, DPB, CoPE, forgetting attention)
through :class:`posenc.Attention`: causal and, where the scheme defines it, bidirectional (a clear
error where it does not), grouped-query attention, incremental decoding equal to the full forward,
gradients reaching every parameter through the path training takes, and bad sizes named.

Each scheme's parameters are redrawn away from their initialisation (CoPE's table and
FIRE's MLP start near zero, forgetting's gates near 1), so that a wrong distance, offset or head
would change the output by far more than the tolerance.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import flex
from posenc.kernels import flex as flex_kernel
from tests.all_schemes import LEARNED_PARAMETERS

FAMILY = ["kerple", "sandwich", "fire", "dpb", "cope", "forgetting"]
#: The schemes that define no bidirectional form: FIRE's normaliser follows the query over past keys
#: (Li et al. 2024, section 3.2). Forgetting attention's paper is causal (Lin et al. 2025, section
#: 2); its bidirectional form is x-transformers' ``DataDependentAlibi(causal=False)``.
CAUSAL_ONLY = {"fire"}


def _layer(name: str, *, causal: bool = True, num_kv_heads: int | None = None) -> posenc.Attention:
    torch.manual_seed(0)
    layer = posenc.Attention(16, 4, encoding=name, causal=causal, num_kv_heads=num_kv_heads)
    with torch.no_grad():
        for p in layer.encoding.parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if p.dim() == 0 else 0.0))  # c and L_multiplier stay positive
    return layer


@pytest.mark.parametrize("name", FAMILY)
@pytest.mark.parametrize("causal", [True, False])
def test_attention_serves_the_forms_each_scheme_defines(name: str, causal: bool) -> None:
    """Causal everywhere; bidirectional where the scheme defines it, where the output then depends
    on later tokens; a ValueError saying ``causal=True`` where it does not."""
    if not causal and name in CAUSAL_ONLY:
        with pytest.raises(ValueError, match="causal=True"):
            posenc.Attention(16, 4, encoding=name, causal=False)
        return
    layer = _layer(name, causal=causal).eval()
    x = torch.randn(2, 6, 16)
    out = layer(x)
    assert out.shape == x.shape and bool(torch.isfinite(out).all())
    changed = x.clone()
    changed[:, -1] += 1.0
    first = layer(changed)[:, 0]
    assert torch.equal(first, out[:, 0]) == causal  # the first token sees the last only without the mask


@pytest.mark.parametrize("name", FAMILY)
@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
def test_decoding_with_grouped_kv_heads_equals_the_full_forward(name: str, num_kv_heads: int) -> None:
    """A prefill of 3 tokens, then 1, 2 and 1: the outputs equal the full causal forward (atol 1e-5,
    float32), with every query head having its own key/value head, sharing one in two, or one for all."""
    layer = _layer(name, num_kv_heads=num_kv_heads).eval()
    x = torch.randn(2, 7, 16)
    with torch.no_grad():
        full = layer(x)
        cache, outs, t = posenc.KVCache(), [], 0
        for n in (3, 1, 2, 1):
            outs.append(layer(x[:, t : t + n], cache=cache))
            t += n
    torch.testing.assert_close(torch.cat(outs, dim=1), full, atol=1e-5, rtol=0)
    assert cache.k.shape[1] == num_kv_heads


@pytest.mark.parametrize("name", FAMILY)
@pytest.mark.parametrize("mode", ["auto", "always"])
def test_gradients_reach_every_parameter_through_the_training_path(name: str, mode: str, monkeypatch) -> None:
    """Training (gradients wanted for the scheme's parameters) never takes FlexAttention, whose score
    mods capture the parameters detached, even with ``set_mode("always")``: the path it takes
    instead gives every learned parameter of the scheme a non-zero gradient, with grouped heads."""
    calls = []
    monkeypatch.setattr(flex_kernel, "flex_attention", lambda *a, **k: calls.append(1))
    monkeypatch.setattr(flex_kernel, "_mode", mode)
    layer = _layer(name, num_kv_heads=2).train()
    x = torch.randn(2, 6, 16, requires_grad=True)
    layer(x).square().sum().backward()
    grads = {n: p.grad for n, p in layer.encoding.named_parameters()}
    assert set(grads) == LEARNED_PARAMETERS[name]
    for n, g in grads.items():
        assert g is not None and bool(torch.isfinite(g).all()) and float(g.abs().sum()) > 0, n
    assert calls == []


@pytest.mark.parametrize("name", FAMILY)
@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError)])
def test_bad_head_counts_are_named(name: str, value: object, error: type) -> None:
    """``num_heads`` (CoPE: its head width ``dim``, it has no head count) that is not a positive int:
    the error names the value and what is accepted, before any tensor is built."""
    field = "dim" if name == "cope" else "num_heads"
    extra = {"dim": 16} if name == "forgetting" else {}
    with pytest.raises(error, match=rf"{field} must be a positive integer, got {value!r}"):
        posenc.create(name, **{**extra, field: value})


@pytest.mark.parametrize("name", FAMILY)
def test_head_count_of_another_attention_is_named(name: str) -> None:
    if name == "cope":
        enc = posenc.create("cope", dim=8)
        with pytest.raises(ValueError, match="head width 4"):
            posenc.Attention(16, 4, encoding=enc, causal=True)
        return
    extra = {"dim": 16} if name == "forgetting" else {}
    enc = posenc.create(name, num_heads=2, **extra)
    with pytest.raises(ValueError, match=r"num_heads=2 but Attention has 4"):
        posenc.Attention(16, 4, encoding=enc, causal=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fire", "forgetting"])
def test_inference_takes_flex_with_grouped_heads_and_a_cache(name: str, monkeypatch) -> None:
    """FIRE (whose score mod needs the first key's position) and forgetting attention (whose score
    mod needs every key's input terms, kept by the cache) run under FlexAttention for inference with
    grouped heads and a KV cache (a 150-token prefill, then 50 tokens), equal to the full forward
    through SDPA with the materialised bias (atol 2e-5, float32); FlexAttention does not fail over
    to SDPA (no error recorded, called once per step). KERPLE and Sandwich take the same path as
    ALiBi (``tests/test_flex_kv_cache.py``)."""
    if not flex.available("cpu", torch.float32):
        pytest.skip(f"FlexAttention is not available here: {flex.errors()}")
    torch._dynamo.reset()  # a fresh recompile budget: other tests' shapes count towards torch's limit
    flex.clear_errors()
    calls = []
    real = flex_kernel.flex_attention
    monkeypatch.setattr(flex_kernel, "flex_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    layer = _layer(name, num_kv_heads=2).eval()
    x = torch.randn(1, 200, 16)
    try:
        with torch.no_grad():
            flex.set_mode("never")
            ref = layer(x)
            flex.set_mode("always")
            cache = posenc.KVCache()
            got = torch.cat([layer(x[:, :150], cache=cache), layer(x[:, 150:], cache=cache)], dim=1)
    finally:
        flex.set_mode("auto")
    assert flex.errors() == {} and len(calls) == 2
    torch.testing.assert_close(got, ref, atol=2e-5, rtol=0)


@pytest.mark.parametrize("name", FAMILY)
@pytest.mark.parametrize("causal", [True, False])
def test_the_experiments_model_trains_with_it(name: str, causal: bool) -> None:
    """The experiments' ``TinyTransformer`` (decoder, and encoder where the scheme has the form)
    builds the scheme by name and every parameter gets a gradient."""
    from posenc.experiments.model import ModelConfig, TinyTransformer

    if not causal and name in CAUSAL_ONLY:
        pytest.skip(f"{name} has no bidirectional form")
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=11, dim=16, num_heads=2, num_layers=2, scheme=name, causal=causal)
    model = TinyTransformer(config)
    model(torch.randint(0, 11, (2, 8))).logsumexp(-1).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert missing == []
