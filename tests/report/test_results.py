"""posenc.report.results: the summary rows of experiment records."""

from __future__ import annotations

from posenc.report.results import _summary_rows


def _record(variant: str, ood: float | None) -> dict:
    return {"experiment": "extend", "task": "text", "scheme": "rope", "variant": variant, "seed": 0,
            "in_distribution": 1.0, "out_of_distribution": ood, "summary_metric": "loss"}


def test_summary_mean_is_over_the_values_present() -> None:
    """The summary mean divides by the number of runs that have a value: a run without an
    out-of-distribution value (a table too short) does not count as a zero."""
    (row,) = _summary_rows([_record("default", 0.2), {**_record("default", None), "seed": 1}])
    assert row[6] == "0.200"


def test_summary_rows_keep_variants_apart() -> None:
    """Variants are separate rows of the summary: extend's default and yarn scalings of one model
    are different results, not seeds of one."""
    rows = _summary_rows([_record("default", 0.2), _record("yarn", 0.3)])
    assert len(rows) == 2
    assert {row[2] for row in rows} == {"default", "yarn"}


def test_the_section_says_which_way_is_better_and_flags_smoke_tests(tmp_path) -> None:
    """The metric is explained with its unit and direction; ``--quick`` runs are marked smoke tests;
    a plot named after an experiment and task gets a caption saying what it shows."""
    import json

    from posenc.report.results import results_section

    records = [
        {**_record("default", 2.5), "task": "copy", "experiment": "length", "summary_metric": "exact_match",
         "quick": True, "train_length": 16, "seed": seed}
        for seed in (0, 1)
    ]
    (tmp_path / "results.json").write_text(json.dumps({"schema": 1, "records": records}))
    (tmp_path / "length_copy.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    html, shown, problems = results_section(tmp_path)
    assert shown == 2 and not problems
    assert "exact match: the fraction of sequences reproduced without one wrong token (higher is better)" in html
    assert "2 of these 2 runs are <b>--quick smoke tests</b>" in html
    assert "exact_match (higher is better) — smoke test (--quick)" in html
    assert "length / copy: exact match" in html and "mean over seeds with a 95 % interval" in html
    assert "trained on lengths up to 16" in html


def test_plots_are_embedded_as_palette_pngs_that_show_the_same_picture(tmp_path) -> None:
    """A runs folder's plot (a full-colour PNG with a transparent background, as a script may save
    it) is embedded as a palette PNG: smaller, and within 12 levels of 255 of the plot on white."""
    import base64
    import io
    import json
    import re

    import numpy as np
    import pytest

    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from PIL import Image

    from posenc.report.results import results_section

    figure = Figure(figsize=(6, 4))
    axes = figure.add_subplot()
    axes.imshow(np.linspace(-1, 1, 64 * 64).reshape(64, 64), cmap="RdBu_r")  # a colour map's ends
    axes.plot(np.sin(np.linspace(0, 9, 200)) * 30 + 32, lw=2)
    axes.set_title("loss against length")
    plot = tmp_path / "length_copy.png"
    figure.savefig(plot, dpi=120, transparent=True)
    (tmp_path / "results.json").write_text(json.dumps({"schema": 1, "records": [_record("default", 0.2)]}))
    html, _, problems = results_section(tmp_path)
    assert not problems
    (embedded,) = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    data = base64.b64decode(embedded)
    assert len(data) < plot.stat().st_size
    shown = Image.open(io.BytesIO(data))
    assert shown.mode == "P"
    with Image.open(plot) as original:
        white = Image.new("RGBA", original.size, (255, 255, 255, 255))
        want = np.asarray(Image.alpha_composite(white, original.convert("RGBA")).convert("RGB")).astype(int)
    assert np.abs(np.asarray(shown.convert("RGB")).astype(int) - want).max() <= 12
