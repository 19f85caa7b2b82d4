"""Layer schedules in the experiments (issue 25, item 4): ``rope+nopeN`` labels, the tiny model built
from one scheme per layer, and the trained encodings saved per layer.

The property that catches a wrong schedule: a NoPE layer's attention ignores the positions it is
given (its output is bit-identical under permuted positions), a RoPE layer's does not.
"""

from __future__ import annotations

import pytest
import torch

from posenc.experiments.model import ModelConfig, TinyTransformer
from posenc.experiments.runner import (
    encoding_path,
    load_encoding,
    load_layer_encodings,
    run_experiment,
    save_encoding,
)
from posenc.experiments.suite import SchemeLabel, Settings, nope_schedule, parse_label, plan
from posenc.schemes import NoPositionalEncoding
from posenc.schemes.rope import Rope


def test_labels_and_schedules() -> None:
    """``+nopeN`` is Llama 4's default ``no_rope_layers`` with ``no_rope_layer_interval = N``: layers
    N, 2N, ... (from 1) are NoPE; modifiers combine in any order, each once."""
    assert parse_label("rope+nope4") == SchemeLabel("rope", False, 4)
    assert (
        parse_label("alibi+randomized+nope2") == parse_label("alibi+nope2+randomized") == SchemeLabel("alibi", True, 2)
    )
    assert nope_schedule("rope", 8, 4) == ("rope",) * 3 + ("none",) + ("rope",) * 3 + ("none",)
    assert nope_schedule("t5", 3, 3) == ("t5", "t5", "none")
    for spec, message in [
        ("rope+nope1", r"'\+nope1' has no layer with the scheme"),
        ("rope+nope", "unknown scheme modifier 'nope'"),
        ("rope+nope2+nope3", "repeated scheme modifier 'nope3'"),
        ("learned+nope2", "'learned' is absolute"),
        ("none+nope2", "'none' has no encoding to leave out"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_label(spec)
    with pytest.raises(ValueError, match=r"makes layers 4, 8, ... NoPE; a model of 2 layers has none of them"):
        plan("length", Settings(schemes=("rope+nope4",), tasks=("copy",)))
    with pytest.raises(ValueError, match="layers must be a positive integer"):
        plan("length", Settings(layers=0))
    (job,) = plan("length", Settings(schemes=("rope+nope4",), tasks=("copy",), seeds=(0,), layers=4))
    assert job.model.num_layers == 4 and job.model.layer_schemes == ("rope", "rope", "rope", "none")
    with pytest.raises(ValueError, match="the extend experiment rescales RoPE; its only scheme is 'rope'"):
        plan("extend", Settings(schemes=("rope+nope2",)))


def test_model_config_checks_the_schedule() -> None:
    with pytest.raises(ValueError, match="layer_schemes names 3 layers; the model has num_layers=2"):
        ModelConfig(vocab_size=5, layer_schemes=("rope", "none", "rope"))
    with pytest.raises(ValueError, match="'sinusoidal' is absolute"):
        ModelConfig(vocab_size=5, layer_schemes=("rope", "sinusoidal"))
    with pytest.raises(ValueError, match="never names the model's scheme 'rope'"):
        ModelConfig(vocab_size=5, layer_schemes=("alibi", "none"))
    with pytest.raises(ValueError, match="unknown positional encoding .nope.; choose one of: none"):
        ModelConfig(vocab_size=5, layer_schemes=("rope", "nope"))


def test_nope_layers_ignore_positions_and_rope_layers_do_not() -> None:
    """Per layer of a ``rope, none, rope, none`` model: the attention output at positions 0..s-1 and
    at the same positions permuted is bit-identical exactly in the NoPE layers (a wrong schedule,
    or RoPE leaking into a NoPE layer, fails); the NoPE layers share one ``none`` module, the RoPE
    layers the model's scheme (with its options: base 100)."""
    config = ModelConfig(
        vocab_size=11, dim=16, num_heads=2, num_layers=4, scheme="rope", scheme_options={"base": 100.0},
        layer_schemes=("rope", "none", "rope", "none"),
    )  # fmt: skip
    model = TinyTransformer(config).eval()
    torch.manual_seed(0)
    x = torch.randn(2, 9, 16)
    order, shuffled = torch.arange(9), torch.randperm(9, generator=torch.Generator().manual_seed(1))
    ignores = []
    with torch.no_grad():
        for block in model.blocks:
            ignores.append(torch.equal(block.attn(x, order), block.attn(x, shuffled)))
    assert ignores == [False, True, False, True]
    kinds = [type(block.attn.encoding) for block in model.blocks]
    assert kinds == [Rope, NoPositionalEncoding, Rope, NoPositionalEncoding]
    assert model.blocks[0].attn.encoding is model.blocks[2].attn.encoding is model.scheme
    assert model.scheme.config.base == 100.0
    assert model.blocks[1].attn.encoding is model.blocks[3].attn.encoding
    # a schedule changes the encodings only: same seed, same weights as the model without one
    torch.manual_seed(3)
    scheduled = TinyTransformer(config).state_dict()
    torch.manual_seed(3)
    plain = TinyTransformer(
        ModelConfig(vocab_size=11, dim=16, num_heads=2, num_layers=4, scheme_options={"base": 100.0})
    )
    assert scheduled.keys() == plain.state_dict().keys()
    assert all(torch.equal(scheduled[k], v) for k, v in plain.state_dict().items())


@pytest.mark.slow
def test_a_scheduled_run_trains_and_saves_every_layers_encoding(tmp_path) -> None:
    """``posenc experiment length --schemes rope+nope2`` for three steps: records name the label and
    store the schedule in their config; the saved encodings load back per layer (RoPE, NoPE) and
    the model's scheme alone through ``load_encoding``."""
    settings = Settings(steps=3, tasks=("copy",), schemes=("rope+nope2",), seeds=(0,), quick=True)
    (job,) = plan("length", settings)
    records = run_experiment("length", tmp_path, settings)
    assert [r["scheme"] for r in records] == ["rope+nope2"]
    assert records[0]["config"]["model"]["layer_schemes"] == ["rope", "none"]
    assert 0.0 <= records[0]["in_distribution"] <= 1.0
    path = encoding_path(job, tmp_path)
    assert path.name == "length__copy__rope_nope2__seed0.pt"
    layers = load_layer_encodings(path)
    assert [type(e) for e in layers] == [Rope, NoPositionalEncoding]
    assert isinstance(load_encoding(path), Rope) and load_encoding(path).config == layers[0].config
    save_encoding(layers[0], tmp_path / "plain.pt")  # as a run without a schedule saves it
    with pytest.raises(ValueError, match="one encoding shared by every layer"):
        load_layer_encodings(tmp_path / "plain.pt")
