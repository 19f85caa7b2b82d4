"""The explorer page (``posenc.report.explorer``) in headless Chromium, against posenc's own numbers.

The page is opened with ``?test=JSON``. First run: its test hook computes the panels of every case
in ``CASES`` (sinusoid layouts and spacings, RoPE with every scaling posenc has, ALiBi, T5's
buckets) and moves four controls as a reader would, recording what the plots hold before and
after; every number is compared with posenc.functional / posenc.analysis to 1e-6 (T5's buckets
exactly). Second run (``session``): every control is set by typing into its number box (``TYPED``:
exact values such as 500000 and 32768, the arrow keys' steps, and values out of range or not
numbers, which must be shown as errors and change nothing), configs are pasted (``PASTED``: flat
and transformers 5 nested rope dicts, partial rotary, bad JSON, unknown scaling types) and every
preset is loaded; the frequencies, attention factors, shown tables, ALiBi slopes and T5 buckets
are compared with posenc (``rope_inv_freq``, ``rope_from_config``...) at float64 precision, the
right axis's ticks must be round, and the console must stay silent. The result comes back through
``--dump-dom``. Skipped only when Chromium is not installed.
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

import posenc
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


# ---------------------------------------------------------------- typing, presets and pasted configs
#: float64 agreement: the page's frequencies and attention factors against posenc's, relative
#: (a few units in the last place: Math.pow and torch.pow may round differently).
REL = 1e-15


def _type(control: str, text: str) -> dict:
    return {"do": "type", "id": control, "text": text}


def _pick(control: str, value) -> dict:
    return {"do": "check" if isinstance(value, bool) else "select", "id": control, "value": value}


def _rope(rotated: int, base: float, scaling: dict | None, length: int) -> dict:
    return {"kind": "rope", "rotated": rotated, "base": base, "scaling": scaling, "length": length}


_LLAMA3 = {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}
_YARN = {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 32768, "beta_fast": 32, "beta_slow": 1}


def _generated_long(factor: float, pairs: int) -> list[float]:
    """The page's own longrope lists (no preset): short all 1, long rising from 1 to factor."""
    return [1 + ((factor - 1) * i) / max(pairs - 1, 1) for i in range(pairs)]


