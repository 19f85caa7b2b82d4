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
