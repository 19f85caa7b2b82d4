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
