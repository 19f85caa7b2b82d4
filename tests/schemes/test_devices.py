"""Schemes on other devices: CUDA gives the CPU output, and the meta device gives output shapes."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.all_schemes import DIM, SCHEMES, attention


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", SCHEMES)
def test_cuda_equals_cpu(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same module moved to CUDA gives the CPU output to 1e-5 (float32; TF32 off), positions
    given on the CPU or on the GPU, and after a ``to_empty`` from the meta device."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    a = attention(name)
    x = torch.randn(2, 7, DIM)
    expected = a(x)
    gpu = copy.deepcopy(a).to("cuda")
    torch.testing.assert_close(gpu(x.cuda()).cpu(), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gpu(x.cuda(), torch.arange(7)).cpu(), expected, atol=1e-5, rtol=1e-5)
    with torch.device("meta"):
        m = attention(name)
    m.to_empty(device="cuda")
    m.load_state_dict(a.state_dict())
    torch.testing.assert_close(m(x.cuda()).cpu(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", SCHEMES)
def test_meta_device_forward_gives_shapes(name: str) -> None:
    """On the meta device (shapes only) a forward must give the output's shape: the caches and range
    checks that read position values on the host are skipped there (5 schemes raised
    "Tensor.item() cannot be called on meta tensors")."""
    with torch.device("meta"):
        a = attention(name)
        y = a(torch.randn(2, 5, DIM))
    assert y.device.type == "meta" and y.shape == (2, 5, DIM)
