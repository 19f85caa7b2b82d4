"""The explorer page (``posenc.report.explorer``) in headless Chromium, against posenc's own numbers.

The page is opened once with ``?test=JSON``: its test hook computes the panels of every case in
``CASES`` (sinusoid layouts and spacings, RoPE with every scaling posenc has, ALiBi, T5's buckets)
and then moves four controls as a reader would (a value and an input event), recording what the
plots hold before and after. The result comes back through ``--dump-dom``. Every number is
compared with posenc.functional / posenc.analysis to 1e-6 (T5's buckets exactly); the recorded
redraws must hold the numbers of the new settings. Skipped only when Chromium is not installed.
"""

from __future__ import annotations

import html
import json
import math
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest
import torch

import posenc.functional as F
from posenc.analysis import cosine_distance_matrix, dot_matrix, rope_decay_bound
from posenc.report.explorer import EXPLORER_FILE, explorer_html, write_explorer

CHROMIUM = next(
    (
        p
        for p in (shutil.which("chromium"), "/usr/bin/chromium", shutil.which("chromium-browser"))
        if p and Path(p).exists()
    ),
    None,
)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (/usr/bin/chromium)")

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]

TOLERANCE = 1e-6
N, L = 24, 300  # positions of the matrices, distances of the curves

_ROPE = {"scheme": "rope", "positions": N, "curveLength": L, "clockPosition": 7}
_PAIRS16 = [1.0 + 0.25 * i for i in range(8)]  # longrope factors for d = 16
CASES = [
    *(
        {
            "scheme": "sinusoidal",
            "dim": dim,
            "base": base,
            "layout": layout,
            "frequencies": freq,
            "positions": N,
            "curveLength": L,
            "clockPosition": 5,
        }
        for dim, base in ((8, 10000), (30, 100), (64, 10000))
        for layout in ("interleaved", "half")
        for freq in ("paper", "tensor2tensor")
    ),
    {**_ROPE, "dim": 16, "base": 10000, "layout": "half", "scaling": "default"},
    {**_ROPE, "dim": 32, "base": 500000, "layout": "interleaved", "scaling": "default"},
    {**_ROPE, "dim": 16, "base": 10000, "layout": "half", "scaling": "linear", "factor": 4},
    {**_ROPE, "dim": 24, "base": 10000, "layout": "interleaved", "scaling": "ntk", "factor": 8},
    {**_ROPE, "dim": 16, "base": 10000, "layout": "half", "scaling": "dynamic", "factor": 4, "original": 128},
    {**_ROPE, "dim": 16, "base": 10000, "layout": "half", "scaling": "dynamic", "factor": 4, "original": 512},
    {
        **_ROPE,
        "dim": 64,
        "base": 10000,
        "layout": "half",
        "scaling": "yarn",
        "factor": 16,
        "original": 64,
        "betaFast": 32,
        "betaSlow": 1,
    },
    {
        **_ROPE,
        "dim": 32,
        "base": 1000,
        "layout": "interleaved",
        "scaling": "yarn",
        "factor": 4,
        "original": 100,
        "betaFast": 8,
        "betaSlow": 2,
    },
    {
        **_ROPE,
        "dim": 64,
        "base": 500000,
        "layout": "half",
        "scaling": "llama3",
        "factor": 8,
        "original": 64,
        "lowFreq": 1,
        "highFreq": 4,
    },
    {
        **_ROPE,
        "dim": 32,
        "base": 10000,
        "layout": "half",
        "scaling": "llama3",
        "factor": 8,
        "original": 128,
        "lowFreq": 1,
        "highFreq": 1,
    },
    {
        **_ROPE,
        "dim": 16,
        "base": 10000,
        "layout": "half",
        "scaling": "longrope",
        "factor": 8,
        "original": 128,
        "shortFactor": [1.0] * 8,
        "longFactor": _PAIRS16,
    },
    {
        **_ROPE,
        "dim": 16,
        "base": 10000,
        "layout": "interleaved",
        "scaling": "longrope",
        "factor": 8,
        "original": 512,
        "shortFactor": [1.5] * 8,
        "longFactor": _PAIRS16,
    },
    {**_ROPE, "dim": 32, "base": 10000, "layout": "half", "scaling": "proportional", "factor": 2, "partial": 0.25},
    # a long curve is drawn at every 3rd distance (9000 / 4096 rounded up), and dynamic scales past 2048
    {
        **_ROPE,
        "dim": 8,
        "base": 10000,
        "layout": "half",
        "scaling": "dynamic",
        "factor": 2,
        "original": 2048,
        "curveLength": 9000,
    },
    *(
        {
            "scheme": "alibi",
            "heads": heads,
            "maxBias": max_bias,
            "head": heads - 1,
            "bidirectional": bidi,
            "positions": N,
            "curveLength": L,
        }
        for heads, max_bias in ((8, 8), (12, 8), (6, 4), (1, 8))
        for bidi in (False, True)
    ),
    *(
        {"scheme": "t5", "numBuckets": nb, "maxDistance": md, "bidirectional": bidi, "positions": N, "curveLength": L}
        for nb, md in ((32, 128), (8, 20), (16, 64))
        for bidi in (False, True)
    ),
]