#: (step, what posenc computes for the page's settings after it, or None) from the page's defaults
#: (rope, d 64, base 10000, L 2048). "error: why" steps must be refused with that reason, shown
#: beside the box, and leave the settings as they were.
TYPED = [
    (_type("base", "500000"), _rope(64, 500000, None, 2048)),
    (_type("curveLength", "2048"), _rope(64, 500000, None, 2048)),
    (_type("curveLength", "8192"), _rope(64, 500000, None, 8192)),
    (_type("curveLength", "32768"), _rope(64, 500000, None, 32768)),
    ({"do": "step", "id": "curveLength", "by": 1}, None),  # the arrow keys: the next round stop...
    ({"do": "step", "id": "curveLength", "by": -1}, _rope(64, 500000, None, 32768)),  # ...and back, exactly
    (_pick("scaling", "llama3"), None),
    (_type("dim", "128"), None),
    (_type("factor", "8"), None),
    (_type("original", "8192"), None),
    (_type("lowFreq", "1"), None),
    (_type("highFreq", "4"), _rope(128, 500000, {**_LLAMA3, "original_max_position_embeddings": 8192}, 32768)),
    (_type("original", "2048"), _rope(128, 500000, {**_LLAMA3, "original_max_position_embeddings": 2048}, 32768)),
    (_type("original", "4096"), _rope(128, 500000, {**_LLAMA3, "original_max_position_embeddings": 4096}, 32768)),
    (_pick("scaling", "yarn"), None),
    (_type("factor", "4"), None),
    (_type("original", "32768"), None),
    (_type("betaFast", "32"), None),
    (_type("betaSlow", "1"), None),
    (_type("curveLength", "131072"), _rope(128, 500000, _YARN, 131072)),
    (_type("mscale", "1"), None),
    (_type("mscaleAllDim", "0.707"), _rope(128, 500000, {**_YARN, "mscale": 1, "mscale_all_dim": 0.707}, 131072)),
    (
        _pick("truncate", False),
        _rope(128, 500000, {**_YARN, "mscale": 1, "mscale_all_dim": 0.707, "truncate": False}, 131072),
    ),
    (_type("attentionFactor", "1.25"), None),
    (
        _type("betaFast", "16"),
        _rope(
            128,
            500000,
            {
                **_YARN,
                "beta_fast": 16,
                "mscale": 1,
                "mscale_all_dim": 0.707,
                "truncate": False,
                "attention_factor": 1.25,
            },
            131072,
        ),
    ),
    (
        _type("attentionFactor", ""),
        _rope(128, 500000, {**_YARN, "beta_fast": 16, "mscale": 1, "mscale_all_dim": 0.707, "truncate": False}, 131072),
    ),
    (_pick("scaling", "longrope"), None),
    (_type("factor", "16"), None),
    (
        _type("original", "4096"),
        _rope(
            128,
            500000,
            {
                "rope_type": "longrope",
                "factor": 16,
                "original_max_position_embeddings": 4096,
                "short_factor": [1.0] * 64,
                "long_factor": _generated_long(16, 64),
            },
            131072,
        ),
    ),
    (
        _type("curveLength", "4096"),
        _rope(
            128,
            500000,
            {
                "rope_type": "longrope",
                "factor": 16,
                "original_max_position_embeddings": 4096,
                "short_factor": [1.0] * 64,
                "long_factor": _generated_long(16, 64),
            },
            4096,
        ),
    ),
    (_pick("scaling", "dynamic"), None),
    (
        _type("curveLength", "100000"),
        _rope(128, 500000, {"rope_type": "dynamic", "factor": 16, "original_max_position_embeddings": 4096}, 100000),
    ),
    (_pick("scaling", "ntk"), None),
    (_type("factor", "8"), _rope(128, 500000, {"rope_type": "ntk", "factor": 8}, 100000)),
    (_pick("scaling", "linear"), _rope(128, 500000, {"rope_type": "linear", "factor": 8}, 100000)),
    (_type("factor", "-2"), "error: is out of range"),
    (_pick("scaling", "proportional"), None),
    (
        _type("partial", "0.25"),
        _rope(128, 500000, {"rope_type": "proportional", "factor": 8, "partial_rotary_factor": 0.25}, 100000),
    ),
    (_pick("scaling", "default"), _rope(32, 500000, None, 100000)),  # int(128 * 0.25) features rotate
    (_type("partial", "0.5"), _rope(64, 500000, None, 100000)),
    (_type("dim", "10"), _rope(5, 500000, None, 100000)),  # an odd rotated width, as GPT-NeoX's rotary_pct gives
    (_type("dim", "abc"), "error: is not a number"),
    (_type("dim", "7"), "error: is odd"),
    (_type("dim", "1e9"), "error: is out of range"),
    (_type("base", "1"), "error: is out of range"),
    (_type("base", "0x10"), "error: is not a number"),
    (_type("curveLength", "2048.5"), "error: is not a whole number"),
    (_type("positions", "0"), "error: is out of range"),
    (_type("partial", "1.5"), "error: is out of range"),
    (_type("clockPosition", "500"), "error: is out of range"),  # at most positions - 1 = 127
    (_type("dim", "64"), None),
    (_type("partial", "1"), _rope(64, 500000, None, 100000)),
    (_type("positions", "24"), _rope(64, 500000, None, 100000)),
    (_type("clockPosition", "7"), _rope(64, 500000, None, 100000)),
    (_pick("layout", "interleaved"), _rope(64, 500000, None, 100000)),
    (_pick("scheme", "sinusoidal"), None),
    (_type("dim", "30"), None),
    (_type("base", "100"), {"kind": "sinusoidal", "dim": 30, "base": 100, "frequencies": "paper"}),
    (
        _pick("frequencies", "tensor2tensor"),
        {"kind": "sinusoidal", "dim": 30, "base": 100, "frequencies": "tensor2tensor"},
    ),
    (_pick("scheme", "alibi"), None),
    (_type("heads", "12"), None),
    (_type("maxBias", "8"), None),
    (_type("head", "11"), {"kind": "alibi", "heads": 12, "max_bias": 8}),
    (_type("head", "12"), "error: is out of range"),  # heads 0..11
    (_type("heads", "5"), {"kind": "alibi", "heads": 5, "max_bias": 8}),
    (_type("maxBias", "4.5"), {"kind": "alibi", "heads": 5, "max_bias": 4.5}),
    (_pick("scheme", "t5"), None),
    (_type("numBuckets", "32"), None),
    (_type("maxDistance", "128"), {"kind": "t5", "num_buckets": 32, "max_distance": 128, "bidirectional": False}),
    (
        {"do": "step", "id": "maxDistance", "by": 1},
        {"kind": "t5", "num_buckets": 32, "max_distance": 129, "bidirectional": False},
    ),
    (
        {"do": "step", "id": "maxDistance", "by": -1},
        {"kind": "t5", "num_buckets": 32, "max_distance": 128, "bidirectional": False},
    ),
    (
        {"do": "slide", "id": "maxDistance", "value": 112},
        {"kind": "t5", "num_buckets": 32, "max_distance": 112, "bidirectional": False},
    ),
    (_type("maxDistance", "128"), {"kind": "t5", "num_buckets": 32, "max_distance": 128, "bidirectional": False}),
    (_pick("bidirectional", True), {"kind": "t5", "num_buckets": 32, "max_distance": 128, "bidirectional": True}),
    (_type("numBuckets", "16"), {"kind": "t5", "num_buckets": 16, "max_distance": 128, "bidirectional": True}),
    (_type("maxDistance", "4"), "error-page"),  # a setting posenc refuses too: the page says why
]


