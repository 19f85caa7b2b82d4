"""The cached biases of ALiBi and T5: kept apart from inference mode, and following edits of the
slopes or the bucket table made through ``.data``.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import functional as F
from tests.all_schemes import DIM, attention


@pytest.mark.parametrize("name", ["alibi", "t5", "t5-frozen"])
def test_bias_cached_under_inference_mode_then_training_without_a_causal_mask(name: str) -> None:
    """Without a causal mask or key mask the cached bias is SDPA's mask as it is: one made under
    inference mode must not reach autograd later ("Inference tensors cannot be saved for
    backward"). Was a bug: the bias cache ignored the mode (found by fuzzing)."""
    a = attention(name.removesuffix("-frozen"), causal=False).eval()
    if name.endswith("-frozen"):
        a.encoding.requires_grad_(False)  # a frozen table: its bias is cached in training too
    x = torch.randn(2, 6, DIM)
    with torch.inference_mode():
        first = a(x)
    xx = x.clone().requires_grad_()
    out = a(xx)
    torch.testing.assert_close(out.detach(), first, atol=1e-6, rtol=0)
    out.square().sum().backward()
    assert xx.grad is not None and float(xx.grad.abs().sum()) > 0


@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_bias_cache_follows_edits_through_data(name: str) -> None:
    """``param.data.add_(...)`` (Hugging Face-style initialisation) leaves the version counter alone;
    the cached bias must still follow the new values (it is compared by value). Was a bug."""
    enc = posenc.create(name, num_heads=2)
    p = enc.slopes if name == "alibi" else enc.relative_attention_bias.weight
    q = torch.arange(4)
    with torch.no_grad():
        before = enc.bias(q, q).clone()
        p.data.mul_(2.0)
        after = enc.bias(q, q)
    if name == "alibi":
        want = F.alibi_bias(p.detach().float(), q, q)
    else:
        want = p.detach()[enc.buckets(q, q)].movedim(-1, -3)
    torch.testing.assert_close(after, want, atol=0, rtol=0)
    assert not torch.equal(after, before)
