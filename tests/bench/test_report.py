"""posenc.bench.report: the Markdown tables of benchmark results."""

from __future__ import annotations

from posenc.bench.report import markdown


def test_peer_over_posenc_ratio_in_the_rope_table() -> None:
    """The peer / posenc column divides the peer's ratio to the floor by posenc's new-tensor ratio:
    8.0 over 2.0 reads 4.0x (a peer four times slower), not 0.2x."""
    base = {"L": 512, "dtype": "float32", "layout": "half", "kind": "steady", "median_ms": 1.0, "other_cpu": 0.0}
    rows = [{**base, "case": "floor", "x_floor": 1.0},
            {**base, "case": "posenc new tensors", "x_floor": 2.0},
            {**base, "case": "posenc out= (compiled)", "x_floor": 1.2},
            {**base, "case": "peer transformers", "x_floor": 8.0}]
    text = markdown({"meta": {"device": "cpu"}, "rope": rows})
    (row,) = [line for line in text.splitlines() if line.startswith("| 512 |")]
    assert "transformers 4.0x" in row