def _transformers5_gemma3() -> dict:
    """A Gemma 3 text config as transformers 5 writes it: rope_parameters nested per layer type."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.CONFIG_MAPPING["gemma3_text"](
        hidden_size=256,
        num_attention_heads=4,
        head_dim=64,
        num_hidden_layers=6,
        max_position_embeddings=4096,
        rope_scaling={"rope_type": "linear", "factor": 8.0},
    )
    return json.loads(cfg.to_json_string())


#: (pasted text, layer type picked, what the page must do: "read" or a phrase of its error message)
PASTED = [
    (
        json.dumps(
            {
                "rope_theta": 500000.0,
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "max_position_embeddings": 131072,
                "rope_scaling": {
                    "rope_type": "llama3",
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 8192,
                },
            }
        ),
        None,
        "read",
    ),
    (
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 2048,
                "num_attention_heads": 16,
                "max_position_embeddings": 32768,
                "rope_parameters": {
                    "rope_type": "yarn",
                    "rope_theta": 1000000.0,
                    "factor": 4.0,
                    "original_max_position_embeddings": 8192,
                },
            }
        ),
        None,
        "read",
    ),
    (
        json.dumps(
            {"head_dim": 96, "partial_rotary_factor": 0.5, "rope_theta": 10000, "max_position_embeddings": 4096}
        ),
        None,
        "read",
    ),
    (
        json.dumps(
            {
                "model_type": "phi3",
                "hidden_size": 3072,
                "num_attention_heads": 32,
                "max_position_embeddings": 131072,
                "original_max_position_embeddings": 4096,
                "rope_scaling": {
                    "type": "longrope",
                    "short_factor": [1.0] * 48,
                    "long_factor": [1.0 + i / 4 for i in range(48)],
                },
            }
        ),
        None,
        "read",
    ),
    (
        json.dumps(
            {
                "model_type": "gemma3_text",
                "head_dim": 256,
                "rope_theta": 1e6,
                "rope_local_base_freq": 1e4,
                "rope_scaling": {"rope_type": "linear", "factor": 8},
            }
        ),
        "sliding_attention",
        "read",
    ),
    ("TRANSFORMERS5_GEMMA3", "sliding_attention", "read"),
    ("TRANSFORMERS5_GEMMA3", "full_attention", "read"),
    (
        json.dumps(
            {"model_type": "stablelm", "hidden_size": 2560, "num_attention_heads": 32, "max_position_embeddings": 4096}
        ),
        None,
        "read",
    ),
    (
        json.dumps(
            {
                "model_type": "mistral",
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "rope_theta": 1e6,
                "partial_rotary_factor": 0.5,
            }
        ),
        None,
        "read",
    ),  # mistral rotates the whole head
    (
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 1024,
                "num_attention_heads": 8,
                "rope_parameters": {
                    "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                },
            }
        ),
        "full_attention",
        "read",
    ),
    (
        json.dumps(
            {
                "model_type": "phi3",
                "hidden_size": 256,
                "num_attention_heads": 4,
                "max_position_embeddings": 8192,
                "original_max_position_embeddings": 2048,
                "rope_scaling": {"type": "yarn", "short_factor": [1.0] * 32, "long_factor": [4.0] * 32},
            }
        ),
        None,
        "read",
    ),  # Phi-3's class reads the legacy "yarn" as longrope
    (
        json.dumps(
            {
                "model_type": "deepseek_v3",
                "hidden_size": 1024,
                "num_attention_heads": 8,
                "qk_rope_head_dim": 32,
                "rope_interleave": False,
                "max_position_embeddings": 16384,
                "rope_theta": 10000,
                "rope_scaling": {
                    "type": "yarn",
                    "factor": 4,
                    "original_max_position_embeddings": 4096,
                    "mscale": 0.707,
                    "mscale_all_dim": 1.0,
                },
            }
        ),
        None,
        "read",
    ),
    (
        json.dumps(
            {
                "model_type": "qwen3",
                "hidden_size": 2048,
                "num_attention_heads": 16,
                "rope_scaling": None,
                "rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e6},
                "max_position_embeddings": 40960,
            }
        ),
        None,
        "read",
    ),
    (
        json.dumps({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2.0, "foo": 1}}),
        None,
        "read, foo dropped",
    ),
    ("{'rope_theta': 10000, 'head_dim': 64}", None, "not valid JSON"),
    ("alert(document.title)", None, "not valid JSON"),
    ("[1, 2]", None, "one JSON object"),
    (
        json.dumps({"head_dim": 64, "rope_scaling": {"rope_type": "superrope", "factor": 2}}),
        None,
        "unknown RoPE scaling type",
    ),
    (
        json.dumps({"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": 2}}),
        None,
        "needs original_max_position_embeddings",
    ),
    (
        json.dumps({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": -2}}),
        None,
        "'factor' must be a positive number",
    ),
    (json.dumps({"rope_theta": 10000}), None, "needs 'head_dim'"),
    (
        json.dumps({"head_dim": 64, "rope_scaling": {"rope_type": "dynamic", "factor": 2}}),
        None,
        "max_position_embeddings",
    ),
    (
        json.dumps(
            {
                "head_dim": 64,
                "max_position_embeddings": 8192,
                "rope_scaling": {
                    "type": "longrope",
                    "short_factor": [1.0] * 4,
                    "long_factor": [2.0] * 4,
                    "original_max_position_embeddings": 4096,
                },
            }
        ),
        None,
        "must have d/2 = 32 entries",
    ),
    (json.dumps({"head_dim": 63}), None, "odd"),
    (
        json.dumps(
            {
                "model_type": "qwen2_vl",
                "hidden_size": 1536,
                "num_attention_heads": 12,
                "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
            }
        ),
        None,
        "posenc.rope_from_config",
    ),
]


def _pasted_text(text: str) -> str:
    return json.dumps(_transformers5_gemma3()) if text == "TRANSFORMERS5_GEMMA3" else text


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> dict:
    """One page: every TYPED step, then every PASTED config, then every preset; and the console."""
    root = tmp_path_factory.mktemp("explorer-typed")
    path = write_explorer(root / "site")
    steps = [step for step, _ in TYPED] + [
        {"do": "paste", "text": _pasted_text(text), **({"layerType": layer} if layer else {})}
        for text, layer, _ in PASTED
    ]
    spec = json.dumps({"steps": steps, "presets": True}, separators=(",", ":"))
    result = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={root / 'profile'}",
            "--enable-logging=stderr",
            "--window-size=1400,1000",
            "--v=0",
            "--virtual-time-budget=60000",
            "--dump-dom",
            f"{path.as_uri()}?test={quote(spec)}",
        ],
        capture_output=True,
        timeout=180,
        check=False,
    )
    found = re.search(r'<pre id="test-output">(.*?)</pre>', result.stdout.decode("utf-8", "replace"), re.S)
    stderr = result.stderr.decode("utf-8", "replace")
    assert found and found.group(1), f"the page's test hook wrote nothing; stderr: {stderr[-2000:]}"
    out = json.loads(html.unescape(found.group(1)))
    return {
        "typed": out["steps"][: len(TYPED)],
        "pasted": out["steps"][len(TYPED) :],
        "presets": out["presets"],
        "console": [line for line in stderr.splitlines() if ":CONSOLE" in line],
    }


def _close(got, want: torch.Tensor) -> float:
    """Largest relative difference of the page's numbers from posenc's (zeros must be zeros)."""
    got = torch.tensor(got, dtype=torch.float64)
    assert got.shape == want.shape, f"the page gives {tuple(got.shape)} numbers, posenc {tuple(want.shape)}"
    assert torch.equal(got == 0, want == 0)
    return ((got - want).abs() / want.abs().clamp_min(1e-300)).max().item()


def _table(text: str) -> list[list[str]]:
    """The rows of the page's table of every number (the header line dropped)."""
    return [line.split() for line in text.splitlines()[1:]]


