"""Relative-position biases for contiguous positions (posenc.kernels.bias, the Toeplitz build of
posenc.functional.toeplitz) equal the reference formulas: ``alibi_bias`` and the T5 bucket lookup,
values and gradients, over offsets and lengths; the per-module caches behind the schemes' ``bias``
follow parameter edits, stay out of the state and step aside for training, batched or scattered
positions."""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import functional as F
from posenc.functional import relative
from posenc.kernels import bias, ranges
from posenc.schemes.base import default_positions


def test_alibi_bias_forms_mixed_integer_and_float_distances_in_float64():
    """An int64 query at 2**24 + 1 against a float32 key at 2**24 is one position away: subtracted
    in float32 (int64 and float32 promote to float32), 2**24 + 1 rounds to 2**24 and the distance
    to 0. Combined in float64 it stays 1, causal and symmetric, with either side the float one."""
    slopes = F.alibi_slopes(4)
    q, k = torch.tensor([2**24 + 1]), torch.tensor([2.0**24])
    for bidirectional in (False, True):
        got = F.alibi_bias(slopes, q, k, bidirectional=bidirectional)  # [h, 1, 1]
        assert torch.equal(got[:, 0, 0], -slopes)
    got = F.alibi_bias(slopes, torch.tensor([2.0**24]), torch.tensor([2**24 + 1]), bidirectional=True)
    assert torch.equal(got[:, 0, 0], -slopes)
    assert F.alibi_bias(slopes, q, k).dtype == torch.float32  # the bias itself stays float32


def test_toeplitz_layout_and_out():
    values = torch.arange(2 * 6, dtype=torch.float32).view(2, 6)  # [h, sq + sk - 1] with sq=2, sk=5
    out = torch.empty(2, 2, 5)
    assert F.toeplitz(values, 2, 5, out=out) is out
    expected = torch.stack(
        [torch.stack([values[h, j - i + 1] for i in range(2) for j in range(5)]).view(2, 5) for h in range(2)]
    )
    assert torch.equal(out, expected)
    with pytest.raises(ValueError, match=r"values must be \[h, sq \+ sk - 1\]"):
        F.toeplitz(values, 3, 5)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize(("sq", "sk", "q0", "k0"), [(7, 7, 0, 0), (3, 11, 8, 0), (5, 4, 2, 9)])
def test_alibi_range_equals_reference(bidirectional, sq, sk, q0, k0):
    slopes = F.alibi_slopes(6)
    q, k = torch.arange(q0, q0 + sq), torch.arange(k0, k0 + sk)
    ref = F.alibi_bias(slopes, q, k, bidirectional=bidirectional)
    got = F.alibi_bias_range(slopes, sq, sk, q_offset=q0, k_offset=k0, bidirectional=bidirectional)
    assert torch.equal(got, ref)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize(("sq", "sk", "q0", "k0"), [(300, 300, 0, 0), (4, 200, 196, 0)])
def test_t5_range_equals_bucket_lookup(bidirectional, sq, sk, q0, k0):
    """Distances past max_distance (128) and both bucket halves are covered."""
    table = torch.randn(32, 4)  # [num_buckets, h]
    q, k = torch.arange(q0, q0 + sq), torch.arange(k0, k0 + sk)
    buckets = F.t5_relative_bucket(F.relative_positions(q, k), bidirectional=bidirectional)  # [sq, sk]
    ref = table[buckets].permute(2, 0, 1)  # [h, sq, sk]
    got = F.t5_bias_range(table, sq, sk, q_offset=q0, k_offset=k0, bidirectional=bidirectional)
    assert torch.equal(got, ref)


@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_scheme_cache_equals_uncached_over_offsets_and_lengths(name):
    enc = posenc.create(name, num_heads=4, bidirectional=True)
    state_before = set(enc.state_dict())
    with torch.no_grad():
        for sq, sk, q0 in [(5, 5, 0), (5, 5, 0), (3, 9, 6), (9, 9, 2), (1, 12, 11)]:
            q, k = torch.arange(q0, q0 + sq), torch.arange(sk)
            got = enc.bias(q, k)
            assert got is bias.cached_bias(enc, q, k)  # the second call is served from the cache
            if name == "alibi":
                ref = F.alibi_bias(enc.slopes.float(), q, k, bidirectional=True)
            else:
                ref = enc.relative_attention_bias(F.t5_relative_bucket(F.relative_positions(q, k))).movedim(-1, -3)
            assert torch.equal(got, ref)
    assert set(enc.state_dict()) == state_before  # the cache is not state


