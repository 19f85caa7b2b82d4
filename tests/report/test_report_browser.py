"""The atlas as a person sees it: ``index.html`` opened in headless Chromium.

One report (every scheme, the naive references, and a small runs folder with results and a plot)
is built once for the session (``conftest.py``). Chromium takes a screenshot (the page is not blank) and dumps the
DOM after the load event (every section is there; the page's own script counts the images whose
``naturalWidth > 0``). Skipped only when Chromium is not installed.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

import posenc  # noqa: E402
from posenc.analysis import REFERENCE_ENCODINGS  # noqa: E402

CHROMIUM = next((p for p in (shutil.which("chromium"), "/usr/bin/chromium", shutil.which("chromium-browser"))
                 if p and Path(p).exists()), None)
pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (/usr/bin/chromium)")]

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def _chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, url],
                          capture_output=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def atlas(built_atlas):
    root = built_atlas["root"]
    url = (root / "site" / "index.html").as_uri()
    dom = _chromium(url, root / "profile-dom", "--virtual-time-budget=10000", "--dump-dom")
    shot = root / "shot.png"
    _chromium(url, root / "profile-shot", f"--screenshot={shot}", "--window-size=1280,2400")
    return {**built_atlas, "dom": dom.stdout.decode("utf-8", "replace"), "shot": shot}


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.body: dict[str, str] = {}
        self.sources: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section" and "data-scheme" in attrs:
            self.sections.append(attrs["data-scheme"])
        if tag == "body":
            self.body = attrs
        for key in ("src", "href"):
            if tag in ("img", "script", "link", "iframe", "source") and attrs.get(key):
                self.sources.append(attrs[key])


def _parse(html: str) -> _Collect:
    parser = _Collect()
    parser.feed(html)
    return parser


def test_report_builds_without_errors_in_time(atlas):
    summary = atlas["summary"]
    assert summary.errors == []
    assert summary.schemes == [*posenc.available(), *REFERENCE_ENCODINGS]
    assert summary.figures >= 2 * len(summary.schemes) - 4  # most sections carry two figures or more
    assert summary.results == 16  # the runs folder of conftest: 7 schemes x 2 seeds on copy, 2 on text
    # About 30 s on an idle 2-core machine; the bound catches a build that has become several times
    # slower (a figure drawn per position, a cache lost), with room for a machine shared with other jobs.
    assert atlas["seconds"] < 180, f"the report took {atlas['seconds']:.1f} s (bound 180 s)"


def test_every_scheme_has_a_section_in_the_rendered_page(atlas):
    parsed = _parse(atlas["dom"])
    assert parsed.sections == [*posenc.available(), *REFERENCE_ENCODINGS]
    assert 'id="comparison"' in atlas["dom"] and 'id="experiments"' in atlas["dom"]


def test_every_image_loaded_in_the_browser(atlas):
    body = _parse(atlas["dom"]).body
    assert "data-images-loaded" in body, "the page's load script did not run"
    total = int(body["data-images-total"])
    assert total == atlas["summary"].figures + 1  # the atlas's figures and the runs folder's plot
    assert int(body["data-images-loaded"]) == total


def test_page_is_self_contained(atlas):
    parsed = _parse(atlas["html"])
    assert parsed.sources and all(s.startswith("data:image/") or s.startswith("#") for s in parsed.sources)
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", atlas["html"])
    assert "@import" not in atlas["html"] and "url(" not in atlas["html"].split("<body")[0]


def test_screenshot_is_not_blank(atlas):
    from matplotlib.image import imread

    assert atlas["shot"].exists(), "chromium wrote no screenshot"
    pixels = imread(atlas["shot"])[..., :3]  # [height, width, rgb] in 0..1
    assert pixels.shape[:2] == (2400, 1280)
    assert pixels.std() > 0.05  # text, tables and figures, not a flat page
    dark = (pixels.mean(axis=-1) < 0.5).mean()
    assert 0.01 < dark < 0.5  # some ink, but not a black page


def test_figures_are_shown_as_wide_as_the_atlas_drew_them(atlas, tmp_path):
    """In a 1400 px window every figure is as many CSS pixels wide as the atlas assumed when it sized
    it (``DISPLAY_PX``): the text sizes the layout test checks are the ones a reader sees."""
    from posenc.report.html import DISPLAY_PX

    hook = (
        '<script>window.addEventListener("load", function () {'
        'document.body.setAttribute("data-widths", JSON.stringify(Array.prototype.map.call(document.images,'
        " function (img) { return [img.alt, img.clientWidth]; })));});</script></body>"
    )
    page = tmp_path / "index.html"
    page.write_text(atlas["html"].replace("</body>", hook), encoding="utf-8")
    dom = _chromium(page.as_uri(), tmp_path / "profile", "--window-size=1400,1000", "--virtual-time-budget=10000",
                    "--dump-dom").stdout.decode("utf-8", "replace")
    shown = json.loads(html.unescape(re.search(r'data-widths="([^"]+)"', dom)[1]))  # [[caption, width], ...]
    layout = atlas["summary"].layout
    assert len(shown) == len(layout) + 1  # the atlas's figures and the runs folder's plot
    assert sorted((f.caption, f.display_px) for f in layout) == sorted(map(tuple, shown[:-1]))
    assert {f.display_px for f in layout} == set(DISPLAY_PX.values())
