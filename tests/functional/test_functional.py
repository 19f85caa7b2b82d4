"""The functional core against its formulas written out by hand, and its precision policy.

Each expected value is computed here with Python's ``math`` from the formula the docstring cites,
independently of posenc's vectorised code.
"""

from __future__ import annotations

import math

import pytest
import torch

from posenc import functional as F

# -- sinusoidal (Vaswani et al. 2017, section 3.5) ---------------------------------------------


def _paper_row(p: float, d: int, base: float = 10000.0) -> list[float]:
    """PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos(p / base^(2i/d)), section 3.5."""
    row = []
    for i in range(d // 2):
        angle = p / base ** (2 * i / d)
        row += [math.sin(angle), math.cos(angle)]
    return row


@pytest.mark.parametrize("d", [2, 8, 64])
def test_sinusoidal_interleaved_paper_equals_formula(d: int) -> None:
    """Every entry of the paper layout equals section 3.5's formula to 1e-6 (float32 output)."""
    positions = [0, 1, 7, 100, 511]
    expected = torch.tensor([_paper_row(p, d) for p in positions], dtype=torch.float64)
    got = F.sinusoidal(torch.tensor(positions), d)
    assert got.shape == (len(positions), d) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, atol=1e-6, rtol=0)


def test_sinusoidal_half_tensor2tensor_equals_fairseq_formula() -> None:
    """fairseq ``SinusoidalPositionalEmbedding.get_embedding``: emb = exp(-i * log(base)/(d/2 - 1)),
    table = [sin(p * emb) | cos(p * emb)] (sines first), matched to 1e-6."""
    d, base = 16, 10000.0
    half = d // 2
    step = math.log(base) / (half - 1)
    rows = []
    for p in range(40):
        freqs = [math.exp(-i * step) for i in range(half)]
        rows.append([math.sin(p * f) for f in freqs] + [math.cos(p * f) for f in freqs])
    got = F.sinusoidal(40, d, layout="half", frequencies="tensor2tensor")
    torch.testing.assert_close(got.double(), torch.tensor(rows, dtype=torch.float64), atol=1e-6, rtol=0)
    # the last frequency reaches exactly 1/base (the point of tensor2tensor's spacing)
    inv = F.sinusoidal_inv_freq(d, frequencies="tensor2tensor")
    assert inv[-1].item() == pytest.approx(1 / base, rel=1e-15)


def test_sinusoidal_float_positions_and_any_shape() -> None:
    """Float positions interpolate (formula is continuous); a [2, 3] position tensor gives [2, 3, d]."""
    pos = torch.tensor([[0.5, 1.25, 2.0], [3.0, 10.5, 0.0]], dtype=torch.float64)
    got = F.sinusoidal(pos, 8, dtype=torch.float64)
    assert got.shape == (2, 3, 8)
    expected = torch.tensor([[_paper_row(p, 8) for p in row] for row in pos.tolist()], dtype=torch.float64)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)
    # integer 2.0 as float equals integer 2
    torch.testing.assert_close(got[0, 2].float(), F.sinusoidal(torch.tensor([2]), 8)[0])


def test_sinusoidal_base_changes_frequencies() -> None:
    """``base`` enters as base^(-2i/d): the last pair of d=4 at base 100 turns at 1/10 rad per position."""
    got = F.sinusoidal(torch.tensor([3]), 4, base=100.0)
    assert got[0, 2].item() == pytest.approx(math.sin(0.3), abs=1e-7)
    assert got[0, 3].item() == pytest.approx(math.cos(0.3), abs=1e-7)


# -- RoPE (Su et al. 2021, section 3.4) -------------------------------------------------------


def test_rope_inv_freq_default_formula_float64() -> None:
    """RoFormer eq. 15: theta_i = base^(-2i/d), float64, attention scale 1."""
    inv, scale = F.rope_inv_freq(16, base=500.0)
    assert inv.dtype == torch.float64 and scale == 1.0
    assert inv.tolist() == pytest.approx([500.0 ** (-2 * i / 16) for i in range(8)], rel=1e-15)


def test_rope_linear_scaling_is_default_over_factor() -> None:
    """Chen et al. 2023 (position interpolation): linear scaling divides every frequency by factor."""
    inv, _ = F.rope_inv_freq(32)
    lin, scale = F.rope_inv_freq(32, scaling={"rope_type": "linear", "factor": 4})
    torch.testing.assert_close(lin, inv / 4, atol=0, rtol=1e-15)
    assert scale == 1.0


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_cos_sin_layouts(layout: str) -> None:
    """half repeats angles as [a, a] (HF Llama); interleaved as [a0, a0, a1, a1] (GPT-J)."""
    inv, _ = F.rope_inv_freq(6)
    cos, sin = F.rope_cos_sin(torch.tensor([5]), inv, layout=layout)
    angles = [5 * f for f in inv.tolist()]
    order = angles + angles if layout == "half" else [a for a in angles for _ in range(2)]
    assert cos[0].tolist() == pytest.approx([math.cos(a) for a in order], abs=1e-7)
    assert sin[0].tolist() == pytest.approx([math.sin(a) for a in order], abs=1e-7)


