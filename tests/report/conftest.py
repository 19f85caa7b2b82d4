"""The atlas built once for the tests that read the whole page (the browser's and the layout's)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest


def _runs_folder(root: Path) -> Path:
    """A small runs folder: records of seven schemes on the copy task (the plot's legend goes beside
    the axes, and the figure across the page), two on text (a half-width plot), their PNG plot as
    ``posenc experiment`` saves it (the atlas redraws it) and a plot of a script's own beside them."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    runs = root / "runs" / "length"
    runs.mkdir(parents=True)
    common = {"experiment": "length", "variant": "default", "train_length": 16, "summary_metric": "exact_match",
              "wall_time_s": 80.5, "config": {}, "learned": True}  # fmt: skip
    records = []
    for i, scheme in enumerate(("rope", "alibi", "t5", "fire", "nope", "learned", "sinusoidal")):
        for seed in (1, 2):
            per_length = {str(n): {"exact_match": max(0.0, 1.0 - 0.1 * i * max(0, n - 16) / 8)} for n in (8, 16, 24, 32)}
            records.append({**common, "task": "copy", "scheme": scheme, "seed": seed, "in_distribution": 1.0,
                            "out_of_distribution": per_length["32"]["exact_match"],
                            "metrics": {"per_length": per_length}})  # fmt: skip
    for scheme in ("rope", "alibi"):
        records.append({**common, "task": "text", "scheme": scheme, "seed": 1, "summary_metric": "loss",
                        "in_distribution": 2.0, "out_of_distribution": 2.5,
                        "metrics": {"loss_per_position": [3.0 - 0.02 * p for p in range(32)]}})  # fmt: skip
    (runs / "results.json").write_text(json.dumps({"schema": 1, "records": records}))
    (runs / "figures").mkdir()
    from posenc.experiments.plots import plot_results

    plot_results(runs)  # figures/length_copy.png, length_text.png: replaced by the atlas's own drawing
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
