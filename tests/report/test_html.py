"""posenc.report.html: the HTML tables of the report."""

from __future__ import annotations

from posenc.report.html import table_html


def test_table_cells_and_tooltips_are_escaped() -> None:
    """A cell's text and its tooltip are escaped: results carry free text (error messages with
    '<' and quotes), which must neither inject markup nor end the title attribute early."""
    html = table_html(["a"], [[("<b>x</b>", "pass", 'say "hi" <now>')]])
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert 'title="say &quot;hi&quot; &lt;now&gt;"' in html
    assert "<b>" not in html


def test_a_half_width_figure_without_a_partner_is_marked_alone():
    """Half-width figures pair up between full-width ones; the odd one out of each run is marked."""
    from posenc.report.html import figure_html, pair_up

    half, wide = figure_html(b"x", "png", "half"), figure_html(b"x", "png", "wide", wide=True)
    marks = ["alone" in f for f in pair_up([half, half, half, wide, half, wide, half, half])]
    assert marks == [False, False, True, False, True, False, False, False]
