"""The atlas built once for the tests that read the whole page (the browser's and the layout's)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest


def _runs_folder(root: Path) -> Path:
    """A small runs folder: one record and one plot beside it."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    runs = root / "runs" / "length"
    runs.mkdir(parents=True)
    record = {"experiment": "length", "task": "copy", "scheme": "rope", "variant": "default", "seed": 1,
              "train_length": 16, "metrics": {}, "in_distribution": 1.0, "out_of_distribution": 0.17,
              "summary_metric": "exact_match", "wall_time_s": 80.5, "config": {}}  # fmt: skip
    (runs / "results.json").write_text(json.dumps({"schema": 1, "records": [record]}))
    figure = Figure(figsize=(3, 2))
    figure.add_subplot().plot([0, 1, 2], [1.0, 0.5, 0.2])
    figure.savefig(runs / "accuracy.png")
    return root / "runs"


@pytest.fixture(scope="session")
def built_atlas(tmp_path_factory):
    """Every scheme and reference, with the small runs folder's results (no trained encodings):
    ``{"summary", "seconds", "root", "html"}``; the page is ``root/site/index.html``."""
    pytest.importorskip("matplotlib")
    from posenc.report import build_report

    root = tmp_path_factory.mktemp("atlas")
    start = time.perf_counter()
    summary = build_report(root / "site", results_dir=_runs_folder(root))
    seconds = time.perf_counter() - start
    return {"summary": summary, "seconds": seconds, "root": root, "html": summary.path.read_text(encoding="utf-8")}
