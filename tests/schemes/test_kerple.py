"""KERPLE (posenc.schemes.kerple): numbers from the paper's two kernels written out in float64
(Chi et al. 2022, section 4.2; the authors' GPT-NeoX ``ParallelKerpleLog`` / ``ParallelKerplePower``
in ``chijames/KERPLE``, ``megatron/mpu/layers.py``), NeoX's initialisation and clamps, the cache,
FlexAttention, KV-cache decoding and gradients."""

from __future__ import annotations

import math

import pytest
import torch

import posenc
from posenc import flex
from tests.all_schemes import through_flex_and_sdpa

VARIANTS = ["log", "power"]


def _kernel(variant: str, r1: float, r2: float, distance: int) -> float:
    """The paper's bias at a non-negative distance, in Python floats (float64)."""
    if variant == "log":
        return -r1 * math.log(1.0 + r2 * distance)
    return -r1 * distance**r2


def _set(enc, p: list[float], a: list[float]) -> None:
    with torch.no_grad():
        enc.bias_p.copy_(torch.tensor(p))
        enc.bias_a.copy_(torch.tensor(a))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_bias_equals_the_formula_written_out(variant: str, bidirectional: bool) -> None:
    """Log: r1 = bias_p, r2 = bias_a; power: r1 = bias_a, r2 = bias_p (NeoX's names); the causal form
    is NeoX's tril of i - j (0 for later keys), the symmetric one |i - j|; float32 to 1e-6 of float64."""
    enc = posenc.create("kerple", num_heads=2, variant=variant, bidirectional=bidirectional)
    p, a = [1.5, 0.3], [0.7, 1.9]
    _set(enc, p, a)
    r1, r2 = (p, a) if variant == "log" else (a, p)
    q, k = torch.arange(5, 12), torch.arange(15)
    with torch.no_grad():
        got = enc.bias(q, k)
    want = torch.tensor(
        [
            [
                [_kernel(variant, r1[h], r2[h], abs(i - j) if bidirectional else max(i - j, 0)) for j in k.tolist()]
                for i in q.tolist()
            ]
            for h in range(2)
        ],
        dtype=torch.float64,
    )
    assert got.dtype == torch.float32 and got.shape == (2, 7, 15)
    torch.testing.assert_close(got.double(), want, atol=1e-6, rtol=1e-6)
    # a pinned number: log, head 0, distance 3: -1.5 * log(1 + 0.7 * 3) = -1.69708...
    if variant == "log" and not bidirectional:
        assert got[0, 3, 5].item() == pytest.approx(-1.5 * math.log(3.1), abs=1e-6)


