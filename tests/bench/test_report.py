"""posenc.bench.report: the Markdown tables of benchmark results."""

from __future__ import annotations

from posenc.bench.report import markdown


def test_peer_over_posenc_ratio_in_the_rope_table() -> None:
    """The peer / posenc column divides the peer's ratio to the floor by posenc's new-tensor ratio:
    8.0 over 2.0 reads 4.0x (a peer four times slower), not 0.2x."""
    base = {"L": 512, "dtype": "float32", "layout": "half", "kind": "steady", "median_ms": 1.0, "other_cpu": 0.0}
    rows = [
        {**base, "case": "floor", "x_floor": 1.0},
        {**base, "case": "posenc new tensors", "x_floor": 2.0},
        {**base, "case": "posenc out= (compiled)", "x_floor": 1.2},
        {**base, "case": "peer transformers", "x_floor": 8.0},
    ]
    text = markdown({"meta": {"device": "cpu"}, "rope": rows})
    (row,) = [line for line in text.splitlines() if line.startswith("| 512 |")]
    assert "transformers 4.0x" in row


def test_rope_ratios_are_taken_over_their_own_floors() -> None:
    """Rope.rotate and new tensors over the clone floor, out= and in place (of the backend the
    dispatch picked) over the copy floor, transformers over Rope.rotate; None where not timed."""
    from posenc.bench.report import rope_ratios

    base = {
        "L": 2048,
        "dtype": "float32",
        "layout": "half",
        "kind": "steady",
        "median_ms": 1.0,
        "auto_backend": "compiled",
    }
    x = {
        "floor": 1.0,
        "floor, new tensors": 2.0,
        "floor, in place": 0.5,
        "posenc Rope.rotate": 2.4,
        "posenc new tensors": 2.2,
        "posenc out= (compiled)": 1.1,
        "posenc out= (eager)": 1.8,
        "posenc in-place (compiled)": 0.9,
        "peer transformers": 12.0,
    }
    (row,) = rope_ratios([{**base, "case": name, "x_floor": v} for name, v in x.items()])
    assert row["backend"] == "compiled"
    assert row["rotate_x_clone"] == 1.2 and row["new_x_clone"] == 1.1 and row["out_x_floor"] == 1.1
    assert row["out_eager_x_floor"] == 1.8 and row["in_place_x_floor"] == 0.9 and row["in_place_floor_x_floor"] == 0.5
    assert row["transformers_x_rotate"] == 5.0
    (row,) = rope_ratios([{**base, "case": "floor", "x_floor": 1.0}])
    assert row["rotate_x_clone"] is None and row["backend"] == "eager"  # no out= case of the recorded backend


def test_varlen_and_transformers_sections_reach_the_tables():
    """The two integration sections are run by name and written to the terminal and Markdown tables."""
    from posenc.bench.report import SECTIONS, markdown, summary_columns

    assert {"varlen", "transformers"} <= set(SECTIONS)
    varlen = {
        "packing": "varied",
        "tokens": 1088,
        "padded_tokens": 1536,
        "dtype": "float32",
        "layout": "half",
        "case": "apply_rotary_emb",
        "median_ms": 1.5,
        "x_padded": 0.51,
        "x_padded_best": 0.49,
        "max_error": 0.0,
        "other_cpu": 0.1,
        "kind": "steady",
    }
    patched = {
        "L": 2048,
        "dtype": "bfloat16",
        "case": "posenc",
        "median_ms": 900.0,
        "x_stock": 0.97,
        "x_stock_best": 0.95,
        "max_abs_diff": 0.0,
        "other_cpu": 0.0,
        "kind": "steady",
        "layers": 2,
        "hidden": 512,
        "heads": 8,
    }
    text = markdown({"meta": {}, "varlen": [varlen], "transformers": [patched]})
    assert "| varied | 1088 (1536) | float32 | apply_rotary_emb | 1.50 | 0.51 (0.49) | 0.10 |" in text
    assert "| 2048 | bfloat16 | posenc | 900 | 0.97 (0.95) |" in text
    assert set(summary_columns("varlen")) <= set(varlen) and set(summary_columns("transformers")) <= set(patched)