# (control, raw slider value) moved in turn from the page's defaults: rope, d 64, 128 positions, L 2048
ACTIONS = [
    {"id": "positions", "value": 40},
    {"id": "dim", "value": 16},
    {"id": "scaling", "value": "yarn"},
    {"id": "scheme", "value": "sinusoidal"},
]


def _scaling(case: dict) -> dict:
    """The Hugging Face rope_scaling dict that the page builds from its flat settings."""
    kind = case["scaling"]
    params: dict = {"rope_type": kind}
    if kind != "default":
        params["factor"] = case["factor"]
    if kind in ("dynamic", "yarn", "llama3", "longrope"):
        params["original_max_position_embeddings"] = case["original"]
    if kind == "yarn":
        params.update(beta_fast=case["betaFast"], beta_slow=case["betaSlow"])
    if kind == "llama3":
        params.update(low_freq_factor=case["lowFreq"], high_freq_factor=case["highFreq"])
    if kind == "longrope":
        params.update(short_factor=case["shortFactor"], long_factor=case["longFactor"])
    if kind == "proportional":
        params["partial_rotary_factor"] = case["partial"]
    return params


def _rope_rows(n: int | torch.Tensor, inv_freq: torch.Tensor, scale: float, layout: str) -> torch.Tensor:
    """R(p) q for q = (1, 0) in every pair and each position p (``n``: 0..n-1, or a tensor of them):
    apply_rope with rope_cos_sin's tables, [n, r] float64."""
    cos, sin = F.rope_cos_sin(n, inv_freq, layout=layout, attention_scale=scale, dtype=torch.float64)
    q = torch.zeros_like(cos)  # [n, r]
    if layout == "half":
        q[:, : q.shape[1] // 2] = 1.0
    else:
        q[:, 0::2] = 1.0
    return F.apply_rope(q, cos, sin, layout=layout)


def _distances(length: int) -> torch.Tensor:
    """The curve's distances: all of 0..length-1 up to 4096 of them, else every ceil(length / 4096)-th."""
    return torch.arange(0, length, math.ceil(length / 4096))


def _expected(case: dict) -> dict:
    """What posenc computes for each panel of ``case``."""
    n, length = case["positions"], case["curveLength"]
    distances = _distances(length)  # [D]
    if case["scheme"] == "sinusoidal":
        kw = {"base": case["base"], "frequencies": case["frequencies"], "dtype": torch.float64}
        E = F.sinusoidal(n, case["dim"], layout=case["layout"], **kw)  # [n, d]
        plain = F.sinusoidal(n, case["dim"], layout="interleaved", **kw)[case["clockPosition"]]  # [d]
        long = F.sinusoidal(distances, case["dim"], layout=case["layout"], **kw)  # [D, d]
        origin = F.sinusoidal(1, case["dim"], layout=case["layout"], **kw)[0]  # [d]
        return {
            "code": E,
            "dot": dot_matrix(E),
            "cosine": cosine_distance_matrix(E),
            "clock": (plain[0::2], plain[1::2]),
            "curve": [long @ origin],
        }
    if case["scheme"] == "rope":
        inv_freq, scale = F.rope_inv_freq(case["dim"], base=case["base"], scaling=_scaling(case), seq_len=length)
        E = _rope_rows(n, inv_freq, scale, case["layout"])  # [n, r]
        long = _rope_rows(distances, inv_freq, scale, case["layout"])  # [D, r]; distances[0] = 0
        cos, sin = F.rope_cos_sin(n, inv_freq, layout="interleaved", dtype=torch.float64)
        pairs = inv_freq.shape[0]
        curve = [long @ long[0] / pairs, rope_decay_bound(inv_freq, distances)]
        if case["scaling"] != "default":
            plain_freq, _ = F.rope_inv_freq(case["dim"], base=case["base"])
            plain = _rope_rows(distances, plain_freq, 1.0, case["layout"])
            curve.append(plain @ plain[0] / pairs)
        p = case["clockPosition"]
        return {
            "code": E,
            "dot": dot_matrix(E),
            "cosine": cosine_distance_matrix(E),
            "clock": (sin[p, 0::2], cos[p, 0::2]),
            "curve": curve,
            "inv_freq": inv_freq,
            "scale": scale,
        }
    if case["scheme"] == "alibi":
        slopes = F.alibi_slopes(case["heads"], max_bias=case["maxBias"])
        bias = F.alibi_bias(slopes, torch.arange(n), torch.arange(n), bidirectional=case["bidirectional"])  # [h, n, n]
        lines = F.alibi_bias(slopes, distances, torch.zeros(1, dtype=torch.long), bidirectional=case["bidirectional"])[
            :, :, 0
        ]  # [h, D]
        matrix = bias[case["head"]]  # [n, n]; causal: the keys after the query are masked in the page
        if not case["bidirectional"]:
            matrix = matrix.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), math.nan)
        return {"code": bias[:, :, 0], "dot": matrix, "cosine": None, "clock": None, "curve": list(lines)}
    relative = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # [q, k]: key minus query
    reach = min(length, 2 * case["maxDistance"])  # the curve's range, as posenc.analysis.t5_bucket_map
    kw = {
        "bidirectional": case["bidirectional"],
        "num_buckets": case["numBuckets"],
        "max_distance": case["maxDistance"],
    }
    return {
        "code": F.t5_relative_bucket(relative, **kw),
        "dot": None,
        "cosine": None,
        "clock": None,
        "curve": [F.t5_relative_bucket(torch.arange(-reach, reach + 1), **kw)],
    }


