"""Saving, copying and loading schemes: ``state_dict`` round trips (learned parameters only),
``deepcopy``, ``pickle`` and ``repr``, building on the meta device then loading, and the error
for a table of another size.
"""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch

import posenc
from tests.all_schemes import DIM, HEADS, LEARNED_PARAMETERS, SCHEMES, attention


@pytest.mark.parametrize("name", SCHEMES)
def test_state_dict_round_trip_with_weights_only(name: str) -> None:
    """``torch.save(state_dict)`` / ``torch.load(weights_only=True)`` into a freshly built module gives
    the same output exactly; the encoding contributes its learned parameters only (caches and
    frequencies are not persisted)."""
    a = attention(name)
    x = torch.randn(2, 5, DIM)
    expected = a(x)
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    fresh = attention(name)
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    assert torch.equal(fresh(x), expected)
    keys = {k.removeprefix("encoding.") for k in a.state_dict() if k.startswith("encoding.")}
    assert keys == LEARNED_PARAMETERS[name]


@pytest.mark.parametrize("name", SCHEMES)
def test_deepcopy_pickle_and_repr(name: str) -> None:
    """``copy.deepcopy`` and ``pickle`` give modules with identical outputs (also after the original's
    caches were filled), and ``repr`` shows the scheme's config values."""
    a = attention(name)
    x = torch.randn(2, 5, DIM)
    expected = a(x)  # fills caches
    assert torch.equal(copy.deepcopy(a)(x), expected)
    assert torch.equal(pickle.loads(pickle.dumps(a))(x), expected)
    text = repr(a.encoding)
    assert text.startswith(type(a.encoding).__name__ + "(")
    if name in ("t5", "alibi") or (name != "none" and not hasattr(a.encoding.config, "dim")):  # per-head biases
        assert f"num_heads={HEADS}" in text
    elif name != "none":
        assert "dim=" in text


@pytest.mark.parametrize("name", SCHEMES)
def test_meta_device_init_then_to_empty_then_load(name: str) -> None:
    """The low-memory loading path: build under ``torch.device("meta")``, ``to_empty(device="cpu")``,
    ``load_state_dict``: the same output as the module built normally, and the global RNG untouched.
    Was a bug (silently wrong): the frequency/slope/decay buffers, not in the ``state_dict``, were left
    uninitialised by ``to_empty`` (rope, xpos, alibi, sinusoidal and rope_axial gave wrong outputs, xpos
    NaN); fixed in ``PositionalEncoding._apply`` (buffers leaving the meta device are rebuilt from the
    config)."""
    reference = attention(name)
    with torch.device("meta"):
        a = attention(name)
    state = torch.get_rng_state()
    a.to_empty(device="cpu")
    assert torch.equal(torch.get_rng_state(), state)
    a.load_state_dict(reference.state_dict())
    x = torch.randn(2, 5, DIM)
    assert torch.equal(a(x), reference(x))


@pytest.mark.parametrize("name", SCHEMES)
def test_meta_device_init_then_load_with_assign(name: str) -> None:
    """The other low-memory path: build under ``torch.device("meta")``, then
    ``load_state_dict(..., assign=True)``, which swaps in the loaded tensors and leaves what the
    ``state_dict`` does not hold (frequencies, slopes) on the meta device: the forward failed deep in
    torch ("Tensor on device meta is not on the expected device cpu"). The encoding now follows the
    loaded weights, in a layer, in the experiments' model and alone (T5's table)."""
    import pickle

    from posenc.experiments.model import ModelConfig, TinyTransformer

    reference = attention(name)
    with torch.device("meta"):
        a = attention(name)
    a.load_state_dict(reference.state_dict(), assign=True)
    assert not [n for n, t in [*a.named_parameters(), *a.named_buffers()] if t.is_meta]
    x = torch.randn(2, 5, DIM)
    assert torch.equal(a(x), reference(x))
    pickle.loads(pickle.dumps(a))  # the load hooks are functions, not lambdas
    if name in ("sinusoidal", "t5"):
        config = ModelConfig(vocab_size=12, scheme=name, dim=16, num_heads=2, num_layers=1)
        model = TinyTransformer(config)
        with torch.device("meta"):
            built = TinyTransformer(config)
        built.load_state_dict(model.state_dict(), assign=True)
        tokens = torch.randint(12, (2, 6))
        assert torch.equal(built(tokens), model(tokens))
    if name == "t5":
        alone = posenc.create("t5", num_heads=HEADS)
        with torch.device("meta"):
            meta = posenc.create("t5", num_heads=HEADS)
        meta.load_state_dict(alone.state_dict(), assign=True)
        p = torch.arange(6)
        assert torch.equal(meta.bias(p, p), alone.bias(p, p))


@pytest.mark.parametrize(
    ("name", "saved", "here", "shapes"),
    [
        (
            "learned",
            dict(dim=16, max_len=64),
            dict(dim=16, max_len=32),
            r"\(64, 16\) does not fit this learned scheme's \(32, 16\)",
        ),
        (
            "t5",
            dict(num_heads=2, num_buckets=16),
            dict(num_heads=2),
            r"\(16, 2\) does not fit this t5 scheme's \(32, 2\)",
        ),
        (
            "shaw",
            dict(dim=8, max_relative_position=4),
            dict(dim=8),
            r"\(9, 8\) does not fit this shaw scheme's \(33, 8\)",
        ),
    ],
)
def test_state_dict_of_another_table_size_names_the_config(name, saved, here, shapes) -> None:
    """torch alone says "size mismatch"; the message now also names the scheme and its config."""
    with pytest.raises(RuntimeError, match=shapes + r"; it was saved from another configuration \(this one: "):
        posenc.create(name, **here).load_state_dict(posenc.create(name, **saved).state_dict())
