"""Silently wrong results and internal errors at the public boundary, each pinned: mixed position
dtypes, ``out=`` overlapping any input, a size-1 sequence axis against a longer table, non-bool
flags, and strings, lists, meta tensors and huge sizes where checks belong."""

import pytest
import torch

import posenc
from posenc import functional as F
from posenc import kernels as K


# -- mixed position dtypes: int64 against float positions subtracted in float64 ---------------------
def test_relative_positions_mixed_dtypes_exact():
    rel = F.relative_positions(torch.tensor([16_777_217]), torch.tensor([16_777_216.0]))
    assert rel.dtype == torch.float64
    assert rel.tolist() == [[-1.0]]


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("kerple", {"num_heads": 2, "variant": "log"}),
        ("kerple", {"num_heads": 2, "variant": "power"}),
        ("sandwich", {"num_heads": 2, "dim": 8}),
        ("dpb", {"num_heads": 2}),
    ],
)
def test_relative_bias_mixed_dtypes_keep_distance(name, kwargs):
    torch.manual_seed(0)
    module = posenc.create(name, **kwargs)
    mixed = module.bias(torch.tensor([16_777_217]), torch.tensor([16_777_216.0]))  # distance -1
    want = module.bias(torch.tensor([1]), torch.tensor([0]))  # distance -1 with small integers
    zero = module.bias(torch.tensor([0]), torch.tensor([0]))
    assert not torch.equal(want, zero)  # distance -1 and 0 differ, so the check below can fail
    torch.testing.assert_close(mixed.float(), want.float(), rtol=1e-6, atol=1e-7)


# -- out= (or an in-place target) overlapping any input is refused, not computed wrong ------------
def _tables(n, dim=8):
    inv_freq, _ = F.rope_inv_freq(dim)
    return F.rope_cos_sin(n, inv_freq)


def test_rope_out_overlapping_sin_refused():
    cos, _ = _tables(3)
    buf = torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match="out shares memory with sin"):
        K.rope(buf.clone(), cos, buf[0, 0], out=buf)


def test_rope_out_overlapping_cos_refused():
    _, sin = _tables(3)
    buf = torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match="out shares memory with cos"):
        K.rope(buf.clone(), buf[0, 1], sin, out=buf)


def test_rope_in_place_with_sin_a_view_of_x_refused():
    cos, _ = _tables(3)
    storage = torch.randn(3, 16)
    with pytest.raises(ValueError, match="x shares memory with sin"):
        K.rope_(storage[:, :8], cos, storage[:, 8:])


def test_rope_out_separate_from_inputs_still_exact():
    cos, sin = _tables(3)
    x = torch.randn(1, 2, 3, 8)
    out = torch.empty_like(x)
    K.rope(x, cos, sin, out=out)
    torch.testing.assert_close(out, F.apply_rope(x, cos, sin), rtol=0, atol=1e-6)


def test_toeplitz_out_overlapping_values_refused():
    buf = torch.zeros(2, 4, 4)
    values = buf.view(-1)[:14].view(2, 7)
    with pytest.raises(ValueError, match="out shares memory with values"):
        F.toeplitz(values, 4, 4, out=buf)


def test_toeplitz_out_separate_matches_formula():
    values = torch.randn(2, 7, dtype=torch.float64)
    out = F.toeplitz(values, 4, 4, out=torch.empty(2, 4, 4, dtype=torch.float64))
    i, j = torch.meshgrid(torch.arange(4), torch.arange(4), indexing="ij")
    assert torch.equal(out, values[:, j - i + 3])
