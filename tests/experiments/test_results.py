"""posenc.experiments.results: how results.json reaches the disk (its contents: test_experiments.py)."""

from __future__ import annotations

import json

from posenc.experiments.results import add_record, load_results

RECORD = {
    "experiment": "length",
    "task": "copy",
    "scheme": "none",
    "variant": "default",
    "seed": 0,
    "train_length": 4,
    "metrics": {},
    "in_distribution": 1.0,
    "out_of_distribution": 0.5,
    "summary_metric": "exact_match",
    "wall_time_s": 1.0,
    "config": {},
}


def test_results_are_on_the_disk_before_they_are_renamed_into_place(tmp_path, file_writes):
    """The new results.json is flushed before the rename and the folder after it: a power cut
    leaves the old file or the new one, never an empty one (it was renamed unflushed)."""
    add_record(tmp_path, RECORD)
    file_writes.clear()  # the second write, over an existing file
    add_record(tmp_path, {**RECORD, "seed": 1})
    file, folder = (tmp_path / "results.json").stat().st_ino, tmp_path.stat().st_ino
    assert file_writes == [("fsync", file), ("replace", file), ("fsync", folder)]
    assert [r["seed"] for r in load_results(tmp_path)] == [0, 1]
    assert json.loads((tmp_path / "results.json").read_text())["schema"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".results.json.lock", "results.json"]
