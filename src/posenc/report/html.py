"""HTML building blocks of the atlas: the page shell, sections, figures and tables.

Everything the page needs is inline: CSS in a ``<style>`` element, figures as base64 ``data:``
URIs, one small script that marks ``<body data-images-loaded=...>`` once every image has decoded
(the browser test reads it). No fonts, scripts or styles are fetched from anywhere.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

__all__ = ["page", "figure_html", "table_html", "slug", "pair_up", "DISPLAY_PX", "PX_PER_INCH"]

#: How many CSS pixels wide an image is shown in a 1400 px window: across the page ("wide") or in
#: half of it ("half"; a half-width figure without a partner is centred at the same width). The
#: column is 1180 px at most, less the body's 28 px padding each side, a section's 1 px border
#: and 20 px padding each side: 1082 px; two half-width figures have 14 px between them; every
#: image has a 1 px border. Narrower windows show every figure smaller, all alike.
DISPLAY_PX = {"wide": 1080, "half": 532}
#: The atlas draws each figure at the size it is shown, 96 CSS pixels per inch (CSS's own inch):
#: a 9-point label is 12 px on the screen in every figure, half width or full.
PX_PER_INCH = 96

_CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --line: #d9dde5; --pass: #17803d; --fail: #b42318; --bg: #fbfbfd; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg);
       margin: 0 auto; max-width: 1180px; padding: 24px 28px 60px; }
h1 { font-size: 28px; margin: 0 0 4px; }
h2 { font-size: 22px; margin: 0 0 6px; border-bottom: 2px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 16px; margin: 18px 0 6px; color: var(--muted); }
nav { columns: 4; font-size: 14px; margin: 10px 0 22px; }
nav a { display: block; }
a { color: #2456a6; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 16px 20px; margin: 22px 0; }
.meta { color: var(--muted); font-size: 14px; }
.formula { font: 14px/1.45 ui-monospace, "DejaVu Sans Mono", monospace; background: #f3f5f9; padding: 8px 10px;
           border-radius: 6px; overflow-x: auto; white-space: pre-wrap; }
.note { border-left: 4px solid #e0a100; background: #fff9e8; padding: 8px 12px; margin: 8px 0; }
.figures { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 18px 14px; align-items: start; }
figure { margin: 0; }
figure.wide { grid-column: 1 / -1; }
/* a half-width figure without a partner (pair_up marks it): centred, as wide as the others */
.figures figure.alone { grid-column: 1 / -1; width: calc((100% - 14px) / 2); justify-self: center; }
@media (max-width: 900px) { .figures { grid-template-columns: minmax(0, 1fr); }
  .figures figure.alone { width: 100%; } }
ul.criteria { font-size: 14px; padding-left: 20px; } ul.criteria li { margin: 2px 0; }
details summary { cursor: pointer; color: var(--muted); margin: 8px 0; }
a.to-top { position: fixed; right: 18px; bottom: 18px; background: #fff; border: 1px solid var(--line);
           border-radius: 18px; padding: 6px 14px; font-size: 14px; text-decoration: none;
           box-shadow: 0 1px 4px rgba(0, 0, 0, .12); }
figure img { width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
figcaption { font-size: 13px; color: var(--muted); }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f5f9; }
td.pass { color: var(--pass); font-weight: 600; }
td.fail { color: var(--fail); font-weight: 600; }
td.na { color: var(--muted); }
td.num { white-space: nowrap; }
td.lengths { min-width: 220px; font-size: 12px; color: var(--muted); }
.table-wrap { overflow-x: auto; }
ul.why { font-size: 13px; padding-left: 20px; }
ul.why li { margin: 3px 0; }
"""

# Marks <body> once every <img> has loaded (naturalWidth > 0) or failed; the browser test reads it.
_SCRIPT = """
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var loaded = images.filter(function (img) { return img.complete && img.naturalWidth > 0; }).length;
  document.body.setAttribute("data-images-total", String(images.length));
  document.body.setAttribute("data-images-loaded", String(loaded));
});
"""


def slug(text: str) -> str:
    """An HTML id from ``text``: lowercase letters, digits and dashes."""
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-") or "section"


def figure_html(data: bytes, fmt: str, caption: str, *, wide: bool = False) -> str:
    """A ``<figure>`` embedding PNG or SVG bytes as a data URI; ``wide`` ones take the full width."""
    if fmt == "png":
        encoded = base64.b64encode(data).decode("ascii")
        body = f'<img src="data:image/png;base64,{encoded}" alt="{escape(caption)}">'
    elif fmt == "svg":
        encoded = base64.b64encode(data).decode("ascii")
        body = f'<img src="data:image/svg+xml;base64,{encoded}" alt="{escape(caption)}">'
    else:
        raise ValueError(f"figures are embedded as 'png' or 'svg', got {fmt!r}")
    css = ' class="wide"' if wide else ""
    return f"<figure{css}>{body}<figcaption>{escape(caption)}</figcaption></figure>"


def pair_up(figures: list[str]) -> list[str]:
    """Half-width figures sit two to a row between full-width ones; the last of an odd run would sit
    alone beside a gap, so it is marked ``alone`` (shown centred across the row)."""
    out, run = [], 0
    for i, html in enumerate(figures):
        wide = html.startswith('<figure class="wide"')
        run = 0 if wide else run + 1
        ends_run = i + 1 == len(figures) or figures[i + 1].startswith('<figure class="wide"')
        if not wide and ends_run and run % 2:
            html = html.replace("<figure>", '<figure class="alone">', 1)
        out.append(html)
    return out


def table_html(header: Sequence[str], rows: Iterable[Sequence[Any]], *, caption: str | None = None) -> str:
    """A table; a cell given as ``(text, css_class)`` or ``(text, css_class, tooltip)`` gets that class."""
    parts = ['<div class="table-wrap"><table>']
    if caption:
        parts.append(f"<caption>{escape(caption)}</caption>")
    parts.append("<tr>" + "".join(f"<th>{escape(str(h))}</th>" for h in header) + "</tr>")
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, tuple):
                text, css = cell[0], cell[1]
                tip = f' title="{escape(str(cell[2]))}"' if len(cell) > 2 and cell[2] else ""
                cells.append(f'<td class="{escape(css)}"{tip}>{escape(str(text))}</td>')
            else:
                cells.append(f"<td>{escape(str(cell))}</td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table></div>")
    return "".join(parts)


def page(title: str, intro_html: str, nav: Sequence[tuple[str, str]], sections: Sequence[str]) -> str:
    """The whole self-contained page: ``nav`` is (anchor id, label) pairs; ``sections`` are HTML."""
    links = "".join(f'<a href="#{escape(anchor)}">{escape(label)}</a>' for anchor, label in nav)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>\n<body>\n"
        f'<h1 id="top">{escape(title)}</h1>{intro_html}<nav id="contents">{links}</nav>\n'
        '<a class="to-top" href="#contents">↑ contents</a>\n'
        + "\n".join(sections)
        + f"\n<script>{_SCRIPT}</script>\n</body></html>\n"
    )
