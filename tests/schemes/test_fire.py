"""FIRE (Li et al. 2024, ICLR): the bias against its formula written out pair by pair in float64,
against the paper's appendix code, its score mod and FlexAttention against the eager bias,
KV-cache decoding, gradients, and the refusals."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import posenc
from posenc import flex


def _fire(num_heads: int = 3, seed: int = 0, **config) -> posenc.PositionalEncoding:
    """A FIRE module with every parameter drawn (larger than the default init, so each matters)."""
    torch.manual_seed(seed)
    enc = posenc.create("fire", num_heads=num_heads, **config)
    with torch.no_grad():
        for p in enc.mlp.parameters():
            p.normal_(0.0, 0.7)
    return enc


def _formula(enc, q_positions: list[int], k_positions: list[int]) -> torch.Tensor:
    """``f(psi(i - j) / (psi(max(L, i)) + eps))``, ``psi(x) = log(|c x| + 1)``, ``L = |m * L0|``,
    ``f(x) = W2 relu(W1 x + b1) + b2``: Li et al. 2024, section 3.2 and appendix A, one pair at a
    time in float64 (Python floats)."""
    w1 = enc.mlp[0].weight.detach().double()[:, 0].tolist()
    b1 = enc.mlp[0].bias.detach().double().tolist()
    w2 = enc.mlp[2].weight.detach().double().tolist()
    b2 = enc.mlp[2].bias.detach().double().tolist()
    c, eps = float(enc.c.detach()), enc.config.eps
    L = abs(float(enc.L_multiplier.detach()) * enc.config.init_L)
    out = torch.empty(len(b2), len(q_positions), len(k_positions), dtype=torch.float64)
    for a, i in enumerate(q_positions):
        for b, j in enumerate(k_positions):
            x = math.log(abs(c * (i - j)) + 1) / (math.log(abs(c * max(L, i)) + 1) + eps)
            hidden = [max(w * x + bb, 0.0) for w, bb in zip(w1, b1)]
            for h in range(len(b2)):
                out[h, a, b] = b2[h] + sum(wk * u for wk, u in zip(w2[h], hidden))
    return out


@pytest.mark.parametrize(("q0", "sq", "sk"), [(0, 6, 6), (5, 4, 9), (10, 3, 13)])
def test_bias_equals_the_formula_pair_by_pair_in_float64(q0: int, sq: int, sk: int) -> None:
    """With L = |1.5 * 4| = 6, queries on both sides of the threshold (the normaliser psi(L), then
    psi(i)); keys after the query included (|i - j|, hidden by the causal mask in attention)."""
    enc = _fire(init_L=4.0, init_c=0.3).double()
    with torch.no_grad():
        enc.L_multiplier.fill_(1.5)
    q, k = list(range(q0, q0 + sq)), list(range(sk))
    got = enc.bias(torch.tensor(q), torch.tensor(k))
    torch.testing.assert_close(got, _formula(enc, q, k), atol=1e-12, rtol=0)


def test_pinned_numbers_of_a_one_unit_mlp() -> None:
    """Hidden width 1, w1 = 1, b1 = 0, w2 = 2, b2 = 0.5, c = 0.1, L = 512: query 3 against key 1 is
    2 log(1.2) / (log(52.2) + 1e-6) + 0.5; a query past L (600, key 0) is normalised by psi(600)."""
    enc = posenc.create("fire", num_heads=1, hidden_dim=1).double()
    with torch.no_grad():
        enc.mlp[0].weight.fill_(1.0)
        enc.mlp[0].bias.fill_(0.0)
        enc.mlp[2].weight.fill_(2.0)
        enc.mlp[2].bias.fill_(0.5)
        enc.c.fill_(0.1)  # exactly 0.1 in float64 (the float32 init is 0.1 + 1.5e-9)
    got = enc.bias(torch.tensor([3, 600]), torch.tensor([1, 0]))[0]
    assert got[0, 0].item() == pytest.approx(2 * math.log(1.2) / (math.log(52.2) + 1e-6) + 0.5, abs=1e-12)
    assert got[1, 1].item() == pytest.approx(2 * math.log(61.0) / (math.log(61.0) + 1e-6) + 0.5, abs=1e-12)
    assert got[0, 1].item() == pytest.approx(2 * math.log(1.3) / (math.log(52.2) + 1e-6) + 0.5, abs=1e-12)


class _PaperFIRE(nn.Module):
    """The module of Li et al. 2024, appendix A ("FIRE implementation"), transcribed: the
    reference implementation the scheme matches (its parameter names included)."""

    def __init__(self, num_heads: int = 12, mlp_width: int = 32, init_c: float = 0.1, init_L: float = 512.0):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, mlp_width), nn.ReLU(), nn.Linear(mlp_width, num_heads))
        self.c = nn.Parameter(torch.tensor(init_c))
        self.init_L = nn.Parameter(torch.tensor(init_L), requires_grad=False)
        self.L_multiplier = nn.Parameter(torch.tensor(1.0))
        self.eps = 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_length = x.size(2)
        positions = torch.arange(seq_length, dtype=torch.float, device=x.device)
        rel_distance = positions[:, None] - positions[None, :]
        threshold = torch.abs(self.L_multiplier * self.init_L)
        pos_normalizer = torch.max(positions, threshold)[:, None]
        rel_distance = torch.log(torch.abs(self.c * rel_distance) + 1)
        pos_normalizer = torch.log(torch.abs(self.c * pos_normalizer) + 1) + self.eps
        normalized_distance = rel_distance / pos_normalizer
        fire_bias = self.mlp(normalized_distance.unsqueeze(-1))
        return fire_bias.unsqueeze(0).permute(0, 3, 1, 2)


def test_equals_the_paper_appendix_code_given_its_weights() -> None:
    """The paper's module with init_L = 8 (so positions pass the threshold) and the learned values
    moved off their init; its state_dict loads into the scheme once the frozen init_L is dropped."""
    torch.manual_seed(3)
    paper = _PaperFIRE(num_heads=4, init_L=8.0)
    with torch.no_grad():
        paper.c.fill_(0.37)
        paper.L_multiplier.fill_(0.8)
    ours = posenc.create("fire", num_heads=4, init_L=8.0)
    ours.load_state_dict({k: v for k, v in paper.state_dict().items() if k != "init_L"})
    want = paper(torch.zeros(1, 4, 20, 8))[0]
    with torch.no_grad():
        got = ours.bias(torch.arange(20), torch.arange(20))
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_batched_positions_equal_each_row() -> None:
    enc = _fire()
    q = torch.tensor([[0, 1, 2, 3], [600, 601, 602, 603]])
    with torch.no_grad():
        got = enc.bias(q, q)
        for row in range(2):
            torch.testing.assert_close(got[row], enc.bias(q[row], q[row]), atol=1e-6, rtol=0)


@pytest.mark.parametrize(("q_offset", "k_start"), [(0, 0), (5, 0), (3, 600)])
def test_score_mod_equals_the_eager_bias(q_offset: int, k_start: int) -> None:
    """The score mod (the MLP unrolled over its hidden units) evaluated eagerly on index grids equals
    :meth:`bias` for queries at ``k_start + q_offset + i`` and keys at ``k_start + j``, with a threshold
    that the positions cross."""
    enc = _fire(init_L=6.0)
    sq, sk = 4, q_offset + 4
    q_pos, k_pos = torch.arange(sq) + q_offset + k_start, torch.arange(sk) + k_start
    mod = enc.score_mod(q_offset, k_start=k_start)
    h, qi, ki = torch.arange(3)[:, None, None], torch.arange(sq)[None, :, None], torch.arange(sk)[None, None, :]
    with torch.no_grad():
        got = mod(torch.zeros(3, sq, sk), torch.tensor(0), h, qi, ki)
        torch.testing.assert_close(got, enc.bias(q_pos, k_pos), atol=1e-6, rtol=0)


def test_decoding_with_a_kv_cache_equals_the_full_forward() -> None:
    torch.manual_seed(0)
    attn = posenc.Attention(12, 3, encoding="fire", causal=True).double().eval()
    with torch.no_grad():
        for p in attn.encoding.mlp.parameters():
            p.normal_(0.0, 0.7)
        attn.encoding.L_multiplier.fill_(4 / 512)  # L = 4: the later queries are normalised by psi(i)
    x = torch.randn(2, 9, 12, dtype=torch.float64)
    with torch.no_grad():
        full = attn(x)
        cache = posenc.KVCache()
        steps = [attn(x[:, a:b], cache=cache) for a, b in [(0, 4), (4, 5), (5, 6), (6, 9)]]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-10, rtol=0)


def test_gradients_reach_every_parameter_in_training() -> None:
    """c, L_multiplier and the MLP get finite, non-zero gradients through the attention used in
    training (queries both below and above L = 4)."""
    torch.manual_seed(0)
    attn = posenc.Attention(12, 3, encoding="fire", causal=True)
    with torch.no_grad():
        attn.encoding.L_multiplier.fill_(4 / 512)
    attn(torch.randn(2, 8, 12)).square().sum().backward()
    for name, p in attn.encoding.named_parameters():
        assert p.grad is not None and bool(torch.isfinite(p.grad).all()) and float(p.grad.abs().sum()) > 0, name


def test_refuses_bidirectional_attention() -> None:
    with pytest.raises(ValueError, match=r"fire is defined for causal attention.*got causal=False"):
        posenc.Attention(12, 3, encoding="fire", causal=False)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"num_heads": 0}, "num_heads must be a positive integer, got 0"),
        ({"num_heads": 2, "hidden_dim": -3}, "hidden_dim must be a positive integer, got -3"),
        ({"num_heads": 2, "init_c": 0.0}, "init_c must be a positive finite number, got 0.0"),
        ({"num_heads": 2, "init_L": -5}, "init_L must be a positive finite number, got -5"),
        ({"num_heads": 2, "eps": float("nan")}, "eps must be a positive finite number, got nan"),
    ],
)
def test_bad_config_values_are_named(config: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        posenc.create("fire", **config)


@pytest.mark.slow
@pytest.mark.parametrize("positions", [None, 600])
def test_flex_attention_equals_sdpa_with_the_bias(positions: int | None) -> None:
    """FlexAttention (``set_mode("always")``, compiled on the CPU) against SDPA with the materialised
    bias, forward without gradients, at a length that is not a multiple of the block size; with
    positions starting at 600 the queries pass the threshold and the score mod needs the first
    key's position."""
    torch.manual_seed(0)
    attn = posenc.Attention(32, 2, encoding="fire", causal=True).eval()
    with torch.no_grad():
        attn.encoding.L_multiplier.fill_(100 / 512)
    x = torch.randn(2, 150, 32)
    pos = None if positions is None else torch.arange(positions, positions + 150)
    with torch.no_grad():
        flex.set_mode("never")
        ref = attn(x, pos)
        flex.set_mode("always")
        try:
            got = attn(x, pos)
        finally:
            flex.set_mode("auto")
    assert flex.available(), flex.errors()
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