def _check_rope_shown(shown: dict, inv_freq: torch.Tensor, scale: float) -> None:
    """The page's frequencies, attention factor and shown table equal posenc's at float64 precision."""
    freq = shown["frequencies"]
    assert _close(freq["invFreq"], inv_freq) <= REL
    assert freq["attentionScale"] == pytest.approx(scale, rel=REL, abs=0)
    rows = _table(shown["numbers"])
    assert [int(r[0]) for r in rows] == list(range(inv_freq.shape[0]))
    assert _close([float(r[1]) for r in rows], inv_freq) <= REL
    finite = inv_freq > 0
    wavelengths = [float(r[2]) for r, keep in zip(rows, finite.tolist()) if keep]
    assert _close(wavelengths, 2 * math.pi / inv_freq[finite]) <= REL
    assert all(r[2] == "∞" for r, keep in zip(rows, finite.tolist()) if not keep)
    ticks = [float(t.replace("−", "-")) for t in shown["rightTicks"]]
    assert len(ticks) >= 3 and ticks[0] == 0, shown["rightTicks"]
    step = ticks[1]
    assert all(b - a == pytest.approx(step, rel=1e-12) for a, b in zip(ticks, ticks[1:])), shown["rightTicks"]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 9) in (1, 2, 2.5, 5), f"right-axis ticks {shown['rightTicks']} are not round"