def _error(got, want: torch.Tensor) -> float:
    """Largest difference between the page's numbers (JSON: null for a masked cell) and posenc's (NaN there)."""
    got = torch.tensor(json.loads(json.dumps(got).replace("null", "NaN")), dtype=torch.float64)
    want = want.to(torch.float64)
    assert got.shape == want.shape, f"the page gives shape {tuple(got.shape)}, posenc {tuple(want.shape)}"
    assert torch.equal(got.isnan(), want.isnan()), "the page masks other cells than posenc's NaNs"
    return (got - want).nan_to_num(0.0).abs().max().item()


class _Sources(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.sources += [v for k, v in attrs if k in ("src", "href") and v and tag != "a"]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("explorer")
    path = write_explorer(root / "site")
    spec = json.dumps({"cases": CASES, "actions": ACTIONS}, separators=(",", ":"))
    result = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={root / 'profile'}",
            "--virtual-time-budget=30000",
            "--dump-dom",
            f"{path.as_uri()}?test={quote(spec)}",
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    dom = result.stdout.decode("utf-8", "replace")
    found = re.search(r'<pre id="test-output">(.*?)</pre>', dom, re.S)
    assert found and found.group(1), f"the page's test hook wrote nothing; stderr: {result.stderr.decode()[-2000:]}"
    return {"path": path, "out": json.loads(html.unescape(found.group(1))), "dom": dom}


@pytest.mark.browser
@needs_chromium
@pytest.mark.parametrize(
    "index",
    range(len(CASES)),
    ids=[
        f"{c['scheme']}-{c.get('scaling') or c.get('layout') or ('bidirectional' if c['bidirectional'] else 'causal')}-{i}"
        for i, c in enumerate(CASES)
    ],
)
def test_page_numbers_equal_posenc(page, index):
    """Every panel of every case equals posenc's numbers to 1e-6 (T5's buckets exactly)."""
    case, got, want = CASES[index], page["out"]["cases"][index], _expected(CASES[index])
    assert "error" not in got, got.get("error")
    for panel in ("code", "dot", "cosine"):
        if want[panel] is None:
            assert got[panel] is None, f"{panel} drawn for {case['scheme']}"
        else:
            assert _error(got[panel], want[panel]) <= TOLERANCE, panel
    if want["clock"] is None:
        assert got["clock"] is None
    else:
        pairs = got["clock"]["pairs"]
        assert pairs == sorted(set(pairs)) and pairs[0] == 0 and pairs[-1] == want["clock"][0].shape[0] - 1
        assert _error(got["clock"]["sin"], want["clock"][0][pairs]) <= TOLERANCE
        assert _error(got["clock"]["cos"], want["clock"][1][pairs]) <= TOLERANCE
    assert len(got["curve"]) == len(want["curve"])
    for line, expected in zip(got["curve"], want["curve"]):
        assert _error(line, expected) <= TOLERANCE
    if case["scheme"] == "t5":
        assert _error(got["code"], want["code"]) == 0 and _error(got["curve"][0], want["curve"][0]) == 0
    if case["scheme"] == "rope":
        assert _error(got["invFreq"]["invFreq"], want["inv_freq"]) <= 1e-12
        assert math.isclose(got["invFreq"]["attentionScale"], want["scale"], rel_tol=1e-12)


def test_the_cases_cover_every_scaling():
    from posenc.functional.rope_scaling import ROPE_SCALINGS

    assert {c["scaling"] for c in CASES if c["scheme"] == "rope"} == set(ROPE_SCALINGS)


@pytest.mark.browser
@needs_chromium
def test_moving_a_control_redraws_with_the_new_numbers(page):
    """Each control moved in turn redraws the heatmap (and the curve) with posenc's numbers for the
    new settings: positions 128 -> 40, d 64 -> 16, scaling default -> yarn, scheme rope -> sinusoidal."""
    actions = page["out"]["actions"]
    assert [a["id"] for a in actions] == [a["id"] for a in ACTIONS]
    base = {
        "scheme": "rope",
        "dim": 64,
        "base": 10000,
        "layout": "half",
        "scaling": "default",
        "positions": 128,
        "factor": 4,
        "original": 256,
        "betaFast": 32,
        "betaSlow": 1,
    }
    for action, change in zip(actions, [{"positions": 40}, {"dim": 16}, {"scaling": "yarn"}, {"scheme": "sinusoidal"}]):
        assert action["after"]["draws"] > action["before"]["draws"]
        assert action["after"]["code"] != action["before"]["code"], f"moving {action['id']} left the heatmap as it was"
        before = dict(base)
        base.update(change)
        assert action["state"][action["id"]] == change[action["id"]]
        for settings, drawn in ((before, action["before"]["code"]), (base, action["after"]["code"])):
            n = settings["positions"]
            if settings["scheme"] == "rope":
                inv_freq, scale = F.rope_inv_freq(
                    settings["dim"], base=settings["base"], scaling=_scaling(settings), seq_len=2048
                )
                want = _rope_rows(n, inv_freq, scale, settings["layout"])
            else:
                want = F.sinusoidal(n, settings["dim"], base=settings["base"], layout="half", dtype=torch.float64)
            assert _error(drawn, want) <= TOLERANCE
    assert actions[2]["after"]["curve"][0] != actions[2]["before"]["curve"][0]  # yarn's curve is not default's


@pytest.mark.browser
@needs_chromium
def test_page_is_self_contained(page):
    """No file or address is loaded: both scripts are inline, and the only link is the atlas beside it."""
    text = page["path"].read_text(encoding="utf-8")
    parser = _Sources()
    parser.feed(text)
    assert parser.sources == []
    assert re.findall(r'<a href="([^"]+)"', text.split("<script>")[0]) == ["index.html"]
    assert text.count("<script>") == 2 and "<script src" not in text
    assert page["path"].name == EXPLORER_FILE


def test_plotly_license_ships_beside_the_bundle():
    from importlib import resources

    assets = resources.files("posenc.report").joinpath("assets")
    assert "MIT License" in assets.joinpath("plotly-LICENSE.txt").read_text(encoding="utf-8")
    assert (
        "plotly.js (cartesian - minified)"
        in assets.joinpath("plotly-cartesian.min.js").read_text(encoding="utf-8")[:200]
    )


def test_inlined_scripts_cannot_end_early():
    assert explorer_html().count("</script>") == 2


@pytest.mark.slow
def test_posenc_report_writes_and_links_the_explorer(tmp_path):
    from posenc.report import build_report

    summary = build_report(tmp_path / "site", schemes=["none"])
    assert (tmp_path / "site" / EXPLORER_FILE).read_text(encoding="utf-8") == explorer_html()
    assert f'href="{EXPLORER_FILE}"' in summary.path.read_text(encoding="utf-8")
