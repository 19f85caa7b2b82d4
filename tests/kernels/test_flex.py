"""FlexAttention paths (posenc.kernels.flex, public as posenc.flex): score mods equal the
materialised biases, block masks built from block counts equal the dense masks, and
posenc.Attention through FlexAttention equals SDPA with a materialised bias."""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import flex
from posenc import functional as F
from posenc.kernels import flex as flex_kernel
from tests.all_schemes import through_flex_and_sdpa


def _grid_scores(score_mod, h, sq, sk):
    """Evaluate a score mod eagerly on every (head, query, key) of a zero score: the bias it adds."""
    hh = torch.arange(h)[:, None, None]
    qq = torch.arange(sq)[None, :, None]
    kk = torch.arange(sk)[None, None, :]
    return score_mod(torch.zeros(h, sq, sk), torch.zeros((), dtype=torch.long), hh, qq, kk)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize(("sq", "sk", "q0"), [(6, 6, 0), (3, 10, 7)])
def test_alibi_score_mod_equals_bias(bidirectional, sq, sk, q0):
    enc = posenc.create("alibi", num_heads=8, bidirectional=bidirectional)
    mod = flex.score_mod_for(enc, q_offset=q0)
    ref = F.alibi_bias(enc.slopes.float(), torch.arange(q0, q0 + sq), torch.arange(sk), bidirectional=bidirectional)
    torch.testing.assert_close(_grid_scores(mod, 8, sq, sk), ref, atol=1e-6, rtol=0)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_t5_score_mod_equals_bias(bidirectional):
    """Distances beyond max_distance=128 included: the bucket is computed inside the score mod."""
    enc = posenc.create("t5", num_heads=3, bidirectional=bidirectional)
    sq, sk, q0 = 20, 300, 280
    mod = flex.score_mod_for(enc, q_offset=q0)
    with torch.no_grad():
        ref = enc.bias(torch.arange(q0, q0 + sq), torch.arange(sk))
    assert torch.equal(_grid_scores(mod, 3, sq, sk), ref)


def test_schemes_without_a_score_mod():
    assert flex.score_mod_for(posenc.create("rope", dim=8)) is None


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("sq", "sk", "past"), [(300, 300, 0), (100, 700, 600), (1, 129, 128)])
def test_block_mask_from_counts_equals_dense(causal, sq, sk, past):
    """Every visible (query, key) pair lies in a listed block, every listed partial block is
    masked by the mask_mod exactly as the dense causal mask, and no invisible block is listed."""
    mask = flex.block_mask(sq, sk, causal=causal, q_offset=past, block_size=128)
    dense = torch.ones(sq, sk, dtype=torch.bool)
    if causal:
        dense = torch.arange(sk)[None, :] <= torch.arange(past, past + sq)[:, None]  # [sq, sk]
    nq, nk = -(-sq // 128), -(-sk // 128)
    padded = torch.zeros(nq * 128, nk * 128, dtype=torch.bool)
    padded[:sq, :sk] = dense
    any_visible = padded.view(nq, 128, nk, 128).any(dim=(1, 3))  # [nq, nk]
    listed = mask.to_dense()[0, 0].bool()  # [nq, nk], full and partial blocks together
    assert torch.equal(listed, any_visible)
    if causal:
        qi, ki = torch.arange(sq)[:, None], torch.arange(sk)[None, :]
        assert torch.equal(mask.mask_mod(0, 0, qi, ki), dense)


def test_mode_and_when_flex_applies():
    with pytest.raises(ValueError, match="unknown flex mode 'fast'"):
        flex.set_mode("fast")
    enc = posenc.create("alibi", num_heads=2)
    q = torch.randn(1, 2, 8, 4)
    assert flex.get_mode() == "auto"
    # small: a materialised bias is cheaper than a compile; auto says no
    assert flex.attend(enc, q, q, q, torch.arange(8), torch.arange(8), causal=True) is None
    flex.set_mode("always")
    try:
        qg = q.clone().requires_grad_()  # no CPU backward in torch 2.13: never with gradients
        assert flex.attend(enc, qg, qg, qg, torch.arange(8), torch.arange(8), causal=True) is None
        scattered = torch.tensor([0, 1, 2, 3, 5, 6, 7, 8])
        assert flex.attend(enc, q, q, q, scattered, scattered, causal=True) is None
        assert (
            flex.attend(
                enc, q, q, q, torch.arange(8), torch.arange(8), causal=True, key_mask=torch.ones(1, 8, dtype=torch.bool)
            )
            is None
        )
    finally:
        flex.set_mode("auto")


_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("device", "name"),
    [("cpu", "alibi"), pytest.param("cuda", "alibi", marks=_CUDA), pytest.param("cuda", "t5", marks=_CUDA)],
)
def test_attention_through_flex_equals_sdpa_with_bias(device, name):
    """posenc.Attention with a causal bias scheme: FlexAttention (compiled once, ~15 s on the CPU;
    Triton on CUDA) against SDPA with the materialised bias, at a length that is not a multiple of
    the block size."""
    torch.manual_seed(0)
    attn = posenc.Attention(32, 2, encoding=name, causal=True).to(device).eval()
    x = torch.randn(2, 200, 32, device=device)
    got, ref = through_flex_and_sdpa(attn, x)
    assert flex.available(), flex.errors()
    torch.testing.assert_close(got, ref, atol=2e-5, rtol=0)


