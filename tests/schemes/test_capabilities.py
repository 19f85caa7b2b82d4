"""Schemes declare what they can do with hooks in their own file (docs/design.md, "Capabilities and
names"); a bias scheme defined here, with nothing but its own hooks, gets Attention's layer check,
the Toeplitz-built bias cache and the FlexAttention path.

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``w`` distances.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as nnf

import posenc
from posenc import flex
from posenc import functional as F
from posenc.kernels import flex as flex_kernel
from posenc.schemes.base import PositionalEncoding, default_positions, register, unregister

NAME = "test_log_distance"


@dataclass(frozen=True)
class LogDistanceConfig:
    num_heads: int


class LogDistanceBias(PositionalEncoding):
    """``logit(i, j) += -m_h · log(1 + |j - i|)``, fixed per-head slopes: a bias of the distance only."""

    name = NAME
    family = "bias"
    Config = LogDistanceConfig

    def __init__(self, config: LogDistanceConfig) -> None:
        super().__init__(config)
        slopes = torch.linspace(0.5, 2.0, config.num_heads, dtype=torch.float64)  # [h]
        self.register_buffer("slopes", slopes, persistent=False)

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"num_heads": num_heads}

    def relative_bias_values(self, rel: torch.Tensor) -> torch.Tensor:
        return -self.slopes.float()[:, None] * torch.log1p(rel.abs().float())  # [h, w]

    def score_mod(self, q_offset):
        slopes = self.slopes.float()
        offset = torch.as_tensor(q_offset)

        def log_distance(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * torch.log1p((kv_idx - (q_idx + offset)).abs().float())

        return log_distance


@pytest.fixture
def scheme():
    register(LogDistanceBias)
    try:
        yield LogDistanceBias
    finally:
        unregister(NAME)
    assert NAME not in posenc.available()


def _explicit_bias(enc: LogDistanceBias, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
    distance = (k_positions[None, :] - q_positions[:, None]).abs().double()  # [sq, sk]
    return (-enc.slopes[:, None, None] * torch.log1p(distance)).float()  # [h, sq, sk]


def _sdpa_with_bias(attn: posenc.Attention, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Attention written out with SDPA and the given float bias (and -inf above the diagonal when causal)."""
    b, s, d = x.shape
    h = attn.num_heads
    q, k, v = attn.qkv(x).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)  # 3 × [b, h, s, hd]
    mask = bias[None]  # [1, h, s, s]
    if attn.causal:
        mask = mask.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    out = nnf.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=attn.scale)  # [b, h, s, hd]
    return attn.proj(out.transpose(1, 2).reshape(b, s, d))


@pytest.mark.parametrize("causal", [False, True])
def test_a_bias_scheme_from_its_hooks_alone_equals_sdpa_with_its_bias(scheme, causal):
    torch.manual_seed(0)
    attn = posenc.Attention(32, 4, encoding=NAME, causal=causal).eval()
    x = torch.randn(2, 9, 32)
    with torch.no_grad():
        got = attn(x)
        want = _sdpa_with_bias(attn, x, _explicit_bias(attn.encoding, torch.arange(9), torch.arange(9)))
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_its_bias_is_cached_and_equals_the_uncached_evaluation(scheme):
    """Contiguous positions: built once by the Toeplitz expansion, the same tensor on the next call
    (from Attention too); batched or scattered positions evaluate the hook at every pair."""
    enc = posenc.create(NAME, num_heads=3)
    with torch.no_grad():
        for sq, sk, q0 in [(5, 5, 0), (3, 9, 6), (1, 12, 11)]:
            q, k = torch.arange(q0, q0 + sq), torch.arange(sk)
            first = enc.bias(q, k)
            assert enc.bias(q, k) is first
            assert torch.equal(first, enc.bias(q[None], k[None])[0])  # [b, h, sq, sk]: no cache
            torch.testing.assert_close(first, _explicit_bias(enc, q, k), atol=1e-6, rtol=0)
        scattered = torch.tensor([0, 3, 4, 9])
        torch.testing.assert_close(
            enc.bias(scattered, scattered), _explicit_bias(enc, scattered, scattered), atol=1e-6, rtol=0
        )
    attn = posenc.Attention(12, 3, encoding=enc).eval()
    seen = []
    bias = enc.bias
    enc.bias = lambda q, k: seen.append(bias(q, k)) or seen[-1]
    with torch.no_grad():
        attn(torch.randn(1, 7, 12))
        attn(torch.randn(1, 7, 12))
    assert len(seen) == 2 and seen[1] is seen[0]
    assert torch.equal(seen[0], enc.bias(default_positions(None, 7, "cpu")[None], torch.arange(7)[None])[0])


def test_attention_checks_its_head_count(scheme):
    with pytest.raises(ValueError, match=r"test_log_distance has num_heads=8 but Attention has 4"):
        posenc.Attention(32, 4, encoding=posenc.create(NAME, num_heads=8))


def test_its_score_mod_equals_its_bias(scheme):
    enc = posenc.create(NAME, num_heads=2)
    mod = flex.score_mod_for(enc, q_offset=5)
    hh, qq, kk = torch.arange(2)[:, None, None], torch.arange(4)[None, :, None], torch.arange(9)[None, None, :]
    got = mod(torch.zeros(2, 4, 9), torch.zeros((), dtype=torch.long), hh, qq, kk)
    torch.testing.assert_close(got, _explicit_bias(enc, torch.arange(5, 9), torch.arange(9)), atol=1e-6, rtol=0)


@pytest.mark.slow
def test_flex_attention_serves_it(scheme, monkeypatch):
    """``flex.set_mode("always")``, forward without gradients: FlexAttention is called (and does not
    fail over to SDPA) and equals the SDPA path to 1e-5."""
    calls = []
    real = flex_kernel.flex_attention
    monkeypatch.setattr(flex_kernel, "flex_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    torch.manual_seed(0)
    attn = posenc.Attention(32, 4, encoding=NAME, causal=True).eval()
    x = torch.randn(1, 130, 32)
    flex.clear_errors()
    try:
        with torch.no_grad():
            flex.set_mode("never")
            want = attn(x)
            flex.set_mode("always")
            got = attn(x)
    finally:
        flex.set_mode("auto")
    assert flex.errors() == {} and calls == [1]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in posenc.available()
        if posenc.scheme_class(n).relative_bias_values is not PositionalEncoding.relative_bias_values
    ],
)
def test_registered_relative_biases_expand_their_values(name):
    """For every registered scheme with ``relative_bias_values``: its values at the distances of two
    ranges, expanded by ``F.toeplitz``, equal its bias at batched positions (which skip every cache)."""
    torch.manual_seed(0)
    enc = posenc.create(name, **posenc.scheme_class(name).attention_defaults(8, 4, 32, True))
    for sq, sk, q0 in [(4, 4, 0), (3, 10, 7), (6, 2, 1)]:
        q, k = torch.arange(q0, q0 + sq), torch.arange(sk)
        with torch.no_grad():
            values = enc.relative_bias_values(F.relative_range(sq, sk, q_offset=q0))  # [h, w]
            assert torch.equal(F.toeplitz(values, sq, sk), enc.bias(q[None], k[None])[0])
