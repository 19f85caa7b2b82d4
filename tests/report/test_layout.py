"""The atlas as a reader sees it at 1x in a 1400 px window: text at least 10 px tall in every figure,
one font scale for half-width and full-width figures, no text cut off at a figure's edge, and a
page light enough to share (compressed rasters).

Each figure's on-screen text size follows from what the atlas drew: its smallest font in points,
its width in inches and the CSS pixels it is shown across (``summary.layout``); the browser test
checks those widths in Chromium.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow]

#: The most the page may weigh without trained encodings (it had reached 9.25 MB with raw PNGs).
MAX_PAGE_BYTES = 5_000_000


def test_every_figure_has_text_of_10_px_or_more(built_atlas):
    layout = built_atlas["summary"].layout
    assert len(layout) == built_atlas["summary"].figures
    plots = [f for f in layout if f.caption.startswith("length / ")]  # the experiments' plots are in it
    assert {f.caption.split(":")[0] for f in plots} == {"length / copy", "length / text"}
    assert {f.display_px for f in plots} == {532, 1080}  # legend inside (half width), beside (across)
    small = [(f.caption[:60], round(f.smallest_px, 1)) for f in layout if f.smallest_px < 10]
    assert not small, f"text under 10 px at 1x in a 1400 px window: {small}"


def test_half_and_full_width_figures_share_one_font_scale(built_atlas):
    from posenc.report.html import DISPLAY_PX, PX_PER_INCH

    layout = built_atlas["summary"].layout
    assert {f.display_px for f in layout} == set(DISPLAY_PX.values())  # both widths are on the page
    for figure in layout:
        assert figure.px_per_pt == pytest.approx(PX_PER_INCH / 72, rel=1e-9), figure.caption
        assert round(figure.width_in * figure.dpi) >= 1.5 * figure.display_px  # sharp on dense screens


def test_no_text_runs_past_a_figure_edge(built_atlas):
    cut = [(f.caption[:60], f.cut_off) for f in built_atlas["summary"].layout if f.cut_off]
    assert not cut


def test_page_stays_small(built_atlas):
    """One self-contained file of at most 5 MB: every figure a palette PNG inside it."""
    html = built_atlas["html"]
    assert len(html.encode("utf-8")) <= MAX_PAGE_BYTES, f"{len(html.encode()) / 1e6:.2f} MB"
    assert html.count("data:image/png;base64,") == built_atlas["summary"].figures + 1  # and the runs folder's plot


def test_trained_figures_of_the_shipped_records_read_as_well():
    """The figures of the trained encodings (drawn by default from docs/experiments) pass the same
    checks: text of 10 px or more, one font scale, no text cut off or running into another title."""
    from posenc.report.atlas import _embed, shipped_records
    from posenc.report.html import PX_PER_INCH
    from posenc.report.trained import TRAINED_AFTER, find_encodings, trained_bias_figures, trained_table_figures

    records = shipped_records()
    if records is None:
        pytest.skip("posenc runs from an installed wheel: no docs/experiments beside it")
    found, problems = find_encodings(records)
    assert problems == []
    layout = []
    for scheme in ("learned", "shaw", "fire", "t5"):  # the tables, a wide three-panel bias, a stepped one
        draw = trained_table_figures if scheme in TRAINED_AFTER else trained_bias_figures
        figures, problems = draw(scheme, found[scheme])
        assert figures and problems == []
        for figure, caption in figures:
            _embed(figure, caption, 96, layout)
    for figure in layout:
        assert figure.smallest_px >= 10 and not figure.cut_off, (figure.caption[:60], figure.cut_off)
        assert figure.px_per_pt == pytest.approx(PX_PER_INCH / 72, rel=1e-9)


def test_the_experiments_plots_of_the_shipped_records_read_as_well():
    """The experiments' plots (posenc experiment's figures/*.png) are drawn by the atlas from the
    shipped records at the width it shows them, not embedded as files whose 7 pt legends shrank
    to 6-8 px at half width: every text 10 px or more, nothing cut off, one font scale."""
    from posenc.report.atlas import shipped_records
    from posenc.report.html import PX_PER_INCH
    from posenc.report.results import results_section

    records = shipped_records()
    if records is None:
        pytest.skip("posenc runs from an installed wheel: no docs/experiments beside it")
    layout = []
    html, _, problems = results_section(records, layout=layout)
    assert problems == []
    pngs = sorted(records.glob("*/figures/*.png"))
    assert len(layout) >= len(pngs) >= 1
    assert html.count("data:image/png;base64,") == len(layout)  # every plot is one drawn here
    for figure in layout:
        assert figure.smallest_px >= 10 and not figure.cut_off, (figure.caption[:60], figure.cut_off)
        assert figure.px_per_pt == pytest.approx(PX_PER_INCH / 72, rel=1e-9)
    assert "results read from <code>docs/experiments</code>" in html  # not the builder's absolute path
