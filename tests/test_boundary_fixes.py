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
