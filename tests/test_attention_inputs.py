"""What ``posenc.Attention`` builds from its arguments and checks in its inputs: a scheme named
by string gets defaults that follow ``causal`` and the head width, empty sequences and batches
run, and wrong inputs (integer or list ``x``, positions of another batch size, a dropout that is
not a probability) are refused with errors that name them.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from tests.all_schemes import DIM, HEADS, SCHEMES, attention


@pytest.mark.parametrize("name", ["t5", "alibi"])
def test_bias_schemes_are_one_directional_in_causal_attention(name):
    """Attention's default bias config follows causal: a causal model sees only past keys, so its
    T5 buckets / ALiBi slopes are one-directional (bidirectional=False), and a non-causal one
    bidirectional."""
    assert posenc.Attention(32, 2, encoding=name, causal=True).encoding.config.bidirectional is False
    assert posenc.Attention(32, 2, encoding=name, causal=False).encoding.config.bidirectional is True


def test_rope_axial_by_name_on_two_feature_heads() -> None:
    """``Attention(6, 3, encoding="rope_axial")`` (head width 2, two axes need 4 features) raises a
    ValueError naming the head width and the fix. Was a bug: "rotary_dim must be a positive integer,
    got 0" for a rotary_dim the user never passed; fixed in ``RopeAxial.attention_defaults``."""
    with pytest.raises(ValueError, match=r"head width of at least 4.*got head width 2 \(dim=6, num_heads=3\)"):
        posenc.Attention(6, 3, encoding="rope_axial")


@pytest.mark.parametrize("dropout", [-0.1, 1.5, float("nan")])
def test_dropout_outside_a_probability_rejected_at_construction(dropout: float) -> None:
    """Was a bug: accepted, then ``nnf.dropout`` failed at the first training step; fixed in ``Attention.__init__``."""
    with pytest.raises(ValueError, match=r"dropout must be a probability in \[0, 1\], got"):
        posenc.Attention(DIM, HEADS, dropout=dropout)


@pytest.mark.parametrize("name", SCHEMES)
def test_empty_sequence_and_empty_batch(name: str) -> None:
    """``s = 0`` and ``b = 0`` give empty outputs of the right shape, with and without gradients and
    through a KV cache (an empty prompt, then one token at position 0).

    Was a bug for rope: the eager rotation indexed row 0 of an empty sequence (IndexError), fixed in
    ``functional/_rope_eager.py``."""
    a = attention(name)
    assert a(torch.randn(2, 0, DIM)).shape == (2, 0, DIM)
    assert a(torch.randn(0, 3, DIM)).shape == (0, 3, DIM)
    x = torch.randn(2, 0, DIM, requires_grad=True)
    a(x).sum().backward()
    assert x.grad is not None and x.grad.shape == (2, 0, DIM)
    if a.encoding.family != "absolute":
        cache = posenc.KVCache()
        a(torch.randn(1, 0, DIM), cache=cache)
        token = torch.randn(1, 1, DIM)
        assert torch.equal(a(token, cache=cache), a(token))
        assert cache.length == 1


def test_attention_rejects_non_float_inputs_with_a_type_error() -> None:
    """Integer token ids or a Python list passed as ``x`` raise a TypeError naming what was received.
    Was a bug: ``RuntimeError: expected m1 and m2 to have the same dtype`` from the projection, and an
    AttributeError for a list; fixed in ``Attention.forward``."""
    a = attention("rope")
    with pytest.raises(TypeError, match=r"floating-point embeddings x \[b, s, 12\].*torch.int64"):
        a(torch.ones(1, 5, DIM, dtype=torch.long))
    with pytest.raises(TypeError, match="got list"):
        a([[0.0] * DIM])  # type: ignore[arg-type]


@pytest.mark.parametrize("name", SCHEMES)
def test_batched_positions_of_another_batch_size_rejected(name: str) -> None:
    """Positions ``[3, s]`` for a batch of 2 raise a ValueError naming b and s; ``[1, s]`` broadcasts
    (to 1e-6: batched positions take the reference bias formula instead of the cached Toeplitz build).
    Was a bug: broadcasting errors from deep inside each scheme; fixed in ``Attention.forward``."""
    a = attention(name)
    x = torch.randn(2, 4, DIM)
    with pytest.raises(ValueError, match=r"\[s\], \[1, s\] or \[b, s\] with b=2, s=4, got shape \(3, 4"):
        a(x, torch.zeros(3, 4, dtype=torch.long))  # N-D schemes read it as coordinates (3, 4, 2)
    torch.testing.assert_close(a(x, torch.arange(4)[None]), a(x, torch.arange(4)), atol=1e-6, rtol=0)