def test_rope_cos_sin_attention_scale_multiplies_both() -> None:
    inv, _ = F.rope_inv_freq(8)
    c1, s1 = F.rope_cos_sin(10, inv)
    c2, s2 = F.rope_cos_sin(10, inv, attention_scale=1.5)
    torch.testing.assert_close(c2, c1 * 1.5)
    torch.testing.assert_close(s2, s1 * 1.5)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_rope_pairs_by_hand(layout: str) -> None:
    """Each pair (a, b) turns to (a cos - b sin, b cos + a sin), pairs (i, i+r/2) or (2i, 2i+1)."""
    torch.manual_seed(1)
    x = torch.randn(1, 1, 3, 8, dtype=torch.float64)
    inv, _ = F.rope_inv_freq(8)
    positions = torch.tensor([0, 4, 9])
    cos, sin = F.rope_cos_sin(positions, inv, layout=layout, dtype=torch.float64)
    got = F.apply_rope(x, cos, sin, layout=layout)
    pairs = [(i, i + 4) for i in range(4)] if layout == "half" else [(2 * i, 2 * i + 1) for i in range(4)]
    expected = x.clone()
    for s, p in enumerate(positions.tolist()):
        for i, (ia, ib) in enumerate(pairs):
            a, b, angle = x[0, 0, s, ia].item(), x[0, 0, s, ib].item(), p * inv[i].item()
            expected[0, 0, s, ia] = a * math.cos(angle) - b * math.sin(angle)
            expected[0, 0, s, ib] = b * math.cos(angle) + a * math.sin(angle)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)


def test_apply_rope_partial_rotary_passes_the_rest() -> None:
    """Only the first cos.shape[-1] features turn; the remaining ones are returned bit for bit."""
    x = torch.randn(2, 3, 5, 16)
    inv, _ = F.rope_inv_freq(8)
    cos, sin = F.rope_cos_sin(5, inv)
    got = F.apply_rope(x, cos, sin)
    assert torch.equal(got[..., 8:], x[..., 8:])
    torch.testing.assert_close(got[..., :8], F.apply_rope(x[..., :8], cos, sin))
    assert not torch.allclose(got[..., :8], x[..., :8])


def test_apply_rope_batched_tables() -> None:
    """Tables [b, s, r] (positions [b, s]) broadcast over heads of x [b, h, s, hd]."""
    x = torch.randn(2, 3, 4, 8)
    inv, _ = F.rope_inv_freq(8)
    positions = torch.tensor([[0, 1, 2, 3], [10, 11, 12, 13]])
    cos, sin = F.rope_cos_sin(positions, inv)  # [2, 4, 8]
    got = F.apply_rope(x, cos, sin)
    for i in range(2):
        c, s = F.rope_cos_sin(positions[i], inv)
        torch.testing.assert_close(got[i : i + 1], F.apply_rope(x[i : i + 1], c, s))


# -- precision policy (docs/design.md) ----------------------------------------------------------


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_cos_sin_accurate_at_four_million(layout: str) -> None:
    """cos/sin at position 4,000,000 within 1e-6 of Python's math on the float64 angle reduced mod 2π
    (math.fmod is exact); the float32 product the peers use is off by more than 1e-3 there."""
    p = 4_000_000
    inv, _ = F.rope_inv_freq(128)
    cos, sin = F.rope_cos_sin(torch.tensor([p]), inv, layout=layout)
    angles = [math.fmod(p * f, 2 * math.pi) for f in inv.tolist()]
    order = angles + angles if layout == "half" else [a for a in angles for _ in range(2)]
    ref_cos = torch.tensor([math.cos(a) for a in order], dtype=torch.float64)
    ref_sin = torch.tensor([math.sin(a) for a in order], dtype=torch.float64)
    assert (cos[0].double() - ref_cos).abs().max() < 1e-6
    assert (sin[0].double() - ref_sin).abs().max() < 1e-6
    naive = (torch.tensor([float(p)]) * inv.float()).cos().double()  # what float32 angles give
    exact = torch.tensor([math.cos(a) for a in angles], dtype=torch.float64)
    assert (naive - exact).abs().max() > 1e-3  # so this test would catch float32 angles


def test_sinusoidal_accurate_at_four_million() -> None:
    p = 4_000_000
    got = F.sinusoidal(torch.tensor([p]), 64)[0].double()
    expected = []
    for f in F.sinusoidal_inv_freq(64).tolist():
        a = math.fmod(p * f, 2 * math.pi)
        expected += [math.sin(a), math.cos(a)]
    assert (got - torch.tensor(expected)).abs().max() < 1e-6


