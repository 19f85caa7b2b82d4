"""Every registered bias scheme (family ``"bias"`` in :func:`posenc.available`) reaches the surfaces
that list bias schemes by hand, or is left out of one with a stated reason here; a new bias scheme in
neither fails, naming each surface that lacks it (the RoPE scalings' counterpart is
``tests/config/test_registry_coverage.py``). The atlas is built from the registry itself
(``tests/report/test_report_browser.py``: a section per :func:`posenc.available` name).

Surfaces: the ``length`` experiment's schemes (:data:`posenc.experiments.suite.LENGTH_SCHEMES`), the
bench's bias-build section (:data:`posenc.bench.bias.PARAMETER_ONLY`) and FlexAttention-memory
section (:data:`posenc.bench.bias.FLEX_SCHEMES`), and the explorer's JavaScript models
(``report/assets/explorer.js``, ``const MODELS = {...}``)."""

from __future__ import annotations

import re
from pathlib import Path

import posenc
from posenc.schemes import base

#: Bias schemes a surface leaves out, and why.
LEFT_OUT = {
    "bench bias build": {
        "forgetting": "its bias sums forget gates computed from the layer input, so it is not built from "
        "positions and parameters alone",
    },
    "bench FlexAttention memory": {
        "alibi": "measured in the earlier run that docs/performance.md cites (756 MiB)",
        "t5": "its score mod reads one learned value per bucket of distance, as ALiBi's one slope per head",
        "dpb": "its score mod reads a table of values per distance built once by its MLP, as T5's",
    },
    "explorer": {
        name: "the explorer draws JavaScript ports of sinusoidal, RoPE, ALiBi and T5 only; this scheme is not ported"
        for name in ("kerple", "sandwich", "fire", "dpb", "forgetting")
    },
}


def _explorer_models() -> set[str]:
    source = (Path(posenc.__file__).parent / "report" / "assets" / "explorer.js").read_text(encoding="utf-8")
    block = re.search(r"const MODELS = \{([^}]*)\}", source).group(1)
    return set(re.findall(r"(\w+):", block))


def _surfaces() -> dict[str, set[str]]:
    from posenc.bench.bias import FLEX_SCHEMES, PARAMETER_ONLY
    from posenc.experiments.suite import LENGTH_SCHEMES

    return {
        "length experiment": set(LENGTH_SCHEMES),
        "bench bias build": set(PARAMETER_ONLY),
        "bench FlexAttention memory": set(FLEX_SCHEMES),
        "explorer": _explorer_models(),
    }


def _bias_schemes() -> set[str]:
    return {name for name in posenc.available() if posenc.scheme_class(name).family == "bias"}


def test_every_bias_scheme_reaches_every_surface_or_is_left_out_with_a_reason():
    schemes = _bias_schemes()
    assert {"alibi", "t5", "kerple"} <= schemes  # the test still finds the family
    missing = []
    for surface, names in _surfaces().items():
        assert names, f"{surface}: no schemes found (the test no longer reads it)"
        left_out = set(LEFT_OUT.get(surface, {}))
        missing += [f"{surface} lacks {name!r}" for name in sorted(schemes - names - left_out)]
        missing += [f"{surface} shows {name!r}, listed as left out" for name in sorted(left_out & names)]
        missing += [
            f"{surface} leaves out {name!r}, not a registered bias scheme" for name in sorted(left_out - schemes)
        ]
    assert not missing, "; ".join(missing)


def test_a_new_bias_scheme_is_named_where_it_is_missing(monkeypatch):
    class HardAlibi(posenc.scheme_class("alibi")):
        name = "hard_alibi"

    monkeypatch.setitem(base._REGISTRY, "hard_alibi", HardAlibi)
    try:
        test_every_bias_scheme_reaches_every_surface_or_is_left_out_with_a_reason()
    except AssertionError as err:
        message = str(err)
    else:
        raise AssertionError("a bias scheme on no surface passed")
    for surface in ("length experiment", "bench bias build", "bench FlexAttention memory", "explorer"):
        assert f"{surface} lacks 'hard_alibi'" in message
