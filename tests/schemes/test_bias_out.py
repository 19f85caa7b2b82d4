"""``scheme.bias(q, k, out=buf)``: the bias written into a preallocated tensor (inference) is
``buf`` itself and equals ``scheme.bias(q, k)`` bit for bit, for contiguous, offset, scattered and
batched positions; a ``buf`` of another shape or dtype is a ValueError naming the shape accepted.
FIRE's fast inference build (:func:`posenc.schemes.fire.fire_bias`) gives its training path's
numbers bit for bit."""

from __future__ import annotations

import pytest
import torch

import posenc

#: Parameter-only bias schemes and options: (id, name, config).
BIASED = [
    ("alibi", "alibi", {}),
    ("alibi-bidirectional", "alibi", {"bidirectional": True}),
    ("alibi-train_length-scaled", "alibi", {"train_length": 8}),  # 13 keys > 8: slopes * 8 / 13
    ("alibi-train_length-unscaled", "alibi", {"train_length": 64}),
    ("alibi-num_biased_heads", "alibi", {"num_biased_heads": 2}),
    ("t5", "t5", {}),
    ("t5-bidirectional", "t5", {"bidirectional": True}),
    ("kerple-log", "kerple", {"variant": "log"}),
    ("kerple-power", "kerple", {"variant": "power"}),
    ("sandwich", "sandwich", {"dim": 16}),
    ("fire", "fire", {}),
    ("fire-small-init_L", "fire", {"init_L": 4.0}),  # rows past the threshold
    ("dpb", "dpb", {}),
]

POSITIONS = {
    "causal": (torch.arange(13), torch.arange(13)),
    "offset": (torch.arange(5, 13), torch.arange(13)),
    "keys-after": (torch.arange(2, 6), torch.arange(3, 20)),
    "scattered": (torch.tensor([0, 3, 7]), torch.tensor([0, 3, 7])),
    "batched": (torch.arange(6).repeat(2, 1), torch.arange(6).repeat(2, 1)),
}


def _scheme(name: str, **config: object) -> posenc.PositionalEncoding:
    torch.manual_seed(0)
    enc = posenc.create(name, num_heads=4, **config)
    with torch.no_grad():  # away from the initialisation: every parameter matters
        for p in enc.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return enc


@pytest.mark.parametrize("where", list(POSITIONS))
@pytest.mark.parametrize(("name", "config"), [c[1:] for c in BIASED], ids=[c[0] for c in BIASED])
def test_bias_into_out_is_the_bias_bit_for_bit(name, config, where) -> None:
    enc = _scheme(name, **config)
    q, k = POSITIONS[where]
    with torch.no_grad():  # the inference path (FIRE: fire_bias; contiguous ranges: the cache)
        expected = enc.bias(q, k)
    out = torch.full(expected.shape, float("nan"), dtype=expected.dtype)  # every element must be written
    assert enc.bias(q, k, out=out) is out  # grad enabled, parameters needing grad: still no gradient
    assert torch.equal(out, expected)
    assert not out.requires_grad
    # the training path (every pair's value; FIRE: see below, bit for bit) rounds alike up to an
    # ulp (KERPLE's power: pow over another batch)
    torch.testing.assert_close(out, enc.bias(q, k).detach(), rtol=0, atol=1e-6)
    again = torch.full_like(out, float("nan"))
    with torch.inference_mode():
        assert enc.bias(q, k, out=again) is again
    assert torch.equal(again, expected)


def test_alibi_train_length_out_keeps_the_interpolated_slopes() -> None:
    """Al-Khateeb et al. 2023, section 3: 13 keys past train_length 8 scale the slopes by 8 / 13."""
    enc = posenc.create("alibi", num_heads=4, train_length=8)
    q = k = torch.arange(13)
    out = torch.empty(4, 13, 13)
    enc.bias(q, k, out=out)
    want = posenc.functional.alibi_bias(enc.slopes.float() * 8 / 13, q, k)
    assert torch.equal(out, want)
    assert not torch.equal(out, posenc.create("alibi", num_heads=4).bias(q, k))


@pytest.mark.parametrize(("sq", "sk", "q0", "init_L"), [(40, 40, 0, 8.0), (40, 43, 5, 8.0), (30, 30, 100, 16.0)])
def test_fire_inference_path_is_its_training_path_bit_for_bit(sq, sk, q0, init_L) -> None:
    enc = _scheme("fire", init_L=init_L)
    q, k = torch.arange(q0, q0 + sq), torch.arange(sk)
    trained = enc.bias(q, k)  # grad enabled: the MLP per distinct value, gradients to f, c and L
    assert trained.requires_grad
    with torch.no_grad():
        assert torch.equal(enc.bias(q, k), trained.detach())
    enc.requires_grad_(False)  # no parameter needs grad: the fast path with grad mode on
    assert torch.equal(enc.bias(q, k), trained.detach())


def test_noncontiguous_out_views_are_filled() -> None:
    q = k = torch.arange(9)
    for name, config in [("alibi", {}), ("fire", {"init_L": 4.0}), ("t5", {})]:
        enc = _scheme(name, **config)
        expected = enc.bias(q, k).detach()
        big = torch.full((4, 9, 12), float("nan"))
        view = big[:, :, 2:11]  # [4, 9, 9], not contiguous
        assert enc.bias(q, k, out=view) is view
        assert torch.equal(view, expected), name
        assert big[:, :, :2].isnan().all() and big[:, :, 11:].isnan().all()


@pytest.mark.parametrize("where", ["causal", "scattered", "batched"])
@pytest.mark.parametrize(("name", "config"), [c[1:] for c in BIASED], ids=[c[0] for c in BIASED])
def test_wrong_out_is_a_value_error_naming_the_shape(name, config, where) -> None:
    enc = _scheme(name, **config)
    q, k = POSITIONS[where]
    shape = tuple(enc.bias(q, k).shape)
    accepted = str(list(shape))
    with pytest.raises(ValueError, match=r"out must be .*got") as err:
        enc.bias(q, k, out=torch.empty(*shape[:-1], shape[-1] + 1))
    assert accepted in str(err.value)  # what is accepted, e.g. [4, 13, 13]
    with pytest.raises(ValueError, match=r"out must be .*float64"):
        enc.bias(q, k, out=torch.empty(shape, dtype=torch.float64))
    with pytest.raises(ValueError, match="out must be"):
        enc.bias(q, k, out=[0.0])


@pytest.mark.parametrize("name", posenc.available())
def test_every_scheme_takes_out(name) -> None:
    """Schemes without a positions-only bias answer None (out untouched) or their own ValueError."""
    torch.manual_seed(0)
    enc = posenc.create(name, **posenc.scheme_class(name).attention_defaults(8, 4, 32, True))
    q = k = torch.arange(5)
    try:
        expected = enc.bias(q, k)
    except ValueError:
        with pytest.raises(ValueError):
            enc.bias(q, k, out=torch.empty(4, 5, 5))
        return
    out = torch.full((4, 5, 5), float("nan"))
    got = enc.bias(q, k, out=out)
    if expected is None:
        assert got is None and out.isnan().all()
    else:
        assert got is out and torch.equal(out, expected.detach())