def test_initialisation_and_clamps_follow_neox() -> None:
    """``bias_p ~ 2·U[0, 1)``, ``bias_a ~ U[0, 1)`` per head (NeoX get_parameter(2/1, 'uniform'));
    values below eps = 1e-2 act as 1e-2, the power's exponent above 2 acts as 2."""
    torch.manual_seed(0)
    enc = posenc.create("kerple", num_heads=4096)
    assert enc.bias_p.shape == enc.bias_a.shape == (4096,)
    assert 0 <= enc.bias_p.min() and enc.bias_p.max() < 2 and enc.bias_p.mean().item() == pytest.approx(1.0, abs=0.05)
    assert 0 <= enc.bias_a.min() and enc.bias_a.max() < 1 and enc.bias_a.mean().item() == pytest.approx(0.5, abs=0.03)
    torch.manual_seed(0)
    assert torch.equal(enc.bias_p, torch.rand(4096) * 2)  # drawn in that order: bias_p, then bias_a
    assert torch.equal(enc.bias_a, torch.rand(4096))

    power = posenc.create("kerple", num_heads=2, variant="power")
    _set(power, [3.0, -1.0], [0.0, 0.5])
    r1, r2 = power.kernel_parameters()
    torch.testing.assert_close(r1, torch.tensor([0.01, 0.5]))
    torch.testing.assert_close(r2, torch.tensor([2.0, 0.01]))
    log = posenc.create("kerple", num_heads=1)
    _set(log, [-4.0], [0.001])
    with torch.no_grad():
        got = log.bias(torch.arange(3), torch.arange(3))[0, 2, 0].item()
    assert got == pytest.approx(-0.01 * math.log(1 + 0.01 * 2), abs=1e-9)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_reach_r1_and_r2(variant: str) -> None:
    """Training path (parameters need grad: no cache): d(sum bias)/d(param) equals the derivative
    written out; a parameter below eps still gets the gradient at eps (straight-through clamp)."""
    enc = posenc.create("kerple", num_heads=2, variant=variant)
    _set(enc, [1.2, 0.001], [0.4, 0.8])
    bias = enc.bias(torch.arange(4), torch.arange(4))  # [2, 4, 4]
    assert bias.requires_grad
    bias.sum().backward()
    dists = [max(i - j, 0) for i in range(4) for j in range(4)]
    p, a = [1.2, 0.01], [0.4, 0.8]  # as clamped
    if variant == "log":  # b = -p log(1 + a d)
        dp = [-sum(math.log(1 + a[h] * d) for d in dists) for h in range(2)]
        da = [-sum(p[h] * d / (1 + a[h] * d) for d in dists) for h in range(2)]
    else:  # b = -a d^p
        dp = [-sum(a[h] * d ** p[h] * math.log(d) for d in dists if d > 0) for h in range(2)]
        da = [-sum(d ** p[h] for d in dists) for h in range(2)]
    torch.testing.assert_close(enc.bias_p.grad.double(), torch.tensor(dp, dtype=torch.float64), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(enc.bias_a.grad.double(), torch.tensor(da, dtype=torch.float64), rtol=1e-5, atol=1e-6)
    assert torch.isfinite(enc.bias_p.grad).all() and torch.isfinite(enc.bias_a.grad).all()


def test_gradients_through_attention() -> None:
    attn = posenc.Attention(12, 3, encoding="kerple", causal=True)
    attn(torch.randn(2, 7, 12)).square().sum().backward()
    enc = attn.encoding
    assert enc.bias_p.grad.abs().min() > 0 and enc.bias_a.grad.abs().min() > 0


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_cached_bias_equals_uncached_over_offsets_and_lengths(variant: str, bidirectional: bool) -> None:
    """Contiguous ranges without grad go through the Toeplitz build and cache; batched positions
    ``[1, s]`` and the training path (parameters need grad) evaluate every pair: equal to 1e-6."""
    enc = posenc.create("kerple", num_heads=3, variant=variant, bidirectional=bidirectional)
    for q0, sq, k0, sk in [(0, 5, 0, 5), (7, 1, 0, 8), (3, 4, 1, 9), (0, 17, 0, 17), (0, 5, 0, 5), (40, 3, 2, 41)]:
        q, k = torch.arange(q0, q0 + sq), torch.arange(k0, k0 + sk)
        with torch.no_grad():
            cached = enc.bias(q, k)
            again = enc.bias(q, k)
            batched = enc.bias(q[None], k[None])[0]
        training = enc.bias(q, k)
        assert training.requires_grad and not cached.requires_grad
        assert torch.equal(cached, again)
        for other in (batched, training.detach()):  # pow's vector and scalar loops may differ by an ulp
            torch.testing.assert_close(cached, other, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("variant", VARIANTS)
def test_kv_cache_decoding_equals_the_full_forward(variant: str) -> None:
    torch.manual_seed(0)
    attn = posenc.Attention(12, 3, encoding=posenc.create("kerple", num_heads=3, variant=variant), causal=True).eval()
    x = torch.randn(2, 9, 12)
    with torch.no_grad():
        full = attn(x)
        cache = posenc.KVCache()
        steps = [attn(x[:, :4], cache=cache)] + [attn(x[:, i : i + 1], cache=cache) for i in range(4, 9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-6, rtol=1e-6)


def test_score_mod_equals_bias() -> None:
    for variant in VARIANTS:
        for bidirectional in (False, True):
            enc = posenc.create("kerple", num_heads=3, variant=variant, bidirectional=bidirectional)
            sq, sk, q0 = 6, 20, 14
            mod = flex.score_mod_for(enc, q_offset=q0)
            hh, qq, kk = (
                torch.arange(3)[:, None, None],
                torch.arange(sq)[None, :, None],
                torch.arange(sk)[None, None, :],
            )
            got = mod(torch.zeros(3, sq, sk), torch.zeros((), dtype=torch.long), hh, qq, kk)
            with torch.no_grad():
                ref = enc.bias(torch.arange(q0, q0 + sq), torch.arange(sk))
            torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-6)


def test_attention_defaults_and_requirements() -> None:
    assert posenc.Attention(12, 3, encoding="kerple", causal=False).encoding.config.bidirectional is True
    assert posenc.Attention(12, 3, encoding="kerple", causal=True).encoding.config.bidirectional is False
    with pytest.raises(ValueError, match="causal KERPLE .* needs causal=True"):
        posenc.Attention(12, 3, encoding=posenc.create("kerple", num_heads=3), causal=False)
    with pytest.raises(ValueError, match="kerple has num_heads=2 but Attention has 3"):
        posenc.Attention(12, 3, encoding=posenc.create("kerple", num_heads=2), causal=True)


def test_bad_config_is_refused_with_what_is_accepted() -> None:
    with pytest.raises(ValueError, match="unknown KERPLE variant 'exp'; choose one of: 'log', 'power'"):
        posenc.create("kerple", num_heads=2, variant="exp")
    with pytest.raises(ValueError, match="num_heads must be a positive integer, got 0"):
        posenc.create("kerple", num_heads=0)
    with pytest.raises(ValueError, match="num_heads must be a positive integer, got -3"):
        posenc.create("kerple", num_heads=-3)
    with pytest.raises(TypeError, match="bidirectional must be True or False, got 'yes'"):
        posenc.create("kerple", num_heads=2, bidirectional="yes")


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_attention_through_flex_equals_sdpa_with_bias(variant: str) -> None:
    torch.manual_seed(0)
    attn = posenc.Attention(32, 2, encoding=posenc.create("kerple", num_heads=2, variant=variant), causal=True).eval()
    x = torch.randn(2, 200, 32)
    got, ref = through_flex_and_sdpa(attn, x)
    assert flex.available(), flex.errors()
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
