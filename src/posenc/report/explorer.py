"""The interactive explorer: ``explorer.html`` beside the atlas, computed and drawn in the browser.

A reader picks a scheme (sinusoidal; RoPE with each scaling posenc has: default, linear, ntk,
dynamic, yarn, llama3, longrope, proportional; ALiBi; T5's buckets) and moves sliders for the
dimension, base, scaling parameters and number of positions; the encoding heatmap, the
dot-product and cosine-distance matrices, the clock of the sin/cos pairs and the logit-vs-distance
curve are recomputed in the page and redrawn.

Shape legend (of the page's panels): ``n`` positions, ``d`` width, ``h`` heads, ``L`` distances.

The page is one self-contained file: the template ``assets/explorer.html`` with two inline
scripts, the vendored plotly.js cartesian bundle (``assets/plotly-cartesian.min.js``, MIT, license
in ``assets/plotly-LICENSE.txt``) and ``assets/explorer.js``, whose first part ports posenc's
formulas (:mod:`posenc.functional.sinusoidal`, :mod:`posenc.functional.rope_scaling`,
:func:`posenc.functional.alibi_slopes`, :func:`posenc.functional.t5_relative_bucket`) and names
the Python function each port mirrors. ``tests/report/test_explorer.py`` checks the page's numbers
against posenc in headless Chromium. Nothing is fetched from the network.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .._files import replaced_whole

__all__ = ["explorer_html", "write_explorer", "EXPLORER_FILE"]

#: The explorer's file name, beside the atlas's ``index.html``.
EXPLORER_FILE = "explorer.html"

_ASSETS = ("explorer.html", "plotly-cartesian.min.js", "explorer.js")


def _asset(name: str) -> str:
    return resources.files("posenc.report").joinpath("assets", name).read_text(encoding="utf-8")


def _inline_script(code: str) -> str:
    """``code`` safe inside ``<script>``: a literal ``</script`` would end the element early."""
    return code.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def explorer_html() -> str:
    """The explorer page as one string: the template with plotly.js and the explorer's script inlined."""
    template, plotly, script = (_asset(name) for name in _ASSETS)
    for marker in ("/*@PLOTLY@*/", "/*@EXPLORER@*/"):
        if template.count(marker) != 1:
            raise RuntimeError(
                f"the explorer template must hold {marker} exactly once (posenc's package data is damaged)"
            )
    return template.replace("/*@PLOTLY@*/", _inline_script(plotly)).replace("/*@EXPLORER@*/", _inline_script(script))


def write_explorer(out_dir: str | Path) -> Path:
    """Write ``out_dir/explorer.html`` (about 1.5 MB, self-contained) and return its path.

    The folder is created if needed; an earlier page stays whole until the new one replaces it.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / EXPLORER_FILE
    with replaced_whole(path) as tmp:
        tmp.write_text(explorer_html(), encoding="utf-8")
    return path