@pytest.mark.browser
@needs_chromium
@pytest.mark.parametrize(
    "index", range(len(TYPED)), ids=[f"{i}-{s['id'] if 'id' in s else s['do']}" for i, (s, _) in enumerate(TYPED)]
)
def test_typed_values_are_taken_exactly_and_computed_as_posenc(session, index):
    """Each control set by typing its number (or by the slider's arrow-key step): the settings hold
    exactly what was typed, slider and box agree, and the page's numbers equal posenc's; a value out
    of range or not a number is shown as an error beside the box and changes nothing."""
    (step, want), shown = TYPED[index], session["typed"][index]
    before = session["typed"][index - 1]["state"] if index else None
    if step["do"] == "type":
        control = shown["controls"][step["id"]]
        assert control["entry"] == step["text"]
        if isinstance(want, str) and want.startswith("error: "):
            assert control["error"] and f"{step['text']} {want[7:]}" in control["error"].replace('"', ""), control
            assert shown["state"] == before, "a refused value changed the settings"
            return
        assert control["error"] is None, control["error"]
        expected = None if step["text"] == "" else float(step["text"])
        assert shown["state"][step["id"]] == expected
    if step["do"] == "step":
        assert shown["controls"][step["id"]]["entry"] == str(shown["state"][step["id"]])
    if want == "error-page":
        assert shown["message"], "the page drew settings posenc refuses"
        with pytest.raises(ValueError):
            F.t5_relative_bucket(torch.arange(3), num_buckets=16, max_distance=4, bidirectional=True)
        return
    assert shown["message"] is None, shown["message"]
    if want is None:
        return
    if want["kind"] == "rope":
        assert shown["frequencies"]["rotated"] == want["rotated"]
        inv_freq, scale = F.rope_inv_freq(
            want["rotated"], base=want["base"], scaling=want["scaling"], seq_len=want["length"]
        )
        _check_rope_shown(shown, inv_freq, scale)
        assert shown["state"]["curveLength"] == want["length"]
        angles = shown["clock"]["position"] * inv_freq[shown["clock"]["pairs"]]
        assert _error(shown["clock"]["sin"], torch.sin(angles)) <= 1e-12
        assert _error(shown["clock"]["cos"], torch.cos(angles)) <= 1e-12
        if shown["code"] is not None:  # the heatmap: R(p) q for each position, in the page's pair layout
            want_rows = _rope_rows(shown["state"]["positions"], inv_freq, scale, shown["state"]["layout"])
            assert _error(shown["code"], want_rows) <= 1e-12
    elif want["kind"] == "sinusoidal":
        inv_freq = F.sinusoidal_inv_freq(want["dim"], base=want["base"], frequencies=want["frequencies"])
        assert _close([float(r[1]) for r in _table(shown["numbers"])], inv_freq.to(torch.float64)) <= REL
    elif want["kind"] == "alibi":
        slopes = F.alibi_slopes(want["heads"], max_bias=want["max_bias"])
        assert [float(r[1]) for r in _table(shown["numbers"])] == slopes.tolist()  # float32 values, exactly
    else:
        rows = _table(shown["numbers"])
        relative = torch.tensor([int(r[0]) for r in rows])
        kw = {k: want[k] for k in ("num_buckets", "max_distance", "bidirectional")}
        assert relative.tolist() == list(range(-2 * want["max_distance"], 2 * want["max_distance"] + 1))
        assert [int(r[1]) for r in rows] == F.t5_relative_bucket(relative, **kw).tolist()
        assert shown["state"]["maxDistance"] == want["max_distance"]


