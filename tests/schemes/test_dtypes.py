"""The dtypes the schemes compute in: a module cast runs in its dtype close to float64, and float64
inputs get float64 codes and rotations.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

import posenc
from posenc import functional as F
from tests.all_schemes import DIM, SCHEMES, attention


def test_sinusoidal_embed_in_float64_uses_float64_codes():
    """A float64 input gets the code computed in float64: at positions up to 4095 the float32
    code differs by up to ~1e-4, so embedding zeros must return exactly F.sinusoidal(..., float64)."""
    enc = posenc.create("sinusoidal", dim=64)
    out = enc.embed(torch.zeros(1, 4096, 64, dtype=torch.float64))
    expected = F.sinusoidal(torch.arange(4096), 64, dtype=torch.float64)
    assert out.dtype == torch.float64
    assert torch.equal(out[0], expected)


@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize(
    ("dtype", "atol"), [(torch.float16, 3e-3), (torch.bfloat16, 2e-2), (torch.float64, 1e-6)], ids=str
)
def test_module_cast_runs_in_that_dtype_close_to_float64(name: str, dtype: torch.dtype, atol: float) -> None:
    """``Attention(...).to(dtype)`` on inputs of that dtype returns that dtype, within ``atol`` of the
    same module in float64 (float16 3e-3, bfloat16 2e-2 on unit-scale inputs); float64 frequency,
    slope and decay buffers stay float64 after the cast."""
    a = attention(name)
    x = torch.randn(2, 6, DIM, dtype=torch.float64)
    reference = copy.deepcopy(a).double()(x)
    cast = copy.deepcopy(a).to(dtype)
    out = cast(x.to(dtype))
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), reference, atol=atol, rtol=0)
    for buf_name in ("inv_freq", "slopes", "zeta"):
        buf = getattr(cast.encoding, buf_name, None)
        if isinstance(buf, torch.Tensor):
            assert buf.dtype == torch.float64, buf_name


def test_double_inputs_rotate_exactly_at_four_million() -> None:
    """float64 q at positions near 4e6 are rotated with float64 tables: equal to the float64 formula
    to 1e-9 (float32 tables would be ~1e-7 off, float32 angles ~0.05 rad)."""
    rope = posenc.create("rope", dim=8, layout="interleaved")
    positions = torch.arange(4_000_000, 4_000_004)
    q = torch.randn(1, 1, 4, 8, dtype=torch.float64)
    got, _ = rope.rotate(q, q, positions, positions)
    inv = [10000 ** (-2 * i / 8) for i in range(4)]
    expected = torch.empty_like(q)
    for s, p in enumerate(positions.tolist()):
        for i, f in enumerate(inv):
            c, sn = math.cos(p * f), math.sin(p * f)
            a, b = q[0, 0, s, 2 * i].item(), q[0, 0, s, 2 * i + 1].item()
            expected[0, 0, s, 2 * i], expected[0, 0, s, 2 * i + 1] = a * c - b * sn, a * sn + b * c
    torch.testing.assert_close(got, expected, atol=1e-9, rtol=0)


def test_sinusoidal_nd_embeds_float64_in_float64() -> None:
    """It built float32 codes for float64 embeddings (3e-8 off, and gradcheck on coordinates failed)."""
    enc = posenc.create("sinusoidal_nd", dim=8).double()
    x = torch.zeros(1, 5, 8, dtype=torch.float64)
    coords = (torch.rand(5, 2, dtype=torch.float64) * 10).requires_grad_()
    assert torch.equal(enc.embed(x, coords)[0], F.sinusoidal_nd(coords, 8, dtype=torch.float64))
    assert torch.autograd.gradcheck(lambda c: enc.embed(x, c), (coords,))
