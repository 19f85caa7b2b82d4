"""The atlas as a person sees it: ``index.html`` opened in headless Chromium.

One report (every scheme, the naive references, and a small runs folder with results and a plot)
is built once for the module. Chromium takes a screenshot (the page is not blank) and dumps the
DOM after the load event (every section is there; the page's own script counts the images whose
``naturalWidth > 0``). Skipped only when Chromium is not installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
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


def _runs_folder(root: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    runs = root / "runs" / "length"
    runs.mkdir(parents=True)
    record = {"experiment": "length", "task": "copy", "scheme": "rope", "variant": "default", "seed": 1,
              "train_length": 16, "metrics": {}, "in_distribution": 1.0, "out_of_distribution": 0.17,
              "summary_metric": "exact_match", "wall_time_s": 80.5, "config": {}}
    (runs / "results.json").write_text(json.dumps({"schema": 1, "records": [record]}))
    figure = Figure(figsize=(3, 2))
    figure.add_subplot().plot([0, 1, 2], [1.0, 0.5, 0.2])
    figure.savefig(runs / "accuracy.png")
    return root / "runs"


@pytest.fixture(scope="module")
def atlas(tmp_path_factory):
    from posenc.report import build_report

    root = tmp_path_factory.mktemp("atlas")
    start = time.perf_counter()
    summary = build_report(root / "site", results_dir=_runs_folder(root))
    seconds = time.perf_counter() - start
    url = (root / "site" / "index.html").as_uri()
    dom = _chromium(url, root / "profile-dom", "--virtual-time-budget=10000", "--dump-dom")
    shot = root / "shot.png"
    _chromium(url, root / "profile-shot", f"--screenshot={shot}", "--window-size=1280,2400")
    return {"summary": summary, "seconds": seconds, "dom": dom.stdout.decode("utf-8", "replace"), "shot": shot,
            "html": summary.path.read_text(encoding="utf-8")}


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
    assert summary.results == 1
    assert atlas["seconds"] < 60, f"the default report took {atlas['seconds']:.1f} s (budget 60 s)"


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
    import numpy as np
    from matplotlib.image import imread

    assert atlas["shot"].exists(), "chromium wrote no screenshot"
    pixels = imread(atlas["shot"])[..., :3]  # [height, width, rgb] in 0..1
    assert pixels.shape[:2] == (2400, 1280)
    assert pixels.std() > 0.05  # text, tables and figures, not a flat page
    dark = (pixels.mean(axis=-1) < 0.5).mean()
    assert 0.01 < dark < 0.5  # some ink, but not a black page