@pytest.mark.browser
@needs_chromium
def test_sliders_follow_the_numbers_and_return(session):
    """Typed 500000 and 32768 land on slider stops; the arrow keys leave 32768 and come back to it,
    and T5's max_distance 128 -> 129 -> 128."""
    typed = session["typed"]
    assert typed[0]["controls"]["base"]["entry"] == "500000"
    at = typed[3]["controls"]["curveLength"]["slider"]
    assert typed[4]["state"]["curveLength"] > 32768 and typed[4]["controls"]["curveLength"]["slider"] == at + 1
    assert typed[5]["state"]["curveLength"] == 32768 and typed[5]["controls"]["curveLength"]["slider"] == at
    t5 = [s["state"]["maxDistance"] for s, (step, _) in zip(typed, TYPED) if step.get("id") == "maxDistance"]
    assert t5[:4] == [128, 129, 128, 112] and t5[4] == 128


def _check_config(config: dict, layer_type: str | None, shown: dict) -> None:
    """The page's reading of a config equals posenc.rope_from_config's, at float64 precision."""
    from posenc.config.tables import MODEL_LAYOUTS

    model_type = config.get("model_type")
    if isinstance(config.get("text_config"), dict) and "num_attention_heads" not in config:
        model_type = config["text_config"].get("model_type", model_type)
    layout = None if model_type in MODEL_LAYOUTS else shown["state"]["layout"]
    rope = posenc.rope_from_config(config, layout=layout, layer_type=layer_type)
    state, length = shown["state"], shown["state"]["curveLength"]
    assert (state["dim"], shown["frequencies"]["rotated"], state["base"], state["layout"]) == (
        rope.config.dim,
        rope.config.frequency_dim,
        rope.config.base,
        rope.config.layout,
    )
    _check_rope_shown(shown, rope.inv_freq_at(length), rope.attention_scale)


@pytest.mark.browser
@needs_chromium
@pytest.mark.parametrize(
    "index", range(len(PASTED)), ids=[f"pasted-{i}-{want[:12]}" for i, (_, _, want) in enumerate(PASTED)]
)
def test_pasted_configs_read_as_rope_from_config(session, index):
    """A pasted config.json shows the RoPE posenc.rope_from_config makes of it (rope_scaling or
    rope_parameters, transformers 5's per-layer-type nesting, head_dim or hidden_size /
    num_attention_heads, partial_rotary_factor, max_position_embeddings as the length); bad JSON,
    unknown scaling types and fields posenc refuses get a message in the page."""
    text, layer, want = PASTED[index]
    shown = session["pasted"][index]
    if want.startswith("read, "):  # keys the rope type does not take: dropped, and said so, as posenc does
        dropped = want.split()[1]
        assert f"does not take {dropped}" in shown["config"], shown["config"]
        with pytest.warns(UserWarning, match=f"does not take \\['{dropped}'\\]"):
            _check_config(json.loads(text), layer, shown)
        return
    if want != "read":
        assert shown["config"] and want in shown["config"], shown["config"]
        return
    assert "Read the pasted config" in shown["config"], shown["config"]
    config = json.loads(_pasted_text(text))
    if layer:
        assert layer in shown["layerTypes"]
    assert shown["message"] is None
    _check_config(config, layer, shown)
    if "max_position_embeddings" in config:
        assert shown["state"]["curveLength"] == config["max_position_embeddings"]


