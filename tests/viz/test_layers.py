"""The layer-schedule strip (issue 25, item 9): one cell per layer, coloured by the schedule that
``posenc.layer_schedule`` reads (its parity with transformers is tested in tests/test_layers.py),
hatched where ``posenc.query_scales_from_config`` gives a query temperature."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from posenc.viz import save_figure  # noqa: E402
from posenc.viz.layers import layer_strip_data, layer_strip_figure  # noqa: E402

LLAMA4 = {
    "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text",
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "head_dim": 128,
        "num_hidden_layers": 12,
        "rope_theta": 500000.0,
    },
}


def _cells(figure):
    ax = figure.axes[0]
    return [p for p in ax.patches if p.get_width() == 1 and p.get_height() == 1]


def test_llama4_strip_has_a_grey_hatched_cell_every_fourth_layer(tmp_path) -> None:
    """Llama 4 with 12 layers: cells 3, 7, 11 are NoPE (grey) with the query temperature (hatched),
    the 9 others RoPE base 5e5 over the 128-wide head; the PNG is written."""
    data = layer_strip_data(LLAMA4)
    assert data["ropes"] == {"rope": "base 500000, 128 of 128 dims, no scaling"}
    figure = layer_strip_figure(LLAMA4)
    cells = _cells(figure)
    assert len(cells) == 12
    nope = [i for i, cell in enumerate(cells) if cell.get_facecolor()[:3] == (0.8, 0.8, 0.8)]
    hatched = [i for i, cell in enumerate(cells) if cell.get_hatch()]
    assert nope == hatched == [3, 7, 11]
    assert figure.axes[0].get_title() == "llama4: 12 layers (9 rope, 3 NoPE)"
    labels = [t.get_text() for t in figure.legends[0].get_texts()]
    assert labels == ["rope: base 500000, 128 of 128 dims, no scaling", "NoPE", "query temperature"]
    path = save_figure(figure, tmp_path / "llama4.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gemma3_strip_colours_local_and_global_layers() -> None:
    """Gemma 3 (flat config.json, 12 layers, pattern 6): layers 5 and 11 global (base 1e6), the
    others local (base 1e4), nothing hatched."""
    gemma = {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16,
             "num_hidden_layers": 12, "rope_theta": 1e6, "rope_local_base_freq": 1e4}  # fmt: skip
    data = layer_strip_data(gemma)
    assert [i for i, e in enumerate(data["schedule"]) if e == "full_attention"] == [5, 11]
    assert data["ropes"]["full_attention"].startswith("base 1e+06, 16 of 16 dims")
    assert data["ropes"]["sliding_attention"].startswith("base 10000, 16 of 16 dims")
    cells = _cells(layer_strip_figure(gemma, title="Gemma 3"))
    assert not any(cell.get_hatch() for cell in cells)
    assert len({cell.get_facecolor() for cell in cells}) == 2
