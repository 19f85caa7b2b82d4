"""The articles' naive reference codes and the numbers the articles print.

Sources: Pim 2023 ("Understanding positional embeddings in transformer models": the index, the
fraction, and the cosine distances of the d = 1024 sinusoid); Kazemnejad 2019 ("Transformer Architecture: The Positional Encoding": binary
digits, why both sine and cosine); positional-encodings 6.0 ``PositionalEncoding1D`` for parity.
"""

import math

import pytest
import torch

from posenc import analysis as A


def pim_positional_embedding(position: int, d_model: int = 1024) -> torch.Tensor:
    """Pim 2023's numpy function, transcribed to float64 torch: angles p / 10000^(2(i//2)/d), sin on even i, cos on odd i."""
    i = torch.arange(d_model, dtype=torch.float64)
    angles = position / torch.pow(
        torch.tensor(10000.0, dtype=torch.float64), 2 * torch.div(i, 2, rounding_mode="floor") / d_model
    )
    angles[0::2] = angles[0::2].sin()
    angles[1::2] = angles[1::2].cos()
    return angles


def scipy_cosine(u: torch.Tensor, v: torch.Tensor) -> float:
    """``scipy.spatial.distance.cosine``: 1 - u·v / (|u| |v|)."""
    return float(1 - (u @ v) / (u.norm() * v.norm()))


# --- the articles' numbers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "other, expected", [(2, 0.026488616022189992), (3, 0.09339161307513), (30, 0.4323030365719962)]
)
def test_cosine_distance_from_position_1_matches_pim_2023(other: int, expected: float) -> None:
    """Row p is position p (positions 0..n-1), so "position 1" is row 1; Pim 2023 prints these values."""
    E = A.encoding_matrix("sinusoidal", 251, dim=1024)
    assert A.distance_from(E, 1)[other].item() == pytest.approx(expected, abs=1e-6)
    assert A.cosine_distance_matrix(E)[1, other].item() == pytest.approx(expected, abs=1e-6)
    assert scipy_cosine(pim_positional_embedding(1), pim_positional_embedding(other)) == pytest.approx(
        expected, abs=1e-12
    )


def test_positions_convention_does_not_change_the_distances() -> None:
    """Counting positions from 1 instead of 0 gives the same numbers: the distances depend on the offset alone
    (Pim 2023: distance(30, 31) == distance(1, 2) = 0.02648861602218988)."""
    E0 = A.encoding_matrix("sinusoidal", 251, dim=1024)
    E1 = A.encoding_matrix("sinusoidal", torch.arange(1, 252), dim=1024)  # row 0 is position 1
    assert torch.allclose(A.distance_from(E0, 1)[1:], A.distance_from(E1, 0)[:-1], atol=1e-12)
    assert A.cosine_distance_matrix(E0)[30, 31].item() == pytest.approx(0.02648861602218988, abs=1e-12)


def test_sinusoid_matches_pim_2023_code_and_positional_encodings() -> None:
    E = A.encoding_matrix("sinusoidal", 300, dim=1024)
    pim = torch.stack([pim_positional_embedding(p) for p in (0, 1, 7, 299)])
    assert torch.allclose(E[[0, 1, 7, 299]], pim, atol=1e-12)
    from positional_encodings.torch_encodings import PositionalEncoding1D

    ref = PositionalEncoding1D(128)(torch.zeros(1, 300, 128))[0].double()  # float32 angles inside: 1.5e-5 off at p=299
    assert torch.allclose(A.encoding_matrix("sinusoidal", 300, dim=128), ref, atol=5e-5)


def test_distance_from_position_1_grows_up_to_250_at_d_1024() -> None:
    """Pim 2023's scatter: "the distances increase monotonically with position" up to 250."""
    result = A.check_distance_monotone("sinusoidal", n=251, dim=1024)
    assert result.passed and result.value > 0.999
    d = result.data["distances"]
    assert float((d[1:] - torch.cummax(d[1:], 0).values).min()) > -0.01  # never dips by more than 0.01


# --- the reference codes themselves -----------------------------------------------------------------


def test_index_and_fraction_values() -> None:
    index = A.reference_encoding("index", 4, 3)
    assert torch.equal(index, torch.tensor([[0.0] * 3, [1.0] * 3, [2.0] * 3, [3.0] * 3], dtype=torch.float64))
    assert torch.equal(A.reference_encoding("fraction", 4, 2), index[:, :2] / 4)
    assert torch.equal(
        A.reference_encoding("fraction", torch.tensor([1, 3]), 2, seq_len=5)[:, 0],
        torch.tensor([0.2, 0.6], dtype=torch.float64),
    )


def test_binary_bits_least_significant_first_and_wrap() -> None:
    bits = A.binary_bits(torch.tensor([5, 6, 16, 17]), 4)
    assert bits.tolist() == [[1, 0, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]]
    assert A.binary_bits(torch.tensor([2**62 + 1]), 70)[0, [0, 62, 63, 69]].tolist() == [1, 1, 0, 0]


def test_sine_only_values() -> None:
    E = A.reference_encoding("sine_only", torch.tensor([3]), 8)
    expected = [math.sin(3 * 10000 ** (-j / 8)) for j in range(8)]
    assert torch.allclose(E[0], torch.tensor(expected, dtype=torch.float64), atol=1e-15)
    assert torch.equal(A.reference_encoding("sine_only", 1, 8), torch.zeros(1, 8, dtype=torch.float64))  # PE(0) = 0


def test_reference_errors_name_what_is_accepted() -> None:
    with pytest.raises(ValueError, match="'octal'.*'index'"):
        A.reference_encoding("octal", 4, 8)
    with pytest.raises(ValueError, match="non-negative.*-1"):
        A.binary_bits(torch.tensor([-1, 2]), 4)
    with pytest.raises(ValueError, match="seq_len.*0"):
        A.reference_encoding("fraction", 4, 8, seq_len=0)
    with pytest.raises(ValueError, match="does not take.*'num_heads'"):
        A.encoding_matrix("index", 4, num_heads=2)


# --- why the naive codes fail ------------------------------------------------------------------------


def test_index_fails_bounded_and_fraction_fails_length_invariance() -> None:
    bounded = A.check_bounded("index", n=1024)
    assert not bounded.passed and bounded.value == 1023 and bounded.data["grows"]
    assert A.check_bounded("fraction", n=1024).passed
    invariant = A.check_length_invariant("fraction", lengths=(32, 256))
    assert not invariant.passed and invariant.value == pytest.approx(31 / 32 - 31 / 256, abs=1e-15)
    assert A.check_length_invariant("index").passed and A.check_length_invariant("sinusoidal").passed


def test_sine_only_has_no_linear_offset_map_but_sine_and_cosine_do() -> None:
    """Kazemnejad 2019, "Why are both sine and cosine used?": only the (sin, cos) pair turns linearly."""
    sine_only = A.check_linear_offset_map("sine_only", n=512, dim=128)
    sinusoid = A.check_linear_offset_map("sinusoidal", n=512, dim=128)
    assert sinusoid.passed and sinusoid.value < 1e-6
    assert not sine_only.passed and sine_only.value > 0.2
    assert not A.check_offset_similarity("sine_only").passed


def test_binary_collides_past_its_bits_and_does_not_grow_smoothly() -> None:
    unique = A.check_unique("binary", n=64, dim=4)
    assert not unique.passed and unique.data["collision_float64"] == (0, 16) and unique.value == 0
    assert A.check_unique("binary", n=64, dim=6).passed
    assert A.check_distance_monotone("binary").value < 0.5