def test_posenc_refuses_what_the_page_refuses():
    """The configs the page names as wrong are wrong for posenc too (same reason)."""
    for text, _, want in PASTED:
        if want.startswith("read") or want in ("not valid JSON", "one JSON object", "posenc.rope_from_config"):
            continue
        with pytest.raises(ValueError):
            posenc.rope_from_config(json.loads(text), layout="half")


@pytest.mark.browser
@needs_chromium
def test_every_preset_is_posenc_reading_its_published_config(session):
    """Each preset loads, names its source, and shows what posenc.rope_from_config reads from its config."""
    ids = [p["id"] for p in session["presets"]]
    assert {
        "llama-3.1-8b",
        "qwen2.5-7b-yarn",
        "deepseek-v3",
        "phi-3-mini-128k",
        "gemma-3-4b-local",
        "gemma-3-4b-global",
        "gpt-oss",
    } <= set(ids)
    for shown in session["presets"]:
        assert shown["config"].startswith("Read ") and "source: " in shown["config"], shown["config"]
        assert shown["message"] is None, shown["message"]
        _check_config(shown["presetConfig"], shown["layerType"], shown)
    by_id = {p["id"]: p for p in session["presets"]}
    gemma_local, gemma_global = by_id["gemma-3-4b-local"]["state"], by_id["gemma-3-4b-global"]["state"]
    assert (gemma_local["dim"], gemma_local["base"], gemma_local["scaling"]) == (256, 10000, "default")
    assert (gemma_global["dim"], gemma_global["base"], gemma_global["scaling"], gemma_global["factor"]) == (
        256,
        1e6,
        "linear",
        8,
    )
    phi = by_id["phi-3-mini-128k"]["state"]
    assert (phi["scaling"], len(phi["shortFactor"]), len(phi["longFactor"])) == ("longrope", 48, 48)
    assert by_id["gpt-oss"]["state"]["truncate"] is False and by_id["deepseek-v3"]["state"]["dim"] == 64


@pytest.mark.browser
@needs_chromium
def test_every_preset_label_fits_its_drop_down(session):
    """At 1400 px the closed drop-down shows each preset's whole label (it cut off "DeepSeek-V3 (YaRN
    ×40 on the 64-wide F…"): the label's width plus the arrow's 24 px fits inside the control; the
    status line under it keeps the full name."""
    for shown in session["presets"]:
        assert shown["labelPx"] + 24 <= shown["selectPx"], (shown["label"], shown["labelPx"], shown["selectPx"])
        assert shown["config"].startswith("Read " + shown["label"].split()[0])  # the model the label names


@pytest.mark.browser
@needs_chromium
def test_no_console_messages(session):
    """Typing, presets and pasted configs (bad ones included) log nothing to the console: no errors."""
    assert session["console"] == []


def test_the_page_reads_pasted_text_as_json_only():
    """A pasted config is parsed with JSON.parse and shown with textContent: nothing runs it."""
    from importlib import resources

    script = resources.files("posenc.report").joinpath("assets", "explorer.js").read_text(encoding="utf-8")
    assert "JSON.parse(text)" in script
    for forbidden in ("eval(", "new Function", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"):
        assert forbidden not in script, forbidden


@pytest.mark.browser
@needs_chromium
def test_the_page_fits_a_1400_px_window(session):
    """No step, pasted config or preset (Phi-3's 48-entry lists included) widens the page past the window."""
    for shown in session["typed"] + session["pasted"] + session["presets"]:
        assert shown["overflow"] <= 0, (shown.get("step") or shown.get("id"), shown["overflow"])


@pytest.mark.browser
@needs_chromium
def test_typed_positions_and_clock_redraw(session):
    """Typed positions 24, clock position 7 and the interleaved layout are what the heatmap and clock show."""
    by_step = {(s["step"].get("id"), s["step"].get("text", s["step"].get("value"))): s for s in session["typed"]}
    assert len(by_step[("positions", "24")]["code"]) == 24
    assert by_step[("clockPosition", "7")]["clock"]["position"] == 7
    assert by_step[("layout", "interleaved")]["state"]["layout"] == "interleaved"