def test_a_failed_compile_turns_flex_off_for_its_dtype_only(monkeypatch):
    """A dtype the kernel refuses (float64 on the CPU) falls back to SDPA with the bias, exactly,
    and is remembered for that device type and dtype only: float32 keeps FlexAttention."""
    used = []

    def fake(q, k, v, score_mod, mask, scale=None, enable_gqa=False):
        if q.dtype == torch.float64:
            raise RuntimeError("float64 is not supported")
        used.append(q.dtype)
        return torch.zeros_like(q)

    monkeypatch.setattr(flex_kernel, "flex_attention", fake)
    attn = posenc.Attention(16, 2, encoding="alibi", causal=True).eval()
    x = torch.randn(1, 5, 16)
    flex.clear_errors()
    flex.set_mode("always")
    try:
        with torch.no_grad():
            got = attn.double()(x.double())
            flex.set_mode("never")
            want = attn(x.double())
            flex.set_mode("always")
            attn.float()(x)
        assert torch.equal(got, want) and used == [torch.float32]
        assert (
            not flex.available("cpu", torch.float64) and flex.available("cpu", torch.float32) and not flex.available()
        )
        assert list(flex.errors()) == [("cpu", torch.float64)]
    finally:
        flex.set_mode("auto")
        flex.clear_errors()
    assert flex.errors() == {} and flex.available("cpu", torch.float64)


def test_attention_scale_reaches_flex_attention(monkeypatch):
    """``Attention(scale=)`` is what FlexAttention scales by too (T5's weights want 1.0), not only SDPA."""
    seen = {}

    def fake(q, k, v, score_mod, mask, scale=None, enable_gqa=False):
        seen["scale"] = scale
        return torch.zeros_like(q)

    monkeypatch.setattr(flex_kernel, "flex_attention", fake)
    monkeypatch.setattr(flex_kernel, "available", lambda *a, **k: True)
    attn = posenc.Attention(16, 2, encoding="alibi", causal=True, scale=0.5).eval()
    flex.set_mode("always")
    try:
        with torch.no_grad():
            attn(torch.randn(1, 8, 16))
    finally:
        flex.set_mode("auto")
    assert seen["scale"] == 0.5


def test_public_module_reexports_the_kernels_and_the_schemes_score_mods():
    """``posenc.flex`` keeps its public names: the kernels' functions themselves, and each scheme's
    ``<name>_score_mod`` builder from the scheme's own module, found through the registry."""
    from posenc.schemes import alibi, t5

    for name in (
        "score_mod_for",
        "block_mask",
        "flex_attention",
        "attend",
        "set_mode",
        "get_mode",
        "available",
        "errors",
        "clear_errors",
        "warmup",
        "MIN_BIAS_BYTES",
        "BLOCK_SIZE",
    ):
        assert getattr(flex, name) is getattr(flex_kernel, name)
    assert flex.alibi_score_mod is alibi.alibi_score_mod and flex.t5_score_mod is t5.t5_score_mod
    assert {"alibi_score_mod", "t5_score_mod"} <= set(flex.__all__) and "alibi_score_mod" in dir(flex)
    with pytest.raises(AttributeError, match="rope_score_mod"):
        flex.rope_score_mod  # noqa: B018  (rope has no score mod)
