"""Properties the literature states about the encodings (tier 2 of docs/design.md's tests).

Sinusoid: Vaswani et al. 2017 section 3.5 ("PE(p+k) is a linear function of PE(p)"); the dot product
and boundedness arguments are Kazemnejad 2019's ("Transformer Architecture: The Positional Encoding"). RoPE: Su et al. 2021 section 3.4 (scores depend on
m - n only; rotations are orthogonal). Attention without position information is a bag of words
(Kazemnejad 2019; "A Brief Summary on Positional Encoding Methods"; Haviv et al. 2022), and every encoding must break that symmetry.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import functional as F

FAST = settings(max_examples=40, deadline=None)


def _offset_rotation(k: float, inv_freq: torch.Tensor) -> torch.Tensor:
    """M_k for the interleaved (sin, cos) layout: per pair [[cos wk, sin wk], [-sin wk, cos wk]] acting on
    (sin wp, cos wp) as a column — the angle-addition formulas, written out by hand."""
    d = 2 * len(inv_freq)
    m = torch.zeros(d, d, dtype=torch.float64)
    for i, w in enumerate(inv_freq.tolist()):
        c, s = math.cos(w * k), math.sin(w * k)
        m[2 * i, 2 * i], m[2 * i, 2 * i + 1] = c, s  # sin(w(p+k)) = sin(wp) cos(wk) + cos(wp) sin(wk)
        m[2 * i + 1, 2 * i], m[2 * i + 1, 2 * i + 1] = -s, c  # cos(w(p+k)) = cos(wp) cos(wk) - sin(wp) sin(wk)
    return m


@FAST
@given(k=st.integers(min_value=-5000, max_value=5000))
def test_sinusoid_offset_is_a_fixed_rotation(k: int) -> None:
    """PE(p + k) = M_k PE(p) with one orthogonal M_k for every p in 0..999 (float64, atol 1e-9)."""
    d = 32
    positions = torch.arange(1000, dtype=torch.float64)
    pe = F.sinusoidal(positions, d, dtype=torch.float64)  # [p, d]
    shifted = F.sinusoidal(positions + k, d, dtype=torch.float64)  # [p, d]
    m = _offset_rotation(k, F.sinusoidal_inv_freq(d))
    torch.testing.assert_close(pe @ m.T, shifted, atol=1e-9, rtol=0)
    torch.testing.assert_close(m @ m.T, torch.eye(d, dtype=torch.float64), atol=1e-12, rtol=0)


def test_sinusoid_offset_map_recovered_by_least_squares_is_the_rotation() -> None:
    """Fitting PE(p + k) from PE(p) over many p recovers M_k itself: the map is fixed, not per position."""
    d, k, base = 8, 7, 100.0  # base 100: the slowest pair turns 30 rad over the fit, a well-posed fit
    pe = F.sinusoidal(torch.arange(1000), d, base=base, dtype=torch.float64)
    shifted = F.sinusoidal(torch.arange(k, 1000 + k), d, base=base, dtype=torch.float64)
    fitted = torch.linalg.lstsq(pe, shifted).solution.T  # PE(p+k) = M PE(p)
    torch.testing.assert_close(fitted, _offset_rotation(k, F.sinusoidal_inv_freq(d, base=base)), atol=1e-9, rtol=0)


@FAST
@given(k=st.integers(min_value=-300, max_value=300), p=st.integers(min_value=0, max_value=10**6))
def test_sinusoid_dot_product_depends_on_offset_only(k: int, p: int) -> None:
    """PE(p) · PE(p + k) = Σ_i cos(w_i k), whatever p (float64, atol 1e-8)."""
    d = 64
    pe = F.sinusoidal(torch.tensor([p, p + k], dtype=torch.float64), d, dtype=torch.float64)
    expected = sum(math.cos(w * k) for w in F.sinusoidal_inv_freq(d).tolist())
    assert (pe[0] @ pe[1]).item() == pytest.approx(expected, abs=1e-8)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("frequencies", ["paper", "tensor2tensor"])
def test_sinusoid_bounded(layout: str, frequencies: str) -> None:
    """Every value lies in [-1, 1] and each (sin, cos) pair has norm 1, so |PE(p)|² = d/2."""
    pe = F.sinusoidal(
        torch.tensor([0, 1, 17, 10**4, 10**7]), 64, layout=layout, frequencies=frequencies, dtype=torch.float64
    )
    assert pe.abs().max() <= 1.0
    torch.testing.assert_close(pe.pow(2).sum(-1), torch.full((5,), 32.0, dtype=torch.float64))


def _half_to_interleaved(r: int) -> torch.Tensor:
    """Feature order that turns half-layout pairs (i, i + r/2) into interleaved pairs (2i, 2i+1)."""
    return torch.stack((torch.arange(r // 2), torch.arange(r // 2) + r // 2), dim=-1).flatten()  # [r]


def test_sinusoid_layouts_agree_up_to_permutation() -> None:
    interleaved = F.sinusoidal(50, 16, layout="interleaved")
    half = F.sinusoidal(50, 16, layout="half")
    assert torch.equal(half[:, _half_to_interleaved(16)], interleaved)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@FAST
@given(m=st.integers(0, 10**5), n=st.integers(0, 10**5), shift=st.integers(-(10**4), 10**4))
def test_rope_scores_depend_on_distance_only(layout: str, m: int, n: int, shift: int) -> None:
    """<R_m q, R_n k> = <R_{m+t} q, R_{n+t} k> (RoFormer eq. 16), float64, atol 1e-9."""
    shift = max(shift, -min(m, n))
    gen = torch.Generator().manual_seed(m * 7 + n)
    q = torch.randn(1, 1, 1, 32, dtype=torch.float64, generator=gen)
    k = torch.randn(1, 1, 1, 32, dtype=torch.float64, generator=gen)
    rope = posenc.create("rope", dim=32, layout=layout)
    q1, k1 = rope.rotate(q, k, torch.tensor([m]), torch.tensor([n]))
    q2, k2 = rope.rotate(q, k, torch.tensor([m + shift]), torch.tensor([n + shift]))
    assert (q1 * k1).sum().item() == pytest.approx((q2 * k2).sum().item(), abs=1e-9)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_keeps_norms(layout: str) -> None:
    """Rotations are orthogonal: every rotated vector keeps its norm, integer and float positions."""
    x = torch.randn(2, 3, 20, 64, dtype=torch.float64)
    inv, _ = F.rope_inv_freq(64)
    for positions in (torch.arange(20) * 1000, torch.linspace(0, 7.5, 20, dtype=torch.float64)):
        cos, sin = F.rope_cos_sin(positions, inv, layout=layout, dtype=torch.float64)
        out = F.apply_rope(x, cos, sin, layout=layout)
        torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), atol=1e-12, rtol=0)


def test_rope_layouts_agree_up_to_permutation() -> None:
    """Rotating in the half layout and permuting equals permuting and rotating in the interleaved
    layout (so both give the same attention scores)."""
    x = torch.randn(2, 2, 10, 16)
    perm = _half_to_interleaved(16)
    positions = torch.arange(5, 15)
    half = posenc.create("rope", dim=16, layout="half")
    inter = posenc.create("rope", dim=16, layout="interleaved")
    out_half, _ = half.rotate(x, x, positions, positions)
    out_inter, _ = inter.rotate(x[..., perm], x[..., perm], positions, positions)
    torch.testing.assert_close(out_half[..., perm], out_inter, atol=1e-6, rtol=0)


def test_rope_linear_scaling_is_position_interpolation() -> None:
    """Linear scaling by f at position p equals unscaled RoPE at position p / f (Chen et al. 2023)."""
    inv, _ = F.rope_inv_freq(32)
    lin, _ = F.rope_inv_freq(32, scaling={"rope_type": "linear", "factor": 4.0})
    p = torch.arange(0, 400, 3)
    c1, s1 = F.rope_cos_sin(p, lin, dtype=torch.float64)
    c2, s2 = F.rope_cos_sin(p.double() / 4, inv, dtype=torch.float64)
    torch.testing.assert_close(c1, c2, atol=1e-12, rtol=0)
    torch.testing.assert_close(s1, s2, atol=1e-12, rtol=0)


# -- attention as a bag of words --------------------------------------------------------------

VOCAB = {"tom": 0, "bit": 1, "a": 2, "dog": 3}


def _sentences() -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    first = torch.tensor([[VOCAB[w] for w in "tom bit a dog".split()]])
    second = torch.tensor([[VOCAB[w] for w in "a dog bit tom".split()]])
    perm = [2, 3, 1, 0]  # second[i] = first[perm[i]]
    assert torch.equal(second[0], first[0, perm])
    return first, second, perm


def _attention_outputs(encoding: str | None) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    torch.manual_seed(0)
    embed = torch.nn.Embedding(len(VOCAB), 32).double()
    attn = posenc.Attention(32, 4, encoding=encoding).double()
    params = list(attn.encoding.parameters())
    if params and all(not p.any() for p in params):  # starts as NoPE (CoPE's zero table): the claim is about the
        for p in params:  # encoding, so give its parameters values, as training would
            torch.nn.init.normal_(p, std=0.5)
    first, second, perm = _sentences()
    with torch.no_grad():
        return attn(embed(first)), attn(embed(second)), perm


def test_no_encoding_is_a_bag_of_words() -> None:
    """Without an encoding "Tom bit a dog" and "A dog bit Tom" give each word the same output."""
    out1, out2, perm = _attention_outputs(None)
    torch.testing.assert_close(out2, out1[:, perm], atol=1e-12, rtol=0)
    out1, out2, perm = _attention_outputs("none")
    torch.testing.assert_close(out2, out1[:, perm], atol=1e-12, rtol=0)


@pytest.mark.parametrize("name", [n for n in posenc.available() if n != "none"])
def test_every_encoding_breaks_the_symmetry(name: str) -> None:
    """Each registered scheme, built by name inside Attention (non-causal), tells the two sentences apart:
    some word's output moves by more than 1e-6 (the NoPE case above agrees to 1e-12)."""
    try:
        posenc.Attention(32, 4, encoding=name)
    except (TypeError, ValueError) as err:  # e.g. a multi-dimensional scheme that needs a grid shape
        pytest.skip(f"{name!r} cannot be built by name for a 1-D sequence: {err}")
    out1, out2, perm = _attention_outputs(name)
    assert (out2 - out1[:, perm]).abs().max() > 1e-6


@pytest.mark.parametrize("name", posenc.available())
def test_relative_schemes_are_translation_invariant(name: str) -> None:
    """Rotary, bias and relative schemes see only k - q: shifting every position by 300 leaves Attention's
    output unchanged (float64, atol 1e-9); absolute schemes see the shift (the output moves by > 1e-6)."""
    try:
        attn = posenc.Attention(32, 4, encoding=name, causal=True).double()
    except (TypeError, ValueError) as err:  # e.g. a multi-dimensional scheme that needs a grid shape
        pytest.skip(f"{name!r} cannot be built by name for a 1-D sequence: {err}")
    for p in attn.parameters():
        torch.nn.init.normal_(p, std=0.3)
    x = torch.randn(2, 7, 32, dtype=torch.float64)
    with torch.no_grad():
        near, far = attn(x, torch.arange(7)), attn(x, torch.arange(300, 307))
    if attn.encoding.family in ("rotary", "bias", "relative", "none"):
        torch.testing.assert_close(far, near, atol=1e-9, rtol=0)
    else:
        assert attn.encoding.family == "absolute"
        assert (far - near).abs().max() > 1e-6