def test_t5_cache_follows_weight_updates_and_training_gets_gradients():
    enc = posenc.create("t5", num_heads=2)
    q = torch.arange(6)
    with torch.no_grad():
        first = enc.bias(q, q).clone()
        enc.relative_attention_bias.weight.add_(1.0)  # an optimizer step, in place
        assert torch.equal(enc.bias(q, q), first + 1.0)
    assert bias.cached_bias(enc, q, q) is None  # grad wanted: the reference path
    enc.bias(q, q).sum().backward()
    counts = torch.bincount(F.t5_relative_bucket(F.relative_positions(q, q)).flatten(), minlength=32)
    assert torch.equal(enc.relative_attention_bias.weight.grad, counts[:, None].float().expand(32, 2))


def test_batched_or_scattered_positions_take_the_reference_path():
    enc = posenc.create("alibi", num_heads=2, bidirectional=True)
    assert bias.cached_bias(enc, torch.tensor([0, 2, 3]), torch.arange(4)) is None
    assert bias.cached_bias(enc, torch.arange(4)[None].expand(2, 4), torch.arange(4)) is None
    scattered = torch.tensor([0, 2, 3])
    assert torch.equal(
        enc.bias(scattered, scattered), F.alibi_bias(enc.slopes.float(), scattered, scattered, bidirectional=True)
    )


def test_bias_build_is_cheap_relative_to_the_bias_itself(monkeypatch):
    """A property that catches an O(h L^2) Python loop or a per-pair bucket computation: the
    Toeplitz build of T5 evaluates the bucket function on sq + sk - 1 distances only."""
    calls = []
    original = relative.t5_relative_bucket

    def counting(rel, **kw):
        calls.append(rel.numel())
        return original(rel, **kw)

    monkeypatch.setattr(relative, "t5_relative_bucket", counting)
    F.t5_bias_range(torch.randn(32, 2), 64, 80)
    assert calls == [64 + 80 - 1]


def test_t5_training_bias_uses_cached_buckets_equal_to_bucketing_each_pair():
    """With a table that needs gradients (training), T5's bias gathers the table at buckets cached
    per lengths and offsets (built from the distinct distances): the same values and the same
    table gradient as bucketing every pair; positions that are no range, or a range edited in
    place after it was made, take the reference buckets."""
    for bidirectional in (True, False):
        t5 = posenc.create("t5", num_heads=3, bidirectional=bidirectional, num_buckets=12, max_distance=30)
        for sq, sk, q0 in ((40, 40, 0), (5, 60, 55), (1, 1, 0)):
            qp, kp = default_positions(None, sq, "cpu", offset=q0), default_positions(None, sk, "cpu")
            got = t5.bias(qp, kp)
            assert got.requires_grad
            ref = t5.relative_attention_bias(t5.buckets(qp, kp)).movedim(-1, -3)  # bucket of every pair
            assert torch.equal(got, ref)
            g = torch.randn_like(got)
            (grad_got,) = torch.autograd.grad(got, t5.relative_attention_bias.weight, g)
            (grad_ref,) = torch.autograd.grad(ref, t5.relative_attention_bias.weight, g)
            assert torch.equal(grad_got, grad_ref)
            assert bias.cached_index(t5, qp, kp, torch.device("cpu")) is bias.cached_index(
                t5, qp, kp, torch.device("cpu")
            )  # cached
    qp = default_positions(None, 6, "cpu")
    assert ranges.range_start(qp) == 0
    qp[3] = 40  # no longer a range: read again, not trusted from its record
    assert ranges.range_start(qp) is None
    assert bias.cached_index(t5, qp, qp, torch.device("cpu")) is None
    assert torch.equal(t5.bias(qp, qp), t5.relative_attention_bias(t5.buckets(qp, qp)).movedim(-1, -3))


def test_t5_buckets_made_in_inference_mode_do_not_reach_training():
    """Buckets cached under inference mode (with grad on) are not served to a later training step,
    which would have to save them for backward."""
    attn = posenc.Attention(32, 4, encoding="t5")
    x = torch.randn(2, 6, 32)
    with torch.inference_mode(), torch.enable_grad():
        attn(x)
    attn(x).sum().backward()
    assert attn.encoding.relative_attention_bias.weight.grad is not None
