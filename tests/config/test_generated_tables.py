"""The committed ``posenc/config/generated.py`` agrees with the installed transformers
(``tools/gen_config_tables.py`` regenerates it; the failure names the new and changed types)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

from posenc.config import generated  # noqa: E402

TOOL = Path(__file__).resolve().parents[2] / "tools" / "gen_config_tables.py"


def _tool():
    spec = importlib.util.spec_from_file_location("gen_config_tables", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_config_tables", module)
    spec.loader.exec_module(module)
    return module


def test_the_generated_table_names_the_installed_transformers_and_agrees_with_it():
    tool = _tool()
    diff = tool.all_differences(vars(generated), tool.build())
    assert not diff, (
        f"posenc/config/generated.py (transformers {generated.TRANSFORMERS_VERSION}) disagrees with the "
        f"installed transformers {transformers.__version__}; run python tools/gen_config_tables.py:\n" + "\n".join(diff)
    )
    assert generated.TRANSFORMERS_VERSION == transformers.__version__


def test_differences_name_new_changed_and_gone_types():
    tool = _tool()
    old = {"a": {"hidden_size": 8}, "b": {"hidden_size": 8}}
    new = {"a": {"hidden_size": 16}, "c": {"hidden_size": 8}}
    assert tool.differences(old, new) == [
        "new: c {'hidden_size': 8}",
        "gone: b",
        "changed: a {'hidden_size': 8} -> {'hidden_size': 16}",
    ]
    assert tool.all_differences({"MROPE_SECTIONS": {}}, {"MROPE_SECTIONS": {"x": [1, 2, 3]}}) == [
        "MROPE_SECTIONS new: x [1, 2, 3]"
    ]


def test_no_hand_written_default_repeats_or_shadows_a_generated_one():
    """``tables._HF_DEFAULTS`` holds only what the generator does not read: a size there would
    shadow the generated value (``rope_from_config`` merges the hand table over it), so a new
    transformers' default would not reach posenc."""
    from posenc.config import tables

    overlap = [
        f"{model_type}.{name}: hand {value!r}, generated {generated.CLASS_DEFAULTS[model_type][name]!r}"
        for model_type, entry in sorted(tables._HF_DEFAULTS.items())
        for name, value in entry.items()
        if name in generated.CLASS_DEFAULTS.get(model_type, {})
    ]
    assert not overlap, "hand-written defaults that the generated table already gives: " + "; ".join(overlap)
