"""Every RoPE scaling rule of the registry (:data:`posenc.functional.rope_scaling.ROPE_SCALINGS`)
reaches the surfaces that list scalings, or is left out of one with a stated reason here; a new
rule in neither fails, naming the surface that lacks it. And every rule returns its frequencies and
its attention factor together, at every length.

Surfaces: the atlas's scaling gallery (:func:`posenc.analysis.rotary.scaling_gallery`) and its
colours (``posenc.viz.rotary._RULE_COLOURS``); the explorer's JavaScript registry
(``report/assets/explorer.js``, ``const ROPE_SCALINGS = {...}``); the ``extend`` experiment's
variants (the jobs :mod:`posenc.experiments.suite` plans for it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import posenc
from posenc.functional.rope_scaling import LENGTH_DEPENDENT, ROPE_SCALINGS

#: Rules a surface leaves out, and why.
LEFT_OUT = {
    "extend experiment": {
        "dynamic": "scores one trained model per scaling at 8x its length; dynamic NTK is NTK at each length",
        "llama3": "its bands are Meta's for an 8192-token original; the tiny LM trains on 64-128 tokens",
        "longrope": "needs searched per-pair factors, which a tiny LM has none of",
        "proportional": "not a context-extension rule (Gemma 4's partial rotation)",
    },
}
_PARAMS = {
    "default": {},
    "linear": {"factor": 4.0},
    "ntk": {"factor": 4.0},
    "dynamic": {"factor": 4.0, "original_max_position_embeddings": 64},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 64},
    "llama3": {"factor": 8.0, "original_max_position_embeddings": 64, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    "longrope": {
        "original_max_position_embeddings": 64,
        "factor": 4.0,
        "short_factor": [1.0] * 16,
        "long_factor": [1.0 + i / 4 for i in range(16)],
    },
    "proportional": {"partial_rotary_factor": 0.25},
}


def _explorer_rules() -> set[str]:
    source = (Path(posenc.__file__).parent / "report" / "assets" / "explorer.js").read_text(encoding="utf-8")
    block = source[source.index("const ROPE_SCALINGS = {") :]
    block = block[: block.index("\n  };")]
    return set(re.findall(r"^    (\w+)\(dim, base[^)]*\) \{", block, re.M))


def _extend_variants() -> set[str]:
    from posenc.experiments import suite

    source = Path(suite.__file__).read_text(encoding="utf-8")
    start = source.index('"extend",', source.index("def _plan_extend"))
    return set(re.findall(r'"(\w+)"', re.search(r"variants=\(([^)]*)\)", source[start:]).group(1)))


def _surfaces() -> dict[str, set[str]]:
    from posenc.analysis.rotary import scaling_gallery
    from posenc.viz.rotary import _RULE_COLOURS

    return {
        "atlas scaling gallery": set(scaling_gallery(128, 4096, 4.0)),
        "atlas colours": set(_RULE_COLOURS),
        "explorer": _explorer_rules(),
        "extend experiment": _extend_variants(),
    }


def test_every_scaling_rule_reaches_every_surface_or_is_left_out_with_a_reason():
    missing = []
    for surface, rules in _surfaces().items():
        assert rules, f"{surface}: no rules found (the test no longer reads it)"
        absent = set(ROPE_SCALINGS) - rules - set(LEFT_OUT.get(surface, {}))
        missing += [f"{surface} lacks {rule!r}" for rule in sorted(absent)]
        stale = set(LEFT_OUT.get(surface, {})) & rules
        missing += [f"{surface} shows {rule!r}, listed as left out" for rule in sorted(stale)]
    assert not missing, "; ".join(missing)


@pytest.mark.parametrize("kind", sorted(ROPE_SCALINGS))
@pytest.mark.parametrize("seq_len", [None, 32, 64, 65, 4096])
def test_every_rule_returns_frequencies_and_attention_factor_at_every_length(kind, seq_len):
    assert set(_PARAMS) == set(ROPE_SCALINGS), "a new rule needs its parameters here"
    inv_freq, attention = ROPE_SCALINGS[kind](32, 10_000.0, _PARAMS[kind], seq_len)
    assert isinstance(inv_freq, torch.Tensor) and inv_freq.dtype == torch.float64 and inv_freq.shape == (16,)
    assert isinstance(attention, float) and attention > 0
    if kind not in LENGTH_DEPENDENT:  # the same at every length
        same = ROPE_SCALINGS[kind](32, 10_000.0, _PARAMS[kind], None)
        assert torch.equal(same[0], inv_freq) and same[1] == attention


def test_a_new_rule_is_named_where_it_is_missing(monkeypatch):
    monkeypatch.setitem(ROPE_SCALINGS, "dynamic_yarn", ROPE_SCALINGS["yarn"])
    with pytest.raises(
        AssertionError, match=r"atlas scaling gallery lacks 'dynamic_yarn'.*explorer lacks 'dynamic_yarn'"
    ):
        test_every_scaling_rule_reaches_every_surface_or_is_left_out_with_a_reason()
