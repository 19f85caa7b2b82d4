"""The varlen RoPE benchmark's packings and rows (its timings are not tested: they are noise here)."""

from __future__ import annotations

import pytest
import torch

from posenc.bench.varlen import TARGET_X_PADDED, bench_varlen, packing_lengths


def test_packing_lengths():
    assert packing_lengths("equal", 3, 64) == [64, 64, 64]
    varied = packing_lengths("varied", 4, 64)
    assert sorted(varied) == [4, 24, 44, 64]  # longest / 16 up to longest, evenly spread
    with pytest.raises(ValueError, match="unknown packing 'ragged'; choose one of: 'equal', 'varied'"):
        packing_lengths("ragged", 4, 64)


def test_rows_compare_packed_with_padded():
    rows = bench_varlen(
        ("varied",),
        (torch.float32,),
        ("half", "interleaved"),
        documents=3,
        longest=16,
        heads=2,
        head_dim=8,
        min_run_time=0.001,
    )
    assert [(r["layout"], r["case"]) for r in rows] == [
        (layout, case)
        for layout in ("half", "interleaved")
        for case in ("padded kernels.rope", "packed kernels.apply_rotary_emb", "packed Rope.rotate_one")
    ]
    packed = [r for r in rows if r["case"].startswith("packed")]
    assert all(r["max_error"] <= 1e-6 and r["target_x_padded"] == TARGET_X_PADDED for r in packed)
    assert all(r["tokens"] == 1 + 8 + 16 and r["padded_tokens"] == 3 * 16 for r in rows)