@pytest.mark.parametrize("pair", [(4095, 4096), (256, 257)])
def test_bf16_inputs_never_round_positions(pair: tuple[int, int]) -> None:
    """A bf16 input rotated at 4095 and at 4096 (or 256 and 257) gets two different rotations, each
    equal to the float64 rotation rounded once to bf16 (bf16 positions would merge them: 4095 -> 4096)."""
    inv, _ = F.rope_inv_freq(64)
    x = torch.randn(1, 1, 1, 64).to(torch.bfloat16)
    outs = []
    for p in pair:
        cos, sin = F.rope_cos_sin(torch.tensor([p]), inv)
        got = F.apply_rope(x, cos, sin)
        assert got.dtype == torch.bfloat16
        c64, s64 = F.rope_cos_sin(torch.tensor([p]), inv, dtype=torch.float64)
        exact = F.apply_rope(x.double(), c64, s64)
        torch.testing.assert_close(got.double(), exact, atol=2**-7 * exact.abs().max().item(), rtol=0)
        outs.append(got)
    assert not torch.equal(outs[0], outs[1])
    as_bf16 = torch.tensor([float(p) for p in pair]).to(torch.bfloat16)
    assert as_bf16[0] == as_bf16[1]  # what building positions in the input's dtype would do


def test_half_precision_positions_refused() -> None:
    """bf16 position tensors are refused outright: they cannot hold 257."""
    inv, _ = F.rope_inv_freq(8)
    with pytest.raises(TypeError, match="bfloat16"):
        F.rope_cos_sin(torch.tensor([257.0], dtype=torch.bfloat16), inv)


# -- T5 buckets, ALiBi slopes, Shaw's index -----------------------------------------------------


def test_t5_buckets_pinned_bidirectional() -> None:
    """Raffel et al. 2020 section 2.1 with 32 buckets, max_distance 128: exact buckets 0..7 for keys
    before or at the query, 16..23 after; logarithmic above; 15/31 from 128 on."""
    rel = torch.tensor([0, -1, -7, -8, -12, -16, -32, -64, -127, -128, -5000, 1, 7, 8, 16, 127, 128, 9999])
    expected = [0, 1, 7, 8, 9, 10, 12, 14, 15, 15, 15, 17, 23, 24, 26, 31, 31, 31]
    assert F.t5_relative_bucket(rel).tolist() == expected


def test_t5_buckets_pinned_causal() -> None:
    """Causal: every later key is bucket 0; 16 exact distances, then log-spaced up to 31."""
    rel = torch.tensor([5, 1, 0, -1, -15, -16, -20, -32, -64, -127, -128, -(10**6)])
    expected = [0, 0, 0, 1, 15, 16, 17, 21, 26, 31, 31, 31]
    assert F.t5_relative_bucket(rel, bidirectional=False).tolist() == expected


def _press_get_slopes(n: int) -> list[float]:
    """ofirpress/attention_with_linear_biases ``get_slopes`` (Press et al. 2022, section 3), in Python floats."""

    def power_of_2(m: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(m) - 3)))
        return [start * start**i for i in range(m)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _press_get_slopes(2 * closest)[0::2][: n - closest]


def test_alibi_slopes_paper_values() -> None:
    """8 heads: 1/2, 1/4, ..., 1/256 (Press et al. 2022, section 3)."""
    assert F.alibi_slopes(8).tolist() == [2.0 ** -(i + 1) for i in range(8)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 12, 24, 40, 64, 96])
def test_alibi_slopes_non_powers_of_two(n: int) -> None:
    """Equal to the reference ``get_slopes`` rounded once to float32."""
    torch.testing.assert_close(
        F.alibi_slopes(n), torch.tensor(_press_get_slopes(n), dtype=torch.float64).float(), atol=0, rtol=0
    )


def test_alibi_bias_causal_and_symmetric() -> None:
    slopes = torch.tensor([0.5, 0.25])
    q, k = torch.arange(3), torch.arange(3)
    causal = F.alibi_bias(slopes, q, k)
    sym = F.alibi_bias(slopes, q, k, bidirectional=True)
    for h, m in enumerate([0.5, 0.25]):
        for i in range(3):
            for j in range(3):
                assert causal[h, i, j].item() == -m * (i - j)
                assert sym[h, i, j].item() == -m * abs(i - j)


def test_alibi_bias_half_slopes_keep_distances() -> None:
    """bf16 slopes still give float32 distances: 4095 and 4094 stay apart."""
    bias = F.alibi_bias(torch.tensor([1.0], dtype=torch.bfloat16), torch.tensor([4095, 4096]), torch.tensor([0]))
    assert bias.dtype == torch.float32 and bias[0, :, 0].tolist() == [-4095.0, -4096.0]


def test_clipped_relative_index() -> None:
    """Shaw et al. 2018, section 3.2: clip(j - i, -K, K) + K."""
    idx = F.clipped_relative_index(torch.arange(5), torch.arange(5), 2)
    expected = [[min(max(j - i, -2), 2) + 2 for j in range(5)] for i in range(5)]
    assert idx.tolist() == expected and idx.dtype == torch.long
